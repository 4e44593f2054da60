"""`kcm hunt`: the fastest route to a counterexample for a design, then the shortest one.

    kcm hunt [--set KNOB=VALUE ...] [--model NAME] [--invariant NAME ...] [--budget S] [--json] [--out DIR]

The design's reproduction model (the `kcm review` row of the same knob settings, else `ci`; or `--model`)
is searched by kcm.conformance.explore.route: a portfolio of engines raced in parallel processes, one per
core (TLC's simulation mode from several seeds, Z3 bounded model checking where a known bug's story applies
and is shallow, TLC's breadth-first search where the cores allow). The first counterexample wins and every
other engine is stopped. Unless it is a shortest one already, it is then shortened: TLC breadth first,
bounded by the depth found (and BMC where it applies), raced the same way. The shortest counterexample is
confirmed by replay in the implementation and by TLC trace validation. This module parses the arguments,
writes the traces and the summary, and prints them.

Exit 0 no counterexample within the budget (`holds`, `holds to depth K`, or `unknown`), 1 a violation (shown
all the same when its files cannot be written), 2 a bad knob, model, invariant or option, no Java or
`tla2tools.jar`, or an `--out` it cannot write (checked before the race).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Final

from kcm.conformance.explore.hunt import SHORTEST, Hunt, Race
from kcm.conformance.explore.route import HuntResult, confirm, hunt_races, model_for, no_counterexample, shorten
from kcm.spec.atomic_output import OutputError, write_output
from kcm.spec.tlc.modelcheck import (
    render_counterexample,
    write_events,
)
from kcm.spec.tlc.runner import TlcSetupError, find_tools
from kcm.spec.trace.format import Event, TraceError
from kcm.spec.verdicts import VIOLATED
from kcm.tools.design_option import add_design_option, described
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED, UsageError, at_least, non_empty
from kcm.tools.outputs import default_out, out_files
from kcm.tools.progress import Reporter, add_option
from kcm.tools.swarm import HUNT_KINDS, add_swarm_options, hunted, start_swarm

DEFAULT_BUDGET: Final = 120.0


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
    hunt.add_argument("--spark", action="store_true",
                      help="the first race as a swarm of seeds on Spark (TLC simulations, and the steered simulator "
                           "where the design has a steered search) instead of one engine per core")
    hunt.add_argument("--seeds", type=at_least(1), default=None,
                      help="seeds of the --spark swarm (default: four per task slot)")
    add_swarm_options(hunt, hunt=True)
    hunt.add_argument("--out", metavar="DIR", help=f"where the traces go (default {default_out('hunt')})")
    hunt.add_argument("--json", action="store_true")
    add_design_option(hunt, "its first model by default, TLC's engines only (Z3 reads no design of one's own)")
    add_option(hunt)
    # Replay copies a simulated cluster per reading of a step, which compiled objects refuse (as kcm replay).
    hunt.set_defaults(handler=cmd_hunt, needs_sources=True)


def cmd_hunt(args: argparse.Namespace) -> int:
    hunt = _hunt(args)
    # Every engine but BMC runs TLC, and BMC's answer is validated by it: both before the race, as the outputs.
    try:
        find_tools()
    except TlcSetupError as err:
        raise UsageError(str(err)) from err
    out = out_files(args.out, "hunt", [_name(hunt, kind) for kind in _OUTPUTS])
    if args.spark:
        if args.ledger is None:
            args.ledger = str(out / f"{hunt.model}-seeds.jsonl")
        swarm = start_swarm(args, hunt, "hunt", args.seeds or 4 * _slots(args.master), args.budget,
                            kinds=HUNT_KINDS)
        with Reporter(args.progress) as reporter, reporter.task(f"shorten {hunt.model}") as task:
            result = shorten(hunt, swarm.race(), args.budget, task.update)
        return _report(args, hunt, out, result)
    with Reporter(args.progress) as reporter, reporter.task(f"hunt {hunt.model}") as task:
        result = hunt_races(hunt, args.cores, args.budget, task.update)
    return _report(args, hunt, out, result)


def _slots(master: str | None) -> int:
    """A local master's task slots (the machine's cores for local[*]); a cluster's, not known before it runs, as
    two."""
    master = master or "local[*]"
    inside = master.removeprefix("local[").removesuffix("]")
    if master.startswith("local[") and inside.isdigit():
        return int(inside)
    return (os.cpu_count() or 1) if master.startswith("local") else 2


_OUTPUTS: Final = ("first.jsonl", "shortest.jsonl", "summary.json")


def _name(hunt: Hunt, kind: str) -> str:
    return f"{hunt.model}-{kind}"


def _hunt(args: argparse.Namespace) -> Hunt:
    if not args.budget > 0:
        raise UsageError(f"--budget must be a positive number of seconds, not {args.budget:g}")
    return hunted(args, model_for)


def _report(args: argparse.Namespace, hunt: Hunt, out: Path, result: HuntResult) -> int:
    first = result.first
    found = first.winner
    failures = [fate for fate in first.fates.values() if fate.startswith("failed: ")]
    if found is None and first.fates and len(failures) == len(first.fates):
        raise UsageError(f"every engine failed; the first: {failures[0].removeprefix('failed: ')}")
    summary: dict[str, Any] = {"model": hunt.model, "knobs": hunt.knobs.to_dict(),
                               "engines": first.fates, "seconds_to_first": round(first.seconds, 2)}
    if found is None or found.invariant is None:
        summary["result"] = no_counterexample(found)
        print(json.dumps(summary, indent=2) if args.json else
              f"hunt {hunt.model} ({described(hunt.knobs, hunt.design)}): no counterexample within the budget: "
              f"{summary['result']} ({first.seconds:.1f} s; {_fates(first)})")
        return EXIT_OK
    best = result.shortest or found
    proven = best.engine.kind in SHORTEST
    first_path, best_path, summary_path = (out / _name(hunt, kind) for kind in _OUTPUTS)
    # The counterexamples are printed whatever becomes of their files (a disk full since the start).
    unwritten = [reason for events, path in ((found.events, first_path), (best.events, best_path))
                 if (reason := _write(events, path)) is not None]
    confirmation = confirm(best, hunt.design)
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
    print(f"hunt {hunt.model} ({described(hunt.knobs, hunt.design)}): violated {best.invariant}")
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


def _fates(outcome: Race) -> str:
    return "; ".join(f"{name}: {fate}" for name, fate in outcome.fates.items())
