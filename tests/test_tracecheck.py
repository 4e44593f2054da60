"""kcm validate --tlc: TLC trace validation of simulator traces against the TLA+ specification (marker tlc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcm.conformance.trace import Event, TraceWriter
from kcm.impl.simulator import SimConfig, Simulator
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main
from kcm.tools.tracecheck import model_steps, trace_module, validate_with_tlc

SMALL = SimConfig(brokers=2, partitions=1, replication_factor=2, admin=0.0)
TWO_PARTITIONS = SimConfig(brokers=2, partitions=2, replication_factor=2, admin=0.0)


def simulate(seed: int, steps: int, config: SimConfig = SMALL) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), config, events.append)
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


def test_batched_events_become_one_model_step_per_partition_ending_in_the_events_state() -> None:
    events = simulate(1, 40, TWO_PARTITIONS)
    steps = model_steps(events)
    create = [step for index, step in steps if events[index]["action"] == "CreateTopic"]
    assert [sorted(step["state"]["assignment"]) for step in create] == [["t0-0"], ["t0-1"]]
    batch = next(i for i, e in enumerate(events) if e["action"] == "LeaderAndIsr" and len(e["args"]["partitions"]) == 2)
    parts = [step for index, step in steps if index == batch]
    assert len(parts) == 2
    assert {p for step in parts for cell in step["state"]["role"].values() for p in cell} == {"t0-0", "t0-1"}
    assert all(len(cell) == 1 for step in parts for cell in step["state"]["role"].values())
    # Every variable a batch changes, and its broker-wide controller epoch only once.
    folded: dict[str, dict[str, dict[str, object]]] = {}
    for step in parts:
        for broker, cell in step["state"]["role"].items():
            folded.setdefault(broker, {}).update(cell)
    assert folded == events[batch]["state"]["role"]
    assert len(steps) == len(events) + sum(len(e["args"]["partitions"]) - 1 for e in events
                                           if e["action"] == "LeaderAndIsr" and len(e["args"]["partitions"]) > 1) + 1


@pytest.mark.tlc
def test_a_simulator_trace_is_explained_by_the_specification() -> None:
    events = simulate(1, 40)
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()
    assert check.matched == len(events)


@pytest.mark.tlc
def test_a_two_partition_trace_is_explained_through_one_model_step_per_partition() -> None:
    events = simulate(1, 40, TWO_PARTITIONS)
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()


@pytest.mark.tlc
def test_a_batch_wrong_in_one_partition_is_rejected_at_that_event() -> None:
    events = simulate(1, 40, TWO_PARTITIONS)
    victim = next(e for e in events if e["action"] == "LeaderAndIsr" and len(e["args"]["partitions"]) == 2)
    epochs = next(iter(victim["state"]["local_leader_epoch"].values()))
    epochs["t0-1"] = 7
    check = validate_with_tlc(events)
    assert not check.accepted
    assert check.first_unexplained is victim
    assert check.matched == victim["seq"]


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
