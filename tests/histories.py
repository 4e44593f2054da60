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
    for event in events:
        event["run"] = run
    return events
