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
