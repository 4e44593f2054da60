"""Liveness: TLC's lassos read and rendered, the temporal properties configured and named, `kcm check --liveness`
and `kcm review --liveness` (marker `tlc`: each progress property holds on the safe design's instance and is
violated on a variant that breaks it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcm.conformance.review import Cell, RowResult, markdown, select
from kcm.spec.designs import LIVENESS_VARIANTS
from kcm.spec.tlc.config import configure, declared
from kcm.spec.tlc.modelcheck import (
    PROGRESS_PROPERTIES,
    PROPERTIES,
    WRITES_ACCEPTED,
    ModelError,
    check_liveness,
    check_property_names,
    liveness_models,
    model_properties,
    render_counterexample,
)
from kcm.spec.tlc.runner import STUTTERING, TEMPORAL, TlcResult, parse_output
from kcm.spec.trace.format import Event, make_event
from kcm.spec.verdicts import AS_EXPECTED, HOLDS, UNEXPECTED, VIOLATED
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main

DATA = Path(__file__).parent / "data"


def test_a_lasso_that_goes_back_to_an_earlier_state() -> None:
    result = parse_output((DATA / "tlc_lasso.out").read_text(), TlcResult(13))
    assert (result.violated, result.violation_kind) == (TEMPORAL, "temporal")
    assert [step.state["x"] for step in result.trace] == [0, 1, 2]
    assert (result.loop_start, result.loop_action) == (0, "Action")
    assert result.errors == []


def test_a_lasso_that_ends_stuttering() -> None:
    result = parse_output((DATA / "tlc_stuttering.out").read_text(), TlcResult(13))
    assert result.violated == TEMPORAL and [step.state["x"] for step in result.trace] == [0]
    assert (result.loop_start, result.loop_action) == (0, STUTTERING)


def _events(loop_to: int, loop_action: str) -> list[Event]:
    alive = {"alive": {"1": True}}
    events = [make_event("r", 0, "env", "Init", {"source": "tlc"}, alive, full=True)]
    for seq, up in ((1, False), (2, True)):
        events.append(make_event("r", seq, "observer", "BrokerCrash" if not up else "BrokerRestart",
                                 {"source": "tlc", "tla_action": "BrokerCrash" if not up else "BrokerRestart"},
                                 {"alive": {"1": up}}))
    events[-1]["args"].update(loop_to=loop_to, loop_action=loop_action)
    return events


def test_the_rendered_lasso_marks_where_its_loop_starts_and_ends() -> None:
    lines = render_counterexample(_events(1, "BrokerCrash")).splitlines()
    start = lines.index("    -- the loop starts here: the steps below repeat forever --")
    assert lines[start + 1].strip() == "1. BrokerCrash" and "loop_to" not in "".join(lines)
    assert lines[-1] == "    -- BrokerCrash goes back to step 1: the loop repeats forever --"
    stutter = render_counterexample(_events(2, STUTTERING)).splitlines()
    assert "loop starts" not in "".join(stutter)
    assert stutter[-1] == "    -- then nothing happens any more: step 2 stutters forever --"


def test_configure_replaces_the_properties_and_reads_them_back() -> None:
    cfg = "SPECIFICATION LiveSpec\nPROPERTIES\n    ControllerElected\n    LeaderElected\n"
    assert declared(cfg, "PROPERTY") == ["ControllerElected", "LeaderElected"]
    only = configure(cfg, Knobs(), None, ["LeaderElected"])
    assert declared(only, "PROPERTY") == ["LeaderElected"] and "ControllerElected" not in only
    assert declared(configure(cfg, Knobs(), ["TypeOK"]), "INVARIANT") == ["TypeOK"]


def test_every_progress_property_is_checked_by_a_liveness_model_and_broken_by_a_review_row() -> None:
    checked = {name for model in liveness_models() for name in model_properties(model)}
    assert checked == set(PROPERTIES)
    broken = {name for variant in LIVENESS_VARIANTS for name in variant.expected}
    assert set(PROGRESS_PROPERTIES) <= broken
    for variant in LIVENESS_VARIANTS:
        assert variant.expected <= set(model_properties(variant.model)), variant.label
    assert model_properties("ci") == []


def test_property_names_are_checked_against_the_model() -> None:
    check_property_names("liveness", ["LeaderElected"])
    with pytest.raises(ModelError, match="unknown property 'Progress'"):
        check_property_names("liveness", ["Progress"])
    with pytest.raises(ModelError, match="model liveness does not check TopicDeletionCompletes"):
        check_property_names("liveness", ["TopicDeletionCompletes"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--liveness", "--model", "ci"], "model ci has no temporal properties"),
        (["check", "--liveness", "--property", "Eventually"], "unknown property 'Eventually'"),
        (["check", "--property", "LeaderElected"], "--property needs --liveness"),
        (["check", "--liveness", "--invariant", "TypeOK"], "--invariant does not apply"),
        (["review", "--liveness", "--row", "nothing"], "unknown review row 'nothing'"),
    ],
)
def test_liveness_user_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kcm: error: ") and message in err and err.count("\n") == 1


# (model, knob settings, property, verdict): the safe design's instances hold; each property fails on a
# variant that breaks it (review rows of the same names).
CASES = [
    ("liveness", (), "ControllerElected", HOLDS),
    ("livenessunfairelection", (), "ControllerElected", VIOLATED),
    ("liveness", (), "HighWatermarkCatchesUp", HOLDS),
    ("livenessunfairfetch", (), "HighWatermarkCatchesUp", VIOLATED),
    ("liveness", (), "ReplicasRejoinIsr", HOLDS),
    ("livenessunfairfetch", (), "ReplicasRejoinIsr", VIOLATED),
    ("liveness", (), "LeaderElected", HOLDS),
    ("livenessnofailover", (), "LeaderElected", VIOLATED),
    ("opsliveness", (), "ControlledShutdownCompletes", HOLDS),
    ("opslivenessunfairshutdown", (), "ControlledShutdownCompletes", VIOLATED),
    ("opslivenessreassign", (), "ReassignmentCompletes", HOLDS),
    ("opslivenessreassignunfair", (), "ReassignmentCompletes", VIOLATED),
    ("opslivenessdelete", (), "TopicDeletionCompletes", HOLDS),
    ("opslivenessdeleteunfair", (), "TopicDeletionCompletes", VIOLATED),
    ("livenessavailability", ("unclean_election=true",), "WritesAccepted", HOLDS),
    ("livenessavailability", ("min_isr=2",), "WritesAccepted", VIOLATED),
]


@pytest.mark.tlc
@pytest.mark.parametrize(("model", "settings", "name", "verdict"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_property_holds_or_is_violated(tmp_path: Path, model: str, settings: tuple[str, ...], name: str,
                                         verdict: str) -> None:
    [outcome] = check_liveness(model, Knobs().with_settings(settings), [name], lambda n: tmp_path / f"{n}.jsonl",
                               heap_mb=1024)
    assert outcome.verdict == verdict
    if verdict == VIOLATED:
        assert outcome.outcome.trace_path == tmp_path / f"{name}.jsonl" and outcome.outcome.trace_path.exists()
        assert "loop_action" in outcome.outcome.events[-1]["args"]


@pytest.mark.tlc
def test_kcm_check_liveness_prints_the_lasso_and_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lasso.jsonl"
    assert main(["check", "--liveness", "--model", "livenessnofailover", "--heap", "1024", "--progress", "none",
                 "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "LeaderElected: violated" in text and "stutters forever" in text
    assert f"counterexample written to {out}" in text and out.exists()


def test_a_progress_matrix_row_shows_its_models_properties_only() -> None:
    variant = next(v for v in LIVENESS_VARIANTS if v.label == "min_isr=2")
    assert select(["min_isr=2"], liveness=True) == [variant]
    row = RowResult(variant, {WRITES_ACCEPTED: Cell(WRITES_ACCEPTED, VIOLATED, 10, 1.0, trace_length=5,
                                                    trace="min-isr-2-WritesAccepted.jsonl")})
    assert row.verdict == AS_EXPECTED
    table = markdown([row], PROPERTIES).splitlines()
    assert table[0].endswith("| WritesAccepted |") and "ControllerElected" in table[0]
    assert table[2].startswith("| min_isr=2 | livenessavailability | as expected | - |")
    assert table[2].endswith("| **violated** (4 steps, `min-isr-2-WritesAccepted.jsonl`) |")
    assert list(row.to_json()["cells"]) == [WRITES_ACCEPTED]
    held = RowResult(variant, {WRITES_ACCEPTED: Cell(WRITES_ACCEPTED, HOLDS, 10, 1.0)})
    assert held.verdict == UNEXPECTED
