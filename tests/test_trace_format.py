"""Trace format v2 (and v1 read): reader, writer, delta merge, schema/vocabulary agreement and the Parquet layout."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from kcm.spec.states import PARTITION_STATES, REPLICA_STATES
from kcm.spec.trace.format import (
    KEY_ORDER,
    MAX_DEPTH,
    SCHEMA_PATH,
    Continuity,
    Event,
    TraceError,
    TraceWriter,
    apply_delta,
    apply_event,
    empty_state,
    load_trace,
    make_event,
    read_trace,
)
from kcm.spec.trace.parquet import read_parquet, write_parquet
from kcm.spec.vocabulary import ACTIONS, NO_LEADER, VARIABLES
from kcm.tools.cli import main
from kcm.tools.errors import EXIT_USAGE

DOCS = Path(__file__).resolve().parents[1] / "docs" / "trace-format.md"
RUN = "run-1"


def valid_events() -> list[Event]:
    """A small valid trace: initial snapshot, a controller election, a LeaderAndIsr on broker 2."""
    init_state: dict[str, Any] = {
        "controller": NO_LEADER,
        "controller_epoch": 0,
        "assignment": {"t0-0": [1, 2]},
        "leader": {"t0-0": NO_LEADER},
        "leader_epoch": {"t0-0": -1},
        "isr": {"t0-0": []},
        "alive": {"1": True, "2": True},
        "partition_state": {"1": {"t0-0": "NewPartition"}},
        "replica_state": {"1": {"t0-0": {"1": "NewReplica", "2": "NewReplica"}}},
        "log": {"1": {"t0-0": []}, "2": {"t0-0": []}},
    }
    return [
        make_event(
            RUN, 0, "env", "Init", {"knobs": {"min_isr": 1}, "brokers": [1, 2]}, init_state, full=True
        ),
        make_event(
            RUN,
            1,
            "broker:1",
            "ControllerElect",
            {},
            {"controller": 1, "controller_epoch": 1, "acting_controller_epoch": {"1": 1}},
        ),
        make_event(
            RUN,
            2,
            "broker:2",
            "LeaderAndIsr",
            {"partition": "t0-0", "leader": 1, "leader_epoch": 0},
            {
                "isr": {"t0-0": [1, 2]},
                "role": {"2": {"t0-0": "follower"}},
                "local_leader_epoch": {"2": {"t0-0": 0}},
                "log": {"2": {"t0-0": [[0, 7]]}},
            },
        ),
    ]


def dump(events: list[Event]) -> list[str]:
    return [json.dumps(event, separators=(",", ":")) for event in events]


def valid_lines() -> list[str]:
    return dump(valid_events())


def write_text(path: Path, lines: list[str]) -> Path:
    path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    return path


# ---------------------------------------------------------------- writer and reader


def test_round_trip_writer_reader(tmp_path: Path) -> None:
    events = valid_events()
    path = tmp_path / "trace.jsonl"
    with TraceWriter(path, validate=True) as writer:
        for event in events:
            writer.write(event)
    assert load_trace(path) == events
    assert [list(event) for event in read_trace(path)] == [list(event) for event in events]


def test_writer_output_is_reproducible_whatever_the_key_order(tmp_path: Path) -> None:
    events = valid_events()
    shuffled = [dict(reversed(list(event.items()))) for event in events]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path, batch in ((first, events), (second, shuffled)):
        with TraceWriter(path) as writer:
            for event in batch:
                writer.write(event)
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text(encoding="utf-8").splitlines()[0].startswith('{"v":2,"run":"run-1","seq":0,')


def test_writer_to_stream_leaves_it_open() -> None:
    stream = io.StringIO()
    with TraceWriter(stream) as writer:
        writer.write(valid_events()[0])
    assert not stream.closed
    assert stream.getvalue().count("\n") == 1


def test_writer_validation_rejects_a_bad_event() -> None:
    events = valid_events()
    events[1]["seq"] = 5
    with TraceWriter(io.StringIO(), validate=True) as writer:
        writer.write(events[0])
        with pytest.raises(TraceError) as info:
            writer.write(events[1])
    assert (info.value.line, info.value.field) == (2, "seq")


def test_writer_rejects_unknown_fields() -> None:
    event = {**valid_events()[0], "note": "x"}
    with TraceWriter(io.StringIO()) as writer, pytest.raises(TraceError) as info:
        writer.write(event)
    assert info.value.field == "note"


def test_make_event_key_order() -> None:
    assert list(make_event("r", 0, "env", "Init", {}, {}, full=True)) == list(KEY_ORDER)
    assert "full" not in make_event("r", 0, "env", "Init", {}, {})


def test_trace_error_is_one_line_and_pickles() -> None:
    err = TraceError("f.jsonl", 3, "state.isr.t0-0", "must be array")
    assert str(err) == "f.jsonl:3: state.isr.t0-0: must be array"
    again = pickle.loads(pickle.dumps(err))
    assert (again.file, again.line, again.field, again.reason) == (
        "f.jsonl",
        3,
        "state.isr.t0-0",
        "must be array",
    )


def test_trace_error_escapes_line_breaks_from_the_trace(tmp_path: Path) -> None:
    events = valid_events()
    events[2]["state"]["isr"] = {"t0\n0": "x"}
    with pytest.raises(TraceError) as info:
        load_trace(write_text(tmp_path / "t.jsonl", dump(events)))
    assert info.value.field == "state.isr.t0\n0"
    assert "\n" not in str(info.value)


def test_observer_may_report_any_action(tmp_path: Path) -> None:
    events = valid_events()
    events[2]["actor"] = "observer"
    assert len(load_trace(write_text(tmp_path / "t.jsonl", dump(events)))) == 3


def test_trace_may_start_at_any_seq(tmp_path: Path) -> None:
    events = valid_events()
    for event in events:
        event["seq"] += 40
    assert [e["seq"] for e in load_trace(write_text(tmp_path / "t.jsonl", dump(events)))] == [40, 41, 42]


# ---------------------------------------------------------------- malformed traces

Edit = Callable[[list[str]], bytes]


def lines_bytes(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def edit_event(index: int, change: Callable[[Event], None]) -> Edit:
    """Change one event of the valid trace and serialise it again."""

    def apply(lines: list[str]) -> bytes:
        events = [json.loads(line) for line in lines]
        change(events[index])
        return lines_bytes(dump(events))

    return apply


def setter(key: str, value: Any) -> Callable[[Event], None]:
    def change(event: Event) -> None:
        event[key] = value

    return change


def deleter(key: str) -> Callable[[Event], None]:
    def change(event: Event) -> None:
        del event[key]

    return change


def state_setter(variable: str, value: Any) -> Callable[[Event], None]:
    def change(event: Event) -> None:
        event["state"][variable] = value

    return change


def replace_line(index: int, text: str) -> Edit:
    def apply(lines: list[str]) -> bytes:
        return lines_bytes([*lines[:index], text, *lines[index + 1 :]])

    return apply


def insert_line(index: int, text: str) -> Edit:
    def apply(lines: list[str]) -> bytes:
        return lines_bytes([*lines[:index], text, *lines[index:]])

    return apply


def replace_text(index: int, old: str, new: str) -> Edit:
    """Rewrite part of one line as text: for values json.dumps would not write (1e308, NaN)."""

    def apply(lines: list[str]) -> bytes:
        assert old in lines[index]
        return lines_bytes([*lines[:index], lines[index].replace(old, new, 1), *lines[index + 1 :]])

    return apply


def args_setter(key: str, value: Any) -> Callable[[Event], None]:
    def change(event: Event) -> None:
        event["args"][key] = value

    return change


def nested(depth: int) -> Any:
    """Arrays nested `depth` deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def as_v1(event: Event) -> None:
    """The Init event as v1 wrote it: 0 for no leader and no controller."""
    event["v"] = 1
    event["state"]["controller"] = 0
    event["state"]["leader"] = {"t0-0": 0}


def truncate_last(lines: list[str]) -> bytes:
    whole = lines_bytes(lines)
    return whole[: len(whole) - len(lines[-1]) // 2]


def empty(lines: list[str]) -> bytes:
    return b""


def non_utf8(lines: list[str]) -> bytes:
    raw = lines_bytes(lines).split(b"\n")
    raw[1] = raw[1].replace(b'"ControllerElect"', b'"Controller\xffElect"')
    return b"\n".join(raw)


# (name, edit, line, field, a fragment of the reason)
MALFORMED: list[tuple[str, Edit, int, str, str]] = [
    ("broken JSON mid-file", replace_line(1, '{"v":2,"run":'), 2, "-", "invalid JSON"),
    ("truncated last line", truncate_last, 3, "-", "truncated file (last line incomplete)"),
    ("empty file", empty, 0, "-", "empty trace"),
    ("blank line", insert_line(1, ""), 2, "-", "blank line"),
    ("whitespace-only line", insert_line(2, "   "), 3, "-", "blank line"),
    ("not an object", replace_line(1, "[1, 2, 3]"), 2, "-", "must be object"),
    ("missing v", edit_event(1, deleter("v")), 2, "v", "missing"),
    ("wrong v", edit_event(0, setter("v", 3)), 1, "v", "const"),
    ("missing run", edit_event(1, deleter("run")), 2, "run", "missing"),
    ("empty run", edit_event(0, setter("run", "")), 1, "run", ""),
    ("run changes mid-trace", edit_event(2, setter("run", "run-2")), 3, "run", "differs"),
    ("missing seq", edit_event(2, deleter("seq")), 3, "seq", "missing"),
    ("seq as string", edit_event(1, setter("seq", "1")), 2, "seq", "integer"),
    ("seq as boolean", edit_event(1, setter("seq", True)), 2, "seq", "integer"),
    ("negative seq", edit_event(0, setter("seq", -1)), 1, "seq", "0"),
    ("seq gap", edit_event(2, setter("seq", 3)), 3, "seq", "expected seq 2"),
    ("seq duplicate", edit_event(2, setter("seq", 1)), 3, "seq", "expected seq 2"),
    ("seq going back", edit_event(2, setter("seq", 0)), 3, "seq", "expected seq 2"),
    ("missing actor", edit_event(1, deleter("actor")), 2, "actor", "missing"),
    ("bad actor format", edit_event(1, setter("actor", "broker-1")), 2, "actor", "pattern"),
    ("actor kind mismatch", edit_event(2, setter("actor", "controller:1")), 3, "actor", "broker:N"),
    (
        "controller action by a broker",
        edit_event(1, setter("action", "BrokerChange")),
        2,
        "actor",
        "controller:N",
    ),
    ("unknown action", edit_event(1, setter("action", "Frobnicate")), 2, "action", "Frobnicate"),
    ("args not an object", edit_event(1, setter("args", [1])), 2, "args", "object"),
    ("state not an object", edit_event(1, setter("state", "x")), 2, "state", "object"),
    ("full not a boolean", edit_event(0, setter("full", 1)), 1, "full", "boolean"),
    ("unknown state variable", edit_event(1, state_setter("leaders", {})), 2, "state.leaders", "unknown"),
    ("depth-0 variable null", edit_event(1, state_setter("controller", None)), 2, "state.controller", ""),
    ("isr value not a list", edit_event(2, state_setter("isr", {"t0-0": 1})), 3, "state.isr.t0-0", "array"),
    (
        "isr member a string",
        edit_event(2, state_setter("isr", {"t0-0": ["1", 2]})),
        3,
        "state.isr.t0-0[0]",
        "",
    ),
    ("isr member negative", edit_event(2, state_setter("isr", {"t0-0": [-1]})), 3, "state.isr.t0-0[0]", ""),
    ("leader below -1", edit_event(0, state_setter("leader", {"t0-0": -2})), 1, "state.leader.t0-0", ""),
    ("controller below -1", edit_event(1, state_setter("controller", -2)), 2, "state.controller", ""),
    (
        "leader epoch below -1",
        edit_event(0, state_setter("leader_epoch", {"t0-0": -2})),
        1,
        "state.leader_epoch.t0-0",
        "",
    ),
    (
        "log entry wrong arity",
        edit_event(2, state_setter("log", {"2": {"t0-0": [[0, 7, 1]]}})),
        3,
        "state.log.2.t0-0[0]",
        "2 items",
    ),
    (
        "role unknown value",
        edit_event(2, state_setter("role", {"2": {"t0-0": "boss"}})),
        3,
        "state.role.2.t0-0",
        "boss",
    ),
    (
        "depth-2 variable given at depth 1",
        edit_event(2, state_setter("role", {"2": "follower"})),
        3,
        "state.role.2",
        "object",
    ),
    (
        "depth-3 variable given at depth 2",
        edit_event(0, state_setter("replica_state", {"1": {"t0-0": "NewReplica"}})),
        1,
        "state.replica_state.1.t0-0",
        "object",
    ),
    ("extra top-level field", edit_event(1, setter("note", "hi")), 2, "note", "unknown field"),
    ("non-UTF-8 bytes", non_utf8, 2, "-", "UTF-8"),
    # Issue 38, item 6: nesting past the JSON decoder's recursion limit, and past MAX_DEPTH below it.
    ("arrays nested 100,000 deep", replace_line(1, "[" * 100_000), 2, "-", "nested too deeply"),
    ("objects nested 100,000 deep", replace_line(1, '{"a":' * 100_000 + "1" + "}" * 100_000), 2, "-",
     "nested too deeply"),
    ("args nested 65 deep", edit_event(2, args_setter("deep", nested(63))), 3, "-", "more than 64 levels"),
    # Issue 38, item 9: accepted when they should not be.
    ("negative broker in Init", edit_event(0, args_setter("brokers", [-5, 1, 2])), 1, "args.brokers[0]",
     "bigger than or equal to 0"),
    ("a broker twice in Init", edit_event(0, args_setter("brokers", [1, 1, 2])), 1, "args.brokers", "unique"),
    ("Init's brokers not a list", edit_event(0, args_setter("brokers", "1,2")), 1, "args.brokers", "array"),
    # Found by tests/test_fuzz_cli.py: check-trace ended in a traceback, validate and replay named no line.
    ("Init's knobs not an object", edit_event(0, args_setter("knobs", 2**64)), 1, "args.knobs", "object"),
    ("an unknown knob in Init", edit_event(0, args_setter("knobs", {"bogus": 1})), 1, "args.knobs", "unknown knob"),
    ("a knob value no design has", edit_event(0, args_setter("knobs", {"truncation": 5})), 1, "args.knobs",
     "is not one of"),
    ("a boolean broker in Init", edit_event(0, args_setter("brokers", [True, 2])), 1, "args.brokers[0]",
     "integer"),
    ("broker actor not in Init", edit_event(2, setter("actor", "broker:999")), 3, "actor",
     "broker 999 is not one of the trace's brokers (Init's args.brokers: 1, 2)"),
    ("electing broker not in Init", edit_event(1, setter("actor", "broker:0")), 2, "actor",
     "broker 0 is not one of the trace's brokers"),
    ("a broker key not among Init's", edit_event(2, state_setter("hw", {"9": {"t0-0": 0}})), 3, "state.hw.9",
     "broker 9 is not one of the trace's brokers"),
    ("Init's state keyed by a broker it does not name", edit_event(0, state_setter("alive", {"3": True})), 1,
     "state.alive.3", "broker 3 is not one of the trace's brokers"),
    ("a broker key not a number", edit_event(1, state_setter("acting_controller_epoch", {"x": 1})), 2,
     "state.acting_controller_epoch.x", "not a broker id"),
    ("a broker key with a leading zero", edit_event(2, state_setter("role", {"02": {"t0-0": "follower"}})), 3,
     "state.role.02", "not a broker id"),
    ("a replica key not a number", edit_event(0, state_setter("replica_state", {"1": {"t0-0": {"-1": "NewReplica"}}})),
     1, "state.replica_state.1.t0-0.-1", "not a broker id"),
    ("a v1 line in a v2 file", edit_event(1, setter("v", 1)), 2, "v", "a v1 line in a v2 trace"),
    ("a v2 line in a v1 file", edit_event(0, as_v1), 2, "v", "a v2 line in a v1 trace"),
    ("v true is no v1", edit_event(1, setter("v", True)), 2, "v", "const"),
    ("seq with a fraction", replace_text(1, '"seq":1', '"seq":1.0'), 2, "-", "1.0 is not an integer"),
    ("an epoch of 1e308", replace_text(2, '"t0-0":0}', '"t0-0":1e308}'), 3, "-", "1e308 is not an integer"),
    ("seq NaN", replace_text(1, '"seq":1', '"seq":NaN'), 2, "-", "NaN is not a JSON number"),
    ("an epoch of -Infinity", replace_text(2, '"t0-0":0}', '"t0-0":-Infinity}'), 3, "-",
     "-Infinity is not a JSON number"),
    ("seq of 5,000 digits", replace_text(1, '"seq":1', '"seq":' + "9" * 5000), 2, "-", "integer of more than"),
    ("seq past 64 bits", edit_event(1, setter("seq", 2**63)), 2, "seq", "smaller than or equal to"),
    ("epoch a boolean", edit_event(2, state_setter("local_leader_epoch", {"2": {"t0-0": True}})), 3,
     "state.local_leader_epoch.2.t0-0", "integer"),
]


@pytest.mark.parametrize(
    ("edit", "line", "field", "reason"), [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED]
)
def test_malformed_trace(tmp_path: Path, edit: Edit, line: int, field: str, reason: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(edit(valid_lines()))
    with pytest.raises(TraceError) as info:
        load_trace(path)
    err = info.value
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert reason in err.reason
    assert "\n" not in str(err)
    where = f"{path}:{line}" if line else str(path)  # line 0: the whole file; field "-": none in particular
    assert str(err) == (f"{where}: {err.reason}" if field == "-" else f"{where}: {field}: {err.reason}")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.jsonl"
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert (info.value.line, info.value.field) == (0, "-")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as info:
        load_trace(tmp_path)
    assert (info.value.line, info.value.field) == (0, "-")


def test_reader_streams_valid_prefix_before_the_fault(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(edit_event(2, setter("seq", 9))(valid_lines()))
    seen: list[int] = []
    with pytest.raises(TraceError):
        for event in read_trace(path):
            seen.append(event["seq"])
    assert seen == [0, 1]


def test_enough_malformed_cases() -> None:
    assert len(MALFORMED) + 2 >= 22


def test_nesting_up_to_max_depth_is_read(tmp_path: Path) -> None:
    events = valid_events()
    events[2]["args"]["deep"] = nested(MAX_DEPTH - 2)  # inside the event and its args
    assert load_trace(write_text(tmp_path / "t.jsonl", dump(events)))[2]["args"]["deep"] == nested(MAX_DEPTH - 2)


def test_a_v1_file_is_read_as_v2(tmp_path: Path) -> None:
    lines = edit_event(0, as_v1)(valid_lines()).decode().splitlines()
    v1 = [line.replace('"v":2', '"v":1', 1) for line in lines]
    assert [event["state"].get("controller") for event in load_trace(write_text(tmp_path / "t.jsonl", v1))] == [
        NO_LEADER, 1, None]


def test_a_refused_line_leaves_the_rules_for_the_next_ones_as_they_were() -> None:
    """A reader that goes on past a refused line (pipeline ingest) holds the next lines to the same rules:
    nothing a refused line says (its run, version, seq) sticks, and each refused line may have held the next
    seq."""
    events = valid_events()
    continuity = Continuity("t.jsonl")
    continuity.read_line(lines_bytes(dump(events[:1])), 1)
    refused = [b'{"v":2,', json.dumps({**events[1], "run": "other", "v": 1}).encode(),
               json.dumps({**events[1], "seq": 7}).encode(), b"[1]"]
    for line, raw in enumerate(refused, start=2):
        with pytest.raises(TraceError):
            continuity.read_line(raw + b"\n", line)
    # Four lines refused since seq 0: the next may be any of seq 1 to 5.
    with pytest.raises(TraceError) as info:
        continuity.check({**events[1], "seq": 6}, 6)
    assert (info.value.field, info.value.reason) == ("seq", "expected seq 1 (up to 5 after 4 refused lines), got 6")
    assert continuity.check({**events[1], "seq": 3}, 7)["seq"] == 3
    with pytest.raises(TraceError) as info:  # a gap with no line refused: a line left out
        continuity.check({**events[2], "seq": 5}, 8)
    assert (info.value.field, info.value.reason) == ("seq", "expected seq 4, got 5")


def test_lines_inserted_or_corrupted_in_place_leave_the_lines_after_them_good() -> None:
    lines = valid_lines()
    for raw in (
        lines_bytes([lines[0], "not json", "[]", lines[1], lines[2]]),  # junk inserted
        lines_bytes([lines[0], lines[1][:30] + "#" + lines[1][31:], lines[2]]),  # a line damaged in place
    ):
        continuity = Continuity("t.jsonl")
        accepted = []
        for line, text in enumerate(raw.splitlines(keepends=True), start=1):
            with contextlib.suppress(TraceError):
                accepted.append(continuity.read_line(text, line)["seq"])
        assert accepted[-1] == 2


def test_the_brokers_of_a_later_init_are_the_ones_that_count() -> None:
    events = valid_events()
    continuity = Continuity("t.jsonl")
    continuity.check(events[0], 1)
    again = {**events[0], "seq": 1, "args": {"brokers": [7]}, "state": {"alive": {"7": True}}}
    continuity.check(again, 2)
    with pytest.raises(TraceError, match="broker 1 is not one of the trace's brokers"):
        continuity.check({**events[1], "seq": 2}, 3)
    elected = {**events[1], "seq": 2, "actor": "broker:7", "state": {"acting_controller_epoch": {"7": 1}}}
    assert continuity.check(elected, 3)["actor"] == "broker:7"


def test_a_replica_may_be_a_broker_init_does_not_name(tmp_path: Path) -> None:
    """A Kafka log names replicas on brokers that wrote none of its lines: only the brokers that hold state
    (the first key of a broker-keyed variable) and the actors must be among Init's."""
    events = valid_events()
    events[2]["state"]["isr"] = {"t0-0": [1, 2, 5]}
    events[2]["state"]["local_isr"] = {"2": {"t0-0": [2, 5]}}
    assert load_trace(write_text(tmp_path / "t.jsonl", dump(events)))[2]["state"]["isr"] == {"t0-0": [1, 2, 5]}


def test_parquet_rows_are_decoded_as_lines_are(tmp_path: Path) -> None:
    write_parquet(valid_events(), tmp_path / "pq")
    (part,) = (tmp_path / "pq").rglob("*.parquet")
    table = pq.read_table(part)
    args = table.column("args").to_pylist()
    args[1] = '{"epoch":1e308}'
    pq.write_table(table.set_column(table.schema.get_field_index("args"), "args", pa.array(args)), part)
    with pytest.raises(TraceError, match="1e308 is not an integer"):
        read_parquet(tmp_path / "pq")


# Issue 38: the bad lines the commands that read a trace took, ended in a traceback on, or judged as a violation.
CLI_CASES = [case for case in MALFORMED if case[0] in (
    "arrays nested 100,000 deep", "objects nested 100,000 deep", "negative broker in Init", "broker actor not in Init",
    "a v1 line in a v2 file", "an epoch of 1e308", "seq with a fraction", "seq gap", "Init's knobs not an object",
    "a knob value no design has")]


@pytest.mark.parametrize("command", ["check-trace", "validate", "replay"])
@pytest.mark.parametrize(("edit", "line", "field", "reason"), [case[1:] for case in CLI_CASES],
                         ids=[case[0] for case in CLI_CASES])
def test_every_command_that_reads_a_trace_refuses_a_bad_line_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, edit: Edit, line: int, field: str,
        reason: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(edit(valid_lines()))
    assert main([command, str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    where = f"{path}:{line}: " + ("" if field == "-" else f"{field}: ")
    assert err.startswith(f"kcm: error: {where}") and reason in err
    assert err.count("\n") == 1 and "Traceback" not in err


# ---------------------------------------------------------------- delta merge


def test_empty_state() -> None:
    state = empty_state()
    assert list(state) == list(VARIABLES)
    assert state["controller"] == NO_LEADER
    assert all(state[name] == (0 if depth == 0 else {}) for name, depth in VARIABLES.items() if name != "controller")


def test_apply_delta_depth0_replaces() -> None:
    state = empty_state()
    apply_delta(state, {"controller": 2, "controller_epoch": 5})
    apply_delta(state, {"controller": 0})
    assert (state["controller"], state["controller_epoch"]) == (0, 5)


def test_apply_delta_depth1_per_key_and_null_removes() -> None:
    state = empty_state()
    apply_delta(state, {"isr": {"t-0": [1, 2], "t-1": [2]}})
    apply_delta(state, {"isr": {"t-0": [1]}})
    assert state["isr"] == {"t-0": [1], "t-1": [2]}
    apply_delta(state, {"isr": {"t-1": None, "t-9": None}})
    assert state["isr"] == {"t-0": [1]}


def test_apply_delta_depth2_per_inner_key() -> None:
    state = empty_state()
    apply_delta(state, {"hw": {"1": {"t-0": 3, "t-1": 4}}})
    apply_delta(state, {"hw": {"1": {"t-0": 5}, "2": {"t-0": 1}}})
    assert state["hw"] == {"1": {"t-0": 5, "t-1": 4}, "2": {"t-0": 1}}
    apply_delta(state, {"hw": {"2": {"t-0": None}}})
    assert state["hw"] == {"1": {"t-0": 5, "t-1": 4}, "2": {}}


def test_apply_delta_depth3_per_replica() -> None:
    state = empty_state()
    apply_delta(state, {"replica_state": {"1": {"t-0": {"1": "NewReplica", "2": "NewReplica"}}}})
    apply_delta(state, {"replica_state": {"1": {"t-0": {"2": "OnlineReplica"}, "t-1": {"3": "NewReplica"}}}})
    assert state["replica_state"] == {
        "1": {"t-0": {"1": "NewReplica", "2": "OnlineReplica"}, "t-1": {"3": "NewReplica"}}
    }
    apply_delta(state, {"replica_state": {"1": {"t-1": {"3": None}}}})
    assert state["replica_state"]["1"]["t-1"] == {}


def test_apply_delta_does_not_mutate_deltas() -> None:
    first: dict[str, Any] = {
        "role": {"1": {"t-0": "leader"}},
        "replica_state": {"1": {"t-0": {"1": "NewReplica"}}},
    }
    second: dict[str, Any] = {
        "role": {"1": {"t-1": "follower"}},
        "replica_state": {"1": {"t-0": {"2": "NewReplica"}}},
    }
    snapshot = copy.deepcopy(first)
    state = empty_state()
    apply_delta(state, first)
    apply_delta(state, second)
    assert first == snapshot


def test_apply_event_full_resets_everything() -> None:
    events = valid_events()
    state = empty_state()
    for event in events:
        apply_event(state, event)
    assert state["controller"] == 1 and state["role"] == {"2": {"t0-0": "follower"}}
    apply_event(state, make_event(RUN, 3, "env", "Init", {}, {"controller": 2}, full=True))
    assert state == {**empty_state(), "controller": 2}


# ---------------------------------------------------------------- schema, vocabulary and docs agree


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def nesting(shape: dict[str, Any]) -> int:
    depth = 0
    while shape.get("type") == "object" and "additionalProperties" in shape:
        shape = shape["additionalProperties"]
        depth += 1
    return depth


def test_schema_actions_match_vocabulary() -> None:
    assert schema()["properties"]["action"]["enum"] == sorted(ACTIONS)


def test_schema_variables_match_vocabulary() -> None:
    state = schema()["properties"]["state"]
    assert state["additionalProperties"] is False
    assert set(state["properties"]) == set(VARIABLES)
    assert {name: nesting(shape) for name, shape in state["properties"].items()} == VARIABLES


def test_schema_enums_match_the_state_machines() -> None:
    definitions = schema()["definitions"]
    assert set(definitions["partition_state"]["enum"]) == {*PARTITION_STATES, None}
    assert set(definitions["replica_state"]["enum"]) == {*REPLICA_STATES, None}


def test_schema_top_level_is_closed() -> None:
    top = schema()
    assert top["additionalProperties"] is False
    assert top["required"] == list(KEY_ORDER[:-1])
    assert list(top["properties"]) == list(KEY_ORDER)


def test_docs_cover_every_action_and_variable() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [name for name in [*ACTIONS, *VARIABLES] if f"`{name}`" not in text]
    assert missing == []


# ---------------------------------------------------------------- Parquet


def test_parquet_round_trip(tmp_path: Path) -> None:
    other = [make_event("7", 0, "env", "Init", {"knobs": {}}, {"controller": 0}, full=True)]
    events = other + valid_events()
    assert write_parquet(reversed(events), tmp_path / "pq") == 4
    back = read_parquet(tmp_path / "pq")
    assert back == events
    assert [list(event) for event in back] == [list(event) for event in events]
    assert sorted(p.name for p in (tmp_path / "pq").iterdir()) == ["run=7", f"run={RUN}"]


def test_parquet_rewriting_a_run_replaces_it(tmp_path: Path) -> None:
    out = tmp_path / "pq"
    write_parquet(valid_events(), out)
    write_parquet(valid_events()[:1], out)
    assert read_parquet(out) == valid_events()[:1]


def test_parquet_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(TraceError):
        read_parquet(tmp_path / "absent")


def test_docs_example_is_a_valid_trace(tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("```jsonl\n", 1)[1].split("```", 1)[0]
    events = load_trace(write_text(tmp_path / "example.jsonl", block.splitlines()))
    assert [event["seq"] for event in events] == [0, 1, 2, 3]
    assert events[0]["action"] == "Init" and events[0]["full"] is True


def test_an_argument_of_the_wrong_type_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kcm.tools.cli import main

    assert main(["sim", "--seed", "1", "--steps", "30", "--out", str(tmp_path / "t.jsonl")]) == 0
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    event = json.loads(lines[1])
    assert "topic" in event["args"]
    event["args"]["topic"] = []
    lines[1] = json.dumps(event)
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["check-trace", str(tmp_path / "t.jsonl")]) == 2
    assert capsys.readouterr().err == f"kcm: error: {tmp_path / 't.jsonl'}:2: args.topic: must be string\n"

