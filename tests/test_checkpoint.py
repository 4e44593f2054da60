"""Resumable exhaustive runs (`kcm check --checkpoint DIR [--resume]`): a folder that does not fit what is asked
is refused in one line before TLC starts. That a stopped and resumed run ends as an uninterrupted one is measured
on the ci model beside its exhaustive run (tests/test_spec.py, marker `tlc`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcm.spec.atomic_output import claimed_in_place
from kcm.spec.tlc.checkpoint import MANIFEST, Checkpoint, CheckpointError
from kcm.spec.tlc.modelcheck import model_knobs
from kcm.tools.cli import main
from kcm.tools.json_schemas import validate

IDENTITY = {"model": "kip320", "knobs": model_knobs("kip320").to_dict(), "invariants": None, "workers": 1,
            "design": None, "max_depth": None, "properties": None}


def test_a_folder_is_refused_unless_it_fits(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    with pytest.raises(CheckpointError, match="no checkpointed run to resume"):
        Checkpoint(folder, resume=True).prepare(IDENTITY)
    assert Checkpoint(folder).prepare(IDENTITY) is None
    assert json.loads((folder / MANIFEST).read_text())["fingerprint"] == 0
    with pytest.raises(CheckpointError, match="holds a checkpointed run already"):
        Checkpoint(folder).prepare(IDENTITY)
    with pytest.raises(CheckpointError, match="stopped before its first checkpoint"):
        Checkpoint(folder, resume=True).prepare(IDENTITY)
    with pytest.raises(CheckpointError, match=r"workers: the run kept there has 1, not 2"):
        Checkpoint(folder, resume=True).prepare({**IDENTITY, "workers": 2})
    Checkpoint(folder).finish("holds, 3 distinct states, depth 2")
    with pytest.raises(CheckpointError, match="has finished: holds, 3 distinct states"):
        Checkpoint(folder, resume=True).prepare(IDENTITY)


def test_the_command_line_says_a_bad_checkpoint_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--model", "kip320", "--checkpoint", str(tmp_path / "none"), "--resume"]) == 2
    assert "no checkpointed run to resume" in capsys.readouterr().err
    assert main(["check", "--model", "kip320", "--resume"]) == 2
    assert "--resume continues a run kept by --checkpoint" in capsys.readouterr().err


def test_a_run_its_budget_stops_is_unknown_with_how_far_it_got(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "run"
    assert main(["check", "--model", "ci", "--budget", "12", "--checkpoint", str(folder), "--json",
                 "--progress", "none"]) == 0
    stopped = json.loads(capsys.readouterr().out)
    validate("check", stopped)
    assert stopped["result"] == "unknown" and stopped["complete"] is False
    assert stopped["checkpoint"] == str(folder) and stopped["distinct_states"] > 0
    depths = [level["depth"] for level in stopped["growth"]]
    assert depths == sorted(set(depths)) and depths[-1] <= stopped["depth"]
    assert main(["check", "--model", "ci", "--budget", "6", "--progress", "none"]) == 0
    assert "unknown: stopped by its budget after" in capsys.readouterr().out


def test_a_folder_another_kcm_run_holds_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    with claimed_in_place(folder), pytest.raises(CheckpointError, match="another kcm process is writing it"), \
            Checkpoint(folder).held(IDENTITY):
        pass
    with Checkpoint(folder).held(IDENTITY) as recover:
        assert recover is None and (folder / MANIFEST).is_file()
