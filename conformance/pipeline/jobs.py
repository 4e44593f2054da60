"""The trace pipeline on Spark: generate, ingest, check and report trace corpora (docs/pipeline.md).

A pipeline directory holds the events in the Parquet layout of spec/trace/parquet.py under `events/`
(one `run=<run>/` folder per run), what could not be used under `quarantine.jsonl` (file, line, reason),
and a `manifest.json` with the counts. Every record read ends up either checked or quarantined; the
counts say so and the stages assert it.

The command line is `kcm pipeline` (tools/pipeline.py), which is also the `spark-submit` entry point:

    spark-submit --master local[2] tools/pipeline.py check --in corpus --out checked
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import SparkSession

from kcm.conformance.check.coverage import Coverage
from kcm.spec.atomic_output import write_output
from kcm.spec.trace.format import Event
from kcm.spec.trace.parquet import ARROW_SCHEMA, run_folder, write_parquet
from kcm.spec.verdicts import HOLDS, UNOBSERVED, VIOLATED
from kcm.spec.vocabulary import ACTIONS, INVARIANTS, PROPERTIES, Knobs

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_USAGE, EXIT_QUARANTINED = 0, 1, 2, 3
EVENTS: Final = "events"
QUARANTINE: Final = "quarantine.jsonl"
MANIFEST: Final = "manifest.json"
SUMMARY: Final = "summary.json"
# The first violation of each run: how many runs summary.json lists, and how many of them the text shows.
FIRST_VIOLATIONS_LISTED: Final = 100
FIRST_VIOLATIONS_SHOWN: Final = 20
# Tasks of `check` per core: a few, so that runs of uneven length still keep every core busy to the end.
TASKS_PER_CORE: Final = 4
_FILE_COLUMNS: Final = [f for f in ARROW_SCHEMA if f.name != "run"]

Progress = Callable[[str, int, int], None]


def no_progress(_: str, __: int, ___: int) -> None:
    return None


@dataclass
class Counts:
    """Records read, and where each went: checked (an event), skipped on purpose (a log line that carries no
    state, by reason), or quarantined."""

    read: int = 0
    checked: int = 0
    quarantined: int = 0
    skipped: int = 0
    files_quarantined: int = 0
    # Events a parser made up (see SYNTHESIZED): checked, but outside read = checked + skipped + quarantined.
    synthesized: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    skipped_by_reason: dict[str, int] = field(default_factory=dict)

    def assert_balanced(self) -> None:
        if self.read != self.checked + self.skipped + self.quarantined:
            raise AssertionError(f"records lost: read {self.read} != checked {self.checked} + skipped "
                                 f"{self.skipped} + quarantined {self.quarantined}")

    def add(self, other: dict[str, Any]) -> None:
        """Adds counts as `to_json` gave them (a run's, in a manifest)."""
        for name in ("read", "checked", "quarantined", "skipped", "files_quarantined", "synthesized"):
            setattr(self, name, getattr(self, name) + int(other.get(name, 0)))
        for reason, n in other.get("skipped_by_reason", {}).items():
            self.skipped_by_reason[reason] = self.skipped_by_reason.get(reason, 0) + int(n)

    def to_json(self) -> dict[str, Any]:
        return {"read": self.read, "checked": self.checked, "skipped": self.skipped,
                "quarantined": self.quarantined, "files_quarantined": self.files_quarantined,
                "synthesized": self.synthesized, "by_reason": dict(sorted(self.by_reason.items())),
                "skipped_by_reason": dict(sorted(self.skipped_by_reason.items()))}


# -- quarantine ----------------------------------------------------------------------------------------------


def _reason_kind(reason: str) -> str:
    """The reason without its particulars, for counting by kind."""
    return reason.split(":")[0]


def write_quarantine(out: Path, entries: Sequence[dict[str, Any]], counts: Counts) -> None:
    """Quarantine entries (file, line, reason, and the record's run and seq when known), sorted so that
    the same input gives the same file."""
    ordered = sorted(entries, key=lambda e: (e["file"], e["line"], e["reason"]))
    counts.by_reason = {}
    for entry in ordered:
        kind = _reason_kind(entry["reason"])
        counts.by_reason[kind] = counts.by_reason.get(kind, 0) + 1
    write_output(out / QUARANTINE, "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in ordered))


def read_quarantine(folder: Path) -> list[dict[str, Any]]:
    path = folder / QUARANTINE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_json(path: Path, payload: dict[str, Any]) -> None:
    write_output(path, json.dumps(payload, indent=1, sort_keys=True) + "\n")


# -- the manifest: every run of the folder, its source and its rows -------------------------------------------------


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest; None when there is none (a layout another tool wrote)."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a manifest kcm wrote ({err})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: not a manifest kcm wrote (not a JSON object)")
    return manifest


def manifest_runs(manifest: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The runs a manifest describes; none for a manifest an earlier kcm wrote (its `runs` a count, or absent)."""
    runs = (manifest or {}).get("runs")
    return runs if isinstance(runs, dict) else {}


def publish(out: Path, stage: str, runs: dict[str, dict[str, Any]], quarantine: Sequence[dict[str, Any]],
            **details: Any) -> Counts:
    """The manifest and quarantine of `out` after a stage wrote `runs` into it: the runs an earlier stage left
    (but those of the same names, replaced), with their quarantine, and these. Each run says its source and
    the rows it has in the layout (what `check` must read of it); a run in the folder that no manifest
    described (another tool's) is described by its files' footers. Returns this stage's counts."""
    kept = {run: entry for run, entry in manifest_runs(read_manifest(out)).items() if run not in runs}
    for run, rows in _footer_rows(out / EVENTS).items():
        if run not in runs and run not in kept:
            kept[run] = {"kind": "unknown", "source": "", "rows": rows,
                         "counts": Counts(read=rows, checked=rows).to_json()}
    new_files = {path for entry in runs.values() for path in entry.get("files", {})}
    # An entry an earlier kcm wrote names no run: it goes with its file.
    carried = [e for e in read_quarantine(out) if e.get("run", "") in kept or ("run" not in e and
                                                                                e["file"] not in new_files)]
    everything = {**kept, **runs}
    total, mine = Counts(), Counts()
    for run, entry in everything.items():
        total.add(entry.get("counts", {}))
        if run in runs:
            mine.add(entry.get("counts", {}))
    write_quarantine(out, [*carried, *quarantine], total)
    mine.by_reason = dict(Counter(_reason_kind(entry["reason"]) for entry in quarantine))
    total.assert_balanced()
    files = {path: {**info, "run": run} for run, entry in everything.items() for path, info in
             entry.get("files", {}).items()}
    write_json(out / MANIFEST, {"stage": stage, **details, "runs": dict(sorted(everything.items())),
                                "files": dict(sorted(files.items())), "counts": total.to_json(),
                                "skipped": total.to_json()["skipped_by_reason"]})
    return mine


def _footer_rows(events_dir: Path) -> dict[str, int]:
    """The rows each run folder's files hold, by their footers (files that have none count none)."""
    rows: dict[str, int] = {}
    if not events_dir.is_dir():
        return rows
    for path in _parquet_files(events_dir):
        run = _run_of(path, events_dir)
        if run is None:
            continue
        try:
            rows[run] = rows.get(run, 0) + pq.read_metadata(path).num_rows
        except (pa.ArrowException, OSError):
            rows.setdefault(run, 0)
    return rows


# -- generate ----------------------------------------------------------------------------------------------------


def derive_seed(base: int, index: int) -> int:
    """The seed of task `index`: a hash, so that neighbouring campaigns do not share seeds."""
    digest = hashlib.sha256(f"kcm-pipeline:{base}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _simulate_into(out: str, knobs: dict[str, Any], steps: int, config: dict[str, Any]) -> Callable[
        [Iterable[tuple[int, int]]], Iterable[tuple[str, int]]]:
    def task(items: Iterable[tuple[int, int]]) -> Iterator[tuple[str, int]]:
        from kcm.impl.sim.simulator import SimConfig, Simulator

        for index, seed in items:
            events: list[Event] = []
            simulator = Simulator(seed, Knobs(**knobs), SimConfig(**config), events.append)
            simulator.bootstrap()
            simulator.run(steps)
            run = f"run-{index:06d}-seed-{seed}"
            for event in events:
                event["run"] = run
            yield run, write_parquet(events, out)

    return task


def generate(spark: SparkSession, runs: int, steps: int, knobs: Knobs, out: Path, base_seed: int = 0,
             config: dict[str, Any] | None = None, progress: Progress = no_progress) -> Counts:
    """A simulation campaign, one seed per Spark task, each run written to its own partition."""
    if runs < 1 or steps < 1:
        raise ValueError("--runs and --steps must be at least 1")
    target = out / EVENTS
    target.mkdir(parents=True, exist_ok=True)
    seeds = [(index, derive_seed(base_seed, index)) for index in range(runs)]
    rdd = spark.sparkContext.parallelize(seeds, numSlices=runs)
    task = _simulate_into(str(target), knobs.to_dict(), steps, config or {})
    written = {run: rows for run, rows in collect(spark, rdd.mapPartitions(task), "generate", progress)}
    entries = {run: {"kind": "generate", "source": f"generate --seed {base_seed}: {run}", "rows": rows,
                     "counts": Counts(read=rows, checked=rows).to_json()} for run, rows in written.items()}
    return publish(out, "generate", entries, [], steps=steps, base_seed=base_seed, knobs=knobs.to_dict(),
                   config=config or {})


# -- reading a layout, file by file ------------------------------------------------------------------------------


def _parquet_files(events_dir: Path) -> list[Path]:
    return sorted(p for p in events_dir.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def _file_problem(path: Path, columns: Sequence[Any]) -> tuple[str | None, int]:
    """Why a file cannot be read as `columns` (None when it can), and its row count when known."""
    try:
        meta = pq.read_metadata(path)
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as err:
        return f"unreadable Parquet file: {str(err).splitlines()[0]}", 0
    for wanted in columns:
        index = schema.get_field_index(wanted.name)
        if index < 0:
            return f"schema drift: column {wanted.name} is missing", meta.num_rows
        if not schema.field(index).type.equals(wanted.type):
            return (f"schema drift: column {wanted.name} is {schema.field(index).type}, expected {wanted.type}",
                    meta.num_rows)
    return None, meta.num_rows


def _run_of(path: Path, events_dir: Path) -> str | None:
    for part in path.relative_to(events_dir).parts[:-1]:
        if part.startswith("run="):
            return unquote(part[len("run="):])
    return None


@dataclass
class RunFiles:
    """A run of the layout: its name, its files in name order, and their size (to balance the tasks)."""

    run: str
    files: list[str]
    size: int = 0


@dataclass
class Input:
    """What `check` reads: the layout's runs, each in its folder, and files outside run folders whose rows
    name their run (a table of events written by another tool), fit to read."""

    runs: list[RunFiles]
    loose: list[str]


def list_input(folder: Path, counts: Counts, quarantine: list[dict[str, Any]]) -> Input:
    """The runs and loose files of a pipeline directory; files that are unfit go to `quarantine`, whole,
    counted by the rows their footer gives."""
    events_dir = folder / EVENTS if (folder / EVENTS).is_dir() else folder
    if not events_dir.is_dir():
        raise ValueError(f"{folder}: not a pipeline directory (no {EVENTS}/ folder)")
    runs: dict[str, RunFiles] = {}
    loose: list[str] = []
    for path in _parquet_files(events_dir):
        run = _run_of(path, events_dir)
        problem, rows = _file_problem(path, _FILE_COLUMNS if run is not None else ARROW_SCHEMA)
        if problem is None and run is None:
            loose.append(str(path))
        elif problem is None and run is not None:
            entry = runs.setdefault(run, RunFiles(run, []))
            entry.files.append(str(path))
            entry.size += path.stat().st_size
        else:
            if run is None and str(problem).startswith("schema drift: column run"):
                problem = "not in a run=<run> folder, and no run column"
            counts.read += rows
            counts.quarantined += rows
            counts.files_quarantined += 1
            lost = {"file": str(path), "line": 0, "reason": problem, "records": rows}
            quarantine.append(lost if run is None else {**lost, "run": run})
    return Input([runs[name] for name in sorted(runs)], loose)


def _slices(runs: Sequence[RunFiles], slots: int) -> list[list[tuple[str, list[str]]]]:
    """The runs dealt into at most `slots` tasks of about equal bytes, largest run first (each to the
    lightest task so far), so that one large run does not leave the other cores idle at the end."""
    tasks: list[tuple[int, int, list[tuple[str, list[str]]]]] = [(0, i, []) for i in range(min(slots, len(runs)))]
    heapq.heapify(tasks)
    for run in sorted(runs, key=lambda r: (-r.size, r.run)):
        size, index, members = heapq.heappop(tasks)
        members.append((run.run, run.files))
        heapq.heappush(tasks, (size + run.size, index, members))
    return [members for _, _, members in sorted(tasks, key=lambda t: t[1])]


def _check_task(fraction: float) -> Callable[[Iterable[list[tuple[str, list[str]]]]], Iterator[dict[str, Any]]]:
    def task(slices: Iterable[list[tuple[str, list[str]]]]) -> Iterator[dict[str, Any]]:
        from kcm.conformance.pipeline.stream import check_run, sampled

        for members in slices:
            for run, files in members:
                yield check_run(run, files, sampled(run, fraction)).to_json()

    return task


# The loose files' rows as the stream check takes them once shuffled: run, file, line, then the layout's columns.
_SHUFFLED: Final = ("run", "file", "line", "v", "seq", "actor", "action", "args", "state", "full")


def _shuffled_check(fraction: float, taken: frozenset[str]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import orjson

        from kcm.conformance.pipeline.stream import check_sorted_runs

        paths: dict[str, str] = {}

        def rows() -> Iterator[tuple[Any, ...]]:
            for batch in batches:
                columns = [batch.column(name).to_pylist() for name in _SHUFFLED]
                columns[1] = [paths.get(uri) or paths.setdefault(uri, _path_of(uri)) for uri in columns[1]]
                yield from zip(*columns, strict=True)

        for result in check_sorted_runs(rows(), fraction, taken):
            yield pa.RecordBatch.from_pydict({"result": [orjson.dumps(result.to_json())]})

    return task


def _path_of(uri: str) -> str:
    """Spark names a file by URI (`file:/tmp/x`); the quarantine names it as the layout's files, by path."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _check_loose(spark: SparkSession, files: list[str], fraction: float, taken: frozenset[str],
                 progress: Progress) -> list[dict[str, Any]]:
    """Files that mix runs: one shuffle by run and a sort by seq within each, then the same stream check. Rows
    of a run that also has its own folder (`taken`) are quarantined: one run, one place."""
    import orjson
    from pyspark.sql import functions as F

    schema = ", ".join(f"{f.name} {_SQL_TYPES[str(f.type)]}" for f in ARROW_SCHEMA)
    frame = spark.read.schema(schema).parquet(*files).select(
        "run", F.col("_metadata.file_path").alias("file"), (F.col("_metadata.row_index") + 1).alias("line"),
        *_SHUFFLED[3:])
    ordered = frame.repartition("run").sortWithinPartitions("run", "seq", "file", "line")
    checked = ordered.mapInArrow(_shuffled_check(fraction, taken), "result binary")
    return [orjson.loads(row["result"]) for row in collect(spark, checked.rdd, "check (shuffled)", progress)]


_SQL_TYPES: Final = {"int32": "int", "int64": "bigint", "string": "string", "bool": "boolean"}


def collect(spark: SparkSession, rdd: Any, stage: str, progress: Progress) -> list[Any]:
    """The rdd's rows on the driver, its tasks run in parallel, progress reported by tasks completed.

    `toLocalIterator` would report row by row, but it runs one job per partition, one after the other."""
    tracker = spark.sparkContext.statusTracker()
    total = rdd.getNumPartitions()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(rdd.collect)
        while True:
            try:
                rows: list[Any] = future.result(timeout=0.5)
                break
            except FuturesTimeout:
                done = sum(info.numCompletedTasks for info in map(tracker.getStageInfo,
                                                                   tracker.getActiveStageIds()) if info)
                progress(stage, min(done, total), total)
    progress(stage, total, total)
    return rows


# -- check -----------------------------------------------------------------------------------------------------

VERDICTS_SCHEMA: Final = pa.schema([("run", pa.string()), ("invariant", pa.string()), ("verdict", pa.string()),
                                    ("violations", pa.int64()), ("first_seq", pa.int64())])
_WINDOW_ENTRY: Final = pa.struct([("seq", pa.int64()), ("actor", pa.string()), ("action", pa.string()),
                                  ("state", pa.string())])
VIOLATIONS_SCHEMA: Final = pa.schema([("run", pa.string()), ("seq", pa.int64()), ("invariant", pa.string()),
                                      ("message", pa.string()), ("window", pa.list_(_WINDOW_ENTRY))])
VALIDATION_SCHEMA: Final = pa.schema([("run", pa.string()), ("ok", pa.bool_()), ("steps", pa.int64()),
                                      ("solver_checks", pa.int64()), ("failed_seq", pa.int64()),
                                      ("failed_action", pa.string()), ("reason", pa.string())])


@dataclass
class CheckResult:
    counts: Counts
    runs: int
    violations: int
    summary: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return summary_exit_code(self.summary)


@dataclass
class _Tables:
    """What the runs' checks add up to, gathered on the driver."""

    verdicts: list[dict[str, Any]] = field(default_factory=list)
    violations: list[dict[str, Any]] = field(default_factory=list)
    validation: list[dict[str, Any]] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    found: int = 0
    # The rows read of each run checked from its own folder, the Init a log parser made up included: what
    # the manifest's `rows` promise.
    rows: dict[str, int] = field(default_factory=dict)

    def add(self, run: dict[str, Any], counts: Counts, quarantine: list[dict[str, Any]], own_folder: bool) -> None:
        if own_folder:
            self.rows[run["run"]] = self.rows.get(run["run"], 0) + run["read"] + run["synthesized"]
        counts.read += run["read"]
        counts.checked += run["checked"]
        counts.quarantined += len(run["quarantine"])
        counts.synthesized += run["synthesized"]
        quarantine.extend(run["quarantine"])
        self.verdicts += run["verdicts"]
        self.found += sum(row["violations"] for row in run["verdicts"])
        self.violations += run["violations"]
        if run["validation"] is not None:
            self.validation.append(run["validation"])
        self.coverage.merge(Coverage.from_counts(run["coverage"]))


def check(spark: SparkSession, in_dir: Path, out: Path, validate_sample: float = 0.0,
          progress: Progress = no_progress) -> CheckResult:
    """Checks every run of a pipeline directory, one stream per run in the Spark tasks; writes verdicts,
    violations with their windows, coverage, the Z3 validation of the sampled runs, and the quarantine."""
    out.mkdir(parents=True, exist_ok=True)
    counts = Counts()
    manifest = read_manifest(in_dir) if (in_dir / EVENTS).is_dir() else None
    carried = read_quarantine(in_dir)
    quarantine: list[dict[str, Any]] = list(carried)
    found = list_input(in_dir, counts, quarantine)
    tables = _Tables()
    for entry in quarantine[len(carried):]:  # files quarantined whole: read, if unusable
        if "run" in entry:
            tables.rows[entry["run"]] = tables.rows.get(entry["run"], 0) + int(entry["records"])
    if found.runs:
        slices = _slices(found.runs, TASKS_PER_CORE * spark.sparkContext.defaultParallelism)
        rdd = spark.sparkContext.parallelize(slices, numSlices=len(slices))
        for run in collect(spark, rdd.mapPartitions(_check_task(validate_sample)), "check", progress):
            tables.add(run, counts, quarantine, own_folder=True)
    if found.loose:
        taken = frozenset(run.run for run in found.runs)
        for run in _check_loose(spark, found.loose, validate_sample, taken, progress):
            tables.add(run, counts, quarantine, own_folder=False)
    counts.assert_balanced()
    _write_table(out / "verdicts.parquet", tables.verdicts, VERDICTS_SCHEMA, ("run", "invariant"))
    _write_table(out / "violations.parquet", tables.violations, VIOLATIONS_SCHEMA,
                 ("run", "seq", "invariant", "message"))
    _write_table(out / "validation.parquet", tables.validation, VALIDATION_SCHEMA, ("run",))
    write_json(out / "coverage.json", tables.coverage.to_json())
    tables.coverage.write_svg(out / "coverage.svg")
    write_quarantine(out, quarantine, counts)
    summary = _summary(in_dir, counts, tables, len(carried), validate_sample)
    if manifest is not None:
        summary["ingest"] = manifest.get("counts")
        summary["incomplete"] = held_to_manifest(manifest, tables.rows)
    write_json(out / SUMMARY, summary)
    return CheckResult(counts, summary["runs"], tables.found, summary)


def held_to_manifest(manifest: dict[str, Any], read: dict[str, int]) -> list[str]:
    """What the check read short of (or past) what the manifest says each run has: one phrase per run that
    differs, in run order; none when every run's rows were read."""
    problems = []
    for run, entry in sorted(manifest_runs(manifest).items()):
        promised, got = int(entry.get("rows", 0)), read.get(run, 0)
        if got != promised:
            gone = "" if run in read or not promised else f" (no {run_folder(run)} folder)"
            problems.append(f"run {run}: {got:,} of its {promised:,} records read{gone}")
    return problems


def _write_table(path: Path, rows: list[dict[str, Any]], schema: Any, keys: Sequence[str]) -> None:
    """One Parquet file written on the driver, rows sorted: the same input gives the same bytes."""
    ordered = sorted(rows, key=lambda row: tuple(row[k] for k in keys))
    pq.write_table(pa.Table.from_pylist(ordered, schema=schema), path, compression="zstd")


# -- summary and report --------------------------------------------------------------------------------------------


def _first_violations(violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first violating event of each run (its earliest row; the rows keep each invariant's first ones),
    by run, at most FIRST_VIOLATIONS_LISTED of them."""
    first: dict[str, dict[str, Any]] = {}
    for row in violations:
        held = first.get(row["run"])
        if held is None or (row["seq"], row["invariant"]) < (held["seq"], held["invariant"]):
            first[row["run"]] = row
    return [{key: first[run][key] for key in ("run", "seq", "invariant", "message")}
            for run in sorted(first)[:FIRST_VIOLATIONS_LISTED]]


def _summary(in_dir: Path, counts: Counts, tables: _Tables, carried: int, validate_sample: float) -> dict[str, Any]:
    by_invariant: dict[str, dict[str, int]] = {}
    for row in tables.verdicts:
        verdicts = by_invariant.setdefault(row["invariant"], {})
        verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    runs = {row["run"] for row in tables.verdicts}
    bad_runs = {row["run"] for row in tables.verdicts if row["verdict"] == "violated"}
    coverage = tables.coverage
    checked = tables.validation
    verdict = VIOLATED if tables.found else HOLDS if counts.checked + counts.synthesized else UNOBSERVED
    return {
        "input": str(in_dir),
        "verdict": verdict,
        "runs": len(runs),
        "runs_with_violations": len(bad_runs),
        "events": counts.checked,
        "violations": tables.found,
        "first_violations": _first_violations(tables.violations),
        "records": counts.to_json(),
        "quarantined_upstream": carried,
        "verdicts": {name: by_invariant.get(name, {}) for name in (*INVARIANTS, *PROPERTIES)},
        "coverage": {"actions_seen": sum(1 for n in coverage.actions.values() if n), "actions": len(ACTIONS),
                     "transitions_seen": sum(len(c) for c in coverage.transitions.values())},
        "validation": {"sample": validate_sample, "runs": len(checked), "ok": sum(1 for r in checked if r["ok"]),
                       "steps": sum(int(r["steps"]) for r in checked),
                       "unexplained": sorted(f"{r['run']}@{r['failed_seq']}: {r['reason']}" for r in checked
                                             if not r["ok"])},
    }


def summary_exit_code(summary: dict[str, Any]) -> int:
    """Violations first; else whether the input lacks records its manifest promised, or any record, here or in
    the stage before (ingest), was quarantined; else, a check of no event is no pass (docs/verdicts.md: a run
    that observed nothing exits 2), and the others are clean."""
    if summary["violations"]:
        return EXIT_VIOLATIONS
    if summary.get("incomplete"):
        return EXIT_QUARANTINED
    records = summary["records"]
    quarantined = records["quarantined"] or records["files_quarantined"] or summary["quarantined_upstream"]
    if quarantined:
        return EXIT_QUARANTINED
    return EXIT_USAGE if summary.get("verdict") == UNOBSERVED else EXIT_CLEAN


def report(in_dir: Path) -> tuple[str, dict[str, Any]]:
    """The text and JSON summary of a checked directory (the output of `check`)."""
    path = in_dir / SUMMARY
    if not path.exists():
        raise ValueError(f"{in_dir}: no {SUMMARY} (run `kcm pipeline check` first)")
    summary: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    records = summary["records"]
    lines = [
        _verdict_text(summary),
        f"runs: {summary['runs']:,}  events checked: {summary['events']:,}  "
        f"runs with a violation: {summary['runs_with_violations']:,}  violations: {summary['violations']:,}",
        f"records: read {records['read']:,} = checked {records['checked']:,} + quarantined "
        f"{records['quarantined']:,}; files quarantined: {records['files_quarantined']}; "
        f"quarantined before (ingest): {summary['quarantined_upstream']}",
    ]
    if records.get("synthesized"):
        lines.append(f"  plus {records['synthesized']:,} Init snapshots the log parser made (no input records)")
    lines += [f"  quarantined: {reason}: {n}" for reason, n in records["by_reason"].items()]
    ingested = summary.get("ingest")
    if ingested:
        lines.append(f"ingest: {accounting(ingested)}")
        lines += [f"  skipped: {reason}: {n}" for reason, n in ingested.get("skipped_by_reason", {}).items()]
    lines += [f"input incomplete: {problem}" for problem in summary.get("incomplete", [])]
    lines += _violations_text(summary)
    lines.append("verdicts by invariant (runs):")
    for name, verdicts in summary["verdicts"].items():
        shown = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())) or "no runs"
        lines.append(f"  {name:28} {shown}")
    coverage = summary["coverage"]
    lines.append(f"coverage: {coverage['actions_seen']}/{coverage['actions']} actions, "
                 f"{coverage['transitions_seen']} distinct state-machine transitions")
    lines += _validation_text(summary)
    return "\n".join(lines), summary


def accounting(counts: dict[str, Any]) -> str:
    """Where every line (record) read went, as a sum that adds up to it."""
    text = (f"read {counts['read']:,} = checked {counts['checked']:,} + skipped {counts.get('skipped', 0):,} + "
            f"quarantined {counts['quarantined']:,}")
    if counts.get("files_quarantined"):
        text += f"; files quarantined whole: {counts['files_quarantined']:,}"
    return text


def _verdict_text(summary: dict[str, Any]) -> str:
    verdict = summary.get("verdict", VIOLATED if summary["violations"] else HOLDS)
    if verdict == UNOBSERVED:
        return "verdict: unobserved (no event checked: the input holds none, so nothing was verified)"
    return f"verdict: {verdict}"


def _violations_text(summary: dict[str, Any]) -> list[str]:
    """Each run with a violation and its first violating event, as far as the summary lists them (a summary
    an earlier kcm wrote lists none)."""
    listed = summary.get("first_violations", [])
    if not listed:
        return []
    lines = ["first violation of each run (run, step, invariant: explanation):"]
    lines += [f"  {v['run']} step {v['seq']} {v['invariant']}: {v['message']}" for v in listed[:FIRST_VIOLATIONS_SHOWN]]
    more = summary["runs_with_violations"] - min(len(listed), FIRST_VIOLATIONS_SHOWN)
    if more > 0:
        lines.append(f"  ... {more:,} more run(s) with a violation: --json lists {len(listed)}, violations.parquet "
                     "has every run's")
    return lines


def _validation_text(summary: dict[str, Any]) -> list[str]:
    validation = summary["validation"]
    sample = validation.get("sample")  # None in a summary an earlier kcm wrote
    if not validation["runs"]:
        if sample is None:
            return ["Z3 step validation: no run validated"]
        if not sample:
            return ["Z3 step validation: not asked (--validate-sample 0)"]
        return [f"Z3 step validation: no run drawn: --validate-sample {sample} draws each of the "
                f"{summary['runs']:,} runs by a hash of its name (about {sample * summary['runs']:.1f} expected); "
                "--validate-sample all validates every run"]
    drawn = "" if sample is None else f" drawn (--validate-sample {sample})"
    lines = [f"Z3 step validation: {validation['ok']}/{validation['runs']} runs{drawn} explained, "
             f"{validation['steps']:,} steps"]
    return lines + [f"  unexplained: {u}" for u in validation["unexplained"]]

