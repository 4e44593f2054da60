"""What a search reports: a shrunk failure (`Found`) with the commands that reproduce it, written as a
scenario file (filled in by the scenario environment) and as a trace (format v2), and the names a failure
is reported under besides the invariants."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kcm.conformance.scenario.environment import fill_expectations
from kcm.conformance.scenario.language import script
from kcm.spec.atomic_output import write_output
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.vocabulary import INVARIANTS, Knobs

MODEL_STEP: Final = "ModelStep"  # the name a step the Z3 model cannot explain is reported under
IMPLEMENTATION_ERROR: Final = "ImplementationError"


@dataclass
class Found:
    """A shrunk failure: what broke, at which event, and the commands and trace that reproduce it."""

    invariant: str
    message: str
    seq: int
    knobs: Knobs
    commands: list[tuple[str, list[str]]]  # (command, invariants the scenario must expect after it)
    events: list[Event]

    def scenario(self) -> str:
        """The failure as a scenario file, its expectations left empty. A command starting with `#` is a
        fault the network applies from here on, which the file keeps as a comment."""
        lines = [f"# Found by kcm conform: {self.invariant} at event {self.seq}: {self.message}".replace("\n", " "),
                 "# Expected outputs: run the file with KCM_REWRITE=1 to write them again (docs/conformance.md)"]
        for command, expected in self.commands:
            lines.append(command)
            if expected:
                lines.append(f"expect-violation {' '.join(expected)}")
        return script(lines)

    def filled_scenario(self) -> str:
        """The scenario with the expected output of each command."""
        return fill_expectations(self.scenario())

    def write(self, folder: Path, stem: str) -> tuple[Path, Path]:
        folder.mkdir(parents=True, exist_ok=True)
        trace = folder / f"{stem}.jsonl"
        with TraceWriter(trace, validate=True) as writer:
            for event in self.events:
                writer.write(event)
        scenario = folder / f"{stem}.txt"
        write_output(scenario, self.filled_scenario())
        return scenario, trace


class ConformanceFailure(AssertionError):
    def __init__(self, found: Found) -> None:
        self.found = found
        super().__init__(f"{found.invariant} at event {found.seq}: {found.message}\n\n"
                         f"as a scenario for tests/scenarios/:\n{found.scenario()}")


def all_invariants() -> frozenset[str]:
    return frozenset({*INVARIANTS, MODEL_STEP, IMPLEMENTATION_ERROR})
