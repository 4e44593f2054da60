"""Short histories built on the implementation's cluster, shared by tests of several checkers."""

from __future__ import annotations

from kcm.impl.sim.cluster import Cluster
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs


def reelected_controller(run: str, back: bool) -> list[Event]:
    """tests/scenarios/reelected_controller_reloads.txt: controller 1 re-elected after retiring replica 1
    unnoticed, with the partition reassigned back to broker 1 before (`back`) or not."""
    events: list[Event] = []
    cluster = Cluster(3, Knobs(), events.append)
    cluster.create_topic("t0", {0: (1, 2)})
    cluster.stabilize()
    cluster.expire_session(1)
    cluster.reassign({"t0-0": (2,)})
    cluster.process_controller_event(3)
    if back:
        cluster.reassign({"t0-0": (1,)})
    cluster.crash_controller()
    cluster.stabilize()
    assert any(e["action"] == "BrokerReregister" and e["args"].get("elected") for e in events)
    for event in events:
        event["run"] = run
    return events


def reassignment_keeping_its_leader(run: str) -> list[Event]:
    """tests/scenarios/reassignment_keeping_its_leader.txt: t0-0 on [1,2,3], led by 1, reassigned to [2,1].
    Step 7 of Kafka 2.3.0's onPartitionReassignment (the leader is in RAR and alive) bumps the leader
    epoch and sends LeaderAndIsr with AR = RAR and the ISR kept to OAR + RAR: brokers 1 and 2 apply an ISR
    [1,2,3] whose broker 3 is outside their replicas [2,1]; broker 3, outside them, ignores it."""
    events: list[Event] = []
    cluster = Cluster(3, Knobs(), events.append)
    cluster.create_topic("t0", {0: (1, 2, 3)})
    cluster.stabilize()
    cluster.produce(1, "t0-0", -1)
    cluster.stabilize()
    cluster.reassign({"t0-0": (2, 1)})
    cluster.stabilize()
    for event in events:
        event["run"] = run
    return events


def stale_isr_hazard(run: str) -> list[Event]:
    """docs/invariants.md, "A hazard of the safe design": t0-0 on [2, 1]. Broker 1 leads epoch 1 alone
    (ISR [1]); its session expires and broker 2, now controller, loads the partition as offline with that
    node cached. Broker 1 registers again and, still leading epoch 1, adds broker 2 to the ISR in the store
    ([1, 2]); the controller's cache keeps [1] (the ISR change notification queues behind the broker
    change). Broker 1 takes a record with acks=1, crashes and restarts. The broker change sends broker 1
    the cached node (leader 1, epoch 1, ISR [1]) from its OnlineReplica step, then elects broker 2 from
    the store's ISR (epoch 2). Broker 1 takes the first request, leads epoch 1 alone and moves its HW
    over the record broker 2 lacks (the last event)."""
    events: list[Event] = []
    cluster = Cluster(2, Knobs(), events.append)
    cluster.create_topic("t0", {0: (2, 1)})
    cluster.stabilize()
    cluster.crash(2)
    cluster.process_controller_event(1)  # broker 2 failed: broker 1 leads epoch 1, ISR [1]
    cluster.restart(2)
    cluster.process_controller_event(1)
    _deliver(cluster, 9)
    cluster.process_controller_event(2)  # /controller is taken: no election
    cluster.expire_session(1)
    cluster.process_controller_event(2)  # broker 2 controller, t0-0 loaded as offline
    cluster.process_controller_event(1)  # broker 1 registers again
    _deliver(cluster, 4)
    cluster.send_fetch(2, "t0-0")
    _deliver(cluster, 1)  # broker 1 adds broker 2 to the ISR in the store
    cluster.produce(1, "t0-0", 1)
    cluster.crash(1)
    cluster.restart(1)
    cluster.process_controller_event(2)
    cluster.process_controller_event(2)  # the broker change
    _deliver(cluster, 2)  # an UpdateMetadata, then the cached node to broker 1
    for event in events:
        event["run"] = run
    return events


def _deliver(cluster: Cluster, count: int) -> None:
    for _ in range(count):
        assert cluster.deliver_oldest() is not None
