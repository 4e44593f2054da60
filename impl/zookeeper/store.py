"""`ZooKeeperStore`: the coordination-store port (kcm.impl.store) over kazoo and a real ZooKeeper.

Design, and why:
- One KazooClient per session handle, so a handle is a ZooKeeper session: its ephemerals, its watches and
  its expiry are the server's. Reads without a watch go through one more client, the admin client.
- Every client connects to the hosts in the given order (kazoo's host randomisation off), so all of a
  store's clients sit on the same server and a read sees every write the store made before it (ZooKeeper
  orders one server's view; two clients on different servers may see each other's writes late). A client
  whose server dies moves to the next host; until they all have moved, reads may lag.
- Every store works under a chroot of its own (default /kcm/<uuid>), created on start and never removed,
  so runs never see each other's nodes on a shared ZooKeeper.
- Values are JSON: what the port stores is JSON-like; a node created empty (an ancestor `make_parents`
  created) reads as None, as in the embedded store.
- Handles are 1, 2, ... as in InMemoryStore; `Stat.ephemeral_owner` is the handle of the session whose
  ZooKeeper session id owns the node (-1 for a session of another client), so results compare exactly with
  the embedded store's.

Connection loss (a server killed): a request that fails with ConnectionLoss is sent again once the client
has reconnected, until the session expires (SessionExpiredError) or `retry_bound` seconds pass
(ConnectionLostError; the session's client is then closed, dropping whatever it still queues, so no
request can apply unseen later, and the handle is dead), as Kafka 2.3.0's controller does, unbounded, in
core/src/main/scala/kafka/zk/KafkaZkClient.scala `retryRequestsUntilConnected` (re-send the requests whose
result was CONNECTIONLOSS after `zooKeeperClient.waitUntilConnected()`, which ends when the client is
connected or its session is gone, core/src/main/scala/kafka/zookeeper/ZooKeeperClient.scala). A write
re-sent after a loss may find its own first attempt applied; the store then decides as Kafka 2.3.0 does:
- a create answered NodeExists: the node is read; an ephemeral owned by this session (or a persistent one at
  version 0 holding the same data) is the first attempt, so the create succeeded (KafkaZkClient.scala
  `CheckedEphemeral.getAfterNodeExists`: the ephemeral owner equal to the session id means success);
- a versioned set answered BadVersion: the node is read; at the next version with the same data it is the
  first attempt, so the set succeeded (KafkaZkClient.scala `conditionalUpdatePath` runs the optionalChecker
  on BADVERSION; core/src/main/scala/kafka/utils/ReplicationUtils.scala `checkLeaderAndIsrZkData` compares
  the data written with the data read and returns the read version);
- a delete answered NoNode: success (KafkaZkClient.scala `deletePath` accepts NONODE as OK);
- an unconditional set is re-sent as is, as Kafka does: if the first attempt applied the version moves
  twice;
- a multi that fails on a re-send after a loss has an unknown outcome: ConnectionLostError says so.

A session that expires on its own (its client cut off longer than the session timeout) is dead from then
on; its ephemerals count as changed for `drain_changes`, as those of an expiry the store forces.

Watches: `watch=h` registers the one-shot watch on session h's client; kazoo delivers fired events on its
callback thread, which queues them. `poll_watch_events` first makes every live client do a round trip
(ZooKeeper delivers a client's watch events before the response to a later request on that client), then
waits until each client's callback thread has run everything queued before that response. So every event
fired by a write the store made before the poll is returned. Order: per session, ZooKeeper's order (the
order the server sent them); across sessions ZooKeeper defines none (each client has its own connection),
so the store returns the sessions' events one session after the other, in handle order. A session's watches
survive a connection loss (a server killed, the quorum lost) as with ZooKeeper's Java client, which kazoo
alone does not do: kcm.impl.zookeeper.watches.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal, assert_never

from kazoo import exceptions as zk
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import Callback, EventType, WatchedEvent

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
    StoreError,
    WatchEvent,
    check_path,
)
from kcm.impl.zookeeper.watches import WatchKeeper

# kazoo warns on stderr of every dropped connection and reconnect, which the store handles; what it cannot
# handle it raises. A program that configures logging still gets kazoo's records.
logging.getLogger("kazoo").addHandler(logging.NullHandler())

_ROOT = "/"
_PERSISTENT = 0
_CONNECT_TIMEOUT = 15.0
_POLL_INTERVAL = 0.02
# How often kazoo tries to reconnect after a loss: quickly, since a killed server's clients move at once.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 1, "max_jitter": 0.0, "max_delay": 0.2}

_Kind = Literal["created", "deleted", "changed", "children"]
_KINDS: dict[str, _Kind] = {EventType.CREATED: "created", EventType.DELETED: "deleted",
                            EventType.CHANGED: "changed", EventType.CHILD: "children"}
# Named outside the class: inside it, `set` is the store's own method, not the builtin.
_PathSet = set[str]


class ConnectionLostError(StoreError):
    """No ZooKeeper server answered within the retry bound, or a multi re-sent after a connection loss
    failed, so whether its first attempt applied is unknown."""


@dataclass(slots=True)
class _Session:
    handle: int
    client: Any  # a started KazooClient
    zk_id: int
    alive: bool = True
    expired: threading.Event = field(default_factory=threading.Event)  # the server said so (kazoo's LOST)
    events: list[WatchEvent] = field(default_factory=list)
    last_event: object = None
    # One callable per session: kazoo keeps a set of watchers per path, so a second watch of the same kind
    # on a path by the same session is one watch, as on the server.
    watcher: Callable[[WatchedEvent], None] | None = None
    keeper: WatchKeeper | None = None  # its watches across connection losses (kcm.impl.zookeeper.watches)


class ZooKeeperStore:
    """A `CoordinationStore` on a real ZooKeeper; see the module doc for what it guarantees and how."""

    def __init__(self, hosts: str, *, chroot: str | None = None, session_timeout: float = 4.0,
                 retry_bound: float | None = None) -> None:
        self.chroot = chroot if chroot is not None else f"/kcm/{uuid.uuid4().hex}"
        self._hosts = hosts
        self._session_timeout = session_timeout
        # Past this, a session would have expired on the server anyway had it not reconnected.
        self.retry_bound = retry_bound if retry_bound is not None else max(10.0, 3 * session_timeout)
        self._lock = threading.Lock()
        self._sessions: dict[int, _Session] = {}
        self._owners: dict[int, int] = {}  # ZooKeeper session id -> handle
        self._ephemerals: dict[str, int] = {}  # path -> owning handle, for what an expiry deletes
        self._changed: _PathSet = set()
        # Whether a write (or an expiry) happened since the last flush: with none, a poll needs no round trips.
        self._unflushed = False
        bootstrap = self._client(hosts)
        try:
            bootstrap.ensure_path(self.chroot)
        finally:
            _close(bootstrap)
        self._admin = self._client(hosts + self.chroot)

    # Sessions

    def open_session(self, owner: int) -> int:
        handle = len(self._sessions) + 1
        session = _Session(handle, None, 0)
        session.watcher = lambda event: self._on_event(session, event)
        session.client = self._client(self._hosts + self.chroot, session)
        session.zk_id = int(session.client.client_id[0])
        session.keeper = WatchKeeper(session.client, session.watcher)
        self._sessions[handle] = session
        self._owners[session.zk_id] = handle
        return handle

    def session_alive(self, session: int) -> bool:
        record = self._sessions.get(session)
        return record is not None and record.alive and not record.expired.is_set()

    def expire_session(self, session: int) -> None:
        """Expire `session` through ZooKeeper, the standard way: a second client attaches to the session with
        its id and password and closes it. Returns once the server has told the victim its session expired,
        so its ephemerals are gone."""
        victim = self._live(session, "")
        self._flush([victim])  # events fired while it lived stay queued
        sid, password = victim.client.client_id
        deadline = time.monotonic() + self.retry_bound
        # The victim may reconnect and take its session back before the impostor closes it: then again.
        while True:
            # Without the chroot the impostor's start sends no request (kazoo checks a chroot exists), so the
            # victim reconnecting in between cannot make it fail with ConnectionLoss; a timeout is tried again.
            with suppress(ConnectionLostError):
                _close(self._client(self._hosts, client_id=(sid, password)))
            if victim.expired.wait(self._session_timeout):
                break
            if time.monotonic() > deadline:
                raise ConnectionLostError("", f"session {session} did not expire within {self.retry_bound:.0f} s")
        self._retire(victim)

    # Reads

    def get(self, path: str, *, watch: int | None = None) -> tuple[Any, Stat]:
        check_path(path)
        client, watcher = self._reader(watch, path)
        data, stat = self._request(client, path, lambda: client.get_async(path, watch=watcher))
        self._note_watch(watch, path, exists=True)
        return _decode(data), self._stat(stat)

    def exists(self, path: str, *, watch: int | None = None) -> Stat | None:
        check_path(path)
        client, watcher = self._reader(watch, path)
        stat = self._request(client, path, lambda: client.exists_async(path, watch=watcher))
        self._note_watch(watch, path, exists=stat is not None)
        return None if stat is None else self._stat(stat)

    def children(self, path: str, *, watch: int | None = None) -> list[str]:
        check_path(path)
        client, watcher = self._reader(watch, path)
        return sorted(str(name) for name in self._request(client, path,
                                                           lambda: client.get_children_async(path, watch=watcher)))

    def _note_watch(self, watch: int | None, path: str, *, exists: bool) -> None:
        keeper = None if watch is None else self._sessions[watch].keeper
        if keeper is not None:
            keeper.watched(path, exists=exists)

    # Writes

    def create(
        self, session: int, path: str, data: object, *, ephemeral: bool = False, make_parents: bool = False
    ) -> None:
        check_path(path)
        owner = self._live(session, path)
        value = _encode(data)
        attempt = _Attempt()
        try:
            self._request(owner.client, path, lambda: owner.client.create_async(
                path, value, ephemeral=ephemeral, makepath=make_parents), attempt)
        except NodeExistsError:
            if not (attempt.lost and self._own_create(owner, path, value, ephemeral)):
                raise
        self._wrote(path)
        if make_parents:
            # Which ancestors kazoo had to create is not reported: all are re-read, a harmless superset.
            self._wrote(*(str(a) for a in PurePosixPath(path).parents if str(a) != _ROOT))
        if ephemeral:
            self._track(path, session)

    def set(self, session: int, path: str, data: object, version: int = -1) -> Stat:
        check_path(path)
        owner = self._live(session, path)
        value = _encode(data)
        attempt = _Attempt()
        try:
            stat = self._request(owner.client, path, lambda: owner.client.set_async(path, value, version), attempt)
        except BadVersionError:
            if not attempt.lost:
                raise
            stat = self._own_set(owner, path, value, version)
        self._wrote(path)
        return self._stat(stat)

    def delete(self, session: int, path: str, version: int = -1) -> None:
        check_path(path)
        if path == _ROOT:
            raise ValueError("the root node cannot be deleted")
        owner = self._live(session, path)
        attempt = _Attempt()
        try:
            self._request(owner.client, path, lambda: owner.client.delete_async(path, version), attempt)
        except NoNodeError:
            if not attempt.lost:
                raise
        self._wrote(path)
        self._track(path, None)

    def multi(self, session: int, ops: Sequence[Op]) -> list[Stat | None]:
        owner = self._live(session, "")
        for op in ops:
            check_path(op.path)
        checked = {op.path: self.exists(op.path) for op in ops if isinstance(op, CheckVersion) and op.version < 0}
        attempt = _Attempt()
        results = self._request(owner.client, "", lambda: self._transaction(owner.client, ops).commit_async(), attempt)
        failed = next((i for i, r in enumerate(results) if isinstance(r, Exception)
                       and not isinstance(r, zk.RolledBackError | zk.RuntimeInconsistency)), None)
        if failed is not None:
            cause = _mapped(results[failed], ops[failed].path)
            if attempt.lost:
                raise ConnectionLostError(ops[failed].path, "a multi re-sent after a connection loss failed "
                                          f"with {type(cause).__name__}: whether its first attempt applied is unknown")
            raise MultiError(failed, cause)
        return self._multi_stats(session, ops, results, checked)

    def poll_watch_events(self) -> list[WatchEvent]:
        self._flush_if_written()
        with self._lock:
            events = [event for s in self._sessions.values() for event in s.events]
            for s in self._sessions.values():
                s.events = []
        return events

    def has_watch_events(self) -> bool:
        """Whether `poll_watch_events` has anything; the round trips it costs are not repeated by the poll."""
        self._flush_if_written()
        with self._lock:
            return any(s.events for s in self._sessions.values())

    def drain_changes(self) -> _PathSet:
        """Paths this store's writes created, set or deleted since the last drain (an expiry it forced
        deletes the session's ephemerals)."""
        with self._lock:
            changed, self._changed = self._changed, set()
        return changed

    def close(self) -> None:
        for session in self._sessions.values():
            if session.alive:
                self._retire(session)
        _close(self._admin)

    # Internals

    def _client(self, hosts: str, session: _Session | None = None, client_id: tuple[int, bytes] | None = None) -> Any:
        client = KazooClient(hosts=hosts, timeout=self._session_timeout, client_id=client_id,
                             randomize_hosts=False, connection_retry=dict(_CONNECTION_RETRY))
        if session is not None:
            client.add_listener(lambda state: self._on_state(session, state))
        try:
            client.start(timeout=_CONNECT_TIMEOUT)
        except KazooTimeoutError:
            client.stop()
            raise ConnectionLostError("", f"no ZooKeeper server at {hosts} answered within "
                                          f"{_CONNECT_TIMEOUT:.0f} s") from None
        return client

    def _live(self, handle: int, path: str) -> _Session:
        session = self._sessions.get(handle)
        if session is not None and session.alive and session.expired.is_set():
            self._retire(session)  # expired on its own (its client was cut off too long)
        if session is None or not session.alive:
            raise SessionExpiredError(path, f"session {handle} is expired or unknown")
        return session

    def _reader(self, watch: int | None, path: str) -> tuple[Any, Callable[[WatchedEvent], None] | None]:
        if watch is None:
            return self._admin, None
        session = self._live(watch, path)
        return session.client, session.watcher

    def _on_event(self, session: _Session, event: WatchedEvent) -> None:
        kind = _KINDS.get(event.type)
        # kazoo hands a deletion to both the data and the child watchers of the path: one event object,
        # dispatched twice in a row; ZooKeeper sends one event.
        if kind is None or event is session.last_event or not session.alive:
            return
        session.last_event = event
        with self._lock:
            session.events.append(WatchEvent(session.handle, str(event.path), kind))

    def _on_state(self, session: _Session, state: str) -> None:
        # kazoo's LOST: the server said the session expired, so its ephemerals are gone. (kazoo would go on
        # with a new session; the store closes the client at the next use of the handle.)
        if state == KazooState.LOST:
            session.expired.set()
            with self._lock:
                gone = [path for path, owner in self._ephemerals.items() if owner == session.handle]
                for path in gone:
                    del self._ephemerals[path]
                self._changed.update(gone)
                self._unflushed = True

    def _retire(self, session: _Session) -> None:
        session.alive = False
        _close(session.client)

    def _flush_if_written(self) -> None:
        with self._lock:
            written, self._unflushed = self._unflushed, False
        if written:
            self._flush([s for s in self._sessions.values() if self.session_alive(s.handle)])

    def _flush(self, sessions: list[_Session]) -> None:
        for session in sessions:
            self._round_trip(session.client)
            done = threading.Event()
            session.client.handler.dispatch_callback(Callback("flush", done.set, ()))
            done.wait(self.retry_bound)

    def _round_trip(self, client: Any) -> None:
        self._request(client, _ROOT, lambda: client.exists_async(_ROOT))

    def _request(self, client: Any, path: str, send: Callable[[], Any], attempt: _Attempt | None = None) -> Any:
        """The answer to the request `send` makes (kazoo's async form, so the wait is bounded), re-sent after
        a connection loss once `client` has reconnected."""
        deadline = time.monotonic() + self.retry_bound
        while True:
            try:
                return send().get(timeout=max(0.0, deadline - time.monotonic()))
            except zk.ConnectionLoss:
                if attempt is not None:
                    attempt.lost = True
                self._await_connected(client, path, deadline)
            except KazooTimeoutError:
                raise self._gave_up(client, path) from None
            except zk.KazooException as error:
                raise _mapped(error, path) from error

    def _await_connected(self, client: Any, path: str, deadline: float) -> None:
        while client.state != KazooState.CONNECTED:
            if client.state == KazooState.LOST:
                raise SessionExpiredError(path, "the session expired while reconnecting")
            if time.monotonic() > deadline:
                raise self._gave_up(client, path)
            time.sleep(_POLL_INTERVAL)

    def _gave_up(self, client: Any, path: str) -> ConnectionLostError:
        # The session's client is closed, which drops every request it still queues: none can apply later,
        # unseen. The server expires the session within its timeout. The admin client only reads: kept.
        for session in self._sessions.values():
            if session.client is client and session.alive:
                self._retire(session)
        return ConnectionLostError(path, f"no ZooKeeper server answered within {self.retry_bound:.0f} s; "
                                         "the session is closed")

    def _own_create(self, owner: _Session, path: str, value: bytes, ephemeral: bool) -> bool:
        data, stat = self._request(owner.client, path, lambda: owner.client.get_async(path))
        if ephemeral:
            return int(stat.ephemeralOwner) == owner.zk_id
        return int(stat.ephemeralOwner) == _PERSISTENT and int(stat.version) == 0 and bytes(data) == value

    def _own_set(self, owner: _Session, path: str, value: bytes, version: int) -> Any:
        data, stat = self._request(owner.client, path, lambda: owner.client.get_async(path))
        if version >= 0 and int(stat.version) == version + 1 and bytes(data) == value:
            return stat
        raise BadVersionError(path, f"expected version {version}, node is at {stat.version}")

    def _transaction(self, client: Any, ops: Sequence[Op]) -> Any:
        transaction = client.transaction()
        for op in ops:
            match op:
                case Create():
                    transaction.create(op.path, _encode(op.data), ephemeral=op.ephemeral)
                case SetData():
                    transaction.set_data(op.path, _encode(op.data), op.version)
                case CheckVersion():
                    transaction.check(op.path, op.version)
                case Delete():
                    transaction.delete(op.path, op.version)
                case _:
                    assert_never(op)
        return transaction

    def _multi_stats(self, session: int, ops: Sequence[Op], results: list[Any],
                     checked: dict[str, Stat | None]) -> list[Stat | None]:
        """The port's result per op. ZooKeeper returns a stat only for a set; the others are known from the
        ops (a create is at version 0) or from what the multi did before them."""
        stats: list[Stat | None] = []
        latest: dict[str, Stat] = {}
        for op, result in zip(ops, results, strict=True):
            stat: Stat | None
            match op:
                case Create():
                    stat = Stat(0, session if op.ephemeral else _PERSISTENT)
                    if op.ephemeral:
                        self._track(op.path, session)
                case SetData():
                    stat = self._stat(result)
                case CheckVersion():
                    before = latest.get(op.path) or checked.get(op.path)
                    owner = self._ephemerals.get(op.path, _PERSISTENT)
                    stat = Stat(op.version, owner) if op.version >= 0 else before
                case Delete():
                    stat = None
                    self._track(op.path, None)
            if stat is not None:
                latest[op.path] = stat
            if not isinstance(op, CheckVersion):
                self._wrote(op.path)
            stats.append(stat)
        return stats

    def _track(self, path: str, owner: int | None) -> None:
        """Record that `path` is an ephemeral of session `owner` (None: deleted); the listener reads this."""
        with self._lock:
            if owner is None:
                self._ephemerals.pop(path, None)
            else:
                self._ephemerals[path] = owner

    def _wrote(self, *paths: str) -> None:
        with self._lock:
            self._changed.update(paths)
            self._unflushed = True

    def _stat(self, stat: Any) -> Stat:
        owner = int(stat.ephemeralOwner)
        return Stat(int(stat.version), self._owners.get(owner, -1) if owner else _PERSISTENT)


class _Attempt:
    """Whether a request met a connection loss, so its first attempt may have applied."""

    def __init__(self) -> None:
        self.lost = False


def _close(client: Any) -> None:
    client.stop()
    client.close()


def _encode(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _decode(data: bytes) -> Any:
    return json.loads(data) if data else None


_ERRORS: dict[type[Exception], type[StoreError]] = {
    zk.NoNodeError: NoNodeError, zk.NodeExistsError: NodeExistsError, zk.BadVersionError: BadVersionError,
    zk.NotEmptyError: NotEmptyError, zk.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
    zk.SessionExpiredError: SessionExpiredError, zk.ConnectionClosedError: SessionExpiredError,
}


def _mapped(error: Exception, path: str) -> StoreError:
    kind = _ERRORS.get(type(error))
    if kind is None:
        return StoreError(path, f"ZooKeeper answered {type(error).__name__}")
    return kind(path)
