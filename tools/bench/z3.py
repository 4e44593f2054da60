"""Z3 benchmark: the universal proofs, the induction steps, bounded model checking side by side with TLC,
and step validation, each against a baseline measured in the same run.

Run it with `python -m kcm.tools.bench.z3` (`--quick` for smaller sizes, `--no-tlc` without TLC).

  proofs      each universal proof at 8 brokers (target: each <= 10 s); baseline: enumerating every input
              of the implementation's offline election for 4 brokers in Python (what a test would cover);
  induction   each IndInit / IndNext / IndProp at 3 brokers (target: each <= 30 s); baseline: one
              satisfiable step of the transition relation (Init and Next) in the same solver setting;
  bmc         time to the shortest counterexample of each known bug (the default knobs: no counterexample up
              to the depth the bugs need), with TLC on the matching reproduction model of spec/ (MC*.cfg)
              in the same run (target: faster than TLC; `python -m kcm.tools.bench.bmc` shows the deep
              searches depth by depth, over solver seeds);
  validate    steps/s of `kcm validate` on a simulator trace (3 brokers, 1 partition; target >= 1,000
              steps/s); baseline: the invariant checker's events/s on the same events.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Sequence

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.tables import implementation_rules
from kcm.impl import election
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event
from kcm.spec.verdicts import HOLDS
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.bmc import BMC_BUGS, run_bmc
from kcm.spec.z3.induction import TARGETS, Induction
from kcm.spec.z3.proofs import run_proofs
from kcm.spec.z3.solver import z3
from kcm.spec.z3.validate import Validator
from kcm.tools.bench._common import (
    Figure,
    base_parser,
    command_line,
    console,
    peak_rss_mib,
    print_footer,
    print_header,
    ratio,
    table,
    write_summary,
)

NAME = "z3"
PROOF_TARGET_S = 10.0
INDUCTION_TARGET_S = 30.0
VALIDATION_TARGET = 1_000.0

def enumerate_offline_election(brokers: int) -> tuple[float, int]:
    """Every (assignment, ISR, live, unclean) input of the implementation's offline election, checked."""
    ids = range(brokers)  # from 0, as the election proofs number them
    count = 0
    start = time.perf_counter()
    for size in range(1, brokers + 1):
        for assignment in itertools.permutations(ids, size):
            subsets = [set(c) for k in range(1, size + 1) for c in itertools.combinations(assignment, k)]
            for isr in subsets:
                for mask in range(1 << brokers):
                    live = {b for b in ids if mask >> b & 1}
                    for unclean in (False, True):
                        leader = election.offline_partition_leader(assignment, isr, live, unclean)
                        assert leader is None or (leader in live and leader in assignment)
                        count += 1
    return time.perf_counter() - start, count


def one_step_query(brokers: int) -> float:
    engine = Induction(brokers)
    solver = z3.Solver()
    solver.add(engine.init, engine.next)
    start = time.perf_counter()
    solver.check()
    return time.perf_counter() - start


def simulate(steps: int) -> list[Event]:
    events: list[Event] = []
    sim = Simulator(1, Knobs(), SimConfig(brokers=3, partitions=1, admin=0.0), events.append)
    sim.bootstrap()
    sim.run(steps)
    return events


def tlc_seconds(model: str) -> tuple[float | None, str]:
    """TLC's time to its counterexample on a reproduction model, run as `kcm check --model` runs it (the
    model's own knobs and settings)."""
    from kcm.spec.tlc.modelcheck import ModelError, check_model, model_knobs
    from kcm.spec.tlc.runner import TlcError, TlcSetupError

    try:
        outcome = check_model(model, model_knobs(model))
    except (ModelError, TlcSetupError, TlcError) as err:
        return None, str(err)
    result = outcome.result
    return result.seconds, f"{result.violated or 'no violation'} at depth {result.depth}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, "Z3 proofs, induction, bounded model checking (with TLC), step validation.")
    parser.add_argument("--no-tlc", action="store_true", help="do not run TLC beside the bounded model checker")
    parser.add_argument("--steps", type=int, default=None, help="trace length for validation (default 10000)")
    args = parser.parse_args(argv)
    argv_list = list(sys.argv[1:] if argv is None else argv)
    out = console()
    print_header(out, "kcm Z3 benchmark", command_line(NAME, argv_list))
    figures: list[Figure] = []

    # -- universal proofs ---------------------------------------------------------------------------------
    baseline_s, inputs = enumerate_offline_election(4)
    proofs = run_proofs(brokers=8, rules=implementation_rules())
    worst = max(proofs, key=lambda r: r.seconds)
    total = sum(r.seconds for r in proofs)
    offline = sum(r.seconds for r in proofs if r.group == "election/offline")
    proofs_table = table("universal proofs, 8 brokers", ["group", "proofs", "proved", "seconds", "slowest"])
    for group in dict.fromkeys(r.group for r in proofs):
        rows = [r for r in proofs if r.group == group]
        proofs_table.add_row(group, str(len(rows)), str(sum(r.result == HOLDS for r in rows)),
                             f"{sum(r.seconds for r in rows):.3f}", f"{max(r.seconds for r in rows):.3f}")
    out.print(proofs_table)
    out.print(f"baseline: the implementation's offline election over all {inputs:,} inputs of 4 brokers in "
              f"{baseline_s:.2f} s; Z3 proves its 5 properties for every input up to 8 brokers in {offline:.2f} s "
              f"({ratio(offline, baseline_s)} the enumeration)")
    figures.append(Figure(NAME, "slowest universal proof (8 brokers)", worst.seconds, "s",
                          f"<= {PROOF_TARGET_S:.0f} s", worst.seconds <= PROOF_TARGET_S,
                          f"all {len(proofs)} in {total:.1f} s"))

    # -- induction ----------------------------------------------------------------------------------------
    step_s = one_step_query(3)
    engine = Induction(3)
    targets = TARGETS[:3] if args.quick else TARGETS
    induction_table = table("induction, 3 brokers", ["invariant", "alone", "IndInit", "IndNext", "IndProp",
                                                     "search s"])
    slowest = 0.0
    for target in targets:
        result = engine.prove(target)
        times = {s.step: s for s in result.steps}
        slowest = max([slowest, *(s.seconds for s in result.steps)])
        cells = [f"{times[k].seconds:.2f} {times[k].result}" for k in ("IndInit", "IndNext", "IndProp")]
        alone = "yes" if result.alone else f"no (+{len(result.strengthening)} lemmas)"
        induction_table.add_row(target, alone, *cells, f"{result.search_seconds:.1f}")
    out.print(induction_table)
    out.print(f"baseline: one satisfiable step (Init and Next) takes {step_s:.3f} s")
    figures.append(Figure(NAME, "slowest induction step (3 brokers)", slowest, "s", f"<= {INDUCTION_TARGET_S:.0f} s",
                          slowest <= INDUCTION_TARGET_S, f"{ratio(slowest, step_s)} one step query"))

    # -- bounded model checking beside TLC -----------------------------------------------------------------
    bmc_table = table("time to the shortest counterexample", ["design", "Z3 BMC", "depth", "s", "TLC", "s",
                                                              "Z3 vs TLC"], text_columns=2)
    # --quick leaves out the searches of three brokers (KAFKA-1211, the KIP-279 and KIP-320 cases).
    bugs = [bug for bug in BMC_BUGS if not (args.quick and bug.story.deep)]
    for bug in bugs:
        found = bug.run()
        tlc_s, note = (None, "skipped") if args.no_tlc else tlc_seconds(bug.model)
        versus = ratio(found.seconds, tlc_s) if tlc_s else "n/a"
        bmc_table.add_row(bug.label, found.invariant or "none", str(found.depth), f"{found.seconds:.1f}",
                          note, "" if tlc_s is None else f"{tlc_s:.1f}", versus)
        figures.append(Figure(NAME, f"BMC to {bug.invariant}, {bug.label}", found.seconds, "s", "faster than TLC",
                              None if tlc_s is None else found.seconds < tlc_s,
                              f"TLC {bug.model}: {'n/a' if tlc_s is None else f'{tlc_s:.1f} s'}"))
    clean = run_bmc(Knobs(), 4 if args.quick else 6, brokers=3)
    bmc_table.add_row("defaults (kip320)", "none" if not clean.found else str(clean.invariant), str(clean.depth),
                      f"{clean.seconds:.1f}", "", "", "")
    out.print(bmc_table)

    # -- step validation -------------------------------------------------------------------------------------
    steps = args.steps or (3_000 if args.quick else 10_000)
    events = simulate(steps)
    start = time.perf_counter()
    InvariantChecker().check_all(events)
    checker_s = time.perf_counter() - start
    report = Validator(events).run()
    rate = report.steps_per_second
    checker_rate = len(events) / checker_s
    out.print(f"validate: {report.steps:,} steps, all explained: {report.ok}; {report.checked:,} solver checks; "
              f"{report.seconds:.1f} s = {rate:,.0f} steps/s (baseline: the invariant checker at "
              f"{checker_rate:,.0f} events/s on the same events, {ratio(checker_rate, rate)} faster)")
    figures.append(Figure(NAME, "step validation", rate, "steps/s", f">= {VALIDATION_TARGET:,.0f}/s",
                          rate >= VALIDATION_TARGET, f"the invariant checker is {ratio(checker_rate, rate)} faster"))
    out.print(f"peak RSS: {peak_rss_mib():,.0f} MiB (ru_maxrss)")
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
