"""The lines ZooKeeper-mode Kafka brokers print about partition and replica state, as data.

Each `Format` is one log statement of apache/kafka, transcribed from the source of the releases it names
(the file is the one at the first release of the range; release lines were read at the tags of
`RELEASES`). The template keeps Kafka's text; `{name}` marks an interpolated value, typed by
`PLACEHOLDERS`. The same table drives the parser (templates compiled into regular expressions) and the
renderer (templates filled in), so a fixture rendered for a release is exactly what the parser reads.

`kind` says what kcm makes of a line (see parser.py); `SKIP` rows carry no state the model observes and
say why in `note`. What the object renderings inside a line look like (`{lisr}`, `{lai}`, `{ps}`) is in
renderings.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

# Release lines of the ZooKeeper era and the tag each was read at (release tags of github.com/apache/kafka).
RELEASES: Final[dict[str, str]] = {
    "0.8.2": "0.8.2.2", "0.9": "0.9.0.1", "0.10.0": "0.10.0.1", "0.10.1": "0.10.1.1", "0.10.2": "0.10.2.2",
    "0.11": "0.11.0.2", "1.0": "1.0.2", "1.1": "1.1.1", "2.0": "2.0.1", "2.1": "2.1.1", "2.2": "2.2.2",
    "2.3": "2.3.1", "2.4": "2.4.1", "2.5": "2.5.1", "2.6": "2.6.3", "2.7": "2.7.2", "2.8": "2.8.2",
    "3.0": "3.0.2", "3.1": "3.1.2", "3.2": "3.2.3", "3.3": "3.3.2", "3.4": "3.4.1", "3.5": "3.5.2",
    "3.6": "3.6.2", "3.7": "3.7.1", "3.8": "3.8.0", "3.9": "3.9.0-rc3",
}
LINES: Final[tuple[str, ...]] = tuple(RELEASES)

# The generations the docs and the corpus report on, by their first and last release line.
GENERATIONS: Final[dict[str, tuple[str, str]]] = {
    "0.8.2": ("0.8.2", "0.8.2"), "0.9": ("0.9", "0.9"), "0.10": ("0.10.0", "0.10.2"), "0.11": ("0.11", "0.11"),
    "1.0": ("1.0", "1.0"), "1.1": ("1.1", "1.1"), "2.0-2.5": ("2.0", "2.5"), "2.6-2.8": ("2.6", "2.8"),
    "3.0-3.9": ("3.0", "3.9"),
}

STATE_CHANGE: Final = "state.change.logger"
CONTROLLER: Final = "kafka.controller.KafkaController"
# controller/PartitionLeaderSelector.scala (0.8.2-1.0, gone in 1.1): logs to controller.log, logIdent
# "[OfflinePartitionLeaderSelector]: ", no controller id.
SELECTOR: Final = "kafka.controller.OfflinePartitionLeaderSelector"

# Placeholder -> the regular expression of its values. Partitions: `{tap}` is Scala's TopicAndPartition
# (`[orders,0]` up to 0.11, `orders-0` from 1.0, kafka/common/TopicAndPartition.scala), `{tp}` Java's
# TopicPartition (`orders-0`); either form is accepted for both, since the type is the writer's choice.
_INT: Final = r"-?\d+"
_PARTITION: Final = r"\[[^\],\s]+,\d+\]|[^\s\[\]]+-\d+"
_ANY: Final = r".+?"
PLACEHOLDERS: Final[dict[str, str]] = {
    **{name: _INT for name in ("c", "e", "b", "to", "cid", "leader", "r", "latest", "n", "m", "le", "cur", "old",
                               "off", "hw", "pe", "ms", "v")},
    "tap": _PARTITION, "tp": _PARTITION,
    "src": r"[A-Za-z]+", "dst": r"[A-Za-z]+",
    "replicas": r"(?:-?\d+(?:,-?\d+)*)?",
    "isrb": r"\[[-\d,]*\]", "addb": r"\[[-\d,]*\]", "remb": r"\[[-\d,]*\]",
    "under": r"(?:\(under-min-isr\))?",
    "delete": r"true|false",
    "lisr": r"\(Leader:.*?,ControllerEpoch:-?\d+\)",
    **{name: _ANY for name in ("lai", "ps", "blob", "any", "api", "node", "err", "assignment", "topicid", "prev",
                               "brokers", "failure")},
    "rest": r".*",
}

# What kcm makes of a line (parser.py has one handler per kind).
PARTITION_STATE: Final = "partition_state"
REPLICA_STATE: Final = "replica_state"
FAILED_CHANGE: Final = "failed_change"
SEND_LEADER_AND_ISR: Final = "send_leader_and_isr"
SEND_OTHER: Final = "send_other"
RESPONSE: Final = "response"
REASSIGNMENT_SENT: Final = "reassignment_sent"
ELECTED_LEADER: Final = "elected_leader"
ISR_REMOVED: Final = "isr_removed"
RECEIVED: Final = "received"
STALE_LEADER_AND_ISR: Final = "stale_leader_and_isr"
REJECTED: Final = "rejected"
BECOME: Final = "become"
COMPLETED: Final = "completed"
LOCAL_LEADER: Final = "local_leader"
LOCAL_FOLLOWER: Final = "local_follower"
FETCHERS_STOPPED: Final = "fetchers_stopped"
LOG_TRUNCATED: Final = "log_truncated"
FETCHER_STARTED: Final = "fetcher_started"
UPDATE_METADATA: Final = "update_metadata"
STALE_UPDATE_METADATA: Final = "stale_update_metadata"
STOP_REPLICA: Final = "stop_replica"
STALE_STOP_REPLICA: Final = "stale_stop_replica"
STOPPED_REPLICA: Final = "stopped_replica"
SELECTED_LEADER: Final = "selected_leader"
ISR_UPDATED: Final = "isr_updated"
ASSIGNMENT_UPDATED: Final = "assignment_updated"
CONTROLLER_ELECT: Final = "controller_elect"
CONTROLLER_RESIGN: Final = "controller_resign"
SKIP: Final = "skip"

# Reasons for skipping, shared by the rows they apply to.
_ALREADY: Final = "the broker already holds the role; the request's own lines carry its state"
_ERROR: Final = "an error while applying a request; the request's own lines carry its state"
_DISK: Final = "a log-directory failure; log directories are outside the model"
_ELECTION_START: Final = "the start of an election whose result is logged on its own line"
_SHUTTING_DOWN: Final = "a shutting-down broker adds no fetcher; the become-follower lines before it carry the role"
_SELECTION: Final = ("how the offline partition's leader is chosen; the choice is logged as 'Selected new leader "
                     "and ISR'")
_TOPIC_ID: Final = "topic ids are outside the model"
_RECOVERY: Final = ("a leader's recovery state after an unclean election (KIP-704) is outside the model; the "
                    "election is the controller's line")
_KRAFT: Final = "KRaft migration; kcm models ZooKeeper mode"
_KRAFT_DELTA: Final = "a KRaft broker applying a metadata delta (ReplicaManager.applyDelta); kcm models ZooKeeper mode"
_INFO_FROM_2_6: Final = "INFO from 2.6"
_PRODUCER_IDS: Final = "producer id blocks (idempotent producers) are outside the model"
_REASSIGNING: Final = "reassignment bookkeeping; the election or LeaderAndIsr it leads to is logged in state-change.log"
_UNCLEAN_SETTING: Final = "a topic's unclean-election setting; the elections it allows are logged in state-change.log"

_LEVELS: Final[dict[str, str]] = {
    STALE_LEADER_AND_ISR: "WARN", STALE_UPDATE_METADATA: "WARN", STALE_STOP_REPLICA: "WARN", REJECTED: "WARN",
    FAILED_CHANGE: "ERROR", LOCAL_LEADER: "INFO", LOCAL_FOLLOWER: "INFO", ISR_REMOVED: "INFO",
    CONTROLLER_ELECT: "INFO", CONTROLLER_RESIGN: "INFO", SELECTED_LEADER: "INFO", ISR_UPDATED: "DEBUG",
    ASSIGNMENT_UPDATED: "INFO",
}

C0: Final = "Controller {c} epoch {e} "  # the prefix written by hand up to 0.11
C1: Final = "[Controller id={c} epoch={e}] "  # StateChangeLogger.withControllerEpoch, 1.0 and later
CN: Final = "[Controller id={c}] "  # StateChangeLogger in the controller without an epoch, 1.0 and later
B0: Final = "Broker {b} "
B1: Final = "[Broker id={b}] "  # StateChangeLogger(inControllerContext = false), 1.0 and later


@dataclass(frozen=True)
class Format:
    first: str  # release lines, both included
    last: str
    template: str
    kind: str
    source: str  # file under core/src/main/scala/kafka/ at `first`
    fixed: dict[str, str] = field(default_factory=dict)  # values the text itself fixes (the role)
    note: str = ""
    logger: str = STATE_CHANGE
    level: str = ""  # when it differs from the kind's usual level (_LEVELS)

    def covers(self, line: str) -> bool:
        return LINES.index(self.first) <= LINES.index(line) <= LINES.index(self.last)

    def level_at(self, line: str) -> str:
        """The level Kafka logs this statement at in a release line (KAFKA-8470 moved some to INFO in 2.6)."""
        if _INFO_FROM_2_6 in self.note and LINES.index(line) >= LINES.index("2.6"):
            return "INFO"
        return self.level or _LEVELS.get(self.kind, "TRACE")


PSM: Final = "controller/PartitionStateMachine.scala"
RSM: Final = "controller/ReplicaStateMachine.scala"
CCM: Final = "controller/ControllerChannelManager.scala"
KC: Final = "controller/KafkaController.scala"
RM: Final = "server/ReplicaManager.scala"
MC: Final = "server/MetadataCache.scala"
ZMC: Final = "server/metadata/ZkMetadataCache.scala"
PART: Final = "cluster/Partition.scala"
PLS: Final = "controller/PartitionLeaderSelector.scala"
PIM: Final = "coordinator/transaction/ProducerIdManager.scala"
_L: Final = {"role": "leader"}
_F: Final = {"role": "follower"}


FORMATS: tuple[Format, ...] = (
    # -- the controller's state machines (PartitionStateMachine, ReplicaStateMachine) ----------------------
    Format("0.8.2", "0.11", C0 + "changed partition {tap} state from {src} to {dst} with assigned replicas {replicas}",
           PARTITION_STATE, PSM),
    Format("1.0", "1.0", C1 + "Changed partition {tap} state from {src} to {dst} with assigned replicas {replicas}",
           PARTITION_STATE, PSM),
    Format("1.1", "3.9", C1 + "Changed partition {tp} state from {src} to {dst} with assigned replicas {replicas}",
           PARTITION_STATE, PSM, note="TRACE to 2.5, INFO from 2.6"),
    Format("0.8.2", "0.11", C0 + "changed partition {tap} from {src} to {dst} with leader {leader}",
           PARTITION_STATE, PSM),
    Format("1.0", "1.0", C1 + "Changed partition {tap} from {src} to {dst} with leader {leader}", PARTITION_STATE, PSM),
    Format("1.1", "3.9", C1 + "Changed partition {tp} from {src} to {dst} with state {lai}", PARTITION_STATE, PSM,
           note="TRACE to 2.5, INFO from 2.6"),
    Format("0.8.2", "0.11", C0 + "changed partition {tap} state from {src} to {dst}", PARTITION_STATE, PSM),
    Format("1.0", "1.0", C1 + "Changed partition {tap} state from {src} to {dst}", PARTITION_STATE, PSM),
    Format("1.1", "3.9", C1 + "Changed partition {tp} state from {src} to {dst}", PARTITION_STATE, PSM),
    Format("0.8.2", "0.11", C0 + "changed state of replica {r} for partition {tap} from {src} to {dst}",
           REPLICA_STATE, RSM),
    Format("1.0", "1.0", C1 + "Changed state of replica {r} for partition {tap} from {src} to {dst}",
           REPLICA_STATE, RSM),
    Format("1.1", "3.9", C1 + "Changed state of replica {r} for partition {tp} from {src} to {dst}",
           REPLICA_STATE, RSM),
    Format("0.8.2", "0.11", C0 + "initiated state change for partition {tap} from {src} to {dst} failed",
           FAILED_CHANGE, PSM),
    Format("1.0", "1.0", C1 + "Initiated state change for partition {tap} from {src} to {dst} failed",
           FAILED_CHANGE, PSM),
    Format("1.1", "3.9", C1 + "Controller {c} epoch {e} failed to change state for partition {tp} from {src} to {dst}",
           FAILED_CHANGE, PSM),
    Format("0.8.2", "0.11", C0 + "initiated state change of replica {r} for partition {tap} from {src} to {dst} failed",
           FAILED_CHANGE, RSM),
    Format("1.0", "1.0", C1 + "Initiated state change of replica {r} for partition {tap} from {src} to {dst} failed",
           FAILED_CHANGE, RSM),
    Format("1.1", "3.9", C1 + "Controller {c} epoch {e} initiated state change of replica {r} for partition {tp} from "
           "{src} to {dst} failed", FAILED_CHANGE, RSM),
    Format("0.8.2", "0.11", C0 + "started leader election for partition {tap}", SKIP, PSM, note=_ELECTION_START),
    Format("1.0", "1.0", C1 + "Started leader election for partition {tap}", SKIP, PSM, note=_ELECTION_START),
    Format("0.8.2", "0.11", C0 + "elected leader {leader} for Offline partition {tap}", ELECTED_LEADER, PSM),
    Format("1.0", "1.0", C1 + "Elected leader {leader} for Offline partition {tap}", ELECTED_LEADER, PSM),
    Format("2.6", "3.9", C1 + "Partition {tp} state changed to {lisr} after removing replica {r} from the ISR as part "
           "of transition to OfflineReplica", ISR_REMOVED, RSM),
    # -- requests the controller sends (ControllerChannelManager, KafkaController) ------------------------------
    Format("0.8.2", "0.8.2", C0 + "sending become-leader LeaderAndIsr request {lisr} with correlationId {cid} to "
           "broker {to} for partition {tap}", SEND_LEADER_AND_ISR, CCM, _L),
    Format("0.8.2", "0.8.2", C0 + "sending become-follower LeaderAndIsr request {lisr} with correlationId {cid} to "
           "broker {to} for partition {tap}", SEND_LEADER_AND_ISR, CCM, _F),
    Format("0.9", "0.11", C0 + "sending become-leader LeaderAndIsr request {lisr} to broker {to} for partition {tap}",
           SEND_LEADER_AND_ISR, CCM, _L),
    Format("0.9", "0.11", C0 + "sending become-follower LeaderAndIsr request {lisr} to broker {to} for partition {tap}",
           SEND_LEADER_AND_ISR, CCM, _F),
    Format("1.0", "3.9", C1 + "Sending become-leader LeaderAndIsr request {ps} to broker {to} for partition {tp}",
           SEND_LEADER_AND_ISR, CCM, _L),
    Format("1.0", "3.9", C1 + "Sending become-follower LeaderAndIsr request {ps} to broker {to} for partition {tp}",
           SEND_LEADER_AND_ISR, CCM, _F),
    Format("2.6", "3.9", C1 + "Sending LeaderAndIsr request to broker {to} with {n} become-leader and {m} "
           "become-follower partitions", SEND_OTHER, CCM, {"request": "LeaderAndIsr"}, level="INFO"),
    Format("0.8.2", "0.8.2", C0 + "sending UpdateMetadata request {lisr} with correlationId {cid} to broker {to} for "
           "partition {tap}", SEND_OTHER, CCM, {"request": "UpdateMetadata"}),
    Format("0.9", "0.10.1", C0 + "sending UpdateMetadata request {lisr} to broker {to} for partition {tap}",
           SEND_OTHER, CCM, {"request": "UpdateMetadata"}),
    Format("0.10.2", "0.11", C0 + "sending UpdateMetadata request {lisr} to brokers {brokers} for partition {tap}",
           SEND_OTHER, CCM, {"request": "UpdateMetadata"}),
    Format("1.0", "2.5", C1 + "Sending UpdateMetadata request {blob} to brokers {brokers} for partition {tp}",
           SEND_OTHER, CCM, {"request": "UpdateMetadata"}),
    Format("2.6", "3.9", C1 + "Sending UpdateMetadata request to brokers {brokers} for {n} partitions",
           SEND_OTHER, CCM, {"request": "UpdateMetadata"}, level="INFO"),
    Format("2.6", "3.9", C1 + "Sending StopReplica request {blob} to broker {to} for partition {tp}",
           SEND_OTHER, CCM, {"request": "StopReplica"}),
    Format("2.6", "3.9", C1 + "Sending StopReplica request for {n} replicas to broker {to}",
           SEND_OTHER, CCM, {"request": "StopReplica"}, level="INFO"),
    Format("2.6", "3.9", C1 + "Sending StopReplica request (delete = {delete}) for {n} replicas to broker {to}",
           SEND_OTHER, CCM, {"request": "StopReplica"}, level="INFO"),
    Format("0.8.2", "0.11", C0 + "received response {any} for a request sent to broker {node}", RESPONSE, CCM),
    Format("1.0", "1.0", C1 + "Received response {any} for a request sent to broker {node}", RESPONSE, CCM),
    Format("1.1", "3.3", C1 + "Received response {any} for request {api} with correlation id {cid} sent to broker "
           "{node}", RESPONSE, CCM),
    Format("1.0", "2.4", CN + "Received error in LeaderAndIsr response {any} from broker {to}", RESPONSE, KC,
           {"api": "LEADER_AND_ISR"}, level="ERROR"),
    Format("2.5", "3.9", CN + "Received error {err} in UpdateMetadata response {any} from broker {to}", RESPONSE, KC,
           {"api": "UPDATE_METADATA"}, level="ERROR"),
    Format("2.5", "3.9", CN + "Received error {err} in LeaderAndIsr response {any} from broker {to}", RESPONSE, KC,
           {"api": "LEADER_AND_ISR"}, level="ERROR"),
    Format("1.0", "3.9", CN + "Mark replicas {replicas} on broker {to} as offline", SKIP, KC, note=_DISK),
    Format("0.8.2", "0.11", C0 + "sent LeaderAndIsr request {lisr} with new assigned replica list {replicas} to leader "
           "{leader} for partition being reassigned {tap}", REASSIGNMENT_SENT, KC),
    Format("1.0", "1.0", C1 + "Sent LeaderAndIsr request {lisr} with new assigned replica list {replicas} to leader "
           "{leader} for partition being reassigned {tap}", REASSIGNMENT_SENT, KC),
    Format("1.1", "2.3", C1 + "Sent LeaderAndIsr request {lisr} with new assigned replica list {replicas} to leader "
           "{leader} for partition being reassigned {tp}", REASSIGNMENT_SENT, KC),
    Format("2.4", "3.9", C1 + "Sent LeaderAndIsr request {lisr} with new replica assignment {assignment} to leader "
           "{leader} for partition being reassigned {tp}", REASSIGNMENT_SENT, KC, note="TRACE to 2.5, INFO from 2.6"),
    Format("0.8.2", "0.11", C0 + "failed to send LeaderAndIsr request with new assigned replica list {replicas} to "
           "leader for partition being reassigned {tap}", FAILED_CHANGE, KC),
    Format("1.0", "1.0", C1 + "Failed to send LeaderAndIsr request with new assigned replica list {replicas} to "
           "leader for partition being reassigned {tap}", FAILED_CHANGE, KC),
    Format("1.1", "2.3", C1 + "Failed to send LeaderAndIsr request with new assigned replica list {replicas} to "
           "leader for partition being reassigned {tp}", FAILED_CHANGE, KC),
    Format("2.4", "3.9", C1 + "Failed to send LeaderAndIsr request with new replica assignment {assignment} to "
           "leader for partition being reassigned {tp}", FAILED_CHANGE, KC),
    # -- a broker receiving LeaderAndIsr (ReplicaManager, Partition) --------------------------------------------
    Format("0.8.2", "0.11", B0 + "received LeaderAndIsr request {ps} correlation id {cid} from controller {c} epoch "
           "{e} for partition {tap}", RECEIVED, RM),
    Format("1.0", "2.3", B1 + "Received LeaderAndIsr request {ps} correlation id {cid} from controller {c} epoch {e} "
           "for partition {tp}", RECEIVED, RM),
    Format("2.4", "3.9", B1 + "Received LeaderAndIsr request {ps} correlation id {cid} from controller {c} epoch {e}",
           RECEIVED, RM),
    Format("2.6", "3.9", B1 + "Handling LeaderAndIsr request correlationId {cid} from controller {c} for {n} "
           "partitions", RECEIVED, RM, level="INFO"),
    Format("0.8.2", "0.11", B0 + "ignoring LeaderAndIsr request from controller {c} with correlation id {cid} since "
           "its controller epoch {e} is old. Latest known controller epoch is {latest}", STALE_LEADER_AND_ISR, RM),
    Format("1.0", "3.9", B1 + "Ignoring LeaderAndIsr request from controller {c} with correlation id {cid} since its "
           "controller epoch {e} is old. Latest known controller epoch is {latest}", STALE_LEADER_AND_ISR, RM),
    Format("0.8.2", "0.11", B0 + "ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch "
           "{e} for partition {tap} as itself is not in assigned replica list {replicas}", REJECTED, RM),
    Format("1.0", "3.9", B1 + "Ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch {e} "
           "for partition {tp} as itself is not in assigned replica list {replicas}", REJECTED, RM),
    Format("0.8.2", "0.10.0", B0 + "ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch "
           "{e} for partition {tap} since its associated leader epoch {le} is old. Current leader epoch is {cur}",
           REJECTED, RM),
    Format("0.10.1", "0.11", B0 + "ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch "
           "{e} for partition {tap} since its associated leader epoch {le} is not higher than the current leader "
           "epoch {cur}", REJECTED, RM),
    Format("1.0", "2.2", B1 + "Ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch {e} "
           "for partition {tp} since its associated leader epoch {le} is not higher than the current leader epoch "
           "{cur}", REJECTED, RM),
    Format("2.3", "3.9", B1 + "Ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch {e} "
           "for partition {tp} since its associated leader epoch {le} is smaller than the current leader epoch {cur}",
           REJECTED, RM),
    Format("2.3", "3.9", B1 + "Ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch {e} "
           "for partition {tp} since its associated leader epoch {le} matches the current leader epoch", REJECTED, RM,
           note="DEBUG to 2.5, INFO from 2.6", level="DEBUG"),
    Format("1.0", "3.9", B1 + "Ignoring LeaderAndIsr request from controller {c} with correlation id {cid} epoch {e} "
           "for partition {tp} as the local replica for the partition is in an offline log directory", REJECTED, RM),
    Format("0.8.2", "0.10.1", B0 + "handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-leader transition for partition {tap}", BECOME, RM, _L),
    Format("0.10.2", "0.11", B0 + "handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-leader transition for partition {tp}", BECOME, RM, _L),
    Format("1.0", "3.9", B1 + "Handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-leader transition for partition {tp}", BECOME, RM, _L),
    Format("0.8.2", "0.10.1", B0 + "handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-follower transition for partition {tap}", BECOME, RM, _F),
    Format("0.10.2", "0.11", B0 + "handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-follower transition for partition {tp}", BECOME, RM, _F),
    Format("1.0", "1.1", B1 + "Handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-follower transition for partition {tp}", BECOME, RM, _F),
    Format("2.0", "3.9", B1 + "Handling LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "starting the become-follower transition for partition {tp} with leader {leader}", BECOME, RM, _F),
    Format("0.8.2", "0.10.1", B0 + "completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "for the become-leader transition for partition {tap}", COMPLETED, RM, _L),
    Format("0.10.2", "0.11", B0 + "completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "for the become-leader transition for partition {tp}", COMPLETED, RM, _L),
    Format("1.0", "3.9", B1 + "Completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} for "
           "the become-leader transition for partition {tp}", COMPLETED, RM, _L),
    Format("0.8.2", "0.10.1", B0 + "completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "for the become-follower transition for partition {tap}", COMPLETED, RM, _F),
    Format("0.10.2", "0.11", B0 + "completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} "
           "for the become-follower transition for partition {tp}", COMPLETED, RM, _F),
    Format("1.0", "1.1", B1 + "Completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} for "
           "the become-follower transition for partition {tp}", COMPLETED, RM, _F),
    Format("2.0", "3.9", B1 + "Completed LeaderAndIsr request correlationId {cid} from controller {c} epoch {e} for "
           "the become-follower transition for partition {tp} with leader {leader}", COMPLETED, RM, _F),
    Format("2.7", "3.9", B1 + "Finished LeaderAndIsr request in {ms}ms correlationId {cid} from controller {c} for "
           "{n} partitions", COMPLETED, RM, level="INFO"),
    # Between apache/kafka c59835c1d72 (KAFKA-8470, #8320) and d9fe30dab0f (#8736) trunk printed the lists
    # without brackets and `.Previous` without a space; no release did, so such a line stays quarantined.
    Format("2.6", "3.2", B1 + "Leader {tp} starts at leader epoch {le} from offset {off} with high watermark {hw} ISR "
           "{isrb} addingReplicas {addb} removingReplicas {remb}. Previous leader epoch was {old}.", LOCAL_LEADER,
           PART),
    Format("3.3", "3.4", B1 + "Leader {tp} with topic id {topicid} starts at leader epoch {le} from offset {off} with "
           "partition epoch {pe}, high watermark {hw}, ISR {isrb}, adding replicas {addb} and removing replicas "
           "{remb}. Previous leader epoch was {old}.", LOCAL_LEADER, PART),
    Format("3.5", "3.5", B1 + "Leader {tp} with topic id {topicid} starts at leader epoch {le} from offset {off} with "
           "partition epoch {pe}, high watermark {hw}, ISR {isrb}, adding replicas {addb} and removing replicas "
           "{remb} {under}. Previous leader epoch was {old}.", LOCAL_LEADER, PART),
    Format("3.6", "3.9", B1 + "Leader {tp} with topic id {topicid} starts at leader epoch {le} from offset {off} with "
           "partition epoch {pe}, high watermark {hw}, ISR {isrb}, adding replicas {addb} and removing replicas "
           "{remb} {under}. Previous leader {prev} and previous leader epoch was {old}.", LOCAL_LEADER, PART),
    Format("2.6", "3.2", B1 + "Follower {tp} starts at leader epoch {le} from offset {off} with high watermark {hw}. "
           "Previous leader epoch was {old}.", LOCAL_FOLLOWER, PART),
    Format("3.3", "3.5", B1 + "Follower {tp} starts at leader epoch {le} from offset {off} with partition epoch {pe} "
           "and high watermark {hw}. Current leader is {leader}. Previous leader epoch was {old}.", LOCAL_FOLLOWER,
           PART),
    Format("3.6", "3.9", B1 + "Follower {tp} starts at leader epoch {le} from offset {off} with partition epoch {pe} "
           "and high watermark {hw}. Current leader is {leader}. Previous leader {prev} and previous leader epoch was "
           "{old}.", LOCAL_FOLLOWER, PART),
    # The sub-steps of ReplicaManager.makeLeaders / makeFollowers: each is logged once the broker has accepted the
    # request's controller epoch (after the fence of becomeLeaderOrFollower) and, per partition, once
    # Partition.makeLeader / makeFollower changed the role (0.9 and later; 0.8.2 logs the become-leader one for
    # every partition of the request, just before makeLeader). 2.6 logs one summary per request instead.
    Format("0.8.2", "0.8.2", B0 + "stopped fetchers as part of become-leader request from controller {c} epoch {e} "
           "with correlation id {cid} for partition {tap}", FETCHERS_STOPPED, RM, _L),
    Format("0.9", "0.11", B0 + "stopped fetchers as part of become-leader request from controller {c} epoch {e} with "
           "correlation id {cid} for partition {tp}", FETCHERS_STOPPED, RM, _L),
    Format("1.0", "2.5", B1 + "Stopped fetchers as part of become-leader request from controller {c} epoch {e} with "
           "correlation id {cid} for partition {tp} (last update controller epoch {le})", FETCHERS_STOPPED, RM, _L),
    Format("2.6", "3.9", B1 + "Stopped fetchers as part of LeaderAndIsr request correlationId {cid} from controller "
           "{c} epoch {e} as part of the become-leader transition for {n} partitions", FETCHERS_STOPPED, RM, _L,
           level="INFO"),
    Format("0.8.2", "0.11", B0 + "stopped fetchers as part of become-follower request from controller {c} epoch {e} "
           "with correlation id {cid} for partition {tap}", FETCHERS_STOPPED, RM, _F),
    Format("1.0", "1.1", B1 + "Stopped fetchers as part of become-follower request from controller {c} epoch {e} with "
           "correlation id {cid} for partition {tp}", FETCHERS_STOPPED, RM, _F),
    Format("2.0", "2.5", B1 + "Stopped fetchers as part of become-follower request from controller {c} epoch {e} with "
           "correlation id {cid} for partition {tp} with leader {leader}", FETCHERS_STOPPED, RM, _F),
    Format("2.6", "3.9", B1 + "Stopped fetchers as part of become-follower request from controller {c} epoch {e} with "
           "correlation id {cid} for {n} partitions", FETCHERS_STOPPED, RM, _F, level="INFO"),
    Format("3.0", "3.9", B1 + "Stopped fetchers as part of become-follower for {n} partitions", SKIP, RM,
           note=_KRAFT_DELTA),
    Format("3.0", "3.9", B1 + "Started fetchers as part of become-follower for {n} partitions", SKIP, RM,
           note=_KRAFT_DELTA),
    Format("0.8.2", "0.11", B0 + "truncated logs and checkpointed recovery boundaries for partition {tap} as part of "
           "become-follower request with correlation id {cid} from controller {c} epoch {e}", LOG_TRUNCATED, RM, _F),
    Format("1.0", "1.1", B1 + "Truncated logs and checkpointed recovery boundaries for partition {tp} as part of "
           "become-follower request with correlation id {cid} from controller {c} epoch {e}", LOG_TRUNCATED, RM, _F),
    Format("2.0", "2.5", B1 + "Truncated logs and checkpointed recovery boundaries for partition {tp} as part of "
           "become-follower request with correlation id {cid} from controller {c} epoch {e} with leader {leader}",
           LOG_TRUNCATED, RM, _F),
    Format("0.8.2", "0.11", B0 + "started fetcher to new leader as part of become-follower request from controller "
           "{c} epoch {e} with correlation id {cid} for partition {tap}", FETCHER_STARTED, RM, _F),
    Format("1.0", "1.1", B1 + "Started fetcher to new leader as part of become-follower request from controller {c} "
           "epoch {e} with correlation id {cid} for partition {tp}", FETCHER_STARTED, RM, _F),
    Format("2.0", "2.3", B1 + "Started fetcher to new leader as part of become-follower request from controller {c} "
           "epoch {e} with correlation id {cid} for partition {tp} with leader {leader}", FETCHER_STARTED, RM, _F),
    # the leader as InitialFetchState.leader, a BrokerEndPoint: `BrokerEndPoint(id=$id, host=$host:$port)`
    # (cluster/BrokerEndPoint.scala 2.4)
    Format("2.4", "2.5", B1 + "Started fetcher to new leader as part of become-follower request from controller {c} "
           "epoch {e} with correlation id {cid} for partition {tp} with leader BrokerEndPoint(id={leader}, "
           "host={node})", FETCHER_STARTED, RM, _F),
    Format("0.8.2", "0.11", B0 + "skipped the adding-fetcher step of the become-follower state change with "
           "correlation id {cid} from controller {c} epoch {e} for partition {tap} since it is shutting down", SKIP,
           RM, note=_SHUTTING_DOWN),
    Format("1.0", "1.1", B1 + "Skipped the adding-fetcher step of the become-follower state change with correlation "
           "id {cid} from controller {c} epoch {e} for partition {tp} since it is shutting down", SKIP, RM,
           note=_SHUTTING_DOWN),
    Format("2.0", "3.9", B1 + "Skipped the adding-fetcher step of the become-follower state change with correlation "
           "id {cid} from controller {c} epoch {e} for partition {tp} with leader {leader} since it is shutting down",
           SKIP, RM, note=_SHUTTING_DOWN),
    Format("0.9", "0.11", B0 + "skipped the become-leader state change after marking its partition as leader with "
           "correlation id {cid} from controller {c} epoch {e} for partition {tap} since it is already the leader for "
           "the partition.", SKIP, RM, note=_ALREADY),
    Format("1.0", "3.2", B1 + "Skipped the become-leader state change after marking its partition as leader with "
           "correlation id {cid} from controller {c} epoch {e} for partition {tp} (last update controller epoch {le}) "
           "since it is already the leader for the partition.", SKIP, RM, note=_ALREADY),
    Format("0.8.2", "0.11", B0 + "skipped the become-follower state change after marking its partition as follower "
           "with correlation id {cid} from controller {c} epoch {e} for partition {tap} since the new leader {leader} "
           "is the same as the old leader", SKIP, RM, note=_ALREADY),
    Format("1.0", "3.2", B1 + "Skipped the become-follower state change after marking its partition as follower with "
           "correlation id {cid} from controller {c} epoch {e} for partition {tp} (last update controller epoch {le}) "
           "since the new leader {leader} is the same as the old leader", SKIP, RM, note=_ALREADY),
    Format("3.3", "3.9", B1 + "Skipped the become-leader state change for {tp} with topic id {topicid} and partition "
           "state {blob} since it is already the leader with leader epoch {le}.{any}", SKIP, PART, note=_ALREADY),
    Format("3.3", "3.9", B1 + "Skipped the become-follower state change for {tp} with topic id {topicid} and partition "
           "state {blob} since it is already a follower with leader epoch {le}.", SKIP, PART, note=_ALREADY),
    # makeLeader (KIP-704): a partition elected uncleanly arrives RECOVERING and is marked RECOVERED at once
    Format("3.2", "3.2", B1 + "The topic partition {tp} was marked as RECOVERING. Leader log recovery is not "
           "implemented. Marking the topic partition as RECOVERED.", SKIP, PART, note=_RECOVERY),
    Format("3.3", "3.9", B1 + "The topic partition {tp} was marked as RECOVERING. Marking the topic partition as "
           "RECOVERED.", SKIP, PART, note=_RECOVERY),
    Format("0.8.2", "0.11", B0 + "received LeaderAndIsrRequest with correlation id {cid} from controller {c} epoch {e} "
           "for partition {tap} but cannot become follower since the new leader {leader} is unavailable.", SKIP, RM,
           note=_ERROR),
    Format("1.0", "3.9", B1 + "Received LeaderAndIsrRequest with correlation id {cid} from controller {c} epoch {e} "
           "for partition {tp} (last update controller epoch {le}) but cannot become follower since the new leader "
           "{leader} is unavailable.", SKIP, RM, note=_ERROR),
    Format("1.0", "3.9", B1 + "Error while processing LeaderAndIsr request correlationId {cid} received from "
           "controller {c} epoch {e} for partition {tp}", SKIP, RM, note=_ERROR),
    Format("1.0", "3.9", B1 + "Error while processing LeaderAndIsr request with correlationId {cid} received from "
           "controller {c} epoch {e}", SKIP, RM, note=_ERROR),
    Format("3.0", "3.9", B1 + "Updating log for {tp} to assign topic ID {topicid} from LeaderAndIsr request from "
           "controller {c} with correlation id {cid} epoch {e}", SKIP, RM, note=_TOPIC_ID),
    Format("3.6", "3.9", B1 + "While handling full LeaderAndIsr request from KRaft controller {c} with correlation id "
           "{cid}, found {n} stray partition(s).", SKIP, RM, note=_KRAFT),
    # -- StopReplica and UpdateMetadata on the broker (ReplicaManager, MetadataCache) ------------------------------
    Format("0.8.2", "0.10.1", B0 + "handling stop replica (delete={delete}) for partition {tap}", STOP_REPLICA, RM),
    Format("0.10.2", "0.11", B0 + "handling stop replica (delete={delete}) for partition {tp}", STOP_REPLICA, RM),
    Format("1.0", "2.5", B1 + "Handling stop replica (delete={delete}) for partition {tp}", STOP_REPLICA, RM),
    Format("2.6", "3.9", B1 + "Handling StopReplica request correlationId {cid} from controller {c} for {n} "
           "partitions", STOP_REPLICA, RM, level="INFO"),
    Format("2.6", "3.9", B1 + "Received StopReplica request {blob} correlation id {cid} from controller {c} epoch {e} "
           "for partition {tp}", STOP_REPLICA, RM),
    # logged at the end of ReplicaManager.stopReplica, whether or not the broker held the replica
    Format("0.8.2", "0.10.1", B0 + "finished handling stop replica (delete={delete}) for partition {tap}",
           STOPPED_REPLICA, RM),
    Format("0.10.2", "0.11", B0 + "finished handling stop replica (delete={delete}) for partition {tp}",
           STOPPED_REPLICA, RM),
    Format("1.0", "2.5", B1 + "Finished handling stop replica (delete={delete}) for partition {tp}",
           STOPPED_REPLICA, RM),
    Format("0.8.2", "0.10.1", B0 + "ignoring stop replica (delete={delete}) for partition {tap} as replica doesn't "
           "exist on broker", SKIP, RM, note="the broker holds no replica to stop"),
    Format("0.10.2", "0.11", B0 + "ignoring stop replica (delete={delete}) for partition {tp} as replica doesn't "
           "exist on broker", SKIP, RM, note="the broker holds no replica to stop"),
    Format("1.0", "2.5", B1 + "Ignoring stop replica (delete={delete}) for partition {tp} as replica doesn't exist on "
           "broker", SKIP, RM, note="the broker holds no replica to stop"),
    # 0.8.2 and 0.9 print a literal "%d" here: the format string is concatenated after .format() ran.
    Format("0.8.2", "0.9", B0 + "received stop replica request from an old controller epoch {e}. Latest known "
           "controller epoch is %d {latest}", STALE_STOP_REPLICA, RM),
    Format("0.10.0", "0.11", B0 + "received stop replica request from an old controller epoch {e}. Latest known "
           "controller epoch is {latest}", STALE_STOP_REPLICA, RM),
    Format("1.0", "2.5", B1 + "Received stop replica request from an old controller epoch {e}. Latest known "
           "controller epoch is {latest}", STALE_STOP_REPLICA, RM),
    Format("2.6", "3.9", B1 + "Ignoring StopReplica request from controller {c} with correlation id {cid} since its "
           "controller epoch {e} is old. Latest known controller epoch is {latest}", STALE_STOP_REPLICA, RM),
    Format("2.6", "3.9", B1 + "Ignoring StopReplica request (delete={delete}) from controller {c} with correlation id "
           "{cid} epoch {e} for partition {tp} since its associated leader epoch {le} is smaller than the current "
           "leader epoch {cur}", REJECTED, RM, {"request": "StopReplica"}),
    Format("2.6", "3.7", B1 + "Ignoring StopReplica request (delete={delete}) from controller {c} with correlation id "
           "{cid} epoch {e} for partition {tp} since its associated leader epoch {le} matches the current leader "
           "epoch", REJECTED, RM, {"request": "StopReplica"}, level="INFO"),
    Format("2.6", "3.9", B1 + "Ignoring StopReplica request (delete={delete}) from controller {c} with correlation id "
           "{cid} epoch {e} for partition {tp} as the local replica for the partition is in an offline log directory",
           SKIP, RM, note=_DISK),
    Format("0.8.2", "0.9", B0 + "cached leader info {blob} for partition {tap} in response to UpdateMetadata request "
           "sent by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC),
    Format("0.10.0", "0.11", B0 + "cached leader info {blob} for partition {tp} in response to UpdateMetadata request "
           "sent by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC),
    Format("1.0", "3.9", B1 + "Cached leader info {blob} for partition {tp} in response to UpdateMetadata request "
           "sent by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC,
           note="server/metadata/ZkMetadataCache.scala from 3.0"),
    Format("0.8.2", "0.9", B0 + "deleted partition {tap} from metadata cache in response to UpdateMetadata request "
           "sent by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC),
    Format("0.10.0", "0.11", B0 + "deleted partition {tp} from metadata cache in response to UpdateMetadata request "
           "sent by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC),
    Format("1.0", "3.9", B1 + "Deleted partition {tp} from metadata cache in response to UpdateMetadata request sent "
           "by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC,
           note="server/metadata/ZkMetadataCache.scala from 3.0"),
    Format("2.6", "3.9", B1 + "Add {n} partitions and deleted {m} partitions from metadata cache in response to "
           "UpdateMetadata request sent by controller {c} epoch {e} with correlation id {cid}", UPDATE_METADATA, MC,
           note="server/metadata/ZkMetadataCache.scala from 3.0", level="INFO"),
    Format("0.8.2", "0.11", B0 + "received update metadata request with correlation id {cid} from an old controller "
           "{c} with epoch {e}. Latest known controller epoch is {latest}", STALE_UPDATE_METADATA, RM),
    Format("1.0", "3.9", B1 + "Received update metadata request with correlation id {cid} from an old controller {c} "
           "with epoch {e}. Latest known controller epoch is {latest}", STALE_UPDATE_METADATA, RM),
    # -- controller.log: the elections (KafkaController's own logger, logIdent "[Controller N]: " to 0.11) --------
    Format("0.8.2", "0.11", "[Controller {c}]: Controller {c} incremented epoch to {e}", CONTROLLER_ELECT, KC,
           logger=CONTROLLER),
    Format("1.0", "1.0", "[Controller id={c}] Incremented epoch to {e}", CONTROLLER_ELECT, KC, logger=CONTROLLER),
    Format("1.1", "2.3", "[Controller id={c}] Epoch incremented to {e}", CONTROLLER_ELECT, KC, logger=CONTROLLER),
    Format("2.4", "3.9", "[Controller id={c}] {c} successfully elected as the controller. Epoch incremented to {e} and "
           "epoch zk version is now {v}", CONTROLLER_ELECT, KC, logger=CONTROLLER),
    Format("0.8.2", "0.11", "[Controller {c}]: Broker {c} is ready to serve as the new controller with epoch {e}",
           CONTROLLER_ELECT, KC, logger=CONTROLLER),
    Format("1.0", "3.9", "[Controller id={c}] Ready to serve as the new controller with epoch {e}", CONTROLLER_ELECT,
           KC, logger=CONTROLLER),
    Format("0.9", "0.11", "[Controller {c}]: Broker {c} resigned as the controller", CONTROLLER_RESIGN, KC,
           logger=CONTROLLER),
    Format("1.0", "3.9", "[Controller id={c}] Resigned", CONTROLLER_RESIGN, KC, logger=CONTROLLER),
    # -- controller.log: the store written outside the state machines (KafkaController) ------------------------------
    # processAlterIsr (2.7-3.1) / processAlterPartition (3.2-3.9), KIP-497: the ISR a leader asked for, written
    # to the partition's node by the controller; the leader learns it from the response, the other brokers from
    # UpdateMetadata, so no state-change.log line carries it.
    Format("2.7", "3.2", "[Controller id={c}] ISR for partition {tp} updated to [{replicas}] and zkVersion updated to "
           "[{v}]", ISR_UPDATED, KC, logger=CONTROLLER),
    Format("3.3", "3.9", "[Controller id={c}] ISR for partition {tp} updated to {lai}.", ISR_UPDATED, KC,
           logger=CONTROLLER),
    # the ZooKeeper write of that ISR failed (WARN in 3.0); the exception on the next line says why
    Format("2.7", "3.9", "[Controller id={c}] Failed to update ISR for partition {tp}", FAILED_CHANGE, KC,
           logger=CONTROLLER, note="WARN in 3.0"),
    # onReplicaElection (2.4-3.9): an election the controller started itself (not the admin client's) that
    # failed; the exception on the next line says why (the state machine's own line, if any, is logged before)
    Format("2.4", "3.9", "[Controller id={c}] Error completing replica leader election ({api}) for partition {tp}",
           FAILED_CHANGE, KC, logger=CONTROLLER),
    Format("2.4", "3.9", "[Controller id={c}] Error completing replica leader election ({api}) for partition {tp} "
           "because controller has moved to another broker.", FAILED_CHANGE, KC, logger=CONTROLLER, level="INFO"),
    # updateReplicaAssignmentForPartition (2.4-3.9): the reassignment's assignment written to the topic's node
    Format("2.4", "3.9", "[Controller id={c}] Successfully updated assignment of partition {tp} to {assignment}",
           ASSIGNMENT_UPDATED, KC, logger=CONTROLLER),
    # ProducerIdManager.getNewProducerIdBlock, logging with the controller's logger from 3.0 (KIP-730)
    Format("3.0", "3.9", "[Controller id={c}] There is no producerId block yet (Zk path version {v}), creating the "
           "first block", SKIP, PIM, note=_PRODUCER_IDS, logger=CONTROLLER, level="DEBUG"),
    Format("3.0", "3.9", "[Controller id={c}] Acquired new producerId block {blob} by writing to Zk with path version "
           "{v}", SKIP, PIM, note=_PRODUCER_IDS, logger=CONTROLLER, level="INFO"),
    Format("3.0", "3.9", "[Controller id={c}] Read current producerId block {blob}, Zk path version {v}", SKIP, PIM,
           note=_PRODUCER_IDS, logger=CONTROLLER, level="DEBUG"),
    # updateLeaderEpoch (2.4-3.9), step A3 of a reassignment: the leader epoch bumped with leader and ISR kept;
    # the LeaderAndIsr requests that follow carry the new epoch, and state-change.log logs them
    Format("2.4", "3.9", "[Controller id={c}] Updating leader epoch for partition {tp}", SKIP, KC, note=_REASSIGNING,
           logger=CONTROLLER, level="DEBUG"),
    Format("2.4", "3.9", "[Controller id={c}] Updated leader epoch for partition {tp} to {le}{any}", SKIP, KC,
           note=_REASSIGNING, logger=CONTROLLER),
    # onPartitionReassignmentIsrChange (2.4-3.9): the reassignment resumes, its next steps logged on their own lines
    Format("2.4", "3.9", "[Controller id={c}] Target replicas {blob} have all caught up with the leader for "
           "reassigning partition {tp}", SKIP, KC, note=_REASSIGNING, logger=CONTROLLER),
    # processTopicUncleanLeaderElectionEnable (2.4-3.9): a topic's setting, which the elections it allows show
    Format("2.4", "3.9", "[Controller id={c}] Unclean leader election has been enabled for topic {node}", SKIP, KC,
           note=_UNCLEAN_SETTING, logger=CONTROLLER),
    Format("2.4", "3.9", "[Controller id={c}] Unclean leader election has been enabled by default", SKIP, KC,
           note=_UNCLEAN_SETTING, logger=CONTROLLER),
    # -- controller.log: OfflinePartitionLeaderSelector.selectLeader, called by
    # PartitionStateMachine.electLeaderForPartition, which writes the selection to ZooKeeper right after (a
    # conditional write; on a version conflict it reads the node again and selects again, logging a new line)
    Format("0.8.2", "1.0", "[OfflinePartitionLeaderSelector]: Selected new leader and ISR {lai} for offline partition "
           "{tap}", SELECTED_LEADER, PLS, logger=SELECTOR),
    Format("0.8.2", "1.0", "[OfflinePartitionLeaderSelector]: No broker in ISR is alive for {tap}. Pick the leader "
           "from the alive assigned replicas: {replicas}", SKIP, PLS, note=_SELECTION, logger=SELECTOR, level="DEBUG"),
    Format("0.8.2", "1.0", "[OfflinePartitionLeaderSelector]: No broker in ISR is alive for {tap}. Elect leader "
           "{leader} from live brokers {replicas}. There's potential data loss.", SKIP, PLS,
           note=_SELECTION + " (an unclean election)", logger=SELECTOR, level="WARN"),
    Format("0.8.2", "1.0", "[OfflinePartitionLeaderSelector]: Some broker in ISR is alive for {tap}. Select {leader} "
           "from ISR {replicas} to be the leader.", SKIP, PLS, note=_SELECTION, logger=SELECTOR, level="DEBUG"),
)


# controller.log statements of KafkaController (logger kafka.controller.KafkaController) that carry no
# partition state, by the first and last release line printing them (the phrase found in
# controller/KafkaController.scala at the tags of RELEASES); `{rest}` is what they list.
_HOUSEKEEPING: Final = "controller housekeeping (handlers, notifications, caches, scheduler); no partition state"
_LISTING: Final = "the cluster as the controller sees it, listed; no change"
_PREFERRED: Final = "preferred-leader bookkeeping; the elections it starts are logged in state-change.log"
_CREATION_CB: Final = "a topic's creation; its partitions' states and assignment are logged in state-change.log"
_MEMBERSHIP: Final = "broker membership; the changes it causes are logged in state-change.log"
_SHUTDOWN: Final = "controlled shutdown bookkeeping; the changes it causes are logged in state-change.log"
_LOST: Final = "a lost controller election: the winner logs its own in its controller.log"
_STALE_ALTER: Final = ("an AlterPartition of an unknown broker or an earlier registration of it (KIP-380 broker "
                       "epoch), refused; nothing written")
_DELETION: Final = "a topic deletion's start; its partitions' and replicas' states are logged in state-change.log"
_REFUSED_ALTER: Final = ("an AlterPartition refused (a replica not live in the new ISR, KIP-841; or a leader recovery "
                         "state it may not take); nothing written")
_CONTROLLER_CHATTER: Final[tuple[tuple[str, str, str, str], ...]] = (
    ("1.1", "3.9", "Registering handlers", _HOUSEKEEPING),
    ("1.1", "3.9", "Deleting log dir event notifications", _HOUSEKEEPING),
    ("1.1", "3.9", "Deleting isr change notifications", _HOUSEKEEPING),
    ("1.1", "3.9", "Initializing controller context", _HOUSEKEEPING),
    ("2.2", "3.9", "Initialized broker epochs cache: {rest}", _HOUSEKEEPING),
    ("1.1", "3.9", "Fetching topic deletions in progress", _HOUSEKEEPING),
    ("1.1", "3.9", "Initializing topic deletion manager", _HOUSEKEEPING),
    ("1.1", "3.9", "Sending update metadata request", _HOUSEKEEPING),
    ("1.0", "3.9", "Starting the controller scheduler", _HOUSEKEEPING),
    ("1.1", "3.9", "Register BrokerModifications handler for {rest}", _HOUSEKEEPING),
    ("2.7", "3.9", "Creating FeatureZNode at path: {rest}", _HOUSEKEEPING),
    ("1.0", "3.9", "Resigning", "the start of the resignation logged as 'Resigned'"),
    ("0.8.2", "3.9", "Currently active brokers in the cluster: {rest}", _LISTING),
    ("0.8.2", "3.9", "Currently shutting brokers in the cluster: {rest}", _LISTING),
    ("0.8.2", "3.9", "Current list of topics in the cluster: {rest}", _LISTING),
    ("0.8.2", "3.9", "List of topics to be deleted: {rest}", _LISTING),
    ("0.8.2", "3.9", "List of topics ineligible for deletion: {rest}", _LISTING),
    ("0.8.2", "3.9", "Partitions undergoing preferred replica election: {rest}", _PREFERRED),
    ("0.8.2", "3.9", "Partitions that completed preferred replica election: {rest}", _PREFERRED),
    ("0.11", "3.9", "Skipping preferred replica election for partitions due to topic deletion: {rest}", _PREFERRED),
    ("0.8.2", "3.9", "Resuming preferred replica election for partitions: {rest}", _PREFERRED),
    ("2.4", "3.9", "Starting replica leader election ({rest}", _PREFERRED),
    ("0.8.2", "2.3", "Starting preferred replica leader election for partitions {rest}", _PREFERRED),
    ("0.11", "3.9", "Starting topic deletion for topics {rest}", _DELETION),
    ("2.3", "3.9", "Processing automatic preferred replica leader election", _PREFERRED),
    ("0.11", "3.9", "Checking need to trigger auto leader balancing", _PREFERRED),
    ("1.1", "3.9", "Topics not in preferred replica for broker {rest}", _PREFERRED),
    ("0.11", "3.9", "Leader imbalance ratio for broker {rest}", _PREFERRED),
    ("0.11", "2.4", "Preferred replicas by broker {rest}", _PREFERRED),
    ("0.8.2", "3.9", "New partition creation callback for {rest}", _CREATION_CB),
    ("0.8.2", "1.0", "New topic creation callback for {rest}", _CREATION_CB),
    ("0.8.2", "3.9", "New broker startup callback for {rest}", _MEMBERSHIP),
    ("0.9", "1.0", "De-registering IsrChangeNotificationListener", _HOUSEKEEPING),
    ("1.0", "1.0", "De-registering logDirEventNotificationListener", _HOUSEKEEPING),
    ("0.11", "3.9", "New topics: [{rest}", _CREATION_CB),
    ("0.11", "3.9", "Newly added brokers: {rest}", _MEMBERSHIP),
    ("0.8.2", "3.9", "Broker failure callback for {rest}", _MEMBERSHIP),
    ("0.8.2", "3.9", "Shutting down broker {rest}", _SHUTDOWN),
    ("0.8.2", "3.9", "All shutting down brokers: {rest}", _SHUTDOWN),
    ("0.8.2", "3.9", "Live brokers: {rest}", _SHUTDOWN),
    ("0.8.2", "3.9", "Removed {rest} from list of shutting down brokers.", _SHUTDOWN),
    ("0.11", "3.9", "Broker {n} has been elected as the controller, so stopping the election process.", _LOST),
    ("0.11", "3.9", "Broker {n} was elected as controller instead of broker {m}", _LOST),
    ("2.2", "3.9", "Updated broker epochs cache: {rest}", _HOUSEKEEPING),
    ("1.1", "3.9", "Unregister BrokerModifications handler for {rest}", _HOUSEKEEPING),
    ("0.8.2", "3.9", "All leaders = {rest}", _LISTING),
    ("0.8.2", "3.9", "Partition {tp} completed preferred replica leader election. New leader is {n}", _PREFERRED),
    ("2.4", "3.9", "Waiting for any successful result for election type {rest}", _PREFERRED),
    ("2.0", "3.9", "Partition {tp} failed to complete preferred replica leader election to {n}. Leader is still {m}",
     _PREFERRED),
    ("2.7", "3.9", "Updating ISRs for partitions: {rest}", "the start of an ISR update; each partition's is logged "
                                                           "as 'ISR for partition ... updated to'"),
    ("2.7", "3.1", "Ignoring AlterIsr due to unknown broker {n}", _STALE_ALTER),
    ("2.7", "3.1", "Ignoring AlterIsr due to stale broker epoch {rest}", _STALE_ALTER),
    ("3.2", "3.9", "Ignoring AlterPartition due to unknown broker {n}", _STALE_ALTER),
    ("3.2", "3.9", "Ignoring AlterPartition due to stale broker epoch {rest}", _STALE_ALTER),
    ("3.3", "3.9", "Rejecting AlterPartition request from node {n} for {tp} because it specified ineligible replicas "
                   "{rest}", _REFUSED_ALTER),
    ("3.2", "3.9", "Rejecting AlterPartition from node {n} for {tp} because leader is recovering and ISR is greater "
                   "than 1: {rest}", _REFUSED_ALTER),
    ("3.2", "3.9", "Rejecting AlterPartition from node {n} for {tp} because the leader recovery state cannot change "
                   "from RECOVERED to RECOVERING: {rest}", _REFUSED_ALTER),
    ("2.4", "3.9", "Updating assignment of partition {tp} from {rest}", "the start of an assignment update logged as "
                                                                       "'Successfully updated assignment'"),
    ("1.1", "3.9", "Leader {n} for partition {tp} being reassigned, is not in the new list of replicas {replicas}. "
                   "Re-electing leader", _REASSIGNING),
    ("1.1", "3.9", "Leader {n} for partition {tp} being reassigned, is already in the new list of replicas "
                   "{replicas} and is alive", _REASSIGNING),
    ("1.1", "3.9", "Leader {n} for partition {tp} being reassigned, is already in the new list of replicas "
                   "{replicas} but is dead", _REASSIGNING),
    ("0.11", "3.9", "Delete topics listener fired for topics {rest}", _DELETION),
    ("2.3", "3.9", "Delete topic callback invoked on StopReplica response received from broker {rest}",
     "a StopReplica response of a topic deletion; the replica states it leads to are logged in state-change.log"),
    ("2.3", "3.9", "Controller moved to another broker when processing {rest}",
     "an event dropped by a controller that lost /controller; its resignation is logged as 'Resigned'"),
)
# KafkaController's logIdent: "[Controller N]: " to 0.11, "[Controller id=N] " from 1.0.
_CONTROLLER_IDENTS: Final = (("[Controller {c}]: ", "0.8.2", "0.11"), ("[Controller id={c}] ", "1.0", "3.9"))


def _chatter() -> tuple[Format, ...]:
    rows = []
    for first, last, phrase, note in _CONTROLLER_CHATTER:
        for ident, lo, hi in _CONTROLLER_IDENTS:
            start, end = max(LINES.index(first), LINES.index(lo)), min(LINES.index(last), LINES.index(hi))
            if start <= end:
                rows.append(Format(LINES[start], LINES[end], ident + phrase, SKIP, KC, note=note, logger=CONTROLLER))
    return tuple(rows)


FORMATS = FORMATS + _chatter()


@dataclass(frozen=True)
class Compiled:
    format: Format
    regex: re.Pattern[str]


# Placeholders whose values close with their own bracket (`[1,3]`, mkString("[", ",", "]")): the space Kafka
# prints after one separates nothing the bracket has not already closed, so a line whose copy lost that
# space (`addingReplicas []removingReplicas []`) reads to the same values and is accepted.
_BRACKETED: Final = frozenset(name for name, regex in PLACEHOLDERS.items() if regex.endswith(r"\]"))


def _compile(template: str, whole: bool = True) -> re.Pattern[str]:
    """The template as a regular expression anchored at the start and (`whole`) the end; a placeholder seen twice
    must repeat its value."""
    out: list[str] = []
    seen: set[str] = set()
    position = 0
    previous = ""
    for match in re.finditer(r"\{(\w+)\}", template):
        out.append(_literal(template[position:match.start()], previous))
        name = previous = match[1]
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>{PLACEHOLDERS[name]})")
        seen.add(name)
        position = match.end()
    out.append(_literal(template[position:], previous))
    return re.compile("^" + "".join(out) + ("$" if whole else ""))


def _literal(text: str, after: str) -> str:
    if after in _BRACKETED and text.startswith(" "):
        return " ?" + re.escape(text[1:])
    return re.escape(text)


COMPILED: Final[tuple[Compiled, ...]] = tuple(Compiled(f, _compile(f.template)) for f in FORMATS)

# What statements begin with: the logger's ident (StateChangeLogger's prefixes, KafkaController's logIdent, the
# selector's), before the statement's own words. The parser dispatches a message on them (parser.py).
IDENTS: Final = (C0, C1, CN, B0, B1, *(ident for ident, _, _ in _CONTROLLER_IDENTS),
                  "[OfflinePartitionLeaderSelector]: ")


def prefix_regex(template: str) -> re.Pattern[str]:
    """What a message beginning as the template (an ident) begins with."""
    return _compile(template, whole=False)


def rows_per_line() -> dict[str, int]:
    """How many statements of the table each release line prints."""
    return {line: sum(1 for f in FORMATS if f.covers(line)) for line in LINES}


def placeholders(template: str) -> list[str]:
    return re.findall(r"\{(\w+)\}", template)
