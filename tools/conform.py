"""`kcm conform`: a conformance campaign of the hypothesis state machines (conformance/explore/stateful.py).

    kcm conform [--examples N] [--steps M] [--set knob=value ...] [--json] [--out DIR]
                [--interleavings [--runs N] [--aim K] [--scenarios DIR]]

Every step of every example is checked against all invariants and against the Z3 model; a violation is
shrunk and written to the report folder as a scenario for tests/scenarios/ and a trace (format v2) for
`kcm check-trace`, `kcm validate` and `kcm replay`. The report folder (default kcm-out/conform/) also gets
the coverage picture. With --interleavings, the interleaving coverage too (docs/interleavings.md).
Exit codes: 0 nothing found, 1 a violation found, 2 a usage error or no example run (unobserved).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from kcm.conformance.check.interleavings import Recorder, matrix_svg, tables
from kcm.conformance.explore.interleaving_campaign import (
    LONG_AIM,
    LONG_RUNS,
    Budget,
    CampaignReport,
    interleaving_campaign,
)
from kcm.conformance.explore.stateful import MACHINES, Campaign
from kcm.conformance.scenario.language import CHECKOUT_SCENARIOS, scenario_files
from kcm.conformance.verify.conformance import reported_campaign
from kcm.impl.design import load_strategy
from kcm.spec.atomic_output import claimed_in_place, write_output
from kcm.spec.verdicts import UNOBSERVED, severity
from kcm.spec.vocabulary import KNOB_NAMES, Knobs
from kcm.tools.design_option import add_design_option, chosen_design
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, UsageError, count
from kcm.tools.outputs import default_out
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option

DEFAULT_REPORT = default_out("conform")
COVERAGE_PICTURE = "coverage.svg"
INTERLEAVINGS_PICTURE = "interleavings.svg"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("conform", help="hypothesis state machines against invariants and the Z3 model")
    parser.add_argument("--examples", type=count, default=100,
                        help="hypothesis examples, over all machines (0 runs none: unobserved)")
    parser.add_argument("--steps", type=int, default=40, help="rules per example at most")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                        help=f"design knob: {', '.join(KNOB_NAMES)}")
    parser.add_argument("--machine", choices=list(MACHINES), action="append",
                        help="run only this machine (repeatable; default: all)")
    parser.add_argument("--no-step-check", action="store_true", help="leave out the Z3 check of each step")
    parser.add_argument("--out", "--report", dest="out", default=str(DEFAULT_REPORT),
                        help=f"folder for shrunk failures and the coverage picture (default {DEFAULT_REPORT})")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--interleavings", action="store_true",
                        help="also measure interleaving coverage (each long operation x its step x each fault x "
                             "the role of the broker hit): the scenario files, simulator seeds and the steered "
                             "search aimed at the points left open; a table, interleavings.svg and JSON")
    parser.add_argument("--runs", type=count, default=Budget.runs,
                        help=f"with --interleavings: runs of the steered search (default {Budget.runs}; the long "
                             f"campaign of the tests runs {LONG_RUNS} with --aim {LONG_AIM})")
    parser.add_argument("--aim", type=count, default=Budget.aim,
                        help=f"with --interleavings: times each point is wanted (default {Budget.aim})")
    parser.add_argument("--scenarios", type=Path, metavar="DIR",
                        help="with --interleavings: the scenario files (*.txt) counted (default: the checkout's "
                             "tests/scenarios/, where there is one)")
    add_design_option(parser, "the cluster runs its strategy on its base design's knobs (--set changes them); the Z3 "
                              "step check, which reads no design of one's own, is left out")
    add_option(parser)
    html_option(parser)
    parser.set_defaults(handler=cmd_conform)


def cmd_conform(args: argparse.Namespace) -> int:
    if args.steps < 1:
        raise UsageError("conform: --steps must be at least 1")
    design = chosen_design(args)
    knobs = (Knobs() if design is None else design.base).with_settings(args.settings)
    scenarios = CHECKOUT_SCENARIOS if args.scenarios is None else args.scenarios
    if args.scenarios is not None and not scenario_files(args.scenarios):
        raise UsageError(f"conform: --scenarios {args.scenarios}: no scenario file (*.txt) there")
    console = Console(stderr=args.json)
    # Held from the start: a second campaign into the same folder is refused before it runs, not at its end.
    with claimed_in_place(args.out) as folder, Reporter(args.progress) as reporter:
        machines = Recorder()
        campaign = reported_campaign(knobs, args.examples, args.steps, tuple(args.machine or MACHINES),
                                     not args.no_step_check, reporter, design=design,
                                     observers=(machines.observe,) if args.interleavings else ())
        summary = write_report(campaign, folder, args.examples)
        interleavings = None
        if args.interleavings:
            strategy = None if design is None else load_strategy(design, knobs)
            budget = Budget(runs=args.runs, aim=args.aim)
            interleavings = interleaving_campaign(knobs, budget, scenarios, reporter, machines, strategy)
            summary["interleavings"] = write_interleavings(interleavings, folder)
    if args.html:
        kinds.conform_page(summary, campaign.coverage, Path(args.html),
                           interleavings=None if interleavings is None else interleavings.coverage)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(console, campaign, summary)
        if interleavings is not None:
            print_interleavings(console, interleavings, summary["interleavings"])
    if campaign.verdict == UNOBSERVED:
        print("kcm: error: conform: no example ran (unobserved): the campaign does not pass", file=sys.stderr)
    violated = interleavings is not None and bool(interleavings.violations)
    return max(EXIT_VIOLATED if violated else EXIT_OK,
               (EXIT_OK, EXIT_VIOLATED, EXIT_USAGE)[severity(campaign.verdict)])


def write_interleavings(report: CampaignReport, folder: Path) -> dict[str, Any]:
    picture = folder / INTERLEAVINGS_PICTURE
    write_output(picture, matrix_svg(report.coverage))
    return {**report.coverage.to_json(), "runs": report.runs, "events": report.events,
            "violations": [{"run": run, "seq": seq, "invariant": name} for run, seq, name in report.violations],
            "scenarios_stopped": report.stopped,
            "picture": str(picture)}


def print_interleavings(console: Console, report: CampaignReport, summary: dict[str, Any]) -> None:
    for table in tables(report.coverage):
        console.print(table)
    figures = summary["summary"]
    console.print(f"interleavings: {figures['reached']}/{figures['reachable']} reachable points reached, "
                  f"{figures['judged']} judged by their operation's progress property, {figures['violated']} "
                  f"violated; {figures['unreachable']} of {figures['points']} unreachable in the model "
                  f"({report.runs} simulator runs, {report.events:,} events); picture: {summary['picture']}")
    missed = [row for row in summary["points"] if row["status"] == "not reached"]
    if missed:
        console.print(f"[red]not reached ({len(missed)})[/]: " + "; ".join(
            f"{r['operation']} / {r['step']} / {r['fault']} / {r['role']}" for r in missed), soft_wrap=True)
    for why in report.stopped:
        console.print(f"[yellow]scenario file stopped early[/] (its points until then counted): {escape(why)}")
    for run, seq, name in report.violations:
        console.print(f"[red]VIOLATION {name}[/] in the interleaving campaign's run {run} at seq {seq}")


def write_report(campaign: Campaign, folder: Path, asked: int) -> dict[str, Any]:
    """Writes each shrunk failure (scenario and trace) and the coverage picture; returns the JSON summary."""
    folder.mkdir(parents=True, exist_ok=True)
    violations = []
    for number, found in enumerate(campaign.found, 1):
        scenario, trace = found.write(folder, f"{number:02d}-{found.invariant.replace('/', '-')}")
        violations.append({"invariant": found.invariant, "message": found.message, "seq": found.seq,
                           "commands": len(found.commands), "trace": str(trace), "scenario": str(scenario)})
    picture = campaign.coverage.write_svg(folder / COVERAGE_PICTURE)
    tally = campaign.tally
    return {
        "knobs": campaign.knobs.to_dict(),
        "verdict": campaign.verdict,
        "examples_asked": asked,
        # As hypothesis counts them against --examples; the runs it discarded and shrinking are counted apart.
        "examples": tally.counted,
        "examples_replayed": tally.replayed,
        "examples_discarded": tally.discarded,
        "shrinking_runs": tally.shrinking,
        "machine_runs": tally.examples,
        "commands": tally.commands,
        "steps": tally.steps,
        "seconds": round(campaign.seconds, 2),
        "steps_per_second": round(campaign.steps_per_second, 1),
        "violations": violations,
        "coverage": {**campaign.coverage.to_json(), "picture": str(picture)},
    }


def print_summary(console: Console, campaign: Campaign, summary: dict[str, Any]) -> None:
    for table in campaign.coverage.tables():
        console.print(table)
    coverage = summary["coverage"]
    console.print(f"knobs: {campaign.knobs.describe()}")
    console.print(_examples_text(summary), soft_wrap=True)
    console.print(f"commands: {summary['commands']:,}, steps: {summary['steps']:,} in {summary['seconds']:.1f} s "
                  f"({summary['steps_per_second']:,.0f} steps/s)")
    console.print(f"coverage: actions {coverage['actions_covered']}, partition transitions "
                  f"{coverage['partition_transitions_covered']}, replica transitions "
                  f"{coverage['replica_transitions_covered']}; picture: {coverage['picture']}")
    if not summary["violations"]:
        console.print("[green]violations: none[/]")
    for v in summary["violations"]:
        # The explanation whole on one line, its brackets (logs, ISRs) as text, not markup
        console.print(f"[red]VIOLATION {v['invariant']}[/] at event {v['seq']} ({v['commands']} commands after "
                      f"shrinking): {escape(v['message'])}", soft_wrap=True)
        console.print(f"  scenario: {v['scenario']}\n  trace:    {v['trace']}")


def _examples_text(summary: dict[str, Any]) -> str:
    """What hypothesis ran for `--examples N`: the examples it counts against N, and apart from them the ones
    it discarded and its shrinking runs, which also run a machine."""
    text = f"examples: {summary['examples']:,} of {summary['examples_asked']:,} asked"
    if summary["examples_replayed"]:
        text += f" ({summary['examples_replayed']:,} of them replayed from the example database)"
    extra = []
    if summary["examples_discarded"]:
        extra.append(f"{summary['examples_discarded']:,} discarded (no rule applicable, or out of data)")
    if summary["shrinking_runs"]:
        extra.append(f"{summary['shrinking_runs']:,} shrinking")
    if extra:
        text += f"; also run: {', '.join(extra)}; {summary['machine_runs']:,} machine runs in all"
    return text
