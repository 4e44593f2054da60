"""What the active controller knows of the cluster, loaded from the store on failover and kept current by
the events it handles. Also the record of state-machine transitions, which traces carry."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcm.impl.messages import PartitionLeaderState
from kcm.impl.states import P, PartitionState, R, ReplicaState
from kcm.spec.vocabulary import NO_LEADER


@dataclass(frozen=True, slots=True)
class LeaderIsr:
    """A partition's state node: leader, leader epoch, ISR, the controller epoch that wrote it, and the
    node version that guards the next compare-and-set."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int

    def successor(self, leader: int, isr: tuple[int, ...], controller_epoch: int) -> LeaderIsr:
        """Every leadership or ISR decision of the controller bumps the leader epoch by one."""
        return LeaderIsr(leader, self.leader_epoch + 1, isr, controller_epoch, self.version)


Transition = tuple[str, ...]


@dataclass(slots=True)
class ControllerContext:
    epoch: int
    epoch_version: int
    live_brokers: dict[int, int] = field(default_factory=dict)  # broker id -> registration epoch
    shutting_down: set[int] = field(default_factory=set)
    assignment: dict[str, tuple[int, ...]] = field(default_factory=dict)
    topics: dict[str, list[str]] = field(default_factory=dict)
    leadership: dict[str, LeaderIsr] = field(default_factory=dict)
    partition_states: dict[str, PartitionState] = field(default_factory=dict)
    replica_states: dict[str, dict[int, ReplicaState]] = field(default_factory=dict)
    reassignments: dict[str, tuple[int, ...]] = field(default_factory=dict)
    topics_to_delete: set[str] = field(default_factory=set)
    deletion_ineligible: set[str] = field(default_factory=set)
    transitions: list[list[object]] = field(default_factory=list)
    invalid_transitions: list[list[object]] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)
    # Per partition, the request entry last built and the leadership and assignment it was built from:
    # a failover or a broker change sends one partition's entry to every replica and in every
    # UpdateMetadata, and the entry is an immutable value, so it is built again only when either moves.
    leader_states: dict[str, tuple[LeaderIsr, tuple[int, ...], PartitionLeaderState]] = field(default_factory=dict)

    def live_not_shutting_down(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down

    def topic_of(self, partition: str) -> str:
        return partition.rpartition("-")[0]

    def is_deleting(self, partition: str) -> bool:
        return self.topic_of(partition) in self.topics_to_delete

    def replica_state(self, partition: str, replica: int) -> ReplicaState:
        return self.replica_states.get(partition, {}).get(replica, R.NonExistentReplica)

    def partition_state(self, partition: str) -> PartitionState:
        return self.partition_states.get(partition, P.NonExistentPartition)

    def leader_state(self, partition: str) -> PartitionLeaderState | None:
        leadership = self.leadership.get(partition)
        if leadership is None:
            return None
        replicas = self.assignment.get(partition, ())
        # Compared by identity: both are immutable, and the cache keeps them alive, so an equal id is the
        # same value.
        cached = self.leader_states.get(partition)
        if cached is not None and cached[0] is leadership and cached[1] is replicas:
            return cached[2]
        state = PartitionLeaderState(
            partition,
            leadership.leader,
            leadership.leader_epoch,
            leadership.isr,
            leadership.version,
            replicas,
            leadership.controller_epoch,
        )
        self.leader_states[partition] = (leadership, replicas, state)
        return state

    def partitions_on(self, brokers: set[int]) -> list[tuple[str, int]]:
        return [
            (partition, replica)
            for partition, replicas in self.assignment.items()
            for replica in replicas
            if replica in brokers
        ]

    def partitions_led_by(self, brokers: set[int]) -> list[str]:
        return [p for p, state in self.leadership.items() if state.leader in brokers and state.leader != NO_LEADER]

    def add_partition(self, partition: str, replicas: tuple[int, ...]) -> None:
        self.assignment[partition] = replicas
        self.topics.setdefault(self.topic_of(partition), []).append(partition)

    def remove_topic(self, topic: str) -> None:
        for partition in self.topics.pop(topic, []):
            for table in (
                self.assignment, self.leadership, self.partition_states, self.replica_states, self.leader_states
            ):
                table.pop(partition, None)
            self.reassignments.pop(partition, None)
            self.dirty.add(partition)
        self.topics_to_delete.discard(topic)
        self.deletion_ineligible.discard(topic)
