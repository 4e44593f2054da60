"""Topic deletion: replicas go through the deletion states, a failed or impossible deletion marks the topic
ineligible until a retry (broker startup, reassignment completion), and only when every replica is
deleted does the topic leave the store."""

from __future__ import annotations

from kcm.impl import zk_paths
from kcm.impl.controller_context import ControllerContext
from kcm.impl.controller_store import ControllerStore
from kcm.impl.partition_state_machine import PartitionStateMachine
from kcm.impl.replica_state_machine import ReplicaStateMachine
from kcm.impl.request_batch import RequestBatch
from kcm.impl.states import P, R


class TopicDeletionManager:
    def __init__(
        self,
        ctx: ControllerContext,
        zk: ControllerStore,
        batch: RequestBatch,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
    ) -> None:
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.partitions = partitions
        self.replicas = replicas

    def enqueue(self, topics: set[str]) -> None:
        ctx = self.ctx
        for topic in sorted(topics - ctx.topics_to_delete):
            if topic not in ctx.topics:
                self.zk.delete_quietly(ctx, f"{zk_paths.DELETE_TOPICS}/{topic}")
                continue
            ctx.topics_to_delete.add(topic)
            if any(p in ctx.reassignments for p in ctx.topics[topic]):
                ctx.deletion_ineligible.add(topic)
        self.resume()

    def replicas_of(self, topic: str) -> list[tuple[str, int]]:
        return [(p, r) for p in self.ctx.topics.get(topic, []) for r in self.ctx.assignment.get(p, ())]

    def retry(self, topics: set[str]) -> None:
        """A chance for ineligible replicas: the broker is back, or the blocking reassignment is over."""
        ctx = self.ctx
        for topic in sorted(topics & ctx.topics_to_delete):
            if any(p in ctx.reassignments for p in ctx.topics.get(topic, [])):
                continue
            ctx.deletion_ineligible.discard(topic)
        self.resume()

    def fail(self, replicas: list[tuple[str, int]]) -> None:
        if not replicas:
            return
        self.replicas.handle(replicas, R.ReplicaDeletionIneligible)
        self.ctx.deletion_ineligible.update(self.ctx.topic_of(p) for p, _ in replicas)

    def succeed(self, replicas: list[tuple[str, int]]) -> None:
        self.replicas.handle(replicas, R.ReplicaDeletionSuccessful)
        self.resume()

    def resume(self) -> None:
        ctx = self.ctx
        for topic in sorted(ctx.topics_to_delete):
            # Read once for both tests: every failover and broker change resumes every deletion.
            states = [ctx.replica_state(p, r) for p, r in self.replicas_of(topic)]
            if states and all(state is R.ReplicaDeletionSuccessful for state in states):
                self._complete(topic)
            elif topic not in ctx.deletion_ineligible and R.ReplicaDeletionStarted not in states:
                self._start(topic)

    def _start(self, topic: str) -> None:
        ctx = self.ctx
        partitions = ctx.topics[topic]
        not_offline = [p for p in partitions if ctx.partition_state(p) is not P.OfflinePartition]
        self.partitions.handle(not_offline, P.OfflinePartition)
        self.batch.add_update_metadata(set(ctx.live_brokers), set(partitions))
        pending = [
            (p, r) for p, r in self.replicas_of(topic) if ctx.replica_state(p, r) is not R.ReplicaDeletionSuccessful
        ]
        dead = [(p, r) for p, r in pending if r not in ctx.live_brokers]
        live = [(p, r) for p, r in pending if r in ctx.live_brokers]
        self.fail([(p, r) for p, r in dead if ctx.replica_state(p, r) is not R.ReplicaDeletionIneligible])
        if dead:
            ctx.deletion_ineligible.add(topic)
        self.replicas.handle(live, R.OfflineReplica)
        self.replicas.handle(live, R.ReplicaDeletionStarted)

    def _complete(self, topic: str) -> None:
        ctx = self.ctx
        self.replicas.handle(self.replicas_of(topic), R.NonExistentReplica)
        self.partitions.handle(ctx.topics[topic], P.NonExistentPartition)
        self.zk.delete_tree(ctx, [zk_paths.topic_path(topic), f"{zk_paths.DELETE_TOPICS}/{topic}"])
        ctx.remove_topic(topic)
