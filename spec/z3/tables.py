"""The controller's state machines: state codes, and the valid-previous-state tables as z3 formulas.

Two tables of each kind meet here: the *specification* (Kafka 2.3 and later, written out below as
docs/invariants.md states it) and the *implementation's* (read from `kcm.impl.states`, or a mutated copy
given through `Rules`). The universal proofs show that they accept exactly the same transitions and that
the state machine built on the implementation's table moves only along them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kcm.impl.states import (
    VALID_PREVIOUS_PARTITION_STATES,
    VALID_PREVIOUS_REPLICA_STATES,
    PartitionState,
    ReplicaState,
)
from kcm.spec.z3._z3 import Expr, and_, ite, not_, or_all

# State codes: 0 is the state a controller's context does not hold (absent counts as non-existent).
PARTITION_STATES: Final[tuple[str, ...]] = (
    "NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition",
)
REPLICA_STATES: Final[tuple[str, ...]] = (
    "NonExistentReplica", "NewReplica", "OnlineReplica", "OfflineReplica",
    "ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible",
)
PARTITION_CODE: Final[dict[str, int]] = {name: i for i, name in enumerate(PARTITION_STATES)}
REPLICA_CODE: Final[dict[str, int]] = {name: i for i, name in enumerate(REPLICA_STATES)}

Table = Mapping[str, frozenset[str]]

# The specification, independently of the implementation (docs/invariants.md).
SPEC_PARTITION_TABLE: Final[Table] = {
    "NewPartition": frozenset({"NonExistentPartition"}),
    "OnlinePartition": frozenset({"NewPartition", "OnlinePartition", "OfflinePartition"}),
    "OfflinePartition": frozenset({"NewPartition", "OnlinePartition", "OfflinePartition"}),
    "NonExistentPartition": frozenset({"OfflinePartition"}),
}
SPEC_REPLICA_TABLE: Final[Table] = {
    "NewReplica": frozenset({"NonExistentReplica"}),
    "OnlineReplica": frozenset({"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"}),
    "OfflineReplica": frozenset({"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"}),
    "ReplicaDeletionStarted": frozenset({"OfflineReplica"}),
    "ReplicaDeletionSuccessful": frozenset({"ReplicaDeletionStarted"}),
    "ReplicaDeletionIneligible": frozenset({"OfflineReplica", "ReplicaDeletionStarted"}),
    "NonExistentReplica": frozenset({"ReplicaDeletionSuccessful"}),
}


def impl_partition_table() -> Table:
    return {dst.value: frozenset(src.value for src in srcs) for dst, srcs in VALID_PREVIOUS_PARTITION_STATES.items()}


def impl_replica_table() -> Table:
    return {dst.value: frozenset(src.value for src in srcs) for dst, srcs in VALID_PREVIOUS_REPLICA_STATES.items()}


def pairs(table: Table, codes: Mapping[str, int]) -> frozenset[tuple[int, int]]:
    return frozenset((codes[src], codes[dst]) for dst, srcs in table.items() for src in srcs)


def valid(table: Table, codes: Mapping[str, int], src: Expr, dst: Expr) -> Expr:
    """The table as a formula over state codes: `src -> dst` is an allowed transition."""
    return or_all(and_(src == a, dst == b) for a, b in sorted(pairs(table, codes)))


def machine_step(table: Table, codes: Mapping[str, int], state: Expr, target: Expr) -> tuple[Expr, Expr]:
    """The state machine's `handle` for one element: (the state after, whether the request was refused).
    An invalid transition is logged and changes nothing (PartitionStateMachine / ReplicaStateMachine)."""
    ok = valid(table, codes, state, target)
    return ite(ok, target, state), not_(ok)


def partition_code(state: PartitionState | str | None) -> int:
    if state is None:
        return 0
    return PARTITION_CODE[state if isinstance(state, str) else state.value]


def replica_code(state: ReplicaState | str | None) -> int:
    if state is None:
        return 0
    return REPLICA_CODE[state if isinstance(state, str) else state.value]
