"""`kcm verify`: the full verification run on the embedded defaults.

Each engine of kcm contributes a stage: the simulated-cluster campaign first, then the engines that other
modules register here (Z3 proofs, TLC model check and review matrix, conformance, the Spark pipeline).
A stage returns rows for the summary table; the run's verdict is the worst row.
"""

from __future__ import annotations

import argparse
import importlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from kcm.conformance.campaign import CampaignResult, SeedResult, run_campaign
from kcm.impl.simulator import SimConfig
from kcm.spec.vocabulary import Knobs

HOLDS, VIOLATED, ERROR = "holds", "violated", "error"
_SEVERITY = {HOLDS: 0, VIOLATED: 1, ERROR: 2}


@dataclass(frozen=True)
class StageRow:
    """One line of the summary: which engine checked what, with which verdict."""

    engine: str
    check: str
    verdict: str  # holds | violated | error
    detail: str
    seconds: float


@dataclass(frozen=True)
class VerifyContext:
    """What every stage gets: the knobs, the cluster shape, the budget asked for, and where to show progress."""

    knobs: Knobs
    config: SimConfig
    seeds: int
    steps: int
    console: Console
    # The campaign is also reported in full (first violation, reproduce line), beyond its rows.
    campaigns: list[CampaignResult] = field(default_factory=list)


Stage = Callable[[VerifyContext], list[StageRow]]


def simulation_stage(ctx: VerifyContext) -> list[StageRow]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    started = time.perf_counter()
    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=ctx.console, transient=True, disable=not ctx.console.is_terminal) as progress:
        task = progress.add_task("seeds", total=ctx.seeds)

        def advance(_: SeedResult) -> None:
            progress.advance(task)

        result = run_campaign(ctx.knobs, range(ctx.seeds), ctx.steps, ctx.config, on_seed=advance)
    seconds = time.perf_counter() - started
    ctx.campaigns.append(result)
    return [StageRow("simulation", name, verdict, _campaign_detail(result, name), seconds)
            for name, verdict in result.verdicts().items()]


def _campaign_detail(result: CampaignResult, invariant: str) -> str:
    checks = sum(n for key, n in result.checks.items() if key.split("/")[0] == invariant)
    return f"{checks:,} checks over {len(result.seeds)} seeds"


def _engine(module: str) -> Stage:
    """The stage of an engine whose module has `verify_stage(ctx)`, imported only when the stage runs."""

    def stage(ctx: VerifyContext) -> list[StageRow]:
        rows: list[StageRow] = importlib.import_module(module).verify_stage(ctx)
        return rows

    return stage


def _z3_stage(ctx: VerifyContext) -> list[StageRow]:
    from kcm.tools.prove import verify_stage

    return [StageRow("z3", *row) for row in verify_stage(ctx.knobs)]


# Engines in the order they run.
STAGES: dict[str, Stage] = {
    "simulation": simulation_stage,
    "z3": _z3_stage,
    "tlc": _engine("kcm.tools.review"),
    "conformance": _engine("kcm.tools.conform"),
    "pipeline": _engine("kcm.tools.pipeline"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--only", action="append", choices=list(STAGES), metavar="ENGINE",
                        help=f"run only this engine (repeatable): {', '.join(STAGES)}")
    parser.add_argument("--skip", action="append", choices=list(STAGES), default=[], metavar="ENGINE",
                        help="leave this engine out (repeatable)")
    parser.add_argument("--json", action="store_true")


def run(ctx: VerifyContext, engines: list[str]) -> list[StageRow]:
    rows: list[StageRow] = []
    for engine in engines:
        rows.extend(STAGES[engine](ctx))
    return rows


def verdict(rows: list[StageRow]) -> str:
    return max((row.verdict for row in rows), key=_SEVERITY.__getitem__, default=HOLDS)


def report(console: Console, ctx: VerifyContext, rows: list[StageRow], as_json: bool) -> None:
    campaign = ctx.campaigns[0] if ctx.campaigns else None
    if as_json:
        summary: dict[str, Any] = {"knobs": ctx.knobs.to_dict(), "result": verdict(rows),
                                   "stages": [asdict(row) for row in rows]}
        if campaign is not None:
            summary.update(_campaign_json(campaign))
        print(json.dumps(summary, indent=2))
        return
    table = Table(title=f"kcm verify ({ctx.knobs.describe()})")
    for column in ("engine", "check", "verdict", "detail"):
        table.add_column(column)
    table.add_column("seconds", justify="right")
    for row in rows:
        colour = {HOLDS: "green", VIOLATED: "red"}.get(row.verdict, "yellow")
        table.add_row(row.engine, row.check, f"[{colour}]{row.verdict}[/{colour}]", row.detail,
                      f"{row.seconds:.1f}")
    console.print(table)
    if campaign is not None:
        _print_campaign_footer(console, campaign)


def _campaign_json(result: CampaignResult) -> dict[str, Any]:
    first = result.first_violation()
    return {
        "seeds": len(result.seeds),
        "steps": result.steps,
        "verdicts": result.verdicts(),
        "checks": dict(sorted(result.checks.items())),
        "first_violation": None if first is None else {
            "seed": first[0].seed, "seq": first[1].seq, "invariant": first[1].invariant,
            "message": first[1].message,
        },
    }


def _print_campaign_footer(console: Console, result: CampaignResult) -> None:
    broken = sum(1 for s in result.seeds if s.violations)
    console.print(f"seeds: {len(result.seeds)}  steps: {result.steps:,}  seeds with a violation: {broken}")
    first = result.first_violation()
    if first is None:
        return
    seed, violation = first
    console.print(f"[red]{violation.invariant}[/red] at seed {seed.seed}, step {violation.seq}: {violation.message}")
    console.print(f"reproduce: kcm sim --seed {seed.seed} --steps {seed.steps} "
                  + " ".join(f"--set {k}={v}" for k, v in result.knobs.to_dict().items())
                  + " --out trace.jsonl && kcm check-trace trace.jsonl")

