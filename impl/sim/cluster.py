"""A simulated cluster: brokers (replica manager + controller each), a coordination store and the network,
wired together. Every public method is one step of the model: it changes the cluster and records one
trace event (actor, action, arguments, and the change of the model's variables).

The store is the embedded one unless the cluster is given another (a real ZooKeeper's, kcm.impl.zookeeper):
the controllers and brokers reach it through the port alone, so they run unchanged on either."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Final, Protocol

from kcm.impl import zk_paths
from kcm.impl.abstraction import Abstraction
from kcm.impl.controller import Controller, ControllerEvent
from kcm.impl.design import Design
from kcm.impl.messages import (
    ACTION_OF,
    CONTROLLER_REQUESTS,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    Envelope,
    Message,
    PartitionLeaderState,
    StopReplicaResponse,
)
from kcm.impl.replica_manager import LEADER, Replica, ReplicaManager
from kcm.impl.sim.network import Network
from kcm.impl.store import CoordinationStore, InMemoryStore, NodeExistsError, NoNodeError
from kcm.spec.trace.format import FORMAT_VERSION
from kcm.spec.vocabulary import ACTIONS, NO_LEADER, Knobs

Event = dict[str, Any]
EventSink = Callable[[Event], None]
ADMIN = -1  # the owner of the operators' session: not a broker id, which is never negative
# The first broker id of a simulated cluster unless told otherwise. Kafka's shipped config/server.properties
# sets broker.id=0 (2.3.0), but 1 keeps the broker names of every scenario file and recorded seed stable.
FIRST_BROKER_ID: Final = 1
TO_CONTROLLER = (ControlledShutdownRequest, StopReplicaResponse)


class ClusterStore(CoordinationStore, Protocol):
    """The port, and what recording a step needs beyond it: which paths the step changed (the trace's state
    delta re-reads only those) and whether any watch fired (most steps fire none: no queue is swapped)."""

    def drain_changes(self) -> set[str]: ...

    def has_watch_events(self) -> bool: ...


def broker_ids(count: int, first: int = FIRST_BROKER_ID) -> list[int]:
    """The ids of a cluster of `count` brokers numbered from `first`."""
    return list(range(first, first + count))


class Cluster:
    def __init__(
        self,
        brokers: Sequence[int],
        knobs: Knobs,
        sink: EventSink,
        run: str = "run",
        rng: random.Random | None = None,
        max_delay: int = 0,
        store: ClusterStore | None = None,
        design: Design | None = None,
    ) -> None:
        """`store`: an empty store for this cluster alone (default: a new embedded one); `design`: the design
        points' strategy, one of one's own (default: the built-in design the knobs name)."""
        self.knobs = knobs
        self.design = Design(knobs) if design is None else design
        self.sink = sink
        self.run = run
        self.seq = 0
        self.now = 0
        self.next_record = 1
        self.store: ClusterStore = InMemoryStore() if store is None else store
        self.network = Network(rng or random.Random(0), max_delay)
        self.abstraction = Abstraction()
        self.admin_session = self.store.open_session(ADMIN)
        for root in zk_paths.PERSISTENT_ROOTS:
            self.store.create(self.admin_session, root, None, make_parents=True)
        self.store.create(self.admin_session, zk_paths.CONTROLLER_EPOCH, 0)
        self.managers: dict[int, ReplicaManager] = {}
        self.controllers: dict[int, Controller] = {}
        self.session_owner: dict[int, int] = {}
        self.partitions: set[str] = set()
        self._fetch_round: list[tuple[int, str]] = []
        if len(set(brokers)) != len(brokers) or not brokers or min(brokers) < 0:
            raise ValueError(f"broker ids must be distinct and non-negative, got {list(brokers)}")
        for broker in brokers:
            self.controllers[broker] = Controller(broker, self.design, self.store)
            self.managers[broker] = ReplicaManager(broker, self.design, self.store, 0)
            self._start(broker)
        self._route_watches()
        self.store.drain_changes()
        self._record_init(brokers)

    # -- recording ------------------------------------------------------------------------------------

    def _record_init(self, brokers: Sequence[int]) -> None:
        state = self.abstraction.snapshot(self.store, self.managers, self.controllers, self.partitions)
        args: dict[str, object] = {"knobs": self.knobs.to_dict(), "brokers": list(brokers)}
        if self.design.name:
            args["design"] = self.design.name
        self.sink(self._event("env", "Init", args, state, full=True))

    def _event(self, actor: str, action: str, args: dict[str, Any], state: dict[str, Any], full: bool = False) -> Event:
        event: Event = {"v": FORMAT_VERSION, "run": self.run, "seq": self.seq, "actor": actor, "action": action,
                        "args": args, "state": state}
        if full:
            event["full"] = True
        self.seq += 1
        return event

    def _commit(self, actor: str, action: str, args: dict[str, Any]) -> Event:
        """Ends a step: route fired watches, compute the change, emit the event."""
        self._route_watches()
        changed = self.store.drain_changes()
        for path in changed:
            self._note_partitions(path)
        state = self.abstraction.delta(self.store, changed, self.managers, self.controllers, self.partitions)
        event = self._event(actor, action, args, state)
        self.sink(event)
        return event

    def _note_partitions(self, path: str) -> None:
        if path.startswith(zk_paths.TOPICS + "/") and path.count("/") == 3:
            topic = path.rsplit("/", 1)[1]
            try:
                data, _ = self.store.get(path)
            except NoNodeError:
                return
            for index in zk_paths.topic_assignment(data):
                self.partitions.add(zk_paths.partition_name(topic, index))

    def _route_watches(self) -> None:
        if not self.store.has_watch_events():
            return
        for fired in self.store.poll_watch_events():
            broker = self.session_owner.get(fired.session)
            if broker is not None and self.managers[broker].alive:
                self.controllers[broker].on_watch(fired.path)

    # -- broker lifecycle -----------------------------------------------------------------------------

    def _start(self, broker: int) -> None:
        session = self.store.open_session(broker)
        self.session_owner[session] = broker
        self.managers[broker].restart(session)
        self.controllers[broker].session = session
        self.controllers[broker].register()
        self.controllers[broker].enqueue(ControllerEvent("ControllerChange"))
        self.network.release(broker, self.now)

    def _stop(self, broker: int) -> None:
        self.managers[broker].crash()
        self.controllers[broker].reset()
        lost = self.network.disconnect(broker)
        self.network.hold([e for e in lost if self._retried(e)])
        self.store.expire_session(self.managers[broker].session)

    def _retried(self, envelope: Envelope) -> bool:
        """Before KIP-380 a controller request to a broker that is down waits for its next incarnation
        (the controller's send thread retries it); with KIP-380 that incarnation would refuse it."""
        return not self.design.broker_epoch_fencing() and isinstance(envelope.message, CONTROLLER_REQUESTS) \
            and self.managers[envelope.src].alive

    def live_brokers(self) -> list[int]:
        return [b for b, m in self.managers.items() if m.alive]

    def controller_holder(self) -> int:
        try:
            data, _ = self.store.get(zk_paths.CONTROLLER)
        except NoNodeError:
            return NO_LEADER
        holder: Any = data
        return int(holder["brokerid"])

    def crash(self, broker: int) -> Event:
        self._stop(broker)
        return self._commit("env", "BrokerCrash", {"broker": broker})

    def crash_controller(self) -> Event | None:
        holder = self.controller_holder()
        if holder == NO_LEADER or not self.managers[holder].alive:
            return None
        self._stop(holder)
        return self._commit("env", "ControllerCrash", {"broker": holder})

    def restart(self, broker: int) -> Event:
        self._start(broker)
        return self._commit("env", "BrokerRestart", {"broker": broker})

    def expire_session(self, broker: int) -> Event:
        """The broker's store session expires; its client opens a new one at once, but the broker only
        learns of it when it takes the expiry notification off its controller queue. A real ZooKeeper also
        expires a session on its own clock, once its client has been silent for the session timeout: the store
        is then not asked again, and the step is the client learning of it."""
        manager = self.managers[broker]
        if self.store.session_alive(manager.session):
            self.store.expire_session(manager.session)
        session = self.store.open_session(broker)
        self.session_owner[session] = broker
        manager.session = session
        self.controllers[broker].session = session
        self.controllers[broker].enqueue(ControllerEvent("Reregister"))
        return self._commit("env", "SessionExpire", {"broker": broker})

    # -- the controller queue ---------------------------------------------------------------------------

    def process_controller_event(self, broker: int, delivered: dict[str, Any] | None = None) -> Event:
        """The controller's next event; `delivered`: the arguments of the message just handed to it, which
        the step names beside its own (replay needs to know which of the messages in flight it was)."""
        controller = self.controllers[broker]
        epoch = controller.epoch
        result = controller.process(self.now)
        for key, value in (delivered or {}).items():
            result.args.setdefault(key, value)
        for dead in result.args.get("dead", ()):
            self.network.forget(broker, dead)  # removeBroker: the queue to a dead broker goes
        self._send(result.out)
        if epoch:
            result.args.setdefault("controller_epoch", epoch)
        return self._commit(f"{ACTIONS[result.action]}:{broker}", result.action, result.args)

    # -- the network ----------------------------------------------------------------------------------

    def _send(self, envelopes: list[Envelope]) -> None:
        """A connection to a broker that is down is refused: nothing is queued for it but what the
        controller retries (before KIP-380)."""
        if envelopes:
            self.network.send([e for e in envelopes if self.managers[e.dst].alive], self.now)
            self.network.hold([e for e in envelopes if not self.managers[e.dst].alive and self._retried(e)])

    def deliver(self, index: int) -> Event:
        return self._deliver(self.network.take(index))

    def deliver_oldest(self) -> Event | None:
        envelope = self.network.take_oldest()
        return None if envelope is None else self._deliver(envelope)

    def _deliver(self, envelope: Envelope) -> Event:
        message = envelope.message
        action = ACTION_OF[type(message)]
        args = {"from": envelope.src, **message_args(message)}
        if isinstance(message, TO_CONTROLLER):
            return self._deliver_to_controller(envelope, action, args)
        manager = self.managers[envelope.dst]
        out, applied = manager.handle(envelope.src, message, self.now, self.controllers[envelope.dst].broker_epoch)
        self._send(out)
        if isinstance(message, CONTROLLER_REQUESTS):
            args["applied"] = applied
            # The broker's own epoch, which Kafka logs beside the request's when it refuses one (2.2.0
            # KafkaApis.scala: "... smaller than the current broker epoch ..."): validation compares them.
            args["current_broker_epoch"] = self.controllers[envelope.dst].broker_epoch
        if isinstance(message, ControlledShutdownResponse) and manager.shutdown_complete:
            manager.checkpoint_hw()
            self._stop(envelope.dst)
            args["stopped"] = True
        return self._commit(f"broker:{envelope.dst}", action, args)

    def _deliver_to_controller(self, envelope: Envelope, action: str, args: dict[str, Any]) -> Event:
        controller = self.controllers[envelope.dst]
        if controller.ctx is None:
            args["ignored"] = True
            return self._commit(f"controller:{envelope.dst}", action, args)
        kind = "ControlledShutdown" if action == "ControlledShutdownRequest" else action
        controller.queue.appendleft(ControllerEvent(kind, payload=envelope.message))
        return self.process_controller_event(envelope.dst, args)

    def drop(self, index: int) -> Event:
        envelope = self.network.take(index)
        return self._commit("network", "DropMessage", {"from": envelope.src, "to": envelope.dst,
                                                       "message": ACTION_OF[type(envelope.message)]})

    def duplicate(self, index: int) -> Event:
        envelope = self.network.duplicate(index, self.now)
        return self._commit("network", "DuplicateMessage", {"from": envelope.src, "to": envelope.dst,
                                                            "message": ACTION_OF[type(envelope.message)]})

    # -- brokers' own work ---------------------------------------------------------------------------------

    def send_fetch(self, broker: int, partition: str) -> Event:
        out = self.managers[broker].send_fetch(partition, self.now)
        self._send(out)
        request = out[0].message
        return self._commit(f"broker:{broker}", "SendFetch", {"partition": partition, "to": out[0].dst,
                                                              "request": ACTION_OF[type(request)]})

    def shrink_isr(self, broker: int, partition: str) -> Event:
        removed = self.managers[broker].shrink_isr(partition, self.now)
        return self._commit(f"broker:{broker}", "IsrShrink", {"partition": partition, "removed": list(removed)})

    def checkpoint_hw(self, broker: int) -> Event:
        self.managers[broker].checkpoint_hw()
        return self._commit(f"broker:{broker}", "HwCheckpoint", {})

    def request_controlled_shutdown(self, broker: int) -> Event:
        manager = self.managers[broker]
        known = manager.metadata_controller
        target = known if known != NO_LEADER else self.controller_holder()
        self._send(manager.request_controlled_shutdown(target))
        args: dict[str, Any] = {"to": target, "attempt": manager.shutdown_attempts}
        if manager.shutdown_complete:
            manager.checkpoint_hw()
            self._stop(broker)
            args["stopped"] = True
        return self._commit(f"broker:{broker}", "RequestControlledShutdown", args)

    def tick(self, rebalance: bool = False, calm: bool = False) -> Event:
        """The clock moves; a `calm` tick (a calm phase's) says so in the trace, since it never rebalances
        whatever the time: replay reads it off the event."""
        self.now += 1
        for manager in self.managers.values():
            if manager.alive:
                manager.expire_requests(self.now)
        if rebalance:
            for broker in self.live_brokers():
                self.controllers[broker].enqueue(ControllerEvent("AutoPreferredReplicaElection"))
        args: dict[str, Any] = {"now": self.now}
        if calm:
            args["calm"] = True
        return self._commit("clock", "Tick", args)

    # -- calm phases: the fair schedule ----------------------------------------------------------------

    def quiesce(self, bounds: dict[str, int]) -> Event:
        """A calm phase starts: from here to its end nothing but `fair_round` steps the cluster, and each
        progress property must hold within its bound of rounds (one Tick per round; `bounds` from
        `quiescence.progress_bounds`)."""
        return self._commit("env", "Quiesce", {"bounds": dict(bounds)})

    def fair_round(self) -> None:
        """One round of the fair schedule of a calm phase. In order: every controller event queued at the
        round's start (brokers in id order), every message in flight at the start of delivery that is ready
        (connections stay FIFO), a fetch by each follower without one in flight to a live leader of its
        epoch, a shrink per leader with lagging followers, a controlled shutdown retried by each broker
        leaving whose last attempt is answered (or lost), and last the Tick that ends the round. A step that
        schedules another (a request sent, an event queued) is served in a later round, which is what makes a
        bound of rounds derivable (docs/invariants.md, "Progress properties")."""
        for broker, count in [(b, len(self.controllers[b].queue)) for b in self.live_brokers()]:
            for _ in range(count):
                if not (self.managers[broker].alive and self.controllers[broker].queue):
                    break
                self.process_controller_event(broker)
        self._deliver_ready()
        # Every follower keeps a fetch outstanding, caught up or not, as Kafka's fetcher threads do: a
        # follower that stopped fetching would lapse out of the ISR (REPLICA_LAG_TICKS) and never rejoin.
        for broker, partition in [(b, p) for b in self.live_brokers() for p in sorted(self.managers[b].replicas)]:
            if self._fetched_leader(broker, partition) is not None:
                self.send_fetch(broker, partition)
        for broker, partition in self._lagging():
            self.shrink_isr(broker, partition)
        for broker in self._shutdowns_to_retry():
            self.request_controlled_shutdown(broker)
        # No automatic preferred election: its timer moves leaders by policy, like an operator's command.
        self.tick(calm=True)

    def _deliver_ready(self) -> None:
        network = self.network
        waiting = {id(m) for m in network.in_flight if m.ready_at <= self.now}
        while waiting:
            index = next((i for i in network.ready(self.now) if id(network.in_flight[i]) in waiting), None)
            if index is None:
                break
            waiting.discard(id(network.in_flight[index]))
            self.deliver(index)

    def _lagging(self) -> list[tuple[int, str]]:
        return [
            (b, p)
            for b in self.live_brokers()
            for p, r in sorted(self.managers[b].replicas.items())
            if r.role == LEADER and self.managers[b].lagging_followers(p, self.now)
        ]

    def _shutdowns_to_retry(self) -> list[int]:
        """Brokers in a controlled shutdown with no attempt under way: Kafka's broker sends its next attempt
        once the last one is answered or has failed (2.3.0 KafkaServer.scala controlledShutdown)."""
        busy = {
            e.src if isinstance(e.message, ControlledShutdownRequest) else e.dst
            for e in (m.envelope for m in self.network.in_flight)
            if isinstance(e.message, ControlledShutdownRequest | ControlledShutdownResponse)
        }
        return [b for b in self.live_brokers() if self.managers[b].shutting_down and b not in busy]

    # -- running to quiescence --------------------------------------------------------------------------

    def stabilize(self, max_steps: int = 100_000) -> list[Event]:
        """Deterministic progress until nothing is left to do: controller queues first (lowest broker
        first), then messages in send order, then fetches of followers that are behind their leader."""
        events: list[Event] = []
        while len(events) < max_steps:
            event = self._next_quiet_step()
            if event is None:
                return events
            events.append(event)
        raise RuntimeError(f"cluster did not stabilize within {max_steps} steps")

    def _next_quiet_step(self) -> Event | None:
        for broker in self.live_brokers():
            if self.controllers[broker].queue:
                return self.process_controller_event(broker)
        delivered = self.deliver_oldest()
        if delivered is not None:
            return delivered
        # One scan per round of fetches, not per fetch: a round visits every follower once, and the
        # cluster is quiet only when a whole fresh round finds nobody behind.
        for fresh in (False, True):
            if fresh or not self._fetch_round:
                self._fetch_round = [(b, p) for b in self.live_brokers() for p in self.managers[b].replicas][::-1]
            while self._fetch_round:
                broker, partition = self._fetch_round.pop()
                if self.behind(broker, partition):
                    return self.send_fetch(broker, partition)
        return None

    def behind(self, broker: int, partition: str) -> bool:
        """A live follower with a fetch to send to a live leader of its epoch: it is truncating or behind, or
        the leader does not yet know how far its log reaches (without that fetch, a leader never advances its
        HW past records the followers already hold)."""
        leader = self._fetched_leader(broker, partition)
        if leader is None:
            return False
        follower = self.managers[broker].replicas[partition]
        return (
            follower.truncating
            or len(follower.log) < len(leader.log)
            or follower.hw < leader.hw
            or leader.follower_leo.get(broker) != len(follower.log)
        )

    def _fetched_leader(self, broker: int, partition: str) -> Replica | None:
        """The leader's replica a live follower would fetch from now: live, leading at the follower's epoch,
        and no fetch of the follower in flight; None if there is none."""
        manager = self.managers[broker]
        if not manager.alive or not manager.wants_to_fetch(partition):
            return None
        follower = manager.replicas[partition]
        leader_manager = self.managers.get(follower.leader_id)
        if leader_manager is None or not leader_manager.alive:
            return None
        leader = leader_manager.replicas.get(partition)
        if leader is None or leader.role != LEADER or leader.leader_epoch != follower.leader_epoch:
            return None
        return leader

    # -- clients and operators ----------------------------------------------------------------------------

    def produce(self, broker: int, partition: str, acks: int = -1) -> Event:
        record = self.next_record
        error = self.managers[broker].produce(partition, record, acks)
        if not error:
            self.next_record += 1
        args = {"broker": broker, "partition": partition, "acks": acks, "record": record, "error": error}
        return self._commit("client", "Produce", args)

    def create_topic(self, topic: str, assignment: dict[int, tuple[int, ...]]) -> Event:
        try:
            self.store.create(self.admin_session, zk_paths.topic_path(topic), zk_paths.topic_data(assignment))
            error = ""
        except NodeExistsError:
            error = "TOPIC_ALREADY_EXISTS"
        args = {"topic": topic, "assignment": {str(i): list(r) for i, r in sorted(assignment.items())}, "error": error}
        return self._commit("admin", "CreateTopic", args)

    def create_partitions(self, topic: str, added: dict[int, tuple[int, ...]]) -> Event:
        path = zk_paths.topic_path(topic)
        try:
            data, stat = self.store.get(path)
            assignment = {**zk_paths.topic_assignment(data), **added}
            self.store.set(self.admin_session, path, zk_paths.topic_data(assignment), stat.version)
            error = ""
        except NoNodeError:
            error = "UNKNOWN_TOPIC"
        args = {"topic": topic, "assignment": {str(i): list(r) for i, r in sorted(added.items())}, "error": error}
        return self._commit("admin", "CreatePartitions", args)

    def delete_topic(self, topic: str) -> Event:
        return self._admin_create("DeleteTopic", f"{zk_paths.DELETE_TOPICS}/{topic}", None, {"topic": topic})

    def reassign(self, targets: dict[str, tuple[int, ...]]) -> Event:
        data = {p: list(r) for p, r in sorted(targets.items())}
        return self._admin_create("ReassignPartitions", zk_paths.REASSIGN, data, {"targets": data})

    def preferred_election(self, partitions: list[str]) -> Event:
        return self._admin_create("PreferredElection", zk_paths.PREFERRED, sorted(partitions),
                                  {"partitions": sorted(partitions)})

    def _admin_create(self, action: str, path: str, data: object, args: dict[str, Any]) -> Event:
        try:
            self.store.create(self.admin_session, path, data)
            args["error"] = ""
        except NodeExistsError:
            args["error"] = "ALREADY_IN_PROGRESS"
        return self._commit("admin", action, args)


def message_args(message: Message) -> dict[str, Any]:
    """A message as trace arguments: its fields, partition states as small objects."""
    out: dict[str, Any] = {}
    for name in _FIELD_NAMES[type(message)]:
        value = getattr(message, name)
        if name == "partitions" and value and isinstance(value[0], PartitionLeaderState):
            value = [
                {"partition": s.partition, "leader": s.leader, "leader_epoch": s.leader_epoch, "isr": list(s.isr),
                 "replicas": list(s.replicas)}
                for s in value
            ]
        elif isinstance(value, tuple):
            value = [list(v) if isinstance(v, tuple) else v for v in value]
        out[name] = value
    return out


# `dataclasses.fields` rebuilds its answer on every call; a message's fields never change.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {kind: tuple(f.name for f in fields(kind)) for kind in ACTION_OF}
