"""`kcm prove`: the Z3 engine on the command line.

    kcm prove [--json]                  universal proofs and induction steps, as a table
    kcm prove --only data [--full]      the data proof (NoCommittedDataLoss, ReplicaLogsAgree,
                                        HighWatermarkMonotonic over unbounded logs), one row per obligation,
                                        up to the first counterexample to induction (--full: every one)
    kcm prove --bmc K [--set ...]       bounded model checking up to depth K; a counterexample is written
                                        as a trace (format v2)

Results read `holds` (proved for every input, or inductive), `violated` (Z3's model is printed), `unknown`;
a bounded search that finds nothing `holds to depth K` (docs/verdicts.md).
Exit codes: 0 all hold, 1 a property is violated, 2 a usage error or a result z3 could not decide.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kcm.conformance.ci_results import property_cases
from kcm.conformance.verify.z3 import data_rows, induction_rows, proof_rows
from kcm.spec.atomic_output import OutputError
from kcm.spec.trace.format import TraceError, TraceWriter
from kcm.spec.verdicts import HOLDS, VIOLATED, holds_to_depth, passed, severity, worst
from kcm.spec.vocabulary import KNOB_NAMES, Knobs
from kcm.tools.ci_option import add_junit_option, check_junit, publish
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, UsageError
from kcm.tools.outputs import default_out, out_file
from kcm.tools.progress import Reporter, add_option

DEFAULT_OUT = default_out("prove", "bmc-counterexample.jsonl")


def register(subparsers: Any) -> None:
    prove = subparsers.add_parser("prove", help="Z3: universal proofs, induction, bounded model checking")
    prove.add_argument("--json", action="store_true", help="a JSON list of {property, result, seconds, ...}")
    prove.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                       help=f"design knob: {', '.join(KNOB_NAMES)}")
    prove.add_argument("--brokers", type=int, default=None,
                       help="brokers (default: 8 for the universal proofs, 3 for induction and --bmc)")
    prove.add_argument("--only", choices=("proofs", "induction", "data"), action="append",
                       help="run only the universal proofs, the induction or the data proof (repeatable)")
    prove.add_argument("--full", action="store_true",
                       help="with --only data: every obligation, also after a counterexample to induction")
    prove.add_argument("--bmc", type=int, metavar="K", help="bounded model checking up to depth K instead")
    prove.add_argument("--invariant", action="append", metavar="NAME",
                       help="only this invariant: the one --bmc looks for, or the induction proves (repeatable)")
    prove.add_argument("--capacity", type=int, default=2, help="with --bmc: log capacity (records per replica)")
    prove.add_argument("--actions", metavar="A,B,...",
                       help="with --bmc: only these actions, as a reproduction model of spec/ restricts its Next")
    prove.add_argument("--controller", type=int, default=1, metavar="B",
                       help="with --bmc: the broker that controls the bootstrapped cluster (default 1, the leader)")
    prove.add_argument("--out", default=None,
                       help=f"with --bmc: counterexample trace; a folder: {DEFAULT_OUT.name} in it (default "
                            f"{DEFAULT_OUT})")
    add_option(prove)
    add_junit_option(prove, "property or obligation (not with --bmc)")
    prove.set_defaults(handler=cmd_prove)



# -- kcm prove -------------------------------------------------------------------------------------------


def cmd_prove(args: argparse.Namespace) -> int:
    knobs = Knobs().with_settings(args.settings)
    if args.brokers is not None and args.brokers < 2:
        raise UsageError("--brokers must be at least 2")
    if args.bmc is not None:
        return _bmc(args, knobs)
    check_junit(args)
    parts = args.only or ["proofs", "induction"]
    targets = _induction_targets(args.invariant)
    if args.invariant and "induction" not in parts:
        raise UsageError("--invariant goes with --bmc or the induction")
    rows: list[dict[str, Any]] = []
    with Reporter(args.progress) as reporter:
        if "proofs" in parts:
            rows += proof_rows(reporter, args.brokers or 8, knobs)
        if "induction" in parts:
            rows += induction_rows(reporter, args.brokers or 3, knobs, targets)
        if "data" in parts:
            rows += data_rows(reporter, args.brokers or 3, knobs, args.full)
    _print_rows(rows, args.json, f"kcm prove ({knobs.describe()})")
    summary = "\n".join([f"### kcm prove ({knobs.describe()})", "", "| property | result | seconds |", "|---|---|---|",
                          *[f"| {r['property']} | {r['result']} | {r['seconds']:.2f} |" for r in rows]])
    publish(args, "kcm prove", property_cases("kcm prove", rows), summary)
    return _exit_code(rows)


def _induction_targets(names: list[str] | None) -> tuple[str, ...]:
    from kcm.spec.z3.induction import TARGETS

    if not names:
        return TARGETS
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise UsageError(f"the induction does not cover {unknown[0]!r} (it covers: {', '.join(TARGETS)})")
    return tuple(names)


def _exit_code(rows: list[dict[str, Any]]) -> int:
    return (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(worst([row["result"] for row in rows]))]


def _print_rows(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
    table = Table(title=title, title_justify="left")
    table.add_column("property")
    table.add_column("result")
    table.add_column("seconds", justify="right")
    table.add_column("detail")
    for row in rows:
        colour = {HOLDS: "green", VIOLATED: "red"}.get(row["result"], "yellow")
        table.add_row(row["property"], f"[{colour}]{row['result']}[/{colour}]", f"{row['seconds']:.3f}",
                      row.get("detail", ""))
    console.print(table)
    for row in rows:
        if not passed(row["result"]) and "model" in row:
            console.print(f"[red]{row['property']}[/red]: {row['result']}; counterexample:")
            console.print(json.dumps(row["model"], indent=2, sort_keys=True), markup=False)


def _bmc_actions(listed: str | None) -> list[str] | None:
    from kcm.spec.z3.actions import MODEL_ACTIONS

    if listed is None:
        return None
    names = [name.strip() for name in listed.split(",") if name.strip()]
    unknown = [name for name in names if name not in MODEL_ACTIONS]
    if unknown or not names:
        raise UsageError(f"--actions: {unknown[0] if unknown else 'nothing'!r} is not an action of the Z3 model "
                     f"(known: {', '.join(MODEL_ACTIONS)})")
    return names


def _bmc(args: argparse.Namespace, knobs: Knobs) -> int:
    from kcm.spec.z3.bmc import check_bmc_bounds, run_bmc

    if args.bmc < 1:
        raise UsageError("--bmc needs a depth of at least 1")
    if args.only:
        raise UsageError("--only does not go with --bmc")
    # Bad arguments are one line of error, before any progress is shown.
    actions = _bmc_actions(args.actions)
    check_bmc_bounds(args.invariant or (), args.bmc, args.brokers or 3, args.capacity, args.controller)
    out = out_file(args.out, "prove", DEFAULT_OUT.name)
    with Reporter(args.progress) as reporter, reporter.task("z3 bmc depth", args.bmc) as task:
        result = run_bmc(knobs, args.bmc, brokers=args.brokers or 3, capacity=args.capacity,
                         invariants=args.invariant, actions=actions, controller=args.controller,
                         on_depth=lambda depth, seconds: task.update(f"depth {depth}: {seconds:.1f} s",
                                                                     completed=depth))
    name = ", ".join(args.invariant) if args.invariant else "all invariants"
    row: dict[str, Any] = {
        "property": f"bmc: {name} up to depth {args.bmc} ({knobs.describe()})",
        "result": VIOLATED if result.found else holds_to_depth(args.bmc),
        "seconds": round(result.seconds, 3),
        "group": "bmc",
        "depth": result.depth,
        "brokers": result.brokers,
        "per_depth_seconds": [round(s, 3) for s in result.per_depth],
    }
    if result.found:
        from kcm.conformance.check.invariants import explanation
        from kcm.spec.tlc.modelcheck import render_counterexample

        unwritten = _write(result.events, out)
        row.update(invariant=result.invariant, trace=None if unwritten else str(out), steps=len(result.events) - 1)
        if unwritten:
            row.update(trace_not_written=unwritten, counterexample=result.events)
    if args.json:
        print(json.dumps([row], indent=2))
        if row.get("trace_not_written"):
            print(f"kcm: the counterexample (in the JSON above) was not written: {row['trace_not_written']}",
                  file=sys.stderr)
    elif result.found:
        where = f"not written: {row['trace_not_written']}" if row.get("trace_not_written") else f"written to {out}"
        print(f"{result.invariant} violated at depth {result.depth} ({knobs.describe()}); "
              f"shortest counterexample {where} ({result.seconds:.1f} s)")
        print(render_counterexample(result.events))
        print("\n".join(explanation(result.events, str(result.invariant))))
    else:
        print(f"no counterexample to {name} up to depth {args.bmc} with {result.brokers} brokers "
              f"({knobs.describe()}; {result.seconds:.1f} s)")
    return EXIT_VIOLATED if result.found else EXIT_OK


def _write(events: list[dict[str, Any]], out: Path) -> str | None:
    """Writes BMC's counterexample, checked as it goes; None, or why it could not be written (the command
    still shows it: a violation found is not lost to its file)."""
    try:
        with TraceWriter(out, validate=True) as writer:
            for event in events:
                writer.write(event)
    except (TraceError, OutputError) as err:
        return str(err)
    except OSError as err:
        return f"{out}: cannot write: {err.strerror or err}"
    return None
