"""The oracles a mutant of the implementation runs against, each reported by name, so that what kills a bug
shows apart from the golden files.

Every oracle runs, whatever an earlier one found (`kills`: oracle -> its first evidence):

- `invariant`: the invariant checker names a safety invariant (docs/invariants.md), on the scenario files,
  the simulator's runs or the state-machine campaign;
- `property`: the checker names a progress property, on the same routes;
- `step check`: the Z3 transition relation cannot explain a step (simulator runs, campaign);
- `replay`: the mutant cannot follow a trace the unmutated implementation wrote and every oracle passed
  (`conformance/check/replay.py`): it behaves differently where the model allowed the reference's behaviour;
- `expected output`: a scenario's output differs from its file, or a violation the file expects is missing.
  This is the one oracle `KCM_REWRITE=1` would silence;
- `crash`: the implementation raises, or stalls the state machine's cluster (it never settles).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.replay import Replayer
from kcm.conformance.explore.finding import IMPLEMENTATION_ERROR, MODEL_STEP
from kcm.conformance.scenario.environment import CommandError, Environment
from kcm.conformance.scenario.language import ScenarioError, diff, parse, run_case, scenario_files
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import INVARIANTS, Knobs
from kcm.spec.z3.validate import validate_events

INVARIANT, PROPERTY, STEP_CHECK, REPLAY, EXPECTED_OUTPUT, CRASH = (
    "invariant", "property", "step check", "replay", "expected output", "crash")
ORACLES: Final = (INVARIANT, PROPERTY, STEP_CHECK, REPLAY, EXPECTED_OUTPUT, CRASH)
NAMED: Final = frozenset({INVARIANT, PROPERTY})

Note = Callable[[str, str], None]


@dataclass(frozen=True)
class Suite:
    """What each mutant runs: the campaign's budget, and the simulator's runs with safe knobs (the checker on
    each; the Z3 step check and replay, which cost a hundred times more per step, on the first `validated`)."""

    examples: int = 40
    steps: int = 30
    seeds: tuple[int, ...] = tuple(range(1, 101))
    sim_steps: int = 3000
    validated: int = 3
    # Calm phases, so that the progress properties are judged (docs/invariants.md, progress properties).
    sim_config: SimConfig = field(default_factory=lambda: SimConfig(calm_every=300))


def oracle_of(name: str) -> str:
    """The oracle a checker's or a campaign's finding belongs to, by the name it is reported under."""
    if name == MODEL_STEP:
        return STEP_CHECK
    if name == IMPLEMENTATION_ERROR:
        return CRASH
    return INVARIANT if name.split("/")[0] in INVARIANTS else PROPERTY


def simulate(seed: int, suite: Suite) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), suite.sim_config, events.append)
    simulator.bootstrap()
    simulator.run(suite.sim_steps)
    return events


def reference_traces(suite: Suite) -> list[list[Event]]:
    """The unmutated implementation's validated runs, written before any mutant is applied."""
    return [simulate(seed, suite) for seed in suite.seeds[:suite.validated]]


def run_oracles(suite: Suite, references: Iterable[list[Event]], scenarios: Path) -> dict[str, str]:
    """Every oracle against the implementation as loaded: oracle -> the first evidence it found."""
    kills: dict[str, str] = {}

    def note(oracle: str, evidence: str) -> None:
        kills.setdefault(oracle, evidence)

    for path in scenario_files(scenarios):
        _scenario(path, note)
    for index, seed in enumerate(suite.seeds):
        _simulation(seed, suite, note, validate=index < suite.validated)
    for seed, events in zip(suite.seeds, references, strict=False):
        _replay(seed, events, note)
    _campaign(suite, note)
    return kills


def _scenario(path: Path, note: Note) -> None:
    """The file's cases in order, each output compared, every violation named; a crash ends the file."""
    environment = Environment()
    try:
        for case in parse(path).cases:
            if diff(case, run_case(case, environment)):
                note(EXPECTED_OUTPUT, f"scenario {path.name}:{case.line}")
        environment.finish()
    except ScenarioError as err:
        # A command the mutant's cluster cannot take (a message no longer in flight) is the script diverging.
        oracle = EXPECTED_OUTPUT if isinstance(err.__cause__, CommandError) else CRASH
        note(oracle, f"scenario {str(err).replace(str(path), path.name)}")
    except AssertionError:
        pass  # finish(): what failed is in the environment, read below
    for violation in environment.broken:
        note(oracle_of(violation.invariant), f"{violation.invariant} (scenario {path.name})")
    if environment.missed:
        note(EXPECTED_OUTPUT, f"scenario {environment.missed[0].replace(str(path), path.name)}")


def _simulation(seed: int, suite: Suite, note: Note, *, validate: bool) -> None:
    try:
        events = simulate(seed, suite)
    except Exception as err:  # whatever the mutant breaks
        note(CRASH, f"simulation seed {seed}: {type(err).__name__}: {err}")
        return
    for violation in InvariantChecker().check_all(events).violations:
        note(oracle_of(violation.invariant), f"{violation.invariant} (simulation seed {seed}, seq {violation.seq})")
    failure = validate_events(events).failure if validate else None
    if failure is not None:
        note(STEP_CHECK, f"simulation seed {seed}, seq {failure.seq}")


def _replay(seed: int, events: list[Event], note: Note) -> None:
    try:
        report = Replayer(events).run()
    except Exception as err:
        note(CRASH, f"replay of seed {seed}: {type(err).__name__}: {err}")
        return
    divergence = report.divergence
    if divergence is not None:
        what = divergence.variable if divergence.variable != "-" else divergence.reason
        note(REPLAY, f"seed {seed}, seq {divergence.seq} ({divergence.action}): {what}")


def _campaign(suite: Suite, note: Note) -> None:
    from kcm.conformance.explore.stateful import run_campaign  # hypothesis, loaded only where it runs

    try:
        found = run_campaign(Knobs(), suite.examples, suite.steps, database=False, shrink=False).found
    except RuntimeError as err:  # the machine's cluster never settled: the mutant stalls its own steps
        note(CRASH, f"campaign: {err}")
        return
    for finding in found:
        note(oracle_of(finding.invariant), f"{finding.invariant} (campaign, {len(finding.commands)} commands)")
