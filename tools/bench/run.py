"""Runs this checkout's benchmarks against whichever kcm the interpreter has installed. The benchmarks are
not installed with kcm, so measuring a compiled install (`pip install .` in a venv of its own) goes
through this file:

    VENV/bin/python tools/bench/run.py [NAME] [ARGS...]     # one benchmark, or without NAME all of them

It makes `kcm.tools.bench` the folder of this file, whatever `kcm` itself resolves to, then runs
`python -m kcm.tools.bench[.NAME] ARGS...`. `--interpreted` first loads every kcm module from its source
(kcm.tools.interpreted), for a benchmark that patches what a compiled install refuses.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

HERE: Final = Path(__file__).resolve().parent
PACKAGE: Final = "kcm.tools.bench"
INTERPRETED: Final = "--interpreted"


class CheckoutBenchmarks(importlib.abc.MetaPathFinder):
    """Finds the benchmark package in this checkout; its modules are then found in its folder."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != PACKAGE:
            return None
        return importlib.util.spec_from_file_location(PACKAGE, HERE / "__init__.py",
                                                      submodule_search_locations=[str(HERE)])


def command(name: str | None, argv: Sequence[str], interpreted: bool = False) -> list[str]:
    """The command that runs benchmark `name` (every one: None) in a new process of this interpreter."""
    return [sys.executable, str(HERE / "run.py"), *([INTERPRETED] if interpreted else []),
            *([name] if name else []), *argv]


def main(argv: Sequence[str]) -> None:
    args = list(argv)
    if args[:1] == [INTERPRETED]:
        from kcm.tools import interpreted  # imports no compiled module, so it can still choose

        interpreted.prefer_sources()
        args = args[1:]
    sys.meta_path.insert(0, CheckoutBenchmarks())
    module = PACKAGE if not args or args[0].startswith("-") else f"{PACKAGE}.{args.pop(0)}"
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    # Run as a file, this folder heads sys.path, where z3.py and pipeline.py would hide the real z3 and the
    # benchmarks' own imports; the benchmarks are reached through the finder instead.
    if sys.path and Path(sys.path[0]).resolve() == HERE:
        sys.path.pop(0)
    main(sys.argv[1:])
