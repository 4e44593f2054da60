"""The four partition leader elections of the controller, in z3, as the model states Kafka's rules (tests
hold `kcm.impl.election` to them): candidates scanned in assignment order (or, for the reassignment
election, in target order), each returning the leader (NO_LEADER when none qualifies), the new ISR and the new
leader epoch.

The same functions serve the universal proofs (assignment and target are symbolic sequences of broker
ids of symbolic length) and the protocol model (assignment in broker-id order). `Rules` can break them on
purpose: scanning in ISR order, ignoring liveness, not bumping the epoch, keeping the ISR on an unclean
election.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kcm.spec.vocabulary import NO_LEADER
from kcm.spec.z3.model import Rules
from kcm.spec.z3.solver import Expr, and_, first, not_, num_like, or_all

Slot = tuple[Expr, Expr]  # (broker id, whether the position is occupied)
BrokerSet = dict[int, Expr]  # broker id -> membership


def member(members: BrokerSet, broker: Expr) -> Expr:
    return or_all(and_(broker == b, inside) for b, inside in members.items())


@dataclass(frozen=True, slots=True)
class ElectionInput:
    """What the controller decides from: the assignment (in order), the ISR (a set, and the order the
    store lists it in), live and shutting-down brokers, the reassignment target, the current epoch."""

    assignment: Sequence[Slot]
    isr: BrokerSet
    isr_position: dict[int, Expr]
    live: BrokerSet
    shutting_down: BrokerSet
    target: Sequence[Slot]
    leader_epoch: Expr
    # Membership of a symbolic broker id; by default looked up in the sets above. The proofs pass
    # uninterpreted predicates (agreeing with the sets), which z3 reasons about by congruence.
    is_live: Callable[[Expr], Expr] | None = None
    in_isr: Callable[[Expr], Expr] | None = None
    is_shutting_down: Callable[[Expr], Expr] | None = None

    @property
    def ids(self) -> list[int]:
        return sorted(self.isr)

    def live_(self, x: Expr) -> Expr:
        return self.is_live(x) if self.is_live is not None else member(self.live, x)

    def isr_(self, x: Expr) -> Expr:
        return self.in_isr(x) if self.in_isr is not None else member(self.isr, x)

    def shutting_(self, x: Expr) -> Expr:
        return self.is_shutting_down(x) if self.is_shutting_down is not None else member(self.shutting_down, x)


@dataclass(frozen=True, slots=True)
class Outcome:
    leader: Expr  # NO_LEADER when no replica qualifies
    isr: BrokerSet
    leader_epoch: Expr


def _scan(inp: ElectionInput, order: Sequence[Slot], accept: Callable[[Expr], Expr], rules: Rules) -> Expr:
    if rules.election_order == "isr":
        # The broken rule: candidates in the order the ISR lists them.
        n = len(inp.ids)
        candidates = [
            (num_like(inp.isr_position[b], b), and_(inp.isr[b], inp.isr_position[b] == k, accept(b)))
            for k in range(n)
            for b in inp.ids
        ]
        return first([(c, cond) for c, cond in candidates], none=NO_LEADER)
    return first([(broker, and_(present, accept(broker))) for broker, present in order], none=NO_LEADER)


def _live(inp: ElectionInput, rules: Rules, broker: Expr) -> Expr:
    return inp.live_(broker) if rules.election_checks_live else and_()


def offline(inp: ElectionInput, unclean_enabled: bool, rules: Rules) -> Outcome:
    """First live ISR replica; if none and unclean election is on, first live replica with the ISR reset
    to it. The ISR keeps its live members."""
    def clean_ok(r: Expr) -> Expr:
        return and_(_live(inp, rules, r), inp.isr_(r))

    clean = _scan(inp, inp.assignment, clean_ok, rules)
    leader = clean
    if unclean_enabled:
        leader = first([(clean, clean != NO_LEADER)]
                       + [(b, and_(present, _live(inp, rules, b))) for b, present in inp.assignment], none=NO_LEADER)
    live_isr = {b: and_(inp.isr[b], inp.live[b]) for b in inp.ids}
    in_live_isr = and_(inp.isr_(leader), inp.live_(leader))
    if rules.unclean_isr == "leader":
        isr = {b: first([(live_isr[b], in_live_isr)], none=leader == b) for b in inp.ids}
    else:
        isr = live_isr
    return Outcome(leader, isr, inp.leader_epoch + rules.leader_epoch_bump)


def reassign(inp: ElectionInput, rules: Rules) -> Outcome:
    """First live ISR replica of the target assignment; the ISR is kept."""
    def ok(r: Expr) -> Expr:
        return and_(_live(inp, rules, r), inp.isr_(r))

    leader = _scan(inp, inp.target, ok, rules)
    return Outcome(leader, dict(inp.isr), inp.leader_epoch + rules.leader_epoch_bump)


def preferred(inp: ElectionInput, rules: Rules) -> Outcome:
    """The first assigned replica, if it is live and in the ISR; the ISR is kept."""
    head, present = inp.assignment[0]
    if rules.election_order == "isr":
        leader = _scan(inp, inp.assignment, lambda r: and_(_live(inp, rules, r), inp.isr_(r)), rules)
    else:
        leader = first([(head, and_(present, _live(inp, rules, head), inp.isr_(head)))], none=NO_LEADER)
    return Outcome(leader, dict(inp.isr), inp.leader_epoch + rules.leader_epoch_bump)


def controlled_shutdown(inp: ElectionInput, rules: Rules) -> Outcome:
    """First live ISR replica that is not shutting down; shutting-down brokers leave the ISR."""
    def ok(r: Expr) -> Expr:
        return and_(_live(inp, rules, r), inp.isr_(r), not_(inp.shutting_(r)))

    leader = _scan(inp, inp.assignment, ok, rules)
    isr = {b: and_(inp.isr[b], not_(inp.shutting_down[b])) for b in inp.ids}
    return Outcome(leader, isr, inp.leader_epoch + rules.leader_epoch_bump)


ELECTIONS = ("offline", "reassign", "preferred", "controlled_shutdown")
