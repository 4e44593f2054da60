"""kcm replay: the implementation driven by a trace, compared state by state."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check import replay as replay_module
from kcm.conformance.check.replay import Replayer, _Choice, replay
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.tlc.modelcheck import CheckOutcome
from kcm.spec.trace.format import Event, TraceWriter, load_trace
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main


def simulate(seed: int, steps: int, knobs: Knobs | None = None) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, knobs or Knobs(), SimConfig(), events.append)
    simulator.bootstrap()
    simulator.run(steps)
    return events


def write(events: list[Event], path: Path) -> Path:
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    return path


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_a_simulator_trace_replays_without_divergence(seed: int) -> None:
    report = replay(simulate(seed, 400))
    assert report.divergence is None
    assert report.verdict == "conforms"
    assert report.steps == 401


def test_the_budget_of_returns_is_per_divergence(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38 item 3: the budget of 1,000 returns to choice points was the whole trace's. The 950,000-step
    trace of seed 3 spent it on divergences it resolved, and reported the one at seq 922,149 with none left.
    Here the budget is one return: this trace resolves each of its divergences in one, more than one in all."""
    monkeypatch.setattr(replay_module, "MAX_BACKTRACKS", 1)
    returns = 0
    backjump = Replayer._backjump

    def counted(self: Replayer, choices: list[_Choice], action: str) -> _Choice:
        nonlocal returns
        returns += 1
        return backjump(self, choices, action)

    monkeypatch.setattr(Replayer, "_backjump", counted)
    report = replay(simulate(5, 2000))
    assert report.divergence is None and report.verdict == "conforms"
    assert returns > 1


@pytest.mark.long
def test_a_long_simulator_trace_replays_every_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38 item 3 end to end, as `kcm sim` writes it (calm phases on). KCM_LONG_REPLAY_STEPS=950000 is
    the issue's repro: about 11 minutes of a core, 200 MB of trace."""
    steps = os.environ.get("KCM_LONG_REPLAY_STEPS", "100000")
    trace = tmp_path / "b.jsonl"
    assert main(["sim", "--seed", "3", "--steps", steps, "--out", str(trace)]) == 0
    events = int(capsys.readouterr().out.split()[1])
    assert main(["replay", str(trace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "conforms" and report["steps"] == events - 1


def test_a_violating_simulator_trace_breaks_the_same_invariant_in_the_implementation() -> None:
    for seed in range(40):
        events = simulate(seed, 300, Knobs(truncation="hw"))
        report = replay(events)
        if report.trace_invariant is not None and report.divergence is None:
            assert report.same_invariant
            return
    pytest.fail("no seed of the original design broke an invariant")


def _corrupt(events: list[Event]) -> int:
    """Changes the HW one Produce reports; returns the seq of that event."""
    for event in events:
        hw: dict[str, Any] = event["state"].get("hw", {})
        if event["action"] == "Produce" and hw:
            broker = next(iter(hw))
            partition = next(iter(hw[broker]))
            hw[broker][partition] += 7
            seq: int = event["seq"]
            return seq
    raise AssertionError("no Produce with an HW change")


def test_a_corrupted_trace_diverges_at_the_corrupted_step() -> None:
    events = simulate(2, 400)
    seq = _corrupt(events)
    report = replay(events)
    assert report.divergence is not None
    assert report.divergence.seq == seq
    assert report.divergence.variable.startswith("hw.")
    assert report.divergence.expected == report.divergence.actual + 7


def test_a_step_the_implementation_cannot_take_is_named() -> None:
    events = simulate(3, 100)
    victim = next(e for e in events if e["action"] == "SendFetch")
    victim["args"]["partition"] = "nosuch-0"
    report = replay(events)
    assert report.divergence is not None and report.divergence.seq == victim["seq"]
    assert report.divergence.reason


def test_cli_reports_conformance_and_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = simulate(4, 150)
    assert main(["replay", str(write(events, tmp_path / "ok.jsonl")), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "conforms" and out["divergence"] is None
    seq = _corrupt(events)
    assert main(["replay", str(write(events, tmp_path / "bad.jsonl"))]) == 1
    assert f"diverges at seq {seq} (Produce): hw." in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty trace"),
        ('{"v":2}\n', "missing required field"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                               message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    assert main(["replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_knobs_and_a_missing_init_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = simulate(2, 5)
    events[0]["args"]["knobs"]["truncation"] = "nonsense"
    assert main(["replay", str(write(events, tmp_path / "knobs.jsonl"))]) == 2
    assert "args.knobs" in capsys.readouterr().err
    with pytest.raises(ValueError, match="full Init"):
        Replayer(events[1:])
    assert main(["replay", str(write(simulate(2, 5), tmp_path / "t.jsonl")), "--invariant", "Nope"]) == 2
    assert "unknown invariant" in capsys.readouterr().err


@pytest.mark.tlc
def test_every_known_bug_counterexample_breaks_the_same_invariant_in_the_implementation(
    reproduction: Callable[[str], CheckOutcome]
) -> None:
    from test_spec import REPRODUCTIONS

    from kcm.spec.tlc.modelcheck import vocabulary_name

    for model, (_, invariant) in sorted(REPRODUCTIONS.items()):
        outcome = reproduction(model)
        assert outcome.result.violated == invariant and outcome.trace_path is not None
        report = replay(load_trace(outcome.trace_path), vocabulary_name(invariant))
        assert report.divergence is None, (model, report.divergence)
        assert report.same_invariant, (model, report.impl_invariants)
