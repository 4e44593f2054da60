"""Bounded model checking (spec/z3/bmc.py): shortest counterexamples on the known-bug variants, written
as trace format v1 that the invariant checker reads and agrees with; none on the safe design."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.spec.trace.format import Event, TraceWriter, load_trace
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.bmc import BMC_BUGS, BMC_INVARIANTS, BmcResult, depth_query, diff_states, run_bmc
from kcm.spec.z3.solver import z3
from kcm.spec.z3.validate import validate_events


def written(tmp_path: Path, result: BmcResult) -> list[Event]:
    path = tmp_path / "cex.jsonl"
    with TraceWriter(path, validate=True) as writer:
        for event in result.events:
            writer.write(event)
    return load_trace(path)


def checker_invariants(events: list[Event]) -> set[str]:
    return {v.invariant for v in InvariantChecker().check_all(events).violations}


@pytest.mark.parametrize(
    ("setting", "invariant", "depth"),
    [("unclean_election=true", "NoCommittedDataLoss", 4),
     ("controller_epoch_fencing=false", "StaleControllerFenced", 4),
     # KAFKA-2334: a leader that restarted without a checkpoint leads again with the HW it had
     ("truncation=kip279", "HighWatermarkMonotonic/AcrossLeaders", 8)],
)
def test_known_bugs_give_shortest_counterexamples_the_checker_agrees_with(
    tmp_path: Path, setting: str, invariant: str, depth: int
) -> None:
    result = run_bmc(Knobs().with_settings([setting]), 8, brokers=2, invariants=[invariant])
    assert result.invariant == invariant and result.depth == depth
    events = written(tmp_path, result)
    # one event a step, and before each fetch the request it handles
    steps = [e for e in events if e["action"] != "SendFetch"]
    assert len(steps) == depth + 1 and events[0]["action"] == "Init" and events[0].get("full")
    for before, event in itertools.pairwise(events):
        if event["action"] == "Fetch":
            assert before["action"] == "SendFetch" and before["actor"] == f"broker:{event['args']['replica_id']}"
    assert checker_invariants(events) == {invariant}
    # the counterexample is made of steps of the transition relation, as step validation confirms
    assert validate_events(events).ok


@pytest.mark.long  # 3-10 s: one query at depth 8 with 3 brokers
def test_truncating_to_the_hw_loses_committed_data(tmp_path: Path) -> None:
    # Straight to depth 8 (the shortest, as the long test below shows): a third broker is needed, for the
    # leader epoch to move on while a follower that lags in HW stays in the ISR.
    result = run_bmc(Knobs(truncation="hw"), 8, brokers=3, capacity=1, invariants=["NoCommittedDataLoss"],
                     min_depth=8)
    assert result.invariant == "NoCommittedDataLoss" and result.depth == 8
    events = written(tmp_path, result)
    assert checker_invariants(events) == {"NoCommittedDataLoss"}
    actions = [e["action"] for e in events]
    assert "Produce" in actions and actions[-1] == "LeaderAndIsr"  # a follower in the ISR truncates to its HW
    last = events[-1]["state"]
    assert any(entries == {"t0-0": []} for entries in last.get("log", {}).values())


@pytest.mark.long
def test_the_hw_counterexample_is_the_shortest() -> None:
    result = run_bmc(Knobs(truncation="hw"), 9, brokers=3, capacity=1, invariants=["NoCommittedDataLoss"])
    assert result.invariant == "NoCommittedDataLoss" and result.depth == 8


def test_the_kip320_leader_withholds_its_hw_until_its_epoch_start() -> None:
    result = run_bmc(Knobs(), 7, brokers=2, invariants=["HighWatermarkMonotonic/AcrossLeaders"])
    assert not result.found and result.depth == 7


def test_the_safe_design_has_no_counterexample_up_to_the_bound() -> None:
    result = run_bmc(Knobs(), 4, brokers=2)
    assert not result.found and result.depth == 4 and len(result.per_depth) == 4


def test_bad_requests_are_value_errors() -> None:
    with pytest.raises(ValueError, match="not checked"):
        run_bmc(Knobs(), 2, invariants=["NoSuchInvariant"])
    with pytest.raises(ValueError):
        run_bmc(Knobs(), 0)
    assert "NoCommittedDataLoss" in BMC_INVARIANTS and "OneLeaderPerEpoch" in BMC_INVARIANTS


def test_deltas_are_the_difference_at_each_depth() -> None:
    before = {"controller": 1, "leader": {"p": 1}, "role": {"1": {"p": "leader"}}, "log": {"1": {"p": []}}}
    after = {"controller": 2, "leader": {"p": 1}, "role": {"1": {}}, "log": {"1": {"p": [[0, 1]]}}}
    assert diff_states(before, after) == {"controller": 2, "role": {"1": {"p": None}}, "log": {"1": {"p": [[0, 1]]}}}


def test_model_instances_are_the_listed_actions() -> None:
    from kcm.spec.z3.actions import MODEL_ACTIONS, Relations
    from kcm.spec.z3.model import Config, State

    cfg = Config(brokers=2, knobs=Knobs(truncation="kip279"))
    made = {e.action for e in Relations(cfg, State(cfg, "s."), State(cfg, "t.")).model_instances()}
    assert made == set(MODEL_ACTIONS)


def test_a_reproduction_subset_of_actions_still_finds_the_bug() -> None:
    # Like MCunclean's Next: no restarts, fetches or checkpoints, and the same counterexample.
    result = run_bmc(Knobs(unclean_election=True), 6, brokers=2,
                     actions=["BrokerCrash", "SessionExpire", "IsrShrink", "ControllerElect", "BrokerChange",
                              "LeaderAndIsr", "Produce"])
    assert result.invariant == "NoCommittedDataLoss"
    assert {e["action"] for e in result.events[1:]} <= {"BrokerCrash", "SessionExpire", "IsrShrink",
                                                         "ControllerElect", "BrokerChange", "LeaderAndIsr",
                                                         "Produce"}


def test_the_search_starts_from_the_controller_asked_for(tmp_path: Path) -> None:
    # Broker 2 controls and broker 1 leads: a crash of the leader needs no controller election.
    result = run_bmc(Knobs(unclean_election=True), 4, brokers=2, controller=2,
                     actions=["BrokerCrash", "SessionExpire", "IsrShrink", "BrokerChange", "LeaderAndIsr", "Produce"])
    first = result.events[0]["state"]
    assert first["controller"] == 2 and first["acting_controller_epoch"] == {"1": 0, "2": 1}
    assert first["leader"] == {"t0-0": 1}
    assert result.invariant == "NoCommittedDataLoss"
    assert "controller:2" in {e["actor"] for e in result.events}
    assert checker_invariants(written(tmp_path, result)) == {"NoCommittedDataLoss"}
    with pytest.raises(ValueError, match="controller must be one of the brokers"):
        run_bmc(Knobs(), 2, brokers=2, controller=3)


@pytest.mark.long  # about 60 s: depth by depth to 15 with 3 brokers
def test_the_kip279_case_is_found_from_its_reproduction_models_start(tmp_path: Path) -> None:
    bug = next(b for b in BMC_BUGS if b.model == "kip101")
    result = bug.run()
    assert result.invariant == "ReplicaLogsAgree" and result.depth == bug.story.depth == 15
    assert "ReplicaLogsAgree" in checker_invariants(written(tmp_path, result))
    assert not {"ControllerElect"} & {e["action"] for e in result.events}


def test_the_last_two_queries_of_a_search_export_as_cnf_with_their_verdicts(tmp_path: Path) -> None:
    """What other SAT solvers are given is exactly BMC's question: the refutation one step short of the
    counterexample is unsatisfiable, the query at its depth satisfiable."""
    # The benchmarks ship with the checkout only, not with an installed kcm (the compiled suite of .ci/run).
    write_queries = pytest.importorskip(
        "kcm.tools.bench.bmc", reason="the benchmarks live in the checkout, not in an installed kcm").write_queries
    bug = next(b for b in BMC_BUGS if b.model == "zombie")
    paths = write_queries(bug, tmp_path)
    assert [p.name for p in paths] == [f"zombie-depth{bug.story.depth - 1}-unsat.cnf",
                                    f"zombie-depth{bug.story.depth}-sat.cnf"]
    verdicts = []
    for path in paths:
        assert path.read_text().startswith("p cnf ")
        solver = z3.Solver()
        solver.from_file(str(path))
        verdicts.append(solver.check())
    assert verdicts == [z3.unsat, z3.sat]


def test_the_depth_query_is_the_searchs_question() -> None:
    bug = next(b for b in BMC_BUGS if b.model == "staleepoch")
    verdicts = []
    for depth in (bug.story.depth - 1, bug.story.depth):
        solver = z3.Solver()
        solver.add(*depth_query(bug, depth))
        verdicts.append(solver.check())
    assert verdicts == [z3.unsat, z3.sat]


def test_the_controllers_state_machines_are_the_specs_along_the_trace() -> None:
    """The Z3 model has no partition or replica state machine; the trace carries the TLA+ specification's
    (InitStable's at Init, BrokerChangeWork's after a broker change) with the transitions that lead there,
    which the checker holds a controller's step to. tests/test_hunt.py replays the traces."""
    bug = next(b for b in BMC_BUGS if b.model == "kafka1211")
    events = bug.run().events
    assert events[0]["state"]["partition_state"] == {"1": {"t0-0": "OnlinePartition"}}
    assert events[0]["state"]["replica_state"] == {"1": {"t0-0": {str(r): "OnlineReplica" for r in (1, 2, 3)}}}
    change = next(e for e in events if e["action"] == "BrokerChange")
    dead = change["args"]["dead"]
    assert dead and all(change["state"]["replica_state"]["1"]["t0-0"][str(r)] == "OfflineReplica" for r in dead)
    assert all(["replica", "t0-0", str(r), "OnlineReplica", "OfflineReplica"] in change["args"]["transitions"]
               for r in dead)
    assert checker_invariants(events) == {bug.invariant}
