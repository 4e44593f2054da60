"""kcm review: the matrix's rows and columns, its rendering, and (marker `tlc`) a reduced matrix filled by TLC."""

from __future__ import annotations

import argparse
import json
import signal
from pathlib import Path

import pytest
from test_cli import interrupt

from kcm.conformance.review import Cell, RowResult, markdown, review, select, to_json
from kcm.spec.designs import COLUMNS, TLA_INVARIANTS, VARIANTS, Variant
from kcm.spec.tlc.modelcheck import ModelError, models
from kcm.spec.trace.format import load_trace, make_event
from kcm.spec.verdicts import VIOLATED
from kcm.spec.vocabulary import INVARIANTS, Knobs
from kcm.tools.cli import main
from kcm.tools.errors import UsageError
from kcm.tools.review import cmd_review


def test_columns_are_typeok_and_the_vocabulary_with_both_hw_readings_checked() -> None:
    assert ("TypeOK", *INVARIANTS) == COLUMNS
    assert "HighWatermarkMonotonic" not in TLA_INVARIANTS
    assert {"HighWatermarkMonotonicPerLeaderEpoch", "HighWatermarkMonotonicAcrossLeaders"} <= set(TLA_INVARIANTS)
    assert len(TLA_INVARIANTS) == len(COLUMNS) + 1


def test_rows_cover_every_design_knob_on_existing_models() -> None:
    known = models()
    assert all(v.model in known for v in VARIANTS)
    assert {v.knobs.truncation for v in VARIANTS} == {"hw", "kip101", "kip279", "kip320"}
    assert any(v.knobs.unclean_election for v in VARIANTS)
    assert any(not v.knobs.controller_epoch_fencing for v in VARIANTS)
    assert any(not v.knobs.leader_epoch_check for v in VARIANTS)
    assert any(v.knobs.min_isr > 1 for v in VARIANTS)
    assert any(not v.knobs.broker_epoch for v in VARIANTS)
    assert all(v.expected <= set(INVARIANTS) for v in VARIANTS)
    assert len({v.slug for v in VARIANTS}) == len(VARIANTS)


def test_select_and_settings() -> None:
    assert select(None) == list(VARIANTS)
    assert [v.label for v in select(["truncation=hw"])] == ["truncation=hw"]
    with pytest.raises(ModelError, match="unknown review row 'nope'"):
        select(["nope"])
    knobs = Knobs(truncation="hw", unclean_election=True, min_isr=2)
    assert knobs.settings() == ["truncation=hw", "unclean_election=true", "min_isr=2"]
    assert Knobs().with_settings(knobs.settings()) == knobs
    assert Knobs().settings() == []


def test_markdown_and_json_of_a_row() -> None:
    row = RowResult(VARIANTS[1], runs=2, seconds=1.5)
    for name in COLUMNS:
        row.cells[name] = Cell(name, "holds", 1530)
    row.cells["NoCommittedDataLoss"] = Cell("NoCommittedDataLoss", "violated", 900, trace_length=10,
                                            trace="review/x.jsonl")
    table = markdown([row]).splitlines()
    assert table[0].startswith("| variant | model | verdict | TypeOK | OneLeaderPerEpoch")
    assert len(table) == 3 and table[2].count("|") == len(COLUMNS) + 4
    assert table[2].startswith("| truncation=hw | kafka1211 | as expected | ")
    assert "**violated** (9 steps, `review/x.jsonl`)" in table[2] and "holds (1,530 states)" in table[2]
    document = json.loads(json.dumps(to_json([row], 1.5)))
    cells = document["rows"][0]["cells"]
    assert cells["NoCommittedDataLoss"] == {"invariant": "NoCommittedDataLoss", "result": "violated",
                                            "distinct_states": 900, "seconds": 0.0, "trace_length": 10,
                                            "trace": "review/x.jsonl"}
    assert row.violated == {"NoCommittedDataLoss"} and row.as_expected and row.verdict == "as expected"
    assert document["rows"][0]["verdict"] == "as expected"


def test_bad_options_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def options(**given: object) -> argparse.Namespace:
        defaults = {"rows": None, "workers": 1, "heap": 1024, "out": str(tmp_path), "json": True,
                    "liveness": False, "quick": False, "html": None, "design": None}
        return argparse.Namespace(**{**defaults, **given})

    with pytest.raises(UsageError, match="unknown review row"):
        cmd_review(options(rows=["nope"]))
    for argv, message in ((["--workers", "0"], "argument --workers: must be at least 1, not 0"),
                          (["--heap", "100"], "argument --heap: must be at least 256 MiB, not 100")):
        assert main(["review", *argv]) == 2
        assert capsys.readouterr().err == f"kcm: error: kcm review: {message}\n"
    with pytest.raises(UsageError, match="--quick looks at the invariant matrix"):
        cmd_review(options(quick=True, liveness=True))


@pytest.mark.tlc
def test_reduced_matrix(tmp_path: Path) -> None:
    rows = review(select(["truncation=hw", "controller_epoch_fencing=false"]), tmp_path, workers=2, heap_mb=1024)
    by_label = {row.variant.label: row for row in rows}
    for row in rows:
        assert set(row.cells) == set(COLUMNS)
        assert row.as_expected, (row.variant.label, row.violated)
        assert row.runs == len(row.violated) + 1
        for cell in row.cells.values():
            assert cell.distinct_states > 0
            if cell.result == "violated":
                assert cell.trace is not None and cell.trace_length
                assert len(load_trace(Path(cell.trace))) == cell.trace_length
            else:
                assert cell.result == "holds" and cell.trace is None
    hw = by_label["truncation=hw"].cells["NoCommittedDataLoss"]
    assert hw.result == "violated" and Path(hw.trace or "").parent == tmp_path
    assert not list(tmp_path.glob("*-run*.jsonl"))


@pytest.mark.parametrize("full", [False, True])
def test_verify_stage_rows(monkeypatch: pytest.MonkeyPatch, full: bool, tmp_path: Path) -> None:
    from kcm.conformance.verify import tlc
    from kcm.conformance.verify.engines import STAGES
    from kcm.conformance.verify.stages import VerifyContext
    from kcm.impl.sim.simulator import SimConfig
    from kcm.tools.progress import Reporter

    asked: list[bool] = []

    def fake(variants: list[Variant], out: Path, workers: int = 1, heap_mb: int | None = None,
             reporter: Reporter | None = None, quick: bool = False, coverage: bool = False) -> list[RowResult]:
        asked.append(quick)
        rows = []
        for variant in variants:
            row = RowResult(variant, runs=1, seconds=2.0)
            for name in COLUMNS:
                row.cells[name] = Cell(name, "holds", 10)
            # Every row breaks what it is documented to break, except the unclean one, which breaks nothing.
            for name in variant.expected if variant.label != "unclean_election=true" else ():
                row.cells[name] = Cell(name, "violated", 5, trace_length=4, trace="t.jsonl")
            rows.append(row)
        return rows

    monkeypatch.setattr(tlc, "review", fake)
    ctx = VerifyContext(Knobs(truncation="kip279"), SimConfig(), 1, 1, Reporter("none"), full, out=tmp_path)
    rows = STAGES["tlc"](ctx)
    # The quick run looks at the unsafe variants only, each for what it is documented to break.
    shown = VARIANTS if full else [v for v in VARIANTS if v.expected]
    assert asked == [not full]
    assert [r.engine for r in rows] == ["tlc"] * (len(shown) + 1)
    assert rows[0].check == "model ci" and rows[0].verdict == "holds" and "10 distinct states" in rows[0].detail
    verdicts = {r.check: r.verdict for r in rows[1:]}
    assert verdicts["review unclean_election=true (unclean)"] == "unexpected"
    assert sum(v == "as expected" for v in verdicts.values()) == len(shown) - 1


@pytest.mark.tlc
def test_a_quick_row_ends_at_its_first_documented_violation(tmp_path: Path) -> None:
    from kcm.conformance.review import review_row

    variant = select(["truncation=kip101"])[0]
    seen: list[str] = []
    row = review_row(variant, tmp_path, heap_mb=1024, on_progress=lambda _, what: seen.append(what), quick=True)
    assert row.runs == 1 and len(row.violated) == 1 and row.violated <= variant.expected
    assert row.as_expected and row.verdict == "as expected"
    # Only the columns of the documented invariants were looked at; the others are not claimed to hold.
    assert set(row.cells) == row.violated
    # kcm hunt's route: the breadth-first search alone on one core (the KIP-279 case is no shallow bug).
    assert seen and all(text.startswith("hunt kip101: searching: tlc-bfs") for text in seen)
    cell = next(iter(row.cells.values()))
    assert cell.engine == "tlc-bfs" and cell.distinct_states > 0


def test_a_quick_row_of_a_shallow_known_bug_is_answered_by_bmc(tmp_path: Path) -> None:
    from kcm.conformance.review import review_row

    variant = select(["truncation=hw"])[0]
    row = review_row(variant, tmp_path, quick=True)
    assert row.violated == {"NoCommittedDataLoss"} and row.verdict == "as expected"
    cell = row.cells["NoCommittedDataLoss"]
    assert cell.engine == "bmc" and cell.trace is not None
    events = load_trace(Path(cell.trace))
    assert cell.trace_length == len(events) and len(events) > 2
    assert "by bmc" in cell.text()


def test_a_quick_row_without_an_answer_in_its_budget_is_unknown(tmp_path: Path) -> None:
    from kcm.conformance.review import hunted_row

    variant = select(["truncation=kip279"])[0]
    row = hunted_row(variant, tmp_path, budget=0.2)
    assert row.verdict == "unknown" and not row.violated
    assert set(row.cells) == variant.expected
    assert all((cell.error or "").startswith("no answer within 0.2 s: tlc-bfs: stopped") for cell in row.cells.values())


def test_a_cell_whose_counterexample_cannot_be_written_keeps_it_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder\n")
    trace = tmp_path / "afile" / "x.jsonl"
    events = [make_event("r", 0, "env", "Init", {"brokers": [1]}, {}, full=True)]
    cell = Cell("NoCommittedDataLoss", VIOLATED, 1, 0.1, trace_length=1, trace=str(trace))
    cell.keep(events, trace)
    assert cell.trace is None and cell.counterexample == events
    assert cell.unwritten == f"{trace}: cannot write: {tmp_path / 'afile'} is not a folder"
    assert cell.text() == "**violated** (0 steps, not written)"
    assert cell.to_json()["counterexample"] == events


@pytest.mark.tlc
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_quick_review_ends_its_rows_threads_engines_and_tlc(signum: int, tmp_path: Path) -> None:
    # Rows in threads, the unsafe ones hunted by engine processes, the safe one by TLC: all ended at once.
    ended = interrupt(["review", "--quick", "--workers", "2", "--progress", "none", "--out", str(tmp_path)], signum,
                      settle=1.0)
    assert (ended.code, ended.stderr) == (130, "kcm: interrupted\n")
    assert not ended.left and ended.tlc_groups
