"""Runs every benchmark, each in its own process (so that peak memory and the garbage collector's state
are its own), then prints a summary table of their headline figures.

    python -m kcm.tools.bench            # the default sizes, a few minutes in all
    python -m kcm.tools.bench --quick    # smaller sizes, under a minute
    python -m kcm.tools.bench --only checker
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import JustifyMethod
from rich.table import Table

from kcm.tools.bench._common import PACKAGE, Figure, console, load_note, machine, read_summary
from kcm.tools.bench.run import command

BENCHMARKS = ("controller", "simulator", "checker", "z3", "tlc", "instances", "swarm", "review", "replay", "pipeline",
              "ingest", "conform")


def _value(figure: Figure) -> str:
    if figure.unit == "s":
        return f"{figure.value * 1000:,.1f} ms" if figure.value < 1 else f"{figure.value:,.1f} s"
    if figure.unit == "x":
        return f"{figure.value:.2f}x"
    if figure.unit == "events/s":
        return f"{figure.value:,.0f} events/s"
    return f"{figure.value:,.0f} {figure.unit}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PACKAGE}", description="Run every kcm benchmark.")
    parser.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    parser.add_argument(
        "--only", choices=BENCHMARKS, action="append", help="run only this benchmark (repeatable)"
    )
    args = parser.parse_args(argv)
    out = console()
    info = machine()
    invocation = shlex.join(["python", "-m", PACKAGE, *(sys.argv[1:] if argv is None else argv)])
    out.rule("[bold]kcm benchmarks")
    out.print(f"command : {invocation}")
    out.print(f"date    : {info['date']}")
    out.print(f"machine : nproc={info['nproc']}, CPU {info['cpu']}, {info['platform']}; {info['python']}")
    out.print(f"code    : {info['revision']}")
    out.print(f"load    : {load_note()} (at the start)")

    figures: list[Figure] = []
    failed: list[str] = []
    durations: dict[str, float] = {}
    shares: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kcm-bench-") as tmp:
        for name in args.only or BENCHMARKS:
            summary = Path(tmp) / f"{name}.json"
            cmd = command(name, ["--summary", str(summary), *(["--quick"] if args.quick else [])])
            out.print()
            sys.stdout.flush()
            start = time.perf_counter()
            code = subprocess.run(cmd, check=False).returncode
            durations[name] = time.perf_counter() - start
            if code != 0 or not summary.exists():
                failed.append(f"{name} (exit code {code})")
                continue
            found, shares[name] = read_summary(summary)
            figures.extend(found)

    out.print()
    result = Table(
        title=f"summary ({info['date']}; nproc={info['nproc']}, {info['cpu']}, {info['python']})",
        title_justify="left",
    )
    columns: list[tuple[str, JustifyMethod]] = [
        ("benchmark", "left"),
        ("figure", "left"),
        ("measured", "right"),
        ("target", "right"),
        ("met", "left"),
        ("versus the baseline of the same run", "left"),
    ]
    for column, justify in columns:
        result.add_column(column, justify=justify)
    for figure in figures:
        met = "" if figure.met is None else ("yes" if figure.met else "NO")
        result.add_row(
            figure.benchmark, figure.name, _value(figure), figure.target, met, figure.versus_baseline
        )
    out.print(result)
    out.print(f"load at the end: {load_note()} (the benchmarks' own ~1 included)")
    busy = [name for name, share in shares.items() if share < 0.9]
    out.print(
        "share of a core each benchmark got: "
        + ", ".join(f"{name} {share:.0%}" for name, share in shares.items())
        + (f" - {', '.join(busy)} shared the CPU with other work: compare the ratios" if busy else "")
    )
    out.print("wall time: " + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in durations.items()))
    out.print(
        "each figure's command: python -m kcm.tools.bench.<benchmark>" + (" --quick" if args.quick else "")
    )
    if failed:
        out.print(f"[bold red]failed:[/] {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
