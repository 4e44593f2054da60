"""`kcm validate --tlc TRACE`: TLC trace validation of an implementation trace.

As etcd-io/raft's and CCF's trace validation do, the trace becomes a constrained behaviour of the
specification: a generated module (`TraceRun`, extending spec/TraceKafka.tla) holds the trace as the
constant `TraceLog`, one record per event with the event's action, its actor's id and the full value,
after the event, of every variable the trace observes (in the specification's encoding: absent keys as
sentinels, ISRs as sets; docs/spec.md). TraceKafka's next-state relation takes, at step i, an action of
the event's name (or a stutter, if the observed state did not change) whose observed variables equal
event i's. TLC must reach the end of the trace: the invariant `TraceNotAccepted` is then violated, which
is TLC's way of saying so. If it is not reached, the depth TLC explored is the matched prefix, and the
next event is the first one the specification cannot explain.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kcm.spec.tlc.config import bindings, tla
from kcm.spec.tlc.modelcheck import BROKER_KEYED, spec_dir
from kcm.spec.tlc.runner import TlcProgress, run_tlc
from kcm.spec.trace.format import Event, apply_event
from kcm.spec.vocabulary import NO_LEADER, VARIABLES, Knobs

MODULE: Final = "TraceRun"
ACCEPTED: Final = "TraceNotAccepted"
# Bounds of the specification: a trace validation must never be cut short by them.
BOUND: Final = 100_000
# The value a trace map leaves out, per variable (docs/spec.md, "Variables and trace format v2").
_ABSENT: Final[dict[str, Any]] = {
    "assignment": (), "leader": NO_LEADER, "leader_epoch": -1, "isr": frozenset(), "partition_controller_epoch": 0,
    "partition_version": -1, "acting_controller_epoch": 0, "alive": False, "broker_controller_epoch": 0,
    "partition_state": "NonExistentPartition", "replica_state": "NonExistentReplica", "local_leader_epoch": -1,
    "local_isr": frozenset(), "log": (), "hw": 0, "hw_checkpoint": 0, "epoch_start_offset": 0,
}
_SETS: Final = frozenset({"isr", "local_isr"})
BATCHED_REQUESTS: Final = frozenset({"LeaderAndIsr", "StopReplica"})
# Actions only the specification with the controller's operations (TraceKafkaOps) has.
OPERATIONS: Final = frozenset({
    "ControlledShutdownRequest", "PreferredReplicaElection", "AutoPreferredReplicaElection", "PartitionReassignment",
    "ReassignmentIsrChange", "TopicDeletion", "StopReplicaResponse", "StopReplica", "RequestControlledShutdown",
    "ControlledShutdownResponse", "ReassignPartitions", "PreferredElection", "DeleteTopic", "CreatePartitions",
    "PartitionModifications"})


@dataclass
class TraceCheck:
    accepted: bool
    events: int
    matched: int  # events the specification explains, from the first
    first_unexplained: Event | None
    distinct_states: int
    seconds: float

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        bad = self.first_unexplained
        return {
            "engine": "tlc",
            "accepted": self.accepted,
            "events": self.events,
            "matched": self.matched,
            "first_unexplained": None if bad is None else {
                "seq": bad["seq"], "actor": bad["actor"], "action": bad["action"]},
            "distinct_states": self.distinct_states,
            "seconds": round(self.seconds, 2),
            "events_per_second": round(self.events_per_second, 1),
        }


# -- TLA+ values ------------------------------------------------------------------------------------------


def _partition_function(values: dict[str, str]) -> str:
    """A function on partition names: ("a" :> x @@ "b" :> y)."""
    return "(" + " @@ ".join(f"{json.dumps(p)} :> {v}" for p, v in sorted(values.items())) + ")"


def _broker_function(brokers: list[int], values: dict[int, str]) -> str:
    """A function on the run's broker ids, whatever they are: (0 :> x @@ 1 :> y); equal in TLA+ to the
    tuple TLC makes of a function on 1..N."""
    return "(" + " @@ ".join(f"{b} :> {values[b]}" for b in brokers) + ")"


class _Encoder:
    """Full states (of the observed variables) as TLA+ records in the specification's encoding."""

    def __init__(self, brokers: list[int], partitions: list[str]) -> None:
        self.brokers = brokers
        self.partitions = partitions

    def leaf(self, name: str, value: Any) -> str:
        if value is None:
            value = _ABSENT[name]
        elif name in _SETS:
            value = frozenset(value)
        elif name == "log":
            value = tuple(tuple(entry) for entry in value)
        return tla(value)

    def variable(self, name: str, value: Any, state: dict[str, Any]) -> str:
        depth = VARIABLES[name]
        if depth == 0:
            return tla(value)
        if depth == 1 and name in BROKER_KEYED:
            return _broker_function(self.brokers, {b: self.leaf(name, value.get(str(b))) for b in self.brokers})
        if depth == 1:
            return _partition_function({p: self.leaf(name, value.get(p)) for p in self.partitions})
        if name == "role":
            return self._per_replica(lambda b, p: tla(self._role(state, b, p)))
        if depth == 2:
            return self._per_replica(lambda b, p: self.leaf(name, value.get(b, {}).get(p)))
        return self._per_replica(lambda b, p: _broker_function(self.brokers, {
            r: self.leaf(name, value.get(b, {}).get(p, {}).get(str(r))) for r in self.brokers}))

    def _per_replica(self, cell: Any) -> str:
        return _broker_function(self.brokers, {
            b: _partition_function({p: cell(str(b), p) for p in self.partitions}) for b in self.brokers})

    @staticmethod
    def _role(state: dict[str, Any], broker: str, partition: str) -> str:
        role = state["role"].get(broker, {}).get(partition)
        if role is not None:
            return str(role)
        # A replica without a role still exists while the broker keeps its log (after a crash).
        return "none" if partition in state["log"].get(broker, {}) else "absent"

    def state(self, state: dict[str, Any], observed: list[str]) -> str:
        fields = ", ".join(f"{name} |-> {self.variable(name, state[name], state)}" for name in observed)
        return f"[{fields}]"


def _actor_id(actor: str) -> int:
    """The actor's broker id; NO_LEADER (in no broker set) for an actor that is not a broker."""
    kind, _, ident = actor.partition(":")
    return int(ident) if kind in ("broker", "controller") and ident.isdigit() else NO_LEADER


def _partition_scoped(delta: dict[str, Any], partition: str, first: bool) -> dict[str, Any]:
    """The part of an event's delta that concerns one partition (and, in the first part, the rest)."""
    scoped: dict[str, Any] = {}
    for name, value in delta.items():
        depth = VARIABLES[name]
        if depth == 0 or name in BROKER_KEYED:
            if first:
                scoped[name] = value
        elif depth == 1:
            if partition in value:
                scoped[name] = {partition: value[partition]}
        else:
            part = {b: {partition: cell[partition]} for b, cell in value.items() if partition in cell}
            if part:
                scoped[name] = part
    return scoped


def _batch(event: Event, assigned: set[str]) -> list[str]:
    """The partitions of an event the specification takes as one step per partition: the implementation
    creates and deletes a topic's partitions at once and batches a controller's requests per broker,
    while the model's topics have one partition and its requests carry one each. `assigned`: the
    partitions that exist before the event."""
    action = event["action"]
    if action in ("CreateTopic", "CreatePartitions"):
        return sorted(event["state"].get("assignment", {}))
    if action == "DeleteTopic":
        return sorted(p for p in assigned if p.rpartition("-")[0] == event["args"].get("topic"))
    if action == "ReassignPartitions":
        return sorted(event["args"].get("targets", {}))
    if action in BATCHED_REQUESTS:
        # LeaderAndIsr lists partition states, StopReplica partition names; a counterexample of TLC's names
        # none (its request is one model step already).
        entries = event["args"].get("partitions", ())
        return [entry if isinstance(entry, str) else entry["partition"] for entry in entries]
    return []


def model_steps(events: list[Event]) -> list[tuple[int, Event]]:
    """The trace as the specification's steps: (index of the event, step) with batches split by partition;
    the state after a batch's last step is the event's."""
    steps: list[tuple[int, Event]] = []
    assigned: set[str] = set()
    for index, event in enumerate(events):
        partitions = _batch(event, assigned)
        for partition, replicas in event["state"].get("assignment", {}).items():
            (assigned.add if replicas else assigned.discard)(partition)
        if len(partitions) < 2:
            steps.append((index, event))
            continue
        for number, partition in enumerate(partitions):
            state = _partition_scoped(event["state"], partition, number == 0)
            steps.append((index, {**event, "state": state}))
    return steps


def trace_module(events: list[Event]) -> tuple[str, dict[str, str]]:
    """The generated module's text and the constants it defines for the configuration (`events` as the
    specification's steps, see `model_steps`)."""
    observed = [name for name in VARIABLES if any(name in e["state"] for e in events)]
    if "role" in observed and "log" not in observed:
        raise ValueError("a trace observing role must observe log too (a replica's existence is read from it)")
    brokers = sorted({int(b) for b in events[0]["args"].get("brokers") or events[0]["state"].get("alive", {})})
    if not brokers or brokers[0] < 0:
        raise ValueError("Init event: args.brokers: expected non-negative broker ids")
    assignment: dict[str, list[int]] = {}
    for event in events:
        for partition, replicas in event["state"].get("assignment", {}).items():
            if replicas is not None:
                assignment.setdefault(partition, replicas)
    partitions = sorted(assignment) or ["none-0"]
    encoder = _Encoder(brokers, partitions)
    state: dict[str, Any] = {}
    records = []
    for event in events:
        apply_event(state, event)
        records.append(f"    [action |-> {json.dumps(event['action'])}, actor |-> {_actor_id(event['actor'])},\n"
                       f"     state |-> {encoder.state(state, observed)}]")
    constants = {"Brokers": "RunBrokers", "Partitions": "RunPartitions", "Assignment": "RunAssignment",
                 "TraceLog": "RunTraceLog"}
    operations = uses_operations(events)
    targets = ""
    if operations:
        requested = {tuple(target) for e in events if e["action"] == "ReassignPartitions"
                     for target in e["args"].get("targets", {}).values()}
        targets = f"RunTargets == {tla(frozenset(requested))}\n"
        constants["ReassignTargets"] = "RunTargets"
    text = (
        f"---- MODULE {MODULE} ----\n"
        f"(* Generated by kcm validate --tlc from run {events[0]['run']!r}: {len(events)} events. *)\n"
        f"EXTENDS {'TraceKafkaOps' if operations else 'TraceKafka'}\n"
        f"RunBrokers == {tla(frozenset(brokers))}\n"
        f"RunPartitions == {tla(frozenset(partitions))}\n"
        f"RunAssignment == {_partition_function({p: tla(tuple(assignment.get(p, ()))) for p in partitions})}\n"
        f"{targets}"
        "RunTraceLog == <<\n" + ",\n".join(records) + "\n>>\n====\n"
    )
    return text, constants


def uses_operations(events: list[Event]) -> bool:
    """Whether the trace needs the specification with the controller's operations (TraceKafkaOps)."""
    return any(event["action"] in OPERATIONS for event in events)


def trace_config(knobs: Knobs, constants: dict[str, str], update_metadata: bool) -> str:
    lines = ["CONSTANTS"]
    lines += [f"    {name} <- {value}" for name, value in constants.items()]
    lines += [f"    {name} = {BOUND}" for name in
              ("MaxRecords", "MaxLeaderEpoch", "MaxControllerEpoch", "MaxCrashes", "MaxExpiries")]
    lines.append(f"    ModelUpdateMetadata = {tla(update_metadata)}")
    lines.append("    SealRequests <- TraceSealRequests")
    operations = "ReassignTargets" in constants
    lines += ["INIT OpsTraceInit" if operations else "INIT TraceInit",
              "NEXT OpsTraceNext" if operations else "NEXT TraceNext", f"INVARIANT {ACCEPTED}"]
    return "\n".join(lines) + "\n" + bindings(knobs)


def validate_with_tlc(events: list[Event], heap_mb: int = 2048,
                      on_progress: Callable[[TlcProgress], None] | None = None) -> TraceCheck:
    started = time.perf_counter()
    init = events[0]
    if init["action"] != "Init" or not init.get("full"):
        raise ValueError("the trace must begin with a full Init event")
    try:
        knobs = Knobs.from_dict(dict(init["args"].get("knobs", {})))
    except ValueError as err:
        raise ValueError(f"Init event: args.knobs: {err}") from None
    steps = model_steps(events)
    text, constants = trace_module([step for _, step in steps])
    update_metadata = any(e["action"] == "UpdateMetadata" for e in events)
    with tempfile.TemporaryDirectory(prefix="kcm-trace-") as folder:
        work = Path(folder)
        for source in spec_dir().glob("*.tla"):
            shutil.copy(source, work / source.name)
        module = work / f"{MODULE}.tla"
        module.write_text(text)
        config = work / f"{MODULE}.cfg"
        config.write_text(trace_config(knobs, constants, update_metadata))
        result = run_tlc(module, config, heap_mb=heap_mb, on_progress=on_progress, extra_args=("-deadlock",))
    accepted = result.violated == ACCEPTED
    # TLC's depth counts the steps matched; the event of the first step not matched is the culprit. No
    # initial state at all: the Init event itself (TLC still reports depth 1 then).
    unmatched = 0 if result.distinct_states == 0 else min(result.depth, len(steps) - 1)
    first_bad = None if accepted else steps[unmatched][0]
    matched = len(events) if first_bad is None else first_bad
    return TraceCheck(accepted, len(events), matched, None if first_bad is None else events[first_bad],
                      result.distinct_states, time.perf_counter() - started)
