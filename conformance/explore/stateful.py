"""Conformance by hypothesis stateful testing: rule-based state machines drive the implementation through
every operation of the controller, and after every step check all invariants (the incremental checker on
the trace) and the step itself against the model (the Z3 transition relation, `check.validate.StepValidator`).

This module runs them: one machine for one design (`run_machine`), or a campaign over every machine
(`run_campaign`). The pieces: `config` (what a run is, hypothesis profiles), `harness` (the checked
cluster), `finding` (a shrunk failure), `machine`, `cluster_machine` and `replication_machine` (the rules),
`known_bugs` (what search must find), `danger` (the steering), `derandomize` (the same draws everywhere).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from hypothesis.statistics import collector

from kcm.conformance.check.coverage import Coverage
from kcm.conformance.explore.cluster_machine import ClusterMachine, ProtocolMachine
from kcm.conformance.explore.config import MachineConfig, campaign_settings
from kcm.conformance.explore.derandomize import no_local_constants
from kcm.conformance.explore.finding import ConformanceFailure, Found, all_invariants
from kcm.conformance.explore.harness import Tally
from kcm.conformance.explore.machine import Machine
from kcm.conformance.explore.replication_machine import ReplicationMachine
from kcm.spec.design_folder import DesignFolder
from kcm.spec.trace.format import Event
from kcm.spec.verdicts import VIOLATED, held
from kcm.spec.vocabulary import Knobs

MACHINES: Final[dict[str, type[Machine]]] = {"cluster": ClusterMachine, "protocol": ProtocolMachine,
                                              "replication": ReplicationMachine}


def machine_class(config: MachineConfig, tally: Tally | None = None) -> type[Machine]:
    """The machine of `config.machine` for one design (knobs, cluster size, checks), counting into `tally`."""
    attributes: dict[str, Any] = {"config": config, "tally": tally or Tally()}
    base = MACHINES[config.machine]
    return type(f"{base.__name__}_{config.key}", (base,), attributes)


def run_machine(config: MachineConfig, run_settings: settings, tally: Tally | None = None) -> Found | None:
    """Runs the machine of `config` under `run_settings`; the shrunk failure, or None if every example passed."""
    tally = tally or Tally()
    try:
        # hypothesis types its collector by its default value, None, though it holds a callback when set
        with no_local_constants(), collector.with_value(tally.note_statistics):  # type: ignore[arg-type]
            run_state_machine_as_test(machine_class(config, tally), settings=run_settings)
    except ConformanceFailure as failure:
        return failure.found
    return None


@dataclass
class Campaign:
    """A campaign's outcome: the examples and steps it ran, what it found, and the coverage it reached."""

    knobs: Knobs
    tally: Tally
    coverage: Coverage
    found: list[Found] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def verdict(self) -> str:
        """Violated once something is found; holds only if hypothesis ran an example, else unobserved."""
        return VIOLATED if self.found else held(self.tally.counted)

    @property
    def steps_per_second(self) -> float:
        return self.tally.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def steps_per_cpu_second(self) -> float:
        """The rate on a core of its own, whatever else the machine was doing."""
        return self.tally.steps / self.cpu_seconds if self.cpu_seconds > 0 else 0.0


def run_campaign(knobs: Knobs, examples: int, steps: int, *, machines: tuple[str, ...] = tuple(MACHINES),
                 step_check: bool = True, database: bool = True, brokers: int = 3,
                 on_example: Callable[[], None] | None = None, shrink: bool = True,
                 design: DesignFolder | None = None, observers: tuple[Callable[[Event], None], ...] = ()) -> Campaign:
    """Each machine in turn for its share of `examples`, as hypothesis counts them (neither the examples it
    discards nor shrinking). A failure ends hypothesis's run; the campaign then goes on with the budget left,
    no longer failing on what it already found, so one campaign can report several invariants broken. `design`:
    a design folder whose strategy the cluster runs (the Z3 step check reads no design of one's own: off);
    `observers`: more readers of every checked event (the interleaving coverage)."""
    coverage = Coverage()
    tally = Tally(observers=[coverage.observe, *observers], on_example=on_example)
    campaign = Campaign(knobs, tally, coverage)
    targets = set(all_invariants())
    started, cpu = time.perf_counter(), time.process_time()
    for index, machine in enumerate(machines):
        budget = examples // len(machines) + (1 if index < examples % len(machines) else 0)
        while budget > 0 and targets:
            config = MachineConfig(knobs, brokers, step_check and design is None, machine, frozenset(targets),
                                   design=design)
            before = tally.counted
            found = run_machine(config, campaign_settings("ci", budget, steps, config, database, shrink), tally)
            budget -= tally.counted - before
            if found is None:
                break
            campaign.found.append(found)
            targets.discard(found.invariant.split("/")[0])
    campaign.seconds = time.perf_counter() - started
    campaign.cpu_seconds = time.process_time() - cpu
    return campaign
