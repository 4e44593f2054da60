"""`--junit FILE` and GitHub Actions output, shared by verify, review, check, prove and diff: each command says
what its test cases, its markdown summary and its annotations are; this module writes them where CI reads
them (kcm.conformance.ci_results, docs/ci.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from kcm.conformance.ci_results import Case, append_summary, on_github, write_junit
from kcm.spec.atomic_output import check_writable


def add_junit_option(parser: argparse.ArgumentParser, case: str) -> None:
    parser.add_argument("--junit", metavar="FILE", default=None,
                        help=f"also write a JUnit XML file, one test case per {case}")


def check_junit(args: argparse.Namespace) -> None:
    """A JUnit file kcm cannot write is said before the work, not after it."""
    if args.junit:
        check_writable(args.junit)


def publish(args: argparse.Namespace, name: str, cases: list[Case], summary: str,
            annotations: Iterable[str] = ()) -> None:
    """The JUnit file when asked for; on GitHub Actions the step summary and the annotations (on standard
    error under --json, whose standard output is the document alone; GitHub reads both streams)."""
    if getattr(args, "junit", None):
        write_junit(Path(args.junit), name, cases)
    if on_github():
        append_summary(summary)
        stream = sys.stderr if getattr(args, "json", False) else sys.stdout
        for line in annotations:
            print(line, file=stream)
