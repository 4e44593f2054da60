"""`kcm diff BASE HEAD`: what a design change changes, as a reviewer of the pull request needs it.

A side is a design folder, or a git revision of a repository: the design folders in that revision's tree
(each folder holding a `design.toml`). Each side's designs are reviewed (`kcm review`'s rows: one per model a
manifest names), every row through the result cache (kcm.conformance.result_cache), so that a side reviewed
once, BASE on the last pull request say, is read back. Then the delta: rows added or removed, cells whose
verdict changed (with the new counterexample, explained by the invariant checker and rendered), rows whose
verdict against their documentation changed, and state counts or depths that moved beyond a tolerance.

What a side is made of: its design folders (manifest, TLA+ module, strategy). The TLA+ core, the models of
spec/ and kcm's Python are the installed kcm's on both sides: a revision's own copy of them is not run.

HEAD breaks what BASE held (`Delta.breaks`) when a cell that held on BASE is violated or undecided on HEAD,
or a row that was as expected no longer is.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.conformance.check.invariants import explanation
from kcm.conformance.result_cache import ResultCache, row_key
from kcm.conformance.review import RowResult, review_row
from kcm.spec.atomic_output import OutputError
from kcm.spec.design_folder import MANIFEST, DesignError, DesignFolder, read_design
from kcm.spec.designs import COLUMNS, design_rows
from kcm.spec.tlc.modelcheck import render_counterexample, write_events
from kcm.spec.trace.format import Event, TraceError, load_trace
from kcm.spec.verdicts import AS_EXPECTED, HOLDS

# Folders of a tree that hold no design of the user's.
_SKIPPED: Final = frozenset({".git", ".venv", ".venv-ci", "node_modules", "kcm-out", "__pycache__", ".build"})
DEFAULT_TOLERANCE: Final = 0.0  # exhaustive runs are deterministic: any change of their state count is shown


class DiffError(ValueError):
    """A side that cannot be read: one line naming the revision or folder."""


@dataclass
class Side:
    """One side of the diff: what was asked for, the commit it is (None for a folder), its designs."""

    given: str
    commit: str | None
    designs: list[DesignFolder]
    tree: Path | None = None  # a revision's exported tree: its paths are the repository's

    def in_repository(self, path: Path) -> Path:
        """A path of the side as the repository names it (a revision's exported file: its path in the tree)."""
        if self.tree is not None and path.resolve().is_relative_to(self.tree.resolve()):
            return path.resolve().relative_to(self.tree.resolve())
        return path

    @property
    def name(self) -> str:
        return self.given if self.commit is None else f"{self.given} ({self.commit[:12]})"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except OSError as err:
        raise DiffError(f"git: {err.strerror or err}") from None


def design_folders(tree: Path, patterns: list[str] | None = None) -> list[Path]:
    """The design folders under `tree`, by path; with `patterns`, those whose path relative to `tree` matches
    one of them (fnmatch)."""
    found = []
    for manifest in sorted(tree.rglob(MANIFEST)):
        relative = manifest.parent.relative_to(tree)
        if any(part in _SKIPPED for part in relative.parts):
            continue
        if patterns and not any(fnmatch.fnmatch(str(relative), pattern) for pattern in patterns):
            continue
        found.append(manifest.parent)
    return found


def resolve_side(given: str, repo: Path, trees: Path, patterns: list[str] | None = None) -> Side:
    """A design folder (a path holding design.toml), else a revision of the git repository `repo`, whose
    tree is exported under `trees` (once per commit)."""
    path = Path(given)
    if path.is_dir() and (path / MANIFEST).is_file():
        return Side(given, None, [_read(path, given)])
    if path.is_dir():
        found = design_folders(path, patterns)
        if not found:
            raise DiffError(f"{given}: a folder with no design folder in it (no {MANIFEST} below it)")
        return Side(given, None, [_read(folder, given) for folder in found])
    verified = _git(repo, "rev-parse", "--verify", "--quiet", f"{given}^{{commit}}")
    if verified.returncode != 0:
        inside = _git(repo, "rev-parse", "--is-inside-work-tree")
        where = f"the git repository {repo}" if inside.returncode == 0 else f"{repo} (not a git repository)"
        raise DiffError(f"{given}: neither a design folder nor a revision of {where}")
    commit = verified.stdout.decode().strip()
    tree = trees / commit
    if not tree.is_dir():
        _export(repo, commit, tree)
    # A revision before the first design (the pull request that adds it) is a side without rows.
    found = design_folders(tree, patterns)
    return Side(given, commit, [_read(folder, f"{given}:{folder.relative_to(tree)}") for folder in found], tree)


def _export(repo: Path, commit: str, tree: Path) -> None:
    """The commit's tree extracted beside `tree`, then renamed to it: a tree that exists is whole, and two kcm
    processes exporting the same commit keep whichever finished first."""
    # The archive of an empty tree is no tar at all.
    archive = _git(repo, "archive", "--format=tar", commit) if _git(repo, "ls-tree", commit).stdout.strip() else None
    if archive is not None and archive.returncode != 0:
        raise DiffError(f"{commit[:12]}: git archive failed: {archive.stderr.decode().strip()}")
    try:
        tree.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{commit[:12]}-", dir=tree.parent) as staging:
            if archive is not None:
                with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                    tar.extractall(staging, filter="data")
            try:
                os.rename(staging, tree)
            except OSError:
                if not tree.is_dir():
                    raise  # not another process's export of the same commit, which would be the same tree
            else:
                os.mkdir(staging)  # left for TemporaryDirectory to remove
    except OSError as err:
        raise OutputError(tree, f"cannot write: {err.strerror or err}") from None
    except tarfile.TarError as err:
        raise DiffError(f"{commit[:12]}: git archive wrote no readable tar: {err}") from None


def _read(folder: Path, shown: str) -> DesignFolder:
    try:
        return read_design(folder)
    except DesignError as err:
        raise DiffError(f"{shown}: {err}") from None


# -- one side reviewed -------------------------------------------------------------------------------------


@dataclass
class SideResult:
    side: Side
    rows: dict[str, dict[str, Any]]  # label -> the row's JSON (RowResult.to_json), cells with their events
    cached: int = 0
    computed: int = 0


def review_side(side: Side, out: Path, cache: ResultCache | None, quick: bool = False,
                on_row: Callable[[str, bool], None] | None = None, coverage: bool = False) -> SideResult:
    """Every row of the side's designs, read from the cache where its key is there, else reviewed and kept;
    with `coverage`, each row's exhaustive run counts its actions."""
    result = SideResult(side, {})
    for design in side.designs:
        for variant in design_rows(design):
            key = row_key(variant, quick, coverage)
            document = cache.get(key) if cache is not None else None
            cached = document is not None
            if document is None:
                row = review_row(variant, out, quick=quick, coverage=coverage)
                document = _row_document(row)
                if cache is not None and not row.errors:
                    cache.put(key, document)
            result.cached += cached
            result.computed += not cached
            document["design"] = str(design.path)
            result.rows[variant.label] = document
            if on_row is not None:
                on_row(variant.label, cached)
    return result


def _row_document(row: RowResult) -> dict[str, Any]:
    """The row's JSON with each counterexample's events inside it: a cached row needs no file beside it."""
    document = row.to_json()
    for name, cell in document["cells"].items():
        events = row.cells[name].counterexample
        if events is None and cell.get("trace"):
            try:
                events = load_trace(cell["trace"])
            except (OSError, TraceError):
                events = None
        if events is not None:
            cell["events"] = events
        cell.pop("counterexample", None)
    return document


# -- the delta ---------------------------------------------------------------------------------------------


@dataclass
class CellChange:
    row: str
    column: str
    base: str
    head: str
    breaks: bool
    head_cell: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"row": self.row, "column": self.column, "base": self.base, "head": self.head,
                               "breaks": self.breaks}
        for key in ("trace", "trace_length", "reading", "engine", "error", "explanation"):
            if key in self.head_cell:
                out[key] = self.head_cell[key]
        return out


@dataclass
class SizeChange:
    row: str
    measure: str  # distinct_states | depth
    base: int
    head: int

    @property
    def ratio(self) -> float:
        return self.head / self.base if self.base else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {"row": self.row, "measure": self.measure, "base": self.base, "head": self.head,
                "ratio": None if not self.base else round(self.ratio, 4)}


@dataclass
class Delta:
    base: SideResult
    head: SideResult
    tolerance: float
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    cells: list[CellChange] = field(default_factory=list)
    verdicts: list[tuple[str, str, str]] = field(default_factory=list)  # row, base verdict, head verdict
    sizes: list[SizeChange] = field(default_factory=list)
    # Rows measured with coverage on both sides: (row, action, "stopped" | "started") firing.
    actions: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def breaks(self) -> bool:
        return any(c.breaks for c in self.cells) or any(b == AS_EXPECTED and h != AS_EXPECTED
                                                        for _, b, h in self.verdicts)

    @property
    def unchanged(self) -> bool:
        return not (self.added or self.removed or self.cells or self.verdicts or self.sizes or self.actions)


def _shown(cell: dict[str, Any] | None) -> str:
    return "not checked" if cell is None else str(cell["result"])


def _explained(cell: dict[str, Any], column: str) -> dict[str, Any]:
    events: list[Event] | None = cell.get("events")
    if not events:
        return cell
    invariant = column if not cell.get("reading") else f"{column}/{cell['reading']}"
    return {**cell, "explanation": explanation(events, invariant), "rendered": render_counterexample(events)}


def compare(base: SideResult, head: SideResult, tolerance: float = DEFAULT_TOLERANCE) -> Delta:
    delta = Delta(base, head, tolerance)
    delta.added = [label for label in head.rows if label not in base.rows]
    delta.removed = [label for label in base.rows if label not in head.rows]
    for label, head_row in head.rows.items():
        base_row = base.rows.get(label)
        if base_row is None:
            continue
        if base_row["verdict"] != head_row["verdict"]:
            delta.verdicts.append((label, base_row["verdict"], head_row["verdict"]))
        columns = [c for c in COLUMNS if c in base_row["cells"] or c in head_row["cells"]]
        columns += [c for c in {**base_row["cells"], **head_row["cells"]} if c not in columns]
        for column in columns:
            before, after = base_row["cells"].get(column), head_row["cells"].get(column)
            if _shown(before) == _shown(after):
                continue
            breaks = before is not None and before["result"] == HOLDS and (after is None or after["result"] != HOLDS)
            # A quick row stops at its first violation: the cells it did not reach are not a change.
            if after is None and head_row.get("quick"):
                continue
            delta.cells.append(CellChange(label, column, _shown(before), _shown(after), breaks,
                                          _explained(after or {}, column)))
        fired = [{name for name, action in row["coverage"].items() if action["generated"]}
                 for row in (base_row, head_row) if row.get("coverage") is not None]
        if len(fired) == 2:
            delta.actions += [(label, name, "stopped") for name in sorted(fired[0] - fired[1])]
            delta.actions += [(label, name, "started") for name in sorted(fired[1] - fired[0])]
        for measure in ("distinct_states", "depth"):
            b, h = _held_size(base_row, measure), _held_size(head_row, measure)
            if b is not None and h is not None and b != h and (not b or abs(h - b) / b > tolerance):
                delta.sizes.append(SizeChange(label, measure, b, h))
    return delta


def _held_size(row: dict[str, Any], measure: str) -> int | None:
    """The size of the row's exhaustive run: the largest figure of its holding cells (None if none held)."""
    figures = [int(cell.get(measure, 0)) for cell in row["cells"].values() if cell["result"] == HOLDS]
    return max(figures) if figures and any(figures) else None


# -- outputs -----------------------------------------------------------------------------------------------


def keep_counterexamples(delta: Delta, out: Path) -> None:
    """Writes each changed cell's counterexample under `out` and points the change at it."""
    for change in delta.cells:
        events = change.head_cell.get("events")
        if not events:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", f"{change.row}-{change.column}".lower()).strip("-")
        path = out / f"{slug}.jsonl"
        try:
            write_events(events, path)
        except TraceError:
            continue
        change.head_cell = {**change.head_cell, "trace": str(path)}


def to_json(delta: Delta, seconds: float) -> dict[str, Any]:
    def side(result: SideResult) -> dict[str, Any]:
        rows = {label: {**row, "cells": {name: {k: v for k, v in cell.items() if k != "events"}
                                         for name, cell in row["cells"].items()}}
                for label, row in result.rows.items()}
        return {"given": result.side.given, "commit": result.side.commit, "rows": rows,
                "cached": result.cached, "computed": result.computed}

    return {
        "base": side(delta.base), "head": side(delta.head), "tolerance": delta.tolerance,
        "breaks": delta.breaks, "unchanged": delta.unchanged,
        "rows_added": delta.added, "rows_removed": delta.removed,
        "verdicts_changed": [{"row": r, "base": b, "head": h} for r, b, h in delta.verdicts],
        "cells_changed": [c.to_json() for c in delta.cells],
        "sizes_changed": [s.to_json() for s in delta.sizes],
        "actions_changed": [{"row": r, "action": a, "firing": f} for r, a, f in delta.actions],
        "seconds": round(seconds, 2),
    }


def markdown(delta: Delta) -> str:
    """The delta as a pull-request comment."""
    head = f"### kcm diff: {delta.base.side.name} → {delta.head.side.name}"
    verdict = ("**HEAD breaks what BASE held.**" if delta.breaks
               else "Nothing changed." if delta.unchanged else "Changes, none that breaks what BASE held.")
    lines = [head, "", verdict, ""]
    rows = len(delta.head.rows)
    lines.append(f"{rows} row{'s' if rows != 1 else ''} on HEAD; read from the cache: "
                 f"BASE {delta.base.cached}/{len(delta.base.rows)}, HEAD {delta.head.cached}/{rows}.")
    if delta.added or delta.removed:
        lines += ["", *[f"- row added: {label}" for label in delta.added],
                  *[f"- row removed: {label}" for label in delta.removed]]
    if delta.verdicts:
        lines += ["", "| row | BASE | HEAD |", "|---|---|---|"]
        lines += [f"| {r} | {b} | {h} |" for r, b, h in delta.verdicts]
    if delta.cells:
        lines += ["", "| row | invariant | BASE | HEAD | counterexample |", "|---|---|---|---|---|"]
        for c in delta.cells:
            mark = "**" if c.breaks else ""
            steps = c.head_cell.get("trace_length")
            where = f"{steps - 1} steps, `{c.head_cell['trace']}`" if steps and c.head_cell.get("trace") else ""
            lines.append(f"| {c.row} | {c.column} | {c.base} | {mark}{c.head}{mark} | {where} |")
        for c in delta.cells:
            if c.head_cell.get("rendered"):
                lines += ["", f"<details><summary>{c.row}: {c.column} on HEAD</summary>", "", "```",
                          c.head_cell["rendered"], *c.head_cell.get("explanation", []), "```", "</details>"]
    if delta.actions:
        lines += ["", "| row | action | firing on HEAD |", "|---|---|---|"]
        lines += [f"| {r} | {a} | {'**stopped**' if f == 'stopped' else 'started'} |" for r, a, f in delta.actions]
    if delta.sizes:
        lines += ["", "| row | measure | BASE | HEAD | ratio |", "|---|---|---|---|---|"]
        lines += [f"| {s.row} | {s.measure} | {s.base:,} | {s.head:,} | "
                  f"{'new' if not s.base else f'{s.ratio:.3f}'} |" for s in delta.sizes]
    return "\n".join(lines)


def unchanged_cells(delta: Delta) -> list[tuple[str, str, str, float]]:
    """(row, column, verdict, seconds) of every HEAD cell that did not change (a new row's cells included)."""
    changed = {(c.row, c.column) for c in delta.cells}
    found = []
    for label, row in delta.head.rows.items():
        for column, cell in row["cells"].items():
            if (label, column) not in changed:
                found.append((label, column, str(cell["result"]), float(cell.get("seconds", 0.0))))
    return found

