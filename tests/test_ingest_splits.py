"""A Kafka log read in byte-range splits (as `kcm pipeline ingest` reads a large one, one Spark task a split)
gives what the file read whole gives: the same events (one run, seqs and the synthesized Init as a whole read
numbers them), lines, skipped and quarantined lines, on every log of tests/data/kafka (the fixtures and the
corpus) with splits a few bytes long, so that split offsets fall inside wrapped lines and stack traces."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from kcm.conformance.pipeline.ingest import ingest
from kcm.conformance.pipeline.jobs import EVENTS, MANIFEST, read_quarantine
from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.conformance.pipeline.kafka_log import parse_kafka_log, render
from kcm.conformance.pipeline.kafka_log.layouts import DEFAULT, STRIMZI, compile_pattern, unwrap
from kcm.conformance.pipeline.kafka_log.parser import Match, decode_steps, encode_steps, match_message
from kcm.conformance.pipeline.kafka_log.renderer import Line
from kcm.conformance.pipeline.kafka_log.split import file_layout, parse_split, split_ranges
from kcm.conformance.pipeline.session import spark_session
from kcm.spec.trace.parquet import read_parquet

DATA = Path(__file__).parent / "data" / "kafka"
LOGS = sorted(DATA.rglob("*.log"))
SIZES = (7, 61, 200, 1009)


def _same_as_whole(path: Path, size: int) -> None:
    whole = parse_kafka_log(path)
    split = parse_kafka_log(path, split_size=size)
    assert split.events == whole.events
    assert [str(e) for e in split.events] == [str(e) for e in whole.events]  # dicts in the same key order too
    assert (split.lines, split.quarantine, split.skipped, split.layout) == \
        (whole.lines, whole.quarantine, whole.skipped, whole.layout)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(DATA)))
def test_a_log_read_in_splits_is_the_log_read_whole(log: Path, size: int) -> None:
    _same_as_whole(log, size)


def test_every_line_is_in_exactly_one_split_with_its_number() -> None:
    log = DATA / "real" / "04-fashion-mnist-cp733-docker-startup.log"
    layout = file_layout(log)
    parses = [parse_split(log, layout, start, end) for start, end in split_ranges(log.stat().st_size, 300)]
    assert len([p for p in parses if p.lines]) > 20
    assert sum(p.lines for p in parses) == parse_kafka_log(log).lines
    noted = [sorted(entry["line"] for entry in (*p.quarantine, *p.skipped)) for p in parses]
    spans = [(numbers[0], numbers[-1]) for numbers in noted if numbers]
    assert all(last < first for (_, last), (first, _) in itertools.pairwise(spans))


def _log(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "state-change.log"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _request(b: int, cid: int, epoch: int) -> list[Line]:
    state = {"leader": 1, "leader_epoch": epoch, "isr": [1, 2], "zk_version": epoch, "controller_epoch": 3,
             "replicas": [1, 2]}
    values = {"b": b, "c": 0, "e": 3, "cid": cid, "partition": "orders-0"}
    return [Line(fm.RECEIVED, {**values, "state": state}), Line(fm.BECOME, {**values, "leader": 1}, role="follower")]


def test_a_request_received_in_one_split_and_applied_in_the_next_keeps_its_fields(tmp_path: Path) -> None:
    """A broker's `become` line takes the leader epoch of the request it received on an earlier line, maybe in
    the split before: the split that reads it alone learns of the request from the splits before it."""
    lines = [line for cid in range(1, 30) for line in _request(2, cid, cid)]
    path = _log(tmp_path, render(lines, "2.4"))
    whole = parse_kafka_log(path)
    epochs = [e["state"].get("local_leader_epoch") for e in whole.events if e["args"].get("applied")]
    assert epochs == [{"2": {"orders-0": cid}} for cid in range(1, 30)]
    for size in (50, 101, 333):
        _same_as_whole(path, size)


def test_a_state_shown_before_a_split_is_not_written_again_after_it(tmp_path: Path) -> None:
    """A leaf is written when it changes: the same request applied again in a later split writes no leaf the
    first wrote, and the newest controller epoch a broker has seen is kept across splits."""
    once = _request(2, 7, 4)
    lines = [*once, *once, *once]
    path = _log(tmp_path, render(lines, "2.4"))
    whole = parse_kafka_log(path)
    applied: list[dict[str, Any]] = [e["state"] for e in whole.events if e["args"].get("applied")]
    assert applied[0] and applied[1:] == [{}, {}]
    for size in range(40, 800, 37):
        _same_as_whole(path, size)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


def _ingested(spark: SparkSession, logs: list[Path], out: Path, split_size: int) -> tuple[Any, ...]:
    counts = ingest(spark, [str(p) for p in logs], [], out, split_size=split_size)
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    return counts.to_json(), manifest["files"], manifest["skipped"], read_quarantine(out), \
        read_parquet(out / EVENTS)


def test_ingest_in_splits_writes_what_ingest_of_whole_files_writes(spark: SparkSession, tmp_path: Path) -> None:
    logs = [DATA / "state-change-1.1.log", DATA / "real" / "02-roleplay-reassignment-2.4.log",
            DATA / "real" / "04-fashion-mnist-cp733-docker-startup.log"]
    whole = _ingested(spark, logs, tmp_path / "whole", 1 << 30)
    split = _ingested(spark, logs, tmp_path / "split", 512)
    assert split == whole
    parts = sorted(p.name for p in (tmp_path / "split" / EVENTS / "run=log-02-roleplay-reassignment-2.4").iterdir())
    assert len(parts) > 5 and parts[0] == "part-00000.parquet"
    # Read again in splits of another size, the run's parts of the first ingest are gone.
    assert _ingested(spark, logs, tmp_path / "split", 2048) == whole


def test_two_logs_of_one_name_make_two_runs_in_splits(spark: SparkSession, tmp_path: Path) -> None:
    # They were refused (one run, named after the file); each is now a run of its own, written in parts.
    (tmp_path / "a").mkdir()
    copy = tmp_path / "a" / "state-change-1.1.log"
    copy.write_bytes((DATA / "state-change-1.1.log").read_bytes())
    ingest(spark, [str(DATA / "state-change-1.1.log"), str(copy)], [], tmp_path / "out", split_size=97)
    events = read_parquet(tmp_path / "out" / EVENTS)
    alone = [(e["seq"], e["action"], e["state"]) for e in parse_kafka_log(copy).events]
    runs = sorted({e["run"] for e in events})
    assert runs == ["log-state-change-1.1@a/state-change-1.1.log", "log-state-change-1.1@kafka/state-change-1.1.log"]
    for run in runs:
        assert [(e["seq"], e["action"], e["state"]) for e in events if e["run"] == run] == alone


# -- the parser's shortcuts read every line as before ------------------------------------------------------------


def test_every_statement_begins_with_an_ident() -> None:
    assert all(any(f.template.startswith(ident) for ident in fm.IDENTS) for f in fm.FORMATS)


def _first_row(message: str, logger: str | None) -> Match | None:
    """The table's first statement the message is, every row tried in order (what the dispatch on idents and
    words must find)."""
    for row in fm.COMPILED:
        found = row.regex.match(message) if logger is None or row.format.logger == logger else None
        if found is not None:
            return Match(row.format, {k: v for k, v in found.groupdict().items() if v is not None})
    return None


def test_the_dispatch_on_idents_finds_the_first_statement_of_the_table() -> None:
    messages = []
    for log in LOGS:
        for text in log.read_text(encoding="utf-8", errors="replace").splitlines():
            found = DEFAULT.match(unwrap(text)) or STRIMZI.match(unwrap(text))
            if found is not None:
                messages.append(found["msg"])
    messages += [f.template for f in fm.FORMATS] + ["[Controller id=1] Resigned", "[Broker id=2] nothing known"]
    assert len(messages) > 500
    for message in messages:
        for logger in (None, fm.STATE_CHANGE, fm.CONTROLLER):
            assert match_message(message, logger) == _first_row(message, logger), message


# Layouts whose messages are read from the line's end back, and what their lines begin with.
GREEDY = {"[%d] %p %m (%c)%n": "[2024-01-01 00:00:00,000] INFO ", "%p %m (%c)%n": "INFO ", "%m (%c)%n": "",
          "%d %-5p %m (%c)%n": "2024-01-01 00:00:00,000 INFO  "}


@pytest.mark.parametrize("pattern", sorted(GREEDY))
def test_a_message_read_greedily_ends_where_a_lazy_reading_ends_it(pattern: str) -> None:
    """Kafka's default layout reads its message from the line's end back (layouts._one_split): the same
    message as read from its start, on lines with parentheses and spaces in the message."""
    layout = compile_pattern(pattern)
    lazy = re.compile(layout.regex.pattern.replace("(?P<msg>.*)", "(?P<msg>.*?)"))
    assert lazy.pattern != layout.regex.pattern
    for tail in ("(state.change.logger)", "(state.change.logger)  ", "(a (b)) (c)", "(x)(y)", "((z))"):
        for message in ("Sent (1) to (broker 2)", "x (y) ", "(q)", "a  (b c)"):
            line = f"{GREEDY[pattern]}{message} {tail}"
            ours, theirs = layout.regex.match(line), lazy.match(line)
            assert (ours and ours.groupdict()) == (theirs and theirs.groupdict()), line


@pytest.mark.parametrize("size", [None, 97])
def test_steps_kept_between_the_passes_of_ingest_read_back_as_they_were(size: int | None) -> None:
    for log in LOGS:
        layout = file_layout(log)
        for start, end in split_ranges(log.stat().st_size, size):
            steps = parse_split(log, layout, start, end).steps
            assert decode_steps(encode_steps(steps)) == steps
