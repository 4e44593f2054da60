"""The one way kcm starts Spark: local or on a cluster, workers on the driver's own interpreter.

Spark launches Python workers with `PYSPARK_PYTHON`; unset, it would pick whatever `python3` is on the
PATH, which lacks kcm and pyarrow. Pointing it (and the driver) at `sys.executable` keeps one
interpreter, so one set of packages, on both sides.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

from pyspark.sql import SparkSession

DEFAULT_MASTER: Final = "local[*]"
# Within the 4 GiB the pipeline is allowed: local mode runs executors inside the driver's JVM.
DRIVER_MEMORY: Final = "3g"
# log4j2.properties at level error: without it Spark's defaults print WARN lines around kcm's own output;
# spark-defaults.conf picks the JVM's throughput collector.
CONF_DIR: Final = Path(__file__).parent / "spark_conf"


def use_this_interpreter() -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def quiet_local_jvm(master: str | None) -> None:
    """Spark logs at level error and, on a local master, binds to loopback; a user's own settings win.

    Both only take effect for a JVM this process starts: under spark-submit the JVM (and its logging) is
    the submitter's.
    """
    os.environ.setdefault("SPARK_CONF_DIR", str(CONF_DIR))
    if master is not None and master.startswith("local"):
        # Without it Spark resolves the host name, finds loopback, and warns that it picked another address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def spark_session(master: str | None = DEFAULT_MASTER, app: str = "kcm-pipeline",
                  shuffle_partitions: int | None = None, codegen: bool = False) -> SparkSession:
    """A session on `master`; None keeps the master spark-submit already chose.

    Without `codegen` Spark interprets expressions: the invariant plans hold hundreds of expressions, and
    compiling them costs minutes that a corpus of less than millions of events never wins back.
    """
    use_this_interpreter()
    quiet_local_jvm(master)
    builder = SparkSession.builder.appName(app)
    if master is not None:
        builder = builder.master(master)
    partitions = shuffle_partitions or _default_parallelism(master)
    builder = (
        builder.config("spark.driver.memory", DRIVER_MEMORY)
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Window functions over a run sort on the run's partition; a small corpus must not become 200 tasks.
        .config("spark.sql.adaptive.enabled", "true")
        # Bad input must give a quarantined record or a violation, never an exception in the middle of a job.
        .config("spark.sql.ansi.enabled", "false")
        # Filters on many derived columns make constraint propagation explode in the optimizer.
        .config("spark.sql.constraintPropagation.enabled", "false")
    )
    if not codegen:
        builder = builder.config("spark.sql.codegen.factoryMode", "NO_CODEGEN").config(
            "spark.sql.codegen.wholeStage", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _default_parallelism(master: str | None) -> int:
    if master and master.startswith("local[") and master.endswith("]"):
        inside = master[len("local[") : -1]
        if inside.isdigit():
            return max(2, 2 * int(inside))
    return 2 * (os.cpu_count() or 2)
