"""ITF conversion: v1 -> ITF -> v1 gives back the very same events; bad ITF is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.tlc.modelcheck import write_trace
from kcm.spec.tlc.runner import TraceState
from kcm.spec.trace.format import Event, TraceError, TraceWriter, load_trace
from kcm.spec.trace.itf import from_itf, to_itf
from kcm.spec.vocabulary import Knobs
from kcm.tools.cli import main


def simulate(seed: int, steps: int) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), SimConfig(), events.append)
    simulator.bootstrap()
    simulator.run(steps)
    return events


def round_trip(events: list[Event]) -> list[Event]:
    return from_itf(json.loads(json.dumps(to_itf(events))), "t.itf.json")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulator_traces_round_trip(seed: int) -> None:
    events = simulate(seed, 500)
    assert round_trip(events) == events


def _tla_state(hw: int, log: list[list[int]], alive2: bool) -> dict[str, Any]:
    return {
        "controller": 1, "controller_epoch": 1, "assignment": {"p0": [1, 2]}, "leader": {"p0": 1},
        "leader_epoch": {"p0": 0}, "isr": {"p0": [1, 2]}, "partition_controller_epoch": {"p0": 1},
        "partition_version": {"p0": 0}, "acting_controller_epoch": [1, 0], "alive": [True, alive2],
        "broker_controller_epoch": [1, 1 if alive2 else 0],
        "role": [{"p0": "leader"}, {"p0": "follower" if alive2 else "none"}],
        "local_leader_epoch": [{"p0": 0}, {"p0": 0 if alive2 else -1}],
        "local_isr": [{"p0": [1, 2]}, {"p0": []}], "log": [{"p0": log}, {"p0": []}],
        "hw": [{"p0": hw}, {"p0": 0}], "hw_checkpoint": [{"p0": 0}, {"p0": 0}],
        "epoch_start_offset": [{"p0": 0}, {"p0": 0}],
        "partition_state": [{"p0": "OnlinePartition"}, {"p0": "NonExistentPartition"}],
        "replica_state": [{"p0": ["OnlineReplica", "OnlineReplica"]},
                          {"p0": ["NonExistentReplica", "NonExistentReplica"]}],
    }


def test_a_tlc_counterexample_round_trips(tmp_path: Path) -> None:
    states = [
        TraceState(1, "Init", _tla_state(0, [], True)),
        TraceState(2, "Produce", _tla_state(0, [[0, 1]], True)),
        TraceState(3, "BrokerCrash", _tla_state(0, [[0, 1]], False)),
        TraceState(4, "HwCheckpoint", _tla_state(1, [[0, 1]], False)),
    ]
    path = tmp_path / "cx.jsonl"
    write_trace(states, Knobs(), "tlc-test", path)
    events = load_trace(path)
    assert round_trip(events) == events


def test_itf_values_use_maps_and_tuples() -> None:
    doc = to_itf(simulate(0, 60))
    assert doc["vars"][0] == "controller"
    state = doc["states"][-1]
    assert state["#meta"]["index"] == len(doc["states"]) - 1
    assert "#map" in state["log"]
    logs = [v for _, inner in state["log"]["#map"] for _, v in inner["#map"] if v]
    assert logs and all("#tup" in entry for entry in logs[0])


def test_foreign_itf_with_sets_bigints_and_numeric_keys() -> None:
    doc = {
        "vars": ["controller_epoch", "isr"],
        "states": [
            {"controller_epoch": {"#bigint": "1"}, "isr": {"#map": [["t-0", {"#set": [2, 1]}]]}},
            {"#meta": {"action": "BrokerChange", "actor": "controller:1"}, "controller_epoch": 1,
             "isr": {"#map": [["t-0", {"#set": [1]}]]}},
        ],
    }
    events = from_itf(doc, "x.itf.json")
    assert events[0]["full"] and events[0]["state"] == {"controller_epoch": 1, "isr": {"t-0": [1, 2]}}
    assert events[1]["state"] == {"isr": {"t-0": [1]}} and events[1]["seq"] == 1


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "bad.itf.json: an ITF trace is a JSON object"),
        ({"states": []}, "vars: missing"),
        ({"vars": ["nope"], "states": [{}]}, "vars.nope: unknown state variable"),
        ({"vars": ["hw"], "states": []}, "states: missing or empty"),
        ({"vars": ["hw"], "states": [{}]}, "states[0].hw: variable listed in vars has no value"),
        ({"vars": ["hw"], "states": [{"hw": 3}]}, "states[0].hw: expected a #map"),
        ({"vars": ["controller"], "states": [{"controller": {"#bigint": "x"}}]}, "states[0].controller.#bigint"),
        ({"vars": ["controller"], "states": [{"controller": 1}, {"controller": 2}]}, "states[1].#meta.action"),
        ({"vars": ["controller"], "states": [{"controller": 1, "#meta": {"action": "Nope"}}]},
         "states[0].action: unknown value"),
    ],
)
def test_bad_itf_is_a_one_line_error(doc: Any, field: str) -> None:
    with pytest.raises(TraceError) as caught:
        from_itf(doc, "bad.itf.json")
    assert str(caught.value).startswith("bad.itf.json: ")
    assert field in str(caught.value) and "\n" not in str(caught.value)


def test_cli_converts_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "sim.jsonl"
    with TraceWriter(source) as writer:
        for event in simulate(1, 200):
            writer.write(event)
    itf = tmp_path / "sim.itf.json"
    assert main(["trace", "convert", str(source), str(itf)]) == 0
    back = tmp_path / "back.jsonl"
    assert main(["trace", "convert", str(itf), str(back)]) == 0
    assert back.read_bytes() == source.read_bytes()
    (tmp_path / "broken.json").write_text("{")
    assert main(["trace", "convert", str(tmp_path / "broken.json"), str(back), "--to", "v2"]) == 2
    assert "broken.json:1: invalid JSON" in capsys.readouterr().err


def test_an_interrupted_conversion_leaves_the_old_output_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, item 7: the ITF document is published whole, or the old one stays."""
    source = tmp_path / "sim.jsonl"
    with TraceWriter(source) as writer:
        for event in simulate(1, 50):
            writer.write(event)
    itf = tmp_path / "sim.itf.json"
    itf.write_text("the old output\n")

    def half_then_interrupted(self: Path, data: str, *args: object, **kwargs: object) -> int:
        with self.open("w", encoding="utf-8") as handle:
            handle.write(data[: len(data) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", half_then_interrupted)
    assert main(["trace", "convert", str(source), str(itf)]) == 130
    assert capsys.readouterr().err == "kcm: interrupted\n"
    assert itf.read_text() == "the old output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.itf.json", "sim.jsonl"]


@pytest.mark.tlc
def test_a_real_tlc_counterexample_round_trips(tmp_path: Path) -> None:
    from kcm.spec.tlc.modelcheck import check_model, model_knobs

    trace = tmp_path / "cx.jsonl"
    check_model("kafka1211", model_knobs("kafka1211"), heap_mb=1024, trace_out=trace)
    events = load_trace(trace)
    assert len(events) > 2 and round_trip(events) == events


@pytest.mark.parametrize(("text", "reason"), [
    ("[" * 100_000, "nested too deeply (more than 64 levels of arrays and objects)"),
    ('{"vars":["controller"],"states":[{"controller":1e308}]}',
     "1e308 is not an integer (every number of a trace is an integer)"),
    ('{"vars":["controller"],"states":[{"controller":NaN}]}', "NaN is not a JSON number"),
])
def test_an_itf_file_is_decoded_as_a_trace_line_is(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                                                    reason: str) -> None:
    """Issue 38, items 6 and 9: a document nested 100,000 deep ended in a RecursionError; 1e308 was read as
    an integer."""
    source = tmp_path / "bad.itf.json"
    source.write_text(text)
    assert main(["trace", "convert", str(source), str(tmp_path / "out.jsonl")]) == 2
    assert capsys.readouterr().err == f"kcm: error: {source}: {reason}\n"


def test_a_float_in_a_decoded_itf_document_is_no_integer() -> None:
    with pytest.raises(TraceError, match=r"states\[0\].controller: 2.0 is not an integer"):
        from_itf({"vars": ["controller"], "states": [{"controller": 2.0}]}, "x.itf.json")
