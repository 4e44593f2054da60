"""The five reports: a trace, a review matrix, a `kcm verify` run, a conformance campaign and a pipeline run.

Each takes what its command produced (a trace file, review.json, the verify and conform JSON summaries, the
folder `kcm pipeline check` wrote) and writes one page. Counterexamples are embedded in the same page as
timeline sections with anchors, so every link is internal and the page is the only file to keep.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from kcm.conformance.check.coverage import MACHINES, Coverage
from kcm.conformance.check.interleavings import InterleavingCoverage, matrix_svg
from kcm.conformance.check.invariants import Violation
from kcm.spec.trace.format import Event, read_trace
from kcm.spec.verdicts import VIOLATED
from kcm.spec.vocabulary import ACTIONS
from kcm.tools.report import page
from kcm.tools.report.timeline import DEFAULT_WINDOW, Timeline, build, build_window, mark_final_state

if TYPE_CHECKING:
    from kcm.conformance.verify.stages import VerifyContext



def anchor(*parts: object) -> str:
    """An id for an element: letters, digits and dashes only, so it is safe in a URL fragment."""
    return re.sub(r"[^A-Za-z0-9]+", "-", "-".join(map(str, parts))).strip("-").lower()


def trace_timeline(path: Path, title: str, ref: str = "", window: int = DEFAULT_WINDOW,
                   truncation: str = "kip320") -> Timeline:
    """A trace file's timeline; the checker takes the truncation from the trace's Init when it names one."""
    return build(read_trace(path), title, ref or anchor("trace", path.stem), window, truncation)


# -- 1. a trace ------------------------------------------------------------------------------------------------


def trace_page(trace: Path, out: Path, window: int = DEFAULT_WINDOW, intro: list[tuple[str, str]] | None = None,
               title: str | None = None, final: str | None = None) -> Path:
    """A trace's page; `final` names the invariant a model checker found broken in the trace's last state."""
    timeline = trace_timeline(trace, f"Timeline of {trace.name}", window=window)
    if final is not None:
        mark_final_state(timeline, final, read_trace(trace))
    verdict = f"{timeline.first.invariant} violated" if timeline.first else "all invariants hold"
    figures = [("events", f"{timeline.events:,}"), ("result", verdict), *(intro or [])]
    return page.write(out, "trace.html", kind="trace", title=title or f"Trace {trace.name}", source=str(trace),
                      timeline=timeline, intro=figures)


def check_page(out: Path, summary: dict[str, Any], trace: Path | None) -> Path:
    """`kcm check --html`: TLC's result, and its counterexample's timeline when it found one."""
    intro = [("model", str(summary.get("model"))), ("TLC", str(summary.get("result"))),
             ("distinct states", f"{summary.get('distinct_states', 0):,}")]
    if trace is not None:
        # The whole counterexample: TLC's violation is in its last state.
        return trace_page(trace, out, max(DEFAULT_WINDOW, summary.get("trace_length") or 0), intro,
                          f"kcm check: model {summary.get('model')}", summary.get("invariant"))
    return page.write(out, "summary.html", kind="check", title=f"kcm check: model {summary.get('model')}",
                      source="", figures=intro, document=summary)


# -- 2. a review matrix ------------------------------------------------------------------------------------------


def review_page(document: dict[str, Any], folder: Path, out: Path, source: str = "") -> Path:
    """The matrix; each violated cell links to its counterexample's timeline, embedded below."""
    rows, sections = [], []
    for row in document["rows"]:
        cells = []
        for column in document["columns"]:
            cell = dict(row["cells"].get(column, {"result": "-"}))
            trace = _found(cell.get("trace"), folder)
            if cell.get("result") == VIOLATED and trace is not None:
                cell["anchor"] = anchor("cex", row["label"], column)
                title = f"{row['label']}: {column} ({row['model']} model)"
                # The whole counterexample: TLC's violation is in its last state.
                window = max(DEFAULT_WINDOW, cell.get("trace_length", 0))
                timeline = trace_timeline(trace, title, cell["anchor"], window, row["knobs"]["truncation"])
                mark_final_state(timeline, column, read_trace(trace))
                sections.append(timeline)
            cells.append(cell)
        rows.append({**row, "cells_shown": cells})
    return page.write(out, "review.html", kind="review", title="kcm review: design-review matrix", source=source,
                      document=document, rows=rows, sections=sections)


def diff_page(document: dict[str, Any], out: Path) -> Path:
    """`kcm diff --html`: the changes, each changed cell's counterexample as a timeline below them."""
    changes, sections = [], []
    for change in document["cells_changed"]:
        shown = dict(change)
        trace = _found(change.get("trace"), out.parent)
        if change["head"] == VIOLATED and trace is not None:
            shown["anchor"] = anchor("cex", change["row"], change["column"])
            head = document["head"]["rows"].get(change["row"], {})
            title = f"{change['row']}: {change['column']} on HEAD ({head.get('model', '?')} model)"
            window = max(DEFAULT_WINDOW, change.get("trace_length") or 0)
            truncation = head.get("knobs", {}).get("truncation", "kip320")
            timeline = trace_timeline(trace, title, shown["anchor"], window, truncation)
            mark_final_state(timeline, change["column"], read_trace(trace))
            sections.append(timeline)
        changes.append(shown)
    return page.write(out, "diff.html", kind="diff", title="kcm diff: what the design change changes", source="",
                      document=document, changes=changes, sections=sections)


def _found(trace: str | None, folder: Path) -> Path | None:
    """A counterexample named in review.json: as written, or beside review.json when the folder moved."""
    if not trace:
        return None
    for candidate in (Path(trace), folder / Path(trace).name):
        if candidate.is_file():
            return candidate
    return None


# -- 3. a verify run ------------------------------------------------------------------------------------------


def verify_page(summary: dict[str, Any], out: Path, first: Timeline | None = None, source: str = "") -> Path:
    """The rows, the verdict, the run's time, and the simulation campaign's first violation (its timeline
    when the run is at hand: `kcm verify --html` simulates the seed again)."""
    rows, sections = [], []
    for row in summary["stages"]:
        trace = _found(row.get("trace"), Path("."))
        if trace is None:
            rows.append(row)
            continue
        ref = anchor("cex", row["engine"], row["check"])
        # The whole counterexample: the model checker's violation is in its last state.
        timeline = trace_timeline(trace, f"{row['check']}: {row['invariant']}", ref, max(DEFAULT_WINDOW, 200))
        mark_final_state(timeline, row["invariant"], read_trace(trace))
        sections.append(timeline)
        rows.append({**row, "anchor": ref})
    return page.write(out, "verify.html", kind="verify", title="kcm verify", source=source, summary=summary,
                      rows=rows, sections=sections, first=first,
                      reproduce=_reproduce(summary) if summary.get("first_violation") else "")


def _reproduce(summary: dict[str, Any]) -> str:
    first = summary["first_violation"]
    knobs = " ".join(f"--set {k}={page.knob_text(v)}" for k, v in summary["knobs"].items())
    return (f"kcm sim --seed {first['seed']} --steps {summary['steps']} {knobs} --out trace.jsonl && "
            "kcm report trace.jsonl")


# -- 4. a conformance campaign ---------------------------------------------------------------------------------


def conform_page(summary: dict[str, Any], coverage: Coverage, out: Path, source: str = "",
                 interleavings: InterleavingCoverage | None = None) -> Path:
    findings = []
    for number, found in enumerate(summary["violations"], 1):
        trace = Path(found["trace"])
        title = f"Finding {number}: {found['invariant']}"
        timeline = trace_timeline(trace, title, anchor("finding", number)) if trace.is_file() else None
        findings.append({**found, "anchor": timeline.anchor if timeline else "", "timeline": timeline})
    return page.write(out, "conform.html", kind="conform", title="kcm conform: conformance campaign", source=source,
                      summary=summary, picture=_picture(coverage), actions=_actions(coverage), findings=findings,
                      matrix=None if interleavings is None else _matrix(interleavings))


def coverage_from_json(document: dict[str, Any]) -> Coverage:
    """The coverage counts back from `Coverage.to_json` (conform's --json summary, the pipeline's coverage.json)."""
    coverage = Coverage(Counter(document["actions"]))
    for machine in MACHINES:
        for kind, into in (("", coverage.transitions), ("_invalid", coverage.invalid)):
            for edge, count in document.get(f"{machine}_transitions{kind}", {}).items():
                src, _, dst = edge.partition(" -> ")
                into[machine][(src, dst)] += count
    return coverage


def _picture(coverage: Coverage) -> Markup:
    # Drawn by Coverage.svg from state names and counts, its text escaped there.
    return Markup(coverage.svg().replace("<svg ", '<svg class="coverage" ', 1))


def _matrix(coverage: InterleavingCoverage) -> Markup:
    # Drawn by matrix_svg from the space's names and counts, its text escaped there.
    return Markup(matrix_svg(coverage).replace("<svg ", '<svg class="coverage" ', 1))


def _actions(coverage: Coverage) -> list[tuple[str, int]]:
    return [(action, coverage.actions[action]) for action in ACTIONS if action != "Init"]


# -- 5. a pipeline run ----------------------------------------------------------------------------------------------


def pipeline_page(folder: Path, out: Path) -> Path:
    """Over a folder `kcm pipeline check` wrote: runs and verdicts, each violation linking to the timeline
    of the events the pipeline kept around it, quarantine by reason, and the coverage picture."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from kcm.conformance.pipeline.jobs import report

    _, summary = report(folder)
    violations = pq.read_table(folder / "violations.parquet").to_pylist()
    verdicts = pq.read_table(folder / "verdicts.parquet").to_pylist()
    runs: dict[str, dict[str, Any]] = {}
    for row in verdicts:
        run = runs.setdefault(row["run"], {"run": row["run"], "violated": [], "violations": 0})
        if row["verdict"] == VIOLATED:
            run["violated"].append(row["invariant"])
            run["violations"] += row["violations"]
    shown = []
    for row in violations:
        mark = Violation(row["invariant"], row["seq"], row["message"])
        ref = anchor("run", row["run"], row["seq"], row["invariant"])
        timeline = build_window(_window_events(row["window"]), [mark], f"{row['run']}: {row['invariant']} at "
                                f"seq {row['seq']}", ref)
        shown.append({**row, "anchor": ref, "timeline": timeline})
    for run in runs.values():
        run["first"] = next((v["anchor"] for v in shown if v["run"] == run["run"]), "")
    coverage_path = folder / "coverage.json"
    picture = (_picture(coverage_from_json(json.loads(coverage_path.read_text(encoding="utf-8"))))
               if coverage_path.is_file() else Markup(""))
    return page.write(out, "pipeline.html", kind="pipeline", title="kcm pipeline: checked runs", source=str(folder),
                      summary=summary, runs=sorted(runs.values(), key=lambda r: (not r["violated"], r["run"])),
                      violations=shown, picture=picture)


def _window_events(window: list[dict[str, Any]]) -> list[Event]:
    return [{"seq": e["seq"], "actor": e["actor"], "action": e["action"], "args": {},
             "state": json.loads(e["state"]) if e["state"] else {}} for e in window]


def first_violation_timeline(ctx: VerifyContext) -> Timeline | None:
    """The simulation campaign's first violating seed simulated again (a seed gives the same run) and drawn."""
    from kcm.conformance.explore.campaign import run_seed

    first = ctx.campaigns[0].first_violation() if ctx.campaigns else None
    if first is None:
        return None
    seed = first[0]
    again = run_seed(seed.seed, ctx.knobs, ctx.config, seed.steps, keep_events=True)
    return build(again.events, f"Seed {seed.seed}: {first[1].invariant}", anchor("seed", seed.seed),
                 truncation=ctx.knobs.truncation)


def kafka_page(judgement: dict[str, Any], comparisons: list[dict[str, Any]], out: Path, source: str = "") -> Path:
    """Over a Kafka campaign (`kcm kafka campaign`, `judge`, `diff`): the judgement, each lost record's blamed
    election, and per run and partition the leadership each controller wrote, Kafka's above kcm's."""
    strips = [{"run": c["run"], "partition": partition, "svg": _leadership_strip(sides["kafka"], sides["kcm"]),
               "differences": sum(d["partition"] == partition for d in c["differences"]),
               "not_replayed": c["not_replayed"]}
              for c in comparisons for partition, sides in sorted(c["leadership"].items())]
    return page.write(out, "kafka.html", kind="kafka", title="kcm kafka: Apache Kafka judged", source=source,
                      judgement=judgement, strips=strips, comparisons=comparisons)


_CELL, _ROW = 46, 34


def _leadership_strip(kafka: list[list[Any]], ours: list[list[Any]]) -> Markup:
    """Two rows of cells, one per write of (leader, leader epoch, ISR, controller epoch): coloured by leader
    epoch, labelled with the leader (-1: none) and the ISR."""
    from markupsafe import escape

    from kcm.tools.report.timeline import epoch_colour

    width = 70 + _CELL * max(len(kafka), len(ours), 1)
    parts = [f'<svg class="leadership" width="{width}" height="{2 * _ROW + 8}" role="img" '
             'xmlns="http://www.w3.org/2000/svg">']
    for row, (name, entries) in enumerate((("Kafka", kafka), ("kcm", ours))):
        y = 4 + row * _ROW
        parts.append(f'<text x="0" y="{y + 20}" font-size="12">{name}</text>')
        for index, (leader, epoch, isr, controller) in enumerate(entries):
            x = 60 + index * _CELL
            title = escape(f"leader {leader}, leader epoch {epoch}, ISR {list(isr)}, controller epoch {controller}")
            fill = "#ddd" if leader < 0 else epoch_colour(int(epoch))
            parts.append(f'<g><title>{title}</title><rect x="{x}" y="{y}" width="{_CELL - 4}" height="{_ROW - 6}" '
                         f'rx="3" fill="{fill}" stroke="#555" stroke-width="0.5"/>'
                         f'<text x="{x + 4}" y="{y + 12}" font-size="10">L{leader} e{epoch}</text>'
                         f'<text x="{x + 4}" y="{y + 24}" font-size="9">{escape(",".join(map(str, isr)))}</text></g>')
    parts.append("</svg>")
    return Markup("".join(parts))
