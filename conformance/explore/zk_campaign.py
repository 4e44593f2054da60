"""The cluster on a real ZooKeeper under faults: seeded simulator runs whose coordination store is ZooKeeper's
(a fresh chroot per run), with faults of the ensemble and of its sessions injected between the simulator's own
steps. Every run is written as a trace and every event is checked by the invariant checker as it is written.

The faults, each injected between two chunks of the simulator's random walk:

* `server_kill`: one server of the ensemble is killed (SIGKILL); the walk goes on with the quorum kept (its
  clients reconnect to another server within their session timeout), then the server is restarted.
* `quorum_loss`: two servers are killed; the walk goes on while a timer restores them, every store request
  waiting for the quorum as Kafka's ZooKeeper client does (2.3.0 ZooKeeperClient.scala, waitUntilConnected).
* `zombie`: the controller's session expires while it has work queued. Another broker is elected (its first
  write: /controller and the epoch, in one multi), then the deposed controller takes the events still ahead of
  the expiry notification on its queue and acts on its old view: its writes are refused by the
  controller-epoch check (`controller_epoch_fencing`, the default) or applied, which the checker reports as
  StaleControllerFenced. The time from the expiry to the end of the new controller's election step is the
  failover time.
* `pause`: a broker's client goes silent (no heartbeat) until ZooKeeper expires its session on its own clock,
  then learns of the expiry and registers again. A pause shorter than the session timeout is what every killed
  server already does to its clients (they reconnect elsewhere, session kept); only a pause that outlasts it
  makes ZooKeeper's session tracker, not a client's request, end a session.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from kcm.conformance.check.invariants import InvariantChecker, Violation
from kcm.impl.sim.cluster import Cluster, ClusterStore
from kcm.impl.sim.quiescence import calm_phase
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.impl.zookeeper.pause import PausableStore
from kcm.impl.zookeeper.store import ConnectionLostError
from kcm.spec.trace.format import Event, TraceWriter
from kcm.spec.vocabulary import NO_LEADER, Knobs

FAULTS: Final = ("server_kill", "quorum_loss", "zombie", "pause")
SERVER_FAULTS: Final = frozenset({"server_kill", "quorum_loss"})
# Steps a controller may take to be elected once the holder's session is gone, and steps after a fault.
_ELECTION_STEPS: Final = 50
_AFTER_FAULT_STEPS: Final = 20
_QUORUM_OUTAGE_SECONDS: Final = 1.0
# Short, so a pause costs seconds; long enough that a killed server's clients reconnect well within it.
SESSION_TIMEOUT: Final = 2.0


class ServerFaults(Protocol):
    """The ensemble's controls the campaign uses (kcm.impl.zookeeper.ensemble.Ensemble)."""

    @property
    def servers(self) -> int: ...

    def kill(self, index: int) -> None: ...

    def restart(self, index: int) -> None: ...


StoreOpener = Callable[[], AbstractContextManager[ClusterStore]]
# Silences a store session's client until ZooKeeper has expired the session; returns once it has.
SessionPause = Callable[[ClusterStore, int], None]


@dataclass(frozen=True)
class CampaignPlan:
    runs: int = 4
    steps: int = 400  # the simulator's own steps per run; the faults' steps come on top
    faults_per_run: int = 4
    first_seed: int = 0
    knobs: Knobs = field(default_factory=Knobs)
    config: SimConfig = field(default_factory=SimConfig)
    faults: tuple[str, ...] = FAULTS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.faults) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}: the campaign injects {', '.join(FAULTS)}")
        if self.runs < 1 or self.steps < 1 or self.faults_per_run < 0 or not self.faults:
            raise ValueError("a campaign needs at least one run of one step, and a fault kind")
        if self.config.brokers < 3:
            raise ValueError("the zombie controller needs 3 brokers: a holder, its successor and a broker that fails")


@dataclass
class RunResult:
    seed: int
    trace: Path
    events: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    failovers: list[float] = field(default_factory=list)  # seconds, one per zombie fault that elected a successor
    # Zombie faults whose chosen successor was not elected within the bound: nobody heard /controller go (a
    # watch lost), or another broker won.
    unelected: int = 0
    # Why the run ended before its steps were taken: the store could not tell whether a write applied.
    ended_early: str = ""


@dataclass
class CampaignResult:
    plan: CampaignPlan
    runs: list[RunResult] = field(default_factory=list)

    @property
    def events(self) -> int:
        return sum(r.events for r in self.runs)

    @property
    def faults(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for run in self.runs:
            total.update(run.faults)
        return total

    @property
    def violations(self) -> Counter[str]:
        return Counter(v.invariant.split("/")[0] for r in self.runs for v in r.violations)

    @property
    def unelected(self) -> int:
        return sum(r.unelected for r in self.runs)

    @property
    def ended_early(self) -> list[RunResult]:
        return [r for r in self.runs if r.ended_early]

    def failover_median(self) -> float | None:
        times = [t for r in self.runs for t in r.failovers]
        return statistics.median(times) if times else None


def run_campaign(
    plan: CampaignPlan,
    open_store: StoreOpener,
    out: Path,
    servers: ServerFaults | None = None,
    pause: SessionPause | None = None,
    on_run: Callable[[RunResult], None] | None = None,
) -> CampaignResult:
    """Runs the plan, each run on a store `open_store` gives (fresh and empty); server faults need `servers`
    with 3 servers (one down keeps the quorum, two lose it), pauses need `pause`."""
    kinds = [k for k in plan.faults if _available(k, servers, pause)]
    if not kinds:
        raise ValueError(f"none of the faults {', '.join(plan.faults)} can be injected here")
    out.mkdir(parents=True, exist_ok=True)
    result = CampaignResult(plan)
    for index in range(plan.runs):
        seed = plan.first_seed + index
        # Each kind in turn across the campaign, so a short one still injects every kind.
        schedule = [kinds[(index * plan.faults_per_run + i) % len(kinds)] for i in range(plan.faults_per_run)]
        with open_store() as store:
            run = _Run(plan, seed, store, out / f"{_label(plan.knobs)}-seed-{seed}.jsonl", servers, pause)
            outcome = run.execute(schedule)
        result.runs.append(outcome)
        if on_run is not None:
            on_run(outcome)
    return result


def _available(kind: str, servers: ServerFaults | None, pause: SessionPause | None) -> bool:
    if kind in SERVER_FAULTS:
        return servers is not None and servers.servers == 3
    return pause is not None if kind == "pause" else True


def _label(knobs: Knobs) -> str:
    changed = [f"{k}={v}" for k, v in knobs.to_dict().items() if v != Knobs().to_dict()[k]]
    return "-".join(changed).replace("_", "-").lower() or "default"


class _Run:
    def __init__(self, plan: CampaignPlan, seed: int, store: ClusterStore, trace: Path,
                 servers: ServerFaults | None, pause: SessionPause | None) -> None:
        self.plan = plan
        self.store = store
        self.servers = servers
        self.pause_session = pause
        self.result = RunResult(seed, trace)
        self.rng = random.Random(f"zk-campaign-{seed}")
        self.checker = InvariantChecker(plan.knobs.truncation)
        self.writer = TraceWriter(trace)
        self.sim = Simulator(seed, plan.knobs, plan.config, self._sink, store=store)

    @property
    def cluster(self) -> Cluster:
        return self.sim.cluster

    def execute(self, schedule: list[str]) -> RunResult:
        try:
            self._steps(schedule)
        except ConnectionLostError as error:
            # The step's effect on the store is unknown, so the cluster's view of it is too: nothing after it
            # could be judged. The trace ends at the last step taken whole.
            self.result.ended_early = str(error)
        finally:
            self.writer.close()
        return self.result

    def _steps(self, schedule: list[str]) -> None:
        self.sim.bootstrap()
        chunk = self.plan.steps // (len(schedule) + 1)
        for kind in schedule:
            self._walk(chunk)
            self.result.faults[kind] += 1
            getattr(self, f"_{kind}")()
        self._walk(self.plan.steps - chunk * len(schedule))
        # The faults over, a calm phase: each progress property must then hold within its bound, so a cluster
        # the faults left stuck (a controller never elected, a partition without a leader) is a violation too.
        self._learn_expiries()
        calm_phase(self.cluster)

    def _sink(self, event: Event) -> None:
        self.writer.write(event)
        self.result.events += 1
        self.result.violations.extend(self.checker.step(event))

    def _walk(self, steps: int) -> None:
        """The simulator's random walk; a session ZooKeeper expired meanwhile is learnt of first."""
        self._learn_expiries()
        self.sim.run(steps)

    def _learn_expiries(self) -> None:
        """Sessions ZooKeeper ended on its own clock (a pause, an outage longer than the session timeout): each
        broker's client learns of it, as a `SessionExpire` step."""
        for broker in self.cluster.live_brokers():
            if not self.store.session_alive(self.cluster.managers[broker].session):
                self.cluster.expire_session(broker)

    # -- the ensemble ------------------------------------------------------------------------------------

    def _server_kill(self) -> None:
        assert self.servers is not None
        index = self.rng.randrange(self.servers.servers)
        self.servers.kill(index)
        try:
            self._walk(_AFTER_FAULT_STEPS)
        finally:
            self.servers.restart(index)

    def _quorum_loss(self) -> None:
        servers = self.servers
        assert servers is not None
        down = self.rng.sample(range(servers.servers), 2)
        for index in down:
            servers.kill(index)

        def restore_quorum() -> None:
            for index in down:
                servers.restart(index)

        restore = threading.Timer(_QUORUM_OUTAGE_SECONDS, restore_quorum)
        restore.start()
        try:
            self._walk(_AFTER_FAULT_STEPS)
        finally:
            restore.join()

    # -- sessions ----------------------------------------------------------------------------------------

    def _zombie(self) -> None:
        cluster = self.cluster
        holder = self._settled_controller()
        # The holder gets work: a broker fails (crash), which queues a BrokerChange on the holder's controller.
        others = [b for b in cluster.live_brokers() if b != holder]
        victim, successor = self.rng.sample(others, 2)
        cluster.crash(victim)
        started = time.perf_counter()
        cluster.expire_session(holder)
        if self._elect(successor, holder):
            self.result.failovers.append(time.perf_counter() - started)
        else:
            self.result.unelected += 1
        # The zombie acts on what it had queued before it takes the expiry notification.
        while cluster.managers[holder].alive and cluster.controllers[holder].queue:
            cluster.process_controller_event(holder)
        cluster.restart(victim)
        self._walk(_AFTER_FAULT_STEPS)

    def _settled_controller(self) -> int:
        """Every broker up and the cluster quiet, so a controller holds office with an empty queue. A controlled
        shutdown under way completes while the cluster quiets down: that broker is started again."""
        cluster = self.cluster
        while True:
            for broker in sorted(cluster.managers):
                if not cluster.managers[broker].alive:
                    cluster.restart(broker)
            cluster.stabilize()
            if len(cluster.live_brokers()) == len(cluster.managers):
                break
        holder = cluster.controller_holder()
        assert holder != NO_LEADER, "a quiet cluster with every broker up has a controller"
        return holder

    def _elect(self, successor: int, holder: int) -> bool:
        """The successor takes its events until it holds /controller; a tick lets a watch the store reports
        late be routed. False if nobody was elected within the bound (the successor never heard /controller
        go) or another broker was."""
        cluster = self.cluster
        for _ in range(_ELECTION_STEPS):
            current = cluster.controller_holder()
            if current not in (NO_LEADER, holder):
                return current == successor
            if cluster.controllers[successor].queue:
                cluster.process_controller_event(successor)
            else:
                cluster.tick()
        return False

    def _pause(self) -> None:
        assert self.pause_session is not None
        cluster = self.cluster
        holder = cluster.controller_holder()
        candidates = [b for b in cluster.live_brokers() if b != holder]
        if not candidates:
            return
        broker = self.rng.choice(candidates)
        self.pause_session(self.store, cluster.managers[broker].session)
        self._walk(_AFTER_FAULT_STEPS)


def zookeeper_stores(hosts: str, session_timeout: float = SESSION_TIMEOUT) -> StoreOpener:
    """Opens a store on the ZooKeeper at `hosts` per run, each under a fresh chroot, closed after the run."""

    @contextmanager
    def opened() -> Iterator[ClusterStore]:
        store = PausableStore(hosts, session_timeout=session_timeout)
        try:
            yield store
        finally:
            store.close()

    return opened


def pause_until_expired(store: ClusterStore, session: int) -> None:
    """The `SessionPause` of a store `zookeeper_stores` opened."""
    assert isinstance(store, PausableStore), "pauses need a store zookeeper_stores opened"
    store.pause(session)
