"""The seeded simulator: picks the next step of a cluster at random among the enabled ones (deliveries,
controller events, fetches, client writes, clock ticks, operators' commands and faults).

The seed alone decides every choice, so the same seed and knobs give the same trace byte for byte.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kcm.impl import zk_paths
from kcm.impl.design import Design
from kcm.impl.replica_manager import LEADER
from kcm.impl.sim.cluster import FIRST_BROKER_ID, Cluster, ClusterStore, Event, EventSink, broker_ids
from kcm.impl.sim.quiescence import calm_phase
from kcm.spec.vocabulary import NO_LEADER, Knobs


@dataclass(frozen=True, slots=True)
class SimConfig:
    brokers: int = 3
    partitions: int = 2
    replication_factor: int = 3
    faults: float = 1.0
    admin: float = 1.0
    max_delay: int = 2
    rebalance_every: int = 25
    first_broker_id: int = FIRST_BROKER_ID  # brokers are first_broker_id .. first_broker_id + brokers - 1
    # The operator creates topics and partitions only while the cluster has fewer partitions (or fewer
    # than `partitions`, when more): see `Simulator._room`.
    max_partitions: int = 32
    # Clients write to a partition only while its leader's log holds fewer records. The model has no
    # retention, and a trace writes a changed log whole (docs/trace-format.md): unbounded, every step
    # that changes a log writes a line as long as the log (100 KB at 1.2M steps).
    max_records: int = 1000
    # Storm steps between calm phases (0: never calm). A calm phase marks itself with a `Quiesce` event and runs
    # the fair schedule (`Cluster.fair_round`) for the largest progress bound: no fault, drop, duplicate,
    # operator command or client write in it (`quiescence.calm_phase`).
    calm_every: int = 0

    def __post_init__(self) -> None:
        if self.brokers < 1 or self.partitions < 1:
            raise ValueError("a cluster needs at least one broker and one partition")
        if self.first_broker_id < 0:
            raise ValueError(f"broker ids are non-negative, got a first broker id of {self.first_broker_id}")
        if self.calm_every < 0:
            raise ValueError(f"calm_every counts steps between calm phases, got {self.calm_every}")
        if not 1 <= self.replication_factor <= self.brokers:
            raise ValueError(f"replication factor {self.replication_factor} needs 1..{self.brokers} brokers")
        # They scale the weights a step is drawn by: infinite, NaN or negative weights break the draw or leave
        # a kind of step out without a word.
        for name, value in (("fault intensity", self.faults), ("operator intensity", self.admin)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"the {name} is a finite number of at least 0, got {value}")


def check_fits(knobs: Knobs, config: SimConfig) -> None:
    """A ValueError when the knobs cannot apply to the cluster: Kafka takes a `min.insync.replicas` above the
    replication factor and refuses every acks=all write (NotEnoughReplicas); a run of it would check nothing
    but that refusal."""
    if knobs.min_isr > config.replication_factor:
        raise ValueError(f"knob min_isr={knobs.min_isr} is above the replication factor "
                         f"{config.replication_factor}: no acks=all write could ever be acknowledged")


# Relative weights of the kinds of step; faults and operator commands scale with the config.
PROTOCOL_WEIGHTS: dict[str, float] = {
    "deliver": 40, "controller": 30, "fetch": 24, "produce": 8, "tick": 6, "shrink": 2, "checkpoint": 2,
}
FAULT_WEIGHTS = {"crash": 0.6, "restart": 2.0, "controller_crash": 0.3, "expire": 0.4, "drop": 1.0,
                 "duplicate": 0.6, "shutdown": 0.3}
ADMIN_WEIGHTS = {"create_topic": 0.1, "create_partitions": 0.1, "delete_topic": 0.1, "reassign": 0.3,
                 "preferred": 0.3}


class Simulator:
    def __init__(
        self, seed: int, knobs: Knobs, config: SimConfig, sink: EventSink, store: ClusterStore | None = None,
        design: Design | None = None,
    ) -> None:
        """`store`: the cluster's coordination store, empty (default: a new embedded one); `design`: the design
        points' strategy (default: the built-in design the knobs name)."""
        check_fits(knobs, config)
        self.rng = random.Random(seed)
        self.config = config
        self.cluster = Cluster(broker_ids(config.brokers, config.first_broker_id), knobs, sink, run=f"seed-{seed}",
                               rng=self.rng, max_delay=config.max_delay, store=store, design=design)
        self.topics = 0
        self.storm = 0  # steps since the last calm phase
        self.weights = dict(PROTOCOL_WEIGHTS)
        self.weights.update({k: w * config.faults for k, w in FAULT_WEIGHTS.items()})
        self.weights.update({k: w * config.admin for k, w in ADMIN_WEIGHTS.items()})
        self.kinds = [k for k, w in self.weights.items() if w > 0]
        self.cum_weights = list(itertools.accumulate(self.weights[k] for k in self.kinds))
        self.total_weight = self.cum_weights[-1]
        self.steps: dict[str, Callable[[], Event | None]] = {k: getattr(self, f"_{k}") for k in self.kinds}

    def bootstrap(self) -> None:
        """Elect a controller and create the first topic, so that the random walk has work to do."""
        self._new_topic(self.config.partitions)

    def run(self, steps: int) -> int:
        """Take `steps` steps (the Init event not counted); returns the number taken, more when a calm phase,
        taken whole, ends past `steps`."""
        # Bound once: this loop draws about twice per step, so its lookups weigh on every step.
        draw, pick, cum_weights, total_weight = self.rng.random, bisect.bisect, self.cum_weights, self.total_weight
        by_index = [self.steps[kind] for kind in self.kinds]
        calm_every = self.config.calm_every or sys.maxsize
        taken = 0
        while taken < steps:
            for _ in range(32):
                if by_index[pick(cum_weights, draw() * total_weight)]() is not None:
                    break
            else:
                self._tick()
            taken += 1
            self.storm += 1
            if self.storm >= calm_every:
                before = self.cluster.seq
                calm_phase(self.cluster)
                taken += self.cluster.seq - before
                self.storm = 0
        return taken

    # -- the protocol's own steps ---------------------------------------------------------------------

    def _deliver(self) -> Event | None:
        ready = self.cluster.network.ready(self.cluster.now)
        return self.cluster.deliver(self.rng.choice(ready)) if ready else None

    def _controller(self) -> Event | None:
        controllers = self.cluster.controllers
        waiting = [b for b, m in self.cluster.managers.items() if m.alive and controllers[b].queue]
        return self.cluster.process_controller_event(self.rng.choice(waiting)) if waiting else None

    def _leaders(self) -> list[tuple[int, str]]:
        return [
            (b, p)
            for b, m in self.cluster.managers.items()
            if m.alive
            for p, r in m.replicas.items()
            if r.role == LEADER
        ]

    def _fetch(self) -> Event | None:
        ready = [(b, p) for b, m in self.cluster.managers.items() if m.alive for p in m.fetchable()]
        if not ready:
            return None
        broker, partition = self.rng.choice(ready)
        return self.cluster.send_fetch(broker, partition)

    def _produce(self) -> Event | None:
        managers, limit = self.cluster.managers, self.config.max_records
        leaders = [(b, p) for b, p in self._leaders() if len(managers[b].replicas[p].log) < limit]
        if not leaders:
            return None
        broker, partition = self.rng.choice(leaders)
        return self.cluster.produce(broker, partition, self.rng.choice((-1, -1, -1, 1)))

    def _tick(self) -> Event | None:
        rebalance = (self.cluster.now + 1) % self.config.rebalance_every == 0
        return self.cluster.tick(rebalance)

    def _shrink(self) -> Event | None:
        now = self.cluster.now
        lagging = [(b, p) for b, p in self._leaders() if self.cluster.managers[b].lagging_followers(p, now)]
        return self.cluster.shrink_isr(*self.rng.choice(lagging)) if lagging else None

    def _checkpoint(self) -> Event | None:
        live = self.cluster.live_brokers()
        return self.cluster.checkpoint_hw(self.rng.choice(live)) if live else None

    # -- faults -----------------------------------------------------------------------------------------

    def _crash(self) -> Event | None:
        live = self.cluster.live_brokers()
        return self.cluster.crash(self.rng.choice(live)) if len(live) > 1 else None

    def _restart(self) -> Event | None:
        dead = [b for b, m in self.cluster.managers.items() if not m.alive]
        return self.cluster.restart(self.rng.choice(dead)) if dead else None

    def _controller_crash(self) -> Event | None:
        return self.cluster.crash_controller() if len(self.cluster.live_brokers()) > 1 else None

    def _expire(self) -> Event | None:
        live = self.cluster.live_brokers()
        return self.cluster.expire_session(self.rng.choice(live)) if live else None

    def _drop(self) -> Event | None:
        lossy = self.cluster.network.lossy()
        return self.cluster.drop(self.rng.choice(lossy)) if lossy else None

    def _duplicate(self) -> Event | None:
        in_flight = self.cluster.network.in_flight
        return self.cluster.duplicate(self.rng.randrange(len(in_flight))) if in_flight else None

    def _shutdown(self) -> Event | None:
        """A broker starts a controlled shutdown, or one already shutting down asks again."""
        live = self.cluster.live_brokers()
        pending = [b for b in live if self.cluster.managers[b].shutting_down]
        if pending:
            return self.cluster.request_controlled_shutdown(self.rng.choice(pending))
        if len(live) < 2 or self.cluster.controller_holder() == NO_LEADER:
            return None
        return self.cluster.request_controlled_shutdown(self.rng.choice(live))

    # -- operators ----------------------------------------------------------------------------------------

    def _assignment(self) -> tuple[int, ...]:
        brokers = sorted(self.cluster.managers)
        return tuple(self.rng.sample(brokers, self.config.replication_factor))

    def _room(self) -> bool:
        """Whether the cluster may grow by a partition. A deletion completes only once every replica of the
        topic is deleted, so with all of a topic's brokers rarely alive at once under faults, topics are
        created faster than they go: unbounded, the partition count grows with the run, and with it every
        event that lists each partition (a controller failover's transitions, UpdateMetadata), which
        reached 215 KB a line at 620,000 steps."""
        partitions = sum(len(zk_paths.topic_assignment(self.cluster.store.get(zk_paths.topic_path(topic))[0]))
                         for topic in self.cluster.store.children(zk_paths.TOPICS))
        return partitions < max(self.config.max_partitions, self.config.partitions)

    def _create_topic(self) -> Event | None:
        return self._new_topic(1) if self._room() else None

    def _new_topic(self, partitions: int) -> Event:
        topic = f"t{self.topics}"
        self.topics += 1
        return self.cluster.create_topic(topic, {i: self._assignment() for i in range(partitions)})

    def _existing_topics(self) -> list[str]:
        return sorted({p.rpartition("-")[0] for p in self.cluster.partitions})

    def _create_partitions(self) -> Event | None:
        topics = self._existing_topics()
        if not topics or not self._room():
            return None
        topic = self.rng.choice(topics)
        count = sum(1 for p in self.cluster.partitions if p.rpartition("-")[0] == topic)
        return self.cluster.create_partitions(topic, {count: self._assignment()})

    def _delete_topic(self) -> Event | None:
        topics = self._existing_topics()
        return self.cluster.delete_topic(self.rng.choice(topics)) if len(topics) > 1 else None

    def _reassign(self) -> Event | None:
        partitions = sorted(self.cluster.partitions)
        if not partitions:
            return None
        return self.cluster.reassign({self.rng.choice(partitions): self._assignment()})

    def _preferred(self) -> Event | None:
        partitions = sorted(self.cluster.partitions)
        if not partitions:
            return None
        return self.cluster.preferred_election(self.rng.sample(partitions, min(2, len(partitions))))
