"""`kcm sim`: one seeded simulation of a cluster under faults, written as a trace (format v2).

    kcm sim --seed S --steps N [--set knob=value ...] [--brokers B --partitions P] [--faults F]
            [--first-broker-id I] [--calm-every N] --out FILE

The same seed and knobs write the same file, byte for byte. `kcm verify` shares the cluster options.
A long run shows its progress on stderr: a bar on a terminal, else a timestamped line every few seconds
(kcm.tools.progress). A
line above LARGE_LINE bytes gets a note naming its step and its largest field (docs/performance.md, Memory).
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from typing import Any, Final

from rich.console import Console

from kcm.impl.design import load_strategy
from kcm.impl.sim.cluster import FIRST_BROKER_ID
from kcm.impl.sim.simulator import SimConfig, Simulator, check_fits
from kcm.spec.atomic_output import claimed_file
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.vocabulary import KNOB_NAMES, Knobs
from kcm.tools.design_option import add_design_option, chosen_design, described
from kcm.tools.errors import EXIT_OK, UsageError
from kcm.tools.progress import Reporter, add_option

# Storm steps between two calm phases by default: a run of the default 1,000 steps ends in one.
CALM_EVERY: Final = 1000


def register(subparsers: Any) -> None:
    sim = subparsers.add_parser("sim", help="simulate a cluster under faults and write its trace")
    sim.add_argument("--seed", type=int, default=0, help="the run's random seed: the same seed, the same trace")
    sim.add_argument("--steps", type=int, default=1000, help="steps to simulate after bootstrap (default 1000)")
    cluster_options(sim)
    sim.add_argument("--out", required=True, help="trace file to write (JSON Lines, trace format v2)")
    add_design_option(sim, "the cluster runs its strategy, on its base design's knobs (--set changes them)")
    add_option(sim)
    sim.set_defaults(handler=cmd_sim)


def cluster_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                        help=f"design knob: {', '.join(KNOB_NAMES)}")
    parser.add_argument("--brokers", type=int, default=3, help="brokers in the cluster (default 3)")
    parser.add_argument("--first-broker-id", type=int, default=FIRST_BROKER_ID, metavar="ID",
                        help=f"id of the first broker; the others follow it (default {FIRST_BROKER_ID}; "
                             "Kafka's sample server.properties numbers from 0)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the first topic (default 2)")
    parser.add_argument("--faults", type=float, default=1.0, help="fault intensity (0 = none)")
    parser.add_argument("--calm-every", type=int, default=CALM_EVERY, metavar="N",
                        help=f"storm steps between calm phases, where the progress properties are checked "
                             f"(default {CALM_EVERY}; 0 = never calm)")


def cluster_config(args: argparse.Namespace, base: Knobs | None = None) -> tuple[Knobs, SimConfig]:
    """The knobs (`base`'s, default the safe design's, under --set) and the cluster the options ask for."""
    knobs = (base or Knobs()).with_settings(args.settings)
    if args.calm_every < 0:
        raise UsageError("--calm-every must not be negative (0: never calm)")
    config = SimConfig(
        brokers=args.brokers,
        partitions=args.partitions,
        replication_factor=min(3, args.brokers),
        faults=args.faults,
        first_broker_id=args.first_broker_id,
        calm_every=args.calm_every,
    )
    if args.steps < 0:
        raise UsageError("--steps must not be negative")
    check_fits(knobs, config)
    return knobs, config


# Steps simulated between two progress reports: milliseconds of simulation.
CHUNK: Final = 1000
# A trace line longer than this gets a note: lines grow with the partitions an event lists.
LARGE_LINE: Final = 64 * 1024


class _Metered(io.TextIOWrapper):
    """The trace file, counting the characters written (bytes: the writer escapes non-ASCII) and the
    length of the last write, which is one line: the writer writes each line at once."""

    total = 0
    last = 0

    def write(self, text: str) -> int:
        count = super().write(text)
        self.total += count
        self.last = count
        return count


class _LargeLines:
    """Notes the first line above LARGE_LINE at once, the others in one summary at the end."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.count = 0
        self.largest: tuple[int, int] = (0, 0)  # (size, seq)

    def saw(self, event: Event, size: int) -> None:
        self.count += 1
        self.largest = max(self.largest, (size, event["seq"]))
        if self.count == 1:
            self._note(large_line_note(event, size))

    def summary(self) -> None:
        if self.count > 1:
            size, seq = self.largest
            self._note(f"note: {self.count - 1:,} more lines above {LARGE_LINE // 1024} KB, the largest "
                       f"{size / 1024:,.0f} KB at seq {seq}")

    def _note(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


def large_line_note(event: Event, size: int) -> str:
    """Why a line is large: its step, and the field of its arguments or state delta that weighs most."""
    weights = {f"{part}.{key}": len(json.dumps(value, separators=(",", ":")))
               for part in ("args", "state") for key, value in event[part].items()}
    field, weight = max(weights.items(), key=lambda item: item[1])
    return (f"note: seq {event['seq']} ({event['action']} by {event['actor']}) is a line of {size / 1024:,.0f} KB, "
            f"{weight / 1024:,.0f} KB of it {field}: events that list every partition grow with the partitions")


def _chunks(sim: Simulator, steps: int) -> Iterator[int]:
    """Runs the simulation CHUNK steps at a time (the same trace as in one go), yielding the steps done."""
    done = 0
    while done < steps:
        done += sim.run(min(CHUNK, steps - done))
        yield done


def _run(sim: Simulator, steps: int, out: _Metered, reporter: Reporter) -> None:
    with reporter.task("sim steps", steps) as task:
        for done in _chunks(sim, steps):
            # A calm phase is taken whole: the last chunk may end past the steps asked for.
            task.update(f"{out.total / 1e6:,.0f} MB written", completed=min(done, steps))


def cmd_sim(args: argparse.Namespace) -> int:
    design = chosen_design(args)
    knobs, config = cluster_config(args, None if design is None else design.base)
    strategy = None if design is None else load_strategy(design, knobs)
    console = Console(stderr=True)
    large = _LargeLines(console)
    try:
        with claimed_file(args.out) as temp, _Metered(open(temp, "wb"), encoding="utf-8", newline="\n") as out:
            writer = TraceWriter(out)

            def write(event: Event) -> None:
                writer.write(event)
                if out.last > LARGE_LINE:
                    large.saw(event, out.last)

            sim = Simulator(args.seed, knobs, config, write, design=strategy)
            sim.bootstrap()
            with Reporter(args.progress) as reporter:
                _run(sim, args.steps, out, reporter)
            events = sim.cluster.seq
    except OSError as err:
        raise UsageError(f"{args.out}: cannot write: {err.strerror}") from err
    large.summary()
    print(f"wrote {events} events to {args.out} (seed {args.seed}, {described(knobs, design)})")
    return EXIT_OK
