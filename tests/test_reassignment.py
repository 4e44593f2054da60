"""Kafka's reassignment (2.3.0 KafkaController.onPartitionReassignment) on every engine: a healthy history
in which brokers apply a LeaderAndIsr whose ISR is outside its replicas checks clean, since
IsrSubsetOfReplicas holds of the store's partition node and assignment, not of a request or a broker's
view (docs/invariants.md); a store whose ISR leaves its assignment is flagged at that event."""

from __future__ import annotations

import copy

import pytest
from histories import reassignment_keeping_its_leader

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.replay import replay
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import Event
from kcm.spec.z3.validate import validate_events

P = "t0-0"


@pytest.fixture(scope="module")
def history() -> list[Event]:
    return reassignment_keeping_its_leader("reassign")


def _requests_outside(events: list[Event]) -> list[Event]:
    """LeaderAndIsr requests whose ISR holds a broker outside the request's replicas."""
    return [e for e in events if e["action"] == "LeaderAndIsr"
            and any(set(p["isr"]) - set(p["replicas"]) for p in e["args"]["partitions"])]


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
