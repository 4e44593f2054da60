"""The pipeline stage of `kcm verify`: a small trace corpus generated and checked on local Spark, one row per
invariant and progress property; and the Spark jobs' progress shown as tasks of a reporter, which `kcm
pipeline` shows too."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from kcm.conformance.reporter import Reporter, Task
from kcm.conformance.verify.stages import StageRow, VerifyContext, unsupported_row
from kcm.spec.verdicts import HOLDS, UNKNOWN, UNOBSERVED, VIOLATED

VERIFY_RUNS, VERIFY_STEPS = 8, 1000


@contextmanager
def spark_progress(reporter: Reporter) -> Iterator[Callable[[str, int, int], None]]:
    """The jobs' progress callback (a Spark stage's tasks done of its total), one reporter task per stage, ended
    when the stage is complete."""
    # A reporter's task need not be its own context manager: both are kept, the one to update, the other to end.
    tasks: dict[str, tuple[AbstractContextManager[Task], Task]] = {}
    ended: set[str] = set()

    def advance(stage: str, done: int, total: int) -> None:
        if stage in ended:
            return
        if stage not in tasks:
            shown = reporter.task(f"spark {stage}", total)
            tasks[stage] = (shown, shown.__enter__())
        tasks[stage][1].update(completed=done)
        if done >= total:
            ended.add(stage)
            tasks.pop(stage)[0].__exit__(None, None, None)

    try:
        yield advance
    finally:
        for shown, _ in tasks.values():
            shown.__exit__(None, None, None)


def stage(ctx: VerifyContext) -> list[StageRow]:
    """A small pipeline run on the default knobs: generate, then check, on local Spark."""
    import tempfile

    if ctx.own_design is not None:
        # The generator's tasks rebuild the cluster from knobs on Spark's workers, where a folder of the
        # driver's need not exist.
        return [unsupported_row("pipeline", ctx.own_design, "the Spark generator runs built-in designs only "
                                "(knobs): `kcm sim --design` traces go through `kcm pipeline ingest`")]

    from kcm.conformance.pipeline import jobs as pl
    from kcm.conformance.pipeline.session import spark_session

    started = time.perf_counter()
    with ctx.reporter.task("spark session (local[2])"):
        spark = spark_session("local[2]", shuffle_partitions=4)
    try:
        with tempfile.TemporaryDirectory(prefix="kcm-pipeline-") as tmp, spark_progress(ctx.reporter) as progress:
            corpus, checked = Path(tmp) / "corpus", Path(tmp) / "checked"
            pl.generate(spark, VERIFY_RUNS, VERIFY_STEPS, ctx.knobs, corpus,
                        config={"calm_every": ctx.config.calm_every}, progress=progress)
            result = pl.check(spark, corpus, checked, validate_sample=0.0, progress=progress)
    finally:
        spark.stop()
    seconds = time.perf_counter() - started
    verdicts = result.summary["verdicts"]
    rows = []
    for name, counts in verdicts.items():
        # A progress property no run judged (no calm phase reached its deadline) is unobserved.
        verdict = VIOLATED if counts.get("violated") else HOLDS if counts.get("holds") else UNOBSERVED
        if result.counts.quarantined:
            verdict = UNKNOWN
        detail = f"{result.runs} runs, {result.counts.checked:,} events on Spark local[2]"
        rows.append(StageRow("pipeline", name, verdict, detail, seconds))
    return rows
