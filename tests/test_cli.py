"""The kcm command line: simulate, check, verify; bad input gets one line and exit code 2; an interrupt one line
and exit 130, with nothing kcm started left running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest
from test_check import FullDisk, no_tlc
from test_trace_format import MALFORMED, Edit, valid_lines

from kcm.conformance import review
from kcm.spec.z3 import bmc
from kcm.tools import prove
from kcm.tools.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_then_check_trace_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    code, out, _ = run(capsys, "sim", "--seed", "5", "--steps", "800", "--calm-every", "400", "--out", str(trace))
    assert code == 0 and "wrote 1396 events" in out
    code, out, _ = run(capsys, "check-trace", str(trace))
    assert code == 0
    assert "all invariants hold" in out
    code, out, _ = run(capsys, "check-trace", str(trace), "--json")
    report = json.loads(out)
    assert code == 0 and report["events"] == 1396
    assert set(report["verdicts"].values()) == {"holds"}


def test_check_trace_reports_the_first_violation_with_an_excerpt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "hw.jsonl"
    for seed in range(20):
        run(capsys, "sim", "--seed", str(seed), "--steps", "3000", "--set", "truncation=hw", "--out", str(trace))
        code, out, _ = run(capsys, "check-trace", str(trace))
        if code == 1:
            break
    assert code == 1
    headline, *excerpt = out.splitlines()
    assert "NoCommittedDataLoss violated at step" in headline
    assert any(line.startswith("#") for line in excerpt)
    code, out, _ = run(capsys, "check-trace", str(trace), "--json")
    assert code == 1
    assert json.loads(out)["verdicts"]["NoCommittedDataLoss"] == "violated"


@pytest.mark.parametrize(
    "setting",
    ["nosuch=1", "truncation=kip999", "unclean_election=maybe", "min_isr=zero", "min_isr=0", "truncation",
     "broker_epoch=2"],
)
def test_bad_knob_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str) -> None:
    code, _, err = run(capsys, "sim", "--set", setting, "--out", str(tmp_path / "x.jsonl"))
    assert code == 2
    assert err.startswith("kcm: error: ") and err.count("\n") == 1
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["sim", "--steps", "many"],
        ["nosuchcommand"],
        ["sim", "--brokers", "0"],
        ["sim", "--steps", "-1"],
        ["sim", "--partitions", "0"],
        ["sim", "--set", "min_isr=99"],
        ["sim", "--set", "unclean_election=yes"],
    ],
)
def test_bad_arguments_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    out_file = tmp_path / "x.jsonl"
    code, _, err = run(capsys, *argv, "--out", str(out_file))
    assert code == 2 and err.startswith("kcm: error: ") and err.count("\n") == 1
    assert not out_file.exists()


@pytest.mark.parametrize(
    ("edit", "line", "field"), [case[1:4] for case in MALFORMED], ids=[case[0] for case in MALFORMED]
)
def test_malformed_trace_is_one_line_naming_file_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, line: int, field: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(edit(valid_lines()))
    code, out, err = run(capsys, "check-trace", str(path))
    assert code == 2 and out == ""
    # Line 0 is the whole file and "-" no field in particular: neither is printed.
    where = (f"{path}:{line}" if line else f"{path}") + (": " if field == "-" else f": {field}: ")
    assert err.startswith(f"kcm: error: {where}") and ": -:" not in err
    assert err.count("\n") == 1


def test_missing_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "check-trace", str(tmp_path / "absent.jsonl"))
    assert code == 2 and "absent.jsonl: " in err and ":0:" not in err


def test_verify_prints_the_summary_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "verify", "--only", "simulation", "--seeds", "3", "--steps", "300")
    assert code == 0
    assert "OneLeaderPerEpoch" in out and "ValidReplicaTransitions" in out
    assert "seeds: 3" in out
    code, out, _ = run(capsys, "verify", "--only", "simulation", "--seeds", "2", "--steps", "200", "--json")
    summary = json.loads(out)
    assert summary["seeds"] == 2 and summary["first_violation"] is None


def test_verify_exits_1_on_a_violation(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "verify", "--only", "simulation", "--seeds", "10", "--steps", "3000",
                       "--set", "unclean_election=true")
    assert code == 1
    assert "violated" in out and "reproduce: kcm sim" in out


def test_kcm_out_naming_a_file_is_one_line_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "afile").write_text("not a folder\n")
    monkeypatch.setenv("KCM_OUT", str(tmp_path / "afile"))
    for argv in (["check", "--model", "kafka1211"], ["review", "--row", "truncation=hw"], ["hunt"]):
        assert main(argv) == 2
        assert capsys.readouterr().err == f"kcm: error: KCM_OUT={tmp_path / 'afile'}: not a folder (kcm writes its " \
                                          "outputs under it)\n"


# Ctrl-C while kcm builds its parser (the commands' imports take a second or more).
_INTERRUPTED_EARLY = """
import sys
from kcm.tools import cli

def interrupted():
    raise KeyboardInterrupt

cli._build_parser = interrupted
sys.exit(cli.main(["check"]))
"""


def test_an_interrupt_before_the_command_runs_is_one_line_and_exit_130() -> None:
    run = subprocess.run([sys.executable, "-c", _INTERRUPTED_EARLY], capture_output=True, text=True, timeout=60)
    assert (run.returncode, run.stderr, run.stdout) == (130, "kcm: interrupted\n", "")


BMC_ZOMBIE = ("prove", "--bmc", "4", "--brokers", "2", "--set", "controller_epoch_fencing=false", "--progress", "none")


@pytest.mark.parametrize("folder", ["", "new/"])
def test_prove_bmc_writes_into_a_folder_given_as_out(folder: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # An existing folder, or one named with a trailing slash: the file goes inside it under its default name.
    code, out, _ = run(capsys, *BMC_ZOMBIE, "--out", f"{tmp_path}/{folder}")
    trace = tmp_path / folder / "bmc-counterexample.jsonl"
    assert code == 1 and f"shortest counterexample written to {trace}" in out and trace.is_file()


def test_prove_bmc_with_an_out_it_cannot_write_stops_before_z3(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_bmc(*args: Any, **kwargs: Any) -> NoReturn:
        raise AssertionError("the search started though its output cannot be written")

    monkeypatch.setattr(bmc, "run_bmc", no_bmc)
    code, out, err = run(capsys, *BMC_ZOMBIE, "--out", "/proc/kcm-test/x.jsonl")
    assert (code, out) == (2, "")
    assert err == "kcm: error: /proc/kcm-test/x.jsonl: cannot write: No such file or directory\n"


def test_prove_bmc_shows_a_counterexample_it_cannot_write_and_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prove, "TraceWriter", FullDisk)
    out_file = tmp_path / "c.jsonl"
    code, out, err = run(capsys, *BMC_ZOMBIE, "--out", str(out_file))
    assert code == 1 and err == "" and not list(tmp_path.iterdir())
    assert (f"shortest counterexample not written: {out_file}: cannot write: No space left on device" in out
            and "  4. " in out)
    code, out, err = run(capsys, *BMC_ZOMBIE, "--out", str(out_file), "--json")
    [row] = json.loads(out)
    assert code == 1 and len(row["counterexample"]) == 5 and row["trace"] is None
    assert err.startswith("kcm: the counterexample (in the JSON above) was not written: ") and err.count("\n") == 1


def test_review_with_an_out_that_is_a_file_stops_before_tlc(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(review, "check_model", no_tlc)
    (tmp_path / "afile").write_text("not a folder\n")
    code, out, err = run(capsys, "review", "--row", "truncation=hw", "--out", str(tmp_path / "afile"))
    assert (code, out) == (2, "")
    assert err == f"kcm: error: {tmp_path / 'afile' / 'review.json'}: cannot write: {tmp_path / 'afile'} is not a " \
                  "folder\n"


# -- an interrupt ends kcm in one line, and every process it started with it ---------------------------------

# Generous: a process gone at all is gone at once (ended, not waited for), and TLC left behind keeps searching
# for tens of seconds.
GONE_WITHIN = 10.0


def _processes() -> dict[int, tuple[int, bytes]]:
    """Every process: its parent and its command line, read off /proc."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":  # a zombie has ended: only its parent's wait is missing
            found[int(entry.name)] = (int(fields[1]), cmdline)
    return found


def descendants(pid: int) -> dict[int, bytes]:
    processes = _processes()
    found: dict[int, bytes] = {}
    parents = {pid}
    while parents:
        children = {child for child, (parent, _) in processes.items() if parent in parents and child not in found}
        found.update({child: processes[child][1] for child in children})
        parents = children
    return found


@dataclass
class Interrupted:
    code: int
    stderr: str
    tlc_groups: list[tuple[int, int]]  # (java, its process group) while it ran
    left: dict[int, bytes]  # what kcm started that was still running GONE_WITHIN seconds after it exited


def interrupt(argv: list[str], signum: int, settle: float = 0.0) -> Interrupted:
    """Runs kcm, waits for TLC's java among its descendants (and `settle` seconds more), sends `signum` to kcm
    alone (as `kill` does), and waits for kcm's end and then for everything it started to be gone."""
    kcm = subprocess.Popen([sys.executable, "-m", "kcm.tools.cli", *argv], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not any(b"tlc2.TLC" in line for line in descendants(kcm.pid).values()):
            assert kcm.poll() is None and time.monotonic() < deadline, "TLC never started"
            time.sleep(0.05)
        time.sleep(settle)
        started = descendants(kcm.pid)
        groups = [(pid, os.getpgid(pid)) for pid, line in started.items() if b"tlc2.TLC" in line]
        kcm.send_signal(signum)
        _, stderr = kcm.communicate(timeout=120)
    finally:
        kcm.kill()
    deadline = time.monotonic() + GONE_WITHIN
    left = started
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        running = _processes()
        left = {pid: line for pid, line in left.items() if pid in running and running[pid][1] == line}
    for pid in left:  # the test fails; nothing of it is left to the next one
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return Interrupted(kcm.returncode, stderr, groups, left)


@pytest.mark.tlc
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_check_ends_tlc_and_says_one_line(signum: int) -> None:
    # The liveness model: TLC prints nothing for tens of seconds once it checks the properties, the phase in
    # which a java cut off from kcm used to search on.
    ended = interrupt(["check", "--liveness", "--progress", "none"], signum, settle=4.0)
    assert (ended.code, ended.stderr) == (130, "kcm: interrupted\n")
    assert not ended.left
    # Its own group: a terminal's Ctrl-C reaches kcm alone, and kcm ends TLC.
    assert ended.tlc_groups and all(java == group != os.getpgid(0) for java, group in ended.tlc_groups)


def test_a_reader_that_leaves_early_never_turns_a_violation_into_exit_0(tmp_path: Path) -> None:
    trace = tmp_path / "unclean.jsonl"
    assert main(["sim", "--seed", "2", "--steps", "2000", "--set", "unclean_election=true", "--out", str(trace)]) == 0
    # `kcm check-trace --json | head -c 1`: the reader closes the pipe after one byte, long before the JSON ends.
    kcm = subprocess.Popen([sys.executable, "-m", "kcm.tools.cli", "check-trace", str(trace), "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert kcm.stdout is not None and kcm.stderr is not None
    assert kcm.stdout.read(1) == b"{"
    kcm.stdout.close()
    stderr = kcm.stderr.read().decode()
    assert kcm.wait(timeout=120) == 141
    assert "Traceback" not in stderr
