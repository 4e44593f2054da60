"""The coordination-store port and an embedded in-memory store with ZooKeeper semantics.

The controller and brokers reach ZooKeeper only through `CoordinationStore`. Each method is one
ZooKeeper request (create, getData, exists, getChildren, setData, delete, multi), so a kazoo adapter
can be a thin shim and nothing here may grow semantics ZooKeeper lacks.

`InMemoryStore` is the embedded implementation for simulations and tests. It has no clocks, threads
or randomness: the same calls in the same order give the same results and the same watch events in
the same order.

Data is stored by reference, never copied. Callers must treat every value they store or read as
immutable (values are JSON-like: dict, list, int, str, bool, None); mutating one in place would change
the store behind its back without bumping the version or firing a watch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol, TypeAlias, assert_never

_ROOT = "/"
_ANY_VERSION = -1
_PERSISTENT = 0

# A node's data is opaque to the store. Dataclass fields say Any, not object, because the compiled install's
# mypyc cannot load `object` as a field's annotation.
NodeData: TypeAlias = Any


class StoreError(Exception):
    """Base of every store failure; `path` is the node the failing request addressed ("" if none)."""

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(f"{path}: {detail}" if detail else path)
        self.path = path


class NoNodeError(StoreError):
    pass


class NodeExistsError(StoreError):
    pass


class BadVersionError(StoreError):
    pass


class NotEmptyError(StoreError):
    pass


class NoChildrenForEphemeralsError(StoreError):
    pass


class SessionExpiredError(StoreError):
    pass


class MultiError(StoreError):
    """A multi that changed nothing because op `index` failed with `cause`."""

    def __init__(self, index: int, cause: StoreError) -> None:
        super().__init__(cause.path, f"op {index} failed with {type(cause).__name__}")
        self.index = index
        self.cause = cause


@dataclass(frozen=True, slots=True)
class Stat:
    version: int
    ephemeral_owner: int  # session id, 0 for persistent


@dataclass(frozen=True, slots=True)
class WatchEvent:
    session: int
    path: str
    kind: Literal["created", "deleted", "changed", "children"]


@dataclass(frozen=True, slots=True)
class CheckVersion:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: NodeData
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: NodeData
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


Op = CheckVersion | Create | SetData | Delete


class CoordinationStore(Protocol):
    """The controller's and brokers' only view of ZooKeeper.

    Watches are one-shot, per (session, path, kind of watch) where the kinds are data (set by `get`
    and `exists`, which share one watch as on the ZooKeeper server) and child (set by `children`).
    Fired events queue until `poll_watch_events`.
    """

    def open_session(self, owner: int) -> int: ...

    def session_alive(self, session: int) -> bool: ...

    def expire_session(self, session: int) -> None: ...

    def create(
        self, session: int, path: str, data: object, *, ephemeral: bool = False, make_parents: bool = False
    ) -> None: ...

    def get(self, path: str, *, watch: int | None = None) -> tuple[Any, Stat]: ...

    def exists(self, path: str, *, watch: int | None = None) -> Stat | None: ...

    def children(self, path: str, *, watch: int | None = None) -> list[str]: ...

    def set(self, session: int, path: str, data: object, version: int = -1) -> Stat: ...

    def delete(self, session: int, path: str, version: int = -1) -> None: ...

    def multi(self, session: int, ops: Sequence[Op]) -> list[Stat | None]: ...

    def poll_watch_events(self) -> list[WatchEvent]: ...


@dataclass(slots=True)
class _Node:
    data: NodeData
    stat: Stat  # immutable, so every read of an unchanged node shares one
    children: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Session:
    owner: int  # the broker id, kept only to make a dump of sessions readable
    alive: bool = True
    ephemerals: set[str] = field(default_factory=set)


class _Probe(NamedTuple):
    """The part of a node that validation reads; a multi fakes these for nodes its earlier ops touch.
    A named tuple: several are built per op, and a frozen dataclass costs three times as much to build."""

    version: int
    ephemeral_owner: int
    child_count: int


_Lookup = Callable[[str], _Probe | None]
_WatchTable = dict[str, set[int]]
# Named outside the class: inside it, `set` is the store's own method, not the builtin.
_PathSet = set[str]


class InMemoryStore:
    """An embedded, deterministic `CoordinationStore`. Data is held by reference: see the module doc.

    Beyond ZooKeeper: an invalid path or deleting the root raises ValueError (a caller bug, as kazoo
    treats it), and fired events of a session stay queued after it expires, since they fired while it
    was alive.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {_ROOT: _Node(None, Stat(0, _PERSISTENT))}
        self._sessions: dict[int, _Session] = {}
        self._next_session = 1
        self._data_watches: _WatchTable = {}
        self._child_watches: _WatchTable = {}
        self._events: list[WatchEvent] = []
        self._changed: set[str] = set()

    # Sessions

    def open_session(self, owner: int) -> int:
        session = self._next_session
        self._next_session += 1
        self._sessions[session] = _Session(owner)
        return session

    def session_alive(self, session: int) -> bool:
        record = self._sessions.get(session)
        return record is not None and record.alive

    def expire_session(self, session: int) -> None:
        record = self._live(session, "")
        record.alive = False
        # Dropped before the ephemerals go, so a dead session is never told of its own nodes' deletion.
        self._drop_watches(session)
        for path in sorted(record.ephemerals):
            self._remove(path)

    # Reads

    def get(self, path: str, *, watch: int | None = None) -> tuple[Any, Stat]:
        node = self._read(path, watch)
        self._add_watch(self._data_watches, path, watch)
        return node.data, node.stat

    def exists(self, path: str, *, watch: int | None = None) -> Stat | None:
        _check_path(path)
        self._check_watcher(watch, path)
        # Registered even when the node is missing: that is how "created" gets observed.
        self._add_watch(self._data_watches, path, watch)
        node = self._nodes.get(path)
        return None if node is None else node.stat

    def children(self, path: str, *, watch: int | None = None) -> list[str]:
        node = self._read(path, watch)
        self._add_watch(self._child_watches, path, watch)
        return sorted(node.children)

    def dump(self) -> dict[str, tuple[object, int]]:
        """Every node but the root, as path -> (data, version), in path order."""
        return {path: (node.data, node.stat.version) for path, node in sorted(self._nodes.items()) if path != _ROOT}

    # Writes

    def create(
        self, session: int, path: str, data: object, *, ephemeral: bool = False, make_parents: bool = False
    ) -> None:
        _check_path(path)
        self._live(session, path)
        if make_parents:
            self._create_missing_ancestors(path)
        _validate_create(self._probe, path)
        self._insert(path, data, session if ephemeral else _PERSISTENT)

    def set(self, session: int, path: str, data: object, version: int = -1) -> Stat:
        _check_path(path)
        self._live(session, path)
        _validate_version(self._probe, path, version)
        return self._update(path, data)

    def delete(self, session: int, path: str, version: int = -1) -> None:
        _check_path(path)
        self._live(session, path)
        _validate_delete(self._probe, path, version)
        self._remove(path)

    def multi(self, session: int, ops: Sequence[Op]) -> list[Stat | None]:
        self._live(session, "")
        self._validate_multi(session, ops)
        # Validation ran every op against the state its predecessors leave, so none can fail now.
        return [self._apply(session, op) for op in ops]

    def poll_watch_events(self) -> list[WatchEvent]:
        events, self._events = self._events, []
        return events

    def has_watch_events(self) -> bool:
        """Whether `poll_watch_events` has anything, without swapping the queue: most steps fire none."""
        return bool(self._events)

    def drain_changes(self) -> _PathSet:
        """Paths created, set or deleted since the last drain: what a trace's state delta must re-read."""
        changed, self._changed = self._changed, set()
        return changed

    # Internals

    def _live(self, session: int, path: str) -> _Session:
        record = self._sessions.get(session)
        if record is None or not record.alive:
            raise SessionExpiredError(path, f"session {session} is expired or unknown")
        return record

    def _check_watcher(self, watch: int | None, path: str) -> None:
        if watch is not None:
            self._live(watch, path)

    def _read(self, path: str, watch: int | None) -> _Node:
        _check_path(path)
        self._check_watcher(watch, path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    def _probe(self, path: str) -> _Probe | None:
        node = self._nodes.get(path)
        if node is None:
            return None
        return _Probe(node.stat.version, node.stat.ephemeral_owner, len(node.children))

    def _create_missing_ancestors(self, path: str) -> None:
        # Only the first missing ancestor can fail (its parent may be ephemeral); everything below it
        # is then fresh and persistent, so a failure never leaves a half-built chain behind.
        for ancestor in _ancestors(path):
            if ancestor not in self._nodes:
                _validate_create(self._probe, ancestor)
                self._insert(ancestor, None, _PERSISTENT)

    def _validate_multi(self, session: int, ops: Sequence[Op]) -> None:
        overlay = _Overlay(self._probe)
        last = len(ops) - 1
        for index, op in enumerate(ops):
            _check_path(op.path)
            try:
                _validate_op(overlay.lookup, op)
            except StoreError as error:
                raise MultiError(index, error) from error
            # Only later ops read the overlay: the last op's effect is never looked up.
            if index < last:
                overlay.record(session, op)

    def _apply(self, session: int, op: Op) -> Stat | None:
        match op:
            case Create():
                owner = session if op.ephemeral else _PERSISTENT
                self._insert(op.path, op.data, owner)
                return Stat(0, owner)
            case SetData():
                return self._update(op.path, op.data)
            case CheckVersion():
                return self._nodes[op.path].stat
            case Delete():
                self._remove(op.path)
                return None
            case _:
                assert_never(op)

    def _insert(self, path: str, data: object, owner: int) -> None:
        self._nodes[path] = _Node(data, Stat(0, owner))
        self._changed.add(path)
        parent, name = _split(path)
        self._nodes[parent].children.add(name)
        if owner != _PERSISTENT:
            self._sessions[owner].ephemerals.add(path)
        self._fire(path, "created", self._data_watches)
        self._fire(parent, "children", self._child_watches)

    def _update(self, path: str, data: object) -> Stat:
        node = self._nodes[path]
        node.data = data
        node.stat = Stat(node.stat.version + 1, node.stat.ephemeral_owner)
        self._changed.add(path)
        self._fire(path, "changed", self._data_watches)
        return node.stat

    def _remove(self, path: str) -> None:
        node = self._nodes.pop(path)
        self._changed.add(path)
        parent, name = _split(path)
        self._nodes[parent].children.discard(name)
        if node.stat.ephemeral_owner != _PERSISTENT:
            self._sessions[node.stat.ephemeral_owner].ephemerals.discard(path)
        # A session holding both a data and a child watch hears one "deleted", as from ZooKeeper.
        self._fire(path, "deleted", self._data_watches, self._child_watches)
        self._fire(parent, "children", self._child_watches)

    def _fire(
        self, path: str, kind: Literal["created", "deleted", "changed", "children"], *tables: _WatchTable
    ) -> None:
        # Most writes fire nothing: no set is built until a watcher turns up.
        sessions: set[int] | None = None
        for table in tables:
            watchers = table.pop(path, None)
            if watchers:
                sessions = watchers if sessions is None else sessions | watchers
        if sessions:
            self._events.extend(WatchEvent(session, path, kind) for session in sorted(sessions))

    @staticmethod
    def _add_watch(table: _WatchTable, path: str, watch: int | None) -> None:
        if watch is not None:
            table.setdefault(path, set()).add(watch)

    def _drop_watches(self, session: int) -> None:
        # A scan rather than a reverse index: expiry is rare, and firing would have to maintain one.
        for table in (self._data_watches, self._child_watches):
            for path in [path for path, sessions in table.items() if session in sessions]:
                table[path].discard(session)
                if not table[path]:
                    del table[path]


class _Overlay:
    """The store as the ops of a multi validated so far would leave it, without changing the store.

    Only touched nodes are faked, so validating a multi costs time in its ops, not in the store size.
    """

    def __init__(self, base: _Lookup) -> None:
        self._base = base
        self._changed: dict[str, _Probe | None] = {}

    def lookup(self, path: str) -> _Probe | None:
        if path in self._changed:
            return self._changed[path]
        return self._base(path)

    def record(self, session: int, op: Op) -> None:
        match op:
            case Create():
                self._changed[op.path] = _Probe(0, session if op.ephemeral else _PERSISTENT, 0)
                self._count_child(_split(op.path)[0], 1)
            case SetData():
                node = self._existing(op.path)
                self._changed[op.path] = _Probe(node.version + 1, node.ephemeral_owner, node.child_count)
            case Delete():
                self._changed[op.path] = None
                self._count_child(_split(op.path)[0], -1)
            case CheckVersion():
                pass
            case _:
                assert_never(op)

    def _count_child(self, path: str, delta: int) -> None:
        node = self._existing(path)
        self._changed[path] = _Probe(node.version, node.ephemeral_owner, node.child_count + delta)

    def _existing(self, path: str) -> _Probe:
        node = self.lookup(path)
        assert node is not None, f"recorded an op on {path} that validation should have refused"
        return node


def _validate_op(lookup: _Lookup, op: Op) -> None:
    match op:
        case Create():
            _validate_create(lookup, op.path)
        case SetData() | CheckVersion():
            _validate_version(lookup, op.path, op.version)
        case Delete():
            _validate_delete(lookup, op.path, op.version)
        case _:
            assert_never(op)


def _validate_create(lookup: _Lookup, path: str) -> None:
    # Existence first: it is the only check that makes sense for the root, which has no parent.
    if lookup(path) is not None:
        raise NodeExistsError(path)
    parent = lookup(_split(path)[0])
    if parent is None:
        raise NoNodeError(path, "parent does not exist")
    if parent.ephemeral_owner != _PERSISTENT:
        raise NoChildrenForEphemeralsError(path)


def _validate_version(lookup: _Lookup, path: str, version: int) -> _Probe:
    node = lookup(path)
    if node is None:
        raise NoNodeError(path)
    if version not in (_ANY_VERSION, node.version):
        raise BadVersionError(path, f"expected version {version}, node is at {node.version}")
    return node


def _validate_delete(lookup: _Lookup, path: str, version: int) -> None:
    if path == _ROOT:
        raise ValueError("the root node cannot be deleted")
    # Version before emptiness, in ZooKeeper's order, so both stores report the same error.
    if _validate_version(lookup, path, version).child_count:
        raise NotEmptyError(path)


# Most requests name the same few paths again (partition states, /controller, the admin nodes): a path
# once found valid is not tested again. Bounded, since every ISR change notification has a path of its own.
@functools.lru_cache(maxsize=1024)
def _check_path(path: str) -> None:
    """Every name after a `/` must be neither empty, `.` nor `..`; tested on the whole string, as
    splitting the path costs more than the write it guards."""
    if path == _ROOT:
        return
    if (
        not path.startswith("/")
        or path.endswith(("/", "/.", "/.."))
        or "\0" in path
        or "//" in path
        or "/./" in path
        or "/../" in path
    ):
        raise ValueError(f"not an absolute ZooKeeper node path: {path!r}")


def _split(path: str) -> tuple[str, str]:
    parent, _, name = path.rpartition("/")
    return parent or _ROOT, name


def _ancestors(path: str) -> list[str]:
    """The proper ancestors of `path` below the root, outermost first."""
    names = path.split("/")[1:-1]
    return ["/" + "/".join(names[: depth + 1]) for depth in range(len(names))]



def check_path(path: str) -> None:
    """Raise ValueError unless `path` is an absolute node path ZooKeeper accepts: the check every store makes
    before a request, so the embedded and the ZooKeeper-backed store refuse the same paths."""
    _check_path(path)
