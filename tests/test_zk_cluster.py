"""The cluster on a real ZooKeeper: the controllers and brokers of impl/ unchanged on the ZooKeeper store, the
fault campaign on a 3-server ensemble, and `kcm verify --zk`."""

from __future__ import annotations

import io
import json
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Final

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.explore.zk_campaign import (
    FAULTS,
    CampaignPlan,
    CampaignResult,
    StoreOpener,
    pause_until_expired,
    run_campaign,
    zookeeper_stores,
)
from kcm.impl.sim.cluster import ClusterStore
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.impl.store import InMemoryStore
from kcm.impl.zookeeper.ensemble import Ensemble, ZooKeeperMissing
from kcm.impl.zookeeper.store import ZooKeeperStore
from kcm.spec.trace.format import TraceWriter, read_trace
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main

# Seed 20's first 300 steps elect and fail over controllers (a crash and a session expiry), register, expire and
# re-register brokers, and create, reassign and delete topics through the admin paths.
SEED: Final = 20
STEPS: Final = 300
PROTOCOL: Final = {"ControllerElect", "ControllerCrash", "SessionExpire", "BrokerChange", "BrokerReregister",
                   "CreateTopic", "ReassignPartitions", "PartitionReassignment", "DeleteTopic", "TopicDeletion"}
UNFENCED: Final = Knobs(controller_epoch_fencing=False)


def trace_on(store: ClusterStore | None) -> str:
    out = io.StringIO()
    with TraceWriter(out) as writer:
        sim = Simulator(SEED, Knobs(), SimConfig(), writer.write, store=store)
        sim.bootstrap()
        sim.run(STEPS)
    return out.getvalue()


@pytest.mark.zk
def test_the_cluster_on_zookeeper_writes_the_embedded_stores_trace_byte_for_byte(zk_hosts: str) -> None:
    """The controllers and brokers reach ZooKeeper through the port alone: on a real server they take the same
    steps, read the same versions and hear the same watches, so the trace is the embedded store's."""
    store = ZooKeeperStore(zk_hosts)
    try:
        real = trace_on(store)
    finally:
        store.close()
    assert real == trace_on(None)
    events = [json.loads(line) for line in real.splitlines()]
    assert {e["action"] for e in events} >= PROTOCOL
    assert InvariantChecker().check_all(events).violations == []


def zombie_campaign(knobs: Knobs, open_store: StoreOpener, out: Path) -> CampaignResult:
    plan = CampaignPlan(runs=1, steps=150, faults_per_run=2, knobs=knobs, faults=("zombie",))
    return run_campaign(plan, open_store, out)


@pytest.mark.zk
def test_the_zombie_controllers_write_is_caught_without_fencing_only(zk_hosts: str, tmp_path: Path) -> None:
    """The controller's session expires while it has work queued; once a successor is elected it acts on its
    old view. Fenced, its writes fail on the epoch node's version; unfenced, they land and the checker names
    them."""
    unfenced = zombie_campaign(UNFENCED, zookeeper_stores(zk_hosts), tmp_path)
    assert unfenced.violations["StaleControllerFenced"] > 0
    fenced = zombie_campaign(Knobs(), zookeeper_stores(zk_hosts), tmp_path)
    assert fenced.violations == Counter()
    # A failover: the successor was elected after each expiry, and every event was written and checked.
    assert len(fenced.runs[0].failovers) == fenced.faults["zombie"] == 2
    assert fenced.failover_median() is not None
    trace = fenced.runs[0].trace
    assert trace.name == "default-seed-0.jsonl"
    assert len(list(read_trace(trace))) == fenced.events


def test_the_zombie_needs_no_zookeeper_to_be_caught(tmp_path: Path) -> None:
    """The same faults on the embedded store: the campaign's structure, independent of the store."""
    assert zombie_campaign(UNFENCED, lambda: nullcontext(InMemoryStore()), tmp_path).violations["StaleControllerFenced"]
    assert not zombie_campaign(Knobs(), lambda: nullcontext(InMemoryStore()), tmp_path).violations


def test_a_plan_refuses_what_it_cannot_inject(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown fault kinds"):
        CampaignPlan(faults=("meteor",))
    with pytest.raises(ValueError, match="3 brokers"):
        CampaignPlan(config=SimConfig(brokers=2, replication_factor=2))
    with pytest.raises(ValueError, match="can be injected here"):
        run_campaign(CampaignPlan(faults=("server_kill", "pause")), lambda: nullcontext(InMemoryStore()), tmp_path)


@pytest.mark.zk
def test_watches_survive_a_server_killed_under_them(zk_ensemble3: Ensemble) -> None:
    """The session's client moves to another server; the watches it held are re-sent (SetWatches): those whose
    node changed meanwhile fire at once, the others stay set. Plain kazoo would have dropped all four."""
    store = ZooKeeperStore(zk_ensemble3.hosts)
    try:
        watcher, writer = store.open_session(1), store.open_session(2)
        for path, data in (("/changed", 0), ("/parent", None), ("/untouched", 0)):
            store.create(writer, path, data)
        assert store.exists("/created", watch=watcher) is None
        store.get("/changed", watch=watcher)
        store.children("/parent", watch=watcher)
        store.get("/untouched", watch=watcher)
        serving = next(s.index for s in zk_ensemble3.status() if s.mode != "down")
        zk_ensemble3.kill(serving)  # every client of the store sits on the first server that serves
        try:
            store.create(writer, "/created", 1)
            store.set(writer, "/changed", 1)
            store.create(writer, "/parent/child", 1)
            # In write order if the watcher was back before the writes, else in SetWatches' (data, exist, child).
            assert sorted((e.path, e.kind) for e in store.poll_watch_events()) == [
                ("/changed", "changed"), ("/created", "created"), ("/parent", "children")]
            store.set(writer, "/untouched", 1)
            assert [(e.path, e.kind) for e in store.poll_watch_events()] == [("/untouched", "changed")]
        finally:
            zk_ensemble3.restart(serving)
    finally:
        store.close()


@pytest.mark.zk
def test_a_bounded_campaign_on_a_3_server_ensemble(zk_ensemble3: Ensemble, tmp_path: Path) -> None:
    """Every kind of fault in each run: a server killed (quorum kept), two killed and restored (quorum lost),
    the zombie controller, a broker paused until ZooKeeper expires its session. No invariant breaks, every run
    is traced whole (or up to a write whose outcome the store could not tell, docs/zookeeper.md), and the
    ensemble serves again afterwards."""
    plan = CampaignPlan(runs=3, steps=200, faults_per_run=len(FAULTS))
    result = run_campaign(plan, zookeeper_stores(zk_ensemble3.hosts), tmp_path, zk_ensemble3, pause_until_expired)
    assert set(result.faults) == set(FAULTS)
    assert result.violations == Counter()
    # Each zombie fault elected its successor: the watches on /controller outlived the servers killed before.
    assert result.unelected == 0
    whole = [r for r in result.runs if not r.ended_early]
    assert sum(len(r.failovers) for r in whole) == sum(r.faults["zombie"] for r in whole)
    for run in result.runs:
        events = list(read_trace(run.trace))
        assert len(events) == run.events
        assert InvariantChecker().check_all(events).violations == []
        if not run.ended_early:
            # Every fault injected; the pause ends in an expiry ZooKeeper decided, and a calm phase ends the run.
            assert run.faults == Counter(FAULTS)
            actions = Counter(e["action"] for e in events)
            assert actions["SessionExpire"] >= 1 and actions["Quiesce"] == 1
    assert len(result.ended_early) < len(result.runs)
    assert all(server.mode != "down" for server in zk_ensemble3.status())


@pytest.mark.zk
def test_verify_zk_adds_the_zookeeper_rows(zk_hosts: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a ZooKeeper kcm did not start, the campaign kills no server and says so in its row."""
    code = main(["verify", "--zk", zk_hosts, "--only", "zookeeper", "--json", "--progress", "none",
                 "--out", str(tmp_path)])
    rows = json.loads(capsys.readouterr().out)["stages"]
    assert code == 0
    assert [(r["engine"], r["verdict"]) for r in rows] == [("zookeeper", "holds"), ("zookeeper", "as expected")]
    assert "session faults only" in rows[0]["detail"] and "server_kill" not in rows[0]["detail"]
    assert "StaleControllerFenced violations caught" in rows[1]["detail"]


def test_verify_zk_says_why_without_zookeeper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    missing = "java not found (ZooKeeper 3.8 needs Java 17+): install: apt-get install openjdk-17-jre-headless"

    def no_java(_ensemble: Ensemble, timeout: float = 30.0) -> None:
        raise ZooKeeperMissing(missing)

    monkeypatch.setattr(Ensemble, "start", no_java)
    code = main(["verify", "--zk", "--only", "zookeeper", "--json", "--progress", "none", "--out", str(tmp_path)])
    (row,) = json.loads(capsys.readouterr().out)["stages"]
    assert code == 2
    assert (row["engine"], row["verdict"], row["detail"]) == ("zookeeper", "unknown", f"not run: {missing}")
