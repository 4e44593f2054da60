"""`ingest`: Kafka state-change logs and trace-format JSON Lines (v2, or v1 upgraded) into the pipeline layout.

Each source (a trace, or a broker's log with its rotated files) becomes one run of its own name (sources.py).
Every line read ends up in one place: an event, skipped on purpose (a log line that carries no state, with its
reason), or quarantined with its file, line number and reason; the manifest counts them run by run, file by
file, and `read = checked + skipped + quarantined`. A trace is one Spark task; a Kafka log is read in splits of
about `split_size` bytes, one task each, in two passes (kafka_log/split.py): each split parses its lines, the
driver links each split to the state the splits before it leave (those of the files rotated before it too),
and each split writes its events as one part of the run. A run of one split needs no link and is written in the
first pass.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from pyspark import Broadcast, StorageLevel
from pyspark.sql import SparkSession

from kcm.conformance.pipeline.jobs import (
    EVENTS,
    Counts,
    Progress,
    collect,
    manifest_runs,
    no_progress,
    publish,
    read_manifest,
)
from kcm.conformance.pipeline.kafka_log import compile_pattern
from kcm.conformance.pipeline.kafka_log.layouts import Layout
from kcm.conformance.pipeline.kafka_log.parser import SplitParse, decode_steps, encode_steps
from kcm.conformance.pipeline.kafka_log.split import (
    DEFAULT_SPLIT_SIZE,
    Link,
    Summary,
    collector_paused,
    file_layout,
    finish,
    link,
    log_size,
    parse_split,
    split_ranges,
    summarize,
)
from kcm.conformance.pipeline.sources import Source, open_input, plan
from kcm.spec.trace.format import NO_FIELD, Continuity, Event, TraceError
from kcm.spec.trace.parquet import run_folder, write_parquet

# What reading a file may raise past OSError: a gzip stream cut short, or corrupt inside.
_UNREADABLE = (OSError, EOFError, zlib.error)


@dataclass
class FileOutcome:
    """One file of a run, read: its lines and where each went (events, skipped on purpose, quarantined), and
    the Init the log parser made up for the run (no line of the file). `unreadable` holds why the file could
    not be read at all (its lines uncounted, the file quarantined whole)."""

    run: str
    path: str
    lines: int = 0
    events: int = 0
    synthesized: int = 0
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unreadable: str | None = None

    def add(self, other: FileOutcome) -> None:
        self.lines += other.lines
        self.events += other.events
        self.synthesized += other.synthesized
        self.quarantine += other.quarantine
        self.skipped += other.skipped


@dataclass(frozen=True)
class _Item:
    """What one task reads: a split of a Kafka log (its byte range, its file's layout) or a trace (no layout,
    the run its events must name); `part` numbers the run's splits across its files, in order; `alone` says
    the split is its run's only one."""

    run: str
    path: str
    part: int
    span: tuple[int, int | None]
    layout: Layout | None
    claims: str = ""
    alone: bool = False


def parse_jsonl(path: str, claims: str | None = None, run: str | None = None
                ) -> tuple[list[Event], list[dict[str, Any]], int]:
    """A trace read line by line and held to the rules every reader holds a trace to (`Continuity`: one
    format version, the schema, the actors, Init's brokers, `seq` counting the lines): what breaks them is
    quarantined with its reason, the rest kept. Lines whose run is not `claims` (the first line's, when
    None) are quarantined; the events kept are renamed to `run` when given (the run's name in the layout)."""
    events: list[Event] = []
    quarantine: list[dict[str, Any]] = []
    continuity = Continuity(path)
    continuity.run = claims
    number = 0
    with open_input(path) as handle:
        for number, raw in enumerate(handle, start=1):
            last_seq = continuity.last_seq
            try:
                event = continuity.read_line(raw, number)
            except TraceError as err:
                quarantine.append({"file": path, "line": number, "reason": _reason(err, raw, last_seq)})
                continue
            if run is not None:
                event["run"] = run
            events.append(event)
    return events, quarantine, number


def _reason(err: TraceError, raw: bytes, last_seq: int | None) -> str:
    """A refused line's reason, led by its kind (the word the manifest and the report count lines by)."""
    if err.field == NO_FIELD:
        return f"{_kind(err.reason)}: {err.field}: {err.reason}"
    if err.field == "seq" and err.reason.startswith("expected seq") and last_seq is not None:
        seq = json.loads(raw)["seq"]  # an integer seq, out of its order: the schema held before the order did
        kind = "duplicate seq" if seq == last_seq else "out-of-order seq" if seq < last_seq else "seq gap"
        return f"{kind}: {err.reason}"
    if err.field == "action" or err.field.startswith("action"):
        return f"unknown action: {err.reason}"
    if err.field == "actor":
        return f"wrong actor: {err.reason}"
    if err.field == "run":
        return f"run: {err.reason}"
    return f"schema: {err.field}: {err.reason}"


def _kind(reason: str) -> str:
    """The kind of a line that does not decode to a JSON value kcm reads."""
    if reason.startswith("truncated"):
        return "truncated file"
    if reason.startswith(("invalid JSON", "nested too deeply")):
        return "malformed JSON"
    if "integer" in reason or "not a JSON number" in reason:
        return "schema"
    return "unreadable line"


@dataclass
class _Read:
    """A task's first pass over its split of a Kafka log (`parse` and its encoded `steps`, kept by Spark for
    the second, and its `summary` for the driver) or over a whole trace or run of one split (its `outcome`,
    written already)."""

    item: _Item
    parse: SplitParse | None = None
    steps: bytes = b""
    summary: Summary | None = None
    outcome: FileOutcome | None = None


def _unreadable(run: str, path: str, err: BaseException) -> FileOutcome:
    reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return FileOutcome(run, path, unreadable=f"unreadable file: {reason}")


def _read(out: str) -> Callable[[_Item], _Read]:
    def task(item: _Item) -> _Read:
        try:
            if item.layout is None:
                events, quarantine, lines = parse_jsonl(item.path, item.claims, item.run)
                written = write_parquet(events, out, part=0) if events else 0
                return _Read(item, outcome=FileOutcome(item.run, item.path, lines, written, 0, quarantine))
            parse = parse_split(item.path, item.layout, *item.span)
        except _UNREADABLE as err:
            return _Read(item, outcome=_unreadable(item.run, item.path, err))
        if item.alone:  # the run's only split, linked to no other: written in this pass
            summary = summarize(parse)
            (place,) = link([summary], item.run, item.path)
            if not summary.events:
                place.init = None  # a log whose lines make no event writes nothing, not even its Init
            return _Read(item, outcome=_write_split(parse, place, item, out))
        with collector_paused():
            summary, steps = summarize(parse), encode_steps(parse.steps)
        return _Read(item, replace(parse, steps=[]), steps, summary)

    return task


def _write(out: str, links: Broadcast[dict[tuple[str, int], Link]]) -> Callable[[_Read], FileOutcome | None]:
    """The second pass: a split's events, from the state its link gives, into its part of the run."""
    def task(read: _Read) -> FileOutcome | None:
        place = links.value.get((read.item.run, read.item.part))
        if read.outcome is not None or read.parse is None or place is None:
            return None  # told in the first pass, or a run quarantined whole
        with collector_paused():
            steps = decode_steps(read.steps)
        return _write_split(replace(read.parse, steps=steps), place, read.item, out)

    return task


def _write_split(parse: SplitParse, place: Link, item: _Item, out: str) -> FileOutcome:
    with collector_paused():
        events = finish(parse, place, item.run, item.path)
        written = write_parquet(events, out, part=item.part) if events else 0
    made_up = 1 if place.init is not None and written else 0  # an Init made up by the parser is no line of the file
    return FileOutcome(item.run, item.path, parse.lines, written - made_up, made_up, parse.quarantine, parse.skipped)


def _plan(sources: Sequence[Source], log_pattern: str | None, split_size: int
          ) -> tuple[list[_Item], list[FileOutcome]]:
    """The splits of every Kafka log, in each run's order (its rotated files first), each file's layout
    detected on its first lines here, once; a file that cannot be read is quarantined whole, and so is every
    other file of its run (a gap in a broker's log would make up states)."""
    items: list[_Item] = []
    unreadable: list[FileOutcome] = []
    for source in sources:
        if source.kind == "trace":
            items.append(_Item(source.run, source.files[0], 0, (0, None), None, source.claims))
            continue
        planned: list[tuple[str, Layout, tuple[int, int | None]]] = []
        broken: FileOutcome | None = None
        for path in source.files:
            try:
                layout = file_layout(path, log_pattern)
                size = log_size(path)
            except _UNREADABLE as err:
                broken = _unreadable(source.run, path, err)
                break
            planned.extend((path, layout, span) for span in split_ranges(size, split_size))
        if broken is not None:
            unreadable += _with_its_run(broken, source.files)
            continue
        items.extend(_Item(source.run, path, part, span, layout, alone=len(planned) == 1)
                     for part, (path, layout, span) in enumerate(planned))
    return items, unreadable


def _with_its_run(broken: FileOutcome, files: Sequence[str]) -> list[FileOutcome]:
    """The unreadable file, and the other files of its run, quarantined whole with it."""
    others = [FileOutcome(broken.run, path, unreadable=f"unreadable rotation: {broken.path} cannot be read")
              for path in files if path != broken.path]
    return [broken, *others]


def _links(reads: list[_Read], sources: dict[str, Source]) -> tuple[dict[tuple[str, int], Link], list[FileOutcome]]:
    """Each split's link to the splits before it, run by run; a run a split of which could not be read is
    quarantined whole."""
    by_run: dict[str, list[_Read]] = {}
    for read in reads:
        if read.summary is not None or (read.outcome is not None and read.outcome.unreadable):
            by_run.setdefault(read.item.run, []).append(read)
    links: dict[tuple[str, int], Link] = {}
    failed: list[FileOutcome] = []
    for run, splits in by_run.items():
        broken = next((r.outcome for r in splits if r.outcome is not None), None)
        if broken is not None:
            if sources[run].kind == "log":
                failed += _with_its_run(broken, sources[run].files)
            else:
                failed.append(broken)
            continue
        summaries = [r.summary for r in sorted(splits, key=lambda r: r.item.part) if r.summary is not None]
        placed = link(summaries, run, sources[run].files[0])
        if not any(s.events for s in summaries):
            placed[0].init = None  # a log whose lines make no event writes nothing, not even its Init
        links.update(((run, part), place) for part, place in enumerate(placed))
    return links, failed


def ingest(spark: SparkSession, kafka_logs: Sequence[str], traces: Sequence[str], out: Path,
           progress: Progress = no_progress, log_pattern: str | None = None,
           split_size: int = DEFAULT_SPLIT_SIZE) -> Counts:
    """`log_pattern`, a log4j ConversionPattern, replaces the detection of the Kafka logs' layout; a Kafka log
    is read in splits of about `split_size` bytes, one task each. Runs of an earlier ingest into `out` stay,
    but for those of the same sources, which are replaced; the manifest describes them all."""
    logs = [str(p) for p in kafka_logs]
    files = logs + [str(p) for p in traces]
    if not files:
        raise ValueError("nothing to ingest: give --kafka-log or --trace files")
    if log_pattern is not None:
        compile_pattern(log_pattern)  # a bad pattern is the user's error, said before any work
    for path in files:
        if not Path(path).is_file():
            raise ValueError(f"{path}: no such file")
    target = out / EVENTS
    sources = plan(logs, [str(p) for p in traces], taken_runs(out))
    target.mkdir(parents=True, exist_ok=True)
    for source in sources:  # a run is written in parts: none of an earlier ingest may stay
        shutil.rmtree(target / run_folder(source.run), ignore_errors=True)
    items, outcomes = _plan(sources, log_pattern, split_size)
    outcomes += _run(spark, items, {s.run: s for s in sources}, str(target), progress)
    by_file: dict[str, FileOutcome] = {}
    for outcome in outcomes:
        held = by_file.get(outcome.path)
        if held is None:
            by_file[outcome.path] = outcome
        else:
            held.add(outcome)
    runs = {source.run: _run_entry(source, [by_file[path] for path in source.files]) for source in sources}
    quarantine = [{**entry, "run": o.run} for o in by_file.values() for entry in _quarantined(o)]
    return publish(out, "ingest", runs, quarantine)


def taken_runs(out: Path) -> dict[str, str]:
    """The runs already in the folder `out`, each with the key of its source ("" when the manifest does not
    say): the names an ingest must not give another source."""
    taken = {run: str(entry.get("source", "")) for run, entry in manifest_runs(read_manifest(out)).items()}
    events = out / EVENTS
    if events.is_dir():
        for folder in events.iterdir():
            if folder.name.startswith("run="):
                taken.setdefault(unquote(folder.name[len("run="):]), "")
    return taken


def _quarantined(outcome: FileOutcome) -> list[dict[str, Any]]:
    if outcome.unreadable is not None:
        return [{"file": outcome.path, "line": 0, "reason": outcome.unreadable}]
    return outcome.quarantine


def _run_entry(source: Source, outcomes: Sequence[FileOutcome]) -> dict[str, Any]:
    """A run as the manifest describes it: its source, the rows it has in the layout, and its files' lines and
    where each went."""
    files: dict[str, dict[str, Any]] = {}
    counts = Counts()
    for o in outcomes:
        skipped = Counter(str(entry["reason"]) for entry in o.skipped)
        files[o.path] = {"lines": o.lines, "events": o.events, "skipped": len(o.skipped),
                         "quarantined": len(o.quarantine), "skipped_by_reason": dict(sorted(skipped.items()))}
        if o.unreadable is not None:
            files[o.path]["unreadable"] = o.unreadable
            counts.files_quarantined += 1
            continue
        counts.read += o.lines
        counts.checked += o.events
        counts.skipped += len(o.skipped)
        counts.quarantined += len(o.quarantine)
        counts.synthesized += o.synthesized
        for reason, n in skipped.items():
            counts.skipped_by_reason[reason] = counts.skipped_by_reason.get(reason, 0) + n
    counts.assert_balanced()
    return {"kind": source.kind, "source": source.key, "claims": source.claims, "files": files,
            "rows": counts.checked + counts.synthesized, "counts": counts.to_json()}


def _run(spark: SparkSession, items: list[_Item], sources: dict[str, Source], target: str,
         progress: Progress) -> list[FileOutcome]:
    """Two passes of one task per split: the first parses (kept in Spark's cache), the driver links the
    splits of each run, the second writes."""
    if not items:
        return []
    context = spark.sparkContext
    reads = context.parallelize(items, numSlices=len(items)).map(_read(target))
    reads.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        parsed: list[_Read] = collect(spark, reads.map(lambda read: replace(read, parse=None, steps=b"")),
                                      "ingest: parse", progress)
        links, failed = _links(parsed, sources)
        done = [read.outcome for read in parsed if read.outcome is not None and read.item.run not in
                {f.run for f in failed}]
        shared = context.broadcast(links)
        written = collect(spark, reads.map(_write(target, shared)), "ingest: write", progress)
        shared.unpersist()
    finally:
        reads.unpersist()
    broken = {f.run for f in failed}
    for run in broken:  # what a run quarantined whole wrote in its first pass goes
        shutil.rmtree(Path(target) / run_folder(run), ignore_errors=True)
    return failed + done + [o for o in written if o is not None and o.run not in broken]
