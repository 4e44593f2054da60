"""The review matrix's unsafe rows (`kcm review --quick`, what `kcm verify` runs), by kcm hunt's route against
TLC breadth first alone on the same rows, interleaved in the same run.

    python -m kcm.tools.bench.review [--rounds 2] [--workers 2]

Both sides fill the same rows with the same number of workers: the route (`review_row(quick=True)`: Z3 BMC on
a shallow known bug, TLC breadth first otherwise) and the baseline (`tlc_row(quick=True)`: TLC breadth first
on every row, what the quick rows were before the route). Issue 28's target: the unsafe rows in at most 60 s
together on 2 cores.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kcm.conformance.review import RowResult, review_row, tlc_row
from kcm.spec.designs import VARIANTS, Variant
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    ratio,
    table,
    write_summary,
)

NAME = "review"
TARGET_SECONDS = 60.0
Fill = Callable[[Variant, Path], RowResult]


def _route(variant: Variant, out: Path) -> RowResult:
    return review_row(variant, out, quick=True)


def _baseline(variant: Variant, out: Path) -> RowResult:
    return tlc_row(variant, out, quick=True)


def matrix(fill: Fill, variants: Sequence[Variant], workers: int, out: Path) -> tuple[float, list[RowResult]]:
    """Wall seconds of the rows filled `workers` at a time, and the rows; every row must break what its design
    is documented to break."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(lambda v: fill(v, out), variants))
    seconds = time.perf_counter() - started
    for row in rows:
        if row.verdict != "as expected":
            raise SystemExit(f"bench review: {row.variant.label}: {row.verdict} ({'; '.join(row.errors)})")
    return seconds, rows


def _cell(row: RowResult) -> str:
    cell = next(iter(row.cells.values()))
    steps = (cell.trace_length or 1) - 1
    return f"{row.seconds:.1f} ({steps}, {cell.engine or 'tlc-bfs'})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "The review matrix's unsafe rows: kcm hunt's route against TLC alone.")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="rows at a time (default 2)")
    args = parser.parse_args(argv)
    variants = [v for v in VARIANTS if v.expected]
    out = console()
    print_header(out, "kcm review: the unsafe rows", command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    totals: dict[str, list[float]] = {"route": [], "tlc": []}
    cells: dict[str, dict[str, list[str]]] = {"route": {}, "tlc": {}}
    with tempfile.TemporaryDirectory(prefix="kcm-bench-review-") as tmp:
        for round_ in range(1 if args.quick else args.rounds):
            for side, fill in (("tlc", _baseline), ("route", _route)):
                seconds, rows = matrix(fill, variants, args.workers, Path(tmp) / f"{side}{round_}")
                totals[side].append(seconds)
                for row in rows:
                    cells[side].setdefault(row.variant.label, []).append(_cell(row))
                out.print(f"round {round_ + 1}: {side}: {seconds:.1f} s")
    shown = table(f"{len(variants)} unsafe rows, {args.workers} workers: seconds (steps, engine) per round",
                  ["row", "TLC breadth first alone", "kcm hunt's route"])
    for variant in variants:
        shown.add_row(variant.label, " / ".join(cells["tlc"][variant.label]),
                      " / ".join(cells["route"][variant.label]))
    route, tlc = statistics.median(totals["route"]), statistics.median(totals["tlc"])
    shown.add_row("all rows (wall)", " / ".join(f"{s:.1f}" for s in totals["tlc"]),
                  " / ".join(f"{s:.1f}" for s in totals["route"]) + f": {ratio(route, tlc)}")
    out.print(shown)
    print_footer(out)
    write_summary(args.summary, [Figure(NAME, f"the {len(variants)} unsafe review rows, {args.workers} workers",
                                        route, "s", f"<= {TARGET_SECONDS:g} s", route <= TARGET_SECONDS,
                                        f"{ratio(route, tlc)} TLC alone")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
