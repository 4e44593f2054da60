"""The one way kcm starts Spark: local or on a cluster, workers on the driver's own interpreter.

Spark launches Python workers with `PYSPARK_PYTHON`; unset, it would pick whatever `python3` is on the
PATH, which lacks kcm and pyarrow. Pointing it (and the driver) at `sys.executable` keeps one
interpreter, so one set of packages, on both sides. Under spark-submit, an interpreter the submitter chose
(`PYSPARK_PYTHON`, or `spark.pyspark.python`, which spark-submit hands the driver as `PYSPARK_PYTHON`)
stays: on a cluster it may be an environment shipped to the executors (docs/pipeline.md, "On a cluster").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, Final

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark import SparkConf, SparkContext, java_gateway
from pyspark.errors import PySparkRuntimeError
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from kcm.spec import child_processes

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
    _forget_an_ended_jvm()
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


def _forget_an_ended_jvm() -> None:
    """PySpark keeps its JVM for the next session of the process, even once the JVM has ended: kcm ends the JVM
    it owns on Ctrl-C, and a caller of the command line in its own process (a test) goes on to the next
    session, which must start a JVM anew rather than talk to a dead one."""
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)  # none under spark-submit, whose JVM is not ours
    if process is None or process.poll() is None:
        return
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def start_filtered_jvm(conf: SparkConf) -> None:
    """Start the driver's JVM (with `conf`, which holds the settings only a JVM's start reads, such as the driver
    memory) and its context, its stderr forwarded to this process's without the incubator-module line.

    The JVM leads a process group of its own, owned by kcm (kcm.spec.child_processes) and ended with it, on
    Ctrl-C too (`end_jvm` then takes on its Python workers' group); ended otherwise, the JVM takes its workers
    with it (their daemon ends when the JVM's pipe to it closes). Until the context is up, what the JVM prints is
    held back: a JVM that cannot start says why in it, which becomes the one line of a SparkStartError.

    Nothing to do when a JVM is already there: an earlier session of this process started it (PySpark keeps it
    for the next one), or spark-submit did, whose JVM and output are the submitter's.
    """
    if SparkContext._gateway is not None or submitted():
        return
    check_java()
    read, write = os.pipe()
    output = JVM_STDERR
    output.hold()
    reader = threading.Thread(target=output.forward, args=(os.fdopen(read, "rb"),), name="kcm-jvm-stderr",
                              daemon=True)
    reader.start()
    # launch_gateway waits seconds for the JVM's port: the JVM is owned from its fork on, so that a Ctrl-C
    # meanwhile ends it too. PySpark gives no hook between the two, but its module's name for Popen.
    java_gateway.Popen = _OwnedPopen  # type: ignore[attr-defined,assignment]
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": write, "start_new_session": True})  # type: ignore[no-untyped-call]
    except PySparkRuntimeError:
        gateway = None
    finally:
        java_gateway.Popen = subprocess.Popen  # type: ignore[attr-defined]
        os.close(write)  # the JVM's copy is its own: at its exit, the reader sees the end
    if gateway is None:
        reader.join(timeout=_JVM_EXIT_SECONDS)
        raise SparkStartError(f"Spark did not start: {output.cause() or 'its JVM exited at once'}")
    pid = gateway.proc.pid
    _jvm.append(pid)
    try:
        SparkContext(conf=conf, gateway=gateway)
    except Py4JJavaError as err:
        child_processes.end(pid)
        raise SparkStartError(f"Spark did not start: {_java_message(err)}") from None
    output.release()


def check_java() -> None:
    """Spark's launcher runs `$JAVA_HOME/bin/java`, or the `java` on the PATH when JAVA_HOME is unset
    (pyspark/bin/spark-class): where there is none, say so before it fails with no word of why."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not (java.is_file() and os.access(java, os.X_OK)):
            raise SparkStartError(f"JAVA_HOME={home}: no bin/java there (Spark needs Java 17 or newer)")
    elif shutil.which("java") is None:
        raise SparkStartError("no java on the PATH and JAVA_HOME is not set (Spark needs Java 17 or newer)")
    # PySpark starts its JVM through $SPARK_HOME/bin/spark-submit when SPARK_HOME is set (pyspark/java_gateway.py).
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home and not (Path(spark_home) / "bin" / "spark-submit").is_file():
        raise SparkStartError(f"SPARK_HOME={spark_home}: no bin/spark-submit there (unset it to use PySpark's own)")


class SparkStartError(ValueError):
    """Spark could not start (no Java, a master it cannot use): the cause, in one line, a user's error as the
    command line reports them (exit 2), for `kcm verify`'s stage too."""


class _OwnedPopen(subprocess.Popen[bytes]):
    """A process kcm owns (with its group) from the moment it is started."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        child_processes.adopt(self.pid, leads_group=True)


_jvm: list[int] = []  # the JVM this process started, once started


def end_jvm() -> None:
    """Before kcm ends the JVM (Ctrl-C): its output, which is no news then, is no longer passed on, and the
    process group of its Python workers' daemon (PySpark's daemon.py leads a group of its own, `setpgid(0, 0)`,
    outside the JVM's) is owned too, so that kcm ends them with it."""
    JVM_STDERR.mute()
    for jvm in _jvm:
        for pid in _children(jvm):
            child_processes.adopt(pid, leads_group=_group_of(pid) == pid)


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
    return found


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _java_message(err: Py4JJavaError) -> str:
    text = str(err.java_exception.getMessage() or err.java_exception.toString())
    return text.splitlines()[0] if text else "the JVM refused to start a context"


class JvmStderr:
    """The JVM's stderr, copied line by line to `fd` (the descriptor the JVM would have inherited), less the
    incubator line; read to the end whatever happens, so that the JVM never blocks on a full pipe. While
    held, lines are kept instead (the last of them name a failed start's cause); muted, dropped."""

    def __init__(self, fd: int = 2) -> None:
        self.fd = fd
        self.held: list[bytes] | None = None
        self.muted = False
        self.lock = threading.Lock()

    def hold(self) -> None:
        with self.lock:
            self.held, self.muted = [], False

    def release(self) -> None:
        with self.lock:
            held, self.held = self.held or [], None
            for line in held:
                self._write(line)

    def mute(self) -> None:
        with self.lock:
            self.muted, self.held = True, None

    def cause(self) -> str | None:
        """What a JVM that did not start said of why: its exception's message, else its last line."""
        with self.lock:
            lines = [line.decode(errors="replace").strip() for line in self.held or []]
        lines = [line for line in lines if line]
        for line in lines:
            if line.startswith("Exception in thread") or line.startswith("Error:"):
                return line.split(": ", 1)[-1] if ": " in line else line
        return lines[-1] if lines else None

    def forward(self, pipe: IO[bytes]) -> None:
        with pipe:
            for line in pipe:
                if line.rstrip(b"\r\n") == INCUBATOR_WARNING:
                    continue
                with self.lock:
                    if self.held is not None:
                        self.held.append(line)
                    elif not self.muted:
                        self._write(line)

    def _write(self, line: bytes) -> None:
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self.fd, view):]
        except OSError:  # our stderr is gone: keep draining
            pass


JVM_STDERR: Final = JvmStderr()
_JVM_EXIT_SECONDS: Final = 10.0


def forward_stderr(pipe: IO[bytes], fd: int = 2) -> None:
    """Copy a JVM's stderr to `fd`, less the incubator line (JvmStderr, neither held nor muted)."""
    JvmStderr(fd).forward(pipe)


def _default_parallelism(master: str | None) -> int:
    if master and master.startswith("local[") and master.endswith("]"):
        inside = master[len("local[") : -1]
        if inside.isdigit():
            return max(2, 2 * int(inside))
    return 2 * (os.cpu_count() or 2)
