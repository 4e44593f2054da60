"""The objects Kafka interpolates into its state-change lines: how each release renders them, and reading
them back.

Read from the toString of each class at the tags of formats.RELEASES:

- `{lisr}`, LeaderIsrAndControllerEpoch (controller/KafkaController.scala):
  `(Leader:1,ISR:1,2,LeaderEpoch:0,ControllerEpoch:3)`; `,ZkVersion:V` before ControllerEpoch in 2.7,
  2.8 and 3.1+; `,LeaderRecoveryState:RECOVERED` after ISR from 3.2.
- `{lai}`, LeaderAndIsr (api/LeaderAndIsr.scala): JSON `{"leader":1,"leader_epoch":0,"isr":[1,2]}` up
  to 1.0; `LeaderAndIsr(leader=1, leaderEpoch=0, isr=List(1, 2), zkVersion=0)` 1.1-3.1;
  `, leaderRecoveryState=RECOVERED` before zkVersion from 3.2; `partitionEpoch=` for zkVersion from 3.3;
  `isrWithBrokerEpoch=List(BrokerState(brokerId=1, brokerEpoch=-1), ...)` for isr from 3.5.
- `{ps}`, the partition state of a LeaderAndIsr request: 0.8.2-0.9 PartitionStateInfo
  (api/LeaderAndIsrRequest.scala) `(LeaderAndIsrInfo:<lisr>,ReplicationFactor:2),AllReplicas:1,2)`;
  0.10 requests.PartitionState `PartitionState(controllerEpoch=3, leader=1, leaderEpoch=0, isr=[1, 2],
  zkVersion=0, replicas=[1, 2])`; 0.11 the same with `isr=1,2` and `replicas=1,2`; 1.0-2.3
  LeaderAndIsrRequest.PartitionState adds `, isNew=false`; 2.4+ the generated LeaderAndIsrPartitionState
  `LeaderAndIsrPartitionState(topicName='orders', partitionIndex=0, controllerEpoch=3, leader=1,
  leaderEpoch=0, isr=[1, 2], zkVersion=0, replicas=[1, 2], addingReplicas=[], removingReplicas=[],
  isNew=false)`, with `partitionEpoch` for zkVersion and `, leaderRecoveryState=0` at the end from 3.3.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from kcm.conformance.pipeline.kafka_log.formats import LINES


class LogLineError(ValueError):
    """A line that cannot become an event; the message is the quarantine reason."""


# key=value (1.x and later), Key:value (LeaderIsrAndControllerEpoch) or "key": value (JSON) pairs.
_PAIR: Final = re.compile(r"(?P<key>\w+)[=:](?P<value>\[[^\]]*\]|List\([^)]*\)|'[^']*'|-?\d+(?:,-?\d+)*|\w+)")
_BROKER_STATES: Final = re.compile(r"isrWithBrokerEpoch=List\((?P<states>(?:BrokerState\([^)]*\)(?:, )?)*)\)")
_JSON_KEY: Final = re.compile(r'"(\w+)":')
_INT: Final = re.compile(r"-?\d+")
_BROKER_ID: Final = re.compile(r"brokerId=(-?\d+)")
_ASSIGNED: Final = re.compile(r"replicas=(-?\d+(?:,-?\d+)*)?")
_KEYS: Final = {"leader": "leader", "Leader": "leader", "leaderEpoch": "leader_epoch", "LeaderEpoch": "leader_epoch",
                "leader_epoch": "leader_epoch", "isr": "isr", "ISR": "isr", "zkVersion": "zk_version",
                "ZkVersion": "zk_version", "partitionEpoch": "zk_version", "controllerEpoch": "controller_epoch",
                "ControllerEpoch": "controller_epoch", "replicas": "replicas", "AllReplicas": "replicas",
                "topicName": "topic", "partitionIndex": "index"}
_LISTS: Final = frozenset({"isr", "replicas"})


def partition_name(text: str) -> str:
    """`[orders,0]` (TopicAndPartition up to 0.11) or `orders-0` -> `orders-0`."""
    if text.startswith("["):
        topic, _, index = text[1:-1].rpartition(",")
        return f"{topic}-{index}"
    return text


def parse_rendering(text: str) -> dict[str, Any]:
    """The fields of any rendering above, under the trace's names (a 3.x partitionEpoch is the zkVersion)."""
    fields: dict[str, Any] = {}
    # The substring tests only spare the regular expressions a search that cannot succeed.
    states = _BROKER_STATES.search(text) if "isrWithBrokerEpoch=" in text else None
    if states is not None:
        fields["isr"] = [int(x) for x in _BROKER_ID.findall(states["states"])]
        text = text[:states.start()] + text[states.end():]
    for match in _PAIR.finditer(_JSON_KEY.sub(r"\1:", text) if '"' in text else text):
        name = _KEYS.get(match["key"])
        if name is None or name in fields:
            continue
        raw = match["value"].strip("'")
        if name in _LISTS:
            fields[name] = [int(x) for x in _INT.findall(raw)]
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


def parse_assignment(text: str) -> list[int]:
    """The replicas of a ReplicaAssignment (controller/ControllerContext.scala, 2.4+):
    `ReplicaAssignment(replicas=1,2,3, addingReplicas=3, removingReplicas=)`."""
    match = _ASSIGNED.search(text)
    if match is None:
        raise LogLineError("malformed rendering: no replicas in the replica assignment")
    return [int(x) for x in _INT.findall(match[1] or "")]


# -- rendering (for fixtures: the inverse of the above, release by release) ------------------------------------


def _at_least(line: str, first: str) -> bool:
    return LINES.index(line) >= LINES.index(first)


def _commas(values: list[int]) -> str:
    return ",".join(map(str, values))


def _brackets(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _scala_list(values: list[int]) -> str:
    return "List(" + ", ".join(map(str, values)) + ")"


def render_lisr(f: dict[str, Any], line: str) -> str:
    out = f"(Leader:{f['leader']},ISR:{_commas(f['isr'])}"
    if _at_least(line, "3.2"):
        out += ",LeaderRecoveryState:RECOVERED"
    out += f",LeaderEpoch:{f['leader_epoch']}"
    if line in ("2.7", "2.8") or _at_least(line, "3.1"):
        out += f",ZkVersion:{f['zk_version']}"
    return out + f",ControllerEpoch:{f['controller_epoch']})"


def render_lai(f: dict[str, Any], line: str) -> str:
    if not _at_least(line, "1.1"):
        return json.dumps({"leader": f["leader"], "leader_epoch": f["leader_epoch"], "isr": f["isr"]},
                          separators=(",", ":"))
    if _at_least(line, "3.5"):
        states = ", ".join(f"BrokerState(brokerId={b}, brokerEpoch=-1)" for b in f["isr"])
        isr = f"isrWithBrokerEpoch=List({states})"
    else:
        isr = f"isr={_scala_list(f['isr'])}"
    recovery = ", leaderRecoveryState=RECOVERED" if _at_least(line, "3.2") else ""
    version = "partitionEpoch" if _at_least(line, "3.3") else "zkVersion"
    return f"LeaderAndIsr(leader={f['leader']}, leaderEpoch={f['leader_epoch']}, {isr}{recovery}, " \
           f"{version}={f['zk_version']})"


def render_ps(f: dict[str, Any], line: str) -> str:
    if not _at_least(line, "0.10.0"):
        return f"(LeaderAndIsrInfo:{render_lisr(f, line)},ReplicationFactor:{len(f['replicas'])})," \
               f"AllReplicas:{_commas(f['replicas'])})"
    head = f"controllerEpoch={f['controller_epoch']}, leader={f['leader']}, leaderEpoch={f['leader_epoch']}"
    if not _at_least(line, "2.4"):
        lists = _brackets if not _at_least(line, "0.11") else _commas
        new = f", isNew={str(f.get('is_new', False)).lower()}" if _at_least(line, "1.0") else ""
        return f"PartitionState({head}, isr={lists(f['isr'])}, zkVersion={f['zk_version']}, " \
               f"replicas={lists(f['replicas'])}{new})"
    topic, _, index = f["partition"].rpartition("-")
    version = "partitionEpoch" if _at_least(line, "3.3") else "zkVersion"
    recovery = ", leaderRecoveryState=0" if _at_least(line, "3.3") else ""
    return f"LeaderAndIsrPartitionState(topicName='{topic}', partitionIndex={index}, {head}, " \
           f"isr={_brackets(f['isr'])}, {version}={f['zk_version']}, replicas={_brackets(f['replicas'])}, " \
           f"addingReplicas={_brackets(f.get('adding', []))}, removingReplicas={_brackets(f.get('removing', []))}, " \
           f"isNew={str(f.get('is_new', False)).lower()}{recovery})"


def render_partition(name: str, placeholder: str, line: str) -> str:
    """A partition as `{tap}` (TopicAndPartition: bracketed up to 0.11) or `{tp}` renders it."""
    if placeholder == "tap" and not _at_least(line, "1.0"):
        topic, _, index = name.rpartition("-")
        return f"[{topic},{index}]"
    return name
