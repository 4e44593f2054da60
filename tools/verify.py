"""`kcm verify`: the verification run on the embedded defaults, every engine.

Each engine of kcm contributes a stage (kcm.conformance.verify): the simulated-cluster campaign first, then
the Z3 proofs, the TLC model check and review matrix, the conformance campaign and the Spark pipeline, each a
module of that package. A stage returns rows for the summary table; the run's verdict is the worst row
(kcm.spec.verdicts). By default TLC checks the safe design's ci model exhaustively and each unsafe review
row for the invariants it is documented to break; `--full` fills the whole review matrix (docs/verify.md).
`--zk` adds the cluster on ZooKeeper (kcm.conformance.verify.zookeeper), which needs a ZooKeeper and so runs
only when asked for (docs/zookeeper.md); `--kafka` adds Apache Kafka itself under faults
(kcm.conformance.verify.kafka, docs/kafka.md). This module parses the arguments, prints the table and the summary,
and writes the page of `--html`.
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

from kcm.conformance.ci_results import counterexample_annotation, stage_cases
from kcm.conformance.explore.campaign import CampaignResult
from kcm.conformance.verify.engines import ON_REQUEST, STAGES, run
from kcm.conformance.verify.stages import StageRow, VerifyContext, engine_verdicts, verdict
from kcm.spec.atomic_output import check_writable, claimed_in_place
from kcm.spec.tlc.modelcheck import spec_dir
from kcm.spec.trace.format import TraceError, load_trace
from kcm.spec.verdicts import UNOBSERVED, UNSUPPORTED, severity
from kcm.tools.ci_option import add_junit_option, check_junit, publish
from kcm.tools.design_option import add_design_option, chosen_design, described
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, count
from kcm.tools.outputs import default_out
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option
from kcm.tools.sim import cluster_config, cluster_options


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("verify", help="the verification run on the embedded defaults, every engine")
    cluster_options(parser)
    parser.add_argument("--seeds", type=count, default=20,
                        help="simulation seeds (default 20; 0 leaves the simulation unobserved)")
    parser.add_argument("--steps", type=count, default=2000,
                        help="simulation steps per seed (default 2000; 0 leaves the simulation unobserved)")
    parser.add_argument("--full", action="store_true",
                        help="fill the whole TLC review matrix, every variant on every invariant (about 3 minutes "
                             "more on 2 cores)")
    parser.add_argument("--zk", nargs="?", const="", default=None, metavar="HOST:PORT",
                        help="add the cluster on ZooKeeper (engine zookeeper): a fault campaign on a 3-server "
                             "ensemble kcm starts and stops, or on the ZooKeeper at HOST:PORT (no server faults)")
    parser.add_argument("--kafka", action="store_true",
                        help="add Apache Kafka itself (engine kafka): one fault-campaign run on a 3-broker 3.9.2 "
                             "cluster kcm starts and stops, its logs judged (kcm kafka campaign)")
    parser.add_argument("--coverage", action="store_true",
                        help="TLC counts each action's states; a model where an action never fires that its "
                             "configuration does not say never fires is unexpected (about 2.3x TLC's time)")
    parser.add_argument("--only", action="append", choices=[*STAGES, *ON_REQUEST], metavar="ENGINE",
                        help=f"run only this engine (repeatable): {', '.join([*STAGES, *ON_REQUEST])}")
    parser.add_argument("--skip", action="append", choices=[*STAGES, *ON_REQUEST], default=[], metavar="ENGINE",
                        help="leave this engine out (repeatable)")
    add_design_option(parser, "every engine checks it on its base design's knobs, or says unsupported where it "
                              "cannot read it (Z3, the Spark generator, the ZooKeeper campaign); TLC checks its "
                              "review rows")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help=f"folder for the counterexamples the run finds (default {default_out('verify')}/)")
    add_option(parser)
    html_option(parser)
    add_junit_option(parser, "row of the table")
    parser.set_defaults(handler=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    design = chosen_design(args)
    knobs, config = cluster_config(args, None if design is None else design.base)
    stream = sys.stderr if args.json else sys.stdout
    # Piped output keeps the table's columns whole instead of wrapping them to 80 characters.
    console = Console(stderr=args.json, width=None if stream.isatty() else 160)
    asked = [*(args.only or STAGES), *(["zookeeper"] if args.zk is not None else []),
             *(["kafka"] if args.kafka else [])]
    engines = [e for e in dict.fromkeys(asked) if e not in args.skip]
    started = time.perf_counter()
    # The counterexample folder is held for the whole run: a second verify into it is refused at once.
    if args.html:
        check_writable(args.html)  # the page comes after minutes of work: a place it cannot go is said now
    check_junit(args)
    with claimed_in_place(args.out or default_out("verify")) as out, Reporter(args.progress) as reporter:
        ctx = VerifyContext(knobs, config, args.seeds, args.steps, reporter, args.full, out=out, zk=args.zk or "",
                            design=design, coverage=args.coverage)
        rows = run(ctx, engines)
    seconds = time.perf_counter() - started
    report(console, ctx, rows, args.json, seconds)
    if args.html:
        kinds.verify_page(summary(ctx, rows, seconds), Path(args.html), kinds.first_violation_timeline(ctx))
    _publish(args, ctx, rows, seconds)
    found = engine_verdicts(rows)
    idle = [engine for engine, said in found.items() if said == UNOBSERVED]
    if ctx.design is not None and found and all(said == UNSUPPORTED for said in found.values()):
        print(f"kcm: error: no engine run could read the design {ctx.design.name} (every row unsupported): the run "
              "does not pass", file=sys.stderr)
    elif idle or not rows:
        # Exit 2 alone would read as a tool failure in a CI log: the line says nothing was checked.
        print(f"kcm: error: nothing checked by {', '.join(idle) or 'any engine'} (every row unobserved): "
              "the run does not pass", file=sys.stderr)
    return (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(verdict(rows))]


def report(console: Console, ctx: VerifyContext, rows: list[StageRow], as_json: bool, seconds: float) -> None:
    campaign = ctx.campaigns[0] if ctx.campaigns else None
    if as_json:
        print(json.dumps(summary(ctx, rows, seconds), indent=2))
        return
    table = Table(title=f"kcm verify ({described(ctx.knobs, ctx.design)}{', full' if ctx.full else ''})")
    # Names and verdicts are never cut: on a narrow terminal the details wrap instead.
    table.add_column("engine", no_wrap=True)
    table.add_column("check", overflow="fold")
    table.add_column("verdict", no_wrap=True)
    table.add_column("detail", ratio=1)
    table.add_column("seconds", justify="right", no_wrap=True)
    for row in rows:
        colour = ("green", "red", "yellow")[severity(row.verdict)]
        table.add_row(row.engine, row.check, f"[{colour}]{row.verdict}[/{colour}]", row.detail,
                      f"{row.seconds:.1f}")
    console.print(table)
    console.print(f"verdict: {verdict(rows)} ({len(rows)} rows, {seconds:.0f} s)", highlight=False)
    traces = [row for row in rows if row.trace]
    if traces:
        console.print(f"counterexamples: {len(traces)} in {ctx.out}/ (kcm report TRACE draws one; --html the whole "
                      "run)", highlight=False, soft_wrap=True)
    if campaign is not None:
        _print_campaign_footer(console, campaign, ctx)


def _publish(args: argparse.Namespace, ctx: VerifyContext, rows: list[StageRow], seconds: float) -> None:
    lines = ["### kcm verify", "", f"verdict: **{verdict(rows)}** ({len(rows)} rows, {seconds:.0f} s)", "",
             "| engine | check | verdict | detail |", "|---|---|---|---|",
             *[f"| {r.engine} | {r.check} | {r.verdict} | {r.detail} |" for r in rows]]
    folders = ([ctx.design.path] if ctx.design is not None else []) + [spec_dir()]
    annotations = []
    for row in rows:
        if row.trace and severity(row.verdict) == 1:
            try:
                events = load_trace(row.trace)
            except (OSError, TraceError):
                events = []
            annotations.append(counterexample_annotation(
                events, f"{row.check}: {row.verdict}: {row.detail}", f"kcm verify: {row.engine}", folders))
    publish(args, "kcm verify", stage_cases([asdict(row) for row in rows]), "\n".join(lines), annotations)


def summary(ctx: VerifyContext, rows: list[StageRow], seconds: float) -> dict[str, Any]:
    """The run as JSON: what --json prints and the HTML report shows."""
    document: dict[str, Any] = {"knobs": ctx.knobs.to_dict(), "result": verdict(rows), "full": ctx.full,
                                "seconds": round(seconds, 1), "stages": [asdict(row) for row in rows]}
    if ctx.design is not None:
        document["design"] = {"name": ctx.design.name, "path": str(ctx.design.path)}
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


def _print_campaign_footer(console: Console, result: CampaignResult, ctx: VerifyContext) -> None:
    broken = sum(1 for s in result.seeds if s.violations)
    console.print(f"seeds: {len(result.seeds)}  steps: {result.steps:,}  seeds with a violation: {broken}")
    first = result.first_violation()
    if first is None:
        return
    seed, violation = first
    console.print(f"[red]{violation.invariant}[/red] at seed {seed.seed}, step {violation.seq}: {violation.message}")
    # One line however narrow the terminal: a command cut in the middle cannot be pasted.
    design = f"--design {ctx.design.path} " if ctx.design is not None else ""
    console.print(f"reproduce: kcm sim --seed {seed.seed} --steps {seed.steps} --calm-every {ctx.config.calm_every} "
                  + design + " ".join(f"--set {k}={v}" for k, v in result.knobs.to_dict().items())
                  + " --out trace.jsonl && kcm check-trace trace.jsonl", soft_wrap=True, markup=False)

