"""Replay and TLC trace-validation benchmark.

Run it with `python -m kcm.tools.bench.replay` (`--quick` for smaller sizes).

  simulate     the simulator writing traces (seeds 0.., `Knobs()`, `SimConfig()`): the baseline, since a
               replay re-executes the same cluster steps;
  replay       `kcm replay`'s engine over the same traces: every event mapped to a cluster call, the
               state folded and compared on every observed variable (steps/s, and its ratio to simulate);
  tlc startup  `kcm validate --tlc` of a trace cut to its Init event: TLC's start, parse and one state,
               the fixed cost of every validation (the baseline of the next line);
  tlc trace    `kcm validate --tlc` of whole small traces (2 brokers, 1 partition, no operators):
               traces/s and events/s, and events/s beyond the fixed start-up cost.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from kcm.conformance.check.replay import replay
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    table,
    write_summary,
)

NAME = "replay"
SMALL = SimConfig(brokers=2, partitions=1, replication_factor=2, admin=0.0)


def simulate(seed: int, steps: int, config: SimConfig) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), config, events.append)
    simulator.bootstrap()
    simulator.run(steps)
    return events


def main(argv: Sequence[str] | None = None) -> int:
    args = base_parser(NAME, __doc__ or "").parse_args(argv)
    out = console()
    print_header(out, NAME, command_line(NAME, sys.argv[1:] if argv is None else argv))
    seeds, steps = (2, 300) if args.quick else (3, 2000)
    tlc_traces, tlc_steps = (1, 30) if args.quick else (3, 40)

    started = time.perf_counter()
    traces = [simulate(seed + 2, steps, SimConfig()) for seed in range(seeds)]
    simulate_s = time.perf_counter() - started
    events = sum(len(t) for t in traces)
    started = time.perf_counter()
    reports = [replay(t) for t in traces]
    replay_s = time.perf_counter() - started
    conforming = sum(r.divergence is None for r in reports)

    startup = validate_with_tlc(simulate(1, 0, SMALL)[:1]).seconds
    small = [simulate(seed + 1, tlc_steps, SMALL) for seed in range(tlc_traces)]
    started = time.perf_counter()
    checks = [validate_with_tlc(t) for t in small]
    tlc_s = time.perf_counter() - started
    tlc_events = sum(len(t) for t in small)
    accepted = sum(c.accepted for c in checks)
    beyond = tlc_events / max(tlc_s - startup * len(small), 1e-9)

    rows = [
        ("simulate (baseline)", f"{events:,} events", f"{events / simulate_s:,.0f} events/s", "1.00x"),
        ("replay", f"{conforming}/{seeds} traces conform", f"{events / replay_s:,.0f} steps/s",
         f"{simulate_s / replay_s:.2f}x of simulate"),
        ("tlc startup (baseline)", "Init only", f"{startup:.1f} s", "1.00x"),
        ("tlc trace validation", f"{accepted}/{len(small)} accepted, {tlc_events} events",
         f"{len(small) / tlc_s:.3f} traces/s, {tlc_events / tlc_s:.1f} events/s",
         f"{tlc_s / len(small) / startup:.2f}x startup per trace; {beyond:.1f} events/s beyond it"),
    ]
    result = table("replay and TLC trace validation", ["measured", "corpus", "rate", "versus the baseline"], 2)
    for row in rows:
        result.add_row(*row)
    out.print(result)
    figures = [
        Figure(NAME, "replay steps/s", events / replay_s, "steps/s", versus_baseline=f"{simulate_s / replay_s:.2f}x "
               "of the simulator's rate"),
        Figure(NAME, "TLC trace validation", tlc_events / tlc_s, "events/s",
               versus_baseline=f"{len(small) / tlc_s:.3f} traces/s; start-up {startup:.1f} s per trace"),
    ]
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
