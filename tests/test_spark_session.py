"""How kcm starts Spark (conformance/pipeline/session.py): what the driver's JVM prints reaches the user, but for
the JDK's incubator-module warning that every Spark 4 start causes; under spark-submit the Python workers run the
interpreter the submitter chose."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pyspark
import pytest

from kcm.conformance.pipeline.session import INCUBATOR_WARNING, forward_stderr

ROOT = Path(__file__).resolve().parents[1]


def generate_one_run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`kcm pipeline generate` of one short run on `local[1]`, in a process of its own with `env`: what a user
    sees of a stage, its JVM's start included."""
    done = subprocess.run(
        [sys.executable, "-m", "kcm.tools.cli", "pipeline", "generate", "--runs", "1", "--steps", "20",
         "--master", "local[1]", "--out", str(tmp_path / "corpus")],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "generated 1 runs" in done.stdout
    return done


def test_a_stage_forwards_the_jvm_stderr_without_the_incubator_warning(tmp_path: Path) -> None:
    # A configuration folder of the user's own without log4j2.properties: Spark then says on stderr which log
    # configuration it took, a line that must come through the filter.
    conf = tmp_path / "conf"
    conf.mkdir()
    done = generate_one_run(tmp_path, {**os.environ, "SPARK_CONF_DIR": str(conf)})
    assert "Using Spark's default log4j profile" in done.stderr
    assert "incubator" not in done.stderr, done.stderr


def test_the_filter_drops_only_the_warning_line(tmp_path: Path) -> None:
    lines = [b"before\n", INCUBATOR_WARNING + b"\n", b"WARNING: something else\n", b"a last line, unended"]
    read, write = os.pipe()
    out = tmp_path / "stderr"
    with out.open("wb") as target, os.fdopen(read, "rb") as pipe:
        forwarder = threading.Thread(target=forward_stderr, args=(pipe, target.fileno()))
        forwarder.start()
        with os.fdopen(write, "wb") as jvm:
            jvm.writelines(lines)
        forwarder.join(timeout=10)
    assert out.read_bytes() == b"before\nWARNING: something else\na last line, unended"


def logging_interpreter(script: Path, log: Path) -> Path:
    """An interpreter that notes each start (its pid) in `log`, then runs this one."""
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\necho "$$" >> {shlex.quote(str(log))}\nexec {shlex.quote(sys.executable)} "$@"\n')
    script.chmod(0o755)
    return script


def test_under_spark_submit_the_workers_run_the_interpreter_the_submitter_chose(tmp_path: Path) -> None:
    started = tmp_path / "started"
    python = logging_interpreter(tmp_path / "bin" / "python", started)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--master", "local[1]",
         "--conf", f"spark.pyspark.python={python}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
         str(ROOT / "tools" / "pipeline.py"), "generate", "--runs", "1", "--steps", "20", "--out", str(tmp_path / "c")],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert started.exists() and started.read_text().split(), "no Python worker started through spark.pyspark.python"


def _kcm(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kcm.tools.cli", *arguments], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_no_java_is_one_line_before_spark_starts(tmp_path: Path) -> None:
    done = _kcm("pipeline", "generate", "--runs", "1", "--steps", "5", "--out", str(tmp_path / "c"),
                env={**os.environ, "JAVA_HOME": "/nonexistent"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "kcm: error: JAVA_HOME=/nonexistent: no bin/java there (Spark needs Java 17 or newer)\n"


def test_a_master_spark_cannot_use_is_one_line_naming_it(tmp_path: Path) -> None:
    done = _kcm("pipeline", "generate", "--runs", "1", "--steps", "5", "--master", "bogus://x", "--out",
                str(tmp_path / "c"))
    assert (done.returncode, done.stdout) == (2, "")
    # Spark's own words (SparkSubmit.prepareSubmitEnvironment), without its stack trace.
    assert done.stderr == ("kcm: error: Spark did not start: Master must either be yarn or start with spark, k8s, "
                           "or local\n")


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: its parent and command line, off /proc."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = (int(fields[1]), command)
    return found


def _descendants(pid: int) -> dict[int, str]:
    processes = _processes()
    family, grown = {pid}, True
    while grown:
        more = {p for p, (parent, _) in processes.items() if parent in family} - family
        family |= more
        grown = bool(more)
    return {p: processes[p][1] for p in family - {pid} if p in processes}


# When the SIGINT comes: while the JVM starts (it was left running, about 250 MB, minutes on), or while the job
# runs, its Python workers busy (the JVM printed its tasks' errors as it went).
MOMENTS = {"starting": "java", "running": "pyspark.daemon"}


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_ctrl_c_during_check_ends_spark_and_its_python_workers(moment: str, tmp_path: Path) -> None:
    """Issue 38, item 5: one line, exit 130, and nothing of the run left."""
    import signal
    import time

    from kcm.impl.sim.simulator import SimConfig, Simulator
    from kcm.spec.trace.format import Event
    from kcm.spec.trace.parquet import write_parquet
    from kcm.spec.vocabulary import Knobs

    events: list[Event] = []
    simulator = Simulator(1, Knobs(), SimConfig(), events.append)
    simulator.bootstrap()
    simulator.run(3000)
    for event in events:
        event["run"] = "long"
    write_parquet(events, tmp_path / "corpus" / "events")
    # Z3 validation of every step keeps the job busy well past Spark's start.
    check = subprocess.Popen(
        [sys.executable, "-m", "kcm.tools.cli", "pipeline", "check", "--in", str(tmp_path / "corpus"), "--out",
         str(tmp_path / "checked"), "--master", "local[1]", "--validate-sample", "all", "--progress", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        family: dict[int, str] = {}
        while not any(MOMENTS[moment] in command and not command.startswith("bash") for command in family.values()):
            assert check.poll() is None and time.monotonic() < deadline, f"no {MOMENTS[moment]} started"
            time.sleep(0.1)
            family = _descendants(check.pid)
        time.sleep(1)
        family = _descendants(check.pid)
        check.send_signal(signal.SIGINT)
        _, err = check.communicate(timeout=60)
    finally:
        if check.poll() is None:  # failed before: SIGTERM, which kcm answers by ending its children too
            check.terminate()
            check.wait(timeout=30)
    assert (check.returncode, err) == (130, "kcm: interrupted\n")
    left = {pid: command for pid, command in family.items() if pid in _processes()}
    assert not left, left
    assert not (tmp_path / "checked").exists()  # its output, half made, is gone too


def test_a_session_after_kcm_ended_its_jvm_starts_a_new_one() -> None:
    """A caller of the command line in its own process: an interrupt ends the JVM kcm owns (child_processes),
    and the next session of the process must not talk to the dead one (every pipeline test errored so)."""
    from kcm.conformance.pipeline.session import spark_session
    from kcm.spec import child_processes

    first = spark_session("local[1]", shuffle_partitions=1)
    assert first.range(3).count() == 3
    child_processes.end_all(grace=5)
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    assert gateway is not None
    gateway.proc.wait(timeout=30)  # its last threads gone (its main thread ended first)
    second = spark_session("local[1]", shuffle_partitions=1)
    try:
        assert second.range(4).count() == 4
    finally:
        second.stop()
