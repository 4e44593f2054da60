"""The danger scores that steer the conformance search: each rises exactly in the state it names."""

from __future__ import annotations

from dataclasses import replace

from kcm.conformance.explore.danger import (
    deposed_controller_work,
    divergent_records,
    newer_epoch_divergence,
    stale_follower,
    superseded_requests,
    unacknowledged_commits,
)
from kcm.impl.messages import Envelope, LeaderAndIsrRequest
from kcm.impl.sim.cluster import Cluster, Event, broker_ids
from kcm.spec.vocabulary import Knobs


def _cluster() -> Cluster:
    events: list[Event] = []
    cluster = Cluster(broker_ids(3), Knobs(), events.append)
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


# -- the replication machine's ladders: the divergence stories of tests/scenarios/kip*_divergence.txt, on the
# safe design (a score never looks at the knobs, and KIP-320's design repairs or fences every rung)


def _stable() -> Cluster:
    """Broker 1 controls; broker 2 leads t0-0, broker 1 is its last choice (the TLC models' InitStable)."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(3), Knobs(), events.append)
    cluster.stabilize()
    cluster.create_topic("t0", {0: (2, 3, 1)})
    cluster.stabilize()
    return cluster


def _react(cluster: Cluster, slow: int | None = None) -> None:
    """The controller's events, then every message but the controller's to `slow`."""
    while True:
        queued = [b for b in cluster.live_brokers() if cluster.controllers[b].queue]
        if queued:
            cluster.process_controller_event(queued[0])
            continue
        in_flight = cluster.network.in_flight
        ready = [i for i in cluster.network.ready(cluster.now)
                 if (in_flight[i].envelope.src, in_flight[i].envelope.dst) != (1, slow)]
        if not ready:
            return
        cluster.deliver(ready[0])


def _round(cluster: Cluster, follower: int) -> None:
    leader = cluster.managers[follower].replicas["t0-0"].leader_id
    cluster.send_fetch(follower, "t0-0")
    _deliver_last(cluster, follower, leader)
    _deliver_last(cluster, leader, follower)


def test_the_newer_epoch_ladder_climbs_with_the_kip279_case() -> None:
    cluster = _stable()
    cluster.produce(2, "t0-0", -1)
    _round(cluster, 1)
    assert newer_epoch_divergence(cluster) == 0  # broker 1's log is a prefix of its leader's
    cluster.crash(2)
    _react(cluster)  # broker 3 leads epoch 1 without record 1
    assert newer_epoch_divergence(cluster) == 1
    cluster.produce(3, "t0-0", -1)
    assert newer_epoch_divergence(cluster) == 2  # record 2 of epoch 1 where broker 1 holds record 1 of epoch 0
    cluster.crash(3)
    cluster.restart(3)
    _react(cluster)  # broker 1 leads epoch 2 alone; broker 3 follows it with the newer record at offset 0
    assert newer_epoch_divergence(cluster) == 5
    for _ in range(2):
        _round(cluster, 3)  # KIP-279's truncation (and KIP-320's) removes record 2; the fetch brings record 1
    assert newer_epoch_divergence(cluster) == 0  # every log, broker 2's too, is a prefix of broker 1's


def test_the_stale_follower_ladder_climbs_with_the_kip320_case() -> None:
    cluster = _stable()
    cluster.produce(2, "t0-0", -1)
    _round(cluster, 1)
    cluster.crash(2)
    cluster.restart(2)
    _react(cluster, slow=1)  # broker 3 leads epoch 1; broker 1 does not hear of it
    assert stale_follower(cluster) == 2  # and the new leader lacks record 1, which broker 1 holds
    _round(cluster, 2)
    assert stale_follower(cluster) == 3  # broker 2, which broker 1 still follows, truncated record 1
    _round(cluster, 2)
    assert stale_follower(cluster) == 4  # and is back in the ISR
    cluster.crash(3)
    _react(cluster, slow=1)
    assert stale_follower(cluster) == 5  # broker 2 leads again, in epoch 2
    cluster.produce(2, "t0-0", -1)
    assert stale_follower(cluster) == 7  # over offset 0, and broker 1's report would commit it
    _round(cluster, 1)  # KIP-320 fences the fetch of epoch 0
    assert cluster.managers[1].replicas["t0-0"].hw == 0
    _react(cluster)  # the requests broker 1 waited for arrive
    assert stale_follower(cluster) == 0
