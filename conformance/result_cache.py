"""Results kept by the content of what decides them: a review row computed once is read back, not recomputed,
while nothing it depends on changed (`kcm diff`; its `--no-cache` bypasses it).

A row's key is a digest of: the TLA+ modules its model reads (the model's module, the truncation era's, the
design's, and whatever they EXTEND or INSTANCE, transitively), the model's configuration, every file of the
design folder, the row itself (label, knob settings, expected violations, quick or full), kcm's own code (a
digest of its Python sources: a change of how kcm generates or reads a model is a change of result), and the
tools (TLC's jar, Java's version, Z3's version). A changed module invalidates the rows that read it and no
other. Entries live under `kcm-out/cache/` as one JSON file each; the folder is kept under a size bound by
dropping the entries read least recently.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from kcm.spec.atomic_output import OutputError, write_output
from kcm.spec.designs import Variant
from kcm.spec.java import probe_java
from kcm.spec.tlc.modelcheck import models, spec_dir
from kcm.spec.tlc.runner import find_jar
from kcm.spec.vocabulary import ERA_MODULES
from kcm.spec.z3.solver import z3

# Bumped when the layout of an entry changes: older entries are then never read.
FORMAT: Final = 1
DEFAULT_LIMIT_BYTES: Final = 256 * 1024 * 1024
_USES = re.compile(r"^\s*EXTENDS\s+(\w+(?:\s*,\s*\w+)*)", re.M)
_INSTANCE = re.compile(r"\bINSTANCE\s+(\w+)")


def modules_read(roots: Iterable[str], folders: Iterable[Path]) -> list[Path]:
    """The TLA+ modules of `folders` that the modules `roots` read, transitively (TLC's standard modules,
    found in no folder, are the tools' part of the key)."""
    search = list(folders)
    found: dict[str, Path] = {}
    work = list(roots)
    while work:
        name = work.pop()
        if name in found:
            continue
        path = next((folder / f"{name}.tla" for folder in search if (folder / f"{name}.tla").is_file()), None)
        if path is None:
            continue
        found[name] = path
        text = path.read_text()
        for group in _USES.findall(text):
            work.extend(part.strip() for part in group.split(","))
        work.extend(_INSTANCE.findall(text))
    return [found[name] for name in sorted(found)]


def _digest_files(digest: Any, files: Iterable[Path], base: Path | None = None) -> None:
    for path in files:
        name = str(path.relative_to(base)) if base is not None else path.name
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")


def _design_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


@functools.cache
def code_digest() -> str:
    """kcm's own Python sources, and the tools it runs: what decides every result besides the model."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for top in ("spec", "impl", "conformance"):
        folder = package / top
        if folder.is_dir():
            _digest_files(digest, sorted(folder.rglob("*.py")), package)
    jar = find_jar()
    digest.update(hashlib.sha256(jar.read_bytes()).hexdigest().encode())
    java = probe_java()
    digest.update(f"java {java.major}".encode())
    digest.update(f"z3 {z3.get_version_string()}".encode())
    return digest.hexdigest()


def row_key(variant: Variant, quick: bool, coverage: bool = False) -> str:
    """The key of a review row's result."""
    model = models()[variant.model]
    era, _ = ERA_MODULES[variant.knobs.truncation]
    roots = [model.module.stem, era]
    folders = [spec_dir()]
    design = variant.design
    if design is not None and design.tla_module is not None:
        roots.append(design.tla_module.stem)
        folders.insert(0, design.tla_module.parent)
    digest = hashlib.sha256(f"kcm review row, format {FORMAT}\0".encode())
    digest.update(json.dumps({"label": variant.label, "settings": list(variant.settings), "model": variant.model,
                              "expected": sorted(variant.expected), "quick": quick, "coverage": coverage},
                             sort_keys=True).encode())
    _digest_files(digest, modules_read(roots, folders))
    _digest_files(digest, [model.config])
    if design is not None:
        _digest_files(digest, _design_files(design.path), design.path)
    digest.update(code_digest().encode())
    return digest.hexdigest()


class ResultCache:
    """JSON documents by key under `root`, at most `limit_bytes` in all."""

    def __init__(self, root: Path, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        self.root = root
        self.limit_bytes = limit_bytes
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            document: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        if document.get("format") != FORMAT or document.get("key") != key:
            self.misses += 1
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # read recently: kept longest
        self.hits += 1
        result: dict[str, Any] = document["result"]
        return result

    def put(self, key: str, result: dict[str, Any]) -> None:
        """Keeps `result`; a cache that cannot be written costs the next run its time, nothing else."""
        try:
            write_output(self._path(key), json.dumps({"format": FORMAT, "key": key, "result": result}) + "\n")
        except OutputError:
            return
        self.prune()

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*/*.json")) if self.root.is_dir() else []

    def prune(self) -> None:
        """Drops the entries read least recently until the folder is within its bound."""
        sized = []
        for path in self.entries():
            try:
                stat = path.stat()
            except OSError:
                continue
            sized.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in sized)
        for _, size, path in sorted(sized, key=lambda entry: (entry[0], str(entry[2]))):
            if total <= self.limit_bytes:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
