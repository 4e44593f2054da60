"""Simulation campaigns: many seeds of the simulator, every event checked as it is produced."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kcm.conformance.check.invariants import InvariantChecker, Violation, per_invariant
from kcm.impl.design import Design
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event
from kcm.spec.verdicts import VIOLATED, held
from kcm.spec.vocabulary import INVARIANTS, PROPERTIES, Knobs


@dataclass
class SeedResult:
    seed: int
    steps: int
    violations: list[Violation]
    events: list[Event] = field(default_factory=list)
    checks: Counter[str] = field(default_factory=Counter)


@dataclass
class CampaignResult:
    knobs: Knobs
    seeds: list[SeedResult] = field(default_factory=list)
    checks: Counter[str] = field(default_factory=Counter)

    @property
    def steps(self) -> int:
        return sum(s.steps for s in self.seeds)

    def first_violation(self) -> tuple[SeedResult, Violation] | None:
        for seed in self.seeds:
            if seed.violations:
                return seed, seed.violations[0]
        return None

    def verdicts(self) -> dict[str, str]:
        """An invariant or a progress property is violated, or holds once checked (a property: judged at a
        calm phase's deadline) on a campaign that took a step; a campaign of no seed or no step only set its
        clusters up, which checks no behaviour, so all of it is unobserved."""
        broken = {v.invariant.split("/")[0] for s in self.seeds for v in s.violations}
        checked = per_invariant(self.checks)
        return {name: VIOLATED if name in broken else held(checked[name] if self.steps else 0)
                for name in (*INVARIANTS, *PROPERTIES)}


def run_seed(seed: int, knobs: Knobs, config: SimConfig, steps: int, keep_events: bool = False,
             stop_at_violation: bool = True, design: Design | None = None) -> SeedResult:
    """Simulates one seed with every event checked; stops at the first violation unless told not to. `design`:
    the strategy of a design of one's own (default: the built-in design the knobs name)."""
    checker = InvariantChecker(knobs.truncation)
    result = SeedResult(seed, 0, [])

    def sink(event: Event) -> None:
        if keep_events:
            result.events.append(event)
        result.violations.extend(checker.step(event))

    sim = Simulator(seed, knobs, config, sink, design=design)
    sim.bootstrap()
    chunk = 50 if stop_at_violation else steps
    while result.steps < steps and not (stop_at_violation and result.violations):
        result.steps += sim.run(min(chunk, steps - result.steps))
    result.checks = checker.report.checks
    return result


def run_campaign(
    knobs: Knobs,
    seeds: range | list[int],
    steps: int,
    config: SimConfig | None = None,
    on_seed: Callable[[SeedResult], None] | None = None,
    design: Design | None = None,
) -> CampaignResult:
    config = config or SimConfig()
    result = CampaignResult(knobs)
    for seed in seeds:
        outcome = run_seed(seed, knobs, config, steps, design=design)
        result.seeds.append(outcome)
        result.checks.update(outcome.checks)
        if on_seed is not None:
            on_seed(outcome)
    return result
