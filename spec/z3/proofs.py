"""Universal proofs: properties of the elections, the state tables, the fences and the epochs, proved for
every input up to N brokers (not for examples). Each proof asks z3 for a counterexample: `unsat` proves
the property, a model is a counterexample (shown as the inputs that break it).

Every property fails, with a model, when the rule or knob it depends on is broken (`Rules`, `Knobs`):
the tests assert both directions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kcm.spec.states import (
    PARTITION_STATES,
    REPLICA_STATES,
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    Table,
)
from kcm.spec.verdicts import HOLDS, UNKNOWN, VIOLATED
from kcm.spec.vocabulary import NO_LEADER, Knobs
from kcm.spec.z3 import elections, tables
from kcm.spec.z3.actions import Effect, Relations, relation
from kcm.spec.z3.elections import ElectionInput, Outcome, member
from kcm.spec.z3.model import ROLE_LEADER, Config, Rules, State
from kcm.spec.z3.solver import Expr, and_, and_all, implies, int_const, not_, or_, or_all, py_value, z3


@dataclass
class ProofResult:
    property: str
    result: str  # holds | violated | unknown (kcm.spec.verdicts)
    seconds: float
    group: str = ""
    model: dict[str, Any] | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"property": self.property, "result": self.result, "seconds": round(self.seconds, 4),
                               "group": self.group}
        if self.model is not None:
            out["model"] = self.model
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass
class Obligation:
    """`premises => claim`, and how to show a counterexample."""

    group: str
    name: str
    premises: list[Expr]
    claim: Expr
    show: Callable[[Expr], dict[str, Any]] = field(default=lambda m: {})


def discharge(ob: Obligation, timeout_ms: int = 60_000) -> ProofResult:
    start = time.perf_counter()
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*ob.premises)
    solver.add(not_(ob.claim))
    verdict = solver.check()
    seconds = time.perf_counter() - start
    if verdict == z3.unsat:
        return ProofResult(ob.name, HOLDS, seconds, ob.group)
    if verdict == z3.sat:
        return ProofResult(ob.name, VIOLATED, seconds, ob.group, model=ob.show(solver.model()))
    return ProofResult(ob.name, UNKNOWN, seconds, ob.group, detail=str(solver.reason_unknown()))


# -- the elections ------------------------------------------------------------------------------------------


@dataclass
class _Symbolic:
    n: int
    assignment: list[Expr]
    alen: Expr
    target: list[Expr]
    tlen: Expr
    isr: dict[int, Expr]
    isr_position: dict[int, Expr]
    live: dict[int, Expr]
    shutting: dict[int, Expr]
    leader: Expr
    epoch: Expr
    premises: list[Expr]

    live_fn: Expr = None
    isr_fn: Expr = None
    shutting_fn: Expr = None

    def input(self) -> ElectionInput:
        return ElectionInput(
            is_live=self.live_fn, in_isr=self.isr_fn, is_shutting_down=self.shutting_fn,
            assignment=[(a, i < self.alen) for i, a in enumerate(self.assignment)],
            isr=self.isr,
            isr_position=self.isr_position,
            live=self.live,
            shutting_down=self.shutting,
            target=[(a, i < self.tlen) for i, a in enumerate(self.target)],
            leader_epoch=self.epoch,
        )

    def assigned(self, x: Expr) -> Expr:
        return or_all(and_(i < self.alen, a == x) for i, a in enumerate(self.assignment))

    def targeted(self, x: Expr) -> Expr:
        return or_all(and_(i < self.tlen, a == x) for i, a in enumerate(self.target))

    def show(self, model: Expr, outcome: Outcome | None = None) -> dict[str, Any]:
        def ids(members: dict[int, Expr]) -> list[int]:
            return [b for b, inside in members.items() if py_value(model, inside)]

        alen = int(py_value(model, self.alen))
        tlen = int(py_value(model, self.tlen))
        isr = sorted(ids(self.isr), key=lambda b: int(py_value(model, self.isr_position[b])))
        out: dict[str, Any] = {
            "assignment": [py_value(model, a) for a in self.assignment[:alen]],
            "isr (in its order)": isr,
            "live": ids(self.live),
            "shutting_down": ids(self.shutting),
            "target": [py_value(model, a) for a in self.target[:tlen]],
            "leader_epoch": py_value(model, self.epoch),
        }
        if outcome is not None:
            out["elected"] = py_value(model, outcome.leader)
            out["new_isr"] = ids(outcome.isr)
            out["new_leader_epoch"] = py_value(model, outcome.leader_epoch)
        return out


def _symbolic(n: int) -> _Symbolic:
    # Broker ids, positions and lengths are small: bit-vectors make these proofs cheap; the epoch stays an
    # unbounded integer.
    width = max(5, (n + 1).bit_length() + 1)

    def seq(name: str) -> tuple[list[Expr], Expr, list[Expr]]:
        items = [int_const(f"{name}{i}", width) for i in range(n)]
        length = int_const(f"{name}_len", width)
        premises = [length >= 1, length <= n]
        for i, a in enumerate(items):
            premises.append(implies(i < length, and_(a >= 0, a < n)))
            for j in range(i):
                premises.append(implies(i < length, items[j] != a))
        return items, length, premises

    assignment, alen, p1 = seq("a")
    target, tlen, p2 = seq("t")
    # Brokers 0..n-1, as Kafka's sample configuration numbers them; NO_LEADER (-1) is none of them.
    ids = range(n)
    sort = z3.BitVecSort(width)
    live_fn = z3.Function("live", sort, z3.BoolSort())
    isr_fn = z3.Function("in_isr", sort, z3.BoolSort())
    shutting_fn = z3.Function("shutting_down", sort, z3.BoolSort())
    sym = _Symbolic(
        n=n, assignment=assignment, alen=alen, target=target, tlen=tlen,
        isr={b: isr_fn(z3.BitVecVal(b, width)) for b in ids},
        isr_position={b: int_const(f"isr_pos{b}", width) for b in ids},
        live={b: live_fn(z3.BitVecVal(b, width)) for b in ids},
        shutting={b: shutting_fn(z3.BitVecVal(b, width)) for b in ids},
        leader=int_const("leader"), epoch=int_const("leader_epoch"), premises=p1 + p2,
        live_fn=live_fn, isr_fn=isr_fn, shutting_fn=shutting_fn,
    )
    # Outside the broker ids nothing is live, in the ISR or shutting down.
    x = z3.BitVec("x", width)
    outside = or_(x < 0, x >= n)
    sym.premises.append(z3.ForAll([x], implies(outside, and_(not_(live_fn(x)), not_(isr_fn(x)), not_(shutting_fn(x))))))
    # What holds of the partition before any election: the ISR is a non-empty subset of the assignment,
    # listed in some order; the reassignment's target was added to the assignment (OAR + RAR).
    sym.premises += [implies(sym.isr[b], sym.assigned(b)) for b in ids]
    sym.premises.append(or_all(sym.isr.values()))
    for b in ids:
        for c in ids:
            if b < c:
                sym.premises.append(implies(and_(sym.isr[b], sym.isr[c]),
                                            sym.isr_position[b] != sym.isr_position[c]))
        sym.premises.append(implies(sym.isr[b], and_(sym.isr_position[b] >= 0, sym.isr_position[b] < n)))
        sym.premises.append(implies(sym.targeted(b), sym.assigned(b)))
    sym.premises.append(sym.epoch >= 0)
    return sym


def _first_in_order(order: list[Expr], length: Expr, accept: Callable[[Expr], Expr], leader: Expr) -> Expr:
    """Declaratively: `leader` is the first element of `order` that `accept`s (NO_LEADER if none does)."""
    parts = []
    for i, a in enumerate(order):
        earlier = [and_(j < length, accept(order[j])) for j in range(i)]
        parts.append(and_(i < length, a == leader, accept(a), not_(or_all(earlier))))
    none = and_(leader == NO_LEADER, not_(or_all(and_(i < length, accept(a)) for i, a in enumerate(order))))
    return or_(none, *parts)


def election_obligations(n: int, knobs: Knobs, rules: Rules) -> Iterator[Obligation]:
    sym = _symbolic(n)
    inp = sym.input()

    def live(x: Expr) -> Expr:
        return inp.live_(x)

    def in_isr(x: Expr) -> Expr:
        return inp.isr_(x)

    any_clean = or_all(and_(i < sym.alen, live(a), in_isr(a)) for i, a in enumerate(sym.assignment))
    unclean = knobs.unclean_election

    def offline_accept(x: Expr) -> Expr:
        fallback = live(x) if unclean else z3.BoolVal(False)
        return z3.If(any_clean, and_(live(x), in_isr(x)), fallback)

    cases: list[tuple[str, Outcome, Callable[[Expr], Expr], str]] = [
        ("offline", elections.offline(inp, unclean, rules), sym.assigned, "assignment"),
        ("reassign", elections.reassign(inp, rules), sym.targeted, "target"),
        ("preferred", elections.preferred(inp, rules), sym.assigned, "assignment"),
        ("controlled_shutdown", elections.controlled_shutdown(inp, rules), sym.assigned, "assignment"),
    ]
    for name, outcome, where, order_name in cases:
        leader = outcome.leader
        elected = leader != NO_LEADER

        def show(model: Expr, outcome: Outcome = outcome) -> dict[str, Any]:
            return sym.show(model, outcome)

        group = f"election/{name}"
        yield Obligation(group, f"{name} election: the leader is a live replica of the {order_name}",
                         sym.premises, implies(elected, and_(live(leader), where(leader))), show)
        yield Obligation(group, f"{name} election: the leader is in the ISR",
                         sym.premises, implies(elected, in_isr(leader)), show)
        if name == "offline":
            order_claim = _first_in_order(sym.assignment, sym.alen, offline_accept, leader)
        elif name == "reassign":
            order_claim = _first_in_order(sym.target, sym.tlen, lambda x: and_(live(x), in_isr(x)), leader)
        elif name == "preferred":
            head = sym.assignment[0]
            order_claim = z3.If(and_(live(head), in_isr(head)), leader == head, leader == NO_LEADER)
        else:
            order_claim = _first_in_order(sym.assignment, sym.alen,
                                          lambda x: and_(live(x), in_isr(x), not_(inp.shutting_(x))), leader)
        first_what = "the preferred (first assigned) replica" if name == "preferred" else \
            f"the first qualifying replica in {order_name} order"
        yield Obligation(group, f"{name} election: picks {first_what}", sym.premises, order_claim, show)
        new_isr = outcome.isr
        yield Obligation(group, f"{name} election: the new ISR is within the assignment and holds the leader",
                         sym.premises,
                         implies(elected, and_(member(new_isr, leader),
                                               *[implies(new_isr[b], sym.assigned(b)) for b in new_isr])), show)
        yield Obligation(group, f"{name} election: the leader epoch goes up",
                         sym.premises, implies(elected, outcome.leader_epoch > sym.epoch), show)


# -- the state tables -----------------------------------------------------------------------------------------


def _given(table: Table | None, model: Table) -> Table:
    """The implementation's table, as the caller gave it in `Rules`, or the model's."""
    return model if table is None else table


def table_obligations(rules: Rules) -> Iterator[Obligation]:
    kinds = (
        ("partition", PARTITION_STATES, tables.PARTITION_CODE, VALID_PREVIOUS_PARTITION_STATES,
         _given(rules.partition_table, VALID_PREVIOUS_PARTITION_STATES)),
        ("replica", REPLICA_STATES, tables.REPLICA_CODE, VALID_PREVIOUS_REPLICA_STATES,
         _given(rules.replica_table, VALID_PREVIOUS_REPLICA_STATES)),
    )
    for kind, names, codes, spec, impl in kinds:
        src, dst = z3.Int(f"{kind}_from"), z3.Int(f"{kind}_to")
        domain = [src >= 0, src < len(names), dst >= 0, dst < len(names)]

        def show(model: Expr, src: Expr = src, dst: Expr = dst, names: tuple[str, ...] = names) -> dict[str, Any]:
            return {"from": names[int(py_value(model, src))], "to": names[int(py_value(model, dst))]}

        group = f"tables/{kind}"
        yield Obligation(group, f"{kind} table: the implementation's valid previous states are Kafka's", domain,
                         tables.valid(impl, codes, src, dst) == tables.valid(spec, codes, src, dst), show)
        after, refused = tables.machine_step(impl, codes, src, dst)
        yield Obligation(group, f"{kind} state machine: refuses exactly the invalid transitions", domain,
                         and_(refused == not_(tables.valid(spec, codes, src, dst)),
                              implies(refused, after == src), implies(not_(refused), after == dst)), show)
    yield from _path_obligations(rules)


def _path_obligations(rules: Rules) -> Iterator[Obligation]:
    """Bounded reachability through the state machine: any sequence of requested transitions."""
    cases = (
        ("replica", tables.REPLICA_CODE, REPLICA_STATES,
         _given(rules.replica_table, VALID_PREVIOUS_REPLICA_STATES), "OnlineReplica", "NonExistentReplica",
         ("OfflineReplica", "ReplicaDeletionStarted", "ReplicaDeletionSuccessful"), 6),
        ("partition", tables.PARTITION_CODE, PARTITION_STATES,
         _given(rules.partition_table, VALID_PREVIOUS_PARTITION_STATES), "OnlinePartition", "NonExistentPartition",
         ("OfflinePartition",), 4),
    )
    for kind, codes, names, table, start, end, through, steps in cases:
        targets = [z3.Int(f"{kind}_request{i}") for i in range(steps)]
        states = [z3.IntVal(codes[start])]
        premises = []
        for target in targets:
            premises += [target >= 0, target < len(names)]
            after, _ = tables.machine_step(table, codes, states[-1], target)
            states.append(after)
        visited = {name: or_all(s == codes[name] for s in states) for name in through}
        ordered = and_all(visited.values())

        def show(model: Expr, targets: list[Expr] = targets, states: list[Expr] = states,
                 names: tuple[str, ...] = names) -> dict[str, Any]:
            return {"requests": [names[int(py_value(model, t))] for t in targets],
                    "states": [names[int(py_value(model, s))] for s in states]}

        yield Obligation(f"tables/{kind}",
                         f"{kind} state machine: {start} reaches {end} only through {', '.join(through)}",
                         premises, implies(states[-1] == codes[end], ordered), show)


# -- fences and epochs over the transition relation --------------------------------------------------------


def _states(cfg: Config) -> tuple[State, State, Relations]:
    s, t = State(cfg, "pre."), State(cfg, "post.")
    return s, t, Relations(cfg, s, t, tag="p.")


def _show_step(s: State, t: State, effect: Effect, keys: list[str]) -> Callable[[Expr], dict[str, Any]]:
    def show(model: Expr) -> dict[str, Any]:
        out: dict[str, Any] = {"action": effect.label}
        out.update({f"param {k}": py_value(model, v) for k, v in effect.params.items()
                    if k in ("controller_epoch", "leader_epoch", "leader", "applied", "version")})
        for key in keys:
            before, after = py_value(model, s[key]), py_value(model, t[key])
            out[key] = before if before == after else f"{before} -> {after}"
        return out
    return show


def relation_obligations(n: int, knobs: Knobs, rules: Rules) -> Iterator[Obligation]:
    cfg = Config(brokers=n, knobs=knobs, rules=rules, logs="length", history="none", validation=True)
    s, t, rel = _states(cfg)
    b = 1
    replica_keys = [k for k in s.names() if k.split(".")[0] in
                    ("replica", "role", "local_leader_epoch", "log_len", "hw", "hw_checkpoint", "epoch_start_offset")
                    and k.endswith(f".{b}")]
    for effect in (rel.leader_and_isr(b), rel.update_metadata(b), rel.stop_replica(b)):
        assert effect.request_ce is not None and effect.applied is not None
        stale = effect.request_ce < s.b("broker_controller_epoch", b)
        unchanged = and_all(t[k] == s[k] for k in replica_keys)
        keys = [f"broker_controller_epoch.{b}", f"role.{b}", f"local_leader_epoch.{b}"]
        yield Obligation("fencing", f"{effect.action}: a request from an older controller epoch is not applied",
                         [relation(effect, s, t), stale],
                         and_(not_(effect.applied), unchanged,
                              t.b("broker_controller_epoch", b) == s.b("broker_controller_epoch", b)),
                         _show_step(s, t, effect, keys))
    store_keys = ["leader", "leader_epoch", "assigned", *[f"isr.{r}" for r in cfg.ids],
                  *[f"assignment.{r}" for r in cfg.ids]]
    deposed = s.b("acting_controller_epoch", b) != s["controller_epoch"]
    for effect in (rel.broker_change(b), rel.controller_decision(b)):
        yield Obligation("fencing", f"{effect.action}: a deposed controller's write does not succeed",
                         [relation(effect, s, t), deposed, s["node"]],
                         and_all(t[k] == s[k] for k in store_keys),
                         _show_step(s, t, effect, ["controller_epoch", f"acting_controller_epoch.{b}",
                                                   "leader", "leader_epoch"]))
    for effect in (rel.broker_change(b), rel.controller_elect(b)):
        yield Obligation("epochs", f"{effect.action}: a change of leader or ISR bumps the leader epoch",
                         [relation(effect, s, t), s["node"], s["leader_epoch"] >= 0],
                         implies(or_(t["leader"] != s["leader"], *[t.isr(r) != s.isr(r) for r in cfg.ids]),
                                 t["leader_epoch"] > s["leader_epoch"]),
                         _show_step(s, t, effect, ["leader", "leader_epoch"]))
    effect = rel.leader_and_isr(b)
    yield Obligation("epochs", "LeaderAndIsr: a broker only moves to a newer leader epoch",
                     [relation(effect, s, t), s.b("replica", b), s.b("local_leader_epoch", b) >= 0],
                     implies(t.b("local_leader_epoch", b) != s.b("local_leader_epoch", b),
                             t.b("local_leader_epoch", b) > s.b("local_leader_epoch", b)),
                     _show_step(s, t, effect, [f"local_leader_epoch.{b}", f"role.{b}"]))
    yield Obligation("epochs", "LeaderAndIsr: a broker becomes leader only if the request names it",
                     [relation(effect, s, t), s.b("role", b) != ROLE_LEADER],
                     implies(t.b("role", b) == ROLE_LEADER, effect.params["leader"] == b),
                     _show_step(s, t, effect, [f"role.{b}"]))
    summary = rel.controller_decision(b)
    precise = rel.broker_change(b)
    yield Obligation("refinement", "BrokerChange (model checking) refines ControllerDecision (step validation)",
                     [relation(precise, s, t), s["node"], s["assigned"], s["leader_epoch"] >= 0,
                      s["partition_version"] >= 0, cfg.broker_or_none(s["leader"]),
                      or_(s["leader"] == NO_LEADER, s.isr_has(s["leader"])), or_all(s.isr(r) for r in cfg.ids),
                      *[implies(s.isr(r), s.assigned(r)) for r in cfg.ids]],
                     and_all(g for _, g in summary.guards),
                     _show_step(s, t, precise, ["leader", "leader_epoch"]))


# -- running them -------------------------------------------------------------------------------------------


def obligations(brokers: int = 8, knobs: Knobs | None = None, rules: Rules | None = None) -> list[Obligation]:
    knobs = knobs or Knobs()
    rules = rules or Rules()
    return [*election_obligations(brokers, knobs, rules), *table_obligations(rules),
            *relation_obligations(brokers, knobs, rules)]


def run_proofs(brokers: int = 8, knobs: Knobs | None = None, rules: Rules | None = None,
               on_result: Callable[[ProofResult], None] | None = None, only: str | None = None) -> list[ProofResult]:
    """Discharge every obligation (or those whose name or group contains `only`)."""
    if brokers < 2:
        raise ValueError("the proofs need at least 2 brokers")
    results = []
    for ob in obligations(brokers, knobs, rules):
        if only is not None and only not in ob.name and only not in ob.group:
            continue
        result = discharge(ob)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
