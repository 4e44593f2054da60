"""ZooKeeperStore against a real ZooKeeper: every port method, its errors, multi, a forced session expiry,
watches and their order, and a connection loss survived on a 3-server ensemble."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo import exceptions as zk
from kazoo.client import TransactionRequest

from kcm.impl.store import (
    BadVersionError,
    CheckVersion,
    Create,
    Delete,
    MultiError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SetData,
    Stat,
    WatchEvent,
)
from kcm.impl.zookeeper.ensemble import Ensemble
from kcm.impl.zookeeper.store import ConnectionLostError, ZooKeeperStore

pytestmark = pytest.mark.zk


@pytest.fixture
def store(zk_hosts: str) -> Iterator[ZooKeeperStore]:
    opened = ZooKeeperStore(zk_hosts, session_timeout=1.0)
    yield opened
    opened.close()


def test_reads_and_writes_have_zookeepers_results(store: ZooKeeperStore) -> None:
    a = store.open_session(1)
    store.create(a, "/topic", {"partitions": {"0": [1, 2]}})
    assert store.get("/topic") == ({"partitions": {"0": [1, 2]}}, Stat(0, 0))
    assert store.set(a, "/topic", [1], version=0) == Stat(1, 0)
    assert store.set(a, "/topic", "x") == Stat(2, 0)
    store.create(a, "/a/b/c", None, make_parents=True)
    assert store.get("/a") == (None, Stat(0, 0))
    assert store.children("/") == ["a", "topic"] and store.children("/a/b") == ["c"]
    store.create(a, "/live", 7, ephemeral=True)
    assert store.exists("/live") == Stat(0, a) and store.exists("/gone") is None
    store.delete(a, "/topic", version=2)
    assert store.exists("/topic") is None and store.drain_changes() >= {"/topic", "/a", "/a/b", "/a/b/c", "/live"}
    assert store.drain_changes() == set()


@pytest.mark.parametrize(("write", "error"), [
    (lambda s, a: s.create(a, "/n", 1), NodeExistsError),
    (lambda s, a: s.create(a, "/missing/child", 1), NoNodeError),
    (lambda s, a: s.create(a, "/e/child", 1), NoChildrenForEphemeralsError),
    (lambda s, a: s.set(a, "/n", 1, version=5), BadVersionError),
    (lambda s, a: s.set(a, "/missing", 1), NoNodeError),
    (lambda s, a: s.delete(a, "/n", version=5), BadVersionError),
    (lambda s, a: s.delete(a, "/n"), NotEmptyError),
    (lambda s, a: s.delete(a, "/missing"), NoNodeError),
    (lambda s, a: s.get("/missing"), NoNodeError),
    (lambda s, a: s.children("/missing"), NoNodeError),
])
def test_failures_raise_the_ports_errors(store: ZooKeeperStore, write: object, error: type[Exception]) -> None:
    a = store.open_session(1)
    store.create(a, "/n", 0)
    store.create(a, "/n/kid", 0)
    store.create(a, "/e", 0, ephemeral=True)
    with pytest.raises(error):
        write(store, a)  # type: ignore[operator]


def test_invalid_paths_and_the_root_are_caller_bugs(store: ZooKeeperStore) -> None:
    a = store.open_session(1)
    for bad in ("relative", "/trailing/", "/a//b"):
        with pytest.raises(ValueError):
            store.create(a, bad, 1)
    with pytest.raises(ValueError):
        store.delete(a, "/")


def test_a_multi_applies_all_or_nothing(store: ZooKeeperStore) -> None:
    a = store.open_session(1)
    store.create(a, "/epoch", 1)
    ops: list[Op] = [CheckVersion("/epoch", 0), Create("/p", {"leader": 1}, ephemeral=True), SetData("/p", 2),
                     Delete("/epoch")]
    assert store.multi(a, ops) == [Stat(0, 0), Stat(0, a), Stat(1, a), None]
    with pytest.raises(MultiError) as failed:
        store.multi(a, [Create("/q", 1), SetData("/p", 3, version=0), Delete("/p")])
    assert failed.value.index == 1 and isinstance(failed.value.cause, BadVersionError)
    assert store.exists("/q") is None and store.get("/p") == (2, Stat(1, a))


def test_an_expiry_forced_through_zookeeper_removes_the_ephemerals_at_once(store: ZooKeeperStore) -> None:
    broker, controller = store.open_session(1), store.open_session(2)
    store.create(broker, "/brokers", None)
    store.create(broker, "/brokers/1", {"host": "b1"}, ephemeral=True)
    store.children("/brokers", watch=controller)
    store.drain_changes()
    store.expire_session(broker)
    assert not store.session_alive(broker) and store.session_alive(controller)
    assert store.exists("/brokers/1") is None and store.drain_changes() == {"/brokers/1"}
    assert store.poll_watch_events() == [WatchEvent(controller, "/brokers", "children")]
    with pytest.raises(SessionExpiredError):
        store.create(broker, "/brokers/1", {}, ephemeral=True)
    with pytest.raises(SessionExpiredError):
        store.expire_session(broker)


def test_watches_are_one_shot_per_session_and_kind_and_come_in_zookeepers_order(store: ZooKeeperStore) -> None:
    a, b = store.open_session(1), store.open_session(2)
    assert store.exists("/c", watch=b) is None
    store.exists("/c", watch=b)  # the same data watch again: one event
    store.create(a, "/c", 0)
    store.get("/c", watch=a)
    store.get("/c", watch=b)
    store.children("/c", watch=b)
    store.set(a, "/c", 1)
    store.set(a, "/c", 2)  # the data watches fired on the first set: one-shot
    store.create(a, "/c/x", 0)
    store.delete(a, "/c/x")  # the child watch fired on the create
    assert store.has_watch_events()
    assert store.poll_watch_events() == [
        WatchEvent(a, "/c", "changed"),
        WatchEvent(b, "/c", "created"), WatchEvent(b, "/c", "changed"), WatchEvent(b, "/c", "children"),
    ]
    assert store.poll_watch_events() == [] and not store.has_watch_events()
    store.get("/c", watch=b)
    store.children("/c", watch=b)
    store.delete(a, "/c")
    # A data and a child watch on a deleted node: one "deleted", as from ZooKeeper.
    assert store.poll_watch_events() == [WatchEvent(b, "/c", "deleted")]


def test_a_watch_by_an_expired_session_is_refused(store: ZooKeeperStore) -> None:
    a = store.open_session(1)
    store.expire_session(a)
    with pytest.raises(SessionExpiredError):
        store.get("/", watch=a)


def test_a_session_survives_its_servers_death_on_an_ensemble(zk_ensemble3: Ensemble) -> None:
    store = ZooKeeperStore(zk_ensemble3.hosts, session_timeout=4.0)
    try:
        a = store.open_session(1)
        store.create(a, "/controller", {"brokerid": 1}, ephemeral=True)
        # Every client sits on the first host: killing it cuts them all off mid-session.
        zk_ensemble3.kill(0)
        assert store.set(a, "/controller", {"brokerid": 1, "epoch": 2}, version=0) == Stat(1, a)
        assert store.session_alive(a) and store.get("/controller") == ({"brokerid": 1, "epoch": 2}, Stat(1, a))
        zk_ensemble3.restart(0)
    finally:
        store.close()


def test_a_lost_quorum_ends_a_request_within_the_bound_and_closes_its_session(zk_ensemble3: Ensemble) -> None:
    store = ZooKeeperStore(zk_ensemble3.hosts, session_timeout=4.0, retry_bound=2.0)
    try:
        a = store.open_session(1)
        store.create(a, "/controller", {"brokerid": 1}, ephemeral=True)
        zk_ensemble3.kill(1)
        zk_ensemble3.kill(2)
        began = time.monotonic()
        with pytest.raises(ConnectionLostError, match="within 2 s"):
            store.set(a, "/controller", {"brokerid": 1, "epoch": 2})
        assert time.monotonic() - began < 4.0 and not store.session_alive(a)
        with pytest.raises(SessionExpiredError):
            store.set(a, "/controller", {})
    finally:
        store.close()
        zk_ensemble3.restart(1)
        zk_ensemble3.restart(2)


def _lose_a_response(monkeypatch: pytest.MonkeyPatch, owner: Any, method: str, *, applied: bool) -> None:
    """Make the next `method` request (kazoo's async form, which the store calls) of `owner` fail with
    ConnectionLoss, after it reached the server (`applied`: the response was lost) or before (the request was)."""
    real = getattr(owner, method)
    lost: list[bool] = []

    def once(*args: Any, **kwargs: Any) -> Any:
        if lost:
            return real(*args, **kwargs)
        lost.append(True)
        if applied:
            real(*args, **kwargs).get()
        raise zk.ConnectionLoss()

    monkeypatch.setattr(owner, method, once)


def test_a_write_resent_after_a_lost_response_is_recognised_as_its_own(
        store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch) -> None:
    a = store.open_session(1)
    client = store._sessions[a].client
    _lose_a_response(monkeypatch, client, "create_async", applied=True)
    store.create(a, "/controller", {"brokerid": 1}, ephemeral=True)  # NodeExists, owned by a: it was ours
    _lose_a_response(monkeypatch, client, "create_async", applied=True)
    store.create(a, "/topic", [1, 2])  # persistent, at version 0 with our data
    _lose_a_response(monkeypatch, client, "set_async", applied=True)
    assert store.set(a, "/topic", [2, 1], version=0) == Stat(1, 0)  # BadVersion, at version 1 with our data
    _lose_a_response(monkeypatch, client, "set_async", applied=True)
    assert store.set(a, "/topic", [3]) == Stat(3, 0)  # unconditional: re-sent as Kafka does, so applied twice
    _lose_a_response(monkeypatch, client, "delete_async", applied=True)
    store.delete(a, "/topic")  # NoNode: it was ours
    assert store.children("/") == ["controller"] and store.get("/controller")[1] == Stat(0, a)


def test_a_write_resent_after_a_loss_still_fails_when_it_was_not_its_own(
        store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = store.open_session(1), store.open_session(2)
    store.create(a, "/controller", {"brokerid": 1}, ephemeral=True)
    store.create(a, "/state", 1)
    _lose_a_response(monkeypatch, store._sessions[b].client, "create_async", applied=False)
    with pytest.raises(NodeExistsError):
        store.create(b, "/controller", {"brokerid": 2}, ephemeral=True)
    store.set(a, "/state", 2)
    _lose_a_response(monkeypatch, store._sessions[b].client, "set_async", applied=False)
    with pytest.raises(BadVersionError):
        store.set(b, "/state", 3, version=0)


def test_a_multi_resent_after_a_loss_that_fails_has_an_unknown_outcome(
        store: ZooKeeperStore, monkeypatch: pytest.MonkeyPatch) -> None:
    a = store.open_session(1)
    _lose_a_response(monkeypatch, TransactionRequest, "commit_async", applied=True)
    with pytest.raises(ConnectionLostError, match="unknown"):
        store.multi(a, [Create("/x", 1)])
    assert store.exists("/x") == Stat(0, 0)
