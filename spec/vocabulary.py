"""Design knobs and invariant names: the one vocabulary every engine of kcm speaks, and how the TLA+
specification spells the knobs.

The default `Knobs()` is the safe design (KIP-320 era, clean elections, every fence on). Every other
setting is a design variant whose consequences kcm exists to show.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Final, Literal, get_args

Truncation = Literal["hw", "kip101", "kip279", "kip320"]
TRUNCATION_RULES: Final[tuple[str, ...]] = get_args(Truncation)

INVARIANTS: Final[tuple[str, ...]] = (
    "OneLeaderPerEpoch",
    "IsrSubsetOfReplicas",
    "LeaderInIsr",
    "HighWatermarkMonotonic",
    "HighWatermarkWithinLog",
    "NoCommittedDataLoss",
    "ReplicaLogsAgree",
    "ControllerEpochMonotonic",
    "LeaderEpochMonotonic",
    "StaleControllerFenced",
    "ValidPartitionTransitions",
    "ValidReplicaTransitions",
)

# Progress properties: what must eventually hold once faults stop (docs/invariants.md, "Progress
# properties"). A trace checks each within a bound of rounds after a `Quiesce` event; TLC checks them as
# temporal properties under the fairness each states.
PROPERTIES: Final[tuple[str, ...]] = (
    "ControllerElected",
    "LeaderElected",
    "HighWatermarkCatchesUp",
    "ControlledShutdownCompletes",
    "ReassignmentCompletes",
    "TopicDeletionCompletes",
    "ReplicasRejoinIsr",
)

# HighWatermarkMonotonic has two readings; violations name the reading after a slash.
HW_PER_LEADER: Final = "HighWatermarkMonotonic/PerLeaderEpoch"
HW_ACROSS_LEADERS: Final = "HighWatermarkMonotonic/AcrossLeaders"


# Knobs whose every value is a safe design: a larger min_isr refuses more writes, it never loses one.
SAFE_AT_ANY_VALUE: Final = frozenset({"min_isr"})
# How the TLA+ specification reads the knobs: each is a constant of spec/KafkaReplication.tla (the
# truncation rule as the string `Truncation`, e.g. "kip320").
KNOB_CONSTANTS: Final[dict[str, str]] = {
    "truncation": "Truncation",
    "unclean_election": "UncleanElection",
    "controller_epoch_fencing": "ControllerEpochFencing",
    "leader_epoch_check": "LeaderEpochCheck",
    "min_isr": "MinIsr",
    "broker_epoch": "BrokerEpoch",
}
# What differs between the truncation rules enters the core as these constant operators, the era hooks;
# each rule's module defines all of them under its prefix (TruncationKIP320.tla: KIP320_ExposesHw, ...).
ERA_HOOKS: Final[tuple[str, ...]] = (
    "TruncateOnBecomeFollower", "FenceCurrentLeaderEpoch", "EpochEndAnswer", "TruncationOffset",
    "InSyncForExpansion", "ExposesHw")
# The core's own hooks, and the definition of spec/KafkaReplication.tla each is bound to unless a design binds it
# to one of its own.
CORE_HOOKS: Final[dict[str, str]] = {"OfflineLeader": "DefaultOfflineLeader",
                                     "RefusesLeaderEpoch": "DefaultRefusesLeaderEpoch",
                                     "AcceptsWrite": "DefaultAcceptsWrite",
                                     "RefusesControllerEpoch": "DefaultRefusesControllerEpoch",
                                     "FencesControllerWrites": "DefaultFencesControllerWrites",
                                     "BrokerEpochFencing": "DefaultBrokerEpochFencing"}
ERA_MODULES: Final[dict[str, tuple[str, str]]] = {
    "hw": ("TruncationHW", "HW_"),
    "kip101": ("TruncationKIP101", "KIP101_"),
    "kip279": ("TruncationKIP279", "KIP279_"),
    "kip320": ("TruncationKIP320", "KIP320_"),
}


class KnobError(ValueError):
    """A `--set name=value` the vocabulary does not know."""


@dataclass(frozen=True, slots=True)
class Knobs:
    truncation: Truncation = "kip320"
    unclean_election: bool = False
    controller_epoch_fencing: bool = True
    leader_epoch_check: bool = True
    min_isr: int = 1
    # KIP-380 (Kafka 2.2, KAFKA-7235): controller requests carry the broker epoch (the czxid of the
    # broker's /brokers/ids registration) the controller knows, a broker refuses one addressed to an
    # earlier registration of its own, and the controller sees a bounced broker. False: before 2.2.
    broker_epoch: bool = True

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def with_settings(self, settings: list[str] | tuple[str, ...]) -> Knobs:
        """Apply `name=value` strings, as given to `--set`."""
        knobs = self
        for setting in settings:
            name, sep, value = setting.partition("=")
            if not sep:
                raise KnobError(f"--set {setting!r}: expected name=value")
            knobs = knobs.with_value(name.strip(), value.strip())
        return knobs

    def with_value(self, name: str, value: object) -> Knobs:
        names = [f.name for f in fields(self)]
        if name not in names:
            raise KnobError(f"unknown knob {name!r} (known: {', '.join(names)})")
        change: dict[str, Any] = {name: _coerce(name, value)}
        return replace(self, **change)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Knobs:
        knobs = cls()
        for name, value in data.items():
            knobs = knobs.with_value(name, value)
        return knobs

    def changed(self) -> dict[str, object]:
        """The knobs set away from the safe design's defaults."""
        default = Knobs()
        return {k: v for k, v in self.to_dict().items() if getattr(default, k) != v}

    def settings(self) -> list[str]:
        """The changed knobs as `name=value` words, the form `--set` and a scenario's `cluster` line take."""
        return [f"{k}={_render(v)}" for k, v in self.changed().items()]

    def describe(self) -> str:
        return ", ".join(self.settings()) or "defaults (safe design)"

    @property
    def is_safe(self) -> bool:
        """A safe design: no knob changed but those safe at any value. An invariant violation on a safe
        design is a bug of the implementation; on any other, it may be the design's own flaw."""
        return self.changed().keys() <= SAFE_AT_ANY_VALUE


KNOB_NAMES: Final[tuple[str, ...]] = tuple(f.name for f in fields(Knobs))


def _render(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _coerce(name: str, value: object) -> object:
    if name == "truncation":
        if value not in TRUNCATION_RULES:
            raise KnobError(f"knob truncation: {value!r} is not one of {', '.join(TRUNCATION_RULES)}")
        return value
    if name == "min_isr":
        number = _as_int(name, value)
        if number < 1:
            raise KnobError(f"knob min_isr: {value!r} must be at least 1")
        return number
    return _as_bool(name, value)


def _as_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise KnobError(f"knob {name}: {value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise KnobError(f"knob {name}: {value!r} is not an integer")


def _as_bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    # Exactly true or false (TLC's configurations spell them TRUE and FALSE): a `yes` or a `1` taken as
    # true would be a guess about what the user meant.
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise KnobError(f"knob {name}: {value!r} is not a boolean (true or false)")


# The actions of the protocol, named as the TLA+ actions and the Z3 relations will be. A trace event's
# `action` is one of these; each carries who may perform it (the `actor` kind of trace format v2).
ACTIONS: Final[dict[str, str]] = {
    "Init": "env",
    # environment and operators
    "CreateTopic": "admin",
    "CreatePartitions": "admin",
    "DeleteTopic": "admin",
    "ReassignPartitions": "admin",
    "PreferredElection": "admin",
    "Produce": "client",
    "Tick": "clock",
    "BrokerCrash": "env",
    "BrokerRestart": "env",
    "ControllerCrash": "env",
    "SessionExpire": "env",
    "DropMessage": "network",
    "DuplicateMessage": "network",
    # a calm phase starts: no fault, drop, duplicate, operator command or client write until it ends
    "Quiesce": "env",
    # controller: one action per event taken off its queue
    "ControllerElect": "broker",
    "ControllerResign": "controller",
    "BrokerReregister": "broker",
    "BrokerChange": "controller",
    "TopicChange": "controller",
    "PartitionModifications": "controller",
    "TopicDeletion": "controller",
    "PartitionReassignment": "controller",
    "ReassignmentIsrChange": "controller",
    "PreferredReplicaElection": "controller",
    "AutoPreferredReplicaElection": "controller",
    "IsrChangeNotification": "controller",
    "ControlledShutdownRequest": "controller",
    "StopReplicaResponse": "controller",
    # brokers: requests from the controller, replication between brokers, periodic work
    "RequestControlledShutdown": "broker",
    "ControlledShutdownResponse": "broker",
    "LeaderAndIsr": "broker",
    "StopReplica": "broker",
    "UpdateMetadata": "broker",
    "SendFetch": "broker",
    "Fetch": "broker",
    "FetchResponse": "broker",
    "OffsetsForLeaderEpoch": "broker",
    "OffsetsForLeaderEpochResponse": "broker",
    "IsrShrink": "broker",
    "HwCheckpoint": "broker",
}

# State variables of the model, with their key depth: 0 a global value, 1 a map keyed by partition
# ("topic-N") or broker id, 2 broker -> partition, 3 broker -> partition -> replica. A trace delta
# replaces values at exactly that depth; a null there removes the key.
VARIABLES: Final[dict[str, int]] = {
    # the coordination store
    "controller": 0,
    "controller_epoch": 0,
    "assignment": 1,
    "leader": 1,
    "leader_epoch": 1,
    "isr": 1,
    "partition_controller_epoch": 1,
    "partition_version": 1,
    # each broker's controller role and state machines
    "acting_controller_epoch": 1,
    "partition_state": 2,
    "replica_state": 3,
    # each broker's replica manager
    "alive": 1,
    "broker_controller_epoch": 1,
    "role": 2,
    "local_leader_epoch": 2,
    "local_isr": 2,
    "log": 2,
    "hw": 2,
    "hw_checkpoint": 2,
    "epoch_start_offset": 2,
}

# "No broker": no partition leader, no controller. -1 is what Kafka writes for a partition without a leader
# (`LeaderAndIsr.NoLeader = -1`: 0.8.2.2 core/src/main/scala/kafka/api/LeaderAndIsrRequest.scala, 2.3.0 and
# 3.8.0 core/src/main/scala/kafka/api/LeaderAndIsr.scala), so that broker 0, Kafka's default broker.id, is a
# broker like any other.
NO_LEADER: Final = -1


def shown_broker(broker: int | None) -> str:
    """A leader or controller as messages print it: `none` for NO_LEADER."""
    return "none" if broker == NO_LEADER else str(broker)
