"""The controller of one broker: wins or loses the `/controller` race, and while active takes events off
its queue one at a time, driving the partition and replica state machines.

`Controller.process` is the pure step: one queued event in, the store updated through the port, the
requests to send out. A write refused because another controller was elected makes it resign.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from kcm.impl import zk_paths
from kcm.impl.controller_context import ControllerContext
from kcm.impl.controller_store import ControllerMovedError, ControllerStore, leader_isr_of
from kcm.impl.design import Design
from kcm.impl.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    Envelope,
    StopReplicaResponse,
)
from kcm.impl.partition_state_machine import PartitionStateMachine
from kcm.impl.replica_state_machine import ReplicaStateMachine
from kcm.impl.request_batch import RequestBatch
from kcm.impl.states import P, R
from kcm.impl.store import CoordinationStore, Create, MultiError, NodeExistsError, NoNodeError, SetData
from kcm.impl.topic_deletion import TopicDeletionManager
from kcm.spec.vocabulary import NO_LEADER

IMBALANCE_RATIO: Final = 0.1

# Queued event kind -> the action a trace records for processing it.
EVENT_ACTIONS: Final[dict[str, str]] = {
    "ControllerChange": "ControllerElect",
    "Reregister": "BrokerReregister",
    "BrokerChange": "BrokerChange",
    "TopicChange": "TopicChange",
    "PartitionModifications": "PartitionModifications",
    "TopicDeletion": "TopicDeletion",
    "PartitionReassignment": "PartitionReassignment",
    "ReassignmentIsrChange": "ReassignmentIsrChange",
    "PreferredReplicaElection": "PreferredReplicaElection",
    "AutoPreferredReplicaElection": "AutoPreferredReplicaElection",
    "IsrChangeNotification": "IsrChangeNotification",
    "ControlledShutdown": "ControlledShutdownRequest",
    "StopReplicaResponse": "StopReplicaResponse",
}
BROKER_EVENTS: Final = frozenset({"ControllerChange", "Reregister"})


@dataclass(frozen=True, slots=True)
class ControllerEvent:
    kind: str
    key: str = ""
    payload: Any = None  # Any, not object: see kcm.impl.store.NodeData


@dataclass(slots=True)
class StepResult:
    action: str
    args: dict[str, Any] = field(default_factory=dict)
    out: list[Envelope] = field(default_factory=list)


class Controller:
    def __init__(self, broker_id: int, design: Design, store: CoordinationStore) -> None:
        self.broker_id = broker_id
        self.design = design
        self.store = store
        self.zk = ControllerStore(store, design)
        self.queue: deque[ControllerEvent] = deque()
        self.ctx: ControllerContext | None = None
        self.resigned_partitions: set[str] = set()
        self.broker_epoch = 0  # set when the broker registers

    @property
    def session(self) -> int:
        return self.zk.session

    @session.setter
    def session(self, value: int) -> None:
        self.zk.session = value

    @property
    def epoch(self) -> int:
        return self.ctx.epoch if self.ctx is not None else 0

    # -- the queue -----------------------------------------------------------------------------------

    def enqueue(self, event: ControllerEvent) -> None:
        if event.kind not in BROKER_EVENTS and self.ctx is None:
            return
        if event.payload is None and event in self.queue:
            return
        self.queue.append(event)

    def on_watch(self, path: str) -> None:
        """Turns a fired store watch into the controller event Kafka registers it for."""
        if path == zk_paths.CONTROLLER:
            self.enqueue(ControllerEvent("ControllerChange"))
            return
        event = _event_for_path(path)
        if event is not None:
            self.enqueue(event)

    def reset(self) -> None:
        """The broker crashed: the queue and any controller role are gone."""
        self.queue.clear()
        self._resign()

    def process(self, now: int) -> StepResult:
        event = self.queue.popleft()
        result = StepResult(EVENT_ACTIONS[event.kind])
        if event.kind not in BROKER_EVENTS and self.ctx is None:
            return result
        ctx = self.ctx
        batch = RequestBatch(self.broker_id)
        try:
            self._dispatch(event, batch, result)
        except ControllerMovedError:
            result.args["resigned"] = True
            self._resign()
            self._drain_writes(result)
            return result
        if self.ctx is not None:
            # The event's requests go first: a reply (to a controlled shutdown) must not overtake them.
            result.out[:0] = batch.flush(self.ctx)
        if ctx is not None and self.ctx is ctx:
            self._drain_transitions(ctx, result)
        self._drain_writes(result)
        return result

    def _drain_writes(self, result: StepResult) -> None:
        """The store writes that succeeded, in order: a trace shows every step of a procedure."""
        if self.zk.journal:
            result.args["writes"] = self.zk.journal
            self.zk.journal = []

    def _drain_transitions(self, ctx: ControllerContext, result: StepResult) -> None:
        if ctx.transitions:
            result.args["transitions"] = ctx.transitions
            ctx.transitions = []
        if ctx.invalid_transitions:
            result.args["invalid_transitions"] = ctx.invalid_transitions
            ctx.invalid_transitions = []

    def _context(self) -> ControllerContext:
        assert self.ctx is not None, "only an active controller handles this event"
        return self.ctx

    def _machines(
        self, batch: RequestBatch
    ) -> tuple[ControllerContext, PartitionStateMachine, ReplicaStateMachine, TopicDeletionManager]:
        ctx = self.ctx
        assert ctx is not None
        psm = PartitionStateMachine(ctx, self.zk, batch, self.design)
        rsm = ReplicaStateMachine(ctx, self.zk, batch)
        return ctx, psm, rsm, TopicDeletionManager(ctx, self.zk, batch, psm, rsm)

    def _dispatch(self, event: ControllerEvent, batch: RequestBatch, result: StepResult) -> None:
        kind = event.kind
        if kind == "ControllerChange":
            self._on_controller_change(batch, result)
        elif kind == "Reregister":
            self._on_reregister(batch, result)
        elif kind == "BrokerChange":
            self._on_broker_change(batch, result)
        elif kind == "TopicChange":
            self._on_topic_change(batch, result)
        elif kind == "PartitionModifications":
            self._on_partition_modifications(event.key, batch)
        elif kind == "TopicDeletion":
            self._on_topic_deletion(batch)
        elif kind == "PartitionReassignment":
            self._on_reassignment_request(batch)
        elif kind == "ReassignmentIsrChange":
            self._on_reassignment_isr_change(event.key, batch)
        elif kind == "PreferredReplicaElection":
            self._on_preferred_election_request(batch)
        elif kind == "AutoPreferredReplicaElection":
            self._on_auto_rebalance(batch, result)
        elif kind == "IsrChangeNotification":
            self._on_isr_change_notification(batch)
        elif kind == "ControlledShutdown":
            self._on_controlled_shutdown(event, batch, result)
        elif kind == "StopReplicaResponse":
            self._on_stop_replica_response(event, batch)

    # -- election, failover and resignation --------------------------------------------------------

    def _on_controller_change(self, batch: RequestBatch, result: StepResult) -> None:
        holder = self._holder()
        if self.ctx is not None and holder != self.broker_id:
            result.args["resigned"] = True
            self._resign()
        if holder == NO_LEADER:
            self._try_elect(batch, result)

    def _on_reregister(self, batch: RequestBatch, result: StepResult) -> None:
        """After a session expiry: register the broker again, then act as on a controller change (a
        controller re-elected under the new session keeps its role; a deposed one resigns)."""
        with contextlib.suppress(NodeExistsError):
            self.register()
        self._on_controller_change(batch, result)

    def register(self) -> None:
        """Registers the broker under its session, which becomes its broker epoch (Kafka keeps it in the
        controller: 2.2.0 KafkaController.scala `_brokerEpoch = zkClient.registerBroker(brokerInfo)`, the
        czxid of /brokers/ids/N)."""
        self.store.create(self.session, zk_paths.broker_path(self.broker_id), {"epoch": self.session},
                          ephemeral=True)
        self.broker_epoch = self.session

    def _holder(self) -> int:
        """Who holds `/controller`; also leaves a watch on it, as every broker keeps one."""
        if self.store.exists(zk_paths.CONTROLLER, watch=self.session) is None:
            return NO_LEADER
        try:
            data, _ = self.store.get(zk_paths.CONTROLLER)
        except NoNodeError:
            return NO_LEADER
        return int(data["brokerid"])

    def _try_elect(self, batch: RequestBatch, result: StepResult) -> None:
        data, stat = self.store.get(zk_paths.CONTROLLER_EPOCH)
        epoch = int(data) + 1
        try:
            self.store.multi(
                self.session,
                [
                    Create(zk_paths.CONTROLLER, {"brokerid": self.broker_id}, ephemeral=True),
                    SetData(zk_paths.CONTROLLER_EPOCH, epoch, stat.version),
                ],
            )
        except MultiError:
            self._holder()
            result.args["elected"] = False
            return
        result.args["elected"] = True
        result.args["controller_epoch"] = epoch
        self.ctx = ControllerContext(epoch, stat.version + 1)
        self._failover(batch)
        self._drain_transitions(self.ctx, result)

    def _resign(self) -> None:
        if self.ctx is not None:
            self.resigned_partitions = set(self.ctx.partition_states) | set(self.ctx.replica_states)
        self.ctx = None
        self.queue = deque(e for e in self.queue if e.kind in BROKER_EVENTS)

    def _failover(self, batch: RequestBatch) -> None:
        """Load the cluster into a fresh context, then bring every replica and partition online."""
        ctx, psm, rsm, deletion = self._machines(batch)
        self._holder()
        self._load_brokers()
        for topic in self.store.children(zk_paths.TOPICS, watch=self.session):
            self._load_topic(topic)
        for partition in ctx.assignment:
            leadership = self.zk.read_leader_isr(partition)
            if leadership is not None:
                ctx.leadership[partition] = leadership
        ctx.topics_to_delete = set(self.store.children(zk_paths.DELETE_TOPICS, watch=self.session)) & set(ctx.topics)
        self._initialize_states()
        batch.add_update_metadata(set(ctx.live_brokers), set(ctx.assignment))
        # Kafka's ReplicaStateMachine.startup (2.3.0, 3.9.2) moves every replica, a topic being deleted too:
        # those on live brokers to OnlineReplica, the others to OfflineReplica, which takes them out of the ISR.
        live = set(ctx.live_brokers)
        rsm.handle(ctx.partitions_on(live), R.OnlineReplica)
        rsm.handle([(p, r) for p, rs in ctx.assignment.items() for r in rs if r not in live], R.OfflineReplica)
        psm.trigger_online_state_change()
        self._on_reassignment_request(batch)
        # fetchTopicDeletionsInProgress (KafkaController.scala, 2.3.0): a topic with a replica on a dead
        # broker waits, ineligible, for that broker to come back.
        ctx.deletion_ineligible.update(
            t for t in ctx.topics_to_delete if any(r not in live for _, r in deletion.replicas_of(t))
        )
        deletion.enqueue(set(ctx.topics_to_delete))
        self._on_preferred_election_request(batch)
        self._on_isr_change_notification(batch)

    def _initialize_states(self) -> None:
        """Context load: states are read off the cluster, not reached by transitions."""
        ctx = self.ctx
        assert ctx is not None
        live = ctx.live_brokers
        for partition, replicas in ctx.assignment.items():
            states = ctx.replica_states.setdefault(partition, {})
            for replica in replicas:
                # initializeReplicaState: a replica on a dead broker is loaded ReplicaDeletionIneligible, deleted
                # topic or not; the failover then moves it to OfflineReplica.
                state = R.OnlineReplica if replica in live else R.ReplicaDeletionIneligible
                states[replica] = state
                ctx.transitions.append(["replica", partition, str(replica), None, state._value_])
            leadership = ctx.leadership.get(partition)
            if leadership is None:
                pstate = P.NewPartition
            elif leadership.leader in live:
                pstate = P.OnlinePartition
            else:
                pstate = P.OfflinePartition
            ctx.partition_states[partition] = pstate
            ctx.transitions.append(["partition", partition, None, pstate._value_])
            ctx.dirty.add(partition)

    def _load_brokers(self) -> tuple[set[int], set[int], set[int]]:
        """Reads the registered brokers; returns (new, dead, bounced) against the context."""
        ctx = self.ctx
        assert ctx is not None
        registered: dict[int, int] = {}
        for child in self.store.children(zk_paths.BROKER_IDS, watch=self.session):
            try:
                data, _ = self.store.get(f"{zk_paths.BROKER_IDS}/{child}")
            except NoNodeError:
                continue
            registered[int(child)] = int(data["epoch"])
        before = ctx.live_brokers
        new = set(registered) - set(before)
        dead = set(before) - set(registered)
        # Before KIP-380 the controller compares broker ids only (2.1.0 KafkaController.scala BrokerChange):
        # a broker that registered again in between is not seen.
        bounced = {b for b in set(registered) & set(before) if registered[b] != before[b]} \
            if self.design.broker_epoch_fencing() else set()
        ctx.live_brokers = registered
        ctx.shutting_down -= dead | bounced
        return new, dead, bounced

    def _load_topic(self, topic: str) -> list[str]:
        """Reads a topic's assignment (and watches it); returns the partitions new to the context."""
        ctx = self.ctx
        assert ctx is not None
        try:
            data, _ = self.store.get(zk_paths.topic_path(topic), watch=self.session)
        except NoNodeError:
            return []
        added = []
        for index, replicas in sorted(zk_paths.topic_assignment(data).items()):
            partition = zk_paths.partition_name(topic, index)
            if partition not in ctx.assignment:
                ctx.add_partition(partition, replicas)
                added.append(partition)
        return added

    # -- brokers ---------------------------------------------------------------------------------------

    def _on_broker_change(self, batch: RequestBatch, result: StepResult) -> None:
        ctx = self._context()
        new, dead, bounced = self._load_brokers()
        result.args.update(new=sorted(new), dead=sorted(dead), bounced=sorted(bounced))
        if new:
            self._on_broker_startup(new, batch)
        if bounced:
            # A bounced broker is handled as dead, then as new: while failed it must not be elected.
            epochs = {b: ctx.live_brokers.pop(b) for b in sorted(bounced)}
            self._on_broker_failure(bounced, batch)
            ctx.live_brokers.update(epochs)
            self._on_broker_startup(bounced, batch)
        if dead:
            self._on_broker_failure(dead, batch)
        batch.add_update_metadata(set(ctx.live_brokers), set())

    def _on_broker_startup(self, brokers: set[int], batch: RequestBatch) -> None:
        ctx, psm, rsm, deletion = self._machines(batch)
        batch.add_update_metadata(brokers, set(ctx.assignment))
        replicas = ctx.partitions_on(brokers)
        rsm.handle([(p, r) for p, r in replicas if not ctx.is_deleting(p)], R.OnlineReplica)
        psm.trigger_online_state_change()
        # 2.3.0 onBrokerStartup: resume the reassignments whose target (not whole AR) has a new broker.
        for partition in sorted(p for p, target in ctx.reassignments.items() if brokers & set(target)):
            self._reassign(partition, batch)
        deletion.retry({ctx.topic_of(p) for p, _ in replicas if ctx.is_deleting(p)})

    def _on_broker_failure(self, brokers: set[int], batch: RequestBatch) -> None:
        ctx, psm, rsm, deletion = self._machines(batch)
        replicas = ctx.partitions_on(brokers)
        leaderless = [p for p in ctx.partitions_led_by(brokers) if not ctx.is_deleting(p)]
        psm.handle(leaderless, P.OfflinePartition)
        psm.trigger_online_state_change()
        rsm.handle([(p, r) for p, r in replicas if not ctx.is_deleting(p)], R.OfflineReplica)
        deletion.fail(
            [
                (p, r)
                for p, r in replicas
                if ctx.is_deleting(p) and ctx.replica_state(p, r) is not R.ReplicaDeletionIneligible
            ]
        )

    def _on_controlled_shutdown(self, event: ControllerEvent, batch: RequestBatch, result: StepResult) -> None:
        ctx, psm, rsm, _ = self._machines(batch)
        request = event.payload
        assert isinstance(request, ControlledShutdownRequest)
        broker = request.broker
        result.args["broker"] = broker
        if broker not in ctx.live_brokers:
            remaining = tuple(sorted(ctx.assignment))
        else:
            ctx.shutting_down.add(broker)
            shared = [
                p for p, _ in ctx.partitions_on({broker}) if len(ctx.assignment[p]) > 1 and not ctx.is_deleting(p)
            ]
            led = [p for p in shared if self._leader_of(p) == broker]
            psm.handle(led, P.OnlinePartition, "controlled_shutdown")
            followers = [(p, broker) for p in shared if p not in led]
            rsm.handle(followers, R.OfflineReplica)
            remaining = tuple(sorted(p for p in shared if self._leader_of(p) == broker))
        result.args["remaining"] = list(remaining)
        result.out.append(
            Envelope(self.broker_id, broker, ControlledShutdownResponse(ctx.epoch, remaining))
        )

    def _leader_of(self, partition: str) -> int:
        leadership = self._context().leadership.get(partition)
        return NO_LEADER if leadership is None else leadership.leader

    # -- topics ------------------------------------------------------------------------------------------

    def _on_topic_change(self, batch: RequestBatch, result: StepResult) -> None:
        ctx = self._context()
        topics = set(self.store.children(zk_paths.TOPICS, watch=self.session))
        created = sorted(topics - set(ctx.topics))
        for topic in sorted(set(ctx.topics) - topics):
            ctx.remove_topic(topic)
        added = [p for topic in created for p in self._load_topic(topic)]
        result.args["created"] = created
        self._create_partitions(added, batch)

    def _on_partition_modifications(self, topic: str, batch: RequestBatch) -> None:
        ctx = self.ctx
        assert ctx is not None
        if topic not in ctx.topics or topic in ctx.topics_to_delete:
            return
        self._create_partitions(self._load_topic(topic), batch)

    def _create_partitions(self, partitions: list[str], batch: RequestBatch) -> None:
        ctx, psm, rsm, _ = self._machines(batch)
        replicas = [(p, r) for p in partitions for r in ctx.assignment[p]]
        psm.handle(partitions, P.NewPartition)
        rsm.handle(replicas, R.NewReplica)
        psm.handle(partitions, P.OnlinePartition)
        rsm.handle(replicas, R.OnlineReplica)

    def _on_topic_deletion(self, batch: RequestBatch) -> None:
        _, _, _, deletion = self._machines(batch)
        deletion.enqueue(set(self.store.children(zk_paths.DELETE_TOPICS, watch=self.session)))

    def _on_stop_replica_response(self, event: ControllerEvent, batch: RequestBatch) -> None:
        ctx, _, _, deletion = self._machines(batch)
        response = event.payload
        assert isinstance(response, StopReplicaResponse)
        if not response.delete or response.controller_epoch != ctx.epoch:
            return
        started = [
            (p, response.broker)
            for p in response.partitions
            if ctx.replica_state(p, response.broker) is R.ReplicaDeletionStarted
        ]
        if response.error:
            deletion.fail(started)
            deletion.resume()
        else:
            deletion.succeed(started)

    # -- ISR changes -------------------------------------------------------------------------------------

    def _on_isr_change_notification(self, batch: RequestBatch) -> None:
        ctx = self.ctx
        assert ctx is not None
        changed: set[str] = set()
        for child in self.store.children(zk_paths.ISR_CHANGES, watch=self.session):
            path = f"{zk_paths.ISR_CHANGES}/{child}"
            try:
                data, _ = self.store.get(path)
            except NoNodeError:
                continue
            changed.update(p for p in data if p in ctx.assignment)
            self.zk.delete_quietly(ctx, path)
        for partition in sorted(changed):
            self._refresh_leadership(partition)
        batch.add_update_metadata(set(ctx.live_brokers), changed)

    def _refresh_leadership(self, partition: str, watch: bool = False) -> None:
        ctx = self.ctx
        assert ctx is not None
        try:
            data, stat = self.store.get(
                zk_paths.partition_state_path(partition), watch=self.session if watch else None
            )
        except NoNodeError:
            return
        ctx.leadership[partition] = leader_isr_of(data, stat.version)
        ctx.dirty.add(partition)

    # -- reassignment --------------------------------------------------------------------------------------

    def _on_reassignment_request(self, batch: RequestBatch) -> None:
        ctx = self.ctx
        assert ctx is not None
        if self.store.exists(zk_paths.REASSIGN, watch=self.session) is None:
            return
        data, _ = self.store.get(zk_paths.REASSIGN)
        rejected = []
        for partition, target in sorted(data.items()):
            replicas = tuple(target)
            if partition in ctx.reassignments:
                continue
            if partition not in ctx.assignment or ctx.is_deleting(partition) or replicas == ctx.assignment[partition]:
                rejected.append(partition)
                continue
            ctx.reassignments[partition] = replicas
            self._refresh_leadership(partition, watch=True)
            self._reassign(partition, batch)
        if rejected:
            self._forget_reassignments(rejected)

    def _on_reassignment_isr_change(self, partition: str, batch: RequestBatch) -> None:
        """Kafka 2.3.0 KafkaController.processPartitionReassignmentIsrChange: the reassignment resumes
        only once every target replica is in the ISR read from the store; any other change of the
        partition node (the controller's own epoch bump of step 2 among them) is only logged."""
        ctx = self.ctx
        assert ctx is not None
        if partition not in ctx.reassignments:
            return
        self._refresh_leadership(partition, watch=True)
        leadership = ctx.leadership.get(partition)
        if leadership is not None and set(ctx.reassignments[partition]) <= set(leadership.isr):
            self._reassign(partition, batch)

    def _reassign(self, partition: str, batch: RequestBatch) -> None:
        """Kafka 2.3.0 KafkaController.onPartitionReassignment (core/src/main/scala/kafka/controller/
        KafkaController.scala), RAR the target, OAR the assignment before, AR the current one. Until RAR
        is in the ISR (steps 1-3): AR := RAR ++ (OAR - RAR) in the store, a new leader epoch with
        LeaderAndIsr to all of AR, RAR - OAR -> NewReplica; redone at every call, as Kafka does on a
        broker startup or a failover. Then (steps 5-12): RAR -> OnlineReplica, AR := RAR in memory,
        leadership into RAR with the ISR kept (so RAR's replicas get an ISR outside their new AR),
        OAR - RAR -> OfflineReplica (out of the ISR) -> NonExistentReplica, and only then AR := RAR
        in the store."""
        ctx, psm, rsm, deletion = self._machines(batch)
        # Kafka's areReplicasInIsr reads the partition state from ZooKeeper: a leader's ISR shrink the
        # controller has not been notified of yet must stop the reassignment from completing.
        self._refresh_leadership(partition)
        target = ctx.reassignments[partition]
        current = ctx.assignment[partition]
        leadership = ctx.leadership.get(partition)
        if leadership is None:
            return
        topic = ctx.topic_of(partition)
        if not set(target) <= set(leadership.isr):
            added = [r for r in target if r not in current]
            # Step 1: (RAR ++ OAR).toSet in 2.3.0 (insertion order for the small sets of a replica
            # list), (newReplicas ++ oldReplicas).distinct in 2.4.0 ReplicaAssignment.fromOldAndNewReplicas.
            ctx.assignment[partition] = (*target, *(r for r in current if r not in target))
            self.zk.set_topic_assignment(ctx, topic)
            # Step 2: updateLeaderEpochAndSendRequest to every replica of OAR + RAR.
            self._bump_leader_epoch(partition, set(ctx.assignment[partition]), batch)
            rsm.handle([(partition, r) for r in added], R.NewReplica)
            return
        retired = [r for r in current if r not in target]
        rsm.handle([(partition, r) for r in target], R.OnlineReplica)
        ctx.assignment[partition] = target
        if leadership.leader not in target or leadership.leader not in ctx.live_brokers:
            psm.handle([partition], P.OnlinePartition, "reassign")
        else:
            # Step 7 without an election (2.3.0 moveReassignedPartitionLeaderIfRequired): the new
            # epoch goes to OAR + RAR, AR = RAR in the request (2.4.0 sends it to TRS only).
            self._bump_leader_epoch(partition, set(current), batch)
        for state in (R.OfflineReplica, R.ReplicaDeletionStarted, R.ReplicaDeletionSuccessful, R.NonExistentReplica):
            rsm.handle([(partition, r) for r in retired], state)
        ctx.assignment[partition] = target
        self.zk.set_topic_assignment(ctx, topic)
        del ctx.reassignments[partition]
        self._forget_reassignments([partition])
        batch.add_update_metadata(set(ctx.live_brokers), {partition})
        deletion.retry({topic})

    def _bump_leader_epoch(self, partition: str, recipients: set[int], batch: RequestBatch) -> None:
        ctx = self.ctx
        assert ctx is not None
        current = ctx.leadership[partition]
        written = self.zk.update_leader_isr(ctx, partition, current.successor(current.leader, current.isr, ctx.epoch))
        if written is None:
            self._refresh_leadership(partition)
            return
        ctx.leadership[partition] = written
        ctx.dirty.add(partition)
        batch.add_leader_and_isr(ctx, recipients, partition)

    def _forget_reassignments(self, partitions: list[str]) -> None:
        ctx = self.ctx
        assert ctx is not None
        try:
            data, stat = self.store.get(zk_paths.REASSIGN)
        except NoNodeError:
            return
        remaining = {p: t for p, t in data.items() if p not in partitions}
        if remaining:
            self.zk.write(ctx, [SetData(zk_paths.REASSIGN, remaining, stat.version)])
        else:
            self.zk.delete_quietly(ctx, zk_paths.REASSIGN)

    # -- preferred leaders ----------------------------------------------------------------------------------

    def _on_preferred_election_request(self, batch: RequestBatch) -> None:
        ctx = self.ctx
        assert ctx is not None
        if self.store.exists(zk_paths.PREFERRED, watch=self.session) is None:
            return
        data, _ = self.store.get(zk_paths.PREFERRED)
        self._elect_preferred([p for p in data if p in ctx.assignment], batch)
        self.zk.delete_quietly(ctx, zk_paths.PREFERRED)

    def _elect_preferred(self, partitions: list[str], batch: RequestBatch) -> list[str]:
        ctx, psm, _, _ = self._machines(batch)
        movable = [
            p
            for p in partitions
            if not ctx.is_deleting(p)
            and p not in ctx.reassignments
            and ctx.leadership.get(p) is not None
            and ctx.leadership[p].leader != ctx.assignment[p][0]
        ]
        psm.handle(movable, P.OnlinePartition, "preferred")
        return movable

    def _on_auto_rebalance(self, batch: RequestBatch, result: StepResult) -> None:
        """Preferred election for each broker whose share of led-elsewhere partitions is too high."""
        ctx = self.ctx
        assert ctx is not None
        chosen: list[str] = []
        for broker in sorted(ctx.live_brokers):
            preferred = [p for p, replicas in ctx.assignment.items() if replicas and replicas[0] == broker]
            if not preferred:
                continue
            elsewhere = [p for p in preferred if p in ctx.leadership and ctx.leadership[p].leader != broker]
            if len(elsewhere) / len(preferred) > IMBALANCE_RATIO:
                chosen.extend(elsewhere)
        result.args["partitions"] = self._elect_preferred(sorted(chosen), batch)


def _event_for_path(path: str) -> ControllerEvent | None:
    if path == zk_paths.BROKER_IDS:
        return ControllerEvent("BrokerChange")
    if path == zk_paths.TOPICS:
        return ControllerEvent("TopicChange")
    if path == zk_paths.DELETE_TOPICS:
        return ControllerEvent("TopicDeletion")
    if path == zk_paths.REASSIGN:
        return ControllerEvent("PartitionReassignment")
    if path == zk_paths.PREFERRED:
        return ControllerEvent("PreferredReplicaElection")
    if path == zk_paths.ISR_CHANGES:
        return ControllerEvent("IsrChangeNotification")
    if path.startswith(zk_paths.TOPICS + "/"):
        parts = path[len(zk_paths.TOPICS) + 1 :].split("/")
        if len(parts) == 1:
            return ControllerEvent("PartitionModifications", parts[0])
        if len(parts) == 4 and parts[1] == "partitions" and parts[3] == "state":
            return ControllerEvent("ReassignmentIsrChange", zk_paths.partition_name(parts[0], int(parts[2])))
    return None
