"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcm.impl.zookeeper.ensemble import Ensemble, ZooKeeperMissing, locate
from kcm.spec.tlc.modelcheck import CheckOutcome, check_model, model_knobs

# A suite started in the background (`&` in a non-interactive shell) inherits SIGINT ignored, and so would every
# kcm it starts: the tests of Ctrl-C would send it to deaf processes. A handler of this process's own is reset
# for its children, which start with the default: Python's KeyboardInterrupt.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def reproduction(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], CheckOutcome]:
    """TLC's counterexample of a reproduction model (its own knobs), found once per test session: the TLA+,
    replay and Z3 agreement tests read the same counterexamples."""
    folder = tmp_path_factory.mktemp("tlc-counterexamples")
    found: dict[str, CheckOutcome] = {}

    def outcome(model: str) -> CheckOutcome:
        if model not in found:
            trace: Path = folder / f"{model}.jsonl"
            found[model] = check_model(model, model_knobs(model), heap_mb=2048, trace_out=trace)
        return found[model]

    return outcome


@pytest.fixture(scope="session", autouse=True)
def no_zookeeper_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every ZooKeeper server and Kafka broker a test of this session started (all under the session's
    temporary folder) is stopped by the end of the session: an error at teardown names any left running."""
    base = str(tmp_path_factory.getbasetemp())
    yield
    left = [line for line in _command_lines() if ("QuorumPeerMain" in line or "kafka.Kafka" in line)
            and base in line]
    assert not left, "ZooKeeper servers or Kafka brokers left running by the tests:\n" + "\n".join(left)


def _command_lines() -> list[str]:
    """Every process's command line, read off /proc (no procps needed)."""
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # the process ended meanwhile
            continue
    return lines


def _require_zookeeper() -> None:
    """Skip, saying what is missing and how to install it, where Java 17+ or ZooKeeper is not installed."""
    try:
        locate()
    except ZooKeeperMissing as missing:
        pytest.skip(f"ZooKeeper is not available: {missing}")


@pytest.fixture(scope="session")
def zk_installed() -> None:
    """For tests that start their own servers: skip, saying why, where ZooKeeper is missing."""
    _require_zookeeper()


@pytest.fixture(scope="session")
def zk_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The hosts string of a ZooKeeper for the whole session: $KCM_ZK (host:port of an existing one) when set,
    else a standalone server started in a temporary folder and stopped at the end of the session. Stores
    work under a fresh chroot each, so tests never see each other's nodes."""
    existing = os.environ.get("KCM_ZK")
    if existing:
        yield existing
        return
    _require_zookeeper()
    with Ensemble(tmp_path_factory.mktemp("zk-standalone")) as server:
        server.start()
        yield server.hosts


@pytest.fixture(scope="module")
def zk_ensemble3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    """A fresh 3-server ensemble for a module's fault tests (kill, restart), stopped after the module."""
    _require_zookeeper()
    with Ensemble(tmp_path_factory.mktemp("zk-ensemble3"), servers=3) as ensemble:
        ensemble.start()
        yield ensemble
