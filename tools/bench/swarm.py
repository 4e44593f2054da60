"""Swarm benchmark: time to the first counterexample of each known bug placed on the 3-broker instance with the ci
faults (`kcm check --model ci3` with the design's knobs), by the swarm of TLC simulations on Spark
(`kcm check --swarm`) on `local[2]` and on `local[1]`, against TLC breadth first with 2 workers (what `kcm check`
runs), all in the same run.

Run it with `python -m kcm.tools.bench.swarm [--repeats N] [--budget S]` (`--quick`: one repetition, three bugs).

Each swarm runs in a Spark session of its own, started before the clock (its start is printed apart); a swarm's
time is from its first task to its first counterexample, the median of `--repeats` runs from different first
seeds (the swarm's luck is its seeds'). TLC's time is its wall time, JVM start included, as `kcm check` pays it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from kcm.conformance.explore.hunt import Hunt
from kcm.conformance.explore.swarm import Ledger, plan, run_swarm
from kcm.conformance.pipeline.session import spark_session
from kcm.spec.designs import KNOWN_BUGS
from kcm.spec.tlc.modelcheck import check_model, vocabulary_name
from kcm.spec.vocabulary import Knobs
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

NAME = "swarm"
MODEL = "ci3"
SPEEDUP_OVER_BFS = 5.0
SPEEDUP_OVER_ONE_CORE = 1.8
SEEDS = 200
MASTERS = ("local[2]", "local[1]")


@dataclass
class Bug:
    knobs: Knobs
    labels: list[str]
    bfs_seconds: float = 0.0
    bfs_found: str | None = None
    bfs_states: int = 0
    swarm: dict[str, list[float]] = field(default_factory=dict)
    found: dict[str, set[str]] = field(default_factory=dict)

    @property
    def setting(self) -> str:
        return self.knobs.describe()

    def median(self, master: str) -> float | None:
        times = self.swarm.get(master)
        return statistics.median(times) if times else None


def bugs(quick: bool) -> list[Bug]:
    """Each distinct knob setting of the known bugs, with the bugs it has."""
    found: dict[Knobs, Bug] = {}
    for bug in KNOWN_BUGS:
        found.setdefault(bug.knobs, Bug(bug.knobs, [])).labels.append(bug.label)
    chosen = list(found.values())
    return chosen[:3] if quick else chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "The swarm on Spark against TLC breadth first, to the first counterexample.")
    parser.add_argument("--repeats", type=int, default=3, help="swarm runs per bug and master (default 3)")
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per search (default 600)")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    out = console()
    print_header(out, "kcm swarm benchmark", command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    chosen = bugs(args.quick)
    starts: dict[str, float] = {}
    with progress(out) as bar, tempfile.TemporaryDirectory(prefix="kcm-bench-swarm-") as tmp:
        task = bar.add_task("bugs", total=len(chosen) * (1 + len(MASTERS)))
        for bug in chosen:
            bar.update(task, description=f"TLC breadth first, {bug.setting}")
            # The instance's own knobs are the defaults: a known bug's are its whole design.
            started = time.perf_counter()
            outcome = check_model(MODEL, bug.knobs, workers=2, budget_seconds=args.budget)
            bug.bfs_seconds = time.perf_counter() - started
            bug.bfs_found = vocabulary_name(outcome.result.violated) if outcome.result.violated else None
            bug.bfs_states = outcome.result.distinct_states
            bar.advance(task)
        for master in MASTERS:
            started = time.perf_counter()
            spark = spark_session(master, app="kcm-bench-swarm")
            starts[master] = time.perf_counter() - started
            try:
                for bug in chosen:
                    bar.update(task, description=f"swarm on {master}, {bug.setting}")
                    hunt = Hunt(MODEL, bug.knobs)
                    for repeat in range(repeats):
                        ledger = Ledger.start(Path(tmp) / f"{master}-{bug.setting}-{repeat}.jsonl", hunt, False)
                        result = run_swarm(spark, hunt, plan(hunt, SEEDS, 1 + 1000 * repeat), ledger, args.budget)
                        if result.winner is not None and result.winner.invariant:
                            bug.swarm.setdefault(master, []).append(result.seconds)
                            bug.found.setdefault(master, set()).add(result.winner.invariant)
                    bar.advance(task)
            finally:
                spark.stop()
    _report(out, chosen, starts, repeats)
    print_footer(out)
    write_summary(args.summary, _figures(chosen))
    return 0


def _report(out: Console, chosen: list[Bug], starts: dict[str, float], repeats: int) -> None:
    result = table(f"first counterexample on {MODEL} (swarm: median of {repeats} runs from different first seeds)",
                   ["knobs", "TLC BFS, 2 workers", "swarm local[2]", "swarm local[1]", "BFS / local[2]",
                    "local[1] / local[2]"], text_columns=1)
    for bug in chosen:
        two, one = bug.median("local[2]"), bug.median("local[1]")
        bfs = f"{bug.bfs_seconds:.1f} s ({bug.bfs_found or 'none'}, {bug.bfs_states:,} states)"
        result.add_row(bug.setting, bfs, _shown(two, bug.found.get("local[2]")), _shown(one, bug.found.get("local[1]")),
                       ratio(bug.bfs_seconds, two) if two else "", ratio(one, two) if one and two else "")
    out.print(result)
    out.print("Spark session start, paid once per command and outside the swarm's times: "
              + ", ".join(f"{master} {seconds:.1f} s" for master, seconds in starts.items()))


def _shown(seconds: float | None, invariants: set[str] | None) -> str:
    if seconds is None:
        return "none within the budget"
    return f"{seconds:.1f} s ({', '.join(sorted(invariants or ()))})"


def _figures(chosen: list[Bug]) -> list[Figure]:
    figures = []
    for bug in chosen:
        two, one = bug.median("local[2]"), bug.median("local[1]")
        if two is None:
            continue
        speedup = bug.bfs_seconds / two
        figures.append(Figure(NAME, f"{bug.setting}: swarm local[2] vs TLC BFS", speedup, "x",
                              f">= {SPEEDUP_OVER_BFS:g}x", speedup >= SPEEDUP_OVER_BFS,
                              f"{two:.1f} s against {bug.bfs_seconds:.1f} s"))
        if one is not None:
            scaling = one / two
            figures.append(Figure(NAME, f"{bug.setting}: local[1] / local[2]", scaling, "x",
                                  f">= {SPEEDUP_OVER_ONE_CORE:g}x", scaling >= SPEEDUP_OVER_ONE_CORE,
                                  f"{one:.1f} s against {two:.1f} s"))
    return figures


if __name__ == "__main__":
    sys.exit(main())
