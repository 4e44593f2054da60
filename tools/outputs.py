"""Where commands write files by default: one folder, `kcm-out/` in the working directory (or the folder
named by KCM_OUT), one subfolder per command. Every command that writes a file takes `--out` and prints the
path it wrote; README.md ("Files a command writes") gives the reasons for this convention.

A command that searches before it writes (check, hunt, prove --bmc, review) checks its outputs before the
search (`out_file`, `out_files`): an `--out` it cannot write is one line and exit 2 then, not a counterexample
lost after minutes of search."""

from __future__ import annotations

import os
from pathlib import Path

from kcm.spec.atomic_output import check_writable
from kcm.tools.errors import UsageError

DEFAULT_ROOT = "kcm-out"


def default_out(command: str, name: str = "") -> Path:
    """The default path of a file (or, with no name, the folder) that `command` writes."""
    folder = Path(os.environ.get("KCM_OUT") or DEFAULT_ROOT) / command
    return folder / name if name else folder


def check_root() -> None:
    """A KCM_OUT that names something other than a folder, or a place under a file, is a UsageError, before any
    command runs."""
    root = os.environ.get("KCM_OUT")
    if root:
        check_folder(Path(root), f"KCM_OUT={root}")


def check_folder(folder: Path, name: str) -> None:
    """A folder kcm may make or write in: the first part of it that exists is a folder (UsageError if not)."""
    existing = next((part for part in (folder, *folder.parents) if os.path.lexists(part)), None)
    if existing is not None and not existing.is_dir():
        where = "" if existing == folder else f" ({existing} is a file)"
        raise UsageError(f"{name}: not a folder{where} (kcm writes its outputs under it)")


def out_file(given: str | None, command: str, name: str) -> Path:
    """The file `--out` names (a folder given, or a path ending in `/`: the file `name` inside it; none: the
    default), checked writable."""
    path = Path(given) if given else default_out(command, name)
    if path.is_dir() or (given or "").endswith(os.sep):
        path = path / name
    check_writable(path)
    return path


def out_files(given: str | None, command: str, names: list[str]) -> Path:
    """The folder `--out` names (none: the default) for the files `names`, each checked writable."""
    folder = Path(given) if given else default_out(command)
    for name in names:
        check_writable(folder / name)
    return folder
