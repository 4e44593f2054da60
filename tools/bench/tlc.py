"""TLC benchmark: distinct states, states per second and wall time of the `ci` and `deep` models and of each
reproduction of the historical bugs, against TLC's raw speed on a trivial spec measured in the same run, and
beside the public reference figures of hachikuji/kafka-specification.

Run it with `python -m kcm.tools.bench.tlc` (`--quick`: the reproductions only, without `ci` and `deep`).

The baseline: a generated spec of two counters (`x, y \\in 0..N-1`, each step increments one), checked by
the same TLC with the same heap and workers: its states/s is what TLC does with nearly free states, its
wall time on a 100-state version is TLC's fixed cost (JVM start, parsing). Each model is then reported as
states/s against that raw rate: how much a state of our spec costs.

Every model is run once through `kcm.spec.tlc.modelcheck.check_model` (what `kcm check` runs), with the knobs its
configuration sets; a reproduction must end in the violation its configuration announces. `--coverage` runs each
model a second time with TLC's action coverage (`kcm check --coverage`) and reports its cost against the plain
run of the same model in the same session.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from kcm.spec.tlc.modelcheck import check_model, model_knobs, models, vocabulary_name
from kcm.spec.tlc.runner import TlcResult, run_tlc
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

NAME = "tlc"
CI_TARGET_SECONDS = 300.0
REPRODUCTION_TARGET_SECONDS = 60.0
EXPECT = re.compile(r"Expect (\w+) to be violated")
# hachikuji/kafka-specification with TLC 2.15 on a machine like ours (the figures of issue 3).
REFERENCE = {
    "kafka1211": ("HW truncation loses committed data: 2 replicas, log size 2, 2 records, 2 leader epochs",
                  10, 1_530, 2.0),
    "kip279": ("the KIP-279 hole with 3 replicas", 11, 185_115, 18.0),
}


@dataclass(frozen=True)
class Run:
    model: str
    result: TlcResult
    wall: float
    expected: str | None
    covered: float | None = None  # wall seconds of the same check with coverage

    @property
    def rate(self) -> float:
        """Distinct states per second of the search itself (TLC's start and parsing left out)."""
        seconds = self.result.search_seconds
        return self.result.distinct_states / seconds if seconds > 0 else 0.0

    @property
    def outcome(self) -> str:
        if not self.result.complete:
            return f"no violation within the budget ({self.result.seconds:.0f} s), not exhausted"
        if self.result.violated is None:
            return "holds"
        return f"{vocabulary_name(self.result.violated)} in {len(self.result.trace) - 1} steps"

    @property
    def as_announced(self) -> bool:
        return self.result.violated == self.expected


def baseline(folder: Path, side: int, workers: int, heap_mb: int) -> TlcResult:
    module = folder / "Grid.tla"
    module.write_text(
        "---- MODULE Grid ----\nEXTENDS Naturals\nCONSTANT N\nVARIABLES x, y\n"
        "Init == x = 0 /\\ y = 0\n"
        "Next == (x < N - 1 /\\ x' = x + 1 /\\ y' = y) \\/ (y < N - 1 /\\ y' = y + 1 /\\ x' = x)\n"
        "====\n"
    )
    config = folder / f"Grid{side}.cfg"
    config.write_text(f"CONSTANT N = {side}\nINIT Init\nNEXT Next\n")
    return run_tlc(module, config, workers=workers, heap_mb=heap_mb, extra_args=("-deadlock",))


def selected_models(quick: bool, only: list[str] | None) -> list[tuple[str, str | None]]:
    """(model, the invariant its configuration announces as violated, or None): `ci` and `deep` (not with
    --quick), every reproduction and the fixed designs on their models; or the models named."""
    chosen = []
    for name, model in models().items():
        expected = EXPECT.search(model.config.read_text())
        wanted = (name in ("ci", "deep") and not quick) or expected or name.endswith("fixed") or name == "kip320"
        if (only and name in only) or (not only and wanted):
            chosen.append((name, expected.group(1) if expected else None))
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "TLC on the spec's models, against TLC's raw speed on a trivial spec.")
    parser.add_argument("--workers", type=int, default=2, help="TLC workers (default 2)")
    parser.add_argument("--heap", type=int, default=4096, help="TLC heap in MiB (default 4096)")
    parser.add_argument("--model", action="append", help="only this model (repeatable)")
    parser.add_argument("--coverage", action="store_true",
                        help="also run each model with TLC's action coverage, and report its cost")
    parser.add_argument("--deep-budget", type=float, default=300.0,
                        help="seconds TLC may spend on deep (default 300; it is not exhausted in that time)")
    args = parser.parse_args(argv)
    out = console()
    print_header(out, "kcm TLC benchmark", command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    chosen = selected_models(args.quick, args.model)
    with tempfile.TemporaryDirectory(prefix="kcm-bench-tlc-") as tmp:
        fixed = baseline(Path(tmp), 10, args.workers, args.heap)
        raw = baseline(Path(tmp), 300 if args.quick else 1000, args.workers, args.heap)
        raw_rate = raw.distinct_states / max(raw.search_seconds, 1e-3)
        out.print(f"baseline: TLC on a {raw.distinct_states:,}-state grid: {raw_rate:,.0f} distinct states/s; "
                  f"fixed cost (a 100-state grid): {fixed.seconds:.1f} s; {args.workers} workers, "
                  f"{args.heap} MiB heap")
        runs = []
        with progress(out) as bar:
            task = bar.add_task("models", total=len(chosen))
            for name, expected in chosen:
                bar.update(task, description=f"TLC on {name}")
                started = time.perf_counter()
                outcome = check_model(name, model_knobs(name), workers=args.workers, heap_mb=args.heap,
                                      trace_out=Path(tmp) / f"{name}.jsonl",
                                      budget_seconds=args.deep_budget if name == "deep" else None)
                wall = time.perf_counter() - started
                covered = None
                if args.coverage and name != "deep":
                    started = time.perf_counter()
                    check_model(name, model_knobs(name), workers=args.workers, heap_mb=args.heap,
                                trace_out=Path(tmp) / f"{name}-coverage.jsonl", coverage=True)
                    covered = time.perf_counter() - started
                runs.append(Run(name, outcome.result, wall, expected, covered))
                bar.advance(task)
    _report(out, runs, raw_rate, fixed.seconds)
    print_footer(out)
    write_summary(args.summary, _figures(runs, raw_rate))
    return 0 if all(run.as_announced for run in runs) else 1


def _report(out: Console, runs: list[Run], raw_rate: float, fixed: float) -> None:
    result = table("TLC per model (breadth first; a violation ends the search)",
                   ["model", "knobs", "outcome", "distinct states", "depth", "states/s (search)", "vs raw TLC",
                    "search s", "wall s"],
                   text_columns=3)
    for run in runs:
        result.add_row(run.model, model_knobs(run.model).describe(),
                       run.outcome + ("" if run.as_announced else " (NOT as announced)"),
                       f"{run.result.distinct_states:,}", str(run.result.depth), f"{run.rate:,.0f}",
                       ratio(run.rate, raw_rate), f"{run.result.search_seconds:.1f}", f"{run.wall:.1f}")
    out.print(result)
    by_model = {run.model: run for run in runs}
    reference = table("beside the public reference (hachikuji/kafka-specification, TLC 2.15)",
                      ["case", "reference", "ours"], text_columns=3)
    for model, (case, steps, states, seconds) in REFERENCE.items():
        ours = by_model.get(model)
        mine = "not run" if ours is None else (
            f"{ours.outcome}, {ours.result.distinct_states:,} distinct states, {ours.wall:.1f} s")
        reference.add_row(f"{case} ({model})", f"{steps} steps after {states:,} distinct states, ~{seconds:g} s",
                          mine)
    out.print(reference)
    out.print(f"TLC's fixed cost per run (JVM, parsing): {fixed:.1f} s, included in every wall time")
    covered = [run for run in runs if run.covered is not None]
    if covered:
        cost = table("TLC's action coverage (kcm check --coverage) against the plain check of the same model",
                     ["model", "plain wall s", "with coverage wall s", "cost"], text_columns=1)
        for run in covered:
            cost.add_row(run.model, f"{run.wall:.1f}", f"{run.covered:.1f}", ratio(run.covered or 0.0, run.wall))
        out.print(cost)


def _figures(runs: list[Run], raw_rate: float) -> list[Figure]:
    figures = [Figure(NAME, "raw TLC (grid)", raw_rate, "states/s", "", None, "(baseline)")]
    for run in runs:
        if run.model == "deep":
            target, limit = "", None
        else:
            limit = CI_TARGET_SECONDS if run.model == "ci" else REPRODUCTION_TARGET_SECONDS
            target = f"<= {limit:.0f} s"
        met = None if limit is None else run.wall <= limit and run.as_announced
        figures.append(Figure(NAME, f"{run.model}: {run.outcome}", run.wall, "s", target, met,
                              f"{run.result.distinct_states:,} states, {ratio(run.rate, raw_rate)} raw TLC's states/s"))
    figures += [Figure(NAME, f"{run.model}: coverage cost", (run.covered or 0.0) / run.wall, "x", "", None,
                       f"{run.covered:.1f} s with coverage, {run.wall:.1f} s without")
                for run in runs if run.covered is not None]
    return figures


if __name__ == "__main__":
    sys.exit(main())
