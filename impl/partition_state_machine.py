"""The controller's partition state machine: checks each requested transition against the table of valid
previous states, and for OnlinePartition initialises or elects leader and ISR in the store."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from kcm.impl import election
from kcm.impl.controller_context import ControllerContext, LeaderIsr
from kcm.impl.controller_store import ControllerStore
from kcm.impl.design import Design
from kcm.impl.request_batch import RequestBatch
from kcm.impl.states import P, PartitionState, valid_partition_transition

Strategy = Literal["offline", "reassign", "preferred", "controlled_shutdown"]
ELECTION_RETRIES = 3


@dataclass(frozen=True, slots=True)
class Decision:
    leader: int
    isr: tuple[int, ...]
    recipients: frozenset[int]


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, zk: ControllerStore, batch: RequestBatch, design: Design) -> None:
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.design = design

    def handle(
        self, partitions: Iterable[str], target: PartitionState, strategy: Strategy = "offline"
    ) -> list[str]:
        """Move partitions to `target`; returns the partitions that could not get there."""
        failed: list[str] = []
        self.batch.seal(self.ctx)
        for partition in sorted(partitions):
            source = self.ctx.partition_state(partition)
            if not valid_partition_transition(source, target):
                self.ctx.invalid_transitions.append(["partition", partition, source._value_, target._value_])
                failed.append(partition)
            elif not self._enter(partition, source, target, strategy):
                failed.append(partition)
        self.batch.seal(self.ctx)
        return failed

    def _enter(self, partition: str, source: PartitionState, target: PartitionState, strategy: Strategy) -> bool:
        if target is P.OnlinePartition:
            ok = self._initialize(partition) if source is P.NewPartition else self._elect(
                partition, strategy
            )
            if not ok:
                return False
        self.set_state(partition, source, target)
        return True

    def set_state(self, partition: str, source: PartitionState, target: PartitionState) -> None:
        self.ctx.partition_states[partition] = target
        self.ctx.transitions.append(["partition", partition, source._value_, target._value_])
        self.ctx.dirty.add(partition)

    def _initialize(self, partition: str) -> bool:
        """A new partition: the first live assigned replica leads, all live assigned replicas form the ISR."""
        replicas = self.ctx.assignment[partition]
        live = self.ctx.live_not_shutting_down()
        isr = tuple(r for r in replicas if r in live)
        if not isr:
            return False
        created = self.zk.create_leader_isr(self.ctx, partition, LeaderIsr(isr[0], 0, isr, self.ctx.epoch, 0))
        if created is None:
            existing = self.zk.read_leader_isr(partition)
            if existing is not None:
                self.ctx.leadership[partition] = existing
            return False
        self._adopt(partition, created, frozenset(isr))
        return True

    def _elect(self, partition: str, strategy: Strategy) -> bool:
        """Kafka 2.3.0 PartitionStateMachine.doElectLeaderForPartitions: the partition's state node is read
        from the store before every decision (`getTopicPartitionStatesRaw`), never taken from the cache, so an
        ISR change the controller has not been notified of yet counts; the write is conditional on the
        version read, and a stale version (a leader's write in between, on a store shared with other
        processes) reads and decides again."""
        for _ in range(ELECTION_RETRIES):
            current = self.zk.read_leader_isr(partition)
            if current is None:
                return False
            self.ctx.leadership[partition] = current
            decision = self._decide(partition, current, strategy)
            if decision is None:
                return False
            written = self.zk.update_leader_isr(
                self.ctx, partition, current.successor(decision.leader, decision.isr, self.ctx.epoch)
            )
            if written is not None:
                self._adopt(partition, written, decision.recipients)
                return True
        return False

    def _decide(self, partition: str, current: LeaderIsr, strategy: Strategy) -> Decision | None:
        ctx = self.ctx
        assignment = ctx.assignment[partition]
        live = ctx.live_not_shutting_down()
        live_assigned = frozenset(r for r in assignment if r in live)
        if strategy == "offline":
            leader = self.design.offline_partition_leader(assignment, current.isr, live)
            if leader is None:
                return None
            live_isr = tuple(r for r in current.isr if r in live)
            isr = live_isr if leader in live_isr else (leader,)
            return Decision(leader, isr, live_assigned)
        if strategy == "reassign":
            target = ctx.reassignments[partition]
            leader = election.reassign_partition_leader(target, current.isr, live)
            return None if leader is None else Decision(leader, current.isr, frozenset(target))
        if strategy == "preferred":
            leader = election.preferred_replica_partition_leader(assignment, current.isr, live)
            return None if leader is None else Decision(leader, current.isr, frozenset(assignment))
        everyone = set(ctx.live_brokers)
        leader = election.controlled_shutdown_partition_leader(assignment, current.isr, everyone, ctx.shutting_down)
        if leader is None:
            return None
        isr = tuple(r for r in current.isr if r not in ctx.shutting_down)
        return Decision(leader, isr, frozenset(r for r in assignment if r in everyone))

    def _adopt(self, partition: str, leadership: LeaderIsr, recipients: frozenset[int]) -> None:
        self.ctx.leadership[partition] = leadership
        self.ctx.dirty.add(partition)
        self.batch.add_leader_and_isr(self.ctx, set(recipients), partition)

    def trigger_online_state_change(self) -> None:
        """Elect a leader for every partition without one, except those of topics being deleted."""
        ctx = self.ctx
        waiting = [
            p
            for p, state in ctx.partition_states.items()
            if state in (P.OfflinePartition, P.NewPartition) and not ctx.is_deleting(p)
        ]
        self.handle(waiting, P.OnlinePartition, "offline")
