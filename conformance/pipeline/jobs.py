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
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from kcm.conformance.check.invariants import READS
from kcm.conformance.pipeline.invariants import check_invariants
from kcm.spec.trace.format import SYNTHESIZED, Event
from kcm.spec.trace.parquet import ARROW_SCHEMA, write_parquet
from kcm.spec.vocabulary import ACTIONS, INVARIANTS, VARIABLES, Knobs

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_USAGE, EXIT_QUARANTINED = 0, 1, 2, 3
EVENTS: Final = "events"
QUARANTINE: Final = "quarantine.jsonl"
MANIFEST: Final = "manifest.json"
SUMMARY: Final = "summary.json"
# Violations kept per run and invariant in the table (all are counted in the verdicts).
MAX_ROWS_PER_INVARIANT: Final = 20
WINDOW: Final = 3  # events either side of a violation
_FILE_COLUMNS: Final = [f for f in ARROW_SCHEMA if f.name != "run"]

Progress = Callable[[str, int, int], None]


def no_progress(_: str, __: int, ___: int) -> None:
    return None


@dataclass
class Counts:
    """Records read, and where each went."""

    read: int = 0
    checked: int = 0
    quarantined: int = 0
    files_quarantined: int = 0
    # Events a parser made up (see SYNTHESIZED): checked, but outside read = checked + quarantined.
    synthesized: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)

    def assert_balanced(self) -> None:
        if self.read != self.checked + self.quarantined:
            raise AssertionError(f"records lost: read {self.read} != checked {self.checked} "
                                 f"+ quarantined {self.quarantined}")

    def to_json(self) -> dict[str, Any]:
        return {"read": self.read, "checked": self.checked, "quarantined": self.quarantined,
                "files_quarantined": self.files_quarantined, "synthesized": self.synthesized,
                "by_reason": dict(sorted(self.by_reason.items()))}


# -- quarantine ----------------------------------------------------------------------------------------------


def _reason_kind(reason: str) -> str:
    """The reason without its particulars, for counting by kind."""
    return reason.split(":")[0]


def write_quarantine(out: Path, entries: Sequence[dict[str, Any]], counts: Counts) -> None:
    """Quarantine entries (file, line, reason, and the record's run and seq when known), sorted so that
    the same input gives the same file."""
    ordered = sorted(entries, key=lambda e: (e["file"], e["line"], e["reason"]))
    with open(out / QUARANTINE, "w", encoding="utf-8") as handle:
        for entry in ordered:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")
            kind = _reason_kind(entry["reason"])
            counts.by_reason[kind] = counts.by_reason.get(kind, 0) + 1


def read_quarantine(folder: Path) -> list[dict[str, Any]]:
    path = folder / QUARANTINE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n", encoding="utf-8")


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
    counts = Counts()
    for written, (_, rows) in enumerate(rdd.mapPartitions(task).toLocalIterator(), start=1):
        counts.read += rows
        progress("generate", written, runs)
    counts.checked = counts.read
    write_quarantine(out, [], counts)
    write_json(out / MANIFEST, {"stage": "generate", "runs": runs, "steps": steps, "base_seed": base_seed,
                                "knobs": knobs.to_dict(), "counts": counts.to_json()})
    return counts


# -- reading a layout, file by file ------------------------------------------------------------------------------


def _parquet_files(events_dir: Path) -> list[Path]:
    return sorted(p for p in events_dir.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def _file_problem(path: Path) -> tuple[str | None, int]:
    """Why a file cannot be read as the layout (None when it can), and its row count when known."""
    try:
        meta = pq.read_metadata(path)
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as err:
        return f"unreadable Parquet file: {str(err).splitlines()[0]}", 0
    for wanted in _FILE_COLUMNS:
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
            return part[len("run="):]
    return None


def load_events(spark: SparkSession, folder: Path, counts: Counts,
                quarantine: list[dict[str, Any]]) -> DataFrame | None:
    """The layout's events that are fit to check; files and rows that are not go to `quarantine`."""
    events_dir = folder / EVENTS if (folder / EVENTS).is_dir() else folder
    if not events_dir.is_dir():
        raise ValueError(f"{folder}: not a pipeline directory (no {EVENTS}/ folder)")
    good: list[str] = []
    for path in _parquet_files(events_dir):
        problem, rows = _file_problem(path)
        if problem is None and _run_of(path, events_dir) is None:
            problem = "not in a run=<run> folder"
        if problem is None:
            good.append(str(path))
            continue
        counts.read += rows
        counts.quarantined += rows
        counts.files_quarantined += 1
        quarantine.append({"file": str(path), "line": 0, "reason": problem, "records": rows})
    if not good:
        return None
    frame = spark.read.option("basePath", str(events_dir)).schema(_read_schema()).parquet(*good)
    return frame


def _read_schema() -> T.StructType:
    fields = [T.StructField(f.name, _spark_type(f.type)) for f in _FILE_COLUMNS]
    return T.StructType([*fields, T.StructField("run", T.StringType())])


def _spark_type(arrow_type: Any) -> T.DataType:
    mapping: dict[str, T.DataType] = {"int32": T.IntegerType(), "int64": T.LongType(), "string": T.StringType(),
                                      "bool": T.BooleanType()}
    return mapping[str(arrow_type)]


def _row_problems(frame: DataFrame) -> DataFrame:
    """Each row with `problem`: null when fit to check, else why not (first failing rule)."""
    with_pos = frame.withColumn("file", F.input_file_name()).withColumn("_id", F.monotonically_increasing_id())
    in_file = with_pos.withColumn("line", F.row_number().over(_window(["file"], ["_id"])))
    kinds = F.create_map(*[x for action, kind in sorted(ACTIONS.items()) for x in (F.lit(action), F.lit(kind))])
    actor_kind = F.substring_index("actor", ":", 1)
    needed = kinds[F.col("action")]
    variables = F.array(*map(F.lit, VARIABLES))
    state_keys = F.json_object_keys("state")
    unknown_var = F.filter(state_keys, lambda k: ~F.array_contains(variables, k))
    previous_max = F.max("seq").over(_window(["file"], ["line"]).rowsBetween(Window.unboundedPreceding, -1))
    missing = F.coalesce(*[F.when(F.col(c).isNull(), F.lit(f"missing field: {c}")) for c in
                           ("v", "run", "seq", "actor", "action", "args", "state")])
    problem = F.coalesce(
        missing,
        F.when(F.col("v") != 1, F.format_string("unsupported format version: v=%s", F.col("v").cast("string"))),
        F.when(F.col("seq") < 0, F.lit("invalid seq: negative")),
        F.when(needed.isNull(), F.format_string("unknown action: %s", F.col("action"))),
        F.when((actor_kind != needed) & (actor_kind != "observer"),
               F.format_string("wrong actor: action %s needs a %s actor, got %s", F.col("action"), needed,
                               F.col("actor"))),
        F.when(F.json_object_keys("args").isNull(), F.lit("invalid args: not a JSON object")),
        F.when(state_keys.isNull(), F.lit("invalid state: not a JSON object")),
        F.when(F.size(unknown_var) > 0, F.format_string("unknown state variable: %s", F.element_at(unknown_var, 1))),
        F.when(F.col("seq") < previous_max, F.format_string("out-of-order seq: %s after %s", F.col("seq").cast(
            "string"), previous_max.cast("string"))),
    )
    checked = in_file.withColumn("problem", problem)
    # A duplicate is counted against the copy read later, once the rows that are bad on their own are out.
    fit = checked.filter(F.col("problem").isNull())
    unfit = checked.filter(F.col("problem").isNotNull())
    later_copy = F.row_number().over(_window(["run", "seq"], ["file", "line"])) > 1
    dup = F.when(later_copy, F.format_string("duplicate seq: %s in run %s", F.col("seq").cast("string"), F.col("run")))
    return fit.withColumn("problem", dup).unionByName(unfit)


def _synthesized() -> Column:
    return (F.col("action") == "Init") & (F.get_json_object("args", f"$.{SYNTHESIZED}") == "true")


def _window(keys: list[str], order: list[str]) -> WindowSpec:
    return Window.partitionBy(*keys).orderBy(*order)


# -- check -----------------------------------------------------------------------------------------------------


@dataclass
class CheckResult:
    counts: Counts
    runs: int
    violations: int
    summary: dict[str, Any]

    @property
    def exit_code(self) -> int:
        return summary_exit_code(self.summary)


def check(spark: SparkSession, in_dir: Path, out: Path, validate_sample: float = 0.0,
          progress: Progress = no_progress) -> CheckResult:
    """Checks every run of a pipeline directory; writes verdicts, violations, coverage and the quarantine."""
    out.mkdir(parents=True, exist_ok=True)
    counts = Counts()
    carried = read_quarantine(in_dir)
    quarantine: list[dict[str, Any]] = list(carried)
    frame = load_events(spark, in_dir, counts, quarantine)
    steps = 6
    progress("check", 1, steps)
    if frame is None:
        events = spark.createDataFrame([], _read_schema())
    else:
        rows = _row_problems(frame).cache()
        bad = rows.filter(F.col("problem").isNotNull()).select("file", "line", "run", "seq", F.col("problem").alias(
            "reason")).collect()
        quarantine.extend({"file": r["file"], "line": r["line"], "run": r["run"], "seq": r["seq"],
                           "reason": r["reason"]} for r in bad)
        total = rows.count()
        counts.synthesized = rows.filter(F.col("problem").isNull() & _synthesized()).count()
        counts.read += total - counts.synthesized
        counts.quarantined += len(bad)
        counts.checked += total - len(bad) - counts.synthesized
        events = rows.filter(F.col("problem").isNull()).select(*ARROW_SCHEMA.names).cache()
    counts.assert_balanced()
    progress("check", 2, steps)
    violations = check_invariants(events).distinct().cache()
    found = violations.count()
    progress("check", 3, steps)
    verdicts = _verdicts(events, violations)
    _write_table(out / "verdicts.parquet", verdicts.toPandas())
    _write_table(out / "violations.parquet", _with_windows(events, violations).toPandas())
    progress("check", 4, steps)
    coverage = _coverage(events)
    write_json(out / "coverage.json", coverage)
    validation = _validate_sample(events, validate_sample)
    _write_table(out / "validation.parquet", validation.toPandas())
    progress("check", 5, steps)
    write_quarantine(out, quarantine, counts)
    summary = _summary(in_dir, counts, verdicts, found, coverage, validation, len(carried))
    write_json(out / SUMMARY, summary)
    progress("check", 6, steps)
    return CheckResult(counts, summary["runs"], found, summary)


def _write_table(path: Path, frame: Any) -> None:
    """One Parquet file written on the driver, rows sorted: the same input gives the same bytes."""
    keys = [c for c in ("run", "seq", "invariant", "message") if c in frame.columns]
    if keys and len(frame):
        frame = frame.sort_values(keys, kind="mergesort").reset_index(drop=True)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path, compression="zstd")


def _verdicts(events: DataFrame, violations: DataFrame) -> DataFrame:
    base = violations.withColumn("invariant", F.split("invariant", "/")[0])
    counted = base.groupBy("run", "invariant").agg(F.count("*").alias("violations"), F.min("seq").alias("first_seq"))
    observed = events.select("run", F.explode(F.json_object_keys("state")).alias("var")).distinct().groupBy(
        "run").agg(F.collect_set("var").alias("vars"))
    names = events.select("run").distinct().crossJoin(
        events.sparkSession.createDataFrame([(n, list(READS[n])) for n in INVARIANTS], "invariant string, reads "
                                                                                        "array<string>"))
    joined = names.join(observed, "run", "left").join(counted, ["run", "invariant"], "left")
    seen = F.size(F.array_except("reads", F.coalesce("vars", F.array().cast("array<string>")))) == 0
    verdict = F.when(F.col("violations") > 0, "violated").when(seen, "holds").otherwise("unobserved")
    return joined.select("run", "invariant", verdict.alias("verdict"),
                         F.coalesce("violations", F.lit(0)).alias("violations"), "first_seq")


def _with_windows(events: DataFrame, violations: DataFrame) -> DataFrame:
    """The first violations of each run and invariant, each with the events around it."""
    ranked = violations.withColumn("n", F.row_number().over(_window(["run", "invariant"], ["seq", "message"]))) \
        .filter(F.col("n") <= MAX_ROWS_PER_INVARIANT).drop("n")
    around = events.select(F.col("run").alias("erun"), F.col("seq").alias("eseq"), "actor", "action", "state")
    joined = ranked.join(around, (F.col("erun") == F.col("run")) & (F.col("eseq") >= F.col("seq") - WINDOW)
                         & (F.col("eseq") <= F.col("seq") + WINDOW), "left")
    window = F.array_sort(F.collect_list(F.struct(F.col("eseq").alias("seq"), "actor", "action", "state")))
    return joined.groupBy("run", "seq", "invariant", "message").agg(window.alias("window"))


def _coverage(events: DataFrame) -> dict[str, Any]:
    actions = {r["action"]: r["count"] for r in events.groupBy("action").count().collect()}
    entries = events.select(F.explode(F.from_json(F.get_json_object("args", "$.transitions"),
                                                  "array<array<string>>")).alias("e"))
    kinded = entries.select(F.col("e")[0].alias("kind"), F.when(F.col("e")[0] == "partition", F.col("e")[2])
                            .otherwise(F.col("e")[3]).alias("src"),
                            F.when(F.col("e")[0] == "partition", F.col("e")[3]).otherwise(F.col("e")[4]).alias("dst"))
    transitions = {f"{r['kind']}: {r['src']} -> {r['dst']}": r["count"]
                   for r in kinded.groupBy("kind", "src", "dst").count().collect()}
    return {"actions": dict(sorted(actions.items())),
            "actions_never_seen": sorted(set(ACTIONS) - set(actions)),
            "transitions": dict(sorted(transitions.items()))}


# -- model step validation on a sample -----------------------------------------------------------------------------

_VALIDATION_SCHEMA: Final = ("run string, ok boolean, steps long, solver_checks long, failed_seq long, "
                             "failed_action string, reason string")


def _sampled(events: DataFrame, fraction: float) -> DataFrame:
    if fraction >= 1.0:
        return events
    # A hash of the run name: the same runs are sampled on every re-run and every cluster.
    bucket = F.pmod(F.xxhash64("run"), F.lit(1_000_000))
    return events.filter(bucket < F.lit(int(fraction * 1_000_000)))


def _validate_run(frame: Any) -> Any:
    import pandas as pd  # type: ignore[import-untyped]

    from kcm.spec.z3.validate import validate_events

    ordered = frame.sort_values("seq")
    events = [{"v": int(r.v), "run": r.run, "seq": int(r.seq), "actor": r.actor, "action": r.action,
               "args": json.loads(r.args), "state": json.loads(r.state), **({"full": True} if r.full else {})}
              for r in ordered.itertuples(index=False)]
    report = validate_events(events)
    failure = report.failure
    return pd.DataFrame([{"run": events[0]["run"], "ok": report.ok, "steps": report.steps,
                          "solver_checks": report.checked, "failed_seq": None if failure is None else failure.seq,
                          "failed_action": None if failure is None else failure.action,
                          "reason": None if failure is None else failure.reason}])


def _validate_sample(events: DataFrame, fraction: float) -> DataFrame:
    sample = _sampled(events, fraction) if fraction > 0 else events.limit(0)
    return sample.groupBy("run").applyInPandas(_validate_run, _VALIDATION_SCHEMA)


# -- summary and report --------------------------------------------------------------------------------------------


def _summary(in_dir: Path, counts: Counts, verdicts: DataFrame, violations: int, coverage: dict[str, Any],
             validation: DataFrame, carried: int) -> dict[str, Any]:
    by_invariant: dict[str, dict[str, int]] = {}
    for row in verdicts.groupBy("invariant", "verdict").count().collect():
        by_invariant.setdefault(row["invariant"], {})[row["verdict"]] = row["count"]
    runs = verdicts.select("run").distinct().count()
    bad_runs = verdicts.filter(F.col("verdict") == "violated").select("run").distinct().count()
    checked = validation.collect()
    return {
        "input": str(in_dir),
        "runs": runs,
        "runs_with_violations": bad_runs,
        "events": counts.checked,
        "violations": violations,
        "records": counts.to_json(),
        "quarantined_upstream": carried,
        "verdicts": {name: by_invariant.get(name, {}) for name in INVARIANTS},
        "coverage": {"actions_seen": len(coverage["actions"]), "actions": len(ACTIONS),
                     "transitions_seen": len(coverage["transitions"])},
        "validation": {"runs": len(checked), "ok": sum(1 for r in checked if r["ok"]),
                       "steps": sum(int(r["steps"]) for r in checked),
                       "unexplained": sorted(f"{r['run']}@{r['failed_seq']}: {r['reason']}" for r in checked
                                             if not r["ok"])},
    }


def summary_exit_code(summary: dict[str, Any]) -> int:
    """Violations first; else whether any record, here or in the stage before (ingest), was quarantined."""
    if summary["violations"]:
        return EXIT_VIOLATIONS
    records = summary["records"]
    quarantined = records["quarantined"] or records["files_quarantined"] or summary["quarantined_upstream"]
    return EXIT_QUARANTINED if quarantined else EXIT_CLEAN


def report(in_dir: Path) -> tuple[str, dict[str, Any]]:
    """The text and JSON summary of a checked directory (the output of `check`)."""
    path = in_dir / SUMMARY
    if not path.exists():
        raise ValueError(f"{in_dir}: no {SUMMARY} (run `kcm pipeline check` first)")
    summary: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    records = summary["records"]
    lines = [
        f"runs: {summary['runs']:,}  events checked: {summary['events']:,}  "
        f"runs with a violation: {summary['runs_with_violations']:,}  violations: {summary['violations']:,}",
        f"records: read {records['read']:,} = checked {records['checked']:,} + quarantined "
        f"{records['quarantined']:,}; files quarantined: {records['files_quarantined']}; "
        f"quarantined before (ingest): {summary['quarantined_upstream']}",
    ]
    if records.get("synthesized"):
        lines.append(f"  plus {records['synthesized']:,} Init snapshots the log parser made (no input records)")
    lines += [f"  quarantined: {reason}: {n}" for reason, n in records["by_reason"].items()]
    lines.append("verdicts by invariant (runs):")
    for name, verdicts in summary["verdicts"].items():
        shown = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())) or "no runs"
        lines.append(f"  {name:28} {shown}")
    coverage = summary["coverage"]
    lines.append(f"coverage: {coverage['actions_seen']}/{coverage['actions']} actions, "
                 f"{coverage['transitions_seen']} distinct state-machine transitions")
    validation = summary["validation"]
    lines.append(f"Z3 step validation: {validation['ok']}/{validation['runs']} runs explained, "
                 f"{validation['steps']:,} steps")
    lines += [f"  unexplained: {u}" for u in validation["unexplained"]]
    return "\n".join(lines), summary

