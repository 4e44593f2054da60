"""What every state machine shares (`Machine`): the harness it drives, the candidates the cluster offers a
rule, the danger scores it hands to `hypothesis.target`, and a follower's fetch round.

Each rule is exactly one command of the scenario language (`kcm.conformance.scenario`), so a failure
shrinks to a list of commands that prints as a scenario file, next to the trace (format v2) it produced.
Brokers and topics live in hypothesis Bundles. A rule whose operation needs, say, a live broker is guarded
by a precondition that one exists; the broker drawn from the bundle is then used if it qualifies, or else
the next one that does in id order (`next_of`), so no drawn example is thrown away and shrinking still
moves towards the lowest ids. Choices among things only the cluster knows (the message to deliver, the
follower to fetch) are an index into the sorted list of candidates (`pick`), which shrinks towards the
first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, ClassVar, Final

from hypothesis import strategies as st
from hypothesis import target
from hypothesis.stateful import RuleBasedStateMachine, invariant

from kcm.conformance.explore import danger
from kcm.conformance.explore.config import MachineConfig
from kcm.conformance.explore.harness import Harness, Tally
from kcm.impl.replica_manager import FOLLOWER
from kcm.impl.sim.cluster import Cluster
from kcm.impl.sim.quiescence import calm_phase

PICK: Final = st.integers(0, 31)


def next_of(wanted: int, candidates: Iterable[int]) -> int:
    """`wanted` if it is a candidate, else the next candidate after it in id order (wrapping around)."""
    ordered = sorted(candidates)
    return next((c for c in ordered if c >= wanted), ordered[0])


def pick(index: int, candidates: list[Any]) -> Any:
    return candidates[index % len(candidates)]


class Machine(RuleBasedStateMachine):
    """What every machine shares: the harness, the cluster's candidates for a rule, the danger scores handed
    to `hypothesis.target`, and a follower's fetch round. Rules live in the subclasses. `machine_class` makes
    one per config."""

    config: ClassVar[MachineConfig] = MachineConfig()
    tally: ClassVar[Tally] = Tally()
    labels: ClassVar[tuple[str, ...]] = danger.LABELS

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(self.config, self.tally)
        self.danger: dict[str, float] = dict.fromkeys(self.labels, 0)
        self.tally.examples += 1
        if self.tally.on_example is not None:
            self.tally.on_example()

    @property
    def cluster(self) -> Cluster:
        return self.h.cluster

    def step(self, command: str, action: Callable[[], object]) -> None:
        self.h.run(command, action)

    def scores(self) -> dict[str, int]:
        return danger.scores(self.cluster)

    def _live(self) -> list[int]:
        return self.cluster.live_brokers()

    def _replicas_in(self, role: str) -> list[tuple[int, str]]:
        return [(b, p) for b in self._live() for p, r in sorted(self.cluster.managers[b].replicas.items())
                if r.role == role]

    def _fetchers(self) -> list[tuple[int, str]]:
        return [(b, p) for b, p in self._replicas_in(FOLLOWER) if self.cluster.managers[b].wants_to_fetch(p)]

    def _queued(self) -> list[int]:
        return [b for b in self._live() if self.cluster.controllers[b].queue]

    def _deliverable(self) -> list[int]:
        """The messages a rule may deliver now: the heads of their connections."""
        return self.cluster.network.ready(self.cluster.now)

    @invariant()
    def measure_danger(self) -> None:
        if self.config.steer:
            self.observe(self.scores())

    def observe(self, scores: dict[str, int]) -> None:
        for label, score in scores.items():
            self.danger[label] = max(self.danger[label], score)

    def teardown(self) -> None:
        # Where the example left the cluster, the faults stop: a calm phase judges the progress properties
        # (docs/invariants.md); a violation of one fails the example like an invariant's, as `quiesce`.
        if not self.h.failed:
            self.h.run("quiesce", lambda: calm_phase(self.cluster))
        # Once per example, the run's peak: hypothesis then mutates the examples that came closest.
        for label, score in self.danger.items():
            target(score, label=label)

    def _send_fetch(self, broker: int, partition: str) -> None:
        self.step(f"fetch broker={broker} partition={partition}",
                   lambda: self.cluster.send_fetch(broker, partition))

    def _fetch_round(self, broker: int, partition: str) -> None:
        """A follower's whole exchange with its leader: the request sent, delivered, and the reply delivered,
        as three commands. Histories like KAFKA-1211 hinge on which follower learned which high watermark;
        drawn one delivery at a time, the dozen steps they need are too rare for search to meet."""
        in_flight = self.cluster.network.in_flight
        before = len(in_flight)
        self._send_fetch(broker, partition)
        if len(in_flight) == before:
            return  # the leader is down: the connection was refused
        leader = in_flight[-1].envelope.dst
        for src, dst in ((broker, leader), (leader, broker)):
            sent = self._last_sent(src, dst)
            if sent is None or sent not in self._deliverable():
                return  # the connection holds an older message, or the leader answered nothing
            self.step(f"deliver index={sent}", partial(self.cluster.deliver, sent))

    def _last_sent(self, src: int, dst: int) -> int | None:
        in_flight = self.cluster.network.in_flight
        return next((i for i in range(len(in_flight) - 1, -1, -1)
                     if (in_flight[i].envelope.src, in_flight[i].envelope.dst) == (src, dst)), None)
