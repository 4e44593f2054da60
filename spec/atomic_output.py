"""Every file or folder a kcm command writes is claimed, then published whole: a reader sees the old output or
the new one, never half of one, and a second kcm process writing the same output is refused with one line.

A claim holds an exclusive `flock` on a hidden lock file beside the output (`.NAME.kcm-lock`) for as long as
the writer works, and gives the writer a hidden temporary path beside the output (the same file system, so
that the rename that publishes it is atomic). On success the temporary path is renamed onto the output; on
any failure (an exception, Ctrl-C) it is removed, so an interrupted command leaves the old output untouched.
A folder is published by two renames (the old folder aside, the new one in, the old one removed): readers
may see no folder for an instant, never a mixed one.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

LOCK_SUFFIX: Final = ".kcm-lock"
TEMP_MARK: Final = ".kcm-tmp-"


class OutputError(Exception):
    """An output kcm cannot claim: another kcm process is writing it, or its folder cannot be written."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def _hidden(path: Path, suffix: str) -> Path:
    return path.with_name(f".{path.name}{suffix}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Holds the output's lock file, or raises OutputError at once when another process holds it."""
    lock = _hidden(path, LOCK_SUFFIX)
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise OutputError(path, f"cannot write: {err.strerror or err}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputError(path, "another kcm process is writing it") from None
        # The holder before us unlinks the lock file as it lets go: a lock on an unlinked file guards nothing.
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def _check_parent(path: Path) -> None:
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(path, f"cannot write: {parent} is not a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(path, f"cannot write: {err.strerror or err}") from None
    if path.is_dir():
        raise OutputError(path, "cannot write: it is a folder (give a file name)")


@contextlib.contextmanager
def claimed_file(path: str | Path) -> Iterator[Path]:
    """A temporary path to write the file `path` at; renamed onto `path` when the block ends without error."""
    target = Path(path)
    _check_parent(target)
    with _locked(target):
        temp = _hidden(target, f"{TEMP_MARK}{os.getpid()}")
        try:
            yield temp
            if not temp.exists():
                raise OutputError(target, "the command wrote nothing")
            os.replace(temp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()


@contextlib.contextmanager
def open_output(path: str | Path) -> Iterator[IO[str]]:
    """The text file `path` (UTF-8, `\\n` line ends), open for writing, published when the block ends."""
    with claimed_file(path) as temp:
        try:
            stream = temp.open("w", encoding="utf-8", newline="\n")
        except OSError as err:
            raise OutputError(path, f"cannot write: {err.strerror or err}") from None
        with stream:
            yield stream


def write_output(path: str | Path, text: str) -> None:
    """Writes the whole text file `path` at once."""
    with claimed_file(path) as temp:
        try:
            temp.write_text(text, encoding="utf-8")
        except OSError as err:
            raise OutputError(path, f"cannot write: {err.strerror or err}") from None


@contextlib.contextmanager
def claimed_folder(path: str | Path) -> Iterator[Path]:
    """A new empty folder to build the folder `path` in; it replaces `path` when the block ends without error."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise OutputError(target, "cannot write: it is a file, not a folder")
    _check_parent(target.parent / "x")
    with _locked(target):
        temp = _hidden(target, f"{TEMP_MARK}{os.getpid()}")
        shutil.rmtree(temp, ignore_errors=True)
        try:
            temp.mkdir()
        except OSError as err:
            raise OutputError(target, f"cannot write: {err.strerror or err}") from None
        try:
            yield temp
            old = _hidden(target, f".kcm-old-{os.getpid()}")
            if target.exists():
                os.replace(target, old)
            os.replace(temp, target)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def claimed_in_place(path: str | Path) -> Iterator[Path]:
    """The folder `path` itself, held against other kcm writers, for outputs that add to what is there (an
    ingest that keeps earlier runs); the writer publishes each of its files with `claimed_file`."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise OutputError(target, "cannot write: it is a file, not a folder")
    _check_parent(target.parent / "x")
    try:
        target.mkdir(exist_ok=True)
    except OSError as err:
        raise OutputError(target, f"cannot write: {err.strerror or err}") from None
    with _locked(target):
        yield target


@contextlib.contextmanager
def held_file(path: str | Path) -> Iterator[Path]:
    """The file `path` itself, held against other kcm writers, for an output that grows as the command runs (a
    swarm's seed ledger, a line at a time); `replace` publishes a whole new version of it."""
    target = Path(path)
    _check_parent(target)
    with _locked(target):
        yield target


def replace(path: Path, text: str) -> None:
    """Writes `path` whole under a hidden name and renames it into place (the caller holds the file)."""
    temp = _hidden(path, f"{TEMP_MARK}{os.getpid()}")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except OSError as err:
        raise OutputError(path, f"cannot write: {err.strerror or err}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def check_writable(path: str | Path) -> None:
    """Raises OutputError now for a file `claimed_file` would refuse later (a folder in its place, a parent
    that is a file or cannot be made or written, another kcm writing it): a command that searches for minutes
    and then writes checks its outputs before it starts. Leaves nothing behind, not even the folders it made."""
    target = Path(path)
    missing = list(itertools.takewhile(lambda folder: not os.path.lexists(folder), target.parents))
    try:
        _check_parent(target)
        with _locked(target):
            pass
    finally:
        for folder in missing:
            with contextlib.suppress(OSError):
                folder.rmdir()
