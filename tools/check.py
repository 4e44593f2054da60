"""`kcm check`: model checking an instance of the TLA+ specification (`spec/MC<name>.tla`) with TLC.
Exit 0 holds, 1 violated (the counterexample rendered step by step and written in trace format v2; shown all
the same, with the reason, when its file cannot be written), 2 no Java 17, no `tla2tools.jar`, an `--out` it
cannot write (all three checked before TLC starts), a bad knob, model or property, or a model of no state
(unobserved).

`--liveness` checks a liveness model's temporal properties (spec/KafkaProperties.tla) under its fairness
instead of invariants: one verdict per property, a violated one's lasso rendered with its loop marked."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kcm.conformance.check.invariants import explain, explanation
from kcm.conformance.ci_results import Case, counterexample_annotation
from kcm.spec.atomic_output import check_writable
from kcm.spec.tlc.checkpoint import DEFAULT_MINUTES, Checkpoint, CheckpointError
from kcm.spec.tlc.modelcheck import (
    CheckOutcome,
    ModelError,
    PropertyOutcome,
    check_invariant_names,
    check_liveness,
    check_model,
    expected_unfired,
    liveness_models,
    model_knobs,
    model_properties,
    render_counterexample,
    spec_dir,
    vacuous_actions,
    vocabulary_name,
    with_controllers,
)
from kcm.spec.tlc.runner import (
    DEFAULT_HEAP_MB,
    MIN_HEAP_MB,
    ActionCoverage,
    TlcError,
    TlcProgress,
    TlcSetupError,
    find_tools,
)
from kcm.spec.verdicts import UNEXPECTED, UNKNOWN, VIOLATED, severity, worst
from kcm.tools.ci_option import add_junit_option, check_junit, publish
from kcm.tools.design_option import add_design_option, chosen_design, described, refuse_unread_by_tlc
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, UsageError, at_least, non_empty
from kcm.tools.outputs import default_out, out_file
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option
from kcm.tools.swarm import add_swarm_options, cmd_swarm


def register(subparsers: Any) -> None:
    check = subparsers.add_parser("check", help="model-check the TLA+ specification with TLC")
    check.add_argument("--model", type=non_empty, default=None,
                       help="ci, deep, or another MC<name> instance of spec/ (default ci; liveness with --liveness)")
    check.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                       help="a design knob of the model, as in kcm sim (repeatable)")
    check.add_argument("--invariant", dest="invariants", action="append", default=[], metavar="NAME",
                       help="check only this invariant (repeatable; default: every invariant)")
    check.add_argument("--liveness", action="store_true",
                       help="check the model's temporal properties under its fairness (one TLC worker)")
    check.add_argument("--property", dest="properties", action="append", default=[], metavar="NAME",
                       help="with --liveness: check only this property (repeatable; default: the model's)")
    check.add_argument("--workers", type=at_least(1), default=1, help="TLC worker threads (default 1)")
    check.add_argument("--heap", type=at_least(MIN_HEAP_MB, " MiB"), default=None,
                       help=f"TLC's heap in MiB, at least {MIN_HEAP_MB} (default: KCM_TLC_HEAP_MB, else "
                            f"{DEFAULT_HEAP_MB})")
    check.add_argument("--out", "--trace-out", dest="out", metavar="PATH",
                       help="where a counterexample is written, in trace format v2; a folder: "
                            "<model>-counterexample.jsonl in it (default "
                            f"{default_out('check', '<model>-counterexample.jsonl')})")
    check.add_argument("--json", action="store_true")
    check.add_argument("--coverage", action="store_true",
                       help="count each action's states (TLC's -coverage; a 2 GiB heap at least, about 2.3x the time "
                            "on ci); an action that never fires, unless the model's configuration says it never "
                            "does, makes the result unexpected: its invariants hold of it vacuously")
    add_swarm_options(check)
    check.add_argument("--checkpoint", metavar="DIR", default=None,
                       help="keep TLC's states in DIR, checkpointed, so that a stopped run (Ctrl-C, --budget) can be "
                            "continued with --resume; its counts and verdict are an uninterrupted run's")
    check.add_argument("--checkpoint-every", type=float, default=DEFAULT_MINUTES, metavar="MINUTES",
                       help=f"minutes between checkpoints (default {DEFAULT_MINUTES:g}; TLC looks once a minute)")
    add_design_option(check, "TLC checks its module's hooks on its base design's knobs (--set changes them), on "
                             "its first model by default")
    add_option(check)
    html_option(check)
    add_junit_option(check, "model checked")
    # The swarm replays its counterexample, which copies a simulated cluster (as kcm replay).
    check.set_defaults(handler=cmd_check, needs_sources=lambda args: args.swarm is not None)


def cmd_check(args: argparse.Namespace) -> int:
    if args.liveness:
        return cmd_liveness(args)
    if args.swarm is not None:
        return cmd_swarm(args)
    if args.properties:
        raise UsageError("--property needs --liveness")
    design = chosen_design(args)
    refuse_unread_by_tlc(design)
    args.model = args.model or ("ci" if design is None else design.models[0])
    knobs = model_knobs(args.model)
    if design is not None:
        knobs = design.on_model(knobs)
    knobs = knobs.with_settings(args.settings)
    check_invariant_names(args.invariants)
    try:
        # Before TLC starts: a search of minutes does not end in a counterexample that cannot be written.
        find_tools()
        out = out_file(args.out, "check", f"{args.model}-counterexample.jsonl")
        if args.html:
            check_writable(args.html)
        check_junit(args)
        with Reporter(args.progress) as reporter, reporter.task(f"tlc {args.model}") as task:

            def show(found: TlcProgress) -> None:
                task.update(found.text())

            outcome = check_model(args.model, knobs, args.invariants or None, args.workers, args.heap, out, show,
                                  budget_seconds=args.budget, design=design, coverage=args.coverage,
                                  checkpoint=_checkpoint(args))
    except (TlcSetupError, TlcError, CheckpointError) as err:
        raise UsageError(str(err)) from err
    if not outcome.result.complete:
        return _stopped(args, outcome)
    summary = outcome.to_json()
    vacuous = vacuous_actions(args.model, outcome.result) if args.coverage else []
    if args.coverage:
        summary["vacuous"] = vacuous
        if vacuous and not outcome.result.violated:
            summary["result"] = UNEXPECTED
    violated = vocabulary_name(outcome.result.violated) if outcome.result.violated else None
    explained = with_controllers(outcome.events) if violated == "StaleControllerFenced" else outcome.events
    if args.json:
        why = explain(explained, violated) if violated else []
        summary["explanation"] = [{"invariant": v.invariant, "seq": v.seq, "message": v.message} for v in why]
        print(json.dumps({**summary, "counterexample": outcome.events} if outcome.unwritten else summary, indent=2))
    else:
        result = outcome.result
        print(f"model {args.model} ({described(knobs, design)}): {summary['result']}"
              f"{' ' + str(result.violated) if result.violated else ''}; {result.distinct_states:,} distinct "
              f"states, depth {result.depth}, {result.seconds:.1f} s")
        if violated:
            print(render_counterexample(outcome.events))
            for line in explanation(explained, violated):
                print(line)
            print(_written(outcome))
        if outcome.result.coverage is not None:
            _print_coverage(args.model, outcome.result.coverage, vacuous)
    if outcome.unwritten and args.json:
        print(f"kcm: the counterexample (in the JSON above) was not written: {outcome.unwritten}", file=sys.stderr)
    _publish(args, outcome, violated, summary.get("vacuous", []))
    if args.html:
        kinds.check_page(Path(args.html), summary, outcome.trace_path)
    return (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(summary["result"])]


def _checkpoint(args: argparse.Namespace) -> Checkpoint | None:
    if args.checkpoint is None:
        if args.resume:
            raise UsageError("--resume continues a run kept by --checkpoint DIR (or a swarm's --ledger)")
        return None
    if not args.checkpoint_every > 0:
        raise UsageError(f"--checkpoint-every must be a positive number of minutes, not {args.checkpoint_every:g}")
    return Checkpoint(Path(args.checkpoint), args.checkpoint_every, args.resume)


def _stopped(args: argparse.Namespace, outcome: CheckOutcome) -> int:
    """A search its budget stopped: no verdict but unknown, and how to go on where it was checkpointed."""
    result = outcome.result
    again = (f"; kcm check --model {args.model} --checkpoint {args.checkpoint} --resume continues it from its last "
             "checkpoint" if args.checkpoint else "")
    summary = {**outcome.to_json(), "result": UNKNOWN, "complete": False, "explanation": [],
               "growth": [{"depth": depth, "distinct_states": distinct, "seconds": round(seconds, 1)}
                          for depth, distinct, seconds in result.growth],
               **({"checkpoint": args.checkpoint} if args.checkpoint else {})}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"model {args.model} ({outcome.knobs.describe()}): {UNKNOWN}: stopped by its budget after "
              f"{result.seconds:.1f} s, {result.distinct_states:,} distinct states, depth {result.depth}{again}")
    return EXIT_OK


def _print_coverage(model: str, coverage: dict[str, ActionCoverage], vacuous: list[str]) -> None:
    expected = expected_unfired(model)
    width = max(len(name) for name in coverage)
    print("coverage (TLC, each action of the model's Next): distinct / generated states")
    for name, action in coverage.items():
        note = ""
        if not action.fired:
            reason = expected.get(name.partition("@")[0])
            note = f"  never fires, as the model says: {reason}" if reason else "  NEVER FIRED: the invariants hold " \
                                                                                  "of it vacuously"
        print(f"  {name:<{width}}  {action.module}:{action.line:<5}  {action.distinct:>10,} / {action.generated:>10,}"
              f"{note}")
    if vacuous:
        print(f"unexpected: {', '.join(vacuous)} never fired in model {model}, whose configuration does not say "
              "it never does (a `\\* kcm unfired: ACTION: why` line of its .cfg says so)")


def _publish(args: argparse.Namespace, outcome: CheckOutcome, violated: str | None, vacuous: list[str]) -> None:
    """The run as CI reads it: one case, the model; a violation annotated at its violating step's action."""
    name = f"{args.model} ({outcome.knobs.describe()})"
    failure = None
    lines = []
    if violated is not None:
        steps = len(outcome.events) - 1
        again = " ".join(["kcm check --model", args.model, *(f"--set {s}" for s in args.settings),
                          *([f"--design {args.design}"] if getattr(args, "design", None) else []),
                          "--invariant", violated.partition("/")[0]])
        failure = "\n".join([f"{violated} violated in {steps} steps", *explanation(outcome.events, violated),
                              _written(outcome), f"reproduce: {again}"])
        lines.append(counterexample_annotation(outcome.events, failure.replace("\n", "; "),
                                               f"kcm check: {violated} on {args.model}", [spec_dir()]))
    if vacuous and failure is None:
        failure = f"vacuous: {', '.join(vacuous)} never fired in model {args.model}"
    verdict = outcome.verdict
    case = Case("kcm check", name, outcome.result.seconds, failure,
                None if failure or verdict != "unobserved" else "no state explored", verdict)
    summary = (f"### kcm check --model {args.model}\n\n{verdict}: {outcome.result.distinct_states:,} distinct "
               f"states, depth {outcome.result.depth}" + (f"; **{violated}** violated" if violated else ""))
    publish(args, "kcm check", [case], summary, lines)


def _written(outcome: CheckOutcome) -> str:
    if outcome.trace_path is None:
        return f"counterexample not written: {outcome.unwritten}"
    return f"counterexample written to {outcome.trace_path} (trace format v2)"


def cmd_liveness(args: argparse.Namespace) -> int:
    model = args.model or "liveness"
    if args.invariants or args.html:
        raise UsageError(f"--liveness checks temporal properties: {'--invariant' if args.invariants else '--html'} "
                         "does not apply")
    try:
        properties = args.properties or model_properties(model)
        if not properties:
            raise ModelError(f"model {model} has no temporal properties (liveness models: "
                             f"{', '.join(liveness_models())})")
        knobs = model_knobs(model).with_settings(args.settings)
        find_tools()
        lassos = {name: _lasso_out(args.out, model, name, properties) for name in properties}
        check_junit(args)
        with Reporter(args.progress) as reporter, reporter.task(f"tlc {model} liveness") as task:

            def show(label: str, found: TlcProgress) -> None:
                task.update(f"{label}: {found.text()}")

            outcomes = check_liveness(model, knobs, properties, lassos.__getitem__, args.heap, show)
    except (TlcSetupError, TlcError, ModelError) as err:
        raise UsageError(str(err)) from err
    verdict = worst([o.verdict for o in outcomes])
    if args.json:
        print(json.dumps({"model": model, "knobs": knobs.to_dict(), "result": verdict,
                          "properties": [o.to_json() for o in outcomes]}, indent=2))
    else:
        _print_liveness(model, knobs.describe(), outcomes)
    cases = [Case(f"kcm check --liveness {model}", o.name, o.outcome.result.seconds,
                  None if o.verdict != VIOLATED else f"{o.name} violated: a lasso of "
                  f"{len(o.outcome.events)} states, {o.outcome.trace_path or 'not written'}") for o in outcomes]
    summary = f"### kcm check --liveness --model {model}\n\n" + "\n".join(
        f"- {o.name}: {o.verdict}" for o in outcomes)
    publish(args, "kcm check", cases, summary)
    return (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(verdict)]


def _lasso_out(given: str | None, model: str, name: str, properties: list[str]) -> Path:
    """Where a property's lasso goes, checked writable: --out itself for one property, --out with the
    property's name added for several; in a folder given as --out, or by default under the outputs folder, one
    file per property."""
    if given and len(properties) > 1 and not Path(given).is_dir():
        out = Path(given)
        given = str(out.with_name(f"{out.stem}-{name}{out.suffix}"))
    return out_file(given, "check", f"{model}-{name}-counterexample.jsonl")


def _print_liveness(model: str, knobs: str, outcomes: list[PropertyOutcome]) -> None:
    print(f"model {model} ({knobs}), liveness:")
    for outcome in outcomes:
        result = outcome.outcome.result
        print(f"  {outcome.name}: {outcome.verdict} ({result.distinct_states:,} distinct states, "
              f"{result.seconds:.1f} s)")
    for outcome in outcomes:
        if outcome.verdict == VIOLATED:
            print(f"\n{outcome.name} is violated by this lasso:")
            print(render_counterexample(outcome.outcome.events))
            print(_written(outcome.outcome))
