"""check-trace, validate and replay read a trace as a stream: however long the trace, they hold a bounded
number of its events at once; and a malformed line deep in a long trace is reported as it was when the
trace was loaded whole (one line naming file, line and field, exit 2, nothing on stdout before it)."""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check import replay as replay_module
from kcm.conformance.check.invariants import InvariantChecker
from kcm.spec.trace import format as trace_format
from kcm.spec.trace.format import load_trace
from kcm.spec.trace.render import render_excerpt
from kcm.tools.check_trace import EXCERPT_BEFORE
from kcm.tools.cli import main
from kcm.tools.interpreted import compiled

# A run under the unsafe HW truncation that loses a committed record at step 88 of its 1,502 events.
SEED, STEPS, EVENTS = "7", "1500", 1502
# The replay's window, made small so that a short trace is many windows long.
WINDOW = 100


class _Tracked(dict[str, Any]):
    """An event whose end the census can observe (a plain dict takes no weak reference)."""


@dataclass
class Census:
    """How many events the reader has handed out and how many of them were alive at most at once."""

    read: int = 0
    live: int = 0
    most: int = 0

    def born(self) -> None:
        self.read += 1
        self.live += 1
        self.most = max(self.most, self.live)

    def died(self) -> None:
        self.live -= 1


@pytest.fixture
def census(monkeypatch: pytest.MonkeyPatch) -> Census:
    """Every event any reader of trace files parses is counted while it lives: the readers hand on the
    object `parse_line` returns, so an engine that keeps events keeps these. Compiled modules call the
    reader directly, past the patch: the census counts the interpreted modules (the default suite's)."""
    if compiled():
        pytest.skip("the census patches the trace reader, which compiled modules call directly")
    counted = Census()
    parse: Callable[[bytes, str, int], Any] = trace_format.parse_line

    def parse_counted(raw: bytes, file: str, line: int) -> Any:
        value = parse(raw, file, line)
        if not isinstance(value, dict):
            return value
        event = _Tracked(value)
        counted.born()
        weakref.finalize(event, counted.died)
        return event

    monkeypatch.setattr(trace_format, "parse_line", parse_counted)
    return counted


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("streaming") / "hw.jsonl"
    # Storm only (--calm-every 0): the trace these tests were sized on.
    assert main(["sim", "--seed", SEED, "--steps", STEPS, "--calm-every", "0", "--set", "truncation=hw",
                 "--out", str(trace)]) == 0
    return trace


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_trace_holds_only_the_excerpt(long_trace: Path, census: Census,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check-trace", str(long_trace))
    assert census.read == EVENTS
    assert census.most <= EXCERPT_BEFORE + 2
    # The output is the one the whole trace in memory gave: the first violation and the events before it.
    events = load_trace(long_trace)
    first = InvariantChecker().check_all(events).violations[0]
    assert code == 1
    assert out.startswith(f"{long_trace}: {first.invariant} violated at step {first.seq}\n"
                          f"{render_excerpt(events, first.seq)}\nwhy: {first.message}\n")


def test_validate_holds_a_step(long_trace: Path, census: Census, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--json", str(long_trace))
    assert code == 0 and json.loads(out)["steps"] == EVENTS - 1
    assert census.most <= 3  # the first event (kept for its knobs), the step's event and the next one read
    assert census.read == 2 * EVENTS  # a survey of the trace, then its steps


def test_replay_holds_a_window(long_trace: Path, census: Census, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(replay_module, "HORIZON", WINDOW)
    monkeypatch.setattr(replay_module, "LOOKAHEAD", WINDOW)
    code, out, _ = run(capsys, "replay", "--json", str(long_trace))
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "same-invariant" and report["steps"] == EVENTS - 1
    # The events from the oldest choice point (at most HORIZON back) to LOOKAHEAD ahead, and the Init.
    assert census.most <= 2 * WINDOW + 3
    assert census.read == 2 * EVENTS


def _line(seq: int, action: str, actor: str, args: dict[str, Any], state: dict[str, Any]) -> str:
    return json.dumps({"v": 2, "run": "deep", "seq": seq, "actor": actor, "action": action, "args": args,
                       "state": state}) + "\n"


@pytest.fixture(scope="module")
def broken_deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100,000 lines: an Init, a controller epoch that goes back (a violation at line 3), clock ticks, and
    at line 100,000 a seq that is no number."""
    init = json.loads(_line(0, "Init", "env", {"brokers": [1, 2, 3]},
                            {"controller": -1, "controller_epoch": 0, "alive": {"1": True, "2": True, "3": True}}))
    lines = [json.dumps({**init, "full": True}) + "\n",
             _line(1, "Tick", "clock", {"now": 1}, {"controller_epoch": 5}),
             _line(2, "Tick", "clock", {"now": 2}, {"controller_epoch": 1})]
    lines += [_line(seq, "Tick", "clock", {"now": seq}, {}) for seq in range(3, 99_999)]
    lines.append(_line(99_999, "Tick", "clock", {"now": 99_999}, {}).replace('"seq": 99999', '"seq": "x"'))
    trace = tmp_path_factory.mktemp("deep") / "deep.jsonl"
    trace.write_text("".join(lines), encoding="utf-8")
    return trace


# Replay copies implementation objects, which compiled classes refuse: the compiled suite leaves it out.
@pytest.mark.parametrize("command", ["check-trace", "validate",
                                     pytest.param("replay", marks=pytest.mark.skipif(
                                         compiled(), reason="replay runs on the sources, not compiled modules"))])
def test_a_malformed_line_deep_in_the_trace_is_the_only_output(
        broken_deep: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The violation at line 3 is not printed: a trace with a format error is rejected whole, as when it
    # was loaded before being checked. validate's survey reports its progress on stderr when it takes a
    # while, as a loaded machine may make it: left out, the error is the only line whatever the machine.
    quiet = ["--progress", "none"] if command == "validate" else []
    code, out, err = run(capsys, command, str(broken_deep), *quiet)
    assert code == 2 and out == ""
    assert err.startswith(f"kcm: error: {broken_deep}:100000: seq: ") and err.count("\n") == 1
