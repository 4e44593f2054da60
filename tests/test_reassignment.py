"""Kafka's reassignment (2.3.0 KafkaController.onPartitionReassignment) on every engine: a healthy history
in which brokers apply a LeaderAndIsr whose ISR is outside its replicas checks clean, since
IsrSubsetOfReplicas holds of the store's partition node and assignment, not of a request or a broker's
view (docs/invariants.md); a store whose ISR leaves its assignment is flagged at that event."""

from __future__ import annotations

import copy
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from histories import reassignment_keeping_its_leader

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.replay import replay
from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.conformance.pipeline.kafka_log import parse_kafka_log
from kcm.conformance.pipeline.kafka_log.renderer import Line, render
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.z3.validate import validate_events
from kcm.tools.cli import main

P = "t0-0"


@pytest.fixture(scope="module")
def history() -> list[Event]:
    return reassignment_keeping_its_leader("reassign")


def _requests_outside(events: list[Event]) -> list[Event]:
    """LeaderAndIsr requests whose ISR holds a broker outside the request's replicas."""
    return [e for e in events if e["action"] == "LeaderAndIsr"
            and any(set(p["isr"]) - set(p["replicas"]) for p in e["args"].get("partitions", []))]


def _violations(events: list[Event]) -> list[tuple[str, int]]:
    checker = InvariantChecker()
    return [(v.invariant, v.seq) for e in events for v in checker.step(e)]


def _with_store_isr_outside(events: list[Event]) -> tuple[list[Event], int]:
    """The event that writes AR = RAR to the store, with retired broker 3 kept in the store's ISR."""
    corrupted = copy.deepcopy(events)
    victim = next(e for e in corrupted if e["state"].get("assignment", {}).get(P) == [2, 1])
    victim["state"].setdefault("isr", {})[P] = [1, 2, 3]
    return corrupted, victim["seq"]


def test_brokers_of_the_target_apply_an_isr_outside_their_replicas(history: list[Event]) -> None:
    received = _requests_outside(history)
    assert {e["actor"] for e in received} == {"broker:1", "broker:2", "broker:3"}
    assert all(p["isr"] == [1, 2, 3] and p["replicas"] == [2, 1] for e in received for p in e["args"]["partitions"])
    # 1 and 2 take the new leader epoch; 3, outside the replicas, leaves its replica as it is.
    applied = {e["actor"] for e in received if P in e["state"].get("local_leader_epoch", {}).get(e["actor"][7:], {})}
    assert applied == {"broker:1", "broker:2"}


def test_the_healthy_reassignment_checks_clean_on_the_checker_z3_and_replay(history: list[Event]) -> None:
    assert _violations(history) == []
    report = validate_events(history)
    assert report.ok, report.failure
    replayed = replay(history)
    assert replayed.divergence is None and replayed.verdict == "conforms"


def test_the_cli_finds_the_healthy_reassignment_clean_and_the_corrupted_one_violated(
        history: list[Event], tmp_path: Path) -> None:
    for name, events, code in (("healthy", history, 0), ("corrupted", _with_store_isr_outside(history)[0], 1)):
        path = tmp_path / f"{name}.jsonl"
        with TraceWriter(path) as writer:
            for event in events:
                writer.write(event)
        assert main(["check-trace", str(path)]) == code, name
        assert main(["validate", str(path)]) == code, name


@pytest.mark.tlc
def test_the_healthy_reassignment_is_explained_by_the_specification(history: list[Event]) -> None:
    check = validate_with_tlc(history)
    assert check.accepted, check.to_json()
    assert check.matched == len(history)


def test_a_store_isr_outside_the_store_assignment_is_flagged_at_that_event(history: list[Event]) -> None:
    corrupted, seq = _with_store_isr_outside(history)
    assert ("IsrSubsetOfReplicas", seq) in _violations(corrupted)
    report = validate_events(corrupted)
    assert report.failure is not None and report.failure.seq == seq


def _node(leader: int, epoch: int, isr: list[int], replicas: list[int]) -> dict[str, Any]:
    return {"leader": leader, "leader_epoch": epoch, "isr": isr, "zk_version": epoch, "controller_epoch": 1,
            "replicas": replicas, "is_new": False}


def _reassignment_lines() -> list[Line]:
    """What Kafka 2.3 logs of the history above (controller 1, epoch 1), from its statements (formats.py):
    step 5 (2 and 1 OnlineReplica again, LeaderAndIsr with the old node), step 7 (the leader kept: a new
    epoch, 'Sent LeaderAndIsr request ... with new assigned replica list 2,1', received by broker 2 with
    isr [1,2,3] and replicas [2,1]), step 8 (3 OfflineReplica, the ISR [1,2] sent), step 9."""
    ctl = {"c": 1, "e": 1, "partition": P}
    before = _node(1, 0, [1, 2, 3], [1, 2, 3])
    kept, shrunk = _node(1, 1, [1, 2, 3], [2, 1]), _node(1, 2, [1, 2], [2, 1])
    lines = [Line(fm.PARTITION_STATE, {**ctl, "src": "OnlinePartition", "dst": "OnlinePartition", "leader": 1,
                                       "state": {**before, "replicas": [1, 2, 3]}})]
    for r in (2, 1):
        lines.append(Line(fm.REPLICA_STATE, {**ctl, "r": r, "src": "OnlineReplica", "dst": "OnlineReplica"}))
    lines += [
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 2, "cid": 5, "state": before}, role="follower"),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 2, "cid": 6, "state": kept}, role="follower"),
        Line(fm.REASSIGNMENT_SENT, {**ctl, "leader": 1, "replicas": [2, 1], "state": kept}),
        Line(fm.RECEIVED, {"b": 2, "c": 1, "e": 1, "cid": 6, "partition": P, "state": kept}),
        Line(fm.BECOME, {"b": 2, "c": 1, "e": 1, "cid": 6, "partition": P, "leader": 1}, role="follower"),
        Line(fm.REPLICA_STATE, {**ctl, "r": 3, "src": "OnlineReplica", "dst": "OfflineReplica"}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 2, "cid": 7, "state": shrunk}, role="follower"),
        Line(fm.RECEIVED, {"b": 2, "c": 1, "e": 1, "cid": 7, "partition": P, "state": shrunk}),
        Line(fm.BECOME, {"b": 2, "c": 1, "e": 1, "cid": 7, "partition": P, "leader": 1}, role="follower"),
    ]
    deletion = ("OfflineReplica", "ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "NonExistentReplica")
    for src, dst in pairwise(deletion):
        lines.append(Line(fm.REPLICA_STATE, {**ctl, "r": 3, "src": src, "dst": dst}))
    return lines


def test_the_healthy_reassignment_as_kafka_2_3_logs_it_checks_clean(tmp_path: Path) -> None:
    path = tmp_path / "state-change.log"
    path.write_text("".join(f"{line}\n" for line in render(_reassignment_lines(), "2.3")))
    parsed = parse_kafka_log(path)
    assert parsed.quarantine == []
    assert _requests_outside(parsed.events), "the log holds no request whose ISR is outside its replicas"
    assert _violations(parsed.events) == []
