"""The conformance searches of the known bugs: each design flaw that search alone must find (its design's knobs,
the invariant it breaks, the machine that finds it) with the budget it is given. The rows come from the one
catalogue of known bugs, the designs' manifests (kcm.spec.designs.KNOWN_BUGS, `[[bugs.searches]]`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kcm.conformance.explore.config import MachineConfig
from kcm.spec.design_folder import BugSearch, DesignFolder, KnownBug
from kcm.spec.designs import KNOWN_BUGS
from kcm.spec.vocabulary import Knobs


@dataclass(frozen=True)
class KnownBugSearch:
    """One search of a known bug: the bug, and the search's machine and budget; the design folder whose strategy
    the cluster runs, for a design of one's own."""

    bug: KnownBug
    search: BugSearch
    design: DesignFolder | None = None

    @property
    def name(self) -> str:
        return self.search.name

    @property
    def knobs(self) -> Knobs:
        return self.bug.knobs

    @property
    def invariant(self) -> str:
        """The vocabulary invariant the search watches: a reading (HighWatermarkMonotonic/AcrossLeaders) is
        checked as the whole invariant."""
        return self.bug.invariant.partition("/")[0]

    def config(self, steer: bool = True) -> MachineConfig:
        return MachineConfig(self.knobs, machine=self.search.machine, step_check=False,
                             targets=frozenset({self.invariant}), steer=steer, slow_links=self.search.slow_links,
                             design=self.design)


def searches_of(bugs: tuple[KnownBug, ...], design: DesignFolder | None = None) -> tuple[KnownBugSearch, ...]:
    """The searches of the bugs; a design of one's own (not knobs alone) runs its strategy in each."""
    own = None if design is None or design.knobs_only else design
    return tuple(KnownBugSearch(bug, search, own) for bug in bugs for search in bug.searches)


KNOWN_BUG_SEARCHES: Final = searches_of(KNOWN_BUGS)
