"""The contract between `kcm verify` and the engines: each engine contributes a stage (a module of
kcm.conformance.verify), a function of the run's context that returns rows for the summary table. An engine's
verdict is the worst of its rows that observed something; the run's is the worst engine's, an engine that
observed nothing leaving the run undecided (kcm.spec.verdicts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kcm.conformance.explore.campaign import CampaignResult
from kcm.conformance.reporter import Reporter
from kcm.impl.sim.simulator import SimConfig
from kcm.spec.design_folder import DesignFolder
from kcm.spec.verdicts import UNSUPPORTED, combined, worst
from kcm.spec.vocabulary import Knobs

__all__ = ["Stage", "StageRow", "VerifyContext", "engine_verdicts", "unsupported_row", "verdict"]


@dataclass(frozen=True)
class StageRow:
    """One line of the summary: which engine checked what, with which verdict."""

    engine: str
    check: str
    verdict: str  # a word of kcm.spec.verdicts
    detail: str
    seconds: float
    # A counterexample the row found, in trace format v2, and the invariant it breaks (its last state).
    trace: str = ""
    invariant: str = ""


@dataclass(frozen=True)
class VerifyContext:
    """What every stage gets: the knobs, the cluster shape, the budget asked for, whether the run is the full
    one or the quick default, where to show progress and where to write."""

    knobs: Knobs
    config: SimConfig
    seeds: int
    steps: int
    reporter: Reporter
    full: bool = False
    # Where the stages keep what they write (counterexamples): `kcm verify --out`, which the command decides.
    out: Path = field(kw_only=True)
    # The campaign is also reported in full (first violation, reproduce line), beyond its rows.
    campaigns: list[CampaignResult] = field(default_factory=list)
    # `--zk`: the ZooKeeper the cluster runs on ("host:port"), or "" for an ensemble the stage starts.
    zk: str = ""
    # `--coverage`: TLC counts each action's states, and a model where one never fires is `unexpected`.
    coverage: bool = False
    # `--design`: a design folder of one's own, on its base design's knobs (`knobs`); each engine reads it or
    # says `unsupported` (unsupported_row).
    design: DesignFolder | None = None

    @property
    def own_design(self) -> DesignFolder | None:
        """The design, when it has rules of its own for an engine to read (not knob settings alone)."""
        return None if self.design is None or self.design.knobs_only else self.design


Stage = Callable[[VerifyContext], list[StageRow]]


def unsupported_row(engine: str, design: DesignFolder, why: str) -> StageRow:
    """The row of an engine that cannot read a design of one's own: it checks nothing of the design rather than
    the default design's rules under the design's name."""
    return StageRow(engine, f"design {design.name}", UNSUPPORTED, why, 0.0)


def engine_verdicts(rows: list[StageRow]) -> dict[str, str]:
    """Each engine's verdict, in the order the engines ran: the worst of its rows that observed something."""
    engines = dict.fromkeys(row.engine for row in rows)
    return {engine: worst([row.verdict for row in rows if row.engine == engine]) for engine in engines}


def verdict(rows: list[StageRow]) -> str:
    """The verdict of these rows, engine by engine; no rows are unobserved."""
    return combined(list(engine_verdicts(rows).values()))
