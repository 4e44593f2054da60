"""The machines of the cluster's operations: `ClusterMachine` at an operator's grain (every command followed
by the protocol run to quiescence), and `ProtocolMachine` at the protocol's (each message, controller event
and fetch a step of its own, network faults besides)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, multiple, precondition, rule

from kcm.conformance.explore.machine import PICK, Machine, next_of, pick
from kcm.impl.replica_manager import LEADER
from kcm.spec.vocabulary import NO_LEADER

MAX_TOPICS: Final = 3
REPLICAS: Final = st.tuples(st.permutations([1, 2, 3, 4]), st.integers(1, 3))
ACKS: Final = st.sampled_from([-1, 1])


def fold_replicas(order: list[int], count: int, brokers: list[int]) -> tuple[int, ...]:
    """The first `count` distinct brokers of a drawn order of positions (from 1), folded onto the cluster's
    broker ids."""
    out: list[int] = []
    for r in order:
        b = brokers[(r - 1) % len(brokers)]
        if b not in out:
            out.append(b)
    return tuple(out[:count])


class ClusterMachine(Machine):
    """The cluster seen at the operators' grain: admin commands, clients, faults, the clock, and the protocol
    run to quiescence (`stabilize`) as one step. Few rules, so short runs reach deep failure histories."""

    brokers = Bundle("brokers")
    topics = Bundle("topics")

    def __init__(self) -> None:
        super().__init__()
        self.topic_count = 0

    def step(self, command: str, action: Callable[[], object]) -> None:
        """One operation, then the protocol run to quiescence, as an operator sees the cluster between two
        of their commands."""
        self.h.run(command, action)
        self.h.run("stabilize", self.cluster.stabilize)

    def _assignment(self, replicas: tuple[list[int], int]) -> tuple[int, ...]:
        return fold_replicas(replicas[0], replicas[1], sorted(self.cluster.managers))

    def _args(self, assignments: dict[int, tuple[int, ...]]) -> str:
        return " ".join(f"{i}={','.join(map(str, r))}" for i, r in sorted(assignments.items()))

    def _partitions_of(self, topic: str) -> list[str]:
        return sorted((p for p in self.cluster.partitions if p.rpartition("-")[0] == topic),
                      key=lambda p: int(p.rpartition("-")[2]))

    def _partition(self, topic: str, index: int) -> str:
        known = self._partitions_of(topic)
        return pick(index, known) if known else f"{topic}-0"

    def _laggards(self) -> list[tuple[int, str]]:
        now = self.cluster.now
        return [(b, p) for b, p in self._replicas_in(LEADER)
                if self.cluster.managers[b].lagging_followers(p, now)]

    # -- setting up -------------------------------------------------------------------------------------------

    @initialize(target=brokers)
    def all_brokers(self) -> Any:
        return multiple(*sorted(self.cluster.managers))

    @initialize(target=topics, layout=st.lists(REPLICAS, min_size=1, max_size=2))
    def first_topic(self, layout: list[tuple[list[int], int]]) -> str:
        return self._create_topic(layout)

    # -- operators --------------------------------------------------------------------------------------------

    @precondition(lambda self: self.topic_count < MAX_TOPICS)
    @rule(target=topics, layout=st.lists(REPLICAS, min_size=1, max_size=2))
    def create_topic(self, layout: list[tuple[list[int], int]]) -> str:
        return self._create_topic(layout)

    def _create_topic(self, layout: list[tuple[list[int], int]]) -> str:
        topic = f"t{self.topic_count}"
        self.topic_count += 1
        assignment = {i: self._assignment(r) for i, r in enumerate(layout)}
        self.step(f"create-topic {topic} {self._args(assignment)}",
                   lambda: self.cluster.create_topic(topic, assignment))
        return topic

    @rule(topic=topics, replicas=REPLICAS)
    def create_partitions(self, topic: str, replicas: tuple[list[int], int]) -> None:
        added = {len(self._partitions_of(topic)): self._assignment(replicas)}
        self.step(f"create-partitions {topic} {self._args(added)}",
                   lambda: self.cluster.create_partitions(topic, added))

    @rule(topic=topics)
    def delete_topic(self, topic: str) -> None:
        self.step(f"delete-topic {topic}", lambda: self.cluster.delete_topic(topic))

    @rule(topic=topics, index=PICK, replicas=REPLICAS)
    def reassign(self, topic: str, index: int, replicas: tuple[list[int], int]) -> None:
        partition = self._partition(topic, index)
        target = self._assignment(replicas)
        self.step(f"reassign {partition}={','.join(map(str, target))}",
                   lambda: self.cluster.reassign({partition: target}))

    @rule(topic=topics, index=PICK)
    def preferred_election(self, topic: str, index: int) -> None:
        partition = self._partition(topic, index)
        self.step(f"preferred-election {partition}", lambda: self.cluster.preferred_election([partition]))

    # -- clients ------------------------------------------------------------------------------------------------

    @precondition(lambda self: self._replicas_in(LEADER))
    @rule(index=PICK, acks=ACKS)
    def produce(self, index: int, acks: int) -> None:
        broker, partition = pick(index, self._replicas_in(LEADER))
        self.step(f"produce broker={broker} partition={partition} acks={acks}",
                   lambda: self.cluster.produce(broker, partition, acks))

    # -- faults ---------------------------------------------------------------------------------------------------

    @precondition(lambda self: len(self._live()) > 1)
    @rule(broker=brokers)
    def crash(self, broker: int) -> None:
        target = next_of(broker, self._live())
        self.step(f"crash {target}", lambda: self.cluster.crash(target))

    @precondition(lambda self: len(self._live()) < self.config.brokers)
    @rule(broker=brokers)
    def restart(self, broker: int) -> None:
        target = next_of(broker, (b for b, m in self.cluster.managers.items() if not m.alive))
        self.step(f"restart {target}", lambda: self.cluster.restart(target))

    @precondition(lambda self: len(self._live()) > 1 and self.cluster.controller_holder() in self._live())
    @rule()
    def crash_controller(self) -> None:
        self.step("crash-controller", self.cluster.crash_controller)

    @precondition(lambda self: self._live())
    @rule(broker=brokers)
    def expire_session(self, broker: int) -> None:
        target = next_of(broker, self._live())
        self.step(f"expire-session {target}", lambda: self.cluster.expire_session(target))

    @precondition(lambda self: len(self._live()) > 1 and self.cluster.controller_holder() != NO_LEADER)
    @rule(broker=brokers)
    def controlled_shutdown(self, broker: int) -> None:
        target = next_of(broker, self._live())
        self.step(f"controlled-shutdown {target}", lambda: self.cluster.request_controlled_shutdown(target))

    @precondition(lambda self: self._live())
    @rule(broker=brokers)
    def checkpoint(self, broker: int) -> None:
        target = next_of(broker, self._live())
        self.step(f"checkpoint {target}", lambda: self.cluster.checkpoint_hw(target))

    @rule()
    def tick(self) -> None:
        self.step("tick", self.cluster.tick)

    @rule()
    def rebalance(self) -> None:
        self.step("rebalance", lambda: self.cluster.tick(rebalance=True))



class ProtocolMachine(ClusterMachine):
    """Every operation at the protocol's grain besides: each message delivered, dropped or
    duplicated on its own, each controller event and each follower fetch a step of its own, so requests of
    two controllers and replies of two leaders interleave in any order the network allows."""

    def step(self, command: str, action: Callable[[], object]) -> None:
        self.h.run(command, action)

    @rule()
    def stabilize(self) -> None:
        self.step("stabilize", self.cluster.stabilize)

    @precondition(lambda self: self.cluster.network.lossy())
    @rule(index=PICK)
    def drop(self, index: int) -> None:
        message = pick(index, self.cluster.network.lossy())
        self.step(f"drop {message}", lambda: self.cluster.drop(message))

    @precondition(lambda self: self.cluster.network.in_flight)
    @rule(index=PICK)
    def duplicate(self, index: int) -> None:
        message = index % len(self.cluster.network.in_flight)
        self.step(f"duplicate {message}", lambda: self.cluster.duplicate(message))

    # -- the protocol's own steps ---------------------------------------------------------------------------------

    @precondition(lambda self: self.cluster.network.ready(self.cluster.now))
    @rule(index=PICK)
    def deliver(self, index: int) -> None:
        message = pick(index, self.cluster.network.ready(self.cluster.now))
        self.step(f"deliver index={message}", lambda: self.cluster.deliver(message))

    @precondition(lambda self: self._queued())
    @rule(broker=ClusterMachine.brokers)
    def process_controller(self, broker: int) -> None:
        target = next_of(broker, self._queued())
        self.step(f"process-controller {target}", lambda: self.cluster.process_controller_event(target))

    @precondition(lambda self: self._fetchers())
    @rule(index=PICK)
    def fetch(self, index: int) -> None:
        self._send_fetch(*pick(index, self._fetchers()))

    @precondition(lambda self: self._fetchers())
    @rule(index=PICK)
    def fetch_round(self, index: int) -> None:
        self._fetch_round(*pick(index, self._fetchers()))

    @precondition(lambda self: self._laggards())
    @rule(index=PICK)
    def shrink_isr(self, index: int) -> None:
        broker, partition = pick(index, self._laggards())
        self.step(f"shrink-isr broker={broker} partition={partition}",
                   lambda: self.cluster.shrink_isr(broker, partition))
