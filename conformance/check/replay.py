"""Replay: drive the implementation (impl.cluster.Cluster) with the actions of a trace and compare, after
every step, the implementation's abstract state with the trace's, on the variables the trace observes.

Two kinds of trace arrive here. An implementation trace (written by `kcm sim` or the cluster itself)
names each step's actor and arguments, so each event maps to one cluster method call. A TLC
counterexample (converted by `kcm check`) names only the action: TLC 2.15 prints no parameters. Its
steps are found by search: every way the implementation can take a step of that name (which broker, which
message, which partition) is tried on a copy of the cluster, and the one whose state matches the trace
is kept. Fused spec actions (FetchRound, TruncationRound) are a fetch sent, handled by the leader and
answered. Time is abstract in the model, so a model's ISR shrink moves the cluster's clock past the lag
limit for the followers it removes, and a model's Tick runs the clock until the request times out.

A trace whose first state already has a controller and topics (a model's InitStable) is reached by
creating the topics and running the cluster to quiescence. Partition names that are not `topic-N` (the
models' "p0") are created as topic "p0", partition 0, and mapped back when states are compared.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.impl.design import REPLICA_LAG_TICKS, load_strategy
from kcm.impl.messages import ACTION_OF, Envelope
from kcm.impl.replica_manager import FOLLOWER, LEADER, REQUEST_TIMEOUT_TICKS
from kcm.impl.sim.cluster import Cluster, message_args
from kcm.impl.sim.simulator import SimConfig
from kcm.spec.design_folder import DesignFolder
from kcm.spec.trace.format import Event, Events, actor_kind, apply_event
from kcm.spec.vocabulary import ACTIONS, NO_LEADER, VARIABLES, Knobs

Step = Callable[[Cluster], object]

# Variables whose lists are sets in the model (TLC counterexamples sort them; the store keeps its order).
_SET_VALUED: Final = frozenset({"isr", "local_isr"})
# Variables keyed by partition at each key position (the others are keyed by broker).
_PARTITION_KEY_AT: Final = {
    "assignment": 0, "leader": 0, "leader_epoch": 0, "isr": 0, "partition_controller_epoch": 0,
    "partition_version": 0, "partition_state": 1, "replica_state": 1, "role": 1, "local_leader_epoch": 1,
    "local_isr": 1, "log": 1, "hw": 1, "hw_checkpoint": 1, "epoch_start_offset": 1,
}
_MESSAGE_ACTIONS: Final = frozenset(ACTION_OF.values())
# What a delivery event adds to the message's fields (cluster._deliver).
_DELIVERY_NOTES: Final = frozenset({"applied", "stopped", "ignored"})
_QUEUE_ACTIONS_OF_BROKERS: Final = frozenset({"ControllerElect", "BrokerReregister"})
# Spec actions that fuse a fetch request, its handling and its answer into one step (spec/tlc/modelcheck.py).
_FUSED: Final = {"FetchRound", "TruncationRound"}
_TOPIC_PARTITION: Final = re.compile(r"^(.+)-(\d+)$")
# Ticks a model's Tick may take in the implementation before the follower's request times out.
_MAX_TICKS: Final = REQUEST_TIMEOUT_TICKS + 1
# Returns to earlier choice points without getting further into the trace before a divergence is reported.
# Counted afresh once the replay gets past the divergence: a long trace resolves one every thousand events or
# so, most in a few returns, and a budget for the whole trace ran out (`kcm sim --seed 3 --steps 950000`).
MAX_BACKTRACKS: Final = 1000
# How far back a divergence may return: to one of the latest choice points, none more than HORIZON events
# back. Each keeps a copy of the cluster and the events since it, so these bound the replay's memory
# whatever the trace's length.
MAX_CHOICES: Final = 32
HORIZON: Final = 2000
# How many events ahead a dropped or duplicated message is looked for among later deliveries.
LOOKAHEAD: Final = 2000


class ReplayError(ValueError):
    """A trace the replay cannot start from: one line for the user."""


@dataclass(frozen=True)
class Divergence:
    seq: int
    action: str
    variable: str  # a dotted path: variable, then keys
    expected: Any
    actual: Any
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "action": self.action, "variable": self.variable, "expected": self.expected,
                "actual": self.actual, "reason": self.reason}


@dataclass
class ReplayReport:
    steps: int = 0
    impl_steps: int = 0
    divergence: Divergence | None = None
    trace_invariant: str | None = None  # the first invariant the trace itself breaks
    trace_invariant_seq: int | None = None
    impl_invariants: list[str] = field(default_factory=list)  # invariants the implementation broke
    seconds: float = 0.0
    searched: bool = False

    @property
    def same_invariant(self) -> bool:
        return self.trace_invariant is not None and self.trace_invariant in self.impl_invariants

    @property
    def verdict(self) -> str:
        if self.divergence is not None:
            return "diverged"
        if self.trace_invariant is not None:
            return "same-invariant" if self.same_invariant else "invariant-not-reproduced"
        return "conforms"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "steps": self.steps,
            "impl_steps": self.impl_steps,
            "divergence": None if self.divergence is None else self.divergence.to_json(),
            "trace_invariant": self.trace_invariant,
            "trace_invariant_seq": self.trace_invariant_seq,
            "impl_invariants": self.impl_invariants,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps / self.seconds, 1) if self.seconds else None,
        }


# -- partition names and state comparison ---------------------------------------------------------------


def impl_partition(name: str) -> tuple[str, int]:
    """The (topic, index) the implementation creates for a trace's partition name."""
    match = _TOPIC_PARTITION.match(name)
    return (match.group(1), int(match.group(2))) if match else (name, 0)


def _renamed(delta: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """A delta with the implementation's partition names replaced by the trace's."""
    if not names:
        return delta
    out = {}
    for variable, value in delta.items():
        at = _PARTITION_KEY_AT.get(variable)
        out[variable] = value if at is None else _rename_at(value, at, names)
    return out


def _rename_at(value: dict[str, Any], depth: int, names: dict[str, str]) -> dict[str, Any]:
    if depth == 0:
        return {names.get(key, key): inner for key, inner in value.items()}
    return {key: _rename_at(inner, depth - 1, names) for key, inner in value.items()}


def _leaves(value: Any, depth: int, path: tuple[str, ...]) -> dict[tuple[str, ...], Any]:
    if depth == 0:
        return {path: value}
    out: dict[tuple[str, ...], Any] = {}
    for key, inner in value.items():
        out.update(_leaves(inner, depth - 1, (*path, key)))
    return out


def _normal(variable: str, value: Any) -> Any:
    return sorted(value) if variable in _SET_VALUED and isinstance(value, list) else value


def differences(expected: dict[str, Any], actual: dict[str, Any], variables: list[str]) -> list[Divergence]:
    """Leaf by leaf, in vocabulary order, where `actual` differs from `expected` (absent = None)."""
    found = []
    for variable in variables:
        depth = VARIABLES[variable]
        want = _leaves(expected[variable], depth, (variable,))
        have = _leaves(actual[variable], depth, (variable,))
        for path in sorted(set(want) | set(have)):
            a, b = _normal(variable, want.get(path)), _normal(variable, have.get(path))
            if a != b:
                found.append(Divergence(-1, "", ".".join(path), a, b))
    return found


# -- the replay -------------------------------------------------------------------------------------------


class _Sink:
    """The cluster's own events not yet folded into its world; copied with the cluster when a step is
    searched for."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Sink:
        # Events are never changed once recorded: a copy of the cluster shares them.
        copied = _Sink()
        copied.events = list(self.events)
        return copied


@dataclass
class _World:
    cluster: Cluster
    sink: _Sink
    state: dict[str, Any]  # the implementation's abstract state, in the trace's partition names
    # The implementation's events, checked as they are folded: a world keeps no history of them.
    checker: InvariantChecker
    folded: int = 0  # how many events are folded into state
    # Variables the folded events changed since the last comparison (None: all, after a snapshot).
    touched: set[str] | None = None

    def fold(self, names: dict[str, str]) -> None:
        for event in self.sink.events:
            apply_event(self.state, {**event, "state": _renamed(event["state"], names)})
            if event.get("full"):
                self.touched = None
            elif self.touched is not None:
                self.touched.update(event["state"])
            self.checker.step(event)
        self.folded += len(self.sink.events)
        self.sink.events.clear()


_DeliveryKey = tuple[int, str, str]


def _delivery_of(event: Event) -> _DeliveryKey | None:
    """The message an implementation event delivers, as receiver, kind and fields; None for other events."""
    args = event["args"]
    if event["action"] not in _MESSAGE_ACTIONS or "from" not in args or ":" not in event["actor"]:
        return None
    fields = {k: v for k, v in args.items() if k not in _DELIVERY_NOTES}
    return _delivery_key(int(event["actor"].partition(":")[2]), event["action"], fields)


class _Window:
    """The events of the trace the replay may still read, by index: from the oldest choice point it may
    return to, up to LOOKAHEAD events past the one it asked for, with the deliveries among them."""

    def __init__(self, events: Iterable[Event]) -> None:
        self._source = iter(events)
        self._events: deque[Event] = deque()
        self._start = 0  # the index of _events[0]
        self._deliveries: dict[_DeliveryKey, deque[int]] = {}

    def get(self, index: int) -> Event | None:
        """The event at `index` (not yet released), None past the trace's end."""
        self._read(index + LOOKAHEAD)
        offset = index - self._start
        return self._events[offset] if offset < len(self._events) else None

    def _read(self, last: int) -> None:
        events = self._events
        while self._start + len(events) <= last:
            event = next(self._source, None)
            if event is None:
                return
            key = _delivery_of(event)
            if key is not None:
                self._deliveries.setdefault(key, deque()).append(self._start + len(events))
            events.append(event)

    def release(self, below: int) -> None:
        """Events before `below` will not be read again."""
        while self._start < below and self._events:
            key = _delivery_of(self._events.popleft())
            if key is not None:
                kept = self._deliveries[key]
                kept.popleft()
                if not kept:
                    del self._deliveries[key]
            self._start += 1

    def later_deliveries(self, key: _DeliveryKey, index: int) -> int:
        """Deliveries of the message after `index`, among those read (LOOKAHEAD events ahead)."""
        return sum(1 for at in self._deliveries.get(key, ()) if at > index)


@dataclass
class _Choice:
    """An event and the implementation steps it may still be, with the worlds before it."""

    index: int
    event: Event
    world: _World
    expected: dict[str, Any]
    steps: list[Step]


def _knobs(init: Event) -> Knobs:
    try:
        return Knobs.from_dict(dict(init["args"].get("knobs", {})))
    except ValueError as err:
        raise ReplayError(f"Init event: args.knobs: {err}") from None


def _brokers(init: Event) -> list[int]:
    """The trace's broker ids: Init's args.brokers, else the brokers its initial state names alive."""
    brokers = init["args"].get("brokers")
    if isinstance(brokers, list) and brokers:
        if not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in brokers) \
                or len(set(brokers)) != len(brokers):
            raise ReplayError("Init event: args.brokers: expected distinct non-negative broker ids")
        return list(brokers)
    alive = init["state"].get("alive", {})
    if not alive:
        raise ReplayError("Init event: args.brokers: expected the broker ids")
    return sorted(int(b) for b in alive)


class Replayer:
    """Replays a trace read twice: once for what it observes (and the invariant it breaks), then step by
    step through a window of its events (_Window); a TraceFile is never held whole."""

    def __init__(self, events: Events, invariant: str | None = None, design: DesignFolder | None = None) -> None:
        """`design`: the design folder whose strategy the implementation runs (the trace's Init names it)."""
        iterator = iter(events)
        init = next(iterator, None)
        if init is None or init["action"] != "Init" or not init.get("full"):
            raise ReplayError("the trace must begin with a full Init event")
        self.events = events
        self.init = init
        self.knobs = _knobs(init)
        made_by = init["args"].get("design")
        if made_by is not None and (design is None or design.name != made_by):
            raise ReplayError(f"the trace was made by the design {made_by!r}: replay it with --design, the folder of "
                              f"that design" + ("" if design is None else f" (not {design.name!r})"))
        self.design = None if design is None else load_strategy(design, self.knobs)
        # The invariant the trace is known to break (TLC's verdict), when the checker cannot see it.
        self.invariant = invariant
        self._survey(itertools.chain([init], iterator))
        self.names: dict[str, str] = {}
        self.expected: dict[str, Any] = {}
        self.window = _Window(())

    def _survey(self, events: Iterable[Event]) -> None:
        """The variables the trace observes, whether any step must be searched for, its length, and (unless
        given) the first invariant it breaks."""
        checker = InvariantChecker(self.knobs.truncation) if self.invariant is None else None
        observed: set[str] = set()
        self.searched = False
        self.violation: Violation | None = None
        self.count = 0
        for self.count, event in enumerate(events, start=1):
            observed.update(event["state"])
            self.searched = self.searched or (self.count > 1 and event["actor"] == "observer")
            if checker is not None and self.violation is None:
                found = checker.step(event)
                self.violation = found[0] if found else None
        self.variables = [v for v in VARIABLES if v in observed]

    def run(self, on_step: Callable[[int], None] | None = None) -> ReplayReport:
        started = time.perf_counter()
        report = ReplayReport(searched=self.searched)
        self._trace_invariant(report)
        self.window = _Window(self.events)
        world = self._start()
        apply_event(self.expected, self.init)
        report.divergence = self._compare(self.init, world)
        if report.divergence is None:
            world, report.divergence = self._follow(world, on_step)
        report.steps = self.count - 1 if report.divergence is None else report.divergence.seq - self.init["seq"]
        report.impl_steps = world.folded
        broken = {v.invariant: None for v in world.checker.report.violations}
        report.impl_invariants = list(broken)
        report.seconds = time.perf_counter() - started
        return report

    def _follow(self, world: _World, on_step: Callable[[int], None] | None) -> tuple[_World, Divergence | None]:
        """Depth first through the steps that match. An ambiguous event (a dropped message among several
        alike, a model step without parameters) is a choice point, returned to when a later step diverges;
        if every choice diverges, the divergence furthest into the trace is reported. A divergence goes
        back first to the latest choice about the same kind of message (backjumping over unrelated
        choices, which would otherwise be retried in every combination)."""
        choices: list[_Choice] = []
        furthest: tuple[_World, Divergence] | None = None
        backtracks = 0
        index = 1
        while (event := self.window.get(index)) is not None:
            steps = self._candidates(world.cluster, event, index)
            before = copy.deepcopy(self.expected) if len(steps) > 1 else {}
            apply_event(self.expected, event)
            choice = _Choice(index, event, world, before, steps)
            while True:
                world, divergence = self._take(choice, event)
                if divergence is None:
                    break
                if furthest is None or divergence.seq > furthest[1].seq:
                    furthest = (world, divergence)
                if not choices or backtracks >= MAX_BACKTRACKS:
                    return furthest
                backtracks += 1
                choice = self._backjump(choices, event["action"])
                event = choice.event
                self.expected = copy.deepcopy(choice.expected)
                apply_event(self.expected, event)
            if furthest is not None and event["seq"] >= furthest[1].seq:
                # Resolved: a later divergence is searched for anew, with the whole budget.
                furthest, backtracks = None, 0
            if choice.steps:
                choices.append(choice)
            index = choice.index + 1
            self._forget(choices, index)
            if on_step is not None:
                on_step(index - 1)
        return world, None

    def _forget(self, choices: list[_Choice], index: int) -> None:
        """Choice points past the horizon are no longer returned to, nor the events before them read."""
        while choices and (len(choices) > MAX_CHOICES or choices[0].index < index - HORIZON):
            choices.pop(0)
        self.window.release(choices[0].index if choices else index)

    def _backjump(self, choices: list[_Choice], action: str) -> _Choice:
        for at in range(len(choices) - 1, -1, -1):
            event = choices[at].event
            if action in (event["action"], event["args"].get("message")):
                del choices[at + 1:]
                break
        return choices.pop()

    def _take(self, choice: _Choice, event: Event) -> tuple[_World, Divergence | None]:
        """The next step of a choice point that matches the trace, or the closest miss."""
        if not choice.steps:
            return choice.world, Divergence(event["seq"], event["action"], "-", None, None,
                                            "the implementation cannot take this step here")
        best: tuple[_World, Divergence] | None = None
        best_count = -1
        while choice.steps:
            step = choice.steps.pop(0)
            # The world before the step stays pristine while other choices remain.
            trial, divergence = self._try(copy.deepcopy(choice.world) if choice.steps else choice.world, step, event)
            if divergence is None:
                return trial, None
            count = len(differences(self.expected, trial.state, self.variables))
            if best is None or count < best_count:
                best, best_count = (trial, divergence), count
        assert best is not None
        return best

    def _trace_invariant(self, report: ReplayReport) -> None:
        if self.invariant is not None:
            report.trace_invariant = self.invariant
        elif self.violation is not None:
            report.trace_invariant, report.trace_invariant_seq = self.violation.invariant, self.violation.seq

    def _start(self) -> _World:
        """A cluster in the trace's first state: fresh, or (a model's InitStable) with its topics created
        and the cluster run to quiescence."""
        sink = _Sink()
        cluster = Cluster(_brokers(self.init), self.knobs, sink, run=f"replay-{self.init['run']}", design=self.design)
        world = _World(cluster, sink, {}, InvariantChecker(self.knobs.truncation))
        assignment: dict[str, list[int]] = self.init["state"].get("assignment", {})
        topics: dict[str, dict[int, tuple[int, ...]]] = {}
        for name, replicas in sorted(assignment.items()):
            topic, index = impl_partition(name)
            topics.setdefault(topic, {})[index] = tuple(replicas)
            if f"{topic}-{index}" != name:
                self.names[f"{topic}-{index}"] = name
        for topic, partitions in topics.items():
            cluster.create_topic(topic, partitions)
        if topics or self.init["state"].get("controller", NO_LEADER) != NO_LEADER:
            cluster.stabilize()
        world.fold(self.names)
        return world

    def _compare(self, event: Event, world: _World) -> Divergence | None:
        """Both states agreed before the step, so only what the event or the implementation changed
        can differ now."""
        variables = self.variables
        if world.touched is not None and not event.get("full"):
            variables = [v for v in variables if v in event["state"] or v in world.touched]
        world.touched = set()
        found = differences(self.expected, world.state, variables)
        if not found:
            return None
        first = found[0]
        return Divergence(event["seq"], event["action"], first.variable, first.expected, first.actual)

    def _try(self, world: _World, step: Step, event: Event) -> tuple[_World, Divergence | None]:
        try:
            step(world.cluster)
        except (KeyError, IndexError, AssertionError, ValueError) as err:
            return world, Divergence(event["seq"], event["action"], "-", None, None,
                                     f"the implementation refused the step: {type(err).__name__} {err}")
        world.fold(self.names)
        return world, self._compare(event, world)

    # -- the implementation steps an event may be -------------------------------------------------------

    def _candidates(self, cluster: Cluster, event: Event, index: int) -> list[Step]:
        action, actor, args = event["action"], event["actor"], event["args"]
        if actor_kind(actor) == "observer":
            return self._searched(cluster, args.get("tla_action", action), action)
        actor_id = int(actor.partition(":")[2]) if ":" in actor else NO_LEADER
        if action in _MESSAGE_ACTIONS and "from" in args:
            return _deliveries(cluster, action, actor_id, args)
        if action in _MESSAGE_ACTIONS:
            # A controller records its own handling of the request, not the request's fields.
            return [_deliver_at(i) for i in _distinct(
                cluster, lambda e: e.dst == actor_id and ACTION_OF[type(e.message)] == action)]
        if ACTIONS[action] == "controller" or action in _QUEUE_ACTIONS_OF_BROKERS:
            return [lambda c: c.process_controller_event(actor_id)]
        if action in ("DropMessage", "DuplicateMessage"):
            method = "drop" if action == "DropMessage" else "duplicate"
            try:
                found = _network_faults(cluster, args)
            except KeyError:
                return []
            # Most likely first: a dropped message is one the trace never delivers afterwards, a
            # duplicated one is delivered again; the others stay as choices to come back to.
            found.sort(key=lambda i: self._later_deliveries(cluster.network.in_flight[i].envelope, index),
                       reverse=action == "DuplicateMessage")
            return [_call(method, i) for i in found]
        return _direct(action, actor_id, args)

    def _later_deliveries(self, envelope: Envelope, index: int) -> int:
        message = envelope.message
        key = _delivery_key(envelope.dst, ACTION_OF[type(message)], {"from": envelope.src, **message_args(message)})
        return self.window.later_deliveries(key, index)

    def _searched(self, cluster: Cluster, tla_action: str, action: str) -> list[Step]:
        """Every way the implementation can take a step the model names without its parameters."""
        live = cluster.live_brokers()
        if tla_action in _FUSED:
            return [_fused(b, p) for b, p in _replicas(cluster, FOLLOWER) if cluster.managers[b].wants_to_fetch(p)]
        if action in _MESSAGE_ACTIONS:
            return [_deliver_at(i) for i in _distinct(cluster, lambda e: ACTION_OF[type(e.message)] == action)]
        if ACTIONS[action] == "controller" or action in _QUEUE_ACTIONS_OF_BROKERS:
            return [_controller_event(b, action) for b in live if cluster.controllers[b].queue]
        searched: dict[str, Callable[[], list[Step]]] = {
            "BrokerCrash": lambda: [_call("crash", b) for b in live],
            "ControllerCrash": lambda: [lambda c: c.crash_controller()],
            "BrokerRestart": lambda: [_call("restart", b) for b in cluster.managers if b not in live],
            "SessionExpire": lambda: [_call("expire_session", b) for b in live],
            "HwCheckpoint": lambda: [_call("checkpoint_hw", b) for b in live],
            "Produce": lambda: [_produce(b, p, -1) for b, p in _replicas(cluster, LEADER)],
            "SendFetch": lambda: [_call("send_fetch", b, p) for b, p in _replicas(cluster, FOLLOWER)
                                  if cluster.managers[b].wants_to_fetch(p)],
            "IsrShrink": lambda: _shrinks(cluster),
            "DropMessage": lambda: [_call("drop", i) for i in _distinct(cluster, lambda e: True)],
            "Tick": lambda: [_ticks(n) for n in range(1, _MAX_TICKS + 1)],
        }
        make = searched.get(action)
        return make() if make is not None else []


def _call(method: str, *args: Any) -> Step:
    return lambda c: getattr(c, method)(*args)


def _produce(broker: int, partition: str, acks: int) -> Step:
    return lambda c: c.produce(broker, partition, acks)


def _deliver_at(index: int) -> Step:
    return lambda c: c.deliver(index)


def _ticks(count: int) -> Step:
    def step(cluster: Cluster) -> None:
        for _ in range(count):
            cluster.tick()
    return step


def _controller_event(broker: int, action: str) -> Step:
    """The broker's controller takes events off its queue until it takes one of this name: the model
    has no step for events that change nothing it observes (an ISR notification queued before it)."""
    def step(cluster: Cluster) -> None:
        for _ in range(len(cluster.controllers[broker].queue)):
            if cluster.process_controller_event(broker)["action"] == action:
                return
        raise ValueError(f"broker {broker}'s controller has no {action} event queued")
    return step


def _replicas(cluster: Cluster, role: str) -> list[tuple[int, str]]:
    return [(b, p) for b in cluster.live_brokers() for p, r in sorted(cluster.managers[b].replicas.items())
            if r.role == role]


def _fused(follower: int, partition: str) -> Step:
    """A fetch (or an epoch query) sent, handled by the leader, and its answer handled."""
    def step(cluster: Cluster) -> None:
        cluster.send_fetch(follower, partition)
        for _ in range(2):
            in_flight = cluster.network.in_flight
            index = max(i for i, m in enumerate(in_flight)
                        if follower in (m.envelope.src, m.envelope.dst)
                        and getattr(m.envelope.message, "partition", None) == partition)
            cluster.deliver(index)
    return step


def _shrinks(cluster: Cluster) -> list[Step]:
    """Model time is abstract: any ISR follower may lag. Each nonempty subset of a leader's followers."""
    steps: list[Step] = []
    for broker, partition in _replicas(cluster, LEADER):
        replica = cluster.managers[broker].replicas[partition]
        followers = [r for r in replica.isr if r != broker]
        for size in range(1, len(followers) + 1):
            steps.extend(_shrink(broker, partition, set(lagging)) for lagging in
                         itertools.combinations(followers, size))
    return steps


def _shrink(broker: int, partition: str, lagging: set[int]) -> Step:
    def step(cluster: Cluster) -> None:
        cluster.now += REPLICA_LAG_TICKS + 1
        replica = cluster.managers[broker].replicas[partition]
        for follower in replica.isr:
            if follower not in lagging:
                replica.last_caught_up[follower] = cluster.now
        cluster.shrink_isr(broker, partition)
    return step


def _deliveries(cluster: Cluster, action: str, dst: int, args: dict[str, Any]) -> list[Step]:
    """The first in-flight message (so the head of its connection) the event describes."""
    for index, flight in enumerate(cluster.network.in_flight):
        envelope = flight.envelope
        if envelope.dst != dst or envelope.src != args.get("from") or ACTION_OF[type(envelope.message)] != action:
            continue
        fields = message_args(envelope.message)
        if all(args.get(key) == value for key, value in fields.items()):
            return [_deliver_at(index)]
    return []


def _network_faults(cluster: Cluster, args: dict[str, Any]) -> list[int]:
    """Every in-flight message the event may name: a trace gives only sender, receiver and kind."""
    wanted = (args["from"], args["to"], args["message"])
    return _distinct(cluster, lambda e: (e.src, e.dst, ACTION_OF[type(e.message)]) == wanted)


def _delivery_key(dst: int, action: str, fields: dict[str, Any]) -> _DeliveryKey:
    return dst, action, json.dumps(fields, sort_keys=True)


def _distinct(cluster: Cluster, wanted: Callable[[Envelope], bool]) -> list[int]:
    """Indexes of the wanted messages in flight, one per distinct message: taking either of two equal
    messages leaves equal worlds."""
    seen: list[Envelope] = []
    found = []
    for index, flight in enumerate(cluster.network.in_flight):
        if wanted(flight.envelope) and flight.envelope not in seen:
            seen.append(flight.envelope)
            found.append(index)
    return found


def _tick(args: dict[str, Any]) -> Step:
    # The simulator's rule (impl.simulator): a rebalance is due every `rebalance_every` ticks, but in a calm
    # phase (Cluster.fair_round), whose ticks say so.
    calm = bool(args.get("calm"))
    rebalance = not calm and int(args["now"]) % SimConfig().rebalance_every == 0
    return lambda c: c.tick(rebalance, calm)


def _assignment(args: dict[str, Any]) -> dict[int, tuple[int, ...]]:
    return {int(i): tuple(r) for i, r in args["assignment"].items()}


def _direct(action: str, actor: int, args: dict[str, Any]) -> list[Step]:
    """The one cluster call an implementation event with its arguments stands for."""
    direct: dict[str, Callable[[], Step]] = {
        "BrokerCrash": lambda: _call("crash", args["broker"]),
        "ControllerCrash": lambda: lambda c: c.crash_controller(),
        "BrokerRestart": lambda: _call("restart", args["broker"]),
        "SessionExpire": lambda: _call("expire_session", args["broker"]),
        "Produce": lambda: _produce(args["broker"], args["partition"], args.get("acks", -1)),
        "SendFetch": lambda: _call("send_fetch", actor, args["partition"]),
        "IsrShrink": lambda: _call("shrink_isr", actor, args["partition"]),
        "HwCheckpoint": lambda: _call("checkpoint_hw", actor),
        "RequestControlledShutdown": lambda: _call("request_controlled_shutdown", actor),
        "Tick": lambda: _tick(args),
        "Quiesce": lambda: _call("quiesce", dict(args["bounds"])),
        "CreateTopic": lambda: _call("create_topic", args["topic"], _assignment(args)),
        "CreatePartitions": lambda: _call("create_partitions", args["topic"], _assignment(args)),
        "DeleteTopic": lambda: _call("delete_topic", args["topic"]),
        "ReassignPartitions": lambda: _call("reassign", {p: tuple(r) for p, r in args["targets"].items()}),
        "PreferredElection": lambda: _call("preferred_election", list(args["partitions"])),
    }
    make = direct.get(action)
    if make is None:
        return []
    try:
        return [make()]
    except (KeyError, TypeError, ValueError):
        return []


def replay(events: Events, invariant: str | None = None,
           on_step: Callable[[int], None] | None = None) -> ReplayReport:
    return Replayer(events, invariant).run(on_step)
