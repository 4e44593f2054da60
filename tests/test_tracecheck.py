"""kcm validate --tlc: TLC trace validation of simulator traces against the TLA+ specification (marker tlc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcm.conformance.trace import Event, TraceWriter
from kcm.impl.simulator import SimConfig, Simulator
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main
from kcm.tools.tracecheck import trace_module, validate_with_tlc

SMALL = SimConfig(brokers=2, partitions=1, replication_factor=2, admin=0.0)


def simulate(seed: int, steps: int) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), SMALL, events.append)
    simulator.bootstrap()
    simulator.run(steps)
    return events


def test_the_generated_module_encodes_absent_keys_as_the_specifications_sentinels() -> None:
    text, constants = trace_module(simulate(1, 10))
    assert constants["TraceLog"] == "RunTraceLog"
    assert 'RunPartitions == {"t0-0"}' in text and "RunBrokers == {1, 2}" in text
    first = text.split("[action |->", 2)[1]
    assert '"Init", actor |-> 0' in first
    assert 'role |-> <<("t0-0" :> "absent"), ("t0-0" :> "absent")>>' in first


@pytest.mark.tlc
def test_a_simulator_trace_is_explained_by_the_specification() -> None:
    events = simulate(1, 40)
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()
    assert check.matched == len(events)


@pytest.mark.tlc
def test_a_corrupted_trace_is_rejected_at_the_corrupted_event(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    events = simulate(1, 40)
    victim = next(e for e in events if e["action"] == "Produce" and "log" in e["state"])
    logs = next(iter(victim["state"]["log"].values()))
    partition = next(iter(logs))
    logs[partition] = [*logs[partition], [9, 9]]
    path = tmp_path / "bad.jsonl"
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    assert main(["validate", "--tlc", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["accepted"] is False
    assert out["first_unexplained"]["seq"] == victim["seq"]
    assert out["matched"] == victim["seq"]


def test_bad_input_and_a_missing_java_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["validate", "--tlc", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl:0: -: No such file" in capsys.readouterr().err
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        for event in simulate(1, 3):
            writer.write(event)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojava"))
    assert main(["validate", "--tlc", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Java 17 is required" in err and err.count("\n") == 1
