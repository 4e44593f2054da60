"""Inductive invariants (spec/z3/induction.py): the three Apalache steps for the core protocol with
unbounded epochs and offsets; which invariants are inductive alone, which need strengthening."""

from __future__ import annotations

import pytest

from kcm.spec.verdicts import HOLDS, VIOLATED
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.induction import Induction, InductionResult


@pytest.fixture(scope="module")
def engine() -> Induction:
    return Induction(brokers=2)


def steps(result: InductionResult) -> dict[str, str]:
    return {s.step: s.result for s in result.steps}


ALL_PROVED = {"IndInit": HOLDS, "IndNext": HOLDS, "IndProp": HOLDS}


def test_the_fences_and_the_controller_epoch_are_inductive_alone(engine: Induction) -> None:
    for name in ("StaleControllerFenced", "ControllerEpochMonotonic"):
        result = engine.prove(name)
        assert result.alone and result.strengthening == []
        assert steps(result) == ALL_PROVED


def test_leader_in_isr_needs_the_compare_and_set_lemmas(engine: Induction) -> None:
    result = engine.prove("LeaderInIsr")
    assert not result.alone
    # the counterexample to induction alone: a leader writes an ISR it does not know to be current
    assert result.alone_cti is not None and result.alone_cti["action"].startswith(("Fetch", "IsrShrink"))
    assert {"CurrentLeaderMatchesNode", "LeaderKnowsItselfInIsr"} <= set(result.strengthening)
    assert steps(result) == ALL_PROVED
    # the strengthening is drawn from what Houdini keeps: lemmas that hold initially and together inductive
    assert set(result.strengthening) <= set(engine.houdini())


def test_one_leader_per_epoch_needs_the_history_of_sent_requests(engine: Induction) -> None:
    result = engine.prove("OneLeaderPerEpoch")
    assert not result.alone
    assert {"SentRequestsAreConsistent", "NoFutureEpochRecorded"} <= set(result.strengthening)
    assert steps(result) == ALL_PROVED


def test_without_fencing_the_induction_step_fails_with_a_counterexample() -> None:
    engine = Induction(brokers=2, knobs=Knobs(controller_epoch_fencing=False))
    result = engine.prove("StaleControllerFenced")
    assert not result.alone
    failing = [s for s in result.steps if s.result == VIOLATED]
    assert [s.step for s in failing] == ["IndProp"]
    cti = failing[0].cti
    assert cti is not None
    assert cti["action"].startswith(("LeaderAndIsr", "UpdateMetadata", "BrokerChange", "StopReplica"))
