"""What one run of a state machine is: the design and machine it runs (`MachineConfig`, whose key names
the run to hypothesis), and the hypothesis settings it runs under: the profiles `ci` and `long`, and a
campaign's budget and example database (`campaign_settings`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from kcm.spec.design_folder import DesignFolder
from kcm.spec.vocabulary import Knobs

ROOT: Final = Path(__file__).resolve().parents[2]
DATABASE: Final = ROOT / ".hypothesis" / "conformance"

# The explain phase is left out: a failure prints as a scenario, not with hypothesis's notes, and explaining
# a shrunk stateful example costs ten times its shrinking.
PHASES: Final = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)
# Bounded for the default test run; `long` for campaigns behind the `long` marker.
settings.register_profile("ci", max_examples=40, stateful_step_count=30, deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                          verbosity=Verbosity.quiet, database=None, phases=PHASES)
settings.register_profile("long", max_examples=2000, stateful_step_count=80, deadline=None,
                          suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                          verbosity=Verbosity.quiet, phases=PHASES)


@dataclass(frozen=True)
class MachineConfig:
    """One run: the design, the cluster's size, the machine, what fails an example, and the search's aids."""

    knobs: Knobs = field(default_factory=Knobs)
    brokers: int = 3
    step_check: bool = True
    machine: str = "protocol"  # a key of MACHINES
    # The invariants a violation of fails the example; None: all of them and the model step check.
    targets: frozenset[str] | None = None
    steer: bool = True  # hand the danger scores to hypothesis.target (off: the unsteered baseline)
    # The replication machine's slow links (off: its faults are crashes and the leader changes they cause).
    slow_links: bool = True
    # A design folder of one's own: the cluster runs its strategy on the knobs (kcm.impl.design.load_strategy).
    design: DesignFolder | None = None

    def fails_on(self, name: str) -> bool:
        return self.targets is None or name.split("/")[0] in self.targets

    @property
    def key(self) -> str:
        """The design's name for hypothesis: its machine class and its example database."""
        # The step check is left out: the same design draws the same examples (and shares a database) with it
        # on or off, so the two can be compared.
        fields: tuple[object, ...] = (sorted(self.knobs.to_dict().items()), self.brokers, self.machine,
                                      sorted(self.targets or ()))
        if not self.slow_links:
            fields += ("no slow links",)  # appended only when off, so that every other design keeps its key
        if self.design is not None:
            fields += (f"design {self.design.name}",)
        text = repr(fields)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def campaign_settings(profile: str = "ci", examples: int | None = None, steps: int | None = None,
                      config: MachineConfig | None = None, database: bool = False, shrink: bool = True) -> settings:
    """A profile, with the budget overridden and (for `kcm conform`) the example database of this design in
    the repository's ignored .hypothesis/ folder, so that a failure found once replays first next time.
    Without `shrink`, a failure is reported as found (what `kcm mutate` needs: whether, not how short)."""
    base = settings.get_profile(profile)
    changes: dict[str, Any] = {}
    if not shrink:
        changes["phases"] = [phase for phase in base.phases if phase not in (Phase.shrink, Phase.explain)]
    if examples is not None:
        changes["max_examples"] = examples
    if steps is not None:
        changes["stateful_step_count"] = steps
    if database and config is not None:
        changes["database"] = DirectoryBasedExampleDatabase(str(DATABASE / config.key))
    return settings(base, **changes)
