"""kcm.spec.child_processes: what kcm starts ends with it, grandchildren included."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcm.spec import child_processes

# A child that ignores SIGTERM and starts a grandchild in its group: only SIGKILL to the group ends both.
_STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
grandchild = subprocess.Popen([sys.executable, "-c", deaf])
print(grandchild.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture(autouse=True)
def _registry_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test ends what it started: `end_all` must not end the test process's other children (a Spark JVM
    an earlier test started, which kcm owns)."""
    monkeypatch.setattr(child_processes, "_owned", {})


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        status = Path(f"/proc/{pid}/stat")
        if status.exists() and status.read_text().split(")")[-1].split()[0] == "Z":
            return True  # ended, waiting for its parent (init, for an orphan) to reap it
        time.sleep(0.05)
    return False


def test_end_all_ends_a_child_that_ignores_sigterm_and_its_grandchild() -> None:
    child = child_processes.spawn([sys.executable, "-c", _STUBBORN], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    child_processes.end_all(grace=0.5)
    assert _gone(child.pid) and _gone(grandchild)


def test_a_detached_child_is_not_ended() -> None:
    child = child_processes.spawn([sys.executable, "-c", "import time; time.sleep(60)"], detached=True)
    try:
        child_processes.end_all(grace=0.1)
        time.sleep(0.2)
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


_KCM_LIKE = """
import sys, time
from kcm.spec import child_processes
child_processes.install()
child = child_processes.spawn([sys.executable, "-c", "import time; time.sleep(60)"])
try:
    # Inside the try: the test signals as soon as it reads the line.
    print(child.pid, flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    child_processes.end_all()
    sys.exit(130)
"""


def test_sigterm_and_sighup_end_the_children_like_ctrl_c() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        parent = subprocess.Popen([sys.executable, "-c", _KCM_LIKE], stdout=subprocess.PIPE, text=True)
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.send_signal(signum)
        assert parent.wait(timeout=30) == 130
        assert _gone(child), signal.Signals(signum).name


# kcm with a pool of forked workers (kcm mutate), as the command line runs one.
_POOL = """
import multiprocessing, sys, time
from kcm.spec import child_processes
child_processes.install()
try:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print("ready", flush=True)
        pool.map(time.sleep, [60, 60])
except KeyboardInterrupt:
    child_processes.end_all()
    print("kcm: interrupted", file=sys.stderr)
    sys.exit(130)
"""


def test_ctrl_c_at_a_terminal_leaves_a_pool_s_workers_to_kcm_one_line_and_no_worker_left() -> None:
    kcm = subprocess.Popen([sys.executable, "-c", _POOL], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    assert kcm.stdout is not None and kcm.stdout.readline() == "ready\n"
    workers = [int(pid) for pid in Path(f"/proc/{kcm.pid}/task/{kcm.pid}/children").read_text().split()]
    time.sleep(0.3)  # the workers are in their task
    os.killpg(kcm.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
    _, err = kcm.communicate(timeout=60)
    assert (kcm.returncode, err) == (130, "kcm: interrupted\n")
    assert len(workers) == 2 and all(_gone(worker) for worker in workers)


def test_a_group_s_leader_keeps_its_children_in_its_group() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(child_processes._state, "in_my_group", True)
        child = child_processes.spawn([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert os.getpgid(child.pid) == os.getpgid(0) and child_processes._owned[child.pid] is False
    finally:
        child_processes.end(child.pid, grace=0.5)
    assert child.wait(timeout=10) is not None


def test_once_kcm_is_stopping_no_thread_starts_a_child() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(child_processes._state, "stopping", True)
        with pytest.raises(child_processes.Interrupted):
            child_processes.spawn([sys.executable, "-c", "pass"])
        late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        child_processes.adopt(late.pid, leads_group=True)  # another library's child, adopted too late
        assert _gone(late.pid) and late.pid not in child_processes._owned


def test_ending_a_child_leaves_its_exit_status_to_its_owner() -> None:
    # multiprocessing reads an engine's fate from its exit status: a child reaped behind its back never ends.
    worker = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
    worker.start()
    assert worker.pid is not None
    child_processes.adopt(worker.pid)
    child_processes.end(worker.pid, grace=2.0)
    worker.join(timeout=10)
    # Killed by SIGTERM, or ended on it by a worker's own handler (once the command line has installed it).
    assert worker.exitcode in (-signal.SIGTERM, 128 + signal.SIGTERM)


def test_a_pid_that_is_no_longer_kcms_child_is_not_signalled() -> None:
    """A child whose end nobody reported leaves its pid to whoever gets it next: ending kcm's children must not
    reach that process (two suites on one machine saw an in-process command interrupted so). Here the process
    is an orphan, another parent's now, under a pid kcm signals."""
    started = subprocess.run([sys.executable, "-c", "import subprocess, sys; print(subprocess.Popen([sys.executable, "
                              "'-c', 'import time; time.sleep(30)'], stdout=subprocess.DEVNULL, "
                              "stderr=subprocess.DEVNULL).pid)"], capture_output=True, text=True, check=True)
    orphan = int(started.stdout)
    try:
        child_processes._signal(orphan, False, signal.SIGTERM)
        child_processes._signal(orphan, True, signal.SIGTERM)  # it leads no group of that number either
        time.sleep(0.3)
        assert child_processes.running(orphan, False)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)
