"""A ZooKeeper store whose sessions keep their watches across a connection loss, as ZooKeeper's own client does.

kazoo 2.11 drops every watch of a client whose connection is lost (kazoo/client.py `_reset_watchers`, on the
way to SUSPENDED) and never registers them again: a session that moved to another server (its server was
killed, the quorum was lost) stops hearing of the nodes it watched, though the session lives on. ZooKeeper's
Java client, which Kafka uses, re-sends its watches when it reconnects: ZooKeeper 3.8.0
`ClientCnxn.SendThread.primeConnection` sends a SetWatches request (opcode 101) naming the data, exist and
child watches with the last zxid the client saw, and the server fires at once every event those watches
missed (a node deleted, changed, created, or its children changed after that zxid) and keeps the others.

`WatchKeepingStore` does the same for each session: when its client loses the connection, the watches kazoo
still holds are noted (data watches set on a node that existed, exist watches on one that did not, child
watches); once reconnected, the watcher is given them back in kazoo's tables and a SetWatches request is
queued before any other request, so the events the server fires reach the session like any other.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooState
from kazoo.protocol.serialization import int_struct, long_struct, write_string

from kcm.impl.store import Stat
from kcm.impl.zookeeper.store import ZooKeeperStore

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


class WatchKeepingStore(ZooKeeperStore):
    def __init__(self, hosts: str, **options: Any) -> None:
        # Per handle, the paths its exist watches are on (set by `exists` on a missing node): kazoo keeps exist
        # and data watches in one table, and SetWatches must tell them apart.
        self._exist_watches: dict[int, set[str]] = {}
        self._lost: dict[int, _Lost] = {}
        self._watch_lock = threading.Lock()
        super().__init__(hosts, **options)

    def open_session(self, owner: int) -> int:
        handle = super().open_session(owner)
        self._exist_watches[handle] = set()
        client = self._sessions[handle].client
        client.add_listener(lambda state: self._on_connection(handle, client, state))
        return handle

    def exists(self, path: str, *, watch: int | None = None) -> Stat | None:
        stat = super().exists(path, watch=watch)
        if watch is not None:
            with self._watch_lock:
                if stat is None:
                    self._exist_watches[watch].add(path)
                else:
                    self._exist_watches[watch].discard(path)
        return stat

    def get(self, path: str, *, watch: int | None = None) -> tuple[Any, Stat]:
        found = super().get(path, watch=watch)
        if watch is not None:
            with self._watch_lock:
                self._exist_watches[watch].discard(path)
        return found

    def _on_connection(self, handle: int, client: Any, state: str) -> None:
        """kazoo's state listener, run on its connection thread, which it must not block."""
        if state == KazooState.SUSPENDED:
            # Listeners run before kazoo empties its watch tables (KazooClient._session_callback).
            self._note_lost(handle, client)
        elif state == KazooState.CONNECTED:
            lost = self._lost.pop(handle, None)
            if lost is not None:
                self._rearm(handle, client, lost)
        else:  # LOST: the session expired, and its watches with it
            self._lost.pop(handle, None)

    def _note_lost(self, handle: int, client: Any) -> None:
        data = _watched(client._data_watchers)
        child = _watched(client._child_watchers)
        if not (data or child):
            return
        with self._watch_lock:
            exist = self._exist_watches[handle]
        chroot = client.chroot or ""
        lost = self._lost.setdefault(handle, _Lost())
        lost.relative_zxid = int(client.last_zxid)
        for path in data:
            (lost.exist if path[len(chroot):] in exist else lost.data).append(path)
        lost.child.extend(child)

    def _rearm(self, handle: int, client: Any, lost: _Lost) -> None:
        watcher = self._sessions[handle].watcher
        for path in (*lost.data, *lost.exist):
            client._data_watchers[path].add(watcher)
        for path in lost.child:
            client._child_watchers[path].add(watcher)
        request = _SetWatches(lost.relative_zxid, lost.data, lost.exist, lost.child)
        client._call(request, client.handler.async_result())


def _watched(table: dict[str, set[Any]]) -> list[str]:
    return sorted(path for path, watchers in table.items() if watchers)

