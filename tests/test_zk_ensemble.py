"""The ZooKeeper servers kcm starts (kcm.impl.zookeeper.ensemble, `kcm zk`): start, status, kill and restart,
stop, and that nothing is left running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcm.impl.zookeeper.ensemble import Ensemble, EnsembleError, ServerStatus, locate

pytestmark = [pytest.mark.zk, pytest.mark.usefixtures("zk_installed")]


def _running(directory: Path) -> list[int]:
    """Pids of ZooKeeper servers whose configuration lies under `directory`."""
    found = subprocess.run(["pgrep", "-f", f"QuorumPeerMain {directory}"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def test_a_standalone_server_starts_answers_and_stops(tmp_path: Path) -> None:
    with Ensemble(tmp_path) as server:
        server.start()
        [status] = server.status()
        assert (status.mode, status.pid) == ("standalone", _running(tmp_path)[0])
        assert server.hosts == f"127.0.0.1:{status.client_port}"
        assert (tmp_path / "server-1" / "data" / "myid").read_text() == "1\n"
    assert _running(tmp_path) == []
    assert [s.mode for s in Ensemble.attach(tmp_path).status()] == ["down"]
    assert (tmp_path / "server-1" / "zookeeper.log").stat().st_size > 0  # kept: nothing is removed


def test_three_servers_keep_a_quorum_when_one_is_killed_and_restarted(zk_ensemble3: Ensemble) -> None:
    modes = sorted(s.mode for s in zk_ensemble3.status())
    assert modes == ["follower", "follower", "leader"]
    leader = next(s.index for s in zk_ensemble3.status() if s.mode == "leader")
    zk_ensemble3.kill(leader)
    after = zk_ensemble3.status()
    assert after[leader].mode == "down" and after[leader].pid is None
    zk_ensemble3.restart(leader)
    assert sorted(s.mode for s in zk_ensemble3.status()) == ["follower", "follower", "leader"]


def test_a_server_alone_of_three_runs_without_serving_until_a_second_is_back(zk_ensemble3: Ensemble) -> None:
    for index in range(3):
        zk_ensemble3.kill(index)
    zk_ensemble3.restart(0, wait=False)
    alone = zk_ensemble3.status()[0]
    assert _srvr_once_up(alone.client_port).startswith("This ZooKeeper instance is not currently serving")
    assert zk_ensemble3.status()[0] == ServerStatus(0, alone.client_port, alone.pid, "down")
    zk_ensemble3.restart(1)
    zk_ensemble3.restart(2)
    assert sorted(s.mode for s in zk_ensemble3.status()) == ["follower", "follower", "leader"]


def _srvr_once_up(port: int) -> str:
    """The server's answer to `srvr` once it accepts connections (bounded)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"srvr")
                return sock.makefile("rb").read().decode()
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def test_a_second_start_in_the_same_folder_is_refused(tmp_path: Path) -> None:
    with Ensemble(tmp_path) as first:
        first.start()
        with pytest.raises(EnsembleError, match="already running"):
            Ensemble(tmp_path).start()
        assert first.status()[0].mode == "standalone"


def _kcm(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "kcm.tools.cli", "zk", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_kcm_zk_start_status_stop_end_to_end(tmp_path: Path) -> None:
    folder = tmp_path / "zk"
    started = _kcm("start", "--servers", "3", "--dir", str(folder))
    try:
        assert started.returncode == 0, started.stderr
        hosts = started.stdout.split("serving at ")[1].split()[0]
        assert hosts.count("127.0.0.1:") == 3 and f"kcm zk stop --dir {folder}" in started.stdout
        # The servers outlive the command that started them.
        assert len(_running(folder)) == 3
        status = _kcm("status", "--dir", str(folder))
        rows = status.stdout.splitlines()
        assert rows[0].split() == ["server", "port", "pid", "mode"]
        assert sorted(row.split()[3] for row in rows[1:]) == ["follower", "follower", "leader"]
    finally:
        stopped = _kcm("stop", "--dir", str(folder))
    assert stopped.returncode == 0, stopped.stderr
    assert _running(folder) == []


@pytest.mark.parametrize(("args", "message"), [
    (("status", "--dir", "{tmp}/none"), "no ensemble here"),
    (("start", "--servers", "2", "--dir", "{tmp}/two"), "invalid choice: 2"),
])
def test_kcm_zk_user_errors_are_one_line_and_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    result = _kcm(*(arg.format(tmp=tmp_path) for arg in args))
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "two").exists()


def test_the_install_is_found() -> None:
    java, classpath = locate()
    assert os.access(java, os.X_OK) and "zookeeper.jar" in classpath


# A command other than `kcm zk start` (kcm verify --zk) with its ensemble running, interrupted before it could
# stop the ensemble itself.
_OWNER = """
import sys, time
from pathlib import Path
from kcm.impl.zookeeper.ensemble import Ensemble
from kcm.spec import child_processes
child_processes.install()
try:
    Ensemble(Path(sys.argv[1])).start()
    print("serving", flush=True)
    time.sleep(120)
except KeyboardInterrupt:
    child_processes.interrupt()
    sys.exit(130)
"""


def test_servers_a_command_started_end_with_it(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             env=env)
    assert owner.stdout is not None and owner.stdout.readline() == "serving\n"
    assert len(_running(tmp_path)) == 1
    owner.terminate()
    assert owner.wait(timeout=60) == 130
    deadline = time.monotonic() + 10
    while _running(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(tmp_path) == []
