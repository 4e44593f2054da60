"""Runs parsed from Kafka logs: each line is a fragment of one model action, seen across a gap.

A run whose Init event is marked `synthesized` (the Kafka log parser makes it up) is not a trace of every
step. One line shows a part of one action (a controller decision writes one line per partition and replica
it changes; a broker one line per partition of a request), and between two lines any number of actions
the file does not show may have happened: other brokers' controllers and leaders write the state node
(elections, ISR changes), controllers are elected, brokers handle UpdateMetadata and StopReplica requests.
So each line is checked against the model's own relation for its action (`Relations`, as for any trace)
from a state *before* that keeps of the earlier lines only what no unshown action can change, and what the
model's invariants say every later state keeps:

- kept exactly: the controller's own state machines and the epoch it acts in (every transition of a
  controller's state machines is a line of its log; an unshown resignation and re-election is a line in a
  newer epoch, after which the machines are loaded afresh, as `ControllerElect` does);
- kept as lower bounds: the controller epoch (at least the newest any line showed:
  `ControllerEpochMonotonic`, and every epoch a broker sees or a controller acts in is at most the current
  one), each broker's newest seen controller epoch (brokers raise it on requests the log does not show, and
  lower it only by restarting, which the log does not show either: the lines of one broker are taken to
  come from one process), a partition's leader epoch and state-node version (`LeaderEpochMonotonic`; a
  request and a broker's leader epoch are the node's of some earlier time), that its node exists, and
  each broker's replica of it and the highest leader epoch it took (forgotten only by a crash or a
  StopReplica with deletion, which starts when the controller starts deleting the replica);
- kept as history: the first leader of each leader epoch (`OneLeaderPerEpoch`), checked against what the
  line shows;
- reachable: the state invariants the induction proves (`IsrSubsetOfReplicas`, `LeaderInIsr`);
- free: everything else, the state node's leader and ISR, the assignment and the brokers' roles included.

The state *after* holds what the line shows: the variables its delta names (the state node as a whole when
it names any of its fields, a broker's role and leader epoch when it names either). Leaves the line does
not show are free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import NO_LEADER
from kcm.spec.z3.invariants import isr_subset_of_replicas, leader_in_isr
from kcm.spec.z3.model import State
from kcm.spec.z3.solver import Expr, and_, and_all, z3

# Trace variables of a partition's state node and assignment, and their leaves.
STORE_VARS: Final = frozenset({"assignment", "leader", "leader_epoch", "isr", "partition_controller_epoch",
                               "partition_version"})
STORE_HEADS: Final = frozenset({"node", "leader", "leader_epoch", "isr", "partition_controller_epoch",
                                "partition_version", "assigned", "assignment"})
MACHINE_VARS: Final = ("partition_state", "replica_state")
KEPT_HEADS: Final = frozenset({"acting_controller_epoch", *MACHINE_VARS})
DELETED: Final = frozenset({"ReplicaDeletionStarted", "ReplicaDeletionSuccessful", "ReplicaDeletionIneligible",
                            "NonExistentReplica"})
# The leaves a line shows when its delta names a variable: a broker's role and leader epoch go together (a
# line that shows one shows the broker's transition), a log is its existence and its length.
_HEADS: Final[dict[str, tuple[str, ...]]] = {"role": ("role", "local_leader_epoch"),
                                             "local_leader_epoch": ("role", "local_leader_epoch"),
                                             "log": ("replica", "log_len")}


def init_observations(init: Event) -> Event:
    """A synthesized Init with only what the log showed: the states the controllers' machines leave first.
    Its other values (no controller, controller epoch 0 everywhere) are made up and are not observations."""
    state = {var: value for var, value in init["state"].items() if var in MACHINE_VARS}
    return {**init, "state": state}


def brokers_named(events: list[Event]) -> set[int]:
    """Every broker a log run names anywhere: actors, leaders, ISRs, assignments and requests' fields. A
    broker's log names brokers that write no line of it (the other replicas of its partitions)."""
    found: set[int] = set()

    def add(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int) and value >= 0 and value != NO_LEADER:
            found.add(value)
        elif isinstance(value, list):
            for item in value:
                add(item)

    for event in events:
        kind, _, ident = event["actor"].partition(":")
        if kind in ("broker", "controller") and ident.isdigit():
            add(int(ident))
        state = event["state"]
        for var in ("leader", "isr", "assignment"):
            for value in (state.get(var) or {}).values():
                add(value)
        for parts in (state.get("local_isr") or {}).values():
            for value in (parts or {}).values():
                add(value)
        args = event["args"]
        for key in ("to", "controller_id", "broker"):
            add(args.get(key))
        for transition in args.get("transitions") or []:
            if isinstance(transition, list) and len(transition) >= 5 and transition[0] == "replica":
                add(int(transition[2]) if str(transition[2]).isdigit() else None)
        for entry in args.get("partitions") or []:
            if isinstance(entry, dict):
                for key in ("leader", "isr", "replicas"):
                    add(entry.get(key))
    return found


def named_partitions(event: Event) -> set[str]:
    """The partitions a line names: in its delta, its request's entries or its transitions."""
    found: set[str] = set()
    for var, value in event["state"].items():
        if var in STORE_VARS:
            found.update(value)
        elif isinstance(value, dict):
            for inner in value.values():
                if isinstance(inner, dict):
                    found.update(inner)
    if isinstance(event["args"].get("partition"), str):
        found.add(event["args"]["partition"])
    for entry in event["args"].get("partitions") or []:
        if isinstance(entry, dict) and isinstance(entry.get("partition"), str):
            found.add(entry["partition"])
    for entry in event["args"].get("transitions") or []:
        if isinstance(entry, list) and len(entry) >= 2 and isinstance(entry[1], str):
            found.add(entry[1])
    return found


@dataclass
class _Partition:
    leader_epoch: int | None = None
    version: int | None = None
    node: bool = False
    local: dict[int, int] = field(default_factory=dict)  # encoding broker -> highest leader epoch it took


@dataclass
class LogGap:
    """What the earlier lines of a log run tell about the state before the next one (see the module)."""

    index: dict[int, int]  # broker id -> the encoding's broker
    controller_epoch: int = 0
    seen: dict[int, int] = field(default_factory=dict)  # encoding broker -> newest controller epoch seen
    acting: dict[int, int] = field(default_factory=dict)  # encoding broker -> epoch it last acted in
    partitions: dict[str, _Partition] = field(default_factory=dict)
    _reachable: dict[str, Expr] = field(default_factory=dict)  # per state (its prefix): formulas built once

    # -- the two sides of a step --------------------------------------------------------------------------------

    def before(self, event: Event, leaves: dict[str, int | bool]) -> dict[str, int | bool]:
        """The leaves kept exactly from the earlier lines. A controller that acts in a newer epoch than
        before resigned and was elected again in between: its machines were loaded afresh."""
        reelected = {self.index[int(b)] for b, epoch in event["state"].get("acting_controller_epoch", {}).items()
                     if isinstance(epoch, int) and int(b) in self.index
                     and epoch > self.acting.get(self.index[int(b)], epoch)}
        return {leaf: value for leaf, value in leaves.items()
                if leaf.split(".")[0] in KEPT_HEADS and _owner(leaf) not in reelected}

    def after(self, event: Event, p: str, leaves: dict[str, int | bool]) -> dict[str, int | bool]:
        """The leaves the line shows (and those kept exactly)."""
        delta = event["state"]
        store = any(p in delta.get(var, {}) for var in STORE_VARS)
        shown: set[tuple[str, int | None]] = set()  # (leaf head, its broker) the line shows
        for var, value in delta.items():
            if var in STORE_VARS or not isinstance(value, dict):
                shown |= {(head, None) for head in _HEADS.get(var, (var,))}
                continue
            for b, inner in value.items():
                if str(b).isdigit() and int(b) in self.index and (not isinstance(inner, dict) or p in inner):
                    shown |= {(head, self.index[int(b)]) for head in _HEADS.get(var, (var,))}
        # A controller's machines and the epoch it acts in are shown by its lines' transitions and prefix; a
        # line without them (an election, a resignation) may change them as its action does.
        out: dict[str, int | bool] = {}
        for leaf, value in leaves.items():
            head = leaf.split(".")[0]
            if (store and head in STORE_HEADS) or (head, _owner(leaf)) in shown:
                out[leaf] = value
        return out

    def constraints(self, s: State, p: str, post: dict[str, int | bool], history: dict[int, int],
                    brokers: list[int]) -> list[tuple[str, Expr]]:
        """Labelled conditions on the state before (`s`): it is reachable, and keeps what the earlier lines
        showed; and the history the line's state node must agree with."""
        reachable = self._reachable.get(s.prefix)
        if reachable is None:
            # Every reachable state satisfies the state invariants the induction proves (kcm prove --only
            # induction).
            reachable = self._reachable[s.prefix] = and_(isr_subset_of_replicas(s), leader_in_isr(s))
        out: list[tuple[str, Expr]] = [("the state before is reachable (IsrSubsetOfReplicas, LeaderInIsr)",
                                        reachable)]
        if self.controller_epoch > 0:
            out.append((f"the controller epoch is at least {self.controller_epoch}, the newest the log showed",
                        s["controller_epoch"] >= self.controller_epoch))
        for b, epoch in sorted(self.seen.items()):
            out.append((f"broker {brokers[b - 1]} has seen controller epoch {epoch} (an earlier line)",
                        s[f"broker_controller_epoch.{b}"] >= epoch))
        known = self.partitions.get(p)
        if known is not None:
            parts: list[tuple[str, Expr]] = []
            if known.node:
                parts.append(("exists", s["node"]))
            if known.leader_epoch is not None:
                parts.append((f"has leader epoch >= {known.leader_epoch}", s["leader_epoch"] >= known.leader_epoch))
            if known.version is not None:
                parts.append((f"has version >= {known.version}", s["partition_version"] >= known.version))
            if parts:
                out.append((f"{p}: the state node {', '.join(label for label, _ in parts)} (earlier lines)",
                            and_all(c for _, c in parts)))
            for b, epoch in sorted(known.local.items()):
                out.append((f"{p}: broker {brokers[b - 1]} holds a replica in leader epoch >= {epoch} (an earlier "
                            "line)", and_(s[f"replica.{b}"], s[f"local_leader_epoch.{b}"] >= epoch)))
        shown_epoch, leader = post.get("leader_epoch"), post.get("leader")
        if isinstance(shown_epoch, int) and isinstance(leader, int) and leader != NO_LEADER and shown_epoch in history:
            epoch, first = shown_epoch, history[shown_epoch]
            out.append((f"{p}: leader epoch {epoch} was first led by broker {first} (an earlier line), not "
                        f"broker {brokers[leader - 1]}", z3.BoolVal(brokers[leader - 1] == first)))
        return out

    # -- what a line shows, for the lines after it -------------------------------------------------------------

    def observe(self, event: Event) -> set[str]:
        """Takes in what the line showed; returns the partitions it deleted (their history ends)."""
        delta, args = event["state"], event["args"]
        epochs = [args.get("controller_epoch")]
        for b, epoch in delta.get("acting_controller_epoch", {}).items():
            if isinstance(epoch, int) and epoch > 0 and int(b) in self.index:
                self.acting[self.index[int(b)]] = epoch
                epochs.append(epoch)
        for b, epoch in delta.get("broker_controller_epoch", {}).items():
            if isinstance(epoch, int) and int(b) in self.index:
                i = self.index[int(b)]
                self.seen[i] = max(self.seen.get(i, epoch), epoch)
                epochs.append(epoch)
        epochs += list(delta.get("partition_controller_epoch", {}).values())
        self.controller_epoch = max([self.controller_epoch, *(e for e in epochs if isinstance(e, int))])
        deleted = {str(entry[1]) for entry in args.get("transitions") or []
                   if isinstance(entry, list) and entry[:1] == ["partition"] and entry[-1] == "NonExistentPartition"}
        for p in deleted:
            # A deleted partition's node is gone; a topic created again under its name starts afresh.
            self.partitions.pop(p, None)
        for p, epoch in delta.get("leader_epoch", {}).items():
            self._raise(p, epoch, None, node=p in delta.get("leader", {}))
        for p, version in delta.get("partition_version", {}).items():
            self._raise(p, None, version)
        for p in delta.get("leader", {}):
            self._raise(p, None, None, node=True)
        for b, parts in delta.get("local_leader_epoch", {}).items():
            for p, epoch in (parts or {}).items():
                self._raise(p, epoch, None)
                if isinstance(epoch, int) and int(b) in self.index:
                    local = self.partitions[p].local
                    i = self.index[int(b)]
                    local[i] = max(local.get(i, epoch), epoch)
        for entry in args.get("transitions") or []:
            # StopReplica with deletion goes out as the controller starts deleting a replica: its leader
            # epoch is forgotten with it.
            if (isinstance(entry, list) and len(entry) >= 5 and entry[0] == "replica" and entry[-1] in DELETED
                    and str(entry[2]).isdigit() and int(entry[2]) in self.index and entry[1] in self.partitions):
                self.partitions[entry[1]].local.pop(self.index[int(entry[2])], None)
        for entry in args.get("partitions") or []:
            if isinstance(entry, dict) and isinstance(entry.get("partition"), str):
                self._raise(entry["partition"], entry.get("leader_epoch"), None)
        return deleted

    def _raise(self, p: str, epoch: Any, version: Any, node: bool = False) -> None:
        known = self.partitions.setdefault(p, _Partition())
        if isinstance(epoch, int) and not isinstance(epoch, bool):
            known.leader_epoch = epoch if known.leader_epoch is None else max(known.leader_epoch, epoch)
        if isinstance(version, int) and not isinstance(version, bool):
            known.version = version if known.version is None else max(known.version, version)
        known.node = known.node or node


def _owner(leaf: str) -> int | None:
    """The encoding broker of a per-broker leaf (`role.2`, `replica_state.1.3` -> 2, 1)."""
    parts = leaf.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
