"""kcm validate --tlc: TLC trace validation of simulator traces against the TLA+ specification (marker tlc)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from histories import reelected_controller, restarted_broker_requests

from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.tlc.modelcheck import CheckOutcome
from kcm.spec.tlc.validate import model_steps, trace_config, trace_module, uses_operations, validate_with_tlc
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main

SMALL = SimConfig(brokers=2, partitions=1, replication_factor=2, admin=0.0)
TWO_PARTITIONS = SimConfig(brokers=2, partitions=2, replication_factor=2, admin=0.0)
OPERATIONS = SimConfig(brokers=2, partitions=2, replication_factor=2)
ONE_PARTITION_OPERATIONS = SimConfig(brokers=2, partitions=1, replication_factor=2)


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
    assert '"Init", actor |-> -1' in first  # NoLeader: env is no broker
    assert 'role |-> (1 :> ("t0-0" :> "absent") @@ 2 :> ("t0-0" :> "absent"))' in first


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


def test_operator_commands_select_the_specification_with_operations() -> None:
    core = simulate(1, 40, TWO_PARTITIONS)
    assert not uses_operations(core)
    assert "EXTENDS TraceKafka\n" in trace_module(core)[0]
    events = simulate(17, 50, OPERATIONS)
    assert uses_operations(events)
    text, constants = trace_module(events)
    assert "EXTENDS TraceKafkaOps\n" in text
    assert "RunTargets == {<<1, 2>>}" in text and constants["ReassignTargets"] == "RunTargets"
    config = trace_config(Knobs(), constants, update_metadata=True)
    assert "INIT OpsTraceInit" in config and "NEXT OpsTraceNext" in config
    assert "INIT TraceInit" in trace_config(Knobs(), trace_module(core)[1], update_metadata=True)


def test_deleting_a_topic_is_one_model_step_per_partition_it_has() -> None:
    events = simulate(176, 80, OPERATIONS)
    delete = next(i for i, e in enumerate(events) if e["action"] == "DeleteTopic")
    assert events[delete]["args"]["topic"] == "t0"
    # t0 has two partitions; t1 (created before the deletion) is not touched.
    assert sum(1 for index, _ in model_steps(events) if index == delete) == 2


def elected_before_reregistering(events: list[Event]) -> bool:
    """A broker wins the controller election between its session expiry and its re-registration."""
    expired: set[str] = set()
    for event in events:
        if event["action"] == "SessionExpire":
            expired.add(f"broker:{event['args']['broker']}")
        elif event["action"] == "BrokerReregister":
            expired.discard(event["actor"])
        elif event["action"] == "ControllerElect" and event["args"].get("elected") and event["actor"] in expired:
            return True
    return False


@pytest.mark.tlc
@pytest.mark.parametrize("seed", [1, 5], ids=["seed1", "seed5-elected-before-reregistering"])
def test_a_simulator_trace_is_explained_by_the_specification(seed: int) -> None:
    events = simulate(seed, 40)
    assert elected_before_reregistering(events) == (seed == 5)
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()
    assert check.matched == len(events)


@pytest.mark.tlc
def test_a_two_partition_trace_is_explained_through_one_model_step_per_partition() -> None:
    events = simulate(1, 40, TWO_PARTITIONS)
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()


@pytest.mark.tlc
def test_an_initial_state_the_specification_does_not_have_is_rejected_at_init() -> None:
    events = simulate(1, 10)
    events[0]["state"]["controller_epoch"] = 7
    check = validate_with_tlc(events)
    assert not check.accepted
    assert check.matched == 0 and check.first_unexplained is events[0]


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
def test_a_trace_with_operator_commands_is_explained_by_the_specification_with_operations() -> None:
    events = simulate(3, 30, ONE_PARTITION_OPERATIONS)
    actions = {e["action"] for e in events}
    assert {"ReassignPartitions", "PartitionReassignment", "PreferredElection", "RequestControlledShutdown",
            "ControlledShutdownRequest"} <= actions
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()


@pytest.mark.tlc
@pytest.mark.parametrize("back", [False, True], ids=["retired", "reassigned-back"])
def test_a_reelected_controllers_reloaded_context_is_explained_by_the_specification(back: bool) -> None:
    """tests/scenarios/reelected_controller_reloads.txt. Reassigned back, the re-elected controller moves
    the leadership into the target and then retires the old replica, two requests to broker 1 in one
    event: the specification sends both only if it seals its requests between the two state-machine
    calls, as the implementation does."""
    events = reelected_controller("run", back)
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()
    assert check.matched == len(events)


@pytest.mark.tlc
@pytest.mark.parametrize("broker_epoch", [True, False], ids=["kip380", "before-2.2"])
def test_requests_reaching_a_restarted_broker_are_explained_in_either_era(broker_epoch: bool) -> None:
    """tests/scenarios/broker_epoch.txt: with KIP-380 the restarted broker refuses a request addressed to its
    previous registration and the controller fails and restarts it; before 2.2 it applies the request,
    even one sent before its crash, and the controller misses the bounce."""
    events = restarted_broker_requests("run", Knobs(broker_epoch=broker_epoch))
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()
    assert check.matched == len(events)


@pytest.mark.tlc
def test_a_reassignment_moving_the_wrong_replica_is_rejected_at_that_event() -> None:
    events = simulate(3, 30, ONE_PARTITION_OPERATIONS)
    victim = next(e for e in events if e["action"] == "PartitionReassignment" and "assignment" in e["state"])
    partition = next(iter(victim["state"]["assignment"]))
    victim["state"]["assignment"][partition] = [*reversed(victim["state"]["assignment"][partition]), 9]
    check = validate_with_tlc(events)
    assert not check.accepted
    assert check.first_unexplained is victim


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
    assert "missing.jsonl: No such file" in capsys.readouterr().err
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        for event in simulate(1, 3):
            writer.write(event)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojava"))
    assert main(["validate", "--tlc", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Java 17 is required" in err and err.count("\n") == 1


@pytest.mark.tlc
def test_a_counterexample_of_tlcs_is_refused_in_one_line(reproduction: Callable[[str], CheckOutcome],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """TLC's own counterexample names its requests' partitions nowhere (each is one model step): validating it
    is a one-line answer, not a KeyError."""
    trace = reproduction("kafka1211").trace_path
    assert trace is not None
    code = main(["validate", "--tlc", str(trace)])
    out = capsys.readouterr()
    assert code in (0, 1) and "Traceback" not in out.err and out.out.count("\n") <= 2, out
