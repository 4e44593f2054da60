"""Progress (kcm.tools.progress): timestamped lines when stderr is not a terminal, nothing with `none`."""

from __future__ import annotations

import io
import re
import time

import pytest

from kcm.tools.progress import Reporter

STAMP = r"\d\d:\d\d:\d\d "


def test_auto_is_plain_off_a_terminal_and_none_is_silent() -> None:
    assert Reporter("auto", io.StringIO()).mode == "plain"
    silent = io.StringIO()
    with Reporter("none", silent) as reporter, reporter.task("tlc ci", 3) as task:
        task.advance(detail="x")
        reporter.line("verify: tlc started")
    assert silent.getvalue() == ""


def test_plain_lines_are_timestamped_and_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(float(t) for t in (0, 1, 2, 7, 8, 9))
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    with Reporter("plain", out) as reporter, reporter.task("z3 induction", 4) as task:
        task.advance(detail="OneLeaderPerEpoch: holds")  # at 1 s: within the interval, no line
        task.advance(detail="LeaderInIsr: holds")  # at 2 s: still within
        task.advance(detail="IsrSubsetOfReplicas: holds")  # at 7 s: a line
        task.advance(detail="StaleControllerFenced: holds")  # at 8 s: within again
    lines = out.getvalue().splitlines()
    assert all(re.match(STAMP, line) for line in lines)
    assert [line[9:] for line in lines] == [
        "z3 induction: 3/4, IsrSubsetOfReplicas: holds",
        "z3 induction: done in 9.0 s, 4/4, StaleControllerFenced: holds",
    ]


def test_a_short_task_is_quiet_and_a_long_one_says_when_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(float(t) for t in (0, 4, 10, 16))
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    with Reporter("plain", out) as reporter:
        with reporter.task("tlc kafka1211"):
            pass  # 4 s
        with reporter.task("spark session"):
            pass  # 6 s, without a report on the way
    assert [line[9:] for line in out.getvalue().splitlines()] == ["spark session: done in 6.0 s"]


def test_a_task_ended_by_an_error_says_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(float(t) for t in (0, 30))
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    with pytest.raises(RuntimeError), Reporter("plain", out) as reporter, reporter.task("tlc ci"):
        raise RuntimeError("boom")
    assert re.search(r"tlc ci: stopped in 30.0 s$", out.getvalue().splitlines()[-1])
