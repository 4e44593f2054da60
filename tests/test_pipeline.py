"""The Spark pipeline on real local Spark: planted violations, agreement with the single-process checker,
bad input quarantined with every record accounted for, identical outputs on re-runs, and spark-submit."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from histories import reelected_controller
from pyspark.sql import SparkSession
from test_log_agreement import LOGS
from test_spark_session import generate_one_run

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline import jobs as pl
from kcm.conformance.pipeline.ingest import ingest
from kcm.conformance.pipeline.session import CONF_DIR, spark_session
from kcm.conformance.pipeline.stream import MAX_ROWS_PER_INVARIANT, WINDOW
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event, TraceWriter, apply_event, empty_state, make_event
from kcm.spec.trace.parquet import ARROW_SCHEMA, read_parquet, write_parquet
from kcm.spec.vocabulary import INVARIANTS, NO_LEADER, Knobs

ROOT = Path(__file__).resolve().parents[1]
KAFKA = ROOT / "tests" / "data" / "kafka"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


def _simulate(seed: int, steps: int, run: str, knobs: Knobs | None = None, faults: float = 0.0) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, knobs or Knobs(), SimConfig(faults=faults), events.append)
    simulator.bootstrap()
    simulator.run(steps)
    for event in events:
        event["run"] = run
    return events


def _final(events: list[Event]) -> dict[str, Any]:
    state = empty_state()
    for event in events:
        apply_event(state, event)
    return state


def _plant(kind: str, events: list[Event]) -> tuple[Event, str]:
    """An event appended to a clean run that breaks exactly one invariant, and that invariant."""
    s = _final(events)
    run, seq = events[0]["run"], events[-1]["seq"] + 1
    p = next(p for p, leader in sorted(s["leader"].items()) if leader != NO_LEADER and len(s["isr"][p]) > 1
             and s["role"][str(leader)].get(p) == "leader" and s["hw"][str(leader)].get(p, 0) > 0
             and s["local_leader_epoch"][str(leader)][p] == s["leader_epoch"][p])
    leader, isr = s["leader"][p], s["isr"][p]
    if kind == "two leaders":
        other = next(b for b in isr if b != leader)
        return make_event(run, seq, "observer", "BrokerChange", {}, {"leader": {p: other}}), "OneLeaderPerEpoch"
    if kind == "isr outside":
        return make_event(run, seq, "observer", "BrokerChange", {}, {"isr": {p: [*isr, 9]}}), "IsrSubsetOfReplicas"
    if kind == "hw back":
        hw = s["hw"][str(leader)][p]
        return (make_event(run, seq, f"broker:{leader}", "Fetch", {}, {"hw": {str(leader): {p: hw - 1}}}),
                "HighWatermarkMonotonic")
    if kind == "stale request":
        b = next(b for b, epoch in sorted(s["broker_controller_epoch"].items()) if epoch >= 1)
        args = {"controller_epoch": s["broker_controller_epoch"][b] - 1, "applied": True, "partitions": []}
        return make_event(run, seq, f"broker:{b}", "LeaderAndIsr", args, {}), "StaleControllerFenced"
    if kind == "leader outside isr":
        rest = [b for b in isr if b != leader]
        return make_event(run, seq, "observer", "BrokerChange", {}, {"isr": {p: rest}}), "LeaderInIsr"
    if kind == "controller epoch back":
        return (make_event(run, seq, "observer", "BrokerChange", {}, {"controller_epoch": s["controller_epoch"] - 1}),
                "ControllerEpochMonotonic")
    if kind == "leader epoch back":
        return (make_event(run, seq, "observer", "BrokerChange", {}, {"leader_epoch": {p: s["leader_epoch"][p] - 1}}),
                "LeaderEpochMonotonic")
    if kind == "hw past log end":
        hw = len(s["log"][str(leader)][p]) + 1
        return (make_event(run, seq, f"broker:{leader}", "Fetch", {}, {"hw": {str(leader): {p: hw}}}),
                "HighWatermarkWithinLog")
    if kind == "committed record lost":
        return (make_event(run, seq, f"broker:{leader}", "Fetch", {}, {"log": {str(leader): {p: []}}}),
                "NoCommittedDataLoss")
    if kind == "follower rewrites":
        follower = next(str(b) for b in isr if b != leader and s["hw"][str(b)].get(p, 0) > 0)
        log = [[epoch + 7, record] for epoch, record in s["log"][follower][p]]
        rewritten = make_event(run, seq, f"broker:{follower}", "Fetch", {}, {"log": {follower: {p: log}}})
        return rewritten, "ReplicaLogsAgree"
    c = str(s["controller"])
    assert s["partition_state"][c][p] == "OnlinePartition"
    if kind == "invalid replica transition":
        replica: dict[str, Any] = {"replica_state": {c: {p: {str(leader): "NewReplica"}}}}
        args = {"transitions": [["replica", p, str(leader), "OnlineReplica", "NewReplica"]]}
        return make_event(run, seq, f"controller:{c}", "BrokerChange", args, replica), "ValidReplicaTransitions"
    args = {"transitions": [["partition", p, "OnlinePartition", "NewPartition"]]}
    delta = {"partition_state": {c: {p: "NewPartition"}}}
    return make_event(run, seq, f"controller:{c}", "BrokerChange", args, delta), "ValidPartitionTransitions"


def _reference(events: list[Event]) -> set[tuple[str, int, str]]:
    """(run, seq, invariant) of every violation the single-process checker reports, one checker per run."""
    found: set[tuple[str, int, str]] = set()
    checkers: dict[str, InvariantChecker] = {}
    for event in events:
        checker = checkers.setdefault(event["run"], InvariantChecker())
        found |= {(event["run"], event["seq"], v.invariant) for v in checker.step(event)}
    return found


def _table(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


PLANTS = ("two leaders", "isr outside", "hw back", "stale request", "invalid transition")
# Seeds whose run ends with a partition led by its current leader, an HW above 0 and a follower in its ISR.
PLANT_SEEDS = (102, 107, 109, 110, 113)


def test_planted_violations_are_found_at_their_run_and_event(spark: SparkSession, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    ingest(spark, [str(p) for p in sorted(KAFKA.glob("*.log"))], [], corpus)
    planted: dict[str, tuple[int, str]] = {}
    everything: list[Event] = []
    for index, kind in enumerate(PLANTS):
        events = _simulate(PLANT_SEEDS[index], 250, f"planted-{index}")
        event, invariant = _plant(kind, events)
        planted[event["run"]] = (event["seq"], invariant)
        everything += [*events, event]
    everything += _simulate(7, 250, "clean")
    write_parquet(everything, corpus / pl.EVENTS)

    result = pl.check(spark, corpus, tmp_path / "checked")

    violations = _table(tmp_path / "checked" / "violations.parquet")
    found = {(r["run"], r["seq"], r["invariant"].split("/")[0]) for r in violations}
    for run, (seq, invariant) in planted.items():
        assert {(s, i) for r, s, i in found if r == run} == {(seq, invariant)}, run
    assert {r for r, _, _ in found if r == "clean"} == set()
    # The faults planted in the hand-written logs (tests/test_kafka_log.py), found by Spark too.
    assert {(r, s, i) for r, s, i in found if r.startswith("log-")} == {
        ("log-state-change-1.1", 10, "OneLeaderPerEpoch"),
        ("log-state-change-1.1", 12, "ValidReplicaTransitions"), ("log-state-change-2.4", 7, "StaleControllerFenced")}
    simulated = {(r["run"], r["seq"], r["invariant"]) for r in violations if not r["run"].startswith("log-")}
    assert simulated == _reference(everything)
    windows = {r["run"]: r["window"] for r in violations}
    seq, _ = planted["planted-0"]
    assert [e["seq"] for e in windows["planted-0"]] == list(range(seq - WINDOW, seq + 1))
    assert result.exit_code == pl.EXIT_VIOLATIONS
    verdicts = {(r["run"], r["invariant"]): r["verdict"] for r in _table(tmp_path / "checked" / "verdicts.parquet")}
    assert verdicts[("clean", "NoCommittedDataLoss")] == "holds"
    assert verdicts[("log-state-change-2.4", "NoCommittedDataLoss")] == "unobserved"
    assert verdicts[("planted-1", "IsrSubsetOfReplicas")] == "violated"


def test_check_and_its_z3_sample_agree_with_check_trace_on_every_kafka_log(spark: SparkSession,
                                                                          tmp_path: Path) -> None:
    # tests/test_log_agreement.py holds check-trace and validate to the same, log by log. A run is named
    # after its file: the logs' paths make their names (two generations' fixtures share a file name).
    logs = []
    for log in LOGS:
        logs.append(tmp_path / "-".join(log.relative_to(KAFKA).parts))
        shutil.copyfile(log, logs[-1])
    ingest(spark, [str(p) for p in logs], [], tmp_path / "corpus")
    pl.check(spark, tmp_path / "corpus", tmp_path / "checked", validate_sample=1.0)
    events = read_parquet(tmp_path / "corpus" / pl.EVENTS)
    expected = {(r, s, i.split("/")[0]) for r, s, i in _reference(events)}
    found = {(r["run"], r["seq"], r["invariant"].split("/")[0])
             for r in _table(tmp_path / "checked" / "violations.parquet")}
    assert found == expected
    validation = {r["run"]: r for r in _table(tmp_path / "checked" / "validation.parquet")}
    assert set(validation) == {e["run"] for e in events}
    for run, row in validation.items():
        first = min((s for r, s, _ in expected if r == run), default=None)
        assert (row["ok"], row["failed_seq"]) == (first is None, first), (run, row["reason"])


# Every invariant broken once, by a planted event (the plant's seed) or by an unsafe design on its own.
EVERY_PLANT = ("two leaders", "isr outside", "hw back", "stale request", "invalid transition", "leader outside isr",
               "controller epoch back", "leader epoch back", "committed record lost", "follower rewrites",
               "invalid replica transition", "hw past log end")


def _check_trace(trace: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from kcm.tools.cli import main

    main(["check-trace", str(trace), "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_pipeline_and_check_trace_agree_run_by_run(spark: SparkSession, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Verdicts, violation counts, first violations and the violations listed, per run, under every knob and
    with a planted violation of every invariant: the pipeline runs check-trace's checker, and must say so."""
    settings = [[], ["truncation=hw"], ["unclean_election=true"], ["controller_epoch_fencing=false"],
                ["leader_epoch_check=false"]]
    for base, setting in enumerate(settings):
        pl.generate(spark, 2, 400, Knobs().with_settings(setting), tmp_path, base_seed=base * 1000 + 3)
    planted = []
    for index, kind in enumerate(EVERY_PLANT):
        events = _simulate(PLANT_SEEDS[index % len(PLANT_SEEDS)], 250, f"planted-{index}")
        event, invariant = _plant(kind, events)
        planted.append(invariant)
        write_parquet([*events, event], tmp_path / pl.EVENTS)
    assert sorted(planted) == sorted(INVARIANTS)
    events = read_parquet(tmp_path / pl.EVENTS)
    runs = sorted({e["run"] for e in events})
    assert len(runs) == 10 + len(EVERY_PLANT)

    pl.check(spark, tmp_path, tmp_path / "checked")

    verdicts = _table(tmp_path / "checked" / "verdicts.parquet")
    listed = _table(tmp_path / "checked" / "violations.parquet")
    violated = set()
    for run in runs:
        trace = tmp_path / f"{run}.jsonl"
        with TraceWriter(trace) as writer:
            for event in (e for e in events if e["run"] == run):
                writer.write(event)
        expected = _check_trace(trace, capsys)
        mine = {r["invariant"]: r for r in verdicts if r["run"] == run}
        assert {name: r["verdict"] for name, r in mine.items()} == expected["verdicts"], run
        for name, row in mine.items():
            theirs = [v for v in expected["violations"] if v["invariant"].split("/")[0] == name]
            assert (row["violations"], row["first_seq"]) == (len(theirs), theirs[0]["seq"] if theirs else None)
        per_invariant: dict[str, list[tuple[int, str]]] = {}
        for v in expected["violations"]:
            per_invariant.setdefault(v["invariant"], []).append((v["seq"], v["message"]))
        expected_rows = sorted((name, seq, message) for name, found in per_invariant.items()
                               for seq, message in found[:MAX_ROWS_PER_INVARIANT])
        assert sorted((r["invariant"], r["seq"], r["message"]) for r in listed if r["run"] == run) == expected_rows
        violated |= {name for name, verdict in expected["verdicts"].items() if verdict == "violated"}
    assert violated == set(INVARIANTS)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def test_files_that_mix_runs_are_shuffled_by_run_and_check_the_same(spark: SparkSession, tmp_path: Path) -> None:
    """Events another tool wrote as one table (runs mixed across files, rows in any order, a `run` column)
    take the shuffle: the same verdicts, violations and coverage as the layout gives, and their own bad rows
    quarantined."""
    pl.generate(spark, 3, 500, Knobs().with_settings(["truncation=hw"]), tmp_path / "layout", base_seed=7)
    pl.generate(spark, 1, 200, Knobs(), tmp_path / "layout", base_seed=8)
    events = read_parquet(tmp_path / "layout" / pl.EVENTS)
    # Compact JSON, as kcm writes it: a violation's window shows the delta as its file holds it.
    rows = [{**e, "args": _compact(e["args"]), "state": _compact(e["state"]) if e["state"] else None,
             "full": bool(e.get("full"))} for e in events]
    random.Random(1).shuffle(rows)
    loose = tmp_path / "loose" / pl.EVENTS
    loose.mkdir(parents=True)
    nullable = pa.schema([f.with_nullable(True) for f in ARROW_SCHEMA])
    for index in range(3):
        pq.write_table(pa.Table.from_pylist(rows[index::3], schema=nullable), loose / f"table-{index}.parquet")
    extra = [{**rows[0]}, {**rows[1], "run": None}]
    pq.write_table(pa.Table.from_pylist(extra, schema=nullable), loose / "table-3.parquet")

    layout = pl.check(spark, tmp_path / "layout", tmp_path / "a")
    shuffled = pl.check(spark, tmp_path / "loose", tmp_path / "b")

    assert layout.violations > 0
    for name in ("verdicts.parquet", "violations.parquet", "coverage.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    reasons = sorted(q["reason"].split(":")[0] for q in pl.read_quarantine(tmp_path / "b"))
    assert reasons == ["duplicate seq", "missing field"]
    assert shuffled.counts.read == len(events) + 2 == shuffled.counts.checked + 2
    # One run, one place: rows of a run that also has its folder are quarantined, not checked twice.
    shutil.copyfile(loose / "table-0.parquet", tmp_path / "layout" / pl.EVENTS / "table-0.parquet")
    both = pl.check(spark, tmp_path / "layout", tmp_path / "c")
    assert (tmp_path / "a" / "verdicts.parquet").read_bytes() == (tmp_path / "c" / "verdicts.parquet").read_bytes()
    assert both.counts.quarantined == len(rows[0::3])
    assert {q["reason"].split(" ")[0] for q in pl.read_quarantine(tmp_path / "c")} == {"run"}


def test_generate_derives_seeds_and_writes_one_partition_per_run(spark: SparkSession, tmp_path: Path) -> None:
    counts = pl.generate(spark, 3, 50, Knobs(), tmp_path)
    runs = sorted(p.name for p in (tmp_path / pl.EVENTS).iterdir())
    assert runs == [f"run=run-{i:06d}-seed-{pl.derive_seed(0, i)}" for i in range(3)]
    assert counts.read == counts.checked == len(read_parquet(tmp_path / pl.EVENTS))
    assert len({pl.derive_seed(0, i) for i in range(1000)}) == 1000
    with pytest.raises(ValueError, match="at least 1"):
        pl.generate(spark, 0, 10, Knobs(), tmp_path)


def _broken_jsonl(path: Path) -> int:
    """A trace with one fault of each kind; returns the number of good lines."""
    events = _simulate(3, 40, "jsonl")
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    good = len(events)
    lines = path.read_bytes().splitlines(keepends=True)
    bad = [
        b'{"v":2,"run":"jsonl","seq":\n',  # malformed JSON
        json.dumps({**events[5], "extra": 1}).encode() + b"\n",  # schema drift: an unknown field
        json.dumps({**events[6], "action": "Teleport"}).encode() + b"\n",  # unknown action
        lines[19],  # duplicate seq
        lines[3],  # out-of-order seq
    ]
    path.write_bytes(b"".join(lines[:20] + bad + lines[20:]) + b'{"v":2,"run":"jsonl","seq":99')  # truncated
    return good


def _bad_parquet(events_dir: Path) -> int:
    """Corrupt and drifted files, and rows a file may hold but a check must not take; returns the bad rows."""
    (events_dir / "run=corrupt").mkdir(parents=True)
    (events_dir / "run=corrupt" / "part-0.parquet").write_bytes(b"PAR1 this is not parquet")
    (events_dir / "run=drift").mkdir()
    drift = pa.table({"v": [1], "seq": ["0"], "actor": ["env"], "action": ["Init"], "args": ["{}"], "state": ["{}"],
                      "full": [True]})
    pq.write_table(drift, events_dir / "run=drift" / "part-0.parquet")
    rows = [make_event("rows", 0, "env", "Init", {}, {}, full=True), make_event("rows", 1, "clock", "Tick", {}, {}),
            make_event("rows", 1, "clock", "Tick", {"dup": True}, {}), make_event("rows", 2, "admin", "Warp", {}, {}),
            make_event("rows", 3, "env", "BrokerCrash", {}, {"weather": 1})]
    table = pa.Table.from_pylist([{**e, "args": json.dumps(e["args"]), "state": json.dumps(e["state"]),
                                   "full": bool(e.get("full"))} for e in rows], schema=ARROW_SCHEMA)
    (events_dir / "run=rows").mkdir()
    pq.write_table(table.drop(["run"]), events_dir / "run=rows" / "part-0.parquet")
    return 3 + 1  # three bad rows in run=rows, one row in the drifted file


def _bad_corpus(spark: SparkSession, tmp_path: Path) -> tuple[Path, Path, int]:
    """A corpus with bad input of every kind; returns it, its broken JSON Lines file and its good records."""
    corpus = tmp_path / "corpus"
    jsonl = tmp_path / "broken.jsonl"
    good = _broken_jsonl(jsonl)
    counts = ingest(spark, [], [str(jsonl)], corpus)
    ingested = [q["reason"].split(":")[0] for q in pl.read_quarantine(corpus)]
    assert sorted(ingested) == sorted(["malformed JSON", "schema", "unknown action", "duplicate seq",
                                       "out-of-order seq", "truncated file"])
    assert (counts.read, counts.checked, counts.quarantined) == (good + 6, good, 6)
    clean = _simulate(4, 100, "clean")
    write_parquet(clean, corpus / pl.EVENTS)
    return corpus, jsonl, good + len(clean)


def test_bad_input_is_quarantined_and_counted(spark: SparkSession, tmp_path: Path) -> None:
    corpus, jsonl, good = _bad_corpus(spark, tmp_path)
    bad_rows = _bad_parquet(corpus / pl.EVENTS)

    result = pl.check(spark, corpus, tmp_path / "checked")

    assert result.exit_code == pl.EXIT_QUARANTINED
    c = result.counts
    assert c.read == c.checked + c.quarantined
    assert c.quarantined == bad_rows and c.files_quarantined == 2
    assert c.checked == good + 2  # and the two good rows of run=rows
    reasons = {q["reason"].split(":")[0] for q in pl.read_quarantine(tmp_path / "checked") if q["file"] != str(jsonl)}
    assert reasons == {"unreadable Parquet file", "schema drift", "duplicate seq", "unknown action",
                       "unknown state variable"}
    summary = json.loads((tmp_path / "checked" / pl.SUMMARY).read_text())
    assert summary["records"]["read"] == c.read and summary["quarantined_upstream"] == 6


def test_check_exits_3_when_only_ingest_quarantined(spark: SparkSession, tmp_path: Path) -> None:
    from kcm.tools.cli import main

    corpus = tmp_path / "corpus"
    jsonl = tmp_path / "one-bad-line.jsonl"
    clean = _simulate(3, 60, "clean")
    jsonl.write_text("".join(json.dumps(e) + "\n" for e in clean) + "{not json\n", encoding="utf-8")
    ingest(spark, [], [str(jsonl)], corpus)

    result = pl.check(spark, corpus, tmp_path / "checked")

    assert (result.violations, result.counts.quarantined) == (0, 0)
    assert result.exit_code == pl.EXIT_QUARANTINED
    assert main(["pipeline", "report", "--in", str(tmp_path / "checked")]) == pl.EXIT_QUARANTINED


@pytest.mark.long
def test_the_same_input_gives_identical_outputs(spark: SparkSession, tmp_path: Path) -> None:
    corpus, _, _ = _bad_corpus(spark, tmp_path)
    _bad_parquet(corpus / pl.EVENTS)
    pl.check(spark, corpus, tmp_path / "one")
    pl.check(spark, corpus, tmp_path / "two")
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "two").iterdir())
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name


def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    from kcm.tools.cli import main

    assert main(["pipeline", "report", "--in", str(tmp_path)]) == 2
    assert main(["pipeline", "check", "--in", str(tmp_path), "--out", str(tmp_path), "--validate-sample", "2"]) == 2


def test_spark_submit_runs_the_entry_point_unchanged(tmp_path: Path) -> None:
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = tmp_path / "ingested"
    done = subprocess.run(
        [str(submit), "--master", "local[2]", str(ROOT / "tools" / "pipeline.py"), "ingest", "--kafka-log",
         str(KAFKA / "state-change-2.4.log"), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == pl.EXIT_QUARANTINED, done.stderr[-2000:]
    assert "read 9 = checked 7 + skipped 0 + quarantined 2" in done.stdout
    assert len(read_parquet(out / pl.EVENTS)) == 8


def test_the_local_jvm_collects_garbage_for_throughput(spark: SparkSession) -> None:
    if os.environ.get("SPARK_CONF_DIR") != str(CONF_DIR):
        pytest.skip("SPARK_CONF_DIR is the user's own: its spark-defaults.conf applies")
    jvm: Any = spark.sparkContext._jvm
    collectors = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}  # the parallel collector, not G1


def test_a_stage_prints_kcm_lines_not_spark_logging(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "SPARK_LOCAL_IP")}
    done = generate_one_run(tmp_path, env)
    # Spark's own WARN and INFO lines (loopback address, default log level, native Hadoop) are gone.
    assert not [line for line in done.stderr.splitlines() if " WARN " in line or "log level" in line], done.stderr


def test_a_context_load_starts_the_state_machines_afresh(spark: SparkSession, tmp_path: Path) -> None:
    events = reelected_controller("dropped", back=False) + reelected_controller("back", back=True)
    write_parquet(events, tmp_path / pl.EVENTS)
    result = pl.check(spark, tmp_path, tmp_path / "checked")
    assert (result.runs, result.violations) == (2, 0)
    assert _reference(events) == set()


def test_brokers_from_zero_check_and_validate_on_spark(spark: SparkSession, tmp_path: Path) -> None:
    """`pipeline check --validate-sample all` on a run whose brokers are 0, 1, 2 (before trace format v2 it
    stopped at KeyError 'alive.0'); tests/test_broker_zero.py runs the other engines on such runs."""
    events: list[Event] = []
    simulator = Simulator(3, Knobs(), SimConfig(first_broker_id=0), events.append)
    simulator.bootstrap()
    simulator.run(150)
    assert events[0]["args"]["brokers"] == [0, 1, 2] and any(e["actor"] == "broker:0" for e in events)
    trace = tmp_path / "zero.jsonl"
    with TraceWriter(trace) as writer:
        for event in events:
            writer.write(event)
    counts = ingest(spark, [], [str(trace)], tmp_path / "corpus")
    assert (counts.read, counts.checked, counts.quarantined) == (len(events), len(events), 0)
    result = pl.check(spark, tmp_path / "corpus", tmp_path / "checked", validate_sample=1.0)
    assert result.violations == 0 and result.exit_code == 0
    rows = _table(tmp_path / "checked" / "validation.parquet")
    assert [(r["ok"], r["failed_seq"]) for r in rows] == [(True, None)]
