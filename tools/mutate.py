"""`kcm mutate`: the mutation score of the conformance suite (conformance/explore/mutants.py).

    kcm mutate [--only NAME ...] [--processes N] [--examples N] [--steps M] [--seeds N] [--sim-steps S] [--json]

Each mutant of the catalogue is applied alone, in a process of its own, and every oracle is run against it
(conformance/explore/oracles.py: named invariants and progress properties, the Z3 step check, replay, the
scenario files' expected outputs, crashes); the result names each oracle that killed it. Exit codes: 0 the
kill rate and the rate killed by a named invariant or property meet their targets, 1 they do not, 2 a usage
error (an unknown mutant, one that no longer applies).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kcm.conformance.explore.mutants import CATALOGUE, PROGRESS_MUTANTS, MutantResult, kill_counts, run_mutants
from kcm.conformance.explore.oracles import ORACLES, Suite
from kcm.tools.errors import EXIT_OK, EXIT_VIOLATED, UsageError
from kcm.tools.progress import Reporter, add_option

TARGET = 0.95
NAMED_TARGET = 0.90  # killed by a named invariant or property, not only by an expected output


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("mutate", help="mutation score: the conformance suite against mutants of impl/")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this mutant (repeatable)")
    parser.add_argument("--processes", type=int, default=min(2, os.cpu_count() or 1),
                        help="mutants run at once, one process each (default: 2, or 1 on one core)")
    parser.add_argument("--examples", type=int, default=Suite.examples, help="state-machine examples per mutant")
    parser.add_argument("--steps", type=int, default=Suite.steps, help="rules per example at most")
    parser.add_argument("--seeds", type=int, default=len(Suite().seeds),
                        help="simulator runs per mutant, seeds 1..N (default 100; the first 3 also step-checked, "
                             "replayed)")
    parser.add_argument("--sim-steps", type=int, default=Suite.sim_steps, help="steps of each simulator run")
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_option(parser)
    # Mutants replace implementation methods, which compiled classes refuse.
    parser.set_defaults(handler=cmd_mutate, needs_sources=True)


def cmd_mutate(args: argparse.Namespace) -> int:
    if args.list:
        for mutant in CATALOGUE:
            print(f"{mutant.name:38} {mutant.module}.{mutant.target}: {mutant.idea}")
        return EXIT_OK
    known = {m.name: m for m in CATALOGUE}
    unknown = [name for name in args.only or () if name not in known]
    if unknown:
        raise UsageError(f"mutate: unknown mutant {unknown[0]!r} (see kcm mutate --list)")
    if min(args.processes, args.examples, args.steps, args.seeds, args.sim_steps) < 1:
        raise UsageError("mutate: --processes, --examples, --steps, --seeds and --sim-steps must be at least 1")
    suite = Suite(examples=args.examples, steps=args.steps, seeds=tuple(range(1, args.seeds + 1)),
                  sim_steps=args.sim_steps)
    mutants = tuple(known[name] for name in args.only) if args.only else CATALOGUE
    # Written to a file, the table keeps its columns whole instead of wrapping them to 80 characters.
    stream = sys.stderr if args.json else sys.stdout
    console = Console(stderr=args.json, width=None if stream.isatty() else 200)
    started = time.perf_counter()
    with Reporter(args.progress) as reporter, reporter.task("mutants", len(mutants)) as task:

        def done(result: MutantResult) -> None:
            task.advance(detail=f"{result.name}: {'killed' if result.killed else 'SURVIVED'}")

        results = run_mutants(mutants, args.processes, suite, on_result=done)
    seconds = time.perf_counter() - started
    killed = sum(r.killed for r in results)
    named = sum(r.named for r in results)
    rate = killed / len(results)
    summary = {"killed": killed, "total": len(results), "kill_rate": round(rate, 4), "target": TARGET,
               "named": named, "named_rate": round(named / len(results), 4), "named_target": NAMED_TARGET,
               "by_oracle": kill_counts(results),
               "seconds": round(seconds, 1), "processes": args.processes,
               "cpu_seconds": round(sum(r.cpu_seconds for r in results), 1),
               "survivors": [r.name for r in results if not r.killed],
               "unnamed": [r.name for r in results if r.killed and not r.named],
               "progress_unnamed": [r.name for r in results if r.name in PROGRESS_MUTANTS and not r.named],
               "mutants": [r.to_json() for r in results]}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(console, results, summary)
    return EXIT_OK if rate >= TARGET and named / len(results) >= NAMED_TARGET else EXIT_VIOLATED


def _print(console: Console, results: list[MutantResult], summary: dict[str, Any]) -> None:
    ideas = {m.name: m.idea for m in CATALOGUE}
    table = Table(title="mutants", title_justify="left")
    for column in ("mutant", "idea", "result", "oracles", "strongest evidence", "s"):
        # Names fold onto a second line on a narrow terminal, never cut.
        table.add_column(column, justify="right" if column == "s" else "left", overflow="fold")
    for r in results:
        verdict = ("killed" if r.named else "[yellow]killed, unnamed[/]") if r.killed else "[red]SURVIVED[/]"
        oracles = ", ".join(oracle for oracle in ORACLES if oracle in r.kills)
        # Evidence such as `scenario x.txt:12` is text, not rich markup.
        table.add_row(escape(r.name), escape(ideas[r.name]), verdict, oracles, escape(r.by), f"{r.seconds:.0f}")
    console.print(table)
    console.print(f"killed {summary['killed']}/{summary['total']} ({summary['kill_rate']:.0%}, target "
                  f"{TARGET:.0%}); by a named invariant or property {summary['named']}/{summary['total']} "
                  f"({summary['named_rate']:.0%}, target {NAMED_TARGET:.0%}) in {summary['seconds']:.0f} s on "
                  f"{summary['processes']} processes ({summary['cpu_seconds']:.0f} s of CPU in all)")
    console.print("kills per oracle: " + ", ".join(f"{oracle} {count}"
                                                   for oracle, count in summary["by_oracle"].items()))
    for label, key in (("survivors", "survivors"), ("killed only by unnamed oracles", "unnamed")):
        if summary[key]:
            console.print(f"{label}: " + ", ".join(summary[key]) + " (see docs/mutation.md)")
