"""The layering rule of kcm, checked: `python -m kcm.tools.layers [--graph] [ROOT]`.

kcm's packages are layers, each importing only from the layers below it:

    kcm.spec  <-  kcm.impl  <-  kcm.conformance  <-  kcm.tools  <-  kcm.tools.bench (checkout only)

The model (`spec`) is the reference every oracle reads, so nothing in it may depend on the code it judges.
Every import counts, also one inside a function or under TYPE_CHECKING: a lazy import hides a dependency,
it does not remove it. Four more rules keep the layers honest:
- no module imports another module's private name (`from m import _x`), nor a private module of another
  package (`kcm.spec.z3.solver` is for `kcm.spec.z3` alone);
- no product module imports or runs test code (the `tests/` folder's modules, or a test file by path);
- no import cycle between modules;
- `kcm.tools` parses arguments and prints: the work a command runs, and how (a review's matrix, a hunt's race,
  verify's stages), lives below it. So no module of kcm.tools imports what runs work side by side
  (ORCHESTRATION: concurrent.futures, multiprocessing, the race of engines), and no command module (one with
  `register`, which adds a `kcm` subcommand) defines a dataclass: the records of that work are the lower
  layers'. The benchmarks (kcm.tools.bench) measure that work and are not held to this.

ROOT is a folder holding the product's top-level folders (a checkout); by default the folders of the
imported `kcm` packages are read, which works on an installed copy as well. Exit 0 when the rules hold,
1 with one line per breach, 2 for a ROOT without the product's folders.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import networkx as nx  # type: ignore[import-untyped]  # networkx ships no types

# Lowest first; a module may import from its own layer and those before it.
LAYERS: Final = ("kcm.spec", "kcm.impl", "kcm.conformance", "kcm.tools", "kcm.tools.bench")
FOLDERS: Final = {"kcm.spec": "spec", "kcm.impl": "impl", "kcm.conformance": "conformance", "kcm.tools": "tools"}
TEST_MODULES: Final = re.compile(r"^(tests|conftest|datadriven|histories|test_\w+)(\.|$)")
# A path to a test module in a string, as code that loads a test file by path would hold.
TEST_PATH: Final = re.compile(r"(^|/)(tests/[\w/]*\.py|test_\w+\.py)$")
# What runs work side by side (threads or processes of a pool, the race of engines): a command has it run below.
ORCHESTRATION: Final = ("concurrent.futures", "multiprocessing", "kcm.conformance.explore.hunt.race")
COMMAND_LINE: Final = "kcm.tools"


@dataclass(frozen=True)
class Breach:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Edge:
    """One import: `source` imports `target` (a module, or a package), possibly naming `name` from it."""

    source: str
    target: str
    name: str | None
    path: Path
    line: int


def layer_of(module: str) -> int:
    """The index in LAYERS of the innermost layer holding `module`; -1 outside kcm."""
    best = -1
    for index, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            best = index
    return best


def product_files(root: Path) -> Iterator[tuple[str, Path]]:
    """Every module of the product under `root`, as (dotted name, file)."""
    for package, folder in FOLDERS.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join((package, *parts)), path


def installed_root() -> Path:
    """A folder whose `spec`, `impl`, `conformance` and `tools` are the imported kcm packages' folders."""
    folders = {Path(next(iter(importlib.import_module(p).__path__))) for p in FOLDERS}
    parents = {folder.parent for folder in folders}
    if len(parents) != 1:
        raise SystemExit(f"kcm.tools.layers: the kcm packages live in several folders: {sorted(parents)}")
    return parents.pop()


def imports(module: str, path: Path, tree: ast.Module) -> Iterator[Edge]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Edge(module, alias.name, None, path, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield Edge(module, base, alias.name, path, node.lineno)


def resolve(edge: Edge, modules: set[str]) -> str:
    """The module an edge reaches: `from package import module` reaches the module, not the package."""
    if edge.name is not None and f"{edge.target}.{edge.name}" in modules:
        return f"{edge.target}.{edge.name}"
    return edge.target


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def edge_breaches(edge: Edge, target: str, modules: set[str]) -> Iterator[str]:
    if LAYERS[layer_of(edge.source)] == COMMAND_LINE:
        reached = [edge.target, *([f"{edge.target}.{edge.name}"] if edge.name else [])]
        for mark in ORCHESTRATION:
            if any(_within(name, mark) for name in reached):
                yield (f"{edge.source} imports {mark}: {COMMAND_LINE} parses arguments and prints; what runs "
                       "work side by side lives below it")
    if TEST_MODULES.match(target):
        yield f"{edge.source} imports the test module {target}"
        return
    if layer_of(target) < 0:
        return
    if layer_of(target) > layer_of(edge.source):
        yield (f"{edge.source} imports {target}: {LAYERS[layer_of(edge.source)]} may not import from "
               f"{LAYERS[layer_of(target)]}, a layer above it")
    if edge.name is not None and _private(edge.name) and target == edge.target:
        yield f"{edge.source} imports the private name {edge.name} of {target}"
    owner, _, leaf = target.rpartition(".")
    if _private(leaf) and target in modules and not (edge.source == owner or edge.source.startswith(owner + ".")):
        yield f"{edge.source} imports {target}, a private module of {owner}"


def _dataclass(decorator: ast.expr) -> bool:
    """`@dataclass`, `@dataclasses.dataclass`, either called with options."""
    named = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(named, ast.Name) and named.id == "dataclass") or (
        isinstance(named, ast.Attribute) and named.attr == "dataclass")


def command_records(module: str, path: Path, tree: ast.Module) -> Iterator[Breach]:
    """The dataclasses of a command module of kcm.tools: records of the work it runs, which lives below it."""
    if LAYERS[layer_of(module)] != COMMAND_LINE:
        return
    if not any(isinstance(node, ast.FunctionDef) and node.name == "register" for node in tree.body):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_dataclass(d) for d in node.decorator_list):
            yield Breach(path, node.lineno, f"{module} defines the dataclass {node.name}: a command parses "
                         f"arguments and prints, the records of the work it runs live below {COMMAND_LINE}")


def test_paths(module: str, path: Path, tree: ast.Module) -> Iterator[Breach]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TEST_PATH.search(node.value):
            yield Breach(path, node.lineno, f"{module} refers to the test file {node.value!r}")


def check(root: Path) -> tuple[list[Breach], nx.DiGraph]:
    """The breaches of the rules under `root`, and the import graph between the product's modules."""
    files = dict(product_files(root))
    modules = set(files)
    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from(modules)
    breaches: list[Breach] = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        breaches.extend(test_paths(module, path, tree))
        breaches.extend(command_records(module, path, tree))
        for edge in imports(module, path, tree):
            target = resolve(edge, modules)
            # One line per breach, also when an import names several things from the same module.
            breaches.extend(b for b in (Breach(path, edge.line, m) for m in edge_breaches(edge, target, modules))
                            if b not in breaches)
            if target in modules and target != module:
                graph.add_edge(module, target, line=edge.line, path=path)
    for cycle in sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1):
        first = cycle[0]
        breaches.append(Breach(files[first], 1, f"import cycle: {' <-> '.join(cycle)}"))
    return breaches, graph


def layer_graph(graph: nx.DiGraph) -> dict[tuple[str, str], int]:
    """How many module imports go from each layer to each layer."""
    counts: dict[tuple[str, str], int] = {}
    for source, target in graph.edges:
        key = (LAYERS[layer_of(source)], LAYERS[layer_of(target)])
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kcm.tools.layers", description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", help="a checkout (default: the imported kcm packages' folders)")
    parser.add_argument("--graph", action="store_true", help="also print the imports between layers")
    args = parser.parse_args(argv)
    root = Path(args.root) if args.root else installed_root()
    if not all((root / folder).is_dir() for folder in FOLDERS.values()):
        print(f"kcm.tools.layers: {root}: no spec, impl, conformance and tools folders here", file=sys.stderr)
        return 2
    breaches, graph = check(root)
    for breach in breaches:
        print(breach)
    if args.graph:
        for (source, target), count in layer_graph(graph).items():
            print(f"{source:>16} -> {target:<16} {count:4} imports")
    print(f"{graph.number_of_nodes()} modules, {graph.number_of_edges()} imports between them: "
          f"{len(breaches)} breaches of the layering rules")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
