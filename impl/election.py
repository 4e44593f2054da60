"""The four partition leader elections. Candidates are always scanned in assignment order, never in ISR
order: the assignment order is what makes the preferred replica (its head) meaningful."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean_enabled: bool
) -> int | None:
    clean = _first(assignment, lambda r: r in live and r in isr)
    if clean is None and unclean_enabled:
        return _first(assignment, lambda r: r in live)
    return clean


def reassign_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    return _first(reassignment, lambda r: r in live and r in isr)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    return _first(assignment, lambda r: r in live and r in isr and r not in shutting_down)


def _first(candidates: Sequence[int], accept: Callable[[int], bool]) -> int | None:
    for replica in candidates:
        if accept(replica):
            return replica
    return None
