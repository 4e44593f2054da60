"""How close a cluster is to the known ways of losing safety: scores that steer hypothesis's search
(`hypothesis.target`) toward the states the historical bugs start from.

The stateful machines draw rules uniformly, and the known bugs (`KNOWN_BUG_SEARCHES`,
docs/conformance.md) each need about ten steps in one order; uniform draws almost never meet them. Each
score measures a precondition that a safe design must survive and a broken one does not: the search
climbs towards states with more of it, and the design's own steps (truncation, fencing) decide whether an
invariant breaks. A score never looks at which knobs are set, so it steers the safe design exactly as hard.
"""

from __future__ import annotations

from typing import Final

from kcm.impl import zk_paths
from kcm.impl.messages import LeaderAndIsrRequest, Record
from kcm.impl.replica_manager import FOLLOWER, LEADER, Replica
from kcm.impl.sim.cluster import Cluster
from kcm.impl.store import NoNodeError

# Committed records that some in-sync follower does not know are committed: what a follower truncating to
# its own high watermark (KAFKA-1211) or a new leader exposing its own (KAFKA-2334) would lose or hide.
UNACKNOWLEDGED_COMMITS: Final = "unacknowledged-commits"
# Work of controllers that a successor has deposed: queued events and requests in flight that only the
# controller epoch fences (a zombie controller).
DEPOSED_CONTROLLER_WORK: Final = "deposed-controller-work"
# Offsets at which two replicas of a partition hold different records: harmless above the HW while
# truncation repairs them, data loss once one falls below it (the KIP-101 and KIP-279 cases).
DIVERGENT_RECORDS: Final = "divergent-records"
# LeaderAndIsr entries in flight older than what their receiver knows or will also receive (a newer
# entry for the partition in flight to it): delivered last, only the leader-epoch check stops them.
SUPERSEDED_REQUESTS: Final = "superseded-requests"
LABELS: Final = (UNACKNOWLEDGED_COMMITS, DEPOSED_CONTROLLER_WORK, DIVERGENT_RECORDS, SUPERSEDED_REQUESTS)

# The replication machine's two ladders, one rung per leader change or write of the histories that epoch
# truncation exists for; each counts the rungs climbed in order, so every step towards the hazard scores.
# A record from an epoch the leader's log never reached at that offset, on a follower about to truncate by
# asking that leader (the KIP-279 case).
NEWER_EPOCH_DIVERGENCE: Final = "newer-epoch-divergence"
# A follower that missed leader changes and still fetches from its old leader, which leads again with
# another log (the KIP-320 case).
STALE_FOLLOWER: Final = "stale-follower"
REPLICATION_LABELS: Final = (NEWER_EPOCH_DIVERGENCE, STALE_FOLLOWER)
# Each ladder's last rung: one fetch short of the divergence.
TOP_RUNG: Final = {NEWER_EPOCH_DIVERGENCE: 5, STALE_FOLLOWER: 7}


def scores(cluster: Cluster) -> dict[str, int]:
    return {UNACKNOWLEDGED_COMMITS: unacknowledged_commits(cluster),
            DEPOSED_CONTROLLER_WORK: deposed_controller_work(cluster),
            DIVERGENT_RECORDS: divergent_records(cluster),
            SUPERSEDED_REQUESTS: superseded_requests(cluster)}


def replication_scores(cluster: Cluster) -> dict[str, int]:
    return {NEWER_EPOCH_DIVERGENCE: newer_epoch_divergence(cluster), STALE_FOLLOWER: stale_follower(cluster)}


def unacknowledged_commits(cluster: Cluster) -> int:
    """Over every leader and each live follower in its ISR: how far the follower's high watermark trails
    the leader's, counting only records the follower holds (the ones it could lose by truncating)."""
    total = 0
    for broker in cluster.live_brokers():
        for partition, replica in cluster.managers[broker].replicas.items():
            if replica.role != LEADER:
                continue
            for follower in replica.isr:
                theirs = cluster.managers[follower].replicas.get(partition)
                if follower == broker or theirs is None or not cluster.managers[follower].alive:
                    continue
                total += max(0, min(replica.hw, len(theirs.log)) - theirs.hw)
    return total


def deposed_controller_work(cluster: Cluster) -> int:
    """Live brokers that still act as controller under an epoch a successor has replaced: one for each, plus
    its queued events and its messages in flight."""
    live = cluster.live_brokers()
    epochs = {b: cluster.controllers[b].epoch for b in live}
    newest = max(epochs.values(), default=0)
    deposed = {b for b, epoch in epochs.items() if 0 < epoch < newest}
    in_flight = sum(1 for m in cluster.network.in_flight if m.envelope.src in deposed)
    return sum(1 + len(cluster.controllers[b].queue) for b in deposed) + in_flight


def divergent_records(cluster: Cluster) -> int:
    """Over every partition and pair of replicas (live or not: a log survives a crash), the offsets both
    hold where their records differ."""
    logs: dict[str, list[list[Record]]] = {}
    for manager in cluster.managers.values():
        for partition, replica in manager.replicas.items():
            logs.setdefault(partition, []).append(replica.log)
    total = 0
    for held in logs.values():
        for i, first in enumerate(held):
            for second in held[i + 1:]:
                total += sum(1 for a, b in zip(first, second, strict=False) if a != b)
    return total


def superseded_requests(cluster: Cluster) -> int:
    entries: list[tuple[int, str, int]] = []
    for message in cluster.network.in_flight:
        request = message.envelope.message
        if isinstance(request, LeaderAndIsrRequest):
            entries += [(message.envelope.dst, s.partition, s.leader_epoch) for s in request.partitions]
    newest: dict[tuple[int, str], int] = {}
    for broker, partition, epoch in entries:
        replica = cluster.managers[broker].replicas.get(partition)
        known = -1 if replica is None or replica.leader_epoch is None else replica.leader_epoch
        newest[broker, partition] = max(newest.get((broker, partition), known), epoch)
    return sum(1 for broker, partition, epoch in entries if epoch < newest[broker, partition])


def _first_difference(log: list[Record], other: list[Record]) -> int | None:
    """The first offset where `log` holds what `other` does not (a different record, or any record past
    `other`'s end); None when `log` is a prefix of `other`: nothing there for truncation to repair."""
    for offset, record in enumerate(log):
        if offset >= len(other) or other[offset] != record:
            return offset
    return None


def _node(cluster: Cluster, partition: str) -> tuple[int, int, tuple[int, ...]] | None:
    """The partition's state node: leader, leader epoch, ISR."""
    try:
        data, _ = cluster.store.get(zk_paths.partition_state_path(partition))
    except NoNodeError:
        return None
    return int(data["leader"]), int(data["leader_epoch"]), tuple(int(b) for b in data["isr"])


def _replica_if_up(cluster: Cluster, broker: int, partition: str) -> Replica | None:
    manager = cluster.managers.get(broker)
    return manager.replicas.get(partition) if manager is not None and manager.alive else None


def _leading(cluster: Cluster, broker: int, partition: str) -> Replica | None:
    """The broker's replica if the broker is up and acts as the partition's leader."""
    replica = _replica_if_up(cluster, broker, partition)
    return replica if replica is not None and replica.role == LEADER else None


def _hw_may_pass(leader: Replica, leader_id: int, follower_id: int, offset: int) -> bool:
    """Whether the leader's HW passes `offset` once the follower reports a log end past it: the leader's log
    reaches beyond it and so does every other ISR member, as far as the leader knows."""
    others = [r for r in leader.isr if r not in (leader_id, follower_id)]
    return len(leader.log) > offset and all(leader.follower_leo.get(r, -1) > offset for r in others)


def newer_epoch_divergence(cluster: Cluster) -> int:
    """The highest rung any replica (up or down: a log survives a crash) reaches against its partition's
    leader: 1 it holds a record the leader lacks (a leader change left it behind), 2 the leader holds another
    record at that offset (it wrote over it), 3 the replica's record there comes from a newer leader epoch
    than the leader's (the leader never saw that epoch at that offset), 4 the replica is up and follows this
    leader in its epoch (its next fetch asks this leader where that epoch ends), 5 the leader's HW passes
    that offset once the replica reports its log end."""
    best = 0
    for partition in cluster.partitions:
        node = _node(cluster, partition)
        leader = None if node is None else _leading(cluster, node[0], partition)
        if node is None or leader is None:
            continue
        for broker, manager in cluster.managers.items():
            replica = manager.replicas.get(partition)
            if broker != node[0] and replica is not None:
                best = max(best, _newer_rung(broker, replica, node[0], leader, manager.alive))
    return best


def _newer_rung(broker: int, replica: Replica, leader_id: int, leader: Replica, alive: bool) -> int:
    offset = _first_difference(replica.log, leader.log)
    if offset is None:
        return 0
    if offset >= len(leader.log):
        return 1
    if replica.log[offset][0] <= leader.log[offset][0]:
        return 2
    following = (alive and replica.role == FOLLOWER and replica.leader_id == leader_id
                 and replica.leader_epoch == leader.leader_epoch)
    if not following:
        return 3
    return 5 if _hw_may_pass(leader, leader_id, broker, offset) else 4


def stale_follower(cluster: Cluster) -> int:
    """The highest rung any live follower reaches that fetches without truncating first: 1 it missed a
    leader change (its leader epoch is older than the partition's), 2 the partition's leader lacks a record
    the follower holds, 3 so does the broker the follower still fetches from (it followed another leader
    since), 4 that broker is in the ISR (it may lead again), 5 it leads again, in a newer epoch, 6 it holds
    another record at that offset, 7 its HW passes that offset once the follower reports its log end."""
    best = 0
    for partition in cluster.partitions:
        node = _node(cluster, partition)
        if node is None:
            continue
        for broker in cluster.live_brokers():
            follower = cluster.managers[broker].replicas.get(partition)
            if follower is None or follower.role != FOLLOWER or follower.leader_epoch is None or follower.truncating:
                continue
            if follower.leader_epoch < node[1]:
                best = max(best, _stale_rung(cluster, broker, follower, node))
    return best


def _stale_rung(cluster: Cluster, broker: int, follower: Replica, node: tuple[int, int, tuple[int, ...]]) -> int:
    leader, _, isr = node
    current = _leading(cluster, leader, follower.partition)
    if current is None or _first_difference(follower.log, current.log) is None:
        return 1
    old_id = follower.leader_id
    old = _replica_if_up(cluster, old_id, follower.partition)
    offset = None if old is None else _first_difference(follower.log, old.log)
    if old is None or offset is None:
        return 2
    if old_id not in isr:
        return 3
    if old.role != LEADER or (old.leader_epoch or 0) <= (follower.leader_epoch or 0):
        return 4
    if offset >= len(old.log):
        return 5
    return 7 if _hw_may_pass(old, old_id, broker, offset) else 6

