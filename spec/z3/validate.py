"""Step validation: every step (s, s') of a trace must be explained by the Z3 transition relation, that is
by some action with some arguments. Variables the trace does not observe are left free, so partial
traces are checked as far as they go.

The trace's named action (and its actor and arguments) choose the relations to try; an `observer` step
may be any action. Each partition of the trace is checked as a projection onto the one-partition model.
Controller events are summarised as "the store and the controller's state machines change consistently
with some controller decision", the network's delays and losses by taking messages' fields from the
trace's arguments. History the model keeps in ghosts (who led each epoch) is kept here, concretely.

One solver per set of candidate relations holds the relation; each step pushes the observed values and
the arguments, checks, and pops. A step nothing explains is diagnosed with an unsat core over the
relation's labelled conditions.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.spec.states import VALID_PARTITION_TRANSITIONS, VALID_REPLICA_TRANSITIONS
from kcm.spec.trace.format import SYNTHESIZED, Event, Events, apply_event, empty_state
from kcm.spec.vocabulary import ACTIONS, NO_LEADER, VARIABLES, Knobs
from kcm.spec.z3 import tables
from kcm.spec.z3.actions import ERR_NONE, ERR_OTHER, ERR_OUT_OF_RANGE, Effect, Relations
from kcm.spec.z3.fragments import LogGap, brokers_named, init_observations, named_partitions
from kcm.spec.z3.model import NO_EPOCH, ROLE_FOLLOWER, ROLE_LEADER, ROLE_NONE, Config, State
from kcm.spec.z3.solver import Expr, and_all, implies, int_const, or_all, z3

ROLE_CODE: Final = {"leader": ROLE_LEADER, "follower": ROLE_FOLLOWER}
STUTTERS: Final = frozenset({
    "Tick", "DropMessage", "DuplicateMessage", "SendFetch", "OffsetsForLeaderEpoch",
    "DeleteTopic", "ReassignPartitions", "PreferredElection", "Quiesce",
})
CONTEXT_LOADS: Final = frozenset({"ControllerElect", "BrokerReregister"})
# The first pass reads an event in some microseconds: its progress is told every this many events.
SURVEY_STRIDE: Final = 1000
# Trace variables and the leaves they bind.
GLOBAL_VARS: Final = ("controller", "controller_epoch")
BROKER_VARS: Final = ("acting_controller_epoch", "alive", "broker_controller_epoch")


class ValidationError(ValueError):
    """A trace the validator cannot read (unknown brokers, no brokers at all)."""


@dataclass
class Failure:
    seq: int
    action: str
    actor: str
    partition: str
    reason: str
    tried: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "action": self.action, "actor": self.actor, "partition": self.partition,
                "reason": self.reason, "tried": self.tried}


@dataclass
class ValidationReport:
    events: int = 0
    steps: int = 0
    checked: int = 0  # steps that needed the solver (the others changed nothing the named action may not)
    seconds: float = 0.0
    observed: list[str] = field(default_factory=list)
    unobserved: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)
    failure: Failure | None = None  # the first step nothing explains
    failures: list[Failure] = field(default_factory=list)  # every one, when the run goes on after the first
    explained_by: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "events": self.events, "steps": self.steps, "solver_checks": self.checked,
                "seconds": round(self.seconds, 3), "steps_per_second": round(self.steps_per_second, 1),
                "partitions": self.partitions, "observed": self.observed, "unobserved": self.unobserved,
                "explained_by": dict(sorted(self.explained_by.items())),
                "first_unexplained": None if self.failure is None else self.failure.to_json()}


# -- the candidate relations of an event ----------------------------------------------------------------------


def candidates(event: Event, brokers: list[int]) -> list[tuple[str, int | None]]:
    """(relation, broker) pairs that may explain the event; all of them for an observer."""
    action = event["action"]
    kind, _, ident = event["actor"].partition(":")
    args = event["args"]
    if kind == "observer" or action not in ACTIONS:
        return _all_candidates(brokers)
    actor = int(ident) if ident.isdigit() else None
    subject = args.get("broker") if isinstance(args.get("broker"), int) else actor
    if action in STUTTERS:
        return [("Stutter", None)]
    if action in ("CreateTopic", "CreatePartitions"):
        return [("CreateTopic", None)]
    # A step of the environment or a client names its broker in args.broker; a trace that leaves it out (every
    # argument is optional) leaves any broker possible.
    subjects = list(brokers) if subject is None else [subject]
    if action in ("BrokerCrash", "ControllerCrash"):
        return [("BrokerCrash", b) for b in subjects]
    if action in ("BrokerRestart", "SessionExpire", "Produce"):
        return [(action, b) for b in subjects]
    if action in CONTEXT_LOADS:
        return [("ControllerElect", actor)]
    if ACTIONS[action] == "controller":
        return [("ControllerDecision", actor)]
    if action in ("LeaderAndIsr", "UpdateMetadata", "StopReplica", "Fetch", "FetchResponse",
                  "OffsetsForLeaderEpochResponse", "IsrShrink", "HwCheckpoint", "ControlledShutdownResponse",
                  "RequestControlledShutdown"):
        return [(action, actor)]
    return [("Stutter", None)]


def _all_candidates(brokers: list[int]) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = [("Stutter", None), ("CreateTopic", None)]
    for b in brokers:
        out += [(name, b) for name in (
            "BrokerCrash", "BrokerRestart", "SessionExpire", "ControllerElect", "ControllerDecision", "LeaderAndIsr",
            "UpdateMetadata", "StopReplica", "Produce", "Fetch", "FetchResponse", "OffsetsForLeaderEpochResponse",
            "IsrShrink", "HwCheckpoint", "ControlledShutdownResponse", "RequestControlledShutdown")]
    return out


# -- the encoding side ------------------------------------------------------------------------------------------


@dataclass
class _Check:
    """The solver holding one set of candidate relations, and what it needs bound."""

    solver: Expr
    effects: list[Effect]
    selectors: list[Expr]
    reads: frozenset[str]
    writes: frozenset[str]


class Encoding:
    def __init__(self, knobs: Knobs, brokers: tuple[int, ...]) -> None:
        self.cfg = Config(brokers=len(brokers), broker_ids=brokers, knobs=knobs, logs="length", validation=True,
                          machines=True, history="none")
        self.s = State(self.cfg, "pre.")
        self.t = State(self.cfg, "post.")
        self.kept = {b: int_const(f"kept.{b}") for b in self.cfg.ids}
        self.rel = Relations(self.cfg, self.s, self.t, tag="", kept=self.kept)
        self._effects: dict[tuple[str, int | None], Effect] = {}
        self._reads: dict[tuple[str, int | None], frozenset[str]] = {}
        self._checks: dict[tuple[tuple[str, int | None], ...], _Check] = {}
        self._eq_pre: dict[tuple[str, int | bool], Expr] = {}
        self._eq_post: dict[tuple[str, int | bool], Expr] = {}
        self._eq_param: dict[tuple[int, int | bool], Expr] = {}
        self.verdicts: dict[Any, bool] = {}

    def effect(self, name: str, broker: int | None) -> Effect:
        key = (name, broker)
        effect = self._effects.get(key)
        if effect is None:
            self.s.accessed, self.t.accessed = set(), set()
            effect = self._build(name, broker)
            self._reads[key] = frozenset(self.s.accessed | self.t.accessed)
            self.s.accessed = self.t.accessed = None
            self._effects[key] = effect
        return effect

    def _build(self, name: str, b: int | None) -> Effect:
        rel = self.rel
        if name == "Stutter":
            return rel.stutter()
        if name == "CreateTopic":
            return rel.create_topic()
        assert b is not None
        builders: dict[str, Callable[[int], Effect]] = {
            "BrokerCrash": rel.broker_crash, "BrokerRestart": rel.broker_restart, "SessionExpire": rel.session_expire,
            "ControllerElect": rel.controller_elect_observed, "ControllerDecision": rel.controller_decision,
            "LeaderAndIsr": rel.leader_and_isr, "UpdateMetadata": rel.update_metadata, "StopReplica": rel.stop_replica,
            "Produce": rel.produce, "Fetch": rel.fetch, "FetchResponse": rel.fetch_response,
            "OffsetsForLeaderEpochResponse": rel.offsets_for_leader_epoch_response, "IsrShrink": rel.isr_shrink,
            "HwCheckpoint": rel.hw_checkpoint, "ControlledShutdownResponse": rel.controlled_shutdown_response,
            "RequestControlledShutdown": lambda b: rel.controlled_shutdown_response(b, "RequestControlledShutdown"),
        }
        return builders[name](b)

    def check_for(self, cands: list[tuple[str, int | None]]) -> _Check:
        key = tuple(cands)
        found = self._checks.get(key)
        if found is not None:
            return found
        effects = [self.effect(n, b) for n, b in cands]
        solver = z3.Solver()
        # measured: without auto-configuration and relevancy propagation, the many small checks of a
        # trace run about a third faster
        solver.set("auto_config", False)
        solver.set("smt.relevancy", 0)
        selectors = [z3.Bool(f"take.{i}") for i in range(len(effects))]
        reads: set[str] = set().union(*(self._reads[c] for c in cands))
        writes: set[str] = set().union(*(e.updates for e in effects))
        for sel, effect in zip(selectors, effects, strict=True):
            solver.add(implies(sel, self.formula(effect, sorted(writes - set(effect.updates)))))
        solver.add(or_all(selectors))
        check = _Check(solver, effects, selectors, frozenset(reads), frozenset(writes))
        self._checks[key] = check
        return check

    def formula(self, effect: Effect, frame: Iterable[str] = ()) -> Expr:
        """The effect's guards and updates, and `frame` unchanged. The rest of its frame (the leaves no
        candidate writes) is checked on the observed values before the solver is asked."""
        s, t = self.s, self.t
        parts = [g for _, g in effect.guards]
        parts += [t[name] == new for name, new in effect.updates.items() if new is not t[name]]
        parts += [t[name] == s[name] for name in frame]
        return and_all(parts)

    def param_eq(self, param: Expr, value: int | bool) -> Expr:
        key = (param.get_id(), value)
        found = self._eq_param.get(key)
        if found is None:
            found = param == (z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value))
            _memo(self._eq_param, key, found)
        return found

    def eq(self, post: bool, leaf: str, value: int | bool) -> Expr:
        cache = self._eq_post if post else self._eq_pre
        key = (leaf, value)
        found = cache.get(key)
        if found is None:
            var = (self.t if post else self.s)[leaf]
            found = var == (z3.BoolVal(value) if isinstance(value, bool) else z3.IntVal(value))
            _memo(cache, key, found)
        return found


# Entries a memo of the encoding keeps. Their keys hold a step's observed values (epochs, log lengths),
# which keep changing over a run, so a long trace would fill memory: a full memo starts afresh.
MEMO_LIMIT: Final = 2_000


def _memo(memo: dict[Any, Any], key: Any, value: Any) -> None:
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo[key] = value


_ENCODINGS: dict[tuple[Knobs, tuple[int, ...]], Encoding] = {}


def encoding_for(knobs: Knobs, brokers: tuple[int, ...]) -> Encoding:
    """One encoding (its solvers and caches) per design and broker set, shared by every trace."""
    key = (knobs, brokers)
    found = _ENCODINGS.get(key)
    if found is None:
        if len(_ENCODINGS) >= 16:
            _ENCODINGS.clear()
        found = _ENCODINGS[key] = Encoding(knobs, brokers)
    return found


# -- the trace side -------------------------------------------------------------------------------------------


class Projection:
    """A trace state seen as the one-partition model: leaf -> value, for the observed variables."""

    def __init__(self, brokers: list[int], observed: set[str]) -> None:
        self.brokers = brokers
        # The model's brokers are the trace's own (Config.broker_ids), so messages name them as the trace does.
        self.ids = brokers
        # Trace broker id -> the encoding's broker: the same id, since the encoding names brokers as the trace.
        self.index = {b: b for b in brokers}
        self.observed = observed
        self._names: dict[str, list[str]] = {}

    def mid(self, broker: Any, what: str) -> int:
        """A trace's broker id as the model's (the same number), checked to be one of the trace's brokers;
        NO_LEADER stays itself."""
        if broker is None or broker == NO_LEADER:
            return NO_LEADER
        number = int(broker) if isinstance(broker, int) or str(broker).isdigit() else None
        if number not in self.index:
            raise _Unknown(f"{what} names broker {broker}, which is not one of the trace's brokers")
        return int(broker)

    def leaves(self, state: dict[str, Any], p: str, base: dict[str, int | bool] | None = None,
               delta: dict[str, Any] | None = None) -> dict[str, int | bool]:
        """The leaves of `state`; given the leaves `base` of the state before and the `delta` that led
        here, only the variables the delta names are read again."""
        if base is None or delta is None:
            out: dict[str, int | bool] = {}
            for var in self.observed:
                self._read(state, p, var, out)
            return out
        out = dict(base)
        for var in delta:
            for leaf in self._leaf_names(var):
                out.pop(leaf, None)
            self._read(state, p, var, out)
        return out

    def _leaf_names(self, var: str) -> list[str]:
        names = self._names.get(var)
        if names is None:
            scratch = State.leaf_names(tuple(self.brokers))
            prefix = {"assignment": ("assigned", "assignment."), "leader": ("node", "leader"),
                      "log": ("replica.", "log_len.")}.get(var, (var,))
            names = [n for n in scratch if any(n == x or n.startswith(x if x.endswith(".") else x + ".")
                                                for x in prefix)]
            self._names[var] = names
        return names

    def _read(self, state: dict[str, Any], p: str, var: str, out: dict[str, int | bool]) -> None:
        ids = self.ids
        value: Any
        if var == "controller":
            out["controller"] = self.mid(state["controller"], "controller")
        elif var == "controller_epoch":
            out["controller_epoch"] = int(state["controller_epoch"])
        elif var == "assignment":
            assignment = state["assignment"].get(p)
            out["assigned"] = assignment is not None
            members = {self.mid(r, f"the assignment of {p}") for r in assignment or ()}
            for r in ids:
                out[f"assignment.{r}"] = r in members
        elif var == "leader":
            leader = state["leader"].get(p)
            out["node"] = leader is not None
            if leader is not None:
                out["leader"] = self.mid(leader, f"the leader of {p}")
        elif var in ("leader_epoch", "partition_controller_epoch", "partition_version"):
            if p in state[var]:
                out[var] = int(state[var][p])
        elif var == "isr":
            if p in state["isr"]:
                members = {self.mid(r, f"the ISR of {p}") for r in state["isr"][p]}
                for r in ids:
                    out[f"isr.{r}"] = r in members
        elif var in BROKER_VARS:
            for b in self.brokers:
                value = state[var].get(str(b))
                if value is not None:
                    out[f"{var}.{b}"] = bool(value) if var == "alive" else int(value)
        else:
            for b in self.brokers:
                self._read_replica(state, p, var, b, out)

    def _read_replica(self, state: dict[str, Any], p: str, var: str, i: int, out: dict[str, int | bool]) -> None:
        ids = self.ids
        key = str(i)
        if var == "replica_state":
            states = state["replica_state"].get(key, {}).get(p) or {}
            for r in ids:
                out[f"replica_state.{i}.{r}"] = tables.replica_code(states.get(str(r)))
            return
        value = state[var].get(key, {}).get(p)
        if var == "role":
            out[f"role.{i}"] = ROLE_CODE.get(value, ROLE_NONE)
        elif var == "local_leader_epoch":
            out[f"local_leader_epoch.{i}"] = NO_EPOCH if value is None else int(value)
        elif var == "local_isr":
            members = {self.mid(r, f"broker {key}'s ISR of {p}") for r in value or ()}
            for r in ids:
                out[f"local_isr.{i}.{r}"] = r in members
        elif var == "log":
            out[f"replica.{i}"] = value is not None
            if value is not None:
                out[f"log_len.{i}"] = len(value)
        elif var in ("hw", "hw_checkpoint", "epoch_start_offset"):
            if value is not None:
                out[f"{var}.{i}"] = int(value)
        elif var == "partition_state":
            out[f"partition_state.{i}"] = tables.partition_code(value)


class _Unknown(Exception):
    pass


def _valid_refusal(event: Event) -> Failure | None:
    """A refusal the controller recorded of a transition the table allows: no action explains it, since
    the state machines refuse exactly the transitions the table forbids (and then change nothing)."""
    for entry in event["args"].get("invalid_transitions") or []:
        if not isinstance(entry, list) or len(entry) < 4:
            continue
        partition, src, dst = entry[1], entry[-2], entry[-1]
        if entry[0] == "partition":
            what, valid = f"{partition}", VALID_PARTITION_TRANSITIONS
        elif len(entry) >= 5:
            what, valid = f"{partition} replica {entry[2]}", VALID_REPLICA_TRANSITIONS
        else:
            continue
        if isinstance(src, str) and isinstance(dst, str) and (src, dst) in valid:
            return Failure(event["seq"], event["action"], event["actor"], str(partition),
                           f"{what}: valid transition {src} -> {dst} refused", [])
    return None


def _common_prefix(a: list[Any] | None, b: list[Any] | None) -> int:
    if a is None or b is None:
        return 0
    if a is b:
        return len(a)
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


# -- the validator --------------------------------------------------------------------------------------------


class Validator:
    """Validates a trace in two passes over it: the first learns its brokers, partitions and observed
    variables (sets as small as the cluster), the second checks each step holding only the state before
    it. Given a TraceFile, neither pass holds more than one event of the file."""

    def __init__(self, events: Events, on_read: Callable[[int], None] | None = None) -> None:
        """The first pass; `on_read` is told the number of events read, every SURVEY_STRIDE and at the end."""
        iterator = iter(events)
        first = next(iterator, None)
        if first is None:
            raise ValidationError("empty trace")
        args = first.get("args", {})
        knobs = Knobs.from_dict(args["knobs"]) if isinstance(args.get("knobs"), dict) else Knobs()
        self.knobs = knobs
        # A run parsed from a Kafka log: its lines are fragments of actions seen across gaps (fragments.py).
        from_log = args.get(SYNTHESIZED) is True
        self.first = init_observations(first) if from_log else first
        observed: set[str] = set()
        partitions: set[str] = set()
        brokers: set[int] = set(int(b) for b in args.get("brokers", []) if isinstance(b, int))
        count = 0
        for event in itertools.chain([self.first], iterator):
            count += 1
            if from_log:
                brokers |= brokers_named([event])
            _survey(event, observed, partitions, brokers)
            if on_read is not None and count % SURVEY_STRIDE == 0:
                on_read(count)
        if on_read is not None:
            on_read(count)
        # A log none of whose lines became an event has no step to explain.
        if not brokers and not (from_log and count == 1):
            raise ValidationError("the trace names no brokers (no Init args.brokers and no per-broker variable)")
        self.events = events
        self.count = count
        self.brokers = sorted(brokers)
        self.partitions = sorted(partitions)
        self.observed = observed
        # A log run of one line may name no broker; the encoding is still built on one.
        self.encoding = encoding_for(knobs, tuple(self.brokers) or (1,))
        self.projection = Projection(self.brokers, observed)
        self.history: dict[str, dict[int, int]] = {p: {} for p in self.partitions}
        self._previous: dict[str, dict[str, int | bool]] = {}
        self.gap = LogGap(self.projection.index) if from_log else None

    def run(self, stop_at_first: bool = True, on_event: Callable[[int], None] | None = None) -> ValidationReport:
        """The second pass; `on_event` is told the number of events taken so far, before each and at the end."""
        report = ValidationReport(events=self.count, partitions=self.partitions,
                                  observed=sorted(self.observed), unobserved=sorted(set(VARIABLES) - self.observed))
        start = time.perf_counter()
        state = empty_state()
        taken = 0
        for index, event in enumerate(self.events):
            if on_event is not None:
                on_event(index)
            taken = index + 1
            if index == 0:
                event = self.first
            before = state
            state = copy_state(state)
            apply_event(state, event)
            if index == 0 or event.get("full"):
                self._remember(state)
                self._previous.clear()
                continue
            report.steps += 1
            failure = self._step(event, before, state, report)
            if failure is not None:
                report.failures.append(failure)
                report.failure = report.failure or failure
                if stop_at_first:
                    break
            self._advance(event, state)
        if on_event is not None:
            on_event(taken)
        report.seconds = time.perf_counter() - start
        return report

    def _advance(self, event: Event, state: dict[str, Any]) -> None:
        """After a step: what it showed, for the steps after it."""
        if self.gap is not None:
            for p in self.gap.observe(event):
                self.history.setdefault(p, {}).clear()
        self._remember(state)

    def _remember(self, state: dict[str, Any]) -> None:
        """History: the first broker named leader of each epoch (the model's `g.epoch_leader`)."""
        for p in self.partitions:
            seen = self.history[p]
            # A log shows an assignment only now and then; its partitions' deletions end their history.
            if self.gap is None and state["assignment"].get(p) is None and "assignment" in self.observed:
                seen.clear()
                continue
            leader = state["leader"].get(p)
            epoch = state["leader_epoch"].get(p)
            if leader is not None and leader != NO_LEADER and epoch is not None:
                seen.setdefault(int(epoch), int(leader))
            for b, parts in state["role"].items():
                if parts.get(p) == "leader":
                    lle = state["local_leader_epoch"].get(b, {}).get(p)
                    if lle is not None:
                        seen.setdefault(int(lle), int(b))

    # -- one step ------------------------------------------------------------------------------------------

    def _step(self, event: Event, before: dict[str, Any], after: dict[str, Any],
              report: ValidationReport) -> Failure | None:
        refusal = _valid_refusal(event)
        if refusal is not None:
            return refusal
        cands = candidates(event, self.brokers)
        try:
            cands = [(n, None if b is None else self.projection.mid(b, "the event")) for n, b in cands]
            # A log line is checked on every partition it names, whether or not what it shows differs from
            # the values earlier lines showed (the state before it is not those values). On the others it
            # changes nothing the state before keeps but its controller's epoch, which the first one shows.
            shown = named_partitions(event) if self.gap is not None else set()
            projections: list[tuple[str, dict[str, int | bool], dict[str, int | bool]]] = []
            for p in self.partitions or [""]:
                if self.gap is not None and p not in shown and projections:
                    self._previous.pop(p, None)  # read afresh when a line names it
                    continue
                pre = self._previous.get(p)
                if pre is None:
                    pre = self.projection.leaves(before, p)
                post = self.projection.leaves(after, p, pre, event["state"])
                self._previous[p] = post
                if self.gap is not None:
                    pre, post = self.gap.before(event, pre), self.gap.after(event, p, post)
                projections.append((p, pre, post))
        except _Unknown as err:
            return Failure(event["seq"], event["action"], event["actor"], "", str(err), [])
        args = event["args"]
        named = args.get("partition") if isinstance(args.get("partition"), str) else None
        checked = False
        for p, pre, post in projections:
            # A leaf that appears or disappears (HW of a new replica, epoch start of a leader) is free on the
            # side where it is absent: only a value that differs on both sides is a change.
            changed = {k for k, v in post.items() if k in pre and pre[k] != v}
            kept = self._kept(before, after, p)
            changed |= {f"log_len.{i}" for i, (common, length) in kept.items() if common != length}
            if not changed and p not in shown:
                continue
            checked = True
            step_cands: list[tuple[str, int | None]] = cands if named is None or named == p else [("Stutter", None)]
            failure = self._check(event, p, pre, post, kept, changed, step_cands, report)
            if failure is not None:
                return failure
        if checked:
            return None
        if cands == [("Stutter", None)]:
            report.explained_by["Stutter"] = report.explained_by.get("Stutter", 0) + 1
            return None
        # Nothing observed changed: the named action must allow that too, with its arguments.
        p, pre, post = projections[0]
        if named is not None and named in self.partitions:
            p, pre, post = next(x for x in projections if x[0] == named)
        return self._check(event, p, pre, post, self._kept(before, after, p), set(), cands, report)

    def _kept(self, before: dict[str, Any], after: dict[str, Any], p: str) -> dict[int, tuple[int, int]]:
        """Per broker: (common prefix of the log before and after, length after)."""
        if "log" not in self.observed or not p:
            return {}
        out = {}
        for b in self.projection.brokers:
            key = str(b)
            old = before["log"].get(key, {}).get(p)
            new = after["log"].get(key, {}).get(p)
            if old is None and new is None:
                continue
            out[b] = (_common_prefix(old, new), len(new) if new is not None else 0)
        return out

    def _check(self, event: Event, p: str, pre: dict[str, int | bool], post: dict[str, int | bool],
               kept: dict[int, tuple[int, int]], changed: set[str], cands: list[tuple[str, int | None]],
               report: ValidationReport) -> Failure | None:
        if len(cands) == 1:
            return self._check_one(event, p, pre, post, kept, changed, cands, report)
        # Several candidates (an observer's step): those that may write every changed leaf, one by one.
        enc = self.encoding
        fitting = [c for c in cands if changed <= enc.check_for([c]).writes]
        failures = []
        for cand in fitting:
            failure = self._check_one(event, p, pre, post, kept, changed, [cand], report)
            if failure is None:
                return None
            failures.append(failure)
        labels = [enc.effect(n, b).label for n, b in cands]
        if not failures:
            return Failure(event["seq"], event["action"], event["actor"], p,
                           f"no action changes all of {', '.join(sorted(changed))}", labels)
        return Failure(event["seq"], event["action"], event["actor"], p,
                       " | ".join(f.reason for f in failures[:4]), labels)

    def _check_one(self, event: Event, p: str, pre: dict[str, int | bool], post: dict[str, int | bool],
                   kept: dict[int, tuple[int, int]], changed: set[str], cands: list[tuple[str, int | None]],
                   report: ValidationReport) -> Failure | None:
        enc = self.encoding
        check = enc.check_for(cands)
        labels = [e.label for e in check.effects]
        outside = sorted(leaf for leaf in changed if leaf not in check.writes)
        if outside:
            return Failure(event["seq"], event["action"], event["actor"], p,
                           f"{' / '.join(labels)} does not change {', '.join(outside)}", labels)
        try:
            extra = self._arguments(event, p, check)
        except _Unknown as err:
            return Failure(event["seq"], event["action"], event["actor"], p, str(err), labels)
        if self.gap is not None:
            extra += [(None, label, c) for label, c in self.gap.constraints(
                enc.s, p, post, self.history.get(p, {}))]
        needed = set(check.reads | check.writes | changed)
        if any(owner is None for owner, _, _ in extra):
            needed |= self._machine_leaves(event)
        bound_pre = tuple((leaf, value) for leaf, value in pre.items() if leaf in needed)
        bound_post = tuple((leaf, value) for leaf, value in post.items() if leaf in needed)
        bound_kept = tuple((i, common) for i, (common, _) in kept.items() if f"log_len.{i}" in needed)
        key = (tuple(cands), bound_pre, bound_post, bound_kept, tuple(label for _, label, _ in extra))
        if len(check.effects) == 1 and key in enc.verdicts:
            report.explained_by[check.effects[0].action] = report.explained_by.get(check.effects[0].action, 0) + 1
            return None
        binds = [enc.eq(False, leaf, value) for leaf, value in bound_pre]
        binds += [enc.eq(True, leaf, value) for leaf, value in bound_post]
        binds += [enc.param_eq(enc.kept[i], common) for i, common in bound_kept]
        solver = check.solver
        report.checked += 1
        solver.push()
        solver.add(_conjunction(binds + [c for _, _, c in extra]))
        verdict = solver.check()
        if verdict == z3.sat:
            if len(check.effects) == 1:
                action = check.effects[0].action
            else:
                model = solver.model()
                action = next(e.action for e, sel in zip(check.effects, check.selectors, strict=True)
                              if z3.is_true(model.eval(sel)))
            report.explained_by[action] = report.explained_by.get(action, 0) + 1
            _memo(enc.verdicts, key, True)
        solver.pop()
        if verdict == z3.sat:
            return None
        reason = self._diagnose(check, binds, extra) if verdict == z3.unsat else f"z3 answered {verdict}"
        return Failure(event["seq"], event["action"], event["actor"], p, reason, labels)

    # -- arguments -------------------------------------------------------------------------------------------

    def _arguments(self, event: Event, p: str, check: _Check) -> list[tuple[str | None, str, Expr]]:
        """Constraints from the event's arguments, labelled: (the effect they bind or None, label, formula)."""
        out: list[tuple[str | None, str, Expr]] = []
        args = event["args"]
        single = len(check.effects) == 1
        for effect, sel in zip(check.effects, check.selectors, strict=True):
            for label, constraint in self._effect_arguments(effect, args, p, event):
                out.append((effect.label, label, constraint if single else implies(sel, constraint)))
        if "transitions" in args or event["action"] in CONTEXT_LOADS:
            out += [(None, label, c) for label, c in self._transitions(event, p)]
        return out

    def _machine_leaves(self, event: Event) -> set[str]:
        _, _, ident = event["actor"].partition(":")
        if not ident.isdigit() or int(ident) not in self.projection.index:
            return set()
        c = int(ident)
        return {f"partition_state.{c}", f"acting_controller_epoch.{c}",
                *[f"replica_state.{c}.{r}" for r in self.encoding.cfg.ids]}

    def _effect_arguments(self, effect: Effect, args: dict[str, Any], p: str,
                          event: Event) -> list[tuple[str, Expr]]:
        params = effect.params
        out: list[tuple[str, Expr]] = []
        mid = self.projection.mid

        def bind(name: str, value: Any) -> None:
            if name in params and isinstance(value, int | bool):
                out.append((f"argument {name}={value}", self.encoding.param_eq(params[name], value)))

        action = effect.action
        if action in ("LeaderAndIsr", "UpdateMetadata", "StopReplica"):
            bind("controller_epoch", args.get("controller_epoch"))
            if isinstance(args.get("applied"), bool):
                bind("applied", args["applied"])
            # KIP-380: the request's broker epoch against the broker's own, as Kafka logs both on a refusal.
            sent_to, own = args.get("broker_epoch"), args.get("current_broker_epoch")
            if isinstance(sent_to, int) and isinstance(own, int):
                bind("stale_broker_epoch", sent_to < own)
        if action == "LeaderAndIsr":
            entry = next((e for e in args.get("partitions") or [] if isinstance(e, dict) and e.get("partition") == p),
                         None)
            bind("included", entry is not None)
            if entry is not None:
                # A log line may show a request's partition without its fields ("completed" lines).
                leader = mid(entry["leader"], "the request") if "leader" in entry else NO_LEADER
                if "leader" in entry:
                    bind("leader", leader)
                bind("leader_epoch", entry.get("leader_epoch"))
                for key, what in (("isr", "the request's ISR"), ("replicas", "the request's replicas")):
                    if key in entry:
                        members = {mid(r, what) for r in entry[key]}
                        for r in self.encoding.cfg.ids:
                            bind(f"{key}.{r}", r in members)
                known = self.history.get(p, {}).get(int(entry.get("leader_epoch", -1)))
                if known is not None and leader != NO_LEADER:
                    out.append((f"the request names broker {entry.get('leader')} leader of epoch "
                                f"{entry.get('leader_epoch')}, first led by broker {known}",
                                z3.BoolVal(leader == known)))
        elif action == "StopReplica":
            parts = args.get("partitions")
            if isinstance(parts, list):
                bind("included", p in parts)
            if isinstance(args.get("delete"), bool):
                bind("delete", args["delete"])
        elif action == "Fetch":
            if "replica_id" in args:
                bind("replica_id", mid(args["replica_id"], "the fetch"))
            bind("fetch_offset", args.get("fetch_offset"))
            bind("current_leader_epoch", args.get("current_leader_epoch"))
        elif action == "FetchResponse":
            bind("fetch_offset", args.get("fetch_offset"))
            bind("current_leader_epoch", args.get("current_leader_epoch"))
            error = args.get("error")
            code = ERR_NONE if not error else ERR_OUT_OF_RANGE if error == "OFFSET_OUT_OF_RANGE" else ERR_OTHER
            bind("error", code)
            bind("high_watermark", args.get("high_watermark"))
            bind("leader_end_offset", args.get("leader_end_offset"))
            records = args.get("records")
            if isinstance(records, list) and isinstance(args.get("fetch_offset"), int) and not error:
                bind("new_log_end", args["fetch_offset"] + len(records))
        elif action == "OffsetsForLeaderEpochResponse":
            bind("current_leader_epoch", args.get("current_leader_epoch"))
            error = args.get("error")
            if error is not None:
                bind("error", ERR_NONE if not error else ERR_OTHER)
        elif action == "IsrShrink":
            removed = args.get("removed")
            if isinstance(removed, list):
                gone = {mid(r, "the shrink") for r in removed}
                for r in self.encoding.cfg.ids:
                    bind(f"removed.{r}", r in gone)
        elif action == "Produce":
            if "error" in args:
                bind("ok", not args["error"])
            if args.get("acks") in (-1, 1, 0):
                bind("acks_all", args["acks"] == -1)
        elif action == "ControllerElect":
            if isinstance(args.get("elected"), bool):
                bind("elected", args["elected"])
        elif action in ("ControlledShutdownResponse", "RequestControlledShutdown"):
            bind("stopped", bool(args.get("stopped", False)))
        return out

    def _transitions(self, event: Event, p: str) -> list[tuple[str, Expr]]:
        """The controller's recorded state-machine transitions for partition p: each allowed by the
        table, chained from the state before to the state after."""
        ident = event["actor"].partition(":")[2]
        if not ident.isdigit() or "partition_state" not in self.observed:
            return []
        c = self.projection.mid(int(ident), "the actor")
        s, t = self.encoding.s, self.encoding.t
        loading = event["action"] in CONTEXT_LOADS
        chains: dict[tuple[str, ...], list[tuple[Any, Any]]] = {}
        for entry in event["args"].get("transitions") or []:
            if not isinstance(entry, list) or len(entry) < 4 or entry[1] != p:
                continue
            if entry[0] == "partition":
                chains.setdefault(("partition",), []).append((entry[2], entry[3]))
            elif len(entry) >= 5:
                chains.setdefault(("replica", str(entry[2])), []).append((entry[3], entry[4]))
        out: list[tuple[str, Expr]] = []
        for key, chain in chains.items():
            if key[0] == "partition":
                codes, valid, state_pre, state_post, what, absent = (
                    tables.PARTITION_CODE, VALID_PARTITION_TRANSITIONS, s.b("partition_state", c),
                    t.b("partition_state", c), f"{p}", "NonExistentPartition")
            else:
                r = self.projection.mid(int(key[1]), "a transition")
                codes, valid, state_pre, state_post, what, absent = (
                    tables.REPLICA_CODE, VALID_REPLICA_TRANSITIONS, s[f"replica_state.{c}.{r}"],
                    t[f"replica_state.{c}.{r}"], f"{p} replica {key[1]}", "NonExistentReplica")
            # A context load starts afresh: what the controller held before does not count.
            current: Expr = z3.IntVal(codes[absent]) if loading else state_pre
            for src, dst in chain:
                if dst not in codes or (src is not None and src not in codes):
                    out.append((f"unknown state in transition {src} -> {dst} of {what}", z3.BoolVal(False)))
                    continue
                if src is None:
                    out.append((f"{what}: state loaded as {dst} outside a controller failover", z3.BoolVal(loading)))
                else:
                    out.append((f"{what}: transition from {src} chains from the state before",
                                current == codes[src]))
                    out.append((f"{what}: {src} -> {dst} is a valid transition",
                                z3.BoolVal((src, dst) in valid)))
                current = z3.IntVal(codes[dst])
            out.append((f"{what}: the transitions end in the state after",
                        implies(t.b("acting_controller_epoch", c) != 0, state_post == current)))
        return out


    # -- why nothing explains a step -----------------------------------------------------------------------------

    def _diagnose(self, check: _Check, binds: list[Expr], extra: list[tuple[str | None, str, Expr]]) -> str:
        reasons = [self._why(effect, sel, binds, extra)
                   for effect, sel in zip(check.effects, check.selectors, strict=True)]
        return " | ".join(reasons)

    def _why(self, effect: Effect, selector: Expr, binds: list[Expr],
             extra: list[tuple[str | None, str, Expr]]) -> str:
        """An unsat core over the effect's labelled conditions, the observed values held fixed."""
        solver = z3.Solver()
        solver.set("core.minimize", True)
        solver.add(and_all(binds), selector)
        tracked: dict[str, str] = {}
        conditions: list[tuple[str, Expr]] = [(label, c) for owner, label, c in extra
                                              if owner is None or owner == effect.label]
        conditions += effect.guards
        s, t = self.encoding.s, self.encoding.t
        for name in s.names():
            new = effect.updates.get(name)
            if new is None:
                conditions.append((f"{name} unchanged", t[name] == s[name]))
            elif new is not t[name]:
                conditions.append((f"{name} as {effect.action} sets it", t[name] == new))
        for label, condition in conditions:
            literal = z3.Bool(f"why.{len(tracked)}")
            tracked[str(literal)] = label
            solver.assert_and_track(condition, literal)
        if solver.check() != z3.unsat:
            return f"{effect.label}: (explained when checked alone)"
        core = [tracked[str(c)] for c in solver.unsat_core() if str(c) in tracked]
        return f"{effect.label}: " + ("; ".join(core) if core else "the observed values")


def _conjunction(parts: list[Expr]) -> Expr:
    """And of many formulas through the C API: z3py's And coerces every argument, which costs more than
    the solver's check for the small formulas of one step."""
    if not parts:
        return z3.BoolVal(True)
    if len(parts) == 1:
        return parts[0]
    ctx = parts[0].ctx
    array = (z3.Ast * len(parts))(*[p.as_ast() for p in parts])
    return z3.BoolRef(z3.Z3_mk_and(ctx.ref(), len(parts), array), ctx)


def copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A copy deep enough that merging a delta into it leaves the original alone (leaves are shared)."""
    out: dict[str, Any] = {}
    for name, value in state.items():
        depth = VARIABLES.get(name, 0)
        if depth == 0 or not isinstance(value, dict):
            out[name] = value
        elif depth == 1:
            out[name] = dict(value)
        elif depth == 2:
            out[name] = {k: dict(v) for k, v in value.items()}
        else:
            out[name] = {k: {p: dict(x) for p, x in v.items()} for k, v in value.items()}
    return out


def _survey(event: Event, observed: set[str], partitions: set[str], brokers: set[int]) -> None:
    """Adds the variables an event observes and the partitions and brokers its delta names."""
    for var, value in event["state"].items():
        observed.add(var)
        if var in ("assignment", "leader", "leader_epoch", "isr", "partition_controller_epoch",
                   "partition_version"):
            partitions.update(value)
        elif var in ("alive", "broker_controller_epoch", "acting_controller_epoch"):
            brokers.update(int(k) for k in value)
        elif isinstance(value, dict):
            brokers.update(int(k) for k in value if k.isdigit())
            for inner in value.values():
                if isinstance(inner, dict):
                    partitions.update(inner)


def validate_events(events: Events, stop_at_first: bool = True) -> ValidationReport:
    return Validator(events).run(stop_at_first)

