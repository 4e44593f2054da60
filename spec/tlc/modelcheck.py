"""`kcm check`: model-check a TLA+ instance of spec/ under chosen knobs with TLC.

A model is a `MC<name>.cfg` of spec/ with its module: `MC<name>.tla`, or for a configuration that varies
another model, the module of that model (`MCzombiefixed.cfg` runs `MCzombie.tla`). Knob settings are
applied by generating, in a temporary folder, a module extending the model and the chosen truncation
variant, with the model's configuration plus the bindings of the knob constants and the era hooks
(spec/tlc/config.py); TLC's state files go to another temporary folder, removed afterwards.
A counterexample is converted to trace format v2 (`kcm check-trace` and `kcm replay` read it).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from kcm.spec.tlc.config import configure, knob_settings
from kcm.spec.tlc.runner import HEARTBEAT_DEFINITION, HEARTBEAT_OPERATOR, TlcProgress, TlcResult, TraceState, run_tlc
from kcm.spec.trace.format import TraceWriter, make_event
from kcm.spec.vocabulary import (
    ERA_MODULES,
    HW_ACROSS_LEADERS,
    HW_PER_LEADER,
    INVARIANTS,
    NO_LEADER,
    VARIABLES,
    Knobs,
    shown_broker,
)

# The two readings of HighWatermarkMonotonic are separate operators in TLA+.
TLA_READINGS: Final = {
    "HighWatermarkMonotonicPerLeaderEpoch": HW_PER_LEADER,
    "HighWatermarkMonotonicAcrossLeaders": HW_ACROSS_LEADERS,
}


def vocabulary_name(tla_name: str) -> str:
    """An invariant as kcm names it everywhere (a reading after a slash), from its TLA+ operator name."""
    return TLA_READINGS.get(tla_name, tla_name)


GENERATED: Final = "MCkcm"
# Spec actions that fuse several protocol steps (to keep reproductions small), by the step they end with.
FUSED_ACTIONS: Final = {"FetchRound": "FetchResponse", "TruncationRound": "OffsetsForLeaderEpochResponse"}


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

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "result": "holds" if self.result.violated is None else "violated",
            "invariant": None if self.result.violated is None else vocabulary_name(self.result.violated),
            "distinct_states": self.result.distinct_states,
            "depth": self.result.depth,
            "seconds": round(self.result.seconds, 2),
            "trace": str(self.trace_path) if self.trace_path else None,
            "trace_length": len(self.result.trace) if self.result.trace else None,
            "knobs": self.knobs.to_dict(),
        }


def model_knobs(model: str) -> Knobs:
    """The knob settings a model's configuration makes: the defaults of `kcm check --model NAME`."""
    return knob_settings(_model(model).config.read_text())


def check_model(
    model: str,
    knobs: Knobs,
    invariants: list[str] | None = None,
    workers: int = 1,
    heap_mb: int | None = None,
    trace_out: Path | None = None,
    on_progress: Callable[[TlcProgress], None] | None = None,
    budget_seconds: float | None = None,
) -> CheckOutcome:
    """TLC on a model under knobs (and, optionally, only some invariants), with TLC's heap bounded
    (`heap_mb`, default KCM_TLC_HEAP_MB or 4 GiB) and, optionally, its time."""
    base = _model(model)
    for name in invariants or []:
        if name not in (*INVARIANTS, *TLA_READINGS, "TypeOK"):
            raise ModelError(f"unknown invariant {name!r} (known: TypeOK, {', '.join(INVARIANTS)})")
    with tempfile.TemporaryDirectory(prefix="kcm-model-") as folder:
        work = Path(folder)
        for source in spec_dir().glob("*.tla"):
            shutil.copy(source, work / source.name)
        module, config = _generate(work, base, knobs, invariants)
        # Bounded models end where their bounds do: a state without successors is not an error here.
        result = run_tlc(module, config, workers=workers, heap_mb=heap_mb, on_progress=on_progress,
                         extra_args=("-deadlock",), budget_seconds=budget_seconds)
    trace_path = None
    if result.violated is not None and result.trace:
        trace_path = trace_out or Path(f"kcm-{model}-counterexample.jsonl")
        write_trace(result.trace, knobs, f"tlc-{model}", trace_path)
    return CheckOutcome(model, knobs, result, trace_path)


def _generate(work: Path, base: Model, knobs: Knobs, invariants: list[str] | None) -> tuple[Path, Path]:
    """A model extending the base one and the chosen variant, configured with the knobs."""
    variant, _ = ERA_MODULES[knobs.truncation]
    module = work / f"{GENERATED}.tla"
    module.write_text(
        f"---- MODULE {GENERATED} ----\n"
        f"(* Generated by kcm check from {base.config.name}: {knobs.describe()} *)\n"
        f"EXTENDS {base.module.stem}, {variant}, TLC\n{HEARTBEAT_DEFINITION}====\n"
    )
    config = work / f"{GENERATED}.cfg"
    # The heartbeat is a constraint that always holds: it prints, and prunes nothing.
    config.write_text(configure(base.config.read_text(), knobs, invariants) + f"CONSTRAINT {HEARTBEAT_OPERATOR}\n")
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


def write_trace(trace: list[TraceState], knobs: Knobs, run: str, path: Path) -> None:
    """A TLC counterexample as trace format v2: the first state in full, then one delta per step."""
    previous: dict[str, Any] = {}
    with TraceWriter(path) as writer:
        for seq, step in enumerate(trace):
            state = to_trace_state(step.state)
            if seq == 0:
                brokers = sorted(int(b) for b in state.get("alive", {}))
                args: dict[str, Any] = {"knobs": knobs.to_dict(), "brokers": brokers, "source": "tlc"}
                writer.write(make_event(run, 0, "env", "Init", args, state, full=True))
            else:
                action = FUSED_ACTIONS.get(step.action, step.action)
                args = {"source": "tlc", "tla_action": step.action}
                writer.write(make_event(run, seq, "observer", action, args, diff_states(previous, state)))
            previous = state


def render_counterexample(trace: list[TraceState]) -> str:
    """Step by step: the action, then for each partition the store's leader/epoch/ISR and each broker's
    role, epoch, log and HW, only where they changed."""
    lines = []
    previous: dict[str, Any] = {}
    for step in trace:
        state = to_trace_state(step.state)
        lines.append(f"{step.index:>3}. {step.action}")
        lines.extend(f"      {line}" for line in _describe(previous, state))
        previous = state
    return "\n".join(lines)


def _describe(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    if old.get("controller") != new.get("controller") or old.get("controller_epoch") != new.get("controller_epoch"):
        holder = new.get("controller", NO_LEADER)
        out.append(f"controller {shown_broker(holder)} (epoch {new.get('controller_epoch')})")
    for p in sorted(new.get("leader", {})):
        now = (new["leader"].get(p), new.get("leader_epoch", {}).get(p), new.get("isr", {}).get(p))
        before = (old.get("leader", {}).get(p), old.get("leader_epoch", {}).get(p), old.get("isr", {}).get(p))
        if now != before:
            out.append(f"{p}: leader {shown_broker(now[0])} epoch {now[1]} ISR {now[2]}")
    for b in sorted(new.get("alive", {})):
        if old.get("alive", {}).get(b) != new["alive"][b]:
            out.append(f"broker {b} {'up' if new['alive'][b] else 'down'}")
    for b, partitions in sorted(new.get("log", {}).items()):
        for p in sorted(partitions):
            view = tuple(new.get(v, {}).get(b, {}).get(p) for v in ("role", "local_leader_epoch", "log", "hw"))
            was = tuple(old.get(v, {}).get(b, {}).get(p) for v in ("role", "local_leader_epoch", "log", "hw"))
            if view != was:
                log = " ".join(f"{e}:{r}" for e, r in view[2])
                out.append(f"broker {b} {p}: {view[0] or 'stopped'}@{view[1]} log [{log}] hw {view[3]}")
    return out
