"""`kcm check` on a reproduction model (TLC): the counterexample shows what each step changed and ends with the
invariant checker's explanation, and is written under kcm-out/, not into the working directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kcm.tools.cli import main


@pytest.mark.tlc
def test_a_tlc_counterexample_ends_with_the_explanation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KCM_OUT", raising=False)
    assert main(["check", "--model", "kafka1211", "--heap", "1024"]) == 1
    lines = capsys.readouterr().out.splitlines()
    written = Path("kcm-out") / "check" / "kafka1211-counterexample.jsonl"
    assert lines[-1] == f"counterexample written to {written} (trace format v2)"
    assert (tmp_path / written).exists() and [p.name for p in tmp_path.iterdir()] == ["kcm-out"]
    assert re.fullmatch(r"why \(NoCommittedDataLoss, step \d+\): p0: committed record \[0, 1\] \(leader epoch 0\) "
                        r"at offset 0 is missing from the log of broker \d; committed at step \d+ when the HW of "
                        r"leader 1 passed offset 0; now held by broker\(s\) .*", lines[-2])
    steps = [i for i, line in enumerate(lines) if re.match(r"\s*\d+\. ", line)]
    # every step says what it changed, or that it changed nothing
    assert all(after - before > 1 for before, after in zip(steps, [*steps[1:], len(lines) - 2], strict=True))


@pytest.mark.tlc
def test_the_zombie_controllers_write_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TLC names no actor; the controller of a step that writes the store is inferred from the controller epoch
    it writes in, so StaleControllerFenced names the deposed controller."""
    assert main(["check", "--model", "zombie", "--heap", "1024", "--out", str(tmp_path / "z.jsonl")]) == 1
    why = capsys.readouterr().out.splitlines()[-2]
    assert re.fullmatch(r"why \(StaleControllerFenced, step \d+\): deposed controller 1 \(acting in controller "
                        r"epoch 1\) wrote .* of p0 in BrokerChange while controller epoch 2 of controller 2 is "
                        r"current: its store write was applied", why)
