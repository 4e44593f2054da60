"""Collects the requests a controller event produces, one request per broker and kind, as Kafka's
controller does. Each state-machine call seals what it collected, so requests go out in the order of the
calls (a StopReplica of an earlier call precedes a LeaderAndIsr of a later one on the same connection);
the whole event's requests are sent when it completes, or never, if it fails."""

from __future__ import annotations

from dataclasses import dataclass, field

from kcm.impl.controller_context import ControllerContext
from kcm.impl.messages import (
    Envelope,
    LeaderAndIsrRequest,
    PartitionLeaderState,
    StopReplicaRequest,
    UpdateMetadataRequest,
)


@dataclass(slots=True)
class RequestBatch:
    controller_id: int
    leader_and_isr: dict[int, dict[str, PartitionLeaderState]] = field(default_factory=dict)
    stop_replica: dict[tuple[int, bool], list[str]] = field(default_factory=dict)
    metadata_brokers: set[int] = field(default_factory=set)
    metadata_partitions: set[str] = field(default_factory=set)
    sealed: list[Envelope] = field(default_factory=list)

    def add_leader_and_isr(self, ctx: ControllerContext, brokers: set[int], partition: str) -> None:
        state = ctx.leader_state(partition)
        if state is None:
            return
        for broker in brokers & ctx.live_brokers.keys():
            self.leader_and_isr.setdefault(broker, {})[partition] = state
        self.metadata_brokers |= ctx.live_brokers.keys()
        self.metadata_partitions.add(partition)

    def add_stop_replica(self, broker: int, partition: str, delete: bool) -> None:
        self.stop_replica.setdefault((broker, delete), []).append(partition)

    def add_update_metadata(self, brokers: set[int], partitions: set[str]) -> None:
        self.metadata_brokers |= brokers
        self.metadata_partitions |= partitions

    def flush(self, ctx: ControllerContext) -> list[Envelope]:
        self.seal(ctx)
        out, self.sealed = self.sealed, []
        return out

    def seal(self, ctx: ControllerContext) -> None:
        if not (self.leader_and_isr or self.metadata_brokers or self.stop_replica):
            return
        out = self.sealed
        controller_id = self.controller_id
        epochs = ctx.live_brokers  # each request is addressed to the registration the context knows
        for broker, states in sorted(self.leader_and_isr.items()):
            request = LeaderAndIsrRequest(controller_id, ctx.epoch, tuple([states[p] for p in sorted(states)]),
                                          epochs[broker])
            out.append(Envelope(controller_id, broker, request))
        if self.metadata_brokers:
            live = tuple(sorted(epochs))
            metadata = tuple(
                [state for p in sorted(self.metadata_partitions) if (state := ctx.leader_state(p)) is not None]
            )
            for broker in sorted(self.metadata_brokers & epochs.keys()):
                update = UpdateMetadataRequest(controller_id, ctx.epoch, metadata, live, epochs[broker])
                out.append(Envelope(controller_id, broker, update))
        for (broker, delete), partitions in sorted(self.stop_replica.items()):
            if broker in epochs:
                stop = StopReplicaRequest(controller_id, ctx.epoch, tuple(sorted(set(partitions))), delete,
                                          epochs[broker])
                out.append(Envelope(controller_id, broker, stop))
        self.leader_and_isr = {}
        self.stop_replica = {}
        self.metadata_brokers = set()
        self.metadata_partitions = set()
