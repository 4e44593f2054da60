"""Kafka's own command-line tools, from the release's jars, against a cluster kcm runs: topics created,
described and deleted, reassignments, leader elections, an `acks=all` producer whose every acknowledged
record is a JSON line (VerifiableProducer), and a consumer that reads a topic back from its first offset.
kcm never speaks Kafka's wire protocol itself; the controller's identity is read from ZooKeeper's
`/controller`, as Kafka's brokers read it.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kcm.impl.kafka import release as releases
from kcm.impl.kafka.cluster import KafkaCluster
from kcm.spec import child_processes

_TOOL_JVM: Final = ("-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
# The tools' own logging: warnings and errors to stderr, apart from what they print for kcm to read.
_TOOL_LOG4J: Final = ("log4j.rootLogger=WARN, stderr\n"
                      "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                      "log4j.appender.stderr.Target=System.err\n"
                      "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                      "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
_TOOL_TIMEOUT: Final = 120.0


class AdminError(Exception):
    """A Kafka tool failed; the message is its command and the last line it printed."""


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    value: str


@dataclass
class ProducerLog:
    """What the producer printed: every acknowledged record, how many sends failed (by error), and when it
    stopped (ms since the epoch; None if it did not say)."""

    acked: list[Record] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lines: int = 0
    stopped_ms: int | None = None


class Admin:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.release = cluster.release

    # Topics

    def create_topic(self, topic: str, partitions: int, replication: int,
                     configs: dict[str, str] | None = None) -> None:
        extra = [arg for key, value in (configs or {}).items() for arg in ("--config", f"{key}={value}")]
        self.tool(self.release.topics, "--bootstrap-server", self.cluster.bootstrap, "--create", "--topic", topic,
                  "--partitions", str(partitions), "--replication-factor", str(replication), *extra)

    def delete_topic(self, topic: str) -> None:
        self.tool(self.release.topics, "--bootstrap-server", self.cluster.bootstrap, "--delete", "--topic", topic)

    def under_replicated(self) -> str:
        """TopicCommand's lines for the partitions whose ISR is smaller than their replicas ("" when none)."""
        return self.tool(self.release.topics, "--bootstrap-server", self.cluster.bootstrap, "--describe",
                         "--under-replicated-partitions").strip()

    def assignment(self, topic: str) -> dict[int, list[int]]:
        """The topic's replicas by partition, as ZooKeeper's /brokers/topics/<topic> holds them."""
        data = self.zk_read(f"/brokers/topics/{topic}")
        if data is None:
            return {}
        return {int(p): list(r) for p, r in json.loads(data)["partitions"].items()}

    # Leadership and reassignment

    def reassign(self, topic: str, plan: dict[int, list[int]]) -> None:
        document = {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r}
                                                 for p, r in sorted(plan.items())]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(document, handle)
        try:
            self.tool(self.release.reassign, *self._reassign_target(), "--execute",
                      "--reassignment-json-file", handle.name)
        finally:
            os.unlink(handle.name)

    def reassignment_pending(self) -> bool:
        if self.release.reassign_through_zookeeper:
            return self.zk_read("/admin/reassign_partitions") is not None
        text = self.tool(self.release.reassign, *self._reassign_target(), "--list")
        return "Current partition reassignments:" in text

    def _reassign_target(self) -> list[str]:
        if self.release.reassign_through_zookeeper:
            return ["--zookeeper", self.cluster.zk_hosts]
        return ["--bootstrap-server", self.cluster.bootstrap]

    def preferred_election(self) -> str:
        return self.tool(self.release.elect, "--bootstrap-server", self.cluster.bootstrap, "--election-type",
                         "preferred", "--all-topic-partitions", check=False)

    def controller(self) -> int | None:
        data = self.zk_read("/controller")
        return None if data is None else int(json.loads(data)["brokerid"])

    def move_controller(self) -> None:
        """Controller failover as Kafka's own tests force it: /controller deleted, every broker races for it."""
        with self._zk() as client, suppress(NoNodeError):
            client.delete("/controller")

    # Clients

    def producer(self, topic: str, out: Path, throughput: int, acks: str = "-1") -> subprocess.Popen[bytes]:
        """VerifiableProducer in the background, writing its JSON lines to `out`; it sends until stopped."""
        # The child keeps its own copy of the descriptor: ours closes at once.
        with open(out, "wb") as handle:
            return self._spawn(self.release.producer, "--bootstrap-server", self.cluster.bootstrap, "--topic",
                               topic, "--acks", acks, "--throughput", str(throughput),
                               "--producer.config", str(_producer_config(out.parent)), stdout=handle)

    def read_topic(self, topic: str, timeout_ms: int = 15000) -> list[Record]:
        """Every record of the topic from its first offset, as ConsoleConsumer prints it."""
        text = self.tool(self.release.consumer, "--bootstrap-server", self.cluster.bootstrap, "--topic", topic,
                         "--from-beginning", "--timeout-ms", str(timeout_ms), "--property", "print.partition=true",
                         "--property", "print.offset=true", "--property", "print.key=false",
                         "--isolation-level", "read_committed", check=False, timeout=timeout_ms / 1000 + 60)
        return [record for line in text.splitlines() if (record := _consumed(topic, line)) is not None]

    # Plumbing

    def zk_read(self, path: str) -> bytes | None:
        with self._zk() as client:
            try:
                data, _ = client.get(path)
            except NoNodeError:
                return None
        return bytes(data)

    def tool(self, main: str, *args: str, check: bool = True, timeout: float = _TOOL_TIMEOUT) -> str:
        process = self._spawn(main, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child_processes.end(process.pid)
            raise AdminError(f"{main.rsplit('.', 1)[-1]} did not finish in {timeout:.0f} s") from None
        finally:
            child_processes.release(process.pid)
        text = out.decode(errors="replace")
        if check and process.returncode != 0:
            said = (text + err.decode(errors="replace")).splitlines()
            last = next((line for line in said if "Exception" in line or "Error" in line),
                        next((line for line in reversed(said) if line.strip()), ""))
            raise AdminError(f"{main.rsplit('.', 1)[-1]} {' '.join(args)[:120]}: exit {process.returncode}: "
                             f"{last.strip()[:200]}")
        return text

    def _spawn(self, main: str, *args: str, stdout: int | IO[Any],
               stderr: int | IO[Any] = subprocess.STDOUT) -> subprocess.Popen[bytes]:
        env = {**os.environ, "CLASSPATH": releases.classpath(self.release.version)}
        log4j = self.cluster.directory / "tools-log4j.properties"
        if not log4j.is_file():
            log4j.write_text(_TOOL_LOG4J)
        process: subprocess.Popen[bytes] = child_processes.spawn(
            [releases.java(), *_TOOL_JVM, f"-Dlog4j.configuration=file:{log4j.resolve()}", main, *args],
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env)
        return process

    def _zk(self) -> _ZooKeeper:
        return _ZooKeeper(self.cluster.zk_hosts)


class _ZooKeeper:
    def __init__(self, hosts: str) -> None:
        self._client = KazooClient(hosts=hosts, timeout=10.0)

    def __enter__(self) -> KazooClient:
        self._client.start(timeout=15.0)
        return self._client

    def __exit__(self, *_: object) -> None:
        self._client.stop()
        self._client.close()


def read_producer_log(path: Path) -> ProducerLog:
    log = ProducerLog()
    for line in path.read_text(errors="replace").splitlines():
        log.lines += 1
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("name") == "producer_send_success":
            log.acked.append(Record(entry["topic"], int(entry["partition"]), int(entry["offset"]),
                                    str(entry["value"])))
        elif entry.get("name") == "producer_send_error":
            reason = str(entry.get("exception", "unknown")).rsplit(".", 1)[-1]
            log.errors[reason] = log.errors.get(reason, 0) + 1
        elif entry.get("name") == "shutdown_complete" and isinstance(entry.get("timestamp"), int):
            log.stopped_ms = entry["timestamp"]
    return log


def _consumed(topic: str, line: str) -> Record | None:
    # ConsoleConsumer's print.partition and print.offset fields, tab-separated before the value.
    fields = line.split("\t")
    if len(fields) != 3 or not fields[0].startswith("Partition:") or not fields[1].startswith("Offset:"):
        return None
    return Record(topic, int(fields[0].split(":", 1)[1]), int(fields[1].split(":", 1)[1]), fields[2])


def _producer_config(folder: Path) -> Path:
    # acks=all with idempotence: a record is acknowledged once, at the offset the leader gave it.
    path = folder / "producer.properties"
    path.write_text("enable.idempotence=true\nretries=2147483647\ndelivery.timeout.ms=30000\n"
                    "request.timeout.ms=5000\nlinger.ms=5\nmax.in.flight.requests.per.connection=5\n")
    return path

