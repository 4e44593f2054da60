"""`kcm check`: model checking an instance of the TLA+ specification (`spec/MC<name>.tla`) with TLC.
Exit 0 holds, 1 violated (the counterexample rendered step by step and written in trace format v2), 2 no
Java 17, no `tla2tools.jar`, a bad knob, model or property, or a model of no state (unobserved).

`--liveness` checks a liveness model's temporal properties (spec/KafkaProperties.tla) under its fairness
instead of invariants: one verdict per property, a violated one's lasso rendered with its loop marked."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kcm.conformance.check.invariants import explain, explanation
from kcm.spec.tlc.modelcheck import (
    ModelError,
    PropertyOutcome,
    check_invariant_names,
    check_liveness,
    check_model,
    liveness_models,
    model_knobs,
    model_properties,
    render_counterexample,
    vocabulary_name,
    with_controllers,
)
from kcm.spec.tlc.runner import TlcError, TlcProgress, TlcSetupError
from kcm.spec.verdicts import VIOLATED, severity, worst
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, UsageError
from kcm.tools.outputs import default_out
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option


def register(subparsers: Any) -> None:
    check = subparsers.add_parser("check", help="model-check the TLA+ specification with TLC")
    check.add_argument("--model", default=None,
                       help="ci, deep, or another MC<name> instance of spec/ (default ci; liveness with --liveness)")
    check.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                       help="a design knob of the model, as in kcm sim (repeatable)")
    check.add_argument("--invariant", dest="invariants", action="append", default=[], metavar="NAME",
                       help="check only this invariant (repeatable; default: every invariant)")
    check.add_argument("--liveness", action="store_true",
                       help="check the model's temporal properties under its fairness (one TLC worker)")
    check.add_argument("--property", dest="properties", action="append", default=[], metavar="NAME",
                       help="with --liveness: check only this property (repeatable; default: the model's)")
    check.add_argument("--workers", type=int, default=1, help="TLC worker threads (default 1)")
    check.add_argument("--heap", type=int, default=None,
                       help="TLC's heap in MiB (default: KCM_TLC_HEAP_MB, else 4096)")
    check.add_argument("--out", "--trace-out", dest="out", metavar="PATH",
                       help="where a counterexample is written, in trace format v2 (default "
                            f"{default_out('check', '<model>-counterexample.jsonl')})")
    check.add_argument("--json", action="store_true")
    add_option(check)
    html_option(check)
    check.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    if args.liveness:
        return cmd_liveness(args)
    if args.properties:
        raise UsageError("--property needs --liveness")
    args.model = args.model or "ci"
    knobs = model_knobs(args.model).with_settings(args.settings)
    check_invariant_names(args.invariants)
    try:
        with Reporter(args.progress) as reporter, reporter.task(f"tlc {args.model}") as task:

            def show(found: TlcProgress) -> None:
                task.update(found.text())

            out = Path(args.out) if args.out else default_out("check", f"{args.model}-counterexample.jsonl")
            outcome = check_model(args.model, knobs, args.invariants or None, args.workers, args.heap, out, show)
    except (TlcSetupError, TlcError) as err:
        raise UsageError(str(err)) from err
    summary = outcome.to_json()
    if args.html:
        kinds.check_page(Path(args.html), summary, outcome.trace_path)
    violated = vocabulary_name(outcome.result.violated) if outcome.result.violated else None
    explained = with_controllers(outcome.events) if violated == "StaleControllerFenced" else outcome.events
    if args.json:
        why = explain(explained, violated) if violated else []
        summary["explanation"] = [{"invariant": v.invariant, "seq": v.seq, "message": v.message} for v in why]
        print(json.dumps(summary, indent=2))
    else:
        result = outcome.result
        print(f"model {args.model} ({knobs.describe()}): {summary['result']}"
              f"{' ' + str(result.violated) if result.violated else ''}; {result.distinct_states:,} distinct "
              f"states, depth {result.depth}, {result.seconds:.1f} s")
        if violated:
            print(render_counterexample(outcome.events))
            for line in explanation(explained, violated):
                print(line)
            print(f"counterexample written to {outcome.trace_path} (trace format v2)")
    return (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(outcome.verdict)]


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
        with Reporter(args.progress) as reporter, reporter.task(f"tlc {model} liveness") as task:

            def show(label: str, found: TlcProgress) -> None:
                task.update(f"{label}: {found.text()}")

            outcomes = check_liveness(model, knobs, properties, lambda name: _lasso_out(args, model, name, properties),
                                      args.heap, show)
    except (TlcSetupError, TlcError, ModelError) as err:
        raise UsageError(str(err)) from err
    verdict = worst([o.verdict for o in outcomes])
    if args.json:
        print(json.dumps({"model": model, "knobs": knobs.to_dict(), "result": verdict,
                          "properties": [o.to_json() for o in outcomes]}, indent=2))
    else:
        _print_liveness(model, knobs.describe(), outcomes)
    return (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(verdict)]


def _lasso_out(args: argparse.Namespace, model: str, name: str, properties: list[str]) -> Path:
    """Where a property's lasso goes: --out itself for one property, --out with the property's name added for
    several; by default one file per property under the outputs folder."""
    if not args.out:
        return default_out("check", f"{model}-{name}-counterexample.jsonl")
    out = Path(args.out)
    return out if len(properties) == 1 else out.with_name(f"{out.stem}-{name}{out.suffix}")


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
            print(f"counterexample written to {outcome.outcome.trace_path} (trace format v2)")
