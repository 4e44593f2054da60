"""The `kcm` command line. User errors (bad knobs, malformed traces, bad arguments) end in one line on
stderr and exit code 2, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kcm.conformance.invariants import InvariantChecker
from kcm.conformance.render import render_excerpt
from kcm.conformance.trace import TraceError, TraceWriter, load_trace
from kcm.impl.simulator import SimConfig, Simulator
from kcm.spec.vocabulary import KnobError, Knobs
from kcm.tools import interpreted
from kcm.tools import verify as verify_stages

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE = 0, 1, 2

# Commands that live in modules of their own; each has `register(subparsers)`.
COMMAND_MODULES = ("kcm.tools.prove", "kcm.tools.review", "kcm.tools.conform", "kcm.tools.trace_cmd",
                   "kcm.tools.replay", "kcm.tools.mutate", "kcm.tools.pipeline")


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "needs_sources", False) and interpreted.compiled():
            return interpreted.rerun_interpreted("kcm.tools.cli", sys.argv[1:] if argv is None else argv)
        handler: Any = args.handler
        return int(handler(args))
    except (UsageError, KnobError, TraceError, ValueError) as err:
        print(f"kcm: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kcm", description="Verification workbench for the Kafka controller.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sim = sub.add_parser("sim", help="simulate a cluster under faults and write its trace")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--steps", type=int, default=1000)
    _cluster_options(sim)
    sim.add_argument("--out", required=True, help="trace file to write (JSON Lines, trace format v1)")
    sim.set_defaults(handler=cmd_sim)

    check = sub.add_parser("check-trace", help="check every invariant on a trace file")
    check.add_argument("trace")
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=cmd_check_trace)

    check = sub.add_parser("check", help="model-check the TLA+ specification with TLC")
    check.add_argument("--model", default="ci", help="ci, deep, or another MC<name> instance of spec/")
    check.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE")
    check.add_argument("--invariant", dest="invariants", action="append", default=[], metavar="NAME")
    check.add_argument("--workers", type=int, default=1)
    check.add_argument("--heap", type=int, default=None,
                       help="TLC's heap in MiB (default: KCM_TLC_HEAP_MB, else 4096)")
    check.add_argument("--trace-out", help="where a counterexample is written (trace format v1)")
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=cmd_check)

    verify = sub.add_parser("verify", help="the full verification run on the embedded defaults")
    _cluster_options(verify)
    verify_stages.add_arguments(verify)
    verify.set_defaults(handler=cmd_verify)

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def _cluster_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                        help="design knob: truncation, unclean_election, controller_epoch_fencing, "
                             "leader_epoch_check, min_isr")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--faults", type=float, default=1.0, help="fault intensity (0 = none)")


def _config(args: argparse.Namespace) -> tuple[Knobs, SimConfig]:
    knobs = Knobs().with_settings(args.settings)
    config = SimConfig(
        brokers=args.brokers,
        partitions=args.partitions,
        replication_factor=min(3, args.brokers),
        faults=args.faults,
    )
    if args.steps < 0:
        raise UsageError("--steps must not be negative")
    return knobs, config


# -- kcm sim -------------------------------------------------------------------------------------------------


def cmd_sim(args: argparse.Namespace) -> int:
    knobs, config = _config(args)
    try:
        with TraceWriter(Path(args.out)) as writer:
            sim = Simulator(args.seed, knobs, config, writer.write)
            sim.bootstrap()
            sim.run(args.steps)
            events = sim.cluster.seq
    except OSError as err:
        raise UsageError(f"{args.out}: cannot write: {err.strerror}") from err
    print(f"wrote {events} events to {args.out} (seed {args.seed}, {knobs.describe()})")
    return EXIT_OK


# -- kcm check-trace -----------------------------------------------------------------------------------------


def cmd_check_trace(args: argparse.Namespace) -> int:
    events = load_trace(args.trace)
    report = InvariantChecker().check_all(events)
    first = report.violations[0] if report.violations else None
    if args.json:
        print(json.dumps({
            "trace": args.trace,
            "events": report.events,
            "verdicts": report.verdicts(),
            "checks": dict(sorted(report.checks.items())),
            "violations": [{"invariant": v.invariant, "seq": v.seq, "message": v.message}
                           for v in report.violations],
        }, indent=2))
    elif first is None:
        print(f"{args.trace}: {report.events} events, all invariants hold")
        for name, verdict in report.verdicts().items():
            print(f"  {name:<28} {verdict}")
    else:
        print(f"{args.trace}: {first.invariant} violated at step {first.seq}: {first.message}")
        print(render_excerpt(events, first.seq))
        if len(report.violations) > 1:
            print(f"({len(report.violations) - 1} more violations; --json lists them all)")
    return EXIT_OK if first is None else EXIT_VIOLATED


# -- kcm check -----------------------------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import Progress, TextColumn, TimeElapsedColumn

    from kcm.tools.check import check_model, model_knobs, render_counterexample
    from kcm.tools.tlc import TlcError, TlcSetupError

    knobs = model_knobs(args.model).with_settings(args.settings)
    console = Console(stderr=True)
    try:
        with Progress(TextColumn("TLC {task.description}"), TimeElapsedColumn(), console=console,
                      transient=True, disable=not console.is_terminal) as progress:
            task = progress.add_task(f"model {args.model}: starting")

            def show(generated: int, distinct: int) -> None:
                progress.update(task, description=f"model {args.model}: {distinct:,} distinct states")

            outcome = check_model(args.model, knobs, args.invariants or None, args.workers, args.heap,
                                  Path(args.trace_out) if args.trace_out else None, show)
    except (TlcSetupError, TlcError) as err:
        raise UsageError(str(err)) from err
    summary = outcome.to_json()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        result = outcome.result
        print(f"model {args.model} ({knobs.describe()}): {summary['result']}"
              f"{' ' + str(result.violated) if result.violated else ''}; {result.distinct_states:,} distinct "
              f"states, depth {result.depth}, {result.seconds:.1f} s")
        if result.violated:
            print(render_counterexample(result.trace))
            print(f"counterexample written to {outcome.trace_path} (trace format v1)")
    return EXIT_OK if outcome.result.violated is None else EXIT_VIOLATED


# -- kcm verify ----------------------------------------------------------------------------------------------


def cmd_verify(args: argparse.Namespace) -> int:
    from rich.console import Console

    knobs, config = _config(args)
    stream = sys.stderr if args.json else sys.stdout
    # Piped output keeps the table's columns whole instead of wrapping them to 80 characters.
    console = Console(stderr=args.json, width=None if stream.isatty() else 160)
    ctx = verify_stages.VerifyContext(knobs, config, args.seeds, args.steps, console)
    engines = [e for e in (args.only or verify_stages.STAGES) if e not in args.skip]
    rows = verify_stages.run(ctx, engines)
    verify_stages.report(console, ctx, rows, args.json)
    return {"holds": EXIT_OK, "violated": EXIT_VIOLATED}.get(verify_stages.verdict(rows), EXIT_USAGE)


if __name__ == "__main__":
    sys.exit(main())
