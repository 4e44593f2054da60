"""Progress of long work, shown on stderr: live bars on a terminal, timestamped lines in a log or CI.

`--progress auto` (the default) picks bars when stderr is a terminal and plain lines otherwise; `rich` and
`plain` force one, `none` shows nothing. A plain line reads `13:02:07 tlc ci: 41,230 distinct states, depth 12,
3,410 states/s`. A task prints one at most every PLAIN_INTERVAL seconds while it reports, and one when it ends
if it took that long: a CI log shows a sign of life that often during long work, and a short task stays quiet
(a command's output is not buried under the progress of its seconds of work).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from types import TracebackType
from typing import Final, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

MODES: Final = ("auto", "rich", "plain", "none")
PLAIN_INTERVAL: Final = 5.0


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", choices=MODES, default="auto",
                        help="progress on stderr: bars (rich), timestamped lines (plain), none; "
                             "auto: bars on a terminal, lines otherwise")


class Reporter:
    """One per command run; its tasks may be updated from several threads."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.mode = mode if mode != "auto" else ("rich" if self.stream.isatty() else "plain")
        self._lock = threading.Lock()
        self._bars: Progress | None = None
        if self.mode == "rich":
            self._bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                                  console=Console(file=self.stream), transient=True)

    def __enter__(self) -> Reporter:
        if self._bars is not None:
            self._bars.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._bars is not None:
            self._bars.stop()

    def task(self, name: str, total: int | None = None) -> Task:
        return Task(self, name, total)

    def line(self, text: str) -> None:
        """A line that stays: printed above the bars, or timestamped in plain mode."""
        if self.mode == "none":
            return
        if self._bars is not None:
            self._bars.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        with self._lock:
            self.stream.write(f"{time.strftime('%H:%M:%S')} {text}\n")
            self.stream.flush()

    def _add(self, name: str, total: int | None) -> TaskID | None:
        if self._bars is None:
            return None
        return self._bars.add_task(name, total=total, detail="")

    def _update(self, task: TaskID | None, completed: int | None, detail: str) -> None:
        if self._bars is not None and task is not None:
            self._bars.update(task, completed=completed, detail=detail)

    def _remove(self, task: TaskID | None) -> None:
        if self._bars is not None and task is not None:
            self._bars.remove_task(task)


class Task:
    """A unit of work with an optional count: `with reporter.task("z3 proofs", total=36) as t: t.advance()`."""

    def __init__(self, reporter: Reporter, name: str, total: int | None) -> None:
        self.reporter = reporter
        self.name = name
        self.total = total
        self.completed = 0
        self.detail = ""
        self._started = self._last_line = 0.0
        self._id: TaskID | None = None

    def __enter__(self) -> Task:
        self._started = self._last_line = time.monotonic()
        self._id = self.reporter._add(self.name, self.total)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.reporter._remove(self._id)
        took = time.monotonic() - self._started
        # An interrupt ends in the command line's one line, `kcm: interrupted`, and nothing after it.
        if isinstance(error, KeyboardInterrupt):
            return
        if self.reporter.mode == "plain" and (took >= PLAIN_INTERVAL or self._last_line > self._started):
            outcome = "stopped" if error is not None else "done"
            state = self._state()
            self.reporter.line(f"{self.name}: {outcome} in {took:.1f} s" + (f",{state}" if state else ""))

    def update(self, detail: str | None = None, completed: int | None = None) -> None:
        if detail is not None:
            self.detail = detail
        if completed is not None:
            self.completed = completed
        self.reporter._update(self._id, self.completed, self.detail)
        now = time.monotonic()
        if self.reporter.mode == "plain" and now - self._last_line >= PLAIN_INTERVAL:
            self._last_line = now
            self.reporter.line(f"{self.name}:{self._state()}")

    def advance(self, steps: int = 1, detail: str | None = None) -> None:
        self.update(detail, self.completed + steps)

    def _state(self) -> str:
        count = f" {self.completed:,}/{self.total:,}" if self.total is not None else ""
        detail = f" {self.detail}" if self.detail else ""
        return (count + ("," if count and detail else "") + detail) if count or detail else ""
