"""The controller's state machines in z3: state codes, and valid-previous-state tables as formulas.

The model's tables are `kcm.spec.states`. The proofs also take a second table of each kind from their
caller, the implementation's (`kcm prove` passes it, or a mutated copy through `Rules`), and show that it
accepts exactly the model's transitions and that the state machine built on it moves only along them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kcm.spec.states import PARTITION_STATES, REPLICA_STATES, Table
from kcm.spec.z3.solver import Expr, and_, ite, not_, or_all

# State codes: 0 is the state a controller's context does not hold (absent counts as non-existent).
PARTITION_CODE: Final[dict[str, int]] = {name: i for i, name in enumerate(PARTITION_STATES)}
REPLICA_CODE: Final[dict[str, int]] = {name: i for i, name in enumerate(REPLICA_STATES)}


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


def partition_code(state: str | None) -> int:
    return 0 if state is None else PARTITION_CODE[state]


def replica_code(state: str | None) -> int:
    return 0 if state is None else REPLICA_CODE[state]
