"""The pipeline on a real Spark standalone cluster: a master and two workers on loopback, started from PySpark's
own scripts, run the job spark-submit hands them, and its outputs equal those of `local[2]`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pyspark
import pytest
from test_spark_session import logging_interpreter
from test_swarm import ledger_lines

from kcm.conformance.pipeline import jobs as pl
from kcm.conformance.pipeline.session import CONF_DIR

ROOT = Path(__file__).resolve().parents[1]
# pip's pyspark is a whole Spark distribution: bin/ (spark-class, spark-submit) and jars/ in the package folder,
# which bin/find-spark-home takes as SPARK_HOME when the variable is unset.
SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT = 90.0
JOB_TIMEOUT = 300.0
# What the summary says about the corpus; the rest (the input path, timings) may differ between two runs.
SUMMARY_FIELDS = ("runs", "runs_with_violations", "events", "violations", "records", "verdicts", "coverage",
                  "validation")

pytestmark = pytest.mark.cluster


@dataclass
class Processes:
    """The processes a test started, each in a session of its own, and every process they started in turn
    (executors, Python workers): those stay in the session even when they move to a process group of their own."""

    sessions: set[int] = field(default_factory=set)
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.sessions.add(process.pid)
        self.started.append(process)
        return process

    def run(self, argv: list[str], env: dict[str, str], log: Path) -> int:
        process = self.start(argv, env, log)
        try:
            return process.wait(timeout=JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{' '.join(argv[:3])} ... did not finish in {JOB_TIMEOUT:.0f} s (log: {log})")

    def stop(self) -> dict[int, str]:
        """SIGTERM to every process of the sessions, SIGKILL to what is still there after a grace period; what
        is left after that, by pid (zombies, which no longer run, do not count)."""
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            for group in {pgid for pgid, _ in _members(self.sessions).values()}:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, sig)
            for process in self.started:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=grace)
            if _wait_until(lambda: not _members(self.sessions), grace):
                break
        return {pid: command for pid, (_, command) in _members(self.sessions).items()}


def _members(sessions: set[int]) -> dict[int, tuple[int, str]]:
    """The live processes of `sessions`: pid -> (process group, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended while we looked
            continue
        # The command name is in parentheses and may hold spaces: the fields start after the last ')'.
        state, _, group, session = stat[stat.rindex(")") + 2:].split()[:4]
        if int(session) in sessions and state != "Z":
            found[int(entry.name)] = (int(group), command.strip())
    return found


def _wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.25)
    return condition()


def _free_ports(count: int) -> list[int]:
    """Ports free on loopback, distinct: the probes are all bound before any is closed."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [int(probe.getsockname()[1]) for probe in probes]


@dataclass(frozen=True)
class Cluster:
    url: str
    web: str
    logs: Path
    work_dirs: tuple[Path, ...]
    processes: Processes

    def state(self) -> dict[str, Any]:
        """The master's state as its web UI serves it (`/json/`)."""
        with urllib.request.urlopen(f"{self.web}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
            return state

    def alive_workers(self) -> int:
        try:
            return int(self.state()["aliveworkers"])
        except (OSError, urllib.error.URLError, ValueError):  # not listening yet
            return -1


def _env(**extra: str) -> dict[str, str]:
    """This process's environment (so the same kcm, e.g. a worktree's on PYTHONPATH), with the Python workers
    on this interpreter and everything on loopback."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", **extra}


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    logs = tmp_path / "logs"
    logs.mkdir()
    # The daemons and their executors log at Spark's default level (INFO) into their own files, not with the
    # level-error configuration of kcm's driver: the test reads the executors' logs.
    conf = tmp_path / "daemon-conf"
    conf.mkdir()
    # The master's REST submission server would take the fixed port 6066.
    (conf / "daemons.properties").write_text("spark.master.rest.enabled false\n")
    env = _env(SPARK_CONF_DIR=str(conf))
    port, web_port = _free_ports(2)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes = Processes()
    try:
        node = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web_port}", logs,
                       (tmp_path / "worker-1", tmp_path / "worker-2"), processes)
        processes.start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                         "--port", str(port), "--webui-port", str(web_port),
                         "--properties-file", str(conf / "daemons.properties")], env, logs / "master.log")
        if not _wait_until(lambda: node.alive_workers() == 0, START_TIMEOUT):
            pytest.fail(f"the master did not start in {START_TIMEOUT:.0f} s (log: {logs / 'master.log'}):\n"
                        + _tail(logs / "master.log"))
        for index, work_dir in enumerate(node.work_dirs, 1):
            work_dir.mkdir()
            processes.start([spark_class, "org.apache.spark.deploy.worker.Worker", node.url, "--host", "127.0.0.1",
                             "--cores", "1", "--memory", "1g", "--work-dir", str(work_dir), "--webui-port", "0",
                             "--properties-file", str(conf / "daemons.properties")], env,
                            logs / f"worker-{index}.log")
        if not _wait_until(lambda: node.alive_workers() == 2, START_TIMEOUT):
            pytest.fail(f"{node.alive_workers()} of 2 workers registered in {START_TIMEOUT:.0f} s (logs: "
                        f"{logs / 'master.log'}, {logs / 'worker-1.log'}, {logs / 'worker-2.log'}):\n"
                        + _tail(logs / "master.log"))
        yield node
    finally:
        left = processes.stop()
    assert not left, f"processes left running: {left}"


def _submit(processes: Processes, master: str, log: Path, *stage: str | Path, options: tuple[str, ...] = (),
            script: str = "pipeline.py") -> int:
    """`spark-submit [OPTIONS] tools/SCRIPT STAGE ...`, the job's entry point as tests/test_pipeline.py
    submits it; the driver logs at kcm's level (error). Tasks wait for both workers' cores (in standalone mode
    the ratio counts `spark.cores.max`), so that both get some."""
    argv = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master, "--conf", "spark.cores.max=2",
            "--conf", "spark.scheduler.minRegisteredResourcesRatio=1", *options, str(ROOT / "tools" / script),
            *map(str, stage)]
    return processes.run(argv, _env(SPARK_CONF_DIR=str(CONF_DIR)), log)


def _shipped_environment(tmp_path: Path) -> tuple[tuple[str, ...], Path]:
    """spark-submit's options that ship a Python environment to the executors as docs/pipeline.md says (an
    archive unpacked as ./environment in each executor's folder, its bin/python the workers' interpreter), and
    the file where that interpreter notes each start. The archive holds only an interpreter that notes its start
    and runs this one: what is tested is Spark's shipping, not the packing of a venv (venv-pack's part)."""
    started = tmp_path / "environment-started"
    python = logging_interpreter(tmp_path / "environment" / "bin" / "python", started)
    archive = tmp_path / "environment.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(python, arcname="bin/python")
    return ("--archives", f"{archive}#environment", "--conf", "spark.pyspark.python=./environment/bin/python",
            "--conf", f"spark.pyspark.driver.python={sys.executable}"), started


def _results(checked: Path) -> dict[str, Any]:
    summary = json.loads((checked / pl.SUMMARY).read_text())
    return {
        "verdicts": pq.read_table(checked / "verdicts.parquet").to_pylist(),
        "violations": pq.read_table(checked / "violations.parquet").to_pylist(),
        # How many solver calls a run took depends on the runs the same Python worker validated before it (the
        # Z3 encoding and its caches are shared per process, spec/z3/validate.py): work done, not a result.
        "validation": pq.read_table(checked / "validation.parquet").drop_columns(["solver_checks"]).to_pylist(),
        "coverage": json.loads((checked / "coverage.json").read_text()),
        "summary": {name: summary[name] for name in SUMMARY_FIELDS},
    }


def _finished_tasks(executor_logs: list[Path]) -> int:
    return sum(log.read_text(errors="replace").count("Finished task") for log in executor_logs)


def test_the_job_on_a_standalone_cluster_gives_what_local_gives(cluster: Cluster, tmp_path: Path) -> None:
    corpus, on_cluster, local = tmp_path / "corpus", tmp_path / "checked-cluster", tmp_path / "checked-local"
    logs = cluster.logs
    # Truncating on the high watermark plants violations of HighWatermarkMonotonic and NoCommittedDataLoss.
    generated = _submit(cluster.processes, cluster.url, logs / "generate.log", "generate", "--runs", "4", "--steps",
                        "300", "--set", "truncation=hw", "--out", corpus)
    assert generated == pl.EXIT_CLEAN, _tail(logs / "generate.log")
    # The check runs on the environment shipped to the executors; generate ran on this interpreter, at the same
    # path on every node (here: the one node).
    shipping, started = _shipped_environment(tmp_path)
    # Every run validated step by step with Z3 too, in the executors.
    checked = _submit(cluster.processes, cluster.url, logs / "check-cluster.log", "check", "--in", corpus,
                      "--out", on_cluster, "--validate-sample", "all", options=shipping)
    assert checked == pl.EXIT_VIOLATIONS, _tail(logs / "check-cluster.log")
    checked_locally = _submit(cluster.processes, "local[2]", logs / "check-local.log", "check", "--in", corpus,
                              "--out", local, "--validate-sample", "all")
    assert checked_locally == pl.EXIT_VIOLATIONS, _tail(logs / "check-local.log")

    results = _results(on_cluster)
    assert results == _results(local)
    assert results["summary"]["runs"] == 4 and results["summary"]["violations"] > 0
    assert results["summary"]["validation"]["runs"] == 4

    # The cluster ran the work: the master lists both applications as finished; the executors of generate ran
    # its tasks (app-*/<executor>/stderr in the workers' folders), and the check's executors on both workers ran
    # some, each in its folder holding the unpacked archive, whose interpreter started Python workers.
    apps = sorted(cluster.state()["completedapps"], key=lambda app: int(app["starttime"]))
    assert [app["state"] for app in apps] == ["FINISHED", "FINISHED"], apps
    generation, check = (app["id"] for app in apps)
    assert _finished_tasks([log for work_dir in cluster.work_dirs for log in work_dir.glob(f"{generation}/*/stderr")])
    for work_dir in cluster.work_dirs:
        assert _finished_tasks(list(work_dir.glob(f"{check}/*/stderr"))), f"no task of the check ran in {work_dir}"
        assert list(work_dir.glob(f"{check}/*/environment/bin/python")), f"no archive unpacked in {work_dir}"
    assert started.exists() and len(started.read_text().split()) >= 2, "too few Python workers started"


def test_the_swarm_on_a_standalone_cluster_gives_what_local_gives(cluster: Cluster, tmp_path: Path) -> None:
    """`spark-submit tools/swarm.py` (the swarm of `kcm check --swarm`): the same seeds give the same ledger on
    the cluster as on local[2], and a violation is found and replayed there as here."""
    logs = cluster.logs
    ledgers = {}
    for name, master in (("cluster", cluster.url), ("local", "local[2]")):
        ledgers[name] = tmp_path / f"{name}-seeds.jsonl"
        code = _submit(cluster.processes, master, logs / f"swarm-{name}.log", "--model", "ci", "--swarm", "4",
                       "--behaviours", "15", "--ledger", ledgers[name], "--progress", "none", script="swarm.py")
        assert code == 0, _tail(logs / f"swarm-{name}.log")
    assert ledger_lines(ledgers["cluster"]) == ledger_lines(ledgers["local"])
    assert len(ledger_lines(ledgers["cluster"])) == 4
    summaries = {}
    for name, master in (("cluster", cluster.url), ("local", "local[2]")):
        log = logs / f"swarm-unclean-{name}.log"
        code = _submit(cluster.processes, master, log, "--model", "unclean", "--swarm", "4", "--ledger",
                       tmp_path / f"unclean-{name}.jsonl", "--out", tmp_path / f"unclean-{name}.jsonl.cex",
                       "--json", "--progress", "none", script="swarm.py")
        assert code == 1, _tail(log)
        text = log.read_text()
        summaries[name] = json.loads(text[text.index("{"):text.rindex("}") + 1])
    for summary in summaries.values():
        assert summary["invariant"] == "NoCommittedDataLoss"
        assert summary["replay"].startswith("the implementation follows all")
    # Each seed that found the violation on both found the same counterexample.
    found = {name: {line["seed"]: line for line in ledger_lines(tmp_path / f"unclean-{name}.jsonl")
                    if line["fate"] == "violated"} for name in summaries}
    for seed in found["cluster"].keys() & found["local"].keys():
        assert found["cluster"][seed] == found["local"][seed]
    apps = cluster.state()["completedapps"]
    assert len(apps) == 2 and {app["state"] for app in apps} == {"FINISHED"}, apps
    assert _finished_tasks([log for work_dir in cluster.work_dirs for log in work_dir.glob("app-*/*/stderr")])
