"""The controller's replica state machine: checks each transition against the valid-previous-state table,
and sends what each target state requires (LeaderAndIsr, StopReplica, ISR removal in the store)."""

from __future__ import annotations

from collections.abc import Iterable

from kcm.impl.controller_context import ControllerContext
from kcm.impl.controller_store import ControllerStore
from kcm.impl.request_batch import RequestBatch
from kcm.impl.states import R, ReplicaState, valid_replica_transition
from kcm.spec.vocabulary import NO_LEADER

ISR_REMOVAL_RETRIES = 3


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, zk: ControllerStore, batch: RequestBatch) -> None:
        self.ctx = ctx
        self.zk = zk
        self.batch = batch

    def handle(self, replicas: Iterable[tuple[str, int]], target: ReplicaState) -> list[tuple[str, int]]:
        """Move (partition, replica) pairs to `target`; returns those that could not get there."""
        failed: list[tuple[str, int]] = []
        self.batch.seal(self.ctx)
        for partition, replica in sorted(replicas):
            source = self.ctx.replica_state(partition, replica)
            if not valid_replica_transition(source, target):
                self.ctx.invalid_transitions.append(
                    ["replica", partition, str(replica), source._value_, target._value_]
                )
                failed.append((partition, replica))
            elif self._enter(partition, replica, source, target):
                self.set_state(partition, replica, source, target)
            else:
                failed.append((partition, replica))
        self.batch.seal(self.ctx)
        return failed

    def set_state(self, partition: str, replica: int, source: ReplicaState, target: ReplicaState) -> None:
        ctx = self.ctx
        if target is R.NonExistentReplica:
            ctx.replica_states.get(partition, {}).pop(replica, None)
        else:
            ctx.replica_states.setdefault(partition, {})[replica] = target
        ctx.transitions.append(["replica", partition, str(replica), source._value_, target._value_])
        ctx.dirty.add(partition)

    def _enter(self, partition: str, replica: int, source: ReplicaState, target: ReplicaState) -> bool:
        ctx = self.ctx
        leadership = ctx.leadership.get(partition)
        if target is R.NewReplica:
            if leadership is not None and leadership.leader == replica:
                return False
            self.batch.add_leader_and_isr(ctx, {replica}, partition)
        elif target is R.OnlineReplica and source is R.NewReplica:
            # A new replica already got the partition's state when it became NewReplica.
            assigned = ctx.assignment.get(partition, ())
            if replica not in assigned:
                ctx.assignment[partition] = (*assigned, replica)
        elif target is R.OnlineReplica:
            self.batch.add_leader_and_isr(ctx, {replica}, partition)
        elif target is R.OfflineReplica:
            self.batch.add_stop_replica(replica, partition, delete=False)
            self._remove_from_isr(partition, replica)
        elif target is R.ReplicaDeletionStarted:
            self.batch.add_stop_replica(replica, partition, delete=True)
        elif target is R.NonExistentReplica:
            ctx.assignment[partition] = tuple(r for r in ctx.assignment.get(partition, ()) if r != replica)
        return True

    def _remove_from_isr(self, partition: str, replica: int) -> None:
        """A replica going offline leaves the ISR (unless it is the last member) and, if it led, the
        partition is left without a leader until an election; the leader epoch moves on either way."""
        ctx = self.ctx
        for _ in range(ISR_REMOVAL_RETRIES):
            current = ctx.leadership.get(partition)
            if current is None or replica not in current.isr:
                return
            leader = NO_LEADER if current.leader == replica else current.leader
            isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
            written = self.zk.update_leader_isr(ctx, partition, current.successor(leader, isr, ctx.epoch))
            if written is not None:
                ctx.leadership[partition] = written
                ctx.dirty.add(partition)
                if not ctx.is_deleting(partition):
                    others = {r for r in ctx.assignment.get(partition, ()) if r != replica}
                    self.batch.add_leader_and_isr(ctx, others, partition)
                return
            refreshed = self.zk.read_leader_isr(partition)
            if refreshed is None:
                return
            ctx.leadership[partition] = refreshed
