"""The fuzz campaign of the command line: every command fed generated bad input (tests/fuzz_inputs.py) answers
the way kcm promises (the exit codes of kcm.tools.errors), with no traceback, no file left half-written and no
process left.

The oracle, per case:

- exit code: a case whose input breaks the documented rules (`Case.bad`: a trace that breaks the format, an
  option value out of its range, an output that cannot be written, a bad environment) must exit 2; a pipeline
  ingest may quarantine instead (3), and refuse the whole job (2) only where some file has no line to judge.
  A case whose input may still be valid (a prefix of a trace, a value changed inside an action's arguments,
  which the format leaves to the engines, a document `kcm report` may still draw) may also end in a decision:
  0 or 1 (`Case.allowed`).
- stderr never holds a traceback, and no exception escapes `main()`; on exit 2 it is exactly one non-empty line,
  starting `kcm: error:`.
- files: no claim left behind (`.kcm-tmp-`, `.kcm-old-`, `.kcm-lock` names, kcm.spec.atomic_output); every
  trace, JSON document or page a case wrote is whole (it reads back); an output the case named is absent (or as it
  was before) after exit 2, and there, whole, after 0, 1 or 3.
- processes: the command leaves no child of its own running (in-process: no new child of the test process;
  in a subprocess: this process is the subreaper, so an orphan of kcm's is seen here).
- time: a bad input is refused in seconds; a case still running after its timeout is a failure.

Cost: most cases run in this process through `kcm.tools.cli.main(argv)` (about 50 ms each instead of seconds of
interpreter start-up), in a fresh folder with fds 1 and 2 captured; a sample runs as real `python -m
kcm.tools.cli` subprocesses (which also proves the exit path of a real process), and the pipeline ingests,
which start Spark, only as subprocesses, only under `-m long`. The default suite runs about 200 cases,
derandomized; `-m long` runs KCM_FUZZ_CASES cases (default 10,000), new ones each run unless
KCM_FUZZ_DERANDOMIZE=1 (CI's), and prints the count per family.

    bash tools/dev test tests/test_fuzz_cli.py
    KCM_FUZZ_CASES=10000 bash tools/dev test -m long tests/test_fuzz_cli.py
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final

import pytest
from fuzz_inputs import A_DIR, A_FILE, Case, ingest_case, kinds_of_input, valid_traces
from hypothesis import HealthCheck, Phase, given, settings

from kcm.spec import child_processes
from kcm.spec.atomic_output import LOCK_SUFFIX, TEMP_MARK
from kcm.spec.trace.format import TraceError, read_trace
from kcm.tools.cli import main

LONG_CASES: Final = int(os.environ.get("KCM_FUZZ_CASES", "10000"))
# KCM_FUZZ_DERANDOMIZE=1: the long campaign draws the same cases every run (CI's bounded budget, which must not
# pass or fail by the draw); by default it draws new ones each run, to find what no earlier run did.
LONG_DERANDOMIZED: Final = os.environ.get("KCM_FUZZ_DERANDOMIZE", "") == "1"
DEFAULT_CASES: Final = 200
# The share of the cases each family of input gets: the pure-Python trace readers take half; the families that may
# start TLC (a poison kcm misses costs seconds) the least.
WEIGHTS: Final = {"trace": 100, "trace-args": 12, "report": 16, "sim": 16, "verify": 10, "prove": 10, "zk": 6,
                  "pipeline-args": 10, "check": 5, "hunt": 5, "review": 5, "environment": 5}
# One case in this many of a family runs as a subprocess (the rest in this process).
SUBPROCESS_EVERY: Final = 200
# Pipeline ingests on Spark under -m long (each starts a JVM: about 20 s).
SPARK_CASES: Final = int(os.environ.get("KCM_FUZZ_SPARK_CASES", "6"))
IN_PROCESS_TIMEOUT: Final = 60.0
SUBPROCESS_TIMEOUT: Final = 180.0
REAP_SECONDS: Final = 0.1
LEFTOVER_MARKS: Final = (TEMP_MARK, ".kcm-old-", LOCK_SUFFIX)
ERROR_PREFIX: Final = "kcm: error: "
# Pipeline cases run in this process with Spark out of reach, so that a stage that misses its bad input fails at
# once instead of starting a JVM inside the test process: an answer that names this reached Spark's start-up with
# input it should have refused.
NO_SPARK: Final = "/nonexistent-spark-for-fuzz"

RUN: Counter[str] = Counter()


def _budget(family: str, total: int) -> int:
    return max(2, round(total * WEIGHTS[family] / sum(WEIGHTS.values())))


# Families whose cases may run TLC for seconds: a failure is reported as drawn, not shrunk (each shrinking step
# would run TLC again); their cases are small already.
UNSHRUNK: Final = frozenset({"check", "hunt", "review", "environment"})


def _settings(total: int, family: str, long: bool) -> settings:
    phases = [Phase.explicit, Phase.generate] if family in UNSHRUNK else list(Phase)
    return settings(max_examples=_budget(family, total), deadline=None, derandomize=not long or LONG_DERANDOMIZED,
                    database=None, suppress_health_check=list(HealthCheck), print_blob=long, phases=phases)


# -- running one case ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    code: int | None
    stdout: str
    stderr: str
    escaped: str  # the traceback of an exception that escaped main(), if one did
    timed_out: bool = False


class CaseTimeout(BaseException):
    """Raised in the main thread when an in-process case runs past its time (not an Exception: kcm must not
    be able to catch it)."""


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout


def _child_stats() -> Iterator[tuple[int, str, int]]:
    """(pid, state, session) of every child of this process, read off /proc."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # ended meanwhile
            continue
        # Fields after the command name (which may hold spaces and parentheses): state, ppid, pgrp, session.
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[1]) == me:
            yield int(stat.parent.name), fields[0], int(fields[3])


def _children() -> set[int]:
    """The live (not zombie) children of this process: its own, and the orphans it adopted as subreaper."""
    return {pid for pid, state, _ in _child_stats() if state != "Z"}


def _reap_adopted() -> None:
    """Reaps the orphans this process adopted once they end: an unreaped zombie would keep its process group
    alive, and kcm, ending that group, would wait for it in vain. kcm's own children are left to kcm: a child kcm
    started leads a session of its own (child_processes.spawn) or shares this process's; an adopted orphan, a
    grandchild, does neither."""
    mine = os.getsid(0)
    for pid, state, session in list(_child_stats()):
        if state == "Z" and session not in (mine, pid):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


@contextlib.contextmanager
def _adopting() -> Iterator[None]:
    """This process as the subreaper of everything kcm starts (so that an orphan kcm leaves is seen here), with
    a thread reaping the adopted orphans as they end."""
    done = threading.Event()

    def reap() -> None:
        while not done.wait(REAP_SECONDS):
            _reap_adopted()

    _subreaper(True)
    reaper = threading.Thread(target=reap, name="kcm-fuzz-reaper", daemon=True)
    reaper.start()
    try:
        yield
    finally:
        done.set()
        reaper.join()
        _subreaper(False)


@dataclass
class Captured:
    stdout: str = ""
    stderr: str = ""


@contextlib.contextmanager
def _captured() -> Iterator[Captured]:
    """fds 1 and 2 (and sys.stdout, sys.stderr) into two files, for whatever writes there: Python, rich, a JVM;
    their text is in the Captured once the block ends."""
    captured = Captured()
    with tempfile.TemporaryDirectory(prefix="kcm-fuzz-io-") as folder:
        out_path, err_path = Path(folder, "stdout"), Path(folder, "stderr")
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        streams = sys.stdout, sys.stderr
        with open(out_path, "wb") as out_file, open(err_path, "wb") as err_file:
            os.dup2(out_file.fileno(), 1)
            os.dup2(err_file.fileno(), 2)
            # The encodings and error handlers of a real process's streams: a path that is not UTF-8 must print
            # as it would there.
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), encoding="utf-8",
                                          errors="surrogateescape", line_buffering=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), encoding="utf-8",
                                          errors="backslashreplace", line_buffering=True)
            try:
                yield captured
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        stream.flush()
                sys.stdout, sys.stderr = streams
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
        captured.stdout = out_path.read_text(errors="replace")
        captured.stderr = err_path.read_text(errors="replace")


def _overridden(environ: dict[str, str], env: tuple[tuple[str, str | None], ...]) -> dict[str, str]:
    """`environ` with a case's variables set (None: unset)."""
    out = dict(environ)
    for name, value in env:
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


@contextlib.contextmanager
def _environment(env: tuple[tuple[str, str | None], ...]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(_overridden(saved, env))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_in_process(argv: tuple[str, ...], env: tuple[tuple[str, str | None], ...]) -> Answer:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)}
    code: int | None = None
    escaped = ""
    timed_out = False
    # The children of this case alone are ended after it: the test process's own (a Spark JVM a test before
    # started and kcm adopted) are not the case's to end.
    before = set(child_processes._owned)
    with _environment(env), _captured() as captured:
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, IN_PROCESS_TIMEOUT)
        try:
            code = main(list(argv))
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 2
        except CaseTimeout:
            timed_out = True
        except BaseException:  # anything escaping main() is the finding
            escaped = traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
            for pid in set(child_processes._owned) - before:
                child_processes.end(pid, grace=1.0)
    return Answer(code, captured.stdout, captured.stderr, escaped, timed_out)


_PR_SET_CHILD_SUBREAPER: Final = 36


def _subreaper(on: bool) -> None:
    """Orphans of a kcm subprocess are re-parented to this process, where `_children` sees them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


def run_subprocess(argv: tuple[str, ...], env: tuple[tuple[str, str | None], ...], cwd: Path) -> Answer:
    process = subprocess.Popen([sys.executable, "-m", "kcm.tools.cli", *argv], cwd=cwd,
                               env=_overridden(dict(os.environ), env), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        out, err = process.communicate(timeout=SUBPROCESS_TIMEOUT)
        timed_out = False
    except subprocess.TimeoutExpired:
        # As Ctrl-C would: kcm ends what it started and exits; a kcm deaf to it is killed.
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=child_processes.GRACE_SECONDS * 3)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        timed_out = True
    return Answer(process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), "", timed_out)


# -- the oracle ----------------------------------------------------------------------------------------------------


def _layout(folder: Path, case: Case) -> None:
    """The case's files, and what every case may name: a valid trace, a folder, a file."""
    (folder / A_DIR).mkdir()
    (folder / A_FILE).write_text("a file, not a folder\n")
    (folder / "good.jsonl").write_bytes(valid_traces()[0])
    for name, content in case.files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _snapshot(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _lines(text: str) -> list[str]:
    """Lines as a terminal or a pipe's reader ends them (not str.splitlines, which also breaks at a form feed
    or a vertical tab, which a file name may hold)."""
    return re.split(r"\r\n|\r|\n", text)


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _whole(path: Path, trace: bool) -> str | None:
    """Why a file a command wrote is not whole, or None: a trace reads back, JSON Lines are whole lines of JSON."""
    try:
        if trace:
            for _ in read_trace(path):
                pass
        elif path.suffix == ".jsonl":
            text = path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):
                return "its last line is cut"
            for line in text.split("\n")[:-1]:
                json.loads(line)
        elif path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
        elif path.suffix == ".html" and not path.read_text(encoding="utf-8").rstrip().endswith("</html>"):
            return "a page that does not end in </html>"
    except (TraceError, ValueError, OSError) as err:
        return f"does not read back: {err}"
    return None


def problems(case: Case, answer: Answer, folder: Path, before: dict[Path, bytes], left: set[int]) -> list[str]:
    found = []
    if answer.timed_out:
        found.append(f"no answer within {IN_PROCESS_TIMEOUT:.0f} s (in this process) or {SUBPROCESS_TIMEOUT:.0f} s "
                     "(a subprocess)")
    if answer.escaped:
        found.append(f"an exception escaped main(): {_last_line(answer.escaped)}")
    if "Traceback (most recent call last)" in answer.stderr:
        found.append(f"a traceback on stderr: {_last_line(answer.stderr)}")
    # Spark out of reach is itself said in one line before any start (SPARK_HOME=... has no spark-submit): that
    # is the refusal expected of input that only Spark can judge (a master), not a start.
    said = f"kcm: error: SPARK_HOME={NO_SPARK}: " in answer.stderr
    if NO_SPARK in answer.escaped or (NO_SPARK in answer.stderr and not said):
        found.append("went on to start Spark with input it should have refused first")
    if answer.code is not None and answer.code not in case.allowed and not answer.timed_out:
        found.append(f"exit {answer.code}, expected {' or '.join(map(str, sorted(case.allowed)))}"
                     f" (stdout: {answer.stdout.strip()[:200]!r}, stderr: {answer.stderr.strip()[:300]!r})")
    if answer.code == 2:
        lines = [line for line in _lines(answer.stderr) if line.strip()]
        if len(lines) != 1 or not lines[0].startswith(ERROR_PREFIX):
            found.append(f"exit 2 with {len(lines)} lines on stderr, not one `{ERROR_PREFIX}...`: "
                         f"{answer.stderr.strip()[:400]!r}")
    for path in folder.rglob("*"):
        if any(mark in path.name for mark in LEFTOVER_MARKS):
            found.append(f"left behind: {path.relative_to(folder)}")
    for path in sorted(folder.rglob("*")):
        if path.is_file() and before.get(path) != path.read_bytes() and not path.name.startswith("."):
            why = _whole(path, path.suffix == ".jsonl" and str(path.relative_to(folder)) in case.outputs)
            if why:
                found.append(f"{path.relative_to(folder)} written but {why}")
    if answer.code in (0, 1, 3):  # a decision (or a quarantine) is written whole
        found.extend(f"{name} not written, though the command answered {answer.code}" for name in case.outputs
                     if not (folder / name).is_file())
    else:
        for name in case.outputs:
            path = folder / name
            if name and path.is_file() and before.get(path) != path.read_bytes():
                found.append(f"{name} written or changed by a command that failed (exit {answer.code})")
    if left:
        found.append(f"processes left running: {sorted(left)}")
    return found


def run_case(case: Case, family: str, subprocess_run: bool = False) -> list[str]:
    RUN[family] += 1
    folder = Path(tempfile.mkdtemp(prefix="kcm-fuzz-"))
    cwd = os.getcwd()
    try:
        _layout(folder, case)
        before = _snapshot(folder)
        children = _children()
        if subprocess_run:
            answer = run_subprocess(case.argv, case.env, folder)
        else:
            os.chdir(folder)
            try:
                answer = run_in_process(case.argv, case.env)
            finally:
                os.chdir(cwd)
        left = _children() - children
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        found = problems(case, answer, folder, before, left)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return found


def _explain(case: Case, found: list[str]) -> str:
    env = " ".join(f"{k}={v}" for k, v in case.env)
    return (f"kcm {' '.join(map(repr, case.argv))}{' with ' + env if env else ''}\ninput: {case.label}\n"
            + "\n".join(f"- {p}" for p in found))


def check_case(case: Case, family: str, subprocess_run: bool = False) -> None:
    found = run_case(case, family, subprocess_run)
    assert not found, _explain(case, found)


# -- the campaign ----------------------------------------------------------------------------------------------------

FAMILIES: Final = tuple(WEIGHTS)


@pytest.fixture(scope="module", autouse=True)
def count_report(request: pytest.FixtureRequest) -> Iterator[None]:
    RUN.clear()
    with _adopting():
        yield
    plugins = request.config.pluginmanager
    reporter: Any = plugins.get_plugin("terminalreporter")
    capture: Any = plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None and RUN:
        # Past the capture, so that the count shows in every run, passed or not.
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nkcm fuzz campaign: {sum(RUN.values())} cases "
                                f"({', '.join(f'{k} {v}' for k, v in sorted(RUN.items()))})")


def _family_test(family: str, total: int, long: bool) -> Any:
    strategy = kinds_of_input()[family]

    @_settings(total, family, long)
    @given(case=strategy)
    def test(case: Case) -> None:
        # Every case of a pipeline stage runs with Spark out of reach (NO_SPARK); a sample of the cases runs as
        # real subprocesses.
        if family == "pipeline-args":
            case = Case(case.argv, case.files, (*case.env, ("SPARK_HOME", NO_SPARK)), case.allowed, case.label,
                        case.outputs)
        check_case(case, family, subprocess_run=RUN[family] % SUBPROCESS_EVERY == SUBPROCESS_EVERY // 2)

    return test


@pytest.mark.parametrize("family", FAMILIES)
def test_bad_input_is_refused_in_one_line(family: str) -> None:
    """The default suite's small, derandomized budget: about DEFAULT_CASES cases over every family."""
    _family_test(family, DEFAULT_CASES, long=False)()


@pytest.mark.parametrize("family", ["trace", "sim"])
def test_a_real_process_refuses_bad_input_in_one_line(family: str) -> None:
    """One case per family through a real `python -m kcm.tools.cli`: the exit path of a process, not of main()."""
    strategy = kinds_of_input()[family]

    @settings(max_examples=1, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def test(case: Case) -> None:
        check_case(case, family, subprocess_run=True)

    test()


@pytest.mark.long
@pytest.mark.parametrize("family", FAMILIES)
def test_fuzz_campaign(family: str) -> None:
    """KCM_FUZZ_CASES cases (default 10,000) over every family, randomized; one case in SUBPROCESS_EVERY of a
    family runs as a subprocess."""
    _family_test(family, LONG_CASES, long=True)()


@pytest.mark.long
def test_fuzz_pipeline_ingest() -> None:
    """Mutated traces and Kafka logs through `kcm pipeline ingest` on Spark, KCM_FUZZ_SPARK_CASES jobs (default 6)
    of several files each; not shrunk (each step costs a JVM start)."""
    if SPARK_CASES < 1:
        pytest.skip("KCM_FUZZ_SPARK_CASES is 0: no Spark case asked for")

    @settings(max_examples=SPARK_CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate], print_blob=True, derandomize=LONG_DERANDOMIZED)
    @given(case=ingest_case())
    def test(case: Case) -> None:
        check_case(case, "pipeline-ingest", subprocess_run=True)

    test()
