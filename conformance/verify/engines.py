"""The run of `kcm verify`: its engines' stages in the order they run, each timed and announced on the
reporter; an engine that returns no row is shown as one `unobserved` row (docs/verdicts.md)."""

from __future__ import annotations

import time

from kcm.conformance.verify import conformance, kafka, pipeline, simulation, tlc, z3, zookeeper
from kcm.conformance.verify.stages import Stage, StageRow, VerifyContext, verdict
from kcm.spec.verdicts import UNOBSERVED

# Engines in the order they run.
STAGES: dict[str, Stage] = {
    "simulation": simulation.stage,
    "z3": z3.stage,
    "tlc": tlc.stage,
    "conformance": conformance.stage,
    "pipeline": pipeline.stage,
}
# Engines that run only when asked for (`--zk`, `--kafka`, or `--only`), after the others: they need a
# ZooKeeper, or Kafka's brokers.
ON_REQUEST: dict[str, Stage] = {"zookeeper": zookeeper.stage, "kafka": kafka.stage}


def run(ctx: VerifyContext, engines: list[str]) -> list[StageRow]:
    rows: list[StageRow] = []
    for engine in engines:
        started = time.perf_counter()
        ctx.reporter.line(f"verify: {engine} started")
        found = {**STAGES, **ON_REQUEST}[engine](ctx) or [
            StageRow(engine, "no results", UNOBSERVED, "the engine checked nothing", time.perf_counter() - started)]
        ctx.reporter.line(f"verify: {engine} {verdict(found)} ({len(found)} rows, "
                          f"{time.perf_counter() - started:.1f} s)")
        rows.extend(found)
    return rows
