"""The simulator's incremental bookkeeping against the definitions it stands in for: the trace's deltas,
folded, against a fresh abstraction of the whole cluster; the network's queues per connection against a
scan of every message in flight."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kcm.impl.abstraction import Abstraction
from kcm.impl.messages import Envelope, FetchRequest, StopReplicaResponse
from kcm.impl.sim.cluster import Cluster
from kcm.impl.sim.network import Network
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.impl.store import InMemoryStore
from kcm.spec.trace.format import Event, apply_event, empty_state
from kcm.spec.vocabulary import Knobs


def _pruned(value: Any) -> Any:
    """A state without the empty maps that deleted leaves leave behind in a fold."""
    if not isinstance(value, dict):
        return value
    pruned = {key: _pruned(inner) for key, inner in value.items()}
    return {key: inner for key, inner in pruned.items() if inner != {}}


def _fresh_state(cluster: Cluster) -> dict[str, Any]:
    """The whole state, as an abstraction that has never seen the cluster reads it."""
    for manager in cluster.managers.values():
        manager.dirty.update(manager.replicas)
    for controller in cluster.controllers.values():
        if controller.ctx is not None:
            controller.ctx.dirty.update(controller.ctx.partition_states, controller.ctx.replica_states)
    assert isinstance(cluster.store, InMemoryStore)  # the embedded store alone lists every node
    every_path = set(cluster.store.dump())
    snapshot = Abstraction().delta(cluster.store, every_path, cluster.managers, cluster.controllers, cluster.partitions)
    state = empty_state()
    apply_event(state, {"state": snapshot, "full": True})
    pruned: dict[str, Any] = _pruned(state)
    return pruned


@pytest.mark.parametrize(
    ("seed", "knobs", "config"),
    [
        (1, Knobs(), SimConfig()),
        (2, Knobs(truncation="hw"), SimConfig()),
        (3, Knobs(), SimConfig(brokers=5, partitions=4)),
    ],
)
def test_folded_deltas_equal_a_fresh_abstraction(seed: int, knobs: Knobs, config: SimConfig) -> None:
    folded = empty_state()

    def fold(event: Event) -> None:
        apply_event(folded, event)

    simulator = Simulator(seed, knobs, config, fold)
    simulator.bootstrap()
    for _ in range(40):
        simulator.run(50)
        # A fresh snapshot leaves the live abstraction's dirty marks as the step left them: empty.
        assert _pruned(folded) == _fresh_state(simulator.cluster)


def _naive_ready(network: Network, now: int) -> list[int]:
    heads: dict[tuple[int, int], int] = {}
    for index, flight in enumerate(network.in_flight):
        heads.setdefault((flight.envelope.src, flight.envelope.dst), index)
    return [index for index in heads.values() if network.in_flight[index].ready_at <= now]


def test_network_queues_follow_every_change_of_the_messages_in_flight() -> None:
    rng = random.Random(7)
    network = Network(random.Random(8), max_delay=2)
    now = 0
    for _ in range(3000):
        move = rng.random()
        if move < 0.35:
            src, dst = rng.randint(1, 4), rng.randint(1, 4)
            message = FetchRequest("t-0", src, 0, 0) if rng.random() < 0.5 else StopReplicaResponse(
                src, 1, ("t-0",), False, "")
            network.send([Envelope(src, dst, message)], now)
        elif move < 0.55 and network.ready(now):
            network.take(rng.choice(network.ready(now)))
        elif move < 0.65 and network.lossy():
            network.take(rng.choice(network.lossy()))
        elif move < 0.75 and network.in_flight:
            network.duplicate(rng.randrange(len(network.in_flight)), now)
        elif move < 0.8:
            network.take_oldest()
        elif move < 0.83:
            network.disconnect(rng.randint(1, 4))
        else:
            now += 1
        assert network.ready(now) == _naive_ready(network, now)


def test_a_duplicate_travels_right_behind_its_original() -> None:
    """A resent request never overtakes what its sender queued after it (the deviation seed 1098 showed:
    a LeaderAndIsr copy arriving after its topic's StopReplica recreated a deleted replica)."""
    network = Network(random.Random(1), max_delay=0)
    first, second = (Envelope(1, 2, StopReplicaResponse(1, 1, (p,), False, "")) for p in ("a-0", "b-0"))
    network.send([first, second], 0)
    network.duplicate(0, 0)
    assert [network.take(network.ready(0)[0]) for _ in range(3)] == [first, first, second]
