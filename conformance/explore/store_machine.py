"""The embedded store against ZooKeeper: one hypothesis state machine (`StoreMachine`) sends the same requests
to an `InMemoryStore` and to a `ZooKeeperStore` (a fresh chroot per example, on a real ZooKeeper) and compares
every answer: the values returned (data, Stat: version and ephemeral owner handle), the errors by class (a
`MultiError` with its index and its cause's class), the sessions alive, the watch events each session polls
(path and kind, in order), and at the end of an example the whole tree.

Requests: create (persistent or ephemeral, with or without make_parents), set and delete with and without a
version (right or wrong), get, exists and children with and without a watch (by a live or an expired
session), multi (checks, creates, sets and deletes, some failing), sessions opened and expired (the expiry
forced through ZooKeeper), and connection loss: the ZooKeeper store reaches the server through a `Relay`
that cuts every client's connection; they reconnect within the session timeout, which the embedded store,
having no connections, knows nothing of. Paths come from a small alphabet, so that requests collide.

What may differ, deliberately, is listed in docs/zookeeper.md, "Embedded store vs ZooKeeper"; of it, the
machine meets only the order in which an expiry deletes the session's ephemerals, and tolerates exactly that
(`Pair.poll(ordered=False)`, for the events an expiry fires). Anything else fails the example with a
`StoreDivergence` whose message is the example as a list of requests (`Pair.log`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Final

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test
from hypothesis.statistics import collector

from kcm.conformance.explore.config import campaign_settings
from kcm.conformance.explore.derandomize import no_local_constants
from kcm.conformance.explore.harness import Tally
from kcm.conformance.explore.machine import PICK, pick
from kcm.conformance.explore.relay import Relay
from kcm.impl.store import (
    CheckVersion,
    CoordinationStore,
    Create,
    Delete,
    InMemoryStore,
    MultiError,
    Op,
    SetData,
    StoreError,
    WatchEvent,
)
from kcm.impl.zookeeper.store import ZooKeeperStore

# Two names, three levels: 14 paths, so creates, deletes and watches keep meeting the same nodes.
NAMES: Final = ("a", "b")
MAX_DEPTH: Final = 3
PATHS: Final = st.lists(st.sampled_from(NAMES), min_size=1, max_size=MAX_DEPTH).map(lambda names: "/" + "/".join(names))
# The root too for reads: under a chroot it is the chroot's node.
READ_PATHS: Final = PATHS | st.just("/")
# A path drawn, or (an index given) one of the nodes the store holds: most drawn paths name no node, and a
# set, delete or watch of an existing one is what exercises versions, children and events.
KNOWN: Final = st.integers(0, 31).map(lambda index: index if index < 24 else None)  # a node held, 3 times in 4
TARGETS: Final = st.tuples(PATHS, KNOWN)
READ_TARGETS: Final = st.tuples(READ_PATHS, KNOWN)
DATA: Final = st.none() | st.integers(0, 2) | st.lists(st.integers(0, 2), max_size=2) | st.fixed_dictionaries(
    {"leader": st.integers(0, 2)})
# -1 (any) and the first versions, so a version is as often right as wrong.
VERSIONS: Final = st.integers(-1, 2)
# A live session's index (which shrinks to the first), or None one time in five: a read that sets no watch.
WATCHERS: Final = st.integers(0, 39).map(lambda index: index if index < 32 else None)
# A multi's ops, each (kind, node, data, version, ephemeral), made into `Op`s against the store's nodes.
OPS: Final = st.lists(st.tuples(st.sampled_from(("check", "create", "set", "delete")), TARGETS, DATA, VERSIONS,
                                st.booleans()), min_size=1, max_size=4)
MAX_LIVE_SESSIONS: Final = 3
CUT: Final = "# every client's connection is lost, and restored within the session timeout"
# What a session may still ask once expired: each must raise SessionExpiredError in both stores.
EXPIRED_REQUESTS: Final[dict[str, Callable[[CoordinationStore, int, str], object]]] = {
    "create": lambda store, s, path: store.create(s, path, 0),
    "set": lambda store, s, path: store.set(s, path, 0),
    "delete": lambda store, s, path: store.delete(s, path),
    "multi": lambda store, s, path: store.multi(s, [CheckVersion(path, -1)]),
    "get_watched": lambda store, s, path: store.get(path, watch=s),
    "exists_watched": lambda store, s, path: store.exists(path, watch=s),
    "children_watched": lambda store, s, path: store.children(path, watch=s),
    "expire_session": lambda store, s, path: store.expire_session(s),
}
# The clients reconnect at once through the relay; far within the store's session timeout.
RECONNECT_TIMEOUT: Final = 10.0

Outcome = tuple[Any, ...]
Target = tuple[str, int | None]


class StoreDivergence(AssertionError):
    """The two stores answered one request differently; the message is the example up to that request."""


def outcome(request: Callable[[CoordinationStore], object], store: CoordinationStore) -> Outcome:
    """A request's answer as a comparable value: ("ok", value) or the error's class (a multi's with the failed
    op's index and the class of its cause). The error's path and text are the store's own wording."""
    try:
        return ("ok", request(store))
    except MultiError as error:
        return ("MultiError", error.index, type(error.cause).__name__)
    except StoreError as error:
        return (type(error).__name__,)


def by_session(events: Sequence[WatchEvent]) -> dict[int, list[tuple[str, str]]]:
    """Each session's events in the order it polled them: the only order ZooKeeper gives, one per client."""
    sessions: dict[int, list[tuple[str, str]]] = {}
    for event in events:
        sessions.setdefault(event.session, []).append((event.path, event.kind))
    return sessions


def unordered(events: dict[int, list[tuple[str, str]]]) -> dict[int, Counter[tuple[str, str]]]:
    return {session: Counter(fired) for session, fired in events.items()}


@dataclass
class Pair:
    """An embedded store and a ZooKeeper store given the same requests, their answers compared."""

    real: CoordinationStore
    embedded: CoordinationStore = field(default_factory=InMemoryStore)
    sessions: list[int] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    def call(self, text: str, request: Callable[[CoordinationStore], object]) -> Outcome:
        self.log.append(text)
        embedded, real = outcome(request, self.embedded), outcome(request, self.real)
        if embedded != real:
            self.diverge(f"embedded store: {embedded}, ZooKeeper: {real}")
        return embedded

    def open_session(self, owner: int) -> int:
        handle: int = self.call(f"open_session({owner})", lambda store: store.open_session(owner))[1]
        self.sessions.append(handle)
        return handle

    def poll(self, *, ordered: bool = True) -> None:
        """Both stores' fired events, compared per session, in order unless `ordered` is off: a session
        expiry's deletions come in ZooKeeper's hash order (docs/zookeeper.md)."""
        self.log.append("poll_watch_events()")
        embedded, real = by_session(self.embedded.poll_watch_events()), by_session(self.real.poll_watch_events())
        if embedded != real and (ordered or unordered(embedded) != unordered(real)):
            self.diverge(f"events of the embedded store: {embedded}, of ZooKeeper: {real}")

    def compare_sessions(self) -> None:
        embedded = [self.embedded.session_alive(s) for s in self.sessions]
        real = [self.real.session_alive(s) for s in self.sessions]
        if embedded != real:
            self.diverge(f"sessions {self.sessions} alive in the embedded store: {embedded}, in ZooKeeper: {real}")

    def compare_trees(self) -> None:
        embedded, real = tree(self.embedded), tree(self.real)
        if embedded != real:
            self.diverge(f"tree of the embedded store: {embedded}, of ZooKeeper: {real}")

    def diverge(self, difference: str) -> None:
        steps = "\n".join(f"  {line}" for line in self.log)
        raise StoreDivergence(f"{difference}\nafter:\n{steps}")


def tree(store: CoordinationStore, path: str = "/") -> dict[str, Outcome]:
    """Every node under `path` (itself included) as path -> (data, Stat), read through the port."""
    data, stat = store.get(path)
    nodes: dict[str, Outcome] = {path: (data, stat)}
    for child in store.children(path):
        nodes.update(tree(store, f"{path.rstrip('/')}/{child}"))
    return nodes


def _create_with_parents(store: CoordinationStore, session: int, path: str, ephemeral: bool) -> None:
    store.create(session, path, 0, ephemeral=ephemeral, make_parents=True)


def _op_text(op: Op) -> str:
    return repr(op).replace("CheckVersion", "Check")


class StoreMachine(RuleBasedStateMachine):
    """The rules: each sends one request (or a fault) to both stores and compares what comes back. Requests
    go through live sessions, and a rule of its own sends one through an expired session; a request may be
    followed by a poll of both stores' events (else they pile up, and their order across requests is compared
    at the next poll). `hosts` and `tally` are set per run by `store_machine_class`."""

    hosts: ClassVar[str] = ""
    tally: ClassVar[Tally] = Tally()
    # What the ZooKeeper store is compared with: the embedded store, or (to prove a divergence is caught) not.
    embedded: ClassVar[Callable[[], CoordinationStore]] = InMemoryStore
    connection_loss: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.relays = [Relay(_address(host)) for host in self.hosts.split(",")]
        relayed = ",".join(f"127.0.0.1:{relay.port}" for relay in self.relays)
        self.real = ZooKeeperStore(relayed)
        self.pair = Pair(self.real, type(self).embedded())
        self.diverged = False
        self.asked: set[int] = set()
        self.tally.examples += 1

    def _live(self) -> list[int]:
        return [s for s in self.pair.sessions if self.pair.embedded.session_alive(s)]

    def _unasked(self) -> list[int]:
        """Expired sessions no request has been sent through yet: one each is enough to see it refused."""
        return [s for s in self.pair.sessions if not self.pair.embedded.session_alive(s) and s not in self.asked]

    def _path(self, target: Target) -> str:
        drawn, known = target
        nodes = sorted(tree(self.pair.embedded))[1:]  # not the root, which a delete may not name
        return drawn if known is None or not nodes else str(pick(known, nodes))

    def _new_path(self, node: Target, name: str) -> str:
        """The path drawn, or (an index given) a child named `name` of a node the store holds."""
        drawn, under = node
        if under is None:
            return drawn
        parents = [p for p in tree(self.pair.embedded) if p.count("/") < MAX_DEPTH]
        return f"{pick(under, parents).rstrip('/')}/{name}"

    def _op(self, kind: str, node: Target, data: object, version: int, ephemeral: bool) -> Op:
        if kind == "create":
            return Create(self._new_path(node, node[0].rsplit("/", 1)[1]), data, ephemeral)
        path = self._path(node)
        if kind == "set":
            return SetData(path, data, version)
        return CheckVersion(path, version) if kind == "check" else Delete(path, version)

    def _watcher(self, index: int | None) -> int | None:
        live = self._live()
        return None if index is None or not live else int(pick(index, live))

    def _checked(self, compare: Callable[[], object]) -> None:
        try:
            compare()
        except StoreDivergence:
            self.diverged = True
            raise

    def _call(self, text: str, request: Callable[[CoordinationStore], object], poll: bool = False) -> None:
        self.tally.commands += 1
        self._checked(lambda: self.pair.call(text, request))
        self._checked(self.pair.compare_sessions)
        if poll:
            self._checked(self.pair.poll)

    @initialize(owner=st.integers(0, 2), nodes=st.lists(st.tuples(PATHS, st.booleans()), min_size=1, max_size=6))
    def start(self, owner: int, nodes: list[tuple[str, bool]]) -> None:
        """A first session, and a few nodes it creates (an ephemeral when the flag is set), so that the
        rules find nodes to set, delete and watch from the first step on."""
        s = self.pair.open_session(owner)
        for path, ephemeral in nodes:
            self._call(f"create({s}, {path!r}, 0, ephemeral={ephemeral}, make_parents=True)",
                       partial(_create_with_parents, session=s, path=path, ephemeral=ephemeral))

    @precondition(lambda self: len(self._live()) < MAX_LIVE_SESSIONS)
    @rule(owner=st.integers(0, 2))
    def open_session(self, owner: int) -> None:
        self.pair.open_session(owner)

    @precondition(lambda self: self._live())
    @rule(index=PICK, node=TARGETS, name=st.sampled_from(NAMES), data=DATA, ephemeral=st.booleans(),
          make_parents=st.booleans(), poll=st.booleans())
    def create(self, index: int, node: Target, name: str, data: object, ephemeral: bool, make_parents: bool,
               poll: bool) -> None:
        """A path drawn, or a child of a node the store holds (most drawn paths have no parent yet)."""
        s, path = pick(index, self._live()), self._new_path(node, name)
        self._call(f"create({s}, {path!r}, {data!r}, ephemeral={ephemeral}, make_parents={make_parents})",
                   lambda store: store.create(s, path, data, ephemeral=ephemeral, make_parents=make_parents), poll)

    @precondition(lambda self: self._live())
    @rule(index=PICK, node=TARGETS, data=DATA, version=VERSIONS, poll=st.booleans())
    def set(self, index: int, node: Target, data: object, version: int, poll: bool) -> None:
        s, path = pick(index, self._live()), self._path(node)
        self._call(f"set({s}, {path!r}, {data!r}, {version})", lambda store: store.set(s, path, data, version), poll)

    @precondition(lambda self: self._live())
    @rule(index=PICK, node=TARGETS, version=VERSIONS, poll=st.booleans())
    def delete(self, index: int, node: Target, version: int, poll: bool) -> None:
        s, path = pick(index, self._live()), self._path(node)
        self._call(f"delete({s}, {path!r}, {version})", lambda store: store.delete(s, path, version), poll)

    @precondition(lambda self: self._live())
    @rule(index=PICK, drawn=OPS, poll=st.booleans())
    def multi(self, index: int, drawn: list[tuple[str, Target, object, int, bool]], poll: bool) -> None:
        s = pick(index, self._live())
        ops = [self._op(*op) for op in drawn]
        self._call(f"multi({s}, [{', '.join(map(_op_text, ops))}])", lambda store: store.multi(s, ops), poll)

    @rule(node=READ_TARGETS, watcher=WATCHERS)
    def get(self, node: Target, watcher: int | None) -> None:
        w, path = self._watcher(watcher), self._path(node)
        self._call(f"get({path!r}, watch={w})", lambda store: store.get(path, watch=w))

    @rule(node=READ_TARGETS, watcher=WATCHERS)
    def exists(self, node: Target, watcher: int | None) -> None:
        w, path = self._watcher(watcher), self._path(node)
        self._call(f"exists({path!r}, watch={w})", lambda store: store.exists(path, watch=w))

    @rule(node=READ_TARGETS, watcher=WATCHERS)
    def children(self, node: Target, watcher: int | None) -> None:
        w, path = self._watcher(watcher), self._path(node)
        self._call(f"children({path!r}, watch={w})", lambda store: store.children(path, watch=w))

    @precondition(lambda self: self._live())
    @rule(index=PICK)
    def expire_session(self, index: int) -> None:
        """An expiry deletes the session's ephemerals in ZooKeeper's hash order: what it fires is polled on
        its own, each session's events compared as a set (docs/zookeeper.md)."""
        s = pick(index, self._live())
        self._checked(self.pair.poll)
        self._call(f"expire_session({s})", lambda store: store.expire_session(s))
        self._checked(lambda: self.pair.poll(ordered=False))
        if not self._live():
            self.pair.open_session(0)  # as a broker whose session expired opens a new one

    @precondition(lambda self: self._unasked())
    @rule(index=PICK, path=PATHS, request=st.sampled_from(sorted(EXPIRED_REQUESTS)))
    def request_of_an_expired_session(self, index: int, path: str, request: str) -> None:
        s = pick(index, self._unasked())
        self.asked.add(s)
        self._call(f"{request}({s}, {path!r})", lambda store: EXPIRED_REQUESTS[request](store, s, path))

    @precondition(lambda self: self.connection_loss and self._live() and self.pair.log[-1] != CUT)
    @rule()
    def lose_connection(self) -> None:
        """Every client's connection is cut; each reconnects through the relay and its session lives on."""
        self.pair.log.append(CUT)
        for relay in self.relays:
            cut = relay.cut()
            relay.wait_for_connections(cut, RECONNECT_TIMEOUT)

    def teardown(self) -> None:
        try:
            if not self.diverged:
                self._checked(self.pair.poll)
                self._checked(self.pair.compare_trees)
        finally:
            self.real.close()
            for relay in self.relays:
                relay.close()


def _address(host: str) -> tuple[str, int]:
    name, _, port = host.strip().rpartition(":")
    return name, int(port)


def store_machine_class(hosts: str, tally: Tally,
                        embedded: Callable[[], CoordinationStore] = InMemoryStore) -> type[StoreMachine]:
    """The machine against the ZooKeeper at `hosts` (a kazoo hosts string), counting into `tally`."""
    return type("StoreMachine_zk", (StoreMachine,), {"hosts": hosts, "tally": tally,
                                                     "embedded": staticmethod(embedded)})


@dataclass
class StoreRun:
    """A run's outcome: the examples and requests it made, its wall time, and the divergence found, if any."""

    tally: Tally
    seconds: float
    divergence: str | None

    @property
    def seconds_per_example(self) -> float:
        return self.seconds / self.tally.examples if self.tally.examples else 0.0


def run_store_machine(hosts: str, examples: int, steps: int, *, shrink: bool = True,
                      embedded: Callable[[], CoordinationStore] = InMemoryStore) -> StoreRun:
    """Runs the machine for `examples` examples of at most `steps` rules each (derandomized, as the ci profile),
    a divergence shrunk to its shortest example unless `shrink` is off."""
    tally = Tally()
    started = time.perf_counter()
    divergence: str | None = None
    try:
        # hypothesis types its collector by its default value, None, though it holds a callback when set
        with no_local_constants(), collector.with_value(tally.note_statistics):  # type: ignore[arg-type]
            run_state_machine_as_test(store_machine_class(hosts, tally, embedded),
                                      settings=campaign_settings("ci", examples, steps, shrink=shrink))
    except StoreDivergence as found:
        divergence = str(found)
    return StoreRun(tally, time.perf_counter() - started, divergence)
