"""The embedded store against ZooKeeper 3.8 (marker `zk`): the differential machine
(`kcm.conformance.explore.store_machine`) for KCM_ZK_EXAMPLES examples (default 200) of at most KCM_ZK_STEPS
rules (default 25); proof that it catches an embedded store that diverges; and one test per difference it
found (docs/zookeeper.md, "Embedded store vs ZooKeeper"), each on both stores."""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial

import pytest

from kcm.conformance.explore.relay import Relay
from kcm.conformance.explore.store_machine import Pair, StoreDivergence, run_store_machine
from kcm.impl.store import CoordinationStore, InMemoryStore, WatchEvent
from kcm.impl.zookeeper.store import ZooKeeperStore

pytestmark = pytest.mark.zk

EXAMPLES = int(os.environ.get("KCM_ZK_EXAMPLES", "200"))
STEPS = int(os.environ.get("KCM_ZK_STEPS", "25"))


def test_the_embedded_store_answers_as_zookeeper(zk_hosts: str) -> None:
    run = run_store_machine(zk_hosts, EXAMPLES, STEPS)
    assert run.divergence is None, run.divergence
    assert run.tally.counted == EXAMPLES and run.tally.commands > EXAMPLES * 5


class _NoChildEvents:
    """An embedded store that forgets to report "children" events: the machine must notice."""

    def __init__(self) -> None:
        self._store = InMemoryStore()

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    def poll_watch_events(self) -> list[WatchEvent]:
        return [event for event in self._store.poll_watch_events() if event.kind != "children"]


def _no_child_events() -> CoordinationStore:
    store: CoordinationStore = _NoChildEvents()  # type: ignore[assignment]  # the rest by delegation
    return store


def test_an_embedded_store_that_diverges_is_caught(zk_hosts: str) -> None:
    # The first failure ends the run; the budget is the default one, whatever KCM_ZK_EXAMPLES says.
    run = run_store_machine(zk_hosts, 200, 25, shrink=False, embedded=_no_child_events)
    assert run.divergence is not None and "'children'" in run.divergence.splitlines()[0]


@pytest.fixture
def real(zk_hosts: str) -> Iterator[ZooKeeperStore]:
    store = ZooKeeperStore(zk_hosts)
    yield store
    store.close()


def _java_hash(text: str) -> int:
    """Java's String.hashCode, spread as java.util.HashMap.hash spreads it."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value ^ (value >> 16)


def _hash_set_order(paths: list[str], capacity: int) -> list[str]:
    """The order a java.util.HashSet of `capacity` buckets iterates `paths`, added in this order (no two in
    a bucket beyond the list's order, no resize)."""
    return sorted(paths, key=lambda path: (_java_hash(path) & (capacity - 1), paths.index(path)))


def _create_ephemeral(store: CoordinationStore, session: int, path: str) -> None:
    store.create(session, path, 0, ephemeral=True)


def _watch_data(store: CoordinationStore, session: int, path: str) -> None:
    store.exists(path, watch=session)


def test_an_expiry_deletes_the_ephemerals_in_zookeepers_hash_order(real: ZooKeeperStore) -> None:
    """ZooKeeper 3.8 deletes an expired session's ephemerals in the order of a HashSet of their server paths
    (PrepRequestProcessor, closeSession: a clone of DataTree.getEphemerals, 16 buckets for six paths), the
    embedded store in path order; the machine compares the events of an expiry per session as a set."""
    pair = Pair(real)
    owner, watcher = pair.open_session(1), pair.open_session(2)
    names = ["/c", "/d", "/e", "/f", "/g", "/h"]
    for name in names:
        pair.call(f"create {name}", partial(_create_ephemeral, session=owner, path=name))
        pair.call(f"exists {name}", partial(_watch_data, session=watcher, path=name))
    pair.call("expire", lambda store: store.expire_session(owner))

    assert pair.embedded.poll_watch_events() == [WatchEvent(watcher, name, "deleted") for name in names]
    server_paths = [real.chroot + name for name in names]
    expected = [path[len(real.chroot):] for path in _hash_set_order(server_paths, 16)]
    assert real.poll_watch_events() == [WatchEvent(watcher, name, "deleted") for name in expected]


def _same_changes_in_another_order() -> Pair:
    """Two embedded stores that make the same changes, watched the same way, in a different order."""
    pair = Pair(InMemoryStore())
    owner, watcher = pair.open_session(1), pair.open_session(2)
    pair.call("create", lambda store: store.create(owner, "/a", 0))
    pair.call("watch", lambda store: store.exists("/a", watch=watcher))
    pair.call("watch", lambda store: store.children("/a", watch=watcher))
    pair.embedded.create(owner, "/a/b", 0)
    pair.embedded.set(owner, "/a", 1)
    pair.real.set(owner, "/a", 1)
    pair.real.create(owner, "/a/b", 0)
    return pair


def test_the_machine_tolerates_another_order_only_where_told() -> None:
    """An expiry's events are compared as a set per session (`ordered=False`); every other poll in order."""
    with pytest.raises(StoreDivergence):
        _same_changes_in_another_order().poll()
    _same_changes_in_another_order().poll(ordered=False)


def test_watches_survive_a_connection_loss(zk_hosts: str) -> None:
    """A client that loses its connection and reconnects within the session timeout keeps its session, its
    ephemerals and its watches, as ZooKeeper's Java client keeps them (it sends SetWatches on reconnecting)."""
    host, _, port = zk_hosts.split(",")[0].rpartition(":")
    with Relay((host, int(port))) as relay:
        real = ZooKeeperStore(f"127.0.0.1:{relay.port}")
        pair = Pair(real)
        try:
            s = pair.open_session(1)
            pair.call("create", lambda store: store.create(s, "/a", 0, ephemeral=True))
            pair.call("watch", lambda store: store.get("/a", watch=s))
            pair.call("watch", lambda store: store.exists("/b", watch=s))
            relay.wait_for_connections(relay.cut(), 10.0)
            pair.call("set", lambda store: store.set(s, "/a", 1))
            pair.call("create", lambda store: store.create(s, "/b", 0))
            pair.poll()
            pair.compare_sessions()
            pair.compare_trees()
        finally:
            real.close()


def test_changes_made_while_a_client_is_cut_off_arrive_as_set_watches_reports_them(zk_hosts: str) -> None:
    """What the embedded store, having no connections, cannot show: a watch whose node changed while its
    client was cut off fires once it is back, as ZooKeeper's SetWatches fires it: a node deleted and created
    again is `changed`, and an exists watch misses a node created and deleted meanwhile (it stays set)."""
    host, _, port = zk_hosts.split(",")[0].rpartition(":")
    with Relay((host, int(port))) as relay:
        cut_off = ZooKeeperStore(f"127.0.0.1:{relay.port}")
        writer = ZooKeeperStore(zk_hosts, chroot=cut_off.chroot)
        try:
            watcher, other = cut_off.open_session(1), writer.open_session(2)
            writer.create(other, "/a", 0)
            cut_off.get("/a", watch=watcher)
            cut_off.exists("/b", watch=watcher)
            # held off until the four writes are done, or a quick reconnect would see some of them live
            relay.cut(hold=True)
            writer.delete(other, "/a")
            writer.create(other, "/a", 1)
            writer.create(other, "/b", 0)
            writer.delete(other, "/b")
            relay.release()
            # A poll waits for the events of its own store's writes: one write brings the others' too.
            cut_off.create(watcher, "/c", 0)
            assert cut_off.poll_watch_events() == [WatchEvent(watcher, "/a", "changed")]
            writer.create(other, "/b", 2)
            cut_off.create(watcher, "/d", 0)
            assert cut_off.poll_watch_events() == [WatchEvent(watcher, "/b", "created")]
        finally:
            writer.close()
            cut_off.close()
