"""The harness every state machine drives: one simulated cluster with its checkers. Each command runs, then
every event it produced goes through the invariant checker and the Z3 step validator; a failure the
configuration targets ends the example as a `ConformanceFailure`. `Tally` counts across examples."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.conformance.check.validate import StepValidator
from kcm.conformance.explore.config import MachineConfig
from kcm.conformance.explore.finding import IMPLEMENTATION_ERROR, MODEL_STEP, ConformanceFailure, Found
from kcm.impl.design import load_strategy
from kcm.impl.sim.cluster import Cluster, broker_ids
from kcm.spec.trace.format import Event


@dataclass
class Tally:
    """What a campaign did, across every example hypothesis ran (shrinking included).

    `examples` counts the machines run, whatever hypothesis made of them; the hypothesis statistics of each
    run (`note_statistics`) tell them apart: the examples hypothesis counts against its `max_examples` (passed
    or failed, generated or replayed from the example database), of those the replays, the examples it
    discarded (it drew no rule whose precondition held, or ran out of data), and the runs of shrinking."""

    examples: int = 0
    counted: int = 0
    replayed: int = 0
    discarded: int = 0
    shrinking: int = 0
    steps: int = 0  # events checked after Init
    commands: int = 0
    first_failure: int = 0  # the example that failed first (before shrinking); 0: none failed
    observers: list[Callable[[Event], None]] = field(default_factory=list)
    on_example: Callable[[], None] | None = None

    def note_statistics(self, statistics: dict[str, Any]) -> None:
        """Adds one hypothesis run's statistics: a dict per phase (`reuse-phase`, ...) whose `test-cases`
        have a `status` of valid, interesting (failed), invalid or overrun. Hypothesis documents the format
        as its pytest plugin's (`--hypothesis-show-statistics`, `hypothesis.statistics`), not as stable:
        tests/test_explain_conform.py holds the counts to the machines run."""
        for phase in ("reuse", "generate", "target", "shrink"):
            for case in statistics.get(f"{phase}-phase", {}).get("test-cases", []):
                status = case["status"]
                if phase == "shrink":
                    self.shrinking += 1
                elif status in ("valid", "interesting"):
                    self.counted += 1
                    self.replayed += phase == "reuse"
                else:
                    self.discarded += 1


class Harness:
    """One cluster with its checkers: runs a command, checks the events it produced, records it."""

    def __init__(self, config: MachineConfig, tally: Tally | None = None) -> None:
        self.config = config
        self.tally = tally or Tally()
        self.events: list[Event] = []
        self.commands: list[tuple[str, list[str]]] = []
        self.checker = InvariantChecker(config.knobs.truncation)
        self.unsafe = not config.knobs.is_safe or (config.design is not None and bool(config.design.expected))
        self.seen: set[tuple[str, str]] = set()
        self.tolerated: set[str] = set()
        self.validator: StepValidator | None = None
        self.checked = 0
        self.failed = False
        # Numbered as the scenario language numbers `cluster brokers=N`, so a finding replays as written.
        strategy = None if config.design is None else load_strategy(config.design, config.knobs)
        self.cluster = Cluster(broker_ids(config.brokers), config.knobs, self.events.append, design=strategy)
        self.run(" ".join([f"cluster brokers={config.brokers}", *config.knobs.settings()]), lambda: None)

    def run(self, command: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as err:  # any crash of the implementation is a finding
            self.commands.append((command, []))
            self._fail(IMPLEMENTATION_ERROR, f"{type(err).__name__}: {err}", len(self.events))
        self.tally.commands += 1
        fresh: list[Violation] = []
        failure: tuple[str, str, int] | None = None
        for event in self.events[self.checked:]:
            for violation in self.checker.step(event):
                fresh.append(violation)
                if failure is None and self.config.fails_on(violation.invariant):
                    failure = (violation.invariant, violation.message, violation.seq)
            if failure is None:
                failure = self._model_step(event)
            for observe in self.tally.observers:
                observe(event)
        self.tally.steps += len(self.events) - self.checked - (1 if self.checked == 0 else 0)
        self.checked = len(self.events)
        self.commands.append((command, self._expected(fresh)))
        if failure is not None:
            self._fail(*failure)

    def _model_step(self, event: Event) -> tuple[str, str, int] | None:
        if not self.config.step_check:
            return None
        if self.validator is None:
            self.validator = StepValidator(event)
            return None
        problem = self.validator.step(event)
        if problem is None or not self.config.fails_on(MODEL_STEP):
            return None
        return MODEL_STEP, f"{problem.action} on {problem.partition or 'the cluster'}: {problem.reason}", problem.seq

    def _expected(self, violations: list[Violation]) -> list[str]:
        """What the scenario runner will want expected after this command: the invariants of violations it
        has not reported before, unless expected once already (and never on a safe cluster)."""
        names: list[str] = []
        for v in violations:
            if (v.invariant, v.message) in self.seen:
                continue
            self.seen.add((v.invariant, v.message))
            base = v.invariant.split("/")[0]
            if self.unsafe and base not in self.tolerated and base not in names:
                names.append(base)
        self.tolerated.update(names)
        return names

    def _fail(self, invariant: str, message: str, seq: int) -> None:
        self.tally.first_failure = self.tally.first_failure or self.tally.examples
        self.failed = True
        raise ConformanceFailure(Found(invariant, message, seq, self.config.knobs, list(self.commands),
                                       list(self.events)))
