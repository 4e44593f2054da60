"""No verdict rests on zero work (issue 38, item 8; docs/verdicts.md): every engine says `unobserved`, not
`holds`, for a check that looked at nothing, and a run that observed nothing does not exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcm.conformance.explore.campaign import run_campaign
from kcm.conformance.explore.hunt import BFS, Answer, Engine
from kcm.conformance.explore.route import no_counterexample
from kcm.conformance.explore.zk_campaign import CampaignPlan
from kcm.conformance.explore.zk_campaign import CampaignResult as ZkCampaign
from kcm.conformance.review import Cell, RowResult
from kcm.conformance.verify import engines, zookeeper
from kcm.conformance.verify.stages import StageRow, VerifyContext, verdict
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.designs import VARIANTS
from kcm.spec.tlc.modelcheck import CheckOutcome
from kcm.spec.tlc.runner import TlcResult
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.verdicts import (
    AS_EXPECTED,
    HOLDS,
    UNKNOWN,
    UNOBSERVED,
    VIOLATED,
    combined,
    held,
    holds_to_depth,
    severity,
    worst,
)
from kcm.spec.vocabulary import INVARIANTS, PROPERTIES, Knobs
from kcm.tools.cli import main
from kcm.tools.progress import Reporter

EVERY_NAME = {*INVARIANTS, *PROPERTIES}


def test_a_run_of_nothing_is_unobserved_and_does_not_pass() -> None:
    assert worst([]) == UNOBSERVED and combined([]) == UNOBSERVED
    assert worst([UNOBSERVED, UNOBSERVED]) == UNOBSERVED
    assert severity(UNOBSERVED) == 2
    assert held(0) == UNOBSERVED and held(1) == HOLDS


def test_what_a_trace_cannot_show_does_not_undo_what_it_shows() -> None:
    assert worst([UNOBSERVED, HOLDS, UNOBSERVED]) == HOLDS
    assert worst([UNOBSERVED, holds_to_depth(4)]) == holds_to_depth(4)
    assert worst([HOLDS, UNOBSERVED, VIOLATED]) == VIOLATED


def test_an_engine_that_observed_nothing_leaves_the_run_undecided() -> None:
    assert combined([HOLDS, AS_EXPECTED, UNOBSERVED]) == UNOBSERVED
    assert combined([UNOBSERVED, UNKNOWN]) == UNKNOWN == combined([UNKNOWN, UNOBSERVED])
    assert combined([UNOBSERVED, VIOLATED]) == VIOLATED == combined([VIOLATED, UNOBSERVED, HOLDS])
    assert combined([VIOLATED, UNKNOWN]) == UNKNOWN
    rows = [StageRow("z3", "proofs", HOLDS, "", 1.0), StageRow("simulation", "A", UNOBSERVED, "", 0.0),
            StageRow("simulation", "B", HOLDS, "", 0.0)]
    assert verdict(rows) == HOLDS
    assert verdict([*rows[:1], rows[1]]) == UNOBSERVED


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--steps", "0"], ["--seeds", "0", "--steps", "0"]])
def test_a_verify_of_no_seed_or_no_step_is_unobserved_and_exits_2(argv: list[str], tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", "--only", "simulation", *argv, "--out", str(tmp_path), "--json"])
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert code == 2 and document["result"] == UNOBSERVED
    assert {row["verdict"] for row in document["stages"]} == {UNOBSERVED}
    assert {row["check"] for row in document["stages"]} == EVERY_NAME
    assert err.splitlines()[-1] == ("kcm: error: nothing checked by simulation (every row unobserved): "
                                    "the run does not pass")


def test_the_table_says_unobserved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--only", "simulation", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert f"verdict: unobserved ({len(INVARIANTS) + len(PROPERTIES)} rows" in capsys.readouterr().out


@pytest.mark.parametrize("option", ["--seeds", "--steps"])
def test_a_negative_count_is_a_usage_error(option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--only", "simulation", option, "-1", "--out", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"kcm: error: kcm verify: argument {option}: must be at least 0, not -1\n"


def test_an_engine_that_returns_no_row_is_shown_unobserved(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(engines.STAGES, "pipeline", lambda ctx: [])
    ctx = VerifyContext(Knobs(), SimConfig(), 0, 0, Reporter("none"), out=tmp_path)
    rows = engines.run(ctx, ["pipeline"])
    assert [(row.engine, row.verdict) for row in rows] == [("pipeline", UNOBSERVED)]
    assert verdict(rows) == UNOBSERVED


def test_a_campaign_of_no_step_is_unobserved_though_its_bootstrap_was_checked() -> None:
    result = run_campaign(Knobs(), range(2), 0)
    assert result.checks["ControllerEpochMonotonic"] > 0  # the bootstrap's events
    assert set(result.verdicts().values()) == {UNOBSERVED}
    assert set(run_campaign(Knobs(), range(0), 100).verdicts().values()) == {UNOBSERVED}


def test_an_invariant_the_campaign_never_checked_is_unobserved() -> None:
    """Three steps write no record: the invariants on logs were never checked."""
    result = run_campaign(Knobs(), range(1), 3)
    verdicts = result.verdicts()
    checked = {key.split("/")[0] for key, n in result.checks.items() if n}
    assert {"NoCommittedDataLoss", "ReplicaLogsAgree"} <= set(INVARIANTS) - checked
    assert {name for name in EVERY_NAME if verdicts[name] == HOLDS} == checked
    assert {name for name in EVERY_NAME if verdicts[name] == UNOBSERVED} == EVERY_NAME - checked


def _trace(path: Path, events: list[Event]) -> Path:
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    return path


def _bootstrap() -> list[Event]:
    events: list[Event] = []
    sim = Simulator(1, Knobs(), SimConfig(), events.append)
    sim.bootstrap()
    return events


def test_check_trace_of_a_trace_that_shows_nothing_exits_2(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    init = _bootstrap()[0]
    bare = {**init, "state": {"alive": init["state"]["alive"]}}
    trace = _trace(tmp_path / "bare.jsonl", [bare])
    assert main(["check-trace", str(trace)]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == f"{trace}: 1 events, every invariant unobserved"
    assert err == f"kcm: error: {trace}: nothing checked (every invariant unobserved): the trace does not pass\n"


def test_check_trace_of_an_empty_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert main(["check-trace", str(tmp_path / "empty.jsonl")]) == 2
    assert capsys.readouterr().err == f"kcm: error: {tmp_path / 'empty.jsonl'}: empty trace\n"


def test_check_trace_leaves_an_invariant_it_never_checked_unobserved(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The bootstrap carries the controller variables StaleControllerFenced reads, but no request it judges."""
    trace = _trace(tmp_path / "boot.jsonl", _bootstrap())
    assert main(["check-trace", str(trace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "StaleControllerFenced" not in report["checks"]
    assert report["verdicts"]["StaleControllerFenced"] == UNOBSERVED
    assert report["verdicts"]["ControllerEpochMonotonic"] == HOLDS


def test_a_tlc_run_of_no_state_is_unobserved() -> None:
    def outcome(states: int) -> CheckOutcome:
        return CheckOutcome("ci", Knobs(), TlcResult(0, distinct_states=states), None, [])

    assert outcome(0).verdict == UNOBSERVED and outcome(0).to_json()["result"] == UNOBSERVED
    assert outcome(5).verdict == HOLDS


def test_a_review_row_whose_cells_explored_nothing_is_unobserved() -> None:
    safe = next(v for v in VARIANTS if not v.expected)
    assert RowResult(safe).verdict == UNOBSERVED
    assert RowResult(safe, {"LeaderInIsr": Cell("LeaderInIsr", UNOBSERVED)}).verdict == UNOBSERVED
    assert RowResult(safe, {"LeaderInIsr": Cell("LeaderInIsr", HOLDS, 7)}).verdict == AS_EXPECTED


def test_a_zookeeper_campaign_of_no_event_is_unobserved() -> None:
    assert zookeeper._verdict(ZkCampaign(CampaignPlan())) == UNOBSERVED


def test_a_hunt_whose_exhaustive_search_explored_no_state_is_unobserved() -> None:
    assert no_counterexample(Answer(Engine(BFS), None, [], 1.0, True, states=0)) == UNOBSERVED
    assert no_counterexample(Answer(Engine(BFS), None, [], 1.0, True, states=9)) == HOLDS
