"""`kcm trace convert IN OUT [--to itf|v1]`: trace format v1 (JSON Lines) to ITF (Apalache's JSON trace
format) and back, losslessly (spec/trace/itf.py). Without `--to`, a `.jsonl` input goes to ITF and
anything else is read as ITF and written as v1."""

from __future__ import annotations

import argparse
from typing import Any

from kcm.spec.trace.format import TraceWriter
from kcm.spec.trace.itf import convert_v1_to_itf, read_itf
from kcm.tools.errors import EXIT_OK


def register(subparsers: Any) -> None:
    trace = subparsers.add_parser("trace", help="trace utilities (format conversion)")
    commands = trace.add_subparsers(dest="trace_command", required=True, parser_class=type(trace))
    convert = commands.add_parser("convert", help="trace format v1 <-> ITF (Informal Trace Format)")
    convert.add_argument("source", metavar="IN")
    convert.add_argument("target", metavar="OUT")
    convert.add_argument("--to", choices=("itf", "v1"), help="output format (default: from IN's suffix)")
    convert.set_defaults(handler=cmd_convert)


def cmd_convert(args: argparse.Namespace) -> int:
    to = args.to or ("itf" if args.source.endswith(".jsonl") else "v1")
    if to == "itf":
        count = convert_v1_to_itf(args.source, args.target)
    else:
        events = read_itf(args.source)
        with TraceWriter(args.target) as writer:
            for event in events:
                writer.write(event)
        count = len(events)
    print(f"wrote {count} {'states' if to == 'itf' else 'events'} to {args.target} ({to})")
    return EXIT_OK
