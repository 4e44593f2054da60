"""`kcm validate`: every step of a trace against the model, by the Z3 transition relation (default) or by
TLC trace validation (`--tlc`), naming the first step no action explains. Exit 0 every step explained,
1 a step unexplained, 2 bad input."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kcm.spec.tlc.runner import TlcError, TlcProgress, TlcSetupError
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import TraceFile, load_trace
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED
from kcm.tools.progress import Reporter, add_option


def register(subparsers: Any) -> None:
    validate = subparsers.add_parser("validate", help="check every step of a trace against the Z3 relation")
    validate.add_argument("trace")
    validate.add_argument("--json", action="store_true")
    validate.add_argument("--tlc", action="store_true",
                          help="TLC trace validation against the TLA+ specification instead (spec/tlc/validate.py)")
    add_option(validate)
    validate.set_defaults(handler=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    if args.tlc:
        return cmd_validate_tlc(args)
    from kcm.spec.z3.validate import Validator  # z3 takes a tenth of a second to load

    # Read twice as a stream (brokers and variables first, then step by step): memory stays that of a step.
    with Reporter(args.progress) as reporter:
        with reporter.task("z3 validate: survey") as survey:
            validator = Validator(TraceFile(args.trace), lambda read: survey.update(f"{read:,} events read"))
        with reporter.task("z3 validate: steps", validator.count) as steps:
            report = validator.run(on_event=lambda taken: steps.update(completed=taken))
    if args.json:
        print(json.dumps({"trace": args.trace, **report.to_json()}, indent=2))
    elif report.failure is None:
        partial = f"; unobserved: {', '.join(report.unobserved)}" if report.unobserved else ""
        print(f"{args.trace}: all {report.steps} steps explained by the Z3 transition relation "
              f"({report.steps_per_second:,.0f} steps/s{partial})")
    else:
        f = report.failure
        where = f" (partition {f.partition})" if f.partition else ""
        print(f"{args.trace}: step {f.seq} ({f.action} by {f.actor}){where} is explained by no action: {f.reason}")
    return EXIT_OK if report.failure is None else EXIT_VIOLATED


def cmd_validate_tlc(args: Any) -> int:
    """`kcm validate --tlc TRACE [--json]`: exit 0 the specification explains the whole trace, 1 not. The
    trace is loaded whole: TLC reads it as one TLA+ module of its states (spec/tlc/validate.py)."""
    events = load_trace(args.trace)
    try:
        with Reporter(args.progress) as reporter, reporter.task(f"tlc validate: {len(events)} events") as task:

            def show(found: TlcProgress) -> None:
                task.update(found.text())

            check = validate_with_tlc(events, on_progress=show)
    except (TlcSetupError, TlcError) as err:
        raise ValueError(str(err)) from err
    if args.json:
        print(json.dumps({"trace": args.trace, **check.to_json()}, indent=2))
    elif check.accepted:
        print(f"{args.trace}: the specification explains all {check.events} events "
              f"({check.distinct_states:,} states, {check.seconds:.1f} s, {check.events_per_second:,.1f} events/s)")
    else:
        bad = check.first_unexplained
        assert bad is not None
        print(f"{args.trace}: event seq {bad['seq']} ({bad['action']} by {bad['actor']}) is explained by no "
              f"behaviour of the specification (the first {check.matched} events are)")
    return EXIT_OK if check.accepted else EXIT_VIOLATED
