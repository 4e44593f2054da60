"""Kafka `state-change.log` files (ZooKeeper-mode brokers) as partial traces in format v1.

A broker's state-change logger records what the controller inside it did to partitions and replicas,
what it sent to brokers, and what the broker did with the LeaderAndIsr requests it got. Three renderings
are understood (see docs/pipeline.md for examples):

- 0.10 and 0.11: `Controller 1 epoch 3 changed partition [orders,0] state from ... to ...`,
  `Broker 2 received LeaderAndIsr request (LeaderAndIsrInfo:(Leader:1,ISR:1,2,LeaderEpoch:0,...`;
- 1.x to 2.3: `[Controller id=1 epoch=3] Changed partition orders-0 state from ... with state
  LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0)`, `[Broker id=2] Received
  LeaderAndIsr request PartitionState(controllerEpoch=3, leader=1, ..., isr=1,2, ...)`;
- 2.4 and later: the same prefixes, partition states rendered as `LeaderAndIsrPartitionState(topicName=
  'orders', partitionIndex=0, ..., isr=[1, 2], ...)`.

Each recognised line becomes one event; a line that is not recognised, or whose rendering lacks a field
the event needs, is quarantined with its file, line number and reason. The log names neither the
controller event that caused a change nor the brokers' logs and high watermarks, so the trace observes the
state machines, the store's leader, epoch and ISR as the controller wrote them, the brokers' roles and
leader epochs, and the controller epochs brokers have seen; the controller action is inferred from the
change (see `_controller_action`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.spec.trace.format import Event, make_event

_PREFIX: Final = re.compile(r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (?P<level>[A-Z]+) (?P<msg>.*?)"
                            r"(?: \(state\.change\.logger\))?$")
_CONTROLLER: Final = re.compile(r"^(?:\[Controller id=(?P<a>\d+) epoch=(?P<ae>\d+)\]|Controller (?P<b>\d+) epoch "
                                r"(?P<be>\d+)) (?P<rest>.*)$")
_BROKER: Final = re.compile(r"^(?:\[Broker id=(?P<a>\d+)\]|Broker (?P<b>\d+)) (?P<rest>.*)$")
_PARTITION: Final = r"(?P<p>\[[^\],]+,\d+\]|\S+-\d+)"
_STATE: Final = r"(?P<src>\w+) to (?P<dst>\w+)"
_PARTITION_CHANGE: Final = re.compile(rf"^[Cc]hanged partition {_PARTITION} (?:state )?from {_STATE}"
                                      r"(?: with (?:state )?(?P<info>.*))?$")
_REPLICA_CHANGE: Final = re.compile(rf"^[Cc]hanged state of replica (?P<r>\d+) for partition {_PARTITION} from "
                                    rf"{_STATE}$")
_SEND_LEADER_AND_ISR: Final = re.compile(rf"^[Ss]ending become-(?P<role>leader|follower) LeaderAndIsr request "
                                         rf"(?P<info>.*) to broker (?P<to>\d+) for partition {_PARTITION}$")
_SEND_OTHER: Final = re.compile(r"^[Ss]ending (?P<kind>UpdateMetadata|StopReplica) request .* to brokers? .*$")
_RECEIVED: Final = re.compile(r"^[Rr]eceived LeaderAndIsr request (?P<info>.*) correlation id (?P<cid>\d+) from "
                              rf"controller (?P<c>\d+) epoch (?P<e>\d+)(?: for partition {_PARTITION})?$")
_TRANSITION: Final = re.compile(r"^[Hh]andling LeaderAndIsr request correlationId (?P<cid>\d+) from controller "
                                r"(?P<c>\d+) epoch (?P<e>\d+) starting the become-(?P<role>leader|follower) "
                                rf"transition for partition {_PARTITION}(?: with leader (?P<leader>\d+))?$")
_COMPLETED: Final = re.compile(r"^[Cc]ompleted LeaderAndIsr request correlationId (?P<cid>\d+) from controller "
                               r"(?P<c>\d+) epoch (?P<e>\d+) for the become-(?:leader|follower) transition for "
                               rf"partition {_PARTITION}$")
_IGNORED: Final = re.compile(r"^[Ii]gnoring LeaderAndIsr request from controller (?P<c>\d+) with correlation id "
                             r"(?P<cid>\d+) epoch (?P<e>\d+) since its controller epoch \d+ is old\. Latest known "
                             r"controller epoch is (?P<latest>\d+)$")
# key=value (1.x and later) or Key:value (0.10) pairs of a LeaderAndIsr rendering.
_PAIR: Final = re.compile(r"(?P<key>\w+)[=:](?P<value>\[[^\]]*\]|List\([^)]*\)|'[^']*'|-?\d+(?:,-?\d+)*|\w+)")
_KEYS: Final = {"leader": "leader", "Leader": "leader", "leaderEpoch": "leader_epoch", "LeaderEpoch": "leader_epoch",
                "isr": "isr", "ISR": "isr", "zkVersion": "zk_version", "controllerEpoch": "controller_epoch",
                "ControllerEpoch": "controller_epoch", "replicas": "replicas", "AllReplicas": "replicas",
                "topicName": "topic", "partitionIndex": "index"}
_LISTS: Final = frozenset({"isr", "replicas"})


class LogLineError(ValueError):
    """A line that cannot become an event; the message is the quarantine reason."""


def partition_name(text: str) -> str:
    """`[orders,0]` (0.10) or `orders-0` -> `orders-0`."""
    if text.startswith("["):
        topic, _, index = text[1:-1].rpartition(",")
        return f"{topic}-{index}"
    return text


def parse_rendering(text: str) -> dict[str, Any]:
    """The fields of a LeaderAndIsr or partition-state rendering, under the trace's names."""
    fields: dict[str, Any] = {}
    for match in _PAIR.finditer(text):
        name = _KEYS.get(match["key"])
        if name is None or name in fields:
            continue
        raw = match["value"].strip("'")
        if name in _LISTS:
            fields[name] = [int(x) for x in re.findall(r"-?\d+", raw)]
        elif name == "topic":
            fields[name] = raw
        else:
            try:
                fields[name] = int(raw)
            except ValueError:
                raise LogLineError(f"malformed rendering: {match['key']} is {raw!r}, not an integer") from None
    if "topic" in fields and "index" in fields:
        fields["partition"] = f"{fields.pop('topic')}-{fields.pop('index')}"
    return fields


def _need(fields: dict[str, Any], *names: str) -> None:
    missing = [n for n in names if n not in fields]
    if missing:
        raise LogLineError(f"malformed rendering: no {', '.join(missing)}")


def _controller_action(kind: str, dst: str) -> str:
    """The controller event behind a change, as far as the change tells: creation, deletion, or (for every
    other change, and for requests sent) a change of brokers."""
    if dst in ("NewPartition", "NewReplica"):
        return "TopicChange"
    if dst.startswith("ReplicaDeletion") or dst.startswith("NonExistent"):
        return "TopicDeletion"
    return "BrokerChange"


@dataclass
class _Pending:
    """What a broker was told about a partition by a request it received, until it acts on it."""

    fields: dict[str, Any]


@dataclass
class ParsedLog:
    events: list[Event]
    quarantine: list[dict[str, Any]]
    lines: int

    @property
    def accepted(self) -> int:
        return self.lines - len(self.quarantine)


@dataclass
class _Parser:
    file: str
    run: str
    # The state the log has shown so far: a leaf is written only when it changes, as v1 writers do.
    known: dict[tuple[str, ...], Any] = field(default_factory=dict)
    first_state: dict[tuple[str, ...], str] = field(default_factory=dict)
    brokers: set[str] = field(default_factory=set)
    pending: dict[tuple[str, str, str], _Pending] = field(default_factory=dict)
    body: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)

    def line(self, number: int, text: str) -> None:
        match = _PREFIX.match(text)
        if match is None:
            raise LogLineError("not a state-change log line (no [timestamp] LEVEL prefix)")
        message = match["msg"]
        source = {"log": f"{Path(self.file).name}:{number}", "time": match["ts"]}
        controller = _CONTROLLER.match(message)
        if controller is not None:
            c = controller["a"] or controller["b"]
            epoch = int(controller["ae"] or controller["be"])
            self._controller(c, epoch, controller["rest"], source)
            return
        broker = _BROKER.match(message)
        if broker is not None:
            self._broker(broker["a"] or broker["b"], broker["rest"], source)
            return
        raise LogLineError("unrecognised message (neither a [Controller id=N epoch=E] nor a [Broker id=N] line)")

    # -- the controller's lines ---------------------------------------------------------------------------

    def _controller(self, c: str, epoch: int, rest: str, args: dict[str, Any]) -> None:
        self.brokers.add(c)
        delta: dict[str, Any] = {}
        self._set(delta, ("acting_controller_epoch", c), epoch)
        if (m := _PARTITION_CHANGE.match(rest)) is not None:
            p = partition_name(m["p"])
            self._transition(delta, c, ("partition", p), m["src"], m["dst"], args)
            if m["info"]:
                self._store(delta, p, parse_rendering(m["info"]), epoch)
            action = _controller_action("partition", m["dst"])
        elif (m := _REPLICA_CHANGE.match(rest)) is not None:
            p = partition_name(m["p"])
            self._transition(delta, c, ("replica", p, m["r"]), m["src"], m["dst"], args)
            action = _controller_action("replica", m["dst"])
        elif (m := _SEND_LEADER_AND_ISR.match(rest)) is not None:
            fields = parse_rendering(m["info"])
            _need(fields, "leader", "leader_epoch", "isr")
            p = partition_name(m["p"])
            args.update(request="LeaderAndIsr", to=int(m["to"]), role=m["role"])
            # The request carries the partition node the controller wrote, but its replicas are the
            # controller's memory, not the store's assignment: step 7 of Kafka 2.3.0's reassignment sends
            # RAR while the store still holds OAR + RAR (docs/invariants.md, IsrSubsetOfReplicas).
            self._store(delta, p, fields, epoch)
            if "replicas" in fields:
                args["replicas"] = fields["replicas"]
            action = "BrokerChange"
        elif (m := _SEND_OTHER.match(rest)) is not None:
            args["request"] = m["kind"]
            action = "BrokerChange"
        else:
            raise LogLineError("unrecognised controller message")
        self.body.append((f"controller:{c}", action, args, delta))

    def _transition(self, delta: dict[str, Any], c: str, key: tuple[str, ...], src: str, dst: str,
                    args: dict[str, Any]) -> None:
        var = "partition_state" if key[0] == "partition" else "replica_state"
        leaf = (var, c, *key[1:])
        self.first_state.setdefault(leaf, src)
        args["transitions"] = [[*key, src, dst]]
        self._set(delta, leaf, dst, force=True)

    def _store(self, delta: dict[str, Any], p: str, fields: dict[str, Any], epoch: int) -> None:
        for var, name in (("leader", "leader"), ("leader_epoch", "leader_epoch"), ("isr", "isr"),
                          ("partition_version", "zk_version")):
            if name in fields:
                self._set(delta, (var, p), fields[name])
        if "leader" in fields:
            self._set(delta, ("partition_controller_epoch", p), fields.get("controller_epoch", epoch))

    # -- the brokers' lines --------------------------------------------------------------------------------------

    def _broker(self, b: str, rest: str, args: dict[str, Any]) -> None:
        self.brokers.add(b)
        delta: dict[str, Any] = {}
        if (m := _RECEIVED.match(rest)) is not None:
            fields = parse_rendering(m["info"])
            p = partition_name(m["p"]) if m["p"] else fields.get("partition")
            if p is None:
                raise LogLineError("malformed rendering: no partition")
            _need(fields, "leader", "leader_epoch")
            self.pending[(b, m["cid"], p)] = _Pending(fields)
            self._request_args(args, m, p, fields)
            args["received"] = True
        elif (m := _TRANSITION.match(rest)) is not None:
            p = partition_name(m["p"])
            pending = self.pending.pop((b, m["cid"], p), None)
            fields = pending.fields if pending is not None else {}
            self._request_args(args, m, p, fields)
            args["applied"] = True
            self._set(delta, ("role", b, p), m["role"])
            if "leader_epoch" in fields:
                self._set(delta, ("local_leader_epoch", b, p), fields["leader_epoch"])
            self._seen_epoch(delta, b, int(m["e"]))
        elif (m := _IGNORED.match(rest)) is not None:
            args.update(controller_id=int(m["c"]), controller_epoch=int(m["e"]), correlation_id=int(m["cid"]),
                        applied=False)
            self._seen_epoch(delta, b, int(m["latest"]))
        elif (m := _COMPLETED.match(rest)) is not None:
            self._request_args(args, m, partition_name(m["p"]), {})
            args["completed"] = True
        else:
            raise LogLineError("unrecognised broker message")
        self.body.append((f"broker:{b}", "LeaderAndIsr", args, delta))

    @staticmethod
    def _request_args(args: dict[str, Any], m: re.Match[str], p: str, fields: dict[str, Any]) -> None:
        entry: dict[str, Any] = {"partition": p}
        entry.update((k, fields[k]) for k in ("leader", "leader_epoch", "isr", "replicas") if k in fields)
        args.update(controller_id=int(m["c"]), controller_epoch=int(m["e"]), correlation_id=int(m["cid"]),
                    partitions=[entry])

    def _seen_epoch(self, delta: dict[str, Any], b: str, epoch: int) -> None:
        """A broker keeps the newest controller epoch it has seen."""
        if epoch > self.known.get(("broker_controller_epoch", b), 0):
            self._set(delta, ("broker_controller_epoch", b), epoch)

    # -- deltas -------------------------------------------------------------------------------------------------------

    def _set(self, delta: dict[str, Any], leaf: tuple[str, ...], value: Any, force: bool = False) -> None:
        if not force and self.known.get(leaf) == value:
            return
        self.known[leaf] = value
        _put(delta, leaf, value)

    def events(self) -> list[Event]:
        """Init (a snapshot of what the log shows first) and one event per recognised line."""
        init: dict[str, Any] = {"controller": 0, "controller_epoch": 0}
        for b in sorted(self.brokers, key=int):
            _put(init, ("broker_controller_epoch", b), 0)
            _put(init, ("acting_controller_epoch", b), 0)
        for leaf, value in sorted(self.first_state.items()):
            _put(init, leaf, value)
        setup = {"knobs": {}, "brokers": sorted(int(b) for b in self.brokers), "source": Path(self.file).name}
        out = [make_event(self.run, 0, "env", "Init", setup, init, full=True)]
        for seq, (actor, action, args, delta) in enumerate(self.body, start=1):
            out.append(make_event(self.run, seq, actor, action, args, delta))
        return out


def _put(target: dict[str, Any], leaf: tuple[str, ...], value: Any) -> None:
    for key in leaf[:-1]:
        target = target.setdefault(key, {})
    target[leaf[-1]] = value


def parse_kafka_log(path: str | Path, run: str | None = None) -> ParsedLog:
    """Every line of a state-change.log file: events in line order, and the lines quarantined."""
    file = str(path)
    parser = _Parser(file, run or f"log-{Path(file).stem}")
    quarantine: list[dict[str, Any]] = []
    number = 0
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
                parser.line(number, text)
            except UnicodeDecodeError:
                quarantine.append({"file": file, "line": number, "reason": "not UTF-8"})
            except LogLineError as err:
                reason = str(err)
                if not raw.endswith(b"\n"):
                    reason = f"truncated file (last line incomplete): {reason}"
                quarantine.append({"file": file, "line": number, "reason": reason})
    return ParsedLog(parser.events(), quarantine, number)
