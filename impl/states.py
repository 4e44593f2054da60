"""Partition and replica states of the controller, with the valid-previous-state tables of Kafka 2.3+."""

from __future__ import annotations

from enum import Enum
from typing import Final


class PartitionState(Enum):
    NonExistentPartition = "NonExistentPartition"
    NewPartition = "NewPartition"
    OnlinePartition = "OnlinePartition"
    OfflinePartition = "OfflinePartition"


class ReplicaState(Enum):
    NewReplica = "NewReplica"
    OnlineReplica = "OnlineReplica"
    OfflineReplica = "OfflineReplica"
    ReplicaDeletionStarted = "ReplicaDeletionStarted"
    ReplicaDeletionSuccessful = "ReplicaDeletionSuccessful"
    ReplicaDeletionIneligible = "ReplicaDeletionIneligible"
    NonExistentReplica = "NonExistentReplica"


class P:
    """The partition states as plain class attributes. On Python 3.11 looking a member up on an Enum class
    goes through the hook of `EnumType.__getattr__`, about ten times the cost of a plain attribute, and the
    state machines look states up for every partition and replica they move. Lists every member (tested)."""

    NonExistentPartition: Final = PartitionState.NonExistentPartition
    NewPartition: Final = PartitionState.NewPartition
    OnlinePartition: Final = PartitionState.OnlinePartition
    OfflinePartition: Final = PartitionState.OfflinePartition


class R:
    """The replica states as plain class attributes, as `P` (tested to list every member)."""

    NewReplica: Final = ReplicaState.NewReplica
    OnlineReplica: Final = ReplicaState.OnlineReplica
    OfflineReplica: Final = ReplicaState.OfflineReplica
    ReplicaDeletionStarted: Final = ReplicaState.ReplicaDeletionStarted
    ReplicaDeletionSuccessful: Final = ReplicaState.ReplicaDeletionSuccessful
    ReplicaDeletionIneligible: Final = ReplicaState.ReplicaDeletionIneligible
    NonExistentReplica: Final = ReplicaState.NonExistentReplica


VALID_PREVIOUS_PARTITION_STATES: Final[dict[PartitionState, frozenset[PartitionState]]] = {
    P.NewPartition: frozenset({P.NonExistentPartition}),
    P.OnlinePartition: frozenset({P.NewPartition, P.OnlinePartition, P.OfflinePartition}),
    P.OfflinePartition: frozenset({P.NewPartition, P.OnlinePartition, P.OfflinePartition}),
    P.NonExistentPartition: frozenset({P.OfflinePartition}),
}

VALID_PREVIOUS_REPLICA_STATES: Final[dict[ReplicaState, frozenset[ReplicaState]]] = {
    R.NewReplica: frozenset({R.NonExistentReplica}),
    R.OnlineReplica: frozenset(
        {R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible}
    ),
    R.OfflineReplica: frozenset(
        {R.NewReplica, R.OnlineReplica, R.OfflineReplica, R.ReplicaDeletionIneligible}
    ),
    R.ReplicaDeletionStarted: frozenset({R.OfflineReplica}),
    R.ReplicaDeletionSuccessful: frozenset({R.ReplicaDeletionStarted}),
    R.ReplicaDeletionIneligible: frozenset({R.OfflineReplica, R.ReplicaDeletionStarted}),
    R.NonExistentReplica: frozenset({R.ReplicaDeletionSuccessful}),
}


# The same tables as pairs of values: the state machines check a transition for every partition and replica
# they move, and hashing a member is a Python call on 3.11 (`Enum.__hash__`), while `_value_` is a plain
# attribute (the public `value` is a property, another Python call).
_VALID_PARTITION_PAIRS: Final = frozenset(
    (src._value_, dst._value_) for dst, sources in VALID_PREVIOUS_PARTITION_STATES.items() for src in sources
)
_VALID_REPLICA_PAIRS: Final = frozenset(
    (src._value_, dst._value_) for dst, sources in VALID_PREVIOUS_REPLICA_STATES.items() for src in sources
)


def valid_partition_transition(src: PartitionState, dst: PartitionState) -> bool:
    return (src._value_, dst._value_) in _VALID_PARTITION_PAIRS


def valid_replica_transition(src: ReplicaState, dst: ReplicaState) -> bool:
    return (src._value_, dst._value_) in _VALID_REPLICA_PAIRS
