"""How close a cluster is to the known ways of losing safety: scores that steer hypothesis's search
(`hypothesis.target`) toward the states the historical bugs start from.

The stateful machines draw rules uniformly, and the bugs of the brief each need about ten steps in one
order; uniform draws almost never meet them. Each score measures a precondition that a safe design must
survive and a broken one does not: the search climbs towards states with more of it, and the design's
own steps (truncation, fencing) decide whether an invariant breaks. A score never looks at which knobs
are set, so it steers the safe design exactly as hard.
"""

from __future__ import annotations

from typing import Final

from kcm.impl.cluster import Cluster
from kcm.impl.messages import LeaderAndIsrRequest, Record
from kcm.impl.replica_manager import LEADER

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


def scores(cluster: Cluster) -> dict[str, int]:
    return {UNACKNOWLEDGED_COMMITS: unacknowledged_commits(cluster),
            DEPOSED_CONTROLLER_WORK: deposed_controller_work(cluster),
            DIVERGENT_RECORDS: divergent_records(cluster),
            SUPERSEDED_REQUESTS: superseded_requests(cluster)}


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
