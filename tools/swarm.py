"""`kcm check --model M --swarm N` (and `spark-submit tools/swarm.py --model M --swarm N`): N seeds of TLC's
simulation mode on the model as Spark tasks (kcm.conformance.explore.swarm), until the first counterexample,
which is replayed in the implementation as `kcm hunt` confirms one; every seed's fate in the seed ledger.

Exit 0 no counterexample (the verdict is unknown: a swarm proves nothing), 1 a violation, 2 a bad option, model,
knob or ledger, no Java, or Spark that cannot start. `--resume` reruns only the seeds the ledger has not
finished. Under spark-submit the master spark-submit was given is used unless `--master` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from kcm.conformance.explore.hunt import SIMULATE, STEERED, Engine, Hunt
from kcm.conformance.explore.route import confirm
from kcm.conformance.explore.swarm import (
    DEFAULT_BEHAVIOURS,
    DEFAULT_DEPTHS,
    DEFAULT_EXAMPLES,
    Ledger,
    LedgerError,
    SwarmResult,
    plan,
    run_swarm,
)
from kcm.spec.atomic_output import OutputError, held_file
from kcm.spec.tlc.modelcheck import (
    ModelError,
    check_invariant_names,
    model_knobs,
    models,
    render_counterexample,
    write_events,
)
from kcm.spec.tlc.runner import TlcSetupError, find_tools
from kcm.spec.trace.format import TraceError
from kcm.spec.verdicts import UNKNOWN, VIOLATED
from kcm.spec.vocabulary import KnobError, Knobs
from kcm.tools.design_option import chosen_design, described, refuse_unread_by_tlc
from kcm.tools.errors import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, Parser, UsageError, at_least, non_empty
from kcm.tools.outputs import out_file
from kcm.tools.progress import Reporter, add_option

DEFAULT_BUDGET: Final = 600.0
# `kcm hunt --spark` races the implementation's steered simulator too, where the design has a steered search.
HUNT_KINDS: Final = (SIMULATE, STEERED)


def add_swarm_options(parser: argparse.ArgumentParser, hunt: bool = False) -> None:
    """The swarm's options, for `kcm check --swarm N` and `kcm hunt --spark` alike."""
    if not hunt:
        parser.add_argument("--swarm", type=at_least(1), default=None, metavar="SEEDS",
                            help="no exhaustive search: SEEDS seeds of TLC's simulation mode as Spark tasks, until the "
                                 "first counterexample (docs/hunt.md, \"The swarm\")")
    parser.add_argument("--master", default=None,
                        help="Spark master of the swarm (default local[*]; under spark-submit, its own)")
    parser.add_argument("--first-seed", type=int, default=1, metavar="S", help="the swarm's first seed (default 1)")
    parser.add_argument("--depths", type=_depths, default=DEFAULT_DEPTHS, metavar="D,D,...",
                        help="each simulated behaviour's bound, the seeds taking them in turn (default "
                             f"{','.join(map(str, DEFAULT_DEPTHS))})")
    parser.add_argument("--behaviours", type=at_least(1), default=DEFAULT_BEHAVIOURS,
                        help=f"behaviours each TLC seed simulates (default {DEFAULT_BEHAVIOURS})")
    parser.add_argument("--examples", type=at_least(1), default=DEFAULT_EXAMPLES,
                        help=f"examples each steered seed runs (default {DEFAULT_EXAMPLES})")
    parser.add_argument("--ledger", default=None, metavar="PATH",
                        help="the seed ledger (default kcm-out/<command>/<model>-seeds.jsonl)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the ledger's swarm (only the seeds it has not finished run)"
                             + ("" if hunt else ", or the run kept in the --checkpoint folder"))
    if not hunt:
        parser.add_argument("--budget", type=float, default=None,
                            help=f"seconds the swarm may take (default {DEFAULT_BUDGET:g}), or TLC's exhaustive "
                                 "search (default: none), which --checkpoint lets --resume continue")


def _depths(text: str) -> tuple[int, ...]:
    try:
        depths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers") from None
    if not depths or min(depths) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: each depth must be at least 1")
    return depths


def hunted(args: argparse.Namespace, default_model: Callable[[Knobs], str] = lambda _: "ci") -> Hunt:
    """What a search hunts: the model (`--model`, a design's first, else `default_model` of the knobs) under its own
    knobs, the design's and the given ones (`--set`), for `--invariant`s; a UsageError for an unknown name."""
    design = chosen_design(args)
    refuse_unread_by_tlc(design)
    knobs = (Knobs() if design is None else design.base).with_settings(args.settings)
    model = args.model or (default_model(knobs) if design is None else design.models[0])
    if model not in models():
        raise UsageError(f"--model {model}: unknown model (known: {', '.join(sorted(models()))})")
    try:
        check_invariant_names(args.invariants)
    except ModelError as err:
        raise UsageError(f"--invariant: {err}") from err
    # The model's own settings (its bounds' era) under the design's and the ones given.
    knobs = model_knobs(model)
    if design is not None:
        knobs = design.on_model(knobs)
    knobs = knobs.with_settings(args.settings)
    return Hunt(model, knobs, tuple(args.invariants) if args.invariants else None, design=design)


def start_swarm(args: argparse.Namespace, hunt: Hunt, command: str, seeds: int, budget: float,
                submitted: bool = False, kinds: Sequence[str] = (SIMULATE,)) -> SwarmResult:
    """The swarm of `seeds` seeds on the chosen master, its ledger under `command`'s outputs."""
    if not budget > 0:
        raise UsageError(f"--budget must be a positive number of seconds, not {budget:g}")
    try:
        find_tools()
    except TlcSetupError as err:
        raise UsageError(str(err)) from err
    ledger_path = out_file(args.ledger, command, f"{hunt.model}-seeds.jsonl")
    # Held for the whole swarm: another kcm swarm on the same ledger is refused at once.
    with held_file(ledger_path):
        try:
            engines = plan(hunt, seeds, args.first_seed, args.depths, args.behaviours, args.examples, kinds)
            ledger = Ledger.start(ledger_path, hunt, args.resume)
        except (LedgerError, ValueError) as err:
            raise UsageError(str(err)) from err
        return _run(args, hunt, engines, ledger, budget, submitted)


def _run(args: argparse.Namespace, hunt: Hunt, engines: list[Engine], ledger: Ledger, budget: float,
         submitted: bool) -> SwarmResult:
    from kcm.conformance.pipeline.session import DEFAULT_MASTER, SparkStartError, spark_session

    master = args.master or (None if submitted else DEFAULT_MASTER)
    try:
        spark = spark_session(master, app=f"kcm-swarm-{hunt.model}")
    except SparkStartError as err:
        raise UsageError(str(err)) from err
    try:
        with Reporter(args.progress) as reporter, reporter.task(f"swarm {hunt.model}") as task:
            result = run_swarm(spark, hunt, engines, ledger, budget, task.update)
    except KeyboardInterrupt:
        from kcm.conformance.pipeline.session import end_jvm

        end_jvm()  # the JVM goes with kcm (its group is kcm's): no stop, whose errors would be all it printed
        raise
    spark.stop()
    return result


def cmd_swarm(args: argparse.Namespace, submitted: bool = False) -> int:
    hunt = hunted(args)
    out = out_file(args.out, "check", f"{hunt.model}-counterexample.jsonl")
    if args.checkpoint is not None:
        raise UsageError("--checkpoint keeps an exhaustive search: a swarm keeps its seed ledger (--ledger)")
    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    result = start_swarm(args, hunt, "check", args.swarm, budget, submitted)
    found = result.winner
    summary: dict[str, Any] = {
        "model": hunt.model, "knobs": hunt.knobs.to_dict(), "result": VIOLATED if found else UNKNOWN,
        "seeds_planned": result.planned, "seeds_run": len(result.runs), "seeds_skipped": result.skipped,
        "slots": result.slots, "states": result.states, "seconds": round(result.seconds, 2),
        "ledger": str(result.ledger), "seeds": [run.to_json() for run in result.runs]}
    unwritten = None
    if found is not None:
        confirmation = confirm(found, hunt.design)
        try:
            write_events(found.events, out)
        except TraceError as err:
            unwritten = str(err)
        summary.update(invariant=found.invariant, winner=found.engine.name, steps=found.steps,
                       trace=None if unwritten else str(out), **confirmation.to_json())
        if unwritten:
            summary.update(trace_not_written=unwritten, counterexample=found.events)
    if args.json:
        print(json.dumps(summary, indent=2))
        return EXIT_VIOLATED if found else EXIT_OK
    fates = _fates(result)
    head = f"swarm {hunt.model} ({described(hunt.knobs, hunt.design)}) on {result.slots} slots"
    if found is None:
        print(f"{head}: no counterexample ({UNKNOWN}: a swarm proves nothing); {fates}; {result.states:,} states, "
              f"{result.seconds:.1f} s")
        print(f"seed ledger: {result.ledger}")
        return EXIT_OK
    print(f"{head}: violated {found.invariant} by {found.engine.name} (depth {found.engine.depth}) in "
          f"{found.steps} steps after {result.seconds:.1f} s; {fates}; {result.states:,} states")
    print(f"  replay: {summary['replay']}")
    print(render_counterexample(found.events))
    print(f"counterexample not written: {unwritten}" if unwritten else
          f"counterexample written to {out} (trace format v2)")
    print(f"seed ledger: {result.ledger}")
    return EXIT_VIOLATED


def _fates(result: SwarmResult) -> str:
    counts: dict[str, int] = {}
    for run in result.runs:
        counts[run.fate] = counts.get(run.fate, 0) + 1
    ran = f"{len(result.runs)} seeds ran ({', '.join(f'{n} {fate}' for fate, n in counts.items()) or 'none'})"
    return ran + (f", {result.skipped} finished before (ledger)" if result.skipped else "")


def main(argv: Sequence[str] | None = None, submitted: bool = False) -> int:
    """The swarm on its own: what `spark-submit tools/swarm.py --model M --swarm N ...` runs."""
    from kcm.tools.design_option import add_design_option

    parser = Parser(prog="kcm check --swarm", description="A swarm of TLC simulations on Spark.")
    parser.add_argument("--model", type=non_empty, default=None)
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE")
    parser.add_argument("--invariant", dest="invariants", action="append", default=[], metavar="NAME")
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", action="store_true")
    add_design_option(parser, "its first model by default")
    add_swarm_options(parser)
    parser.set_defaults(checkpoint=None)
    add_option(parser)
    try:
        args = parser.parse_args(argv)
        if args.swarm is None:
            raise UsageError("--swarm SEEDS is required")
        return cmd_swarm(args, submitted)
    except (UsageError, KnobError, ValueError, OutputError) as err:
        print(f"kcm: error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(submitted=True))
