"""Step-by-step model checking of a trace as it is produced: the Z3 step validator fed one event at a time.

`kcm.spec.z3.validate.Validator` reads a whole trace first to learn its brokers, its observed variables and
its partitions. A trace being written by the implementation observes every variable from its Init event
and names its brokers there; only its partitions appear as topics are created. This validator starts from
the Init event alone and adds each partition the first time a delta names it, so each step is checked the
moment it happens, at the batch validator's cost per step.
"""

from __future__ import annotations

from typing import Any

from kcm.spec.trace.format import Event, apply_event, empty_state
from kcm.spec.vocabulary import VARIABLES
from kcm.spec.z3.validate import Failure, ValidationReport, Validator, copy_state

# Variables whose first level of keys are partitions; the others are per broker, then per partition.
PARTITION_KEYED = frozenset({"assignment", "leader", "leader_epoch", "isr", "partition_controller_epoch",
                             "partition_version"})
BROKER_ONLY = frozenset({"alive", "broker_controller_epoch", "acting_controller_epoch", "controller",
                         "controller_epoch"})


class StepValidator(Validator):
    """Checks each event against the Z3 transition relation as soon as it is given to `step`."""

    def __init__(self, init: Event) -> None:
        super().__init__([init])
        # The implementation's trace observes every variable, whether or not Init names it.
        self.observed.update(VARIABLES)
        self.report = ValidationReport(observed=sorted(VARIABLES))
        self.state = empty_state()
        apply_event(self.state, init)
        self._note_partitions(init["state"])
        self._remember(self.state)
        self.report.events = 1

    def step(self, event: Event) -> Failure | None:
        """Checks one event (the next of the trace); returns why the model cannot explain it, or None."""
        self.report.events += 1
        self._note_partitions(event["state"])
        before = self.state
        self.state = copy_state(before)
        apply_event(self.state, event)
        if event.get("full"):
            self._previous.clear()
            self._remember(self.state)
            return None
        self.report.steps += 1
        failure = self._step(event, before, self.state, self.report)
        if failure is not None and self.report.failure is None:
            self.report.failure = failure
        self._advance(event, self.state)
        return failure

    def _note_partitions(self, delta: dict[str, Any]) -> None:
        found: set[str] = set()
        for var, value in delta.items():
            if var in PARTITION_KEYED:
                found.update(value)
            elif var not in BROKER_ONLY and isinstance(value, dict):
                for inner in value.values():
                    if isinstance(inner, dict):
                        found.update(inner)
        new = found - set(self.history)
        if new:
            for p in new:
                self.history[p] = {}
            self.partitions = sorted(self.history)
            self.report.partitions = self.partitions
