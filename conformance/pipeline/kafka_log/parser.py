"""Kafka `state-change.log` and `controller.log` files (ZooKeeper-mode brokers) as partial traces.

Each line is read through its file's layout (layouts.py), its message matched against the statements of
every release (formats.py), and then either becomes one event, is skipped on purpose (a statement that
carries no state the model observes, a stack trace, a blank line, another logger's line, the wrapped
part of a line), or is quarantined with its file, line number and reason. No line goes uncounted.

The log names neither the controller event that caused a change nor the brokers' logs and high
watermarks, so the trace observes the state machines, the store's leader, epoch and ISR as the controller
wrote them, the assignment, the brokers' roles, leader epochs and ISRs, and the controller epochs
brokers have seen; the controller action is inferred from the change (`_controller_action`).
Kafka's leader -1 ("none") is NO_LEADER; broker ids are kept as printed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.conformance.pipeline.kafka_log.layouts import (
    Layout,
    is_stack_trace,
    starts_record,
    unwrap,
)
from kcm.conformance.pipeline.kafka_log.renderings import (
    LogLineError,
    parse_assignment,
    parse_rendering,
    partition_name,
)
from kcm.spec.trace.format import OBSERVER, SYNTHESIZED, Event, make_event
from kcm.spec.vocabulary import NO_LEADER

_LOGGERS: Final = frozenset(f.logger for f in fm.FORMATS)
_CREATION: Final = frozenset({"NewPartition", "NewReplica"})


@dataclass
class ParsedLog:
    events: list[Event]
    quarantine: list[dict[str, Any]]
    lines: int
    skipped: list[dict[str, Any]] = field(default_factory=list)
    layout: str = ""

    @property
    def accepted(self) -> int:
        return self.lines - len(self.quarantine)


@dataclass
class Match:
    """A message matched to a statement of the table, its placeholders as read."""

    format: fm.Format
    values: dict[str, str]


def match_message(message: str, logger: str | None = None) -> Match | None:
    """The first statement of the table the message is (of the logger, when the layout names it)."""
    ends: dict[int, int] = {}
    for row, ident, head in _candidates(message, ends):
        # The row's text after its ident, to its first placeholder, spares the regular expression most misses.
        if (logger is not None and row.format.logger != logger) or not message.startswith(head, ends[ident]):
            continue
        found = row.regex.match(message)
        if found is not None:
            return Match(row.format, {k: v for k, v in found.groupdict().items() if v is not None})
    return None


@dataclass(frozen=True)
class _Ident:
    """The statements beginning with one ident (fm.IDENTS), by the word after it (the rows whose text goes
    on with a placeholder before any space are under "", tried whatever the word)."""

    text: str  # the ident up to its first placeholder: a cheap test before the regex
    regex: re.Pattern[str]
    rows: dict[str, tuple[int, ...]]


_Candidate = tuple[fm.Compiled, int, str]  # a row, the number of its ident, its text after the ident to a placeholder


def _index() -> tuple[tuple[_Ident, ...], list[tuple[int, str]]]:
    idents = sorted(fm.IDENTS, key=len, reverse=True)
    rows: dict[str, dict[str, list[int]]] = {ident: {"": []} for ident in idents}
    heads: list[tuple[int, str]] = []
    for number, row in enumerate(fm.COMPILED):
        # Every statement begins with an ident: tests/test_ingest_splits.py holds the table to it.
        ident = next(i for i in idents if row.format.template.startswith(i))
        rest = row.format.template[len(ident):]
        head = rest.split("{", 1)[0]
        word = head.split(" ", 1)[0] if " " in head or head == rest else ""
        rows[ident].setdefault(word, []).append(number)
        heads.append((idents.index(ident), head))
    return tuple(_Ident(ident.split("{", 1)[0], fm.prefix_regex(ident),
                        {word: tuple(numbers) for word, numbers in rows[ident].items()}) for ident in idents), heads


_IDENTS, _HEADS = _index()
_CANDIDATES: dict[tuple[tuple[int, str], ...], tuple[_Candidate, ...]] = {}


def _candidates(message: str, ends: dict[int, int]) -> tuple[_Candidate, ...]:
    """The rows of the table the message may be, in the table's order, and (into `ends`) where each ident it
    begins with ends: a row is one only if the message begins with its ident (the same span: an ident's
    integers end where its text goes on) and then its first word. Memoised by the idents and their words (a
    word no row has counts as none)."""
    key: list[tuple[int, str]] = []
    for number, ident in enumerate(_IDENTS):
        if message.startswith(ident.text):
            found = ident.regex.match(message)
            if found is not None:
                ends[number] = found.end()
                word = message[found.end():].split(" ", 1)[0]
                key.append((number, word if word in ident.rows else ""))
    frozen = tuple(key)
    rows = _CANDIDATES.get(frozen)
    if rows is None:
        numbers = {n for i, word in frozen for n in (*_IDENTS[i].rows[word], *_IDENTS[i].rows[""])}
        rows = _CANDIDATES[frozen] = tuple((fm.COMPILED[n], *_HEADS[n]) for n in sorted(numbers))
    return rows


REFUSED_BY_TABLE: Final = "refused by the state machine's table of valid previous states"
NO_LEADER_ELECTED: Final = "no leader elected"
# The exceptions a failed change is logged with (controller/PartitionStateMachine.scala and
# ReplicaStateMachine.scala, 1.1-3.9): logInvalidTransition's, and doElectLeaderForPartitions' when the
# election strategy finds no leader.
_INVALID_TRANSITION: Final = re.compile(r"java\.lang\.IllegalStateException: (?:Partition|Replica) .* states before "
                                        r"moving to \w+ state\. Instead it is in \w+ state")
_NO_LEADER: Final = re.compile(r"kafka\.common\.StateChangeFailedException: Failed to elect leader for partition "
                               r"\S+ under strategy (?P<strategy>.+)")


def _failure_reason(exception: str | None) -> str:
    if exception is None:
        return "unknown (no exception logged with it)"
    if _INVALID_TRANSITION.match(exception):
        return REFUSED_BY_TABLE
    found = _NO_LEADER.match(exception)
    if found is not None:
        return f"{NO_LEADER_ELECTED} ({found['strategy']})"
    return exception


def _controller_action(src: str, dst: str) -> str:
    """The controller event behind a change, as far as the change tells: a topic's creation (to or from a
    new state), its deletion, or (for every other change) a change of brokers."""
    if src in _CREATION or dst in _CREATION:
        return "TopicChange"
    if dst.startswith("ReplicaDeletion") or dst.startswith("NonExistent"):
        return "TopicDeletion"
    return "BrokerChange"


Leaf = tuple[str, ...]
PendingKey = tuple[int, int, str]  # broker, correlation id, partition of a LeaderAndIsr request received
# How a line changes a leaf of the state: SET writes it when it differs from the value the log showed last,
# FORCE always (a transition is shown even when it repeats), RAISE when above it (a broker keeps the newest
# controller epoch it has seen), ACT as SET the epoch a controller acts in, which, when written, begins a
# controller period (its machines loaded afresh, `Load`), STAMP as SET a partition's controller epoch, its
# value [epoch, version], only when the line's version differs from the partition's version before the line
# (a line that shows a state node as its writer left it but stamped with another epoch wrote nothing).
# Whether a leaf is written depends on the lines before, so a line records its changes as ops and `written`
# decides them in line order: a file read in splits decides them once the state at each split's start is
# known (split.py).
SET: Final = 0
FORCE: Final = 1
RAISE: Final = 2
ACT: Final = 3
STAMP: Final = 4
Op = tuple[int, Leaf, Any]
# The states a controller's machines leave when absent: a partition or replica it has not loaded is in them.
_ABSENT: Final = frozenset({"NonExistentPartition", "NonExistentReplica"})


@dataclass
class Period:
    """A stretch of a controller's lines in one controller epoch within the lines read, and the state each of
    its partitions and replicas leaves first in it. `opens` when no line read before it set the epoch the
    controller acts in: whether it goes on from the lines before them is known only once those are
    (split.py)."""

    controller: str
    epoch: int
    opens: bool
    first: dict[Leaf, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Load:
    """The context a controller loads when it starts acting in a controller epoch, which no line prints
    (KafkaController.onControllerFailover, Kafka 3.9.2: ReplicaStateMachine.initializeReplicaState and
    PartitionStateMachine.initializePartitionState read every partition and replica from ZooKeeper before the
    startup transitions are logged). What it loaded is what its lines of that epoch show each machine leaving
    first; a state of the earlier period not loaded again is gone (None)."""

    controller: str
    epoch: int
    states: dict[Leaf, str | None]

    def transitions(self) -> list[list[Any]]:
        """The loaded states as the model's context load records them: transitions from no state."""
        return [[leaf[0].split("_")[0], *leaf[2:], None, state]
                for leaf, state in sorted(self.states.items()) if state is not None]


def load_of(controller: str, epoch: int, first: dict[Leaf, str], held: set[Leaf]) -> Load:
    """The load that begins a period whose machines leave the states `first` first, after a period that
    held the leaves `held`."""
    states: dict[Leaf, str | None] = {leaf: None for leaf in held}
    states.update((leaf, state) for leaf, state in first.items() if state not in _ABSENT)
    return Load(controller, epoch, states)


@dataclass(frozen=True)
class Redo:
    """A broker's `become` line whose request was not received in the lines read: if it was received before
    them (an earlier split) and is still pending, the line is read again with the request's fields."""

    key: PendingKey
    match: Match
    args: dict[str, Any]


@dataclass
class Step:
    """What a line does: the event it becomes or (`event` False) the changes a quarantined line made to the
    state before its error, which the lines after it are compared with as in a whole-file read."""

    actor: str
    action: str
    args: dict[str, Any]
    ops: list[Op]
    event: bool = True
    redo: Redo | None = None


_FORMAT_NUMBERS: Final = {id(f): number for number, f in enumerate(fm.FORMATS)}
# The statements written with the controller's epoch before them (C0, C1): a line of one shows the epoch the
# controller acts in.
_EPOCH_PREFIXED: Final = frozenset(f.template for f in fm.FORMATS if f.template.startswith((fm.C0, fm.C1)))


def encode_steps(steps: list[Step]) -> bytes:
    """Steps as JSON: Spark keeps a split's steps between the passes of `ingest`, and pickling them took
    longer than parsing the lines (orjson writes and reads them some twenty times faster)."""
    return orjson.dumps([[s.actor, s.action, s.args, s.ops, s.event, None if s.redo is None else
                          [s.redo.key, _FORMAT_NUMBERS[id(s.redo.match.format)], s.redo.match.values, s.redo.args]]
                         for s in steps])


def decode_steps(data: bytes) -> list[Step]:
    steps = []
    for actor, action, args, ops, event, again in orjson.loads(data):
        redo = None if again is None else Redo(tuple(again[0]), Match(fm.FORMATS[again[1]], again[2]), again[3])
        steps.append(Step(actor, action, args, [(kind, tuple(leaf), value) for kind, leaf, value in ops], event,
                          redo))
    return steps


@dataclass
class _Parser:
    file: str
    # Whether requests received before the lines read may be pending (a split after the first).
    open_start: bool = False
    periods: list[Period] = field(default_factory=list)
    brokers: set[int] = field(default_factory=set)
    pending: dict[PendingKey, dict[str, Any]] = field(default_factory=dict)
    touched: set[PendingKey] = field(default_factory=set)  # the pending keys these lines put or took
    steps: list[Step] = field(default_factory=list)
    _match: Match | None = None
    _redo: Redo | None = None
    _acting: dict[str, Period | None] = field(default_factory=dict)  # each controller's period (None: resigned)

    def message(self, m: Match, args: dict[str, Any]) -> None:
        handler = _HANDLERS[m.format.kind]
        v = m.values
        ops: list[Op] = []
        self._match, self._redo = m, None
        for name in ("c", "b"):
            if name in v:
                self.brokers.add(int(v[name]))
        if m.format.template in _EPOCH_PREFIXED:
            self._act(ops, v["c"], int(v["e"]))
        try:
            actor, action = handler(self, v, m.format, args, ops)
        except LogLineError:
            if ops:
                self.steps.append(Step("", "", {}, ops, event=False))
            raise
        self.steps.append(Step(actor, action, args, ops, redo=self._redo))

    def _take_pending(self, key: PendingKey, args: dict[str, Any]) -> dict[str, Any]:
        """The fields of the request a `become` line applies, as received (none when it was not)."""
        if key in self.pending:
            return self.pending.pop(key)
        if self.open_start and key not in self.touched and self._match is not None:
            self._redo = Redo(key, self._match, dict(args))
        self.touched.add(key)
        return {}

    # -- the controller's lines ---------------------------------------------------------------------------

    def _partition_state(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                         ops: list[Op]) -> tuple[str, str]:
        p = _partition(v)
        self._transition(ops, v["c"], ("partition", p), v["src"], v["dst"], args)
        if "replicas" in v:
            self._set(ops, ("assignment", p), _ints(v["replicas"]))
        if "leader" in v:
            self._leader_named(ops, args, p, v, initial=v["src"] == "NewPartition")
        if "lai" in v:
            self._store(ops, p, parse_rendering(v["lai"]), int(v["e"]))
        return f"controller:{v['c']}", _controller_action(v["src"], v["dst"])

    def _replica_state(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                       ops: list[Op]) -> tuple[str, str]:
        self._transition(ops, v["c"], ("replica", _partition(v), v["r"]), v["src"], v["dst"], args)
        return f"controller:{v['c']}", _controller_action(v["src"], v["dst"])

    def _failed_change(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                       ops: list[Op]) -> tuple[str, str]:
        """A change the controller tried and gave up: no state changed. What it means is in the exception
        Kafka logs with it (the line after it): `logInvalidTransition` of PartitionStateMachine.scala and
        ReplicaStateMachine.scala (1.1-3.9) throws an IllegalStateException when the state machine's table of
        valid previous states refuses the change, recorded as the model's refusals are (`invalid_transitions`),
        so that the checker and Z3 hold the refusal to the model's table; any other exception (an election
        that found no leader, a ZooKeeper error, a newer controller's write) is a change the table allows that
        did not happen, kept with its reason."""
        p = _partition(v)
        failed: dict[str, Any] = {"partition": p}
        failed.update((k, v[k]) for k in ("src", "dst") if k in v)
        if "r" in v:
            failed["replica"] = int(v["r"])
        failed["reason"] = _failure_reason(args.get("exception"))
        args["failed"] = failed
        if failed["reason"] == REFUSED_BY_TABLE and "src" in v:
            where = [p] if "r" not in v else [p, int(v["r"])]
            args["invalid_transitions"] = [["partition" if "r" not in v else "replica", *where, v["src"], v["dst"]]]
        return f"controller:{v['c']}", _controller_action(v.get("src", ""), v.get("dst", ""))

    def _send_leader_and_isr(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                             ops: list[Op]) -> tuple[str, str]:
        fields = parse_rendering(v.get("lisr") or v["ps"])
        _need(fields, "leader", "leader_epoch", "isr")
        p = _partition(v)
        args.update(request="LeaderAndIsr", to=int(v["to"]), role=f.fixed["role"])
        # The request carries the partition node the controller wrote, but its replicas are the controller's
        # memory, not the store's assignment: step 7 of Kafka 2.3.0's reassignment (KafkaController.scala)
        # sends RAR while the store still holds OAR + RAR (docs/invariants.md, IsrSubsetOfReplicas).
        self._store(ops, p, fields, int(v["e"]))
        if "replicas" in fields:
            args["replicas"] = fields["replicas"]
        return f"controller:{v['c']}", "BrokerChange"

    def _send_other(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                    ops: list[Op]) -> tuple[str, str]:
        args["request"] = f.fixed["request"]
        if "to" in v:
            args["to"] = int(v["to"])
        if "tap" in v or "tp" in v:
            args["partition"] = _partition(v)
        args.update((k, int(v[k])) for k in ("n", "m") if k in v)
        return f"controller:{v['c']}", "BrokerChange"

    def _response(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                  ops: list[Op]) -> tuple[str, str]:
        api = f.fixed.get("api") or v.get("api", "")
        args["response"] = api or "unknown"
        if "err" in v:
            args["error"] = v["err"]
        return f"controller:{v['c']}", "StopReplicaResponse" if api == "STOP_REPLICA" else "BrokerChange"

    def _reassignment_sent(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                           ops: list[Op]) -> tuple[str, str]:
        p = _partition(v)
        # Steps 2 and 7 of Kafka 2.3.0's reassignment print this line; at step 7 the list is RAR, the controller's
        # memory, while the store still holds OAR + RAR: an argument, not the store's assignment.
        replicas = parse_assignment(v["assignment"]) if "assignment" in v else _ints(v["replicas"])
        args.update(request="LeaderAndIsr", to=int(v["leader"]), partition=p, replicas=replicas)
        self._store(ops, p, parse_rendering(v["lisr"]), int(v["e"]))
        return f"controller:{v['c']}", "PartitionReassignment"

    def _elected_leader(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                        ops: list[Op]) -> tuple[str, str]:
        self._leader_named(ops, args, _partition(v), v, initial=False)
        return f"controller:{v['c']}", "BrokerChange"

    def _leader_named(self, ops: list[Op], args: dict[str, Any], p: str, v: dict[str, str],
                      initial: bool) -> None:
        """`with leader N` / `elected leader N` (0.8.2-1.0) name the leader without its epoch. A new partition's
        first leader has epoch 0 (LeaderAndIsr(leader, isr) starts at initialLeaderEpoch = 0,
        api/LeaderAndIsr.scala); any later leader has an epoch the line does not give, and a leader without
        its epoch would read as a second leader of the old epoch, so it is kept in args and the store waits
        for the LeaderAndIsr rendering sent next."""
        leader = int(v["leader"])
        args["leader"] = leader
        if initial:
            self._set(ops, ("leader", p), leader)
            self._set(ops, ("leader_epoch", p), 0)

    def _selected_leader(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                         ops: list[Op]) -> tuple[str, str]:
        """OfflinePartitionLeaderSelector's choice (0.8.2-1.0), which the controller writes to ZooKeeper right
        after: the store's leader, leader epoch and ISR. The line names neither the controller nor its epoch, so
        its actor is an observer and the partition's controller epoch is left as it was."""
        p = _partition(v)
        fields = parse_rendering(v["lai"])
        _need(fields, "leader", "leader_epoch", "isr")
        args.update(partition=p, selected=True)
        self._store(ops, p, fields, None)
        return OBSERVER, "BrokerChange"

    def _isr_removed(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                     ops: list[Op]) -> tuple[str, str]:
        """A replica's removal from the ISR. Kafka (3.9.2 ReplicaStateMachine.scala, doRemoveReplicasFromIsr)
        prints this line for a partition whose ISR did not hold the replica too, with the state node as read
        and nothing written, but under the controller's own epoch: that epoch is the node's only if the
        line's version is a new one (STAMP)."""
        args["removed_from_isr"] = int(v["r"])
        p = _partition(v)
        fields = parse_rendering(v["lisr"])
        if "zk_version" in fields and "leader" in fields:
            ops.append((STAMP, ("partition_controller_epoch", p), [fields.get("controller_epoch", int(v["e"])),
                                                                    fields["zk_version"]]))
            self._store(ops, p, fields, None, stamped=True)
        else:
            self._store(ops, p, fields, int(v["e"]))
        return f"controller:{v['c']}", "BrokerChange"

    def _isr_updated(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                     ops: list[Op]) -> tuple[str, str]:
        """The ISR a leader asked for (AlterIsr / AlterPartition, KIP-497), written to the store by the
        controller. The model's leader writes its ISR change itself, so the step is an observer's: the store's
        ISR (with 3.3+'s rendering, its leader and epoch) and version as written."""
        p = _partition(v)
        fields = parse_rendering(v["lai"]) if "lai" in v else {"isr": _ints(v["replicas"]), "zk_version": int(v["v"])}
        _need(fields, "isr", "zk_version")
        args.update(partition=p, controller_id=int(v["c"]), alter_partition=True)
        self._store(ops, p, fields, None)
        return OBSERVER, "IsrShrink"

    def _assignment_updated(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                            ops: list[Op]) -> tuple[str, str]:
        """A reassignment's assignment written to the topic's node, kept as an argument: the ISR the
        reassignment's elections write is logged in state-change.log, a run of its own, so a controller.log
        run holding this assignment would judge it against an ISR it last saw before them."""
        args.update(partition=_partition(v), replicas=parse_assignment(v["assignment"]), written=True)
        return f"controller:{v['c']}", "PartitionReassignment"

    def _controller_elect(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                          ops: list[Op]) -> tuple[str, str]:
        self._set(ops, ("controller",), int(v["c"]))
        self._set(ops, ("controller_epoch",), int(v["e"]))
        # The model's ControllerElect: the winner acts in the epoch it wrote (KafkaReplication.tla).
        self._act(ops, v["c"], int(v["e"]))
        return f"broker:{v['c']}", "ControllerElect"

    def _controller_resign(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                           ops: list[Op]) -> tuple[str, str]:
        # The model's ControllerResign: a resigned controller acts in no epoch (0) until it wins again.
        self._set(ops, ("acting_controller_epoch", v["c"]), 0)
        self._acting[v["c"]] = None
        return f"controller:{v['c']}", "ControllerResign"

    def _act(self, ops: list[Op], c: str, epoch: int) -> None:
        """Controller c acts in `epoch`: in a new period when it acted in another (or none) before."""
        ops.append((ACT, ("acting_controller_epoch", c), epoch))
        period = self._acting.get(c)
        if period is None or period.epoch != epoch:
            period = Period(c, epoch, opens=c not in self._acting)
            self._acting[c] = period
            self.periods.append(period)

    def _transition(self, ops: list[Op], c: str, key: tuple[str, ...], src: str, dst: str,
                    args: dict[str, Any]) -> None:
        var = "partition_state" if key[0] == "partition" else "replica_state"
        leaf = (var, c, *key[1:])
        period = self._acting[c]
        assert period is not None, "a transition line is prefixed with its controller's epoch (_EPOCH_PREFIXED)"
        period.first.setdefault(leaf, src)
        args["transitions"] = [[*key, src, dst]]
        self._set(ops, leaf, dst, force=True)

    def _store(self, ops: list[Op], p: str, fields: dict[str, Any], epoch: int | None,
               stamped: bool = False) -> None:
        """The state node a line shows; its controller epoch too unless a STAMP op before carries it."""
        if "leader" in fields:
            self._set(ops, ("leader", p), fields["leader"])
        for var, name in (("leader_epoch", "leader_epoch"), ("isr", "isr"), ("partition_version", "zk_version")):
            if name in fields:
                self._set(ops, (var, p), fields[name])
        written_by = fields.get("controller_epoch", epoch)
        if "leader" in fields and written_by is not None and not stamped:
            self._set(ops, ("partition_controller_epoch", p), written_by)

    # -- the brokers' lines -----------------------------------------------------------------------------------

    def _received(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                  ops: list[Op]) -> tuple[str, str]:
        b = int(v["b"])
        args.update(controller_id=int(v["c"]), correlation_id=int(v["cid"]), received=True)
        if "ps" not in v:  # 2.6+'s summary of a whole request
            args["partition_count"] = int(v["n"])
            return f"broker:{b}", "LeaderAndIsr"
        fields = parse_rendering(v["ps"])
        p = _partition(v) if ("tap" in v or "tp" in v) else fields.get("partition")
        if p is None:
            raise LogLineError("malformed rendering: no partition")
        _need(fields, "leader", "leader_epoch")
        key = (b, int(v["cid"]), p)
        self.pending[key] = fields
        self.touched.add(key)
        self._request_args(args, v, p, fields)
        return f"broker:{b}", "LeaderAndIsr"

    def _become(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                ops: list[Op]) -> tuple[str, str]:
        b, p = int(v["b"]), _partition(v)
        fields = dict(self._take_pending((b, int(v["cid"]), p), args))
        if "leader" in v:
            fields["leader"] = int(v["leader"])
        self._request_args(args, v, p, fields)
        args.update(applied=True, role=f.fixed["role"])
        self._set(ops, ("role", str(b), p), f.fixed["role"])
        if "leader_epoch" in fields:
            self._set(ops, ("local_leader_epoch", str(b), p), fields["leader_epoch"])
        self._seen_epoch(ops, b, int(v["e"]))
        return f"broker:{b}", "LeaderAndIsr"

    def _completed(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                   ops: list[Op]) -> tuple[str, str]:
        b = int(v["b"])
        args.update(controller_id=int(v["c"]), correlation_id=int(v["cid"]), completed=True)
        if "e" in v:
            args["controller_epoch"] = int(v["e"])
        if "tp" in v or "tap" in v:
            entry: dict[str, Any] = {"partition": _partition(v)}
            if "leader" in v:
                entry["leader"] = int(v["leader"])
            args["partitions"] = [entry]
            args["role"] = f.fixed["role"]
        else:
            args["partition_count"] = int(v["n"])
        return f"broker:{b}", "LeaderAndIsr"

    def _transition_step(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                         ops: list[Op]) -> tuple[str, str]:
        """A sub-step of ReplicaManager.makeLeaders / makeFollowers (fetchers stopped, log truncated, fetcher
        started): the broker has accepted the request's controller epoch and, for the partition the line names,
        holds the role the transition gives it (with the leader, when the line names it). 2.6's summaries name
        no partition, only how many."""
        b = int(v["b"])
        role = f.fixed["role"]
        if "tp" in v or "tap" in v:
            p = _partition(v)
            self._request_args(args, v, p, {"leader": int(v["leader"])} if "leader" in v else {})
            self._set(ops, ("role", str(b), p), role)
        else:
            args.update(controller_id=int(v["c"]), controller_epoch=int(v["e"]), correlation_id=int(v["cid"]),
                        partition_count=int(v["n"]))
        args.update(applied=True, role=role)
        self._seen_epoch(ops, b, int(v["e"]))
        return f"broker:{b}", "LeaderAndIsr"

    def _local(self, v: dict[str, str], f: fm.Format, args: dict[str, Any], ops: list[Op]) -> tuple[str, str]:
        """2.6+'s INFO line of Partition.makeLeader / makeFollower: the broker's own view after the change,
        its HW among it. A leader's `from offset` is its log end, where the new epoch starts in its epoch
        cache (makeLeader assigns it, cluster/Partition.scala); a follower's is its log end too, which the
        model has no variable for, and a follower holds no epoch start (the implementation reports it only
        for leaders)."""
        b, p = str(int(v["b"])), _partition(v)
        leader = f.kind == fm.LOCAL_LEADER
        role = "leader" if leader else "follower"
        args.update(applied=True, role=role, partitions=[{"partition": p, "leader_epoch": int(v["le"])}])
        self._set(ops, ("role", b, p), role)
        self._set(ops, ("local_leader_epoch", b, p), int(v["le"]))
        self._set(ops, ("hw", b, p), int(v["hw"]))
        self._set(ops, ("epoch_start_offset", b, p), int(v["off"]) if leader else None)
        if "isrb" in v:
            self._set(ops, ("local_isr", b, p), _ints(v["isrb"]))
        if "leader" in v:
            args["partitions"][0]["leader"] = int(v["leader"])
        return f"broker:{b}", "LeaderAndIsr"

    def _stale(self, v: dict[str, str], f: fm.Format, args: dict[str, Any], ops: list[Op]) -> tuple[str, str]:
        """A request of an old controller epoch, ignored: the broker says which epoch it knows."""
        b = int(v["b"])
        action = {fm.STALE_LEADER_AND_ISR: "LeaderAndIsr", fm.STALE_UPDATE_METADATA: "UpdateMetadata",
                  fm.STALE_STOP_REPLICA: "StopReplica"}[f.kind]
        args.update(controller_epoch=int(v["e"]), applied=False)
        args.update((k, int(v[n])) for k, n in (("controller_id", "c"), ("correlation_id", "cid")) if n in v)
        self._seen_epoch(ops, b, int(v["latest"]))
        return f"broker:{b}", action

    def _rejected(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                  ops: list[Op]) -> tuple[str, str]:
        """One partition of a request the broker refused (leader epoch, assignment, log directory)."""
        b = int(v["b"])
        self._request_args(args, v, _partition(v), {})
        args["applied"] = False
        if "le" in v:
            args["partitions"][0]["leader_epoch"] = int(v["le"])
        return f"broker:{b}", "StopReplica" if f.fixed.get("request") == "StopReplica" else "LeaderAndIsr"

    def _update_metadata(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                         ops: list[Op]) -> tuple[str, str]:
        b = int(v["b"])
        args.update(controller_id=int(v["c"]), controller_epoch=int(v["e"]), correlation_id=int(v["cid"]))
        if "tp" in v or "tap" in v:
            args["partition"] = _partition(v)
        self._seen_epoch(ops, b, int(v["e"]))
        return f"broker:{b}", "UpdateMetadata"

    def _stop_replica(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                      ops: list[Op]) -> tuple[str, str]:
        b = int(v["b"])
        if "tp" in v or "tap" in v:
            args["partition"] = _partition(v)
        if "delete" in v:
            args["delete"] = v["delete"] == "true"
        args.update((k, int(v[n])) for k, n in (("controller_id", "c"), ("correlation_id", "cid"),
                                                 ("controller_epoch", "e"), ("partition_count", "n")) if n in v)
        if "e" in v:
            self._seen_epoch(ops, b, int(v["e"]))
        return f"broker:{b}", "StopReplica"

    def _stopped_replica(self, v: dict[str, str], f: fm.Format, args: dict[str, Any],
                         ops: list[Op]) -> tuple[str, str]:
        """The end of ReplicaManager.stopReplica (logged whether or not the broker held the replica): the replica
        holds no role, and with delete it is gone with its leader epoch and ISR, as the model's StopReplica
        leaves it."""
        b, p = str(int(v["b"])), _partition(v)
        delete = v["delete"] == "true"
        args.update(partition=p, delete=delete, completed=True)
        self._set(ops, ("role", b, p), None)
        if delete:
            for var in ("local_leader_epoch", "local_isr"):
                self._set(ops, (var, b, p), None)
        return f"broker:{b}", "StopReplica"

    @staticmethod
    def _request_args(args: dict[str, Any], v: dict[str, str], p: str, fields: dict[str, Any]) -> None:
        entry: dict[str, Any] = {"partition": p}
        entry.update((k, fields[k]) for k in ("leader", "leader_epoch", "isr", "replicas") if k in fields)
        args.update(controller_id=int(v["c"]), controller_epoch=int(v["e"]), correlation_id=int(v["cid"]),
                    partitions=[entry])

    @staticmethod
    def _seen_epoch(ops: list[Op], b: int, epoch: int) -> None:
        """A broker keeps the newest controller epoch it has seen."""
        ops.append((RAISE, ("broker_controller_epoch", str(b)), epoch))

    # -- deltas ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _set(ops: list[Op], leaf: Leaf, value: Any, force: bool = False) -> None:
        ops.append((FORCE if force else SET, leaf, value))


def value_of(op: Op) -> Any:
    """The value an op writes to its leaf when it does."""
    return op[2][0] if op[0] == STAMP else op[2]


def written(known: dict[Leaf, Any], op: Op) -> bool:
    """Whether the op writes its leaf, given the values the log showed last (`known`, updated)."""
    kind, leaf, value = op
    if kind == STAMP:
        value, version = value
        if known.get(("partition_version", *leaf[1:])) == version or known.get(leaf) == value:
            return False
    elif kind in (SET, ACT):
        if known.get(leaf) == value:
            return False
    elif kind == RAISE and not value > known.get(leaf, 0):
        return False
    known[leaf] = value
    return True


def init_event(run: str, file: str, brokers: set[int], first_state: dict[Leaf, str]) -> Event:
    """The synthesized Init: a snapshot of what the log shows first (of each controller's machines, what its
    first period shows them leaving first; a later period's are loaded where it begins, `Load`)."""
    init: dict[str, Any] = {"controller": NO_LEADER, "controller_epoch": 0}
    for b in sorted(brokers):
        _put(init, ("broker_controller_epoch", str(b)), 0)
        _put(init, ("acting_controller_epoch", str(b)), 0)
    for leaf, value in sorted(first_state.items()):
        _put(init, leaf, value)
    setup = {"knobs": {}, "brokers": sorted(brokers), "source": Path(file).name, SYNTHESIZED: True}
    return make_event(run, 0, "env", "Init", setup, init, full=True)


def events_of(steps: list[Step], run: str, seq: int, known: dict[Leaf, Any],
              fields: dict[PendingKey, dict[str, Any]], file: str, loads: list[Load]) -> list[Event]:
    """The events of the steps, numbered from `seq`, each with the leaves it writes given `known` (the state
    at the steps' start, updated), `fields` (the requests received before the steps, still pending) and
    `loads` (those of the periods the steps begin, in order)."""
    out: list[Event] = []
    pending = iter(loads)
    for step in steps:
        if step.redo is not None and step.redo.key in fields:
            step = redo(step.redo, fields[step.redo.key], file)
        delta: dict[str, Any] = {}
        load = None
        for op in step.ops:
            if written(known, op):
                if op[0] == ACT:
                    load = next(pending)
                    for leaf, state in load.states.items():
                        _put(delta, leaf, state)
                _put(delta, op[1], value_of(op))
        actor, action, args = step.actor, step.action, step.args
        if load is not None and load.states:
            actor, action, args = _loading(load, step)
        if step.event:
            out.append(make_event(run, seq, actor, action, args, delta))
            seq += 1
    return out


def _loading(load: Load, step: Step) -> tuple[str, str, dict[str, Any]]:
    """The first line of a period, as the model's ControllerElect, whose failover it is part of (the winner
    loads its context, then runs the startup transitions, KafkaReplication.tla): the load's transitions before
    the line's own, and the line's action under `context_load`, marked as made up by the parser."""
    args = {**step.args, "transitions": [*load.transitions(), *step.args.get("transitions", [])],
            "context_load": {SYNTHESIZED: True, "controller_epoch": load.epoch, "line_action": step.action}}
    return f"broker:{load.controller}", "ControllerElect", args


def redo(again: Redo, fields: dict[str, Any], file: str) -> Step:
    """The step of a `become` line whose request was pending with `fields`. It raises no LogLineError: the
    line did not when read without them, and the fields only add arguments and a leaf."""
    parser = _Parser(file, pending={again.key: fields})
    parser.message(again.match, dict(again.args))
    return parser.steps[-1]


_Handler = Callable[[_Parser, dict[str, str], fm.Format, dict[str, Any], list[Op]], tuple[str, str]]
_HANDLERS: Final[dict[str, _Handler]] = {
    fm.PARTITION_STATE: _Parser._partition_state, fm.REPLICA_STATE: _Parser._replica_state,
    fm.FAILED_CHANGE: _Parser._failed_change, fm.SEND_LEADER_AND_ISR: _Parser._send_leader_and_isr,
    fm.SEND_OTHER: _Parser._send_other, fm.RESPONSE: _Parser._response,
    fm.REASSIGNMENT_SENT: _Parser._reassignment_sent, fm.ELECTED_LEADER: _Parser._elected_leader,
    fm.ISR_REMOVED: _Parser._isr_removed, fm.RECEIVED: _Parser._received, fm.STALE_LEADER_AND_ISR: _Parser._stale,
    fm.REJECTED: _Parser._rejected, fm.BECOME: _Parser._become, fm.COMPLETED: _Parser._completed,
    fm.LOCAL_LEADER: _Parser._local, fm.LOCAL_FOLLOWER: _Parser._local, fm.UPDATE_METADATA: _Parser._update_metadata,
    fm.STALE_UPDATE_METADATA: _Parser._stale, fm.STOP_REPLICA: _Parser._stop_replica,
    fm.STALE_STOP_REPLICA: _Parser._stale, fm.CONTROLLER_ELECT: _Parser._controller_elect,
    fm.CONTROLLER_RESIGN: _Parser._controller_resign, fm.FETCHERS_STOPPED: _Parser._transition_step,
    fm.LOG_TRUNCATED: _Parser._transition_step, fm.FETCHER_STARTED: _Parser._transition_step,
    fm.STOPPED_REPLICA: _Parser._stopped_replica, fm.SELECTED_LEADER: _Parser._selected_leader,
    fm.ISR_UPDATED: _Parser._isr_updated, fm.ASSIGNMENT_UPDATED: _Parser._assignment_updated,
}


def _partition(v: dict[str, str]) -> str:
    return partition_name(v.get("tp") or v["tap"])


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.strip("[]").split(",") if x]


def _need(fields: dict[str, Any], *names: str) -> None:
    missing = [n for n in names if n not in fields]
    if missing:
        raise LogLineError(f"malformed rendering: no {', '.join(missing)}")


def _put(target: dict[str, Any], leaf: tuple[str, ...], value: Any) -> None:
    for key in leaf[:-1]:
        target = target.setdefault(key, {})
    target[leaf[-1]] = value


# -- reading a file: layouts, wrapped lines, stack traces ---------------------------------------------------------


MAX_WRAP: Final = 8  # physical lines one message may have been wrapped into


@dataclass
class _Record:
    """One logged message: its first physical line, the message as read (two readings when it was wrapped:
    joined as split mid-word, or at a space) and the wrapped lines joined to it."""

    number: int
    time: str
    logger: str | None
    variants: list[str]
    more: list[int] = field(default_factory=list)
    complete: bool = True
    exception: str | None = None  # the head of the stack trace logged with it: what an ERROR line means


def _unrecognised(message: str) -> str:
    if message.startswith(("[Controller id=", "Controller ")):
        return "unrecognised controller message"
    if message.startswith(("[Broker id=", "Broker ")):
        return "unrecognised broker message"
    return "unrecognised message (no statement of the table, any release)"


def record_at(texts: list[str | None], index: int, layout: Layout) -> tuple[re.Match[str], list[str], int] | None:
    """The record beginning at texts[index]: its layout match, its message readings, and how many of the
    following lines it was wrapped into; None when no record begins there."""
    body = unwrap(texts[index] or "")
    found = layout.match(body)
    if found is not None:
        return found, [found["msg"]], 0
    if not starts_record(layout, body):
        return None
    pieces = [body]
    for extra in range(1, MAX_WRAP + 1):
        following = texts[index + extra] if index + extra < len(texts) else None
        if following is None:
            return None
        piece = unwrap(following)
        if not piece.strip() or starts_record(layout, piece) or is_stack_trace(piece):
            return None
        pieces.append(piece)
        matches = [m for m in (layout.match(sep.join(pieces)) for sep in ("", " ")) if m is not None]
        if matches:
            return matches[0], [m["msg"] for m in matches], extra
    return None


@dataclass
class SplitParse:
    """The lines of one split of a file (the whole file, or a byte range of it, split.py): their steps, the
    lines skipped and quarantined, and what they leave of the parser's state for the splits after them."""

    steps: list[Step]
    quarantine: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    lines: int
    periods: list[Period]
    brokers: set[int]
    pending: dict[PendingKey, dict[str, Any]]
    touched: set[PendingKey]


def decode(chunk: bytes) -> str | None:
    try:
        return chunk.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None


def parse_lines(texts: list[str | None], layout: Layout, file: str, first: int = 1, complete_last: bool = True,
                open_start: bool = False) -> SplitParse:
    """Lines `first`, `first + 1`... of a file read through `layout`; `complete_last` says whether the last
    ended with a newline (or more lines follow), `open_start` whether lines came before them."""
    parser = _Parser(file, open_start=open_start)
    quarantine: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []

    def note(target: list[dict[str, Any]], number: int, reason: str) -> None:
        target.append({"file": file, "line": number, "reason": reason})

    name = Path(file).name
    for record in _records(texts, layout, complete_last, note, quarantine, skipped, first):
        _parse_record(parser, record, name, note, quarantine, skipped)
    return SplitParse(parser.steps, sorted(quarantine, key=_line), sorted(skipped, key=_line), len(texts),
                      parser.periods, parser.brokers, parser.pending, parser.touched)


def _line(entry: dict[str, Any]) -> int:
    return int(entry["line"])


_Note = Callable[[list[dict[str, Any]], int, str], None]


def _records(texts: list[str | None], layout: Layout, complete_last: bool, note: _Note,
             quarantine: list[dict[str, Any]], skipped: list[dict[str, Any]], first: int) -> list[_Record]:
    records: list[_Record] = []
    current: _Record | None = None
    index = 0
    while index < len(texts):
        number, text = first + index, texts[index]
        start = record_at(texts, index, layout) if text is not None else None
        if start is not None:
            found, variants, extra = start
            groups = found.groupdict()
            current = _Record(number, groups.get("ts") or "", groups.get("logger"), variants,
                              list(range(number + 1, number + 1 + extra)))
            records.append(current)
            index += 1 + extra
            current.complete = complete_last or index < len(texts)
            continue
        index += 1
        if text is None:
            note(quarantine, number, "not UTF-8")
            current = None
            continue
        body = unwrap(text)
        if not body.strip():
            note(skipped, number, "skipped on purpose: blank line")
        elif is_stack_trace(body):
            note(skipped, number, "skipped on purpose: stack trace" +
                 (f" of line {current.number}" if current is not None else ""))
            if current is not None and current.exception is None:
                current.exception = body.strip()
        elif layout.tail_free and current is not None and (current.more or [current.number])[-1] == number - 1 \
                and not starts_record(layout, body):
            # A layout with nothing after %m: the message itself goes on on this line.
            current.variants = [current.variants[0] + body, current.variants[0] + " " + body]
            current.more.append(number)
            current.complete = complete_last or index < len(texts)
        else:
            reason = f"not a log line: no {layout.name} layout ({layout.pattern}) matches"
            last = index == len(texts) and not complete_last
            note(quarantine, number, f"truncated file (last line incomplete): {reason}" if last else reason)
    return records


@functools.cache
def _logger(name: str) -> str | None:
    """The logger of the table a layout's `%c` names, in full or shortened (`%c{1}`: `KafkaController`)."""
    return next((full for full in _LOGGERS if full == name or full.endswith("." + name)), None)


def _parse_record(parser: _Parser, record: _Record, name: str, note: _Note, quarantine: list[dict[str, Any]],
                  skipped: list[dict[str, Any]]) -> None:
    if record.logger is not None and _logger(record.logger) is None:
        for number in (record.number, *record.more):
            note(skipped, number, f"skipped on purpose: logger {record.logger} logs no state change")
        return
    outcome, reason = _apply(parser, record, name)
    for number in record.more:
        note(skipped, number, f"skipped on purpose: wrapped part of line {record.number}")
    if outcome == "event":
        return
    if outcome == "skip":
        note(skipped, record.number, f"skipped on purpose: {reason}")
        return
    if not record.complete:
        reason = f"truncated file (last line incomplete): {reason}"
    note(quarantine, record.number, reason)


def _apply(parser: _Parser, record: _Record, name: str) -> tuple[str, str]:
    """("event", "") when the record became an event, ("skip", why) or ("quarantine", why); `name` is the
    file's."""
    logger = _logger(record.logger) if record.logger is not None else None
    for message in record.variants:
        matched = match_message(message, logger)
        if matched is None:
            continue
        if matched.format.kind == fm.SKIP:
            return "skip", matched.format.note
        args: dict[str, Any] = {"log": f"{name}:{record.number}", "time": record.time}
        if record.exception is not None:
            args["exception"] = record.exception
        try:
            parser.message(matched, args)
        except LogLineError as err:
            return "quarantine", str(err)
        return "event", ""
    return "quarantine", _unrecognised(record.variants[0])
