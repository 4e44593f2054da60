"""Where the controller and brokers keep their shared state in the coordination store, and the shape of
the data at each path (JSON-like values, as ZooKeeper nodes hold in Kafka's ZooKeeper mode)."""

from __future__ import annotations

import functools
from typing import Any, Final

CONTROLLER: Final = "/controller"
CONTROLLER_EPOCH: Final = "/controller_epoch"
BROKER_IDS: Final = "/brokers/ids"
TOPICS: Final = "/brokers/topics"
REASSIGN: Final = "/admin/reassign_partitions"
PREFERRED: Final = "/admin/preferred_replica_election"
DELETE_TOPICS: Final = "/admin/delete_topics"
ISR_CHANGES: Final = "/isr_change_notification"

PERSISTENT_ROOTS: Final = (BROKER_IDS, TOPICS, "/admin", DELETE_TOPICS, ISR_CHANGES)


def broker_path(broker: int) -> str:
    return f"{BROKER_IDS}/{broker}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_name(topic: str, index: int) -> str:
    return f"{topic}-{index}"


def split_partition(partition: str) -> tuple[str, int]:
    topic, _, index = partition.rpartition("-")
    return topic, int(index)


# Cached: the controller and the trace delta ask for it at every partition write and failover, and a
# cluster has few partitions.
@functools.cache
def partition_state_path(partition: str) -> str:
    topic, index = split_partition(partition)
    return f"{TOPICS}/{topic}/partitions/{index}/state"


def leader_and_isr_data(leader: int, leader_epoch: int, isr: tuple[int, ...], controller_epoch: int) -> Any:
    return {"leader": leader, "leader_epoch": leader_epoch, "isr": list(isr), "controller_epoch": controller_epoch}


def topic_data(assignment: dict[int, tuple[int, ...]]) -> Any:
    return {"partitions": {str(index): list(replicas) for index, replicas in sorted(assignment.items())}}


def topic_assignment(data: Any) -> dict[int, tuple[int, ...]]:
    return {int(index): tuple(replicas) for index, replicas in data["partitions"].items()}
