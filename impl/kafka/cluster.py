"""A ZooKeeper-mode Kafka cluster on loopback: Apache Kafka's own brokers (kcm.impl.kafka.release), each
`java ... kafka.Kafka DIR/broker-N/server.properties` in a process group of its own, against a ZooKeeper
ensemble kcm starts beside them (kcm.impl.zookeeper.ensemble) or one the user names.

Under DIR: `kafka.json` (release, ports, process ids, the ZooKeeper hosts and whether kcm owns them), `zk/`
(the ensemble kcm started), and per broker `broker-N/` with its `server.properties`, `log4j.properties`, its
log directory `data/`, and the three logs kcm reads: `state-change.log` and `controller.log` at TRACE (the
loggers `state.change.logger` and `kafka.controller`, as Kafka's own config/log4j.properties names them) and
`server.log` (everything else, INFO). Appenders never roll, so a run's file is the whole run. Nothing under
DIR is ever removed by kcm; a restarted broker appends to its logs.

The timing is small so a campaign's faults take effect in seconds: a ZooKeeper session of 6 s (a paused
broker is expired after that), a follower out of the ISR after 6 s without catching up, the preferred-leader
check every 10 s. Heaps are small (256 MiB) and the thread pools minimal: three brokers, their ZooKeeper and
a client fit in 2 GiB on two cores.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

from kcm.impl.kafka import release as releases
from kcm.impl.zookeeper import ensemble as zk
from kcm.spec import child_processes
from kcm.spec.atomic_output import write_output

STATE_FILE: Final = "kafka.json"
SESSION_TIMEOUT_MS: Final = 6000
REPLICA_LAG_MS: Final = 6000
_JVM_FLAGS: Final = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                     "-Djava.awt.headless=true")
_STOP_GRACE: Final = 30.0  # a controlled shutdown moves every leader away first
_KILL_GRACE: Final = 5.0
_START_TIMEOUT: Final = 60.0
_STARTED: Final = "] started (kafka.server.KafkaServer)"

BrokerMode = Literal["running", "paused", "down"]


class KafkaError(Exception):
    """The cluster could not be started, found or changed; one line, naming the file to look at."""


@dataclass(slots=True)
class _Broker:
    broker_id: int
    port: int
    pid: int | None = None
    starts: int = 0  # how many times kcm started it: a restart waits for the next "started" line


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    broker_id: int
    port: int
    pid: int | None
    mode: BrokerMode


@dataclass(slots=True)
class _State:
    release: str
    zk_hosts: str
    owns_zk: bool
    brokers: list[_Broker] = field(default_factory=list)


class KafkaCluster:
    """Brokers on loopback started by this process, or found through `attach`. A context manager: leaving it
    stops every broker, and the ZooKeeper ensemble when kcm started it."""

    def __init__(self, directory: Path, brokers: int = 3, release: str = releases.DEFAULT_RELEASE,
                 zk_hosts: str | None = None, zk_servers: int = 1, detached: bool = False,
                 first_broker_id: int = 1, overrides: dict[str, str] | None = None) -> None:
        if not 1 <= brokers <= 9:
            raise KafkaError(f"--brokers {brokers}: kcm runs 1 to 9 brokers")
        self.directory = Path(directory)
        self.release = releases.release(release)
        self._detached = detached
        self._count = brokers
        self._first_id = first_broker_id
        self._zk_servers = zk_servers
        self._overrides = dict(overrides or {})
        self._state = _State(release, zk_hosts or "", zk_hosts is None)
        self._ensemble: zk.Ensemble | None = None
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # Life cycle

    def start(self) -> None:
        java = releases.java()
        classpath = releases.classpath(self.release.version)
        if self._running():
            raise KafkaError(f"{self.directory}: a Kafka cluster is already running there (kcm kafka stop --dir)")
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            if self._state.owns_zk:
                self._ensemble = zk.Ensemble(self.directory / "zk", self._zk_servers, detached=self._detached)
                self._ensemble.start()
                self._state.zk_hosts = self._ensemble.hosts
            ports = zk.free_ports(self._count)
            self._state.brokers = [_Broker(self._first_id + i, port) for i, port in enumerate(ports)]
            for broker in self._state.brokers:
                self._write_config(broker)
                self._spawn(broker, java, classpath)
            self._save()
            for broker in self._state.brokers:
                self._await_started(broker)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        live = [b for b in self._state.brokers if self._alive(b)]
        for broker in live:
            self._signal(broker, signal.SIGCONT)  # a paused broker cannot act on SIGTERM
            self._signal(broker, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE
        for broker in live:
            if not self._wait_exit(broker, deadline):
                self._signal(broker, signal.SIGKILL)
                self._wait_exit(broker, time.monotonic() + _KILL_GRACE)
            self._forget(broker)
        if self._state.brokers:
            self._save()
        if self._state.owns_zk:
            ensemble = self._ensemble
            if ensemble is None and (self.directory / "zk" / zk.STATE_FILE).is_file():
                ensemble = zk.Ensemble.attach(self.directory / "zk")
            if ensemble is not None:
                ensemble.stop()

    def kill(self, broker_id: int) -> None:
        """SIGKILL: the broker dies at once, its ZooKeeper session left to expire."""
        broker = self._broker(broker_id)
        self._signal(broker, signal.SIGKILL)
        self._wait_exit(broker, time.monotonic() + _KILL_GRACE)
        self._forget(broker)
        self._save()

    def shut_down(self, broker_id: int, timeout: float = _STOP_GRACE) -> bool:
        """SIGTERM: a controlled shutdown (its leaders moved away first). False when it had not exited by the
        timeout, and was killed."""
        broker = self._broker(broker_id)
        self._signal(broker, signal.SIGTERM)
        clean = self._wait_exit(broker, time.monotonic() + timeout)
        if not clean:
            self._signal(broker, signal.SIGKILL)
            self._wait_exit(broker, time.monotonic() + _KILL_GRACE)
        self._forget(broker)
        self._save()
        return clean

    def pause(self, broker_id: int) -> None:
        """SIGSTOP: the broker keeps its sockets and state but does nothing, its session expiring meanwhile."""
        self._signal(self._broker(broker_id), signal.SIGSTOP)

    def resume(self, broker_id: int) -> None:
        self._signal(self._broker(broker_id), signal.SIGCONT)

    def restart(self, broker_id: int) -> None:
        broker = self._broker(broker_id)
        if self._alive(broker):
            raise KafkaError(f"broker {broker_id} is still running (pid {broker.pid})")
        self._spawn(broker, releases.java(), releases.classpath(self.release.version))
        self._save()
        self._await_started(broker)

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # Queries

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self._state.brokers)

    @property
    def zk_hosts(self) -> str:
        return self._state.zk_hosts

    @property
    def ensemble(self) -> zk.Ensemble | None:
        return self._ensemble

    @property
    def broker_ids(self) -> list[int]:
        return [b.broker_id for b in self._state.brokers]

    def broker_dir(self, broker_id: int) -> Path:
        return self.directory / f"broker-{broker_id}"

    def log_files(self, broker_id: int) -> tuple[Path, Path]:
        """The broker's state-change.log and controller.log."""
        folder = self.broker_dir(broker_id)
        return folder / "state-change.log", folder / "controller.log"

    def status(self) -> list[BrokerStatus]:
        return [BrokerStatus(b.broker_id, b.port, b.pid if self._alive(b) else None, self._mode(b))
                for b in self._state.brokers]

    def mode(self, broker_id: int) -> BrokerMode:
        return self._mode(self._broker(broker_id))

    @classmethod
    def attach(cls, directory: Path) -> KafkaCluster:
        path = Path(directory) / STATE_FILE
        try:
            recorded = json.loads(path.read_text())
            cluster = cls(Path(directory), len(recorded["brokers"]) or 1, recorded["release"],
                          recorded["zk_hosts"])
            cluster._state = _State(recorded["release"], recorded["zk_hosts"], bool(recorded["owns_zk"]),
                                    [_Broker(**b) for b in recorded["brokers"]])
        except (FileNotFoundError, NotADirectoryError):
            raise KafkaError(f"{directory}: no Kafka cluster here (no {STATE_FILE}; start one with "
                             "kcm kafka start)") from None
        except OSError as error:
            raise KafkaError(f"{path}: cannot read it: {error.strerror or error}") from None
        except (ValueError, KeyError, TypeError, releases.KafkaMissing) as error:
            raise KafkaError(f"{path}: not a Kafka cluster state file ({error})") from error
        return cluster

    # Internals

    def _broker(self, broker_id: int) -> _Broker:
        for broker in self._state.brokers:
            if broker.broker_id == broker_id:
                return broker
        raise KafkaError(f"broker {broker_id}: the cluster has brokers {self.broker_ids}")

    def _write_config(self, broker: _Broker) -> None:
        folder = self.broker_dir(broker.broker_id).resolve()
        (folder / "data").mkdir(parents=True, exist_ok=True)
        replicas = min(3, self._count)
        settings = {
            "broker.id": str(broker.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
            "log.dirs": str(folder / "data"),
            "zookeeper.connect": self._state.zk_hosts,
            "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
            "zookeeper.connection.timeout.ms": "20000",
            "replica.lag.time.max.ms": str(REPLICA_LAG_MS),
            "leader.imbalance.check.interval.seconds": "10",
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2", "num.io.threads": "2", "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1", "log.cleaner.enable": "false",
            "controlled.shutdown.retry.backoff.ms": "1000",
            **self._overrides,
        }
        (folder / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (folder / "log4j.properties").write_text(_log4j(folder))

    def _spawn(self, broker: _Broker, java: str, classpath: str) -> None:
        folder = self.broker_dir(broker.broker_id).resolve()
        env = {**os.environ, "CLASSPATH": classpath}  # a classpath of 100 jars stays off the command line
        with open(folder / "stdout.log", "ab") as out:
            process: subprocess.Popen[bytes] = child_processes.spawn(
                [java, *_JVM_FLAGS, f"-Dlog4j.configuration=file:{folder / 'log4j.properties'}",
                 f"-Dkafka.logs.dir={folder}", "kafka.Kafka", str(folder / "server.properties")],
                detached=self._detached, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=folder, env=env)
        self._children[process.pid] = process
        broker.pid = process.pid
        broker.starts += 1

    def _await_started(self, broker: _Broker) -> None:
        log = self.broker_dir(broker.broker_id) / "server.log"
        deadline = time.monotonic() + _START_TIMEOUT
        while _count_started(log) < broker.starts:
            if not self._alive(broker):
                raise KafkaError(f"Kafka broker {broker.broker_id} exited while starting: "
                                 f"{_last_error(log) or 'no error logged'} (see {log})")
            if time.monotonic() >= deadline:
                raise KafkaError(f"Kafka broker {broker.broker_id} not started after {_START_TIMEOUT:.0f} s: "
                                 f"see {log}")
            time.sleep(0.2)

    def _signal(self, broker: _Broker, signum: int) -> None:
        if broker.pid is None or not self._alive(broker):
            return
        with suppress(ProcessLookupError):
            os.killpg(broker.pid, signum)

    def _forget(self, broker: _Broker) -> None:
        if broker.pid is not None:
            child_processes.release(broker.pid)
            self._children.pop(broker.pid, None)
        broker.pid = None

    def _save(self) -> None:
        state = asdict(self._state)
        state["bootstrap"] = self.bootstrap
        # Whole or not at all: `status` and `stop` of another process read it while this one runs.
        write_output(self.directory / STATE_FILE, json.dumps(state, indent=2) + "\n")

    def _running(self) -> bool:
        try:
            recorded = KafkaCluster.attach(self.directory)
        except KafkaError:
            return False
        return any(recorded._alive(b) for b in recorded._state.brokers)

    def _alive(self, broker: _Broker) -> bool:
        if broker.pid is None:
            return False
        child = self._children.get(broker.pid)
        if child is not None:
            return child.poll() is None
        # Not our child (attached): the pid must still be this broker's java, not a reused pid.
        config = str((self.broker_dir(broker.broker_id) / "server.properties").resolve()).encode()
        try:
            return config in Path(f"/proc/{broker.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False

    def _mode(self, broker: _Broker) -> BrokerMode:
        if not self._alive(broker):
            return "down"
        try:
            stat = Path(f"/proc/{broker.pid}/stat").read_text()
        except OSError:
            return "down"
        # The state letter follows the command name in parentheses; T: stopped by a signal.
        return "paused" if stat.rsplit(")", 1)[-1].split()[0] == "T" else "running"

    def _wait_exit(self, broker: _Broker, deadline: float) -> bool:
        while self._alive(broker):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True


def _log4j(folder: Path) -> str:
    appenders = {"server": ("INFO", None), "state": ("TRACE", "state.change.logger"),
                 "controller": ("TRACE", "kafka.controller")}
    files = {"server": "server.log", "state": "state-change.log", "controller": "controller.log"}
    lines = ["log4j.rootLogger=INFO, server"]
    for name in appenders:
        lines += [f"log4j.appender.{name}=org.apache.log4j.FileAppender",
                  f"log4j.appender.{name}.File={folder / files[name]}",
                  f"log4j.appender.{name}.layout=org.apache.log4j.PatternLayout",
                  # Kafka's own pattern: the pipeline's layout for Kafka's logs reads exactly this.
                  f"log4j.appender.{name}.layout.ConversionPattern=[%d] %p %m (%c)%n"]
    for name, (level, logger) in appenders.items():
        if logger is not None:
            lines += [f"log4j.logger.{logger}={level}, {name}", f"log4j.additivity.{logger}=false"]
    return "\n".join(lines) + "\n"


def _count_started(log: Path) -> int:
    try:
        return log.read_text(errors="replace").count(_STARTED)
    except FileNotFoundError:
        return 0


def _last_error(log: Path) -> str:
    """The last ERROR or FATAL line, with the first exception of the stack trace that follows it (the cause:
    `Socket server failed to bind to 127.0.0.1:PORT: Address already in use.`)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    errors = [i for i, line in enumerate(lines) if " ERROR " in line or " FATAL " in line]
    if not errors:
        return ""
    first = errors[0] if len(errors) > 1 and "Exiting Kafka" in lines[errors[-1]] else errors[-1]
    causes = [found.group(1) for line in lines[first + 1:]
              if (found := re.match(r"^(?:Caused by: )?[\w.$]+(?:Exception|Error): (.+)$", line))]
    said = lines[first].split("] ", 1)[-1]
    return (f"{said}: {causes[0]}" if causes else said)[:300]
