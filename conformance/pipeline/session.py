"""The one way kcm starts Spark: local or on a cluster, workers on the driver's own interpreter.

Spark launches Python workers with `PYSPARK_PYTHON`; unset, it would pick whatever `python3` is on the
PATH, which lacks kcm and pyarrow. Pointing it (and the driver) at `sys.executable` keeps one
interpreter, so one set of packages, on both sides. Under spark-submit, an interpreter the submitter chose
(`PYSPARK_PYTHON`, or `spark.pyspark.python`, which spark-submit hands the driver as `PYSPARK_PYTHON`)
stays: on a cluster it may be an environment shipped to the executors (docs/pipeline.md, "On a cluster").
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Final

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

DEFAULT_MASTER: Final = "local[*]"
# Local mode runs the executors inside the driver's JVM. The events go from the files to the Python workers
# without crossing the JVM, which holds the runs' results and, for files that mix runs, the shuffle (spilled
# to disk past its share): 2 GiB keeps the JVM and the workers within 4 GiB (docs/performance.md).
DRIVER_MEMORY: Final = "2g"
# log4j2.properties at level error: without it Spark's defaults print WARN lines around kcm's own output;
# spark-defaults.conf picks the JVM's throughput collector.
CONF_DIR: Final = Path(__file__).parent / "spark_conf"
# Spark's launcher puts --add-modules=jdk.incubator.vector on every JVM it starts (JavaModuleOptions in
# spark-launcher 4.x, from SparkSubmitCommandBuilder), and the JDK prints this line on stderr at boot for any
# incubator module resolved (ModuleBootstrap.checkIncubatingStatus): no JVM option takes an added module out
# again or silences the line, so the driver's stderr goes through a filter that drops it.
INCUBATOR_WARNING: Final = b"WARNING: Using incubator modules: jdk.incubator.vector"


def use_this_interpreter() -> None:
    if submitted():
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    else:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def submitted() -> bool:
    """Whether spark-submit started this process, and with it the JVM PySpark connects to."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


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
                  shuffle_partitions: int | None = None) -> SparkSession:
    """A session on `master`; None keeps the master spark-submit already chose."""
    use_this_interpreter()
    quiet_local_jvm(master)
    conf = SparkConf().setAppName(app)
    if master is not None:
        conf = conf.setMaster(master)
    partitions = shuffle_partitions or _default_parallelism(master)
    conf = (
        conf.set("spark.driver.memory", DRIVER_MEMORY)
        .set("spark.sql.shuffle.partitions", str(partitions))
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.execution.arrow.pyspark.enabled", "true")
        # Files that mix runs are shuffled by run: a small corpus must not become 200 tasks.
        .set("spark.sql.adaptive.enabled", "true")
        # Bad input must give a quarantined record or a violation, never an exception in the middle of a job.
        .set("spark.sql.ansi.enabled", "false")
    )
    start_filtered_jvm(conf)
    session = SparkSession.builder.config(conf=conf).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def start_filtered_jvm(conf: SparkConf) -> None:
    """Start the driver's JVM (with `conf`, which holds the settings only a JVM's start reads, such as the driver
    memory) and its context, its stderr forwarded to this process's without the incubator-module line.

    Nothing to do when a JVM is already there: an earlier session of this process started it (PySpark keeps it
    for the next one), or spark-submit did, whose JVM and output are the submitter's.
    """
    if SparkContext._gateway is not None or submitted():
        return
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    threading.Thread(target=forward_stderr, args=(gateway.proc.stderr,), name="kcm-jvm-stderr", daemon=True).start()
    SparkContext(conf=conf, gateway=gateway)


def forward_stderr(pipe: IO[bytes], fd: int = 2) -> None:
    """Copy the JVM's stderr, line by line, to `fd` (the descriptor the JVM would have inherited), less the
    incubator line; read to the end whatever happens, so that the JVM never blocks on a full pipe."""
    with pipe:
        for line in pipe:
            if line.rstrip(b"\r\n") == INCUBATOR_WARNING:
                continue
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:  # our stderr is gone: keep draining
                pass


def _default_parallelism(master: str | None) -> int:
    if master and master.startswith("local[") and master.endswith("]"):
        inside = master[len("local[") : -1]
        if inside.isdigit():
            return max(2, 2 * int(inside))
    return 2 * (os.cpu_count() or 2)
