"""Generated-mutant benchmark (issue 42, item 4): the share of mechanically generated mutants of impl/'s core that
a named invariant or property kills, and what judging them costs against the baseline of the same run, the
unmutated implementation under the same suite (every route run: what a surviving mutant costs at least).

    python -m kcm.tools.bench.generated_mutants                     # 200 mutants, seed 0, 2 processes
    python -m kcm.tools.bench.generated_mutants --sample 400 --seed 1
    python -m kcm.tools.bench.generated_mutants --quick             # 24 mutants, for a smoke run

The mutants are `generate(CORE_MODULES, limit=--sample, seed=--seed)` of
kcm.conformance.explore.generated_mutants (a stratified sample by module), each judged in a process of its own
with that module's SUITE (scenario files, 20 simulator runs, the state-machine campaign) until a named oracle
kills it. It runs for minutes, so `python -m kcm.tools.bench` does not run it (as `bench.hunt`). It patches
implementation functions, so a compiled install measures it through `tools/bench/run.py --interpreted`.
Figures and the survivors: docs/mutation.md, "Generated mutants".
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence

from rich.console import Console

from kcm.conformance.explore import generated_mutants as generated
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    ratio,
    table,
    write_summary,
)
from kcm.tools.mutate import print_generated
from kcm.tools.progress import Reporter

NAME = "generated_mutants"
BUDGET_SECONDS = 1800.0  # a 200-mutant run on 2 processes, at most
BUDGET_MUTANTS = 200


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "Kill rate of generated mutants by the named oracles, and its cost.")
    parser.add_argument("--sample", type=int, default=None, help="mutants judged (default 200; --quick 24)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument("--processes", type=int, default=2, help="mutants judged at once (default 2)")
    args = parser.parse_args(argv)
    out = console()
    print_header(out, "kcm generated-mutant benchmark",
                 command_line(NAME, list(sys.argv[1:] if argv is None else argv)))
    sample = args.sample if args.sample is not None else (24 if args.quick else BUDGET_MUTANTS)
    suite = generated.SUITE
    everything = generated.generate()
    mutants = generated.generate(limit=sample, seed=args.seed)
    out.print(f"mutants : {len(mutants)} of {len(everything)} generated from {len(generated.CORE_MODULES)} core "
              f"modules (seed {args.seed}), {args.processes} processes")
    out.print(f"suite   : the scenario files, seeds 1-{len(suite.seeds)} of {suite.sim_steps:,} steps, a campaign of "
              f"{suite.examples} examples of at most {suite.steps} rules; stopped at the first named kill")

    base = generated.baseline(suite)
    if base.kills:
        out.print(f"[bold red]the unmutated implementation is killed:[/] {base.by}")
        return 1
    started = time.perf_counter()
    with Reporter("plain") as reporter, reporter.task("generated mutants", len(mutants)) as task:
        results = generated.run_generated(mutants, args.processes, suite,
                                          on_result=lambda r: task.advance(detail=f"{r.mutant.name}: {r.status}"))
    wall = time.perf_counter() - started
    score = generated.Score(results, len(everything))
    summary = {**score.to_json(), "seconds": round(wall, 1), "processes": args.processes}
    print_generated(out, score, summary)
    _costs(out, score, base.cpu_seconds)
    per_mutant = wall / len(results) if results else float("nan")
    projected = per_mutant * BUDGET_MUTANTS * args.processes / 2
    figures = [
        Figure(NAME, "killed by a named oracle", score.rate * 100, "%", f">= {generated.TARGET:.0%}",
               score.rate >= generated.TARGET,
               f"{summary['killed']} of {summary['judged']} judged ({summary['equivalent']} equivalent, "
               f"{summary['invalid']} invalid left out)"),
        Figure(NAME, f"wall time, {len(results)} mutants on {args.processes} processes", wall, "s", "", None,
               f"{ratio(wall, base.seconds)} the unmutated suite's {base.seconds:.1f} s"),
        Figure(NAME, "200 mutants on 2 processes (projected)", projected, "s", f"<= {BUDGET_SECONDS:.0f} s",
               projected <= BUDGET_SECONDS, f"{ratio(projected, base.seconds)} the unmutated suite"),
    ]
    out.print(f"rate    : {score.rate:.1%} killed by a named oracle (target {generated.TARGET:.0%}); "
              f"{wall:.0f} s wall for {len(results)} mutants on {args.processes} processes, "
              f"{ratio(wall, base.seconds)} the unmutated suite's run ({base.seconds:.1f} s); a 200-mutant run "
              f"projects to {projected:.0f} s (budget {BUDGET_SECONDS:.0f} s)")
    print_footer(out)
    write_summary(args.summary, figures, {"score": {k: v for k, v in summary.items() if k != "mutants"}})
    return 0


def _costs(out: Console, score: generated.Score, baseline_cpu: float) -> None:
    result = table(f"CPU seconds per mutant, against the unmutated suite's {baseline_cpu:.1f} s",
                   ["status", "mutants", "median", "max", "sum", "median vs baseline"])
    for status in (generated.KILLED, generated.SURVIVED, generated.EQUIVALENT_STATUS, generated.INVALID):
        cpu = [j.cpu_seconds for j in score.judgements if j.status == status]
        if cpu:
            result.add_row(status, str(len(cpu)), f"{statistics.median(cpu):.1f}", f"{max(cpu):.1f}",
                           f"{sum(cpu):.0f}", ratio(statistics.median(cpu), baseline_cpu))
    out.print(result)


if __name__ == "__main__":
    sys.exit(main())
