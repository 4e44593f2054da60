"""Where bounded model checking spends its time on the deep known bugs (the searches of three brokers),
depth by depth, against TLC's whole search on the same reproduction model in the same run.

    python -m kcm.tools.bench.bmc                        # every deep known bug, solver seed 0
    python -m kcm.tools.bench.bmc --model kip279 --seeds 0,1,2 --dimacs out/

A shortest counterexample at depth d needs two answers whatever the method: no counterexample at depth
d - 1 (the refutation) and one at depth d. The table shows what each cost inside the search, so a run
says how far the last two queries alone are from TLC's time. `--dimacs DIR` also writes both queries as
CNF (DIMACS), the input of any SAT solver, to compare other solvers on exactly BMC's formulas.

Seeds move the solver's times a lot (`smt.random_seed` and `sat.random_seed`): give several. The searches
take minutes each, so this benchmark is not among the ones `python -m kcm.tools.bench` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from kcm.spec.z3.bmc import BMC_BUGS, BmcBug, depth_query, dimacs
from kcm.spec.z3.solver import z3
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
from kcm.tools.bench.z3 import tlc_seconds

NAME = "bmc"


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def deep_bugs(model: str | None) -> list[BmcBug]:
    bugs = [bug for bug in BMC_BUGS if bug.story.deep and (model is None or bug.model == model)]
    if not bugs:
        known = ", ".join(bug.model for bug in BMC_BUGS if bug.story.deep)
        raise SystemExit(f"bench bmc: --model {model!r} is not a deep known bug's model (known: {known})")
    return bugs


def write_queries(bug: BmcBug, folder: Path) -> list[Path]:
    """The refutation one step short of the counterexample and the satisfiable query at its depth."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for depth, verdict in ((bug.story.depth - 1, "unsat"), (bug.story.depth, "sat")):
        path = folder / f"{bug.model}-depth{depth}-{verdict}.cnf"
        path.write_text(dimacs(depth_query(bug, depth)))
        written.append(path)
    return written


def search(bug: BmcBug, seed: int) -> tuple[float, float, list[float]]:
    """Wall seconds, CPU seconds and the seconds of each depth of the search with this solver seed."""
    z3.set_param("smt.random_seed", seed)
    z3.set_param("sat.random_seed", seed)
    cpu, wall = time.process_time(), time.perf_counter()
    result = bug.run()
    if result.invariant != bug.invariant or result.depth != bug.story.depth:
        raise SystemExit(f"bench bmc: {bug.label}: expected {bug.invariant} at depth {bug.story.depth}, "
                         f"got {result.invariant} at depth {result.depth}")
    return time.perf_counter() - wall, time.process_time() - cpu, result.per_depth


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "Bounded model checking on the deep known bugs, depth by depth, beside TLC.")
    parser.add_argument("--model", help="only the known bug of this reproduction model (e.g. kip279)")
    parser.add_argument("--seeds", type=_seeds, default=[0], help="solver seeds, comma-separated (default 0)")
    parser.add_argument("--dimacs", type=Path, metavar="DIR", help="also write the last two queries as CNF here")
    args = parser.parse_args(argv)
    bugs = deep_bugs(args.model)
    out = console()
    print_header(out, "kcm BMC depth by depth", command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    figures: list[Figure] = []
    for bug in bugs:
        tlc_s, note = tlc_seconds(bug.model)
        if tlc_s is None:
            raise SystemExit(f"bench bmc: TLC on {bug.model}: {note}")
        rows = table(f"{bug.label} (depth {bug.story.depth}); baseline TLC on MC{bug.model}: {tlc_s:.1f} s, {note}",
                     ["seed", "search s", "CPU s", "vs TLC", f"depths 1-{bug.story.depth - 2} s",
                      f"refute {bug.story.depth - 1} s", f"find {bug.story.depth} s", "last two vs TLC"])
        totals = []
        for seed in args.seeds:
            wall, cpu, per_depth = search(bug, seed)
            totals.append(wall)
            last_two = per_depth[-2] + per_depth[-1]
            rows.add_row(str(seed), f"{wall:.1f}", f"{cpu:.1f}", ratio(wall, tlc_s), f"{sum(per_depth[:-2]):.1f}",
                         f"{per_depth[-2]:.1f}", f"{per_depth[-1]:.1f}", ratio(last_two, tlc_s))
        out.print(rows)
        median = statistics.median(totals)
        figures.append(Figure(NAME, f"BMC to {bug.invariant}, {bug.label} (median of {len(totals)} seeds)",
                              median, "s", "faster than TLC", median < tlc_s, f"{ratio(median, tlc_s)} TLC"))
        if args.dimacs is not None:
            for path in write_queries(bug, args.dimacs):
                out.print(f"wrote {path}")
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
