"""`kcm diff BASE HEAD`: what a design change changes (kcm.conformance.design_diff).

    kcm diff BASE HEAD [--quick] [--designs GLOB ...] [--repo DIR] [--tolerance PCT] [--json] [--out DIR]
                       [--no-cache] [--cache-limit MIB] [--junit FILE]

BASE and HEAD are git revisions of the repository in the working folder (or `--repo`), or design folders (a
folder holding design.toml, or a folder of them). Each side's design folders are reviewed as `kcm review
--design` reviews one, every row read from the result cache (`kcm-out/cache/`) when nothing it depends on
changed. Prints the delta as markdown fit for a pull-request comment (or JSON), writes diff.json and diff.md
(and the changed cells' counterexamples) under `--out`; on GitHub Actions appends the markdown to the step
summary and annotates each broken cell at the TLA+ action of its counterexample's violating step. Exit 1 when
HEAD breaks what BASE held, 0 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Final

from kcm.conformance.ci_results import Case, counterexample_annotation
from kcm.conformance.design_diff import (
    DEFAULT_TOLERANCE,
    Delta,
    DiffError,
    compare,
    keep_counterexamples,
    markdown,
    resolve_side,
    review_side,
    to_json,
    unchanged_cells,
)
from kcm.conformance.result_cache import DEFAULT_LIMIT_BYTES, ResultCache
from kcm.spec.atomic_output import check_writable, claimed_in_place, write_output
from kcm.spec.tlc.modelcheck import ModelError, spec_dir
from kcm.spec.tlc.runner import TlcError, TlcSetupError, find_tools
from kcm.spec.verdicts import passed
from kcm.tools.ci_option import add_junit_option, check_junit, publish
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED, UsageError, at_least
from kcm.tools.outputs import default_out, out_files
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option

DEFAULT_OUT: Final = default_out("diff")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("diff", help="what a design change changes: the review of two revisions, compared")
    parser.add_argument("base", metavar="BASE", help="a git revision, or a design folder")
    parser.add_argument("head", metavar="HEAD", help="a git revision, or a design folder")
    parser.add_argument("--quick", action="store_true", help="each row to its first violation (as review --quick)")
    parser.add_argument("--coverage", action="store_true",
                        help="count each action's states in each row's exhaustive run: actions that stopped or "
                             "started firing, and rows made vacuous")
    parser.add_argument("--designs", action="append", metavar="GLOB",
                        help="only the design folders whose path in the tree matches (repeatable)")
    parser.add_argument("--repo", default=".", help="the git repository of the revisions (default: .)")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE * 100, metavar="PCT",
                        help="state counts and depths that moved by more than this percentage are shown (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the markdown")
    parser.add_argument("--out", default=None, help=f"folder for diff.json, diff.md and counterexamples "
                                                    f"(default {DEFAULT_OUT}/)")
    parser.add_argument("--no-cache", action="store_true", help="review every row again; read no cached result")
    parser.add_argument("--cache-limit", type=at_least(1, " MiB"), default=DEFAULT_LIMIT_BYTES // 2**20,
                        metavar="MIB", help="the cache's size bound (default %(default)s MiB)")
    add_junit_option(parser, "cell of HEAD")
    html_option(parser)
    add_option(parser)
    parser.set_defaults(handler=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    if args.tolerance < 0:
        raise UsageError(f"--tolerance {args.tolerance:g}: a percentage, 0 or more")
    out = out_files(args.out, "diff", ["diff.json", "diff.md"])
    check_junit(args)
    if args.html:
        check_writable(args.html)
    cache = None if args.no_cache else ResultCache(default_out("cache"), args.cache_limit * 2**20)
    # The folder is held for the whole run: a second diff into it is refused at once, not overwritten.
    with claimed_in_place(out):
        started = time.monotonic()
        try:
            find_tools()
            trees = default_out("diff", "trees")
            base = resolve_side(args.base, Path(args.repo), trees, args.designs)
            head = resolve_side(args.head, Path(args.repo), trees, args.designs)
            if not base.designs and not head.designs:
                where = f" matching {', '.join(args.designs)}" if args.designs else ""
                raise DiffError(f"no design folder{where} in {base.name} nor in {head.name} (no design.toml)")
            with Reporter(args.progress) as reporter:
                results = []
                for label, side in (("BASE", base), ("HEAD", head)):
                    rows = sum(len(d.models) for d in side.designs)
                    with reporter.task(f"diff {label} {side.name}", total=rows) as task:
                        def done(row: str, cached: bool, task: Any = task) -> None:
                            task.advance(detail=f"{row}: {'from the cache' if cached else 'reviewed'}")

                        results.append(review_side(side, out / label.lower(), cache, args.quick, on_row=done,
                                                   coverage=args.coverage))
        except (DiffError, TlcSetupError, TlcError, ModelError) as err:
            raise UsageError(str(err)) from err
        delta = compare(results[0], results[1], args.tolerance / 100)
        keep_counterexamples(delta, out)
        document = to_json(delta, time.monotonic() - started)
        text = markdown(delta)
        print(json.dumps(document, indent=2) if args.json else text)
        write_output(out / "diff.json", json.dumps(document, indent=2) + "\n")
        write_output(out / "diff.md", text + "\n")
        if args.html:
            kinds.diff_page(document, Path(args.html))
        publish(args, "kcm diff", junit_cases(delta), text, github_annotations(delta))
    return EXIT_VIOLATED if delta.breaks else EXIT_OK


def junit_cases(delta: Delta) -> list[Case]:
    cases = [Case(row, column, seconds, error=None if passed(verdict) or verdict == "violated" else
                  f"{column}: {verdict}", error_type=verdict)
             for row, column, verdict, seconds in unchanged_cells(delta)]
    for change in delta.cells:
        message = f"{change.column} went from {change.base} on BASE to {change.head} on HEAD"
        seconds = float(change.head_cell.get("seconds", 0.0))
        if change.breaks:
            detail = [message, *change.head_cell.get("explanation", [])]
            design = delta.head.rows[change.row].get("design")
            if design:
                detail.append(f"reproduce: kcm review --design {delta.head.side.in_repository(Path(design))}")
            if change.head_cell.get("trace"):
                detail.append(f"counterexample: {change.head_cell['trace']} (kcm report draws it)")
            cases.append(Case(change.row, change.column, seconds, failure="\n".join(detail)))
        else:
            cases.append(Case(change.row, change.column, seconds))
    return cases


def github_annotations(delta: Delta) -> list[str]:
    """An `::error` per broken cell, at the TLA+ action of its counterexample's violating step."""
    lines = []
    for change in delta.cells:
        if not change.breaks:
            continue
        message = "; ".join([f"{change.column}: {change.base} on BASE, {change.head} on HEAD",
                             *change.head_cell.get("explanation", [])])
        design = delta.head.rows[change.row].get("design")
        folder = Path(design) if design else None
        # An action of kcm's core, not in the repository, is annotated on the design's module (else manifest).
        fallback = None if folder is None else next(iter(sorted(folder.glob("*.tla"))), folder / "design.toml")
        lines.append(counterexample_annotation(
            change.head_cell.get("events") or [], message, f"kcm diff: {change.row} breaks {change.column}",
            ([folder] if folder else []) + [spec_dir()], delta.head.side.in_repository, fallback))
    return lines
