"""What every command shares about failing: user errors are one line on stderr and exit code 2, never a
traceback (`UsageError`, and `Parser`, whose argument errors are usage errors); the exit codes."""

from __future__ import annotations

import argparse
from typing import Final, NoReturn

# Every command: 0 all holds, 1 a violation (or a property that fails), 2 bad input or no decision.
EXIT_OK: Final = 0
EXIT_VIOLATED: Final = 1
EXIT_USAGE: Final = 2


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are `UsageError`s, reported like every other bad input."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")
