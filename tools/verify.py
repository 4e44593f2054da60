"""`kcm verify`: the full verification run on the embedded defaults.

Each engine of kcm contributes a stage (kcm.tools.stages): the simulated-cluster campaign first, then the
Z3 proofs, the TLC model check and review matrix, the conformance campaign and the Spark pipeline, each
from its command's module. A stage returns rows for the summary table; the run's verdict is the worst row.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kcm.conformance.explore.campaign import CampaignResult, SeedResult, run_campaign
from kcm.tools import conform, pipeline, prove, review
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option
from kcm.tools.sim import cluster_config, cluster_options
from kcm.tools.stages import HOLDS, VIOLATED, Stage, StageRow, VerifyContext, verdict


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("verify", help="the full verification run on the embedded defaults")
    cluster_options(parser)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--only", action="append", choices=list(STAGES), metavar="ENGINE",
                        help=f"run only this engine (repeatable): {', '.join(STAGES)}")
    parser.add_argument("--skip", action="append", choices=list(STAGES), default=[], metavar="ENGINE",
                        help="leave this engine out (repeatable)")
    parser.add_argument("--json", action="store_true")
    html_option(parser)
    parser.set_defaults(handler=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    from rich.console import Console

    knobs, config = cluster_config(args)
    stream = sys.stderr if args.json else sys.stdout
    # Piped output keeps the table's columns whole instead of wrapping them to 80 characters.
    console = Console(stderr=args.json, width=None if stream.isatty() else 160)
    ctx = VerifyContext(knobs, config, args.seeds, args.steps, console)
    engines = [e for e in (args.only or STAGES) if e not in args.skip]
    rows = run(ctx, engines)
    report(console, ctx, rows, args.json)
    if args.html:
        kinds.verify_page(summary(ctx, rows), Path(args.html), kinds.first_violation_timeline(ctx))
    return {"holds": EXIT_OK, "violated": EXIT_VIOLATED}.get(verdict(rows), EXIT_USAGE)


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


# Engines in the order they run.
STAGES: dict[str, Stage] = {
    "simulation": simulation_stage,
    "z3": prove.verify_stage,
    "tlc": review.verify_stage,
    "conformance": conform.verify_stage,
    "pipeline": pipeline.verify_stage,
}


def run(ctx: VerifyContext, engines: list[str]) -> list[StageRow]:
    rows: list[StageRow] = []
    for engine in engines:
        rows.extend(STAGES[engine](ctx))
    return rows


def report(console: Console, ctx: VerifyContext, rows: list[StageRow], as_json: bool) -> None:
    campaign = ctx.campaigns[0] if ctx.campaigns else None
    if as_json:
        print(json.dumps(summary(ctx, rows), indent=2))
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


def summary(ctx: VerifyContext, rows: list[StageRow]) -> dict[str, Any]:
    """The run as JSON: what --json prints and the HTML report shows."""
    document: dict[str, Any] = {"knobs": ctx.knobs.to_dict(), "result": verdict(rows),
                                "stages": [asdict(row) for row in rows]}
    if ctx.campaigns:
        document.update(_campaign_json(ctx.campaigns[0]))
    return document


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

