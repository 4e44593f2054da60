"""Bigger instances benchmark: how far TLC's breadth-first search gets on the instances beyond `ci` (`ci3`: the ci
faults on 3 brokers; `ci2p`: 2 partitions; `deep`: the split fetch protocol and UpdateMetadata) within a budget
each, depth by depth, beside `ci` exhausted in the same run (the baseline: the instance whose size is known).

Run it with `python -m kcm.tools.bench.instances [--budget S] [--model NAME ...]` (`--quick`: 60 s each).

For each instance: whether it was exhausted, its distinct states, the depth reached and the states found by the
time the search first reached each depth (TLC's progress, one report per 2,000 states), and the factor by which
its last levels grew. Where an instance is not exhausted, an estimate of its size if its graph had ci's shape:
its states at the deepest depth both reached, over ci's there, times ci's whole size; and the hours that would
take at the rate measured. ci's levels grow to a peak and then shrink; an instance whose levels still grow
faster than ci's did at that depth is larger than this estimate, so it is the least it would cost, not a forecast.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from rich.console import Console

from kcm.spec.tlc.modelcheck import check_model, model_knobs
from kcm.spec.tlc.runner import TlcResult
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    progress,
    ratio,
    table,
    write_summary,
)

NAME = "instances"
INSTANCES = ("ci3", "ci2p", "deep")
TARGET_SECONDS = 1800.0
# The levels whose growth factor is averaged for the estimate.
LAST_LEVELS = 3


@dataclass(frozen=True)
class Instance:
    model: str
    result: TlcResult
    wall: float

    @property
    def rate(self) -> float:
        return self.result.distinct_states / max(self.result.search_seconds, 1e-3)

    def levels(self) -> list[tuple[int, int]]:
        """(depth, states of the levels above it): the distinct states when the search first reached each depth."""
        return [(depth, distinct) for depth, distinct, _ in self.result.growth]

    def growth_factor(self) -> float | None:
        """The mean factor by which the last whole levels grew (None: too few levels measured)."""
        levels = self.levels()
        sizes = [b - a for (_, a), (_, b) in pairwise(levels) if b > a]
        factors = [later / earlier for earlier, later in pairwise(sizes) if earlier > 0]
        recent = factors[-LAST_LEVELS:]
        return sum(recent) / len(recent) if recent else None

    def reached(self, depth: int) -> int | None:
        """The distinct states when the search first reached `depth` (None: it did not, or too early to say)."""
        return next((distinct for level, distinct in self.levels() if level == depth), None)

    def estimate(self, baseline: Instance) -> tuple[int, int] | None:
        """(the depth compared, the distinct states) if this instance's graph had the shape of the baseline's."""
        if self.result.complete:
            return None
        common = [depth for depth, _ in self.levels() if baseline.reached(depth) and depth < baseline.result.depth]
        if not common:
            return None
        depth = common[-1]
        ours, theirs = self.reached(depth), baseline.reached(depth)
        assert ours is not None and theirs is not None
        return depth, max(round(ours / theirs * baseline.result.distinct_states), self.result.distinct_states)


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "TLC breadth first on the bigger instances, depth by depth.")
    parser.add_argument("--workers", type=int, default=2, help="TLC workers (default 2)")
    parser.add_argument("--heap", type=int, default=4096, help="TLC heap in MiB (default 4096)")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per instance (default 600)")
    parser.add_argument("--model", action="append", help="only this instance (repeatable)")
    args = parser.parse_args(argv)
    budget = 60.0 if args.quick else args.budget
    out = console()
    given = list(sys.argv[1:] if argv is None else argv)
    print_header(out, "kcm bigger instances benchmark", command_line(NAME, given))
    runs = []
    with progress(out) as bar:
        chosen = ["ci", *(args.model or INSTANCES)]
        task = bar.add_task("instances", total=len(chosen))
        for model in chosen:
            bar.update(task, description=f"TLC on {model}")
            started = time.perf_counter()
            outcome = check_model(model, model_knobs(model), workers=args.workers, heap_mb=args.heap,
                                  budget_seconds=None if model == "ci" else budget)
            runs.append(Instance(model, outcome.result, time.perf_counter() - started))
            bar.advance(task)
    _report(out, runs, budget)
    print_footer(out)
    write_summary(args.summary, _figures(runs))
    return 0 if all(run.result.violated is None for run in runs) else 1


def _report(out: Console, runs: list[Instance], budget: float) -> None:
    baseline = runs[0]
    summary = table(f"TLC breadth first, {budget:.0f} s per instance (ci: to its end, the baseline)",
                    ["model", "outcome", "distinct states", "depth", "states/s", "vs ci's states/s",
                     "last levels' growth", "at least (ci's shape)"], text_columns=2)
    for run in runs:
        outcome = ("violated " + str(run.result.violated)) if run.result.violated else \
            "exhausted" if run.result.complete else "not exhausted"
        factor = run.growth_factor()
        estimate = run.estimate(baseline)
        shape = "" if estimate is None else (
            f"{estimate[1]:,} states, {estimate[1] / max(run.rate, 1e-3) / 3600:,.1f} h at this rate "
            f"({ratio(run.reached(estimate[0]) or 0, baseline.reached(estimate[0]) or 1)} ci at depth {estimate[0]})")
        summary.add_row(run.model, outcome, f"{run.result.distinct_states:,}", str(run.result.depth),
                        f"{run.rate:,.0f}", ratio(run.rate, baseline.rate), f"{factor:.2f}x" if factor else "",
                        shape)
    out.print(summary)
    for run in runs:
        levels = table(f"{run.model}: distinct states when the search first reached each depth",
                       ["depth", "distinct states", "seconds"], text_columns=0)
        for depth, distinct, seconds in run.result.growth:
            levels.add_row(str(depth), f"{distinct:,}", f"{seconds:.0f}")
        out.print(levels)


def _figures(runs: list[Instance]) -> list[Figure]:
    baseline = runs[0]
    figures = [Figure(NAME, "ci exhausted (baseline)", baseline.wall, "s", "", None,
                      f"{baseline.result.distinct_states:,} states, depth {baseline.result.depth}")]
    for run in runs[1:]:
        met = run.result.complete and run.wall <= TARGET_SECONDS
        figures.append(Figure(NAME, f"{run.model}: {'exhausted' if run.result.complete else 'not exhausted'}",
                              run.wall, "s", f"exhausted <= {TARGET_SECONDS:.0f} s", met,
                              f"{run.result.distinct_states:,} states, depth {run.result.depth}, "
                              f"{ratio(run.rate, baseline.rate)} ci's states/s"))
    return figures


if __name__ == "__main__":
    sys.exit(main())
