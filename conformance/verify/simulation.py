"""The simulation stage of `kcm verify`, the first to run: a seeded campaign of the simulated cluster on the
run's knobs and shape (kcm.conformance.explore.campaign), running a design's strategy, one row per invariant and
progress property. The
campaign is kept in the context too: `kcm verify` reports its first violation in full."""

from __future__ import annotations

import time

from kcm.conformance.check.invariants import per_invariant
from kcm.conformance.explore.campaign import CampaignResult, SeedResult, run_campaign
from kcm.conformance.verify.stages import StageRow, VerifyContext
from kcm.impl.design import load_strategy


def stage(ctx: VerifyContext) -> list[StageRow]:
    started = time.perf_counter()
    with ctx.reporter.task("simulation seeds", ctx.seeds) as task:

        def advance(seed: SeedResult) -> None:
            task.advance(detail=f"seed {seed.seed}: {len(seed.violations)} violations")

        strategy = None if ctx.own_design is None else load_strategy(ctx.own_design, ctx.knobs)
        result = run_campaign(ctx.knobs, range(ctx.seeds), ctx.steps, ctx.config, on_seed=advance, design=strategy)
    seconds = time.perf_counter() - started
    ctx.campaigns.append(result)
    return [StageRow("simulation", name, verdict, _campaign_detail(result, name), seconds)
            for name, verdict in result.verdicts().items()]


def _campaign_detail(result: CampaignResult, invariant: str) -> str:
    return f"{per_invariant(result.checks)[invariant]:,} checks over {len(result.seeds)} seeds"
