"""A trace as a timeline: per step the actor, action and messages, the variables it changed, and one lane
per broker (alive, role, leader epoch, ISR, HW, log coloured by leader epoch) plus the controller, with the
invariant checker's violations marked on their step.

The trace is read once, as a stream: only the steps of the window shown are kept (the first violation and
`window` steps either side of it, or the first steps of a trace where every invariant holds); the checker
still sees every event, so the page's counts and verdicts are those of `kcm check-trace`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from markupsafe import Markup

from kcm.conformance.check.invariants import InvariantChecker, Violation, explain
from kcm.conformance.check.svg import Svg
from kcm.spec.tlc.modelcheck import with_controllers
from kcm.spec.trace.format import Event, apply_event, empty_state
from kcm.spec.trace.render import ARG_KEYS, render_delta
from kcm.spec.vocabulary import NO_LEADER

DEFAULT_WINDOW: Final = 15
# The arguments that say who sent a step's message to whom, shown before the action's own arguments.
MESSAGE_KEYS: Final = ("request", "from", "to", "attempt")
# The variables a broker's lane shows: a step that changes one of them for a broker marks that lane.
LANE_VARIABLES: Final = ("alive", "role", "local_leader_epoch", "local_isr", "hw", "log")
# Log entries coloured by leader epoch; a colour-blind-safe palette (Okabe and Ito), cycled.
EPOCH_COLOURS: Final = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#999999")
ENTRY_W, ENTRY_H, LOG_LIMIT = 9.0, 12.0, 40


def epoch_colour(epoch: int) -> str:
    return EPOCH_COLOURS[epoch % len(EPOCH_COLOURS)]


@dataclass(frozen=True)
class Replica:
    """A broker's replica of one partition at one step."""

    partition: str
    role: str  # leader | follower | offline | none
    epoch: int | None
    isr: list[int] | None
    hw: int | None
    log: Markup


@dataclass(frozen=True)
class Lane:
    broker: str
    alive: bool | None
    changed: bool
    replicas: list[Replica]


@dataclass
class Step:
    seq: int
    actor: str
    action: str
    messages: str
    args: str
    changes: str
    controller: str
    controller_epoch: int
    lanes: list[Lane]
    violations: list[Violation] = field(default_factory=list)
    # The leader epochs of the log entries the step's lanes show, for the colour legend.
    epochs: frozenset[int] = frozenset()
    # Each partition's state node in the store (the controller's decision): leader, leader epoch, ISR.
    store: list[str] = field(default_factory=list)


@dataclass
class Timeline:
    """What the trace template draws; `anchor` makes the section addressable when a page holds several."""

    title: str
    anchor: str
    steps: list[Step]
    events: int
    window_note: str
    first: Violation | None
    violations: int
    verdicts: dict[str, str]
    epochs: list[int]
    partial_note: str = ""


def build(events: Iterable[Event], title: str, anchor: str, window: int = DEFAULT_WINDOW,
          truncation: str = "kip320") -> Timeline:
    """The timeline of a whole trace checked by the invariant checker (what `kcm check-trace` does).

    Until the window is known, a step is kept as a snapshot of the variables its lanes show (copies of a
    few small maps; their leaf values are never mutated); only the steps shown are drawn."""
    checker = InvariantChecker(truncation)
    state = empty_state()
    head: list[_Snapshot] = []
    recent: deque[_Snapshot] = deque(maxlen=window + 1)
    shown: list[_Snapshot] | None = None
    after = window
    total = 0
    for event in events:
        total += 1
        found = checker.step(event)
        apply_event(state, event)
        if shown is not None and after <= 0:
            continue
        snapshot = _snapshot(event, state, found)
        if shown is None:
            if len(head) < 2 * window + 1:
                head.append(snapshot)
            recent.append(snapshot)
            if found:
                shown = list(recent)
        else:
            shown.append(snapshot)
            after -= 1
    report = checker.report
    first = report.violations[0] if report.violations else None
    steps = _steps(head if shown is None else shown)
    return Timeline(title, anchor, steps, total, _window_note(steps, total, first, window), first,
                    len(report.violations), report.verdicts(), _epochs(steps))


# An event, the state variables a step shows as they were after it, and the violations found on it.
_Snapshot = tuple[Event, dict[str, Any], list[Violation]]
_SHOWN: Final = ("assignment", "leader", "leader_epoch", "isr", *LANE_VARIABLES)


def _snapshot(event: Event, state: dict[str, Any], found: list[Violation]) -> _Snapshot:
    view = {name: {key: dict(inner) if isinstance(inner, dict) else inner for key, inner in state[name].items()}
            for name in _SHOWN}
    view["controller"], view["controller_epoch"] = state["controller"], state["controller_epoch"]
    return event, view, found


def build_window(events: Iterable[Event], marks: list[Violation], title: str, anchor: str) -> Timeline:
    """The timeline of a few events cut out of a run (a pipeline violation's window): the state before
    them is unknown, so lanes show only what the window's own deltas set, and the marks are given."""
    state = empty_state()
    snapshots = []
    known: set[str] = set()
    for event in events:
        apply_event(state, event)
        known.update(event["state"])
        snapshot = _snapshot(event, state, [m for m in marks if m.seq == event["seq"]])
        # What no event of the window set is unknown, not the empty state's value.
        snapshot[1]["controller_known"] = "controller" in known
        snapshots.append(snapshot)
    steps = _steps(snapshots)
    first = min(marks, key=lambda m: m.seq) if marks else None
    note = (f"events {steps[0].seq}..{steps[-1].seq} around the violation, as the pipeline kept them"
            if steps else "no events kept")
    return Timeline(title, anchor, steps, len(steps), note, first, len(marks), {}, _epochs(steps),
                    partial_note="The state before the window is not known: lanes show only what these "
                                 "events set, and a blank means unknown.")


def _window_note(steps: list[Step], total: int, first: Violation | None, window: int) -> str:
    if not steps:
        return "the trace has no events"
    span = f"steps {steps[0].seq}..{steps[-1].seq}"
    if len(steps) == total:
        return f"all {total} steps"
    if first is not None:
        return f"{span} of {total:,}: the first violation and up to {window} steps either side"
    return f"{span} of {total:,}: the first {len(steps)} steps (no violation)"


def _epochs(steps: list[Step]) -> list[int]:
    return sorted(frozenset().union(*(step.epochs for step in steps)))


def _steps(snapshots: list[_Snapshot]) -> list[Step]:
    """The steps drawn, every one with the same lanes: each broker and partition any of them knows."""
    brokers = sorted({b for _, view, _ in snapshots for name in LANE_VARIABLES for b in view[name]},
                     key=_broker_order)
    partitions = sorted({p for _, view, _ in snapshots for p in view["assignment"]} or
                        {p for _, view, _ in snapshots for inner in view["role"].values() for p in inner})
    return [_step(event, view, found, brokers, partitions) for event, view, found in snapshots]


def _step(event: Event, state: dict[str, Any], violations: list[Violation], brokers: list[str],
          partitions: list[str]) -> Step:
    delta = event["state"]
    touched = {str(b) for name in LANE_VARIABLES for b in delta.get(name, {})}
    lanes = [Lane(b, state["alive"].get(b), b in touched or bool(event.get("full")),
                  [_replica(state, b, p) for p in partitions]) for b in brokers]
    controller = state["controller"]
    epochs = frozenset(int(entry[0]) for b in brokers for p in partitions
                       for entry in state["log"].get(b, {}).get(p) or ())
    shown = "?" if not state.get("controller_known", True) else "none" if controller == NO_LEADER else str(controller)
    return Step(event["seq"], event["actor"], event["action"], _messages(event["args"]), _arguments(event["args"]),
                render_delta(delta, limit=12), shown, state["controller_epoch"], lanes, violations, epochs,
                [_node(state, p) for p in partitions if p in state["leader"]])


def _node(state: dict[str, Any], p: str) -> str:
    leader = state["leader"][p]
    isr = state["isr"].get(p)
    return (f"{p}: {'none' if leader == NO_LEADER else f'L{leader}'} e{state['leader_epoch'].get(p, '?')}"
            + ("" if isr is None else f" isr {','.join(map(str, isr))}"))


def _broker_order(broker: str) -> tuple[int, str]:
    return (int(broker), "") if broker.lstrip("-").isdigit() else (0, broker)


def _replica(state: dict[str, Any], b: str, p: str) -> Replica:
    role = state["role"].get(b, {}).get(p)
    if state["alive"].get(b) is False:
        role = "offline"
    log = state["log"].get(b, {}).get(p)
    hw = state["hw"].get(b, {}).get(p)
    return Replica(p, role or "none", state["local_leader_epoch"].get(b, {}).get(p),
                   state["local_isr"].get(b, {}).get(p), hw, log_strip(log, hw))


def log_strip(log: list[Any] | None, hw: int | None) -> Markup:
    """A log as a row of boxes, one per entry coloured by its leader epoch, and the HW as a red bar."""
    if not log:
        return Markup("")
    shown = log[-LOG_LIMIT:]
    skipped = len(log) - len(shown)
    picture = Svg(ENTRY_W * len(shown) + 4, ENTRY_H + 4)
    for i, (epoch, record) in enumerate(shown):
        offset = skipped + i
        picture.rect(2 + i * ENTRY_W, 2, ENTRY_W - 1, ENTRY_H, fill=epoch_colour(int(epoch)), stroke="none",
                     radius=1, title=f"offset {offset}: leader epoch {epoch}, record {record}")
    if hw is not None and skipped <= hw <= len(log):
        x = 1.5 + (hw - skipped) * ENTRY_W
        picture.line(x, 0, x, ENTRY_H + 4, "#c62828", 2, title=f"HW {hw}")
    # Written by Svg from numbers and escaped titles only.
    return Markup(picture.render([], background=False))


def _messages(args: dict[str, Any]) -> str:
    return " ".join(f"{key}={_short(args[key])}" for key in MESSAGE_KEYS if key in args)


def _arguments(args: dict[str, Any]) -> str:
    shown = [f"{key}={_short(args[key])}" for key in ARG_KEYS if args.get(key) not in (None, "", [])]
    return " ".join(shown)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def mark_final_state(timeline: Timeline, invariant: str, events: Iterable[Event], engine: str = "TLC") -> None:
    """A model checker's counterexample ends in a state that breaks `invariant`. Where the trace as written
    does not show it to the checker (TLC's steps name no controller), the last step is marked with the
    checker's explanation of the steps with their controllers worked out (`with_controllers`, as `kcm check`
    explains it), or, failing that, with the engine's word and the checker's silence said."""
    if timeline.first is not None or not timeline.steps:
        return
    last = timeline.steps[-1]
    found = explain(with_controllers(list(events)), invariant)
    marks = [Violation(v.invariant, last.seq, v.message) for v in found] or [
        Violation(invariant, last.seq, f"{engine} reports that this state breaks {invariant}; kcm's invariant "
                                       "checker does not flag this trace (a disagreement: please report it)")]
    last.violations.extend(marks)
    timeline.first = marks[0]
