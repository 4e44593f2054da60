"""`kcm sim`: one seeded simulation of a cluster under faults, written as a trace (format v2).

    kcm sim --seed S --steps N [--set knob=value ...] [--brokers B --partitions P] [--faults F]
            [--first-broker-id I] --out FILE

The same seed and knobs write the same file, byte for byte. `kcm verify` shares the cluster options.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kcm.impl.sim.cluster import FIRST_BROKER_ID
from kcm.impl.sim.simulator import SimConfig, Simulator, check_fits
from kcm.spec.trace.format import TraceWriter
from kcm.spec.vocabulary import KNOB_NAMES, Knobs
from kcm.tools.errors import EXIT_OK, UsageError


def register(subparsers: Any) -> None:
    sim = subparsers.add_parser("sim", help="simulate a cluster under faults and write its trace")
    sim.add_argument("--seed", type=int, default=0, help="the run's random seed: the same seed, the same trace")
    sim.add_argument("--steps", type=int, default=1000, help="steps to simulate after bootstrap (default 1000)")
    cluster_options(sim)
    sim.add_argument("--out", required=True, help="trace file to write (JSON Lines, trace format v2)")
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


def cluster_config(args: argparse.Namespace) -> tuple[Knobs, SimConfig]:
    knobs = Knobs().with_settings(args.settings)
    config = SimConfig(
        brokers=args.brokers,
        partitions=args.partitions,
        replication_factor=min(3, args.brokers),
        faults=args.faults,
        first_broker_id=args.first_broker_id,
    )
    if args.steps < 0:
        raise UsageError("--steps must not be negative")
    check_fits(knobs, config)
    return knobs, config


def cmd_sim(args: argparse.Namespace) -> int:
    knobs, config = cluster_config(args)
    try:
        with TraceWriter(Path(args.out)) as writer:
            sim = Simulator(args.seed, knobs, config, writer.write)
            sim.bootstrap()
            sim.run(args.steps)
            events = sim.cluster.seq
    except OSError as err:
        raise UsageError(f"{args.out}: cannot write: {err.strerror}") from err
    print(f"wrote {events} events to {args.out} (seed {args.seed}, {knobs.describe()})")
    return EXIT_OK


