"""The `kcm` command line: one module of `kcm.tools` per command, each with `register(subparsers)`. User
errors (bad knobs, malformed traces, bad arguments) end in one line on stderr and exit code 2, never a
traceback (kcm.tools.errors); Ctrl-C, SIGTERM and SIGHUP in one line too, `kcm: interrupted`, exit 130, with
every process kcm started ended first (kcm.spec.child_processes)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from kcm.spec import child_processes
from kcm.tools.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, Parser, UsageError


def main(argv: Sequence[str] | None = None) -> int:
    # Installed before the commands are imported (a second or more): an interrupt then is one line too.
    child_processes.install()
    try:
        return _run(argv)
    except KeyboardInterrupt:
        # A second Ctrl-C while the children end would print a traceback over the one line. The handlers come
        # back after: a caller of main() in its own process (a test) must not start its next children with
        # SIGINT ignored, which they would inherit.
        handlers = {signum: signal.signal(signum, signal.SIG_IGN)
                    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        # As at the signal (child_processes._stop_requested), for an interrupt raised without one.
        logging.disable(logging.CRITICAL)
        try:
            # Children first: the line is the last thing a user sees, and nothing kcm started outlives it.
            child_processes.interrupt()
            print("kcm: interrupted", file=sys.stderr)
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
        return EXIT_INTERRUPTED


def _run(argv: Sequence[str] | None) -> int:
    from kcm.spec.atomic_output import OutputError
    from kcm.spec.trace.format import TraceError
    from kcm.spec.vocabulary import KnobError
    from kcm.tools import interpreted
    from kcm.tools.outputs import check_root

    try:
        check_root()
        parser = _build_parser()
        args = parser.parse_args(argv)
        # A command, or a mode of one (a function of its arguments), that copies or patches implementation objects.
        needs = getattr(args, "needs_sources", False)
        if (needs(args) if callable(needs) else needs) and interpreted.compiled():
            if argv is None:
                return interpreted.rerun_interpreted("kcm.tools.cli", sys.argv[1:])
            return interpreted.run_interpreted("kcm.tools.cli", argv)
        handler: Any = args.handler
        return int(handler(args))
    except (UsageError, KnobError, TraceError, OutputError, ValueError) as err:
        print(f"kcm: error: {_one_line(str(err))}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader left (`| head`): what the command would have said is unknown, so not 0, which would let a
        # violation read as a pass. Python's exit flush must not meet the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _build_parser() -> Parser:
    from kcm.tools import (
        check,
        check_trace,
        conform,
        design,
        diff,
        hunt,
        kafka,
        mutate,
        pipeline,
        prove,
        replay,
        review,
        sim,
        trace,
        validate,
        verify,
        zk,
    )
    from kcm.tools.report import command as report

    # In the order `kcm --help` lists them.
    commands = (sim, check_trace, check, hunt, verify, prove, validate, review, diff, design, conform, trace,
                replay, mutate, pipeline, report, zk, kafka)
    parser = Parser(prog="kcm", description="Verification workbench for the Kafka controller.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands:
        command.register(sub)
    return parser


def _one_line(message: str) -> str:
    """The error's one line: what it quotes of the user's input (a path with a line break in it) escaped."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in message)


if __name__ == "__main__":
    sys.exit(main())
