"""One run of the pipeline layout checked as a stream: its Parquet files read batch by batch, each row held to the
layout's rules (or quarantined), then stepped through the same `InvariantChecker` as `kcm check-trace`.

This is the whole of `kcm pipeline check`'s work on a run, and it runs wherever the run is: inside a Spark task
on an executor, or in one process (the benchmark's baseline). Nothing is buffered but the events around a
violation (a ring buffer) and, only for a run sampled for Z3 step validation, the run itself. A run whose
events are spread over several files (a large log ingested in pieces) is read from all of them at once,
merged by seq: each file of the layout is sorted, so neither a shuffle nor a sort is needed.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any, Final

import orjson
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from kcm.conformance.check.coverage import Coverage
from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.spec.trace.format import FORMAT_VERSION, OBSERVER, SYNTHESIZED, V1, Event
from kcm.spec.vocabulary import ACTIONS, VARIABLES

COLUMNS: Final = ("v", "seq", "actor", "action", "args", "state", "full")
BATCH_ROWS: Final = 16_384
# Violations kept per run and invariant with their windows (every one is counted in the verdicts).
MAX_ROWS_PER_INVARIANT: Final = 20
WINDOW: Final = 3  # events either side of a violation
_SAMPLE_SCALE: Final = 1_000_000

# A row fit to check: its seq, its file, its 1-based row in the file, the event, and its delta as the file
# holds it (JSON text, None when empty), kept for the windows of violations so as not to encode it again.
_Row = tuple[int, str, int, Event, str | None]
# A window entry: seq, actor, action, the delta as JSON text.
_Entry = tuple[int, str, str, str]


def sampled(run: str, fraction: float) -> bool:
    """Whether Z3 validates `run`: a hash of its name, so re-runs and clusters validate the same runs."""
    if fraction >= 1.0:
        return True
    bucket = int.from_bytes(hashlib.sha256(run.encode()).digest()[:8], "big") % _SAMPLE_SCALE
    return bucket < int(fraction * _SAMPLE_SCALE)


@dataclass
class _Pending:
    """A violation whose window still waits for the events after it."""

    row: dict[str, Any]
    last_seq: int


@dataclass
class RunCheck:
    """The outcome of one run: records and their fate, verdicts, the first violations with their windows,
    coverage and (when sampled) Z3 step validation. `to_json` is what a Spark task sends to the driver."""

    run: str
    read: int = 0
    checked: int = 0
    synthesized: int = 0
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    violation_counts: dict[str, int] = field(default_factory=dict)
    first_seq: dict[str, int] = field(default_factory=dict)
    violations: list[dict[str, Any]] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    validation: dict[str, Any] | None = None

    def verdict_rows(self) -> list[dict[str, Any]]:
        return [{"run": self.run, "invariant": name, "verdict": verdict,
                 "violations": self.violation_counts.get(name, 0), "first_seq": self.first_seq.get(name)}
                for name, verdict in self.verdicts.items()]

    def to_json(self) -> dict[str, Any]:
        """Plain values only: the result crosses from a Python worker to the driver by pickle."""
        return {"run": self.run, "read": self.read, "checked": self.checked, "synthesized": self.synthesized,
                "quarantine": self.quarantine, "verdicts": self.verdict_rows(), "violations": self.violations,
                "coverage": self.coverage.counts(), "validation": self.validation}


def check_run(run: str, files: Sequence[str], validate: bool = False) -> RunCheck:
    """Check the run whose events are in `files` (Parquet files of the layout, each sorted by seq)."""
    result = RunCheck(run)
    streams = [_file_rows(run, path, result) for path in sorted(files)]
    rows: Iterator[_Row] = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_merge_key)
    _Checking(result, validate).consume(rows)
    return result


def check_sorted_runs(rows: Iterable[tuple[Any, ...]], fraction: float,
                      taken: frozenset[str] = frozenset()) -> Iterator[RunCheck]:
    """Check the runs of `rows`, tuples (run, file, line, v, seq, actor, action, args, state, full) sorted by run,
    then seq, then file and line, as a shuffle by run delivers input whose files mix runs. The job orders
    the rows, so the order they had in their files is no rule here; a repeated seq still is. The rows of a
    run in `taken` (checked from its own folder) are quarantined."""
    for run, group in groupby(rows, key=_first):
        result = RunCheck("" if run is None else str(run))
        if run is None:
            _quarantine_all(result, group, "missing field: run")
        elif run in taken:
            _quarantine_all(result, group, f"run {run} also has its own folder (run=<run>/)")
        else:
            _Checking(result, sampled(result.run, fraction)).consume(_sorted_rows(result, group))
        yield result


def _first(row: tuple[Any, ...]) -> Any:
    return row[0]


def _merge_key(row: _Row) -> tuple[int, str]:
    return row[0], row[1]


class _Checking:
    """The pass over a run's fit rows: duplicates out, every other row into the checker, coverage and windows."""

    def __init__(self, result: RunCheck, validate: bool) -> None:
        self.result = result
        self.checker = InvariantChecker()
        self.recent: deque[_Entry] = deque(maxlen=WINDOW)
        self.pending: list[_Pending] = []
        self.kept: dict[str, int] = {}
        self.events: list[Event] | None = [] if validate else None

    def consume(self, rows: Iterator[_Row]) -> None:
        result = self.result
        observe = result.coverage.observe
        step = self.checker.step
        recent = self.recent
        last_seq = -1
        for seq, path, line, event, text in rows:
            if seq == last_seq:
                # The copy read later goes: files are taken in name order, rows in file order.
                result.read += 1
                result.quarantine.append({"file": path, "line": line, "run": result.run, "seq": seq,
                                          "reason": f"duplicate seq: {seq} in run {result.run}"})
                continue
            last_seq = seq
            if event["action"] == "Init" and event["args"].get(SYNTHESIZED) is True:
                result.synthesized += 1
            else:
                result.read += 1
                result.checked += 1
            observe(event)
            found = step(event)
            entry = (seq, event["actor"], event["action"], text or "{}")
            if self.pending:
                self._extend_windows(entry)
            if found:
                self._record(found, entry)
            recent.append(entry)
            if self.events is not None:
                self.events.append(event)
        self._finish()

    def _extend_windows(self, entry: _Entry) -> None:
        still: list[_Pending] = []
        for pending in self.pending:
            if entry[0] <= pending.last_seq:
                pending.row["window"].append(_window_entry(entry))
                still.append(pending)
        self.pending = still

    def _record(self, found: list[Violation], entry: _Entry) -> None:
        result = self.result
        seq = entry[0]
        before = [_window_entry(e) for e in self.recent if e[0] >= seq - WINDOW]
        for violation in found:
            name = violation.invariant.split("/")[0]
            result.violation_counts[name] = result.violation_counts.get(name, 0) + 1
            result.first_seq.setdefault(name, seq)
            kept = self.kept.get(violation.invariant, 0)
            if kept >= MAX_ROWS_PER_INVARIANT:
                continue
            self.kept[violation.invariant] = kept + 1
            row = {"run": result.run, "seq": seq, "invariant": violation.invariant, "message": violation.message,
                   "window": [*before, _window_entry(entry)]}
            result.violations.append(row)
            self.pending.append(_Pending(row, seq + WINDOW))

    def _finish(self) -> None:
        result = self.result
        if result.checked or result.synthesized:
            report = self.checker.report
            result.verdicts = report.verdicts()
        if self.events:
            result.validation = _validation(result.run, self.events)


def _window_entry(entry: _Entry) -> dict[str, Any]:
    seq, actor, action, state = entry
    return {"seq": seq, "actor": actor, "action": action, "state": state}


def _validation(run: str, events: list[Event]) -> dict[str, Any]:
    from kcm.spec.z3.validate import validate_events

    report = validate_events(events)
    failure = report.failure
    return {"run": run, "ok": report.ok, "steps": report.steps, "solver_checks": report.checked,
            "failed_seq": None if failure is None else failure.seq,
            "failed_action": None if failure is None else failure.action,
            "reason": None if failure is None else failure.reason}


# -- reading a file, row by row, against the layout's rules ------------------------------------------------------


def _file_rows(run: str, path: str, result: RunCheck) -> Iterator[_Row]:
    """The rows of one file of the layout that keep its rules; the others are quarantined into `result`. The
    layout's files are sorted, which lets a run be checked without a sort: a row below an earlier one breaks
    that promise and is quarantined (out of order)."""
    line = 0
    highest = -1
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=list(COLUMNS)):
        columns = [batch.column(name).to_pylist() for name in COLUMNS]
        for v, seq, actor, action, args, state, full in zip(*columns, strict=True):
            line += 1
            problem, event = _row(run, v, seq, actor, action, args, state, full)
            if problem is None and seq < highest:
                problem = f"out-of-order seq: {seq} after {highest}"
            if seq is not None and seq > highest:
                highest = seq
            if problem is None:
                yield seq, path, line, event, state
            else:
                _quarantine(result, path, line, seq, problem)


def _sorted_rows(result: RunCheck, rows: Iterable[tuple[Any, ...]]) -> Iterator[_Row]:
    for _, path, line, v, seq, actor, action, args, state, full in rows:
        problem, event = _row(result.run, v, seq, actor, action, args, state, full)
        if problem is None:
            yield seq, path, line, event, state
        else:
            _quarantine(result, path, line, seq, problem)


def _quarantine_all(result: RunCheck, rows: Iterable[tuple[Any, ...]], reason: str) -> None:
    for row in rows:
        _quarantine(result, row[1], row[2], row[4], reason)


def _quarantine(result: RunCheck, path: str, line: int, seq: Any, reason: str) -> None:
    result.read += 1
    result.quarantine.append({"file": path, "line": line, "run": result.run, "seq": seq, "reason": reason})


def _row(run: str, v: Any, seq: Any, actor: Any, action: Any, args: Any, state: Any,
         full: Any) -> tuple[str | None, Any]:
    """Why a row breaks the layout's rules (None when it keeps them), and its event when it does."""
    required = (v, seq, actor, action, args, full)
    if None in required:  # `state` may be null: the empty delta
        missing = ("v", "seq", "actor", "action", "args", "full")[required.index(None)]
        return f"missing field: {missing}", None
    if v != FORMAT_VERSION:
        if v == V1:
            return "trace format v1: ingest its source again to have v2", None
        return f"unsupported format version: v={v}", None
    if seq < 0:
        return "invalid seq: negative", None
    needed = ACTIONS.get(action)
    if needed is None:
        return f"unknown action: {action}", None
    kind = actor.partition(":")[0]
    if kind != needed and kind != OBSERVER:
        return f"wrong actor: action {action} needs a {needed} actor, got {actor}", None
    parsed_args = _object(args)
    if parsed_args is None:
        return "invalid args: not a JSON object", None
    delta = _object(state) if state is not None else {}
    if delta is None:
        return "invalid state: not a JSON object", None
    for name in delta:
        if name not in VARIABLES:
            return f"unknown state variable: {name}", None
    event: Event = {"v": v, "run": run, "seq": seq, "actor": actor, "action": action, "args": parsed_args,
                    "state": delta}
    if full:
        event["full"] = True
    return None, event


def _object(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
