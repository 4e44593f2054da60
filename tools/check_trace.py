"""`kcm check-trace TRACE [--json]`: every invariant on every step of a trace, by the invariant checker.
Exit 0 all hold, 1 with the first violating step, the invariant and an excerpt of the trace, 2 when the trace
gave no invariant anything to check (every one unobserved)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from typing import Any, Final

from kcm.conformance.check.invariants import InvariantChecker
from kcm.spec.trace.format import Event, read_trace
from kcm.spec.trace.render import render_excerpt
from kcm.spec.verdicts import UNOBSERVED, worst
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED

EXCERPT_BEFORE: Final = 6  # events shown before the first violating one


def register(subparsers: Any) -> None:
    check = subparsers.add_parser("check-trace", help="check every invariant on a trace file")
    check.add_argument("trace")
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=cmd_check_trace)


def cmd_check_trace(args: argparse.Namespace) -> int:
    """The trace is read as a stream: only the events the first violation's excerpt shows are kept, so memory
    does not grow with the trace's length."""
    checker = InvariantChecker()
    recent: deque[Event] = deque(maxlen=EXCERPT_BEFORE + 1)
    excerpt = ""
    for event in read_trace(args.trace):
        recent.append(event)
        found = checker.step(event)
        if found and not excerpt:
            excerpt = render_excerpt(list(recent), found[0].seq, EXCERPT_BEFORE)
    report = checker.report
    first = report.violations[0] if report.violations else None
    # A trace that shows no invariant anything to check is no evidence that they hold.
    unobserved = first is None and worst(list(report.verdicts().values())) == UNOBSERVED
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
        print(f"{args.trace}: {report.events} events, "
              + ("every invariant unobserved" if unobserved else "all invariants hold"))
        for name, verdict in report.verdicts().items():
            print(f"  {name:<28} {verdict}")
    else:
        print(f"{args.trace}: {first.invariant} violated at step {first.seq}")
        print(excerpt)
        print(f"why: {first.message}")
        if len(report.violations) > 1:
            print(f"({len(report.violations) - 1} more violations; --json lists them all)")
    if unobserved:
        print(f"kcm: error: {args.trace}: nothing checked (every invariant unobserved): the trace does not pass",
              file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK if first is None else EXIT_VIOLATED
