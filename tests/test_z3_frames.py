"""The lemmas bounded model checking assumes at every state (spec/z3/frames.py): only those that hold
initially and are inductive under the very search's knobs, actions and initial controller are kept, and
none of them excludes a state the unrolling can reach."""

from __future__ import annotations

from kcm.spec.vocabulary import Knobs
from kcm.spec.z3._z3 import and_all, not_, z3
from kcm.spec.z3.bmc import KNOWN_BUGS, Unrolling, bits_for
from kcm.spec.z3.frames import proven_lemmas
from kcm.spec.z3.invariants import Lemma
from kcm.spec.z3.model import Config

NO_RECORDS = Lemma("NoRecords", "every log is empty", lambda s: and_all(s.b("log_len", b) == 0 for b in s.cfg.ids))
NOT_TRUNCATING = Lemma("NotTruncating", "no broker is truncating",
                       lambda s: and_all(not_(s.b("truncating", b)) for b in s.cfg.ids))
EPOCH_ONE = Lemma("EpochOne", "the leader epoch is 1", lambda s: s["leader_epoch"] == 1)


def kept(knobs: Knobs, actions: tuple[str, ...] | None, *pool: Lemma) -> set[str]:
    return {lemma.name for lemma in proven_lemmas(knobs, 2, 1, actions, pool=list(pool)).kept}


def test_a_lemma_false_initially_is_refused() -> None:
    assert kept(Knobs(), None, EPOCH_ONE) == set()


def test_a_lemma_is_refused_when_an_action_of_the_search_breaks_it() -> None:
    # Empty logs stay empty without clients; a Produce step breaks the fact.
    assert kept(Knobs(), ("BrokerCrash", "BrokerRestart"), NO_RECORDS) == {"NoRecords"}
    assert kept(Knobs(), ("BrokerCrash", "BrokerRestart", "Produce"), NO_RECORDS) == set()


def test_a_lemma_is_refused_when_the_knobs_break_it() -> None:
    # Truncating to the HW needs no OffsetsForLeaderEpoch round; every later design sets `truncating`.
    assert kept(Knobs(truncation="hw"), None, NOT_TRUNCATING) == {"NotTruncating"}
    assert kept(Knobs(truncation="kip279"), None, NOT_TRUNCATING) == set()


def test_the_kip320_case_keeps_the_lemmas_true_of_its_buggy_design_only() -> None:
    bug = next(b for b in KNOWN_BUGS if b.model == "kip279")
    proven = proven_lemmas(Knobs().with_settings(list(bug.settings)), bug.brokers, bug.capacity, bug.actions,
                           bug.controller)
    names = {lemma.name for lemma in proven.kept}
    assert {"HwInLog", "RecordIdentity", "CurrentLeaderMatchesNode", "LeaderInIsr"} <= names
    # A follower copies entries of a newer epoch than its own and may then lead in an older one.
    assert "LeaderEntriesNotNewer" in proven.dropped
    # The ghost arrays of the induction are not leaves of the unrolling.
    assert "SentRequestsAreConsistent" in proven.dropped and "SentRequestsAreConsistent" not in names


def test_no_reachable_state_breaks_a_kept_lemma() -> None:
    # The proof runs in the induction's model; the unrolling itself (no lemmas assumed) confirms that none
    # of its states up to this depth breaks what was kept.
    knobs, depth = Knobs(truncation="kip101"), 5
    proven = proven_lemmas(knobs, 2, 1)
    cfg = Config(brokers=2, knobs=knobs, logs="content", capacity=1, history="states", width=bits_for(depth, 1))
    unrolling = Unrolling(cfg)
    for _ in range(depth):
        unrolling.extend()
        unrolling.solver.push()
        unrolling.solver.add(not_(and_all(f(unrolling.states[-1]) for f in proven.formulas)))
        assert unrolling.solver.check() == z3.unsat
        unrolling.solver.pop()
