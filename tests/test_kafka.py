"""Apache Kafka itself, run by kcm (`kcm kafka`, kcm.impl.kafka, kcm.conformance.kafka): the command's answers
to bad input in the default suite; under the `kafka` marker, a real 3.9.2 cluster started, used by a client,
stopped with nothing left running, a fault campaign judged, and the unclean-election experiment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kcm.conformance.kafka.campaign import (
    CampaignError,
    CampaignPlan,
    FaultRecord,
    RunRecord,
    plan_from_settings,
    recorded_runs,
)
from kcm.impl.kafka import release as releases
from kcm.impl.kafka.admin import Admin, read_producer_log
from kcm.impl.kafka.cluster import KafkaCluster
from kcm.tools.cli import main
from kcm.tools.json_schemas import validate

KCM = [sys.executable, "-m", "kcm.tools.cli"]


def _kcm(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KCM, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line `kcm` says, in process, with exit 2."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# Bad input, answered without Kafka


def test_a_knob_kafka_has_no_setting_for_is_refused_in_one_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "kafka", "campaign", "--set", "truncation=hw", "--out", str(tmp_path))
    assert "--set truncation" in err and "not a Kafka setting" in err


def test_an_unknown_fault_and_a_release_kcm_does_not_run_are_refused(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert "meteor" in _refused(capsys, "kafka", "campaign", "--faults", "kill,meteor", "--out", str(tmp_path))
    assert "--release" in _refused(capsys, "kafka", "start", "--release", "2.0.1", "--dir", str(tmp_path))


def test_status_stop_and_judge_of_a_folder_without_a_cluster_say_so(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for action in ("status", "stop"):
        assert "no Kafka cluster here" in _refused(capsys, "kafka", action, "--dir", str(tmp_path))
    assert "no campaign runs here" in _refused(capsys, "kafka", "judge", "--out", str(tmp_path))


def test_missing_java_or_maven_is_one_line_naming_what_to_install(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    java = Path(releases.java()).resolve()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    releases.java.cache_clear()
    try:
        err = _refused(capsys, "kafka", "fetch")
        assert "java not found" in err and "apt-get install" in err
        (tmp_path / "java").symlink_to(java)
        releases.java.cache_clear()
        err = _refused(capsys, "kafka", "fetch")
        assert "mvn not found" in err and "apt-get install maven" in err
    finally:
        releases.java.cache_clear()


def test_the_campaign_takes_the_topic_settings_from_knobs() -> None:
    plan = plan_from_settings({"unclean_election": "true", "min_isr": "1"}, runs=2)
    assert plan.topic_configs() == {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}
    assert CampaignPlan().topic_configs()["min.insync.replicas"] == "2"  # the safe configuration by default
    assert plan.zk_servers == 3 and CampaignPlan(faults=("kill",)).zk_servers == 1
    with pytest.raises(CampaignError, match="min_isr=4"):
        CampaignPlan(min_isr=4)
    with pytest.raises(CampaignError, match="true or false"):
        plan_from_settings({"unclean_election": "yes"})


def test_a_run_record_reads_back_as_written(tmp_path: Path) -> None:
    record = RunRecord("run-007", 7, str(tmp_path / "run-007"), "3.9.2", {"min.insync.replicas": "2"},
                       [FaultRecord("kill", 2, "controller", 4.5)], acked=10, read_back=10)
    (tmp_path / "run-007").mkdir()
    (tmp_path / "run-007" / "run.json").write_text(json.dumps(record.to_json()))
    assert recorded_runs(tmp_path) == [record]


def test_the_producer_log_counts_every_acknowledgement_and_error(tmp_path: Path) -> None:
    # Lines as VerifiableProducer prints them, with a warning of its logger between them.
    path = tmp_path / "producer.jsonl"
    path.write_text(
        '{"timestamp":1,"name":"startup_complete"}\n'
        '{"timestamp":2,"name":"producer_send_success","key":null,"value":"0","offset":0,"topic":"t",'
        '"partition":1}\n'
        "[2026-12-02 12:00:00,000] WARN [Producer clientId=producer-1] Got error produce response (x)\n"
        '{"timestamp":3,"name":"producer_send_error","key":null,"value":"1","topic":"t",'
        '"exception":"class org.apache.kafka.common.errors.NotEnoughReplicasException","message":"m"}\n')
    log = read_producer_log(path)
    assert [(r.partition, r.offset, r.value) for r in log.acked] == [(1, 0, "0")]
    assert log.errors == {"NotEnoughReplicasException": 1} and log.lines == 4


# Kafka itself (marker kafka)


def _kafka_processes(folder: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-af", f"kafka.Kafka {folder}|QuorumPeerMain {folder}"],
                           capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


@pytest.fixture(scope="session")
def kafka_jars() -> None:
    try:
        releases.classpath(releases.DEFAULT_RELEASE)
    except releases.KafkaMissing as missing:
        pytest.skip(f"Kafka is not available: {missing}")


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_jars", "zk_installed")
def test_start_status_stop_a_three_broker_cluster_that_answers_a_client(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    started = _kcm("kafka", "start", "--brokers", "3", "--dir", str(folder))
    assert started.returncode == 0, started.stderr
    assert "3 brokers serving at 127.0.0.1:" in started.stdout
    try:
        status = _kcm("kafka", "status", "--dir", str(folder))
        assert status.returncode == 0, status.stderr
        rows = [line.split() for line in status.stdout.splitlines()[1:4]]
        assert [row[3] for row in rows] == ["running"] * 3
        assert sum(row[-1] == "yes" for row in rows) == 1  # one controller
        cluster = KafkaCluster.attach(folder)
        admin = Admin(cluster)
        admin.create_topic("answers", 1, 3, {"min.insync.replicas": "2"})
        producer = admin.producer("answers", tmp_path / "producer.jsonl", throughput=50)
        try:
            for _ in range(60):
                if len(read_producer_log(tmp_path / "producer.jsonl").acked) >= 20:
                    break
                subprocess.run(["sleep", "0.5"], check=True)
        finally:
            producer.terminate()
            producer.wait(timeout=30)
        acked = read_producer_log(tmp_path / "producer.jsonl").acked
        read = {(r.partition, r.offset, r.value) for r in admin.read_topic("answers", timeout_ms=8000)}
        assert len(acked) >= 20 and {(r.partition, r.offset, r.value) for r in acked} <= read
        assert (folder / "broker-1" / "state-change.log").stat().st_size > 0
    finally:
        stopped = _kcm("kafka", "stop", "--dir", str(folder))
    assert stopped.returncode == 0, stopped.stderr
    assert _kafka_processes(folder) == []


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_jars", "zk_installed")
def test_a_broker_that_cannot_bind_its_port_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        # The ZooKeeper server gets a free port, the broker the one already taken.
        script = ("import sys\nfrom kcm.impl.zookeeper import ensemble\nreal, calls = ensemble.free_ports, []\n"
                  "def ports(n):\n    calls.append(n)\n"
                  f"    return real(n) if len(calls) == 1 else [{port}]\n"
                  "ensemble.free_ports = ports\nfrom kcm.tools.cli import main\n"
                  f"sys.exit(main(['kafka', 'start', '--brokers', '1', '--dir', {str(tmp_path / 'c')!r}]))")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    _one_line_error(done, "broker 1", "Address already in use")
    assert _kafka_processes(tmp_path / "c") == []


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_jars", "zk_installed")
def test_a_campaign_run_under_the_safe_settings_is_judged_and_loses_nothing(tmp_path: Path) -> None:
    # Seed 9 draws leader-loss first (the unclean experiment's faults, here with clean elections and
    # min.insync.replicas=2), then three more of the others.
    faults = "kill,pause,shutdown,failover,preferred,reassign,topic,leader-loss"
    done = _kcm("kafka", "campaign", "--runs", "1", "--faults-per-run", "4", "--seed", "9", "--faults", faults,
                "--out", str(tmp_path), "--json", "--html", str(tmp_path / "kafka.html"))
    judgement = json.loads(done.stdout)
    validate("kafka-campaign", judgement)
    [run] = judgement["runs"]
    assert run["faults"][0]["kind"] == "leader-loss"
    assert run["acked"] > 0 and run["lost_count"] == 0 and run["calm"] and not judgement["explained_losses"]
    ingest = judgement["ingest"]
    assert ingest["read"] == ingest["checked"] + ingest["skipped"] + ingest["quarantined"]
    assert judgement["client"] == "holds" and judgement["verdicts"]["HighWatermarkMonotonic"] != "unobserved"
    assert "violated" not in judgement["verdicts"].values(), judgement["first_violations"]
    assert ingest["quarantined"] == 0, judgement["quarantine"]
    assert done.returncode == 0, done.stderr
    assert "The model held to Kafka" in (tmp_path / "kafka.html").read_text()
    assert _kafka_processes(tmp_path) == []


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_jars", "zk_installed")
def test_an_unclean_election_loses_acknowledged_records_and_names_the_election(tmp_path: Path) -> None:
    unclean = _kcm("kafka", "campaign", "--runs", "1", "--faults", "leader-loss", "--faults-per-run", "1",
                   "--set", "unclean_election=true", "--set", "min_isr=1", "--out", str(tmp_path), "--json")
    assert unclean.returncode == 1, unclean.stderr
    judged = json.loads(unclean.stdout)
    [run] = judged["runs"]
    assert judged["client"] == "violated" and run["lost_count"] > 0
    assert judged["verdicts"]["NoCommittedDataLoss"] == "violated"
    # The step to blame: the log line where a leader outside the ISR was elected for a partition that lost data.
    lost = {f"kcm-data-{record['partition']}" for record in run["lost"]}
    blamed = judged["explained_losses"][run["name"]]
    assert blamed and {e["partition"] for e in blamed} <= lost
    assert all(e["leader"] not in e["isr_before"] and "state-change.log:" in e["log"] for e in blamed)


# The differential, on a real run kept in tests/data/kafka/campaign-run (Kafka 3.9.2: a broker killed and
# restarted, a preferred election)

RUN = Path(__file__).parent / "data" / "kafka" / "campaign-run"


def _recorded_run(tmp_path: Path) -> RunRecord:
    record = json.loads((RUN / "run.json").read_text())
    return RunRecord.from_json({**record, "folder": str(RUN)})


def test_the_differential_replays_a_real_run_and_aligns_both_controllers(tmp_path: Path) -> None:
    from kcm.conformance.kafka.differential import compare

    comparison = compare(_recorded_run(tmp_path))
    assert set(comparison.kafka.leadership) == set(comparison.kcm.leadership) == {"kcm-data-0", "kcm-data-1"}
    for partition, kafka in comparison.kafka.leadership.items():
        ours = comparison.kcm.leadership[partition]
        # Both controllers start the partition the same way: the first replica of Kafka's assignment leads
        # epoch 0 with the whole assignment in its ISR, under the first controller epoch.
        assert kafka[0][:3] == ours[0][:3] and kafka[0][1] == 0
    assert comparison.to_json()["run"] == _recorded_run(tmp_path).name


def test_the_report_page_draws_both_controllers_leadership(tmp_path: Path) -> None:
    from kcm.conformance.kafka.differential import compare
    from kcm.conformance.kafka.judge import Judgement
    from kcm.tools.report.kinds import kafka_page

    record = _recorded_run(tmp_path)
    judgement = Judgement([record], {"read": 10, "checked": 6, "skipped": 4, "quarantined": 0},
                          {"LeaderInIsr": "holds"}, [], {"ok": 6, "runs": 6, "steps": 6, "unexplained": []})
    page = kafka_page(judgement.to_json(), [compare(record).to_json()], tmp_path / "kafka.html")
    html = page.read_text()
    assert html.count('<svg class="leadership"') == 2  # one per partition of the data topic
    assert "kcm-data-0" in html and record.name in html and "holds" in html


def _copied_run(tmp_path: Path) -> RunRecord:
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    return RunRecord.from_json({**json.loads((RUN / "run.json").read_text()), "folder": str(folder)})


def test_kafkas_side_ends_where_the_producer_stopped(tmp_path: Path) -> None:
    """After the producer's stop the campaign reads back and stops the brokers, which the replay has no
    counterpart of: Kafka's events after the `shutdown_complete` the producer printed are left out."""
    from datetime import datetime

    from kcm.conformance.kafka.differential import before_the_stop, kafka_events

    record = _copied_run(tmp_path)
    events = kafka_events(record)
    times = sorted(str(e["args"]["time"]) for e in events if e["args"].get("time"))
    middle = times[len(times) // 2]
    stopped = int(datetime.strptime(middle + "000", "%Y-%m-%d %H:%M:%S,%f").timestamp() * 1000)
    assert before_the_stop(record, events) == events  # no producer log: nothing to cut
    (Path(record.folder) / "producer.jsonl").write_text(f'{{"timestamp":{stopped - 5000},"name":"startup_complete"}}\n'
                                                        f'{{"timestamp":{stopped},"name":"shutdown_complete"}}\n')
    kept = before_the_stop(record, events)
    assert kept == [e for e in events if str(e["args"].get("time", "")) <= middle]
    assert len(times) // 2 < len(kept) < len(events)


def test_a_paused_controller_is_dead_to_the_failover_its_expiry_brings(tmp_path: Path) -> None:
    """Kafka's SIGSTOPped controller stays down past its session: the new controller loads its replicas as
    ReplicaDeletionIneligible and moves them to OfflineReplica (ReplicaStateMachine.startup, 3.9.2), so the
    replay's paused broker takes no step until the others have acted."""
    from kcm.conformance.kafka.campaign import FaultRecord
    from kcm.conformance.kafka.differential import compare

    record = _copied_run(tmp_path)
    record.faults = [FaultRecord("pause", None, "controller", 5.0)]
    ours = compare(record).kcm.replica_transitions
    assert ours[("NonExistentReplica", "ReplicaDeletionIneligible")] == 2  # one replica of each partition
    assert ours[("ReplicaDeletionIneligible", "OfflineReplica")] == 2
