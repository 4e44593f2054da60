"""The danger scores that steer the conformance search: each rises exactly in the state it names."""

from __future__ import annotations

from dataclasses import replace

from kcm.conformance.danger import (
    deposed_controller_work,
    divergent_records,
    superseded_requests,
    unacknowledged_commits,
)
from kcm.impl.cluster import Cluster, Event
from kcm.impl.messages import Envelope, LeaderAndIsrRequest
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


def test_divergent_records_count_the_offsets_where_two_logs_differ() -> None:
    cluster = _cluster()
    cluster.produce(1, "t0-0", -1)
    cluster.stabilize()
    assert divergent_records(cluster) == 0  # replication made the three logs equal
    # A record only the old leader wrote in epoch 0, against a new leader's record of epoch 1 at offset 1.
    cluster.managers[2].replicas["t0-0"].log.append((0, 90))
    cluster.managers[3].replicas["t0-0"].log.append((1, 91))
    assert divergent_records(cluster) == 1
    cluster.managers[1].replicas["t0-0"].log.append((1, 92))
    assert divergent_records(cluster) == 3


def test_a_leader_and_isr_in_flight_counts_when_its_receiver_knows_or_gets_a_newer_epoch() -> None:
    cluster = _cluster()
    cluster.crash(3)
    cluster.process_controller_event(1)  # the ISR shrinks: LeaderAndIsr of leader epoch 1 to brokers 1 and 2
    sent = [m.envelope for m in cluster.network.in_flight if isinstance(m.envelope.message, LeaderAndIsrRequest)]
    to_two = next(e for e in sent if e.dst == 2)
    assert superseded_requests(cluster) == 0  # newer than what its receivers know
    request = to_two.message
    assert isinstance(request, LeaderAndIsrRequest)
    stale = replace(request, partitions=tuple(replace(s, leader_epoch=0) for s in request.partitions))
    cluster.network.send([Envelope(to_two.src, 2, stale)], cluster.now)
    assert superseded_requests(cluster) == 1  # epoch 0 behind epoch 1 on the way to broker 2
    cluster.deliver(cluster.network.in_flight.index(next(m for m in cluster.network.in_flight if m.envelope is to_two)))
    assert cluster.managers[2].replicas["t0-0"].leader_epoch == 1
    assert superseded_requests(cluster) == 1  # and still older than what broker 2 now knows
    cluster.stabilize()
    assert superseded_requests(cluster) == 0
