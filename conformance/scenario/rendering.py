"""How a scenario prints what the cluster did and what it holds: every trace event on one line
(`seq actor action args`), with the controller's store writes (`zk ...`), its state-machine transitions
(`t0-0 A -> B`, `t0-0/4 A -> B`) and, for steps that are not the controller's, the partition state nodes
they changed (`=> t0-0 ...`) indented below it; and the `state` and `log` views of the checker's state.
The scenario files' expected outputs are these lines, so any change here changes every file.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from kcm.conformance.check.invariants import Violation
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs, shown_broker

# Replication chatter, hidden by `stabilize` and `replicate` unless it changed a partition node or broke an
# invariant (see `shows_when_quiet`).
QUIET_HIDDEN: Final = frozenset({
    "Fetch", "SendFetch", "FetchResponse", "UpdateMetadata", "OffsetsForLeaderEpoch",
    "OffsetsForLeaderEpochResponse", "HwCheckpoint", "Tick",
})
SKIPPED_ARGS: Final = frozenset(
    {"transitions", "writes", "invalid_transitions", "controller_id", "replica_id", "knobs"}
)
KEEP_EMPTY: Final = frozenset({"remaining", "removed", "records"})
NODE_VARS: Final = ("leader", "leader_epoch", "isr")
STATE_PATH: Final = re.compile(r"/brokers/topics/([^/]+)/partitions/(\d+)/state")
TOPIC_PATH: Final = re.compile(r"/brokers/topics/([^/]+)")


def fmt(value: Any) -> str:
    """A compact, deterministic rendering of an argument value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "partition" in v for v in value):
            return "[" + ", ".join(fmt_leader_state(v) for v in value) + "]"
        if value and all(_is_record(v) for v in value):
            return fmt_records(value)
        if all(isinstance(v, int) for v in value):
            return "[" + ",".join(str(v) for v in value) + "]"
        return "[" + " ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return " ".join(f"{k}={fmt(v)}" for k, v in value.items())
    return str(value)


def _is_record(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)


def fmt_records(records: list[Any]) -> str:
    """A log or a batch of records as epoch:record entries."""
    return "[" + " ".join(f"{epoch}:{record}" for epoch, record in records) + "]"


def fmt_leader_state(state: dict[str, Any]) -> str:
    return (f"{state['partition']} leader={state['leader']} epoch={state['leader_epoch']} "
            f"isr={fmt(state['isr'])} ar={fmt(state['replicas'])}")


def fmt_node(partition: str, data: Any) -> str:
    return f"{partition} leader={data['leader']} epoch={data['leader_epoch']} isr={fmt(list(data['isr']))}"


def render_write(write: list[Any]) -> str:
    op, path, data = write
    verb = {"SetData": "set", "Create": "create", "Delete": "delete"}.get(op, op)
    if data is None:
        return f"zk {verb} {path}"
    # The short forms take the nodes' data as kcm writes them; a trace of another producer's may differ (the
    # trace format leaves a write's data free), and shows as JSON.
    state = STATE_PATH.fullmatch(path)
    if state is not None and isinstance(data, dict) and all(
            isinstance(data.get(key), kind) for key, kind in (("leader", int), ("leader_epoch", int), ("isr", list))):
        return f"zk {verb} {fmt_node(f'{state[1]}-{state[2]}', data)}"
    topic = TOPIC_PATH.fullmatch(path)
    assignment = data.get("partitions") if isinstance(data, dict) else None
    if topic is not None and isinstance(assignment, dict) and all(
            index.isdecimal() and isinstance(replicas, list) for index, replicas in assignment.items()):
        parts = " ".join(f"{i}={fmt(list(r))}" for i, r in sorted(assignment.items(), key=lambda x: int(x[0])))
        return f"zk {verb} {topic[1]} AR {parts}"
    return f"zk {verb} {path} {json.dumps(data, separators=(',', ':'), sort_keys=True)}"


def render_transition(entry: list[Any], invalid: bool = False) -> str:
    kind, partition, *rest = entry
    if kind == "partition":
        what, (src, dst) = partition, rest
    else:
        what, src, dst = f"{partition}/{rest[0]}", rest[1], rest[2]
    prefix = "INVALID " if invalid else ""
    if src is None:
        return f"{prefix}{what} loaded as {dst}"
    return f"{prefix}{what} {src} -> {dst}"


BROKER_EPOCH_ARGS: Final = frozenset({"broker_epoch", "current_broker_epoch"})


def render_args(args: dict[str, Any]) -> str:
    parts: list[str] = []
    for key, value in args.items():
        if key in SKIPPED_ARGS or value is None or value == "":
            continue
        if value == [] and key not in KEEP_EMPTY:
            continue
        if key == "applied" and value is True:
            continue
        if key in BROKER_EPOCH_ARGS and args.get("broker_epoch") == args.get("current_broker_epoch"):
            continue  # addressed to the broker's current registration, as nearly every request is
        parts.append(f"{key}={fmt(value)}")
    if "knobs" in args:
        parts.append(f"knobs: {Knobs.from_dict(args['knobs']).describe()}")
    return " ".join(parts)


def render_event(event: Event, state: dict[str, Any], violations: list[Violation]) -> list[str]:
    args = event["args"]
    head = f"{event['seq']} {event['actor']} {event['action']}"
    shown = render_args(args)
    lines = [f"{head} {shown}" if shown else head]
    lines.extend(f"  {render_write(w)}" for w in args.get("writes") or [])
    lines.extend(f"  {render_transition(t)}" for t in args.get("transitions") or [])
    lines.extend(f"  {render_transition(t, invalid=True)}" for t in args.get("invalid_transitions") or [])
    if "writes" not in args:
        touched = sorted({p for var in NODE_VARS for p in event["state"].get(var, {})})
        for p in touched:
            if p in state["leader"]:
                node = {"leader": state["leader"][p], "leader_epoch": state["leader_epoch"].get(p),
                        "isr": state["isr"].get(p, [])}
                lines.append(f"  => {fmt_node(p, node)}")
            else:
                lines.append(f"  => {p} state node removed")
    lines.extend(f"VIOLATION {v.invariant}: {v.message}" for v in violations)
    return lines


def shows_when_quiet(event: Event, violations: list[Violation]) -> bool:
    """`stabilize` and `replicate` hide replication chatter, unless it changed a partition node or broke
    an invariant."""
    if event["action"] not in QUIET_HIDDEN or violations:
        return True
    return any(var in event["state"] for var in NODE_VARS)


def short_state(state: str | None, suffix: str) -> str:
    return "-" if state is None else state.removeprefix(suffix).removesuffix(suffix)


def partition_key(partition: str) -> tuple[str, int]:
    topic, _, index = partition.rpartition("-")
    return topic, int(index)


# -- the views of the cluster's state ---------------------------------------------------------------------------


def render_state(s: dict[str, Any]) -> list[str]:
    """The controller, every partition (as stored and as the acting controller sees it), every broker."""
    controller = s["controller"]
    lines = [f"controller={shown_broker(controller)} epoch={s['controller_epoch']}"]
    for p in sorted(set(s["assignment"]) | set(s["leader"]), key=partition_key):
        lines.append(_partition_line(s, p, str(controller)))
    lines.extend(_broker_line(s, b) for b in sorted(s["alive"], key=int))
    return lines


def _partition_line(s: dict[str, Any], p: str, acting: str) -> str:
    leader = s["leader"].get(p)
    node = "no state node" if leader is None else (
        f"leader={shown_broker(leader)} epoch={s['leader_epoch'].get(p)} isr={fmt(s['isr'].get(p, []))}"
    )
    pstate = short_state(s["partition_state"].get(acting, {}).get(p), "Partition")
    replica_states = s["replica_state"].get(acting, {}).get(p, {})
    replicas = ",".join(
        f"{r}:{short_state(st, 'Replica')}" for r, st in sorted(replica_states.items(), key=lambda x: int(x[0]))
    )
    return f"{p} AR={fmt(s['assignment'].get(p, []))} {node} | {pstate} [{replicas}]"


def _broker_line(s: dict[str, Any], b: str) -> str:
    status = "up" if s["alive"][b] else "down"
    acting_epoch = s["acting_controller_epoch"].get(b, 0)
    if acting_epoch:
        status += f" (acting controller, epoch {acting_epoch})"
    held = []
    for p in sorted(s["log"].get(b, {}), key=partition_key):
        role = s["role"].get(b, {}).get(p)
        where = f"{role}@{s['local_leader_epoch'].get(b, {}).get(p)}" if role else "stopped"
        held.append(f"{p} {where} log={len(s['log'][b][p])} hw={s['hw'].get(b, {}).get(p)}")
    return f"broker {b} {status}" + (": " + "; ".join(held) if held else "")


def render_logs(s: dict[str, Any], partition: str) -> list[str]:
    """Every broker's copy of the partition's log, with its HW and checkpoint."""
    lines = []
    for b in sorted(s["log"], key=int):
        log = s["log"][b].get(partition)
        if log is None:
            continue
        role = s["role"].get(b, {}).get(partition) or "stopped"
        down = "" if s["alive"].get(b) else " (down)"
        hw = s["hw"].get(b, {}).get(partition)
        checkpoint = s["hw_checkpoint"].get(b, {}).get(partition)
        lines.append(f"broker {b}{down} {role}: {fmt_records(log)} hw={hw} checkpoint={checkpoint}")
    return lines or [f"no broker holds {partition}"]
