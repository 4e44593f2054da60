"""A ZooKeeper store whose sessions keep their watches across a connection loss, as ZooKeeper's own client does.

kazoo 2.11 drops every watch of a client whose connection is lost (kazoo/client.py `_reset_watchers`, on the
way to SUSPENDED) and never registers them again: a session that moved to another server (its server was
killed, the quorum was lost) stops hearing of the nodes it watched, though the session lives on. ZooKeeper's
Java client, which Kafka uses, re-sends its watches when it reconnects: ZooKeeper 3.8.0
`ClientCnxn.SendThread.primeConnection` sends a SetWatches request (opcode 101) naming the data, exist and
child watches with the last zxid the client saw, and the server fires at once every event those watches
missed (a node deleted, changed, created, or its children changed after that zxid) and keeps the others.

`WatchKeeper` does the same for one session of `ZooKeeperStore`: when its client loses the connection, the
watches kazoo still holds are noted (data watches set on a node that existed, exist watches on one that did
not, child watches); once reconnected, the session's watcher is given them back in kazoo's tables and a
SetWatches request is queued before any other request, so the events the server fires reach the session like
any other.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooState
from kazoo.protocol.serialization import int_struct, long_struct, write_string

_SET_WATCHES = 101  # ZooKeeper's OpCode.setWatches


class _SetWatches(namedtuple("_SetWatches", "relative_zxid data_watches exist_watches child_watches")):
    """The request kazoo lacks, in ZooKeeper's wire format (zookeeper.jute SetWatches): a long, then three
    vectors of strings; the answer has no body."""

    type = _SET_WATCHES

    def serialize(self) -> bytearray:
        out = bytearray(long_struct.pack(self.relative_zxid))
        for paths in (self.data_watches, self.exist_watches, self.child_watches):
            out.extend(int_struct.pack(len(paths)))
            for path in paths:
                out.extend(write_string(path))
        return out

    @classmethod
    def deserialize(cls, _bytes: bytes, _offset: int) -> None:
        return None


@dataclass
class _Lost:
    """The watches a session's client held when its connection went."""

    relative_zxid: int = 0
    data: list[str] = field(default_factory=list)
    exist: list[str] = field(default_factory=list)
    child: list[str] = field(default_factory=list)


class WatchKeeper:
    """The watches of one session (its started KazooClient and its one watcher callable), kept across
    connection losses."""

    def __init__(self, client: Any, watcher: Callable[[Any], None]) -> None:
        self._client = client
        self._watcher = watcher
        # The paths of its exist watches (set by `exists` on a missing node): kazoo keeps exist and data
        # watches in one table, and SetWatches must tell them apart.
        self._exist: set[str] = set()
        self._lost: _Lost | None = None
        self._lock = threading.Lock()
        client.add_listener(self._on_connection)

    def watched(self, path: str, *, exists: bool) -> None:
        """A data watch was set on `path` (store path, without the chroot), which exists or not."""
        with self._lock:
            if exists:
                self._exist.discard(path)
            else:
                self._exist.add(path)

    def _on_connection(self, state: str) -> None:
        """kazoo's state listener, run on its connection thread, which it must not block."""
        if state == KazooState.SUSPENDED:
            # Listeners run before kazoo empties its watch tables (KazooClient._session_callback).
            self._note_lost()
        elif state == KazooState.CONNECTED:
            lost, self._lost = self._lost, None
            if lost is not None:
                self._rearm(lost)
        else:  # LOST: the session expired, and its watches with it
            self._lost = None

    def _note_lost(self) -> None:
        client = self._client
        data = _watched(client._data_watchers)
        child = _watched(client._child_watchers)
        if not (data or child):
            return
        with self._lock:
            exist = set(self._exist)
        chroot = client.chroot or ""
        lost = self._lost if self._lost is not None else _Lost()
        self._lost = lost
        lost.relative_zxid = int(client.last_zxid)
        for path in data:
            (lost.exist if path[len(chroot):] in exist else lost.data).append(path)
        lost.child.extend(child)

    def _rearm(self, lost: _Lost) -> None:
        client = self._client
        for path in (*lost.data, *lost.exist):
            client._data_watchers[path].add(self._watcher)
        for path in lost.child:
            client._child_watchers[path].add(self._watcher)
        request = _SetWatches(lost.relative_zxid, lost.data, lost.exist, lost.child)
        client._call(request, client.handler.async_result())


def _watched(table: dict[str, set[Any]]) -> list[str]:
    return sorted(path for path, watchers in table.items() if watchers)
