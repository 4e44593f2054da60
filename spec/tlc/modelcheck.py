"""`kcm check`: model-check a TLA+ instance of spec/ under chosen knobs with TLC.

A model is a `MC<name>.cfg` of spec/ with its module: `MC<name>.tla`, or for a configuration that varies
another model, the module of that model (`MCzombiefixed.cfg` runs `MCzombie.tla`). Knob settings are
applied by generating, in a temporary folder, a module extending the model and the chosen truncation
variant, with the model's configuration plus the bindings of the knob constants and the era hooks
(spec/tlc/config.py); TLC's state files go to another temporary folder, removed afterwards.
A counterexample is converted to trace format v2 (`kcm check-trace` and `kcm replay` read it).
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from kcm.spec.atomic_output import OutputError
from kcm.spec.design_folder import DesignFolder
from kcm.spec.tlc.checkpoint import Checkpoint
from kcm.spec.tlc.config import configure, declared, knob_settings
from kcm.spec.tlc.runner import (
    HEARTBEAT_DEFINITION,
    HEARTBEAT_OPERATOR,
    STUTTERING,
    TlcProgress,
    TlcResult,
    TlcSetupError,
    TraceState,
    default_heap_mb,
    run_tlc,
)
from kcm.spec.trace.format import Event, TraceError, TraceWriter, apply_event, empty_state, make_event
from kcm.spec.verdicts import VIOLATED, held
from kcm.spec.vocabulary import (
    ACTIONS,
    ERA_MODULES,
    HW_ACROSS_LEADERS,
    HW_PER_LEADER,
    INVARIANTS,
    NO_LEADER,
    VARIABLES,
    Knobs,
    shown_broker,
)
from kcm.spec.vocabulary import (
    PROPERTIES as VOCABULARY_PROPERTIES,
)

# The two readings of HighWatermarkMonotonic are separate operators in TLA+.
TLA_READINGS: Final = {
    "HighWatermarkMonotonicPerLeaderEpoch": HW_PER_LEADER,
    "HighWatermarkMonotonicAcrossLeaders": HW_ACROSS_LEADERS,
}


def vocabulary_name(tla_name: str) -> str:
    """An invariant as kcm names it everywhere (a reading after a slash), from its TLA+ operator name."""
    return TLA_READINGS.get(tla_name, tla_name)


# The progress properties (spec/KafkaProperties.tla, spec/KafkaOpsProperties.tla: the vocabulary's, which the
# trace checker shares), and the availability property the min_isr and unclean_election knobs trade away.
PROGRESS_PROPERTIES: Final = VOCABULARY_PROPERTIES
WRITES_ACCEPTED: Final = "WritesAccepted"
PROPERTIES: Final = (*PROGRESS_PROPERTIES, WRITES_ACCEPTED)

GENERATED: Final = "MCkcm"
# Spec actions that fuse several protocol steps (to keep reproductions small), by the step they end with;
# and the liveness models' IsrExpire, an IsrShrink of a follower that is behind.
FUSED_ACTIONS: Final = {"FetchRound": "FetchResponse", "TruncationRound": "OffsetsForLeaderEpochResponse",
                        "IsrExpire": "IsrShrink"}


@dataclass(frozen=True)
class Simulation:
    """TLC's simulation mode (`-simulate`): random behaviours of at most `depth` steps from `seed`, until
    `behaviours` of them are done or an invariant breaks. Not exhaustive: it finds, it does not prove."""

    seed: int
    depth: int
    behaviours: int = 1_000_000_000

    def args(self) -> tuple[str, ...]:
        return ("-simulate", f"num={self.behaviours}", "-depth", str(self.depth), "-seed", str(self.seed))


class ModelError(ValueError):
    """An unknown model or invariant: one line for the user."""


def spec_dir() -> Path:
    return Path(str(resources.files("kcm.spec")))


@dataclass(frozen=True)
class Model:
    module: Path
    config: Path


def models() -> dict[str, Model]:
    """Model name (lower case, without `MC`) -> its module and configuration, for every MC*.cfg: a
    configuration without a module of its own name runs the model whose name its own begins with (the
    longest), so a design that differs from a model in its knobs and invariants needs only a `.cfg`."""
    modules = {module.stem: module for module in spec_dir().glob("MC*.tla")}
    found = {}
    for config in sorted(spec_dir().glob("MC*.cfg")):
        base = max((stem for stem in modules if config.stem.startswith(stem)), key=len, default=None)
        if base is not None:
            found[config.stem[2:].lower()] = Model(modules[base], config)
    return found


def _model(name: str) -> Model:
    known = models()
    if name not in known:
        raise ModelError(f"unknown model {name!r} (known: {', '.join(sorted(known))})")
    return known[name]


@dataclass
class CheckOutcome:
    model: str
    knobs: Knobs
    result: TlcResult
    trace_path: Path | None
    events: list[Event]  # the counterexample in trace format v2 (none when the invariants hold)
    # Why the counterexample could not be written to the path asked for (it is in `events` all the same).
    unwritten: str | None = None

    @property
    def verdict(self) -> str:
        """Violated, or holds on the states TLC explored: none (an Init no state satisfies) is unobserved."""
        return VIOLATED if self.result.violated is not None else held(self.result.distinct_states)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "result": self.verdict,
            "invariant": None if self.result.violated is None else vocabulary_name(self.result.violated),
            "distinct_states": self.result.distinct_states,
            "depth": self.result.depth,
            "seconds": round(self.result.seconds, 2),
            "trace": str(self.trace_path) if self.trace_path else None,
            "trace_length": len(self.result.trace) if self.result.trace else None,
            "knobs": self.knobs.to_dict(),
            **({"trace_not_written": self.unwritten} if self.unwritten else {}),
            # Measured (check_model's `coverage`): each action of the next-state relation by name, with where it
            # is defined and what it generated; an action with `generated` 0 never fired.
            **({"coverage": {name: action.to_json() for name, action in self.result.coverage.items()}}
               if self.result.coverage is not None else {}),
        }


# A model's actions that are meant never to fire, each with the reason, as comments of its configuration:
#     \* kcm unfired: TopicChange: the model's topic exists from its initial state and none is created
_UNFIRED: Final = re.compile(r"^\\\*\s*kcm unfired:\s*(\w+)\s*:\s*(.+?)\s*$", re.M)


def expected_unfired(model: str) -> dict[str, str]:
    """The actions a model's configuration says never fire in it, with why (every other action of its Next
    must fire, or the model's invariants hold of it vacuously)."""
    return dict(_UNFIRED.findall(_model(model).config.read_text()))


def vacuous_actions(model: str, result: TlcResult) -> list[str]:
    """The actions that never fired in a run with coverage and are not said to never fire in the model."""
    expected = expected_unfired(model)
    return [name for name in result.never_fired if name.partition("@")[0] not in expected]


def model_knobs(model: str) -> Knobs:
    """The knob settings a model's configuration makes: the defaults of `kcm check --model NAME`."""
    return knob_settings(_model(model).config.read_text())


def model_properties(model: str) -> list[str]:
    """The temporal properties a model's configuration checks (none for a safety model)."""
    return declared(_model(model).config.read_text(), "PROPERTY")


def liveness_models() -> list[str]:
    return [name for name in models() if model_properties(name)]


def check_property_names(model: str, names: list[str]) -> None:
    """A ModelError naming the first name that is no property, or no property of the model."""
    own = model_properties(model)
    for name in names:
        if name not in PROPERTIES:
            raise ModelError(f"unknown property {name!r} (known: {', '.join(PROPERTIES)})")
        if name not in own:
            raise ModelError(f"model {model} does not check {name} (it checks: {', '.join(own) or 'no property'})")


def check_invariant_names(names: list[str]) -> None:
    """A ModelError naming the first name TLC has no invariant for."""
    for name in names:
        if name not in (*INVARIANTS, *TLA_READINGS, "TypeOK"):
            raise ModelError(f"unknown invariant {name!r} (known: TypeOK, {', '.join(INVARIANTS)})")


# TLC's coverage builds a cost model of the spec before it searches: a tree of every call path of every action,
# each LET definition unfolded where it is used. BrokerChangeWork's chain of states (W0..W3, each used twice by
# the next) alone unfolds to 2.3 million nodes, 1.1 GiB live on the heap for every model, small or not: in a heap
# of 1 GiB TLC collects garbage for minutes and runs out of memory before it computes an initial state.
COVERAGE_MIN_HEAP_MB: Final = 2048


def check_model(
    model: str,
    knobs: Knobs,
    invariants: list[str] | None = None,
    workers: int = 1,
    heap_mb: int | None = None,
    trace_out: Path | None = None,
    on_progress: Callable[[TlcProgress], None] | None = None,
    budget_seconds: float | None = None,
    properties: list[str] | None = None,
    simulate: Simulation | None = None,
    max_depth: int | None = None,
    quick: bool = False,
    design: DesignFolder | None = None,
    coverage: bool = False,
    checkpoint: Checkpoint | None = None,
) -> CheckOutcome:
    """TLC on a model under knobs (and, optionally, only some invariants or temporal properties), with TLC's
    heap bounded (`heap_mb`, default KCM_TLC_HEAP_MB or 4 GiB) and, optionally, its time. A counterexample
    is kept in the outcome, and written to `trace_out` when given; a temporal property's is a lasso, its
    loop recorded in the last event (`loop_to`, `loop_action`). `simulate`: random behaviours instead of
    the breadth-first search; `max_depth`: breadth-first, no state beyond that many steps is explored;
    `quick`: TLC's JVM tuned for a run of seconds (kcm.spec.tlc.runner.tlc_command); `design`: a design folder
    whose module the model extends and whose hooks it binds (kcm.spec.design_folder); `coverage`: how often each
    action of the model's next-state relation fired, in `result.coverage` (an action that never fired leaves the
    invariants holding vacuously of it). Coverage needs a heap of COVERAGE_MIN_HEAP_MB at least, and costs about
    5 s of CPU before the search and a slower search (kcm.spec.tlc.runner.run_tlc); `checkpoint`: TLC's states
    kept in its folder and checkpointed, a run that can be stopped (`budget_seconds`, Ctrl-C) and resumed, its
    counts and verdict those of an uninterrupted run (kcm.spec.tlc.checkpoint; CheckpointError, before TLC starts,
    for a folder that does not fit)."""
    base = _model(model)
    check_invariant_names(invariants or [])
    if coverage and (heap_mb or default_heap_mb()) < COVERAGE_MIN_HEAP_MB:
        raise TlcSetupError(f"coverage needs a TLC heap of at least {COVERAGE_MIN_HEAP_MB} MiB (its cost model of "
                            f"the spec takes 1.1 GiB), not {heap_mb or default_heap_mb()} MiB")
    identity = {"model": model, "knobs": knobs.to_dict(), "invariants": invariants, "workers": workers,
                "design": design.name if design is not None else None, "max_depth": max_depth, "properties": properties}
    with tempfile.TemporaryDirectory(prefix="kcm-model-") as folder, \
            contextlib.nullcontext(None) if checkpoint is None else checkpoint.held(identity) as recover:
        work = Path(folder)
        for source in spec_dir().glob("*.tla"):
            shutil.copy(source, work / source.name)
        if design is not None and design.tla_module is not None:
            shutil.copy(design.tla_module, work / design.tla_module.name)
        module, config = _generate(work, base, knobs, invariants, properties, simulate is None, max_depth, design)
        # Bounded models end where their bounds do: a state without successors is not an error here.
        mode = simulate.args() if simulate is not None else ()
        result = run_tlc(module, config, workers=workers, heap_mb=heap_mb, on_progress=on_progress,
                         extra_args=("-deadlock", *mode), budget_seconds=budget_seconds, quick=quick,
                         coverage=coverage, checkpoint=checkpoint, recover=recover)
    if checkpoint is not None and result.complete:
        checkpoint.finish(f"{result.violated or 'holds'}, {result.distinct_states:,} distinct states, depth "
                          f"{result.depth}")
    events = counterexample_events(result.trace, knobs, f"tlc-{model}") if result.violated and result.trace else []
    if events and design is not None:
        events[0]["args"]["design"] = design.name  # replayed with the design's strategy, and only so
    if events and result.loop_start is not None:
        events[-1]["args"].update(loop_to=result.loop_start, loop_action=result.loop_action)
    if not events or trace_out is None:
        return CheckOutcome(model, knobs, result, None, events)
    # A search of minutes is not lost to a full disk or a path that went away: the caller shows the events.
    try:
        write_events(events, trace_out)
    except TraceError as err:
        return CheckOutcome(model, knobs, result, None, events, str(err))
    return CheckOutcome(model, knobs, result, trace_out, events)


@dataclass
class PropertyOutcome:
    """One temporal property of a liveness check: its verdict, and TLC's outcome of the run that decided it."""

    name: str
    verdict: str  # holds | violated (kcm.spec.verdicts)
    outcome: CheckOutcome

    def to_json(self) -> dict[str, Any]:
        result = self.outcome.result
        loop = self.outcome.events[-1]["args"] if self.outcome.events else {}
        return {"property": self.name, "result": self.verdict, "distinct_states": result.distinct_states,
                "seconds": round(result.seconds, 2),
                "trace": str(self.outcome.trace_path) if self.outcome.trace_path else None,
                "trace_length": len(result.trace) if result.trace else None,
                "loop_to": loop.get("loop_to"), "loop_action": loop.get("loop_action"),
                **({"trace_not_written": self.outcome.unwritten, "counterexample": self.outcome.events}
                   if self.outcome.unwritten else {})}


def check_liveness(
    model: str,
    knobs: Knobs,
    properties: list[str],
    trace_out: Callable[[str], Path],
    heap_mb: int | None = None,
    on_progress: Callable[[str, TlcProgress], None] | None = None,
) -> list[PropertyOutcome]:
    """The temporal properties of a model under knobs, one verdict each. TLC names no property when one of
    several is violated, so all are checked in one run and, if that run finds a lasso, each on its own (a
    correct design costs one run). Liveness checking is TLC's costliest: always one worker. A violated
    property's lasso goes to `trace_out(property)`."""
    check_property_names(model, properties)

    def run(names: list[str]) -> CheckOutcome:
        label = names[0] if len(names) == 1 else "all properties"
        show = None if on_progress is None else lambda found: on_progress(label, found)
        out = trace_out(names[0]) if len(names) == 1 else None
        return check_model(model, knobs, invariants=None, workers=1, heap_mb=heap_mb, trace_out=out,
                           on_progress=show, properties=names)

    together = run(properties)
    if together.result.violated is None:
        return [PropertyOutcome(name, together.verdict, together) for name in properties]
    if len(properties) == 1:
        return [PropertyOutcome(properties[0], VIOLATED, together)]
    outcomes = []
    for name in properties:
        alone = run([name])
        outcomes.append(PropertyOutcome(name, alone.verdict, alone))
    return outcomes


DEPTH_BOUND: Final = "KcmDepthBound"


def _generate(work: Path, base: Model, knobs: Knobs, invariants: list[str] | None,
              properties: list[str] | None, heartbeat: bool = True,
              max_depth: int | None = None, design: DesignFolder | None = None) -> tuple[Path, Path]:
    """A model extending the base one and the chosen variant, configured with the knobs (and, with
    `max_depth`, a constraint on TLC's level: TLC checks the successors of a state that meets the constraint
    whether or not they meet it, so a bound of `level < max_depth` checks behaviours of `max_depth` steps;
    tests/test_hunt.py measures it on KAFKA-1211's 8 steps)."""
    bound = f'{DEPTH_BOUND} == TLCGet("level") < {max_depth}\n' if max_depth is not None else ""
    variant, _ = ERA_MODULES[knobs.truncation]
    own = f", {design.tla_module.stem}" if design is not None and design.tla_module is not None else ""
    module = work / f"{GENERATED}.tla"
    module.write_text(
        f"---- MODULE {GENERATED} ----\n"
        f"(* Generated by kcm check from {base.config.name}: {knobs.describe()} *)\n"
        f"EXTENDS {base.module.stem}, {variant}{own}, TLC\n{HEARTBEAT_DEFINITION}{bound}====\n"
    )
    config = work / f"{GENERATED}.cfg"
    # The heartbeat is a constraint that always holds: it prints, and prunes nothing. TLC's simulation mode
    # has no count of distinct states for it to print.
    constraints = [HEARTBEAT_OPERATOR] if heartbeat else []
    constraints += [DEPTH_BOUND] if bound else []
    config.write_text(configure(base.config.read_text(), knobs, invariants, properties,
                                None if design is None else design.hooks)
                      + "".join(f"CONSTRAINT {name}\n" for name in constraints))
    return module, config


# -- counterexamples as trace format v2 ------------------------------------------------------------------

# In the vocabulary's order: a counterexample's trace is the same file at every run.
BROKER_KEYED: Final = ("acting_controller_epoch", "alive", "broker_controller_epoch")
REPLICA_VARS: Final = ("role", "local_leader_epoch", "local_isr", "log", "hw", "hw_checkpoint", "epoch_start_offset")
NODE_VARS: Final = ("leader", "leader_epoch", "isr", "partition_controller_epoch", "partition_version")


def to_trace_state(tla: dict[str, Any]) -> dict[str, Any]:
    """A TLC state in the model's variables, with the spec's sentinels for "absent" turned into absent keys
    (see the header of spec/KafkaReplication.tla)."""
    state: dict[str, Any] = {}
    for name in ("controller", "controller_epoch"):
        if name in tla:
            state[name] = tla[name]
    _partition_nodes(tla, state)
    for name in BROKER_KEYED:
        if name in tla:
            state[name] = _by_key(tla[name])
    _replicas(tla, state)
    _machines(tla, state)
    return state


def _by_key(value: Any) -> dict[str, Any]:
    """TLC prints a function over 1..n as a sequence, over strings as a record."""
    if isinstance(value, list):
        return {str(i + 1): v for i, v in enumerate(value)}
    return {str(k): v for k, v in value.items()}


def _partition_nodes(tla: dict[str, Any], state: dict[str, Any]) -> None:
    if "assignment" in tla:
        state["assignment"] = {p: a for p, a in _by_key(tla["assignment"]).items() if a}
    if "leader_epoch" not in tla:
        return
    epochs = _by_key(tla["leader_epoch"])
    for name in NODE_VARS:
        if name in tla:
            values = _by_key(tla[name])
            state[name] = {p: (sorted(v) if name == "isr" else v) for p, v in values.items() if epochs[p] >= 0}


def _replicas(tla: dict[str, Any], state: dict[str, Any]) -> None:
    if "role" not in tla:
        return
    roles = {b: _by_key(ps) for b, ps in _by_key(tla["role"]).items()}
    for name in REPLICA_VARS:
        if name not in tla:
            continue
        out: dict[str, dict[str, Any]] = {}
        for b, partitions in _by_key(tla[name]).items():
            for p, value in _by_key(partitions).items():
                role = roles[b][p]
                if role == "absent" or (role == "none" and name in ("role", "local_leader_epoch", "local_isr")):
                    continue
                if name == "epoch_start_offset" and role != "leader":
                    continue
                if name == "local_leader_epoch" and value < 0:
                    continue
                if name == "local_isr":
                    value = sorted(value)
                out.setdefault(b, {})[p] = value
        state[name] = out


def _machines(tla: dict[str, Any], state: dict[str, Any]) -> None:
    if "partition_state" in tla:
        state["partition_state"] = {
            b: {p: s for p, s in _by_key(ps).items() if s != "NonExistentPartition"}
            for b, ps in _by_key(tla["partition_state"]).items()
        }
    if "replica_state" in tla:
        state["replica_state"] = {
            b: {p: {r: s for r, s in _by_key(rs).items() if s != "NonExistentReplica"}
                for p, rs in _by_key(ps).items()}
            for b, ps in _by_key(tla["replica_state"]).items()
        }


def diff_states(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The delta (trace format v2) that takes `old` to `new`: changed leaves, null for removed ones."""
    delta: dict[str, Any] = {}
    for name, depth in VARIABLES.items():
        if name in new or name in old:
            changed = _diff(old.get(name, {} if depth else None), new.get(name, {} if depth else None), depth)
            if changed is not _SAME:
                delta[name] = changed
    return delta


_SAME: Final = object()


def _diff(old: Any, new: Any, depth: int) -> Any:
    if depth == 0:
        return _SAME if old == new else new
    out: dict[str, Any] = {}
    for key in sorted(set(old) | set(new)):
        if depth > 1:
            # Deltas replace leaves only: an emptied inner map is its leaves set to null.
            inner = _diff(old.get(key, {}), new.get(key, {}), depth - 1)
            if inner is not _SAME:
                out[key] = inner
        elif key not in new:
            out[key] = None
        elif old.get(key) != new[key]:
            out[key] = new[key]
    return out if out else _SAME


def counterexample_events(trace: list[TraceState], knobs: Knobs, run: str) -> list[Event]:
    """A TLC counterexample as trace format v2: the first state in full, then one delta per step."""
    events = []
    previous: dict[str, Any] = {}
    for seq, step in enumerate(trace):
        state = to_trace_state(step.state)
        if seq == 0:
            brokers = sorted(int(b) for b in state.get("alive", {}))
            args: dict[str, Any] = {"knobs": knobs.to_dict(), "brokers": brokers, "source": "tlc"}
            events.append(make_event(run, 0, "env", "Init", args, state, full=True))
        else:
            action = FUSED_ACTIONS.get(step.action, step.action)
            args = {"source": "tlc", "tla_action": step.action}
            events.append(make_event(run, seq, "observer", action, args, diff_states(previous, state)))
        previous = state
    return events


def with_controllers(events: list[Event]) -> list[Event]:
    """The events with each controller's step given its controller, where the state shows it: TLC names a
    step's action, not its parameters, so the trace says `observer`. A step that writes the store names the
    controller epoch it writes in (`partition_controller_epoch`): its controller is the broker acting in that
    epoch before the step. For explaining StaleControllerFenced, which judges who wrote (`kcm check`); the
    trace file keeps `observer`, since a controller's step would also owe the transitions TLC does not list."""
    out = []
    acting: dict[str, Any] = {}
    for event in events:
        delta = event["state"]
        written = set(delta.get("partition_controller_epoch", {}).values())
        writers = sorted(b for b, epoch in acting.items() if epoch and epoch in written)
        if ACTIONS.get(event["action"]) == "controller" and len(writers) == 1:
            event = {**event, "actor": f"controller:{writers[0]}"}
        out.append(event)
        acting.update(delta.get("acting_controller_epoch", {}))
    return out


def write_trace(trace: list[TraceState], knobs: Knobs, run: str, path: Path) -> None:
    write_events(counterexample_events(trace, knobs, run), path)


def write_events(events: list[Event], path: Path) -> None:
    """The events as a trace file, published whole; any failure to write it is a TraceError naming the path."""
    try:
        with TraceWriter(path) as writer:
            for event in events:
                writer.write(event)
    except (OutputError, OSError) as err:
        reason = err.reason if isinstance(err, OutputError) else f"cannot write: {err.strerror or err}"
        raise TraceError(str(path), 0, "-", reason) from None


# Arguments a step's heading leaves out: where the step came from, said once for the whole counterexample
# (BMC's Init also names the invariant and depth it searched).
_UNSHOWN_ARGS: Final = frozenset({"source", "tla_action", "knobs", "brokers", "loop_to", "loop_action", "invariant",
                                  "depth"})


def render_counterexample(events: list[Event]) -> str:
    """Step by step: the action (TLC's action, or the actor and action of a BMC step with its arguments),
    then what the step changed: the controller, each partition's leader/epoch/ISR in the store, brokers up
    or down, each broker's role, epoch, log and HW, then any other variable, leaf by leaf. A step that
    changes no variable says so (TLC's steps that only send or drop a message). A lasso (a temporal
    property's counterexample) is marked where its loop starts and ends."""
    loop = events[-1]["args"] if events else {}
    lines = []
    previous: dict[str, Any] = {}
    state = empty_state()
    for event in events:
        apply_event(state, event)
        args = event["args"]
        action = args.get("tla_action", event["action"])
        if event["seq"] == loop.get("loop_to") and loop.get("loop_action") != STUTTERING:
            lines.append("    -- the loop starts here: the steps below repeat forever --")
        heading = f"{event['seq']:>3}. {action}"
        if event["actor"] not in ("observer", "env"):
            heading += f" ({event['actor']})"
        shown = {k: v for k, v in args.items() if k not in _UNSHOWN_ARGS}
        if shown:
            heading += " " + json.dumps(shown, sort_keys=True, separators=(", ", ": "))
        lines.append(heading)
        changes = _describe(previous, state)
        lines.extend(f"      {line}" for line in changes or [f"(no state change: {action})"])
        previous = copy.deepcopy(state)
    if loop.get("loop_action") == STUTTERING:
        lines.append(f"    -- then nothing happens any more: step {loop['loop_to']} stutters forever --")
    elif "loop_to" in loop:
        lines.append(f"    -- {loop['loop_action']} goes back to step {loop['loop_to']}: the loop repeats forever --")
    return "\n".join(lines)


# The variables `_describe` shows grouped by partition and broker; any other is shown leaf by leaf.
_GROUPED: Final = frozenset({"controller", "controller_epoch", "leader", "leader_epoch", "isr", "alive", "role",
                             "local_leader_epoch", "log", "hw"})


def _describe(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    if old.get("controller") != new.get("controller") or old.get("controller_epoch") != new.get("controller_epoch"):
        holder = new.get("controller", NO_LEADER)
        out.append(f"controller {shown_broker(holder)} (epoch {new.get('controller_epoch')})")
    for p in sorted({*old.get("leader", {}), *new.get("leader", {})}):
        now = tuple(new.get(v, {}).get(p) for v in ("leader", "leader_epoch", "isr"))
        before = tuple(old.get(v, {}).get(p) for v in ("leader", "leader_epoch", "isr"))
        if now != before:
            out.append(f"{p}: leader {shown_broker(now[0])} epoch {now[1]} ISR {now[2]}" if now[0] is not None
                       else f"{p}: gone from the store")
    for b in sorted(new.get("alive", {})):
        if old.get("alive", {}).get(b) != new["alive"][b]:
            out.append(f"broker {b} {'up' if new['alive'][b] else 'down'}")
    replicas = {(b, p) for state in (old, new) for b, ps in state.get("log", {}).items() for p in ps}
    for b, p in sorted(replicas):
        view = tuple(new.get(v, {}).get(b, {}).get(p) for v in ("role", "local_leader_epoch", "log", "hw"))
        was = tuple(old.get(v, {}).get(b, {}).get(p) for v in ("role", "local_leader_epoch", "log", "hw"))
        if view != was:
            log = " ".join(f"{e}:{r}" for e, r in view[2] or [])
            role = "stopped" if view[0] is None else f"{view[0]}@{view[1]}"
            out.append(f"broker {b} {p}: {role} log [{log}] hw {view[3]}"
                       if view[2] is not None else f"broker {b} {p}: replica gone")
    for name, value in diff_states(old, new).items():
        if name not in _GROUPED:
            out.append(f"{name}: {', '.join(f'{key} {_shown(leaf)}' for key, leaf in _leaves(value))}"
                       if isinstance(value, dict) else f"{name}: {_shown(value)}")
    return out


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A delta's leaves, each named by its keys joined with `/` (`2/t0-0` for broker 2's partition t0-0)."""
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out.extend(_leaves(value, f"{prefix}{key}/"))
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _shown(value: Any) -> str:
    if value is None:
        return "absent"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
