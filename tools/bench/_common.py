"""What every benchmark shares: the machine description, the command line that reproduces a run,
progress bars, timing statistics, peak memory, and the headline figures `__main__` collects.

Rule of the house: a benchmark never states a timing on its own. Each one measures a baseline in the
same process and run, and prints its figures as ratios against it as well as in absolute units.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import json
import os
import platform
import pstats
import resource
import shlex
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

PACKAGE = "kcm.tools.bench"


@dataclass(frozen=True, slots=True)
class Figure:
    """One headline figure of a benchmark, as the summary table of `python -m kcm.tools.bench` shows it."""

    benchmark: str
    name: str
    value: float
    unit: str
    target: str = ""
    met: bool | None = None
    versus_baseline: str = ""


def console() -> Console:
    # Wide enough for the tables when the output goes to a file or a pipe.
    return Console(width=None if sys.stdout.isatty() else 120, highlight=False)


def base_parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {PACKAGE}.{name}", description=description)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--profile", action="store_true",
                        help="also print the cProfile top entries of the measured part (slows it down)")
    parser.add_argument("--summary", metavar="PATH", help=argparse.SUPPRESS)
    return parser


def command_line(name: str, argv: Sequence[str]) -> str:
    """The exact command that reproduces this run (the internal --summary option left out)."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--summary":
            skip = True
            continue
        if arg.startswith("--summary="):
            continue
        shown.append(arg)
    return shlex.join(["python", "-m", f"{PACKAGE}.{name}", *shown])


# -- the machine ---------------------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cpus() -> int:
    """What `nproc` prints: the CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def machine() -> dict[str, str]:
    return {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": str(usable_cpus()),
        "cpu": cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(terse=True),
    }


def print_header(out: Console, title: str, command: str) -> None:
    info = machine()
    out.rule(f"[bold]{title}")
    out.print(f"command : {command}")
    out.print(f"date    : {info['date']}")
    out.print(f"machine : nproc={info['nproc']}, CPU {info['cpu']}, {info['platform']}")
    out.print(f"python  : {info['python']} (one process, one core)")


# -- measuring -----------------------------------------------------------------------------------------------


def progress(out: Console) -> Progress:
    """A progress bar that disappears when done, so that only the figures stay in the output."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=out,
        transient=True,
        disable=not out.is_terminal,
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def peak_rss_mib() -> float:
    """The process's peak resident set size so far (ru_maxrss is in KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def profile_top(profiler: cProfile.Profile, limit: int = 15) -> str:
    """The top entries by own time and by cumulative time, paths shortened to the package."""
    text = io.StringIO()
    for order in ("tottime", "cumulative"):
        stats = pstats.Stats(profiler, stream=text)
        stats.strip_dirs().sort_stats(order).print_stats(limit)
    return text.getvalue()


def ratio(numerator: float, denominator: float) -> str:
    if denominator <= 0 or numerator != numerator or denominator != denominator:
        return "n/a"
    return f"{numerator / denominator:.2f}x"


def table(title: str, columns: Sequence[str]) -> Table:
    result = Table(title=title, title_justify="left", show_lines=False)
    for index, column in enumerate(columns):
        result.add_column(column, justify="left" if index == 0 else "right")
    return result


# -- the summary --------------------------------------------------------------------------------------------


def write_summary(path: str | None, figures: Sequence[Figure], extra: dict[str, Any] | None = None) -> None:
    if not path:
        return
    payload = {"figures": [asdict(f) for f in figures], "machine": machine(), **(extra or {})}
    Path(path).write_text(json.dumps(payload, indent=1), encoding="utf-8")


def read_summary(path: str | Path) -> list[Figure]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [Figure(**item) for item in data["figures"]]
