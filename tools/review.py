"""`kcm review`: the design-review matrix, knob setting x invariant, filled by TLC.

    kcm review [--quick | --liveness] [--json] [--workers N] [--out DIR] [--row LABEL ...] [--heap MIB]

Each row is a design variant (a knob setting, kcm.spec.designs) checked on one model of spec/: the smallest
instance that shows what the variant does (the `ci` model for the safe defaults). Each column is an invariant
(`TypeOK` and the twelve of the vocabulary). A cell holds (TLC explored the model exhaustively without breaking
it: the distinct states are shown) or is violated (the length of TLC's shortest counterexample and the trace
written in format v2 under `--out`). Rows run in parallel, one TLC process (one TLC worker) per `--workers`,
longest first; kcm.conformance.review fills the matrix, and says what a row costs.

`--quick` (what `kcm verify` runs) takes each unsafe row to its first documented violation by `kcm hunt`'s
route, one engine per core the row has: Z3 BMC on a shallow known bug (KAFKA-1211, the zombie controller, the
stale leader epoch, unclean election), TLC breadth first otherwise; the counterexample is a shortest one and
its cell names the engine. A safe row is checked on every invariant as without `--quick`.

`--liveness` fills the other matrix, design x progress property (spec/KafkaProperties.tla): which knob costs
which property. Its rows are liveness models of spec/ under a knob setting, or broken variants of them (a
controller without failover, a fairness removed) that show each property failing; a cell holds or is violated
(the lasso written under `--out`), `-` where the model does not check the property.

This module parses the arguments, writes review.json and review.md (and the page of `--html`) and prints.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Final

from kcm.conformance.ci_results import review_cases
from kcm.conformance.review import RowResult, markdown, review, select, to_json
from kcm.spec.atomic_output import check_writable, write_output
from kcm.spec.designs import COLUMNS, LIVENESS_VARIANTS, VARIANTS, design_rows
from kcm.spec.tlc.modelcheck import PROPERTIES, ModelError, render_counterexample
from kcm.spec.tlc.runner import DEFAULT_HEAP_MB, MIN_HEAP_MB, TlcError, TlcSetupError, find_tools
from kcm.spec.verdicts import UNKNOWN, UNOBSERVED
from kcm.tools.ci_option import add_junit_option, check_junit, publish
from kcm.tools.design_option import add_design_option, chosen_design
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, UsageError, at_least
from kcm.tools.outputs import default_out, out_files
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option

DEFAULT_OUT: Final = default_out("review")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("review", help="the design-review matrix: knob setting x invariant, by TLC")
    parser.add_argument("--liveness", action="store_true",
                        help="the progress matrix: design x temporal property (liveness models of spec/)")
    parser.add_argument("--quick", action="store_true",
                        help="each unsafe row to its first documented violation, by kcm hunt's route (seconds)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--coverage", action="store_true",
                        help="TLC counts each action's states in each row's exhaustive run; a row where an action "
                             "never fires that its model does not say never fires is unexpected")
    parser.add_argument("--workers", type=at_least(1), default=1, help="TLC processes at a time (default 1)")
    parser.add_argument("--out", default=None,
                        help=f"folder for counterexamples, review.json and review.md (default {DEFAULT_OUT}/)")
    parser.add_argument("--row", dest="rows", action="append", metavar="LABEL",
                        help="only this row (repeatable): " + "; ".join(v.label for v in VARIANTS)
                             + "; with --liveness: " + "; ".join(v.label for v in LIVENESS_VARIANTS))
    parser.add_argument("--heap", type=at_least(MIN_HEAP_MB, " MiB"), default=None,
                        help=f"each TLC's heap in MiB, at least {MIN_HEAP_MB} (default KCM_TLC_HEAP_MB or "
                             f"{DEFAULT_HEAP_MB})")
    add_design_option(parser, "one row per model its manifest names, `as expected` when it breaks what the "
                              "manifest says")
    add_option(parser)
    html_option(parser)
    add_junit_option(parser, "cell")
    parser.set_defaults(handler=cmd_review)


def cmd_review(args: argparse.Namespace) -> int:
    if args.html and args.liveness:
        raise UsageError("--html shows the invariant matrix; the progress matrix is in review-liveness.md")
    if args.quick and args.liveness:
        raise UsageError("--quick looks at the invariant matrix's unsafe rows; --liveness checks properties")
    name = "review-liveness" if args.liveness else "review"
    try:
        design = chosen_design(args)
        if design is not None and (args.liveness or args.rows):
            raise UsageError("--design reviews the design's own rows (its models): not with --liveness or --row")
        variants = list(design_rows(design)) if design is not None else select(args.rows, args.liveness)
        # Before the matrix: TLC and every output, so that an hour of review is not lost to a bad --out.
        find_tools()
        out = out_files(args.out, "review", [f"{name}.json", f"{name}.md"])
        if args.html:
            check_writable(args.html)
        check_junit(args)
        started = time.monotonic()
        with Reporter(args.progress) as reporter:
            rows = review(variants, out, args.workers, args.heap, reporter, quick=args.quick,
                          liveness=args.liveness, coverage=args.coverage)
    except (TlcSetupError, TlcError, ModelError) as err:
        raise UsageError(str(err)) from err
    seconds = time.monotonic() - started
    columns = PROPERTIES if args.liveness else COLUMNS
    document = to_json(rows, seconds, columns)
    # Shown before the files are written: a write that fails then loses nothing of the matrix.
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(markdown(rows, columns))
        _print_unwritten(rows)
    write_output(out / f"{name}.json", json.dumps(document, indent=2) + "\n")
    write_output(out / f"{name}.md", markdown(rows, columns) + "\n")
    if args.html:
        kinds.review_page(document, out, Path(args.html))
    publish(args, "kcm review", review_cases(document), f"### kcm {name}\n\n" + markdown(rows, columns))
    if not args.json:
        plural = "" if len(rows) == 1 else "s"
        print(f"\n{len(rows)} row{plural}, {sum(r.runs for r in rows)} runs, {seconds:.0f} s; "
              f"counterexamples and {name}.json in {out}/")
    return EXIT_USAGE if any(row.verdict in (UNKNOWN, UNOBSERVED) for row in rows) else EXIT_OK


def _print_unwritten(rows: list[RowResult]) -> None:
    for row in rows:
        for cell in row.cells.values():
            if cell.unwritten and cell.counterexample:
                print(f"\n{row.variant.label}: {cell.invariant} is violated by this counterexample, not written "
                      f"({cell.unwritten}):")
                print(render_counterexample(cell.counterexample))
