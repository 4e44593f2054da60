"""Broker ids from 0 and trace format v2: every engine on a simulator run whose brokers are 0, 1 and 2, and
v1 traces read (no leader 0 -> -1) and converted by `kcm trace convert --to v2`. The Spark pipeline's
`check --validate-sample all` on such a run is in tests/test_pipeline.py, which has a Spark session."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.replay import replay
from kcm.impl.sim.cluster import Cluster, broker_ids
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import FORMAT_VERSION, Event, TraceError, TraceWriter, load_trace
from kcm.spec.trace.itf import from_itf, to_itf
from kcm.spec.trace.parquet import read_parquet, write_parquet
from kcm.spec.vocabulary import NO_LEADER, Knobs
from kcm.spec.z3.validate import validate_events
from kcm.tools.cli import main

BROKERS = [0, 1, 2]


def simulate(seed: int, steps: int, partitions: int = 2, first: int = 0) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), SimConfig(partitions=partitions, first_broker_id=first), events.append)
    simulator.bootstrap()
    simulator.run(steps)
    return events


def names_broker_zero(events: list[Event]) -> bool:
    """Broker 0 acts, and leads a partition in the store at some point."""
    acts = any(e["actor"] in ("broker:0", "controller:0") for e in events)
    leads = any(0 in e["state"].get("leader", {}).values() for e in events)
    return acts and leads


@pytest.fixture(scope="module")
def run() -> list[Event]:
    events = simulate(3, 400)
    assert events[0]["args"]["brokers"] == BROKERS and names_broker_zero(events)
    return events


@pytest.fixture
def trace(run: list[Event], tmp_path: Path) -> Path:
    path = tmp_path / "zero.jsonl"
    with TraceWriter(path) as writer:
        for event in run:
            writer.write(event)
    return path


def test_the_simulator_numbers_brokers_from_the_first_id(run: list[Event]) -> None:
    assert {e["v"] for e in run} == {FORMAT_VERSION}
    assert run[0]["state"]["controller"] == NO_LEADER
    assert sorted(run[0]["state"]["alive"]) == ["0", "1", "2"]
    assert simulate(3, 0, first=7)[0]["args"]["brokers"] == [7, 8, 9]


def test_the_cli_option_and_its_bad_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim.jsonl"
    assert main(["sim", "--seed", "3", "--steps", "50", "--first-broker-id", "0", "--out", str(out)]) == 0
    assert load_trace(out)[0]["args"]["brokers"] == BROKERS
    assert main(["sim", "--steps", "5", "--first-broker-id", "-1", "--out", str(out)]) == 2
    assert "non-negative" in capsys.readouterr().err


def sparse_run() -> list[Event]:
    """A cluster on brokers 0, 5 and 9: a topic led by 9, which then crashes."""
    events: list[Event] = []
    cluster = Cluster([0, 5, 9], Knobs(), events.append)
    cluster.create_topic("t", {0: (9, 0, 5)})
    cluster.stabilize()
    cluster.crash(9)
    cluster.stabilize()
    return events


def test_a_cluster_on_any_broker_ids() -> None:
    events = sparse_run()
    assert events[0]["args"]["brokers"] == [0, 5, 9]
    assert {9, 0} <= {leader for e in events for leader in e["state"].get("leader", {}).values()}
    assert InvariantChecker().check_all(events).ok
    assert validate_events(events).ok
    assert replay(events).divergence is None
    with pytest.raises(ValueError, match="distinct and non-negative"):
        Cluster([1, 1], Knobs(), events.append)


def test_check_trace(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-trace", str(trace)]) == 0
    assert "violated" not in capsys.readouterr().out


def test_z3_step_validation(trace: Path, run: list[Event], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(trace)]) == 0
    assert f"all {len(run) - 1} steps explained" in capsys.readouterr().out
    assert validate_events(run).ok


def test_replay(run: list[Event]) -> None:
    report = replay(run)
    assert report.divergence is None and report.steps == len(run) - 1


def test_itf_round_trip(trace: Path, tmp_path: Path) -> None:
    itf, back = tmp_path / "zero.itf.json", tmp_path / "back.jsonl"
    assert main(["trace", "convert", str(trace), str(itf)]) == 0
    assert main(["trace", "convert", str(itf), str(back)]) == 0
    assert back.read_bytes() == trace.read_bytes()
    events = load_trace(trace)
    assert from_itf(json.loads(json.dumps(to_itf(events)))) == events


def test_parquet_round_trip(run: list[Event], tmp_path: Path) -> None:
    assert write_parquet(run, tmp_path / "events") == len(run)
    assert read_parquet(tmp_path / "events") == run


@pytest.mark.tlc
def test_tlc_trace_validation_on_brokers_from_zero() -> None:
    events = simulate(5, 40, partitions=1)
    assert any(e["actor"] == "broker:0" for e in events)
    check = validate_with_tlc(events)
    assert check.accepted, check.first_unexplained
    sparse = validate_with_tlc(sparse_run())
    assert sparse.accepted, sparse.first_unexplained


# -- trace format v1 ------------------------------------------------------------------------------------------


def _v1_leaders(value: Any) -> Any:
    """Every `leader` of the arguments, as v1 wrote it."""
    if isinstance(value, dict):
        return {k: 0 if k == "leader" and v == NO_LEADER else _v1_leaders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_v1_leaders(v) for v in value]
    return value


def as_v1(events: list[Event]) -> Iterator[dict[str, Any]]:
    """Events written as format v1 wrote them: no leader and no controller as 0."""
    for event in events:
        state = dict(event["state"])
        if state.get("controller") == NO_LEADER:
            state["controller"] = 0
        if "leader" in state:
            state["leader"] = {p: 0 if b == NO_LEADER else b for p, b in state["leader"].items()}
        yield {**event, "v": 1, "args": _v1_leaders(event["args"]), "state": state}


def write_lines(path: Path, records: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records), encoding="utf-8")
    return path


def leaderless_run() -> list[Event]:
    """Brokers 1 and 2, a partition on broker 2 alone, which crashes: the partition has no leader."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(2), Knobs(), events.append)
    cluster.create_topic("t", {0: (2,)})
    cluster.stabilize()
    cluster.crash(2)
    cluster.stabilize()
    return events


def test_a_v1_leader_0_reads_as_no_leader(tmp_path: Path) -> None:
    events = leaderless_run()
    assert any(e["state"].get("leader", {}).get("t-0") == NO_LEADER for e in events)
    v1 = list(as_v1(events))
    assert any(0 in e["state"].get("leader", {}).values() for e in v1)  # the v1 file does say "0"
    assert load_trace(write_lines(tmp_path / "old.jsonl", v1)) == events


def test_v1_rows_of_a_parquet_dataset_read_as_v2(tmp_path: Path) -> None:
    events = simulate(4, 100, first=1)
    write_parquet(list(as_v1(events)), tmp_path / "events")
    assert read_parquet(tmp_path / "events") == events


def test_trace_convert_to_v2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = simulate(4, 300, first=1)
    source = write_lines(tmp_path / "old.jsonl", as_v1(events))
    target = tmp_path / "new.jsonl"
    assert main(["trace", "convert", str(source), str(target), "--to", "v2"]) == 0
    assert f"wrote {len(events)} events" in capsys.readouterr().out
    lines = target.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == events
    assert all(line.startswith('{"v":2,') for line in lines)
    assert main(["check-trace", str(source)]) == main(["check-trace", str(target)]) == 0


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("actor", lambda e: e.update(actor="broker:0", action="HwCheckpoint")),
        ("args.brokers", lambda e: e["args"].update(brokers=[0, 1])),
        ("state.alive.0", lambda e: e["state"].update(alive={"0": True})),
        ("state.isr.t0-0", lambda e: e["state"].update(isr={"t0-0": [1, 0]})),
        ("state.replica_state.1.t0-0.0",
         lambda e: e["state"].update(replica_state={"1": {"t0-0": {"0": "NewReplica"}}})),
        ("state.leader.t0-0", lambda e: e["state"].update(leader={"t0-0": -1})),
    ],
)
def test_a_v1_trace_naming_broker_0_is_an_error(field: str, edit: Any, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    v1 = list(as_v1(simulate(4, 3, first=1)))
    edit(v1[1])
    path = write_lines(tmp_path / "bad.jsonl", v1)
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert (err.value.line, err.value.field) == (2, field)
    assert main(["trace", "convert", str(path), str(tmp_path / "out.jsonl"), "--to", "v2"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"bad.jsonl:2: {field}: {err.value.reason}")
