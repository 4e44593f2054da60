"""Tests of the coordination-store port's in-memory implementation against ZooKeeper semantics."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcm.impl.store import (
    BadVersionError,
    CheckVersion,
    CoordinationStore,
    Create,
    Delete,
    InMemoryStore,
    MultiError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SessionExpiredError,
    SetData,
    Stat,
    StoreError,
    WatchEvent,
)

PARTITION_STATE = "/brokers/topics/t/partitions/0/state"


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


def test_in_memory_store_satisfies_the_port() -> None:
    port: CoordinationStore = InMemoryStore()
    assert port.open_session(1) == 1
    assert port.open_session(2) == 2


# Basic node operations


def test_create_get_set_delete_track_versions(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", {"x": 1})
    assert store.get("/a") == ({"x": 1}, Stat(0, 0))
    assert store.set(s, "/a", {"x": 2}) == Stat(1, 0)
    assert store.set(s, "/a", {"x": 3}, version=1) == Stat(2, 0)
    assert store.get("/a") == ({"x": 3}, Stat(2, 0))
    store.delete(s, "/a", version=2)
    assert store.exists("/a") is None
    assert store.dump() == {}


def test_data_is_stored_by_reference(store: InMemoryStore) -> None:
    s = store.open_session(0)
    value = {"leader": 1}
    store.create(s, "/a", value)
    assert store.get("/a")[0] is value


def test_bad_version_changes_nothing(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", 1)
    with pytest.raises(BadVersionError) as raised:
        store.set(s, "/a", 2, version=5)
    assert raised.value.path == "/a"
    with pytest.raises(BadVersionError):
        store.delete(s, "/a", version=1)
    assert store.dump() == {"/a": (1, 0)}


def test_missing_nodes_raise_no_node(store: InMemoryStore) -> None:
    s = store.open_session(0)
    with pytest.raises(NoNodeError):
        store.get("/missing")
    with pytest.raises(NoNodeError):
        store.children("/missing")
    with pytest.raises(NoNodeError):
        store.set(s, "/missing", 1)
    with pytest.raises(NoNodeError):
        store.delete(s, "/missing")
    with pytest.raises(NoNodeError) as raised:
        store.create(s, "/missing/child", 1)
    assert raised.value.path == "/missing/child"


def test_creating_twice_raises_node_exists(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", 1)
    with pytest.raises(NodeExistsError):
        store.create(s, "/a", 2)
    with pytest.raises(NodeExistsError):
        store.create(s, "/", 2)
    assert store.get("/a")[0] == 1


def test_deleting_a_parent_raises_not_empty(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a/b", 1, make_parents=True)
    with pytest.raises(NotEmptyError):
        store.delete(s, "/a")
    store.delete(s, "/a/b")
    store.delete(s, "/a")
    assert store.dump() == {}


def test_make_parents_creates_persistent_empty_parents(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a/b/c", 7, ephemeral=True, make_parents=True)
    assert store.dump() == {"/a": (None, 0), "/a/b": (None, 0), "/a/b/c": (7, 0)}
    assert store.exists("/a/b") == Stat(0, 0)
    assert store.exists("/a/b/c") == Stat(0, s)
    with pytest.raises(NodeExistsError):
        store.create(s, "/a/b/c", 8, make_parents=True)


def test_children_are_sorted_names(store: InMemoryStore) -> None:
    s = store.open_session(0)
    for name in ("c", "a", "b"):
        store.create(s, f"/p/{name}", None, make_parents=True)
    assert store.children("/p") == ["a", "b", "c"]
    assert store.children("/") == ["p"]


def test_ephemeral_nodes_cannot_have_children(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/e", 1, ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        store.create(s, "/e/child", 1)
    with pytest.raises(NoChildrenForEphemeralsError):
        store.create(s, "/e/x/y", 1, make_parents=True)
    assert store.dump() == {"/e": (1, 0)}


@pytest.mark.parametrize("path", ["", "a", "/a/", "//a", "/a//b", "/a/./b", "/..", "/a\0"])
def test_invalid_paths_are_caller_bugs(store: InMemoryStore, path: str) -> None:
    s = store.open_session(0)
    with pytest.raises(ValueError):
        store.create(s, path, 1)
    with pytest.raises(ValueError):
        store.exists(path)


def test_root_cannot_be_deleted(store: InMemoryStore) -> None:
    s = store.open_session(0)
    with pytest.raises(ValueError):
        store.delete(s, "/")


def test_drain_changes_reports_written_paths_once(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a/b", 1, ephemeral=True, make_parents=True)
    store.create(s, "/c", 1)
    assert store.drain_changes() == {"/a", "/a/b", "/c"}
    store.set(s, "/c", 2)
    store.delete(s, "/c")
    with pytest.raises(MultiError):
        store.multi(s, [SetData("/a", 1), Create("/a", 1)])
    store.get("/a", watch=s)
    assert store.drain_changes() == {"/c"}
    store.expire_session(s)
    assert store.drain_changes() == {"/a/b"}
    assert store.drain_changes() == set()


# Sessions


def test_session_ids_count_from_one_and_expire(store: InMemoryStore) -> None:
    s1, s2 = store.open_session(10), store.open_session(20)
    assert (s1, s2) == (1, 2)
    store.expire_session(s1)
    assert not store.session_alive(s1)
    assert store.session_alive(s2)
    assert not store.session_alive(99)


def test_ephemerals_vanish_on_expiry_firing_watches_in_path_order(store: InMemoryStore) -> None:
    broker, controller = store.open_session(1), store.open_session(0)
    store.create(controller, "/brokers/ids", None, make_parents=True)
    for broker_id in (2, 1):
        store.create(broker, f"/brokers/ids/{broker_id}", {"host": "h"}, ephemeral=True)
    store.exists("/brokers/ids/1", watch=controller)
    store.exists("/brokers/ids/2", watch=controller)
    store.children("/brokers/ids", watch=controller)
    store.poll_watch_events()

    store.expire_session(broker)

    assert store.children("/brokers/ids") == []
    # The child watch is one-shot, so only the first deletion reports on the parent.
    assert store.poll_watch_events() == [
        WatchEvent(controller, "/brokers/ids/1", "deleted"),
        WatchEvent(controller, "/brokers/ids", "children"),
        WatchEvent(controller, "/brokers/ids/2", "deleted"),
    ]


def test_expired_session_cannot_write_or_watch(store: InMemoryStore) -> None:
    s, other = store.open_session(0), store.open_session(1)
    store.create(other, "/a", 1)
    store.expire_session(s)
    with pytest.raises(SessionExpiredError):
        store.create(s, "/b", 1)
    with pytest.raises(SessionExpiredError):
        store.set(s, "/a", 2)
    with pytest.raises(SessionExpiredError):
        store.delete(s, "/a")
    with pytest.raises(SessionExpiredError):
        store.multi(s, [SetData("/a", 2)])
    with pytest.raises(SessionExpiredError):
        store.get("/a", watch=s)
    with pytest.raises(SessionExpiredError):
        store.expire_session(s)
    with pytest.raises(SessionExpiredError):
        store.create(42, "/c", 1)
    assert store.get("/a") == (1, Stat(0, 0))
    assert store.dump() == {"/a": (1, 0)}


def test_expired_sessions_pending_watches_are_dropped(store: InMemoryStore) -> None:
    s1, s2 = store.open_session(1), store.open_session(2)
    store.create(s2, "/a", 1)
    store.get("/a", watch=s1)
    store.expire_session(s1)
    store.set(s2, "/a", 2)
    assert store.poll_watch_events() == []


# Watches


def test_data_watch_is_one_shot_even_if_set_twice(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", 1)
    store.get("/a", watch=s)
    store.get("/a", watch=s)
    store.exists("/a", watch=s)
    store.set(s, "/a", 2)
    store.set(s, "/a", 3)
    assert store.poll_watch_events() == [WatchEvent(s, "/a", "changed")]
    assert store.poll_watch_events() == []


def test_watches_fire_for_every_session_in_ascending_order(store: InMemoryStore) -> None:
    s1, s2, s3 = (store.open_session(i) for i in range(3))
    store.create(s1, "/a", 1)
    store.get("/a", watch=s3)
    store.get("/a", watch=s1)
    store.get("/a", watch=s2)
    store.set(s1, "/a", 2)
    assert store.poll_watch_events() == [
        WatchEvent(s1, "/a", "changed"),
        WatchEvent(s2, "/a", "changed"),
        WatchEvent(s3, "/a", "changed"),
    ]


def test_delete_fires_own_watches_then_parent_child_watch(store: InMemoryStore) -> None:
    s1, s2 = store.open_session(1), store.open_session(2)
    store.create(s1, "/p/c", 1, make_parents=True)
    store.children("/p", watch=s1)
    store.get("/p/c", watch=s2)
    store.children("/p/c", watch=s2)  # one session, two watches: one "deleted"
    store.exists("/p/c", watch=s1)
    store.delete(s1, "/p/c")
    assert store.poll_watch_events() == [
        WatchEvent(s1, "/p/c", "deleted"),
        WatchEvent(s2, "/p/c", "deleted"),
        WatchEvent(s1, "/p", "children"),
    ]


def test_child_watch_fires_on_child_creation_once(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/p", None)
    assert store.children("/p", watch=s) == []
    store.create(s, "/p/a", 1)
    store.create(s, "/p/b", 1)
    store.set(s, "/p", 2)  # data changes are not child events
    assert store.poll_watch_events() == [WatchEvent(s, "/p", "children")]


def test_exists_watch_observes_creation(store: InMemoryStore) -> None:
    s1, s2 = store.open_session(1), store.open_session(2)
    assert store.exists("/controller", watch=s2) is None
    store.create(s1, "/controller", {"brokerid": 1}, ephemeral=True)
    assert store.poll_watch_events() == [WatchEvent(s2, "/controller", "created")]


def test_get_on_missing_node_sets_no_watch(store: InMemoryStore) -> None:
    s = store.open_session(0)
    with pytest.raises(NoNodeError):
        store.get("/a", watch=s)
    store.create(s, "/a", 1)
    assert store.poll_watch_events() == []


# Multi


def test_multi_failing_check_changes_nothing(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", 1)
    store.create(s, "/b", 1)
    store.get("/b", watch=s)
    with pytest.raises(MultiError) as raised:
        store.multi(s, [SetData("/b", 2), CheckVersion("/a", 3), Create("/c", 1)])
    assert raised.value.index == 1
    assert isinstance(raised.value.cause, BadVersionError)
    assert raised.value.path == "/a"
    assert store.dump() == {"/a": (1, 0), "/b": (1, 0)}
    assert store.poll_watch_events() == []


def test_multi_ops_see_the_effects_of_earlier_ops(store: InMemoryStore) -> None:
    s = store.open_session(0)
    results = store.multi(
        s,
        [
            Create("/a", None),
            Create("/a/b", 1, ephemeral=True),
            SetData("/a/b", 2, version=0),
            CheckVersion("/a/b", 1),
            Delete("/a/b", version=1),
            Create("/a/c", 3),
        ],
    )
    assert results == [Stat(0, 0), Stat(0, s), Stat(1, s), Stat(1, s), None, Stat(0, 0)]
    assert store.dump() == {"/a": (None, 0), "/a/c": (3, 0)}


def test_multi_refuses_a_delete_made_non_empty_by_an_earlier_create(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", None)
    with pytest.raises(MultiError) as raised:
        store.multi(s, [Create("/a/b", 1), Delete("/a")])
    assert raised.value.index == 1
    assert isinstance(raised.value.cause, NotEmptyError)
    assert store.dump() == {"/a": (None, 0)}


def test_multi_can_recreate_a_node_it_deleted(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", 1)
    store.set(s, "/a", 2)
    assert store.multi(s, [Delete("/a"), Create("/a", 3)]) == [None, Stat(0, 0)]
    assert store.dump() == {"/a": (3, 0)}


def test_multi_refuses_a_child_of_an_ephemeral_it_created(store: InMemoryStore) -> None:
    s = store.open_session(0)
    with pytest.raises(MultiError) as raised:
        store.multi(s, [Create("/e", 1, ephemeral=True), Create("/e/c", 2)])
    assert raised.value.index == 1
    assert isinstance(raised.value.cause, NoChildrenForEphemeralsError)
    assert store.dump() == {}


def test_empty_multi_does_nothing(store: InMemoryStore) -> None:
    s = store.open_session(0)
    assert store.multi(s, []) == []


def test_multi_fires_watches_in_op_order(store: InMemoryStore) -> None:
    s = store.open_session(0)
    store.create(s, "/a", 1)
    store.get("/a", watch=s)
    store.exists("/b", watch=s)
    store.multi(s, [Create("/b", 1), SetData("/a", 2)])
    assert store.poll_watch_events() == [WatchEvent(s, "/b", "created"), WatchEvent(s, "/a", "changed")]


def test_fenced_controller_cannot_write_partition_state(store: InMemoryStore) -> None:
    old, new = store.open_session(1), store.open_session(2)
    store.create(old, "/controller_epoch", 1)
    store.create(old, PARTITION_STATE, {"leader": 1, "leader_epoch": 0}, make_parents=True)
    epoch_version = store.get("/controller_epoch")[1].version
    state_version = store.get(PARTITION_STATE)[1].version

    store.set(new, "/controller_epoch", 2, version=epoch_version)

    ops: list[Op] = [
        CheckVersion("/controller_epoch", epoch_version),
        SetData(PARTITION_STATE, {"leader": 3, "leader_epoch": 1}, state_version),
    ]
    with pytest.raises(MultiError) as raised:
        store.multi(old, ops)
    assert raised.value.index == 0
    assert isinstance(raised.value.cause, BadVersionError)
    assert store.get(PARTITION_STATE) == ({"leader": 1, "leader_epoch": 0}, Stat(0, 0))


# Differential test against a naive reference model


class _Model:
    """A deliberately naive ZooKeeper: a flat dict scanned for children, and multi by copy-and-discard."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[object, int, int]] = {"/": (None, 0, 0)}
        self.alive: set[int] = set()

    def children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError(path)
        prefix = path.rstrip("/") + "/"
        names = (p[len(prefix) :] for p in self.nodes if p != path and p.startswith(prefix))
        return sorted(name for name in names if "/" not in name)

    def require(self, session: int) -> None:
        if session not in self.alive:
            raise SessionExpiredError("")

    def create(self, session: int, path: str, data: object, ephemeral: bool, make_parents: bool) -> Stat:
        self.require(session)
        if make_parents:
            parts = path.split("/")[1:-1]
            for depth in range(1, len(parts) + 1):
                ancestor = "/" + "/".join(parts[:depth])
                if ancestor not in self.nodes:
                    self.create(session, ancestor, None, False, False)
        if path in self.nodes:
            raise NodeExistsError(path)
        parent = path.rsplit("/", 1)[0] or "/"
        if parent not in self.nodes:
            raise NoNodeError(path)
        if self.nodes[parent][2]:
            raise NoChildrenForEphemeralsError(path)
        owner = session if ephemeral else 0
        self.nodes[path] = (data, 0, owner)
        return Stat(0, owner)

    def check(self, path: str, version: int) -> Stat:
        if path not in self.nodes:
            raise NoNodeError(path)
        _, current, owner = self.nodes[path]
        if version not in (-1, current):
            raise BadVersionError(path)
        return Stat(current, owner)

    def set(self, session: int, path: str, data: object, version: int) -> Stat:
        self.require(session)
        stat = self.check(path, version)
        self.nodes[path] = (data, stat.version + 1, stat.ephemeral_owner)
        return Stat(stat.version + 1, stat.ephemeral_owner)

    def delete(self, session: int, path: str, version: int) -> None:
        self.require(session)
        self.check(path, version)
        if self.children(path):
            raise NotEmptyError(path)
        del self.nodes[path]

    def multi(self, session: int, ops: list[Op]) -> list[Stat | None]:
        self.require(session)
        saved = copy.deepcopy(self.nodes)
        results: list[Stat | None] = []
        for index, op in enumerate(ops):
            try:
                results.append(self.apply(session, op))
            except StoreError as error:
                self.nodes = saved
                raise MultiError(index, error) from error
        return results

    def apply(self, session: int, op: Op) -> Stat | None:
        if isinstance(op, Create):
            return self.create(session, op.path, op.data, op.ephemeral, False)
        if isinstance(op, SetData):
            return self.set(session, op.path, op.data, op.version)
        if isinstance(op, CheckVersion):
            return self.check(op.path, op.version)
        self.delete(session, op.path, op.version)
        return None

    def expire(self, session: int) -> None:
        self.require(session)
        self.alive.discard(session)
        self.nodes = {p: n for p, n in self.nodes.items() if n[2] != session}


@dataclass(frozen=True)
class _Single:
    slot: int
    op: Op
    make_parents: bool = False


@dataclass(frozen=True)
class _Multi:
    slot: int
    ops: list[Op] = field(default_factory=list)


@dataclass(frozen=True)
class _Expire:
    slot: int


@dataclass(frozen=True)
class _Reopen:
    slot: int


_Action = _Single | _Multi | _Expire | _Reopen
_Outcome = tuple[str, object]

# A small tree, few versions and mostly unconditional writes, so that multis often succeed.
_TREE = ["/a", "/b", "/a/x", "/a/x/z"]
# A multi draws its paths from one family, so its ops often depend on each other (parent and child).
_FAMILIES = st.sampled_from([_TREE, ["/a", "/a/x"], ["/a/x", "/a/x/z"], ["/b"]])
_VERSIONS = st.sampled_from([-1, -1, -1, 0, 1])
_SLOTS = st.sampled_from([0, 1])


def _ops_on(paths: list[str]) -> st.SearchStrategy[Op]:
    path = st.sampled_from(paths)
    return st.one_of(
        st.builds(CheckVersion, path, _VERSIONS),
        st.builds(Create, path, st.integers(0, 9), st.booleans()),
        st.builds(SetData, path, st.integers(0, 9), _VERSIONS),
        st.builds(Delete, path, _VERSIONS),
    )


_OPS = _ops_on(_TREE)
_SINGLE = st.builds(_Single, _SLOTS, _OPS, st.booleans())
_MULTI = st.builds(_Multi, _SLOTS, _FAMILIES.flatmap(lambda family: st.lists(_ops_on(family), min_size=1, max_size=3)))
# Repeats weight the choice: session churn is rare, or most writes would meet a dead session.
_WEIGHTED: list[st.SearchStrategy[_Action]] = [
    *[_SINGLE] * 5,
    *[_MULTI] * 5,
    st.builds(_Expire, _SLOTS),
    *[st.builds(_Reopen, _SLOTS)] * 3,
]
_ACTIONS: st.SearchStrategy[_Action] = st.sampled_from(_WEIGHTED).flatmap(lambda strategy: strategy)


class _Pair:
    """Drives the store and the model with the same actions; slot i maps to a session in both."""

    def __init__(self) -> None:
        self.store = InMemoryStore()
        self.model = _Model()
        self.slots = [self._open(), self._open()]
        # Seeded so that most writes find their node instead of failing with NoNode on an empty tree.
        for path in ("/a", "/a/x", "/b"):
            self.step(_Single(0, Create(path, 0)))

    def _open(self) -> int:
        session = self.store.open_session(0)
        self.model.alive.add(session)
        return session

    def step(self, action: _Action) -> tuple[_Outcome, _Outcome]:
        if isinstance(action, _Reopen):
            self.slots[action.slot] = self._open()
            return ("ok", None), ("ok", None)
        session = self.slots[action.slot]
        return _outcome(lambda: self._on_store(session, action)), _outcome(lambda: self._on_model(session, action))

    def _on_store(self, session: int, action: _Action) -> object:
        if isinstance(action, _Multi):
            return self.store.multi(session, action.ops)
        if isinstance(action, _Expire):
            self.store.expire_session(session)
            return None
        assert isinstance(action, _Single)
        op = action.op
        if isinstance(op, Create):
            self.store.create(session, op.path, op.data, ephemeral=op.ephemeral, make_parents=action.make_parents)
            return self.store.exists(op.path)
        if isinstance(op, SetData):
            return self.store.set(session, op.path, op.data, op.version)
        if isinstance(op, Delete):
            self.store.delete(session, op.path, op.version)
            return None
        return self.store.exists(op.path)

    def _on_model(self, session: int, action: _Action) -> object:
        if isinstance(action, _Multi):
            return self.model.multi(session, action.ops)
        if isinstance(action, _Expire):
            self.model.expire(session)
            return None
        assert isinstance(action, _Single)
        op = action.op
        if isinstance(op, Create):
            return self.model.create(session, op.path, op.data, op.ephemeral, action.make_parents)
        if isinstance(op, CheckVersion):
            node = self.model.nodes.get(op.path)
            return None if node is None else Stat(node[1], node[2])
        return self.model.apply(session, op)

    def assert_same_tree(self) -> None:
        expected = {p: (n[0], n[1]) for p, n in sorted(self.model.nodes.items()) if p != "/"}
        assert self.store.dump() == expected
        for path, node in self.model.nodes.items():
            assert self.store.children(path) == self.model.children(path)
            assert self.store.exists(path) == Stat(node[1], node[2])


def _outcome(call: Callable[[], object]) -> _Outcome:
    try:
        return "ok", call()
    except MultiError as error:
        return "error", (type(error).__name__, error.index, type(error.cause).__name__)
    except StoreError as error:
        return "error", type(error).__name__


@settings(max_examples=300, deadline=None)
@given(st.lists(_ACTIONS, min_size=5, max_size=60))
def test_store_agrees_with_reference_model(actions: list[_Action]) -> None:
    pair = _Pair()
    for action in actions:
        from_store, from_model = pair.step(action)
        assert from_store == from_model, action
        pair.assert_same_tree()
