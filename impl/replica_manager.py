"""The broker side: a broker's replicas, driven by controller requests, follower fetches and its clock.

`ReplicaManager.handle` takes one delivered message and returns the messages it sends; the other entry
points are the broker's own periodic work. Nothing here reads a clock or draws a random number: time
arrives as the `now` argument, so the same inputs always give the same state and output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from kcm.impl import zk_paths
from kcm.impl.design import Design
from kcm.impl.messages import (
    CONTROLLER_REQUESTS,
    FENCED_LEADER_EPOCH,
    NONE_ERROR,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER,
    OFFSET_OUT_OF_RANGE,
    STALE_BROKER_EPOCH,
    STALE_CONTROLLER_EPOCH,
    UNDEFINED_EPOCH,
    UNKNOWN_LEADER_EPOCH,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControllerRequest,
    Envelope,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    Message,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    PartitionLeaderState,
    Record,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
)
from kcm.impl.replica_log import latest_epoch
from kcm.impl.store import BadVersionError, CoordinationStore, NoNodeError
from kcm.spec.vocabulary import NO_LEADER

LEADER: Final = "leader"
FOLLOWER: Final = "follower"
MAX_FETCH_RECORDS: Final = 4
REQUEST_TIMEOUT_TICKS: Final = 3
CONTROLLED_SHUTDOWN_ATTEMPTS: Final = 3


@dataclass(slots=True)
class Replica:
    """What one broker holds of one partition. The log and the HW checkpoint survive a crash."""

    partition: str
    log: list[Record] = field(default_factory=list)
    hw: int = 0
    hw_checkpoint: int = 0
    role: str | None = None
    leader_epoch: int | None = None
    leader_id: int = NO_LEADER
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    partition_version: int = -1
    partition_controller_epoch: int = 0
    epoch_start_offset: int = 0
    follower_leo: dict[int, int] = field(default_factory=dict)
    last_caught_up: dict[int, int] = field(default_factory=dict)
    truncating: bool = False
    inflight_since: int | None = None
    log_version: int = 0  # bumped on every change of the log, so observers need not compare logs

    def forget_volatile_state(self) -> None:
        self.role = None
        self.leader_epoch = None
        self.leader_id = NO_LEADER
        self.isr = ()
        self.follower_leo = {}
        self.last_caught_up = {}
        self.truncating = False
        self.inflight_since = None
        self.hw = min(self.hw_checkpoint, len(self.log))


class ReplicaManager:
    def __init__(self, broker_id: int, design: Design, store: CoordinationStore, session: int) -> None:
        self.broker_id = broker_id
        self.design = design
        self.store = store
        self.session = session
        self.alive = True
        self.controller_epoch = 0
        self.metadata_controller = NO_LEADER
        self.replicas: dict[str, Replica] = {}
        self.dirty: set[str] = set()
        self.isr_notifications = 0
        self.shutdown_complete = False
        self.shutdown_attempts = 0

    # -- message handling ----------------------------------------------------------------------------

    def handle(self, src: int, message: Message, now: int, broker_epoch: int) -> tuple[list[Envelope], bool]:
        """Handle one delivered message, `broker_epoch` being the broker's own (its latest registration);
        returns the replies and whether the message took effect."""
        if isinstance(message, CONTROLLER_REQUESTS) and self._stale_broker_epoch(message, broker_epoch):
            return self._refuse(src, message), False
        if isinstance(message, LeaderAndIsrRequest):
            return [], self._on_leader_and_isr(message, now)
        if isinstance(message, StopReplicaRequest):
            return self._on_stop_replica(src, message)
        if isinstance(message, UpdateMetadataRequest):
            return [], self._accept_controller_epoch(message.controller_epoch, message.controller_id)
        if isinstance(message, FetchRequest):
            return self._on_fetch(src, message, now), True
        if isinstance(message, FetchResponse):
            return [], self._on_fetch_response(message)
        if isinstance(message, OffsetsForLeaderEpochRequest):
            return self._on_offsets_for_leader_epoch(src, message), True
        if isinstance(message, OffsetsForLeaderEpochResponse):
            return [], self._on_offsets_for_leader_epoch_response(message)
        if isinstance(message, ControlledShutdownResponse):
            self._on_controlled_shutdown_response(message)
            return [], True
        raise TypeError(f"broker {self.broker_id} cannot handle {type(message).__name__}")

    def _stale_broker_epoch(self, request: ControllerRequest, broker_epoch: int) -> bool:
        """KIP-380: a request addressed to an earlier registration of this broker is stale (2.2.0
        KafkaApis.scala isBrokerEpochStale). Before 2.2 nothing is."""
        return self.design.broker_epoch_fencing() and request.broker_epoch < broker_epoch

    def _refuse(self, src: int, request: ControllerRequest) -> list[Envelope]:
        """A stale request is refused whole: only a StopReplica is answered that the controller reads
        (2.2.0 KafkaApis.scala handleStopReplicaRequest answers STALE_BROKER_EPOCH)."""
        if not isinstance(request, StopReplicaRequest):
            return []
        reply = StopReplicaResponse(self.broker_id, request.controller_epoch, request.partitions, request.delete,
                                    STALE_BROKER_EPOCH)
        return [Envelope(self.broker_id, src, reply)]

    def _on_controlled_shutdown_response(self, response: ControlledShutdownResponse) -> None:
        """Done when nothing leads here any more; otherwise the broker asks again later."""
        self.shutdown_complete = not response.partitions_remaining

    def request_controlled_shutdown(self, controller: int) -> list[Envelope]:
        """Ask the controller to move leadership away; after the last attempt the broker gives up and
        shuts down anyway (an unclean shutdown, as Kafka's broker does)."""
        self.shutdown_attempts += 1
        if self.shutdown_attempts > CONTROLLED_SHUTDOWN_ATTEMPTS:
            self.shutdown_complete = True
            return []
        if controller == NO_LEADER:
            return []
        return [Envelope(self.broker_id, controller, ControlledShutdownRequest(self.broker_id, self.session))]

    @property
    def shutting_down(self) -> bool:
        return self.shutdown_attempts > 0 and not self.shutdown_complete

    def _accept_controller_epoch(self, epoch: int, controller_id: int) -> bool:
        """The controller-epoch fence: requests from an epoch older than one seen are rejected whole."""
        if self.design.refuses_controller_epoch(epoch, self.controller_epoch):
            return False
        self.controller_epoch = max(self.controller_epoch, epoch)
        self.metadata_controller = controller_id
        return True

    def _on_leader_and_isr(self, request: LeaderAndIsrRequest, now: int) -> bool:
        if not self._accept_controller_epoch(request.controller_epoch, request.controller_id):
            return False
        for state in request.partitions:
            if self.broker_id not in state.replicas or state.leader == NO_LEADER:
                # Kafka's makeFollowers leaves a partition whose new leader is unavailable as it is: no
                # new epoch, and above all no truncation towards a leader that does not exist.
                continue
            replica = self.replicas.get(state.partition)
            if replica is None:
                replica = self.replicas[state.partition] = Replica(state.partition)
            elif self._is_stale(replica, state.leader_epoch):
                continue
            if state.leader == self.broker_id:
                self._become_leader(replica, state, now)
            else:
                self._become_follower(replica, state)
            self.dirty.add(state.partition)
        return True

    def _is_stale(self, replica: Replica, leader_epoch: int) -> bool:
        return self.design.refuses_leader_epoch(leader_epoch, replica.leader_epoch)

    def _adopt(self, replica: Replica, state: PartitionLeaderState) -> None:
        replica.leader_epoch = state.leader_epoch
        replica.leader_id = state.leader
        replica.isr = state.isr
        replica.replicas = state.replicas
        replica.partition_version = state.partition_version
        replica.partition_controller_epoch = state.controller_epoch
        replica.inflight_since = None

    def _become_leader(self, replica: Replica, state: PartitionLeaderState, now: int) -> None:
        self._adopt(replica, state)
        replica.role = LEADER
        replica.truncating = False
        replica.epoch_start_offset = len(replica.log)
        followers = [r for r in state.replicas if r != self.broker_id]
        replica.follower_leo = dict.fromkeys(followers, -1)
        replica.last_caught_up = dict.fromkeys(followers, now)
        self._maybe_advance_hw(replica)

    def _become_follower(self, replica: Replica, state: PartitionLeaderState) -> None:
        self._adopt(replica, state)
        replica.role = FOLLOWER
        replica.follower_leo = {}
        replica.last_caught_up = {}
        if self.design.truncate_on_become_follower():
            self._truncate(replica, replica.hw)
            replica.truncating = False
        else:
            replica.truncating = True

    def _on_stop_replica(self, src: int, request: StopReplicaRequest) -> tuple[list[Envelope], bool]:
        accepted = self._accept_controller_epoch(request.controller_epoch, request.controller_id)
        if accepted:
            for partition in request.partitions:
                self._stop(partition, request.delete)
        reply = StopReplicaResponse(
            self.broker_id,
            request.controller_epoch,
            request.partitions,
            request.delete,
            NONE_ERROR if accepted else STALE_CONTROLLER_EPOCH,
        )
        return [Envelope(self.broker_id, src, reply)], accepted

    def _stop(self, partition: str, delete: bool) -> None:
        replica = self.replicas.get(partition)
        if replica is None:
            return
        self.dirty.add(partition)
        if delete:
            del self.replicas[partition]
            return
        replica.role = None
        replica.truncating = False
        replica.inflight_since = None

    # -- the leader side -------------------------------------------------------------------------------

    def _fence_error(self, replica: Replica | None, current_leader_epoch: int, fenced: bool) -> str:
        """KIP-320: a request naming another leader epoch than the leader's own is refused."""
        if replica is None or replica.role != LEADER or replica.leader_epoch is None:
            return NOT_LEADER
        if fenced and current_leader_epoch != replica.leader_epoch:
            return FENCED_LEADER_EPOCH if current_leader_epoch < replica.leader_epoch else UNKNOWN_LEADER_EPOCH
        return NONE_ERROR

    def _on_fetch(self, src: int, request: FetchRequest, now: int) -> list[Envelope]:
        replica = self.replicas.get(request.partition)
        error = self._fence_error(replica, request.current_leader_epoch, self.design.fence_current_leader_epoch())
        if replica is not None and not error and request.fetch_offset > len(replica.log):
            error = OFFSET_OUT_OF_RANGE
        if replica is None or error:
            end = len(replica.log) if replica is not None else 0
            reply = FetchResponse(request.partition, request.fetch_offset, request.current_leader_epoch, error,
                                  (), 0, end)
            return [Envelope(self.broker_id, src, reply)]
        self._record_follower_position(replica, request.replica_id, request.fetch_offset, now)
        records = tuple(replica.log[request.fetch_offset : request.fetch_offset + MAX_FETCH_RECORDS])
        reply = FetchResponse(request.partition, request.fetch_offset, request.current_leader_epoch, NONE_ERROR,
                              records, replica.hw, len(replica.log))
        return [Envelope(self.broker_id, src, reply)]

    def _record_follower_position(self, replica: Replica, follower: int, offset: int, now: int) -> None:
        if follower not in replica.follower_leo:
            return
        replica.follower_leo[follower] = offset
        if offset >= len(replica.log):
            replica.last_caught_up[follower] = now
        if follower not in replica.isr and self._in_sync(replica, offset):
            self._write_isr(replica, (*replica.isr, follower))
        self._maybe_advance_hw(replica)
        self.dirty.add(replica.partition)

    def _in_sync(self, replica: Replica, offset: int) -> bool:
        return self.design.in_sync_for_expansion(offset, replica.hw, replica.epoch_start_offset)

    def _maybe_advance_hw(self, replica: Replica) -> None:
        ends = [replica.follower_leo.get(r, -1) for r in replica.isr if r != self.broker_id]
        candidate = self.design.high_watermark(len(replica.log), ends)
        if candidate > replica.hw:
            replica.hw = candidate
            self.dirty.add(replica.partition)

    def _write_isr(self, replica: Replica, isr: tuple[int, ...]) -> bool:
        """Compare-and-set of the partition's state node; a stale version means the controller moved on."""
        assert replica.leader_epoch is not None
        data = zk_paths.leader_and_isr_data(
            self.broker_id, replica.leader_epoch, isr, replica.partition_controller_epoch
        )
        path = zk_paths.partition_state_path(replica.partition)
        try:
            stat = self.store.set(self.session, path, data, replica.partition_version)
        except (BadVersionError, NoNodeError):
            return False
        replica.isr = isr
        replica.partition_version = stat.version
        self.isr_notifications += 1
        note = f"{zk_paths.ISR_CHANGES}/isr_change_{self.broker_id}_{self.isr_notifications:010d}"
        self.store.create(self.session, note, [replica.partition])
        self.dirty.add(replica.partition)
        return True

    def lagging_followers(self, partition: str, now: int) -> tuple[int, ...]:
        replica = self.replicas.get(partition)
        if replica is None or replica.role != LEADER:
            return ()
        return tuple(
            r for r in replica.isr
            if r != self.broker_id and self.design.lagging(now, replica.last_caught_up.get(r, now))
        )

    def shrink_isr(self, partition: str, now: int) -> tuple[int, ...]:
        """Drop followers that have not caught up for too long; returns those removed (if written)."""
        laggards = self.lagging_followers(partition, now)
        replica = self.replicas[partition]
        if not laggards or not self._write_isr(replica, tuple(r for r in replica.isr if r not in laggards)):
            return ()
        self._maybe_advance_hw(replica)
        return laggards

    def _on_offsets_for_leader_epoch(self, src: int, request: OffsetsForLeaderEpochRequest) -> list[Envelope]:
        replica = self.replicas.get(request.partition)
        error = self._fence_error(replica, request.current_leader_epoch, self.design.fence_current_leader_epoch())
        epoch, end = UNDEFINED_EPOCH, -1
        if replica is not None and not error:
            assert replica.leader_epoch is not None
            epoch, end = self.design.epoch_end_answer(replica.log, request.leader_epoch, replica.leader_epoch)
        reply = OffsetsForLeaderEpochResponse(request.partition, request.current_leader_epoch, error, epoch, end)
        return [Envelope(self.broker_id, src, reply)]

    # -- the follower side ------------------------------------------------------------------------------

    def wants_to_fetch(self, partition: str) -> bool:
        replica = self.replicas.get(partition)
        return (
            replica is not None
            and replica.role == FOLLOWER
            and replica.leader_id != NO_LEADER
            and replica.inflight_since is None
        )

    def fetchable(self) -> list[str]:
        """The partitions `wants_to_fetch` holds for, in the order of `replicas`; its test is inlined
        because a call per replica would double the cost of the simulator's scan before every fetch."""
        return [
            p for p, r in self.replicas.items()
            if r.role == FOLLOWER and r.leader_id != NO_LEADER and r.inflight_since is None
        ]

    def send_fetch(self, partition: str, now: int) -> list[Envelope]:
        replica = self.replicas[partition]
        assert replica.leader_epoch is not None
        if replica.truncating and not replica.log:
            replica.truncating = False
            self.dirty.add(partition)
        replica.inflight_since = now
        message: Message
        if replica.truncating:
            message = OffsetsForLeaderEpochRequest(
                partition, self.broker_id, latest_epoch(replica.log), replica.leader_epoch
            )
        else:
            message = FetchRequest(partition, self.broker_id, len(replica.log), replica.leader_epoch)
        return [Envelope(self.broker_id, replica.leader_id, message)]

    def _current_follower(self, partition: str, leader_epoch: int) -> Replica | None:
        replica = self.replicas.get(partition)
        if replica is None or replica.role != FOLLOWER or replica.leader_epoch != leader_epoch:
            return None
        replica.inflight_since = None
        return replica

    def _on_fetch_response(self, response: FetchResponse) -> bool:
        replica = self._current_follower(response.partition, response.current_leader_epoch)
        if replica is None or replica.truncating:
            return False
        if response.error == OFFSET_OUT_OF_RANGE and len(replica.log) > response.leader_end_offset:
            self._truncate(replica, response.leader_end_offset)
            return True
        if response.error or response.fetch_offset != len(replica.log):
            return False
        replica.log.extend(response.records)
        replica.log_version += 1
        replica.hw = min(response.high_watermark, len(replica.log))
        self.dirty.add(replica.partition)
        return True

    def _on_offsets_for_leader_epoch_response(self, response: OffsetsForLeaderEpochResponse) -> bool:
        replica = self._current_follower(response.partition, response.current_leader_epoch)
        if replica is None or not replica.truncating or response.error:
            return False
        if response.leader_epoch == UNDEFINED_EPOCH:
            offset = replica.hw
        else:
            offset = self.design.truncation_offset(replica.log, response.leader_epoch, response.end_offset)
        self._truncate(replica, offset)
        replica.truncating = False
        return True

    def _truncate(self, replica: Replica, offset: int) -> None:
        if offset < len(replica.log):
            del replica.log[offset:]
            replica.log_version += 1
        replica.hw = min(replica.hw, len(replica.log))
        self.dirty.add(replica.partition)

    def expire_requests(self, now: int) -> None:
        """Requests lost on the network are retried after a timeout."""
        for replica in self.replicas.values():
            if replica.inflight_since is not None and now - replica.inflight_since >= REQUEST_TIMEOUT_TICKS:
                replica.inflight_since = None

    # -- clients and the broker's own lifecycle -----------------------------------------------------------

    def produce(self, partition: str, record_id: int, acks: int) -> str:
        replica = self.replicas.get(partition)
        if replica is None or replica.role != LEADER or replica.leader_epoch is None:
            return NOT_LEADER
        if not self.design.accepts_write(acks, len(replica.isr)):
            return NOT_ENOUGH_REPLICAS
        replica.log.append((replica.leader_epoch, record_id))
        replica.log_version += 1
        self._maybe_advance_hw(replica)
        self.dirty.add(partition)
        return NONE_ERROR

    def checkpoint_hw(self) -> None:
        for replica in self.replicas.values():
            if replica.hw_checkpoint != replica.hw:
                replica.hw_checkpoint = replica.hw
                self.dirty.add(replica.partition)

    def crash(self) -> None:
        """Everything in memory is lost; the logs and HW checkpoints are on disk."""
        self.alive = False
        self.controller_epoch = 0
        self.metadata_controller = NO_LEADER
        self.shutdown_complete = False
        self.shutdown_attempts = 0
        for replica in self.replicas.values():
            replica.forget_volatile_state()
        self.dirty.update(self.replicas)

    def restart(self, session: int) -> None:
        """Log recovery: every log is read back; the HW is the checkpoint, capped by the log end."""
        self.alive = True
        self.session = session
        for replica in self.replicas.values():
            replica.hw = min(replica.hw_checkpoint, len(replica.log))
        self.dirty.update(self.replicas)
