"""The design-review matrices of `kcm review`, filled: knob setting x invariant by TLC (or, for a quick unsafe
row, by `kcm hunt`'s route), and design x progress property by TLC on the liveness models.

A row is a design of kcm.spec.designs checked on its model; a cell holds, is violated (with the counterexample
written in trace format v2), unobserved or unknown (kcm.spec.verdicts). TLC stops at the first violated
invariant, so a row is filled by peeling (`tlc_row`): check all invariants, and while one is violated, record
it and check the rest again. A violated run ends at the first bad state breadth-first (a fraction of the state
space); only the last run of a row explores its whole model. Rows run in parallel (`review`), one TLC process
(one TLC worker) per worker, longest first; the matrix takes about as long as its longest row, the `ci` row,
on 2 cores. A quick row of an unsafe design goes to its first documented violation by `kcm hunt`'s route
(`hunted_row`, kcm.conformance.explore.route), one engine per core the row has.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.conformance.design_readings import unread_by_tlc
from kcm.conformance.explore.hunt import Hunt
from kcm.conformance.explore.route import hunt_races
from kcm.conformance.reporter import Reporter
from kcm.spec import child_processes
from kcm.spec.atomic_output import OutputError
from kcm.spec.designs import COLUMNS, HW, LIVENESS_VARIANTS, TLA_INVARIANTS, VARIANTS, Variant, column
from kcm.spec.tlc.modelcheck import (
    PROPERTIES,
    ModelError,
    check_liveness,
    check_model,
    model_properties,
    vacuous_actions,
    vocabulary_name,
    write_events,
)
from kcm.spec.tlc.runner import TlcError, TlcProgress
from kcm.spec.trace.format import Event, TraceError
from kcm.spec.verdicts import AS_EXPECTED, HOLDS, UNEXPECTED, UNKNOWN, UNOBSERVED, UNSUPPORTED, VIOLATED, worst

# Seconds an unsafe row's hunt may take per phase (the search, then its shortening); the seven take about
# eight together on two cores (docs/hunt.md).
HUNT_BUDGET: Final = 600.0


@dataclass
class Cell:
    invariant: str
    # holds | violated | unobserved | unknown | unsupported (kcm.spec.verdicts; unknown: TLC failed, unsupported: TLC
    # cannot read the design there; the error says why)
    result: str
    distinct_states: int = 0
    seconds: float = 0.0
    depth: int | None = None  # of the exhaustive run a holding cell comes from
    reading: str | None = None
    trace_length: int | None = None
    trace: str | None = None
    error: str | None = None
    engine: str | None = None  # what found the counterexample, on a row taken by kcm hunt's route
    # Why the counterexample could not be written to `trace`; it is kept here then, and shown.
    unwritten: str | None = None
    counterexample: list[Event] | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}

    def keep(self, events: list[Event], path: Path) -> None:
        """Writes the cell's counterexample to `path`, or keeps it in the cell with the reason it could not."""
        try:
            write_events(events, path)
        except TraceError as err:
            self.trace, self.unwritten, self.counterexample = None, str(err), events

    def text(self) -> str:
        if self.result == HOLDS:
            return f"holds ({self.distinct_states:,} states)"
        if self.result == VIOLATED:
            reading = f" {self.reading}" if self.reading else ""
            steps = (self.trace_length or 1) - 1  # the trace's states, the initial one included
            by = f" by {self.engine}" if self.engine else ""
            where = f"`{self.trace}`" if self.trace else "not written"
            return f"**violated**{reading} ({steps} steps{by}, {where})"
        if self.result == UNOBSERVED:
            return "unobserved (no state explored)"
        return f"{self.result}: {self.error}"


@dataclass
class RowResult:
    variant: Variant
    cells: dict[str, Cell] = field(default_factory=dict)
    runs: int = 0
    seconds: float = 0.0
    # A quick row (review_row) ended at its first violation: one documented invariant broken is the design
    # breaking as documented.
    quick: bool = False
    # With coverage (tlc_row's `coverage`): each action of the model's Next, as the exhaustive run counted it,
    # and those that never fired though the model does not say they never do (the row's holds is vacuous there).
    coverage: dict[str, dict[str, Any]] | None = None
    vacuous: list[str] = field(default_factory=list)

    @property
    def violated(self) -> frozenset[str]:
        return frozenset(name for name, cell in self.cells.items() if cell.result == VIOLATED)

    @property
    def errors(self) -> list[str]:
        """Why TLC could not decide cells (an unsupported cell's reason is not an error)."""
        return [cell.error for cell in self.cells.values() if cell.error and cell.result != UNSUPPORTED]

    @property
    def as_expected(self) -> bool:
        """The variant breaks at least what it is documented to break (a quick row: one of those); a safe one
        breaks nothing."""
        if self.errors:
            return False
        if not self.variant.expected:
            return not self.violated
        if self.quick:
            return bool(self.violated) and self.violated <= self.variant.expected
        return self.variant.expected <= self.violated

    @property
    def verdict(self) -> str:
        if self.errors:
            return UNKNOWN
        # A row whose cells explored no state compared nothing with its documentation; one TLC cannot read
        # checked nothing of it.
        found = worst([cell.result for cell in self.cells.values()])
        if found in (UNOBSERVED, UNSUPPORTED):
            return found
        return AS_EXPECTED if self.as_expected and not self.vacuous else UNEXPECTED

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.variant.label, "verdict": self.verdict, "model": self.variant.model,
            "knobs": self.variant.knobs.to_dict(),
            "expected_violations": sorted(self.variant.expected), "runs": self.runs,
            "seconds": round(self.seconds, 2), "quick": self.quick,
            # A quick row has cells for what it looked at only; a liveness row for its model's properties.
            "cells": {name: self.cells[name].to_json() for name in (*COLUMNS, *PROPERTIES) if name in self.cells},
            **({"coverage": self.coverage, "vacuous": self.vacuous} if self.coverage is not None else {}),
        }


Progress = Callable[[Variant, str], None]


def review_row(variant: Variant, out: Path, heap_mb: int | None = None,
               on_progress: Progress | None = None, quick: bool = False, cores: int = 1,
               coverage: bool = False) -> RowResult:
    """A row: an unsafe design's quick row by kcm hunt's route (`hunted_row`) with `cores` engines, any other
    by TLC (`tlc_row`)."""
    if variant.design is not None and (unread := unread_by_tlc(variant.design)):
        why = f"TLC cannot read {', '.join(unread)} as the design's strategy has it (no hook of its module)"
        return RowResult(variant, {name: Cell(name, UNSUPPORTED, error=why) for name in COLUMNS}, quick=quick)
    # Hunt's engines include Z3, which reads no design of one's own: a design's quick row is TLC's alone.
    if quick and variant.expected and variant.design is None:
        return hunted_row(variant, out, heap_mb, on_progress, cores)
    return tlc_row(variant, out, heap_mb, on_progress, quick, coverage)


def tlc_row(variant: Variant, out: Path, heap_mb: int | None = None,
            on_progress: Progress | None = None, quick: bool = False, coverage: bool = False) -> RowResult:
    """Fills one row by TLC breadth first, peeling: every run checks the invariants not yet found violated. A
    quick row is one run over the variant's focus: it ends at the first violation, or holds. With `coverage`,
    the run that explores the model exhaustively (the last) counts each action's states."""
    started = time.monotonic()
    row = RowResult(variant, quick=quick)
    remaining = variant.focus() if quick else list(TLA_INVARIANTS)
    readings: dict[str, list[str]] = {}
    while remaining:
        run = row.runs + 1

        def show(found: TlcProgress, run: int = run) -> None:
            if on_progress is not None:
                on_progress(variant, f"run {run}: {found.text()}")

        show(TlcProgress(0, 0, 0.0))
        row.runs = run
        try:
            outcome = check_model(variant.model, variant.knobs, remaining, heap_mb=heap_mb, on_progress=show,
                                  design=variant.design, coverage=coverage)
        except TlcError as err:
            for name in remaining:
                row.cells.setdefault(column(name), Cell(column(name), UNKNOWN, error=str(err)))
            break
        result = outcome.result
        if result.violated is None:
            if result.coverage is not None:
                row.coverage = {name: action.to_json() for name, action in result.coverage.items()}
                row.vacuous = vacuous_actions(variant.model, result)
            for name in remaining:
                row.cells.setdefault(column(name), Cell(column(name), outcome.verdict, result.distinct_states,
                                                         result.seconds, result.depth))
            break
        if result.violated not in remaining:
            raise TlcError(f"{variant.model}: TLC reports {result.violated}, which was not checked")
        remaining.remove(result.violated)
        name = column(result.violated)
        if quick:
            remaining = []
        trace = out / f"{variant.slug}-{vocabulary_name(result.violated).replace('/', '-')}.jsonl"
        readings.setdefault(name, []).append(vocabulary_name(result.violated).partition("/")[2])
        if name not in row.cells:
            row.cells[name] = Cell(name, VIOLATED, result.distinct_states, result.seconds,
                                   trace_length=len(result.trace), trace=str(trace))
            row.cells[name].keep(outcome.events, trace)
        row.cells[name].reading = "/".join(readings[name]) if name == HW else None
    row.seconds = time.monotonic() - started
    return row


def hunted_row(variant: Variant, out: Path, heap_mb: int | None = None, on_progress: Progress | None = None,
               cores: int = 1, budget: float = HUNT_BUDGET) -> RowResult:
    """An unsafe design's quick row by kcm hunt's route: the fastest engine for its model and focus (BMC on a
    shallow known bug, TLC breadth first otherwise, raced when the row has more than one core), then the
    shortest counterexample. A search that ends without one holds its focus; one that runs out of budget, or
    whose engines all fail, leaves the focus unknown."""
    started = time.monotonic()
    row = RowResult(variant, quick=True, runs=1)
    hunt = Hunt(variant.model, variant.knobs, tuple(variant.focus()), heap_mb)
    show = None if on_progress is None else (lambda text: on_progress(variant, text))
    result = hunt_races(hunt, cores, budget, show)
    found = result.shortest or result.first.winner
    if found is not None and found.invariant is not None:
        name = column(found.invariant)
        trace = out / f"{variant.slug}-{found.invariant.replace('/', '-')}.jsonl"
        reading = found.invariant.partition("/")[2] if name == HW else None
        row.cells[name] = Cell(name, VIOLATED, found.states, found.seconds, reading=reading,
                               trace_length=len(found.events), trace=str(trace), engine=found.engine.name)
        row.cells[name].keep(found.events, trace)
    else:
        verdict = HOLDS if found is not None else UNKNOWN
        error = None if found is not None else (
            f"no answer within {budget:g} s: " + "; ".join(f"{n}: {f}" for n, f in result.first.fates.items()))
        for name in dict.fromkeys(column(n) for n in variant.focus()):
            row.cells[name] = Cell(name, verdict, found.states if found else 0, result.first.seconds, error=error)
    row.seconds = time.monotonic() - started
    return row


def review_liveness_row(variant: Variant, out: Path, heap_mb: int | None = None,
                        on_progress: Progress | None = None) -> RowResult:
    """A row of the progress matrix: every property the variant's model checks, one cell each."""
    started = time.monotonic()
    row = RowResult(variant)

    def show(name: str, found: TlcProgress) -> None:
        if on_progress is not None:
            on_progress(variant, f"{name}: {found.text()}")

    try:
        outcomes = check_liveness(variant.model, variant.knobs, model_properties(variant.model),
                                  lambda name: out / f"{variant.slug}-{name}.jsonl", heap_mb, show)
    except TlcError as err:
        for name in model_properties(variant.model):
            row.cells[name] = Cell(name, UNKNOWN, error=str(err))
        outcomes = []
    for outcome in outcomes:
        result = outcome.outcome.result
        trace = outcome.outcome.trace_path
        unwritten = outcome.outcome.unwritten
        row.cells[outcome.name] = Cell(outcome.name, outcome.verdict, result.distinct_states, result.seconds,
                                       trace_length=len(result.trace) if trace or unwritten else None,
                                       trace=str(trace) if trace else None, unwritten=unwritten,
                                       counterexample=outcome.outcome.events if unwritten else None)
    # One run decides every property when all hold; otherwise each property had a run of its own after it.
    decided_by = len({id(outcome.outcome) for outcome in outcomes})
    row.runs = decided_by + 1 if decided_by > 1 else decided_by
    row.seconds = time.monotonic() - started
    return row


def select(labels: Iterable[str] | None, liveness: bool = False) -> list[Variant]:
    """The rows asked for by label (all by default) of the invariant matrix or, with `liveness`, the progress
    matrix; an unknown label is a ModelError."""
    variants = LIVENESS_VARIANTS if liveness else VARIANTS
    if not labels:
        return list(variants)
    by_label = {v.label: v for v in variants}
    chosen = []
    for label in labels:
        if label not in by_label:
            raise ModelError(f"unknown review row {label!r} (known: {'; '.join(by_label)})")
        chosen.append(by_label[label])
    return chosen


def review(variants: list[Variant], out: Path, workers: int = 1, heap_mb: int | None = None,
           reporter: Reporter | None = None, on_row: Callable[[RowResult], None] | None = None,
           quick: bool = False, liveness: bool = False, coverage: bool = False) -> list[RowResult]:
    """The matrix: rows in parallel (one TLC process each, `workers` at a time), in the order given; quick
    rows check their focus only (Variant.focus); liveness rows their model's temporal properties. Each row is
    a task of the reporter."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(out, f"cannot write: {err.strerror or err}") from None
    # The ci row is the longest: start it first so that the short rows fill the other worker.
    order = sorted(variants, key=lambda v: v.model != "ci")
    cores = max(1, (os.cpu_count() or 1) // max(1, workers))

    def one(variant: Variant, progress: Progress | None) -> RowResult:
        if liveness:
            return review_liveness_row(variant, out, heap_mb, progress)
        return review_row(variant, out, heap_mb, progress, quick, cores, coverage)

    def fill(variant: Variant) -> RowResult:
        if reporter is None:
            return one(variant, None)
        named = variant.label.startswith(variant.model)
        with reporter.task(f"tlc {variant.label}" + ("" if named else f" ({variant.model})")) as task:
            row = one(variant, lambda _, what: task.update(what))
            task.update(f"{row.verdict}, {row.runs} TLC run{'s' if row.runs > 1 else ''}")
            return row

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = {v: pool.submit(fill, v) for v in order}
        results = {}
        for variant in order:
            results[variant] = futures[variant].result()
            if on_row is not None:
                on_row(results[variant])
    except KeyboardInterrupt:
        # The rows' threads wait on their TLC: ended first (and any TLC a thread would start next refused),
        # an interrupted review does not wait for the matrix to finish.
        child_processes.interrupt()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [results[v] for v in variants]


def markdown(rows: list[RowResult], columns: tuple[str, ...] = COLUMNS) -> str:
    """The matrix as a markdown table: one line per variant, its verdict, one column per invariant (or per
    property)."""
    head = "| variant | model | verdict | " + " | ".join(columns) + " |"
    rule = "|" + "---|" * (len(columns) + 3)
    lines = [head, rule]
    for row in rows:
        cells = " | ".join(row.cells[name].text() if name in row.cells else "-" for name in columns)
        lines.append(f"| {row.variant.label} | {row.variant.model} | {row.verdict} | {cells} |")
    return "\n".join(lines)


def to_json(rows: list[RowResult], seconds: float, columns: tuple[str, ...] = COLUMNS) -> dict[str, Any]:
    return {"columns": list(columns), "seconds": round(seconds, 2), "rows": [row.to_json() for row in rows]}
