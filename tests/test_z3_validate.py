"""Step validation (spec/z3/validate.py): simulator traces are explained step by step by the Z3 transition
relation, partial traces too; hand-corrupted traces are rejected at the corrupted step."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from histories import reelected_controller

from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event, TraceWriter, apply_event, empty_state
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.validate import SURVEY_STRIDE, ValidationError, Validator, validate_events
from kcm.tools.cli import main

P = "t0-0"


def simulate(seed: int, steps: int, knobs: Knobs | None = None, **config: Any) -> list[Event]:
    events: list[Event] = []
    settings = {"brokers": 4, "partitions": 1, "replication_factor": 3, "admin": 0.0, **config}
    sim = Simulator(seed, knobs or Knobs(), SimConfig(**settings), events.append)
    sim.bootstrap()
    sim.run(steps)
    return events


@pytest.fixture(scope="module")
def trace() -> list[Event]:
    return simulate(5, 700)


def corrupt(events: list[Event], find: Callable[[Event, dict[str, Any]], bool],
            change: Callable[[Event, dict[str, Any]], None]) -> tuple[list[Event], int]:
    """A copy of the trace with the first event `find` accepts (given the state before it) changed."""
    copied = copy.deepcopy(events)
    state = empty_state()
    for index, event in enumerate(copied):
        if index and find(event, state):
            change(event, state)
            return copied, event["seq"]
        apply_event(state, event)
    raise AssertionError("no event to corrupt in this trace")


def test_simulator_traces_are_explained_step_by_step(trace: list[Event]) -> None:
    report = validate_events(trace)
    assert report.ok, report.failure
    assert report.steps == len(trace) - 1 and report.unobserved == []
    for action in ("LeaderAndIsr", "Fetch", "FetchResponse", "Produce", "ControllerDecision", "ControllerElect"):
        assert report.explained_by.get(action, 0) > 0


@pytest.mark.parametrize("knobs", [Knobs(truncation="hw"), Knobs(unclean_election=True, controller_epoch_fencing=False),
                                   Knobs(truncation="kip101", leader_epoch_check=False)])
def test_traces_of_every_design_are_explained(knobs: Knobs) -> None:
    report = validate_events(simulate(11, 300, knobs, admin=1.0, partitions=2))
    assert report.ok, report.failure


@pytest.mark.parametrize("action", ["BrokerCrash", "BrokerRestart", "SessionExpire", "Produce"])
def test_a_step_that_leaves_out_its_broker_is_explained_by_any(trace: list[Event], action: str) -> None:
    """Every argument is optional (docs/trace-format.md): an environment's or a client's step that does not name
    its broker may be any broker's (it ended in an AssertionError; found by the fuzz campaign)."""
    events = copy.deepcopy(trace)
    stripped = [event for event in events if event["action"] == action]
    assert stripped
    for event in stripped:
        del event["args"]["broker"]
    report = validate_events(events)
    assert report.ok, report.failure


def test_two_leaders_in_one_epoch_are_rejected_at_the_step(trace: list[Event]) -> None:
    def find(event: Event, _: dict[str, Any]) -> bool:
        return (event["action"] == "LeaderAndIsr" and event["args"].get("applied") is True
                and "follower" in [roles.get(P) for roles in event["state"].get("role", {}).values()])

    def change(event: Event, _: dict[str, Any]) -> None:
        broker = next(b for b, roles in event["state"]["role"].items() if roles.get(P) == "follower")
        event["state"]["role"][broker][P] = "leader"

    corrupted, seq = corrupt(trace, find, change)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq
    assert report.failure.action == "LeaderAndIsr" and "role" in report.failure.reason


def test_a_new_leader_without_a_new_epoch_is_rejected(trace: list[Event]) -> None:
    def find(event: Event, before: dict[str, Any]) -> bool:
        leader = event["state"].get("leader", {}).get(P)
        return (event["actor"].startswith("controller:") and leader not in (None, 0)
                and leader != before["leader"].get(P) and P in event["state"].get("leader_epoch", {}))

    def change(event: Event, _: dict[str, Any]) -> None:
        del event["state"]["leader_epoch"][P]

    corrupted, seq = corrupt(trace, find, change)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq
    assert "write of the partition's state node" in report.failure.reason


def test_an_isr_outside_the_assignment_is_rejected(trace: list[Event]) -> None:
    outsider = next(b for b in (1, 2, 3, 4) if b not in trace[1]["state"]["assignment"][P])

    def find(event: Event, _: dict[str, Any]) -> bool:
        return P in event["state"].get("isr", {}) and event["seq"] > 20

    def change(event: Event, _: dict[str, Any]) -> None:
        event["state"]["isr"][P] = [*event["state"]["isr"][P], outsider]

    corrupted, seq = corrupt(trace, find, change)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq


def test_a_leader_epoch_going_back_is_rejected(trace: list[Event]) -> None:
    def find(event: Event, before: dict[str, Any]) -> bool:
        new = event["state"].get("leader_epoch", {}).get(P)
        return new is not None and (before["leader_epoch"].get(P) or 0) >= 1

    def change(event: Event, before: dict[str, Any]) -> None:
        event["state"]["leader_epoch"][P] = before["leader_epoch"][P] - 1

    corrupted, seq = corrupt(trace, find, change)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq


def test_a_controller_epoch_going_back_is_rejected(trace: list[Event]) -> None:
    def find(event: Event, before: dict[str, Any]) -> bool:
        return "controller_epoch" in event["state"] and before["controller_epoch"] >= 2

    def change(event: Event, before: dict[str, Any]) -> None:
        event["state"]["controller_epoch"] = before["controller_epoch"] - 1

    corrupted, seq = corrupt(trace, find, change)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq


@pytest.mark.parametrize("action", ["LeaderAndIsr", "UpdateMetadata"])
def test_a_stale_request_applied_is_rejected(trace: list[Event], action: str) -> None:
    def find(event: Event, before: dict[str, Any]) -> bool:
        broker = event["actor"].partition(":")[2]
        return (event["action"] == action and event["args"].get("applied") is True
                and before["broker_controller_epoch"].get(broker, 0) >= 1
                and (action == "LeaderAndIsr") == ("role" in event["state"] or "local_leader_epoch" in event["state"]))

    def change(event: Event, before: dict[str, Any]) -> None:
        broker = event["actor"].partition(":")[2]
        event["args"]["controller_epoch"] = before["broker_controller_epoch"][broker] - 1

    corrupted, seq = corrupt(trace, find, change)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq
    # the stale epoch is part of every explanation of the rejection
    assert "argument controller_epoch=" in report.failure.reason or "applied means accepted" in report.failure.reason


PARTIAL_HIDDEN = ("log", "hw", "hw_checkpoint", "epoch_start_offset", "local_isr", "partition_state", "replica_state",
                  "partition_version", "acting_controller_epoch")


def partial(events: list[Event]) -> list[Event]:
    out = copy.deepcopy(events)
    for event in out:
        for var in PARTIAL_HIDDEN:
            event["state"].pop(var, None)
    return out


def test_partial_traces_are_checked_as_far_as_they_go(trace: list[Event]) -> None:
    report = validate_events(partial(trace))
    assert report.ok, report.failure
    assert set(PARTIAL_HIDDEN) <= set(report.unobserved)

    def find(event: Event, _: dict[str, Any]) -> bool:
        return P in event["state"].get("isr", {}) and event["seq"] > 20

    def change(event: Event, _: dict[str, Any]) -> None:
        event["state"]["isr"][P] = []

    corrupted, seq = corrupt(partial(trace), find, change)
    failure = validate_events(corrupted).failure
    assert failure is not None and failure.seq == seq


def test_observer_steps_may_be_any_action(trace: list[Event]) -> None:
    events = copy.deepcopy(trace[:80])
    for event in events[1:]:
        event["actor"] = "observer"
    assert validate_events(events).ok


def test_unknown_brokers_are_named() -> None:
    events = simulate(3, 40)
    for event in events:
        if "isr" in event["state"]:
            event["state"]["isr"][P] = [*event["state"]["isr"][P], 9]
            break
    failure = validate_events(events).failure
    assert failure is not None and "broker 9" in failure.reason
    with pytest.raises(ValidationError):
        validate_events([])


@pytest.mark.parametrize("back", [False, True])
def test_a_context_load_starts_the_state_machines_afresh(back: bool) -> None:
    """tests/scenarios/reelected_controller_reloads.txt: a re-elected controller's first transitions are
    judged against no state, not against the context it dropped."""
    report = validate_events(reelected_controller("run", back))
    assert report.ok, report.failure


def test_both_passes_tell_their_progress(trace: list[Event]) -> None:
    read: list[int] = []
    validator = Validator(trace, read.append)
    taken: list[int] = []
    report = validator.run(on_event=taken.append)
    assert report.ok and read == [len(trace)]
    assert taken == [*range(len(trace)), len(trace)]


def test_a_long_survey_tells_its_progress_on_the_way() -> None:
    events = simulate(2, SURVEY_STRIDE + 10)
    read: list[int] = []
    Validator(events, read.append)
    assert read == [SURVEY_STRIDE, len(events)]


def test_the_command_shows_progress_on_stderr_when_it_is_no_terminal(
        tmp_path: Path, trace: list[Event], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38, item 10: `kcm validate` of a large trace printed nothing for minutes. A line at every report
    (no interval), so that the test does not depend on how fast the machine is."""
    monkeypatch.setattr("kcm.tools.progress.PLAIN_INTERVAL", 0.0)
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        for event in trace[:60]:
            writer.write(event)
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert all(re.match(r"\d\d:\d\d:\d\d z3 validate: (survey|steps): ", line) for line in lines)
    assert any(line.endswith("survey: 60 events read") for line in lines)
    assert any(line.endswith("steps: 30/60") for line in lines)
    assert re.search(r"steps: done in [0-9.]+ s, 60/60$", lines[-1])
    assert "all 59 steps explained" in captured.out
