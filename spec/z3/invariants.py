"""The invariants of docs/invariants.md as z3 formulas, under their shared names, and the lemmas the
induction draws its strengthening from.

State invariants are formulas over one state; step invariants over a pair of states and the action
taken. `OneLeaderPerEpoch` is a history property: with the ghost `g.epoch_leader` (the first broker ever
named leader of each epoch, kept by every write of the state node) it becomes a state formula: every
leader named now, by the store or by a broker, is the one first named for its epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kcm.spec.vocabulary import HW_PER_LEADER, NO_LEADER
from kcm.spec.z3.actions import Effect, fence_obligation
from kcm.spec.z3.model import NO_EPOCH, ROLE_LEADER, UNSET, Config, State
from kcm.spec.z3.solver import (
    Expr,
    and_,
    and_all,
    const_bool_array,
    const_int_array,
    implies,
    not_,
    or_,
    or_all,
    select,
    store,
    z3,
)

StateFormula = Callable[[State], Expr]


# -- state invariants ------------------------------------------------------------------------------------


def isr_subset_of_replicas(s: State) -> Expr:
    return implies(and_(s["node"], s["assigned"]), and_all(implies(s.isr(r), s.assigned(r)) for r in s.cfg.ids))


def leader_in_isr(s: State) -> Expr:
    return implies(s["node"], or_(s["leader"] == NO_LEADER, s.isr_has(s["leader"])))


def one_leader_per_epoch(s: State) -> Expr:
    ids = s.cfg.ids
    if not s.cfg.ghosts:
        # Without history: no two brokers lead in one epoch, and a broker leading in the store's epoch is
        # the store's leader.
        pairs = [
            not_(and_(s.b("role", a) == ROLE_LEADER, s.b("role", b) == ROLE_LEADER,
                      s.b("local_leader_epoch", a) == s.b("local_leader_epoch", b)))
            for a in ids for b in ids if a < b
        ]
        same = [
            implies(and_(s["node"], s["leader"] != NO_LEADER, s.b("role", b) == ROLE_LEADER,
                         s.b("local_leader_epoch", b) == s["leader_epoch"]), s["leader"] == b)
            for b in ids
        ]
        return and_all(pairs + same)
    history = s["g.epoch_leader"]
    store_claim = implies(and_(s["node"], s["leader"] != NO_LEADER), select(history, s["leader_epoch"]) == s["leader"])
    broker_claims = [
        implies(s.b("role", b) == ROLE_LEADER, select(history, s.b("local_leader_epoch", b)) == b) for b in ids
    ]
    return and_(store_claim, *broker_claims)


def hw_within_log(s: State) -> Expr:
    return and_all(s.b("hw", b) <= s.b("log_len", b) for b in s.cfg.ids)


def replica_logs_agree(s: State) -> Expr:
    cfg = s.cfg
    if cfg.logs != "content":
        return z3.BoolVal(True)
    parts = []
    for a in cfg.ids:
        for b in cfg.ids:
            if a >= b:
                continue
            k = _min(s.b("hw", a), s.b("hw", b), s.b("log_len", a), s.b("log_len", b))
            for i in range(cfg.capacity):
                ea, eb = s.entry(a, i), s.entry(b, i)
                parts.append(implies(and_(s.b("replica", a), s.b("replica", b), i < k),
                                     and_(ea[0] == eb[0], ea[1] == eb[1])))
    return and_all(parts)


def _min(*xs: Expr) -> Expr:
    out = xs[0]
    for x in xs[1:]:
        out = z3.If(x < out, x, out)
    return out


STATE_INVARIANTS: Final[dict[str, StateFormula]] = {
    "OneLeaderPerEpoch": one_leader_per_epoch,
    "IsrSubsetOfReplicas": isr_subset_of_replicas,
    "LeaderInIsr": leader_in_isr,
    "HighWatermarkWithinLog": hw_within_log,
    "ReplicaLogsAgree": replica_logs_agree,
}


# -- step invariants ---------------------------------------------------------------------------------------


def controller_epoch_monotonic(s: State, t: State) -> Expr:
    brokers = [implies(and_(s.b("alive", b), t.b("alive", b)),
                       t.b("broker_controller_epoch", b) >= s.b("broker_controller_epoch", b)) for b in s.cfg.ids]
    elected = and_(t["controller"] != NO_LEADER, t["controller"] != s["controller"])
    return and_(t["controller_epoch"] >= s["controller_epoch"],
                implies(elected, t["controller_epoch"] > s["controller_epoch"]), *brokers)


def leader_epoch_monotonic(s: State, t: State) -> Expr:
    brokers = [implies(and_(s.b("local_leader_epoch", b) != NO_EPOCH, t.b("local_leader_epoch", b) != NO_EPOCH),
                       t.b("local_leader_epoch", b) >= s.b("local_leader_epoch", b)) for b in s.cfg.ids]
    return and_(implies(and_(s["node"], t["node"]), t["leader_epoch"] >= s["leader_epoch"]), *brokers)


def hw_per_leader_epoch(s: State, t: State) -> Expr:
    return and_all(
        implies(and_(s.b("role", b) == ROLE_LEADER, t.b("role", b) == ROLE_LEADER,
                     s.b("local_leader_epoch", b) == t.b("local_leader_epoch", b)),
                t.b("hw", b) >= s.b("hw", b))
        for b in s.cfg.ids
    )


def exposed_hw(s: State) -> tuple[Expr, Expr]:
    """Whether the partition has a current leader (the store's leader, leading in the store's epoch) that
    exposes its HW, and that HW. With kip320 a new leader withholds its HW until it reaches its epoch start
    offset (the KAFKA-2334 fix)."""
    on: Expr = z3.BoolVal(False)
    hw: Expr = s.b("hw", s.cfg.ids[0])
    for b in s.cfg.ids:
        leads = and_(s["node"], s["leader"] == b, s.b("role", b) == ROLE_LEADER,
                     s.b("local_leader_epoch", b) == s["leader_epoch"])
        if s.cfg.knobs.truncation == "kip320":
            leads = and_(leads, s.b("hw", b) >= s.b("epoch_start_offset", b))
        on = or_(on, leads)
        hw = z3.If(leads, s.b("hw", b), hw)
    return on, hw


def stale_controller_fenced(s: State, t: State, effects: list[Effect], choice: Expr) -> Expr:
    return and_all(implies(choice == i, fence_obligation(e, s, t)) for i, e in enumerate(effects))


STEP_INVARIANTS: Final[dict[str, Callable[[State, State], Expr]]] = {
    "ControllerEpochMonotonic": controller_epoch_monotonic,
    "LeaderEpochMonotonic": leader_epoch_monotonic,
    HW_PER_LEADER: hw_per_leader_epoch,
}


# -- the initial state -------------------------------------------------------------------------------------


def initial(s: State, controller: int = 1) -> Expr:
    """The cluster once bootstrapped: broker `controller` is controller in epoch 1, broker 1 leads the
    partition (assigned to every broker) in leader epoch 0; every broker has applied that decision; logs
    are empty."""
    cfg = s.cfg
    ids = cfg.ids
    parts: list[Expr] = [
        s["controller"] == controller, s["controller_epoch"] == 1, s["assigned"], s["node"],
        s["leader"] == 1, s["leader_epoch"] == 0, s["partition_controller_epoch"] == 1, s["partition_version"] == 0,
    ]
    for r in ids:
        parts += [s.assigned(r), s.isr(r)]
    for b in ids:
        leader = b == 1
        parts += [
            s.b("alive", b), s.b("registered", b), not_(s.b("bounced", b)), s.b("horizon", b) == 0,
            s.b("acting_controller_epoch", b) == (1 if b == controller else 0), s.b("broker_controller_epoch", b) == 1,
            s.b("replica", b), s.b("role", b) == (ROLE_LEADER if leader else 2), s.b("local_leader_epoch", b) == 0,
            s.b("log_len", b) == 0, s.b("hw", b) == 0, s.b("hw_checkpoint", b) == 0, s.b("epoch_start_offset", b) == 0,
            s.b("leader_id", b) == 1, s.b("known_version", b) == 0, not_(s.b("truncating", b)),
        ]
        for r in ids:
            parts.append(s.local_isr(b, r))
            parts.append(s.fleo(b, r) == -1)
        if cfg.logs == "content":
            for i in range(cfg.capacity):
                parts += [s.entry(b, i)[0] == 0, s.entry(b, i)[1] == 0]
        if cfg.machines:
            parts.append(s.b("partition_state", b) == 0)
            parts += [s[f"replica_state.{b}.{r}"] == 0 for r in ids]
    if cfg.ghosts:
        parts.append(s["g.epoch_leader"] == store(const_int_array(UNSET), 0, 1))
        parts += [s["g.ver_epoch"] == store(const_int_array(0), 0, 0),
                  s["g.ver_leader"] == store(const_int_array(UNSET), 0, 1),
                  s["g.ver_ce"] == store(const_int_array(0), 0, 1)]
        parts += [s[f"g.ver_isr.{r}"] == store(const_bool_array(False), 0, True) for r in ids]
    if cfg.logs == "content" and not cfg.validation:
        parts.append(s["g.next_record"] == 1)
    return and_all(parts)


def _all_epochs(s: State, body: Callable[[Expr], Expr]) -> Expr:
    e = z3.Int("epoch")
    return z3.ForAll([e], body(e))


# -- lemmas: the candidate strengthenings of the induction ----------------------------------------------


@dataclass(frozen=True, slots=True)
class Lemma:
    name: str
    text: str
    formula: StateFormula


def _versions(s: State, body: Callable[[Expr], Expr]) -> Expr:
    v = z3.Int("version")
    return z3.ForAll([v], implies(and_(v >= 0, v <= s["partition_version"]), body(v)))


def lemmas(cfg: Config) -> list[Lemma]:
    """Facts about reachable states, each a candidate conjunct of an inductive invariant."""
    ids = cfg.ids

    def each(f: Callable[[State, int], Expr]) -> StateFormula:
        return lambda s: and_all(f(s, b) for b in ids)

    def pool(s: State) -> Expr:
        def body(v: Expr) -> Expr:
            leader = select(s["g.ver_leader"], v)
            epoch = select(s["g.ver_epoch"], v)
            isr = {r: select(s[f"g.ver_isr.{r}"], v) for r in ids}
            return and_(
                epoch >= 0, epoch <= s["leader_epoch"], cfg.broker_or_none(leader),
                implies(leader != NO_LEADER, select(s["g.epoch_leader"], epoch) == leader),
                implies(leader != NO_LEADER, or_all(and_(leader == r, isr[r]) for r in ids)),
                and_all(implies(isr[r], s.assigned(r)) for r in ids),
            )
        return _versions(s, body)

    return [
        Lemma("NodeExists", "the partition's state node and assignment exist",
              lambda s: and_(s["node"], s["assigned"])),
        Lemma("EpochsInRange", "0 <= acting, seen and node controller epochs <= controller_epoch; "
              "leader epoch, version >= 0; controller and leader are broker ids or NO_LEADER",
              lambda s: and_(s["controller_epoch"] >= 0, s["leader_epoch"] >= 0, s["partition_version"] >= 0,
                             s["partition_controller_epoch"] >= 0,
                             s["partition_controller_epoch"] <= s["controller_epoch"],
                             cfg.broker_or_none(s["controller"]), cfg.broker_or_none(s["leader"]),
                             *[and_(s.b("acting_controller_epoch", b) >= 0,
                                    s.b("acting_controller_epoch", b) <= s["controller_epoch"],
                                    s.b("broker_controller_epoch", b) >= 0,
                                    s.b("broker_controller_epoch", b) <= s["controller_epoch"]) for b in ids])),
        Lemma("HolderActsInCurrentEpoch", "the holder of /controller acts in the current controller epoch "
              "(or has resigned: a broker that won while its session was being renewed resigns on re-registering)",
              lambda s: and_all(implies(s["controller"] == b, or_(
                  s.b("acting_controller_epoch", b) == s["controller_epoch"],
                  s.b("acting_controller_epoch", b) == 0)) for b in ids)),
        Lemma("ReplicasExist", "every broker holds a replica of the partition (none is deleted in the model)",
              each(lambda s, b: s.b("replica", b))),
        Lemma("NoNewerLocalEpoch", "no broker knows a leader epoch newer than the store's",
              each(lambda s, b: and_(s.b("local_leader_epoch", b) >= NO_EPOCH,
                                     s.b("local_leader_epoch", b) <= s["leader_epoch"]))),
        Lemma("KnownVersionInRange", "every broker's known node version is one the node had",
              each(lambda s, b: and_(s.b("known_version", b) >= 0,
                                     s.b("known_version", b) <= s["partition_version"]))),
        Lemma("NewestVersionIsTheNode", "the history's newest version is the state node itself",
              lambda s: and_(select(s["g.ver_epoch"], s["partition_version"]) == s["leader_epoch"],
                             select(s["g.ver_leader"], s["partition_version"]) == s["leader"],
                             *[select(s[f"g.ver_isr.{r}"], s["partition_version"]) == s.isr(r) for r in ids])),
        Lemma("CurrentLeaderMatchesNode", "a leader whose known version is the node's is the node's leader, "
              "in its epoch, with its ISR (why its compare-and-set writes are safe)",
              each(lambda s, b: implies(
                  and_(s.b("role", b) == ROLE_LEADER, s.b("known_version", b) == s["partition_version"]),
                  and_(s["leader"] == b, s.b("local_leader_epoch", b) == s["leader_epoch"],
                       *[s.local_isr(b, r) == s.isr(r) for r in ids])))),
        Lemma("LeaderKnowsItselfInIsr", "a leader's ISR holds itself and only assigned replicas",
              each(lambda s, b: implies(s.b("role", b) == ROLE_LEADER, and_(
                  s.local_isr(b, b), *[implies(s.local_isr(b, r), s.assigned(r)) for r in ids])))),
        Lemma("LeadersAreRecorded", "every leader named now is the one recorded for its epoch",
              one_leader_per_epoch),
        Lemma("NoFutureEpochRecorded", "no leader is recorded for an epoch after the store's",
              lambda s: _all_epochs(s, lambda e: implies(e > s["leader_epoch"],
                                                         select(s["g.epoch_leader"], e) == UNSET))),
        Lemma("SentRequestsAreConsistent", "every version a controller may still deliver names the leader "
              "recorded for its epoch, an ISR holding that leader and within the assignment, an epoch <= the store's",
              pool),
        Lemma("IsrWithinAssignment", "the ISR is within the assignment", isr_subset_of_replicas),
        Lemma("LeaderInIsr", "the leader is in the ISR", leader_in_isr),
    ]
