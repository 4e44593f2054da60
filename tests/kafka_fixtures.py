"""The Kafka logs of tests/data/kafka, rendered from the statements of Kafka's source (formats.py) by the
renderer, so no fixture line is a guess; and the statement table of docs/pipeline.md, from the same
table. `python tests/kafka_fixtures.py` rewrites the files and the docs table; tests check they are what
this module renders.

- `state-change-<generation>.log` under `rendered/`: a healthy run on brokers 0, 1, 2 as each release
  generation logs it at TRACE: a topic created, a follower's and a leader's LeaderAndIsr, the leader's
  broker failing and the other replica elected, a request of the old controller ignored.
- `state-change-0.10.log`, `-1.1.log`, `-2.4.log`: runs with planted faults (two leaders in one leader
  epoch, an invalid replica transition, a request of an old controller epoch applied; a request whose ISR
  is outside its replicas is there too, as no fault) and broken lines (a non-integer leader, a rendering
  without its partition, a message of no release, a stack trace, a truncated last line). A broken line is
  a rendered line altered as noted.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.conformance.pipeline.kafka_log.renderer import Line, prints, render

DATA = Path(__file__).parent / "data" / "kafka"
RENDERED = DATA / "rendered"
# The release line each generation's fixture is rendered for: the last of the generation.
FIXTURE_RELEASES = {generation: last for generation, (_, last) in fm.GENERATIONS.items()}


def _state(leader: int, epoch: int, isr: list[int], version: int, controller_epoch: int, replicas: list[int],
           is_new: bool = False) -> dict[str, Any]:
    return {"leader": leader, "leader_epoch": epoch, "isr": isr, "zk_version": version,
            "controller_epoch": controller_epoch, "replicas": replicas, "is_new": is_new}


def _follower_steps(b: int, c: int, e: int, cid: int, p: str, leader: int) -> list[Line]:
    """ReplicaManager.makeFollowers' sub-steps for one partition (fetchers stopped, log truncated, fetcher
    started; 2.6+ logs only the first, as a summary of the request)."""
    values = {"b": b, "c": c, "e": e, "cid": cid, "partition": p, "leader": leader, "n": 1}
    endpoint = {"node": f"kafka-{leader}:9092"}  # BrokerEndPoint's host:port, 2.4-2.5
    return [Line(kind, values, role="follower", extra=endpoint)
            for kind in (fm.FETCHERS_STOPPED, fm.LOG_TRUNCATED, fm.FETCHER_STARTED)]


def _leader_step(b: int, c: int, e: int, cid: int, p: str) -> Line:
    """ReplicaManager.makeLeaders' `Stopped fetchers` line (`last update controller epoch` 1.0-2.5, a
    summary of the request from 2.6)."""
    return Line(fm.FETCHERS_STOPPED, {"b": b, "c": c, "e": e, "cid": cid, "partition": p, "le": e, "n": 1},
                role="leader")


# The kinds of the lines that observe the outcome of a request or an election another line already shows.
_OUTCOMES = frozenset({fm.FETCHERS_STOPPED, fm.LOG_TRUNCATED, fm.FETCHER_STARTED, fm.SELECTED_LEADER})


def printed(lines: list[Line], release: str) -> list[Line]:
    """The lines of a run that the release prints (2.6 dropped the truncation and fetcher lines)."""
    return [line for line in lines if prints(line, release)]


def healthy(p: str = "orders-0", c: int = 0, e: int = 2, brokers: tuple[int, int] = (0, 1)) -> list[Line]:
    """Topic `orders`, one partition on brokers 0 and 1 (controller 0, epoch 2); broker 0 fails and
    broker 1 leads (up to 1.0 the OfflinePartitionLeaderSelector's choice is logged, in controller.log);
    then broker 1 ignores a request of controller 2 of epoch 1."""
    a, b = brokers
    first = _state(a, 0, [a, b], 0, e, [a, b], is_new=True)
    second = _state(b, 1, [b], 1, e, [a, b])
    ctl = {"c": c, "e": e, "partition": p}
    return [
        Line(fm.PARTITION_STATE, {**ctl, "src": "NonExistentPartition", "dst": "NewPartition", "replicas": [a, b]}),
        Line(fm.REPLICA_STATE, {**ctl, "r": a, "src": "NonExistentReplica", "dst": "NewReplica"}),
        Line(fm.REPLICA_STATE, {**ctl, "r": b, "src": "NonExistentReplica", "dst": "NewReplica"}),
        Line(fm.PARTITION_STATE, {**ctl, "src": "NewPartition", "dst": "OnlinePartition", "leader": a,
                                  "state": first}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": a, "cid": 1, "state": first}, role="leader"),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": b, "cid": 1, "state": first}, role="follower"),
        Line(fm.REPLICA_STATE, {**ctl, "r": a, "src": "NewReplica", "dst": "OnlineReplica"}),
        Line(fm.REPLICA_STATE, {**ctl, "r": b, "src": "NewReplica", "dst": "OnlineReplica"}),
        Line(fm.RECEIVED, {"b": b, "c": c, "e": e, "cid": 1, "partition": p, "state": first}),
        Line(fm.BECOME, {"b": b, "c": c, "e": e, "cid": 1, "partition": p, "leader": a}, role="follower"),
        *_follower_steps(b, c, e, 1, p, a),
        Line(fm.COMPLETED, {"b": b, "c": c, "e": e, "cid": 1, "partition": p, "leader": a}, role="follower"),
        Line(fm.RECEIVED, {"b": a, "c": c, "e": e, "cid": 1, "partition": p, "state": first}),
        Line(fm.BECOME, {"b": a, "c": c, "e": e, "cid": 1, "partition": p}, role="leader"),
        _leader_step(a, c, e, 1, p),
        Line(fm.COMPLETED, {"b": a, "c": c, "e": e, "cid": 1, "partition": p}, role="leader"),
        Line(fm.PARTITION_STATE, {**ctl, "src": "OnlinePartition", "dst": "OfflinePartition"}),
        Line(fm.REPLICA_STATE, {**ctl, "r": a, "src": "OnlineReplica", "dst": "OfflineReplica"}),
        Line(fm.SELECTED_LEADER, {"partition": p, "state": second}, logger=fm.SELECTOR),  # controller.log to 1.0
        Line(fm.PARTITION_STATE, {**ctl, "src": "OfflinePartition", "dst": "OnlinePartition", "leader": b,
                                  "state": second}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": b, "cid": 2, "state": second}, role="leader"),
        Line(fm.RECEIVED, {"b": b, "c": c, "e": e, "cid": 2, "partition": p, "state": second}),
        Line(fm.BECOME, {"b": b, "c": c, "e": e, "cid": 2, "partition": p}, role="leader"),
        _leader_step(b, c, e, 2, p),
        Line(fm.COMPLETED, {"b": b, "c": c, "e": e, "cid": 2, "partition": p}, role="leader"),
        Line(fm.STALE_LEADER_AND_ISR, {"b": b, "c": 2, "e": e - 1, "cid": 7, "latest": e}),
    ]


def _faults_0_10() -> list[str]:
    """0.10.2's rendering of a topic creation and a failover on brokers 1 and 2, with a stack trace after line 13."""
    # Without the lines that only repeat what the others show (the sub-steps, the leader selector's choice):
    # tests/test_log_agreement.py plants anomalies at this log's line numbers.
    run = [line for line in healthy("orders-0", c=1, e=1, brokers=(1, 2)) if line.kind not in _OUTCOMES]
    lines = render(run[:18], "0.10.2")
    return [*lines[:13], "java.io.IOException: Connection to 1 was disconnected before the response was read",
            *lines[13:]]


def _faults_1_1() -> list[str]:
    """1.1: a partition given leader 3 and then leader 2 in the same leader epoch 1 (seq 10); no fault at seq 11,
    a LeaderAndIsr whose ISR 2,3 is outside its replicas 2, as step 7 of Kafka 2.3.0's reassignment sends it
    (docs/invariants.md, IsrSubsetOfReplicas); a non-integer leader (line 12: `leader=3` made `leader=three`),
    an invalid replica transition (seq 12), a message of no release (line 14)."""
    p, ctl = "payments-0", {"c": 2, "e": 4, "partition": "payments-0"}
    first = _state(2, 0, [2, 3], 0, 4, [2, 3], is_new=True)
    lines = render([
        Line(fm.PARTITION_STATE, {**ctl, "src": "NewPartition", "dst": "OnlinePartition", "state": first}),
        Line(fm.REPLICA_STATE, {**ctl, "r": 3, "src": "NewReplica", "dst": "OnlineReplica"}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 2, "state": first}, role="leader"),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 3, "state": first}, role="follower"),
        Line(fm.REPLICA_STATE, {**ctl, "r": 2, "src": "NewReplica", "dst": "OnlineReplica"}),
        Line(fm.RECEIVED, {"b": 3, "c": 2, "e": 4, "cid": 7, "partition": p, "state": first}),
        Line(fm.BECOME, {"b": 3, "c": 2, "e": 4, "cid": 7, "partition": p}, role="follower"),
        Line(fm.COMPLETED, {"b": 3, "c": 2, "e": 4, "cid": 7, "partition": p}, role="follower"),
        Line(fm.PARTITION_STATE, {**ctl, "src": "OnlinePartition", "dst": "OnlinePartition",
                                  "state": _state(3, 1, [3], 1, 4, [2, 3])}),
        Line(fm.PARTITION_STATE, {**ctl, "src": "OnlinePartition", "dst": "OnlinePartition",
                                  "state": _state(2, 1, [2, 3], 2, 4, [2, 3])}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 2, "state": _state(2, 1, [2, 3], 2, 4, [2])}, role="leader"),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 3, "state": _state(3, 1, [3], 1, 4, [2, 3])}, role="leader"),
        Line(fm.REPLICA_STATE, {**ctl, "r": 2, "src": "OnlineReplica", "dst": "ReplicaDeletionSuccessful"}),
    ], "1.1")
    lines[11] = lines[11].replace("leader=3,", "leader=three,")
    return [*lines, lines[0][:26] + "INFO [Controller id=2 epoch=4] Partition payments-0 is now under reassignment "
            "(state.change.logger)"]


def _faults_2_4() -> list[str]:
    """2.4: broker 3 ignores a request of the old controller 2 (epoch 6, line 5) and then applies one of the
    same controller (seq 7); line 8 is a rendering with its partitionIndex cut out; the last line is cut
    short (no newline)."""
    p, ctl = "audit-0", {"c": 1, "e": 7, "partition": "audit-0"}
    first = _state(1, 0, [1, 3], 0, 7, [1, 3], is_new=True)
    stale = _state(3, 1, [3], 1, 6, [1, 3])
    lines = render([
        Line(fm.PARTITION_STATE, {**ctl, "src": "NewPartition", "dst": "OnlinePartition", "state": first}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": 3, "state": first}, role="follower"),
        Line(fm.RECEIVED, {"b": 3, "c": 1, "e": 7, "cid": 3, "partition": p, "state": first}),
        Line(fm.BECOME, {"b": 3, "c": 1, "e": 7, "cid": 3, "partition": p, "leader": 1}, role="follower"),
        Line(fm.STALE_LEADER_AND_ISR, {"b": 3, "c": 2, "e": 6, "cid": 9, "latest": 7}),
        Line(fm.RECEIVED, {"b": 3, "c": 2, "e": 6, "cid": 10, "partition": p, "state": stale}),
        Line(fm.BECOME, {"b": 3, "c": 2, "e": 6, "cid": 10, "partition": p}, role="leader"),
        Line(fm.RECEIVED, {"b": 3, "c": 1, "e": 7, "cid": 11, "partition": p,
                           "state": _state(1, 2, [1], 2, 7, [1, 3])}),
        Line(fm.BECOME, {"b": 3, "c": 1, "e": 7, "cid": 11, "partition": p, "leader": 1}, role="follower"),
    ], "2.4")
    lines[7] = lines[7].replace(" partitionIndex=0,", "")
    lines[8] = lines[8][:60]
    return lines


DOCS = Path(__file__).parent.parent / "docs" / "pipeline.md"
TABLE_BEGIN, TABLE_END = "<!-- kafka statements: begin -->", "<!-- kafka statements: end -->"
_MAKES = {
    fm.PARTITION_STATE: "`controller:N`, TopicChange (to or from NewPartition), TopicDeletion or BrokerChange: "
                        "`partition_state`; `assignment` from the assigned replicas; the `leader`, `leader_epoch`, "
                        "`isr`, `partition_version` of a LeaderAndIsr; a first leader with epoch 0",
    fm.REPLICA_STATE: "`controller:N`, action as above: `replica_state`",
    fm.FAILED_CHANGE: "`controller:N` with `args.failed` and the reason its exception gives; a refusal of the state "
                      "machine's table also as `args.invalid_transitions`; no state",
    fm.SEND_LEADER_AND_ISR: "`controller:N` BrokerChange: the `leader`, `leader_epoch`, `isr`, `partition_version` and "
                            "`assignment` sent",
    fm.SEND_OTHER: "`controller:N` BrokerChange with `args.request`, no state",
    fm.RESPONSE: "`controller:N` with `args.response`, no state",
    fm.REASSIGNMENT_SENT: "`controller:N` PartitionReassignment: `assignment` and the LeaderAndIsr sent",
    fm.ELECTED_LEADER: "`controller:N` BrokerChange, the leader in `args` (its epoch comes with the next request)",
    fm.ISR_REMOVED: "`controller:N` BrokerChange: `leader`, `leader_epoch`, `isr`",
    fm.RECEIVED: "`broker:N` LeaderAndIsr, `args.received`, the request in `args`",
    fm.STALE_LEADER_AND_ISR: "`broker:N` LeaderAndIsr, `applied: false`: `broker_controller_epoch`",
    fm.REJECTED: "`broker:N` LeaderAndIsr (StopReplica), `applied: false`, no state",
    fm.BECOME: "`broker:N` LeaderAndIsr, `applied: true`: `role`, `local_leader_epoch`, `broker_controller_epoch`",
    fm.COMPLETED: "`broker:N` LeaderAndIsr, `args.completed`, no state",
    fm.LOCAL_LEADER: "`broker:N` LeaderAndIsr, `applied: true`: `role`, `local_leader_epoch`, `local_isr`, `hw`, "
                     "`epoch_start_offset` (the offset it starts from)",
    fm.LOCAL_FOLLOWER: "`broker:N` LeaderAndIsr, `applied: true`: `role`, `local_leader_epoch`, `hw`",
    fm.UPDATE_METADATA: "`broker:N` UpdateMetadata: `broker_controller_epoch`",
    fm.STALE_UPDATE_METADATA: "`broker:N` UpdateMetadata, `applied: false`: `broker_controller_epoch`",
    fm.STOP_REPLICA: "`broker:N` StopReplica, the partition in `args`",
    fm.STALE_STOP_REPLICA: "`broker:N` StopReplica, `applied: false`: `broker_controller_epoch`",
    fm.CONTROLLER_ELECT: "`broker:N` ControllerElect: `controller`, `controller_epoch`",
    fm.CONTROLLER_RESIGN: "`controller:N` ControllerResign, no state",
    fm.FETCHERS_STOPPED: "`broker:N` LeaderAndIsr, `applied: true`: `role` of the partition named, "
                         "`broker_controller_epoch`",
    fm.LOG_TRUNCATED: "`broker:N` LeaderAndIsr, `applied: true`: `role` (follower), `broker_controller_epoch`",
    fm.FETCHER_STARTED: "`broker:N` LeaderAndIsr, `applied: true`: `role` (follower), `broker_controller_epoch`",
    fm.STOPPED_REPLICA: "`broker:N` StopReplica, `args.completed`: `role` removed; with delete also "
                        "`local_leader_epoch` and `local_isr`",
    fm.SELECTED_LEADER: "`observer` BrokerChange (the line names no controller): the `leader`, `leader_epoch`, "
                        "`isr` written to ZooKeeper next",
    fm.ISR_UPDATED: "`observer` IsrShrink (the leader's ISR change, written by the controller): `isr`, "
                    "`partition_version`, from 3.3 `leader` and `leader_epoch`",
    fm.ASSIGNMENT_UPDATED: "`controller:N` PartitionReassignment, the assignment written in `args.replicas`",
}


def docs_table() -> str:
    """The statement table of docs/pipeline.md, from formats.py."""
    out = ["| releases | logger | statement (file at the first release) | kcm makes |", "| --- | --- | --- | --- |"]
    for row in fm.FORMATS:
        releases = row.first if row.first == row.last else f"{row.first}-{row.last}"
        logger = "state-change" if row.logger == fm.STATE_CHANGE else row.logger.rpartition(".")[2]
        makes = f"skipped: {row.note}" if row.kind == fm.SKIP else _MAKES[row.kind] + (
            f" ({row.note})" if row.note else "")
        template = row.template.replace("|", "\\|")
        out.append(f"| {releases} | {logger} | `{template}` ({row.source}) | {makes} |")
    counts = fm.rows_per_line()
    out += ["", "| release line (tag read) | statements |", "| --- | --- |"]
    out += [f"| {line} ({fm.RELEASES[line]}) | {counts[line]} |" for line in fm.LINES]
    return "\n".join(out)


def docs_with_table(text: str) -> str:
    head, _, rest = text.partition(TABLE_BEGIN)
    _, _, tail = rest.partition(TABLE_END)
    return f"{head}{TABLE_BEGIN}\n{docs_table()}\n{TABLE_END}{tail}"


def fixtures() -> dict[Path, str]:
    """Every fixture file and its content."""
    out = {RENDERED / f"state-change-{generation}.log": "\n".join(render(printed(healthy(), release), release)) + "\n"
           for generation, release in FIXTURE_RELEASES.items()}
    out[DATA / "state-change-0.10.log"] = "\n".join(_faults_0_10()) + "\n"
    out[DATA / "state-change-1.1.log"] = "\n".join(_faults_1_1()) + "\n"
    out[DATA / "state-change-2.4.log"] = "\n".join(_faults_2_4())  # the last line is cut short
    return out


if __name__ == "__main__":
    RENDERED.mkdir(parents=True, exist_ok=True)
    for path, text in fixtures().items():
        path.write_text(text)
        print(path, file=sys.stderr)
    DOCS.write_text(docs_with_table(DOCS.read_text()))
    print(DOCS, file=sys.stderr)
