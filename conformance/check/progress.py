"""The progress properties on traces: bounded checks after quiescence (docs/invariants.md, "Progress
properties").

A `Quiesce` event starts a calm phase and names, per property, its bound in rounds of the fair schedule;
a round ends with its Tick, so the check of a property is due at the Tick that ends its last round. A
storm event (a fault, a drop or duplicate, an operator's command, a client write, a new controlled
shutdown) before a deadline ends the calm phase early: what was not yet due is left unchecked, never
judged on a state the calm phase did not finish with. A trace without a marker leaves every property
unobserved.

Conditions are Kafka's (2.3.0): only live brokers count, and a broker in controlled shutdown is not
electable (ControllerContext.scala `liveBrokerIds` excludes `shuttingDownBrokerIds`, which every election
of Election.scala but the controlled shutdown's own tests through `isReplicaOnline`). Which brokers are
shutting down is not a state variable: it is read off the events (a `RequestControlledShutdown` starts
one; its `stopped` step, the broker's crash or restart ends it).

The monitor reads the checker's state and costs a set lookup per event; a deadline scans the partitions
once.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Final

from kcm.impl.zk_paths import REASSIGN
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import ACTIONS, NO_LEADER, PROPERTIES

# Which variables each property reads: a trace that does not observe them all leaves it unobserved.
PROGRESS_READS: Final[dict[str, tuple[str, ...]]] = {
    "ControllerElected": ("controller", "controller_epoch", "alive", "acting_controller_epoch"),
    "LeaderElected": ("leader", "leader_epoch", "isr", "alive", "role", "local_leader_epoch"),
    "HighWatermarkCatchesUp": ("leader", "leader_epoch", "isr", "alive", "role", "local_leader_epoch", "log", "hw"),
    "ControlledShutdownCompletes": ("leader", "isr", "alive", "role", "controller_epoch"),
    "ReassignmentCompletes": ("assignment", "alive"),
    "TopicDeletionCompletes": ("assignment", "alive", "replica_state"),
    "ReplicasRejoinIsr": ("assignment", "leader", "leader_epoch", "isr", "alive", "role", "local_leader_epoch"),
}
# Events that end a calm phase: anything its fair schedule never takes.
STORM_ACTIONS: Final = frozenset(
    a for a, kind in ACTIONS.items() if kind in ("admin", "client", "network", "env") and a not in ("Init", "Quiesce")
)
# Controller requests that move a broker's replicas, which a broker refuses when stale (`applied: false`).
REFUSABLE: Final = frozenset({"LeaderAndIsr", "StopReplica"})
# The events the monitor reads: the storm's, the marker, the clock and the lifecycle of controlled shutdowns.
WATCHED: Final = STORM_ACTIONS | {"Init", "Quiesce", "Tick", "RequestControlledShutdown", "ControlledShutdownResponse",
                                  *REFUSABLE}

_NONE: Final[dict[str, Any]] = {}


def off_reassign_node(writes: Any, partitions: Collection[str]) -> list[str]:
    """Those of `partitions` that a controller's store writes (`args.writes`) take off the reassignment request's
    node: every one when the node is deleted, those a new version leaves out. Read with care: a malformed event
    is the invariants' to report, never a crash here."""
    left = set(partitions)
    for write in writes if isinstance(writes, list) else ():
        if not (isinstance(write, list) and len(write) == 3 and write[1] == REASSIGN):
            continue
        op, _, data = write
        if op == "Delete":
            left = set()
        elif op == "SetData" and isinstance(data, dict):
            left = {p for p in left if p in data}
    return [p for p in partitions if p not in left]


@dataclass(slots=True)
class _Phase:
    """A calm phase under way: its marker, the Ticks since, and the properties still due (round, name)."""

    marker: int
    rounds: int
    due: list[tuple[int, str]]


class ProgressMonitor:
    """What the progress properties need beyond the state (brokers shutting down, topics being deleted,
    reassignments requested, the calm phase under way), and their checks at the deadlines."""

    def __init__(
        self, state: Callable[[], dict[str, Any]], observed: set[str], count: Callable[[str], None]
    ) -> None:
        self._state = state
        self._observed = observed
        self._count = count  # a property's checks, one per deadline it was judged at
        # (seq, property) of every check, in order: what judged the interleavings before it (check.interleavings)
        self.judged: list[tuple[int, str]] = []
        self._reset()

    def _reset(self) -> None:
        self.shutting_down: set[str] = set()
        self.refused: set[str] = set()  # brokers that refused a controller request since they last started
        self.deleting: set[str] = set()
        self.reassigning: dict[str, list[Any]] = {}
        self.phase: _Phase | None = None

    def observe(self, event: Event, seq: int) -> list[tuple[str, str]]:
        """Reads a watched event before its change lands; returns the (property, message) it finds violated."""
        action = event["action"]
        args: dict[str, Any] = event["args"]
        broker = event["actor"].partition(":")[2]
        if action == "Init":
            self._reset()
            return []
        if action == "Quiesce":
            bounds = args.get("bounds")
            due = bounds.items() if isinstance(bounds, dict) else ()
            self.phase = _Phase(seq, 0, sorted((n, name) for name, n in due if name in PROPERTIES and type(n) is int))
            return []
        if action == "Tick":
            return self._tick(seq)
        found: list[tuple[str, str]] = []
        if action in REFUSABLE:
            if args.get("applied") is False:
                self.refused.add(broker)
            return found
        if action in ("RequestControlledShutdown", "ControlledShutdownResponse"):
            if action == "RequestControlledShutdown" and broker not in self.shutting_down:
                self.phase = None  # a new controlled shutdown: the storm's doing
            if args.get("stopped"):
                if self.phase is not None and action == "ControlledShutdownResponse":
                    found.extend(self._clean_stop(broker, args.get("controller_epoch"), seq))
                self.shutting_down.discard(broker)
                self.refused.discard(broker)
            else:
                self.shutting_down.add(broker)
            return found
        self.phase = None
        # Read with care: a malformed event is the invariants' to report, never a crash of the monitor.
        if action in ("BrokerCrash", "ControllerCrash", "BrokerRestart"):
            self.shutting_down.discard(str(args.get("broker")))
            self.refused.discard(str(args.get("broker")))
        elif action == "DeleteTopic" and not args.get("error") and isinstance(args.get("topic"), str):
            self.deleting.add(args["topic"])
        elif action == "CreateTopic" and not args.get("error"):
            # The topic node was free: a deletion of that name completed, whenever it was last judged, and with it
            # any reassignment of its partitions.
            topic = args.get("topic")
            self.deleting.discard(topic)
            for p in [p for p in self.reassigning if p.rpartition("-")[0] == topic]:
                del self.reassigning[p]
        elif action == "ReassignPartitions" and not args.get("error") and isinstance(args.get("targets"), dict):
            self.reassigning.update({p: t for p, t in args["targets"].items() if isinstance(p, str)
                                     and isinstance(t, list)})
        return found

    def note_writes(self, writes: Any) -> None:
        """A controller's store writes (`args.writes`): a reassignment is over, done or dropped, once its
        partition leaves the request's node. Its assignment alone cannot tell: a target that reorders the
        replicas is the assignment from the reassignment's first step on."""
        for p in off_reassign_node(writes, self.reassigning):
            del self.reassigning[p]

    # -- deadlines ---------------------------------------------------------------------------------------

    def _tick(self, seq: int) -> list[tuple[str, str]]:
        phase = self.phase
        if phase is None:
            return []
        phase.rounds += 1
        found: list[tuple[str, str]] = []
        while phase.due and phase.due[0][0] <= phase.rounds:
            _, name = phase.due.pop(0)
            if all(var in self._observed for var in PROGRESS_READS[name]):
                self._count(name)
                self.judged.append((seq, name))
                when = f"{phase.rounds} rounds after quiescence at seq {phase.marker} (due at seq {seq})"
                found.extend((name, f"{message} {when}") for message in _CHECKS[name](self, self._state()))
        if not phase.due:
            self.phase = None
        return found

    def _live(self, state: dict[str, Any]) -> list[str]:
        return sorted((b for b, up in state["alive"].items() if up), key=int)

    def _electable(self, state: dict[str, Any], brokers: Any) -> list[str]:
        alive = state["alive"]
        return [str(r) for r in brokers or () if alive.get(str(r)) and str(r) not in self.shutting_down]

    def _partitions(self, state: dict[str, Any]) -> list[str]:
        """The store's partitions but those of topics being deleted (a deletion takes them offline)."""
        deleting = self.deleting
        return sorted(p for p in state["assignment"] if p.rpartition("-")[0] not in deleting)

    def _controller(self, state: dict[str, Any]) -> list[str]:
        live = self._live(state)
        if not live:
            return []
        holder = state["controller"]
        if holder == NO_LEADER:
            return [f"no controller although brokers {', '.join(live)} are live"]
        acting = state["acting_controller_epoch"].get(str(holder))
        if str(holder) not in live or acting != state["controller_epoch"]:
            return [f"controller {holder} of controller epoch {state['controller_epoch']} is not acting (live: "
                    f"{str(holder) in live}, acting in controller epoch {acting})"]
        return []

    def _acting_leader(self, state: dict[str, Any], p: str) -> str | None:
        """What keeps the partition's store leader from leading it, None if nothing does."""
        leader = state["leader"].get(p, NO_LEADER)
        if leader == NO_LEADER:
            return "no leader"
        b = str(leader)
        if not state["alive"].get(b):
            return f"leader {b} is not live"
        if b in self.shutting_down:
            return f"leader {b} is in controlled shutdown"
        role = state["role"].get(b, _NONE).get(p)
        epoch = state["local_leader_epoch"].get(b, _NONE).get(p)
        if role != "leader" or epoch != state["leader_epoch"].get(p):
            return (f"leader {b} does not act as leader of epoch {state['leader_epoch'].get(p)} (it has role "
                    f"{role}, epoch {epoch})")
        return None

    def _leaders(self, state: dict[str, Any]) -> list[str]:
        out = []
        for p in self._partitions(state):
            electable = self._electable(state, state["isr"].get(p))
            missing = self._acting_leader(state, p) if electable else None
            if missing is not None:
                out.append(f"{p}: {missing} although ISR member(s) {', '.join(electable)} are live and not "
                           f"shutting down")
        return out

    def _high_watermarks(self, state: dict[str, Any]) -> list[str]:
        out = []
        for p in self._partitions(state):
            if self._acting_leader(state, p) is not None:
                continue  # LeaderElected's to report
            leader = str(state["leader"][p])
            end = len(state["log"].get(leader, _NONE).get(p, ()))
            hw = state["hw"].get(leader, _NONE).get(p, 0)
            behind = [f"leader {leader} has HW {hw} of log end {end}"] if hw != end else []
            for r in self._electable(state, state["isr"].get(p)):
                if r == leader:
                    continue
                r_end = len(state["log"].get(r, _NONE).get(p, ()))
                r_hw = state["hw"].get(r, _NONE).get(p, 0)
                if (r_end, r_hw) != (end, hw):
                    behind.append(f"ISR member {r} has log end {r_end} and HW {r_hw}")
            if behind:
                out.append(f"{p}: HW has not caught up with the ISR's log end {end}: {'; '.join(behind)}")
        return out

    def _replicas_in_isr(self, state: dict[str, Any]) -> list[str]:
        """A live replica not in the ISR of a led partition: a follower that never came back (Kafka 2.3.0
        Partition.scala maybeExpandIsr adds it at the fetch that reaches the HW). A broker shutting down is left
        out: the controller takes it out of every ISR on purpose (KafkaController.scala doControlledShutdown)."""
        out = []
        for p in self._partitions(state):
            if self._acting_leader(state, p) is not None:
                continue  # LeaderElected's to report
            isr = {str(r) for r in state["isr"].get(p) or ()}
            missing = [r for r in self._electable(state, state["assignment"][p]) if r not in isr]
            if missing:
                members = ", ".join(sorted(isr, key=int))
                out.append(f"{p}: live replica(s) {', '.join(missing)} not in the ISR [{members}] of leader "
                           f"{state['leader'][p]}")
        return out

    def _shutdowns(self, state: dict[str, Any]) -> list[str]:
        out = []
        alive = state["alive"]
        for b in sorted(self.shutting_down, key=int):
            if alive.get(b):
                led = sorted(p for p, leader in state["leader"].items() if str(leader) == b)
                out.append(f"broker {b} is still in controlled shutdown (leading {', '.join(led) or 'nothing'})")
        return out

    def _clean_stop(self, broker: str, answered_in: Any, seq: int) -> list[tuple[str, str]]:
        """A broker that completes its controlled shutdown in a calm phase leads nothing another live ISR member
        could lead, neither in the store nor by its own role; unless a deposed controller answered it. Kafka's
        broker takes any answer without an error or a remaining partition (2.3.0 KafkaServer.scala
        controlledShutdown), yet may refuse that controller's LeaderAndIsr as stale (ReplicaManager.scala:
        "since its controller epoch ... is old"), and the new controller's failover redoes its moves: the broker
        may stop still leading what the deposed controller moved. Likewise a broker that refused a controller
        request as stale since it started (KafkaApis.scala isBrokerEpochStale, a request addressed to its previous
        registration): the refused request may be the one that moved its leadership."""
        state = self._state()
        current = state["controller_epoch"]
        if isinstance(answered_in, int) and isinstance(current, int) and answered_in < current:
            return []
        if broker in self.refused:
            return []
        found = []
        for p, role in sorted(state["role"].get(broker, _NONE).items()):
            leader = str(state["leader"].get(p, NO_LEADER))
            if role != "leader" and leader != broker:
                continue
            others = [r for r in self._electable(state, state["isr"].get(p)) if r != broker]
            if leader != broker:
                found.append(f"{p}: broker {broker} completed its controlled shutdown at seq {seq} still acting as "
                             f"leader, though the store names leader {leader}")
            elif others:
                found.append(f"{p}: broker {broker} completed its controlled shutdown at seq {seq} still leading, "
                             f"although ISR member(s) {', '.join(others)} are live and not shutting down")
        return [("ControlledShutdownCompletes", message) for message in found]

    def _reassignments(self, state: dict[str, Any]) -> list[str]:
        out = []
        assignment, alive = state["assignment"], state["alive"]
        for p, target in sorted(self.reassigning.items()):
            current = assignment.get(p)
            if current is None:
                del self.reassigning[p]
                continue
            # A reassignment of a topic being deleted may be dropped (2.3.0 KafkaController.scala
            # maybeTriggerPartitionReassignment: "Skipping reassignment of ... since the topic is currently being
            # deleted"); the deletion's property judges that topic.
            if p.rpartition("-")[0] in self.deleting:
                continue
            if all(alive.get(str(r)) for r in {*current, *target}):
                out.append(f"{p}: reassignment to {list(target)} not complete (assignment {list(current)}) although "
                           f"all its brokers are live")
        return out

    def _deletions(self, state: dict[str, Any]) -> list[str]:
        out = []
        alive = state["alive"]
        controller = str(state["controller"])
        replica_states = state["replica_state"].get(controller, _NONE)
        for topic in sorted(self.deleting):
            partitions = sorted(p for p in state["assignment"] if p.rpartition("-")[0] == topic)
            if not partitions:
                self.deleting.discard(topic)
                continue
            brokers = {str(r) for p in partitions for r in state["assignment"][p]}
            if not all(alive.get(b) for b in brokers) or any(p in self.reassigning for p in partitions):
                continue
            # A replica whose deletion failed waits for its broker's next startup (2.3.0
            # TopicDeletionManager.scala: "Topic deletion is resumed when ... broker ... is started").
            if any(s == "ReplicaDeletionIneligible" for p in partitions for s in replica_states.get(p, _NONE).values()):
                continue
            out.append(f"topic {topic}: deletion not complete (partitions {', '.join(partitions)} remain) although "
                       f"all its brokers are live")
        return out


_CHECKS: Final[dict[str, Callable[[ProgressMonitor, dict[str, Any]], list[str]]]] = {
    "ControllerElected": ProgressMonitor._controller,
    "LeaderElected": ProgressMonitor._leaders,
    "HighWatermarkCatchesUp": ProgressMonitor._high_watermarks,
    "ControlledShutdownCompletes": ProgressMonitor._shutdowns,
    "ReassignmentCompletes": ProgressMonitor._reassignments,
    "TopicDeletionCompletes": ProgressMonitor._deletions,
    "ReplicasRejoinIsr": ProgressMonitor._replicas_in_isr,
}
