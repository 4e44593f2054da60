"""The data proof: an inductive invariant over unbounded logs that gives NoCommittedDataLoss,
ReplicaLogsAgree and HighWatermarkMonotonic (docs/z3.md, "The data proof"; every obligation holds for two
brokers, not yet for three).

The model is the data path of spec/KafkaReplication.tla for one partition replicated on N brokers, with
fused fetch rounds (`FetchRound`, `TruncationRound`, as the `ci` model runs them).  A log is a length and
two unbounded arrays (offset -> leader epoch, offset -> record).  The controller is abstracted to its
writes of the partition state node (`LeaderElection`: a new leader epoch, an ISR that is a subset of
the old one, a leader in it or none) and the nodes it sends (`LeaderAndIsr`: a broker adopts the node
written for an epoch above the one it holds, and, an assumption A3, never one older than an epoch it
adopted before).  The relations over-approximate the spec's actions of the same names; docs/z3.md argues
each abstraction and says where the argument is still missing.

Obligations: IndInit, IndNext per action, IndProp per data invariant, each lemma its own query.  A failed
obligation returns its counterexample to induction as a pair of readable states.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kcm.spec.verdicts import HOLDS, UNKNOWN, VIOLATED
from kcm.spec.z3.solver import Expr, and_all, ite, min2, or_all, z3

NONE, FOLLOWER, LEADER = 0, 1, 2
ROLE_NAMES = {NONE: "none", FOLLOWER: "follower", LEADER: "leader"}
NO_LEADER = -1
UNDEFINED = -1
HORIZON = 6  # offsets a counterexample shows per log
# z3 resource units per query (docs/z3.md, "Budgets, not timeouts"): proving with quantifiers, each lemma tracked
# then plain, then searching small states
TRACKED_UNITS = 30_000_000
PROVE_UNITS = 150_000_000
SEARCH_UNITS = 100_000_000


@dataclass(frozen=True)
class Design:
    """The era hooks of spec/Truncation*.tla that the data path reads."""

    name: str
    fence: bool  # FenceCurrentLeaderEpoch
    truncate_on_become_follower: bool  # TruncateOnBecomeFollower
    kip279_answer: bool  # EpochEndAnswer: the largest epoch not newer than the requested one (KIP-279)
    kip279_offset: bool  # TruncationOffset also bounded by the follower's own end of the answered epoch
    expansion_needs_start: bool  # InSyncForExpansion also needs the leader's epoch start offset
    withholds_hw: bool  # ExposesHw: a new leader withholds its HW below its epoch start offset

    @property
    def truncation_action(self) -> str:
        """The action at which this era truncates a follower's log."""
        return "LeaderAndIsr" if self.truncate_on_become_follower else "TruncationRound"


DESIGNS: dict[str, Design] = {
    "hw": Design("hw", False, True, True, False, False, False),
    "kip101": Design("kip101", False, False, False, False, False, False),
    "kip279": Design("kip279", False, False, True, True, False, False),
    "kip320": Design("kip320", True, False, True, True, True, True),
}


# -- the state -----------------------------------------------------------------------------------------


class DataState:
    """One state of the data model: every variable a z3 constant named `<prefix><name>`."""

    def __init__(self, n: int, prefix: str) -> None:
        self.n = n
        self.prefix = prefix
        self.vars: dict[str, Expr] = {}
        ints = z3.IntSort()
        for b in range(n):
            self._add(f"alive{b}", z3.Bool)
            for name in ("role", "lep", "seen", "lldr", "len", "hw", "ck", "eso"):
                self._add(f"{name}{b}", z3.Int)
            self._add(f"cas{b}", z3.Bool)
            self._add(f"trunc{b}", z3.Bool)
            self._add(f"E{b}", lambda v: z3.Array(v, ints, ints))
            self._add(f"R{b}", lambda v: z3.Array(v, ints, ints))
            for x in range(n):
                self._add(f"lisr{b}_{x}", z3.Bool)
                self._add(f"fleo{b}_{x}", z3.Int)
        for name in ("nl", "ne", "clen", "hx"):
            self._add(name, z3.Int)
        for x in range(n):
            self._add(f"nisr{x}", z3.Bool)
            self._add(f"HI{x}", lambda v: z3.Array(v, ints, z3.BoolSort()))
        self._add("HL", lambda v: z3.Array(v, ints, ints))
        self._add("GR", lambda v: z3.Array(v, ints, z3.ArraySort(ints, ints)))
        self._add("CE", lambda v: z3.Array(v, ints, ints))
        self._add("CR", lambda v: z3.Array(v, ints, ints))
        self._add("CC", lambda v: z3.Array(v, ints, ints))

    def _add(self, name: str, make: Callable[[str], Expr]) -> None:
        self.vars[name] = make(f"{self.prefix}{name}")

    def __getitem__(self, name: str) -> Expr:
        return self.vars[name]

    def brokers(self) -> range:
        return range(self.n)

    # named views, to keep the formulas readable
    def role(self, b: int) -> Expr:
        return self.vars[f"role{b}"]

    def lep(self, b: int) -> Expr:
        return self.vars[f"lep{b}"]

    def ln(self, b: int) -> Expr:
        return self.vars[f"len{b}"]

    def E(self, b: int) -> Expr:
        return self.vars[f"E{b}"]

    def R(self, b: int) -> Expr:
        return self.vars[f"R{b}"]

    def hw(self, b: int) -> Expr:
        return self.vars[f"hw{b}"]

    def fleo(self, b: int, x: int) -> Expr:
        return self.vars[f"fleo{b}_{x}"]

    def lisr(self, b: int, x: int) -> Expr:
        return self.vars[f"lisr{b}_{x}"]

    def nisr(self, x: int) -> Expr:
        return self.vars[f"nisr{x}"]

    def current(self, b: int) -> Expr:
        """CurrentLeader(p) = b: the store's leader, leading in the store's epoch."""
        return z3.And(self["nl"] == b, self.role(b) == LEADER, self.lep(b) == self["ne"])


# -- quantifiers ---------------------------------------------------------------------------------------

# The search for a counterexample to induction in a small state (every log at most HORIZON entries, every
# epoch at most HORIZON + 2) replaces each quantifier over offsets or epochs by the conjunction over that
# range, which makes the query quantifier-free; a model found so is a counterexample of the unbounded
# lemmas too (every quantified body is guarded by offsets below a log end).  None: true quantifiers.
_EXPANSION: list[int | None] = [None]


def forall(arity: int, body: Callable[[list[Expr]], Expr], name: str) -> Expr:
    span = _EXPANSION[0]
    if span is None:
        names = [z3.Int(f"{name}{k}") for k in range(arity)]
        return z3.ForAll(names, body(names))
    values = [z3.IntVal(v) for v in range(-1, span + 1)]
    combos: list[list[Expr]] = [[]]
    for _ in range(arity):
        combos = [[*c, v] for c in combos for v in values]
    return and_all(body(c) for c in combos)


# -- log helpers (the operators of spec/KafkaReplication.tla over unbounded arrays) --------------------


def fresh_int(name: str, counter: list[int]) -> Expr:
    counter[0] += 1
    return z3.Int(f"{name}!{counter[0]}")


def latest_epoch(s: DataState, b: int) -> Expr:
    return ite(s.ln(b) == 0, UNDEFINED, s.E(b)[s.ln(b) - 1])


def first_above(E: Expr, length: Expr, epoch: Expr, out: Expr) -> Expr:
    """`out` is the first offset whose epoch is above `epoch` (the log end if none): always satisfiable."""
    return z3.And(out >= 0, out <= length,
                  forall(1, lambda v: z3.Implies(z3.And(v[0] >= 0, v[0] < out), E[v[0]] <= epoch), "i_fa"),
                  z3.Or(out == length, E[out] > epoch))


# -- the relations ---------------------------------------------------------------------------------------


@dataclass
class Step:
    """One instance of an action: its name, parameters (for the CTI) and formula over (s, t)."""

    action: str
    actor: str
    formula: Expr
    params: dict[str, Expr] = field(default_factory=dict)


class DataModel:
    def __init__(self, n: int, design: Design) -> None:
        self.n = n
        self.design = design
        self.s = DataState(n, "s.")
        self.t = DataState(n, "t.")
        self._fresh = [0]

    def _int(self, name: str) -> Expr:
        return fresh_int(name, self._fresh)

    # the frame: `changes` gives new values, everything else stays
    def _frame(self, changes: dict[str, Expr]) -> Expr:
        protocol = and_all(self.t[k] == changes.get(k, self.s[k]) for k in self.s.vars
                           if k not in ("clen", "CE", "CR", "CC", "hx"))
        return z3.And(protocol, self._history())

    def _history(self) -> Expr:
        """HistoryNext for the ghosts the data invariants read: the committed prefix C (clen, CE, CR) and
        h_exposed_hw (hx)."""
        s, t = self.s, self.t
        extends = [z3.And(t.role(b) == LEADER, min2(t.hw(b), t.ln(b)) > s["clen"]) for b in s.brokers()]
        w = self._int("winner")
        chosen = [z3.And(w == b, extends[b],
                         and_all(z3.Implies(extends[x], min2(t.hw(x), t.ln(x)) <= min2(t.hw(b), t.ln(b)))
                                 for x in s.brokers()))
                  for b in s.brokers()]

        def of_winner(get: Callable[[int], Expr]) -> Expr:
            out = get(self.n - 1)
            for b in range(self.n - 2, -1, -1):
                out = ite(w == b, get(b), out)
            return out

        committed = z3.If(or_all(extends),
                          z3.And(or_all(chosen), t["clen"] == of_winner(lambda b: min2(t.hw(b), t.ln(b))),
                                 t["CE"] == of_winner(t.E), t["CR"] == of_winner(t.R)),
                          z3.And(t["clen"] == s["clen"], t["CE"] == s["CE"], t["CR"] == s["CR"]))
        exposed = self.exposed_hw(s)
        return z3.And(committed, self._commit_epochs(), t["hx"] == ite(exposed > s["hx"], exposed, s["hx"]))

    def _commit_epochs(self) -> Expr:
        """The ghost CC, the commit epoch of each committed offset: the lowest epoch of any leader whose HW
        ever covered it (a stale leader's HW may cover an offset after a later epoch's leader committed it,
        and a follower of that stale leader then holds it in its HW)."""
        s, t = self.s, self.t

        def at(v: list[Expr]) -> Expr:
            i = v[0]
            lowest = ite(i < s["clen"], s["CC"][i], t["ne"] + 1)
            for b in s.brokers():
                covers = z3.And(t.role(b) == LEADER, i < t.hw(b), i < t.ln(b), t.lep(b) < lowest)
                lowest = ite(covers, t.lep(b), lowest)
            return t["CC"][i] == lowest
        # pointwise, not a lambda: the search's expansion then makes it quantifier-free, as it must be fast
        return forall(1, at, "cc")

    def exposed_hw(self, s: DataState) -> Expr:
        out: Expr = z3.IntVal(-1)
        for b in s.brokers():
            shows = s.current(b)
            if self.design.withholds_hw:
                shows = z3.And(shows, s.hw(b) >= s[f"eso{b}"])
            out = ite(shows, s.hw(b), out)
        return out

    def advanced_hw(self, s: DataState, b: int, length: Expr, isr: list[Expr], fleo: list[Expr]) -> Expr:
        """AdvancedHw: the leader's HW rises to the lowest ISR follower position (unknown = -1)."""
        candidate = length
        for x in s.brokers():
            if x != b:
                pos = ite(fleo[x] < 0, -1, fleo[x])
                candidate = ite(z3.And(isr[x], pos < candidate), pos, candidate)
        return ite(candidate > s.hw(b), candidate, s.hw(b))

    def fence_ok(self, ld: int, cle: Expr) -> Expr:
        """FenceError(ld, p, cle) = "" ."""
        s = self.s
        ok = z3.And(s.role(ld) == LEADER, s.lep(ld) != -1)
        return z3.And(ok, cle == s.lep(ld)) if self.design.fence else ok

    # -- actions -----------------------------------------------------------------------------------------

    def steps(self) -> list[Step]:
        out: list[Step] = []
        for b in range(self.n):
            out += [self.produce(b), self.isr_shrink(b), self.hw_checkpoint(b), self.leader_and_isr(b),
                    self.broker_crash(b), self.broker_restart(b)]
            for ld in range(self.n):
                if ld != b:
                    out += [self.fetch_round(b, ld), self.truncation_round(b, ld)]
        out.append(self.leader_election())
        return out

    def produce(self, b: int) -> Step:
        s = self.s
        record = self._int(f"record{b}")
        length = s.ln(b) + 1
        isr = [s.lisr(b, x) for x in s.brokers()]
        fleo = [s.fleo(b, x) for x in s.brokers()]
        changes = {f"len{b}": length, f"E{b}": z3.Store(s.E(b), s.ln(b), s.lep(b)),
                   f"R{b}": z3.Store(s.R(b), s.ln(b), record),
                   "GR": z3.Store(s["GR"], s.lep(b), z3.Store(s["GR"][s.lep(b)], s.ln(b), record)),
                   f"hw{b}": self.advanced_hw(s, b, length, isr, fleo)}
        guard = z3.And(s[f"alive{b}"], s.role(b) == LEADER, s.lep(b) != -1)
        return Step("Produce", f"broker:{b}", z3.And(guard, self._frame(changes)), {"record": record})

    def fetch_round(self, f: int, ld: int) -> Step:
        """FetchRound(f, p) with f's leader ld: the fetch, the leader's answer and f's handling, fused."""
        s, d = self.s, self.design
        k = self._int(f"records{f}")
        guard = z3.And(s[f"alive{f}"], s.role(f) == FOLLOWER, s[f"lldr{f}"] == ld, s[f"alive{ld}"],
                       z3.Not(z3.And(s[f"trunc{f}"], s.ln(f) > 0)))
        offset = s.ln(f)
        ok0 = self.fence_ok(ld, s.lep(f))
        out_of_range = z3.And(ok0, offset > s.ln(ld))
        ok = z3.And(ok0, z3.Not(out_of_range))
        known = s.fleo(ld, f) != -2
        fleo1 = [ite(known, offset, s.fleo(ld, x)) if x == f else s.fleo(ld, x) for x in s.brokers()]
        in_sync = offset >= s.hw(ld)
        if d.expansion_needs_start:
            in_sync = z3.And(in_sync, offset >= s[f"eso{ld}"])
        expand = z3.And(known, z3.Not(s.lisr(ld, f)), in_sync, s[f"cas{ld}"])
        isr1 = [z3.Or(s.lisr(ld, x), expand) if x == f else s.lisr(ld, x) for x in s.brokers()]
        hw1 = ite(known, self.advanced_hw(s, ld, s.ln(ld), isr1, fleo1), s.hw(ld))
        # Up to MaxFetchRecords records from the fetch offset: any number the leader has (a superset).
        i = z3.Int("i_fr")
        appended = z3.Lambda([i], ite(z3.And(i >= offset, i < offset + k), s.E(ld)[i], s.E(f)[i]))
        appended_r = z3.Lambda([i], ite(z3.And(i >= offset, i < offset + k), s.R(ld)[i], s.R(f)[i]))
        len_ok = offset + k
        success: dict[str, Expr] = {f"fleo{ld}_{f}": fleo1[f], f"lisr{ld}_{f}": isr1[f], f"len{f}": len_ok,
                                    f"E{f}": appended, f"R{f}": appended_r, f"hw{ld}": hw1,
                                    f"hw{f}": min2(hw1, len_ok), f"trunc{f}": z3.BoolVal(False)}
        for x in s.brokers():
            success[f"nisr{x}"] = ite(expand, isr1[x], s.nisr(x))
            success[f"HI{x}"] = ite(expand, z3.Store(s[f"HI{x}"], s["ne"], isr1[x]), s[f"HI{x}"])
        failure = {f"len{f}": ite(out_of_range, s.ln(ld), s.ln(f)),
                   f"hw{f}": ite(out_of_range, min2(s.hw(f), s.ln(ld)), s.hw(f)), f"trunc{f}": z3.BoolVal(False)}
        body = z3.If(ok, z3.And(k >= 0, k <= s.ln(ld) - offset, self._frame(success)), self._frame(failure))
        return Step("FetchRound", f"broker:{f}", z3.And(guard, body), {"leader": z3.IntVal(ld), "records": k})

    def epoch_end(self, b: int, epoch: Expr, current: Expr, tag: str) -> tuple[Expr, Expr]:
        """EndOffsetForEpoch(log b, epoch, current), with its defining constraint."""
        s = self.s
        first = self._int(f"first_{tag}")
        return ite(epoch >= current, s.ln(b), first), first_above(s.E(b), s.ln(b), epoch, first)

    def truncation_round(self, f: int, ld: int) -> Step:
        """TruncationRound(f, p) with f's leader ld: OffsetsForLeaderEpoch, the answer, the truncation."""
        s, d = self.s, self.design
        guard = z3.And(s[f"alive{f}"], s.role(f) == FOLLOWER, s[f"lldr{f}"] == ld, s[f"alive{ld}"],
                       s[f"trunc{f}"], s.ln(f) > 0, self.fence_ok(ld, s.lep(f)))
        requested = latest_epoch(s, f)
        current = s.lep(ld)
        defs = []
        if d.kip279_answer:
            # LargestEpochAtMost: the epoch just before the first one above the requested epoch.
            k = self._int("k_le")
            defs.append(first_above(s.E(ld), s.ln(ld), requested, k))
            answered = ite(current <= requested, current, ite(k == 0, UNDEFINED, s.E(ld)[k - 1]))
        else:
            answered = requested
        end, end_def = self.epoch_end(ld, answered, current, "leader")
        defs.append(end_def)
        offset = z3.If(end < s.ln(f), end, s.ln(f))
        completed: Expr = z3.BoolVal(True)
        if d.kip279_offset:
            own, own_def = self.epoch_end(f, answered, requested + 1, "own")
            defs.append(own_def)
            offset = min2(offset, own)
            # Kafka 2.0.0-2.3.0 AbstractFetcherThread.getOffsetTruncationState: a follower whose largest
            # epoch not above the answered one is another epoch truncates to that epoch's end and asks
            # again (truncationCompleted = false); spec/KafkaReplication.tla stops after one round.
            completed = z3.Or(own == 0, s.E(f)[own - 1] == answered)
            offset = ite(completed, offset, own)
        completed = z3.Or(answered == UNDEFINED, completed)
        offset = ite(answered == UNDEFINED, s.hw(f), offset)
        new_len = ite(offset < s.ln(f), offset, s.ln(f))
        changes = {f"len{f}": new_len, f"hw{f}": min2(s.hw(f), new_len), f"trunc{f}": z3.Not(completed)}
        return Step("TruncationRound", f"broker:{f}", z3.And(guard, *defs, self._frame(changes)),
                    {"leader": z3.IntVal(ld), "answered": answered, "offset": new_len})

    def isr_shrink(self, b: int) -> Step:
        s = self.s
        drop = [z3.Bool(f"lag{b}_{x}") if x != b else z3.BoolVal(False) for x in s.brokers()]
        guard = z3.And(s[f"alive{b}"], s.role(b) == LEADER, s.lep(b) != -1, s[f"cas{b}"],
                       or_all(drop[x] for x in s.brokers() if x != b),
                       and_all(z3.Implies(drop[x], s.lisr(b, x)) for x in s.brokers()))
        isr1 = [z3.And(s.lisr(b, x), z3.Not(drop[x])) for x in s.brokers()]
        changes = {f"hw{b}": self.advanced_hw(s, b, s.ln(b), isr1, [s.fleo(b, x) for x in s.brokers()])}
        for x in s.brokers():
            changes[f"lisr{b}_{x}"] = isr1[x]
            changes[f"nisr{x}"] = isr1[x]
            changes[f"HI{x}"] = z3.Store(s[f"HI{x}"], s["ne"], isr1[x])
        return Step("IsrShrink", f"broker:{b}", z3.And(guard, self._frame(changes)),
                    {f"laggard{x}": drop[x] for x in s.brokers() if x != b})

    def hw_checkpoint(self, b: int) -> Step:
        s = self.s
        return Step("HwCheckpoint", f"broker:{b}",
                    z3.And(s[f"alive{b}"], s[f"ck{b}"] != s.hw(b), self._frame({f"ck{b}": s.hw(b)})))

    def leader_and_isr(self, b: int) -> Step:
        """LeaderAndIsr(b): b adopts the node written for some epoch newer than the one it holds (none after a
        restart: it may adopt an epoch it held before the crash), abstraction A2 of docs/z3.md."""
        s, d = self.s, self.design
        e = self._int(f"epoch{b}")
        leader = s["HL"][e]
        become_leader = leader == b
        # Assumption A3 (docs/z3.md): never an epoch older than one b adopted before, across restarts.
        guard = z3.And(s[f"alive{b}"], e > s.lep(b), e >= s[f"seen{b}"], e <= s["ne"], e >= 0, leader != NO_LEADER)
        new_len = s.ln(b)
        if d.truncate_on_become_follower:
            new_len = ite(z3.And(z3.Not(become_leader), s.hw(b) < s.ln(b)), s.hw(b), s.ln(b))
        isr = [s[f"HI{x}"][e] for x in s.brokers()]
        fleo = [ite(z3.And(become_leader, z3.BoolVal(x != b)), -1, -2) for x in s.brokers()]
        # The request carries the last version of epoch e's node (abstraction A2): local_version is the
        # store's exactly when e is the store's epoch.
        cas = z3.And(become_leader, e == s["ne"])
        changes: dict[str, Expr] = {
            f"role{b}": ite(become_leader, LEADER, FOLLOWER), f"lep{b}": e,
            f"seen{b}": ite(e > s[f"seen{b}"], e, s[f"seen{b}"]),
            f"lldr{b}": leader, f"cas{b}": cas, f"len{b}": new_len,
            f"hw{b}": ite(become_leader, self.advanced_hw(s, b, s.ln(b), isr, fleo), min2(s.hw(b), new_len)),
            f"eso{b}": ite(become_leader, s.ln(b), 0),
            f"trunc{b}": z3.And(z3.Not(become_leader), z3.BoolVal(not d.truncate_on_become_follower))}
        for x in s.brokers():
            changes[f"lisr{b}_{x}"] = isr[x]
            changes[f"fleo{b}_{x}"] = fleo[x]
        return Step("LeaderAndIsr", f"broker:{b}", z3.And(guard, self._frame(changes)), {"epoch": e})

    def leader_election(self) -> Step:
        """A controller's write of the node (abstraction A1): epoch + 1, ISR within the old one, and a
        leader in it or none."""
        s = self.s
        ldr = self._int("elected")
        keep = [z3.Bool(f"keep{x}") for x in s.brokers()]
        e = s["ne"] + 1
        guard = z3.And(or_all(keep), and_all(z3.Implies(keep[x], s.nisr(x)) for x in s.brokers()),
                       z3.Or(ldr == NO_LEADER, or_all(z3.And(ldr == x, keep[x]) for x in s.brokers())))
        changes: dict[str, Expr] = {"ne": e, "nl": ldr, "HL": z3.Store(s["HL"], e, ldr)}
        for x in s.brokers():
            changes[f"nisr{x}"] = keep[x]
            changes[f"HI{x}"] = z3.Store(s[f"HI{x}"], e, keep[x])
            changes[f"cas{x}"] = z3.BoolVal(False)
        return Step("LeaderElection", "controller", z3.And(guard, self._frame(changes)),
                    {"leader": ldr, **{f"isr{x}": keep[x] for x in s.brokers()}})

    def _forget(self, b: int) -> dict[str, Expr]:
        """ForgetReplicas(b): the log and checkpoint stay, the HW comes back from the checkpoint."""
        s = self.s
        changes: dict[str, Expr] = {f"role{b}": z3.IntVal(NONE), f"lep{b}": z3.IntVal(-1),
                                    f"lldr{b}": z3.IntVal(NO_LEADER), f"cas{b}": z3.BoolVal(False),
                                    f"hw{b}": min2(s[f"ck{b}"], s.ln(b)), f"eso{b}": z3.IntVal(0),
                                    f"trunc{b}": z3.BoolVal(False)}
        for x in s.brokers():
            changes[f"lisr{b}_{x}"] = z3.BoolVal(False)
            changes[f"fleo{b}_{x}"] = z3.IntVal(-2)
        return changes

    def broker_crash(self, b: int) -> Step:
        s = self.s
        changes = {**self._forget(b), f"alive{b}": z3.BoolVal(False)}
        return Step("BrokerCrash", f"broker:{b}", z3.And(s[f"alive{b}"], self._frame(changes)))

    def broker_restart(self, b: int) -> Step:
        s = self.s
        changes = {f"alive{b}": z3.BoolVal(True), f"hw{b}": min2(s[f"ck{b}"], s.ln(b))}
        return Step("BrokerRestart", f"broker:{b}", z3.And(z3.Not(s[f"alive{b}"]), self._frame(changes)))

    # -- Init --------------------------------------------------------------------------------------------

    def init(self, s: DataState) -> Expr:
        """InitStable: a settled partition, every broker in the ISR, leader epoch 0, empty logs."""
        parts = [s["ne"] == 0, s["nl"] >= 0, s["nl"] < self.n, s["HL"][0] == s["nl"], s["clen"] == 0,
                 s["hx"] == 0]
        for b in s.brokers():
            leads = s["nl"] == b
            parts += [s[f"alive{b}"], s.role(b) == ite(leads, LEADER, FOLLOWER), s.lep(b) == 0,
                      s[f"seen{b}"] == 0, s[f"lldr{b}"] == s["nl"], s[f"cas{b}"] == leads, s.ln(b) == 0,
                      s.hw(b) == 0, s[f"ck{b}"] == 0, s[f"eso{b}"] == 0,
                      s[f"trunc{b}"] == z3.And(z3.Not(leads), not self.design.truncate_on_become_follower),
                      s.nisr(b), s[f"HI{b}"][0]]
            for x in s.brokers():
                parts += [s.lisr(b, x) == leads,
                          s.fleo(b, x) == ite(z3.And(leads, z3.BoolVal(x != b)), -1, -2)]
        return and_all(parts)


# -- the invariant: named lemmas ------------------------------------------------------------------------

Formula = Callable[[DataState], Expr]


def _all_offsets(body: Callable[[Expr], Expr], name: str = "i") -> Expr:
    return forall(1, lambda ij: body(ij[0]), name)


def _same(s: DataState, x: int, y: int, i: Expr) -> Expr:
    return z3.And(s.E(x)[i] == s.E(y)[i], s.R(x)[i] == s.R(y)[i])


def _holds_prefix(s: DataState, x: int, y: int, upto: Expr) -> Expr:
    """x's log starts with the first `upto` entries of y's."""
    return z3.And(s.ln(x) >= upto, _all_offsets(lambda i: z3.Implies(z3.And(i >= 0, i < upto), _same(s, x, y, i))))


def _holds_committed(s: DataState, x: int) -> Expr:
    return z3.And(s.ln(x) >= s["clen"], _all_offsets(lambda i: z3.Implies(
        z3.And(i >= 0, i < s["clen"]), z3.And(s.E(x)[i] == s["CE"][i], s.R(x)[i] == s["CR"][i]))))


def _below_committed(s: DataState, x: int, upto: Expr) -> Expr:
    """x's first `upto` entries (capped by its log end) are committed entries."""
    cap = min2(upto, s.ln(x))
    return z3.And(cap <= s["clen"], _all_offsets(lambda i: z3.Implies(
        z3.And(i >= 0, i < cap), z3.And(s.E(x)[i] == s["CE"][i], s.R(x)[i] == s["CR"][i]))))


def _lowest_position(s: DataState, ld: int, counted: Callable[[int], Expr]) -> Expr:
    """The leader ld's log end, capped by the position it recorded for every counted follower (unknown = -1)."""
    candidate = s.ln(ld)
    for x in s.brokers():
        if x != ld:
            pos = ite(s.fleo(ld, x) < 0, -1, s.fleo(ld, x))
            candidate = ite(z3.And(counted(x), pos < candidate), pos, candidate)
    return candidate


def _quorum(s: DataState, ld: int) -> Expr:
    """The HW the leader ld could advance to now: its log end, capped by every ISR follower's position."""
    return _lowest_position(s, ld, lambda x: s.lisr(ld, x))


def _frozen(s: DataState, ld: int) -> Expr:
    """The lowest position the leader ld recorded for an ISR member that moved on (its log end if none)."""
    return _lowest_position(s, ld, lambda x: z3.And(s.lisr(ld, x), s[f"seen{x}"] > s.lep(ld)))


def _joined_after(s: DataState, x: int, v: Expr, w: Expr) -> Expr:
    """Epochs v < w up to the store's, x in w's last ISR and not in v's."""
    return z3.And(v >= 0, v < w, w <= s["ne"], s[f"HI{x}"][w], z3.Not(s[f"HI{x}"][v]))


def _moved_on(s: DataState, v: Expr) -> Expr:
    """Some member of epoch v's last ISR adopted a later epoch."""
    return or_all(z3.And(s[f"HI{y}"][v], s[f"seen{y}"] > v) for y in s.brokers())


def lemmas(n: int) -> dict[str, Formula]:
    """The conjuncts of the inductive invariant, by name (docs/z3.md explains each)."""
    B = range(n)

    def per_broker(f: Callable[[DataState, int], Expr]) -> Formula:
        return lambda s: and_all(f(s, b) for b in B)

    def per_pair(f: Callable[[DataState, int, int], Expr], distinct: bool = False) -> Formula:
        return lambda s: and_all(f(s, x, y) for x in B for y in B if not (distinct and x == y))

    def roles(s: DataState, b: int) -> Expr:
        r = s.role(b)
        return and_all([
            z3.Or(r == NONE, r == FOLLOWER, r == LEADER), s["ne"] >= 0,
            z3.Or(s["nl"] == NO_LEADER, z3.And(s["nl"] >= 0, s["nl"] < n)), s["HL"][s["ne"]] == s["nl"],
            z3.Implies(z3.Not(s[f"alive{b}"]), r == NONE),
            (r == NONE) == (s.lep(b) == -1),
            s[f"seen{b}"] >= 0, s[f"seen{b}"] <= s["ne"],
            z3.Implies(r != NONE, s.lep(b) == s[f"seen{b}"]),
            z3.Implies(r == LEADER, z3.And(s["HL"][s.lep(b)] == b, s[f"lldr{b}"] == b)),
            z3.Implies(r == FOLLOWER, z3.And(s["HL"][s.lep(b)] == s[f"lldr{b}"], s[f"lldr{b}"] != b,
                                             s[f"lldr{b}"] >= 0, s[f"lldr{b}"] < n)),
            z3.Implies(s[f"cas{b}"], z3.And(r == LEADER, s.lep(b) == s["ne"],
                                            and_all(s.lisr(b, x) == s.nisr(x) for x in B))),
            z3.Implies(r == LEADER, and_all(z3.And(s.fleo(b, x) >= -1, s.fleo(b, x) <= s.ln(b))
                                            for x in B if x != b)),
        ])

    def bounds(s: DataState, b: int) -> Expr:
        return and_all([s.ln(b) >= 0, s.hw(b) >= 0, s.hw(b) <= s.ln(b), s[f"ck{b}"] >= 0, s["clen"] >= 0,
                        s[f"eso{b}"] >= 0, s[f"eso{b}"] <= s.ln(b),
                        z3.Implies(s.role(b) != LEADER, s[f"eso{b}"] == 0)])

    def monotone(s: DataState, b: int) -> Expr:
        return forall(2, lambda v: z3.Implies(z3.And(v[0] >= 0, v[0] <= v[1], v[1] < s.ln(b)),
                                              z3.And(s.E(b)[v[0]] <= s.E(b)[v[1]], s.E(b)[v[0]] >= 0)), "m")

    def seen_bound(s: DataState, b: int) -> Expr:
        return _all_offsets(lambda i: z3.Implies(z3.And(i >= 0, i < s.ln(b)), s.E(b)[i] <= s[f"seen{b}"]))

    def origin(s: DataState, b: int) -> Expr:
        return _all_offsets(lambda i: z3.Implies(z3.And(i >= 0, i < s.ln(b)),
                                                 s.R(b)[i] == s["GR"][s.E(b)[i]][i]))

    def leader_holds_epoch(s: DataState, ld: int, x: int) -> Expr:
        """The leader named for the last epoch a broker adopted holds every entry of that epoch (it
        cannot have truncated since: it adopts no older epoch, and its log outlives a crash)."""
        top = s[f"seen{ld}"]
        return z3.Implies(s["HL"][top] == ld, _all_offsets(lambda i: z3.Implies(
            z3.And(i >= 0, i < s.ln(x), s.E(x)[i] == top), z3.And(i < s.ln(ld), s.E(ld)[i] == top))))

    def epoch_holder(s: DataState, x: int) -> Expr:
        """The leader named for the epoch of an entry has adopted that epoch (entries are written by
        their epoch's leader), so it can never adopt it again."""
        return _all_offsets(lambda i: z3.Implies(
            z3.And(i >= 0, i < s.ln(x)),
            and_all(z3.Implies(s["HL"][s.E(x)[i]] == y, s[f"seen{y}"] >= s.E(x)[i]) for y in B)))

    def node_history(s: DataState) -> Expr:
        """Every node written names a broker or no leader, with a nonempty ISR holding its leader."""
        def written(e: Expr) -> Expr:
            leader = s["HL"][e]
            return z3.Implies(z3.And(e >= 0, e <= s["ne"]), z3.And(
                z3.Or(leader == NO_LEADER, z3.And(leader >= 0, leader < n)),
                and_all(z3.Implies(leader == x, s[f"HI{x}"][e]) for x in B),
                or_all(s[f"HI{x}"][e] for x in B)))
        return z3.And(forall(1, lambda v: written(v[0]), "w"), or_all(s.nisr(x) for x in B),
                      and_all(z3.Implies(s["nl"] == x, s.nisr(x)) for x in B),
                      and_all(z3.Implies(s.role(x) == LEADER, s.lisr(x, x)) for x in B))

    def isr_as_written(s: DataState) -> Expr:
        """The store's ISR is the last version of its epoch's node."""
        return and_all(s.nisr(x) == s[f"HI{x}"][s["ne"]] for x in B)

    def follower_synced(s: DataState, f: int) -> Expr:
        """A follower that stopped truncating with a log did so against its leader in its epoch."""
        return z3.Implies(z3.And(s.role(f) == FOLLOWER, z3.Not(s[f"trunc{f}"]), s.ln(f) > 0),
                          and_all(z3.Implies(s[f"lldr{f}"] == y, s[f"seen{y}"] >= s.lep(f)) for y in B))

    def matching(s: DataState, x: int, y: int) -> Expr:
        return forall(2, lambda v: z3.Implies(
            z3.And(v[1] >= 0, v[1] <= v[0], v[0] < s.ln(x), v[0] < s.ln(y), s.E(x)[v[0]] == s.E(y)[v[0]]),
            _same(s, x, y, v[1])), "lm")

    def epoch_prefix(s: DataState, x: int, y: int) -> Expr:
        """An entry of epoch e at offset i, and one of e at offset j >= i elsewhere: both logs agree up to i
        (every entry of e comes from e's leader, whose log only grows while it leads e)."""
        return forall(3, lambda v: z3.Implies(
            z3.And(v[2] >= 0, v[2] <= v[0], v[0] <= v[1], v[0] < s.ln(x), v[1] < s.ln(y),
                   s.E(x)[v[0]] == s.E(y)[v[1]]),
            _same(s, x, y, v[2])), "ep")

    def epoch_start(s: DataState, ld: int) -> Expr:
        return z3.Implies(s.role(ld) == LEADER, _all_offsets(lambda i: z3.Implies(
            z3.And(i >= 0, i < s.ln(ld)), z3.And(s.E(ld)[i] <= s.lep(ld),
                                                z3.Implies(i >= s[f"eso{ld}"], s.E(ld)[i] == s.lep(ld))))))

    def follower_prefix(s: DataState, f: int, ld: int) -> Expr:
        # the leader may have crashed since (its log outlives it): it still has not moved past the epoch
        return z3.Implies(z3.And(s.role(f) == FOLLOWER, z3.Not(s[f"trunc{f}"]), s[f"lldr{f}"] == ld,
                                 s[f"seen{ld}"] == s.lep(f)),
                          _holds_prefix(s, ld, f, s.ln(f)))

    def follower_hw_held(s: DataState, f: int, ld: int) -> Expr:
        """A follower's HW (committed) is held by its leader while the leader has not moved past the epoch:
        a truncation that finds no common epoch keeps the HW and still agrees with the leader."""
        return z3.Implies(z3.And(s.role(f) == FOLLOWER, s[f"lldr{f}"] == ld, s[f"seen{ld}"] <= s.lep(f)),
                          _holds_prefix(s, ld, f, ite(s[f"ck{f}"] > s.hw(f), s[f"ck{f}"], s.hw(f))))

    def named_holds_commits(s: DataState, y: int) -> Expr:
        """A broker named in an epoch (its leader, or in its last ISR) that it has not moved past holds every
        committed entry some leader of that epoch or an earlier one covered with its HW: a leader covers an
        entry only once its ISR, which every later ISR descends from, holds it.  (The leader is in its own
        ISR; naming it too spares z3 that step.)"""
        return forall(2, lambda v: z3.Implies(
            z3.And(v[0] >= 0, v[0] <= s["ne"], z3.Or(s["HL"][v[0]] == y, s[f"HI{y}"][v[0]]),
                   s[f"seen{y}"] <= v[0], v[1] >= 0, v[1] < s["clen"], s["CC"][v[1]] <= v[0]),
            z3.And(v[1] < s.ln(y), s.E(y)[v[1]] == s["CE"][v[1]], s.R(y)[v[1]] == s["CR"][v[1]])), "nc")

    def isr_sees_commits(s: DataState, x: int) -> Expr:
        """A store-ISR member has adopted the epoch of every commit (a leader of a later epoch has no position
        for it, so cannot advance its HW)."""
        return z3.Implies(s.nisr(x), _all_offsets(lambda i: z3.Implies(
            z3.And(i >= 0, i < s["clen"]), s["CC"][i] <= s[f"seen{x}"]), "sc"))

    def isr_joined_by_fetching(s: DataState, x: int) -> Expr:
        """A store-ISR member missing from an epoch's last ISR joined by fetching in a later epoch."""
        return forall(1, lambda v: z3.Implies(
            z3.And(v[0] >= 0, v[0] <= s["ne"], s.nisr(x), z3.Not(s[f"HI{x}"][v[0]])), s[f"seen{x}"] > v[0]), "jf")

    def positions_from_epoch(s: DataState, ld: int, x: int) -> Expr:
        """A leader knows the position only of a follower that adopted its epoch (fetches are fenced)."""
        return z3.Implies(z3.And(s.role(ld) == LEADER, s[f"seen{x}"] < s.lep(ld)), s.fleo(ld, x) < 0)

    def fetched_prefix(s: DataState, ld: int, f: int) -> Expr:
        """A position the leader recorded for a follower: the follower's log starts with as much of the
        leader's, while the follower has not moved past the leader's epoch (after that it may truncate
        against a later leader that never had those entries)."""
        return z3.Implies(z3.And(s.role(ld) == LEADER, s.fleo(ld, f) >= 0, s[f"seen{f}"] <= s.lep(ld)),
                          _holds_prefix(s, f, ld, s.fleo(ld, f)))

    def frozen_held(s: DataState, ld: int, y: int) -> Expr:
        """A (stale) leader's prefix up to the lowest position it recorded for an ISR member that moved on is
        held by every broker that moved past its epoch and is named in a later epoch it has not moved past:
        each such member held that much when it moved on, every later leader descends from them, and a
        truncation against a leader holding the prefix keeps it."""
        bound = _frozen(s, ld)
        return forall(1, lambda v: z3.Implies(
            z3.And(s.role(ld) == LEADER, s.lep(ld) < s[f"seen{y}"], s[f"seen{y}"] <= v[0], v[0] <= s["ne"],
                   s[f"HI{y}"][v[0]]),
            _holds_prefix(s, y, ld, bound)), "fh")

    def frozen_below_start(s: DataState, ld: int, y: int) -> Expr:
        """That prefix ends before a later epoch's leader's epoch start (its entries are of older epochs), so a
        stale leader never commits past the current leader's epoch start."""
        return z3.Implies(z3.And(s.role(ld) == LEADER, s.role(y) == LEADER, s.lep(ld) < s.lep(y)),
                          _frozen(s, ld) <= s[f"eso{y}"])

    def quorum_held_later(s: DataState, ld: int, y: int) -> Expr:
        """A (stale) leader's quorum prefix, the HW it could advance to, is held by every broker named in a
        later epoch it has not moved past: IsrHoldsQuorum for every later epoch's ISR."""
        return forall(1, lambda v: z3.Implies(
            z3.And(s.role(ld) == LEADER, s.lep(ld) < v[0], s[f"seen{y}"] <= v[0], v[0] <= s["ne"],
                   s[f"HI{y}"][v[0]]),
            _holds_prefix(s, y, ld, _quorum(s, ld))), "qh")

    def isr_holds_quorum(s: DataState, ld: int, x: int) -> Expr:
        return z3.Implies(z3.And(s.role(ld) == LEADER, s.nisr(x)), _holds_prefix(s, x, ld, _quorum(s, ld)))

    def local_isr_is_node(s: DataState, ld: int) -> Expr:
        """A leader's local ISR is the last version of its epoch's node (it writes both at once)."""
        return z3.Implies(s.role(ld) == LEADER, and_all(s.lisr(ld, x) == s[f"HI{x}"][s.lep(ld)] for x in B))

    def isr_descends(s: DataState, x: int) -> Expr:
        """A store-ISR member missing from the last ISR of an earlier epoch joined through a later epoch,
        whose chain of leaders starts in that ISR: some member of it adopted a later epoch."""
        return forall(1, lambda v: z3.Implies(
            z3.And(v[0] >= 0, v[0] <= s["ne"], s.nisr(x), z3.Not(s[f"HI{x}"][v[0]])), _moved_on(s, v[0])), "d")

    def isr_chain_descends(s: DataState, x: int) -> Expr:
        """IsrDescends for every pair of epochs v < w: a member of w's last ISR missing from v's joined
        through an epoch after v whose leader descends from v's ISR, so some member of v's ISR adopted an
        epoch after v (a stale leader alone in its ISR is the only broker any later epoch can name)."""
        return forall(2, lambda v: z3.Implies(_joined_after(s, x, v[0], v[1]), _moved_on(s, v[0])), "cd")

    def isr_chain_joined(s: DataState, x: int) -> Expr:
        """IsrJoinedByFetching for every pair of epochs v < w: a member of w's last ISR missing from v's
        was added by a fetch in an epoch after v, so it adopted that epoch (elections only keep members)."""
        return forall(2, lambda v: z3.Implies(_joined_after(s, x, v[0], v[1]), s[f"seen{x}"] > v[0]), "cj")

    def isr_saw_commits(s: DataState, x: int) -> Expr:
        """IsrSeesCommits for every epoch's last ISR: a member of w's ISR adopted the epoch of every commit
        made in w or before (it was in that leader's ISR with no position for it, or joined later)."""
        return forall(2, lambda v: z3.Implies(
            z3.And(v[0] >= 0, v[0] <= s["ne"], s[f"HI{x}"][v[0]], v[1] >= 0, v[1] < s["clen"],
                   s["CC"][v[1]] <= v[0]),
            s["CC"][v[1]] <= s[f"seen{x}"]), "sw")

    def hw_at_quorum(s: DataState, ld: int) -> Expr:
        """A leader's HW is at least what its ISR's positions allow: every step that raises the quorum
        (a fetch, a produce, a shrink, becoming leader) advances the HW with it."""
        return z3.Implies(s.role(ld) == LEADER, s.hw(ld) >= _quorum(s, ld))

    def commit_epoch_leader(s: DataState) -> Expr:
        """An offset's commit epoch is an epoch up to the store's whose named leader adopted it (that leader
        covered the offset)."""
        def adopted(i: Expr) -> Expr:
            epoch = s["CC"][i]
            return z3.Implies(z3.And(i >= 0, i < s["clen"]), z3.And(
                epoch >= 0, epoch <= s["ne"], and_all(z3.Implies(s["HL"][epoch] == y, s[f"seen{y}"] >= epoch)
                                                      for y in B)))
        return _all_offsets(adopted, "ce")

    def hw_commits_seen(s: DataState, b: int) -> Expr:
        """What a broker's HW or checkpoint covers was covered by the HW of a leader of an epoch it adopted:
        its HW comes from its own leadership or from its leader's in its epoch."""
        cap = min2(ite(s[f"ck{b}"] > s.hw(b), s[f"ck{b}"], s.hw(b)), s["clen"])
        return _all_offsets(lambda i: z3.Implies(z3.And(i >= 0, i < cap), s["CC"][i] <= s[f"seen{b}"]), "hs")

    def leader_hw_committed(s: DataState, ld: int) -> Expr:
        return z3.Implies(s.role(ld) == LEADER, _below_committed(s, ld, s.hw(ld)))

    def hw_committed(s: DataState, b: int) -> Expr:
        return _below_committed(s, b, s.hw(b))

    def checkpoint_within_log(s: DataState, b: int) -> Expr:
        """A log is never truncated below its HW checkpoint: it is committed, and every leader a truncation
        asks holds it."""
        return s[f"ck{b}"] <= s.ln(b)

    def checkpoint_committed(s: DataState, b: int) -> Expr:
        return _below_committed(s, b, s[f"ck{b}"])

    def isr_holds_committed(s: DataState, x: int) -> Expr:
        return z3.Implies(s.nisr(x), _holds_committed(s, x))

    def leader_holds_committed(s: DataState, ld: int) -> Expr:
        return z3.Implies(z3.And(s.role(ld) == LEADER, s.lep(ld) == s["ne"]), _holds_committed(s, ld))

    def adopted_holds_committed(s: DataState, b: int) -> Expr:
        """The leader the store names, before it adopts the epoch, holds C (it was in the ISR)."""
        return z3.Implies(z3.And(s["nl"] == b, s[f"seen{b}"] < s["ne"]), _holds_committed(s, b))

    def exposed_below_committed(s: DataState, ld: int) -> Expr:
        return z3.Implies(s.current(ld), z3.And(s["hx"] <= s["clen"],
                                               s["clen"] <= ite(s.hw(ld) > s[f"eso{ld}"], s.hw(ld), s[f"eso{ld}"])))

    def hx_bound(s: DataState) -> Expr:
        return s["hx"] <= s["clen"]

    return {
        "RolesAndEpochs": per_broker(roles),
        "OffsetsWithinLog": per_broker(bounds),
        "EpochsMonotone": per_broker(monotone),
        "EpochsSeen": per_broker(seen_bound),
        "RecordOfEpochOffset": per_broker(origin),
        "LeaderHoldsItsEpoch": per_pair(leader_holds_epoch),
        "EpochLeaderAdopted": per_broker(epoch_holder),
        "IsrAsWritten": isr_as_written,
        "NodeHistory": node_history,
        "FollowerSynced": per_broker(follower_synced),
        "LogMatching": per_pair(matching, distinct=True),
        "EpochPrefix": per_pair(epoch_prefix, distinct=True),
        "EpochStartOffset": per_broker(epoch_start),
        "FollowerIsPrefix": per_pair(follower_prefix, distinct=True),
        "FetchedPrefix": per_pair(fetched_prefix, distinct=True),
        "FrozenHeld": per_pair(frozen_held, distinct=True),
        "QuorumHeldLater": per_pair(quorum_held_later, distinct=True),
        "FrozenBelowStart": per_pair(frozen_below_start, distinct=True),
        "FollowerHwHeld": per_pair(follower_hw_held, distinct=True),
        "PositionsFromEpoch": per_pair(positions_from_epoch, distinct=True),
        "NamedHoldsCommits": per_broker(named_holds_commits),
        "IsrSeesCommits": per_broker(isr_sees_commits),
        "IsrJoinedByFetching": per_broker(isr_joined_by_fetching),
        "LocalIsrIsNode": per_broker(local_isr_is_node),
        "IsrDescends": per_broker(isr_descends),
        "IsrChainDescends": per_broker(isr_chain_descends),
        "IsrChainJoined": per_broker(isr_chain_joined),
        "IsrSawCommits": per_broker(isr_saw_commits),
        "HwAtQuorum": per_broker(hw_at_quorum),
        "CommitEpochLeader": commit_epoch_leader,
        "HwCommitsSeen": per_broker(hw_commits_seen),
        "IsrHoldsQuorum": per_pair(isr_holds_quorum),
        "LeaderHwCommitted": per_broker(leader_hw_committed),
        "HwCommitted": per_broker(hw_committed),
        "CheckpointWithinLog": per_broker(checkpoint_within_log),
        "CheckpointCommitted": per_broker(checkpoint_committed),
        "IsrHoldsCommitted": per_broker(isr_holds_committed),
        "LeaderHoldsCommitted": per_broker(leader_holds_committed),
        "ElectedHoldsCommitted": per_broker(adopted_holds_committed),
        "ExposedHwCommitted": per_broker(exposed_below_committed),
        "ExposedHwBound": hx_bound,
    }


# -- the data invariants -----------------------------------------------------------------------------------


def _agree_below(s: DataState, x: int, y: int, k: Expr) -> Expr:
    return _all_offsets(lambda i: z3.Implies(z3.And(i >= 0, i < k), _same(s, x, y, i)))


def _starts_with_committed(t: DataState, b: int, s: DataState) -> Expr:
    """b's log in t agrees with the committed prefix of s (where both have entries)."""
    return _all_offsets(lambda i: z3.Implies(z3.And(i >= 0, i < s["clen"]), z3.And(
        t.E(b)[i] == s["CE"][i], t.R(b)[i] == s["CR"][i])))


def replica_logs_agree(s: DataState) -> Expr:
    parts = []
    for x in s.brokers():
        for y in s.brokers():
            if x < y:
                k = min2(min2(s.hw(x), s.hw(y)), min2(s.ln(x), s.ln(y)))
                parts.append(_agree_below(s, x, y, k))
    return and_all(parts)


def committed_holders(s: DataState) -> Expr:
    """NoCommittedDataLoss, state part: the current leader and every ISR member start with C."""
    return and_all(z3.Implies(z3.Or(s.nisr(b), s.current(b)), _holds_committed(s, b)) for b in s.brokers())


def no_conflict(s: DataState, t: DataState) -> Expr:
    """NoCommittedDataLoss, step part: no leader's prefix below its HW that is longer than C contradicts C."""
    parts = []
    for b in s.brokers():
        longer = z3.And(t.role(b) == LEADER, min2(t.hw(b), t.ln(b)) > s["clen"])
        parts.append(z3.Implies(longer, _starts_with_committed(t, b, s)))
    return and_all(parts)


def hw_monotonic_per_epoch(s: DataState, t: DataState) -> Expr:
    return and_all(z3.Implies(z3.And(s.role(b) == LEADER, t.role(b) == LEADER, s.lep(b) == t.lep(b)),
                              t.hw(b) >= s.hw(b)) for b in s.brokers())


# -- obligations ---------------------------------------------------------------------------------------------


@dataclass
class Obligation:
    name: str  # IndInit | IndNext: <action> | Implied: <lemma> | IndProp: <invariant>
    result: str
    seconds: float
    cti: dict[str, Any] | None = None
    unproved: list[str] = field(default_factory=list)  # with unknown: the lemmas z3 did not prove

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"property": f"data: {self.name}", "result": self.result,
                               "seconds": round(self.seconds, 3), "group": "data"}
        if self.cti is not None:
            row["model"] = self.cti
            row["detail"] = f"counterexample to induction: {self.cti['broken']} breaks"
        elif self.unproved:
            row["detail"] = "not proved: " + ", ".join(self.unproved)
        return row


# The lemmas spec/KafkaInvariants.tla states too (the others read the ghosts of this model: seen epochs,
# the node history, the record of each epoch and offset, the commit epochs).
TLA_LEMMAS = ("EpochsMonotone", "LogMatching", "EpochPrefix", "LeaderHoldsItsEpoch", "EpochStartOffset",
              "FollowerIsPrefix", "FetchedPrefix", "HwCommitted", "CheckpointCommitted", "CheckpointWithinLog",
              "IsrHoldsCommitted", "LeaderHoldsCommitted", "HwAtQuorum")

# Lemmas that follow from others in the same state, with the lemmas they follow from (none of them implied).
# Each is proved once, as its own obligation, instead of after every action: the invariant is inductive when
# the other lemmas are preserved (they may assume the implied ones, which hold in every state they hold in).
_HOLDERS = ("RolesAndEpochs", "OffsetsWithinLog", "NamedHoldsCommits", "CommitEpochLeader")
IMPLIED: dict[str, tuple[str, ...]] = {
    "IsrHoldsCommitted": (*_HOLDERS, "IsrAsWritten"),
    "LeaderHoldsCommitted": _HOLDERS,
    "ElectedHoldsCommitted": _HOLDERS,
    "FollowerHwHeld": (*_HOLDERS, "HwCommitsSeen", "HwCommitted", "CheckpointCommitted", "CheckpointWithinLog"),
}


PROPERTIES = ("NoCommittedDataLoss", "ReplicaLogsAgree", "HighWatermarkMonotonic")


SMALL = 3  # the horizon of the search for a counterexample to induction (entries per log)


class Encoding:
    """Every formula the obligations need, built once: with true quantifiers (`span` None) or expanded
    over the small range of the counterexample search."""

    def __init__(self, brokers: int, design: Design, span: int | None) -> None:
        _EXPANSION[0] = span
        try:
            self.model = DataModel(brokers, design)
            s, t = self.model.s, self.model.t
            self.steps = self.model.steps()
            named = lemmas(brokers)
            self.before = {name: f(s) for name, f in named.items()}
            self.after = {name: f(t) for name, f in named.items()}
            self.init = self.model.init(s)
            every = or_all(step.formula for step in self.steps)
            exposed = self.model.exposed_hw(s)
            self.props: dict[str, tuple[list[Expr], Expr]] = {
                "NoCommittedDataLoss": ([every], z3.And(committed_holders(s), no_conflict(s, t))),
                "ReplicaLogsAgree": ([], replica_logs_agree(s)),
                "HighWatermarkMonotonic": ([every], z3.And(hw_monotonic_per_epoch(s, t),
                                                           z3.Or(exposed == -1, exposed >= s["hx"]))),
            }
        finally:
            _EXPANSION[0] = None
        self.bounds: Expr = z3.BoolVal(True)
        if span is not None:
            small = [s["ne"] <= span, s["clen"] <= SMALL, s["hx"] <= SMALL]
            for b in s.brokers():
                small += [s.ln(b) <= SMALL, s[f"ck{b}"] <= SMALL]
            self.bounds = and_all(small)

    def relation(self, action: str) -> tuple[Expr, list[Step], Expr]:
        chosen = [step for step in self.steps if step.action == action]
        which = z3.Int("which")
        return or_all(z3.And(which == k, step.formula) for k, step in enumerate(chosen)), chosen, which


@dataclass(frozen=True)
class Query:
    """One goal and what it may assume: the lemmas by name and the other premises (the step relation)."""

    lemmas: dict[str, Expr]
    extra: list[Expr]
    goal: Expr


@dataclass(frozen=True)
class Attempt:
    """One way to put a query to z3.  `tracked` asserts each lemma under an assumption literal of its own, so
    z3 instantiates each lemma as written instead of preprocessing the lemmas together with the step; most
    queries need that, a few need the plain form (docs/z3.md, "Budgets, not timeouts")."""

    tracked: bool
    seed: int
    units: int


ATTEMPTS = (Attempt(True, 0, TRACKED_UNITS), Attempt(False, 0, PROVE_UNITS), Attempt(False, 1, PROVE_UNITS),
            Attempt(False, 2, PROVE_UNITS))


class DataProof:
    """The obligations, each lemma proved with true quantifiers (no model-based instantiation, so a lemma z3
    cannot prove comes back as unknown): by the first attempt; failing that, searched for a counterexample
    to induction among small states; failing that, by the other attempts in order.

    Every query is solved in a fresh z3 context on a budget of z3 resource units (`rlimit`), never of
    seconds, so a verdict does not depend on the machine's load.  Quantifier instantiation still depends on
    the solver's random seed and on the process's history, which is why a lemma has several attempts, each
    far from its budget when it succeeds.  Today's calibration is in docs/z3.md (about 7 M units a second
    on the shared machine)."""

    def __init__(self, brokers: int = 3, truncation: str = "kip320", attempts: tuple[Attempt, ...] = ATTEMPTS,
                 search_units: int = SEARCH_UNITS) -> None:
        design = DESIGNS[truncation]
        self.exact = Encoding(brokers, design, None)
        self.small = Encoding(brokers, design, SMALL + 2)
        self.attempts = attempts
        self.search_units = search_units

    def _inductive(self) -> list[str]:
        """The lemmas IndInit and IndNext prove; the implied ones have an obligation of their own."""
        return [name for name in self.exact.before if name not in IMPLIED]

    def actions(self) -> list[str]:
        return list(dict.fromkeys(step.action for step in self.exact.steps))

    def _search(self, query: Query) -> Any:
        """A model of the small states that breaks the goal under every lemma, or None."""
        solver, context = _fresh(self.search_units)
        solver.add(*(f.translate(context) for f in [self.small.bounds, *query.lemmas.values(), *query.extra]))
        return _Translated(solver.model(), context) if _refute(solver, context, query.goal) == z3.sat else None

    def _discharge(self, name: str, goals: list[tuple[str, Callable[[Encoding], Query]]],
                   explain: Callable[[Encoding, Any], dict[str, Any]]) -> Obligation:
        """Each goal (a lemma or property) in its own queries; the obligation holds when all do."""
        began = time.perf_counter()
        open_goals = []
        first, *fallbacks = self.attempts
        for label, build in goals:
            query = build(self.exact)
            if _solve(query, first) == z3.unsat:
                continue
            # a counterexample settles the goal, so it is looked for before the costlier fallbacks
            model = self._search(build(self.small))
            if model is not None:
                cti = explain(self.small, model)
                cti["broken"] = label
                return Obligation(name, VIOLATED, time.perf_counter() - began, cti)
            if not any(_solve(query, attempt) == z3.unsat for attempt in fallbacks):
                open_goals.append(label)
        result = UNKNOWN if open_goals else HOLDS
        out = Obligation(name, result, time.perf_counter() - began)
        out.unproved = open_goals
        return out

    def ind_init(self) -> Obligation:
        def build(name: str) -> Callable[[Encoding], Query]:
            return lambda enc: Query({}, [enc.init], enc.before[name])

        goals = [(n, build(n)) for n in self._inductive()]
        return self._discharge("IndInit", goals, _one_state)

    def implied(self, lemma: str) -> Obligation:
        def build(enc: Encoding) -> Query:
            return Query({name: enc.before[name] for name in IMPLIED[lemma]}, [], enc.before[lemma])

        return self._discharge(f"Implied: {lemma}", [(lemma, build)], _one_state)

    def ind_next(self, action: str) -> Obligation:
        def build(name: str) -> Callable[[Encoding], Query]:
            return lambda enc: Query(enc.before, [enc.relation(action)[0]], enc.after[name])

        goals = [(n, build(n)) for n in self._inductive()]
        return self._discharge(f"IndNext: {action}", goals, lambda enc, m: self._cti(enc, m, action))

    def ind_prop(self, prop: str) -> Obligation:
        def build(enc: Encoding) -> Query:
            extra, goal = enc.props[prop]
            return Query(enc.before, extra, goal)

        return self._discharge(f"IndProp: {prop}", [(prop, build)],
                               lambda enc, m: {"before": render(m, enc.model.s), "after": render(m, enc.model.t)})

    def _cti(self, enc: Encoding, model: Any, action: str) -> dict[str, Any]:
        _, chosen, which = enc.relation(action)
        index = _int(model, which)
        step = chosen[index] if 0 <= index < len(chosen) else chosen[0]
        return {"action": step.action, "actor": step.actor,
                "params": {k: _value(model, v) for k, v in step.params.items()},
                "before": render(model, enc.model.s), "after": render(model, enc.model.t)}

    def obligations(self) -> Iterator[Callable[[], Obligation]]:
        yield self.ind_init
        for action in self.actions():
            yield lambda action=action: self.ind_next(action)  # type: ignore[misc]
        for lemma in IMPLIED:
            yield lambda lemma=lemma: self.implied(lemma)  # type: ignore[misc]
        for prop in PROPERTIES:
            yield lambda prop=prop: self.ind_prop(prop)  # type: ignore[misc]


def _one_state(enc: Encoding, model: Any) -> dict[str, Any]:
    """A counterexample that is one state (IndInit's, an implied lemma's)."""
    return {"state": render(model, enc.model.s)}


def _fresh(units: int) -> tuple[Any, Any]:
    """A solver on a budget of `units`, in a z3 context of its own."""
    context = z3.Context()
    solver = z3.Solver(ctx=context)
    solver.set("rlimit", units)
    return solver, context


def _refute(solver: Any, context: Any, goal: Expr) -> Any:
    """The verdict once the negated goal joins the premises (last: instantiation follows assertion order)."""
    solver.add(z3.Not(goal).translate(context))
    return solver.check()


def _solve(query: Query, attempt: Attempt) -> Any:
    """The verdict on the query's premises and negated goal."""
    solver, context = _fresh(attempt.units)
    solver.set("random_seed", attempt.seed)
    solver.set("smt.mbqi", False)
    for name, lemma in query.lemmas.items():
        if attempt.tracked:
            solver.assert_and_track(lemma.translate(context), z3.Bool(f"lemma {name}", context))
        else:
            solver.add(lemma.translate(context))
    solver.add(*(f.translate(context) for f in query.extra))
    return _refute(solver, context, query.goal)


class _Translated:
    """A model found in a query's own context, read with the formulas of the shared one."""

    def __init__(self, model: Any, context: Any) -> None:
        self.model = model
        self.context = context

    def eval(self, expr: Expr, model_completion: bool = False) -> Any:
        return self.model.eval(expr.translate(self.context), model_completion=model_completion)


def _value(model: Any, expr: Expr) -> int | bool:
    value = model.eval(expr, model_completion=True)
    if z3.is_bool(value):
        return bool(z3.is_true(value))
    return int(value.as_long())


def render(model: Any, s: DataState) -> dict[str, Any]:
    """A state as a reader wants it: per broker its log [(epoch, record), ...] up to HORIZON offsets, HW,
    leader epoch and role; the node; the committed prefix."""
    def log(E: Expr, R: Expr, length: int) -> list[tuple[int, int]]:
        return [(_int(model, E[i]), _int(model, R[i])) for i in range(min(length, HORIZON))]

    brokers = {}
    for b in s.brokers():
        length = _int(model, s.ln(b))
        brokers[f"broker {b}"] = {
            "alive": _value(model, s[f"alive{b}"]), "role": ROLE_NAMES.get(_int(model, s.role(b)), "?"),
            "leader_epoch": _int(model, s.lep(b)), "leader": _int(model, s[f"lldr{b}"]),
            "log": log(s.E(b), s.R(b), length), "log_end": length, "hw": _int(model, s.hw(b)),
            "hw_checkpoint": _int(model, s[f"ck{b}"]), "epoch_start": _int(model, s[f"eso{b}"]),
            "truncating": _value(model, s[f"trunc{b}"]),
            "isr": [x for x in s.brokers() if _value(model, s.lisr(b, x))],
            "follower_leo": {x: _int(model, s.fleo(b, x)) for x in s.brokers() if x != b}}
    clen = _int(model, s["clen"])
    return {"node": {"leader": _int(model, s["nl"]), "leader_epoch": _int(model, s["ne"]),
                     "isr": [x for x in s.brokers() if _value(model, s.nisr(x))]},
            "committed": log(s["CE"], s["CR"], clen), "committed_len": clen,
            "exposed_hw_so_far": _int(model, s["hx"]), **brokers}


def _int(model: Any, expr: Expr) -> int:
    return int(model.eval(expr, model_completion=True).as_long())

