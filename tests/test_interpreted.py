"""Compiled and interpreted installs: the commands that patch or copy implementation objects run on the
sources whatever the install (kcm.tools.interpreted)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from kcm.tools import cli, interpreted


def test_a_kcm_module_is_found_as_source_even_beside_its_compiled_twin(tmp_path: Path) -> None:
    (tmp_path / "cluster.py").write_text("", encoding="utf-8")
    (tmp_path / "cluster.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    spec = interpreted.SourceFirst().find_spec("kcm.impl.sim.cluster", [str(tmp_path)])
    assert spec is not None and spec.origin == str(tmp_path / "cluster.py")


def test_modules_outside_kcm_and_missing_sources_are_left_to_the_other_finders(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("", encoding="utf-8")
    finder = interpreted.SourceFirst()
    assert finder.find_spec("json", [str(tmp_path)]) is None
    assert finder.find_spec("kcm.impl.nothing_here", [str(tmp_path)]) is None
    assert finder.find_spec("kcm", None) is None


def test_the_runner_on_sources_runs_the_command_line_unchanged(tmp_path: Path) -> None:
    direct, rerun = tmp_path / "direct.jsonl", tmp_path / "rerun.jsonl"
    assert cli.main(["sim", "--seed", "4", "--steps", "200", "--out", str(direct)]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "kcm.tools.interpreted", "kcm.tools.cli", "sim", "--seed", "4", "--steps", "200",
         "--out", str(rerun)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert rerun.read_bytes() == direct.read_bytes()


def test_the_runner_without_a_module_is_a_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "kcm.tools.interpreted"], capture_output=True, text=True,
                          check=False)
    assert done.returncode != 0 and "usage" in done.stderr


@pytest.mark.parametrize(("argv", "rerun"), [
    (["replay", "trace.jsonl"], True),
    (["mutate", "--list"], True),
    (["check-trace", "missing.jsonl"], False),
])
@pytest.mark.parametrize("own_process", [True, False], ids=["kcm", "in-a-program"])
def test_on_a_compiled_install_only_replay_and_mutate_move_to_the_sources(
        monkeypatch: pytest.MonkeyPatch, argv: list[str], rerun: bool, own_process: bool) -> None:
    """`kcm` itself becomes the interpreted command (exec); a program (a test) that calls main(argv) keeps its
    process and gets the command's exit code from a child."""
    calls: list[tuple[str, str, list[str]]] = []

    def fake(how: str) -> Callable[[str, Sequence[str]], int]:
        def rerun_as(module: str, args: Sequence[str]) -> int:
            calls.append((how, module, list(args)))
            return 7
        return rerun_as

    monkeypatch.setattr(interpreted, "compiled", lambda: True)
    monkeypatch.setattr(interpreted, "rerun_interpreted", fake("exec"))
    monkeypatch.setattr(interpreted, "run_interpreted", fake("child"))
    if own_process:
        monkeypatch.setattr(sys, "argv", ["kcm", *argv])
    status = cli.main(None if own_process else argv)
    how = "exec" if own_process else "child"
    assert calls == ([(how, "kcm.tools.cli", argv)] if rerun else [])
    assert (status == 7) == rerun


def test_a_program_s_rerun_is_a_child_whose_output_and_code_it_gets(capsys: pytest.CaptureFixture[str]) -> None:
    status = interpreted.run_interpreted("kcm.tools.cli", ["check-trace", "missing.jsonl"])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "") and err.startswith("kcm: error: missing.jsonl") and err.count("\n") == 1
