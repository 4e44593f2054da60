"""Conformance benchmark: steps per second of the hypothesis state machines with every step checked
against the invariants and the Z3 model, against the same campaign without the model check (the baseline,
measured in the same run on the very same examples: the `ci` profile is derandomized, so both campaigns
generate the same commands); and the wall time of the `ci` profile as the default test run uses it.

Run it with `python -m kcm.tools.bench.conform` (`--quick` for a smaller campaign).

`--search` measures instead how fast search alone finds each known bug of `KNOWN_BUG_SEARCHES`: examples
and CPU seconds to the first failure and through shrinking, steered by the danger scores, against the same
search unsteered (the baseline, same run, twice the budget). `--search NAME` runs one of them.
"""

from __future__ import annotations

import cProfile
import sys
import time
from collections.abc import Sequence

from rich.console import Console

from kcm.conformance.explore.config import MachineConfig, campaign_settings
from kcm.conformance.explore.harness import Tally
from kcm.conformance.explore.known_bugs import KNOWN_BUG_SEARCHES, KnownBugSearch
from kcm.conformance.explore.stateful import MACHINES, Campaign, run_campaign, run_machine
from kcm.spec.vocabulary import Knobs
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    profile_top,
    ratio,
    table,
    write_summary,
)

NAME = "conform"
TARGET_STEPS_PER_SECOND = 500


def _campaign(examples: int, steps: int, step_check: bool) -> Campaign:
    return run_campaign(Knobs(), examples, steps, step_check=step_check, database=False)


def _ci_profile_seconds() -> tuple[float, float]:
    """Every machine under the `ci` profile, as the default test run does: wall and CPU seconds."""
    started, cpu = time.perf_counter(), time.process_time()
    for machine in MACHINES:
        run_machine(MachineConfig(Knobs(), machine=machine), campaign_settings("ci"), Tally())
    return time.perf_counter() - started, time.process_time() - cpu


def _search(search: KnownBugSearch, steer: bool) -> tuple[Tally, float, bool]:
    """One search as the `long` test runs it: the tally, its CPU seconds, and whether it found the bug."""
    tally = Tally()
    cpu = time.process_time()
    budget = search.search.examples * (1 if steer else 2)
    found = run_machine(search.config(steer), campaign_settings("ci", budget, search.search.steps), tally)
    hit = found is not None and found.invariant.split("/")[0] == search.invariant
    return tally, time.process_time() - cpu, hit


def _searches(out: Console, only: str) -> list[Figure]:
    result = table("known bugs found by search (CPU seconds)", ["search", "steered: first failure", "with shrinking",
                                                                "CPU s", "unsteered: first failure",
                                                                "with shrinking", "CPU s"])
    figures: list[Figure] = []
    for search in KNOWN_BUG_SEARCHES:
        if only not in ("all", search.name):
            continue
        runs = [_search(search, steer) for steer in (True, False)]
        cells: list[str] = []
        for tally, cpu, hit in runs:
            first = f"{tally.first_failure:,}" if hit else f"not found in {tally.examples:,}"
            cells += [first, f"{tally.examples:,}", f"{cpu:.1f}"]
        result.add_row(search.name, *cells)
        (_, cpu_on, hit), (_, cpu_off, hit_off) = runs
        baseline = f"{ratio(cpu_on, cpu_off)} the unsteered search's CPU" if hit_off else "unsteered: not found"
        figures.append(Figure(NAME, f"search {search.name}: CPU to find and shrink", cpu_on, "s", "found", hit,
                              baseline))
    out.print(result)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__ or "")
    parser.add_argument("--examples", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--search", nargs="?", const="all", default=None,
                        help="time search alone on the known bugs (all, or one by name)")
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    out = console()
    print_header(out, "kcm conformance benchmark", command_line(NAME, argv_list))
    if args.search is not None:
        figures = _searches(out, args.search)
        print_footer(out)
        write_summary(args.summary, figures)
        return 0
    examples = args.examples if args.examples is not None else (30 if args.quick else 120)
    steps = args.steps if args.steps is not None else 30
    out.print(f"campaign: {examples} examples of at most {steps} rules, every machine, safe knobs")

    baseline = _campaign(examples, steps, step_check=False)
    profiler = cProfile.Profile() if args.profile else None
    if profiler is not None:
        profiler.enable()
    checked = _campaign(examples, steps, step_check=True)
    if profiler is not None:
        profiler.disable()
    ci_seconds, ci_cpu = _ci_profile_seconds()

    result = table("conformance campaigns", ["campaign", "examples", "steps", "wall s", "CPU s", "steps/s",
                                             "steps/CPU s"])
    for label, campaign in (("invariants only (baseline)", baseline), ("invariants + Z3 step check", checked)):
        result.add_row(label, f"{campaign.tally.examples:,}", f"{campaign.tally.steps:,}", f"{campaign.seconds:.2f}",
                       f"{campaign.cpu_seconds:.2f}", f"{campaign.steps_per_second:,.0f}",
                       f"{campaign.steps_per_cpu_second:,.0f}")
    out.print(result)
    out.print(f"ci profile (every machine, as in the default test run): {ci_seconds:.1f} s wall, {ci_cpu:.1f} s CPU")
    if profiler is not None:
        out.print(profile_top(profiler))
    # Per CPU second: what one core of its own does, which a shared machine's wall clock does not show.
    rate = checked.steps_per_cpu_second
    figures = [
        Figure(NAME, "steps per CPU second, Z3 step check on", rate, "steps/s", f">= {TARGET_STEPS_PER_SECOND}/s",
               rate >= TARGET_STEPS_PER_SECOND,
               f"{ratio(rate, baseline.steps_per_cpu_second)} the rate without the step check"),
        Figure(NAME, "ci profile, every machine (CPU)", ci_cpu, "s", "", None,
               f"{ratio(ci_cpu, checked.cpu_seconds)} the checked campaign's CPU time"),
    ]
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
