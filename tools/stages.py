"""The contract between `kcm verify` and the engines' commands: each engine contributes a stage, a function
of the run's context that returns rows for the summary table; the run's verdict is the worst row's
(kcm.spec.verdicts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kcm.conformance.explore.campaign import CampaignResult
from kcm.impl.sim.simulator import SimConfig
from kcm.spec.verdicts import HOLDS, VIOLATED, worst
from kcm.spec.vocabulary import Knobs
from kcm.tools.outputs import default_out
from kcm.tools.progress import Reporter

__all__ = ["HOLDS", "VIOLATED", "Stage", "StageRow", "VerifyContext", "verdict"]


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
    one or the quick default, and where to show progress."""

    knobs: Knobs
    config: SimConfig
    seeds: int
    steps: int
    reporter: Reporter
    full: bool = False
    # Where the stages keep what they write (counterexamples): `kcm verify --out`.
    out: Path = field(default_factory=lambda: default_out("verify"))
    # The campaign is also reported in full (first violation, reproduce line), beyond its rows.
    campaigns: list[CampaignResult] = field(default_factory=list)
    # `--zk`: the ZooKeeper the cluster runs on ("host:port"), or "" for an ensemble the stage starts.
    zk: str = ""


Stage = Callable[[VerifyContext], list[StageRow]]


def verdict(rows: list[StageRow]) -> str:
    """The worst verdict of the rows; no rows hold."""
    return worst([row.verdict for row in rows])
