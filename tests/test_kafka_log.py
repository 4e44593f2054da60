"""The state-change.log parser on the hand-written samples of tests/data/kafka (three Kafka versions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline.kafka_log import LogLineError, parse_kafka_log, parse_rendering, partition_name
from kcm.spec.trace.format import Event, TraceWriter, load_trace

DATA = Path(__file__).parent / "data" / "kafka"


def _parsed(name: str) -> tuple[list[Event], list[dict[str, Any]], int]:
    parsed = parse_kafka_log(DATA / name)
    return parsed.events, parsed.quarantine, parsed.lines


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(Leader:1,ISR:1,2,LeaderEpoch:0,ControllerEpoch:1)",
         {"leader": 1, "isr": [1, 2], "leader_epoch": 0, "controller_epoch": 1}),
        ("LeaderAndIsr(leader=2, leaderEpoch=3, isr=List(2, 3), zkVersion=5)",
         {"leader": 2, "leader_epoch": 3, "isr": [2, 3], "zk_version": 5}),
        ("PartitionState(controllerEpoch=4, leader=2, leaderEpoch=0, isr=2,3, zkVersion=0, replicas=2,3, isNew=true)",
         {"controller_epoch": 4, "leader": 2, "leader_epoch": 0, "isr": [2, 3], "zk_version": 0, "replicas": [2, 3]}),
        ("LeaderAndIsrPartitionState(topicName='audit', partitionIndex=0, controllerEpoch=7, leader=1, leaderEpoch=0, "
         "isr=[1, 3], zkVersion=0, replicas=[1, 3], addingReplicas=[], removingReplicas=[], isNew=true)",
         {"partition": "audit-0", "controller_epoch": 7, "leader": 1, "leader_epoch": 0, "isr": [1, 3],
          "zk_version": 0, "replicas": [1, 3]}),
    ],
)
def test_renderings_of_each_version(text: str, expected: dict[str, object]) -> None:
    assert parse_rendering(text) == expected


def test_partition_names_of_each_version() -> None:
    assert partition_name("[orders,0]") == "orders-0"
    assert partition_name("my-topic-12") == "my-topic-12"
    with pytest.raises(LogLineError, match="leader is 'x'"):
        parse_rendering("LeaderAndIsr(leader=x, leaderEpoch=1)")


@pytest.mark.parametrize(
    ("name", "lines", "quarantined"),
    [
        ("state-change-0.10.log", 16, {14: "not a state-change log line"}),
        ("state-change-1.1.log", 14, {12: "malformed rendering: leader is 'three'",
                                      14: "unrecognised controller message"}),
        ("state-change-2.4.log", 9, {8: "malformed rendering: no partition", 9: "truncated file"}),
    ],
)
def test_every_line_is_an_event_or_quarantined(name: str, lines: int, quarantined: dict[int, str]) -> None:
    events, quarantine, read = _parsed(name)
    assert read == lines
    assert {int(str(q["line"])): str(q["reason"]) for q in quarantine}.keys() == quarantined.keys()
    for entry in quarantine:
        assert str(entry["reason"]).startswith(quarantined[int(str(entry["line"]))])
        assert entry["file"] == str(DATA / name)
    # One event per line kept, after the Init the parser makes up from what the log shows first.
    assert len(events) == 1 + read - len(quarantine)
    assert events[0]["action"] == "Init" and events[0]["full"] is True


def test_parsed_logs_are_valid_v1_traces(tmp_path: Path) -> None:
    for log in sorted(DATA.glob("*.log")):
        path = tmp_path / f"{log.stem}.jsonl"
        with TraceWriter(path) as writer:
            for event in parse_kafka_log(log).events:
                writer.write(event)
        assert len(load_trace(path)) == len(parse_kafka_log(log).events)


def _violations(name: str) -> set[tuple[str, int, str]]:
    events, _, _ = _parsed(name)
    checker = InvariantChecker()
    found = set()
    for event in events:
        found |= {(v.invariant, event["seq"], str(event["args"].get("log"))) for v in checker.step(event)}
    return found


def test_planted_faults_in_the_logs_are_found_at_their_lines() -> None:
    assert _violations("state-change-0.10.log") == set()
    assert _violations("state-change-1.1.log") == {
        ("OneLeaderPerEpoch", 10, "state-change-1.1.log:10"),
        # line 11, a request whose ISR [3,4] is outside its replicas [2,3], is no violation: a request's
        # replicas are the controller's memory, not the store's assignment (docs/invariants.md).
        ("ValidReplicaTransitions", 12, "state-change-1.1.log:13"),
    }
    assert _violations("state-change-2.4.log") == {("StaleControllerFenced", 7, "state-change-2.4.log:7")}


def test_the_0_10_log_observes_the_failover() -> None:
    events, _, _ = _parsed("state-change-0.10.log")
    last = events[-1]
    assert last["actor"] == "controller:1"
    assert last["state"] == {"leader": {"orders-0": 2}, "leader_epoch": {"orders-0": 1}, "isr": {"orders-0": [2]}}
    follower = next(e for e in events if e["actor"] == "broker:2" and e["args"].get("applied"))
    assert follower["state"] == {"role": {"2": {"orders-0": "follower"}},
                                 "local_leader_epoch": {"2": {"orders-0": 0}},
                                 "broker_controller_epoch": {"2": 1}}
