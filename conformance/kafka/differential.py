"""The model held to Kafka: a campaign run replayed on kcm's implementation, and the two compared.

kcm's cluster (kcm.impl.sim.cluster) gets the run's shape (its brokers, the data topic with the assignment
Kafka chose, the topic's settings as knobs) and the run's operations and faults in their order, each aimed at
the broker that plays the same role in kcm's cluster at that moment (the controller, partition 0's leader, a
follower), each followed by the cluster running to quiescence. Then, per partition of the data topic, the
sequence of (leader, leader epoch, ISR, controller epoch) that each side's controller wrote is compared, and the
partition and replica state transitions each side's state machines made.

Where kcm has no counterpart of a fault, it says so instead of inventing one: `zk-kill` (kcm's store is one
ZooKeeper that never fails; a killed server of three leaves Kafka's sessions alone while the quorum holds) and
a refused operation. `failover` (Kafka: `/controller` deleted) is kcm's controller session expiring: both
resign the controller and elect one anew, with a new controller epoch. An ISR is compared as a set: Kafka
keeps the order in which replicas joined it, which no invariant reads.
"""

from __future__ import annotations

import difflib
import random
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from kcm.conformance.kafka.campaign import DATA_TOPIC, RunRecord
from kcm.conformance.pipeline.kafka_log import parse_kafka_log
from kcm.impl.kafka.admin import read_producer_log
from kcm.impl.sim.cluster import Cluster
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import NO_LEADER, Knobs

Leadership = tuple[int, int, tuple[int, ...], int]  # leader, leader epoch, ISR (sorted), controller epoch
_PRODUCED: Final = 20  # records written before the faults, so that elections choose among logs that hold data
_NONE: Final = {"partition": "NonExistentPartition", "replica": "NonExistentReplica"}
_REASSIGNED: Final = re.compile(r"partition (\d+) \[([\d, ]*)\] -> \[([\d, ]*)\]")


@dataclass
class Side:
    leadership: dict[str, list[Leadership]] = field(default_factory=dict)
    partition_transitions: Counter[tuple[str, str]] = field(default_factory=Counter)
    replica_transitions: Counter[tuple[str, str]] = field(default_factory=Counter)


@dataclass
class Difference:
    partition: str
    kind: str  # replace, insert (only in kcm), delete (only in Kafka)
    kafka: list[Leadership]
    kcm: list[Leadership]


@dataclass
class Comparison:
    run: str
    kafka: Side
    kcm: Side
    differences: list[Difference]
    not_replayed: list[str]  # faults kcm has no counterpart for, with why

    def transition_differences(self) -> dict[str, dict[str, tuple[int, int]]]:
        out: dict[str, dict[str, tuple[int, int]]] = {}
        for name in ("partition_transitions", "replica_transitions"):
            ours, theirs = getattr(self.kcm, name), getattr(self.kafka, name)
            out[name] = {f"{a} -> {b}": (theirs[(a, b)], ours[(a, b)])
                         for a, b in sorted(set(ours) | set(theirs), key=str)
                         if (theirs[(a, b)] > 0) != (ours[(a, b)] > 0)}
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "leadership": {p: {"kafka": self.kafka.leadership.get(p, []), "kcm": self.kcm.leadership.get(p, [])}
                           for p in sorted(set(self.kafka.leadership) | set(self.kcm.leadership))},
            "differences": [d.__dict__ for d in self.differences],
            "transitions_in_one_side_only": self.transition_differences(),
            "not_replayed": self.not_replayed,
        }


def compare(record: RunRecord) -> Comparison:
    logged = before_the_stop(record, kafka_events(record))
    assignment = _assignment(logged)
    kcm_events, not_replayed = _replay(record, assignment)
    kafka, ours = _side(logged), _side(kcm_events)
    differences = [d for p in sorted(set(kafka.leadership) | set(ours.leadership))
                   for d in _aligned(p, kafka.leadership.get(p, []), ours.leadership.get(p, []))]
    return Comparison(record.name, kafka, ours, differences, not_replayed)


# Kafka's side: what its brokers logged


def kafka_events(record: RunRecord) -> list[Event]:
    """The events of every broker's state-change.log and controller.log (where 2.7+ controllers log the ISR
    changes they write for leaders, KIP-497), in the order of their times (a file's own lines in their order),
    each `args.log` naming its broker's folder too (`broker-2/state-change.log:118`)."""
    keyed: list[tuple[str, int, int, Event]] = []
    folder = Path(record.folder)
    paths = sorted([*folder.glob("broker-*/state-change.log"), *folder.glob("broker-*/controller.log")])
    for index, path in enumerate(paths):
        for position, event in enumerate(parse_kafka_log(path).events):
            args = event.setdefault("args", {})
            args["log"] = f"{path.parent.name}/{args.get('log', path.name)}"
            keyed.append((str(args.get("time", "")), index, position, event))
    return [event for *_, event in sorted(keyed, key=lambda k: k[:3])]


def before_the_stop(record: RunRecord, events: list[Event]) -> list[Event]:
    """The events up to the producer's stop, which ends the calm phase: after it the campaign reads the topic back
    and stops the brokers one by one, failovers and all, which the replay has no counterpart of. The log's
    times are the brokers' local time, as this machine's (the campaign and the comparison run on one)."""
    log = Path(record.folder) / "producer.jsonl"
    stopped = read_producer_log(log).stopped_ms if log.is_file() else None
    if stopped is None:
        return events
    end = datetime.fromtimestamp(stopped / 1000).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return [e for e in events if str(e.get("args", {}).get("time", "")) <= end]


@dataclass(frozen=True)
class Election:
    """A leader the controller chose from outside the ISR the store held just before: an unclean election."""

    partition: str
    leader: int
    leader_epoch: int
    isr_before: tuple[int, ...]
    log: str  # file:line of the line that shows it
    time: str


def unclean_elections(events: Iterable[Event]) -> list[Election]:
    """The elections of a live leader that was not in the partition's last ISR (Kafka's
    `OfflinePartitionLeaderElectionStrategy(allowUnclean=true)` choosing a replica outside it,
    controller/Election.scala), in the order the logs show them."""
    found: list[Election] = []
    isr: dict[str, tuple[int, ...]] = {}
    leader: dict[str, int] = {}
    for event in events:
        state = event.get("state", {})
        for partition, new_leader in state.get("leader", {}).items():
            before = isr.get(partition)
            if (new_leader != NO_LEADER and new_leader != leader.get(partition) and before is not None
                    and new_leader not in before):
                args = event.get("args", {})
                found.append(Election(partition, int(new_leader), int(state.get("leader_epoch", {}).get(partition, -1)),
                                      tuple(before), str(args.get("log", "")), str(args.get("time", ""))))
            leader[partition] = new_leader
        for partition, members in state.get("isr", {}).items():
            isr[partition] = tuple(int(b) for b in members)
    return found


def _assignment(events: Iterable[Event]) -> dict[int, tuple[int, ...]]:
    """The data topic's assignment at its creation: each partition's first assignment in the logs."""
    found: dict[int, tuple[int, ...]] = {}
    for event in events:
        for partition, replicas in event.get("state", {}).get("assignment", {}).items():
            if _ours(partition):
                found.setdefault(int(partition.rsplit("-", 1)[1]), tuple(int(b) for b in replicas))
    if not found:
        raise ValueError(f"the logs show no assignment of {DATA_TOPIC}")
    return found


def _ours(partition: str) -> bool:
    return partition.rsplit("-", 1)[0] == DATA_TOPIC


# kcm's side: the same run on the implementation


class _Replay:
    def __init__(self, record: RunRecord, assignment: dict[int, tuple[int, ...]]) -> None:
        self.events: list[Event] = []
        configs = record.topic_configs
        knobs = Knobs(unclean_election=configs.get("unclean.leader.election.enable") == "true",
                      min_isr=int(configs.get("min.insync.replicas", "1")))
        brokers = sorted({b for replicas in assignment.values() for b in replicas})
        self.cluster = Cluster(brokers, knobs, self.events.append, run=record.name, rng=random.Random(0))
        self.settle()
        self.cluster.create_topic(DATA_TOPIC, assignment)
        self.settle()
        for _ in range(_PRODUCED):
            self.produce()

    def settle(self) -> None:
        self.cluster.stabilize()

    def produce(self) -> None:
        leader = self.leader(0)
        if leader != NO_LEADER and self.cluster.managers[leader].alive:
            self.cluster.produce(leader, f"{DATA_TOPIC}-0")
            self.settle()

    def while_paused(self, broker: int) -> None:
        """Kafka's paused broker takes no step until its session has expired and the other brokers have acted
        on it (a new controller elected, the broker change handled): their controller queues first, it after."""
        cluster = self.cluster
        while True:
            busy = [b for b in cluster.live_brokers() if b != broker and cluster.controllers[b].queue]
            if not busy:
                return
            cluster.process_controller_event(busy[0])

    def leader(self, partition: int) -> int:
        """The leader the store holds now: the last the trace's deltas wrote."""
        name = f"{DATA_TOPIC}-{partition}"
        for event in reversed(self.events):
            written = event.get("state", {}).get("leader", {})
            if name in written:
                return int(written[name])
        return NO_LEADER

    def aimed(self, broker: int | None, role: str) -> int | None:
        """The broker of kcm's cluster in the role the fault's broker had in Kafka's."""
        live = self.cluster.live_brokers()
        if role == "controller":
            holder = self.cluster.controller_holder()
            return holder if holder in live else None
        leader = self.leader(0)
        if role == "leader":
            return leader if leader in live else None
        if broker in live and broker != leader and broker != self.cluster.controller_holder():
            return broker
        followers = [b for b in live if b not in (leader, self.cluster.controller_holder())]
        return followers[0] if followers else broker if broker in live else None


def _replay(record: RunRecord, assignment: dict[int, tuple[int, ...]]) -> tuple[list[Event], list[str]]:
    replay = _Replay(record, assignment)
    cluster, skipped = replay.cluster, []
    for fault in record.faults:
        if "refused" in fault.detail:
            skipped.append(f"{fault.kind} at {fault.at} s: refused by Kafka ({fault.detail})")
            continue
        if fault.kind == "zk-kill":
            skipped.append(f"zk-kill at {fault.at} s: kcm's store is one ZooKeeper that does not fail")
            continue
        if fault.kind in ("kill", "pause", "shutdown"):
            aimed = replay.aimed(fault.broker, fault.role)
            if aimed is None:
                skipped.append(f"{fault.kind} at {fault.at} s: no live {fault.role} in kcm's cluster")
                continue
            _broker_fault(replay, fault.kind, aimed)
        elif fault.kind == "failover":
            holder = cluster.controller_holder()
            if holder != NO_LEADER:
                cluster.expire_session(holder)
        elif fault.kind == "preferred":
            cluster.preferred_election(sorted(f"{DATA_TOPIC}-{p}" for p in assignment))
        elif fault.kind == "reassign":
            moved = _REASSIGNED.search(fault.detail)
            if moved is None:
                skipped.append(f"reassign at {fault.at} s: no target in {fault.detail!r}")
                continue
            cluster.reassign({f"{DATA_TOPIC}-{moved.group(1)}": tuple(int(b) for b in moved.group(3).split(","))})
        elif fault.kind == "topic":
            name = fault.detail.split()[0]
            cluster.create_topic(name, {0: tuple(sorted(cluster.live_brokers())[:2])})
            replay.settle()
            cluster.delete_topic(name)
        elif fault.kind == "leader-loss" and fault.broker is not None:
            if "restarted" in fault.detail:
                for broker in sorted(set(assignment[0]) - set(cluster.live_brokers())):
                    cluster.restart(broker)
                    replay.settle()
            elif fault.broker in cluster.live_brokers():
                cluster.crash(fault.broker)
        replay.settle()
        replay.produce()
    return replay.events, skipped


def _broker_fault(replay: _Replay, kind: str, broker: int) -> None:
    cluster = replay.cluster
    if kind == "kill":
        cluster.crash(broker)
        replay.settle()
        cluster.restart(broker)
    elif kind == "pause":
        cluster.expire_session(broker)
        replay.while_paused(broker)
    else:
        cluster.request_controlled_shutdown(broker)
        replay.settle()
        if broker in cluster.live_brokers():  # the shutdown not completed: Kafka's broker exits anyway
            cluster.crash(broker)
            replay.settle()
        cluster.restart(broker)


# Both sides: the controller's writes, and the state machines' transitions


def _side(events: Iterable[Event]) -> Side:
    side = Side()
    current: dict[str, dict[str, Any]] = {}
    # Each controller's own view: a new controller starts from what it loads, not from its predecessor's.
    partitions: dict[tuple[str, str], str] = {}
    replicas: dict[tuple[str, str, str], str] = {}
    for event in events:
        state = event.get("state", {})
        touched = set()
        for name in ("leader", "leader_epoch", "isr", "partition_controller_epoch"):
            for partition, value in state.get(name, {}).items():
                if _ours(partition):
                    current.setdefault(partition, {})[name] = value
                    touched.add(partition)
        for partition in sorted(touched):
            values = current[partition]
            entry = (int(values.get("leader", NO_LEADER)), int(values.get("leader_epoch", -1)),
                     tuple(sorted(int(b) for b in values.get("isr", []))),
                     int(values.get("partition_controller_epoch", -1)))
            sequence = side.leadership.setdefault(partition, [])
            if not sequence or sequence[-1] != entry:
                sequence.append(entry)
        transitions = event.get("args", {}).get("transitions")
        if transitions is not None:
            # kcm's controller names every transition a step made; its state delta keeps only the last.
            for kind, partition, *rest in transitions:
                if _ours(partition):
                    counted = side.partition_transitions if kind == "partition" else side.replica_transitions
                    before, after = rest[-2:]
                    counted[(before or _NONE[kind], after or _NONE[kind])] += 1
            continue
        for controller, by_partition in state.get("partition_state", {}).items():
            for partition, value in by_partition.items():
                key = (controller, partition)
                value = value or _NONE["partition"]
                if _ours(partition) and partitions.get(key, _NONE["partition"]) != value:
                    side.partition_transitions[(partitions.get(key, _NONE["partition"]), value)] += 1
                    partitions[key] = value
        for controller, by_partition in state.get("replica_state", {}).items():
            for partition, by_replica in by_partition.items():
                for replica, value in by_replica.items():
                    rkey = (controller, partition, str(replica))
                    value = value or _NONE["replica"]
                    if _ours(partition) and replicas.get(rkey, _NONE["replica"]) != value:
                        side.replica_transitions[(replicas.get(rkey, _NONE["replica"]), value)] += 1
                        replicas[rkey] = value
    return side


def _aligned(partition: str, kafka: list[Leadership], ours: list[Leadership]) -> list[Difference]:
    matcher = difflib.SequenceMatcher(a=kafka, b=ours, autojunk=False)
    return [Difference(partition, tag, kafka[i1:i2], ours[j1:j2])
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]

