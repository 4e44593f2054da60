"""`kcm report INPUT [--out PAGE.html] [--window N]`: one self-contained HTML page for what a command wrote.

What INPUT is, is told by its shape (docs/reports.md):

    *.jsonl                          a trace or counterexample (trace format v2)
    a folder with review.json        a review matrix (`kcm review --out DIR`), or review.json itself
    a folder with summary.json       a pipeline run (`kcm pipeline check --out DIR`), or summary.json itself
    *.json with "stages"             a `kcm verify --json` run saved to a file
    *.json with "examples"           a `kcm conform --json` campaign saved to a file

The page is written beside the input (trace.jsonl -> trace.html, a folder DIR -> DIR.html) unless --out
says where; its path is printed. Exit 0 when written, 2 when INPUT is none of the above or not in the shape
kcm writes it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from jinja2 import UndefinedError

from kcm.tools.errors import EXIT_OK, UsageError
from kcm.tools.report import kinds
from kcm.tools.report.timeline import DEFAULT_WINDOW

REVIEW: Final = "review.json"
PIPELINE_SUMMARY: Final = "summary.json"
KINDS: Final = "a .jsonl trace, a review folder or review.json, a pipeline check folder or its summary.json, " \
               "or the JSON of kcm verify --json or kcm conform --json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("report", help="a self-contained HTML page for a trace, review, verify, "
                                                  "conform or pipeline output")
    parser.add_argument("input", help=f"what to show: {KINDS}")
    parser.add_argument("--out", help="the page to write (default: beside the input, named after it)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                        help=f"steps shown either side of a trace's first violation (default {DEFAULT_WINDOW})")
    parser.set_defaults(handler=cmd_report)


def html_option(parser: argparse.ArgumentParser) -> None:
    """The `--html PATH` option every reporting command shares."""
    parser.add_argument("--html", metavar="PATH", help="also write the result as a self-contained HTML page "
                                                       "(docs/reports.md)")


# A JSON document (and a pipeline folder's files) may have any shape: the renderers read what kcm writes, so a
# field missing or of another type is the document's fault, told in one line. (An OutputError, the page's, is
# no OSError and reaches the command line as itself.)
SHAPE_ERRORS: Final = (KeyError, IndexError, TypeError, AttributeError, ValueError, UndefinedError)


def cmd_report(args: argparse.Namespace) -> int:
    if args.window < 0:
        raise UsageError(f"report: --window {args.window}: must not be negative")
    source = Path(args.input)
    render = detect(source)
    out = Path(args.out) if args.out else default_out(source)
    if source.suffix == ".jsonl":
        # The trace reader judges a trace's every line (TraceError): what is left to fail is kcm's own.
        print(render(source, out, args.window))
        return EXIT_OK
    try:
        print(render(source, out, args.window))
    except SHAPE_ERRORS as err:
        reason = f"{type(err).__name__}: {err}".replace("\r", "\\r").replace("\n", "\\n")
        raise UsageError(f"{source}: not a document kcm writes: {reason}") from None
    except OSError as err:
        raise UsageError(f"{source}: cannot read: {err.strerror or err}") from None
    return EXIT_OK



Render = Callable[[Path, Path, int], Path]


def default_out(source: Path) -> Path:
    if source.is_dir():
        return source.parent / f"{source.resolve().name}.html"
    return source.with_suffix(".html")


def detect(source: Path) -> Render:
    """How to render INPUT, told by its shape; anything else is a usage error naming what is accepted."""
    if source.is_dir():
        if (source / REVIEW).is_file():
            return lambda s, out, _: _review(s / REVIEW, out)
        if (source / PIPELINE_SUMMARY).is_file():
            return lambda s, out, _: kinds.pipeline_page(s, out)
        raise UsageError(f"{source}: a folder with neither {REVIEW} (kcm review) nor {PIPELINE_SUMMARY} "
                         "(kcm pipeline check)")
    if not source.exists():
        raise UsageError(f"{source}: no such file or folder")
    if source.suffix == ".jsonl":
        return lambda s, out, window: kinds.trace_page(s, out, window)
    if source.suffix == ".json":
        return _json_kind(source, _load(source))
    raise UsageError(f"{source}: cannot tell what this is (expected {KINDS})")


def _json_kind(source: Path, document: Any) -> Render:
    keys = set(document) if isinstance(document, dict) else set()
    if {"columns", "rows"} <= keys:
        return lambda s, out, _: _review(s, out)
    if {"records", "verdicts", "runs"} <= keys:
        return lambda s, out, _: kinds.pipeline_page(s.parent, out)
    if {"stages", "result"} <= keys:
        return lambda s, out, _: kinds.verify_page(document, out, source=str(s))
    if {"examples", "coverage", "violations"} <= keys:
        return lambda s, out, _: kinds.conform_page(document, kinds.coverage_from_json(document["coverage"]), out,
                                                    source=str(s))
    raise UsageError(f"{source}: JSON of no known kind (expected {KINDS})")


def _load(source: Path) -> Any:
    try:
        return json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{source}: cannot read: {err}") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"{source}:{err.lineno}: invalid JSON: {err.msg} (column {err.colno})") from None


def _review(path: Path, out: Path) -> Path:
    return kinds.review_page(_load(path), path.parent, out, source=str(path))
