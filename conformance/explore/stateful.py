"""Conformance by hypothesis stateful testing: rule-based state machines drive the implementation through
every operation of the brief, and after every step check all invariants (the incremental checker on the
trace) and the step itself against the model (the Z3 transition relation, `stepcheck.StepValidator`).

Each rule is exactly one command of the scenario language (`kcm.conformance.scenario`), so a failure
shrinks to a list of commands that prints as a scenario file, next to the trace (format v1) it produced.

Brokers and topics live in hypothesis Bundles. A rule whose operation needs, say, a live broker is guarded
by a precondition that one exists; the broker drawn from the bundle is then used if it qualifies, or else
the next one that does in id order, so no drawn example is thrown away and shrinking still moves towards
the lowest ids. Choices among things only the cluster knows (the message to deliver, the follower to fetch)
are an index into the sorted list of candidates, which shrinks towards the first.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Final

from hypothesis import HealthCheck, Phase, Verbosity, settings, target
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.internal.conjecture import providers
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from kcm.conformance.check.coverage import Coverage
from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.conformance.check.validate import StepValidator
from kcm.conformance.explore import danger
from kcm.conformance.scenario.environment import fill_expectations
from kcm.conformance.scenario.language import script
from kcm.impl.replica_manager import FOLLOWER, LEADER, REPLICA_LAG_TICKS, REQUEST_TIMEOUT_TICKS
from kcm.impl.sim.cluster import Cluster
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.vocabulary import INVARIANTS, NO_LEADER, Knobs

ROOT: Final = Path(__file__).resolve().parents[2]
DATABASE: Final = ROOT / ".hypothesis" / "conformance"
MODEL_STEP: Final = "ModelStep"  # the name a step the Z3 model cannot explain is reported under
IMPLEMENTATION_ERROR: Final = "ImplementationError"
MAX_TOPICS: Final = 3
PICK: Final = st.integers(0, 31)

# The explain phase is left out: a failure prints as a scenario, not with hypothesis's notes, and explaining
# a shrunk stateful example costs ten times its shrinking.
PHASES: Final = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
# Bounded for the default test run; `long` for campaigns behind the `long` marker.
settings.register_profile("ci", max_examples=40, stateful_step_count=30, deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                          verbosity=Verbosity.quiet, database=None, phases=PHASES)
settings.register_profile("long", max_examples=2000, stateful_step_count=80, deadline=None,
                          suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                          verbosity=Verbosity.quiet, phases=PHASES)


@dataclass(frozen=True)
class MachineConfig:
    knobs: Knobs = field(default_factory=Knobs)
    brokers: int = 3
    step_check: bool = True
    machine: str = "protocol"  # a key of MACHINES
    # The invariants a violation of fails the example; None: all of them and the model step check.
    targets: frozenset[str] | None = None
    steer: bool = True  # hand the danger scores to hypothesis.target (off: the unsteered baseline)
    # The replication machine's slow links (off: its faults are crashes and the leader changes they cause).
    slow_links: bool = True

    def fails_on(self, name: str) -> bool:
        return self.targets is None or name.split("/")[0] in self.targets


@dataclass
class Found:
    """A shrunk failure: what broke, at which event, and the commands and trace that reproduce it."""

    invariant: str
    message: str
    seq: int
    knobs: Knobs
    commands: list[tuple[str, list[str]]]  # (command, invariants the scenario must expect after it)
    events: list[Event]

    def scenario(self) -> str:
        """The failure as a scenario file, its expectations left empty. A command starting with `#` is a
        fault the network applies from here on, which the file keeps as a comment."""
        lines = [f"# Found by kcm conform: {self.invariant} at event {self.seq}: {self.message}".replace("\n", " "),
                 "# Expected outputs: run the file with KCM_REWRITE=1 to write them again (docs/conformance.md)"]
        for command, expected in self.commands:
            lines.append(command)
            if expected:
                lines.append(f"expect-violation {' '.join(expected)}")
        return script(lines)

    def filled_scenario(self) -> str:
        """The scenario with the expected output of each command."""
        return fill_expectations(self.scenario())

    def write(self, folder: Path, stem: str) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        trace = folder / f"{stem}.jsonl"
        with TraceWriter(trace, validate=True) as writer:
            for event in self.events:
                writer.write(event)
        scenario = folder / f"{stem}.txt"
        scenario.write_text(self.filled_scenario(), encoding="utf-8")
        return scenario, trace


class ConformanceFailure(AssertionError):
    def __init__(self, found: Found) -> None:
        self.found = found
        super().__init__(f"{found.invariant} at event {found.seq}: {found.message}\n\n"
                         f"as a scenario for tests/scenarios/:\n{found.scenario()}")


@dataclass
class Tally:
    """What a campaign did, across every example hypothesis ran (shrinking included)."""

    examples: int = 0
    steps: int = 0  # events checked after Init
    commands: int = 0
    first_failure: int = 0  # the example that failed first (before shrinking); 0: none failed
    observers: list[Callable[[Event], None]] = field(default_factory=list)
    on_example: Callable[[], None] | None = None


class Harness:
    """One cluster with its checkers: runs a command, checks the events it produced, records it."""

    def __init__(self, config: MachineConfig, tally: Tally | None = None) -> None:
        self.config = config
        self.tally = tally or Tally()
        self.events: list[Event] = []
        self.commands: list[tuple[str, list[str]]] = []
        self.checker = InvariantChecker(config.knobs.truncation)
        self.unsafe = not config.knobs.is_safe
        self.seen: set[tuple[str, str]] = set()
        self.tolerated: set[str] = set()
        self.validator: StepValidator | None = None
        self.checked = 0
        self.cluster = Cluster(config.brokers, config.knobs, self.events.append)
        self.run(" ".join([f"cluster brokers={config.brokers}", *config.knobs.settings()]), lambda: None)

    def run(self, command: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as err:  # any crash of the implementation is a finding
            self.commands.append((command, []))
            self._fail(IMPLEMENTATION_ERROR, f"{type(err).__name__}: {err}", len(self.events))
        self.tally.commands += 1
        fresh: list[Violation] = []
        failure: tuple[str, str, int] | None = None
        for event in self.events[self.checked:]:
            for violation in self.checker.step(event):
                fresh.append(violation)
                if failure is None and self.config.fails_on(violation.invariant):
                    failure = (violation.invariant, violation.message, violation.seq)
            if failure is None:
                failure = self._model_step(event)
            for observe in self.tally.observers:
                observe(event)
        self.tally.steps += len(self.events) - self.checked - (1 if self.checked == 0 else 0)
        self.checked = len(self.events)
        self.commands.append((command, self._expected(fresh)))
        if failure is not None:
            self._fail(*failure)

    def _model_step(self, event: Event) -> tuple[str, str, int] | None:
        if not self.config.step_check:
            return None
        if self.validator is None:
            self.validator = StepValidator(event)
            return None
        problem = self.validator.step(event)
        if problem is None or not self.config.fails_on(MODEL_STEP):
            return None
        return MODEL_STEP, f"{problem.action} on {problem.partition or 'the cluster'}: {problem.reason}", problem.seq

    def _expected(self, violations: list[Violation]) -> list[str]:
        """What the scenario runner will want expected after this command: the invariants of violations it
        has not reported before, unless expected once already (and never on a safe cluster)."""
        names: list[str] = []
        for v in violations:
            if (v.invariant, v.message) in self.seen:
                continue
            self.seen.add((v.invariant, v.message))
            base = v.invariant.split("/")[0]
            if self.unsafe and base not in self.tolerated and base not in names:
                names.append(base)
        self.tolerated.update(names)
        return names

    def _fail(self, invariant: str, message: str, seq: int) -> None:
        self.tally.first_failure = self.tally.first_failure or self.tally.examples
        raise ConformanceFailure(Found(invariant, message, seq, self.config.knobs, list(self.commands),
                                       list(self.events)))


def _next_of(wanted: int, candidates: Iterable[int]) -> int:
    """`wanted` if it is a candidate, else the next candidate after it in id order (wrapping around)."""
    ordered = sorted(candidates)
    return next((c for c in ordered if c >= wanted), ordered[0])


def _pick(index: int, candidates: list[Any]) -> Any:
    return candidates[index % len(candidates)]


def _replicas(order: list[int], count: int, brokers: int) -> tuple[int, ...]:
    """The first `count` distinct brokers of a drawn order of ids, folded onto the cluster's brokers."""
    out: list[int] = []
    for r in order:
        b = (r - 1) % brokers + 1
        if b not in out:
            out.append(b)
    return tuple(out[:count])


REPLICAS: Final = st.tuples(st.permutations([1, 2, 3, 4]), st.integers(1, 3))
ACKS: Final = st.sampled_from([-1, 1])


class Machine(RuleBasedStateMachine):
    """What every machine shares: the harness, the cluster's candidates for a rule, the danger scores handed
    to `hypothesis.target`, and a follower's fetch round. Rules live in the subclasses. `machine_class` makes
    one per config."""

    config: ClassVar[MachineConfig] = MachineConfig()
    tally: ClassVar[Tally] = Tally()
    labels: ClassVar[tuple[str, ...]] = danger.LABELS

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(self.config, self.tally)
        self.danger: dict[str, float] = dict.fromkeys(self.labels, 0)
        self.tally.examples += 1
        if self.tally.on_example is not None:
            self.tally.on_example()

    @property
    def cluster(self) -> Cluster:
        return self.h.cluster

    def step(self, command: str, action: Callable[[], object]) -> None:
        self.h.run(command, action)

    def scores(self) -> dict[str, int]:
        return danger.scores(self.cluster)

    def _live(self) -> list[int]:
        return self.cluster.live_brokers()

    def _replicas_in(self, role: str) -> list[tuple[int, str]]:
        return [(b, p) for b in self._live() for p, r in sorted(self.cluster.managers[b].replicas.items())
                if r.role == role]

    def _fetchers(self) -> list[tuple[int, str]]:
        return [(b, p) for b, p in self._replicas_in(FOLLOWER) if self.cluster.managers[b].wants_to_fetch(p)]

    def _queued(self) -> list[int]:
        return [b for b in self._live() if self.cluster.controllers[b].queue]

    def _deliverable(self) -> list[int]:
        """The messages a rule may deliver now: the heads of their connections."""
        return self.cluster.network.ready(self.cluster.now)

    @invariant()
    def measure_danger(self) -> None:
        if self.config.steer:
            self.observe(self.scores())

    def observe(self, scores: dict[str, int]) -> None:
        for label, score in scores.items():
            self.danger[label] = max(self.danger[label], score)

    def teardown(self) -> None:
        # Once per example, the run's peak: hypothesis then mutates the examples that came closest.
        for label, score in self.danger.items():
            target(score, label=label)

    def _send_fetch(self, broker: int, partition: str) -> None:
        self.step(f"fetch broker={broker} partition={partition}",
                   lambda: self.cluster.send_fetch(broker, partition))

    def _fetch_round(self, broker: int, partition: str) -> None:
        """A follower's whole exchange with its leader: the request sent, delivered, and the reply delivered,
        as three commands. Histories like KAFKA-1211 hinge on which follower learned which high watermark;
        drawn one delivery at a time, the dozen steps they need are too rare for search to meet."""
        in_flight = self.cluster.network.in_flight
        before = len(in_flight)
        self._send_fetch(broker, partition)
        if len(in_flight) == before:
            return  # the leader is down: the connection was refused
        leader = in_flight[-1].envelope.dst
        for src, dst in ((broker, leader), (leader, broker)):
            sent = self._last_sent(src, dst)
            if sent is None or sent not in self._deliverable():
                return  # the connection holds an older message, or the leader answered nothing
            self.step(f"deliver index={sent}", partial(self.cluster.deliver, sent))

    def _last_sent(self, src: int, dst: int) -> int | None:
        in_flight = self.cluster.network.in_flight
        return next((i for i in range(len(in_flight) - 1, -1, -1)
                     if (in_flight[i].envelope.src, in_flight[i].envelope.dst) == (src, dst)), None)


class ClusterMachine(Machine):
    """The cluster seen at the operators' grain: admin commands, clients, faults, the clock, and the protocol
    run to quiescence (`stabilize`) as one step. Few rules, so short runs reach deep failure histories."""

    brokers = Bundle("brokers")
    topics = Bundle("topics")

    def __init__(self) -> None:
        super().__init__()
        self.topic_count = 0

    def step(self, command: str, action: Callable[[], object]) -> None:
        """One operation, then the protocol run to quiescence, as an operator sees the cluster between two
        of their commands."""
        self.h.run(command, action)
        self.h.run("stabilize", self.cluster.stabilize)

    def _assignment(self, replicas: tuple[list[int], int]) -> tuple[int, ...]:
        return _replicas(replicas[0], replicas[1], self.config.brokers)

    def _args(self, assignments: dict[int, tuple[int, ...]]) -> str:
        return " ".join(f"{i}={','.join(map(str, r))}" for i, r in sorted(assignments.items()))

    def _partitions_of(self, topic: str) -> list[str]:
        return sorted((p for p in self.cluster.partitions if p.rpartition("-")[0] == topic),
                      key=lambda p: int(p.rpartition("-")[2]))

    def _partition(self, topic: str, index: int) -> str:
        known = self._partitions_of(topic)
        return _pick(index, known) if known else f"{topic}-0"

    def _laggards(self) -> list[tuple[int, str]]:
        now = self.cluster.now
        return [(b, p) for b, p in self._replicas_in(LEADER)
                if self.cluster.managers[b].lagging_followers(p, now)]

    # -- setting up -------------------------------------------------------------------------------------------

    @initialize(target=brokers)
    def all_brokers(self) -> Any:
        return multiple(*range(1, self.config.brokers + 1))

    @initialize(target=topics, layout=st.lists(REPLICAS, min_size=1, max_size=2))
    def first_topic(self, layout: list[tuple[list[int], int]]) -> str:
        return self._create_topic(layout)

    # -- operators --------------------------------------------------------------------------------------------

    @precondition(lambda self: self.topic_count < MAX_TOPICS)
    @rule(target=topics, layout=st.lists(REPLICAS, min_size=1, max_size=2))
    def create_topic(self, layout: list[tuple[list[int], int]]) -> str:
        return self._create_topic(layout)

    def _create_topic(self, layout: list[tuple[list[int], int]]) -> str:
        topic = f"t{self.topic_count}"
        self.topic_count += 1
        assignment = {i: self._assignment(r) for i, r in enumerate(layout)}
        self.step(f"create-topic {topic} {self._args(assignment)}",
                   lambda: self.cluster.create_topic(topic, assignment))
        return topic

    @rule(topic=topics, replicas=REPLICAS)
    def create_partitions(self, topic: str, replicas: tuple[list[int], int]) -> None:
        added = {len(self._partitions_of(topic)): self._assignment(replicas)}
        self.step(f"create-partitions {topic} {self._args(added)}",
                   lambda: self.cluster.create_partitions(topic, added))

    @rule(topic=topics)
    def delete_topic(self, topic: str) -> None:
        self.step(f"delete-topic {topic}", lambda: self.cluster.delete_topic(topic))

    @rule(topic=topics, index=PICK, replicas=REPLICAS)
    def reassign(self, topic: str, index: int, replicas: tuple[list[int], int]) -> None:
        partition = self._partition(topic, index)
        target = self._assignment(replicas)
        self.step(f"reassign {partition}={','.join(map(str, target))}",
                   lambda: self.cluster.reassign({partition: target}))

    @rule(topic=topics, index=PICK)
    def preferred_election(self, topic: str, index: int) -> None:
        partition = self._partition(topic, index)
        self.step(f"preferred-election {partition}", lambda: self.cluster.preferred_election([partition]))

    # -- clients ------------------------------------------------------------------------------------------------

    @precondition(lambda self: self._replicas_in(LEADER))
    @rule(index=PICK, acks=ACKS)
    def produce(self, index: int, acks: int) -> None:
        broker, partition = _pick(index, self._replicas_in(LEADER))
        self.step(f"produce broker={broker} partition={partition} acks={acks}",
                   lambda: self.cluster.produce(broker, partition, acks))

    # -- faults ---------------------------------------------------------------------------------------------------

    @precondition(lambda self: len(self._live()) > 1)
    @rule(broker=brokers)
    def crash(self, broker: int) -> None:
        target = _next_of(broker, self._live())
        self.step(f"crash {target}", lambda: self.cluster.crash(target))

    @precondition(lambda self: len(self._live()) < self.config.brokers)
    @rule(broker=brokers)
    def restart(self, broker: int) -> None:
        target = _next_of(broker, (b for b, m in self.cluster.managers.items() if not m.alive))
        self.step(f"restart {target}", lambda: self.cluster.restart(target))

    @precondition(lambda self: len(self._live()) > 1 and self.cluster.controller_holder() in self._live())
    @rule()
    def crash_controller(self) -> None:
        self.step("crash-controller", self.cluster.crash_controller)

    @precondition(lambda self: self._live())
    @rule(broker=brokers)
    def expire_session(self, broker: int) -> None:
        target = _next_of(broker, self._live())
        self.step(f"expire-session {target}", lambda: self.cluster.expire_session(target))

    @precondition(lambda self: len(self._live()) > 1 and self.cluster.controller_holder() != NO_LEADER)
    @rule(broker=brokers)
    def controlled_shutdown(self, broker: int) -> None:
        target = _next_of(broker, self._live())
        self.step(f"controlled-shutdown {target}", lambda: self.cluster.request_controlled_shutdown(target))

    @precondition(lambda self: self._live())
    @rule(broker=brokers)
    def checkpoint(self, broker: int) -> None:
        target = _next_of(broker, self._live())
        self.step(f"checkpoint {target}", lambda: self.cluster.checkpoint_hw(target))

    @rule()
    def tick(self) -> None:
        self.step("tick", self.cluster.tick)

    @rule()
    def rebalance(self) -> None:
        self.step("rebalance", lambda: self.cluster.tick(rebalance=True))



class ProtocolMachine(ClusterMachine):
    """Every operation of the brief at the protocol's grain besides: each message delivered, dropped or
    duplicated on its own, each controller event and each follower fetch a step of its own, so requests of
    two controllers and replies of two leaders interleave in any order the network allows."""

    def step(self, command: str, action: Callable[[], object]) -> None:
        self.h.run(command, action)

    @rule()
    def stabilize(self) -> None:
        self.step("stabilize", self.cluster.stabilize)

    @precondition(lambda self: self.cluster.network.lossy())
    @rule(index=PICK)
    def drop(self, index: int) -> None:
        message = _pick(index, self.cluster.network.lossy())
        self.step(f"drop {message}", lambda: self.cluster.drop(message))

    @precondition(lambda self: self.cluster.network.in_flight)
    @rule(index=PICK)
    def duplicate(self, index: int) -> None:
        message = index % len(self.cluster.network.in_flight)
        self.step(f"duplicate {message}", lambda: self.cluster.duplicate(message))

    # -- the protocol's own steps ---------------------------------------------------------------------------------

    @precondition(lambda self: self.cluster.network.ready(self.cluster.now))
    @rule(index=PICK)
    def deliver(self, index: int) -> None:
        message = _pick(index, self.cluster.network.ready(self.cluster.now))
        self.step(f"deliver index={message}", lambda: self.cluster.deliver(message))

    @precondition(lambda self: self._queued())
    @rule(broker=ClusterMachine.brokers)
    def process_controller(self, broker: int) -> None:
        target = _next_of(broker, self._queued())
        self.step(f"process-controller {target}", lambda: self.cluster.process_controller_event(target))

    @precondition(lambda self: self._fetchers())
    @rule(index=PICK)
    def fetch(self, index: int) -> None:
        self._send_fetch(*_pick(index, self._fetchers()))

    @precondition(lambda self: self._fetchers())
    @rule(index=PICK)
    def fetch_round(self, index: int) -> None:
        self._fetch_round(*_pick(index, self._fetchers()))

    @precondition(lambda self: self._laggards())
    @rule(index=PICK)
    def shrink_isr(self, index: int) -> None:
        broker, partition = _pick(index, self._laggards())
        self.step(f"shrink-isr broker={broker} partition={partition}",
                   lambda: self.cluster.shrink_isr(broker, partition))


# A whole reaction of the controller is a bounded number of steps; more means the implementation loops.
MAX_CONTROL_STEPS: Final = 10_000
# Fetch rounds a catch-up may take: a truncation, the records, the HW, and some to spare.
MAX_CATCH_UP_ROUNDS: Final = 8
# Replicas of the replication machine's topic: as in the TLC models MCkip101, MCkip279 and MCkip320.
REPLICATION_FACTOR: Final = 3


class ReplicationMachine(Machine):
    """Replication across leader changes, at the grain leader changes happen at. It starts where the TLC
    models of the divergence cases start (their `InitStable`): a settled cluster with one topic of three
    replicas whose controller is the last choice for leader. Clients write to the leader; a follower catches
    up with the leader it knows; a broker other than the controller crashes, restarts, or bounces (crashes
    and restarts before the controller notices). After each fault the controller reacts at once (its events
    processed, its requests delivered), and then the followers either keep up (each fetches, those behind
    catch up) or fall behind (none fetches): slow followers and fast leader changes.

    One network fault besides: a slow link, on which the controller's requests to one broker wait while the
    rest of the cluster goes on; that broker still fetches from the leader it knows and answers fetches. The
    link stays slow until it heals or the broker crashes (its connections close, and the requests waiting on
    them with them). That is how a follower misses leader changes, and how a leader takes a request after
    the state it carries has moved on.

    The controller itself may go too (crashed, or its session expired), and the followers may fall out of
    sync for longer than the lag bound, which the leader answers by shrinking its ISR."""

    labels: ClassVar[tuple[str, ...]] = danger.REPLICATION_LABELS

    def __init__(self) -> None:
        super().__init__()
        self.slow: set[int] = set()
        self.measured = 0

    def scores(self) -> dict[str, int]:
        return danger.replication_scores(self.cluster)

    def observe(self, scores: dict[str, int]) -> None:
        """A ladder's last rung also scores how early it was reached: one fetch short of the divergence,
        an example that got there on its last rule has no room left for that fetch, and hypothesis can only
        mutate an example, not lengthen it past the step budget."""
        self.measured += 1
        for label, score in scores.items():
            if score == danger.TOP_RUNG[label] and self.danger[label] < score:
                self.danger[label] = score + 1 / (1 + self.measured)
            elif score > self.danger[label]:
                self.danger[label] = score

    def _deliverable(self) -> list[int]:
        holder = self.cluster.controller_holder()
        in_flight = self.cluster.network.in_flight
        return [i for i in self.cluster.network.ready(self.cluster.now)
                if in_flight[i].envelope.src != holder or in_flight[i].envelope.dst not in self.slow]

    def _fetchers(self) -> list[tuple[int, str]]:
        """Followers of a live broker: towards one that is down, a follower's fetcher waits to reconnect."""
        managers = self.cluster.managers
        return [(b, p) for b, p in super()._fetchers() if managers[managers[b].replicas[p].leader_id].alive]

    def _waiting(self) -> bool:
        """A live follower still waits for an answer that will never come: its request died with a crash."""
        return any(self.cluster.managers[b].replicas[p].inflight_since is not None
                   for b, p in self._replicas_in(FOLLOWER))

    def _victims(self) -> list[int]:
        holder = self.cluster.controller_holder()
        return [b for b in self._live() if b != holder]

    def _down(self) -> list[int]:
        return [b for b, m in self.cluster.managers.items() if not m.alive]

    def _react(self) -> None:
        """The controller's whole reaction: every queued event, then every message it can deliver (the
        requests, the replies to them, and anything a slow link no longer holds), in order."""
        for _ in range(MAX_CONTROL_STEPS):
            queued = self._queued()
            if queued:
                broker = queued[0]
                self.step(f"process-controller {broker}", partial(self.cluster.process_controller_event, broker))
                continue
            ready = self._deliverable()
            if not ready:
                return
            self.step(f"deliver index={ready[0]}", partial(self.cluster.deliver, ready[0]))
        raise RuntimeError(f"the controller did not settle within {MAX_CONTROL_STEPS} steps")

    def _settle(self) -> None:
        """The followers keep up with the leader change: each fetches once from the leader it knows, in
        broker order, then those behind catch up (where `_react` alone is a change they fall behind on). A
        follower behind a slow link still fetches from its old leader, which may refuse or answer."""
        for broker, partition in self._fetchers():
            if (broker, partition) in self._fetchers():
                self._catch_up(broker, partition)
        for _ in range(MAX_CONTROL_STEPS):
            self._react()
            behind = [(b, p) for b, p in self._fetchers() if self.cluster.behind(b, p)]
            if not behind:
                return
            self._catch_up(*behind[0])
        raise RuntimeError(f"the followers did not settle within {MAX_CONTROL_STEPS} steps")

    def _catch_up(self, broker: int, partition: str) -> None:
        for _ in range(MAX_CATCH_UP_ROUNDS):
            self._fetch_round(broker, partition)
            if (broker, partition) not in self._fetchers() or not self.cluster.behind(broker, partition):
                return

    @initialize()
    def stable_start(self) -> None:
        self.step("stabilize", self.cluster.stabilize)
        holder = self.cluster.controller_holder()
        others = [b for b in range(1, self.config.brokers + 1) if b != holder]
        replicas = (*others[:REPLICATION_FACTOR - 1], holder)
        self.step(f"create-topic t0 0={','.join(map(str, replicas))}",
                  lambda: self.cluster.create_topic("t0", {0: replicas}))
        self.step("stabilize", self.cluster.stabilize)

    @precondition(lambda self: self._replicas_in(LEADER))
    @rule(index=PICK)
    def produce(self, index: int) -> None:
        broker, partition = _pick(index, self._replicas_in(LEADER))
        self.step(f"produce broker={broker} partition={partition}", lambda: self.cluster.produce(broker, partition))

    @precondition(lambda self: self._fetchers())
    @rule(index=PICK)
    def catch_up(self, index: int) -> None:
        """A follower's fetch rounds until it has nothing left to fetch from a leader of its epoch (one
        round at least: a follower behind on leader changes still fetches from the leader it knows)."""
        self._catch_up(*_pick(index, self._fetchers()))

    @precondition(lambda self: self._victims())
    @rule(index=PICK, bounce=st.booleans(), settle=st.booleans())
    def crash(self, index: int, bounce: bool, settle: bool) -> None:
        broker = _pick(index, self._victims())
        self.step(f"crash {broker}", partial(self.cluster.crash, broker))
        self.slow.discard(broker)  # its connections closed, and the requests waiting on them with them
        if bounce:
            self.step(f"restart {broker}", partial(self.cluster.restart, broker))
        self._react()
        if self._waiting():
            self._run_clock(REQUEST_TIMEOUT_TICKS)
        if settle:
            self._settle()

    def _run_clock(self, ticks: int) -> None:
        def run() -> None:
            for _ in range(ticks):
                self.cluster.tick()
        self.step(f"tick {ticks}", run)

    @precondition(lambda self: self._down())
    @rule(index=PICK, settle=st.booleans())
    def restart(self, index: int, settle: bool) -> None:
        broker = _pick(index, self._down())
        self.step(f"restart {broker}", partial(self.cluster.restart, broker))
        self._react()
        if settle:
            self._settle()

    @precondition(lambda self: self.config.slow_links and not self.slow and self._live())
    @rule(index=PICK)
    def slow_link(self, index: int) -> None:
        broker = _pick(index, self._live())
        self.slow.add(broker)
        self.step(f"# from here the controller's requests to broker {broker} wait", lambda: None)

    @precondition(lambda self: self.slow)
    @rule(settle=st.booleans())
    def heal(self, settle: bool) -> None:
        """The slow link recovers: what waited on it arrives, in the order it was sent."""
        broker = self.slow.pop()
        self.step(f"# from here the controller's requests to broker {broker} go through", lambda: None)
        self._react()
        if settle:
            self._settle()

    def _leaders_with_followers(self) -> list[tuple[int, str]]:
        managers = self.cluster.managers
        return [(b, p) for b, p in self._replicas_in(LEADER) if len(managers[b].replicas[p].isr) > 1]

    @precondition(lambda self: self._leaders_with_followers())
    @rule(index=PICK)
    def fall_out_of_sync(self, index: int) -> None:
        """No follower fetches for longer than the lag bound, and a leader drops the laggards from its ISR
        (the controller learns it from the ISR change notification)."""
        broker, partition = _pick(index, self._leaders_with_followers())
        self._run_clock(REPLICA_LAG_TICKS + 1)
        self.step(f"shrink-isr broker={broker} partition={partition}",
                  lambda: self.cluster.shrink_isr(broker, partition))
        self._react()

    @precondition(lambda self: self.cluster.controller_holder() in self._live())
    @rule(expire=st.booleans(), settle=st.booleans())
    def controller_failover(self, expire: bool, settle: bool) -> None:
        """The controller goes, crashed or its session expired (it stays up as a broker), and another
        broker takes over with what it loads from the store."""
        holder = self.cluster.controller_holder()
        if expire:
            self.step(f"expire-session {holder}", lambda: self.cluster.expire_session(holder))
        else:
            self.step("crash-controller", self.cluster.crash_controller)
            self.slow.discard(holder)
        self._react()
        if settle:
            self._settle()


@dataclass(frozen=True)
class KnownBugSearch:
    """A design flaw of the brief that search alone must find, with the budget it is given."""

    name: str
    knobs: Knobs
    invariant: str
    machine: str
    examples: int
    steps: int = 40  # the rules of one example at most
    slow_links: bool = True

    def config(self, steer: bool = True) -> MachineConfig:
        return MachineConfig(self.knobs, machine=self.machine, step_check=False,
                             targets=frozenset({self.invariant}), steer=steer, slow_links=self.slow_links)


KNOWN_BUG_SEARCHES: Final = (
    KnownBugSearch("unclean-protocol", Knobs(unclean_election=True), "NoCommittedDataLoss", "protocol", 4000),
    KnownBugSearch("unclean-cluster", Knobs(unclean_election=True), "NoCommittedDataLoss", "cluster", 3000),
    KnownBugSearch("hw-protocol", Knobs(truncation="hw"), "NoCommittedDataLoss", "protocol", 4000),
    KnownBugSearch("fencing-off-protocol", Knobs(controller_epoch_fencing=False), "StaleControllerFenced",
                   "protocol", 4000),
    KnownBugSearch("kafka2334-kip279-protocol", Knobs(truncation="kip279"), "HighWatermarkMonotonic", "protocol",
                   8000),
    # Fast leader changes alone, the KIP-279 case: with slow links the search meets the stale follower first,
    # which KIP-101 lacks the fencing for as well (the KIP-320 case, the next search).
    KnownBugSearch("kip279-case-kip101-replication", Knobs(truncation="kip101"), "ReplicaLogsAgree", "replication",
                   6000, slow_links=False),
    KnownBugSearch("kip320-case-kip279-replication", Knobs(truncation="kip279"), "ReplicaLogsAgree", "replication",
                   5000),
    # A failover's LeaderAndIsr repeats the leader's epoch with the ISR the new controller loaded; without the
    # check, a leader that has since added a follower back takes the older ISR and commits without it.
    KnownBugSearch("leader-epoch-check-off-replication", Knobs(leader_epoch_check=False), "NoCommittedDataLoss",
                   "replication", 2000),
)


MACHINES: Final[dict[str, type[Machine]]] = {"cluster": ClusterMachine, "protocol": ProtocolMachine,
                                              "replication": ReplicationMachine}


def machine_class(config: MachineConfig, tally: Tally | None = None) -> type[Machine]:
    """The machine of `config.machine` for one design (knobs, cluster size, checks), counting into `tally`."""
    attributes: dict[str, Any] = {"config": config, "tally": tally or Tally()}
    base = MACHINES[config.machine]
    return type(f"{base.__name__}_{_key(config)}", (base,), attributes)


def _key(config: MachineConfig) -> str:
    # The step check is left out: the same design draws the same examples (and shares a database) with it
    # on or off, so the two can be compared.
    fields: tuple[object, ...] = (sorted(config.knobs.to_dict().items()), config.brokers, config.machine,
                                  sorted(config.targets or ()))
    if not config.slow_links:
        fields += ("no slow links",)  # appended only when off, so that every other design keeps its key
    text = repr(fields)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def campaign_settings(profile: str = "ci", examples: int | None = None, steps: int | None = None,
                      config: MachineConfig | None = None, database: bool = False) -> settings:
    """A profile, with the budget overridden and (for `kcm conform`) the example database of this design in
    the repository's ignored .hypothesis/ folder, so that a failure found once replays first next time."""
    base = settings.get_profile(profile)
    changes: dict[str, Any] = {}
    if examples is not None:
        changes["max_examples"] = examples
    if steps is not None:
        changes["stateful_step_count"] = steps
    if database and config is not None:
        changes["database"] = DirectoryBasedExampleDatabase(str(DATABASE / _key(config)))
    return settings(base, **changes)


_CONSTANTS_HOOK: Final = "_get_local_constants"


@contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis now and then draws a literal found in the source of any non-installed module the process
    has loaded; that pool differs between `kcm conform`, a test file and a whole pytest session, so the same
    derandomized budget would explore different examples in each. An empty pool makes it draw the same ones
    everywhere (the hook is internal to hypothesis, hence the guard)."""
    hook = getattr(providers, _CONSTANTS_HOOK, None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if hook is None or cache is None:
        yield
        return
    from hypothesis.internal.constants_ast import Constants

    empty = Constants()
    setattr(providers, _CONSTANTS_HOOK, lambda: empty)
    cache.cache.clear()
    try:
        yield
    finally:
        setattr(providers, _CONSTANTS_HOOK, hook)
        cache.cache.clear()


def run_machine(config: MachineConfig, run_settings: settings, tally: Tally | None = None) -> Found | None:
    """Runs the machine of `config` under `run_settings`; the shrunk failure, or None if every example passed."""
    try:
        with _no_local_constants():
            run_state_machine_as_test(machine_class(config, tally), settings=run_settings)
    except ConformanceFailure as failure:
        return failure.found
    return None


def all_invariants() -> frozenset[str]:
    return frozenset({*INVARIANTS, MODEL_STEP, IMPLEMENTATION_ERROR})


# -- campaigns -----------------------------------------------------------------------------------------------


@dataclass
class Campaign:
    """A campaign's outcome: the examples and steps it ran, what it found, and the coverage it reached."""

    knobs: Knobs
    tally: Tally
    coverage: Coverage
    found: list[Found] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def steps_per_second(self) -> float:
        return self.tally.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def steps_per_cpu_second(self) -> float:
        """The rate on a core of its own, whatever else the machine was doing."""
        return self.tally.steps / self.cpu_seconds if self.cpu_seconds > 0 else 0.0


def run_campaign(knobs: Knobs, examples: int, steps: int, *, machines: tuple[str, ...] = tuple(MACHINES),
                 step_check: bool = True, database: bool = True, brokers: int = 3,
                 on_example: Callable[[], None] | None = None) -> Campaign:
    """Each machine in turn for its share of `examples`. A failure ends hypothesis's run; the campaign then
    goes on with the budget left, no longer failing on what it already found, so one campaign can report
    several invariants broken."""
    coverage = Coverage()
    tally = Tally(observers=[coverage.observe], on_example=on_example)
    campaign = Campaign(knobs, tally, coverage)
    targets = set(all_invariants())
    started, cpu = time.perf_counter(), time.process_time()
    for index, machine in enumerate(machines):
        budget = examples // len(machines) + (1 if index < examples % len(machines) else 0)
        while budget > 0 and targets:
            config = MachineConfig(knobs, brokers, step_check, machine, frozenset(targets))
            before = tally.examples
            found = run_machine(config, campaign_settings("ci", budget, steps, config, database), tally)
            budget -= tally.examples - before
            if found is None:
                break
            campaign.found.append(found)
            targets.discard(found.invariant.split("/")[0])
    campaign.seconds = time.perf_counter() - started
    campaign.cpu_seconds = time.process_time() - cpu
    return campaign
