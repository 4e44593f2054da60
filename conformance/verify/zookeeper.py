"""The cluster on ZooKeeper in `kcm verify --zk [HOST:PORT]`: the fault campaign of
kcm.conformance.explore.zk_campaign on a bounded budget, on a 3-server ensemble kcm starts (and stops) or on
the ZooKeeper given, where kcm kills no server (it did not start them): session faults only.

Two rows: the campaign under the run's knobs (`holds` when no event of any run breaks an invariant, `unknown`
when a run had to end early because the store could not tell whether a write re-sent after a connection loss
had applied), and the zombie controller with `controller_epoch_fencing=false` (`as expected` when the checker
catches its write). Without ZooKeeper or Java, one row says what is missing and how to install it (`unknown`);
so does a ZooKeeper that does not answer, or a cluster the campaign cannot run (fewer than 3 brokers).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from kcm.conformance.explore.zk_campaign import (
    FAULTS,
    SERVER_FAULTS,
    CampaignPlan,
    CampaignResult,
    RunResult,
    ServerFaults,
    pause_until_expired,
    run_campaign,
    zookeeper_stores,
)
from kcm.conformance.verify.stages import StageRow, VerifyContext, unsupported_row
from kcm.impl.zookeeper.ensemble import Ensemble, EnsembleError, ZooKeeperMissing
from kcm.impl.zookeeper.store import ConnectionLostError
from kcm.spec.verdicts import AS_EXPECTED, UNEXPECTED, UNKNOWN, VIOLATED, held

ENGINE = "zookeeper"
# The bounded budget: every fault kind twice under the run's knobs, the zombie twice with the fence off.
RUNS = 2
STEPS = 300
FAULTS_PER_RUN = len(FAULTS)
ZOMBIE_RUNS = 1
ZOMBIE_FAULTS = 2
_ZOMBIE = "StaleControllerFenced"


def stage(ctx: VerifyContext) -> list[StageRow]:
    if ctx.own_design is not None:
        return [unsupported_row(ENGINE, ctx.own_design, "the ZooKeeper campaign runs built-in designs only (knobs)")]
    started = time.perf_counter()
    # On a ZooKeeper kcm did not start, no server is killed.
    faults = tuple(k for k in FAULTS if not (ctx.zk and k in SERVER_FAULTS))
    try:
        plan = CampaignPlan(RUNS, STEPS, FAULTS_PER_RUN, knobs=ctx.knobs, config=ctx.config, faults=faults)
    except ValueError as error:  # a cluster the campaign cannot run (`--brokers 2`)
        return [_not_run(error, started)]
    try:
        with _zookeeper(ctx.zk) as (hosts, servers):
            return _rows(ctx, plan, hosts, servers, started)
    except (ZooKeeperMissing, EnsembleError, ConnectionLostError) as error:
        return [_not_run(error, started)]


def _not_run(error: Exception, started: float) -> StageRow:
    return StageRow(ENGINE, "cluster on ZooKeeper", UNKNOWN, f"not run: {error}", time.perf_counter() - started)


@contextmanager
def _zookeeper(given: str | None) -> Iterator[tuple[str, ServerFaults | None]]:
    """The ZooKeeper given, or a 3-server ensemble started here, in a folder removed once it is stopped."""
    if given:
        yield given, None
        return
    with tempfile.TemporaryDirectory(prefix="kcm-zk-") as folder, Ensemble(Path(folder), servers=3) as ensemble:
        ensemble.start()
        yield ensemble.hosts, ensemble


def _rows(ctx: VerifyContext, plan: CampaignPlan, hosts: str, servers: ServerFaults | None,
          started: float) -> list[StageRow]:
    out = ctx.out / "zk"
    where = (f"3-server ensemble at {hosts}" if servers is not None
             else f"ZooKeeper at {hosts} (kcm kills no server it did not start: session faults only)")
    with ctx.reporter.task("zookeeper campaign runs", RUNS + ZOMBIE_RUNS) as task:
        campaign = _campaign(plan, hosts, out, servers, lambda run: task.advance(detail=_run_detail(run)))
        first = time.perf_counter()
        unfenced = replace(plan, runs=ZOMBIE_RUNS, faults_per_run=ZOMBIE_FAULTS, faults=("zombie",),
                           knobs=replace(ctx.knobs, controller_epoch_fencing=False))
        zombie = _campaign(unfenced, hosts, out, servers, lambda run: task.advance(detail=_run_detail(run)))
    return [
        StageRow(ENGINE, f"fault campaign ({ctx.knobs.describe()})", _verdict(campaign),
                 f"{where}; {_figures(campaign)}", first - started, *_first_trace(campaign)),
        StageRow(ENGINE, "zombie controller (controller_epoch_fencing=false)",
                 AS_EXPECTED if zombie.violations[_ZOMBIE] else UNEXPECTED,
                 f"{zombie.violations[_ZOMBIE]} {_ZOMBIE} violations caught; {_figures(zombie)}",
                 time.perf_counter() - first, *_first_trace(zombie)),
    ]


def _campaign(plan: CampaignPlan, hosts: str, out: Path, servers: ServerFaults | None,
              on_run: Callable[[RunResult], None]) -> CampaignResult:
    return run_campaign(plan, zookeeper_stores(hosts), out, servers, pause_until_expired, on_run)


def _verdict(result: CampaignResult) -> str:
    """A run that ended early leaves the rest of its steps undecided, unless another run broke something."""
    if result.violations:
        return VIOLATED
    return UNKNOWN if result.ended_early else held(result.events)


def _run_detail(run: RunResult) -> str:
    return f"seed {run.seed}: {run.events:,} events, {len(run.violations)} violations"


def _figures(result: CampaignResult) -> str:
    faults = ", ".join(f"{kind} {count}" for kind, count in sorted(result.faults.items()))
    median = result.failover_median()
    failover = "" if median is None else f"; failover median {median * 1000:.0f} ms"
    unelected = (f"; {result.unelected} of {result.faults['zombie']} zombie faults elected no successor"
                 if result.unelected else "")
    runs = f"{len(result.runs)} run{'s' if len(result.runs) != 1 else ''}"
    ended = result.ended_early
    early = f"; {len(ended)} ended early: {ended[0].ended_early}" if ended else ""
    return f"{runs}, faults: {faults}; {result.events:,} events checked{failover}{unelected}{early}"


def _first_trace(result: CampaignResult) -> tuple[str, str]:
    for run in result.runs:
        if run.violations:
            return str(run.trace), run.violations[0].invariant
    return "", ""
