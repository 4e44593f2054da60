"""The conformance stage of `kcm verify`: a bounded campaign of the hypothesis state machines
(kcm.conformance.explore.stateful) on the run's knobs, one row per outcome, and the campaign with its
progress shown, which `kcm conform` runs too."""

from __future__ import annotations

import time
from collections.abc import Callable

from kcm.conformance.explore.stateful import MACHINES, Campaign, run_campaign
from kcm.conformance.reporter import Reporter
from kcm.conformance.verify.stages import StageRow, VerifyContext
from kcm.spec.design_folder import DesignFolder
from kcm.spec.trace.format import Event
from kcm.spec.verdicts import UNSUPPORTED, VIOLATED
from kcm.spec.vocabulary import Knobs

# The bounded campaign of `kcm verify` (well under a minute on one core).
VERIFY_EXAMPLES, VERIFY_STEPS = 60, 30


def reported_campaign(knobs: Knobs, examples: int, steps: int, machines: tuple[str, ...], step_check: bool,
                      reporter: Reporter, database: bool = True, design: DesignFolder | None = None,
                      observers: tuple[Callable[[Event], None], ...] = ()) -> Campaign:
    """A campaign of the state machines, each example a step of a task of the reporter."""
    with reporter.task("conformance examples", examples) as task:
        return run_campaign(knobs, examples, steps, machines=machines, step_check=step_check,
                            on_example=task.advance, database=database, design=design, observers=observers)


def stage(ctx: VerifyContext) -> list[StageRow]:
    """The `kcm verify` stage: a bounded campaign on the context's knobs, one row per outcome."""
    started = time.perf_counter()
    # Z3's step check reads built-in rules alone: a design of one's own runs without it (`kcm conform` too).
    step_check = ctx.own_design is None
    campaign = reported_campaign(ctx.knobs, VERIFY_EXAMPLES, VERIFY_STEPS, tuple(MACHINES), step_check,
                                 ctx.reporter, database=False, design=ctx.own_design)
    seconds = time.perf_counter() - started
    coverage = campaign.coverage.to_json()
    detail = (f"{campaign.tally.counted} examples, {campaign.tally.steps:,} steps; transitions covered: "
              f"partition {coverage['partition_transitions_covered']}, replica "
              f"{coverage['replica_transitions_covered']}")
    if not campaign.found:
        checked = ("invariants, progress properties and Z3 step check" if step_check else
                   f"invariants and progress properties ({UNSUPPORTED}: Z3 step check)")
        return [StageRow("conformance", checked, campaign.verdict, detail, seconds)]
    return [StageRow("conformance", found.invariant, VIOLATED, f"{found.message} ({len(found.commands)} commands)",
                     seconds) for found in campaign.found]
