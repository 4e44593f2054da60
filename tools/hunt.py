"""`kcm hunt`: the fastest route to a counterexample for a design, then the shortest one.

    kcm hunt [--set KNOB=VALUE ...] [--model NAME] [--invariant NAME ...] [--budget S] [--json] [--out DIR]

The design's reproduction model (the `kcm review` row of the same knob settings, else `ci`; or `--model`)
is searched by a portfolio of engines raced in parallel processes, one per core
(kcm.conformance.explore.hunt): TLC's simulation mode from several seeds, Z3 bounded model checking where a
known bug's story applies and is shallow, TLC's breadth-first search where the cores allow. The first
counterexample wins and every other engine is stopped. Unless it is a shortest one already, it is then
shortened: TLC breadth first, bounded by the depth found (and BMC where it applies), raced the same way.
The shortest counterexample is confirmed by replay in the implementation and by TLC trace validation.

Exit 0 no counterexample within the budget (`holds`, `holds to depth K`, or `unknown`), 1 a violation (shown
all the same when its files cannot be written), 2 a bad knob, model, invariant or option, no Java or
`tla2tools.jar`, or an `--out` it cannot write (checked before the race).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kcm.conformance.check.replay import Replayer, ReplayError
from kcm.conformance.explore.hunt import BFS, BMC, SHORTEST, SIMULATE, Answer, Engine, Hunt, Race, race
from kcm.spec.atomic_output import OutputError, write_output
from kcm.spec.designs import VARIANTS
from kcm.spec.tlc.modelcheck import (
    ModelError,
    check_invariant_names,
    model_knobs,
    models,
    render_counterexample,
    write_events,
)
from kcm.spec.tlc.runner import TlcError, TlcSetupError, find_tools
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import Event, TraceError
from kcm.spec.verdicts import UNKNOWN, VIOLATED, held, holds_to_depth
from kcm.spec.vocabulary import Knobs
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED, UsageError, at_least, non_empty
from kcm.tools.outputs import default_out, out_files
from kcm.tools.progress import Reporter, add_option

DEFAULT_BUDGET: Final = 120.0
# Behaviours TLC simulates are at most this long: on the KIP-279 case (13 steps at the shortest), depth 15 found
# nothing in 40 s, depth 20 found it in 6 to 11 s, depth 30 in 10 to 32 s (docs/hunt.md).
SIMULATION_DEPTH: Final = 20
# BMC runs on a known bug of at most this depth: deeper, TLC wins (docs/hunt.md).
BMC_SHALLOW: Final = 8
# The reproduction models whose bug TLC's simulation does not find within minutes (the KIP-320 case: seeds 1-3,
# depths 16 to 30, 45 to 120 s, docs/hunt.md): a simulation beside the breadth-first search would only take its
# core, measured 14.9-15.7 s alone against 18.1 s raced.
UNSIMULATED: Final = frozenset({"kip279"})


def register(subparsers: Any) -> None:
    hunt = subparsers.add_parser("hunt", help="the fastest counterexample for a design, then the shortest")
    hunt.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                      help="a design knob, as in kcm check (repeatable)")
    hunt.add_argument("--model", type=non_empty, default=None,
                      help="the MC<name> model of spec/ to search (default: the kcm review row's for the knobs, "
                           "else ci)")
    hunt.add_argument("--invariant", dest="invariants", action="append", default=[], metavar="NAME",
                      help="hunt only this invariant (repeatable; default: the model's)")
    hunt.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                      help=f"seconds each phase (search, shortening) may take (default {DEFAULT_BUDGET:g})")
    hunt.add_argument("--cores", type=at_least(1), default=os.cpu_count() or 1,
                      help="engines raced at once (default: the machine's cores)")
    hunt.add_argument("--out", metavar="DIR", help=f"where the traces go (default {default_out('hunt')})")
    hunt.add_argument("--json", action="store_true")
    add_option(hunt)
    # Replay copies a simulated cluster per reading of a step, which compiled objects refuse (as kcm replay).
    hunt.set_defaults(handler=cmd_hunt, needs_sources=True)


def model_for(knobs: Knobs) -> str:
    """The review row's model for these knob settings (the smallest that shows the design), else `ci`."""
    return next((v.model for v in VARIANTS if v.knobs == knobs), "ci")


def portfolio(hunt: Hunt, cores: int) -> list[Engine]:
    """The engines of the first race, one per core. On a shallow known bug, BMC alone (on two loaded cores a
    TLC beside it slows it more than it adds); otherwise the breadth-first search (the only engine that finds
    the KIP-320 case within minutes, and the one that proves a correct design), then TLC simulations from
    distinct seeds, except on a known bug no simulation finds (UNSIMULATED). docs/hunt.md has the
    measurements."""
    bug = hunt.known_bug()
    # BMC's answer must be a behaviour of the specification: a review cell or a hunt reports it as one.
    shallow = bug is not None and bug.depth <= BMC_SHALLOW and not bug.not_a_behaviour
    unsimulated = bug is not None and hunt.model in UNSIMULATED
    simulations = max(cores - 2, 0) if shallow else 0 if unsimulated else cores - 1
    return [Engine(BMC if shallow else BFS),
            *(Engine(SIMULATE, seed, SIMULATION_DEPTH) for seed in range(1, simulations + 1))]


@dataclass
class HuntResult:
    """The race for a first counterexample, and the shortest one: from a breadth-first engine of that race
    kept running, or from a second race bounded by the depth found (`shortening`), or the first itself."""

    first: Race
    shortest: Answer | None  # None: the shortening gave up (its budget ran out, or it failed)
    seconds_to_shortest: float  # to the shortest, or until the shortening gave up
    shortening: Race | None = None


def hunt_races(hunt: Hunt, cores: int, budget: float, on_progress: Callable[[str], None] | None = None) -> HuntResult:
    """The race for a first counterexample, then its shortest: the first itself (BFS, BMC), or the race's
    breadth-first search kept running, or (a race without one) a race of TLC breadth first bounded by the
    depth found. Each race has the budget. `kcm review` and `kcm verify` take their unsafe rows this way."""
    engines = portfolio(hunt, cores)

    def show(phase: str) -> Callable[[str], None] | None:
        return None if on_progress is None else lambda text: on_progress(f"{phase}: {text}")

    first = race(hunt, engines, budget, show(f"hunt {hunt.model}"), keep_shortest=True)
    found = first.winner
    if found is None or found.invariant is None or found.engine.kind in SHORTEST:
        return HuntResult(first, found, first.seconds)
    if any(engine.kind in SHORTEST for engine in engines):
        # The race's own breadth-first search, kept running: its shortest, or the budget ran out on it.
        return HuntResult(first, first.shortest, first.seconds_to_shortest)
    again = race(hunt, [Engine(BFS, depth=found.steps)], budget, show(f"shorten {found.steps} steps"))
    best = again.winner if again.winner is not None and again.winner.invariant else None
    return HuntResult(first, best, first.seconds + again.seconds, again)


@dataclass
class Confirmation:
    replay: str
    tlc: str

    def to_json(self) -> dict[str, str]:
        return {"replay": self.replay, "tlc_validation": self.tlc}


def confirm(answer: Answer) -> Confirmation:
    """Replay in the implementation, and TLC trace validation against the specification for a trace TLC did
    not find itself (a TLC counterexample is one of the specification's behaviours by construction, and its
    steps carry TLC's action names, not the arguments trace validation matches)."""
    try:
        report = Replayer(answer.events, answer.invariant).run()
        divergence = report.divergence
        replay = (f"the implementation follows all {report.steps} steps and breaks {answer.invariant}"
                  if report.verdict == "same-invariant" else
                  f"not confirmed: {report.verdict}" + (f" at seq {divergence.seq} ({divergence.action})"
                                                         if divergence is not None else ""))
    except ReplayError as err:
        replay = f"not replayed: {err}"
    if answer.engine.kind != BMC:
        return Confirmation(replay, "a behaviour of the TLA+ model by construction (TLC found it)")
    try:
        check = validate_with_tlc(answer.events)
        tlc = (f"the specification explains all {check.events} events" if check.accepted
               else f"not confirmed: event {check.matched} is explained by no behaviour")
    except (ValueError, TlcError, TlcSetupError) as err:
        tlc = f"not validated: {err}"
    return Confirmation(replay, tlc)


def cmd_hunt(args: argparse.Namespace) -> int:
    hunt = _hunt(args)
    # Every engine but BMC runs TLC, and BMC's answer is validated by it: both before the race, as the outputs.
    try:
        find_tools()
    except TlcSetupError as err:
        raise UsageError(str(err)) from err
    out = out_files(args.out, "hunt", [_name(hunt, kind) for kind in _OUTPUTS])
    with Reporter(args.progress) as reporter, reporter.task(f"hunt {hunt.model}") as task:
        result = hunt_races(hunt, args.cores, args.budget, task.update)
    return _report(args, hunt, out, result)


_OUTPUTS: Final = ("first.jsonl", "shortest.jsonl", "summary.json")


def _name(hunt: Hunt, kind: str) -> str:
    return f"{hunt.model}-{kind}"


def _hunt(args: argparse.Namespace) -> Hunt:
    if not args.budget > 0:
        raise UsageError(f"--budget must be a positive number of seconds, not {args.budget:g}")
    knobs = Knobs().with_settings(args.settings)
    model = args.model or model_for(knobs)
    if model not in models():
        raise UsageError(f"--model {model}: unknown model (known: {', '.join(sorted(models()))})")
    try:
        check_invariant_names(args.invariants)
    except ModelError as err:
        raise UsageError(f"--invariant: {err}") from err
    # The model's own settings (its bounds' era) under the ones given.
    knobs = model_knobs(model).with_settings(args.settings)
    return Hunt(model, knobs, tuple(args.invariants) if args.invariants else None)


def _report(args: argparse.Namespace, hunt: Hunt, out: Path, result: HuntResult) -> int:
    first = result.first
    found = first.winner
    failures = [fate for fate in first.fates.values() if fate.startswith("failed: ")]
    if found is None and first.fates and len(failures) == len(first.fates):
        raise UsageError(f"every engine failed; the first: {failures[0].removeprefix('failed: ')}")
    summary: dict[str, Any] = {"model": hunt.model, "knobs": hunt.knobs.to_dict(),
                               "engines": first.fates, "seconds_to_first": round(first.seconds, 2)}
    if found is None or found.invariant is None:
        summary["result"] = _no_counterexample(found)
        print(json.dumps(summary, indent=2) if args.json else
              f"hunt {hunt.model} ({hunt.knobs.describe()}): no counterexample within the budget: "
              f"{summary['result']} ({first.seconds:.1f} s; {_fates(first)})")
        return EXIT_OK
    best = result.shortest or found
    proven = best.engine.kind in SHORTEST
    first_path, best_path, summary_path = (out / _name(hunt, kind) for kind in _OUTPUTS)
    # The counterexamples are printed whatever becomes of their files (a disk full since the start).
    unwritten = [reason for events, path in ((found.events, first_path), (best.events, best_path))
                 if (reason := _write(events, path)) is not None]
    confirmation = confirm(best)
    # Without a shortest, the time the shortening took before it gave up.
    to_shortest = result.seconds_to_shortest
    summary.update(result=VIOLATED, invariant=found.invariant, winner=found.engine.name,
                   first_steps=found.steps, shortest_steps=best.steps, shortest_engine=best.engine.name,
                   shortest_proven=proven, seconds_to_shortest=round(to_shortest, 2) if proven else None,
                   shortening_engines=result.shortening.fates if result.shortening else {},
                   first_trace=str(first_path), trace=str(best_path), **confirmation.to_json())
    if unwritten:
        summary.update(not_written=unwritten, counterexample=best.events)
    try:
        write_output(summary_path, json.dumps(summary, indent=2) + "\n")
    except OutputError as err:
        unwritten.append(str(err))
        summary.update(not_written=unwritten, counterexample=best.events)
    if args.json:
        print(json.dumps(summary, indent=2))
        for reason in unwritten:
            print(f"kcm: not written: {reason}", file=sys.stderr)
        return EXIT_VIOLATED
    print(f"hunt {hunt.model} ({hunt.knobs.describe()}): violated {best.invariant}")
    print(f"  first: {found.engine.name} after {first.seconds:.1f} s, {found.steps} steps ({_fates(first)})")
    if proven:
        print(f"  shortest: {best.steps} steps by {best.engine.name}, after {to_shortest:.1f} s in all")
    else:
        print(f"  no shortest: the shortening gave up after {to_shortest:.1f} s in all; the first is shown")
    print(f"  replay: {confirmation.replay}")
    print(f"  TLC trace validation: {confirmation.tlc}")
    print(render_counterexample(best.events))
    if unwritten:
        print("not written: " + "; ".join(unwritten))
    else:
        print(f"counterexamples written to {first_path} and {best_path} (trace format v2)")
    return EXIT_VIOLATED


def _write(events: list[Event], path: Path) -> str | None:
    """Writes a counterexample; None, or why it could not be written."""
    try:
        write_events(events, path)
    except TraceError as err:
        return str(err)
    return None


def _no_counterexample(answer: Answer | None) -> str:
    if answer is None or not answer.exhaustive:
        return UNKNOWN
    return held(answer.states) if answer.bound is None else holds_to_depth(answer.bound)


def _fates(outcome: Race) -> str:
    return "; ".join(f"{name}: {fate}" for name, fate in outcome.fates.items())
