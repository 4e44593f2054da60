"""`kcm replay TRACE [--json]`: drive the implementation with the actions of a trace (a TLC counterexample
converted by `kcm check`, or any trace in format v2) under the trace's knobs, compare the abstract state
after every step, and report the first divergence or that the trace's invariant breaks in the
implementation too (conformance/check/replay.py).

Exit codes: 0 the implementation follows the whole trace (and breaks the invariant the trace breaks, if
any), 1 a divergence or an invariant the implementation does not break, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kcm.conformance.check.replay import Replayer, ReplayReport
from kcm.spec.trace.format import TraceFile
from kcm.spec.vocabulary import INVARIANTS
from kcm.tools.design_option import add_design_option, chosen_design
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED


def register(subparsers: Any) -> None:
    replay = subparsers.add_parser("replay", help="drive the implementation with a trace and compare states")
    replay.add_argument("trace")
    replay.add_argument("--invariant", metavar="NAME",
                        help="the invariant the trace breaks (default: the first the invariant checker finds)")
    replay.add_argument("--json", action="store_true")
    add_design_option(replay, "the implementation runs its strategy")
    # Replay copies a simulated cluster per reading of a step, which compiled objects refuse.
    replay.set_defaults(handler=cmd_replay, needs_sources=True)


def cmd_replay(args: argparse.Namespace) -> int:
    if args.invariant is not None and args.invariant.split("/")[0] not in INVARIANTS:
        raise ValueError(f"--invariant {args.invariant}: unknown invariant (known: {', '.join(INVARIANTS)})")
    # Read as a stream, twice: a survey of the whole trace (a format error anywhere stops the replay before
    # its first step), then step by step.
    replayer = Replayer(TraceFile(args.trace), args.invariant, chosen_design(args))
    console = Console(stderr=True)
    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=args.json or not console.is_terminal) as progress:
        task = progress.add_task("replay", total=replayer.count - 1)
        report = replayer.run(lambda steps: progress.update(task, completed=steps))
    if args.json:
        print(json.dumps({"trace": args.trace, "knobs": replayer.knobs.to_dict(), **report.to_json()}, indent=2))
    else:
        print(describe(args.trace, report))
    return EXIT_OK if report.verdict in ("conforms", "same-invariant") else EXIT_VIOLATED


def describe(trace: str, report: ReplayReport) -> str:
    d = report.divergence
    if d is not None:
        if d.reason:
            return f"{trace}: diverges at seq {d.seq} ({d.action}): {d.reason}"
        return (f"{trace}: diverges at seq {d.seq} ({d.action}): {d.variable} expected {json.dumps(d.expected)}, "
                f"implementation has {json.dumps(d.actual)}")
    head = f"{trace}: the implementation follows all {report.steps} steps ({report.impl_steps} implementation steps)"
    if report.trace_invariant is None:
        return head
    if report.same_invariant:
        return f"{head} and breaks {report.trace_invariant} as the trace does"
    broken = ", ".join(report.impl_invariants) or "nothing"
    return f"{head} but does not break {report.trace_invariant} (it breaks {broken})"
