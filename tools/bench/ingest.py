"""Kafka log ingest benchmark: log lines per second per core of the parser and of `kcm pipeline ingest`,
against a bare loop over the same lines measured in the same run.

Run it with `python -m kcm.tools.bench.ingest` (`--quick` for a small corpus, `--lines N` to choose).

The corpus: TRACE-level `state-change.log` and `controller.log` files of Kafka 2.4 and 3.5 (four files, one
run each), rendered by the project's renderer (kafka_log/renderer.py) from a cluster of three brokers whose
controller creates partitions, sends their LeaderAndIsr and UpdateMetadata requests, the brokers applying
them and caching the leaders, then moves each partition's leadership when its leader fails; the controller
logs its election and housekeeping. A block of 400 distinct partitions is rendered once per release and
repeated up to the lines asked for.
  floor         a loop that reads each file, splits it into lines and decodes them: what any parser of these
                files must do at least (the baseline of the ratios);
  parser        `parse_kafka_log` over each file whole, in this process (one core);
  ingest        `kcm pipeline ingest` of the four files on `local[1]` and `local[2]`, each in a fresh process
                and JVM held to as many CPUs; the Spark session's start-up is timed apart and left out of
                the rate, and the splits are 16 MiB so that every file is several tasks.
`measure_ingest(lines)` gives the same figures to other benchmarks.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Final

from kcm.conformance.pipeline.ingest import ingest
from kcm.conformance.pipeline.kafka_log import formats as fm
from kcm.conformance.pipeline.kafka_log import parse_kafka_log, render
from kcm.conformance.pipeline.kafka_log.parser import decode
from kcm.conformance.pipeline.kafka_log.renderer import Line
from kcm.conformance.pipeline.session import spark_session
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

NAME = "ingest"
TARGET_PER_CORE: Final = 100_000
RELEASES: Final = ("2.4", "3.5")
SPLIT_SIZE: Final = 16 * 1024 * 1024
_BLOCK_PARTITIONS: Final = 400  # distinct partitions rendered once per release, then repeated
_BROKERS: Final = (0, 1, 2)


def _state(leader: int, epoch: int, isr: list[int], replicas: list[int], controller_epoch: int) -> dict[str, object]:
    return {"leader": leader, "leader_epoch": epoch, "isr": isr, "zk_version": epoch,
            "controller_epoch": controller_epoch, "replicas": replicas, "is_new": epoch == 0}


def _applied(b: int, c: int, e: int, cid: int, p: str, state: dict[str, object], role: str) -> list[Line]:
    """A broker receiving a LeaderAndIsr request for one partition and applying it."""
    values = {"b": b, "c": c, "e": e, "cid": cid, "partition": p}
    leader = {"leader": state["leader"]} if role == "follower" else {}
    return [Line(fm.RECEIVED, {**values, "state": state}),
            Line(fm.BECOME, {**values, **leader}, role=role),
            Line(fm.COMPLETED, {**values, **leader}, role=role)]


def _cached(c: int, e: int, cid: int, p: str, state: dict[str, object]) -> list[Line]:
    """UpdateMetadata sent to every broker, each caching the partition's leader."""
    blob = {"blob": f"UpdateMetadataPartitionState(leader={state['leader']})"}
    return [Line(fm.SEND_OTHER, {"c": c, "e": e, "partition": p, "brokers": list(_BROKERS), "n": 1},
                 extra={**blob, "brokers": "0,1,2"}),
            *(Line(fm.UPDATE_METADATA, {"b": b, "c": c, "e": e, "cid": cid, "partition": p}, extra=blob)
              for b in _BROKERS)]


def _partition(p: str, index: int, c: int, e: int) -> list[Line]:
    """A partition created on two brokers, its leader failing and the other replica elected."""
    a, b = _BROKERS[index % 3], _BROKERS[(index + 1) % 3]
    first, second = _state(a, 0, [a, b], [a, b], e), _state(b, 1, [b], [a, b], e)
    ctl = {"c": c, "e": e, "partition": p}
    return [
        Line(fm.PARTITION_STATE, {**ctl, "src": "NonExistentPartition", "dst": "NewPartition", "replicas": [a, b]}),
        *(Line(fm.REPLICA_STATE, {**ctl, "r": r, "src": "NonExistentReplica", "dst": "NewReplica"}) for r in (a, b)),
        Line(fm.PARTITION_STATE, {**ctl, "src": "NewPartition", "dst": "OnlinePartition", "leader": a,
                                  "state": first}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": a, "cid": 1, "state": first}, role="leader"),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": b, "cid": 1, "state": first}, role="follower"),
        *(Line(fm.REPLICA_STATE, {**ctl, "r": r, "src": "NewReplica", "dst": "OnlineReplica"}) for r in (a, b)),
        *_applied(a, c, e, 1, p, first, "leader"),
        *_applied(b, c, e, 1, p, first, "follower"),
        *_cached(c, e, 2, p, first),
        Line(fm.PARTITION_STATE, {**ctl, "src": "OnlinePartition", "dst": "OfflinePartition"}),
        Line(fm.REPLICA_STATE, {**ctl, "r": a, "src": "OnlineReplica", "dst": "OfflineReplica"}),
        Line(fm.PARTITION_STATE, {**ctl, "src": "OfflinePartition", "dst": "OnlinePartition", "leader": b,
                                  "state": second}),
        Line(fm.SEND_LEADER_AND_ISR, {**ctl, "to": b, "cid": 3, "state": second}, role="leader"),
        *_applied(b, c, e, 3, p, second, "leader"),
        *_cached(c, e, 4, p, second),
    ]


def _controller(c: int, e: int) -> list[Line]:
    """The controller's own log: its election, then housekeeping lines (skipped on purpose)."""
    return [Line(fm.CONTROLLER_ELECT, {"c": c, "e": e, "v": e}, logger=fm.CONTROLLER),
            *[Line(fm.SKIP, {"c": c}, logger=fm.CONTROLLER)] * 9]


def write_corpus(folder: Path, lines: int) -> list[Path]:
    """The corpus's four files in `folder`, about `lines` lines in all."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    per_file = max(lines // (2 * len(RELEASES)), 1)
    for release in RELEASES:
        block = [line for i in range(_BLOCK_PARTITIONS) for line in _partition(f"topic{i % 20}-{i}", i, 0, 2)]
        changes = render(block, release)
        control = render(_controller(0, 2), release)
        for name, texts, share in (("state-change", changes, 0.9), ("controller", control, 0.1)):
            wanted = max(int(per_file * 2 * share), 1)
            repeated = (texts * (wanted // len(texts) + 1))[:wanted]
            path = folder / f"{name}-{release}.log"
            path.write_text("".join(f"{text}\n" for text in repeated), encoding="utf-8")
            paths.append(path)
    return paths


def _floor(paths: Sequence[Path]) -> tuple[float, int]:
    started = time.perf_counter()
    count = 0
    for path in paths:
        count += len([decode(chunk) for chunk in path.read_bytes().split(b"\n")[:-1]])  # each file ends with a newline
    return time.perf_counter() - started, count


def _parser(paths: Sequence[Path]) -> tuple[float, int]:
    started = time.perf_counter()
    count = sum(parse_kafka_log(path).lines for path in paths)
    return time.perf_counter() - started, count


def _timed_ingest(master_cores: int, paths: Sequence[Path], out: Path) -> tuple[float, float, float]:
    """(start-up s, ingest s, JVM CPU s) of `kcm pipeline ingest` in a process of its own held to
    `master_cores` CPUs (inherited by its JVM)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        startup, seconds, jvm_cpu = pool.submit(_confined_ingest, master_cores, [str(p) for p in paths],
                                                str(out)).result()
    add_grandchild_cpu(jvm_cpu)
    return startup, seconds, jvm_cpu


def _confined_ingest(cores: int, paths: list[str], out: str) -> tuple[float, float, float]:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    started = time.perf_counter()
    spark = spark_session(f"local[{cores}]", app=f"kcm-bench-ingest-{cores}")
    spark.sparkContext.parallelize([0], 1).count()  # the first job starts the Python workers
    startup = time.perf_counter() - started
    try:
        started = time.perf_counter()
        ingest(spark, paths, [], Path(out), split_size=SPLIT_SIZE)
        return startup, time.perf_counter() - started, running_children_cpu()
    finally:
        spark.stop()


def measure_ingest(lines: int) -> dict[str, float]:
    """Lines/s of the floor loop, the parser (one process) and `kcm pipeline ingest` on local[1] and local[2]
    (per core, too) over a corpus of about `lines` lines, with Spark's start-up on each."""
    with tempfile.TemporaryDirectory(prefix="kcm-bench-ingest-") as tmp:
        paths = write_corpus(Path(tmp) / "logs", lines)
        floor_s, count = _floor(paths)
        parser_s, parsed = _parser(paths)
        assert parsed == count, (parsed, count)
        figures = {"lines": float(count), "floor_lines_per_s": count / floor_s,
                   "parser_lines_per_s": count / parser_s}
        for cores in (1, 2):
            startup, seconds, _ = _timed_ingest(cores, paths, Path(tmp) / f"out-{cores}")
            figures[f"local{cores}_startup_s"] = startup
            figures[f"local{cores}_lines_per_s"] = count / seconds
            figures[f"local{cores}_lines_per_s_per_core"] = count / seconds / cores
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__ or "")
    parser.add_argument("--lines", type=int, default=None, help="log lines in the corpus (default 1,000,000)")
    args = parser.parse_args(argv)
    out = console()
    print_header(out, NAME, command_line(NAME, sys.argv[1:] if argv is None else argv))
    lines = args.lines or (100_000 if args.quick else 1_000_000)
    m = measure_ingest(lines)
    floor = m["floor_lines_per_s"]
    result = table(f"Kafka log ingest, {m['lines']:,.0f} lines ({', '.join(RELEASES)}; state-change.log and "
                   "controller.log)", ["measured", "lines/s", "lines/s per core", "versus the floor"])
    result.add_row("floor: split and decode (baseline)", f"{floor:,.0f}", f"{floor:,.0f}", "1.00x")
    result.add_row("parser, one process", f"{m['parser_lines_per_s']:,.0f}", f"{m['parser_lines_per_s']:,.0f}",
                   ratio(m["parser_lines_per_s"], floor))
    for cores in (1, 2):
        rate = m[f"local{cores}_lines_per_s"]
        result.add_row(f"kcm pipeline ingest, local[{cores}] (start-up {m[f'local{cores}_startup_s']:.1f} s apart)",
                       f"{rate:,.0f}", f"{rate / cores:,.0f}", ratio(rate / cores, floor))
    out.print(result)
    out.print(f"local[2] / local[1]: {ratio(m['local2_lines_per_s'], m['local1_lines_per_s'])}; "
              f"parser per core versus the {TARGET_PER_CORE:,} lines/s target: "
              f"{ratio(m['parser_lines_per_s'], TARGET_PER_CORE)}")
    per_core = m["local1_lines_per_s_per_core"]
    figures = [
        Figure(NAME, "parser lines/s (one core)", m["parser_lines_per_s"], "lines/s", f">= {TARGET_PER_CORE:,}",
               m["parser_lines_per_s"] >= TARGET_PER_CORE,
               f"{ratio(m['parser_lines_per_s'], floor)} of the split-and-decode floor"),
        Figure(NAME, "ingest lines/s per core (local[1])", per_core, "lines/s", f">= {TARGET_PER_CORE:,}",
               per_core >= TARGET_PER_CORE,
               f"local[2] {ratio(m['local2_lines_per_s'], m['local1_lines_per_s'])} of local[1]"),
    ]
    print_footer(out)
    write_summary(args.summary, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
