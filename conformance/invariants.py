"""The invariant checker: reads a trace (format v1) event by event, keeps the model state, and checks the
eleven invariants of kcm on what each event changed. Exact definitions: docs/invariants.md.

Checking is incremental: an event's delta names the partitions and replicas it touched, and only those
are checked, so the cost of a step does not grow with the cluster. History the invariants need (leaders
per epoch, committed records, the highest HW exposed) is kept here, not in the trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.impl.states import (
    PartitionState,
    ReplicaState,
    valid_partition_transition,
    valid_replica_transition,
)
from kcm.spec.vocabulary import HW_ACROSS_LEADERS, HW_PER_LEADER, INVARIANTS, NO_LEADER

from .trace import Event, apply_delta, empty_state

# Which variables each invariant reads: with a partial trace, an invariant is checked only if the trace
# observes all of them.
READS: Final[dict[str, tuple[str, ...]]] = {
    "OneLeaderPerEpoch": ("leader", "leader_epoch"),
    "IsrSubsetOfReplicas": ("isr", "assignment"),
    "LeaderInIsr": ("leader", "isr"),
    "HighWatermarkMonotonic": ("role", "local_leader_epoch", "hw"),
    "NoCommittedDataLoss": ("role", "log", "hw"),
    "ReplicaLogsAgree": ("log", "hw"),
    "ControllerEpochMonotonic": ("controller_epoch",),
    "LeaderEpochMonotonic": ("leader_epoch",),
    "StaleControllerFenced": ("broker_controller_epoch",),
    "ValidPartitionTransitions": ("partition_state",),
    "ValidReplicaTransitions": ("replica_state",),
}
CONTEXT_LOAD_ACTIONS: Final = frozenset({"ControllerElect", "BrokerReregister"})
CONTROLLER_REQUESTS: Final = frozenset({"LeaderAndIsr", "StopReplica", "UpdateMetadata"})
STORE_PARTITION_VARS: Final = ("assignment", "leader", "leader_epoch", "isr")
REPLICA_VARS: Final = ("role", "local_leader_epoch", "log", "hw", "epoch_start_offset")
MAX_VIOLATIONS: Final = 1000
EPOCH_VARS: Final = frozenset({"controller_epoch", "broker_controller_epoch", "leader_epoch", "local_leader_epoch"})


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    seq: int
    message: str


@dataclass
class CheckReport:
    events: int = 0
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    observed: set[str] = field(default_factory=set)

    def verdict(self, invariant: str) -> str:
        if any(v.invariant.split("/")[0] == invariant for v in self.violations):
            return "violated"
        if not all(var in self.observed for var in READS[invariant]):
            return "unobserved"
        return "holds"

    def verdicts(self) -> dict[str, str]:
        return {name: self.verdict(name) for name in INVARIANTS}

    @property
    def ok(self) -> bool:
        return not self.violations


class InvariantChecker:
    def __init__(self, truncation: str = "kip320") -> None:
        self.state: dict[str, Any] = empty_state()
        self.truncation = truncation
        self.report = CheckReport()
        self.seq = -1
        self._reset_history()

    def _reset_history(self) -> None:
        """A new run starts (its Init event): nothing an earlier run did is history for it."""
        self.leader_of_epoch: dict[tuple[str, int], tuple[str, int]] = {}
        self.leader_hw: dict[tuple[str, str], tuple[int, int]] = {}
        self.exposed_hw: dict[str, int] = {}
        self.committed: dict[str, list[Any]] = {}

    # -- driving -------------------------------------------------------------------------------------

    def check_all(self, events: Iterable[Event]) -> CheckReport:
        for event in events:
            self.step(event)
        return self.report

    def step(self, event: Event) -> list[Violation]:
        self.seq = event["seq"]
        self.report.events += 1
        delta: dict[str, Any] = event["state"]
        args: dict[str, Any] = event["args"]
        action = event["action"]
        found: list[Violation] = []
        if action == "Init":
            self.truncation = args.get("knobs", {}).get("truncation", self.truncation)
            self._reset_history()
        if event.get("full"):
            self.state = empty_state()
        actor_kind, _, actor_id = event["actor"].partition(":")
        machines = bool(args.get("transitions")) or "partition_state" in delta or "replica_state" in delta
        fencing = action in CONTROLLER_REQUESTS or actor_kind == "controller"
        epochs = not EPOCH_VARS.isdisjoint(delta)
        if not (delta or machines or fencing):
            return found  # nothing changed and nothing claimed: no invariant can break here
        before = self._before(args, delta, actor_id, machines) if machines or fencing or epochs else {}
        apply_delta(self.state, delta)
        self.report.observed.update(delta)
        partitions, replicas = _touched(delta)
        if partitions:
            self._store_checks(partitions, delta, found)
        if replicas:
            self._replica_checks(replicas, found)
            partitions = partitions | {p for _, p in replicas}
        if partitions:
            self._data_checks(partitions, found)
        if epochs:
            self._epoch_checks(delta, before, found)
        if fencing:
            self._fencing_checks(event, delta, before, found)
        if machines:
            self._transition_checks(event, delta, before, found)
        if found:
            room = MAX_VIOLATIONS - len(self.report.violations)
            self.report.violations.extend(found[:room])
        return found

    def _before(self, args: dict[str, Any], delta: dict[str, Any], actor_id: str, machines: bool) -> dict[str, Any]:
        """The few pre-step values the pair-of-states checks compare against."""
        state = self.state
        pre: dict[str, Any] = {
            "controller_epoch": state["controller_epoch"],
            "broker_controller_epoch": {
                b: state["broker_controller_epoch"].get(b)
                for b in (actor_id, *delta.get("broker_controller_epoch", ()))
            },
            "acting": state["acting_controller_epoch"].get(actor_id, 0),
        }
        if "leader_epoch" in delta:
            pre["leader_epoch"] = {p: state["leader_epoch"].get(p) for p in delta["leader_epoch"]}
        if "local_leader_epoch" in delta:
            local = state["local_leader_epoch"]
            pre["local_leader_epoch"] = {
                (b, p): local.get(b, {}).get(p) for b, ps in delta["local_leader_epoch"].items() for p in ps
            }
        if machines:
            pre.update(self._machine_states_before(args, delta, actor_id))
        return pre

    def _machine_states_before(self, args: dict[str, Any], delta: dict[str, Any], actor_id: str) -> dict[str, Any]:
        partition_states = self.state["partition_state"].get(actor_id, {})
        replica_states = self.state["replica_state"].get(actor_id, {})
        partitions = {p: partition_states.get(p) for p in delta.get("partition_state", {}).get(actor_id, {})}
        replicas = {
            (p, r): replica_states.get(p, {}).get(r)
            for p, rs in delta.get("replica_state", {}).get(actor_id, {}).items()
            for r in rs
        }
        for kind, partition, *rest in args.get("transitions") or []:
            if kind == "partition":
                partitions.setdefault(partition, partition_states.get(partition))
            else:
                replicas.setdefault((partition, rest[0]), replica_states.get(partition, {}).get(rest[0]))
        return {"partition_state": partitions, "replica_state": replicas}

    def _violate(self, found: list[Violation], invariant: str, message: str) -> None:
        found.append(Violation(invariant, self.seq, message))

    def _count(self, invariant: str, n: int = 1) -> None:
        self.report.checks[invariant] += n

    # -- the store's partition state -----------------------------------------------------------------------

    def _store_checks(self, partitions: set[str], delta: dict[str, Any], found: list[Violation]) -> None:
        s = self.state
        for p in sorted(partitions):
            assignment = s["assignment"].get(p)
            isr = s["isr"].get(p)
            leader = s["leader"].get(p)
            epoch = s["leader_epoch"].get(p)
            if p in delta.get("assignment", {}) and assignment is None:
                self._forget_partition(p)
            if isr is not None and assignment is not None:
                self._count("IsrSubsetOfReplicas")
                outside = sorted(set(isr) - set(assignment))
                if outside:
                    self._violate(found, "IsrSubsetOfReplicas",
                                  f"{p}: ISR {isr} has {outside} outside the assignment {assignment}")
            if leader is not None and isr is not None:
                self._count("LeaderInIsr")
                if leader != NO_LEADER and leader not in isr:
                    self._violate(found, "LeaderInIsr", f"{p}: leader {leader} is not in the ISR {isr}")
            if leader is not None and epoch is not None and leader != NO_LEADER:
                self._claim(p, epoch, ("store", leader), found)

    def _claim(self, partition: str, epoch: int, who: tuple[str, int], found: list[Violation]) -> None:
        self._count("OneLeaderPerEpoch")
        key = (partition, epoch)
        first = self.leader_of_epoch.setdefault(key, who)
        if first[1] != who[1]:
            self._violate(found, "OneLeaderPerEpoch",
                          f"{partition}: epoch {epoch} has two leaders, broker {first[1]} and broker {who[1]}")

    def _forget_partition(self, partition: str) -> None:
        """A deleted partition's history ends; a topic created again under the name starts afresh."""
        for key in [k for k in self.leader_of_epoch if k[0] == partition]:
            del self.leader_of_epoch[key]
        self.exposed_hw.pop(partition, None)
        self.committed.pop(partition, None)

    # -- each replica ------------------------------------------------------------------------------------

    def _replica_checks(self, replicas: set[tuple[str, str]], found: list[Violation]) -> None:
        s = self.state
        for b, p in sorted(replicas):
            role = s["role"].get(b, {}).get(p)
            epoch = s["local_leader_epoch"].get(b, {}).get(p)
            hw = s["hw"].get(b, {}).get(p)
            if role != "leader" or epoch is None or hw is None:
                self.leader_hw.pop((b, p), None)
                continue
            self._claim(p, epoch, ("broker", int(b)), found)
            self._count(HW_PER_LEADER)
            last = self.leader_hw.get((b, p))
            if last is not None and last[0] == epoch and hw < last[1]:
                self._violate(found, HW_PER_LEADER,
                              f"{p}: leader {b} moved its HW back from {last[1]} to {hw} within epoch {epoch}")
            self.leader_hw[(b, p)] = (epoch, hw)
            self._commit(p, b, hw, found)

    def _commit(self, p: str, b: str, hw: int, found: list[Violation]) -> None:
        """Records below a leader's HW are committed; the committed records of a partition form a prefix."""
        log = self.state["log"].get(b, {}).get(p) or []
        prefix = log[: min(hw, len(log))]
        committed = self.committed.setdefault(p, [])
        if len(prefix) > len(committed):
            if prefix[: len(committed)] != committed:
                self._violate(found, "NoCommittedDataLoss",
                              f"{p}: leader {b} commits a log that differs from the committed records "
                              f"at offset {_first_difference(prefix, committed)}")
            self.committed[p] = prefix

    # -- logs and the HW across leaders ----------------------------------------------------------------

    def _data_checks(self, partitions: set[str], found: list[Violation]) -> None:
        for p in sorted(partitions):
            self._exposed_hw_check(p, found)
            self._committed_check(p, found)
            self._agreement_check(p, found)

    def _current_leader(self, p: str) -> str | None:
        """The broker that leads p in the store's current epoch and knows it."""
        s = self.state
        leader = s["leader"].get(p)
        if not leader:
            return None
        b = str(leader)
        if s["role"].get(b, {}).get(p) != "leader":
            return None
        if s["local_leader_epoch"].get(b, {}).get(p) != s["leader_epoch"].get(p):
            return None
        return b

    def _exposed_hw_check(self, p: str, found: list[Violation]) -> None:
        b = self._current_leader(p)
        if b is None:
            return
        s = self.state
        hw = s["hw"].get(b, {}).get(p)
        if hw is None:
            return
        if self.truncation == "kip320" and hw < s["epoch_start_offset"].get(b, {}).get(p, 0):
            return  # KAFKA-2334 fix: a new leader withholds its HW until it reaches its epoch's start
        self._count(HW_ACROSS_LEADERS)
        highest = self.exposed_hw.get(p, 0)
        if hw < highest:
            self._violate(found, HW_ACROSS_LEADERS,
                          f"{p}: HW exposed by leader {b} (epoch {s['leader_epoch'].get(p)}) is {hw}, "
                          f"below the {highest} exposed before")
        else:
            self.exposed_hw[p] = hw

    def _committed_check(self, p: str, found: list[Violation]) -> None:
        committed = self.committed.get(p)
        if not committed:
            return
        s = self.state
        holders = {str(r) for r in s["isr"].get(p) or ()}
        leader = self._current_leader(p)
        if leader is not None:
            holders.add(leader)
        for b in sorted(holders):
            log = s["log"].get(b, {}).get(p)
            if log is None:
                continue
            self._count("NoCommittedDataLoss")
            if log[: len(committed)] != committed:
                offset = _first_difference(log, committed)
                self._violate(found, "NoCommittedDataLoss",
                              f"{p}: committed record {committed[offset]} at offset {offset} is "
                              f"{'missing from' if offset >= len(log) else 'replaced in'} the log of broker {b}")

    def _agreement_check(self, p: str, found: list[Violation]) -> None:
        s = self.state
        holders = sorted(b for b, logs in s["log"].items() if p in logs)
        for i, b1 in enumerate(holders):
            for b2 in holders[i + 1 :]:
                log1, log2 = s["log"][b1][p], s["log"][b2][p]
                k = min(s["hw"].get(b1, {}).get(p, 0), s["hw"].get(b2, {}).get(p, 0), len(log1), len(log2))
                self._count("ReplicaLogsAgree")
                if log1[:k] != log2[:k]:
                    offset = _first_difference(log1[:k], log2[:k])
                    self._violate(found, "ReplicaLogsAgree",
                                  f"{p}: brokers {b1} and {b2} disagree at offset {offset} below both HWs "
                                  f"({log1[offset]} vs {log2[offset]})")

    # -- epochs and fencing ------------------------------------------------------------------------------------

    def _epoch_checks(self, delta: dict[str, Any], before: dict[str, Any], found: list[Violation]) -> None:
        s = self.state
        if "controller_epoch" in delta:
            self._count("ControllerEpochMonotonic")
            if s["controller_epoch"] < before["controller_epoch"]:
                old = before["controller_epoch"]
                self._violate(found, "ControllerEpochMonotonic",
                              f"controller epoch went back from {old} to {s['controller_epoch']}")
        for b, epoch in delta.get("broker_controller_epoch", {}).items():
            old = before["broker_controller_epoch"].get(b)
            restarted = b in delta.get("alive", {})
            self._count("ControllerEpochMonotonic")
            if old is not None and epoch is not None and epoch < old and not restarted:
                self._violate(found, "ControllerEpochMonotonic",
                              f"broker {b} went back from controller epoch {old} to {epoch}")
        for p, old in before.get("leader_epoch", {}).items():
            new = s["leader_epoch"].get(p)
            self._count("LeaderEpochMonotonic")
            if old is not None and new is not None and new < old:
                self._violate(found, "LeaderEpochMonotonic", f"{p}: leader epoch went back from {old} to {new}")
        for (b, p), old in before.get("local_leader_epoch", {}).items():
            new = s["local_leader_epoch"].get(b, {}).get(p)
            self._count("LeaderEpochMonotonic")
            if old is not None and new is not None and new < old:
                self._violate(found, "LeaderEpochMonotonic",
                              f"{p}: broker {b} went back from leader epoch {old} to {new}")

    def _fencing_checks(
        self, event: Event, delta: dict[str, Any], before: dict[str, Any], found: list[Violation]
    ) -> None:
        actor_kind, _, actor_id = event["actor"].partition(":")
        args = event["args"]
        if event["action"] in CONTROLLER_REQUESTS and "controller_epoch" in args:
            seen = before["broker_controller_epoch"].get(actor_id, 0)
            self._count("StaleControllerFenced")
            changed = any(actor_id in delta.get(var, {}) for var in REPLICA_VARS)
            if args["controller_epoch"] < seen and (args.get("applied") or changed):
                self._violate(found, "StaleControllerFenced",
                              f"broker {actor_id} applied {event['action']} from controller epoch "
                              f"{args['controller_epoch']} after seeing epoch {seen}")
        if actor_kind == "controller":
            touched = sorted({p for var in STORE_PARTITION_VARS for p in delta.get(var, {})})
            self._count("StaleControllerFenced")
            if touched and before["acting"] < before["controller_epoch"]:
                self._violate(found, "StaleControllerFenced",
                              f"deposed controller {actor_id} (epoch {before['acting']}) wrote "
                              f"{', '.join(touched)} while controller epoch {before['controller_epoch']} is current")

    # -- state machines -----------------------------------------------------------------------------------

    def _transition_checks(
        self, event: Event, delta: dict[str, Any], before: dict[str, Any], found: list[Violation]
    ) -> None:
        actor_id = event["actor"].partition(":")[2]
        loading = event["action"] in CONTEXT_LOAD_ACTIONS
        chains: dict[tuple[str, ...], list[tuple[Any, Any]]] = {}
        for entry in event["args"].get("transitions") or []:
            kind, partition, *rest = entry
            if kind == "partition":
                key: tuple[str, ...] = ("partition", partition)
                src, dst = rest
            else:
                key = ("replica", partition, rest[0])
                src, dst = rest[1], rest[2]
            chains.setdefault(key, []).append((src, dst))
        for key, chain in chains.items():
            self._check_chain(key, chain, loading, before, actor_id, found)
        unloading = self.state["acting_controller_epoch"].get(actor_id, 0) == 0
        if not unloading:
            self._unexplained_changes(delta, chains, actor_id, found)

    def _check_chain(
        self, key: tuple[str, ...], chain: list[tuple[Any, Any]], loading: bool, before: dict[str, Any],
        actor_id: str, found: list[Violation],
    ) -> None:
        partition_kind = key[0] == "partition"
        invariant = "ValidPartitionTransitions" if partition_kind else "ValidReplicaTransitions"
        absent = "NonExistentPartition" if partition_kind else "NonExistentReplica"
        what = key[1] if partition_kind else f"{key[1]} replica {key[2]}"
        current = (before["partition_state"].get(key[1]) if partition_kind
                   else before["replica_state"].get((key[1], key[2]))) or absent
        for src, dst in chain:
            self._count(invariant)
            if src is None:
                if not loading:
                    self._violate(found, invariant, f"{what}: state loaded as {dst} outside a controller failover")
                current = dst
                continue
            if src != current:
                self._violate(found, invariant, f"{what}: transition from {src} but the state was {current}")
            if not _valid(partition_kind, src, dst):
                self._violate(found, invariant, f"{what}: invalid transition {src} -> {dst}")
            current = dst
        state = self.state
        if partition_kind:
            final = state["partition_state"].get(actor_id, {}).get(key[1]) or absent
        else:
            final = state["replica_state"].get(actor_id, {}).get(key[1], {}).get(key[2]) or absent
        if final != current:
            self._violate(found, invariant, f"{what}: transitions end in {current} but the state is {final}")

    def _unexplained_changes(
        self, delta: dict[str, Any], chains: dict[tuple[str, ...], list[tuple[Any, Any]]], actor_id: str,
        found: list[Violation],
    ) -> None:
        for b, partitions in delta.get("partition_state", {}).items():
            for p in partitions:
                if ("partition", p) not in chains and b == actor_id:
                    self._violate(found, "ValidPartitionTransitions", f"{p}: state changed without a transition")
        for b, partitions in delta.get("replica_state", {}).items():
            for p, replicas in partitions.items():
                for r in replicas:
                    if ("replica", p, r) not in chains and b == actor_id:
                        self._violate(found, "ValidReplicaTransitions",
                                      f"{p} replica {r}: state changed without a transition")


def _valid(partition_kind: bool, src: str, dst: str) -> bool:
    try:
        if partition_kind:
            return valid_partition_transition(PartitionState(src), PartitionState(dst))
        return valid_replica_transition(ReplicaState(src), ReplicaState(dst))
    except ValueError:
        return False


def _touched(delta: dict[str, Any]) -> tuple[set[str], set[tuple[str, str]]]:
    partitions: set[str] = set()
    for var in ("assignment", "leader", "leader_epoch", "isr"):
        partitions.update(delta.get(var, ()))
    replicas: set[tuple[str, str]] = set()
    for var in REPLICA_VARS:
        for b, ps in delta.get(var, {}).items():
            replicas.update((b, p) for p in ps)
    return partitions, replicas


def _first_difference(a: list[Any], b: list[Any]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
