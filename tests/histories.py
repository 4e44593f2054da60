"""Short histories built on the implementation's cluster, shared by tests of several checkers."""

from __future__ import annotations

from kcm.impl.sim.cluster import Cluster, broker_ids
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs


def reelected_controller(run: str, back: bool) -> list[Event]:
    """tests/scenarios/reelected_controller_reloads.txt: controller 1 re-elected after retiring replica 1
    unnoticed, with the partition reassigned back to broker 1 before (`back`) or not."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(3), Knobs(), events.append)
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
    return _named(events, run)


def restarted_broker_requests(run: str, knobs: Knobs) -> list[Event]:
    """tests/scenarios/broker_epoch.txt: a request in flight to broker 3 when it crashes and restarts, then
    one addressed to broker 3's previous registration by a controller that has not seen it bounce."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(3), knobs, events.append)
    cluster.stabilize()
    cluster.create_topic("t0", {0: (2, 3)})
    cluster.stabilize()
    cluster.crash(2)
    cluster.process_controller_event(1)
    cluster.crash(3)
    cluster.restart(3)
    cluster.stabilize()
    cluster.create_topic("t1", {0: (3, 1)})
    cluster.crash(3)
    cluster.restart(3)
    cluster.process_controller_event(1)
    cluster.stabilize()
    return _named(events, run)


def reassignment_keeping_its_leader(run: str) -> list[Event]:
    """tests/scenarios/reassignment_keeping_its_leader.txt: t0-0 on [1,2,3], led by 1, reassigned to [2,1].
    Step 7 of Kafka 2.3.0's onPartitionReassignment (the leader is in RAR and alive) bumps the leader
    epoch and sends LeaderAndIsr with AR = RAR and the ISR kept to OAR + RAR: brokers 1 and 2 apply an ISR
    [1,2,3] whose broker 3 is outside their replicas [2,1]; broker 3, outside them, ignores it."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(3), Knobs(), events.append)
    cluster.create_topic("t0", {0: (1, 2, 3)})
    cluster.stabilize()
    cluster.produce(1, "t0-0", -1)
    cluster.stabilize()
    cluster.reassign({"t0-0": (2, 1)})
    cluster.stabilize()
    return _named(events, run)


def stale_isr_cache(run: str) -> list[Event]:
    """docs/invariants.md, "A history the failover closes": broker 1 leads t0-0 (assignment 2,1) alone; its
    session expires and broker 2 is elected controller; broker 1 registers again, broker 2 fetches from it,
    broker 1 takes a record (acks=1), crashes and restarts, and the controller starts it up."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(2), Knobs(), events.append)
    cluster.stabilize()
    cluster.create_topic("t0", {0: (2, 1)})
    cluster.stabilize()
    cluster.crash(2)
    cluster.process_controller_event(1)  # broker 1 leads epoch 1 alone
    cluster.restart(2)
    cluster.process_controller_event(1)  # broker 2 starts as a follower, outside the ISR
    _drain(cluster)
    cluster.expire_session(1)
    cluster.process_controller_event(2)  # broker 2 elected: leader 1 unregistered, taken out of the leadership
    cluster.process_controller_event(1)  # broker 1 registers again and resigns
    cluster.send_fetch(2, "t0-0")
    _drain(cluster)  # broker 1, leading epoch 1 locally, tries to put broker 2 in the store's ISR
    cluster.produce(1, "t0-0", acks=1)
    cluster.crash(1)
    cluster.restart(1)
    cluster.stabilize()
    return _named(events, run)


def _named(events: list[Event], run: str) -> list[Event]:
    for event in events:
        event["run"] = run
    return events


def _drain(cluster: Cluster) -> None:
    """Deliver every message in flight, in the order sent."""
    while cluster.deliver_oldest() is not None:
        pass
