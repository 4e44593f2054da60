"""The scenario file format: commands, each with the output it must produce, in the style of etcd-raft's
testdata files. This module knows the format only; what the commands do is the handler's
business (`environment.Environment` for the simulated cluster).

File format
===========

A file is a sequence of *cases*. Lines outside a case that are blank or start with ``#`` are comments
and are kept verbatim when the file is rewritten. A case is::

    <command> [arg ...]
    ----
    <expected output line>
    <expected output line>
    <blank line, or the end of the file>

* The command is one line: a command name and whitespace-separated arguments. An argument is either a
  bare word (``t0``, ``2``) or ``key=value`` (``broker=1``, ``0=1,2,3``).
* The ``----`` separator line is mandatory, also for a command that prints nothing; such a case is the
  command, ``----`` and the blank line that ends it.
* The expected output is every line after ``----`` up to the first blank line. Output therefore never
  contains blank lines; a handler that returns one is an error. Trailing whitespace of output lines is
  not significant (it is stripped from both sides before comparing).

Running
=======

``run_file(path, handler)`` calls ``handler(case)`` for every case in order; the handler returns the
case's actual output as a string. Normally the actual output must equal the expected output; the first
case that differs raises ``Mismatch`` (an ``AssertionError``) naming the file and the line of the
command, with a unified diff from the expected to the actual output.

With the environment variable ``KCM_REWRITE=1`` (or ``rewrite=True``) nothing is compared: every case is
run and the file is written again with each expected output replaced by the actual one, comments and
commands untouched. Authors use this to generate expectations, then read the diff before committing.
``fill`` does the same for a file held in memory, and ``script`` writes a file of commands with empty
expectations (what a search that found a failing history writes before filling it).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kcm.spec.atomic_output import write_output

SEPARATOR = "----"
REWRITE_ENV = "KCM_REWRITE"


class ScenarioError(Exception):
    """The file is malformed, or a handler failed on a case (with the file and line in the message)."""


class Mismatch(AssertionError):
    """A case's actual output differs from its expected output."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument: `key=value` has both, a bare word has only a key (and an empty value)."""

    key: str
    value: str = ""

    @property
    def bare(self) -> bool:
        return not self.value and "=" not in self.key

    def __str__(self) -> str:
        return self.key if self.bare else f"{self.key}={self.value}"


@dataclass(slots=True)
class Case:
    path: Path
    line: int  # 1-based line of the command
    command: str  # the whole command line
    name: str
    args: list[Arg]
    expected: str
    preamble: list[str] = field(default_factory=list)  # comment/blank lines before the command

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def has(self, key: str) -> bool:
        return any(a.key == key for a in self.args)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of `key=value`, or `default` when absent."""
        for arg in self.args:
            if arg.key == key and not arg.bare:
                return arg.value
        return default

    def bare_words(self) -> list[str]:
        return [a.key for a in self.args if a.bare]


@dataclass(slots=True)
class ScenarioFile:
    path: Path
    cases: list[Case]
    trailer: list[str]  # comment/blank lines after the last case


def parse_command(line: str) -> tuple[str, list[Arg]]:
    words = line.split()
    args: list[Arg] = []
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if sep and not key:
            raise ValueError(f"argument {word!r} has an empty key")
        args.append(Arg(key, value) if sep else Arg(word))
    return words[0], args


def _is_comment(line: str) -> bool:
    return not line.strip() or line.lstrip().startswith("#")


def parse(path: Path, text: str | None = None) -> ScenarioFile:
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    cases: list[Case] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_comment(line):
            pending.append(line)
            i += 1
            continue
        command_line = i + 1
        if i + 1 >= len(lines) or lines[i + 1].rstrip() != SEPARATOR:
            raise ScenarioError(f"{path}:{command_line}: expected {SEPARATOR!r} after the command {line!r}")
        i += 2
        output: list[str] = []
        while i < len(lines) and lines[i].strip():
            output.append(lines[i])
            i += 1
        i += 1  # the blank line that ends the case (or the end of the file)
        try:
            name, args = parse_command(line)
        except ValueError as err:
            raise ScenarioError(f"{path}:{command_line}: {err}") from err
        cases.append(Case(path, command_line, line.strip(), name, args, "\n".join(output), pending))
        pending = []
    return ScenarioFile(path, cases, pending)


def _normalize(output: str) -> str:
    return "\n".join(line.rstrip() for line in output.strip("\n").splitlines())


def render(scenario: ScenarioFile, outputs: list[str]) -> str:
    """The file's text with the given outputs, one per case, as its expectations."""
    lines: list[str] = []
    for case, output in zip(scenario.cases, outputs, strict=True):
        lines.extend(case.preamble)
        lines.append(case.command)
        lines.append(SEPARATOR)
        body = _normalize(output)
        if body:
            lines.extend(body.split("\n"))
        lines.append("")
    lines.extend(scenario.trailer)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n"


def run_case(case: Case, handler: Callable[[Case], str]) -> str:
    """The case's actual output, normalized as expectations are; a failing handler names the case."""
    try:
        output = handler(case)
    except (ScenarioError, Mismatch):
        raise
    except Exception as err:
        raise ScenarioError(f"{case.location}: {case.command!r} failed: {type(err).__name__}: {err}") from err
    actual = _normalize(output)
    if actual and any(not line.strip() for line in actual.split("\n")):
        raise ScenarioError(f"{case.location}: {case.command!r} printed a blank line, which the format cannot hold")
    return actual


def diff(case: Case, actual: str) -> str:
    expected = _normalize(case.expected)
    lines = difflib.unified_diff(
        expected.split("\n") if expected else [],
        actual.split("\n") if actual else [],
        fromfile=f"{case.location} expected",
        tofile="actual",
        lineterm="",
    )
    return "\n".join(lines)


def rewrite_requested() -> bool:
    return os.environ.get(REWRITE_ENV, "") not in ("", "0")


def fill(scenario: ScenarioFile, handler: Callable[[Case], str]) -> str:
    """The file's text with every case's actual output as its expectation."""
    return render(scenario, [run_case(case, handler) for case in scenario.cases])


def script(lines: Iterable[str]) -> str:
    """A scenario file of the given command lines with empty expectations; a comment line stays before the
    command that follows it."""
    where = Path("script")
    cases: list[Case] = []
    comments: list[str] = []
    for line in lines:
        if _is_comment(line):
            comments.append(line)
            continue
        name, args = parse_command(line)
        cases.append(Case(where, len(cases) + 1, line.strip(), name, args, "", comments))
        comments = []
    return render(ScenarioFile(where, cases, comments), [""] * len(cases))


# The checkout's scenario files (absent from an installed package without its tests).
CHECKOUT_SCENARIOS: Final = Path(__file__).resolve().parents[2] / "tests" / "scenarios"


def scenario_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.txt"))


def run_file(path: Path, handler: Callable[[Case], str], *, rewrite: bool | None = None) -> None:
    """Runs every case of the file; compares with the expectations, or rewrites them (see the module doc)."""
    scenario = parse(path)
    if rewrite is None:
        rewrite = rewrite_requested()
    if rewrite:
        text = fill(scenario, handler)
        if text != path.read_text(encoding="utf-8"):
            write_output(path, text)
        return
    for case in scenario.cases:
        actual = run_case(case, handler)
        if actual != _normalize(case.expected):
            raise Mismatch(f"{case.location}: output of {case.command!r} differs from the expectation\n"
                           f"{diff(case, actual)}")
