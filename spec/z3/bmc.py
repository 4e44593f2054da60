"""Bounded model checking: unroll the transition relation from the initial state, depth by depth, and
ask at each depth whether some invariant breaks in the last state (or on the last step). The first depth
that answers yes gives a shortest counterexample, which is written as a trace (format v2) that the
invariant checker of kcm.conformance reads like any other.

History invariants are asked of the whole unrolling: `OneLeaderPerEpoch` compares the leaders named in
the last state with those of every earlier state; `NoCommittedDataLoss` looks for a record committed in
some state (below the HW of a broker leading then) that the current leader or an ISR member lacks now;
`HighWatermarkMonotonic/AcrossLeaders` compares the HW the current leader exposes with the HW every earlier
current leader exposed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.spec.design_folder import BmcStory, KnownBug
from kcm.spec.designs import KNOWN_BUGS
from kcm.spec.trace.format import Event, empty_state, make_event
from kcm.spec.vocabulary import HW_ACROSS_LEADERS, HW_PER_LEADER, INVARIANTS, NO_LEADER, VARIABLES, Knobs
from kcm.spec.z3.actions import Effect, Relations, next_relation
from kcm.spec.z3.invariants import STATE_INVARIANTS, STEP_INVARIANTS, exposed_hw, initial, stale_controller_fenced
from kcm.spec.z3.model import NO_EPOCH, ROLE_LEADER, ROLE_NAMES, Config, State
from kcm.spec.z3.solver import Expr, and_, implies, int_const, ite, not_, num, or_, or_all, py_value, z3

PARTITION: Final = "t0-0"
TOPIC: Final = "t0"
# The invariants bounded model checking looks for, in the order they are reported when several break at
# the same depth (the order of INVARIANTS).
_HISTORY_AND_FENCE: Final = ("NoCommittedDataLoss", "StaleControllerFenced")
BMC_INVARIANTS: Final[tuple[str, ...]] = (
    *(name for name in INVARIANTS if name in STATE_INVARIANTS or name in STEP_INVARIANTS or name in _HISTORY_AND_FENCE),
    HW_PER_LEADER,
    HW_ACROSS_LEADERS,
)


@dataclass
class BmcResult:
    knobs: Knobs
    brokers: int
    max_depth: int
    depth: int  # the depth of the counterexample, or the depth explored without one
    invariant: str | None = None
    events: list[Event] = field(default_factory=list)
    seconds: float = 0.0
    per_depth: list[float] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.invariant is not None


class Unrolling:
    def __init__(self, cfg: Config, logic: str = "QF_BV", actions: frozenset[str] | None = None,
                 controller: int = 1) -> None:
        self.cfg = cfg
        # Like a reproduction model's Next in spec/MC*.tla: only these actions (all when None).
        self.actions = actions
        self.states: list[State] = [State(cfg, "s0.")]
        self.effects: list[list[Effect]] = []
        self.choices: list[Expr] = []
        # Bounded integers are bit-vectors: the bit-vector solver, incremental across depths, is several
        # times faster here than linear integer arithmetic (measured: 4.6 s against 33 s at depth 5).
        self.solver = z3.SolverFor(logic) if cfg.width is not None else z3.Solver()
        self.solver.add(initial(self.states[0], controller))
        # Per follower: whether the last step was a Fetch of its (its response is in flight), and whether a
        # response of an earlier one was never taken (see `_fetch_rounds`).
        self._fetched: dict[int, Expr] = {f: z3.BoolVal(False) for f in cfg.ids}
        self._stuck: dict[int, Expr] = {f: z3.BoolVal(False) for f in cfg.ids}
        # Per broker: the oldest controller epoch a request it receives can come from (see `_requests_after`).
        self._floor: dict[int, Expr] = {b: num(0, cfg.width) for b in cfg.ids}
        # Per broker: the newest controller epoch a request to it may come from while it is not registered.
        self._cap: dict[int, Expr] = {b: num(0, cfg.width) for b in cfg.ids}
        # Per broker: the LeaderAndIsr requests delivered so far, (taken, version, controller epoch).
        self._delivered: dict[int, list[tuple[Expr, Expr, Expr]]] = {b: [] for b in cfg.ids}

    @property
    def depth(self) -> int:
        return len(self.states) - 1

    def extend(self) -> None:
        k = len(self.states)
        s, t = self.states[-1], State(self.cfg, f"s{k}.")
        rel = Relations(self.cfg, s, t, tag=f"a{k - 1}.", past=list(self.states))
        effects = [e for e in rel.model_instances() if self.actions is None or e.action in self.actions]
        choice = int_const(f"choice{k - 1}", 8 if self.cfg.width is not None else None)
        self.solver.add(next_relation(effects, s, t, choice))
        # No step leaves the state as it was: a shortest counterexample has none, and ruling them out
        # spares the solver every placement of idle steps.
        self.solver.add(or_all(t[n] != s[n] for n in s.names() if not n.startswith("g.")))
        self._fetch_rounds(effects, choice)
        self._requests_after_restart(effects, choice, s, t)
        self._requests_once(effects, choice)
        self.states.append(t)
        self.effects.append(effects)
        self.choices.append(choice)

    def _requests_after_restart(self, effects: list[Effect], choice: Expr, s: State, t: State) -> None:
        """The Z3 model lets a restarted broker take any version of the state node from the version the
        controller that saw it come back left on (`horizon`), in any controller epoch from the version's
        writer's on. But its earlier connections were reset: what it receives was sent by that controller
        or a later one, in their epochs (the failover's or broker change's LeaderAndIsr in the spec and the
        implementation). Without this, a restarted broker applies a request of a controller that crashed
        before it came back, which neither has."""
        for b in self.cfg.ids:
            for i, e in enumerate(effects):
                if e.broker == b and e.request_ce is not None:
                    # Nor does a controller send to a broker it does not see registered (LiveOf in AddLai):
                    # while b's registration is gone, only requests of the epochs before it was lost arrive.
                    sent = or_(s.b("registered", b), e.request_ce <= self._cap[b])
                    self.solver.add(implies(choice == i, and_(e.request_ce >= self._floor[b], sent)))
            lost = and_(s.b("registered", b), not_(t.b("registered", b)))
            self._cap[b] = ite(lost, s["controller_epoch"], self._cap[b])
            back = and_(s.b("bounced", b), not_(t.b("bounced", b)))
            floor = self._floor[b]
            for i, e in enumerate(effects):
                if e.action in _LOADING_EVENTS and e.broker is not None:
                    floor = ite(and_(choice == i, back), t.b("acting_controller_epoch", e.broker), floor)
            self._floor[b] = floor

    def _requests_once(self, effects: list[Effect], choice: Expr) -> None:
        """The Z3 model delivers any version of the state node a controller could have sent, as often as
        asked; a controller sends a version once in an epoch, and the network of the implementation (and of
        a reproduction model, which starts with none in flight) duplicates nothing unless told to. So a
        broker takes each (version, controller epoch) once, and never the bootstrap's (version 0 in epoch 1,
        applied in the initial state)."""
        for b in self.cfg.ids:
            for i, e in enumerate(effects):
                if e.action != "LeaderAndIsr" or e.broker != b or e.request_ce is None:
                    continue
                version, ce = e.params["version"], e.request_ce
                taken = [and_(cond, v == version, c == ce) for cond, v, c in self._delivered[b]]
                self.solver.add(implies(choice == i, not_(or_(and_(version == 0, ce == 1), or_all(taken)))))
                self._delivered[b].append((choice == i, version, ce))

    def _fetch_rounds(self, effects: list[Effect], choice: Expr) -> None:
        """The Z3 model's fetch is two halves that read each other's current state: `Fetch(l)` (the leader
        handles a fetch from the follower's log end) and `FetchResponse(f)` (the follower takes what its
        leader has now). The specification and the implementation send a request (SendFetch), handle it
        (Fetch) and answer it (FetchResponse) with what the leader had when it handled it; a follower has one
        request in flight at a time (`inflight`, KafkaReplication.tla SendFetch). So a response here
        follows its fetch at once (the leader's state it reads is the one the answer carries), and a fetch
        whose response was not taken next leaves it in flight for good: that follower fetches no more.
        Every step is then one the specification has (`trace` writes the request out)."""
        fetches = {f: or_all(choice == i for i, e in enumerate(effects) if e.action == "Fetch"
                             and _constant(e.params["replica_id"]) == f) for f in self.cfg.ids}
        answers = {f: or_all(choice == i for i, e in enumerate(effects) if e.action == "FetchResponse"
                             and e.broker == f) for f in self.cfg.ids}
        for f in self.cfg.ids:
            self.solver.add(implies(answers[f], self._fetched[f]))
            stuck = or_(self._stuck[f], and_(self._fetched[f], not_(answers[f])))
            self.solver.add(implies(fetches[f], not_(stuck)))
            self._fetched[f], self._stuck[f] = fetches[f], stuck

    # -- violations at the last depth -----------------------------------------------------------------

    def violations(self, names: Iterable[str]) -> dict[str, Expr]:
        """Formulas saying each invariant breaks at the last depth (monitors are updated as a side effect,
        so call once per depth)."""
        k = self.depth
        s, t = self.states[k - 1], self.states[k]
        out: dict[str, Expr] = {}
        # In the order given, not a set's: the solver's answer depends on the order of its formulas, and a
        # counterexample should be the same at every run.
        for name in dict.fromkeys(names):
            if name == "OneLeaderPerEpoch":
                out[name] = self._two_leaders()
            elif name in STATE_INVARIANTS:
                out[name] = not_(STATE_INVARIANTS[name](t))
            elif name in STEP_INVARIANTS:
                out[name] = not_(STEP_INVARIANTS[name](s, t))
            elif name == "StaleControllerFenced":
                out[name] = not_(stale_controller_fenced(s, t, self.effects[-1], self.choices[-1]))
            elif name == "NoCommittedDataLoss":
                out[name] = self._data_loss()
            elif name == HW_ACROSS_LEADERS:
                out[name] = self._exposed_hw_back()
        return out

    def _exposed_hw_back(self) -> Expr:
        """The HW the current leader exposes now is below one an earlier current leader exposed."""
        now_on, now_hw = exposed_hw(self.states[-1])
        earlier = [and_(on, hw > now_hw) for on, hw in map(exposed_hw, self.states[:-1])]
        return and_(now_on, or_all(earlier))

    def _two_leaders(self) -> Expr:
        """A leader named now (by the store or a leading broker) for an epoch some other broker was named
        leader of, now or in any earlier state."""
        now = _claims(self.states[-1])
        conflicts = [
            and_(c_on, d_on, c_epoch == d_epoch, c_broker != d_broker)
            for past in self.states
            for d_epoch, d_broker, d_on in _claims(past)
            for c_epoch, c_broker, c_on in now
        ]
        return or_all(conflicts)

    def _data_loss(self) -> Expr:
        """Some record committed in this or an earlier state (below the HW of a broker leading then) is
        missing, at its offset, from the log of the current leader or of an ISR member now."""
        cfg = self.cfg
        if cfg.logs != "content":
            return z3.BoolVal(False)
        t = self.states[-1]
        holders = []
        for h in cfg.ids:
            current_leader = and_(t["leader"] == h, t.b("role", h) == ROLE_LEADER,
                                  t.b("local_leader_epoch", h) == t["leader_epoch"])
            holders.append((h, and_(t.b("replica", h), or_(t.isr(h), current_leader))))
        missing = []
        for past in self.states:
            for b in cfg.ids:
                leads = and_(past.b("replica", b), past.b("role", b) == ROLE_LEADER,
                             past.b("local_leader_epoch", b) != NO_EPOCH)
                for i in range(cfg.capacity):
                    committed = and_(leads, i < past.b("hw", b), i < past.b("log_len", b))
                    ep, rec = past.entry(b, i)
                    for h, holder in holders:
                        has = and_(t.b("log_len", h) > i, t.entry(h, i)[0] == ep, t.entry(h, i)[1] == rec)
                        missing.append(and_(committed, holder, not_(has)))
        return or_all(missing)

    # -- reading a model back ----------------------------------------------------------------------------

    def trace(self, model: Expr, invariant: str, run: str) -> list[Event]:
        cfg = self.cfg
        states = [trace_state(model, s) for s in self.states]
        chosen = [effects[py_value(model, choice)] for effects, choice in zip(self.effects, self.choices, strict=True)]
        transitions = _fill_machines(model, self.states, chosen, states)
        events = [make_event(run, 0, "env", "Init", {
            "knobs": cfg.knobs.to_dict(), "brokers": list(cfg.ids), "source": "z3-bmc",
            "invariant": invariant, "depth": self.depth,
        }, states[0], full=True)]
        for i, effect in enumerate(chosen):
            args = _eval_args(model, effect.args)
            if effect.action == "LeaderAndIsr":
                for entry in args.get("partitions", []):
                    entry["partition"] = PARTITION
            for key in ("partition",):
                if key in args and args[key] is None:
                    args[key] = PARTITION
            if transitions[i]:
                args["transitions"] = transitions[i]
            if effect.action == "Fetch":
                # The request the leader handles, sent by the follower (it changes no variable of the trace).
                follower = f"broker:{args['replica_id']}"
                events.append(make_event(run, len(events), follower, "SendFetch", {"partition": PARTITION}, {}))
            events.append(make_event(run, len(events), effect.actor, effect.action, args,
                                     diff_states(states[i], states[i + 1])))
        return events


# The controller events after which the controller's state machines are what the spec's failover or broker
# change leaves (spec/KafkaReplication.tla: LoadWork and FailoverWork for ControllerElect, BrokerChangeWork).
_LOADING_EVENTS: Final = frozenset({"ControllerElect", "BrokerChange"})
_Machines = tuple[dict[str, str], dict[str, dict[str, str]]]


def _fill_machines(model: Any, states: list[State], chosen: list[Effect],
                   out: list[dict[str, Any]]) -> list[list[list[Any]]]:
    """The controllers' partition and replica state machines (`partition_state`, `replica_state`), which the
    Z3 model leaves out, written into the trace's states `out` as the TLA+ specification has them: a
    controller of the initial state as InitStable leaves it; a controller's after it handles a failover
    or a broker change; none once it stops acting (ResignVars: crash, resignation, a fenced write,
    re-registration). Other actions leave them as they are. Returns each step's transitions (the
    `transitions` argument of the trace format, which the checker holds a controller's step to)."""
    machines: dict[str, _Machines] = {}
    steps: list[list[list[Any]]] = []
    for k, t in enumerate(states):
        acting = {b for b in t.cfg.ids if py_value(model, t.b("acting_controller_epoch", b)) != 0}
        effect = chosen[k - 1] if k else None
        if effect is None:
            loaders = acting
        else:
            loaders = {effect.broker} if effect.action in _LOADING_EVENTS and effect.broker is not None else set()
        before = states[max(k - 1, 0)]
        transitions: list[list[Any]] = []
        for b in sorted(loaders & acting):
            loaded = _loaded_machines(model, before, t)
            if effect is not None:
                transitions = _transitions(effect.action, machines.get(str(b), ({}, {})), loaded,
                                           _leader_failed(model, before))
            machines[str(b)] = loaded
        for key in [key for key in machines if int(key) not in acting]:
            del machines[key]
        out[k]["partition_state"] = {b: partitions for b, (partitions, _) in sorted(machines.items())}
        out[k]["replica_state"] = {b: replicas for b, (_, replicas) in sorted(machines.items())}
        if k:
            steps.append(transitions)
    return steps


def _leader_failed(model: Any, before: State) -> bool:
    """Whether the partition's leader is not registered as a controller event reads the registrations."""
    leader = py_value(model, before["leader"])
    return leader != NO_LEADER and not py_value(model, before.b("registered", leader))


def _loaded_machines(model: Any, before: State, after: State) -> _Machines:
    """A controller's state machines after a failover or broker change: the partition online when the
    state node names a leader, offline when no election found one (OfflinePartition is where Failure
    leaves it); each assigned replica online when its broker was registered as the event read the
    registrations (a bounced broker fails and starts up again: Startup after Failure), else offline."""
    cfg = after.cfg

    def v(s: State, name: str) -> Any:
        return py_value(model, s[name])

    if not (v(after, "assigned") and v(after, "node")):
        return {}, {}
    online = v(after, "leader") != NO_LEADER
    replicas = {str(r): "OnlineReplica" if v(before, f"registered.{r}") else "OfflineReplica"
                for r in cfg.ids if v(after, f"assignment.{r}")}
    return {PARTITION: "OnlinePartition" if online else "OfflinePartition"}, {PARTITION: replicas}


def _transitions(action: str, was: _Machines, now: _Machines, leader_failed: bool) -> list[list[Any]]:
    """The transitions that take a controller's machines from `was` to `now`, in the trace format's
    entries. A failover loads its states (from None: LoadWork reads the partition offline when its leader
    is gone, a replica on a dead broker ReplicaDeletionIneligible), moves every replica (LoadStartup:
    Online -> Online, the dead ones to OfflineReplica), then elects (Offline -> Online); a broker change
    takes the partition of a failed leader offline and elects again (Failure, then TriggerOnline), and
    moves each replica whose state changes."""
    out: list[list[Any]] = []
    loading = action == "ControllerElect"
    elections: list[list[Any]] = []
    for p, state in now[0].items():
        first = ("OfflinePartition" if leader_failed else state) if loading else was[0].get(p)
        if loading:
            out.append(["partition", p, None, first])
        elif leader_failed and first == "OnlinePartition":
            elections.append(["partition", p, first, "OfflinePartition"])
            first = "OfflinePartition"
        if first != state:
            elections.append(["partition", p, first, state])
    for p, replicas in now[1].items():
        if loading:
            loaded = {r: "OnlineReplica" if state == "OnlineReplica" else "ReplicaDeletionIneligible"
                      for r, state in replicas.items()}
            out += [["replica", p, r, None, state] for r, state in loaded.items()]
            out += [["replica", p, r, loaded[r], state] for r, state in replicas.items()]
        else:
            out += [["replica", p, r, was[1].get(p, {}).get(r), state] for r, state in replicas.items()
                    if was[1].get(p, {}).get(r) != state]
    return out + elections if loading else elections + out


def _constant(expr: Expr) -> int:
    value = z3.simplify(expr)
    return int(value.as_signed_long()) if z3.is_bv_value(value) else int(value.as_long())


def _claims(s: State) -> list[tuple[Expr, Expr, Expr]]:
    """Who is named leader of which epoch in a state: (epoch, broker, whether the claim is made)."""
    out = [(s["leader_epoch"], s["leader"], and_(s["node"], s["leader"] != NO_LEADER))]
    out += [(s.b("local_leader_epoch", b), num(b, s.cfg.width), s.b("role", b) == ROLE_LEADER) for b in s.cfg.ids]
    return out


def _min2(a: Expr, b: Expr) -> Expr:
    return ite(a <= b, a, b)


def _eval_args(model: Expr, value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _eval_args(model, v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], int) for v in value):
            return [r for r, cond in value if py_value(model, cond)]
        return [_eval_args(model, v) for v in value]
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value[0] if py_value(model, value[1]) else ""
    if isinstance(value, bool | int | str) or value is None:
        return value
    return py_value(model, value)


def trace_state(model: Expr, s: State) -> dict[str, Any]:
    """A model state as the trace's full state (the variables of `VARIABLES`)."""
    cfg = s.cfg
    p = PARTITION

    def v(name: str) -> Any:
        return py_value(model, s[name])

    out = empty_state()
    out["controller"] = v("controller")
    out["controller_epoch"] = v("controller_epoch")
    if v("assigned"):
        out["assignment"][p] = [r for r in cfg.ids if v(f"assignment.{r}")]
    if v("node"):
        out["leader"][p] = v("leader")
        out["leader_epoch"][p] = v("leader_epoch")
        out["isr"][p] = [r for r in cfg.ids if v(f"isr.{r}")]
        out["partition_controller_epoch"][p] = v("partition_controller_epoch")
        out["partition_version"][p] = v("partition_version")
    for b in cfg.ids:
        key = str(b)
        out["acting_controller_epoch"][key] = v(f"acting_controller_epoch.{b}")
        out["alive"][key] = v(f"alive.{b}")
        out["broker_controller_epoch"][key] = v(f"broker_controller_epoch.{b}")
        if not v(f"replica.{b}"):
            continue
        role = ROLE_NAMES[v(f"role.{b}")]
        if role is not None:
            out["role"][key] = {p: role}
            out["local_isr"][key] = {p: [r for r in cfg.ids if v(f"local_isr.{b}.{r}")]}
        if role == "leader":
            out["epoch_start_offset"][key] = {p: v(f"epoch_start_offset.{b}")}
        epoch = v(f"local_leader_epoch.{b}")
        if epoch != NO_EPOCH:
            out["local_leader_epoch"][key] = {p: epoch}
        length = v(f"log_len.{b}")
        if cfg.logs == "content":
            entries = range(min(length, cfg.capacity))
            out["log"][key] = {p: [[v(f"log.{b}.{i}.e"), v(f"log.{b}.{i}.r")] for i in entries]}
        out["hw"][key] = {p: v(f"hw.{b}")}
        out["hw_checkpoint"][key] = {p: v(f"hw_checkpoint.{b}")}
    return out


def diff_states(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The delta between two full states at each variable's depth (the ITF-to-v2 direction)."""
    delta: dict[str, Any] = {}
    for name, depth in VARIABLES.items():
        a, b = before.get(name), after.get(name)
        if depth == 0:
            if a != b:
                delta[name] = b
            continue
        change = _diff_map(a or {}, b or {}, depth)
        if change:
            delta[name] = change
    return delta


def _diff_map(a: dict[str, Any], b: dict[str, Any], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sorted(set(a) | set(b)):
        if depth == 1:
            if key not in b:
                out[key] = None
            elif a.get(key) != b[key]:
                out[key] = b[key]
        else:
            inner = _diff_map(a.get(key, {}), b.get(key, {}), depth - 1)
            if inner:
                out[key] = inner
    return out


def bits_for(max_depth: int, capacity: int) -> int:
    """Enough bits for every integer of a run of `max_depth` steps: epochs, versions and record ids grow by
    at most one a step; offsets stay below the capacity."""
    largest = max_depth + capacity + 4
    return max(5, largest.bit_length() + 1)


def check_bmc_bounds(invariants: Iterable[str], max_depth: int, brokers: int, capacity: int, controller: int) -> None:
    """A ValueError naming the first argument of a search that cannot run."""
    unknown = [n for n in invariants if n not in BMC_INVARIANTS]
    if unknown:
        raise ValueError(f"invariant {unknown[0]!r} is not checked by the Z3 model "
                         f"(known: {', '.join(BMC_INVARIANTS)})")
    if max_depth < 1:
        raise ValueError("the depth must be at least 1")
    if brokers < 2:
        raise ValueError("the model needs at least 2 brokers")
    if capacity < 1:
        raise ValueError("the log capacity must be at least 1")
    if not 1 <= controller <= brokers:
        raise ValueError(f"the controller must be one of the brokers 1..{brokers}")


def run_bmc(
    knobs: Knobs,
    max_depth: int,
    brokers: int = 3,
    capacity: int = 2,
    invariants: Iterable[str] | None = None,
    run: str = "z3-bmc",
    on_depth: Callable[[int, float], None] | None = None,
    min_depth: int = 1,
    actions: Iterable[str] | None = None,
    controller: int = 1,
) -> BmcResult:
    """Shortest counterexample to any of `invariants` (default: all the model checks) up to `max_depth`,
    from the bootstrapped cluster with broker `controller` as its controller.

    Depths below `min_depth` are unrolled but not asked about (a counterexample shorter than that is not
    looked for): a way to go straight to a depth known to matter."""
    names = tuple(invariants) if invariants is not None else BMC_INVARIANTS
    check_bmc_bounds(names, max_depth, brokers, capacity, controller)
    cfg = _config(knobs, max_depth, brokers, capacity)
    start = time.perf_counter()
    result = BmcResult(knobs, brokers, max_depth, 0)
    # One query at a single depth: the finite-domain solver answers it faster (measured 3-9 s against 9-11 s
    # for the KAFKA-1211 counterexample; Z3's default solver took longer on the KIP-320 case); depth by depth,
    # the incremental bit-vector solver does better.
    unrolling = Unrolling(cfg, "QF_FD" if min_depth >= max_depth else "QF_BV",
                          None if actions is None else frozenset(actions), controller)
    solver = unrolling.solver
    order = [n for n in BMC_INVARIANTS if n in names]
    for k in range(1, max_depth + 1):
        began = time.perf_counter()
        unrolling.extend()
        broken = unrolling.violations(order)
        result.depth = k
        if k < min_depth:
            result.per_depth.append(time.perf_counter() - began)
            continue
        solver.push()
        solver.add(or_all(broken.values()))
        verdict = solver.check()
        model = solver.model() if verdict == z3.sat else None
        solver.pop()
        if model is not None:
            _name_violation(result, unrolling, model, broken, order, run)
        result.per_depth.append(time.perf_counter() - began)
        if on_depth is not None:
            on_depth(k, result.per_depth[-1])
        if result.found:
            break
        if verdict != z3.unsat:
            raise RuntimeError(f"z3 answered {verdict} at depth {k}")
    result.seconds = time.perf_counter() - start
    return result


def _config(knobs: Knobs, max_depth: int, brokers: int, capacity: int) -> Config:
    return Config(brokers=brokers, knobs=knobs, logs="content", capacity=capacity, history="states",
                  width=bits_for(max_depth, capacity))


def depth_query(bug: BmcBug, depth: int) -> list[Expr]:
    """What BMC asks of the solver at `depth` of a known bug's search: the unrolling to `depth` and the
    bug's invariant broken at its last state or step. Satisfiable exactly when a counterexample of that
    depth exists, so the story's depth - 1 gives the refutation a shortest counterexample needs."""
    told = bug.story
    cfg = _config(bug.knobs, told.depth, told.brokers, told.capacity)
    unrolling = Unrolling(cfg, actions=None if told.actions is None else frozenset(told.actions),
                          controller=told.controller)
    for _ in range(depth):
        unrolling.extend()
    broken = unrolling.violations([bug.invariant])
    return [*unrolling.solver.assertions(), or_all(broken.values())]


def dimacs(formulas: list[Expr]) -> str:
    """The formulas bit-blasted to CNF, in DIMACS, for any SAT solver (the steps Z3's own bit-vector
    solver takes before its SAT core)."""
    goal = z3.Goal()
    goal.add(*formulas)
    cnf = z3.Then("simplify", "propagate-values", "solve-eqs", "bit-blast", "tseitin-cnf")(goal)
    return str(cnf[0].dimacs())


def _name_violation(result: BmcResult, unrolling: Unrolling, model: Any, broken: dict[str, Expr],
                    order: list[str], run: str) -> None:
    """Report the first invariant in `order` that can break at this depth. The model at hand already
    breaks one: the solver is asked again only about the invariants ahead of it in `order`."""
    solver = unrolling.solver
    for name in order:
        if z3.is_true(model.eval(broken[name], model_completion=True)):
            result.invariant = name
            result.events = unrolling.trace(model, name, run)
            return
        solver.push()
        solver.add(broken[name])
        if solver.check() == z3.sat:
            result.invariant = name
            result.events = unrolling.trace(solver.model(), name, run)
        solver.pop()
        if result.found:
            return


# -- the known bugs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BmcBug:
    """A known bug of a design (the one catalogue: kcm.spec.designs.KNOWN_BUGS) as BMC reaches it: by its
    story, on the bounds of its reproduction model."""

    bug: KnownBug
    model: str
    story: BmcStory

    @property
    def label(self) -> str:
        return self.bug.label

    @property
    def knobs(self) -> Knobs:
        return self.bug.knobs

    @property
    def invariant(self) -> str:
        return self.bug.invariant

    def run(self, depth: int | None = None, on_depth: Callable[[int, float], None] | None = None) -> BmcResult:
        """The search to the story's depth, or to `depth`."""
        told = self.story
        return run_bmc(self.knobs, depth or told.depth, brokers=told.brokers, on_depth=on_depth,
                       capacity=told.capacity, invariants=[self.invariant], actions=told.actions,
                       controller=told.controller)


# A manifest's story names its reproduction model (kcm.spec.design_folder refuses one that does not).
BMC_BUGS: Final = tuple(BmcBug(bug, bug.model, bug.bmc) for bug in KNOWN_BUGS
                        if bug.bmc is not None and bug.model is not None)
