"""The danger scores that steer the conformance search: each rises exactly in the state it names."""

from __future__ import annotations

from kcm.conformance.danger import deposed_controller_work, unacknowledged_commits
from kcm.impl.cluster import Cluster, Event
from kcm.spec.vocabulary import Knobs


def _cluster() -> Cluster:
    events: list[Event] = []
    cluster = Cluster(3, Knobs(), events.append)
    cluster.stabilize()
    cluster.create_topic("t0", {0: (1, 2, 3)})
    cluster.stabilize()
    return cluster


def _deliver_last(cluster: Cluster, src: int, dst: int) -> None:
    in_flight = cluster.network.in_flight
    cluster.deliver(max(i for i, m in enumerate(in_flight) if (m.envelope.src, m.envelope.dst) == (src, dst)))


def _fetch_round(cluster: Cluster, follower: int) -> None:
    cluster.send_fetch(follower, "t0-0")
    _deliver_last(cluster, follower, 1)
    _deliver_last(cluster, 1, follower)


def test_a_follower_that_has_not_learned_the_commit_counts_until_it_does() -> None:
    cluster = _cluster()
    assert unacknowledged_commits(cluster) == 0
    cluster.produce(1, "t0-0", -1)
    assert unacknowledged_commits(cluster) == 0  # nothing is committed yet
    for follower in (2, 3, 2, 3):
        _fetch_round(cluster, follower)
    # Broker 3's second fetch committed the record and told broker 3; broker 2 still knows HW 0.
    assert cluster.managers[1].replicas["t0-0"].hw == 1
    assert unacknowledged_commits(cluster) == 1
    _fetch_round(cluster, 2)
    assert unacknowledged_commits(cluster) == 0


def test_a_deposed_controller_counts_until_it_resigns() -> None:
    cluster = _cluster()
    assert deposed_controller_work(cluster) == 0
    holder = cluster.controller_holder()
    cluster.expire_session(holder)
    successor = next(b for b in cluster.live_brokers() if b != holder and cluster.controllers[b].queue)
    while cluster.controllers[successor].queue and cluster.controller_holder() != successor:
        cluster.process_controller_event(successor)
    assert cluster.controller_holder() == successor
    assert deposed_controller_work(cluster) >= 1 + len(cluster.controllers[holder].queue)
    cluster.stabilize()
    assert deposed_controller_work(cluster) == 0
