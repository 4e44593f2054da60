"""`kcm hunt` benchmark: seconds to the first counterexample of each known bug, engine by engine, against the
public models' TLC time measured in the same run (issue 28).

    python -m kcm.tools.bench.hunt                                  # the issue's published figures as reference
    python -m kcm.tools.bench.hunt --public DIR --rounds 2          # DIR: a checkout of hachikuji/kafka-specification
    python -m kcm.tools.bench.hunt --bug kafka1211 --seeds 1,2,3,4

Each engine runs as `kcm hunt` races it (kcm.conformance.explore.hunt: its own process, stopped at the
budget), so every time includes the process's start: TLC breadth first (`kcm check`'s route), TLC's simulation
mode from each seed, Z3 bounded model checking of the known bug's story, and `kcm hunt` itself (its
portfolio on `--cores`, then the shortening). The rounds are interleaved: bug by bug, every engine, then the
next round, so that the load of the machine falls on all alike.

The baseline is the public model of the same bug (hachikuji/kafka-specification, which is not ours to ship:
give `--public` the folder of a checkout) under TLC with one worker, with the bounds of issue 28: 2 replicas,
log size 2, 2 records, 2 leader epochs (3 replicas for the deep case), `StrongIsr` checked. Without
`--public`, the issue's published figures are printed as the reference, and no ratio is claimed.

The engines run for minutes on the deep bugs, so this benchmark is not among the ones `python -m
kcm.tools.bench` runs (as `bench.bmc`). Figures and what they say: docs/hunt.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rich.console import Console

from kcm.conformance.explore.hunt import BFS, BMC, SIMULATE, STEERED, Engine, Hunt, race
from kcm.conformance.explore.route import SIMULATION_DEPTH, hunt_races
from kcm.spec.tlc.modelcheck import model_knobs
from kcm.spec.tlc.runner import run_tlc
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
from kcm.tools.progress import Reporter

NAME = "hunt"
FIRST_TARGET = 0.5  # time to the first counterexample, against the public model's TLC time
SHORTEST_TARGET = 1.0  # the shortest within twice the first's target


@dataclass(frozen=True)
class Bug:
    label: str
    model: str  # kcm's reproduction model
    public_module: str  # the public spec's module that shows it
    replicas: int
    published: str  # issue 28's figures for the public model (TLC 2.15, load 5-7 on 2 cores)


BUGS: Final = (
    Bug("KAFKA-1211 (HW truncation)", "kafka1211", "KafkaTruncateToHighWatermark", 2, "7.8 / 8.4 s, 1,789 states"),
    Bug("KIP-101 hole (the KIP-279 case)", "kip101", "Kip101", 2, "13.0 / 15.4 s, 4,083 states"),
    Bug("KIP-279 with 3 replicas (the KIP-320 case)", "kip279", "Kip279", 3, "71.4 / 69.9 s, 222,811 states"),
)


@dataclass
class Timing:
    """One engine's run on one bug: seconds, and the counterexample's steps (None: none found)."""

    seconds: float
    steps: int | None
    note: str = ""


def public_tlc(folder: Path, bug: Bug, budget: float) -> Timing:
    """TLC on the public model of the bug, one worker, from a copy of the checkout (TLC writes beside it)."""
    with tempfile.TemporaryDirectory(prefix="kcm-bench-public-") as tmp:
        work = Path(tmp)
        for source in folder.glob("*.tla"):
            shutil.copy(source, work / source.name)
        # Model values: the public spec asks that its `None` is no replica.
        replicas = ", ".join(f"r{i}" for i in range(1, bug.replicas + 1))
        config = work / f"{bug.public_module}.cfg"
        config.write_text(f"CONSTANTS\n  Replicas = {{{replicas}}}\n  LogSize = 2\n  MaxRecords = 2\n"
                          "  MaxLeaderEpoch = 2\nINIT Init\nNEXT Next\nINVARIANT StrongIsr\n")
        started = time.monotonic()
        result = run_tlc(work / f"{bug.public_module}.tla", config, extra_args=("-deadlock",),
                         budget_seconds=budget)
    steps = len(result.trace) - 1 if result.violated else None
    return Timing(time.monotonic() - started, steps, f"{result.distinct_states:,} states")


def engine_run(hunt: Hunt, engine: Engine, budget: float, also: Sequence[Engine] = ()) -> Timing:
    """One engine alone, as the race runs it (or raced against copies of itself from other seeds: `also`)."""
    outcome = race(hunt, [engine, *also], budget)
    answer = outcome.winner
    found = answer is not None and answer.invariant is not None
    return Timing(outcome.seconds, answer.steps if found and answer is not None else None,
                  "" if found else next(iter(outcome.fates.values()), ""))


def engines_of(hunt: Hunt, seeds: list[int]) -> list[Engine]:
    engines = [Engine(BFS), *(Engine(SIMULATE, seed, SIMULATION_DEPTH) for seed in seeds)]
    return engines + ([Engine(BMC)] if hunt.known_bug() is not None else [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "Seconds to the first counterexample of each known bug, engine by engine.")
    parser.add_argument("--public", metavar="DIR", help="a checkout of hachikuji/kafka-specification")
    parser.add_argument("--bug", action="append", choices=[bug.model for bug in BUGS], help="only this bug")
    parser.add_argument("--seeds", default="1,2,3", help="TLC simulation seeds (default 1,2,3)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (default 1)")
    parser.add_argument("--budget", type=float, default=180.0, help="seconds per engine run (default 180)")
    parser.add_argument("--cores", type=int, default=2, help="kcm hunt's engines at once (default 2)")
    parser.add_argument("--steered", metavar="SEEDS", default=None,
                        help="also the steered search, one process per seed (e.g. 1,2), not raced by kcm hunt")
    parser.add_argument("--engines", choices=("all", "none"), default="all",
                        help="none: only the public model and the steered search (default all)")
    args = parser.parse_args(argv)
    out = console()
    print_header(out, "kcm hunt benchmark", command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    bugs = [bug for bug in BUGS if not args.bug or bug.model in args.bug]
    runs: dict[tuple[str, str], list[Timing]] = {}
    with Reporter("plain") as reporter:
        for round_ in range(1, args.rounds + 1):
            for bug in bugs:
                _round(reporter, runs, bug, seeds, args, round_)
    _report(out, bugs, runs, args.public is not None)
    print_footer(out)
    write_summary(args.summary, _figures(bugs, runs))
    return 0


def _round(reporter: Reporter, runs: dict[tuple[str, str], list[Timing]], bug: Bug, seeds: list[int],
           args: argparse.Namespace, round_: int) -> None:
    public, budget, cores = args.public, args.budget, args.cores
    hunt = Hunt(bug.model, model_knobs(bug.model))
    if public is not None:
        runs.setdefault((bug.model, "public TLC"), []).append(public_tlc(Path(public), bug, budget))
    if args.steered:
        # One process per seed, the first to fail wins (issue 28: "on both cores").
        engines = [Engine(STEERED, int(seed)) for seed in args.steered.split(",")]
        reporter.line(f"round {round_}: {bug.model}: {STEERED} x{len(engines)}")
        runs.setdefault((bug.model, f"{STEERED} x{len(engines)}"), []).append(
            engine_run(hunt, engines[0], budget, engines[1:]))
    if args.engines == "none":
        return
    for engine in engines_of(hunt, seeds):
        reporter.line(f"round {round_}: {bug.model}: {engine.name}")
        runs.setdefault((bug.model, engine.name), []).append(engine_run(hunt, engine, budget))
    result = hunt_races(hunt, cores, budget)
    found = result.first.winner
    steps = found.steps if found is not None and found.invariant else None
    winner = found.engine.name if found is not None else "nothing"
    runs.setdefault((bug.model, "kcm hunt: first"), []).append(
        Timing(result.first.seconds, steps, f"{winner} on {cores} core{'s' if cores > 1 else ''}"))
    best = result.shortest
    runs.setdefault((bug.model, "kcm hunt: shortest"), []).append(
        Timing(result.seconds_to_shortest, best.steps if best is not None else None,
               best.engine.name if best is not None else "not within the budget"))


def _shown(timings: list[Timing]) -> str:
    return " / ".join(f"{t.seconds:.1f} s" + (f" ({t.steps} steps)" if t.steps is not None else " (none)")
                      for t in timings)


def _report(out: Console, bugs: list[Bug], runs: dict[tuple[str, str], list[Timing]], public: bool) -> None:
    result = table("seconds to the first counterexample (each round; the process's start included)",
                   ["bug", "engine", "seconds (steps)", "notes", "vs public TLC (median)"], text_columns=4)
    for bug in bugs:
        reference = runs.get((bug.model, "public TLC"))
        base = statistics.median(t.seconds for t in reference) if reference else None
        for (model, engine), timings in runs.items():
            if model != bug.model:
                continue
            mine = statistics.median(t.seconds for t in timings)
            versus = ratio(mine, base) if base and engine != "public TLC" else ""
            notes = "; ".join(sorted({t.note for t in timings if t.note}))
            result.add_row(bug.label, engine, _shown(timings), notes, versus)
        if not public:
            result.add_row(bug.label, "public TLC (issue 28, not measured here)", bug.published, "", "")
    out.print(result)


def _figures(bugs: list[Bug], runs: dict[tuple[str, str], list[Timing]]) -> list[Figure]:
    figures = []
    for bug in bugs:
        reference = runs.get((bug.model, "public TLC"))
        base = statistics.median(t.seconds for t in reference) if reference else None
        for engine, target in (("kcm hunt: first", FIRST_TARGET), ("kcm hunt: shortest", SHORTEST_TARGET)):
            timings = runs.get((bug.model, engine), [])
            if not timings:
                continue
            mine = statistics.median(t.seconds for t in timings)
            met = None if base is None else mine <= target * base
            figures.append(Figure(NAME, f"{bug.model}: {engine}", mine, "s", f"<= {target:g}x public TLC", met,
                                  ratio(mine, base) if base else "no public run"))
    return figures


if __name__ == "__main__":
    sys.exit(main())
