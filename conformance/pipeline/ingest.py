"""`ingest`: Kafka state-change logs and trace-format JSON Lines (v2, or v1 upgraded) into the pipeline layout.
A line that cannot be used is quarantined with its file, line number and reason; a log line that carries no
state is skipped with its reason (counted in the manifest); the others are written as (partial) traces, one run
per file. A trace is one Spark task; a Kafka log is read in splits of about `split_size` bytes, one task each,
in two passes (kafka_log/split.py): each split parses its lines, the driver links each split to the state the
splits before it leave, and each split writes its events as one part of the file's run. A log of one split
needs no link and is written in the first pass."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import fastjsonschema
from pyspark import Broadcast, StorageLevel
from pyspark.sql import SparkSession

from kcm.conformance.pipeline.jobs import (
    EVENTS,
    MANIFEST,
    Counts,
    Progress,
    collect,
    no_progress,
    write_json,
    write_quarantine,
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
    one_run_per_log,
    parse_split,
    run_name,
    split_ranges,
    summarize,
)
from kcm.spec.trace.format import (
    OBSERVER,
    Event,
    TraceError,
    actor_kind,
    parse_line,
    schema_error,
    schema_validator,
    upgrade_v1,
)
from kcm.spec.trace.parquet import run_folder, write_parquet
from kcm.spec.vocabulary import ACTIONS

# file, lines read, events written, quarantine, lines skipped on purpose (read and accepted, no event)
Outcome = tuple[str, int, int, list[dict[str, Any]], list[dict[str, Any]]]
# What one task reads: a split of a Kafka log (path, split index, byte range, layout), or a trace
# (index -1, no layout).
_Item = tuple[str, int, tuple[int, int | None], Layout | None]


def parse_jsonl(path: str) -> tuple[list[Event], list[dict[str, Any]], int]:
    """A trace read line by line, v1 events upgraded to v2: what breaks the format is quarantined, the rest
    kept."""
    events: list[Event] = []
    quarantine: list[dict[str, Any]] = []
    run: str | None = None
    last_seq: int | None = None
    number = 0

    def reject(line: int, reason: str) -> None:
        quarantine.append({"file": path, "line": line, "reason": reason})

    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                event = upgrade_v1(parse_line(raw, path, number), path, number)
                schema_validator()(event)
            except TraceError as err:
                reject(number, f"{_kind(err.reason)}: {err.field}: {err.reason}")
                continue
            except fastjsonschema.JsonSchemaValueException as err:
                field, reason = schema_error(err)
                reject(number, f"unknown action: {reason}" if field == "action" else f"schema: {field}: {reason}")
                continue
            needed = ACTIONS[event["action"]]
            if actor_kind(event["actor"]) not in (needed, OBSERVER):
                reject(number, f"wrong actor: action {event['action']} needs a {needed} actor, got {event['actor']}")
                continue
            if run is not None and event["run"] != run:
                reject(number, f"run: {event['run']!r} differs from the file's run {run!r}")
                continue
            seq = event["seq"]
            if last_seq is not None and seq <= last_seq:
                what = "duplicate seq" if seq == last_seq else "out-of-order seq"
                reject(number, f"{what}: {seq} after {last_seq}")
                continue
            run, last_seq = event["run"], seq
            events.append(event)
    return events, quarantine, number


def _kind(reason: str) -> str:
    if reason.startswith("truncated"):
        return "truncated file"
    if reason.startswith("invalid JSON"):
        return "malformed JSON"
    return "unreadable line"


@dataclass
class _Read:
    """A task's first pass over its split of a Kafka log (`parse` and its encoded `steps`, kept by Spark for
    the second, and its `summary` for the driver) or over a whole trace (its `outcome`, written already)."""

    path: str
    index: int
    parse: SplitParse | None = None
    steps: bytes = b""
    summary: Summary | None = None
    outcome: Outcome | None = None


def _unreadable(path: str, err: OSError) -> Outcome:
    return path, 0, 0, [{"file": path, "line": 0, "reason": f"unreadable file: {err.strerror or err}"}], []


def _read(out: str) -> Callable[[_Item], _Read]:
    def task(item: _Item) -> _Read:
        path, index, span, layout = item
        try:
            if layout is None:
                events, quarantine, lines = parse_jsonl(path)
                written = write_parquet(events, out) if events else 0
                return _Read(path, index, outcome=(path, lines, written, quarantine, []))
            parse = parse_split(path, layout, *span)
        except OSError as err:
            return _Read(path, index, outcome=_unreadable(path, err))
        if span == (0, None):  # the file's only split, linked to no other: written in this pass
            summary = summarize(parse)
            (place,) = link([summary], run_name(path), path)
            if not summary.events:
                place.init = None  # a log whose lines make no event writes nothing, not even its Init
            return _Read(path, -1, outcome=_write_split(parse, place, index, path, out))
        with collector_paused():
            summary, steps = summarize(parse), encode_steps(parse.steps)
        return _Read(path, index, replace(parse, steps=[]), steps, summary)

    return task


def _write(out: str, links: Broadcast[dict[tuple[str, int], Link]]) -> Callable[[_Read], Outcome]:
    """The second pass: a split's events, from the state its link gives, into its part of the file's run."""
    def task(read: _Read) -> Outcome:
        place = links.value.get((read.path, read.index))
        if read.outcome is not None or read.parse is None or place is None:
            return read.outcome or (read.path, 0, 0, [], [])
        with collector_paused():
            steps = decode_steps(read.steps)
        return _write_split(replace(read.parse, steps=steps), place, read.index, read.path, out)

    return task


def _write_split(parse: SplitParse, place: Link, index: int, path: str, out: str) -> Outcome:
    with collector_paused():
        events = finish(parse, place, run_name(path), path)
        written = write_parquet(events, out, part=index) if events else 0
    made_up = 1 if place.init is not None else 0  # an Init made up by the parser is no line of the file
    return path, parse.lines, max(written - made_up, 0), parse.quarantine, parse.skipped


def _plan(paths: Sequence[str], log_pattern: str | None, split_size: int) -> tuple[list[_Item], list[Outcome]]:
    """The splits of every Kafka log, its layout detected on its first lines here, once; a file that cannot
    be read is quarantined whole."""
    items: list[_Item] = []
    unreadable: list[Outcome] = []
    for path in paths:
        try:
            layout = file_layout(path, log_pattern)
            size = os.path.getsize(path)
        except OSError as err:
            unreadable.append(_unreadable(path, err))
            continue
        items.extend((path, index, span, layout)
                     for index, span in enumerate(split_ranges(size, split_size)))
    return items, unreadable


def _links(reads: list[_Read]) -> tuple[dict[tuple[str, int], Link], list[Outcome]]:
    """Each split's link to the splits before it, file by file; a file a split of which could not be read is
    quarantined whole."""
    by_file: dict[str, list[_Read]] = {}
    for read in reads:
        if read.index >= 0:
            by_file.setdefault(read.path, []).append(read)
    links: dict[tuple[str, int], Link] = {}
    failed: list[Outcome] = []
    for path, splits in by_file.items():
        broken = next((r.outcome for r in splits if r.outcome is not None), None)
        if broken is not None:
            failed.append(broken)
            continue
        summaries = [r.summary for r in sorted(splits, key=lambda r: r.index) if r.summary is not None]
        placed = link(summaries, run_name(path), path)
        if not any(s.events for s in summaries):
            placed[0].init = None  # a log whose lines make no event writes nothing, not even its Init
        links.update(((path, index), place) for index, place in enumerate(placed))
    return links, failed


def ingest(spark: SparkSession, kafka_logs: Sequence[str], traces: Sequence[str], out: Path,
           progress: Progress = no_progress, log_pattern: str | None = None,
           split_size: int = DEFAULT_SPLIT_SIZE) -> Counts:
    """`log_pattern`, a log4j ConversionPattern, replaces the detection of the Kafka logs' layout; a Kafka log
    is read in splits of about `split_size` bytes, one task each, into one run."""
    logs = [str(p) for p in kafka_logs]
    files = logs + [str(p) for p in traces]
    if not files:
        raise ValueError("nothing to ingest: give --kafka-log or --trace files")
    if log_pattern is not None:
        compile_pattern(log_pattern)  # a bad pattern is the user's error, said before any work
    for path in files:
        if not Path(path).is_file():
            raise ValueError(f"{path}: no such file")
    one_run_per_log(logs)
    target = out / EVENTS
    target.mkdir(parents=True, exist_ok=True)
    items, outcomes = _plan(logs, log_pattern, split_size)
    items.extend((str(path), -1, (0, None), None) for path in traces)
    for path in logs:  # a log's run is written in parts: none of an earlier ingest may stay
        shutil.rmtree(target / run_folder(run_name(path)), ignore_errors=True)
    outcomes.extend(_run(spark, items, str(target), progress))
    counts = Counts()
    quarantine: list[dict[str, Any]] = []
    per_file: dict[str, dict[str, int]] = {}
    skipped: Counter[str] = Counter()
    for path, lines, written, rejected, passed in outcomes:
        counts.read += lines
        counts.checked += lines - len(rejected)
        counts.quarantined += len(rejected)
        quarantine.extend(rejected)
        per_file[path] = {"lines": lines, "events": written, "quarantined": len(rejected), "skipped": len(passed)}
        skipped.update(str(entry["reason"]) for entry in passed)
    counts.assert_balanced()
    write_quarantine(out, quarantine, counts)
    write_json(out / MANIFEST, {"stage": "ingest", "files": dict(sorted(per_file.items())),
                                "counts": counts.to_json(), "skipped": dict(sorted(skipped.items()))})
    return counts


def _run(spark: SparkSession, items: list[_Item], target: str, progress: Progress) -> list[Outcome]:
    """Two passes of one task per split: the first parses (kept in Spark's cache), the driver links the
    splits of each file, the second writes. A file's outcome is its splits' together."""
    if not items:
        return []
    context = spark.sparkContext
    reads = context.parallelize(items, numSlices=len(items)).map(_read(target))
    reads.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        parsed = reads.map(lambda read: replace(read, parse=None, steps=b""))
        links, failed = _links(collect(spark, parsed, "ingest: parse", progress))
        shared = context.broadcast(links)
        merged: dict[str, Outcome] = {outcome[0]: outcome for outcome in failed}
        written = collect(spark, reads.map(_write(target, shared)), "ingest: write", progress)
        for path, lines, count, rejected, passed in written:
            if merged.get(path) in failed:
                continue
            before = merged.get(path, (path, 0, 0, [], []))
            merged[path] = (path, before[1] + lines, before[2] + count, before[3] + rejected, before[4] + passed)
        shared.unpersist()
    finally:
        reads.unpersist()
    return list(merged.values())
