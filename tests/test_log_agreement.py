"""`kcm check-trace` and `kcm validate` agree on every run parsed from a Kafka log (tests/data/kafka, the corpus
under it included): the events the invariant checker flags are exactly those the Z3 step validator rejects,
none on a healthy log, and a planted anomaly at its own line. `tests/test_pipeline.py` holds `pipeline check`
to the same on the same logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline.kafka_log import parse_kafka_log
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.z3.validate import Validator
from kcm.tools.cli import main

DATA = Path(__file__).parent / "data" / "kafka"
LOGS = sorted(DATA.rglob("*.log"))

# Anomalies planted in a log: its lines `lines`, changed by `replace`, in their place (`after` None) or added
# after line `after`; the anomaly is at the last of them, and breaks `invariant`.
Plant = tuple[str, tuple[int, ...], int | None, tuple[tuple[str, str], ...], str]
# Broker 2 leads epoch 1 of orders-0 in the 0.10 log (line 19): made epoch 0, which broker 1 led.
SECOND_LEADER: Plant = ("state-change-0.10.log", (19,), None, (("LeaderEpoch:1", "LeaderEpoch:0"),),
                        "OneLeaderPerEpoch")
# Broker 1 leads epoch 0 of orders-0 in the 0.10 log (line 5): sent with an ISR without it.
LEADER_OUTSIDE_ISR: Plant = ("state-change-0.10.log", (5,), None, (("ISR:1,2", "ISR:2"),), "LeaderInIsr")
# Broker 3 of the 1.1 log has seen controller epoch 4 (line 7): the same request again, from epoch 3, applied.
STALE_APPLIED: Plant = ("state-change-1.1.log", (6, 7), 8,
                        (("epoch 4", "epoch 3"), ("correlation id 7", "correlation id 8"),
                         ("correlationId 7", "correlationId 8")), "StaleControllerFenced")

def _write(events: list[Event], path: Path) -> Path:
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    return path


def _flagged(events: list[Event]) -> dict[int, set[str]]:
    report = InvariantChecker().check_all(events)
    out: dict[int, set[str]] = {}
    for v in report.violations:
        out.setdefault(v.seq, set()).add(v.invariant.split("/")[0])
    return out


def _rejected(events: list[Event]) -> set[int]:
    return {f.seq for f in Validator(events).run(stop_at_first=False).failures}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    main([*argv, "--json"])
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def _agree(events: list[Event], path: Path, capsys: pytest.CaptureFixture[str]) -> dict[int, set[str]]:
    """Asserts the agreement on one run and returns the checker's violations by event."""
    flagged = _flagged(events)
    assert _rejected(events) == set(flagged)
    trace = _write(events, path)
    checked = _cli(capsys, "check-trace", str(trace))
    validated = _cli(capsys, "validate", str(trace))
    violations = checked["violations"]
    assert isinstance(violations, list)
    first = validated["first_unexplained"]
    assert (first is None) == (not violations)
    if violations:
        assert isinstance(first, dict) and first["seq"] == violations[0]["seq"]
    return flagged


def _case(log: Path) -> Any:
    return pytest.param(log, id=str(log.relative_to(DATA)))


@pytest.mark.parametrize("log", [_case(p) for p in LOGS])
def test_check_trace_and_validate_agree_on_every_log(log: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    events = parse_kafka_log(log).events
    flagged = _agree(events, tmp_path / f"{log.stem}.jsonl", capsys)
    # The faults planted in the hand-written logs (tests/test_kafka_log.py); every other log is healthy.
    planted = {DATA / "state-change-1.1.log": {10: {"OneLeaderPerEpoch"}, 12: {"ValidReplicaTransitions"}},
               DATA / "state-change-2.4.log": {7: {"StaleControllerFenced"}}}
    assert flagged == planted.get(log, {})


@pytest.mark.parametrize("plant", [SECOND_LEADER, LEADER_OUTSIDE_ISR, STALE_APPLIED],
                         ids=["second leader", "leader outside the ISR", "stale request applied"])
def test_a_planted_anomaly_is_flagged_and_rejected_at_its_line(plant: Plant, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    name, numbers, after, replace, invariant = plant
    lines = (DATA / name).read_text().splitlines(keepends=True)
    changed = []
    for number in numbers:
        line = lines[number - 1]
        for old, new in replace:
            line = line.replace(old, new)
        assert line != lines[number - 1]
        changed.append(line)
    if after is None:
        for number, line in zip(numbers, changed, strict=True):
            lines[number - 1] = line
        at_line = numbers[-1]
    else:
        lines[after:after] = changed
        at_line = after + len(changed)
    planted = tmp_path / name
    planted.write_text("".join(lines))
    events = parse_kafka_log(planted).events
    at = next(e["seq"] for e in events if e["args"].get("log") == f"{name}:{at_line}")
    flagged = _agree(events, tmp_path / "planted.jsonl", capsys)
    healthy = _flagged(parse_kafka_log(DATA / name).events)
    assert invariant in flagged[at]
    # Nothing else changed: the log's own faults stay where they were, one event later past the added lines.
    shift = 0 if after is None else len(changed)
    moved = {seq + (shift if seq > at - shift else 0): found for seq, found in healthy.items()}
    assert {seq: found for seq, found in flagged.items() if seq != at} == moved


# Lines of Kafka 1.1.0 in the default layout "[%d] %p %m (%c)%n", the prefix of StateChangeLogger.scala
# ("[$prefix id=$brokerId epoch=$epoch] ", without the epoch for a broker). A controller taking a partition
# online: controller/PartitionStateMachine.scala ("Changed partition $partition from ${partitionState(partition)}
# to $targetState with state ${...leaderAndIsr}"), api/LeaderAndIsr.scala's toString, the ISR a Scala List.
def _change(epoch: int, src: str, leader: int, leader_epoch: int, isr: str, version: int) -> str:
    return (f"[2019-05-14 11:02:10,310] TRACE [Controller id=1 epoch={epoch}] Changed partition t-0 from {src} to "
            f"OnlinePartition with state LeaderAndIsr(leader={leader}, leaderEpoch={leader_epoch}, isr=List({isr}), "
            f"zkVersion={version}) (state.change.logger)\n")


# Broker 3 receiving a request of controller 1 in epoch 3 and becoming a follower of broker 2:
# server/ReplicaManager.scala ("Received LeaderAndIsr request $stateInfo correlation id $correlationId from
# controller ${...controllerId} epoch ${...controllerEpoch} for partition $topicPartition", "Handling LeaderAndIsr
# request correlationId $correlationId from controller $controllerId epoch $epoch starting the become-follower
# transition for partition ${partition.topicPartition}") and LeaderAndIsrRequest.PartitionState's toString.
def _follow(correlation: int, leader_epoch: int, version: int) -> list[str]:
    return [f"[2019-05-14 11:02:11,000] TRACE [Broker id=3] Received LeaderAndIsr request PartitionState("
            f"controllerEpoch=3, leader=2, leaderEpoch={leader_epoch}, isr=2,3, zkVersion={version}, replicas=2,3, "
            f"isNew=false) correlation id {correlation} from controller 1 epoch 3 for partition t-0 "
            "(state.change.logger)\n",
            f"[2019-05-14 11:02:11,001] TRACE [Broker id=3] Handling LeaderAndIsr request correlationId {correlation} "
            "from controller 1 epoch 3 starting the become-follower transition for partition t-0 "
            "(state.change.logger)\n"]


@pytest.mark.parametrize(("lines", "expected"), [
    # Broker 2 joined the ISR (versions 1 and 2, written by the leader: no line of this log) before the
    # controller elected it; the state before the second line is not the one the first line showed.
    ([_change(3, "NewPartition", 1, 0, "1", 0), _change(3, "OnlinePartition", 2, 1, "2", 3)], {}),
    # The controller resigned and was elected again (epoch 5) between its lines: it loaded its machines afresh.
    ([_change(3, "NewPartition", 1, 0, "1", 0), _change(5, "OnlinePartition", 1, 1, "1", 1)], {}),
    # Broker 3 follows in leader epoch 5, then in epoch 4: Kafka ignores such a request ("... is not higher
    # than the current leader epoch"), so the last line is an anomaly.
    ([*_follow(1, 5, 7), *_follow(2, 4, 6)], {4: {"LeaderEpochMonotonic"}}),
], ids=["isr grown unseen", "controller re-elected unseen", "broker's leader epoch back"])
def test_inline_logs(lines: list[str], expected: dict[int, set[str]], tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "inline.log"
    log.write_text("".join(lines))
    events = parse_kafka_log(log).events
    assert len(events) == 1 + len(lines)
    assert _agree(events, tmp_path / "inline.jsonl", capsys) == expected
