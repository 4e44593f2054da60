"""Interleaving coverage: which points of the space (`kcm.spec.interleavings`) a trace reaches, each judged.

`Tracker` reads a trace event by event, keeps the state and the operations under way with the step each is at,
and names the points a fault event lands on (the state before the fault gives the roles of the broker it hits).
`InterleavingCoverage` counts the points reached per campaign, and, for a run the invariant checker judged, whether the
operation's progress property was checked after the point (held or violated) and which invariants broke after it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from rich.table import Table

from kcm.conformance.check.progress import off_reassign_node
from kcm.conformance.check.svg import Svg
from kcm.spec.interleavings import (
    ADDING,
    CONTROLLER,
    DELETION,
    FAILOVER,
    FAULT_OF_ACTION,
    FAULTS,
    FOLLOWER,
    LEADER,
    OPERATIONS,
    PREFERRED,
    REASSIGNMENT,
    REMOVING,
    ROLES,
    SHUTDOWN,
    SHUTTING_DOWN,
    STARTING,
    STARTUP,
    Point,
    points,
    unreachable,
)
from kcm.spec.trace.format import Event, apply_event, empty_state
from kcm.spec.vocabulary import NO_LEADER

INELIGIBLE: Final = "ReplicaDeletionIneligible"


@dataclass
class _Reassignment:
    step: str
    target: tuple[int, ...]
    original: tuple[int, ...]


class Tracker:
    """The operations under way in one trace, and the points its faults land on."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.state: dict[str, Any] = empty_state()
        self.shutdowns: dict[int, str] = {}
        self.reassignments: dict[str, _Reassignment] = {}
        # topic -> (step, each partition's leader when the deletion was asked for: the deletion takes every live
        # leader away at its first step, ReplicaStateMachine's ISR removal leaving leader -1, so the roles of a
        # deletion are those it started with)
        self.deletions: dict[str, tuple[str, dict[str, int]]] = {}
        self.preferred: dict[str, str] = {}
        self.failover: tuple[str, int] | None = None  # (step, the new controller's epoch)
        self.startups: dict[int, str] = {}

    def observe(self, event: Event) -> list[Point]:
        """The points this event reaches (a fault's, read on the state before it), then the event applied."""
        action = event["action"]
        if action == "Init":
            self._reset()  # a new run: nothing under way
        fault = FAULT_OF_ACTION.get(action)
        reached = self._points(fault, self._hit(event)) if fault is not None else []
        apply_event(self.state, event)
        self._advance(event)
        return reached

    # -- the points ------------------------------------------------------------------------------------------

    @staticmethod
    def _hit(event: Event) -> int | None:
        args = event["args"]
        broker = args.get("to") if event["action"] in ("DropMessage", "DuplicateMessage") else args.get("broker")
        return broker if type(broker) is int else None

    def under_way(self) -> list[tuple[str, str, str]]:
        """(operation, step, subject) of every operation under way."""
        out = [(SHUTDOWN, step, str(b)) for b, step in self.shutdowns.items()]
        out += [(REASSIGNMENT, r.step, p) for p, r in self.reassignments.items()]
        out += [(DELETION, step, t) for t, (step, _) in self.deletions.items()]
        out += [(PREFERRED, step, p) for p, step in self.preferred.items()]
        if self.failover is not None:
            out.append((FAILOVER, self.failover[0], ""))
        out += [(STARTUP, step, str(b)) for b, step in self.startups.items()]
        return out

    def roles(self, operation: str, subject: str, broker: int) -> set[str]:
        """The roles `broker` holds in the operation on `subject`, on the current state."""
        held: set[str] = set()
        if self.state["controller"] == broker:
            held.add(CONTROLLER)
        if operation in (SHUTDOWN, STARTUP) and str(broker) == subject:
            held.add(SHUTTING_DOWN if operation == SHUTDOWN else STARTING)
        if operation == REASSIGNMENT:
            r = self.reassignments[subject]
            if broker in r.target and broker not in r.original:
                held.add(ADDING)
            if broker in r.original and broker not in r.target:
                held.add(REMOVING)
        leaders = self.deletions[subject][1] if operation == DELETION else self.state["leader"]
        for p in self._scope(operation, subject):
            if leaders.get(p) == broker:
                held.add(LEADER)
            elif broker in self.state["assignment"].get(p, ()):
                held.add(FOLLOWER)
        return held & set(OPERATIONS[operation].roles)

    def _scope(self, operation: str, subject: str) -> list[str]:
        """The partitions whose leader and followers are the operation's."""
        assignment: dict[str, list[int]] = self.state["assignment"]
        if operation in (REASSIGNMENT, PREFERRED):
            return [subject]
        if operation == DELETION:
            return [p for p in assignment if p.rpartition("-")[0] == subject]
        if operation in (SHUTDOWN, STARTUP):
            return [p for p, replicas in assignment.items() if int(subject) in replicas]
        return list(assignment)

    def _points(self, fault: str, broker: int | None) -> list[Point]:
        if broker is None:
            return []
        return sorted({Point(op, step, fault, role) for op, step, subject in self.under_way()
                       for role in self.roles(op, subject, broker)})

    # -- the operations' steps -------------------------------------------------------------------------------

    def _advance(self, event: Event) -> None:
        action, args = event["action"], event["args"]
        actor = event["actor"]
        broker = int(actor.partition(":")[2]) if actor.startswith("broker:") else None
        ok = not args.get("error")
        elected = action == "ControllerElect" and bool(args.get("elected"))
        if action in ("BrokerCrash", "ControllerCrash", "BrokerRestart") and type(args.get("broker")) is int:
            self.shutdowns.pop(args["broker"], None)
            self.startups.pop(args["broker"], None)
            if action == "BrokerRestart":
                self.startups[args["broker"]] = "registering"
        self._advance_shutdown(action, args, broker)
        if action == "BrokerReregister" and broker is not None:
            self.startups[broker] = "registering"
        if action == "BrokerChange":
            for b in (*args.get("new", ()), *args.get("bounced", ())):
                if b in self.startups:
                    self.startups[b] = "catching up"
        if action == "ReassignPartitions" and ok:
            for p, target in args.get("targets", {}).items():
                original = tuple(self.state["assignment"].get(p, ()))
                self.reassignments[p] = _Reassignment("requested", tuple(target), original)
        if action == "DeleteTopic" and ok and isinstance(args.get("topic"), str):
            topic = args["topic"]
            leaders = {p: b for p, b in self.state["leader"].items() if p.rpartition("-")[0] == topic}
            self.deletions.setdefault(topic, ("requested", leaders))
        if action == "PreferredElection" and ok:
            for p in args.get("partitions", ()):
                self.preferred[p] = "requested"
        if action == "AutoPreferredReplicaElection":
            for p in args.get("partitions", ()):
                self.preferred[p] = "electing"
        if action == "PreferredReplicaElection" or elected:
            self.preferred = {p: "electing" for p in self.preferred}
        if action == "CreateTopic" and ok:
            self.deletions.pop(args.get("topic", ""), None)
        self._note_reassign_node(args.get("writes"))
        self._advance_failover()
        self._settle(action, elected)

    def _advance_shutdown(self, action: str, args: dict[str, Any], broker: int | None) -> None:
        if action == "RequestControlledShutdown" and broker is not None:
            if args.get("stopped"):  # the last attempt: the broker gives up waiting and stops
                self.shutdowns.pop(broker, None)
            else:
                self.shutdowns[broker] = "requested"
        elif action == "ControlledShutdownRequest" and args.get("broker") in self.shutdowns:
            self.shutdowns[args["broker"]] = "leaders moving"
        elif action == "ControlledShutdownResponse" and broker in self.shutdowns:
            if args.get("stopped"):
                del self.shutdowns[broker]
            else:
                self.shutdowns[broker] = "retrying"

    def _note_reassign_node(self, writes: Any) -> None:
        """A reassignment is over, done or dropped, once its partition leaves the request's node."""
        for p in off_reassign_node(writes, self.reassignments):
            self._retire(p)

    def _retire(self, partition: str) -> None:
        """Out of the request's node: done in the store, its requests still to arrive, or dropped."""
        r = self.reassignments[partition]
        if r.step != "retiring" and tuple(self.state["assignment"].get(partition, ())) == r.target:
            r.step = "retiring"
        elif r.step != "retiring":
            del self.reassignments[partition]

    def _advance_failover(self) -> None:
        """Read off the store: no controller is an election; a controller after one announces its epoch."""
        if self.state["controller"] == NO_LEADER:
            self.failover = ("electing", 0)
        elif self.failover is not None and self.failover[0] == "electing":
            self.failover = ("announcing", self.state["controller_epoch"])

    def _settle(self, action: str, elected: bool) -> None:
        """Steps read off the state: each operation's progress, and its end."""
        state = self.state
        alive, isr, assignment, leader = state["alive"], state["isr"], state["assignment"], state["leader"]
        for p, r in list(self.reassignments.items()):
            if r.step == "retiring":
                if self._retired(p, r):
                    del self.reassignments[p]
            elif r.step != "requested" or action == "PartitionReassignment" or elected:
                r.step = "completing" if set(r.target) <= set(isr.get(p, ())) else "expanding"
        controller = str(state["controller"])
        replica_states = state["replica_state"].get(controller, {})
        for topic, (step, leaders) in list(self.deletions.items()):
            partitions = [p for p in assignment if p.rpartition("-")[0] == topic]
            if not partitions:
                del self.deletions[topic]
            elif step != "requested" or action == "TopicDeletion" or elected:
                ineligible = any(s == INELIGIBLE for p in partitions for s in replica_states.get(p, {}).values())
                self.deletions[topic] = ("retrying" if ineligible else "stopping replicas", leaders)
        for p, step in list(self.preferred.items()):
            if step == "electing" and self._leadership_applied(p):
                del self.preferred[p]
        if self.failover is not None and self.failover[0] == "announcing":
            epoch = self.failover[1]
            if all(state["broker_controller_epoch"].get(b, 0) >= epoch for b, up in alive.items() if up):
                self.failover = None
        # A broker that stopped (a controlled shutdown's last step writes no crash event) ends what it was doing.
        for down in [b for b in (*self.shutdowns, *self.startups) if not alive.get(str(b), False)]:
            self.shutdowns.pop(down, None)
            self.startups.pop(down, None)
        for b, step in list(self.startups.items()):
            if step == "catching up" and all(
                    int(b) in isr.get(p, ()) for p, replicas in assignment.items()
                    if b in replicas and alive.get(str(leader.get(p)), False)):
                del self.startups[b]

    def _retired(self, partition: str, r: _Reassignment) -> bool:
        """Every live replica of OAR - RAR has stopped acting for the partition, and its leader took over."""
        alive, role = self.state["alive"], self.state["role"]
        gone = all(role.get(str(b), {}).get(partition) is None for b in r.original
                   if b not in r.target and alive.get(str(b), False))
        return gone and self._leadership_applied(partition)

    def _leadership_applied(self, partition: str) -> bool:
        """The partition's leader in the store acts on its leader epoch (or it has none to act)."""
        leader = self.state["leader"].get(partition, NO_LEADER)
        if leader == NO_LEADER:
            return True
        local = self.state["local_leader_epoch"].get(str(leader), {})
        return bool(local.get(partition) == self.state["leader_epoch"].get(partition))


@dataclass
class Verdicts:
    """What judged a point's occurrences: by its operation's property (checked after it, held or violated), and
    the invariants (every occurrence in a checked run is judged by all of them)."""

    judged: int = 0  # occurrences after which the operation's progress property was checked
    held: int = 0
    violated: Counter[str] = field(default_factory=Counter)  # property or invariant -> occurrences


@dataclass
class InterleavingCoverage:
    """The points reached, per campaign, and their verdicts."""

    reached: dict[Point, Counter[str]] = field(default_factory=dict)
    verdicts: dict[Point, Verdicts] = field(default_factory=dict)

    def add_run(self, campaign: str, occurrences: Iterable[tuple[int, Point]],
                judged: list[tuple[int, str]] | None = None, violations: Iterable[tuple[int, str]] = ()) -> None:
        """One run's occurrences (seq, point); `judged`: the checker's (seq, property) checks in the run, or None
        when no checker with progress properties judged it; `violations`: (seq, name) of what it found."""
        broken = sorted(violations)
        for seq, point in occurrences:
            self.reached.setdefault(point, Counter())[campaign] += 1
            if judged is None:
                continue
            verdicts = self.verdicts.setdefault(point, Verdicts())
            prop = OPERATIONS[point.operation].judged_by
            after = [s for s, name in judged if name == prop and s > seq]
            against = {name.split("/")[0] for s, name in broken if s > seq}
            if after:
                verdicts.judged += 1
                if prop in against:
                    verdicts.violated[prop] += 1
                else:
                    verdicts.held += 1
            for name in against - {prop}:
                verdicts.violated[name] += 1

    def merge(self, other: InterleavingCoverage) -> None:
        for point, counts in other.reached.items():
            self.reached.setdefault(point, Counter()).update(counts)
        for point, v in other.verdicts.items():
            mine = self.verdicts.setdefault(point, Verdicts())
            mine.judged += v.judged
            mine.held += v.held
            mine.violated.update(v.violated)

    # -- figures ---------------------------------------------------------------------------------------------

    def status(self, point: Point) -> str:
        if unreachable(point) is not None:
            return "unreachable"
        if point not in self.reached:
            return "not reached"
        verdicts = self.verdicts.get(point)
        if verdicts is None or not verdicts.judged:
            return "reached, not judged"
        return "violated" if verdicts.violated else "judged"

    def summary(self) -> dict[str, int]:
        statuses = Counter(self.status(p) for p in points())
        reachable = len(points()) - statuses["unreachable"]
        return {"points": len(points()), "unreachable": statuses["unreachable"], "reachable": reachable,
                "reached": reachable - statuses["not reached"], "judged": statuses["judged"] + statuses["violated"],
                "violated": statuses["violated"]}

    def campaigns(self) -> list[str]:
        return sorted({c for counts in self.reached.values() for c in counts})

    def to_json(self) -> dict[str, Any]:
        rows = []
        for point in points():
            verdicts = self.verdicts.get(point, Verdicts())
            row: dict[str, Any] = {"operation": point.operation, "step": point.step, "fault": point.fault,
                                   "role": point.role, "status": self.status(point),
                                   "reached": dict(sorted(self.reached.get(point, Counter()).items())),
                                   "judged_by": OPERATIONS[point.operation].judged_by,
                                   "judged": verdicts.judged, "held": verdicts.held,
                                   "violated": dict(sorted(verdicts.violated.items()))}
            reason = unreachable(point)
            if reason is not None:
                row["unreachable"] = reason
            rows.append(row)
        return {"summary": self.summary(), "campaigns": self.campaigns(), "points": rows}


# -- the matrix -------------------------------------------------------------------------------------------------

JUDGED_FILL, VIOLATED_FILL, UNJUDGED_FILL, MISSED_FILL, UNREACHABLE_FILL = (
    "#1f5fa8", "#c62828", "#e0a800", "#ffffff", "#d6d6d6")
CELL, LABEL_W, HEAD_H = 16.0, 300.0, 112.0


def matrix_svg(coverage: InterleavingCoverage) -> str:
    """Operations' steps down, faults x roles across; a cell per point: blue judged (darker, more often
    reached), red violated, amber reached but not judged by a property, white not reached, grey unreachable;
    no cell where the operation has no such role. Each cell's title names the point, its counts and reason."""
    rows = [(op, step) for op in OPERATIONS.values() for step in op.steps]
    columns = [(fault, role) for fault in FAULTS for role in ROLES]
    top = HEAD_H
    picture = Svg(LABEL_W + CELL * len(columns) + 20, top + CELL * len(rows) + 20)
    summary = coverage.summary()
    picture.text(12, 22, f"Interleaving coverage: {summary['reached']}/{summary['reachable']} reachable points "
                 f"reached, {summary['judged']} judged by their operation's property ({summary['unreachable']} "
                 "unreachable)", size=14, anchor="start", weight="bold")
    for left, fill, label in ((12.0, JUDGED_FILL, "judged"), (100.0, VIOLATED_FILL, "violated"),
                              (190.0, UNJUDGED_FILL, "reached, not judged"), (350.0, MISSED_FILL, "not reached"),
                              (460.0, UNREACHABLE_FILL, "unreachable")):
        picture.rect(left, 32, 12, 12, fill, radius=2)
        picture.text(left + 16, 42, label, size=11, anchor="start")
    picture.text(12, 64, "roles of the broker hit: " + ", ".join(f"{_ROLE_MARK[r]} {r}" for r in ROLES), size=11,
                 anchor="start")
    for c, (fault, role) in enumerate(columns):
        x = LABEL_W + c * CELL
        if c % len(ROLES) == 0:
            picture.text(x + 2, top - 24, fault, size=11, anchor="start", weight="bold")
            picture.line(x, top - 20, x, top + CELL * len(rows), "#888")
        picture.text(x + CELL / 2, top - 6, _ROLE_MARK[role], size=10)
    by_point = {(p.operation, p.step, p.fault, p.role): p for p in points()}
    for r, (op, step) in enumerate(rows):
        y = top + r * CELL
        picture.text(LABEL_W - 8, y + CELL - 4, f"{op.name}: {step}", size=11, anchor="end")
        for c, (fault, role) in enumerate(columns):
            point = by_point.get((op.name, step, fault, role))
            if point is None:
                continue
            fill, title = _cell(coverage, point)
            picture.rect(LABEL_W + c * CELL + 1, y + 1, CELL - 2, CELL - 2, fill, stroke="#999", radius=2,
                         title=title)
    return picture.render([])


_ROLE_MARK: Final = {CONTROLLER: "C", LEADER: "L", FOLLOWER: "F", ADDING: "A", REMOVING: "R",
                     SHUTTING_DOWN: "S", STARTING: "B"}


def _cell(coverage: InterleavingCoverage, point: Point) -> tuple[str, str]:
    status = coverage.status(point)
    reached = coverage.reached.get(point, Counter())
    title = f"{point.key}: {status}"
    if reached:
        title += " (" + ", ".join(f"{c} {n:,}" for c, n in sorted(reached.items())) + ")"
    verdicts = coverage.verdicts.get(point)
    if verdicts is not None and verdicts.judged:
        title += f"; {OPERATIONS[point.operation].judged_by} judged {verdicts.judged:,} times"
    if verdicts is not None and verdicts.violated:
        title += "; violated: " + ", ".join(sorted(verdicts.violated))
    reason = unreachable(point)
    if reason is not None:
        return UNREACHABLE_FILL, f"{title}: {reason}"
    if status == "judged":
        return _shade(sum(reached.values())), title
    return {"violated": VIOLATED_FILL, "reached, not judged": UNJUDGED_FILL}.get(status, MISSED_FILL), title


def _shade(count: int) -> str:
    """Lighter blue for a point reached once, the full blue from about a hundred times."""
    weight = min(1.0, math.log10(max(count, 1)) / 2)
    low, high = (0x9c, 0xc3, 0xe8), (0x1f, 0x5f, 0xa8)
    return "#" + "".join(f"{round(lo + (hi - lo) * weight):02x}" for lo, hi in zip(low, high, strict=True))


def tables(coverage: InterleavingCoverage) -> list[Table]:
    """Per operation: its steps down, the faults across, each cell the roles reached of those reachable."""
    out = []
    for op in OPERATIONS.values():
        table = Table(title=f"{op.name} (judged by {op.judged_by})", title_justify="left")
        table.add_column("step")
        for fault in FAULTS:
            table.add_column(fault, justify="right")
        for step in op.steps:
            cells = []
            for fault in FAULTS:
                open_points = [Point(op.name, step, fault, role) for role in op.roles
                               if unreachable(Point(op.name, step, fault, role)) is None]
                reached = sum(1 for p in open_points if coverage.status(p) in ("judged", "violated",
                                                                               "reached, not judged"))
                text = f"{reached}/{len(open_points)}"
                cells.append(text if reached == len(open_points) else f"[red]{text}[/]")
            table.add_row(step, *cells)
        out.append(table)
    return out


class Recorder:
    """A tracker over one run, keeping the occurrences it reached for `InterleavingCoverage.add_run`."""

    def __init__(self) -> None:
        self.tracker = Tracker()
        self.occurrences: list[tuple[int, Point]] = []
        self.counts: Counter[Point] = Counter()  # the occurrences per point, asked at every step of a steered run

    def observe(self, event: Event) -> None:
        seq = event["seq"]
        for point in self.tracker.observe(event):
            self.occurrences.append((seq, point))
            self.counts[point] += 1
