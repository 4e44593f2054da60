"""`kcm trace convert IN OUT [--to itf|v2]`: a trace to ITF (Apalache's JSON trace format) or to JSON Lines
in trace format v2, losslessly (spec/trace/itf.py). IN is JSON Lines (v1 or v2) when its name ends in
`.jsonl`, ITF otherwise. Without `--to`, JSON Lines go to ITF and ITF to v2; `--to v2` on a v1 file
rewrites it as v2 (no leader and no controller 0 -> -1)."""

from __future__ import annotations

import argparse
from typing import Any

from kcm.spec.trace.format import Event, TraceWriter, load_trace
from kcm.spec.trace.itf import read_itf, write_itf
from kcm.tools.errors import EXIT_OK


def register(subparsers: Any) -> None:
    trace = subparsers.add_parser("trace", help="trace utilities (format conversion)")
    commands = trace.add_subparsers(dest="trace_command", required=True, parser_class=type(trace))
    convert = commands.add_parser("convert", help="trace format v1/v2 -> v2, and v2 <-> ITF (Informal Trace Format)")
    convert.add_argument("source", metavar="IN", help="a .jsonl trace (format v1 or v2), or an ITF document")
    convert.add_argument("target", metavar="OUT")
    convert.add_argument(
        "--to",
        choices=("itf", "v2"),
        help="output format: itf, or v2 (JSON Lines); default: itf for a .jsonl IN, v2 otherwise",
    )
    convert.set_defaults(handler=cmd_convert)


def cmd_convert(args: argparse.Namespace) -> int:
    jsonl = args.source.endswith(".jsonl")
    to = args.to or ("itf" if jsonl else "v2")
    events: list[Event] = load_trace(args.source) if jsonl else read_itf(args.source)
    if to == "itf":
        write_itf(events, args.target, args.source)
    else:
        with TraceWriter(args.target) as writer:
            for event in events:
                writer.write(event)
    print(f"wrote {len(events)} {'states' if to == 'itf' else 'events'} to {args.target} ({to})")
    return EXIT_OK
