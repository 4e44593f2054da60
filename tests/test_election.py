"""The four leader elections, as Kafka 2.3+ defines them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcm.impl import states
from kcm.impl.election import (
    controlled_shutdown_partition_leader,
    offline_partition_leader,
    preferred_replica_partition_leader,
    reassign_partition_leader,
)
from kcm.impl.states import PartitionState, ReplicaState


def test_offline_election_takes_the_first_live_isr_member_in_assignment_order() -> None:
    assert offline_partition_leader([3, 1, 2], isr=[1, 2, 3], live={1, 2, 3}, unclean_enabled=False) == 3
    assert offline_partition_leader([3, 1, 2], isr=[2, 1], live={1, 2}, unclean_enabled=False) == 1


def test_offline_election_without_live_isr_member() -> None:
    assert offline_partition_leader([1, 2, 3], isr=[1], live={2, 3}, unclean_enabled=False) is None
    assert offline_partition_leader([1, 2, 3], isr=[1], live={3, 2}, unclean_enabled=True) == 2
    assert offline_partition_leader([1, 2, 3], isr=[1], live=set(), unclean_enabled=True) is None


def test_reassignment_election_scans_the_target_assignment() -> None:
    assert reassign_partition_leader([4, 5, 6], isr=[1, 2, 3, 5, 6, 4], live={1, 2, 3, 4, 5, 6}) == 4
    assert reassign_partition_leader([4, 5, 6], isr=[1, 5, 6], live={1, 5, 6}) == 5
    assert reassign_partition_leader([4, 5, 6], isr=[1, 2, 3], live={1, 2, 3, 4, 5, 6}) is None


def test_preferred_election_only_takes_the_head_of_the_assignment() -> None:
    assert preferred_replica_partition_leader([2, 1, 3], isr=[1, 2, 3], live={1, 2, 3}) == 2
    assert preferred_replica_partition_leader([2, 1, 3], isr=[1, 3], live={1, 2, 3}) is None
    assert preferred_replica_partition_leader([2, 1, 3], isr=[1, 2, 3], live={1, 3}) is None
    assert preferred_replica_partition_leader([], isr=[], live={1}) is None


def test_controlled_shutdown_election_skips_brokers_shutting_down() -> None:
    assert controlled_shutdown_partition_leader([1, 2, 3], isr=[1, 2, 3], live={1, 2, 3}, shutting_down={1}) == 2
    assert controlled_shutdown_partition_leader([1, 2, 3], isr=[1, 3], live={1, 2, 3}, shutting_down={1}) == 3
    assert controlled_shutdown_partition_leader([1, 2], isr=[1], live={1, 2}, shutting_down={1}) is None


brokers = st.lists(st.integers(1, 8), unique=True, max_size=8)


@given(brokers, brokers, st.sets(st.integers(1, 8)), st.booleans())
def test_offline_leader_is_a_live_assigned_replica_and_in_isr_unless_unclean(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool
) -> None:
    leader = offline_partition_leader(assignment, isr, live, unclean)
    clean = [r for r in assignment if r in live and r in isr]
    if leader is None:
        assert not clean and not (unclean and any(r in live for r in assignment))
        return
    assert leader in assignment and leader in live
    assert leader in isr or (unclean and not clean)
    assert leader == (clean[0] if clean else next(r for r in assignment if r in live))


@given(brokers, brokers, st.sets(st.integers(1, 8)), st.sets(st.integers(1, 8)))
def test_controlled_shutdown_leader_never_shuts_down(
    assignment: list[int], isr: list[int], live: set[int], shutting: set[int]
) -> None:
    leader = controlled_shutdown_partition_leader(assignment, isr, live, shutting)
    if leader is not None:
        assert leader in assignment and leader in live and leader in isr and leader not in shutting


def test_state_namespaces_hold_every_member() -> None:
    """`states.P` and `states.R`, the fast spellings of the members, name each member as the enum does."""
    for namespace, enum in ((states.P, PartitionState), (states.R, ReplicaState)):
        assert {k: v for k, v in vars(namespace).items() if not k.startswith("_")} == dict(enum.__members__)
