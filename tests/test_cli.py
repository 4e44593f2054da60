"""The kcm command line: simulate, check, verify; bad input gets one line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_trace_format import MALFORMED, Edit, valid_lines

from kcm.tools.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_then_check_trace_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    code, out, _ = run(capsys, "sim", "--seed", "5", "--steps", "800", "--calm-every", "400", "--out", str(trace))
    assert code == 0 and "wrote 1862 events" in out
    code, out, _ = run(capsys, "check-trace", str(trace))
    assert code == 0
    assert "all invariants hold" in out
    code, out, _ = run(capsys, "check-trace", str(trace), "--json")
    report = json.loads(out)
    assert code == 0 and report["events"] == 1862
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
