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
import time
from pathlib import Path
from typing import Any

from kcm.spec.atomic_output import check_writable
from kcm.spec.trace.format import TraceError, TraceWriter
from kcm.spec.verdicts import HOLDS, UNKNOWN, VIOLATED, holds_to_depth, passed, severity, worst
from kcm.spec.vocabulary import KNOB_NAMES, Knobs
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, UsageError
from kcm.tools.outputs import default_out
from kcm.tools.progress import Reporter, add_option
from kcm.tools.stages import StageRow, VerifyContext

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
    prove.add_argument("--out", default=str(DEFAULT_OUT),
                       help=f"with --bmc: counterexample trace (default {DEFAULT_OUT})")
    add_option(prove)
    prove.set_defaults(handler=cmd_prove)



# -- kcm prove -------------------------------------------------------------------------------------------


def cmd_prove(args: argparse.Namespace) -> int:
    knobs = Knobs().with_settings(args.settings)
    if args.brokers is not None and args.brokers < 2:
        raise UsageError("--brokers must be at least 2")
    if args.bmc is not None:
        return _bmc(args, knobs)
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
    return _exit_code(rows)


def proof_rows(reporter: Reporter, brokers: int, knobs: Knobs) -> list[dict[str, Any]]:
    """The universal proofs, one row each, with a progress task over the obligations."""
    from kcm.conformance.check.tables import implementation_rules
    from kcm.spec.z3.proofs import discharge, obligations

    todo = obligations(brokers, knobs, implementation_rules())
    rows = []
    with reporter.task(f"z3 universal proofs ({brokers} brokers)", len(todo)) as task:
        for obligation in todo:
            result = discharge(obligation)
            task.advance(detail=f"{result.property}: {result.result}")
            rows.append(result.to_json())
    return rows


def induction_rows(reporter: Reporter, brokers: int, knobs: Knobs,
                   targets: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The induction, one row per obligation (IndInit, IndNext, IndProp) of each invariant."""
    from kcm.spec.z3.induction import TARGETS, InductionResult, run_induction

    chosen = targets or TARGETS
    with reporter.task(f"z3 induction ({brokers} brokers)", len(chosen)) as task:

        def done(result: InductionResult) -> None:
            task.advance(detail=f"{result.invariant}: {worst([step.result for step in result.steps])}")

        results = run_induction(brokers, knobs, targets=chosen, on_result=done)
    rows = []
    for result in results:
        note = "inductive alone" if result.alone else "strengthened with " + ", ".join(result.strengthening)
        for step in result.steps:
            row: dict[str, Any] = {"property": f"{result.invariant}: {step.step}", "result": step.result,
                                   "seconds": round(step.seconds, 4), "group": "induction", "detail": note}
            if step.cti is not None:
                row["model"] = step.cti
            if step.step == "IndNext" and not result.alone and result.alone_cti is not None:
                row["alone_cti"] = result.alone_cti
            rows.append(row)
    return rows


def data_rows(reporter: Reporter, brokers: int, knobs: Knobs, full: bool = False) -> list[dict[str, Any]]:
    """The data proof (docs/z3.md, "The data proof"), one row per obligation: IndInit, IndNext per action,
    Implied per implied lemma, IndProp per data invariant, for the design the knob truncation names.  A
    counterexample to induction settles that the invariant is not proved, so the rest runs only with `full`:
    on an unsafe design a lemma that breaks without a small counterexample uses up every attempt."""
    from kcm.spec.z3.data import DataProof

    proof = DataProof(brokers, knobs.truncation)
    todo = list(proof.obligations())
    rows: list[dict[str, Any]] = []
    with reporter.task(f"z3 data proof ({brokers} brokers, truncation={knobs.truncation})", len(todo)) as task:
        for obligation in todo:
            result = obligation()
            task.advance(detail=f"{result.name}: {result.result}")
            rows.append(result.to_json())
            if result.result == VIOLATED and not full:
                left = len(todo) - len(rows)
                if left:
                    rows[-1]["detail"] += f"; the {left} obligations after it not run (--full runs them)"
                break
    return rows


def verify_stage(ctx: VerifyContext) -> list[StageRow]:
    """The Z3 rows of `kcm verify`: the universal proofs and the induction, one summary row each, timed whole
    (the induction's search for strengthening lemmas included)."""
    started = time.perf_counter()
    proofs = proof_rows(ctx.reporter, 8, ctx.knobs)
    proved = time.perf_counter()
    steps = induction_rows(ctx.reporter, 3, ctx.knobs)
    ended = time.perf_counter()
    invariants = {row["property"].partition(":")[0] for row in steps}
    strengthened = {row["property"].partition(":")[0] for row in steps if row["detail"] != "inductive alone"}
    return [
        StageRow("z3", "universal proofs (8 brokers)", worst([r["result"] for r in proofs]),
                 _tally([r["result"] for r in proofs]), proved - started),
        StageRow("z3", "inductive invariants (IndInit, IndNext, IndProp)", worst([r["result"] for r in steps]),
                 _tally([r["result"] for r in steps]) + f"; strengthened: {len(strengthened)} of {len(invariants)}",
                 ended - proved),
    ]


def _tally(results: list[str]) -> str:
    return ", ".join(f"{results.count(r)} {r}" for r in (HOLDS, VIOLATED, UNKNOWN) if r in results)


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
    # The counterexample is written only once found, maybe after minutes: a path it could never take is said now.
    check_writable(args.out)
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

        try:
            with TraceWriter(Path(args.out), validate=True) as writer:
                for event in result.events:
                    writer.write(event)
        except TraceError as err:
            raise UsageError(f"{args.out}: cannot write the counterexample: {err.reason}") from err
        row.update(invariant=result.invariant, trace=args.out, steps=len(result.events) - 1)
    if args.json:
        print(json.dumps([row], indent=2))
    elif result.found:
        print(f"{result.invariant} violated at depth {result.depth} ({knobs.describe()}); "
              f"shortest counterexample written to {args.out} ({result.seconds:.1f} s)")
        print(render_counterexample(result.events))
        print("\n".join(explanation(result.events, str(result.invariant))))
    else:
        print(f"no counterexample to {name} up to depth {args.bmc} with {result.brokers} brokers "
              f"({knobs.describe()}; {result.seconds:.1f} s)")
    return EXIT_VIOLATED if result.found else EXIT_OK
