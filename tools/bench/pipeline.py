"""Spark pipeline benchmark: `kcm pipeline check` on `local[1]` and `local[2]` against the same streaming check run
in one process without Spark on the same Parquet files, and against `kcm check-trace`, measured in the same run.

Run it with `python -m kcm.tools.bench.pipeline` (`--quick` for a small corpus, `--events N` to choose).

The corpus: `--base-runs` simulator runs of `--steps` steps (default knobs and cluster), made by
`kcm pipeline generate`, then linked under new run ids (`<run>-c<copy>`, hard links to the same files) until
it holds at least `--events` events. Copies are checked exactly like distinct runs; they only save the hours
the simulator would take to make twenty million fresh events. Each measurement runs in a fresh process held
to as many CPUs as it is given (CPU affinity, inherited by Spark's JVM and Python workers):
  one process   `check_run` over every run of the corpus, in a loop, on 1 CPU: the baseline;
  local[1]      `jobs.check` (what `kcm pipeline check` runs) on 1 CPU, its session started beforehand;
  local[2]      the same on 2 CPUs;
  shuffled      the same on 2 CPUs, the corpus rewritten by Spark as one table whose files mix runs: one
                shuffle by run and a sort by seq before the same stream check (mapInArrow);
  start-up      the session's start and a first one-task job, apart from the check;
  memory        the peak of the JVM's and every Python worker's resident memory together, sampled;
  check-trace   `kcm check-trace` as a user runs it, one process per base run's JSON Lines file, and its work
                alone (reading and checking each file, as `cmd_check_trace` does, in one process: no
                interpreter start per file), against `kcm pipeline check --master local[2]` end to end (JVM
                start included) on a corpus of `--crossover-events` events (default 1,000,000): who answers
                first;
  floors        on the base runs, in one process: reading the files' columns into Python, that plus
                decoding `args` and `state` with orjson, the whole stream check, and the same with the
                garbage collector paused; and `args` decoding alone (what typed `args` columns would save).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from kcm.conformance.pipeline import jobs as pl
from kcm.conformance.pipeline.session import spark_session
from kcm.conformance.pipeline.stream import COLUMNS, check_run
from kcm.spec.trace.format import TraceWriter
from kcm.spec.trace.parquet import ARROW_SCHEMA, read_parquet
from kcm.spec.vocabulary import Knobs
from kcm.tools.bench._common import (
    Figure,
    add_grandchild_cpu,
    base_parser,
    command_line,
    console,
    print_footer,
    print_header,
    ratio,
    running_children_cpu,
    table,
    write_summary,
)

NAME = "pipeline"
TARGET_VS_ONE_PROCESS = 0.7
TARGET_SCALING = 1.8
TARGET_PER_CORE = 100_000  # the stretch goal
TARGET_MEMORY_MIB = 4096
ONE_PROCESS = "one process"
# What is measured, on how many CPUs, on which copy of the corpus.
KINDS = ((ONE_PROCESS, 1, "corpus"), ("local[1]", 1, "corpus"), ("local[2]", 2, "corpus"),
         ("shuffled, local[2]", 2, "table"))


class Measure(NamedTuple):
    seconds: float
    events: int
    startup: float  # seconds to a first job, for the Spark measurements
    peak_mib: float  # JVM and Python workers together, for the Spark measurements
    jvm_mib: float  # the JVM's peak alone
    workers_mib: float  # the Python workers' peak, all of them together
    child_cpu: float  # CPU seconds of the JVM and its workers, reported to the footer


# -- one measurement, in a process of its own ------------------------------------------------------------------


def _measured(kind: str, cores: int, corpus: str, out: str) -> Measure:
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        measure = pool.submit(_confined, kind, cores, corpus, out).result()
    add_grandchild_cpu(measure.child_cpu)
    return measure


def _confined(kind: str, cores: int, corpus: str, out: str) -> Measure:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    if kind == ONE_PROCESS:
        started = time.perf_counter()
        events = _stream_all(Path(corpus))
        return Measure(time.perf_counter() - started, events, 0.0, 0.0, 0.0, 0.0, 0.0)
    started = time.perf_counter()
    spark = spark_session(f"local[{cores}]", app="kcm-bench-check")
    try:
        spark.sparkContext.parallelize([0], 1).count()
        startup = time.perf_counter() - started
        with _MemorySampler() as memory:
            started = time.perf_counter()
            result = pl.check(spark, Path(corpus), Path(out))
            seconds = time.perf_counter() - started
        return Measure(seconds, result.counts.checked + result.counts.synthesized, startup, memory.peak_mib,
                       memory.jvm_mib, memory.workers_mib, running_children_cpu())
    finally:
        spark.stop()


def _stream_all(corpus: Path) -> int:
    counts = pl.Counts()
    events = 0
    for run in pl.list_input(corpus, counts, []).runs:
        result = check_run(run.run, run.files)
        events += result.checked + result.synthesized
    return events


class _MemorySampler:
    """The peak, over the check, of the resident memory of this process's descendants (the JVM and the
    Python workers it forks) taken together."""

    def __init__(self) -> None:
        self.peak_mib = self.jvm_mib = self.workers_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            jvm = workers = 0.0
            for pid in _descendants(os.getpid()):
                if b"java" in _command(pid):
                    jvm += _rss_mib(pid)
                else:
                    workers += _rss_mib(pid)
            self.jvm_mib, self.workers_mib = max(self.jvm_mib, jvm), max(self.workers_mib, workers)
            self.peak_mib = max(self.peak_mib, jvm + workers)


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            parents[int(name)] = int(stat.rsplit(")", 1)[-1].split()[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# -- the corpus ------------------------------------------------------------------------------------------------


def _link_copies(base: Path, corpus: Path, copies: int) -> None:
    """`copies` copies of every base run under new run ids, as hard links to the base's files."""
    for run in sorted(p for p in base.iterdir() if p.name.startswith("run=")):
        for copy in range(copies):
            target = corpus / f"{run.name}-c{copy}"
            target.mkdir(parents=True)
            for part in run.iterdir():
                os.link(part, target / part.name)


def _as_one_table(corpus: Path, out: Path) -> None:
    """The corpus as another tool would write it: one table, a run column, runs mixed across its files."""
    spark = spark_session("local[2]", app="kcm-bench-table")
    try:
        frame = spark.read.parquet(str(corpus))
        frame.select(*ARROW_SCHEMA.names).repartition(8).write.parquet(str(out))
    finally:
        spark.stop()


def _jsonl(base: Path, out: Path) -> list[Path]:
    runs: dict[str, list[Any]] = {}
    for event in read_parquet(base):
        runs.setdefault(event["run"], []).append(event)
    paths = []
    for run, events in sorted(runs.items()):
        paths.append(out / f"{run}.jsonl")
        with TraceWriter(paths[-1]) as writer:
            for event in events:
                writer.write(event)
    return paths


# -- floors, in this process, on the base runs --------------------------------------------------------------------


def _read_only(files: list[str]) -> int:
    rows = 0
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(columns=list(COLUMNS)):
            for _ in zip(*(batch.column(name).to_pylist() for name in COLUMNS), strict=True):
                rows += 1
    return rows


def _read_and_decode(files: list[str], state: bool = True) -> int:
    rows = 0
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(columns=list(COLUMNS)):
            columns = {name: batch.column(name).to_pylist() for name in ("args", "state")}
            for args, delta in zip(columns["args"], columns["state"], strict=True):
                orjson.loads(args)
                if state and delta is not None:
                    orjson.loads(delta)
                rows += 1
    return rows


def _check_paused(files: list[str]) -> int:
    gc.disable()
    try:
        result = check_run("floor", files)
    finally:
        gc.enable()
    return result.checked


def _floors(base: Path) -> dict[str, float]:
    """Microseconds per event of each floor, on 1 CPU (the best of three passes)."""
    runs = pl.list_input(base, pl.Counts(), []).runs
    work: dict[str, Callable[[list[str]], int]] = {
        "read the columns into Python": _read_only,
        "read and decode args and state (orjson)": _read_and_decode,
        "decode args alone (what typed args columns save)": lambda files: _read_and_decode(files, state=False),
        "the stream check (check_run)": lambda files: check_run("floor", files).checked,
        "the stream check, garbage collector paused": _check_paused,
    }
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(affinity)[:1])
    try:
        floors: dict[str, float] = {}
        for name, step in work.items():
            best = float("inf")
            for _ in range(3):
                started = time.process_time()
                events = sum(step(run.files) for run in runs)
                best = min(best, (time.process_time() - started) / events * 1e6)
            floors[name] = best
        read_only = floors.pop("read the columns into Python")
        decode = floors["decode args alone (what typed args columns save)"]
        floors["decode args alone (what typed args columns save)"] = decode - read_only
        return {"read the columns into Python": read_only, **floors}
    finally:
        os.sched_setaffinity(0, affinity)


# -- check-trace against the pipeline, end to end --------------------------------------------------------------------


def _check_trace_seconds(traces: list[Path]) -> float:
    started = time.perf_counter()
    for trace in traces:
        subprocess.run([sys.executable, "-m", "kcm.tools.cli", "check-trace", str(trace)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def _check_trace_work(traces: list[str]) -> float:
    """What `kcm check-trace` does per file, every file in this one process: its floor, without start-ups."""
    from kcm.conformance.check.invariants import InvariantChecker
    from kcm.spec.trace.format import load_trace

    started = time.perf_counter()
    for trace in traces:
        InvariantChecker().check_all(load_trace(trace))
    return time.perf_counter() - started


def _pipeline_seconds(corpus: Path, out: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kcm.tools.cli", "pipeline", "check", "--master", "local[2]", "--in",
                    str(corpus), "--out", str(out), "--validate-sample", "0"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__ or "")
    parser.add_argument("--events", type=int, default=None, help="corpus size (default 20,000,000; --quick 200,000)")
    parser.add_argument("--base-runs", type=int, default=None)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--crossover-events", type=int, default=None,
                        help="corpus of the check-trace comparison (default 1,000,000; --quick 100,000)")
    args = parser.parse_args(argv)
    target = args.events or (200_000 if args.quick else 20_000_000)
    crossover = args.crossover_events or (100_000 if args.quick else 1_000_000)
    base_runs = args.base_runs or (8 if args.quick else 40)
    steps = 1000 if args.quick else args.steps
    out = console()
    print_header(out, "Spark pipeline: the check stage", command_line(NAME, sys.argv[1:] if argv is None else argv))
    with tempfile.TemporaryDirectory(prefix="kcm-bench-pipeline-") as tmp:
        root = Path(tmp)
        spark = spark_session("local[2]", app="kcm-bench-generate")
        try:
            counts = pl.generate(spark, base_runs, steps, Knobs(), root / "base")
        finally:
            spark.stop()
        base = root / "base" / pl.EVENTS
        copies = max(1, -(-target // counts.read))
        _link_copies(base, root / "corpus" / pl.EVENTS, copies)
        small = max(1, -(-crossover // counts.read))
        _link_copies(base, root / "small" / pl.EVENTS, small)
        out.print(f"corpus  : {base_runs} simulator runs of {steps} steps ({counts.read:,} events), "
                  f"{copies} copies: {counts.read * copies:,} events in {base_runs * copies:,} runs")
        floors = _floors(base)
        _as_one_table(root / "corpus" / pl.EVENTS, root / "table" / pl.EVENTS)
        results = {kind: _measured(kind, cores, str(root / source), str(root / f"out-{kind}"))
                   for kind, cores, source in KINDS}
        for kind, m in results.items():
            out.print(f"measured: {kind}: {m.events:,} events in {m.seconds:.1f} s")
        traces = _jsonl(base, root)
        check_trace = _check_trace_seconds(traces) * small
        with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
            check_trace_work = pool.submit(_check_trace_work, [str(t) for t in traces]).result() * small
        pipeline = _pipeline_seconds(root / "small", root / "out-small")
    one, local1, local2 = results[ONE_PROCESS], results["local[1]"], results["local[2]"]
    rate0, rate1, rate2 = (m.events / m.seconds for m in (one, local1, local2))
    rows = table("the check stage", ("what", "CPUs", "events", "seconds", "events/s", "vs one process"))
    for kind, cores, _ in KINDS:
        m = results[kind]
        rows.add_row(kind, str(cores), f"{m.events:,}", f"{m.seconds:.1f}", f"{m.events / m.seconds:,.0f}",
                     ratio(m.events / m.seconds, rate0))
    out.print(rows)
    floor_rows = table("floors on 1 CPU, base runs, in one process", ("work", "us/event", "events/s"))
    for name, micros in floors.items():
        floor_rows.add_row(name, f"{micros:.2f}", f"{1e6 / micros:,.0f}" if micros > 0 else "n/a")
    out.print(floor_rows)
    small_events = counts.read * small
    out.print(f"{small_events:,} events: kcm check-trace, one process per run, {check_trace:.1f} s, its work alone in "
              f"one process {check_trace_work:.1f} s (measured on the {base_runs} base runs, times {small}); "
              f"kcm pipeline check --master local[2], JVM start included, {pipeline:.1f} s "
              f"({ratio(check_trace, pipeline)} and {ratio(check_trace_work, pipeline)} faster)")
    peak = max(m.peak_mib for m in results.values())
    jvm, workers = max(m.jvm_mib for m in results.values()), max(m.workers_mib for m in results.values())
    out.print(f"memory  : JVM and Python workers together at most {peak:,.0f} MiB (JVM alone {jvm:,.0f}, workers "
              f"{workers:,.0f}); start-up of a session and a first "
              f"job {local1.startup:.1f} s (local[1]), {local2.startup:.1f} s (local[2]); executors for 1,000,000 "
              f"events/s at this rate: {-(-1_000_000 // rate1):,.0f} cores")
    figures = [
        Figure(NAME, "check stage, local[1], vs the one-process stream check", rate1 / rate0, "x",
               f">= {TARGET_VS_ONE_PROCESS}x", rate1 / rate0 >= TARGET_VS_ONE_PROCESS,
               f"{rate1:,.0f} vs {rate0:,.0f} events/s on 1 CPU"),
        Figure(NAME, "check stage, local[2] vs local[1]", rate2 / rate1, "x", f">= {TARGET_SCALING}x",
               rate2 / rate1 >= TARGET_SCALING, f"{rate2:,.0f} events/s on 2 CPUs"),
        Figure(NAME, f"kcm pipeline check (local[2]) vs check-trace, {small_events:,} events", check_trace / pipeline,
               "x", "> 1x", check_trace > pipeline, f"{pipeline:.1f} s vs {check_trace:.1f} s"),
        Figure(NAME, f"kcm pipeline check (local[2]) vs check-trace's work alone, {small_events:,} events",
               check_trace_work / pipeline, "x", "> 1x", check_trace_work > pipeline,
               f"{pipeline:.1f} s vs {check_trace_work:.1f} s"),
        Figure(NAME, "check stage events/s per core, local[1]", rate1, "events/s", f"{TARGET_PER_CORE:,} (stretch)",
               rate1 >= TARGET_PER_CORE, ratio(rate1, rate0) + " one process"),
        Figure(NAME, "JVM and Python workers, peak together", peak, "MiB", f"<= {TARGET_MEMORY_MIB:,}",
               peak <= TARGET_MEMORY_MIB, f"{local2.events:,} events"),
    ]
    print_footer(out)
    write_summary(args.summary, figures, {"floors_us_per_event": floors, "startup_seconds": local2.startup,
                                          "check_trace_seconds": check_trace, "check_trace_work_seconds":
                                          check_trace_work, "pipeline_seconds": pipeline})
    return 0


if __name__ == "__main__":
    sys.exit(main())
