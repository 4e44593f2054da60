"""The controller's partition and replica states and their valid-previous-state tables, as the model states
them: the reference every oracle judges a trace by (the invariant checker, the Z3 step validator and
proofs, coverage, the Spark checks). The implementation keeps its own copy in `kcm.impl.states`; a test
compares the two, and a mutant that edits the implementation's copy is caught against this one.

The tables are Kafka's from release 2.3 on (apache/kafka, `core/src/main/scala/kafka/controller/`
`PartitionStateMachine.scala` and `ReplicaStateMachine.scala`: each state's `validPreviousStates`), the
same as `ValidPreviousPartition` and `ValidPreviousReplica` of spec/KafkaReplication.tla and the tables of
docs/invariants.md (a test reads the TLA+ ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# The state a controller's context does not hold comes first: absent counts as non-existent.
PARTITION_STATES: Final[tuple[str, ...]] = (
    "NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition",
)
REPLICA_STATES: Final[tuple[str, ...]] = (
    "NonExistentReplica", "NewReplica", "OnlineReplica", "OfflineReplica",
    "ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible",
)

# target state -> the states it may be entered from
Table = Mapping[str, frozenset[str]]

VALID_PREVIOUS_PARTITION_STATES: Final[Table] = {
    "NewPartition": frozenset({"NonExistentPartition"}),
    "OnlinePartition": frozenset({"NewPartition", "OnlinePartition", "OfflinePartition"}),
    "OfflinePartition": frozenset({"NewPartition", "OnlinePartition", "OfflinePartition"}),
    "NonExistentPartition": frozenset({"OfflinePartition"}),
}
VALID_PREVIOUS_REPLICA_STATES: Final[Table] = {
    "NewReplica": frozenset({"NonExistentReplica"}),
    "OnlineReplica": frozenset({"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"}),
    "OfflineReplica": frozenset({"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"}),
    "ReplicaDeletionStarted": frozenset({"OfflineReplica"}),
    "ReplicaDeletionSuccessful": frozenset({"ReplicaDeletionStarted"}),
    "ReplicaDeletionIneligible": frozenset({"OfflineReplica", "ReplicaDeletionStarted"}),
    "NonExistentReplica": frozenset({"ReplicaDeletionSuccessful"}),
}


def transitions(table: Table) -> frozenset[tuple[str, str]]:
    """The table as the set of its allowed (from, to) pairs."""
    return frozenset((src, dst) for dst, sources in table.items() for src in sources)


VALID_PARTITION_TRANSITIONS: Final = transitions(VALID_PREVIOUS_PARTITION_STATES)
VALID_REPLICA_TRANSITIONS: Final = transitions(VALID_PREVIOUS_REPLICA_STATES)
