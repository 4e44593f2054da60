"""The implementation's valid-previous-state tables by state name, read off the predicates its state
machines call (`kcm.impl.states`), for the proofs that compare them with the model's (`kcm.spec.states`):
the model does not read the implementation, so `kcm prove` hands them over from here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from kcm.impl.states import PartitionState, ReplicaState, valid_partition_transition, valid_replica_transition
from kcm.spec.states import Table
from kcm.spec.z3.model import Rules

State = TypeVar("State", PartitionState, ReplicaState)


def _table(states: type[State], valid: Callable[[State, State], bool]) -> Table:
    return {dst.value: frozenset(src.value for src in states if valid(src, dst)) for dst in states}


def partition_table() -> Table:
    return _table(PartitionState, valid_partition_transition)


def replica_table() -> Table:
    return _table(ReplicaState, valid_replica_transition)


def implementation_rules(rules: Rules | None = None) -> Rules:
    """`rules` (by default the model's) with the implementation's tables, for the proofs to compare."""
    return replace(rules or Rules(), partition_table=partition_table(), replica_table=replica_table())
