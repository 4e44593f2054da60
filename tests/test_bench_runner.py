"""The checkout's benchmarks run against whichever kcm the interpreter has installed (tools/bench/run.py):
the benchmarks are not installed with kcm, so a compiled install is measured through the runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[1] / "tools" / "bench" / "run.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUNNER), *args], capture_output=True, text=True, check=False,
                          timeout=120)


def test_the_runner_reaches_every_benchmark_and_one_by_name() -> None:
    every = _run("--help")
    assert every.returncode == 0, every.stderr
    assert "Run every kcm benchmark" in every.stdout
    one = _run("checker", "--help")
    assert one.returncode == 0, one.stderr
    assert "python -m kcm.tools.bench.checker" in one.stdout


def test_the_runner_hides_its_folder_from_the_benchmarks_imports() -> None:
    """tools/bench/z3.py must not stand in for the z3 package when the runner is started as a file."""
    probe = _run("z3", "--help")
    assert probe.returncode == 0, probe.stderr
