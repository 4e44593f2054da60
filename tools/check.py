"""`kcm check`: model checking an instance of the TLA+ specification (`spec/MC<name>.tla`) with TLC.
Exit 0 holds, 1 violated (the counterexample rendered step by step and written in trace format v2), 2 no
Java 17, no `tla2tools.jar`, or a bad knob or model."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kcm.conformance.check.invariants import explain, explanation
from kcm.spec.tlc.modelcheck import (
    check_invariant_names,
    check_model,
    model_knobs,
    render_counterexample,
    vocabulary_name,
    with_controllers,
)
from kcm.spec.tlc.runner import TlcError, TlcProgress, TlcSetupError
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED, UsageError
from kcm.tools.outputs import default_out
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option


def register(subparsers: Any) -> None:
    check = subparsers.add_parser("check", help="model-check the TLA+ specification with TLC")
    check.add_argument("--model", default="ci", help="ci, deep, or another MC<name> instance of spec/")
    check.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                       help="a design knob of the model, as in kcm sim (repeatable)")
    check.add_argument("--invariant", dest="invariants", action="append", default=[], metavar="NAME",
                       help="check only this invariant (repeatable; default: every invariant)")
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
    return EXIT_OK if outcome.result.violated is None else EXIT_VIOLATED
