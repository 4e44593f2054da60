"""Requests and responses exchanged between the controller and brokers, and between brokers.

Messages are immutable values; the network adapter may delay, drop, duplicate and reorder them, which
is exactly what the epoch fields in them exist to survive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

Record = tuple[int, int]  # (leader_epoch, record_id); its offset is its index in the log

NONE_ERROR: Final = ""
STALE_CONTROLLER_EPOCH: Final = "STALE_CONTROLLER_EPOCH"
STALE_BROKER_EPOCH: Final = "STALE_BROKER_EPOCH"
STALE_LEADER_EPOCH: Final = "STALE_LEADER_EPOCH"
NOT_LEADER: Final = "NOT_LEADER_FOR_PARTITION"
FENCED_LEADER_EPOCH: Final = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH: Final = "UNKNOWN_LEADER_EPOCH"
OFFSET_OUT_OF_RANGE: Final = "OFFSET_OUT_OF_RANGE"
NOT_ENOUGH_REPLICAS: Final = "NOT_ENOUGH_REPLICAS"
UNDEFINED_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class PartitionLeaderState:
    """One partition's entry in a LeaderAndIsr or UpdateMetadata request."""

    partition: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_version: int
    replicas: tuple[int, ...]
    controller_epoch: int


# Every controller request carries the broker epoch the controller knows for its recipient (KIP-380,
# 2.2.0 ControllerChannelManager.scala: controllerContext.liveBrokerIdAndEpochs(broker)); the knob
# `broker_epoch` decides whether the recipient checks it.
@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    partitions: tuple[PartitionLeaderState, ...]
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    partitions: tuple[str, ...]
    delete: bool
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    broker: int
    controller_epoch: int
    partitions: tuple[str, ...]
    delete: bool
    error: str


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    partitions: tuple[PartitionLeaderState, ...]
    live_brokers: tuple[int, ...]
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    broker: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    controller_epoch: int
    partitions_remaining: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    partition: str
    replica_id: int
    fetch_offset: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    partition: str
    fetch_offset: int
    current_leader_epoch: int
    error: str
    records: tuple[Record, ...]
    high_watermark: int
    leader_end_offset: int


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    partition: str
    replica_id: int
    leader_epoch: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochResponse:
    partition: str
    current_leader_epoch: int
    error: str
    leader_epoch: int
    end_offset: int


ControllerRequest = LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
CONTROLLER_REQUESTS: Final = (LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest)

Message = (
    LeaderAndIsrRequest
    | StopReplicaRequest
    | StopReplicaResponse
    | UpdateMetadataRequest
    | ControlledShutdownRequest
    | ControlledShutdownResponse
    | FetchRequest
    | FetchResponse
    | OffsetsForLeaderEpochRequest
    | OffsetsForLeaderEpochResponse
)

# The action a message's delivery is recorded as in a trace.
ACTION_OF: Final[dict[type, str]] = {
    LeaderAndIsrRequest: "LeaderAndIsr",
    StopReplicaRequest: "StopReplica",
    StopReplicaResponse: "StopReplicaResponse",
    UpdateMetadataRequest: "UpdateMetadata",
    ControlledShutdownRequest: "ControlledShutdownRequest",
    ControlledShutdownResponse: "ControlledShutdownResponse",
    FetchRequest: "Fetch",
    FetchResponse: "FetchResponse",
    OffsetsForLeaderEpochRequest: "OffsetsForLeaderEpoch",
    OffsetsForLeaderEpochResponse: "OffsetsForLeaderEpochResponse",
}

# Replication traffic between brokers may be lost: a follower times out and asks again. The controller's
# channel is reliable while both ends live (Kafka's controller resends over a new connection), so its
# requests and their replies are delayed, duplicated or reordered across connections, never lost.
LOSSY: Final = (FetchRequest, FetchResponse, OffsetsForLeaderEpochRequest, OffsetsForLeaderEpochResponse)


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message in flight from one broker to another (the controller lives in a broker)."""

    src: int
    dst: int
    message: Message
