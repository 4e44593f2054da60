"""The processes kcm starts (TLC's java, Spark's JVM and its Python workers, ZooKeeper servers, Kafka brokers)
end when kcm does: on its normal exit, on SIGINT, SIGTERM and SIGHUP, and on an exception.

Each child kcm owns runs in a process group of its own (`start_new_session`), so that a terminal's Ctrl-C
reaches kcm alone, which then ends every group it owns (SIGTERM, a grace period, SIGKILL): grandchildren (a
JVM's Python workers) go with their group. A child started on purpose to outlive kcm (`kcm zk start`) is
started `detached` and never registered. The registry is per process: a forked worker starts with none.

A forked worker of the command line (a pool's, a hunt engine) leaves Ctrl-C to kcm, which ends it: it ignores
SIGINT (a terminal sends it to the whole foreground group, and a worker's traceback would follow kcm's one
line), and on SIGTERM or SIGHUP ends its own children and exits at once, without a traceback. A worker its
parent ends by killing its whole group (a hunt engine, `children_in_my_group`) keeps its children in that group,
so that a SIGKILL, which leaves a process no time to end them, reaches them too.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

GRACE_SECONDS: Final = 3.0
_PROC: Final = Path("/proc")
_POLL_SECONDS: Final = 0.05
_ENDED_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP)

# pid -> whether it leads a process group of its own (adopted processes may not).
_owned: dict[int, bool] = {}
# Reentrant: a worker's SIGTERM handler ends its children, perhaps while the worker holds it (in `adopt`).
_lock = threading.RLock()
# stopping: set once kcm is stopping (`interrupt`), when a thread that starts a child afterwards is refused.
# Plain flags, not threading.Event: a forked child resets them, and an Event's lock may be held at the fork.
# tied: set in a process another one may SIGKILL at any moment (a Spark task's Python worker, which Spark kills
# when it cancels the task), whose children must then die with it instead of searching on as orphans.
_state = {"installed": False, "in_my_group": False, "stopping": False, "tied": False}


class Interrupted(KeyboardInterrupt):
    """kcm was asked to stop (SIGINT, SIGTERM, SIGHUP): every command ends with one line and exit 130."""


def spawn(command: Sequence[str], detached: bool = False, **popen: Any) -> subprocess.Popen[Any]:
    """Starts `command` in a process group of its own (in this process's group after `children_in_my_group`);
    unless `detached`, it is ended with kcm. Refused with `Interrupted` once kcm is stopping."""
    if _state["stopping"] and not detached:
        raise Interrupted("kcm is stopping")
    own_group = detached or not _state["in_my_group"]
    if _state["tied"] and not detached:
        popen["preexec_fn"] = _die_with_parent
    process: subprocess.Popen[Any] = subprocess.Popen(list(command), start_new_session=own_group, **popen)
    if not detached:
        adopt(process.pid, own_group)
    return process


def adopt(pid: int, leads_group: bool = False) -> None:
    """Takes on a process another library started (PySpark's JVM): it is ended with kcm, its group too when it
    leads one. Once kcm is stopping (another thread took the interrupt), it is ended at once."""
    with _lock:
        _owned[pid] = leads_group
    if _state["stopping"]:
        end(pid)


def children_in_my_group() -> None:
    """This process leads a group its parent ends whole (a hunt engine): the children it starts from now on
    stay in that group instead of leading groups of their own."""
    _state["in_my_group"] = True


def tie_children_to_me() -> None:
    """The children this process starts from now on are killed (SIGKILL) by the kernel when it ends, however it
    ends: a Spark task's worker that Spark kills on a cancelled job leaves no TLC searching on (Linux only:
    elsewhere they are ended as usual, not when their parent is killed)."""
    _state["tied"] = True


_PR_SET_PDEATHSIG: Final = 1


def _die_with_parent() -> None:
    """In the child, between fork and exec: the kernel's signal to it when the thread that forked it ends."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    if hasattr(libc, "prctl"):
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def release(pid: int) -> None:
    """Forgets a child that has ended, or that its owner ends itself."""
    with _lock:
        _owned.pop(pid, None)


def _signal(pid: int, group: bool, signum: int) -> None:
    if not _still_ours(pid, group):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)


def _still_ours(pid: int, group: bool) -> bool:
    """Whether the pid is still the child kcm started: a child whose end nobody reported may have left its pid to
    a process of someone else's (pid_max is 32,768 on many machines), which a signal must not reach. A process
    of that pid is ours while kcm is its parent; a group whose leader is gone is its leftover members, kcm's
    still, unless the process that has the pid now leads a group of that number itself."""
    if not _PROC.is_dir():
        return True
    fields = _stat(_PROC / str(pid) / "stat")
    if not fields:
        return group
    parent, process_group = int(fields[1]), int(fields[2])
    return parent == os.getpid() or (group and process_group != pid)


def running(pid: int, group: bool) -> bool:
    """Whether the child (any process of its group) still runs. Read off /proc, without reaping: the child's
    owner (a Popen, multiprocessing) reaps it and reads its exit status; a zombie has ended all the same."""
    if not _PROC.is_dir():
        return _signalled(pid, group)
    for stat in _PROC.glob("[0-9]*/stat") if group else [_PROC / str(pid) / "stat"]:
        fields = _stat(stat)
        if fields and (not group or int(fields[2]) == pid) and _threads_run(stat.parent):
            return True
    return False


def _stat(path: Path) -> list[str]:
    """The fields of a /proc stat file after the command's name; none once the process or thread is gone."""
    try:
        return path.read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _threads_run(process: Path) -> bool:
    """Whether a thread of the process runs: a JVM's main thread ends (a zombie leader) before its others do."""
    return any(fields and fields[0] not in ("Z", "X") for fields in map(_stat, process.glob("task/*/stat")))


def _signalled(pid: int, group: bool) -> bool:
    """Without /proc: whether a signal still reaches the child (a zombie counts as running)."""
    try:
        if group:
            os.killpg(pid, 0)
        else:
            os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end(pid: int, grace: float = GRACE_SECONDS) -> None:
    """Ends one child (its group when it leads one): SIGTERM, then SIGKILL after `grace` seconds."""
    with _lock:
        group = _owned.pop(pid, True)
    _end({pid: group}, grace)


def end_all(grace: float = GRACE_SECONDS) -> None:
    """Ends every child kcm owns, all at once; returns when they are gone."""
    with _lock:
        children = dict(_owned)
        _owned.clear()
    _end(children, grace)


def interrupt(grace: float = GRACE_SECONDS) -> None:
    """kcm is stopping (Ctrl-C, SIGTERM): every owned child is ended, and so is any that another thread starts
    or adopts from now on."""
    _state["stopping"] = True
    end_all(grace)


def _end(children: dict[int, bool], grace: float) -> None:
    for pid, group in children.items():
        _signal(pid, group, signal.SIGTERM)
    deadline = time.monotonic() + grace
    alive = {pid: group for pid, group in children.items() if running(pid, group)}
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
        alive = {pid: group for pid, group in alive.items() if running(pid, group)}
    for pid, group in alive.items():
        _signal(pid, group, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        alive = {pid: group for pid, group in alive.items() if running(pid, group)}
        if alive:
            time.sleep(_POLL_SECONDS)


def _stop_requested(signum: int, frame: FrameType | None) -> None:
    # From here on a thread still talking to a child being ended (py4j to Spark's JVM, on the root logger) would
    # log the lost connection as an error with a traceback, before or after the one line; what it would say is
    # the interrupt itself. Not restored: the command is over, and that thread may log after main() returns.
    logging.disable(logging.CRITICAL)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(signal.Signals(signum).name)


def _worker_stopped(signum: int, frame: FrameType | None) -> None:
    end_all()
    os._exit(128 + signum)


def install() -> None:
    """Turns SIGTERM and SIGHUP into `Interrupted` in the main thread, SIGINT into KeyboardInterrupt (as Python
    does), each silencing logging first, and ends every owned child at exit. Called once by the command line."""
    for signum in (signal.SIGINT, *_ENDED_SIGNALS):
        signal.signal(signum, _stop_requested)
    if not _state["installed"]:
        atexit.register(end_all)
    _state.update(installed=True, stopping=False)


# The signals a fork holds back: a worker must not take kcm's own handlers (a traceback, no children ended)
# between the fork and `_forget_in_child`; it receives them, pending, once it has its own.
_HELD: Final = frozenset({signal.SIGINT, *_ENDED_SIGNALS})
_mask_before_fork: list[set[int | signal.Signals]] = []


def _hold_signals() -> None:
    if _state["installed"]:
        _mask_before_fork.append(signal.pthread_sigmask(signal.SIG_BLOCK, _HELD))


def _release_signals() -> None:
    if _mask_before_fork:
        signal.pthread_sigmask(signal.SIG_SETMASK, _mask_before_fork.pop())


def _forget_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # another thread of the parent may have held it at the fork
    _owned.clear()
    _state.update(in_my_group=False, stopping=False, tied=False)
    if _state["installed"]:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in _ENDED_SIGNALS:
            signal.signal(signum, _worker_stopped)
    _release_signals()


os.register_at_fork(before=_hold_signals, after_in_parent=_release_signals, after_in_child=_forget_in_child)
