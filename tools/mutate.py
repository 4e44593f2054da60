"""`kcm mutate`: the mutation score of the conformance suite (conformance/explore/mutants.py).

    kcm mutate [--only NAME ...] [--processes N] [--examples N] [--steps M] [--seeds N] [--sim-steps S] [--json]
    kcm mutate --generated [--sample N] [--seed S] [--module M ...] [--list] [--json] [--processes N]

Each mutant of the catalogue is applied alone, in a process of its own, and every oracle is run against it
(conformance/explore/oracles.py: named invariants and progress properties, the Z3 step check, replay, the
scenario files' expected outputs, crashes); the result names each oracle that killed it. Exit codes: 0 the
kill rate and the rate killed by a named invariant or property meet their targets, 1 they do not, 2 a usage
error (an unknown mutant, one that no longer applies).

`--generated` runs instead the mutants an AST pass makes of the core modules of impl/
(conformance/explore/generated_mutants.py), each judged by the named invariants and properties alone, and
prints the survivors by module, each module's rate and the totals; exit 0 when the rate killed by a named
oracle meets its target (90%), 1 otherwise.
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

from kcm.conformance.explore import generated_mutants as generated
from kcm.conformance.explore.mutants import (
    CATALOGUE,
    PROGRESS_MUTANTS,
    MutantResult,
    MutationError,
    kill_counts,
    run_mutants,
)
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
    parser.add_argument("--examples", type=int, default=None,
                        help=f"state-machine examples per mutant (default {Suite.examples}; generated: "
                             f"{generated.SUITE.examples})")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"rules per example at most (default {Suite.steps}; generated: {generated.SUITE.steps})")
    parser.add_argument("--seeds", type=int, default=None,
                        help=f"simulator runs per mutant, seeds 1..N (default {len(Suite().seeds)}, the first 3 also "
                             f"step-checked and replayed; generated: {len(generated.SUITE.seeds)}, none validated)")
    parser.add_argument("--sim-steps", type=int, default=None,
                        help=f"steps of each simulator run (default {Suite.sim_steps})")
    parser.add_argument("--generated", action="store_true",
                        help="mutants generated from the core modules of impl/, judged by named oracles alone")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="generated: a sample of N mutants, stratified by module (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="generated: the sample's seed (default 0)")
    parser.add_argument("--module", action="append", metavar="M",
                        help="generated: only this core module, as `replica_manager` (repeatable)")
    parser.add_argument("--timeout", type=float, default=generated.TIMEOUT,
                        help=f"generated: seconds a mutant may run (default {generated.TIMEOUT:.0f})")
    parser.add_argument("--list", action="store_true", help="list the catalogue (or the generated mutants) and exit")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    add_option(parser)
    # Mutants replace implementation methods, which compiled classes refuse.
    parser.set_defaults(handler=cmd_mutate, needs_sources=True)


def _suite(args: argparse.Namespace, base: Suite) -> Suite:
    for option in ("processes", "examples", "steps", "seeds", "sim_steps"):
        value = getattr(args, option)
        if value is not None and value < 1:
            raise UsageError("mutate: --processes, --examples, --steps, --seeds and --sim-steps must be at least 1")
    return Suite(examples=base.examples if args.examples is None else args.examples,
                 steps=base.steps if args.steps is None else args.steps,
                 seeds=base.seeds if args.seeds is None else tuple(range(1, args.seeds + 1)),
                 sim_steps=base.sim_steps if args.sim_steps is None else args.sim_steps,
                 validated=base.validated, sim_config=base.sim_config)


def cmd_mutate(args: argparse.Namespace) -> int:
    if args.generated:
        return cmd_generated(args)
    if args.sample is not None or args.module:
        raise UsageError("mutate: --sample and --module go with --generated")
    if args.list:
        for mutant in CATALOGUE:
            print(f"{mutant.name:38} {mutant.module}.{mutant.target}: {mutant.idea}")
        return EXIT_OK
    known = {m.name: m for m in CATALOGUE}
    unknown = [name for name in args.only or () if name not in known]
    if unknown:
        raise UsageError(f"mutate: unknown mutant {unknown[0]!r} (see kcm mutate --list)")
    suite = _suite(args, Suite())
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


# -- generated mutants --------------------------------------------------------------------------------------


def cmd_generated(args: argparse.Namespace) -> int:
    if args.only:
        raise UsageError("mutate: --only names the catalogue's mutants; --generated takes --module and --sample")
    suite = _suite(args, generated.SUITE)
    modules = generated.CORE_MODULES
    if args.module:
        known = {generated.short(m): m for m in generated.CORE_MODULES}
        unknown = [m for m in args.module if generated.short(m) not in known]
        if unknown:
            raise UsageError(f"mutate: {unknown[0]!r} is not a core module (one of {', '.join(known)})")
        modules = tuple(known[generated.short(m)] for m in args.module)
    if args.sample is not None and args.sample < 1:
        raise UsageError("mutate: --sample must be at least 1")
    if args.timeout <= 0:
        raise UsageError("mutate: --timeout must be positive")
    try:
        everything = generated.generate(modules)
    except MutationError as err:
        raise UsageError(f"mutate: {err}") from None
    mutants = generated.generate(modules, args.sample, args.seed) if args.sample is not None else everything
    if args.list:
        for mutant in mutants:
            argued = " (equivalent)" if mutant.name in generated.EQUIVALENT else ""
            print(f"{mutant.name}  {mutant.idea}{argued}")
        return EXIT_OK
    stream = sys.stderr if args.json else sys.stdout
    console = Console(stderr=args.json, width=None if stream.isatty() else 200)
    started = time.perf_counter()
    with Reporter(args.progress) as reporter, reporter.task("generated mutants", len(mutants)) as task:

        def done(result: generated.Judgement) -> None:
            task.advance(detail=f"{result.mutant.name}: {result.status}")

        results = generated.run_generated(mutants, args.processes, suite, args.timeout, on_result=done)
    score = generated.Score(results, len(everything))
    summary = {**score.to_json(), "sample": args.sample, "seed": args.seed,
               "modules": [generated.short(m) for m in modules],
               "suite": {"seeds": len(suite.seeds), "sim_steps": suite.sim_steps, "examples": suite.examples,
                         "steps": suite.steps},
               "seconds": round(time.perf_counter() - started, 1), "processes": args.processes}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_generated(console, score, summary)
    return EXIT_OK if score.rate >= generated.TARGET else EXIT_VIOLATED


def print_generated(console: Console, score: generated.Score, summary: dict[str, Any]) -> None:
    """The survivors by module, each module's rate, the totals (also the benchmark's report)."""
    table = Table(title="survivors (by module): not killed by a named invariant or property", title_justify="left")
    for column in ("module", "mutant", "edit", "other oracles' evidence"):
        table.add_column(column, overflow="fold")
    for j in score.survivors:
        table.add_row(generated.short(j.mutant.module), escape(j.mutant.name.split(":", 1)[1]),
                      escape(j.mutant.idea), escape(j.by) or "[red]nothing[/]")
    console.print(table)
    modules = Table(title="killed by a named oracle, per module", title_justify="left")
    for column in ("module", "run", "invalid", "equivalent", "judged", "killed", "rate"):
        modules.add_column(column, justify="left" if column == "module" else "right")
    for module, counts in summary["by_module"].items():
        modules.add_row(module, *(str(counts[k]) for k in ("run", "invalid", "equivalent", "judged", "killed")),
                        f"{counts['rate']:.0%}")
    console.print(modules)
    for item in summary["equivalents"]:
        console.print(f"equivalent {escape(item['id'])}: {escape(item['why'])}")
    if summary["contradicted"]:
        console.print("[red]argued equivalent but killed by a named oracle:[/] " + ", ".join(summary["contradicted"]))
    for item in summary["invalid_mutants"]:
        console.print(f"invalid {escape(item['id'])}: {escape(item['why'])}")
    console.print(f"generated {summary['generated']}, run {summary['run']}, invalid {summary['invalid']}, "
                  f"equivalent (argued) {summary['equivalent']}, judged {summary['judged']}, killed by a named "
                  f"oracle {summary['killed']} ({summary['rate']:.1%}, target {summary['target']:.0%}); of the "
                  f"{len(summary['survivors'])} survivors {summary['killed_unnamed']} are caught by an unnamed "
                  f"oracle (expected output, step check, crash) and {summary['stopped']} stopped by an uncaught "
                  f"error or the timeout")
    if "seconds" in summary:
        console.print(f"{summary['seconds']:.0f} s on {summary['processes']} processes "
                      f"({summary['cpu_seconds']:.0f} s of CPU in the mutants' processes)")
