"""Builds kcm with its hot paths (the implementation, the trace codec, the invariant checker) compiled by
mypyc where the machine has a C compiler; the interpreted sources ship either way, and a build that
cannot compile installs them alone. See docs/performance.md, "Compiled and interpreted installs".

KCM_COMPILE=0 installs the interpreted sources only; KCM_COMPILE=1 makes a failed compile an error.
An editable install is never compiled: its modules are the working tree's files, edited in place.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# The namespace `kcm` is laid over the top-level folders, so mypyc (which names a module by its path) reads
# them through links under a `kcm` folder.
TREE = Path("build") / "mypyc-src"
FOLDERS = ("impl", "conformance", "spec", "tools")
COMPILED = (
    # The ZooKeeper and Kafka adapters wait on sockets, processes and kazoo's threads: nothing to gain from
    # compiling them.
    *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "impl").rglob("*.py"))
      # impl/design.py stays interpreted: a design's strategy subclasses its Design, and an interpreted class
      # cannot subclass a compiled one.
      if p.name not in ("__init__.py", "design.py") and not {"zookeeper", "kafka"} & set(p.parts)),
    "conformance/check/invariants.py",
    "conformance/pipeline/stream.py",
    "spec/trace/format.py",
    "spec/vocabulary.py",
)
# One shared library for every compiled module, inside the `kcm` namespace, not at the top of site-packages.
GROUP = "kcm.compiled"


def _mode() -> str:
    mode = os.environ.get("KCM_COMPILE", "auto")
    if mode not in ("0", "1", "auto"):
        sys.exit(f"setup.py: KCM_COMPILE must be 0, 1 or auto, not {mode!r}")
    return mode


def _building_binaries() -> bool:
    # build_meta also runs this file for metadata (egg_info, dist_info), where compiling would be wasted.
    return any(cmd in sys.argv for cmd in ("bdist_wheel", "build_ext", "build", "install"))


def _link_tree() -> None:
    kcm = ROOT / TREE / "kcm"
    kcm.mkdir(parents=True, exist_ok=True)
    for folder in FOLDERS:
        link = kcm / folder
        if not link.is_symlink():
            if link.exists():
                shutil.rmtree(link)
            link.symlink_to(Path("..", "..", "..", folder))


def _ext_modules(mode: str) -> list[Any]:
    if mode == "0" or "editable_wheel" in sys.argv or not _building_binaries():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        if mode == "1":
            raise
        print("setup.py: mypyc is not available; installing the interpreted modules only", file=sys.stderr)
        return []
    _link_tree()
    os.environ["MYPYPATH"] = str(TREE)
    paths = [str(TREE / "kcm" / p) for p in COMPILED]
    # The build environment holds the build requirements only: the runtime libraries are typed as Any, so
    # the ignores written for their missing stubs (pyarrow, z3, networkx) go unused there.
    options = ["--explicit-package-bases", "--ignore-missing-imports", "--no-warn-unused-ignores"]
    try:
        return list(mypycify([*options, *paths], opt_level="3", group_name=GROUP))
    except (Exception, SystemExit) as error:  # mypyc reports a type error by exiting
        if mode == "1":
            raise
        print(f"setup.py: mypyc failed ({error}); installing the interpreted modules only", file=sys.stderr)
        return []


class OptionalBuildExt(build_ext):  # type: ignore[misc]  # setuptools ships no types here
    """All or nothing: a compiled module needs the shared library and every module it calls natively, so
    when one extension fails none is installed and the interpreted sources serve."""

    extensions: list[Any]

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # the compiler's errors come in several classes, all of them fatal here
            if _mode() == "1":
                raise
            for ext in self.extensions:
                built = Path(self.get_ext_fullpath(ext.name))
                built.unlink(missing_ok=True)
            self.extensions = []
            print(f"setup.py: compiling failed ({error}); installing the interpreted modules only",
                  file=sys.stderr)


setup(ext_modules=_ext_modules(_mode()), cmdclass={"build_ext": OptionalBuildExt})
