"""The watches one session holds (`WatchBook`), so that they outlive a connection loss.

ZooKeeper's Java client keeps a session's watches across a reconnection: it sends SetWatches with the last
zxid it saw, and the server fires at once, for each watch, the event it missed (ZooKeeper 3.8
zookeeper-server/src/main/java/org/apache/zookeeper/server/DataTree.java `setWatches`: a data watch on a
node gone is NodeDeleted, on a node modified since (its mzxid) NodeDataChanged; an exists watch on a node
now present is NodeCreated; a child watch on a node gone is NodeDeleted, on one whose children changed since
(its pzxid) NodeChildrenChanged), and sets the others again. kazoo has no SetWatches: it drops every watch
when the connection goes (python-zk/kazoo issue 151). The book records each watch with the zxid it was set
at and, after a reconnection, `restore` does what SetWatches does, one read per watch.

The book is also what decides which events the session hears: an event is delivered only for a watch the
book holds (`take`), so a deletion both watch kinds observe is one event, and a watch set again by `restore`
for a node whose change it reported (the server now holds it, the session no longer does) stays silent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

Kind = Literal["created", "deleted", "changed", "children"]
Family = Literal["data", "child"]
_FAMILIES: Final[dict[str, tuple[Family, ...]]] = {
    "created": ("data",), "changed": ("data",), "children": ("child",), "deleted": ("data", "child"),
}
ABSENT: Final = -1  # a data watch set on a node that did not exist (an exists watch)
_PENDING: Final = -2  # set, its answer not yet in


@dataclass
class WatchBook:
    """(path, family) -> the zxid the watch saw: a data watch the node's mzxid (or ABSENT), a child watch
    its pzxid. `lost`: the connection went since the watches were set."""

    watches: dict[tuple[str, Family], int] = field(default_factory=dict)
    lost: bool = False

    def arm(self, path: str, family: Family) -> None:
        """Before the request that sets the watch is sent: its event may come before its answer is read."""
        self.watches.setdefault((path, family), _PENDING)

    def settle(self, path: str, family: Family, zxid: int) -> None:
        """The request's answer: the zxid the watch saw, unless its event already came."""
        if (path, family) in self.watches:
            self.watches[(path, family)] = zxid

    def disarm(self, path: str, family: Family) -> None:
        """The request failed and set no watch (a get or children of a missing node)."""
        if self.watches.get((path, family)) == _PENDING:
            del self.watches[(path, family)]

    def take(self, path: str, kind: Kind) -> bool:
        """An event the server sent: whether the session held a watch it fires; those watches are spent."""
        held = [(path, family) for family in _FAMILIES[kind] if (path, family) in self.watches]
        for key in held:
            del self.watches[key]
        return bool(held)

    def restore(self, read_data: Callable[[str], int], read_children: Callable[[str], int]) -> list[tuple[str, Kind]]:
        """After a reconnection: each watch set again by a read (`read_data` answers the node's mzxid or
        ABSENT, `read_children` its pzxid or ABSENT, both setting the watch), and the events it missed, in
        SetWatches's order (data watches, then exists watches, then child watches)."""
        self.lost = False
        order = sorted(self.watches, key=lambda key: (key[1] == "child", self.watches[key] == ABSENT))
        missed: list[tuple[str, Kind]] = []
        for path, family in order:
            seen = self.watches.get((path, family))
            if seen is None:
                continue  # fired meanwhile: only a writer outside this store can do that
            now = read_data(path) if family == "data" else read_children(path)
            kind = _missed(family, seen, now)
            if kind is None:
                self.watches[(path, family)] = now
            else:
                del self.watches[(path, family)]
                missed.append((path, kind))
        return missed


def _missed(family: Family, seen: int, now: int) -> Kind | None:
    if now == ABSENT:
        return None if seen == ABSENT else "deleted"
    if seen == ABSENT:
        return "created"
    if now > seen:
        return "changed" if family == "data" else "children"
    return None
