"""Invariant checker benchmark: events per second of `InvariantChecker.step` and of reading traces, against
plain `json.loads` of the same lines, measured in the same run.

Run it with `python -m kcm.tools.bench.checker` (`--quick` for a smaller corpus).

The corpus: seeds 0..19, 5,000 steps each, `Knobs()` and `SimConfig()`, one trace file per seed (a trace
holds one run) written with `TraceWriter` in a temporary directory. Then, each timed `--repeat` times
(median), over the whole corpus:
  json.loads   reading each file and parsing its lines, nothing else (the baseline);
  read_trace   `read_trace`: parsing, schema validation and the continuity checks;
  check        `InvariantChecker.step` over the events of each run, parsed beforehand (dicts as read
               from the file; the parsing is not timed); one checker per run;
  read+check   `read_trace` feeding the checker, as `kcm check-trace` does.
"""

from __future__ import annotations

import cProfile
import gc
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kcm.conformance.check.invariants import InvariantChecker
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event, TraceWriter, read_trace
from kcm.spec.vocabulary import Knobs
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    median,
    peak_rss_mib,
    print_footer,
    print_header,
    profile_top,
    progress,
    ratio,
    table,
    write_summary,
)

NAME = "checker"
TARGET_EVENTS_PER_SECOND = 200_000


def generate(
    folder: Path, seeds: int, steps: int, advance: Callable[[], None]
) -> tuple[list[Path], int, int]:
    """The corpus files, their events, and how many of those change nothing (no delta, no transition)."""
    paths = []
    events = 0
    quiet = 0
    for seed in range(seeds):
        path = folder / f"seed-{seed}.jsonl"
        with TraceWriter(path) as writer:

            def write(event: Event) -> None:
                nonlocal quiet
                writer.write(event)
                quiet += not (event["state"] or event["args"].get("transitions"))

            simulator = Simulator(seed, Knobs(), SimConfig(), write)
            simulator.bootstrap()
            simulator.run(steps)
            events += writer.lines
        paths.append(path)
        advance()
    return paths, events, quiet


def parse_only(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    with open(path, "rb") as handle:
        for raw in handle:
            json.loads(raw)
            count += 1
    return time.perf_counter() - start, count


def read_validated(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    for _ in read_trace(path):
        count += 1
    return time.perf_counter() - start, count


def check_parsed(
    path: Path, violations: list[int], profiler: cProfile.Profile | None = None
) -> tuple[float, int]:
    with open(path, "rb") as handle:
        events: list[Event] = [json.loads(raw) for raw in handle]
    gc.collect()
    checker = InvariantChecker()
    step = checker.step
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    for event in events:
        step(event)
    elapsed = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
    violations.append(len(checker.report.violations))
    return elapsed, len(events)


def read_and_check(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    report = InvariantChecker().check_all(read_trace(path))
    return time.perf_counter() - start, report.events


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "Invariant checker and trace reader throughput, against json.loads.")
    parser.add_argument(
        "--seeds", type=int, default=None, help="corpus seeds 0..N-1 (default 20, 5 with --quick)"
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="steps per seed (default 5000, 2000 with --quick)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the corpus (median)")
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    out = console()
    print_header(out, "kcm invariant checker benchmark", command_line(NAME, argv_list))
    seeds = args.seeds if args.seeds is not None else (5 if args.quick else 20)
    steps = args.steps if args.steps is not None else (2_000 if args.quick else 5_000)

    violations: list[int] = []
    passes: dict[str, Callable[[Path], tuple[float, int]]] = {
        "json.loads": parse_only,
        "read_trace": read_validated,
        "check": lambda path: check_parsed(path, violations),
        "read+check": read_and_check,
    }
    seconds: dict[str, list[float]] = {name: [] for name in passes}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="kcm-bench-") as tmp:
        with progress(out) as bar:
            task = bar.add_task("generating the corpus", total=seeds)
            start = time.perf_counter()
            paths, events, quiet = generate(Path(tmp), seeds, steps, lambda: bar.advance(task))
            generation = time.perf_counter() - start
        size = sum(p.stat().st_size for p in paths)
        out.print(
            f"corpus  : {seeds} seeds x {steps:,} steps, Knobs(), SimConfig(): {events:,} events "
            f"({quiet / events:.0%} change nothing: the checker's cheap path), "
            f"{size / 2**20:,.1f} MiB of JSON Lines ({size / events:,.0f} bytes/event), generated in "
            f"{generation:.1f} s"
        )
        with progress(out) as bar:
            task = bar.add_task("timing", total=args.repeat * len(passes) * len(paths))
            for _ in range(args.repeat):
                for name, run in passes.items():  # interleaved passes, so that drift hits all alike
                    total = 0.0
                    count = 0
                    for path in paths:
                        gc.collect()
                        elapsed, n = run(path)
                        total += elapsed
                        count += n
                        bar.advance(task)
                    seconds[name].append(total)
                    counts[name] = count
        profiler = None
        if args.profile:
            profiler = cProfile.Profile()
            for path in paths:
                check_parsed(path, [], profiler)

    rates = {name: counts[name] / median(seconds[name]) for name in passes}
    out.print()
    result = table(
        "throughput (median of the passes)",
        ["pass", "events", "seconds", "events/s", "cost per event vs json.loads"],
    )
    for name in passes:
        result.add_row(
            name,
            f"{counts[name]:,}",
            f"{median(seconds[name]):.3f}",
            f"{rates[name]:,.0f}",
            "(baseline)" if name == "json.loads" else ratio(rates["json.loads"], rates[name]),
        )
    out.print(result)
    met = rates["check"] >= TARGET_EVENTS_PER_SECOND
    out.print(
        f"InvariantChecker.step: {rates['check']:,.0f} events/s, "
        f"{ratio(rates['json.loads'], rates['check'])} the cost of json.loads; "
        f"target {TARGET_EVENTS_PER_SECOND:,} events/s: {'met' if met else 'NOT met'} "
        f"({rates['check'] / TARGET_EVENTS_PER_SECOND:.0%} of it)"
    )
    out.print(
        f"read_trace: {rates['read_trace']:,.0f} events/s, {ratio(rates['json.loads'], rates['read_trace'])} "
        f"json.loads (schema validation and continuity checks on top of parsing)"
    )
    out.print(f"read_trace + check (kcm check-trace): {rates['read+check']:,.0f} events/s")
    out.print(f"violations found in the corpus: {sum(violations[: len(paths)])} (default knobs: expected 0)")
    out.print(f"peak RSS: {peak_rss_mib():,.0f} MiB (ru_maxrss)")
    if profiler is not None:
        out.print()
        out.print(
            f"cProfile of InvariantChecker.step over the corpus\n{profile_top(profiler, 20)}",
            markup=False,
            highlight=False,
        )

    figures = [
        Figure(
            NAME,
            "InvariantChecker.step",
            rates["check"],
            "events/s",
            f">= {TARGET_EVENTS_PER_SECOND:,}/s",
            met,
            f"{ratio(rates['json.loads'], rates['check'])} the cost of json.loads",
        ),
        Figure(
            NAME,
            "read_trace (parse + validate)",
            rates["read_trace"],
            "events/s",
            "",
            None,
            f"{ratio(rates['json.loads'], rates['read_trace'])} the cost of json.loads",
        ),
        Figure(
            NAME,
            "read_trace + check",
            rates["read+check"],
            "events/s",
            "",
            None,
            f"{ratio(rates['json.loads'], rates['read+check'])} the cost of json.loads",
        ),
    ]
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
