"""Log lines as a chosen Kafka release prints them, from the statements of formats.py.

Fixtures and tests describe a run as `Line`s (a kind of the table and its values in kcm's terms) and render
them for a release line; the parser then reads them back. Only the kinds whose interpolated objects
renderings.py can render are renderable; asking for another, or for a kind the release never logs, is an
error rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.conformance.pipeline.kafka_log.renderings import render_lai, render_lisr, render_partition, render_ps

_INTS: Final = frozenset(name for name, regex in fm.PLACEHOLDERS.items() if regex == fm._INT)
_START: Final = datetime(2024, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Line:
    """One statement to render. `values` uses the placeholder names of the table for plain values (`c`,
    `e`, `b`, `cid`, `src`...), `partition` for `{tap}`/`{tp}`, `replicas`, `adding` and `removing`
    (lists: an assignment), `isr` (a list, for the broker's own ISR) and `state` (a dict with leader,
    leader_epoch, isr, zk_version, controller_epoch, replicas, adding, removing, is_new) for the object
    renderings. Opaque objects no statement of kcm needs (`{blob}`, `{node}`...) come as text in `extra`."""

    kind: str
    values: dict[str, Any]
    role: str | None = None
    logger: str = fm.STATE_CHANGE
    extra: dict[str, str] = field(default_factory=dict)


class RenderError(ValueError):
    pass


def _value(name: str, line: Line, release: str) -> str | None:
    v = line.values
    if name in _INTS:
        return str(v[name]) if name in v else None
    if name in ("tap", "tp"):
        return render_partition(v["partition"], name, release) if "partition" in v else None
    if name in ("src", "dst", "topicid", "prev"):
        return str(v[name]) if name in v else None
    if name == "replicas":
        return ",".join(map(str, v["replicas"])) if "replicas" in v else None
    if name == "assignment":  # ReplicaAssignment.toString, controller/ControllerContext.scala 2.4+
        if "replicas" not in v:
            return None
        lists = [",".join(map(str, v.get(key, []))) for key in ("replicas", "adding", "removing")]
        return f"ReplicaAssignment(replicas={lists[0]}, addingReplicas={lists[1]}, removingReplicas={lists[2]})"
    if name in ("isrb", "addb", "remb"):
        key = {"isrb": "isr", "addb": "adding", "remb": "removing"}[name]
        return "[" + ",".join(map(str, v.get(key, []))) + "]" if key in v or name != "isrb" else None
    if name == "under":
        return ""
    if name == "delete":
        return str(v["delete"]).lower() if "delete" in v else None
    if name in ("lisr", "lai", "ps"):
        if "state" not in v:
            return None
        state = {"partition": v.get("partition"), **v["state"]}
        return {"lisr": render_lisr, "lai": render_lai, "ps": render_ps}[name](state, release)
    return line.extra.get(name)


def _candidates(line: Line, release: str) -> list[tuple[fm.Format, dict[str, str]]]:
    found = []
    for f in fm.FORMATS:
        if f.kind != line.kind or f.logger != line.logger or not f.covers(release):
            continue
        if line.role is not None and f.fixed.get("role") not in (None, line.role):
            continue
        values = {name: _value(name, line, release) for name in fm.placeholders(f.template)}
        if all(value is not None for value in values.values()):
            found.append((f, {k: str(x) for k, x in values.items()}))
    return found


def render_message(line: Line, release: str) -> tuple[fm.Format, str]:
    """The statement of `release` that says the most of the line's values, filled in."""
    if release not in fm.RELEASES:
        raise RenderError(f"unknown release line {release!r} (known: {', '.join(fm.LINES)})")
    found = _candidates(line, release)
    if not found:
        raise RenderError(f"Kafka {release} has no {line.kind} statement for the values {sorted(line.values)}")
    f, values = max(found, key=lambda item: len(item[1]))
    text = f.template
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return f, text


def render(lines: Sequence[Line], release: str, start: datetime = _START,
           step: timedelta = timedelta(milliseconds=1)) -> list[str]:
    """The lines in Kafka's default layout `[%d] %p %m (%c)%n`, one timestamp step apart."""
    out = []
    for number, line in enumerate(lines):
        f, message = render_message(line, release)
        stamp = start + number * step
        ts = stamp.strftime("%Y-%m-%d %H:%M:%S,") + f"{stamp.microsecond // 1000:03d}"
        out.append(f"[{ts}] {f.level_at(release)} {message} ({f.logger})")
    return out
