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
