"""The Kafka log parser on the logs of tests/data/kafka, rendered from Kafka's own format strings
(tests/kafka_fixtures.py), and on single statements of the table of every release."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from kafka_fixtures import DATA, DOCS, FIXTURE_RELEASES, RENDERED, docs_with_table, fixtures, healthy, printed

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline.kafka_log import (
    Line,
    LogLineError,
    parse_kafka_log,
    parse_rendering,
    partition_name,
    prints,
    render,
    render_message,
)
from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.spec.trace.format import Event, TraceWriter, load_trace
from kcm.spec.vocabulary import NO_LEADER
from kcm.spec.z3.validate import Validator
from kcm.tools.pipeline import main as pipeline_main


def _parsed(name: str) -> tuple[list[Event], list[dict[str, Any]], int]:
    parsed = parse_kafka_log(DATA / name)
    return parsed.events, parsed.quarantine, parsed.lines


def _log(tmp_path: Path, *lines: str, name: str = "state-change.log") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def _one(tmp_path: Path, line: Line, release: str) -> Event:
    """The event the parser makes of one rendered statement."""
    parsed = parse_kafka_log(_log(tmp_path, *render([line], release)))
    assert parsed.quarantine == [] and parsed.skipped == []
    return parsed.events[-1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(Leader:1,ISR:1,2,LeaderEpoch:0,ControllerEpoch:1)",
         {"leader": 1, "isr": [1, 2], "leader_epoch": 0, "controller_epoch": 1}),
        ("(Leader:1,ISR:1,2,LeaderRecoveryState:RECOVERED,LeaderEpoch:3,ZkVersion:4,ControllerEpoch:5)",
         {"leader": 1, "isr": [1, 2], "leader_epoch": 3, "zk_version": 4, "controller_epoch": 5}),
        ('{"leader":2,"leader_epoch":3,"isr":[2,3]}', {"leader": 2, "leader_epoch": 3, "isr": [2, 3]}),
        ("LeaderAndIsr(leader=2, leaderEpoch=3, isr=List(2, 3), zkVersion=5)",
         {"leader": 2, "leader_epoch": 3, "isr": [2, 3], "zk_version": 5}),
        ("LeaderAndIsr(leader=-1, leaderEpoch=3, isrWithBrokerEpoch=List(BrokerState(brokerId=0, brokerEpoch=-1), "
         "BrokerState(brokerId=2, brokerEpoch=-1)), leaderRecoveryState=RECOVERED, partitionEpoch=7)",
         {"leader": -1, "leader_epoch": 3, "isr": [0, 2], "zk_version": 7}),
        ("PartitionState(controllerEpoch=4, leader=2, leaderEpoch=0, isr=2,3, zkVersion=0, replicas=2,3, isNew=true)",
         {"controller_epoch": 4, "leader": 2, "leader_epoch": 0, "isr": [2, 3], "zk_version": 0, "replicas": [2, 3]}),
        ("LeaderAndIsrPartitionState(topicName='audit', partitionIndex=0, controllerEpoch=7, leader=1, leaderEpoch=0, "
         "isr=[1, 3], partitionEpoch=0, replicas=[1, 3], addingReplicas=[], removingReplicas=[], isNew=true, "
         "leaderRecoveryState=0)",
         {"partition": "audit-0", "controller_epoch": 7, "leader": 1, "leader_epoch": 0, "isr": [1, 3],
          "zk_version": 0, "replicas": [1, 3]}),
    ],
)
def test_renderings_of_each_release(text: str, expected: dict[str, object]) -> None:
    assert parse_rendering(text) == expected


def test_partition_names_of_each_release() -> None:
    assert partition_name("[orders,0]") == "orders-0"
    assert partition_name("my-topic-12") == "my-topic-12"
    with pytest.raises(LogLineError, match="leader is 'x'"):
        parse_rendering("LeaderAndIsr(leader=x, leaderEpoch=1)")


# -- the table -------------------------------------------------------------------------------------------------


def test_the_table_is_well_formed() -> None:
    for row in fm.FORMATS:
        assert fm.LINES.index(row.first) <= fm.LINES.index(row.last), row.template
        assert set(fm.placeholders(row.template)) <= set(fm.PLACEHOLDERS), row.template
        assert row.kind != fm.SKIP or row.note, f"a skipped statement says why: {row.template}"
    templates = [(r.template, r.first) for r in fm.FORMATS]
    assert len(templates) == len(set(templates))
    assert all(count > 0 for count in fm.rows_per_line().values())


def test_the_committed_fixtures_are_what_the_renderer_prints() -> None:
    for path, text in fixtures().items():
        assert path.read_text() == text, f"{path}: run `python tests/kafka_fixtures.py`"


def test_the_docs_table_is_the_format_table() -> None:
    assert DOCS.read_text() == docs_with_table(DOCS.read_text()), "run `python tests/kafka_fixtures.py`"


@pytest.mark.parametrize("release", fm.LINES)
def test_a_healthy_run_renders_and_parses_back_in_every_release(release: str, tmp_path: Path) -> None:
    parsed = parse_kafka_log(_log(tmp_path, *render(printed(healthy(), release), release)))
    assert parsed.quarantine == [] and parsed.skipped == []
    assert len(parsed.events) == 1 + parsed.lines
    state: dict[str, Any] = {}
    for event in parsed.events:
        for var, value in event["state"].items():
            state[var] = {**state.get(var, {}), **value} if isinstance(value, dict) else value
    assert state["leader"] == {"orders-0": 1}
    assert state["assignment"] == {"orders-0": [0, 1]}
    assert state["role"] == {"0": {"orders-0": "leader"}, "1": {"orders-0": "leader"}}
    assert state["broker_controller_epoch"]["0"] == 2 and state["broker_controller_epoch"]["1"] == 2
    assert parsed.events[0]["args"]["brokers"] == [0, 1, 2]
    if fm.LINES.index(release) >= fm.LINES.index("1.1"):  # the LeaderAndIsr rendering of the controller
        assert state["isr"] == {"orders-0": [1]} and state["leader_epoch"] == {"orders-0": 1}
        assert state["partition_version"] == {"orders-0": 1}
    stale = parsed.events[-1]
    assert stale["args"]["applied"] is False and stale["args"]["controller_epoch"] == 1


@pytest.mark.parametrize("generation", sorted(FIXTURE_RELEASES))
def test_a_healthy_log_of_every_generation_shows_no_violation(generation: str) -> None:
    """Brokers 0 and 1: needs trace format v2 (broker 0 is no "no leader" there)."""
    events = parse_kafka_log(RENDERED / f"state-change-{generation}.log").events
    checker = InvariantChecker()
    assert [v for event in events for v in checker.step(event)] == []


# -- the defects of issue 22, one statement each --------------------------------------------------------------


@pytest.mark.parametrize("release", fm.LINES)
def test_a_controller_acts_in_the_epoch_it_won_and_in_none_once_resigned(release: str, tmp_path: Path) -> None:
    elected = _one(tmp_path, Line(fm.CONTROLLER_ELECT, {"c": 2, "e": 5}, logger=fm.CONTROLLER), release)
    assert elected["action"] == "ControllerElect"
    assert elected["state"]["acting_controller_epoch"] == {"2": 5}
    if any(f.kind == fm.CONTROLLER_RESIGN and f.covers(release) for f in fm.FORMATS):
        resigned = _one(tmp_path, Line(fm.CONTROLLER_RESIGN, {"c": 2}, logger=fm.CONTROLLER), release)
        assert (resigned["action"], resigned["state"]) == ("ControllerResign", {"acting_controller_epoch": {"2": 0}})


@pytest.mark.parametrize("release", fm.LINES)
def test_the_stale_controller_line_of_every_release(release: str, tmp_path: Path) -> None:
    event = _one(tmp_path, Line(fm.STALE_LEADER_AND_ISR, {"b": 0, "c": 2, "e": 4, "cid": 9, "latest": 5}), release)
    assert (event["actor"], event["action"]) == ("broker:0", "LeaderAndIsr")
    assert event["args"]["applied"] is False and event["args"]["correlation_id"] == 9
    assert event["state"] == {"broker_controller_epoch": {"0": 5}}


def test_completed_become_follower_with_leader_of_2_0(tmp_path: Path) -> None:
    line = Line(fm.COMPLETED, {"b": 2, "c": 1, "e": 3, "cid": 4, "partition": "t-0", "leader": 1}, role="follower")
    _, text = render_message(line, "2.0")
    assert text.endswith("become-follower transition for partition t-0 with leader 1")
    event = _one(tmp_path, line, "2.0")
    assert event["args"]["partitions"] == [{"partition": "t-0", "leader": 1}] and event["args"]["completed"]


def test_info_summaries_of_2_6_and_2_7(tmp_path: Path) -> None:
    lines = [
        Line(fm.SEND_OTHER, {"c": 0, "e": 1, "to": 2, "n": 3, "m": 1}),
        Line(fm.SEND_OTHER, {"c": 0, "e": 1, "n": 4}, extra={"brokers": "Set(0, 1, 2)"}),
        Line(fm.RECEIVED, {"b": 2, "c": 0, "cid": 5, "n": 4}),
        Line(fm.COMPLETED, {"b": 2, "c": 0, "cid": 5, "n": 4, "ms": 12}),
        Line(fm.LOCAL_LEADER, {"b": 2, "partition": "t-0", "le": 3, "off": 0, "hw": 0, "old": 2, "isr": [2, 0]}),
        Line(fm.LOCAL_FOLLOWER, {"b": 0, "partition": "t-0", "le": 3, "off": 0, "hw": 0, "old": 2}),
        Line(fm.UPDATE_METADATA, {"b": 0, "c": 0, "e": 1, "cid": 6, "n": 4, "m": 0}),
    ]
    text = render(lines, "2.7")
    assert [t.split("] ")[1].split(" ")[0] for t in text] == ["INFO"] * 7
    assert "Sending UpdateMetadata request to brokers Set(0, 1, 2) for 4 partitions" in text[1]
    parsed = parse_kafka_log(_log(tmp_path, *text))
    assert parsed.quarantine == [] and len(parsed.events) == 8
    leader, follower = parsed.events[5], parsed.events[6]
    assert leader["state"] == {"role": {"2": {"t-0": "leader"}}, "local_leader_epoch": {"2": {"t-0": 3}},
                               "local_isr": {"2": {"t-0": [2, 0]}}, "hw": {"2": {"t-0": 0}},
                               "epoch_start_offset": {"2": {"t-0": 0}}}
    assert follower["state"] == {"role": {"0": {"t-0": "follower"}}, "local_leader_epoch": {"0": {"t-0": 3}},
                                 "hw": {"0": {"t-0": 0}}}


@pytest.mark.parametrize(
    ("release", "line", "action"),
    [
        ("1.1", Line(fm.SEND_OTHER, {"c": 0, "e": 1, "partition": "t-0"},
                     extra={"blob": "PartitionState(...)", "brokers": "Set(0, 1)"}), "BrokerChange"),
        ("2.4", Line(fm.UPDATE_METADATA, {"b": 0, "c": 1, "e": 2, "cid": 3, "partition": "t-0"},
                     extra={"blob": "UpdateMetadataPartitionState(topicName='t')"}), "UpdateMetadata"),
        ("0.10.2", Line(fm.UPDATE_METADATA, {"b": 0, "c": 1, "e": 2, "cid": 3, "partition": "t-0"}), "UpdateMetadata"),
        ("2.4", Line(fm.FAILED_CHANGE, {"c": 1, "e": 2, "partition": "t-0", "src": "OfflinePartition",
                                        "dst": "OnlinePartition"}), "BrokerChange"),
        ("1.0", Line(fm.STOP_REPLICA, {"b": 0, "partition": "t-0", "delete": True}), "StopReplica"),
        ("2.6", Line(fm.STOP_REPLICA, {"b": 0, "c": 1, "e": 2, "cid": 3, "partition": "t-0"},
                     extra={"blob": "StopReplicaPartitionState(partitionIndex=0)"}), "StopReplica"),
        ("3.0", Line(fm.STALE_STOP_REPLICA, {"b": 0, "c": 1, "e": 2, "cid": 3, "latest": 4}), "StopReplica"),
        ("0.8.2", Line(fm.STALE_STOP_REPLICA, {"b": 0, "e": 2, "latest": 4}), "StopReplica"),
        ("2.0", Line(fm.RESPONSE, {"c": 1, "e": 2, "cid": 3},
                     extra={"any": "LeaderAndIsrResponse(error=NONE)", "api": "LEADER_AND_ISR",
                            "node": "kafka-0:9092 (id: 0 rack: null)"}), "BrokerChange"),
        ("0.9", Line(fm.RESPONSE, {"c": 1, "e": 2}, extra={"any": "Name: StopReplicaResponse", "node": "id:0"}),
         "BrokerChange"),
    ],
)
def test_statements_once_quarantined_become_events(release: str, line: Line, action: str, tmp_path: Path) -> None:
    event = _one(tmp_path, line, release)
    assert event["action"] == action


def test_the_broker_side_of_update_metadata_and_stop_replica_carries_the_controller_epoch(tmp_path: Path) -> None:
    event = _one(tmp_path, Line(fm.UPDATE_METADATA, {"b": 0, "c": 1, "e": 2, "cid": 3, "partition": "t-0"}), "1.1")
    assert event["state"] == {"broker_controller_epoch": {"0": 2}}
    deleted = parse_kafka_log(_log(tmp_path, "[2024-01-01 00:00:00,000] TRACE [Broker id=0] Deleted partition t-0 "
                                   "from metadata cache in response to UpdateMetadata request sent by controller 1 "
                                   "epoch 2 with correlation id 3 (state.change.logger)")).events[-1]
    assert deleted["action"] == "UpdateMetadata" and deleted["args"]["partition"] == "t-0"


def test_with_leader_and_assigned_replicas_of_0_8_to_1_0(tmp_path: Path) -> None:
    ctl = {"c": 0, "e": 1, "partition": "t-0"}
    created = _one(tmp_path, Line(fm.PARTITION_STATE, {**ctl, "src": "NonExistentPartition", "dst": "NewPartition",
                                                       "replicas": [0, 2]}), "1.0")
    assert created["state"]["assignment"] == {"t-0": [0, 2]} and created["action"] == "TopicChange"
    online = _one(tmp_path, Line(fm.PARTITION_STATE, {**ctl, "src": "NewPartition", "dst": "OnlinePartition",
                                                      "leader": 0}), "0.9")
    assert online["state"]["leader"] == {"t-0": 0} and online["action"] == "TopicChange"
    offline = _one(tmp_path, Line(fm.PARTITION_STATE, {**ctl, "src": "OfflinePartition", "dst": "OnlinePartition",
                                                       "leader": -1}), "0.8.2")
    assert offline["args"]["leader"] == NO_LEADER and offline["action"] == "BrokerChange"
    assert "leader" not in offline["state"]  # its leader epoch comes with the LeaderAndIsr sent next


@pytest.mark.parametrize("release", ["3.3", "3.9"])
def test_the_partition_epoch_of_3_x_is_the_partition_version(release: str, tmp_path: Path) -> None:
    state = {"leader": 0, "leader_epoch": 4, "isr": [0], "zk_version": 9, "controller_epoch": 1, "replicas": [0, 1]}
    event = _one(tmp_path, Line(fm.PARTITION_STATE, {"c": 0, "e": 1, "partition": "t-0", "src": "OnlinePartition",
                                                     "dst": "OnlinePartition", "state": state}), release)
    assert event["state"]["partition_version"] == {"t-0": 9}


def test_a_reassignment_request_gives_the_stores_isr_and_keeps_its_replica_list_as_an_argument(
        tmp_path: Path) -> None:
    """Step 7 of Kafka 2.3.0's reassignment sends RAR ([2, 1]) with the store's ISR, which still holds the
    retired broker 3, while the store's assignment is still OAR + RAR: the list is no store assignment, and
    the ISR outside it no violation (docs/invariants.md, IsrSubsetOfReplicas)."""
    state = {"leader": 1, "leader_epoch": 2, "isr": [1, 2, 3], "zk_version": 3, "controller_epoch": 1}
    for release in ("1.1", "2.6"):
        event = _one(tmp_path, Line(fm.REASSIGNMENT_SENT, {"c": 0, "e": 1, "partition": "t-0", "leader": 1,
                                                           "replicas": [2, 1], "state": state}), release)
        assert event["action"] == "PartitionReassignment"
        assert event["args"]["replicas"] == [2, 1] and "assignment" not in event["state"]
        assert event["state"]["isr"] == {"t-0": [1, 2, 3]}
        assert InvariantChecker().step(event) == []


def test_a_reassignment_renders_its_adding_and_removing_replicas(tmp_path: Path) -> None:
    state = {"leader": 3, "leader_epoch": 2, "isr": [3, 2], "zk_version": 4, "controller_epoch": 1,
             "replicas": [2, 1, 3], "adding": [1], "removing": [3]}
    line = Line(fm.SEND_LEADER_AND_ISR, {"c": 2, "e": 1, "partition": "t-0", "to": 1, "state": state}, role="follower")
    _, text = render_message(line, "2.4")
    assert "replicas=[2, 1, 3], addingReplicas=[1], removingReplicas=[3], isNew=false" in text
    sent = Line(fm.REASSIGNMENT_SENT, {"c": 2, "e": 1, "partition": "t-0", "leader": 3, "replicas": [2, 1, 3],
                                       "adding": [1], "removing": [3], "state": state})
    assert "new replica assignment ReplicaAssignment(replicas=2,1,3, addingReplicas=1, removingReplicas=3) to " \
           "leader 3" in render_message(sent, "2.6")[1]
    sent_event = _one(tmp_path, line, "2.4")
    assert sent_event["args"]["replicas"] == [2, 1, 3] and "assignment" not in sent_event["state"]


def test_controller_log_elections(tmp_path: Path) -> None:
    path = _log(tmp_path, *render([Line(fm.CONTROLLER_ELECT, {"c": 0, "e": 3, "v": 2}, logger=fm.CONTROLLER),
                                   Line(fm.CONTROLLER_RESIGN, {"c": 0}, logger=fm.CONTROLLER)], "2.4"),
                "[2024-01-01 00:00:01,000] INFO [Controller id=0] Newly added brokers: 1, deleted brokers: , "
                "all live brokers: 0,1 (kafka.controller.KafkaController)",
                # a message no release prints
                "[2024-01-01 00:00:02,000] INFO [Controller id=0] Partition t-0 is now under reassignment "
                "(kafka.controller.KafkaController)", name="controller.log")
    parsed = parse_kafka_log(path)
    assert [e["action"] for e in parsed.events] == ["Init", "ControllerElect", "ControllerResign"]
    assert parsed.events[1]["state"] == {"controller": 0, "controller_epoch": 3, "acting_controller_epoch": {"0": 3}}
    assert [s["line"] for s in parsed.skipped] == [3]
    assert str(parsed.skipped[0]["reason"]).startswith("skipped on purpose: broker membership")
    assert parsed.quarantine == [{"file": str(path), "line": 4, "reason": "unrecognised controller message"}]


# -- lines that observe a request's outcome: the sub-steps, the stopped replica, the selected leader ------------


def _checked(tmp_path: Path, lines: list[str]) -> tuple[list[Event], set[tuple[str, int]]]:
    """The events of a rendered log and the (invariant, seq) of every violation the checker finds."""
    events = parse_kafka_log(_log(tmp_path, *lines)).events
    checker = InvariantChecker()
    return events, {(v.invariant, event["seq"]) for event in events for v in checker.step(event)}


def _step(kind: str, role: str, epoch: int) -> Line:
    values = {"b": 0, "c": 1, "e": epoch, "cid": 7, "partition": "t-0", "leader": 1, "le": 4, "n": 1}
    return Line(kind, values, role=role, extra={"node": "kafka-1:9092"})


# Every sub-step each release prints: fetchers stopped (leader, follower), log truncated and fetcher started
# (follower, to 2.5).
_STEPS = [(kind, role, release) for kind in (fm.FETCHERS_STOPPED, fm.LOG_TRUNCATED, fm.FETCHER_STARTED)
          for role in ("leader", "follower") for release in fm.LINES if prints(_step(kind, role, 4), release)]


@pytest.mark.parametrize(("kind", "role", "release"), _STEPS)
def test_a_sub_step_of_an_old_controller_epoch_is_flagged(kind: str, role: str, release: str,
                                                          tmp_path: Path) -> None:
    """Broker 0 knows controller epoch 5; a sub-step of a request of epoch 4 says it applied that request."""
    known = Line(fm.STALE_LEADER_AND_ISR, {"b": 0, "c": 2, "e": 3, "cid": 1, "latest": 5})
    stale, current = _step(kind, role, 4), _step(kind, role, 5)
    events, found = _checked(tmp_path, render([known, stale, current], release))
    assert found == {("StaleControllerFenced", 2)}
    applied = events[2]
    assert (applied["actor"], applied["action"]) == ("broker:0", "LeaderAndIsr")
    assert applied["args"]["applied"] is True and applied["args"]["controller_epoch"] == 4
    names_partition = "partitions" in applied["args"]
    assert applied["state"] == ({"role": {"0": {"t-0": role}}} if names_partition else {})
    assert events[3]["state"] == {}  # the same observation again, of the current epoch: nothing new


def test_the_sub_steps_of_2_4_name_the_leader_of_a_broker_end_point(tmp_path: Path) -> None:
    line = Line(fm.FETCHER_STARTED, {"b": 1, "c": 2, "e": 1, "cid": 15, "partition": "t-0", "leader": 3},
                role="follower", extra={"node": "kafka3:9092"})
    assert render_message(line, "2.4")[1].endswith("with leader BrokerEndPoint(id=3, host=kafka3:9092)")
    assert _one(tmp_path, line, "2.4")["args"]["partitions"] == [{"partition": "t-0", "leader": 3}]


@pytest.mark.parametrize("release", ["0.8.2", "0.10.2", "1.0", "2.5"])
def test_a_finished_stop_replica_removes_the_replica(release: str, tmp_path: Path) -> None:
    became = Line(fm.BECOME, {"b": 0, "c": 1, "e": 2, "cid": 3, "partition": "t-0"}, role="leader")
    stop, delete = (Line(fm.STOPPED_REPLICA, {"b": 0, "partition": "t-0", "delete": d}) for d in (False, True))
    events, found = _checked(tmp_path, render([became, stop, stop, delete], release))
    assert found == set()
    assert [(e["action"], e["args"].get("completed")) for e in events[2:]] == [("StopReplica", True)] * 3
    assert events[2]["state"] == {"role": {"0": {"t-0": None}}}
    assert events[3]["state"] == {}  # stopped already
    assert events[4]["args"]["delete"] is True and events[4]["state"] == {}  # no leader epoch was seen
    leader = Line(fm.LOCAL_LEADER, {"b": 0, "partition": "t-0", "le": 3, "off": 0, "hw": 0, "old": 2, "isr": [0]})
    gone = parse_kafka_log(_log(tmp_path, *render([leader], "2.6"), *render([delete], "2.5"))).events[-1]
    assert gone["state"] == {"role": {"0": {"t-0": None}}, "local_leader_epoch": {"0": {"t-0": None}},
                             "local_isr": {"0": {"t-0": None}}}


@pytest.mark.parametrize("release", ["0.8.2", "0.9", "0.10.1", "0.11", "1.0"])
def test_the_offline_leader_selector_writes_the_store(release: str, tmp_path: Path) -> None:
    """OfflinePartitionLeaderSelector (controller.log, 0.8.2-1.0): a selection that names a second leader in
    the store's leader epoch is flagged; the next epoch's is not."""
    state = {"leader": 1, "leader_epoch": 1, "isr": [1, 2], "zk_version": 1, "controller_epoch": 3,
             "replicas": [1, 2]}
    sent = Line(fm.SEND_LEADER_AND_ISR, {"c": 0, "e": 3, "to": 1, "cid": 4, "partition": "t-0", "state": state},
                role="leader")
    second, next_epoch = (Line(fm.SELECTED_LEADER, {"partition": "t-0", "state": {**state, "leader": 2,
                                                                                   "leader_epoch": epoch}},
                               logger=fm.SELECTOR) for epoch in (1, 2))
    text = render([sent, second, next_epoch], release)
    assert text[1].endswith('[OfflinePartitionLeaderSelector]: Selected new leader and ISR {"leader":2,'
                            '"leader_epoch":1,"isr":[1,2]} for offline partition ' +
                            ("[t,0]" if release != "1.0" else "t-0") +
                            " (kafka.controller.OfflinePartitionLeaderSelector)")
    events, found = _checked(tmp_path, text)
    assert found == {("OneLeaderPerEpoch", 2)}
    assert (events[3]["actor"], events[3]["action"]) == ("observer", "BrokerChange")
    assert events[2]["state"] == {"leader": {"t-0": 2}} and events[3]["state"] == {"leader_epoch": {"t-0": 2}}


def test_the_selector_s_other_lines_are_skipped_with_their_reason(tmp_path: Path) -> None:
    path = _log(tmp_path, "[2017-12-02 02:47:36,350] WARN [OfflinePartitionLeaderSelector]: No broker in ISR is alive "
                "for [t,0]. Elect leader 2 from live brokers 2,3. There's potential data loss. "
                "(kafka.controller.OfflinePartitionLeaderSelector)",
                "[2017-12-02 02:47:36,351] DEBUG [ControlledShutdownLeaderSelector]: Partition t-0 : current leader "
                "= 3, new leader = 2 (kafka.controller.ControlledShutdownLeaderSelector)", name="controller.log")
    parsed = parse_kafka_log(path)
    assert parsed.quarantine == [] and len(parsed.events) == 1
    assert [s["reason"].split(":")[1].strip()[:20] for s in parsed.skipped] == ["how the offline part",
                                                                                 "logger kafka.control"]


def test_a_list_that_lost_the_space_after_its_bracket_reads_the_same(tmp_path: Path) -> None:
    """File 42 of the corpus: `addingReplicas []removingReplicas []` (2.6-3.2 print a space between; the `]`
    closes the list, so no value changes). Any other lost space is still no statement of Kafka's."""
    line = Line(fm.LOCAL_LEADER, {"b": 1, "partition": "t-0", "le": 1, "off": 1, "hw": 1, "old": 0, "isr": [1, 3]})
    text = render([line], "3.2")[0]
    lost = text.replace("addingReplicas [] removingReplicas", "addingReplicas []removingReplicas")
    read = [parse_kafka_log(_log(tmp_path, t, name=f"{n}.log")) for n, t in enumerate((text, lost))]
    assert read[0].events[1]["state"] == read[1].events[1]["state"] != {}
    other = parse_kafka_log(_log(tmp_path, text.replace("starts at", "startsat"), name="other.log"))
    assert other.quarantine[0]["reason"] == "unrecognised broker message"


# -- the fixtures with planted faults ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "lines", "quarantined", "skipped"),
    [
        ("state-change-0.10.log", 19, {}, {14: "skipped on purpose: stack trace of line 13"}),
        ("state-change-1.1.log", 14, {12: "malformed rendering: leader is 'three'",
                                      14: "unrecognised controller message"}, {}),
        ("state-change-2.4.log", 9, {8: "malformed rendering: no partition", 9: "truncated file"}, {}),
    ],
)
def test_every_line_is_an_event_skipped_or_quarantined(name: str, lines: int, quarantined: dict[int, str],
                                                       skipped: dict[int, str]) -> None:
    parsed = parse_kafka_log(DATA / name)
    assert parsed.lines == lines
    for found, expected in ((parsed.quarantine, quarantined), (parsed.skipped, skipped)):
        assert {int(q["line"]) for q in found} == expected.keys()
        for entry in found:
            assert str(entry["reason"]).startswith(expected[int(entry["line"])])
            assert entry["file"] == str(DATA / name)
    # One event per line kept, after the Init the parser makes up from what the log shows first.
    assert len(parsed.events) == 1 + lines - len(quarantined) - len(skipped)
    assert parsed.events[0]["action"] == "Init" and parsed.events[0]["full"] is True


@pytest.mark.parametrize("log", [*sorted(DATA.glob("*.log")), *sorted(RENDERED.glob("*.log"))],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_parsed_logs_are_valid_traces(log: Path, tmp_path: Path) -> None:
    """The hand fixtures and the rendered ones, whose brokers are 0 and 1 (trace format v2)."""
    events = parse_kafka_log(log).events
    path = tmp_path / f"{log.stem}.jsonl"
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    assert len(load_trace(path)) == len(events)


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
        # line 11 sends an ISR outside the request's replicas: no violation, a request's replicas are the
        # controller's memory, not the store's assignment (docs/invariants.md, IsrSubsetOfReplicas)
        ("ValidReplicaTransitions", 12, "state-change-1.1.log:13"),
    }
    assert _violations("state-change-2.4.log") == {("StaleControllerFenced", 7, "state-change-2.4.log:7")}


def test_the_0_10_log_observes_the_failover() -> None:
    events, _, _ = _parsed("state-change-0.10.log")
    last = events[-1]
    assert last["actor"] == "controller:1"
    assert last["args"]["to"] == 2
    assert last["state"] == {"leader": {"orders-0": 2}, "leader_epoch": {"orders-0": 1}, "isr": {"orders-0": [2]}}
    elected = events[-2]
    assert elected["args"]["leader"] == 2 and "leader" not in elected["state"]
    follower = next(e for e in events if e["actor"] == "broker:2" and e["args"].get("applied"))
    assert follower["state"] == {"role": {"2": {"orders-0": "follower"}},
                                 "local_leader_epoch": {"2": {"orders-0": 0}},
                                 "broker_controller_epoch": {"2": 1}}


# -- layouts ----------------------------------------------------------------------------------------------------


def test_wrappers_layouts_wrapped_lines_and_stack_traces(tmp_path: Path) -> None:
    lines = render(healthy()[:4], "2.4")
    strimzi = [f"{t[1:24]} {t[26:].replace(' (state.change.logger)', '')} (state.change.logger) "
               f"[controller-event-thread]" for t in lines]
    cut = len(lines[3]) // 2
    texts = {
        "docker": [f"kafka_1  | {t}" for t in lines],
        "grep": [f"broker-1/state-change.log:{t}" for t in lines],
        "strimzi": strimzi,
        "wrapped": [*lines[:3], lines[3][:cut], lines[3][cut:]],
        "spaces": [*lines[:3], lines[3][:lines[3].index(" with state")], lines[3][lines[3].index(" with state") + 1:]],
        "stack": [*lines, "org.apache.kafka.common.errors.NotLeaderForPartitionException: no",
                  "\tat kafka.X.y(X.scala:1)"],
        "docker-times": [f"broker1   | 2020-09-22T06:34:31.523787776Z {t}" for t in lines],
        "embedded": [f"07:08:49,859  INFO || - [KafkaContainer] STDOUT: {t}" for t in lines],
        "indented": [f"    {t}" for t in lines],
        "undated": [t[26:] for t in lines],
    }
    for name, text in texts.items():
        parsed = parse_kafka_log(_log(tmp_path, *text, name=f"{name}.log"))
        assert parsed.quarantine == [], name
        assert len(parsed.events) == 5, name
    assert parse_kafka_log(tmp_path / "strimzi.log").layout == "strimzi"
    assert {s["reason"] for s in parse_kafka_log(tmp_path / "stack.log").skipped} == {
        "skipped on purpose: stack trace of line 4"}


def test_other_loggers_are_skipped_not_quarantined(tmp_path: Path) -> None:
    parsed = parse_kafka_log(_log(tmp_path, "[2024-01-01 00:00:00,000] INFO Kafka version: 2.4.1 "
                                  "(org.apache.kafka.common.utils.AppInfoParser)"))
    assert parsed.quarantine == [] and parsed.skipped[0]["reason"].startswith("skipped on purpose: logger")


def test_a_log_pattern_of_the_user(tmp_path: Path) -> None:
    message = render_message(healthy()[0], "2.4")[1]
    path = _log(tmp_path, f"26/11/2026 06:00:00.123 TRACE  state.change.logger - [main] {message}")
    parsed = parse_kafka_log(path, pattern="%d{dd/MM/yyyy HH:mm:ss.SSS} %-5p %c - [%t] %m%n")
    assert parsed.quarantine == [] and len(parsed.events) == 2
    assert parse_kafka_log(path).quarantine[0]["reason"].startswith("not a log line: no kafka layout")
    short = _log(tmp_path, f"06:00:00 INFO logger: {render_message(healthy()[0], '2.4')[1]}",
                 name="short.log")  # %c{1}: the last part of state.change.logger
    assert len(parse_kafka_log(short, pattern="%d{HH:mm:ss} %p %c{1}: %m%n").events) == 2


@pytest.mark.parametrize("pattern", ["%d %Q %m%n", "%d %p%n"])
def test_an_unreadable_log_pattern_is_a_usage_error(pattern: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--log-pattern"):
        parse_kafka_log(_log(tmp_path, "x"), pattern=pattern)


def test_an_unreadable_log_pattern_on_the_command_line_exits_2(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, "x")
    code = pipeline_main(["ingest", "--kafka-log", str(log), "--log-pattern", "[%d] %Q %m", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("kcm: error: --log-pattern: unknown conversion %Q")


def test_no_input_crashes_the_parser(tmp_path: Path) -> None:
    rng = random.Random(22)
    pieces = [*render(healthy(), "0.10.2"), *render(printed(healthy(), "3.9"), "3.9"),
              "\tat x", "kafka_1 | ", "[", "\xff", ""]
    for attempt in range(50):
        lines = []
        for _ in range(rng.randint(1, 30)):
            text = rng.choice(pieces)
            cut = rng.randint(0, len(text))
            lines.append(text[:cut] + rng.choice(["", "]", ")", "=x", " (state.change.logger)"]) + text[cut:])
        path = tmp_path / f"fuzz-{attempt}.log"
        path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + rng.choice([b"", b"\n", b"\xff\n"]))
        parsed = parse_kafka_log(path)
        assert len(parsed.events) - 1 + len(parsed.skipped) + len(parsed.quarantine) == parsed.lines


# -- real logs of Kafka 3.9.2 and 2.8.2 brokers that kcm ran under faults (excerpts, copied as printed) ---------

_REAL_RUNS = ("kafka-3.9.2-state-change.log", "kafka-3.9.2-state-change-reelected.log", "kafka-2.8.2-controller.log",
              "kafka-3.9.2-controller-broker-1.log", "kafka-3.9.2-controller-broker-3.log",
              "kafka-3.9.2-controller-rejected-alter.log")


@pytest.mark.parametrize("name", _REAL_RUNS)
def test_every_line_of_a_real_run_is_an_event_or_a_stated_skip(name: str) -> None:
    parsed = parse_kafka_log(DATA / name)
    assert parsed.quarantine == []
    assert all(str(entry["reason"]).startswith("skipped on purpose: ") for entry in parsed.skipped)
    assert len(parsed.events) == 1 + parsed.lines - len(parsed.skipped)
    assert InvariantChecker().check_all(parsed.events).violations == []


def _at(events: list[Event], name: str, line: int) -> Event:
    return next(e for e in events if e["args"].get("log") == f"{name}:{line}")


def test_the_starts_at_lines_are_events_whose_high_watermark_is_observed() -> None:
    name = "kafka-3.9.2-state-change.log"
    events = parse_kafka_log(DATA / name).events
    follower = _at(events, name, 1)  # Follower t-0 starts at leader epoch 2 from offset 0 ... high watermark 0
    assert follower["action"] == "LeaderAndIsr" and follower["state"]["hw"] == {"1": {"t-0": 0}}
    assert "epoch_start_offset" not in follower["state"]  # a follower holds no epoch start
    leader = _at(events, name, 14)  # Leader t-1 ... starts at leader epoch 3 from offset 1866 ... high watermark 1865
    assert leader["state"]["hw"] == {"1": {"t-1": 1865}}
    assert leader["state"]["epoch_start_offset"] == {"1": {"t-1": 1866}}
    assert leader["state"]["local_isr"] == {"1": {"t-1": [2, 1]}}
    report = InvariantChecker().check_all(events)
    assert report.verdict("HighWatermarkMonotonic") == "holds"


def test_a_failed_election_is_an_event_with_the_reason_its_exception_gives() -> None:
    name = "kafka-3.9.2-state-change.log"
    parsed = parse_kafka_log(DATA / name)
    failed = _at(parsed.events, name, 20)
    assert failed["args"]["failed"] == {
        "partition": "__consumer_offsets-3", "src": "OfflinePartition", "dst": "OnlinePartition",
        "reason": "no leader elected (ControlledShutdownPartitionLeaderElectionStrategy)"}
    assert "invalid_transitions" not in failed["args"]
    assert set(failed["state"]) <= {"acting_controller_epoch"}  # no state machine moved
    assert {int(e["line"]) for e in parsed.skipped} >= set(range(21, 42))  # its stack trace


def test_a_failed_zookeeper_write_of_an_isr_keeps_its_exception() -> None:
    name = "kafka-3.9.2-controller-broker-3.log"
    failed = _at(parse_kafka_log(DATA / name).events, name, 12)
    assert failed["args"]["failed"]["reason"].startswith("org.apache.zookeeper.KeeperException$SessionExpired")


@pytest.mark.parametrize(("src", "dst", "violated"), [("OnlinePartition", "NewPartition", False),
                                                        ("OfflinePartition", "OnlinePartition", True)])
def test_a_change_refused_by_the_table_is_held_to_the_models_table(tmp_path: Path, src: str, dst: str,
                                                                     violated: bool) -> None:
    """The exception is logInvalidTransition's (controller/PartitionStateMachine.scala, 3.9.2): a refusal of the
    table the model's table agrees with holds; one of a change the model allows is a different table."""
    line = Line(fm.FAILED_CHANGE, {"c": 1, "e": 4, "partition": "t-0", "src": src, "dst": dst})
    exception = (f"java.lang.IllegalStateException: Partition t-0 should be in one of NonExistentPartition states "
                 f"before moving to {dst} state. Instead it is in {src} state")
    parsed = parse_kafka_log(_log(tmp_path, *render([line], "3.9"), exception))
    event = parsed.events[-1]
    assert event["args"]["invalid_transitions"] == [["partition", "t-0", src, dst]]
    report = InvariantChecker().check_all(parsed.events)
    assert (report.verdict("ValidPartitionTransitions") == "violated") is violated


@pytest.mark.parametrize(("name", "line", "state"), [
    ("kafka-3.9.2-controller-broker-1.log", 8,
     {"leader": {"t-1": 3}, "leader_epoch": {"t-1": 5}, "isr": {"t-1": [1, 3, 2]}, "partition_version": {"t-1": 8}}),
    ("kafka-2.8.2-controller.log", 8, {"isr": {"t-1": [3, 2, 1]}, "partition_version": {"t-1": 5}}),
])
def test_an_isr_the_controller_wrote_for_a_leader_is_the_stores(name: str, line: int, state: dict[str, Any]) -> None:
    event = _at(parse_kafka_log(DATA / name).events, name, line)
    assert event["actor"] == "observer" and event["args"]["alter_partition"] is True
    assert event["state"] == state


# -- a controller elected again: its machines loaded afresh ------------------------------------------------------

_REELECTED = "kafka-3.9.2-state-change-reelected.log"  # broker 1 of a 3.9.2 run, lines 300-361, as printed


def _transition_violations(path: Path) -> tuple[list[Event], set[tuple[str, str]]]:
    events = parse_kafka_log(path).events
    report = InvariantChecker().check_all(events)
    return events, {(v.invariant, str(events[v.seq]["args"].get("log"))) for v in report.violations}


def test_a_controller_elected_again_starts_from_the_context_it_loads() -> None:
    """Controller 1 resigned in epoch 3 (u-0's replicas being deleted) and won epoch 4 (line 21): its new context
    (ReplicaStateMachine.initializeReplicaState, Kafka 3.9.2) holds u-0's live replicas Online, which the startup
    transitions then leave (line 24); no line prints the load, so the period's first line carries it."""
    events, found = _transition_violations(DATA / _REELECTED)
    assert found == set()
    loaded = _at(events, _REELECTED, 21)
    assert (loaded["actor"], loaded["action"]) == ("broker:1", "ControllerElect")
    assert loaded["args"]["context_load"] == {"synthesized": True, "controller_epoch": 4, "line_action": "BrokerChange"}
    assert ["replica", "u-0", "2", None, "OnlineReplica"] in loaded["args"]["transitions"]
    assert loaded["state"]["replica_state"]["1"]["u-0"] == {"2": "OnlineReplica", "3": "OnlineReplica"}
    assert loaded["state"]["acting_controller_epoch"] == {"1": 4}
    assert Validator(events).run(stop_at_first=False).failures == []


def test_without_a_new_controller_epoch_the_same_lines_break_the_table(tmp_path: Path) -> None:
    """The excerpt's epoch 4 made epoch 3: one controller period, in which u-0's replica 2 was moved from
    OnlineReplica while ReplicaDeletionSuccessful; and within epoch 4, a transition from a state the replica
    was not in is still found."""
    text = (DATA / _REELECTED).read_text()
    one_period = _log(tmp_path, *text.replace("epoch=4]", "epoch=3]").splitlines(), name="one-period.log")
    events, found = _transition_violations(one_period)
    assert ("ValidReplicaTransitions", "one-period.log:24") in found
    rejected = {f.seq for f in Validator(events).run(stop_at_first=False).failures}
    assert _at(events, "one-period.log", 24)["seq"] in rejected
    lines = text.splitlines()
    bad = lines[23].replace("from OnlineReplica to OnlineReplica", "from ReplicaDeletionSuccessful to OfflineReplica")
    within = _log(tmp_path, *lines, bad, name="within.log")
    assert _transition_violations(within)[1] == {("ValidReplicaTransitions", f"within.log:{len(lines) + 1}")}


def test_a_period_s_load_is_the_same_read_in_splits() -> None:
    whole = parse_kafka_log(DATA / _REELECTED).events
    for size in (64, 997, 4096):
        assert parse_kafka_log(DATA / _REELECTED, split_size=size).events == whole


def test_a_removal_from_an_isr_that_lacked_the_replica_writes_nothing() -> None:
    """Line 2 removes replica 3 from u-0's ISR [3] (the last member: kept, a new version written under epoch 3);
    line 62, in epoch 4, removes replica 2, which the ISR does not hold: Kafka prints the node as read, under
    its own epoch 4 (doRemoveReplicasFromIsr, 3.9.2), and wrote nothing. Read whole or in splits (the line's
    version test then needs the state at its split's start), the node keeps controller epoch 3."""
    for size in (None, 64, 997, 4096):
        events = (parse_kafka_log(DATA / _REELECTED) if size is None else
                  parse_kafka_log(DATA / _REELECTED, split_size=size)).events
        wrote = _at(events, _REELECTED, 2)["state"]
        assert wrote["partition_controller_epoch"] == {"u-0": 3} and wrote["partition_version"] == {"u-0": 2}
        assert _at(events, _REELECTED, 62)["state"] == {}
        assert events[-1]["seq"] == len(events) - 1


def test_a_removal_that_wrote_a_new_version_stamps_the_node_with_its_epoch(tmp_path: Path) -> None:
    text = (DATA / _REELECTED).read_text().splitlines()
    wrote = text[61].replace("ZkVersion:2,", "ZkVersion:3,")
    path = _log(tmp_path, *text[:61], wrote, name="wrote.log")
    for events in (parse_kafka_log(path).events, parse_kafka_log(path, split_size=64).events):
        assert _at(events, "wrote.log", 62)["state"] == {"partition_controller_epoch": {"u-0": 4},
                                                          "partition_version": {"u-0": 3}}


def test_an_alter_partition_the_controller_rejects_is_skipped_for_its_reason() -> None:
    """Broker 1 of a 3.9.2 campaign run, lines 32-86 of its controller.log, as printed: controller 1 rejects
    broker 3's AlterPartition naming broker 2, which is not live (KIP-841, KafkaController.processAlterPartition):
    nothing written, so no event."""
    parsed = parse_kafka_log(DATA / "kafka-3.9.2-controller-rejected-alter.log")
    rejected = next(e for e in parsed.skipped if int(e["line"]) == 49)
    assert rejected["reason"] == ("skipped on purpose: an AlterPartition refused (a replica not live in the new ISR, "
                                  "KIP-841; or a leader recovery state it may not take); nothing written")
    assert parsed.quarantine == []
