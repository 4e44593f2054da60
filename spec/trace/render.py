"""Readable renderings of trace events: one line per step, for violation excerpts and counterexamples."""

from __future__ import annotations

import json
from typing import Any

from kcm.spec.trace.format import Event

ARG_KEYS = ("partition", "broker", "topic", "controller_epoch", "leader_epoch", "applied", "record", "error",
            "removed", "dead", "new", "created", "elected", "resigned", "remaining", "targets", "now")


def render_event(event: Event) -> str:
    args = event["args"]
    shown = {k: args[k] for k in ARG_KEYS if k in args and args[k] not in ("", [], None)}
    if "partitions" in args and isinstance(args["partitions"], list) and args["partitions"]:
        first = args["partitions"][0]
        if isinstance(first, dict):
            shown["partitions"] = [_entry(s) for s in args["partitions"]]
    head = f"#{event['seq']:<5} {event['actor']:<14} {event['action']}"
    if shown:
        head += " " + _compact(shown)
    changes = render_delta(event["state"])
    return head if not changes else f"{head}\n        -> {changes}"


def _entry(entry: dict[str, Any]) -> str:
    """`orders-0:L1@0[1, 2]`: a request's partition, leader, leader epoch and ISR, those it carries (a
    line of a Kafka log may name a request's partition alone)."""
    text = str(entry.get("partition"))
    if "leader" in entry:
        text += f":L{entry['leader']}"
    if "leader_epoch" in entry:
        text += f"@{entry['leader_epoch']}"
    return text + (str(entry["isr"]) if "isr" in entry else "")


def render_delta(delta: dict[str, Any], limit: int = 8) -> str:
    parts: list[str] = []
    for var, value in delta.items():
        if isinstance(value, dict):
            for key, leaf in _leaves(value):
                parts.append(f"{var}[{key}]={_compact(leaf)}")
        else:
            parts.append(f"{var}={_compact(value)}")
    if len(parts) > limit:
        parts = [*parts[:limit], f"... (+{len(parts) - limit} more)"]
    return "; ".join(parts)


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and all(isinstance(v, dict | None) for v in value.values()):
            out.extend(_leaves(value, f"{path}]["))
        else:
            out.append((path, value))
    return out


def _compact(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def render_excerpt(events: list[Event], seq: int, before: int = 6) -> str:
    window = [e for e in events if seq - before <= e["seq"] <= seq]
    return "\n".join(render_event(e) for e in window)
