"""The machine of replication across leader changes (`ReplicationMachine`), at the grain leader changes
happen at: a fault, the controller's whole reaction, then the followers keeping up or falling behind. It
is the machine that finds the divergence cases of KIP-101, KIP-279 and KIP-320."""

from __future__ import annotations

from functools import partial
from typing import ClassVar, Final

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from kcm.conformance.explore import danger
from kcm.conformance.explore.machine import PICK, Machine, pick
from kcm.impl.design import REPLICA_LAG_TICKS
from kcm.impl.replica_manager import FOLLOWER, LEADER, REQUEST_TIMEOUT_TICKS

# A whole reaction of the controller is a bounded number of steps; more means the implementation loops.
MAX_CONTROL_STEPS: Final = 10_000
# Fetch rounds a catch-up may take: a truncation, the records, the HW, and some to spare.
MAX_CATCH_UP_ROUNDS: Final = 8
# Replicas of the replication machine's topic: as in the TLC models MCkip101, MCkip279 and MCkip320.
REPLICATION_FACTOR: Final = 3


class ReplicationMachine(Machine):
    """Replication across leader changes, at the grain leader changes happen at. It starts where the TLC
    models of the divergence cases start (their `InitStable`): a settled cluster with one topic of three
    replicas whose controller is the last choice for leader. Clients write to the leader; a follower catches
    up with the leader it knows; a broker other than the controller crashes, restarts, or bounces (crashes
    and restarts before the controller notices). After each fault the controller reacts at once (its events
    processed, its requests delivered), and then the followers either keep up (each fetches, those behind
    catch up) or fall behind (none fetches): slow followers and fast leader changes.

    One network fault besides: a slow link, on which the controller's requests to one broker wait while the
    rest of the cluster goes on; that broker still fetches from the leader it knows and answers fetches. The
    link stays slow until it heals or the broker crashes (its connections close, and the requests waiting on
    them with them). That is how a follower misses leader changes, and how a leader takes a request after
    the state it carries has moved on.

    The controller itself may go too (crashed, or its session expired), and the followers may fall out of
    sync for longer than the lag bound, which the leader answers by shrinking its ISR."""

    labels: ClassVar[tuple[str, ...]] = danger.REPLICATION_LABELS

    def __init__(self) -> None:
        super().__init__()
        self.slow: set[int] = set()
        self.measured = 0

    def scores(self) -> dict[str, int]:
        return danger.replication_scores(self.cluster)

    def observe(self, scores: dict[str, int]) -> None:
        """A ladder's last rung also scores how early it was reached: one fetch short of the divergence,
        an example that got there on its last rule has no room left for that fetch, and hypothesis can only
        mutate an example, not lengthen it past the step budget."""
        self.measured += 1
        for label, score in scores.items():
            if score == danger.TOP_RUNG[label] and self.danger[label] < score:
                self.danger[label] = score + 1 / (1 + self.measured)
            elif score > self.danger[label]:
                self.danger[label] = score

    def _deliverable(self) -> list[int]:
        holder = self.cluster.controller_holder()
        in_flight = self.cluster.network.in_flight
        return [i for i in self.cluster.network.ready(self.cluster.now)
                if in_flight[i].envelope.src != holder or in_flight[i].envelope.dst not in self.slow]

    def _fetchers(self) -> list[tuple[int, str]]:
        """Followers of a live broker: towards one that is down, a follower's fetcher waits to reconnect."""
        managers = self.cluster.managers
        return [(b, p) for b, p in super()._fetchers() if managers[managers[b].replicas[p].leader_id].alive]

    def _waiting(self) -> bool:
        """A live follower still waits for an answer that will never come: its request died with a crash."""
        return any(self.cluster.managers[b].replicas[p].inflight_since is not None
                   for b, p in self._replicas_in(FOLLOWER))

    def _victims(self) -> list[int]:
        holder = self.cluster.controller_holder()
        return [b for b in self._live() if b != holder]

    def _down(self) -> list[int]:
        return [b for b, m in self.cluster.managers.items() if not m.alive]

    def _react(self) -> None:
        """The controller's whole reaction: every queued event, then every message it can deliver (the
        requests, the replies to them, and anything a slow link no longer holds), in order."""
        for _ in range(MAX_CONTROL_STEPS):
            queued = self._queued()
            if queued:
                broker = queued[0]
                self.step(f"process-controller {broker}", partial(self.cluster.process_controller_event, broker))
                continue
            ready = self._deliverable()
            if not ready:
                return
            self.step(f"deliver index={ready[0]}", partial(self.cluster.deliver, ready[0]))
        raise RuntimeError(f"the controller did not settle within {MAX_CONTROL_STEPS} steps")

    def _settle(self) -> None:
        """The followers keep up with the leader change: each fetches once from the leader it knows, in
        broker order, then those behind catch up (where `_react` alone is a change they fall behind on). A
        follower behind a slow link still fetches from its old leader, which may refuse or answer."""
        for broker, partition in self._fetchers():
            if (broker, partition) in self._fetchers():
                self._catch_up(broker, partition)
        for _ in range(MAX_CONTROL_STEPS):
            self._react()
            behind = [(b, p) for b, p in self._fetchers() if self.cluster.behind(b, p)]
            if not behind:
                return
            self._catch_up(*behind[0])
        raise RuntimeError(f"the followers did not settle within {MAX_CONTROL_STEPS} steps")

    def _catch_up(self, broker: int, partition: str) -> None:
        for _ in range(MAX_CATCH_UP_ROUNDS):
            self._fetch_round(broker, partition)
            if (broker, partition) not in self._fetchers() or not self.cluster.behind(broker, partition):
                return

    @initialize()
    def stable_start(self) -> None:
        self.step("stabilize", self.cluster.stabilize)
        holder = self.cluster.controller_holder()
        others = [b for b in sorted(self.cluster.managers) if b != holder]
        replicas = (*others[:REPLICATION_FACTOR - 1], holder)
        self.step(f"create-topic t0 0={','.join(map(str, replicas))}",
                  lambda: self.cluster.create_topic("t0", {0: replicas}))
        self.step("stabilize", self.cluster.stabilize)

    @precondition(lambda self: self._replicas_in(LEADER))
    @rule(index=PICK)
    def produce(self, index: int) -> None:
        broker, partition = pick(index, self._replicas_in(LEADER))
        self.step(f"produce broker={broker} partition={partition}", lambda: self.cluster.produce(broker, partition))

    @precondition(lambda self: self._fetchers())
    @rule(index=PICK)
    def catch_up(self, index: int) -> None:
        """A follower's fetch rounds until it has nothing left to fetch from a leader of its epoch (one
        round at least: a follower behind on leader changes still fetches from the leader it knows)."""
        self._catch_up(*pick(index, self._fetchers()))

    @precondition(lambda self: self._victims())
    @rule(index=PICK, bounce=st.booleans(), settle=st.booleans())
    def crash(self, index: int, bounce: bool, settle: bool) -> None:
        broker = pick(index, self._victims())
        self.step(f"crash {broker}", partial(self.cluster.crash, broker))
        self.slow.discard(broker)  # its connections closed, and the requests waiting on them with them
        if bounce:
            self.step(f"restart {broker}", partial(self.cluster.restart, broker))
        self._react()
        if self._waiting():
            self._run_clock(REQUEST_TIMEOUT_TICKS)
        if settle:
            self._settle()

    def _run_clock(self, ticks: int) -> None:
        def run() -> None:
            for _ in range(ticks):
                self.cluster.tick()
        self.step(f"tick {ticks}", run)

    @precondition(lambda self: self._down())
    @rule(index=PICK, settle=st.booleans())
    def restart(self, index: int, settle: bool) -> None:
        broker = pick(index, self._down())
        self.step(f"restart {broker}", partial(self.cluster.restart, broker))
        self._react()
        if settle:
            self._settle()

    @precondition(lambda self: self.config.slow_links and not self.slow and self._live())
    @rule(index=PICK)
    def slow_link(self, index: int) -> None:
        broker = pick(index, self._live())
        self.slow.add(broker)
        self.step(f"# from here the controller's requests to broker {broker} wait", lambda: None)

    @precondition(lambda self: self.slow)
    @rule(settle=st.booleans())
    def heal(self, settle: bool) -> None:
        """The slow link recovers: what waited on it arrives, in the order it was sent."""
        broker = self.slow.pop()
        self.step(f"# from here the controller's requests to broker {broker} go through", lambda: None)
        self._react()
        if settle:
            self._settle()

    def _leaders_with_followers(self) -> list[tuple[int, str]]:
        managers = self.cluster.managers
        return [(b, p) for b, p in self._replicas_in(LEADER) if len(managers[b].replicas[p].isr) > 1]

    @precondition(lambda self: self._leaders_with_followers())
    @rule(index=PICK)
    def fall_out_of_sync(self, index: int) -> None:
        """No follower fetches for longer than the lag bound, and a leader drops the laggards from its ISR
        (the controller learns it from the ISR change notification)."""
        broker, partition = pick(index, self._leaders_with_followers())
        self._run_clock(REPLICA_LAG_TICKS + 1)
        self.step(f"shrink-isr broker={broker} partition={partition}",
                  lambda: self.cluster.shrink_isr(broker, partition))
        self._react()

    @precondition(lambda self: self.cluster.controller_holder() in self._live())
    @rule(expire=st.booleans(), settle=st.booleans())
    def controller_failover(self, expire: bool, settle: bool) -> None:
        """The controller goes, crashed or its session expired (it stays up as a broker), and another
        broker takes over with what it loads from the store."""
        holder = self.cluster.controller_holder()
        if expire:
            self.step(f"expire-session {holder}", lambda: self.cluster.expire_session(holder))
        else:
            self.step("crash-controller", self.cluster.crash_controller)
            self.slow.discard(holder)
        self._react()
        if settle:
            self._settle()
