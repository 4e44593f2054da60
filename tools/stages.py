"""The contract between `kcm verify` and the engines' commands: each engine contributes a stage, a function
of the run's context that returns rows for the summary table; the run's verdict is the worst row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from rich.console import Console

from kcm.conformance.explore.campaign import CampaignResult
from kcm.impl.sim.simulator import SimConfig
from kcm.spec.vocabulary import Knobs

HOLDS: Final = "holds"
VIOLATED: Final = "violated"
ERROR: Final = "error"
_SEVERITY: Final = {HOLDS: 0, VIOLATED: 1, ERROR: 2}


@dataclass(frozen=True)
class StageRow:
    """One line of the summary: which engine checked what, with which verdict."""

    engine: str
    check: str
    verdict: str  # holds | violated | error
    detail: str
    seconds: float


@dataclass(frozen=True)
class VerifyContext:
    """What every stage gets: the knobs, the cluster shape, the budget asked for, and where to show progress."""

    knobs: Knobs
    config: SimConfig
    seeds: int
    steps: int
    console: Console
    # The campaign is also reported in full (first violation, reproduce line), beyond its rows.
    campaigns: list[CampaignResult] = field(default_factory=list)


Stage = Callable[[VerifyContext], list[StageRow]]


def verdict(rows: list[StageRow]) -> str:
    """The worst verdict of the rows; no rows hold."""
    return max((row.verdict for row in rows), key=_SEVERITY.__getitem__, default=HOLDS)
