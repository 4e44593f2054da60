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
import subprocess
import sys
import time
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

from kcm.tools import interpreted

PACKAGE = "kcm.tools.bench"
# Wall and CPU clocks at the header, for the footer's share of a core this process actually got.
_clocks: list[float] = []


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
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print the cProfile top entries of the measured part (slows it down)",
    )
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


def revision() -> str:
    """The git commit of the code measured, and whether its tracked files in the measured folders differ
    from it (untracked files, which the benchmarks do not import, are not counted)."""
    root = Path(__file__).resolve().parents[2]
    git = ["git", "-C", str(root)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            [
                *git,
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                "spec",
                "impl",
                "conformance",
                "tools",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head} + uncommitted changes" if status else head


def load_note() -> str:
    """The 1-minute load average, for the record. It lags by a minute or more, so the warning about other
    work on the machine comes from the share of a core this process got (`cpu_share`), not from it."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return "load average unknown"
    return f"load average {load:.2f} on {usable_cpus()} CPUs"


def machine() -> dict[str, str]:
    return {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "revision": revision(),
        "nproc": str(usable_cpus()),
        "cpu": cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(terse=True),
        "build": "compiled (mypyc)" if interpreted.compiled() else "interpreted",
    }


def print_header(out: Console, title: str, command: str) -> None:
    info = machine()
    out.rule(f"[bold]{title}")
    out.print(f"command : {command}")
    out.print(f"date    : {info['date']}")
    out.print(f"machine : nproc={info['nproc']}, CPU {info['cpu']}, {info['platform']}")
    out.print(f"python  : {info['python']} (one process, one core), kcm {info['build']}")
    out.print(f"code    : {info['revision']}")
    out.print(f"load    : {load_note()} (at the start)")
    _clocks[:] = [time.perf_counter(), _cpu_seconds()]


def _cpu_seconds() -> float:
    """CPU time of this process and of its children: TLC runs in a JVM of its own, and a benchmark of it
    that counted only Python's time would report an idle core. Children it has waited for are in
    `os.times`; those still running (PySpark's JVM lives as long as the driver) are read from /proc, so a
    child is counted once whether or not it ended in between."""
    times = os.times()
    return (times.user + times.system + times.children_user + times.children_system + running_children_cpu()
            + _grandchildren_cpu[0])


# CPU seconds of grandchildren the OS never reports here: a worker process's JVM, orphaned when the
# worker exits, is reaped by init.
_grandchildren_cpu: list[float] = [0.0]


def add_grandchild_cpu(seconds: float) -> None:
    _grandchildren_cpu[0] += seconds


def running_children_cpu() -> float:
    me = str(os.getpid())
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        # After the command name in parentheses: state, ppid, ..., utime and stime (fields 14 and 15).
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 12 and fields[1] == me:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def cpu_share() -> float:
    """CPU time over wall time since the header: about 1.0 when the benchmark (a single-threaded process,
    or one JVM child at a time, whose collector and compiler threads add some) had a core to itself, less
    when other work took the CPU from it (then every absolute figure is too low)."""
    if not _clocks:
        return float("nan")
    wall = time.perf_counter() - _clocks[0]
    return (_cpu_seconds() - _clocks[1]) / wall if wall > 0 else float("nan")


def print_footer(out: Console) -> None:
    share = cpu_share()
    warning = (
        "" if share >= 0.9 else " - other work took the CPU: absolute figures are low, compare the ratios"
    )
    out.print(f"cpu     : this benchmark got {share:.0%} of a core over its run{warning}")
    out.print(f"load    : {load_note()} (at the end, this benchmark's own ~1 included)")


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


def current_rss_mib() -> float:
    """The process's resident set size now (Linux /proc; NaN elsewhere)."""
    try:
        with open("/proc/self/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return float("nan")


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
    value = numerator / denominator
    # Two decimals where they matter; a ratio in the thousands reads better whole.
    return f"{value:,.0f}x" if value >= 100 else f"{value:.2f}x"


def table(title: str, columns: Sequence[str], text_columns: int = 1) -> Table:
    """A table whose first `text_columns` columns are left-aligned text and the rest right-aligned figures."""
    result = Table(title=title, title_justify="left", show_lines=False)
    for index, column in enumerate(columns):
        result.add_column(column, justify="left" if index < text_columns else "right")
    return result


# -- the summary --------------------------------------------------------------------------------------------


def write_summary(path: str | None, figures: Sequence[Figure], extra: dict[str, Any] | None = None) -> None:
    if not path:
        return
    payload = {
        "figures": [asdict(f) for f in figures],
        "machine": machine(),
        "cpu_share": cpu_share(),
        **(extra or {}),
    }
    Path(path).write_text(json.dumps(payload, indent=1), encoding="utf-8")


def read_summary(path: str | Path) -> tuple[list[Figure], float]:
    """The figures of a benchmark's summary file and the share of a core it got."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [Figure(**item) for item in data["figures"]], float(data.get("cpu_share", float("nan")))
