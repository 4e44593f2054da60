"""`kcm pipeline`: the trace pipeline on Spark (docs/pipeline.md).

    kcm pipeline generate --runs N --steps M [--set knob=value ...] [--calm-every N] --out DIR
    kcm pipeline ingest --kafka-log PATH... [--log-pattern PATTERN] [--trace PATH...] --out DIR
    kcm pipeline check --in DIR --out DIR [--validate-sample FRACTION|all]
    kcm pipeline report --in DIR [--json]

Every stage takes `--master` (default `local[*]`). Exit codes: 0 clean, 1 violations found, 2 unusable
invocation, 3 input quarantined or missing (the check read less than the ingest manifest promised). The same
parser serves `spark-submit tools/pipeline.py ...`, where
the master spark-submit was given wins.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kcm.conformance.verify.pipeline import spark_progress
from kcm.spec.atomic_output import OutputError
from kcm.spec.verdicts import UNOBSERVED
from kcm.spec.vocabulary import KnobError, Knobs
from kcm.tools.errors import EXIT_USAGE, Parser, UsageError, at_least, count
from kcm.tools.progress import Reporter, add_option
from kcm.tools.report import kinds
from kcm.tools.report.command import html_option
from kcm.tools.sim import CALM_EVERY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(subparsers: Any) -> None:
    """Add `pipeline` and its stages to the subcommands of the `kcm` parser."""
    pipeline = subparsers.add_parser("pipeline", help="generate, ingest, check and report trace corpora on Spark")
    add_stages(pipeline)
    pipeline.set_defaults(handler=cmd_pipeline)


def add_stages(parser: argparse.ArgumentParser) -> None:
    stages = parser.add_subparsers(dest="stage", required=True)
    generate = stages.add_parser("generate", help="a simulation campaign, one seed per Spark task")
    generate.add_argument("--runs", type=at_least(1), required=True, help="simulation runs, one Spark task each")
    generate.add_argument("--steps", type=count, required=True, help="steps per run")
    generate.add_argument("--seed", type=int, default=0, help="base of the derived seeds (default 0)")
    generate.add_argument("--set", dest="settings", action="append", default=[], metavar="KNOB=VALUE",
                          help="a design knob, as in kcm sim (repeatable)")
    generate.add_argument("--calm-every", type=int, default=CALM_EVERY, metavar="N",
                          help=f"storm steps between calm phases, as in kcm sim (default {CALM_EVERY}; 0 = never)")
    generate.add_argument("--out", required=True, help="pipeline directory to write (events/, manifest.json)")
    ingest = stages.add_parser("ingest", help="Kafka state-change logs and v1 JSON Lines into the layout")
    ingest.add_argument("--kafka-log", nargs="+", default=[], metavar="PATH",
                        help="Kafka state-change.log / controller.log files: each broker's log, with its rotated "
                             "files (NAME.log.YYYY-MM-DD-HH, gzip or not), one run")
    ingest.add_argument("--log-pattern", default=None, metavar="PATTERN",
                        help="the log4j ConversionPattern of the Kafka logs (default: detected per file)")
    ingest.add_argument("--trace", nargs="+", default=[], metavar="PATH", help="trace files (JSON Lines, v2 or v1)")
    ingest.add_argument("--out", required=True, help="pipeline directory to write (events/, manifest.json)")
    check = stages.add_parser("check", help="invariants, transition tables and Z3 step validation")
    check.add_argument("--in", dest="input", required=True, help="pipeline directory to check (its events/)")
    check.add_argument("--out", required=True, help="directory for the verdicts, violations, coverage and summary")
    check.add_argument("--validate-sample", default="0.1", metavar="FRACTION|all",
                       help="share of the runs validated step by step with Z3 (default 0.1)")
    report = stages.add_parser("report", help="the summary of a checked directory")
    report.add_argument("--in", dest="input", required=True, help="a directory `kcm pipeline check` wrote")
    report.add_argument("--json", action="store_true", help="print summary.json instead of the text")
    html_option(report)
    for stage in (generate, ingest, check, report):
        add_option(stage)
        stage.add_argument("--master", default=None, help="Spark master (default local[*])")
        stage.add_argument("--shuffle-partitions", type=int, default=None, help=argparse.SUPPRESS)


def _fraction(text: str) -> float:
    if text == "all":
        return 1.0
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--validate-sample: {text!r} is neither a fraction nor 'all'") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"--validate-sample: {value} is outside 0..1")
    return value


def cmd_pipeline(args: argparse.Namespace, submitted: bool = False) -> int:
    from kcm.conformance.pipeline import jobs as pl

    if args.stage == "report":
        text, summary = pl.report(Path(args.input))
        print(json.dumps(summary, indent=1, sort_keys=True) if args.json else text)
        if args.html:
            kinds.pipeline_page(Path(args.input), Path(args.html))
        return _exit_code(summary)
    knobs = Knobs().with_settings(args.settings) if args.stage == "generate" else Knobs()
    fraction = _fraction(args.validate_sample) if args.stage == "check" else 0.0
    _INPUT_CHECKS[args.stage](args)
    started = time.perf_counter()
    # The output is claimed before Spark starts (seconds of JVM start-up): a folder that cannot be written,
    # or that another kcm process writes, is refused at once.
    with _claimed(args) as out:
        spark = _session(args, submitted)
        try:
            with Reporter(args.progress) as reporter, spark_progress(reporter) as progress:
                code = _run_stage(spark, args, out, knobs, fraction, progress, started)
        except KeyboardInterrupt:
            from kcm.conformance.pipeline.session import end_jvm

            end_jvm()  # the JVM goes with kcm (its group is kcm's): no stop, whose errors would be all it printed
            raise
        spark.stop()
    if args.stage == "check":
        code = _report_check(Path(args.out), started)
    return code


@contextmanager
def _claimed(args: argparse.Namespace) -> Iterator[Path]:
    """The stage's output, held against other kcm writers: `check` builds a new folder, swapped in whole when
    it is done; `generate` and `ingest` add runs to the folder in place."""
    from kcm.spec.atomic_output import claimed_folder, claimed_in_place

    out = Path(args.out)
    if out.is_dir() and not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(out, "cannot write: permission denied")
    with (claimed_folder(out) if args.stage == "check" else claimed_in_place(out)) as place:
        yield place


def _session(args: argparse.Namespace, submitted: bool) -> SparkSession:
    from kcm.conformance.pipeline.session import DEFAULT_MASTER, spark_session

    master = args.master or (None if submitted else DEFAULT_MASTER)
    return spark_session(master, shuffle_partitions=args.shuffle_partitions)  # SparkStartError: one line, exit 2


# -- input errors, said before Spark starts (seconds of JVM start-up); the stages check again ------------------------


def _writable_out(out: str) -> None:
    if Path(out).exists() and not Path(out).is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")


def _generate_inputs(args: argparse.Namespace) -> None:
    if args.calm_every < 0:
        raise UsageError("--calm-every must not be negative (0: never calm)")
    _writable_out(args.out)


def _ingest_inputs(args: argparse.Namespace) -> None:
    if args.log_pattern is not None:
        from kcm.conformance.pipeline.kafka_log import compile_pattern

        compile_pattern(args.log_pattern)
    if not args.kafka_log and not args.trace:
        raise UsageError("nothing to ingest: give --kafka-log or --trace files")
    for option, paths in (("--kafka-log", args.kafka_log), ("--trace", args.trace)):
        for path in map(Path, paths):
            if path.is_dir():
                raise UsageError(f"{option} {path}: a directory, not a file")
            if not path.is_file():
                raise UsageError(f"{option} {path}: no such file")
    _writable_out(args.out)
    from kcm.conformance.pipeline.ingest import taken_runs
    from kcm.conformance.pipeline.sources import plan

    plan(args.kafka_log, args.trace, taken_runs(Path(args.out)))


def _check_inputs(args: argparse.Namespace) -> None:
    """`--in` is a pipeline directory (an `events/` folder) or, as `check` also reads, the events folder itself;
    `--out`, a folder of its own (it is replaced whole), neither `--in` nor a folder `--in` is in."""
    from kcm.conformance.pipeline.jobs import EVENTS, read_manifest

    folder = Path(args.input)
    if not folder.is_dir():
        raise UsageError(f"--in {folder}: {'not a directory' if folder.exists() else 'no such directory'}")
    if not (folder / EVENTS).is_dir() and next(folder.rglob("*.parquet"), None) is None:
        raise UsageError(f"--in {folder}: not a pipeline directory (no {EVENTS}/ folder, no Parquet files)")
    _writable_out(args.out)
    out = Path(args.out).resolve()
    if out == folder.resolve() or out in folder.resolve().parents:
        raise UsageError(f"--out {args.out}: holds --in {folder}, and --out is replaced whole: give another folder")
    read_manifest(folder)  # a manifest kcm cannot read is said now, not after Spark's start


_INPUT_CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "generate": _generate_inputs, "ingest": _ingest_inputs, "check": _check_inputs}


def _run_stage(spark: SparkSession, args: argparse.Namespace, out: Path, knobs: Knobs, fraction: float,
               progress: Callable[[str, int, int], None], started: float) -> int:
    from kcm.conformance.pipeline import jobs as pl
    from kcm.conformance.pipeline.ingest import ingest

    if args.stage == "generate":
        counts = pl.generate(spark, args.runs, args.steps, knobs, out, args.seed,
                             config={"calm_every": args.calm_every}, progress=progress)
        print(f"generated {args.runs} runs, {counts.read:,} events into {out / pl.EVENTS} "
              f"({time.perf_counter() - started:.1f} s)")
        return pl.EXIT_CLEAN
    if args.stage == "ingest":
        counts = ingest(spark, args.kafka_log, args.trace, out, progress=progress, log_pattern=args.log_pattern)
        print(f"ingested: {pl.accounting(counts.to_json())} (see {out / pl.QUARANTINE})")
        if not counts.checked:
            print(f"no event in these inputs: they give a check nothing to verify (verdict {UNOBSERVED})")
        return pl.EXIT_QUARANTINED if counts.quarantined or counts.files_quarantined else pl.EXIT_CLEAN
    pl.check(spark, Path(args.input), out, fraction, progress=progress)
    return pl.EXIT_CLEAN


def _report_check(out: Path, started: float) -> int:
    """The report of the check just published in `out`, and its exit code; records its input's manifest
    promised that the check did not read are named on stderr."""
    from kcm.conformance.pipeline import jobs as pl

    text, summary = pl.report(out)
    print(text)
    print(f"({time.perf_counter() - started:.1f} s; tables in {out})")
    missing = summary.get("incomplete", [])
    if missing:
        more = f"; and {len(missing) - 3:,} more run(s) (summary.json lists them)" if len(missing) > 3 else ""
        print(f"kcm: error: --in {summary['input']}: the input lacks records its manifest promised: "
              f"{'; '.join(missing[:3])}{more}", file=sys.stderr)
    code = _exit_code(summary)
    if code == EXIT_USAGE:
        print(f"kcm: error: --in {summary['input']}: nothing checked (no event in the input): the check does not "
              "pass", file=sys.stderr)
    return code


def _exit_code(summary: dict[str, Any]) -> int:
    from kcm.conformance.pipeline import jobs as pl

    return pl.summary_exit_code(summary)


def main(argv: Sequence[str] | None = None, submitted: bool = False) -> int:
    """`kcm pipeline ...` on its own: what `spark-submit tools/pipeline.py ...` runs."""
    parser = Parser(prog="kcm pipeline", description="The trace pipeline on Spark.")
    add_stages(parser)
    try:
        args = parser.parse_args(argv)
        return cmd_pipeline(args, submitted)
    except (UsageError, KnobError, ValueError, OutputError) as err:
        print(f"kcm: error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    # Under spark-submit the master comes from its --master, unless the stage is given one too.
    sys.exit(main(submitted=True))
