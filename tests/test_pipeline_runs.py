"""A run of the pipeline layout is one source's, whose name no other source takes (conformance/pipeline/sources.py):
two traces of one run name, a trace named as a log's run, two brokers' `state-change.log` and a broker's rotated
files; the manifest describes every run of the folder, two ingests into it included, and `check` reads what it
promises or exits 3 naming what is missing; every line read is checked, skipped or quarantined; a folder of no
events is `unobserved`."""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline import jobs as pl
from kcm.conformance.pipeline.ingest import ingest, parse_jsonl
from kcm.conformance.pipeline.kafka_log import parse_kafka_log
from kcm.conformance.pipeline.session import spark_session
from kcm.conformance.pipeline.sources import plan
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.trace.parquet import read_parquet
from kcm.spec.verdicts import UNOBSERVED
from kcm.spec.vocabulary import Knobs
from kcm.tools import pipeline as stages

ROOT = Path(__file__).resolve().parents[1]
KAFKA = ROOT / "tests" / "data" / "kafka"
REAL_LOG = KAFKA / "real" / "02-roleplay-reassignment-2.4.log"
GZIPPED = KAFKA / "gzip" / "02-roleplay-reassignment-2.4.log.gz"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


def _trace(path: Path, steps: int, knobs: Knobs, run: str = "seed-2") -> list[Event]:
    """`kcm sim --seed 2 --steps N` with `knobs`, written to `path`; its events."""
    events: list[Event] = []
    simulator = Simulator(2, knobs, SimConfig(), events.append)
    simulator.bootstrap()
    simulator.run(steps)
    with TraceWriter(path) as writer:
        for event in events:
            event["run"] = run
            writer.write(event)
    return events


def _violations(events: list[Event]) -> int:
    checker = InvariantChecker()
    return sum(len(checker.step(event)) for event in events)


def test_two_traces_of_one_run_both_stay_and_the_violation_is_found(spark: SparkSession, tmp_path: Path) -> None:
    # The repro of issue 38, item 1: ingest said "accepted 12,950" and check "violations: 0".
    unclean = _trace(tmp_path / "uc.jsonl", 2000, Knobs().with_settings(["unclean_election=true"]))
    clean = _trace(tmp_path / "ok.jsonl", 2000, Knobs())
    expected = _violations(unclean)
    assert expected > 0 and _violations(clean) == 0

    counts = ingest(spark, [], [str(tmp_path / "uc.jsonl"), str(tmp_path / "ok.jsonl")], tmp_path / "I")
    result = pl.check(spark, tmp_path / "I", tmp_path / "C")

    assert counts.checked == len(unclean) + len(clean)
    manifest = json.loads((tmp_path / "I" / pl.MANIFEST).read_text())
    assert {run: entry["claims"] for run, entry in manifest["runs"].items()} == {
        "seed-2@uc.jsonl": "seed-2", "seed-2@ok.jsonl": "seed-2"}
    assert manifest["runs"]["seed-2@uc.jsonl"]["source"] == str((tmp_path / "uc.jsonl").resolve())
    assert (result.runs, result.violations, result.exit_code) == (2, expected, pl.EXIT_VIOLATIONS)
    assert result.counts.read == len(unclean) + len(clean)


def test_a_trace_named_as_a_log_run_and_two_brokers_logs_stay_apart(spark: SparkSession, tmp_path: Path) -> None:
    log = KAFKA / "state-change-2.4.log"
    for broker in ("broker-1", "broker-2"):  # the documented example: broker-*/state-change.log
        (tmp_path / broker).mkdir()
        shutil.copyfile(log, tmp_path / broker / "state-change.log")
    named = _trace(tmp_path / "trace.jsonl", 50, Knobs(), run="log-state-change")
    logs = [str(tmp_path / b / "state-change.log") for b in ("broker-1", "broker-2")]

    ingest(spark, logs, [str(tmp_path / "trace.jsonl")], tmp_path / "I")

    events = read_parquet(tmp_path / "I" / pl.EVENTS)
    runs = {e["run"] for e in events}
    assert runs == {"log-state-change@broker-1/state-change.log", "log-state-change@broker-2/state-change.log",
                    "log-state-change@trace.jsonl"}
    alone = parse_kafka_log(log).events
    for run in runs - {"log-state-change@trace.jsonl"}:
        assert [(e["seq"], e["action"], e["state"]) for e in events if e["run"] == run] == [
            (e["seq"], e["action"], e["state"]) for e in alone]
    assert len([e for e in events if e["run"] == "log-state-change@trace.jsonl"]) == len(named)


def _rotate(lines: list[bytes], folder: Path) -> list[Path]:
    """A log's lines as DailyRollingFileAppender leaves them: two rotated files (the older gzip'd by logrotate)
    and the live one."""
    folder.mkdir()
    third = len(lines) // 3
    older, old, live = (folder / "state-change.log.2024-01-01-00.gz", folder / "state-change.log.2024-01-01-01",
                        folder / "state-change.log")
    older.write_bytes(gzip.compress(b"".join(lines[:third])))
    old.write_bytes(b"".join(lines[third:2 * third]))
    live.write_bytes(b"".join(lines[2 * third:]))
    return [older, old, live]


def test_a_brokers_rotated_files_join_into_one_run_in_order(spark: SparkSession, tmp_path: Path) -> None:
    log = KAFKA / "state-change-1.1.log"
    lines = log.read_bytes().splitlines(keepends=True)
    files = _rotate(lines, tmp_path / "broker-1")
    given = [str(p) for p in reversed(files)]  # as a shell's glob may list them: the live file first

    assert [Path(f).name for f in plan(given, [])[0].files] == [p.name for p in files]
    ingest(spark, given, [], tmp_path / "I", split_size=64)  # every file in splits, but the gzip one

    events = read_parquet(tmp_path / "I" / pl.EVENTS)
    whole = parse_kafka_log(log)
    assert {e["run"] for e in events} == {"log-state-change"}
    assert [(e["seq"], e["action"], e["state"]) for e in events] == [
        (e["seq"], e["action"], e["state"]) for e in whole.events]
    manifest = json.loads((tmp_path / "I" / pl.MANIFEST).read_text())
    assert manifest["runs"]["log-state-change"]["source"] == str(tmp_path.resolve() / "broker-1" / "state-change.log")
    assert sum(f["lines"] for f in manifest["files"].values()) == len(lines) == whole.lines


def test_check_holds_its_input_to_the_manifest(spark: SparkSession, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _trace(tmp_path / "uc.jsonl", 300, Knobs())
    _trace(tmp_path / "ok.jsonl", 200, Knobs(), run="other")
    ingest(spark, [], [str(tmp_path / "uc.jsonl"), str(tmp_path / "ok.jsonl")], tmp_path / "I")
    shutil.rmtree(tmp_path / "I" / pl.EVENTS / "run=seed-2")

    result = pl.check(spark, tmp_path / "I", tmp_path / "C")

    assert result.exit_code == pl.EXIT_QUARANTINED == 3
    promised = json.loads((tmp_path / "I" / pl.MANIFEST).read_text())["runs"]["seed-2"]["rows"]
    assert result.summary["incomplete"] == [f"run seed-2: 0 of its {promised:,} records read (no run=seed-2 folder)"]
    assert stages._report_check(tmp_path / "C", 0.0) == 3
    err = capsys.readouterr().err
    assert err == (f"kcm: error: --in {tmp_path / 'I'}: the input lacks records its manifest promised: run seed-2: "
                   f"0 of its {promised:,} records read (no run=seed-2 folder)\n")


def test_two_ingests_into_one_folder_leave_a_manifest_of_both(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _trace(tmp_path / "a" / "t.jsonl", 100, Knobs())
    second = _trace(tmp_path / "b" / "t.jsonl", 150, Knobs())
    ingest(spark, [], [str(tmp_path / "a" / "t.jsonl")], tmp_path / "I")
    ingest(spark, [], [str(tmp_path / "b" / "t.jsonl")], tmp_path / "I")
    ingest(spark, [], [str(tmp_path / "b" / "t.jsonl")], tmp_path / "I")  # the same source again: replaced

    manifest = json.loads((tmp_path / "I" / pl.MANIFEST).read_text())
    assert {run: entry["rows"] for run, entry in manifest["runs"].items()} == {
        "seed-2": len(first), "seed-2@b/t.jsonl": len(second)}
    assert manifest["counts"]["read"] == len(first) + len(second)
    result = pl.check(spark, tmp_path / "I", tmp_path / "C")
    assert (result.counts.read, result.summary["incomplete"], result.exit_code) == (len(first) + len(second), [], 0)


def test_a_logs_lines_add_up_from_ingest_to_report(spark: SparkSession, tmp_path: Path) -> None:
    logs = sorted(KAFKA.glob("*.log"))
    lines = sum(len(p.read_bytes().splitlines()) for p in logs)
    ingested = ingest(spark, [str(p) for p in logs], [], tmp_path / "I")
    assert ingested.skipped > 0 and ingested.quarantined > 0
    assert ingested.read == lines == ingested.checked + ingested.skipped + ingested.quarantined
    assert sum(ingested.skipped_by_reason.values()) == ingested.skipped
    manifest = json.loads((tmp_path / "I" / pl.MANIFEST).read_text())
    assert manifest["counts"] == ingested.to_json()
    assert sum(manifest["skipped"].values()) == ingested.skipped

    events = read_parquet(tmp_path / "I" / pl.EVENTS)

    result = pl.check(spark, tmp_path / "I", tmp_path / "C")
    text, summary = pl.report(tmp_path / "C")

    c = result.counts
    # One Init per log is the parser's, no line of the file: checked, but not counted as read.
    assert c.synthesized == len(logs) and c.read == len(events) - len(logs) == ingested.checked
    assert lines == c.checked + c.quarantined + ingested.skipped + ingested.quarantined
    assert summary["quarantined_upstream"] == ingested.quarantined
    assert (f"ingest: read {lines:,} = checked {ingested.checked:,} + skipped {ingested.skipped:,} + quarantined "
            f"{ingested.quarantined:,}") in text.splitlines()
    for reason, n in ingested.skipped_by_reason.items():
        assert f"  skipped: {reason}: {n}" in text.splitlines()
    assert summary["ingest"]["skipped"] == ingested.skipped


def test_an_empty_log_checks_nothing_and_says_so(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "state-change.log").write_bytes(b"")
    counts = ingest(spark, [str(tmp_path / "state-change.log")], [], tmp_path / "I")
    result = pl.check(spark, tmp_path / "I", tmp_path / "C")
    text, summary = pl.report(tmp_path / "C")
    # A check of nothing is no pass (docs/verdicts.md): exit 2, as every engine that observed nothing.
    assert (counts.read, result.counts.checked, result.exit_code) == (0, 0, pl.EXIT_USAGE)
    assert summary["verdict"] == UNOBSERVED
    assert text.splitlines()[0] == ("verdict: unobserved (no event checked: the input holds none, so nothing was "
                                    "verified)")


def test_a_gzip_log_reads_as_the_log_it_compresses(tmp_path: Path) -> None:
    # The copy in tests/data, and a gzip file whose name does not say so: the magic bytes do.
    assert gzip.decompress(GZIPPED.read_bytes()) == REAL_LOG.read_bytes()
    hidden = tmp_path / "state-change.log"
    shutil.copyfile(GZIPPED, hidden)
    plain, packed, unnamed = parse_kafka_log(REAL_LOG), parse_kafka_log(GZIPPED), parse_kafka_log(hidden)
    assert not any("UTF-8" in q["reason"] for q in packed.quarantine)
    for parsed in (packed, unnamed):
        assert ([(e["seq"], e["action"], e["state"]) for e in parsed.events] ==
                [(e["seq"], e["action"], e["state"]) for e in plain.events])
        assert (parsed.lines, len(parsed.skipped), len(parsed.quarantine)) == (
            plain.lines, len(plain.skipped), len(plain.quarantine))


def test_a_deeply_nested_line_is_quarantined_and_the_rest_kept(tmp_path: Path) -> None:
    events = _trace(tmp_path / "t.jsonl", 30, Knobs())
    lines = (tmp_path / "t.jsonl").read_bytes().splitlines(keepends=True)
    huge = b'{"v":2,"run":"seed-2","seq":' + b"7" * 5000 + b"}\n"
    (tmp_path / "t.jsonl").write_bytes(b"".join([*lines[:5], b"[" * 100_000 + b"\n", huge, *lines[5:]]))
    kept, quarantine, read = parse_jsonl(str(tmp_path / "t.jsonl"))
    assert (len(kept), read) == (len(events), len(events) + 2)
    assert [q["line"] for q in quarantine] == [6, 7]  # with the reason the trace format gives, or ingest's own
    assert plan([], [str(tmp_path / "t.jsonl")])[0].run == "seed-2"  # the run's name, read past it too


def test_sources_are_named_apart_and_a_file_given_twice_is_refused(tmp_path: Path) -> None:
    for folder in ("x/broker-1", "y/broker-1"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "controller.log").write_text("")
    logs = [str(tmp_path / "x/broker-1/controller.log"), str(tmp_path / "y/broker-1/controller.log")]
    assert [s.run for s in plan(logs, [])] == ["log-controller@x/broker-1/controller.log",
                                               "log-controller@y/broker-1/controller.log"]
    # A run an earlier ingest of another source made keeps its name; the same source gets its own again.
    earlier = {"log-controller": str(tmp_path / "x/broker-1/controller.log")}
    assert [s.run for s in plan(logs[1:], [], earlier)] == ["log-controller@y/broker-1/controller.log"]
    assert [s.run for s in plan(logs[:1], [], earlier)] == ["log-controller"]
    with pytest.raises(ValueError, match="given twice"):
        plan([logs[0], logs[0]], [])


def test_a_manifest_an_earlier_kcm_wrote_promises_no_runs(tmp_path: Path) -> None:
    from kcm.conformance.pipeline.ingest import taken_runs

    (tmp_path / pl.EVENTS / "run=run-000000-seed-1").mkdir(parents=True)
    (tmp_path / pl.MANIFEST).write_text(json.dumps({"stage": "generate", "runs": 8, "counts": {}}))
    assert pl.held_to_manifest(pl.read_manifest(tmp_path) or {}, {}) == []
    assert taken_runs(tmp_path) == {"run-000000-seed-1": ""}  # its runs' names stay taken all the same


def test_a_line_without_its_seq_is_quarantined_as_the_schema_says(tmp_path: Path) -> None:
    """Found by tests/test_fuzz_cli.py: ingest's reason for a refused seq read the line's seq, which a line
    whose seq the schema refused lacks (a KeyError lost the whole job)."""
    _trace(tmp_path / "t.jsonl", 10, Knobs())
    lines = (tmp_path / "t.jsonl").read_bytes().splitlines(keepends=True)
    lines[5] = lines[5].replace(b'"seq":', b'"se\xef\xbb\xbfq":')
    (tmp_path / "t.jsonl").write_bytes(b"".join(lines))
    kept, quarantine, read = parse_jsonl(str(tmp_path / "t.jsonl"))
    assert (len(kept), read) == (len(lines) - 1, len(lines))
    assert [(q["line"], q["reason"].split(":")[0]) for q in quarantine] == [(6, "schema")]

