"""`kcm review`: the design-review matrix, knob setting x invariant, filled by TLC.

    kcm review [--json] [--workers N] [--out DIR] [--row LABEL ...] [--heap MIB]

Each row is a design variant (a knob setting) checked on one model of spec/: the smallest instance that
shows what the variant does (the `ci` model for the safe defaults). Each column is an invariant (`TypeOK`
and the eleven of the vocabulary). A cell holds (TLC explored the model exhaustively without breaking it:
the distinct states are shown) or is violated (the length of TLC's shortest counterexample and the trace
written in format v2 under `--out`).

Cost: TLC stops at the first violated invariant, so a row is filled by peeling: check all invariants, and
while one is violated, record it and check the rest again. A violated run ends at the first bad state
breadth-first (a fraction of the state space); only the last run of a row explores its whole model. Rows
run in parallel, one TLC process (one TLC worker) per `--workers`, longest first; the matrix takes about
as long as its longest row, the `ci` row, on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.spec.tlc.modelcheck import TLA_READINGS, ModelError, check_model, vocabulary_name
from kcm.spec.tlc.runner import DEFAULT_HEAP_MB, MIN_HEAP_MB, TlcError, TlcSetupError
from kcm.spec.vocabulary import INVARIANTS, Knobs
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, UsageError
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option
from kcm.tools.stages import ERROR, HOLDS, VIOLATED, StageRow, VerifyContext

DEFAULT_OUT: Final = "review"
HW: Final = "HighWatermarkMonotonic"
COLUMNS: Final = ("TypeOK", *INVARIANTS)
# What TLC checks for the columns: the two readings of HighWatermarkMonotonic separately, so that a
# violated cell says which reading broke.
TLA_INVARIANTS: Final = tuple(
    name for column in COLUMNS for name in ((*TLA_READINGS,) if column == HW else (column,))
)


@dataclass(frozen=True)
class Variant:
    """A row: a knob setting, the model it is checked on, and the invariants the design is documented to
    break there (`kcm verify` checks that they are among the violated ones; `kcm review` just reports)."""

    label: str
    settings: tuple[str, ...]
    model: str
    expected: frozenset[str] = frozenset()

    @property
    def knobs(self) -> Knobs:
        return Knobs().with_settings(self.settings)

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")


VARIANTS: Final = (
    Variant("defaults (kip320)", (), "ci"),
    Variant("truncation=hw", ("truncation=hw",), "kafka1211", frozenset({"NoCommittedDataLoss"})),
    Variant("truncation=kip101", ("truncation=kip101",), "kip101",
            frozenset({"ReplicaLogsAgree", "NoCommittedDataLoss", HW})),
    Variant("truncation=kip279", ("truncation=kip279",), "kip279",
            frozenset({"ReplicaLogsAgree", "NoCommittedDataLoss", HW})),
    Variant("truncation=kip320", (), "kip320"),
    Variant("unclean_election=true", ("unclean_election=true",), "unclean",
            frozenset({"NoCommittedDataLoss", HW})),
    Variant("unclean_election=true, min_isr=2", ("unclean_election=true", "min_isr=2"), "unclean",
            frozenset({"NoCommittedDataLoss", HW})),
    Variant("controller_epoch_fencing=false", ("controller_epoch_fencing=false",), "zombie",
            frozenset({"StaleControllerFenced"})),
    Variant("leader_epoch_check=false", ("leader_epoch_check=false",), "staleepoch",
            frozenset({"LeaderEpochMonotonic"})),
    # Before KIP-380: a restarted broker applies the requests of its previous incarnation and bounces go
    # unseen; on the ci model (crashes, restarts, expiries, lost and reordered requests) nothing breaks.
    Variant("broker_epoch=false", ("broker_epoch=false",), "ci"),
)


@dataclass
class Cell:
    invariant: str
    result: str  # holds | violated | error
    distinct_states: int = 0
    seconds: float = 0.0
    reading: str | None = None
    trace_length: int | None = None
    trace: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}

    def text(self) -> str:
        if self.result == "holds":
            return f"holds ({self.distinct_states:,} states)"
        if self.result == "violated":
            reading = f" {self.reading}" if self.reading else ""
            steps = (self.trace_length or 1) - 1  # the trace's states, the initial one included
            return f"**violated**{reading} ({steps} steps, `{self.trace}`)"
        return f"error: {self.error}"


@dataclass
class RowResult:
    variant: Variant
    cells: dict[str, Cell] = field(default_factory=dict)
    runs: int = 0
    seconds: float = 0.0

    @property
    def violated(self) -> frozenset[str]:
        return frozenset(name for name, cell in self.cells.items() if cell.result == "violated")

    @property
    def errors(self) -> list[str]:
        return [cell.error for cell in self.cells.values() if cell.error]

    @property
    def as_expected(self) -> bool:
        """The variant breaks at least what it is documented to break; a safe one breaks nothing."""
        if self.errors:
            return False
        return self.variant.expected <= self.violated if self.variant.expected else not self.violated

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.variant.label, "model": self.variant.model, "knobs": self.variant.knobs.to_dict(),
            "expected_violations": sorted(self.variant.expected), "runs": self.runs,
            "seconds": round(self.seconds, 2), "cells": {name: self.cells[name].to_json() for name in COLUMNS},
        }


Progress = Callable[[Variant, str], None]


def review_row(variant: Variant, out: Path, heap_mb: int | None = None,
               on_progress: Progress | None = None) -> RowResult:
    """Fills one row by peeling: every run checks the invariants not yet found violated."""
    started = time.monotonic()
    row = RowResult(variant)
    remaining = list(TLA_INVARIANTS)
    readings: dict[str, list[str]] = {}
    while remaining:
        if on_progress is not None:
            on_progress(variant, f"run {row.runs + 1}: {len(remaining)} invariants")
        row.runs += 1
        try:
            outcome = check_model(variant.model, variant.knobs, remaining, heap_mb=heap_mb,
                                  trace_out=out / f"{variant.slug}-run{row.runs}.jsonl")
        except TlcError as err:
            for name in remaining:
                row.cells.setdefault(_column(name), Cell(_column(name), "error", error=str(err)))
            break
        result = outcome.result
        if result.violated is None:
            for name in remaining:
                row.cells.setdefault(_column(name), Cell(_column(name), "holds", result.distinct_states,
                                                         result.seconds))
            break
        if result.violated not in remaining:
            raise TlcError(f"{variant.model}: TLC reports {result.violated}, which was not checked")
        remaining.remove(result.violated)
        column = _column(result.violated)
        trace = out / f"{variant.slug}-{vocabulary_name(result.violated).replace('/', '-')}.jsonl"
        if outcome.trace_path is not None:
            outcome.trace_path.replace(trace)
        readings.setdefault(column, []).append(vocabulary_name(result.violated).partition("/")[2])
        if column not in row.cells:
            row.cells[column] = Cell(column, "violated", result.distinct_states, result.seconds,
                                     trace_length=len(result.trace), trace=str(trace))
        row.cells[column].reading = "/".join(readings[column]) if column == HW else None
    row.seconds = time.monotonic() - started
    return row


def _column(tla_name: str) -> str:
    return vocabulary_name(tla_name).partition("/")[0]


def select(labels: Iterable[str] | None) -> list[Variant]:
    """The rows asked for by label (all by default); an unknown label is a ModelError."""
    if not labels:
        return list(VARIANTS)
    by_label = {v.label: v for v in VARIANTS}
    chosen = []
    for label in labels:
        if label not in by_label:
            raise ModelError(f"unknown review row {label!r} (known: {'; '.join(by_label)})")
        chosen.append(by_label[label])
    return chosen


def review(variants: list[Variant], out: Path, workers: int = 1, heap_mb: int | None = None,
           on_progress: Progress | None = None, on_row: Callable[[RowResult], None] | None = None
           ) -> list[RowResult]:
    """The matrix: rows in parallel (one TLC process each, `workers` at a time), in the order given."""
    out.mkdir(parents=True, exist_ok=True)
    # The ci row is the longest: start it first so that the short rows fill the other worker.
    order = sorted(variants, key=lambda v: v.model != "ci")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {v: pool.submit(review_row, v, out, heap_mb, on_progress) for v in order}
        results = {}
        for variant in order:
            results[variant] = futures[variant].result()
            if on_row is not None:
                on_row(results[variant])
    return [results[v] for v in variants]


def markdown(rows: list[RowResult]) -> str:
    """The matrix as a markdown table: one line per variant, one column per invariant."""
    head = "| variant | model | " + " | ".join(COLUMNS) + " |"
    rule = "|" + "---|" * (len(COLUMNS) + 2)
    lines = [head, rule]
    for row in rows:
        cells = " | ".join(row.cells[name].text() if name in row.cells else "-" for name in COLUMNS)
        lines.append(f"| {row.variant.label} | {row.variant.model} | {cells} |")
    return "\n".join(lines)


def to_json(rows: list[RowResult], seconds: float) -> dict[str, Any]:
    return {"columns": list(COLUMNS), "seconds": round(seconds, 2), "rows": [row.to_json() for row in rows]}


# -- the command ----------------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("review", help="the design-review matrix: knob setting x invariant, by TLC")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--workers", type=int, default=1, help="TLC processes at a time (default 1)")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"folder for counterexamples (default {DEFAULT_OUT}/)")
    parser.add_argument("--row", dest="rows", action="append", metavar="LABEL",
                        help="only this row (repeatable): " + "; ".join(v.label for v in VARIANTS))
    parser.add_argument("--heap", type=int, default=None,
                        help=f"each TLC's heap in MiB (default KCM_TLC_HEAP_MB or {DEFAULT_HEAP_MB})")
    html_option(parser)
    parser.set_defaults(handler=cmd_review)


def cmd_review(args: argparse.Namespace) -> int:
    from rich.console import Console

    if args.workers < 1 or (args.heap is not None and args.heap < MIN_HEAP_MB):
        raise UsageError(f"--workers must be at least 1 and --heap at least {MIN_HEAP_MB} (MiB)")
    try:
        variants = select(args.rows)
        console = Console(stderr=True)
        started = time.monotonic()
        rows = _with_progress(console, variants, Path(args.out), args.workers, args.heap)
    except (TlcSetupError, TlcError, ModelError) as err:
        raise UsageError(str(err)) from err
    seconds = time.monotonic() - started
    document = to_json(rows, seconds)
    (Path(args.out) / "review.json").write_text(json.dumps(document, indent=2) + "\n")
    (Path(args.out) / "review.md").write_text(markdown(rows) + "\n")
    if args.html:
        kinds.review_page(document, Path(args.out), Path(args.html))
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(markdown(rows))
        plural = "" if len(rows) == 1 else "s"
        print(f"\n{len(rows)} row{plural}, {sum(r.runs for r in rows)} TLC runs, {seconds:.0f} s; "
              f"counterexamples and review.json in {args.out}/")
    return EXIT_USAGE if any(row.errors for row in rows) else EXIT_OK


def _with_progress(console: Any, variants: list[Variant], out: Path, workers: int, heap_mb: int | None
                   ) -> list[RowResult]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("review"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as progress:
        task = progress.add_task("starting", total=len(variants))

        def show(variant: Variant, what: str) -> None:
            progress.update(task, description=f"{variant.label}: {what}")

        def done(row: RowResult) -> None:
            progress.advance(task)

        return review(variants, out, workers, heap_mb, show, done)


def verify_stage(ctx: VerifyContext) -> list[StageRow]:
    """The TLC rows of `kcm verify`: the ci model under the run's knobs, then one row per review variant,
    which holds when the variant breaks the invariants it is documented to break there (and a safe variant
    nothing)."""
    import tempfile


    ci = Variant(f"ci ({ctx.knobs.describe()})", tuple(ctx.knobs.settings()), "ci")
    variants = [v for v in VARIANTS if v.knobs != ctx.knobs or v.model != "ci"]
    with tempfile.TemporaryDirectory(prefix="kcm-review-") as folder:
        rows = review([ci, *variants], Path(folder), workers=2)
    stage = []
    for row in rows:
        if row.errors:
            verdict, detail = ERROR, row.errors[0]
        elif row.variant is ci:
            verdict = VIOLATED if row.violated else HOLDS
            detail = (f"{_states(row):,} distinct states, exhaustive" if not row.violated else
                      f"violates {', '.join(sorted(row.violated))}: kcm check --model ci "
                      + " ".join(f"--set {s}" for s in ci.settings))
        else:
            verdict = HOLDS if row.as_expected else VIOLATED
            broken = ", ".join(sorted(row.violated)) or "nothing"
            detail = f"breaks {broken}" + ("" if row.as_expected else
                                           f", documented: {', '.join(sorted(row.variant.expected)) or 'nothing'}")
        check = "model ci" if row.variant is ci else f"review {row.variant.label} ({row.variant.model})"
        stage.append(StageRow("tlc", check, verdict, detail, row.seconds))
    return stage


def _states(row: RowResult) -> int:
    return max((cell.distinct_states for cell in row.cells.values() if cell.result == "holds"), default=0)
