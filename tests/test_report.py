"""`kcm report` and `--html`: every report kind renders one self-contained page whose violating step is
marked with the checker's explanation and whose links all resolve; input detection and its errors.

The pages are built from short simulations with an unsafe knob (no TLC); the pipeline kind reads a small
`kcm pipeline check` output kept in tests/data/report/ (Spark is not started here). test_report_browser.py
opens the same pages in Chromium.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.conformance.review import Cell, RowResult, to_json
from kcm.spec.atomic_output import claimed_file
from kcm.spec.designs import COLUMNS, VARIANTS
from kcm.spec.trace.format import load_trace, read_trace
from kcm.tools.cli import main
from kcm.tools.report import kinds
from kcm.tools.report.timeline import build, mark_final_state

PIPELINE_FIXTURE = Path(__file__).parent / "data" / "report" / "pipeline"
KINDS = ("trace", "review", "verify", "conform", "pipeline")


@dataclass
class Page:
    """What a test needs to know of a page: its element ids, links, the marked steps and every URL-bearing
    attribute (none may point off the page)."""

    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)
    text: str = ""


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.page = Page()
        self.chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if "id" in values:
            self.page.ids.add(values["id"])
        if tag == "a" and "href" in values:
            self.page.links.append(values["href"])
        self.page.urls += [values[k] for k in ("src", "href", "xlink:href", "action") if k in values]
        if tag == "tr" and values.get("data-violation") == "true":
            self.page.marked.append(values.get("id", ""))

    def handle_data(self, data: str) -> None:
        self.chunks.append(data)


def read_page(path: Path) -> Page:
    reader = _Reader()
    reader.feed(path.read_text(encoding="utf-8"))
    reader.close()
    reader.page.text = " ".join(" ".join(reader.chunks).split())
    return reader.page


def kcm(*argv: str) -> int:
    return main(list(argv))


def violating_trace(folder: Path, knob: str = "unclean_election=true", seed: int = 1, steps: int = 100) -> Path:
    trace = folder / f"{knob.replace('=', '-')}-seed{seed}.jsonl"
    assert kcm("sim", "--seed", str(seed), "--steps", str(steps), "--set", knob, "--out", str(trace)) == 0
    return trace


def first_violation(trace: Path) -> Violation:
    report = InvariantChecker().check_all(load_trace(trace))
    assert report.violations, f"{trace} was meant to break an invariant"
    return report.violations[0]


def review_folder(folder: Path) -> Path:
    """A review folder as `kcm review --out` writes it, with simulated counterexamples in place of TLC's."""
    folder.mkdir(parents=True, exist_ok=True)
    broken = {"unclean_election=true": violating_trace(folder),
              "controller_epoch_fencing=false": violating_trace(folder, "controller_epoch_fencing=false", 5, 200)}
    rows = []
    for variant in VARIANTS:
        if variant.expected and variant.label not in broken:
            continue
        row = RowResult(variant, runs=1, seconds=1.0)
        row.cells = {column: Cell(column, "holds", 1234, 0.5) for column in COLUMNS}
        if variant.label in broken:
            trace = broken[variant.label]
            found = first_violation(trace)
            column = found.invariant.split("/")[0]
            row.cells[column] = Cell(column, "violated", 10, 0.5, trace_length=found.seq + 1, trace=str(trace))
        rows.append(row)
    (folder / "review.json").write_text(json.dumps(to_json(rows, 12.0)), encoding="utf-8")
    return folder


def build_pages(folder: Path, capsys: pytest.CaptureFixture[str] | None = None) -> dict[str, Path]:
    """One page of each kind, by the commands a user runs."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = {kind: folder / f"{kind}.html" for kind in KINDS}
    assert kcm("report", str(violating_trace(folder)), "--out", str(pages["trace"])) == 0
    assert kcm("report", str(review_folder(folder / "review")), "--out", str(pages["review"])) == 0
    assert kcm("verify", "--only", "simulation", "--seeds", "2", "--steps", "300", "--set", "unclean_election=true",
               "--html", str(pages["verify"])) == 1
    # Derandomized: these twenty examples find the unclean election's data loss (a few seconds).
    assert kcm("conform", "--examples", "20", "--steps", "20", "--no-step-check", "--set", "unclean_election=true",
               "--report", str(folder / "conform"), "--html", str(pages["conform"])) == 1
    pipeline = folder / "pipeline"
    shutil.copytree(PIPELINE_FIXTURE, pipeline)
    assert kcm("pipeline", "report", "--in", str(pipeline), "--html", str(pages["pipeline"])) == 1
    if capsys is not None:
        capsys.readouterr()
    return pages


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_pages(tmp_path_factory.mktemp("report"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_page_is_one_file_whose_links_resolve(pages: dict[str, Path], kind: str) -> None:
    page = read_page(pages[kind])
    assert page.links, "every kind links somewhere on its page"
    for link in page.links:
        assert link.startswith("#") and link[1:] in page.ids, link
    assert all(url.startswith("#") for url in page.urls)
    html = pages[kind].read_text(encoding="utf-8")
    assert "default-src 'none'" in html and "<script" not in html


def test_the_trace_page_marks_the_checkers_violating_step_with_its_explanation(tmp_path: Path) -> None:
    trace = violating_trace(tmp_path)
    found = first_violation(trace)
    seq, message = found.seq, found.message
    assert kcm("report", str(trace)) == 0
    page = read_page(trace.with_suffix(".html"))
    assert page.marked and page.marked[0].endswith(f"-step-{seq}")
    assert message in page.text
    assert f"violated at step {seq}" in page.text


def test_a_trace_where_everything_holds_is_shown_from_its_start(tmp_path: Path) -> None:
    trace = tmp_path / "fine.jsonl"
    assert kcm("sim", "--seed", "5", "--steps", "200", "--out", str(trace)) == 0
    timeline = build(load_trace(trace), "fine", "fine", window=10)
    assert timeline.first is None and timeline.events == 202
    assert [s.seq for s in timeline.steps] == list(range(21))
    assert "the first 21 steps (no violation)" in timeline.window_note


def test_a_long_trace_is_shown_as_a_window_around_its_first_violation(tmp_path: Path) -> None:
    trace = violating_trace(tmp_path, steps=400)
    seq = first_violation(trace).seq
    timeline = build(load_trace(trace), "t", "t", window=5)
    assert [s.seq for s in timeline.steps] == list(range(seq - 5, seq + 6))
    assert next(s.seq for s in timeline.steps if s.violations) == seq
    assert "up to 5 steps either side" in timeline.window_note


def test_each_step_shows_only_what_it_changed_and_the_lanes_it_touched(tmp_path: Path) -> None:
    trace = violating_trace(tmp_path)
    events = load_trace(trace)
    timeline = build(events, "t", "t", window=len(events))
    for event, step in zip(events[1:], timeline.steps[1:], strict=False):
        assert bool(step.changes) == bool(event["state"])
        touched = {lane.broker for lane in step.lanes if lane.changed}
        assert touched <= {str(b) for name in ("alive", "role", "hw", "log", "local_isr", "local_leader_epoch")
                           for b in event["state"].get(name, {})}


def test_a_review_cell_links_to_its_counterexamples_timeline(pages: dict[str, Path]) -> None:
    page = read_page(pages["review"])
    assert "cex-unclean-election-true-nocommitteddataloss" in page.ids
    assert "#cex-unclean-election-true-nocommitteddataloss" in page.links
    sections = {marked.rpartition("-step-")[0] for marked in page.marked}
    assert sections == {"cex-unclean-election-true-nocommitteddataloss",
                        "cex-controller-epoch-fencing-false-stalecontrollerfenced"}
    assert "as expected" in page.text


def test_the_verify_page_draws_the_campaigns_first_violation(pages: dict[str, Path], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    page = read_page(pages["verify"])
    assert page.marked and "First violation: NoCommittedDataLoss" in page.text
    assert "--set unclean_election=true" in page.text
    code = kcm("verify", "--only", "simulation", "--seeds", "2", "--steps", "300", "--set", "unclean_election=true",
               "--json")
    saved = tmp_path / "verify.json"
    saved.write_text(capsys.readouterr().out, encoding="utf-8")
    assert code == 1 and kcm("report", str(saved)) == 0
    assert "First violation: NoCommittedDataLoss" in read_page(tmp_path / "verify.html").text


def test_the_conform_page_draws_both_state_machines_and_each_finding(pages: dict[str, Path]) -> None:
    html = pages["conform"].read_text(encoding="utf-8")
    assert html.count('<svg class="coverage"') == 1
    assert "partition state machine" in html and "replica state machine" in html
    page = read_page(pages["conform"])
    assert "#finding-1" in page.links and page.marked[0].startswith("finding-1-step-")
    assert "NoCommittedDataLoss violated:" in page.text


def test_the_pipeline_page_links_each_violation_to_its_window(pages: dict[str, Path]) -> None:
    page = read_page(pages["pipeline"])
    summary = json.loads((PIPELINE_FIXTURE / "summary.json").read_text(encoding="utf-8"))
    assert summary["violations"] > 0
    windows = [link for link in page.links if link.startswith("#run-")]
    assert windows and all(link[1:] in page.ids for link in windows)
    assert page.marked
    assert "Quarantine by reason" in page.text


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "nothing.jsonl", "no such file or folder"),
    (lambda d: d, "a folder with neither review.json"),
    (lambda d: _write(d / "x.txt", "hello"), "cannot tell what this is"),
    (lambda d: _write(d / "x.json", "{\n  \"a\": 1,\n}"), "x.json:3: invalid JSON"),
    (lambda d: _write(d / "x.json", "[1, 2]"), "JSON of no known kind"),
    (lambda d: _write(d / "x.jsonl", "{}\n"), "x.jsonl:1: v: missing required field"),
    # Documents of a known kind in shapes kcm never writes (found by tests/test_fuzz_cli.py): each escaped the
    # renderer as a traceback.
    (lambda d: _write(d / "x.json", '{"stages": "abc", "result": 1}'), "x.json: not a document kcm writes"),
    (lambda d: _write(d / "x.json", '{"columns": null, "rows": null}'), "x.json: not a document kcm writes"),
    (lambda d: _write(d / "x.json", '{"columns": ["a"], "rows": [{"x\\ny": 1}]}'),
     "x.json: not a document kcm writes"),
    (lambda d: _write(d / "x.json", '{"examples": 1, "coverage": {}, "violations": []}'),
     "x.json: not a document kcm writes"),
    (lambda d: _write(d / "summary.json", '{"records": 1, "verdicts": [], "runs": 1}'),
     "summary.json: not a document kcm writes"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object,
                                          expected: str) -> None:
    source = make(tmp_path)  # type: ignore[operator]
    assert kcm("report", str(source)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kcm: error: ") and err.count("\n") == 1 and expected in err, err


def test_a_pipeline_folder_missing_its_tables_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "pipeline"
    folder.mkdir()
    shutil.copy(PIPELINE_FIXTURE / "summary.json", folder)
    assert kcm("report", str(folder)) == 2
    err = capsys.readouterr().err
    assert err.startswith("kcm: error: ") and err.count("\n") == 1 and "cannot read" in err, err


def test_a_page_another_kcm_is_writing_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The page is claimed and published whole (kcm.spec.atomic_output), as every other output; it was written
    in place, so a reader could see half of it and two writers could interleave."""
    out = tmp_path / "page.html"
    trace = violating_trace(tmp_path)
    with claimed_file(out) as temp:
        assert kcm("report", str(trace), "--out", str(out)) == 2
        temp.write_text("the other writer's page")
    assert "another kcm process is writing it" in capsys.readouterr().err
    assert out.read_text() == "the other writer's page"


def test_the_page_is_written_beside_its_input_unless_told(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "pipeline"
    shutil.copytree(PIPELINE_FIXTURE, folder)
    assert kcm("report", str(folder)) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "pipeline.html")
    assert kcm("report", str(folder / "summary.json"), "--out", str(tmp_path / "deep" / "p.html")) == 0
    assert (tmp_path / "deep" / "p.html").is_file()


def test_a_negative_window_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kcm("report", str(violating_trace(tmp_path)), "--window", "-1") == 2
    assert "--window -1: must not be negative" in capsys.readouterr().err


def test_a_verify_run_without_the_simulation_has_no_campaign_section(tmp_path: Path) -> None:
    summary = {"knobs": {"truncation": "kip320"}, "result": "holds",
               "stages": [{"engine": "z3", "check": "elections", "verdict": "holds", "detail": "8 brokers",
                           "seconds": 3.5}]}
    page = read_page(kinds.verify_page(summary, tmp_path / "v.html"))
    assert "Simulation campaign" not in page.text and "elections" in page.text and "3.5" in page.text


def test_a_verify_row_with_a_counterexample_links_to_its_timeline(tmp_path: Path) -> None:
    trace = violating_trace(tmp_path)
    row = {"engine": "tlc", "check": "review unclean_election=true (unclean)", "verdict": "as expected",
           "detail": "breaks NoCommittedDataLoss", "seconds": 3.0, "trace": str(trace),
           "invariant": "NoCommittedDataLoss"}
    summary = {"knobs": {"truncation": "kip320"}, "result": "holds", "stages": [row, {**row, "trace": ""}]}
    page = read_page(kinds.verify_page(summary, tmp_path / "v.html"))
    link = "#cex-tlc-review-unclean-election-true-unclean"
    assert page.links.count(link) == 1 and link[1:] in page.ids
    assert page.marked and "NoCommittedDataLoss violated" in page.text


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_the_check_page_is_the_counterexamples_timeline_or_tlcs_figures(tmp_path: Path) -> None:
    trace = violating_trace(tmp_path)
    summary = {"model": "unclean", "result": "violated", "distinct_states": 42, "knobs": {"unclean_election": True}}
    page = read_page(kinds.check_page(tmp_path / "violated.html", summary, trace))
    assert page.marked and "kcm check: model unclean" in page.text
    holds = {**summary, "result": "holds", "trace": None}
    page = read_page(kinds.check_page(tmp_path / "holds.html", holds, None))
    assert not page.marked and "unclean_election=true" in page.text and "None" not in page.text


@pytest.mark.tlc
def test_review_and_check_write_their_pages_from_tlc(tmp_path: Path) -> None:
    review_page, check_page = tmp_path / "review.html", tmp_path / "check.html"
    assert kcm("review", "--row", "truncation=hw", "--out", str(tmp_path / "review"), "--html", str(review_page)) == 0
    page = read_page(review_page)
    assert "#cex-truncation-hw-nocommitteddataloss" in page.links and page.marked
    assert kcm("check", "--model", "kafka1211", "--trace-out", str(tmp_path / "cex.jsonl"), "--html",
               str(check_page)) == 1
    assert read_page(check_page).marked
    # TLC's steps name no controller: the zombie's write is still explained, as kcm check explains it.
    zombie_page = tmp_path / "zombie.html"
    assert kcm("check", "--model", "zombie", "--trace-out", str(tmp_path / "zombie.jsonl"), "--html",
               str(zombie_page)) == 1
    assert "deposed controller 1" in zombie_page.read_text()


def test_a_counterexample_the_checker_does_not_flag_is_marked_in_its_last_state(tmp_path: Path) -> None:
    trace = tmp_path / "fine.jsonl"
    assert kcm("sim", "--seed", "5", "--steps", "10", "--out", str(trace)) == 0
    timeline = kinds.trace_timeline(trace, "t", window=20)
    mark_final_state(timeline, "StaleControllerFenced", read_trace(trace))
    last = timeline.steps[-1]
    assert timeline.first is not None and timeline.first.seq == last.seq == 11
    assert [v.invariant for v in last.violations] == ["StaleControllerFenced"]
    assert "kcm's invariant checker does not flag this trace" in timeline.first.message
    flagged = kinds.trace_timeline(violating_trace(tmp_path), "t")
    first = flagged.first
    mark_final_state(flagged, "StaleControllerFenced", [])
    assert flagged.first is first


def _half_then_interrupted(self: Path, data: str, *args: object, **kwargs: object) -> int:
    """Path.write_text cut off by Ctrl-C halfway through."""
    with self.open("w", encoding="utf-8") as handle:
        handle.write(data[: len(data) // 2])
    raise KeyboardInterrupt


def test_an_interrupted_page_leaves_no_half_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, item 7: the page is published whole or not at all."""
    trace = violating_trace(tmp_path)
    out = tmp_path / "pages" / "trace.html"
    monkeypatch.setattr(Path, "write_text", _half_then_interrupted)
    assert kcm("report", str(trace), "--out", str(out)) == 130
    assert capsys.readouterr().err == "kcm: interrupted\n"
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_a_second_writer_of_one_page_is_refused_with_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, item 7: while another kcm process writes the page, a second one is refused and the first one's
    page is published whole."""
    trace = violating_trace(tmp_path)
    out = tmp_path / "trace.html"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom kcm.spec.atomic_output import claimed_file\n"
         "with claimed_file(sys.argv[1]) as temp:\n    temp.write_text('first')\n    print('claimed', flush=True)\n"
         "    sys.stdin.readline()\n", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "claimed\n"
        assert kcm("report", str(trace), "--out", str(out)) == 2
        assert capsys.readouterr().err == f"kcm: error: {out}: another kcm process is writing it\n"
        assert not out.exists()
        holder.communicate("\n", timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert holder.returncode == 0 and out.read_text() == "first"
    assert kcm("report", str(trace), "--out", str(out)) == 0 and "<html" in out.read_text()
