"""Where long work shows its progress: what the review matrix and `kcm verify`'s stages ask of a reporter.

The command line's kcm.tools.progress.Reporter is one (bars on a terminal, timestamped lines in a log); the
work below the command line names only these protocols, which it satisfies structurally, so that no layer
under kcm.tools imports it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol


class Task(Protocol):
    """A unit of work with an optional count, updated as it goes (from any thread)."""

    def update(self, detail: str | None = None, completed: int | None = None) -> None: ...

    def advance(self, steps: int = 1, detail: str | None = None) -> None: ...


class Reporter(Protocol):
    def task(self, name: str, total: int | None = None) -> AbstractContextManager[Task]:
        """A task, shown while its context lasts: `with reporter.task("z3 proofs", 36) as task: ...`."""
        ...

    def line(self, text: str) -> None:
        """A line that stays, above whatever tasks are shown."""
        ...
