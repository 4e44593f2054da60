"""`ingest`: Kafka state-change logs and trace-format-v1 JSON Lines into the pipeline layout, one Spark task
per file. A line that cannot be used is quarantined with its file, line number and reason; a log line that
carries no state is skipped with its reason (counted in the manifest); the others are written as
(partial) traces, one run per file."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import fastjsonschema
from pyspark.sql import SparkSession

from kcm.conformance.pipeline.jobs import EVENTS, MANIFEST, Counts, Progress, no_progress, write_json, write_quarantine
from kcm.conformance.pipeline.kafka_log import compile_pattern, parse_kafka_log
from kcm.spec.trace.format import OBSERVER, Event, TraceError, actor_kind, parse_line, schema_error, schema_validator
from kcm.spec.trace.parquet import write_parquet
from kcm.spec.vocabulary import ACTIONS

# file, lines read, events written, quarantine, lines skipped on purpose (read and accepted, no event)
Outcome = tuple[str, int, int, list[dict[str, Any]], list[dict[str, Any]]]


def parse_jsonl(path: str) -> tuple[list[Event], list[dict[str, Any]], int]:
    """A v1 trace read line by line: what breaks the format is quarantined, the rest kept."""
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
                event = parse_line(raw, path, number)
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


def _ingest_file(out: str, log_pattern: str | None) -> Callable[[Iterable[tuple[str, str]]], Iterable[Outcome]]:
    def task(items: Iterable[tuple[str, str]]) -> Iterator[Outcome]:
        for kind, path in items:
            skipped: list[dict[str, Any]] = []
            try:
                if kind == "kafka":
                    parsed = parse_kafka_log(path, pattern=log_pattern)
                    events, quarantine, lines, skipped = parsed.events, parsed.quarantine, parsed.lines, parsed.skipped
                else:
                    events, quarantine, lines = parse_jsonl(path)
            except OSError as err:
                yield path, 0, 0, [{"file": path, "line": 0, "reason": f"unreadable file: {err.strerror or err}"}], []
                continue
            # An Init made up by the log parser is no line of the file: it is not counted as read.
            made_up = 1 if kind == "kafka" else 0
            written = write_parquet(events, out) if len(events) > made_up else 0
            yield path, lines, max(written - made_up, 0), quarantine, skipped

    return task


def ingest(spark: SparkSession, kafka_logs: Sequence[str], traces: Sequence[str], out: Path,
           progress: Progress = no_progress, log_pattern: str | None = None) -> Counts:
    """`log_pattern`, a log4j ConversionPattern, replaces the detection of the Kafka logs' layout."""
    files = [("kafka", str(p)) for p in kafka_logs] + [("trace", str(p)) for p in traces]
    if not files:
        raise ValueError("nothing to ingest: give --kafka-log or --trace files")
    if log_pattern is not None:
        compile_pattern(log_pattern)  # a bad pattern is the user's error, said before any work
    for _, path in files:
        if not Path(path).is_file():
            raise ValueError(f"{path}: no such file")
    target = out / EVENTS
    target.mkdir(parents=True, exist_ok=True)
    rdd = spark.sparkContext.parallelize(files, numSlices=len(files))
    counts = Counts()
    quarantine: list[dict[str, Any]] = []
    per_file: dict[str, dict[str, int]] = {}
    skipped: Counter[str] = Counter()
    tasks = rdd.mapPartitions(_ingest_file(str(target), log_pattern)).toLocalIterator()
    for done, (path, lines, written, rejected, passed) in enumerate(tasks, start=1):
        counts.read += lines
        counts.checked += lines - len(rejected)
        counts.quarantined += len(rejected)
        quarantine.extend(rejected)
        per_file[path] = {"lines": lines, "events": written, "quarantined": len(rejected), "skipped": len(passed)}
        skipped.update(str(entry["reason"]) for entry in passed)
        progress("ingest", done, len(files))
    counts.assert_balanced()
    write_quarantine(out, quarantine, counts)
    write_json(out / MANIFEST, {"stage": "ingest", "files": dict(sorted(per_file.items())),
                                "counts": counts.to_json(), "skipped": dict(sorted(skipped.items()))})
    return counts

