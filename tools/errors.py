"""What every command shares about failing: user errors are one line on stderr and exit code 2, never a
traceback (`UsageError`, and `Parser`, whose argument errors are usage errors); the exit codes."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final, NoReturn

# Every command: 0 all holds, 1 a violation (or a property that fails), 2 bad input or no decision, 3 input
# missing (a quarantine), 130 interrupted.
EXIT_OK: Final = 0
EXIT_VIOLATED: Final = 1
EXIT_USAGE: Final = 2
# A pipeline check whose input lacks records its ingest manifest promised (named on stderr).
EXIT_INCOMPLETE: Final = 3
# Stopped by SIGINT, SIGTERM or SIGHUP (128 + SIGINT, as a shell reports Ctrl-C).
EXIT_INTERRUPTED: Final = 130
# Standard output closed before the command ended (`kcm ... | head`): 128 + SIGPIPE, as a shell reports it.
EXIT_BROKEN_PIPE: Final = 141


class UsageError(Exception):
    """Bad input from the user: reported as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are `UsageError`s, reported like every other bad input."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def at_least(minimum: int, unit: str = "") -> Callable[[str], int]:
    """An argument type: a whole number of at least `minimum` (`--workers`, `--heap`), refused by the parser."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}{unit}, not {value}")
        return value

    return number


# An option that counts what a command runs (seeds, steps, examples, runs): 0 or more. A count of 0 runs nothing
# and is reported `unobserved`; a negative one is the user's error.
count: Final = at_least(0)


def non_empty(text: str) -> str:
    """An argument type: a name (a model's, say), which an empty string is not (it would read as no option)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text
