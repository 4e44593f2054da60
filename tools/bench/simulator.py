"""Simulator benchmark: events per second of the seeded simulator on one core, against the cost floor of
building the same number of event dicts without simulating, measured in the same run.

Run it with `python -m kcm.tools.bench.simulator` (`--quick` for fewer seeds and steps).

For each seed, `Simulator(seed, Knobs(), SimConfig(), sink)` with `bootstrap()` and `run(steps)`, timed
from construction to the last step, with
  memory  a sink that only counts the events (they are built in memory, then dropped);
  file    `TraceWriter` writing JSON Lines to a file in a temporary directory.
Baselines, same run:
  floor        a plain loop building as many event dicts of the same keys (small args and state), counted;
  floor+file   the same plain dicts through `TraceWriter`;
  write only   the simulator's own events, captured beforehand, through `TraceWriter` alone (the share of
               the file mode that is JSON serialisation and I/O).
Split, a separate run with the counting sink: the time inside `Controller.process` (the controller's own
work, with the store writes and request batches it makes), timed by a wrapper on each controller, and
what the simulator would run at without it.
The events/s counts every event the sink receives (the Init event and the bootstrap's included).
"""

from __future__ import annotations

import cProfile
import gc
import hashlib
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.progress import Progress, TaskID

from kcm.impl.controller import StepResult
from kcm.impl.sim.cluster import Event, EventSink
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import FORMAT_VERSION, TraceWriter
from kcm.spec.vocabulary import Knobs
from kcm.tools import interpreted
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    peak_rss_mib,
    print_footer,
    print_header,
    profile_top,
    progress,
    ratio,
    table,
    write_summary,
)

NAME = "simulator"
TARGET_EVENTS_PER_SECOND = 50_000


class CountingSink:
    def __init__(self) -> None:
        self.events = 0

    def __call__(self, event: Event) -> None:
        self.events += 1


@dataclass(slots=True)
class Mode:
    """The runs of one mode: events and seconds per seed, bytes written if any."""

    label: str
    events: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    bytes: int = 0

    @property
    def rate(self) -> float:
        total = sum(self.seconds)
        return sum(self.events) / total if total > 0 else float("nan")

    def seed_rates(self) -> list[float]:
        return [e / s for e, s in zip(self.events, self.seconds, strict=True) if s > 0]


def simulate(seed: int, steps: int, sink: EventSink, profiler: cProfile.Profile | None = None) -> float:
    """Seconds to construct, bootstrap and run one simulator."""
    gc.collect()
    if profiler is not None:
        profiler.enable()
    start = time.perf_counter()
    simulator = Simulator(seed, Knobs(), SimConfig(), sink)
    simulator.bootstrap()
    simulator.run(steps)
    elapsed = time.perf_counter() - start
    if profiler is not None:
        profiler.disable()
    return elapsed


def floor_events(run: str, count: int, sink: EventSink) -> float:
    """The cost floor: as many event dicts of the trace's shape as the simulator made, and nothing else."""
    gc.collect()
    start = time.perf_counter()
    for seq in range(count):
        broker = str(seq % 3 + 1)
        partition = f"t0-{seq & 1}"
        sink(
            {
                "v": FORMAT_VERSION,
                "run": run,
                "seq": seq,
                "actor": f"broker:{broker}",
                "action": "FetchResponse",
                "args": {
                    "from": 1,
                    "partition": partition,
                    "fetch_offset": seq,
                    "error": "",
                    "records": [[1, seq]],
                },
                "state": {"hw": {broker: {partition: seq}}, "log": {broker: {partition: [[1, seq]]}}},
            }
        )
    return time.perf_counter() - start


def split_controller(seed: int, steps: int) -> tuple[float, float]:
    """Seconds of a counting-sink run, and of `Controller.process` within it."""
    spent = 0.0

    def timed(process: Callable[[int], StepResult]) -> Callable[[int], StepResult]:
        def wrapper(now: int) -> StepResult:
            nonlocal spent
            start = time.perf_counter()
            try:
                return process(now)
            finally:
                spent += time.perf_counter() - start

        return wrapper

    gc.collect()
    start = time.perf_counter()
    simulator = Simulator(seed, Knobs(), SimConfig(), CountingSink())
    for controller in simulator.cluster.controllers.values():
        # On the instance, so the class and every other run stay unwrapped.
        controller.process = timed(controller.process)  # type: ignore[method-assign,assignment]
    simulator.bootstrap()
    simulator.run(steps)
    return time.perf_counter() - start, spent


def write_only(events: Sequence[Event], path: Path) -> float:
    gc.collect()
    start = time.perf_counter()
    with TraceWriter(path) as writer:
        for event in events:
            writer.write(event)
    return time.perf_counter() - start


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "Simulator throughput, in memory and to a trace file, against a cost floor.")
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0..N-1 (default 5, 2 with --quick)")
    parser.add_argument(
        "--steps", type=int, default=None, help="steps per seed (default 10000, 2000 with --quick)"
    )
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    out = console()
    print_header(out, "kcm simulator benchmark", command_line(NAME, argv_list))
    seeds = args.seeds if args.seeds is not None else (2 if args.quick else 5)
    steps = args.steps if args.steps is not None else (2_000 if args.quick else 10_000)
    out.print(
        f"workload: seeds 0..{seeds - 1}, {steps:,} steps each, Knobs() (safe design), SimConfig() "
        f"({SimConfig().brokers} brokers, {SimConfig().partitions} partitions, faults on)"
    )

    modes = {
        key: Mode(label)
        for key, label in (
            ("floor", "floor: plain dicts, counted"),
            ("memory", "simulator, counting sink"),
            ("floor_file", "floor: plain dicts, TraceWriter"),
            ("file", "simulator, TraceWriter to a file"),
            ("write", "write only: the simulator's events, TraceWriter"),
        )
    }
    identical = True
    # The split run wraps Controller.process, which a compiled controller refuses.
    compiled = interpreted.compiled()
    split = [0.0, 0.0]  # seconds of the split runs, and of Controller.process within them
    with tempfile.TemporaryDirectory(prefix="kcm-bench-") as tmp, progress(out) as bar:
        folder = Path(tmp)
        task: TaskID = bar.add_task("simulating", total=seeds * 4)
        for seed in range(seeds):
            _run_seed(seed, steps, folder, modes, bar, task)
            if not compiled:
                total, controller = split_controller(seed, steps)
                split[0] += total
                split[1] += controller
            bar.advance(task)
            identical &= _digest(folder / f"seed-{seed}.jsonl") == _digest(
                folder / f"seed-{seed}-write.jsonl"
            )

    out.print()
    result = table(
        "throughput",
        ["mode", "events", "seconds", "events/s", "per seed min..max", "bytes/event", "vs its floor"],
    )
    floors = {
        "memory": "floor",
        "file": "floor_file",
        "floor": "floor",
        "floor_file": "floor_file",
        "write": "floor_file",
    }
    for key, mode in modes.items():
        rates = mode.seed_rates()
        floor = modes[floors[key]]
        result.add_row(
            mode.label,
            f"{sum(mode.events):,}",
            f"{sum(mode.seconds):.2f}",
            f"{mode.rate:,.0f}",
            f"{min(rates):,.0f}..{max(rates):,.0f}",
            f"{mode.bytes / sum(mode.events):,.0f}" if mode.bytes else "-",
            f"{ratio(floor.rate, mode.rate)} slower" if key not in ("floor", "floor_file") else "(baseline)",
        )
    out.print(result)
    memory, file, write = modes["memory"], modes["file"], modes["write"]
    out.print(
        f"simulator in memory: {memory.rate:,.0f} events/s, "
        f"{ratio(modes['floor'].rate, memory.rate)} the cost of the plain-dict floor "
        f"({modes['floor'].rate:,.0f} events/s)"
    )
    out.print(
        f"simulator to a file: {file.rate:,.0f} events/s; the file costs {ratio(memory.rate, file.rate)} the "
        f"in-memory run; serialising alone runs at {write.rate:,.0f} events/s "
        f"({sum(write.seconds) / sum(file.seconds):.0%} of the file mode's time)"
    )
    if compiled:
        out.print("split run: not made (a compiled Controller.process cannot be wrapped; see the interpreted run)")
    else:
        out.print(
            f"split run: Controller.process takes {split[1] / split[0]:.0%} of the time; the rest alone would run "
            f"at {sum(memory.events) / (split[0] - split[1]):,.0f} events/s, Controller.process alone caps the "
            f"simulator at {sum(memory.events) / split[1]:,.0f}"
        )
    out.print(
        f"same seed, same bytes (file mode vs captured events written again): {'yes' if identical else 'NO'}"
    )
    for key in ("memory", "file"):
        met = modes[key].rate >= TARGET_EVENTS_PER_SECOND
        out.print(
            f"target {TARGET_EVENTS_PER_SECOND:,} events/s, {modes[key].label}: "
            f"{'met' if met else 'NOT met'} ({modes[key].rate / TARGET_EVENTS_PER_SECOND:.0%} of it)"
        )
    out.print(f"peak RSS: {peak_rss_mib():,.0f} MiB (ru_maxrss)")

    figures = [
        Figure(
            NAME,
            "simulator, counting sink",
            memory.rate,
            "events/s",
            f">= {TARGET_EVENTS_PER_SECOND:,}/s",
            memory.rate >= TARGET_EVENTS_PER_SECOND,
            f"{ratio(modes['floor'].rate, memory.rate)} slower than the floor",
        ),
        Figure(
            NAME,
            "simulator, TraceWriter file",
            file.rate,
            "events/s",
            f">= {TARGET_EVENTS_PER_SECOND:,}/s",
            file.rate >= TARGET_EVENTS_PER_SECOND,
            f"{ratio(modes['floor_file'].rate, file.rate)} slower than the floor",
        ),
    ]
    if args.profile:
        profiler = cProfile.Profile()
        simulate(0, steps, CountingSink(), profiler)
        out.print()
        out.print(
            f"cProfile of seed 0, {steps:,} steps, counting sink\n{profile_top(profiler, 20)}",
            markup=False,
            highlight=False,
        )
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


def _run_seed(
    seed: int, steps: int, folder: Path, modes: dict[str, Mode], bar: Progress, task: TaskID
) -> None:
    counter = CountingSink()
    modes["memory"].seconds.append(simulate(seed, steps, counter))
    modes["memory"].events.append(counter.events)
    bar.advance(task)

    path = folder / f"seed-{seed}.jsonl"
    with TraceWriter(path) as writer:
        modes["file"].seconds.append(simulate(seed, steps, writer.write))
        modes["file"].events.append(writer.lines)
    modes["file"].bytes += path.stat().st_size
    bar.advance(task)

    captured: list[Event] = []
    simulate(seed, steps, captured.append)  # not timed: the events for the write-only baseline
    write_path = folder / f"seed-{seed}-write.jsonl"
    modes["write"].seconds.append(write_only(captured, write_path))
    modes["write"].events.append(len(captured))
    modes["write"].bytes += write_path.stat().st_size
    del captured
    bar.advance(task)

    run = f"seed-{seed}"
    for key, sink_for in (("floor", _counting), ("floor_file", _writing(folder / f"floor-{seed}.jsonl"))):
        sink, close, size = sink_for()
        modes[key].seconds.append(floor_events(run, counter.events, sink))
        close()
        modes[key].events.append(counter.events)
        modes[key].bytes += size()


Sinks = tuple[EventSink, Callable[[], None], Callable[[], int]]


def _counting() -> Sinks:
    return CountingSink(), lambda: None, lambda: 0


def _writing(path: Path) -> Callable[[], Sinks]:
    def make() -> Sinks:
        writer = TraceWriter(path)
        return writer.write, writer.close, lambda: path.stat().st_size

    return make


if __name__ == "__main__":
    sys.exit(main())
