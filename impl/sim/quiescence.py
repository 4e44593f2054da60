"""The bounds of the progress properties in a calm phase: how many rounds of `Cluster.fair_round` each
property may take, derived from the protocol's causal chains (docs/invariants.md, "Progress properties",
gives the derivation step by step; this module is its arithmetic).

A round serves, in order, the controller events queued at its start, the messages ready at the start of
delivery, one fetch per follower, the due ISR shrinks and controlled shutdown retries, then a Tick. So:

* a message takes at most `hop = max_delay + 1` rounds from its send to its delivery (its delay is at most
  `max_delay` ticks, and one sent after delivery waits for the next round's);
* a request and its response take at most `2 * hop` (a follower's next fetch goes in the round its
  response arrives);
* a controller event waits at most one round (queued during a round, it is served at the next one's start).
"""

from __future__ import annotations

from math import ceil

from kcm.impl.design import REPLICA_LAG_TICKS
from kcm.impl.replica_manager import CONTROLLED_SHUTDOWN_ATTEMPTS, MAX_FETCH_RECORDS, REQUEST_TIMEOUT_TICKS
from kcm.impl.sim.cluster import Cluster


def progress_bounds(max_delay: int, longest_log: int) -> dict[str, int]:
    """Rounds after a `Quiesce` event within which each property must hold, for a network delaying messages by
    up to `max_delay` ticks and logs of at most `longest_log` records (no client writes in a calm phase)."""
    hop = max_delay + 1
    round_trip = 2 * hop
    # A controlled shutdown: at most CONTROLLED_SHUTDOWN_ATTEMPTS attempts, each answered (or found lost)
    # within a round trip, then one more call that gives up; a controller exists from the first round (a
    # broker's queued ControllerChange or Reregister elects one).
    shutdown = 1 + (CONTROLLED_SHUTDOWN_ATTEMPTS + 1) * round_trip
    # A controller: elected in the first round, unless the controller itself is the broker leaving: its stop
    # (by the round `shutdown` at the latest) queues the ControllerChange the next round serves.
    controller = shutdown + 1
    # A leader: the leaving broker's stop is seen by a BrokerChange the next round (or the failover of a new
    # controller), whose election sends LeaderAndIsr, delivered within a hop. Elections without a shutdown
    # finish sooner.
    elected = controller + hop
    # A follower's catch-up: it first finds its fetch timed out (a request lost before the calm phase), then
    # truncates (one round trip), fetches the leader's log MAX_FETCH_RECORDS records at a time, then reports
    # its log end (the leader's HW moves, the ISR grows) and learns the HW (two more round trips).
    # Meanwhile a dead ISR member is shrunk once it has lagged REPLICA_LAG_TICKS, in the round after.
    fetches = 1 + ceil(longest_log / MAX_FETCH_RECORDS) + 2
    catch_up = max(REQUEST_TIMEOUT_TICKS + fetches * round_trip, REPLICA_LAG_TICKS + 2)
    # A reassignment: its controller event (a round, once a leader acts), the LeaderAndIsr to the new
    # replicas (a hop), their catch-up into the ISR, then the ReassignmentIsrChange their ISR write queues
    # (a round), which completes it.
    reassignment = elected + 1 + hop + catch_up + 1
    # The last leader a calm phase elects is a completed reassignment's: judged once its LeaderAndIsr is in.
    leader = reassignment + hop
    # The HW: the followers of that last leader catch up; a shrink that lost a race with the controller's
    # write waits for the LeaderAndIsr with the new version (a hop).
    high_watermark = leader + hop + catch_up
    # A deletion waits for its partitions' reassignments, then starts (a round) and completes when the
    # StopReplica(delete) responses are back (a round trip).
    deletion = reassignment + 1 + round_trip
    return {
        "ControllerElected": controller,
        "LeaderElected": leader,
        "HighWatermarkCatchesUp": high_watermark,
        "ControlledShutdownCompletes": shutdown,
        "ReassignmentCompletes": reassignment,
        "TopicDeletionCompletes": deletion,
        # A replica back in the ISR: the same catch-up as the HW's, which ends with the ISR write.
        "ReplicasRejoinIsr": high_watermark,
    }


def cluster_bounds(cluster: Cluster) -> dict[str, int]:
    """`progress_bounds` for the cluster as it is now: its network's delay and its longest log."""
    longest = max((len(r.log) for m in cluster.managers.values() for r in m.replicas.values()), default=0)
    return progress_bounds(cluster.network.max_delay, longest)


def calm_phase(cluster: Cluster) -> dict[str, int]:
    """Marks a calm phase and runs the fair schedule until every property's bound has passed; returns the
    bounds."""
    bounds = cluster_bounds(cluster)
    cluster.quiesce(bounds)
    for _ in range(max(bounds.values())):
        cluster.fair_round()
    return bounds
