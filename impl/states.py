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


_P = PartitionState
_R = ReplicaState

VALID_PREVIOUS_PARTITION_STATES: Final[dict[PartitionState, frozenset[PartitionState]]] = {
    _P.NewPartition: frozenset({_P.NonExistentPartition}),
    _P.OnlinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.OfflinePartition: frozenset({_P.NewPartition, _P.OnlinePartition, _P.OfflinePartition}),
    _P.NonExistentPartition: frozenset({_P.OfflinePartition}),
}

VALID_PREVIOUS_REPLICA_STATES: Final[dict[ReplicaState, frozenset[ReplicaState]]] = {
    _R.NewReplica: frozenset({_R.NonExistentReplica}),
    _R.OnlineReplica: frozenset(
        {_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}
    ),
    _R.OfflineReplica: frozenset(
        {_R.NewReplica, _R.OnlineReplica, _R.OfflineReplica, _R.ReplicaDeletionIneligible}
    ),
    _R.ReplicaDeletionStarted: frozenset({_R.OfflineReplica}),
    _R.ReplicaDeletionSuccessful: frozenset({_R.ReplicaDeletionStarted}),
    _R.ReplicaDeletionIneligible: frozenset({_R.OfflineReplica, _R.ReplicaDeletionStarted}),
    _R.NonExistentReplica: frozenset({_R.ReplicaDeletionSuccessful}),
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
