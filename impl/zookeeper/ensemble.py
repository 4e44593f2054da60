"""A ZooKeeper 3.8 standalone server or 3-server ensemble on loopback, run straight from Debian's install.

Each server is `java ... org.apache.zookeeper.server.quorum.QuorumPeerMain DIR/server-N/zoo.cfg` in a
process group of its own, so a kill reaches nothing else. A `detached` ensemble (`kcm zk start`) outlives the
command that started it; any other (`kcm verify --zk`, the tests) is ended with kcm, on its exit or an
interrupt, as every process kcm starts (kcm.spec.child_processes). Its data (`DIR/server-N/data`, with
`myid`) and its log (`DIR/server-N/zookeeper.log`) stay under DIR; nothing is written elsewhere and nothing is
ever removed. `DIR/ensemble.json` records the ports and process ids, so `Ensemble.attach(DIR)` gives another
process (`kcm zk status|stop`) the same handle.

The timing is small so tests can use short sessions: tickTime 200 ms, so the shortest session ZooKeeper
grants is 2 ticks = 400 ms (`minSessionTimeout`) and a follower cut off from the leader gives up within
`syncLimit` ticks (1 s).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from contextlib import ExitStack, closing, suppress
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Literal

from kcm.spec import child_processes
from kcm.spec.atomic_output import write_output
from kcm.spec.java import JAVA_MIN, probe_java

STATE_FILE = "ensemble.json"
TICK_MS = 200
MIN_SESSION_MS = 2 * TICK_MS
MAX_SESSION_MS = 100 * TICK_MS
_JAR_DIR = Path("/usr/share/java")
# zookeeper.jar's manifest Class-Path names its dependencies (netty, jute, slf4j-api, ...), as Debian's
# zkEnv.sh relies on; slf4j-simple is the logger binding, writing to stderr, which goes to the server's log.
_JARS = (("zookeeper.jar", "zookeeper"), ("slf4j-simple.jar", "libslf4j-java"))
_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_JVM_FLAGS = (
    "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",  # several small servers start fast
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dzookeeper.jmx.log4j.disable=true",
)
_STOP_GRACE = 5.0
_PROBE_TIMEOUT = 1.0

Mode = Literal["standalone", "leader", "follower", "down"]
_SERVING: dict[str, Mode] = {"standalone": "standalone", "leader": "leader", "follower": "follower"}


class ZooKeeperMissing(Exception):
    """Java 17+ or Debian's ZooKeeper install is missing; the message says which and how to install it."""


class EnsembleError(Exception):
    """The ensemble could not be started or found; one line, naming the log or state file to look at."""


@dataclass(frozen=True, slots=True)
class ServerStatus:
    index: int
    client_port: int
    pid: int | None  # None once the server's process is gone
    mode: Mode  # "down": not running, or running but not serving (no quorum, still starting)


@dataclass(slots=True)
class _Server:
    index: int
    client_port: int
    quorum_port: int
    election_port: int
    pid: int | None = None


class Ensemble:
    """Servers on loopback started by this process, or found through `attach`. A context manager: leaving
    it stops every server."""

    def __init__(self, directory: Path, servers: int = 1, detached: bool = False) -> None:
        if servers not in (1, 3):
            raise ValueError(f"--servers {servers}: kcm runs 1 (standalone) or 3 servers")
        self.directory = Path(directory)
        self._detached = detached
        self._servers: list[_Server] = []
        self._count = servers
        # Processes this object started: waited on, so a killed server leaves no zombie behind.
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # Life cycle

    def start(self, timeout: float = 30.0) -> None:
        java, classpath = locate()
        if self._running():
            raise EnsembleError(f"{self.directory}: an ensemble is already running there (kcm zk stop --dir)")
        self._servers = _allocate(self._count)
        try:
            for server in self._servers:
                self._write_config(server)
                self._spawn(server, java, classpath)
            self._save()
            self._await_serving(self._servers, timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        live = [server for server in self._servers if self._alive(server)]
        for server in live:
            _signal_group(server, signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE
        for server in live:
            if not self._wait_exit(server, deadline):
                _signal_group(server, signal.SIGKILL)
                self._wait_exit(server, time.monotonic() + _STOP_GRACE)
            self._forget(server)
        if self._servers:
            self._save()

    def kill(self, index: int) -> None:
        server = self._servers[index]
        if self._alive(server):
            _signal_group(server, signal.SIGKILL)
            self._wait_exit(server, time.monotonic() + _STOP_GRACE)
        self._forget(server)
        self._save()

    def restart(self, index: int, timeout: float = 30.0, *, wait: bool = True) -> None:
        """Start server `index` again on its data and ports; returns once it serves (a follower rejoined), or
        at once with `wait=False`: a server alone of three never serves until a second one is back."""
        server = self._servers[index]
        if self._alive(server):
            raise EnsembleError(f"server {index} is still running (pid {server.pid})")
        self._spawn(server, *locate())
        self._save()
        if wait:
            self._await_serving([server], timeout)

    def __enter__(self) -> Ensemble:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # Queries

    @property
    def hosts(self) -> str:
        return ",".join(f"127.0.0.1:{server.client_port}" for server in self._servers)

    @property
    def servers(self) -> int:
        return self._count

    def status(self) -> list[ServerStatus]:
        return [ServerStatus(server.index, server.client_port, server.pid if self._alive(server) else None,
                             self._mode(server)) for server in self._servers]

    def log_file(self, index: int) -> Path:
        return self._server_dir(index) / "zookeeper.log"

    @classmethod
    def attach(cls, directory: Path) -> Ensemble:
        state = Path(directory) / STATE_FILE
        try:
            recorded = json.loads(state.read_text())
            ensemble = cls(Path(directory), int(recorded["servers"]))
            ensemble._servers = [_Server(**server) for server in recorded["members"]]
        except (FileNotFoundError, NotADirectoryError):
            raise EnsembleError(
                f"{directory}: no ensemble here (no {STATE_FILE}; start one with kcm zk start)") from None
        except OSError as error:
            raise EnsembleError(f"{state}: cannot read it: {error.strerror or error}") from None
        except (ValueError, KeyError, TypeError) as error:
            raise EnsembleError(f"{state}: not an ensemble state file ({error})") from error
        return ensemble

    # Internals

    def _server_dir(self, index: int) -> Path:
        return self.directory / f"server-{index + 1}"

    def _write_config(self, server: _Server) -> None:
        data = self._server_dir(server.index) / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{server.index + 1}\n")
        lines = [
            f"tickTime={TICK_MS}", f"minSessionTimeout={MIN_SESSION_MS}", f"maxSessionTimeout={MAX_SESSION_MS}",
            "initLimit=10", "syncLimit=5", f"dataDir={data.resolve()}",
            f"clientPort={server.client_port}", "clientPortAddress=127.0.0.1",
            "admin.enableServer=false", "4lw.commands.whitelist=srvr,ruok,stat",
        ]
        if self._count > 1:
            lines += [f"server.{peer.index + 1}=127.0.0.1:{peer.quorum_port}:{peer.election_port}"
                      for peer in self._servers]
        (self._server_dir(server.index) / "zoo.cfg").write_text("\n".join(lines) + "\n")

    def _spawn(self, server: _Server, java: str, classpath: str) -> None:
        config = (self._server_dir(server.index) / "zoo.cfg").resolve()
        with open(self.log_file(server.index), "ab") as log:
            process: subprocess.Popen[bytes] = child_processes.spawn(
                [java, *_JVM_FLAGS, "-cp", classpath, _MAIN, str(config)], detached=self._detached,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self._server_dir(server.index))
        self._children[process.pid] = process
        server.pid = process.pid

    def _forget(self, server: _Server) -> None:
        if server.pid is not None:
            child_processes.release(server.pid)
        server.pid = None

    def _save(self) -> None:
        state = {"servers": self._count, "hosts": self.hosts, "members": [asdict(s) for s in self._servers]}
        # Whole or not at all: `status` and `stop` of another process read it while this one runs.
        write_output(self.directory / STATE_FILE, json.dumps(state, indent=2) + "\n")

    def _running(self) -> bool:
        try:
            recorded = Ensemble.attach(self.directory)
        except EnsembleError:
            return False
        return any(recorded._alive(server) for server in recorded._servers)

    def _alive(self, server: _Server) -> bool:
        if server.pid is None:
            return False
        child = self._children.get(server.pid)
        if child is not None:
            return child.poll() is None
        # Not our child (attached): the pid must still be this server's java, not a reused pid.
        return _is_server_process(server.pid, self._server_dir(server.index) / "zoo.cfg")

    def _wait_exit(self, server: _Server, deadline: float) -> bool:
        while self._alive(server):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _mode(self, server: _Server) -> Mode:
        if not self._alive(server):
            return "down"
        match = re.search(r"^Mode: (\w+)", _four_letter(server.client_port, b"srvr"), re.MULTILINE)
        # A running server without a quorum answers "not currently serving requests", with no mode.
        return _SERVING.get(match.group(1), "down") if match else "down"

    def _await_serving(self, servers: list[_Server], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for server in servers:
            while self._mode(server) not in _SERVING:
                if not self._alive(server):
                    raise EnsembleError(f"ZooKeeper server {server.index} exited while starting: see "
                                        f"{self.log_file(server.index)}")
                if time.monotonic() >= deadline:
                    raise EnsembleError(f"ZooKeeper server {server.index} not serving after {timeout:.0f} s: "
                                        f"see {self.log_file(server.index)}")
                time.sleep(0.1)


@cache
def locate() -> tuple[str, str]:
    """The java binary (17+) and the classpath of Debian's ZooKeeper, or ZooKeeperMissing saying what to install."""
    java = probe_java()
    if java.binary is None:
        raise ZooKeeperMissing(f"java not found (ZooKeeper 3.8 needs Java {JAVA_MIN}+): "
                               "install: apt-get install openjdk-17-jre-headless zookeeper")
    if java.major is None:
        raise ZooKeeperMissing(f"{java.binary} -version printed no version{': ' + java.error if java.error else ''}: "
                               "install: apt-get install openjdk-17-jre-headless")
    if java.major < JAVA_MIN:
        raise ZooKeeperMissing(f"{java.binary} is Java {java.major}, ZooKeeper 3.8 needs {JAVA_MIN}+: "
                               "install: apt-get install openjdk-17-jre-headless")
    jars = []
    for name, package in _JARS:
        jar = _JAR_DIR / name
        if not jar.is_file():
            raise ZooKeeperMissing(f"{jar} not found (Debian's ZooKeeper install): install: apt-get install {package}")
        jars.append(str(jar))
    return java.binary, os.pathsep.join(jars)


def _allocate(count: int) -> list[_Server]:
    """Free loopback ports: each bound to port 0 at once, so the kernel hands out distinct ones. A standalone
    server needs only its client port; ensemble members also need a quorum and an election port."""
    per_server = 1 if count == 1 else 3
    ports = free_ports(count * per_server)
    if count == 1:
        return [_Server(0, ports[0], 0, 0)]
    return [_Server(i, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]) for i in range(count)]


def free_ports(count: int) -> list[int]:
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _four_letter(port: int, command: bytes) -> str:
    """A four-letter-word command's answer, or "" if the server does not answer."""
    try:
        with closing(socket.create_connection(("127.0.0.1", port), timeout=_PROBE_TIMEOUT)) as sock:
            sock.sendall(command)
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def _is_server_process(pid: int, config: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(config.resolve()).encode() in cmdline


def _signal_group(server: _Server, signum: int) -> None:
    assert server.pid is not None
    # The server leads its own session, so its group is its pid; it may have exited in between.
    with suppress(ProcessLookupError):
        os.killpg(server.pid, signum)
