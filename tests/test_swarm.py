"""The swarm on Spark (`kcm check --swarm`, `kcm hunt --spark`): seeds as Spark tasks, the first counterexample
stops the job and leaves no TLC behind, the seed ledger records every seed and a resumed swarm runs only the
seeds it has not finished, each seed's outcome the same at every run."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_cli import interrupt

from kcm.conformance.explore.hunt import SIMULATE, STEERED, Engine, Hunt
from kcm.conformance.explore.swarm import Ledger, LedgerError, SeedRun, plan, read_ledger
from kcm.spec.atomic_output import held_file
from kcm.spec.tlc.modelcheck import model_knobs
from kcm.tools.cli import main
from kcm.tools.json_schemas import validate


def unclean() -> Hunt:
    return Hunt("unclean", model_knobs("unclean"))


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    """The seeds of a ledger as a rerun must give them again: without their seconds, and a violated seed without
    its states (TLC's count when it stopped at the violation, which varies)."""
    _, runs = read_ledger(path)
    lines = []
    for run in runs:
        line = run.to_json()
        line.pop("seconds")
        if run.fate == "violated":
            line.pop("states")
        lines.append(line)
    return sorted(lines, key=lambda line: (line["engine"], line["seed"]))


def tlc_processes() -> list[str]:
    listed = subprocess.run(["pgrep", "-af", "tlc2.TLC"], capture_output=True, text=True, check=False).stdout
    return [line for line in listed.splitlines() if "kcm-swarm-" in line]


def test_a_plan_takes_the_kinds_in_turn_each_simulation_with_the_next_depth() -> None:
    assert plan(unclean(), 4, first_seed=5, depths=(20, 30), behaviours=7) == [
        Engine(SIMULATE, 5, 20, 7), Engine(SIMULATE, 6, 30, 7), Engine(SIMULATE, 7, 20, 7), Engine(SIMULATE, 8, 30, 7)]
    # KAFKA-1211 has a steered search of its own: the two kinds alternate.
    kinds = [e.kind for e in plan(Hunt("kafka1211", model_knobs("kafka1211")), 4, kinds=(SIMULATE, STEERED))]
    assert kinds == [SIMULATE, STEERED, SIMULATE, STEERED]
    # The safe design has none: the steered kind is left out.
    assert {e.kind for e in plan(Hunt("ci", model_knobs("ci")), 3, kinds=(SIMULATE, STEERED))} == {SIMULATE}
    with pytest.raises(ValueError, match="no engine"):
        plan(Hunt("ci", model_knobs("ci")), 3, kinds=(STEERED,))


def test_a_ledger_that_does_not_read_is_named_by_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "seeds.jsonl"
    ledger = Ledger.start(path, unclean(), resume=False)
    ledger.record(SeedRun(Engine(SIMULATE, 1, 20, 10), "nothing found", 1.0, 42))
    assert [run.states for run in read_ledger(path)[1]] == [42]
    with path.open("a") as out:
        out.write('{"engine": "tlc-sim", "seed": 2}\n')
    with pytest.raises(LedgerError, match=r"seeds.jsonl: line 3: depth: missing"):
        read_ledger(path)
    path.write_text("not json\n")
    with pytest.raises(LedgerError, match=r"line 1: not JSON"):
        read_ledger(path)
    Ledger.start(path, Hunt("ci", model_knobs("ci")), resume=False)
    with pytest.raises(LedgerError, match=r"line 1: model: the ledger searched 'ci', not 'unclean'"):
        Ledger.start(path, unclean(), resume=True)


def test_the_first_counterexample_stops_the_swarm_and_leaves_no_tlc(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "seeds.jsonl"
    out = tmp_path / "cex.jsonl"
    code = main(["check", "--model", "unclean", "--swarm", "6", "--master", "local[2]", "--ledger", str(ledger),
                 "--out", str(out), "--json", "--progress", "none"])
    summary = json.loads(capsys.readouterr().out)
    validate("check", summary)
    assert code == 1
    assert summary["result"] == "violated" and summary["invariant"] == "NoCommittedDataLoss"
    assert summary["replay"].startswith("the implementation follows all")
    assert out.is_file() and summary["trace"] == str(out)
    runs = read_ledger(ledger)[1]
    assert any(run.fate == "violated" for run in runs)
    # Stopped at the first: not every seed of the six ran to its end.
    assert sum(run.finished for run in runs) < 6
    assert not tlc_processes()


def test_a_resumed_swarm_runs_only_the_seeds_its_ledger_has_not_finished_and_repeats_each(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["check", "--model", "ci", "--behaviours", "15", "--master", "local[2]", "--json", "--progress", "none"]
    partial, whole = tmp_path / "partial.jsonl", tmp_path / "whole.jsonl"
    assert main([*common, "--swarm", "2", "--ledger", str(partial)]) == 0
    capsys.readouterr()
    assert main([*common, "--swarm", "4", "--ledger", str(partial), "--resume"]) == 0
    resumed = json.loads(capsys.readouterr().out)
    validate("check", resumed)
    assert resumed["seeds_skipped"] == 2 and resumed["seeds_run"] == 2 and resumed["result"] == "unknown"
    assert main([*common, "--swarm", "4", "--ledger", str(whole)]) == 0
    capsys.readouterr()
    assert ledger_lines(partial) == ledger_lines(whole)
    assert {line["fate"] for line in ledger_lines(whole)} == {"nothing found"}
    # Another search's ledger is refused, in one line.
    assert main([*common, "--swarm", "4", "--ledger", str(whole), "--resume", "--set", "unclean_election=true"]) == 2
    assert "the ledger searched" in capsys.readouterr().err


def test_hunt_on_spark_finds_shortens_and_confirms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["hunt", "--set", "unclean_election=true", "--spark", "--master", "local[2]", "--seeds", "4",
                 "--out", str(tmp_path), "--json", "--progress", "none"])
    summary = json.loads(capsys.readouterr().out)
    validate("hunt", summary)
    assert code == 1 and summary["invariant"] == "NoCommittedDataLoss"
    assert summary["winner"].split(" seed ")[0] in (SIMULATE, STEERED)
    assert summary["tlc_validation"].startswith(("the specification explains", "a behaviour of the TLA+ model"))
    assert summary["shortest_proven"] and summary["shortest_steps"] <= summary["first_steps"]
    assert (tmp_path / "unclean-seeds.jsonl").is_file()
    assert not tlc_processes()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_swarm_ends_spark_and_every_tlc_and_keeps_its_ledger(signum: int, tmp_path: Path) -> None:
    ledger = tmp_path / "seeds.jsonl"
    # The safe design, seeds of 100,000 behaviours: minutes each.
    ended = interrupt(["check", "--model", "ci", "--swarm", "4", "--behaviours", "100000", "--master", "local[2]",
                       "--ledger", str(ledger), "--progress", "none"], signum, settle=2.0)
    assert (ended.code, ended.stderr) == (130, "kcm: interrupted\n")
    assert not ended.left and ended.tlc_groups
    assert not tlc_processes()
    assert read_ledger(ledger)[0]["model"] == "ci"


def test_a_ledger_another_kcm_swarm_writes_is_refused_before_spark_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "seeds.jsonl"
    with held_file(ledger):
        assert main(["check", "--model", "ci", "--swarm", "2", "--ledger", str(ledger), "--progress", "none"]) == 2
    assert "another kcm process is writing it" in capsys.readouterr().err
    assert not ledger.exists()
