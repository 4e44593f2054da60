"""Compiled and interpreted installs (docs/performance.md).

A regular install compiles the implementation and the checker with mypyc, and ships their sources beside
the compiled modules. Compiled classes are native: their methods cannot be replaced and their objects
cannot be copied. The commands that do either, `kcm mutate` (it patches implementation methods) and
`kcm replay` (it copies a whole simulated cluster to try another reading of a step), start again (exec, the
same process; a child process when `main` is called in a program's own process) as an interpreter that
imports every `kcm` module from its source:
`python -m kcm.tools.interpreted MODULE ARGS...` runs `python -m MODULE ARGS...` on the sources. This module
imports no compiled module, so it can choose.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

# A module the compiled install always compiles: where it comes from tells which install this is.
_PROBE = "kcm.impl.sim.cluster"


def compiled() -> bool:
    """Whether `kcm`'s implementation modules load compiled in this process."""
    loaded = sys.modules.get(_PROBE)
    if loaded is not None:
        return not str(getattr(loaded, "__file__", "")).endswith(".py")
    spec = importlib.util.find_spec(_PROBE)
    return spec is not None and not str(spec.origin).endswith(".py")


class SourceFirst(importlib.abc.MetaPathFinder):
    """Finds a `kcm` submodule's source file before the compiled extension module beside it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("kcm.") or path is None:
            return None
        leaf = fullname.rpartition(".")[2]
        for folder in path:
            source = Path(folder) / f"{leaf}.py"
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def prefer_sources() -> None:
    """From now on, every `kcm` module not imported yet loads from its source."""
    if not any(isinstance(finder, SourceFirst) for finder in sys.meta_path):
        sys.meta_path.insert(0, SourceFirst())


def rerun_interpreted(module: str, argv: Sequence[str]) -> NoReturn:
    """Becomes `python -m module argv...` on the sources: the same process (exec), so that a Ctrl-C or a
    SIGTERM reaches the command itself, which ends in its one line, not a parent waiting on it that would add
    a second one (or die and leave it running)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "kcm.tools.interpreted", module, *argv])


def run_interpreted(module: str, argv: Sequence[str]) -> int:
    """`python -m module argv...` on the sources as a child process, for a caller of `kcm.tools.cli.main` in
    its own process (a program, a test), which exec would replace: its output is the child's, copied to this
    process's streams; its result is the child's exit code."""
    # Imported here: this module imports no compiled module until the choice is made.
    from kcm.spec import child_processes

    command = [sys.executable, "-m", "kcm.tools.interpreted", module, *argv]
    with child_processes.spawn(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        try:
            out, err = child.communicate()
        finally:
            child_processes.release(child.pid)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return child.returncode


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m kcm.tools.interpreted MODULE [ARGS...]")
    prefer_sources()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
