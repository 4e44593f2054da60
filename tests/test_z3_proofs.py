"""Universal proofs (spec/z3/proofs.py): every property is proved for all inputs up to N brokers, and
each one fails, with a model, when the rule or knob it rests on is broken."""

from __future__ import annotations

import random

import pytest

from kcm.conformance.check.tables import implementation_rules, replica_table
from kcm.impl import election
from kcm.impl.states import VALID_PREVIOUS_REPLICA_STATES, ReplicaState
from kcm.spec.verdicts import HOLDS
from kcm.spec.vocabulary import NO_LEADER, Knobs
from kcm.spec.z3 import elections
from kcm.spec.z3.model import Rules
from kcm.spec.z3.proofs import ProofResult, run_proofs
from kcm.spec.z3.solver import z3


def failed(results: list[ProofResult]) -> dict[str, ProofResult]:
    return {r.property: r for r in results if r.result != HOLDS}


@pytest.fixture(scope="module")
def default_results() -> list[ProofResult]:
    return run_proofs(brokers=8, rules=implementation_rules())


def test_every_property_is_proved_for_up_to_8_brokers(default_results: list[ProofResult]) -> None:
    assert len(default_results) >= 30
    assert failed(default_results) == {}
    groups = {r.group for r in default_results}
    assert {"election/offline", "election/reassign", "election/preferred", "election/controlled_shutdown",
            "tables/partition", "tables/replica", "fencing", "epochs", "refinement"} <= groups


def test_the_brokers_bound_is_configurable() -> None:
    results = run_proofs(brokers=3, only="offline election")
    assert len(results) == 5 and failed(results) == {}
    with pytest.raises(ValueError):
        run_proofs(brokers=1)


def test_unclean_election_breaks_isr_membership_with_a_model() -> None:
    results = failed(run_proofs(brokers=4, knobs=Knobs(unclean_election=True), only="election"))
    assert set(results) == {"offline election: the leader is in the ISR"}
    model = results["offline election: the leader is in the ISR"].model
    assert model is not None
    assert model["elected"] not in model["isr (in its order)"]
    assert model["elected"] in model["live"] and model["elected"] in model["assignment"]


def test_an_election_scanning_isr_order_breaks_the_order_property() -> None:
    results = failed(run_proofs(brokers=4, rules=Rules(election_order="isr"), only="picks"))
    assert "offline election: picks the first qualifying replica in assignment order" in results
    assert "controlled_shutdown election: picks the first qualifying replica in assignment order" in results
    assert "preferred election: picks the preferred (first assigned) replica" in results
    model = results["offline election: picks the first qualifying replica in assignment order"].model
    assert model is not None
    first = next(r for r in model["assignment"] if r in model["live"] and r in model["isr (in its order)"])
    assert model["elected"] != first


def test_ignoring_liveness_breaks_the_live_replica_property() -> None:
    results = failed(run_proofs(brokers=4, rules=Rules(election_checks_live=False), only="live replica"))
    assert len(results) == 4
    for result in results.values():
        assert result.model is not None and result.model["elected"] not in result.model["live"]


def test_an_unclean_election_keeping_the_isr_loses_the_leader_from_it() -> None:
    rules = Rules(unclean_isr="keep")
    results = failed(run_proofs(brokers=4, knobs=Knobs(unclean_election=True), rules=rules, only="new ISR"))
    assert "offline election: the new ISR is within the assignment and holds the leader" in results


def test_an_election_without_epoch_bump_breaks_epoch_monotonicity() -> None:
    results = failed(run_proofs(brokers=4, rules=Rules(leader_epoch_bump=0), only="epoch"))
    assert {"offline election: the leader epoch goes up", "reassign election: the leader epoch goes up",
            "preferred election: the leader epoch goes up", "controlled_shutdown election: the leader epoch goes up",
            "BrokerChange: a change of leader or ISR bumps the leader epoch"} <= set(results)


def test_a_mutated_state_table_is_caught() -> None:
    table = dict(replica_table())
    table["NonExistentReplica"] = table["NonExistentReplica"] | {"OnlineReplica"}
    results = failed(run_proofs(brokers=3, rules=Rules(replica_table=table), only="replica"))
    assert set(results) == {
        "replica table: the implementation's valid previous states are Kafka's",
        "replica state machine: refuses exactly the invalid transitions",
        "replica state machine: OnlineReplica reaches NonExistentReplica only through OfflineReplica, "
        "ReplicaDeletionStarted, ReplicaDeletionSuccessful",
    }
    model = results["replica table: the implementation's valid previous states are Kafka's"].model
    assert model == {"from": "OnlineReplica", "to": "NonExistentReplica"}


def test_the_tables_checked_are_the_implementations() -> None:
    table = replica_table()
    for target, sources in VALID_PREVIOUS_REPLICA_STATES.items():
        assert table[target.value] == frozenset(s.value for s in sources)
    assert ReplicaState.NonExistentReplica.value in table


def test_without_fencing_stale_requests_and_deposed_controllers_get_through() -> None:
    results = failed(run_proofs(brokers=4, knobs=Knobs(controller_epoch_fencing=False), only="fencing"))
    assert set(results) == {
        "LeaderAndIsr: a request from an older controller epoch is not applied",
        "UpdateMetadata: a request from an older controller epoch is not applied",
        "StopReplica: a request from an older controller epoch is not applied",
        "BrokerChange: a deposed controller's write does not succeed",
        "ControllerDecision: a deposed controller's write does not succeed",
    }
    model = results["LeaderAndIsr: a request from an older controller epoch is not applied"].model
    assert model is not None and model["param applied"] is True
    assert model["param controller_epoch"] < int(str(model["broker_controller_epoch.1"]).split(" ")[0])


def test_without_the_leader_epoch_check_a_broker_goes_back_an_epoch() -> None:
    results = failed(run_proofs(brokers=3, knobs=Knobs(leader_epoch_check=False), only="LeaderAndIsr"))
    assert set(results) == {"LeaderAndIsr: a broker only moves to a newer leader epoch"}


def _concrete(n: int, rng: random.Random) -> tuple[list[int], list[int], set[int]]:
    assignment = rng.sample(range(n), rng.randint(1, n))
    isr = [r for r in assignment if rng.random() < 0.6] or [assignment[0]]
    rng.shuffle(isr)
    live = {b for b in range(n) if rng.random() < 0.6}
    return assignment, isr, live


@pytest.mark.parametrize("unclean", [False, True])
def test_the_z3_offline_election_computes_what_the_implementation_does(unclean: bool) -> None:
    """The encoding mirrors kcm.impl.election: same leader and same ISR on random concrete inputs."""
    rng = random.Random(7)
    n = 5
    for _ in range(25):
        assignment, isr, live = _concrete(n, rng)
        ids = range(n)
        inp = elections.ElectionInput(
            assignment=[(z3.IntVal(a), z3.BoolVal(True)) for a in assignment],
            isr={b: z3.BoolVal(b in isr) for b in ids},
            isr_position={b: z3.IntVal(isr.index(b) if b in isr else 0) for b in ids},
            live={b: z3.BoolVal(b in live) for b in ids},
            shutting_down={b: z3.BoolVal(False) for b in ids},
            target=[], leader_epoch=z3.IntVal(3),
        )
        outcome = elections.offline(inp, unclean, Rules())
        expected = election.offline_partition_leader(assignment, isr, live, unclean)
        assert z3.simplify(outcome.leader).as_long() == (NO_LEADER if expected is None else expected)
        if expected is not None:
            live_isr = [r for r in isr if r in live]
            want = set(live_isr) if expected in live_isr else {expected}
            assert {b for b in ids if z3.is_true(z3.simplify(outcome.isr[b]))} == want
