"""The known-bug catalogue: each design flaw that search alone must find (its knobs, the invariant it
breaks, the machine that finds it) with the budget it is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kcm.conformance.explore.config import MachineConfig
from kcm.spec.vocabulary import Knobs


@dataclass(frozen=True)
class KnownBugSearch:
    """A design flaw that search alone must find, with the budget it is given."""

    name: str
    knobs: Knobs
    invariant: str
    machine: str
    examples: int
    steps: int = 40  # the rules of one example at most
    slow_links: bool = True

    def config(self, steer: bool = True) -> MachineConfig:
        return MachineConfig(self.knobs, machine=self.machine, step_check=False,
                             targets=frozenset({self.invariant}), steer=steer, slow_links=self.slow_links)


KNOWN_BUG_SEARCHES: Final = (
    KnownBugSearch("unclean-protocol", Knobs(unclean_election=True), "NoCommittedDataLoss", "protocol", 4000),
    KnownBugSearch("unclean-cluster", Knobs(unclean_election=True), "NoCommittedDataLoss", "cluster", 3000),
    KnownBugSearch("hw-protocol", Knobs(truncation="hw"), "NoCommittedDataLoss", "protocol", 4000),
    KnownBugSearch("fencing-off-protocol", Knobs(controller_epoch_fencing=False), "StaleControllerFenced",
                   "protocol", 4000),
    # The budgets below are what the search needs since requests carry the broker epoch (KIP-380, the default
    # era): 8,000 and 6,000 examples no longer reached these two; 20,000 and 15,000 find them (measured
    # 2026-11-26: after 91 s and 153 s, one core).
    KnownBugSearch("kafka2334-kip279-protocol", Knobs(truncation="kip279"), "HighWatermarkMonotonic", "protocol",
                   20000),
    # Fast leader changes alone, the KIP-279 case: with slow links the search meets the stale follower first,
    # which KIP-101 lacks the fencing for as well (the KIP-320 case, the next search).
    KnownBugSearch("kip279-case-kip101-replication", Knobs(truncation="kip101"), "ReplicaLogsAgree", "replication",
                   15000, slow_links=False),
    KnownBugSearch("kip320-case-kip279-replication", Knobs(truncation="kip279"), "ReplicaLogsAgree", "replication",
                   5000),
    # A failover's LeaderAndIsr repeats the leader's epoch with the ISR the new controller loaded; without the
    # check, a leader that has since added a follower back takes the older ISR and commits without it.
    KnownBugSearch("leader-epoch-check-off-replication", Knobs(leader_epoch_check=False), "NoCommittedDataLoss",
                   "replication", 2000),
)
