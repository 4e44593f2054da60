"""Counterexamples explained: each invariant's message names the facts a reviewer acts on (the planted
violations of tests/test_pipeline.py, one per invariant), the facts it names are the trace's, and every route
(check-trace, BMC, the TLC renderer, the pipeline report, conform) ends with that explanation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_pipeline import EVERY_PLANT, PLANT_SEEDS, _plant, _simulate

from kcm.conformance.check.invariants import InvariantChecker, Violation, explain, explanation
from kcm.conformance.explore.stateful import run_campaign
from kcm.conformance.pipeline import jobs as pl
from kcm.spec.tlc.modelcheck import render_counterexample, with_controllers
from kcm.spec.trace.format import Event, TraceWriter, make_event
from kcm.spec.vocabulary import INVARIANTS, Knobs
from kcm.tools.cli import main

EPOCH = r"\(leader epoch \d+\)"
# What each planted violation's explanation must name, as a pattern over its message.
NAMED: dict[str, str] = {
    "OneLeaderPerEpoch": r"two leaders in leader epoch \d+: broker \d+ \(named leader in the store since step \d+\) "
                         r"and broker \d+ \(named leader in the store\)",
    "IsrSubsetOfReplicas": r"ISR \[.*\] of leader epoch \d+ has broker\(s\) \[9\] outside the assignment \[.*\]",
    "HighWatermarkMonotonic/PerLeaderEpoch": r"HW of leader \d+ went back from \d+ \(reached at step \d+\) to \d+ "
                                             r"within leader epoch \d+ \(Fetch by broker:\d+\)",
    "HighWatermarkMonotonic/AcrossLeaders": r"HW exposed by leader \d+ \(leader epoch \d+\) went back to \d+, below "
                                            r"the \d+ leader \d+ exposed in leader epoch \d+ at step \d+",
    "StaleControllerFenced": r"broker \d+ applied LeaderAndIsr of stale controller epoch \d+ after seeing controller "
                             r"epoch \d+ \(latest controller epoch \d+ of controller \d+\)",
    "ValidPartitionTransitions": r"BrokerChange by controller:\d+ made the invalid transition OnlinePartition -> "
                                 r"NewPartition \(the model's table allows from OnlinePartition: .*\)",
    "LeaderInIsr": r"leader \d+ of leader epoch \d+ is not in the ISR \[.*\]",
    "ControllerEpochMonotonic": r"controller epoch went back from \d+ of controller \d+ to \d+ "
                                r"\(BrokerChange by observer\)",
    "HighWatermarkWithinLog": r"broker \d+ holds HW \d+ past its log end \d+ \(Fetch by broker:\d+\): it would expose "
                              r"as committed offsets it does not hold",
    "LeaderEpochMonotonic": r"leader epoch in the store went back from \d+ to \d+ \(BrokerChange by observer\)",
    "NoCommittedDataLoss": rf"committed record \[\d+, \d+\] {EPOCH} at offset \d+ is (missing from|replaced by "
                           rf"\[\d+, \d+\] {EPOCH} in) the log of broker \d+; committed at step \d+ when the HW of "
                           r"leader \d+ passed offset \d+; now held by broker\(s\) \d+",
    "ReplicaLogsAgree": rf"brokers \d+ and \d+ disagree at offset \d+, below both HWs: broker \d+ has \[\d+, \d+\] "
                        rf"{EPOCH}, broker \d+ has \[\d+, \d+\] {EPOCH}",
    "ValidReplicaTransitions": r"replica \d+: BrokerChange by controller:\d+ made the invalid transition "
                               r"OnlineReplica -> NewReplica \(the model's table allows from OnlineReplica: .*\)",
}


def _planted(kind: str) -> tuple[list[Event], list[Violation], str]:
    """A clean run, the violations its planted last event makes, and the invariant the plant breaks."""
    index = EVERY_PLANT.index(kind)
    events = _simulate(PLANT_SEEDS[index % len(PLANT_SEEDS)], 250, f"planted-{index}")
    event, invariant = _plant(kind, events)
    checker = InvariantChecker()
    for e in events:
        assert not checker.step(e)
    return [*events, event], checker.step(event), invariant


@pytest.mark.parametrize("kind", EVERY_PLANT)
def test_every_planted_violation_is_explained_with_its_facts(kind: str) -> None:
    _, found, invariant = _planted(kind)
    mine = [v for v in found if v.invariant.split("/")[0] == invariant]
    assert mine, found
    for v in mine:
        assert re.search(NAMED[v.invariant], v.message), v.message


@pytest.mark.parametrize("raised", [True, False])
def test_a_controller_elected_without_raising_the_epoch_is_named(raised: bool) -> None:
    events = _simulate(PLANT_SEEDS[0], 250, "elected")
    checker = InvariantChecker()
    for e in events:
        checker.step(e)
    epoch, holder = checker.state["controller_epoch"], checker.state["controller"]
    brokers = events[0]["args"]["brokers"]
    other = next(b for b in brokers if b != holder)
    delta: dict[str, Any] = {"controller": other, **({"controller_epoch": epoch + 1} if raised else {})}
    found = checker.step(make_event("elected", events[-1]["seq"] + 1, f"controller:{other}", "ControllerElect",
                                    {}, delta))
    messages = [v.message for v in found if v.invariant == "ControllerEpochMonotonic"]
    assert messages == ([] if raised else [
        f"broker {other} became controller without raising the controller epoch: {epoch} after {epoch} of "
        f"controller {holder} (ControllerElect by controller:{other})"])


def test_the_explanations_cover_every_invariant() -> None:
    assert {name.split("/")[0] for name in NAMED} == set(INVARIANTS)


def _leader_hw(events: list[Event], seq: int, broker: str, partition: str) -> Any:
    """The HW broker held for partition after event seq, by folding the deltas."""
    hw = None
    for event in events[: seq + 1]:
        hw = event["state"].get("hw", {}).get(broker, {}).get(partition, hw)
    return hw


def test_the_commit_step_named_is_where_the_leaders_hw_passed_the_record() -> None:
    events, found, _ = _planted("committed record lost")
    (v,) = [v for v in found if v.invariant == "NoCommittedDataLoss"]
    match = re.search(r"^(\S+): .* at offset (\d+) .* committed at step (\d+) when the HW of leader (\d+) passed",
                      v.message)
    assert match, v.message
    partition, offset, step, leader = match[1], int(match[2]), int(match[3]), match[4]
    assert _leader_hw(events, step, leader, partition) > offset
    assert (_leader_hw(events, step - 1, leader, partition) or 0) <= offset


def test_the_first_claim_named_is_the_step_that_named_the_leader() -> None:
    events, found, _ = _planted("two leaders")
    (v,) = found
    match = re.search(r"^(\S+): two leaders in leader epoch (\d+): broker (\d+) \(named leader in the store since "
                      r"step (\d+)\)", v.message)
    assert match, v.message
    partition, epoch, broker, step = match[1], int(match[2]), int(match[3]), int(match[4])
    state = events[step]["state"]
    assert state["leader"][partition] == broker and state["leader_epoch"][partition] == epoch


def test_explain_returns_the_last_violating_steps_violations_of_the_invariant() -> None:
    events, found, invariant = _planted("hw back")
    assert [v.invariant for v in explain(events, invariant)] == [v.invariant for v in found]
    assert [v.invariant for v in explain(events, "HighWatermarkMonotonic/AcrossLeaders")] == [
        "HighWatermarkMonotonic/AcrossLeaders"]
    assert explanation(events[:-1], invariant) == [
        "why: the invariant checker finds no violation of HighWatermarkMonotonic on these steps (a disagreement "
        "between the engines: please report it)"]
    assert explanation(events, "TypeOK")[0].startswith("why: TypeOK is not one of kcm's invariants")


def test_check_trace_ends_with_the_explanation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events, found, _ = _planted("stale request")
    trace = tmp_path / "stale.jsonl"
    with TraceWriter(trace) as writer:
        for event in events:
            writer.write(event)
    assert main(["check-trace", str(trace)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{trace}: StaleControllerFenced violated at step {found[0].seq}"
    assert lines[-1] == f"why: {found[0].message}"


def _event(seq: int, action: str, delta: dict[str, Any], actor: str = "observer", **args: Any) -> Event:
    return make_event("r", seq, actor, action, args, delta, full=seq == 0)


def test_a_counterexample_prints_every_changed_variable_and_says_when_nothing_changed() -> None:
    events = [
        _event(0, "Init", {"controller": 1, "controller_epoch": 1, "alive": {"1": True}}),
        _event(1, "FetchResponse", {}, tla_action="FetchRound"),
        _event(2, "BrokerChange", {"partition_state": {"1": {"p": "OnlinePartition"}},
                                   "broker_controller_epoch": {"1": 2}}, actor="controller:1"),
    ]
    lines = render_counterexample(events).splitlines()
    assert lines[3:] == [
        "  1. FetchRound",
        "      (no state change: FetchRound)",
        '  2. BrokerChange (controller:1)',
        "      partition_state: 1/p OnlinePartition",
        "      broker_controller_epoch: 1 2",
    ]


def test_a_controllers_store_write_is_given_its_controller() -> None:
    """TLC's steps name no actor: the writer of the store is the broker acting in the epoch it writes in."""
    events = [
        _event(0, "Init", {"controller": 1, "controller_epoch": 1, "acting_controller_epoch": {"1": 1, "2": 0}}),
        _event(1, "ControllerElect", {"controller": 2, "controller_epoch": 2, "acting_controller_epoch": {"2": 2}}),
        _event(2, "BrokerChange", {"leader": {"p": 2}, "partition_controller_epoch": {"p": 1}}),
        _event(3, "BrokerChange", {"leader": {"p": 3}, "partition_controller_epoch": {"p": 2}}),
        _event(4, "LeaderAndIsr", {"partition_controller_epoch": {"p": 2}}),
    ]
    assert [e["actor"] for e in with_controllers(events)] == [
        "observer", "observer", "controller:1", "controller:2", "observer"]
    assert [e["actor"] for e in events] == ["observer"] * 5  # the trace itself is left as TLC wrote it


def test_bmc_prints_changed_variables_and_the_explanation_into_kcm_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KCM_OUT", raising=False)
    code = main(["prove", "--bmc", "4", "--set", "controller_epoch_fencing=false", "--invariant",
                 "StaleControllerFenced"])
    out = capsys.readouterr().out
    assert code == 1
    written = tmp_path / "kcm-out" / "prove" / "bmc-counterexample.jsonl"
    assert written.exists() and [p.name for p in tmp_path.iterdir()] == ["kcm-out"]
    assert f"written to {Path('kcm-out') / 'prove' / 'bmc-counterexample.jsonl'}" in out
    assert re.search(r"^  4\. BrokerChange \(controller:1\) .*\n      t0-0: leader \d+ epoch \d+ ISR", out, re.M)
    assert re.search(r"^why \(StaleControllerFenced, step 4\): deposed controller 1 \(acting in controller epoch 1\)"
                     r" wrote .* while controller epoch 2 of controller \d+ is current", out.splitlines()[-1])


def test_the_pipeline_report_names_each_run_with_a_violation_and_its_first_event(tmp_path: Path) -> None:
    tables = pl._Tables()
    for run, seq, invariant in (("run-b", 9, "LeaderInIsr"), ("run-b", 4, "OneLeaderPerEpoch"),
                                ("run-a", 7, "ReplicaLogsAgree")):
        tables.verdicts.append({"run": run, "invariant": invariant, "verdict": "violated", "violations": 1,
                                "first_seq": seq})
        tables.violations.append({"run": run, "seq": seq, "invariant": invariant, "message": f"{invariant} text"})
    tables.verdicts.append({"run": "run-c", "invariant": "LeaderInIsr", "verdict": "holds", "violations": 0,
                            "first_seq": None})
    tables.found = 3
    summary = pl._summary(tmp_path, pl.Counts(), tables, 0, 0.1)
    pl.write_json(tmp_path / pl.SUMMARY, summary)
    text, _ = pl.report(tmp_path)
    lines = text.splitlines()
    start = lines.index("first violation of each run (run, step, invariant: explanation):")
    assert lines[start + 1 : start + 3] == ["  run-a step 7 ReplicaLogsAgree: ReplicaLogsAgree text",
                                            "  run-b step 4 OneLeaderPerEpoch: OneLeaderPerEpoch text"]
    # A tenth of three runs, drawn by a hash of their names: none drawn, and the report says so.
    assert lines[-1] == ("Z3 step validation: no run drawn: --validate-sample 0.1 draws each of the 3 runs by a hash "
                         "of its name (about 0.3 expected); --validate-sample all validates every run")


def test_conform_runs_the_examples_asked_and_says_what_else_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KCM_OUT", raising=False)
    code = main(["conform", "--examples", "12", "--steps", "15", "--set", "controller_epoch_fencing=false",
                 "--no-step-check", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["examples"] == summary["examples_asked"] == 12
    # No failure, so no shrinking: every machine run is an example hypothesis kept or discarded.
    assert summary["machine_runs"] == summary["examples"] + summary["examples_discarded"]
    assert [p.name for p in tmp_path.iterdir()] == ["kcm-out"]
    assert Path(summary["coverage"]["picture"]) == Path("kcm-out") / "conform" / "coverage.svg"


def test_a_campaign_counts_the_examples_hypothesis_discards_apart() -> None:
    """Without the example database, this design's 12 examples come with 2 that hypothesis discarded (it drew
    no rule whose precondition held): 14 machine runs, which `kcm conform` used to report as 14 examples."""
    campaign = run_campaign(Knobs().with_settings(["controller_epoch_fencing=false"]), 12, 15, step_check=False,
                            database=False)
    tally = campaign.tally
    assert (tally.counted, tally.replayed, tally.shrinking) == (12, 0, 0)
    assert tally.discarded > 0 and tally.examples == tally.counted + tally.discarded
