"""The interleaving space: each long operation of the controller, at each of its steps, crossed with each fault
and the role of the broker the fault hits. Named once here, from the model; the tracker that finds the points in
traces (`kcm.conformance.check.interleavings`), the steered campaign that aims at them and the report read it.

A step is a stretch of the operation between two events a trace shows (docs/interleavings.md has the table with
the events and Kafka 2.3.0's code for each); a point is reached when a fault event lands while the operation is at
that step. Each operation is judged after its faults stop by the progress property named here, and throughout by
every invariant.

Two faults of the issue's list are not points: a reordered request is every delivery of the model, whose network
is a bag (`KafkaReplication.tla` delivers any message in flight), so no event marks it; ZooKeeper being unavailable
is not in the model at all (its store answers every request), and is the ZooKeeper adapter's campaign
(`kcm zk`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Operation:
    name: str
    steps: tuple[str, ...]
    roles: tuple[str, ...]
    judged_by: str  # the progress property that decides, after the faults stop, whether it completed


# Roles of the broker a fault hits, relative to the operation it lands in (a broker may hold several).
CONTROLLER, LEADER, FOLLOWER, ADDING, REMOVING, SHUTTING_DOWN, STARTING = (
    "controller", "leader", "follower", "adding", "removing", "shutting down", "starting")
ROLES: Final = (CONTROLLER, LEADER, FOLLOWER, ADDING, REMOVING, SHUTTING_DOWN, STARTING)

# Faults, by the trace action that is each.
FAULTS: Final[dict[str, str]] = {
    "crash": "BrokerCrash",
    "restart": "BrokerRestart",
    "session expiry": "SessionExpire",
    "controller failover": "ControllerCrash",
    "lost request": "DropMessage",
    "duplicated request": "DuplicateMessage",
}
FAULT_OF_ACTION: Final = {action: fault for fault, action in FAULTS.items()}

SHUTDOWN, REASSIGNMENT, DELETION, PREFERRED, FAILOVER, STARTUP = (
    "controlled shutdown", "reassignment", "topic deletion", "preferred election", "controller failover",
    "broker startup")

OPERATIONS: Final[dict[str, Operation]] = {op.name: op for op in (
    # RequestControlledShutdown .. the controller's ControlledShutdownRequest .. its answer, retried while
    # leaderships remain (KafkaServer.controlledShutdown, KafkaController.doControlledShutdown).
    Operation(SHUTDOWN, ("requested", "leaders moving", "retrying"),
              (CONTROLLER, SHUTTING_DOWN, LEADER, FOLLOWER), "ControlledShutdownCompletes"),
    # ReassignPartitions .. AR := RAR + OAR and the wait for RAR in the ISR (steps 1-4 of
    # KafkaController.onPartitionReassignment) .. RAR in the ISR in the store, the controller not yet told
    # (its ReassignmentIsrChange queued) .. steps 5-12 done in the store, their LeaderAndIsr and StopReplica to
    # the leader and to OAR - RAR still on their way.
    Operation(REASSIGNMENT, ("requested", "expanding", "completing", "retiring"),
              (CONTROLLER, LEADER, FOLLOWER, ADDING, REMOVING), "ReassignmentCompletes"),
    # DeleteTopic .. TopicDeletionManager's StopReplica rounds .. a replica ineligible, retried on its return.
    Operation(DELETION, ("requested", "stopping replicas", "retrying"),
              (CONTROLLER, LEADER, FOLLOWER), "TopicDeletionCompletes"),
    # PreferredElection (or the auto-rebalance's pick) .. the new leadership on its way to the replicas.
    Operation(PREFERRED, ("requested", "electing"), (CONTROLLER, LEADER, FOLLOWER), "LeaderElected"),
    # No controller .. ControllerElect with its context loaded .. every live broker told the new epoch
    # (KafkaController.onControllerFailover: initializeControllerContext, sendUpdateMetadataRequest).
    Operation(FAILOVER, ("electing", "announcing"), (CONTROLLER, LEADER, FOLLOWER), "ControllerElected"),
    # BrokerRestart or a session's re-registration .. the controller's BrokerChange (onBrokerStartup) .. the broker
    # back in the ISR of its partitions.
    Operation(STARTUP, ("registering", "catching up"), (CONTROLLER, STARTING, LEADER, FOLLOWER),
              "ReplicasRejoinIsr"),
)}


@dataclass(frozen=True, order=True)
class Point:
    operation: str
    step: str
    fault: str
    role: str

    @property
    def key(self) -> str:
        return f"{self.operation} / {self.step} / {self.fault} / {self.role}"


def unreachable(point: Point) -> str | None:
    """Why the model never reaches the point, or None. Each reason is a rule of the model or of the step's own
    definition, never a campaign's failure to get there: a point no campaign reached shows as not reached."""
    if point.operation == FAILOVER and point.step == "electing" and point.role == CONTROLLER:
        return "while a controller is being elected no broker holds the office (the step is that /controller is empty)"
    if point.operation == FAILOVER and point.step == "electing" and point.fault == "controller failover":
        return "the controller's crash needs a controller, and while one is being elected there is none"
    if point.fault == "restart" and point.role == CONTROLLER:
        return ("a restart hits a broker that is down, and a broker's crash expires its session and with it its "
                "ephemeral /controller node: a broker that is down is never the controller")
    if point.fault == "restart" and point.role in (SHUTTING_DOWN, STARTING):
        return (f"a restart hits a broker that is down; the {point.role} broker is up (its crash ends the "
                f"{point.operation})")
    return None


def points() -> list[Point]:
    """Every point of the space, in the order of the operations, their steps, the faults and the roles."""
    return [Point(op.name, step, fault, role)
            for op in OPERATIONS.values() for step in op.steps for fault in FAULTS for role in op.roles]


def reachable_points() -> list[Point]:
    return [p for p in points() if unreachable(p) is None]
