"""A design as one folder: the unit a reviewer brings to kcm.

    my-design/
        design.toml     the manifest (below)
        MyDesign.tla    a TLA+ module that EXTENDS the core (or a truncation era's module) and defines the hooks
                        it changes, under names of its own
        strategy.py     the implementation's strategy: a subclass of kcm.impl.design.Design overriding the points
                        it changes

The manifest, checked against `design.schema.json`:

    name = "trust-leader-hw"                     # letters, digits and dashes
    summary = "A follower truncates to its leader's HW."
    follows = "KIP-101 draft, https://..."       # the Kafka release or KIP it follows, with a citation
    base = "truncation=kip320"                   # the built-in design it starts from: knob settings, or "defaults"
    expected = ["NoCommittedDataLoss"]           # the invariants and properties it is expected to break
    models = ["ci"]                              # the model instances of spec/ it is checked on

    [tla]
    module = "TrustLeaderHw.tla"
    hooks = { TruncationOffset = "TLH_TruncationOffset" }   # core hook -> the module's operator

    [python]
    strategy = "strategy.py"
    class = "TrustLeaderHw"

Every engine reads the folder: TLC binds the hooks, the implementation loads the strategy
(kcm.impl.design.load_strategy), and an engine that cannot read a point the design changes says `unsupported`.
A bad manifest is one line naming file, line and field (DesignError).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import re
import textwrap
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import fastjsonschema

from kcm.spec.design_points import DESIGN_POINTS
from kcm.spec.vocabulary import CORE_HOOKS, ERA_HOOKS, ERA_MODULES, INVARIANTS, PROPERTIES, KnobError, Knobs

MANIFEST: Final = "design.toml"
SCHEMA_PATH: Final = importlib.resources.files("kcm.spec").joinpath("design.schema.json")


class DesignError(ValueError):
    """A design folder that cannot be read: `file:line: field: reason`."""

    def __init__(self, file: Path, line: int, field: str, reason: str) -> None:
        self.file, self.line, self.field, self.reason = file, line, field, reason
        super().__init__(f"{file}:{line}: {field}: {reason}" if field else f"{file}:{line}: {reason}")


@dataclass(frozen=True)
class BmcStory:
    """How Z3's bounded model checking reaches a bug: the depth it unrolls to and the bounds of the search.
    Where searching the whole model would take too long, the story has the reproduction model's actions and
    initial controller (its `ReproNext` and `InitStable`, renamed to the Z3 model's preference order: brokers by
    id)."""

    depth: int
    brokers: int = 2
    capacity: int = 2
    actions: tuple[str, ...] | None = None
    controller: int = 1
    deep: bool = False  # a search of three brokers that takes seconds to minutes: not in `--quick` runs
    # Why BMC's counterexample is not a behaviour of the TLA+ specification (TLC trace validation refuses it),
    # where the Z3 model still allows a step the specification does not; "" when it is one.
    not_a_behaviour: str = ""


@dataclass(frozen=True)
class BugSearch:
    """A conformance search that must find a bug by itself (kcm.conformance.explore), with the budget it is
    given: examples of at most `steps` rules on one of the stateful machines."""

    name: str
    machine: str
    examples: int
    steps: int = 40
    slow_links: bool = True


@dataclass(frozen=True)
class KnownBug:
    """A flaw a design is known to have: the invariant it breaks, the reproduction model of spec/ (MC<model>)
    that shows it under TLC, and how the other engines find it. The one catalogue of known bugs: review, hunt,
    verify, BMC and the conformance searches read their rows from the designs' manifests."""

    design: str
    label: str
    knobs: Knobs
    invariant: str  # a vocabulary name, or a reading of one (HighWatermarkMonotonic/AcrossLeaders)
    model: str | None  # None: no reproduction model (another engine found it: the design's also_breaks)
    bmc: BmcStory | None
    searches: tuple[BugSearch, ...]


@dataclass(frozen=True, eq=False)  # one folder, one design: compared (and hashed, as a review row) by identity
class DesignFolder:
    path: Path
    name: str
    label: str | None  # how tables name it; None: by its name and model
    summary: str
    follows: str
    base: Knobs
    expected: frozenset[str]
    also_breaks: frozenset[str]  # beyond its models, as another engine found: no review row checks these
    models: tuple[str, ...]
    tla_module: Path | None
    hooks: dict[str, str]
    strategy: Path | None
    strategy_class: str | None
    bugs: tuple[KnownBug, ...] = ()

    def on_model(self, model_knobs: Knobs) -> Knobs:
        """The knobs of a run on a model: the model's bounds' settings, with the design's base rules replacing
        the ones the model sets."""
        return Knobs.from_dict({**model_knobs.to_dict(), **self.base.changed()})

    @property
    def knobs_only(self) -> bool:
        """A design of knob settings alone (every built-in design): no module, no strategy of its own."""
        return self.tla_module is None and self.strategy is None

    @property
    def changed_points(self) -> tuple[str, ...]:
        """The design points whose TLA+ hooks the design rebinds."""
        return tuple(p.name for p in DESIGN_POINTS if set(p.tla) & set(self.hooks))


@functools.cache
def _validator() -> Any:
    return fastjsonschema.compile(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def read_design(path: str | Path) -> DesignFolder:
    """The design in a folder (or named by its manifest); DesignError for anything wrong in it."""
    given = Path(path)
    manifest = given if given.is_file() else given / MANIFEST
    try:
        text = manifest.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DesignError(manifest, 0, "", "no such file (a design folder holds design.toml)") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DesignError(manifest, 0, "", f"cannot read: {getattr(err, 'strerror', None) or err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        found = re.search(r"\(at line (\d+), column \d+\)", str(err))
        raise DesignError(manifest, int(found[1]) if found else 0, "",
                          re.sub(r" \(at line \d+, column \d+\)", "", str(err))) from None
    try:
        _validator()(data)
    except fastjsonschema.JsonSchemaValueException as err:
        field = ".".join(str(part) for part in err.path[1:]) or str(err.rule_definition)
        reason = err.message.removeprefix(err.name or "data").strip()
        raise DesignError(manifest, _line_of(text, err.path[1:]), field, reason or err.message) from None
    return _design(manifest, text, data)


def _design(manifest: Path, text: str, data: dict[str, Any]) -> DesignFolder:
    def refuse(field: str, reason: str) -> DesignError:
        return DesignError(manifest, _line_of(text, field.split(".")), field, reason)

    try:
        base = Knobs() if data["base"] == "defaults" else Knobs().with_settings(
            [s.strip() for s in data["base"].split(",")])
    except KnobError as err:
        raise refuse("base", str(err)) from None
    known = (*INVARIANTS, *PROPERTIES)
    for field in ("expected", "also_breaks"):
        for name in data.get(field, []):
            if name.partition("/")[0] not in known:
                raise refuse(field, f"{name!r} is no invariant or property (known: {', '.join(known)})")
    tla = data.get("tla", {})
    hooks = dict(tla.get("hooks", {}))
    for hook in hooks:
        if hook not in (*ERA_HOOKS, *CORE_HOOKS):
            raise refuse(f"tla.hooks.{hook}", f"no hook of the core is called so (hooks: "
                                              f"{', '.join((*ERA_HOOKS, *CORE_HOOKS))})")
    module = _member(manifest, text, tla, "tla", "module")
    if hooks and module is None:
        raise refuse("tla.hooks", "hooks need the module that defines them (tla.module)")
    if module is not None:
        source = module.read_text(encoding="utf-8", errors="replace")
        if not re.search(rf"^-+\s*MODULE\s+{re.escape(module.stem)}\s*-+", source, re.M):
            raise DesignError(module, 1, "", f"expected a module header '---- MODULE {module.stem} ----'")
        for hook, operator in hooks.items():
            if not re.search(rf"^{re.escape(operator)}\b", source, re.M):
                raise refuse(f"tla.hooks.{hook}", f"{module.name} defines no operator {operator}")
    python = data.get("python", {})
    strategy = _member(manifest, text, python, "python", "strategy")
    expected, also_breaks = frozenset(data["expected"]), frozenset(data.get("also_breaks", []))
    bugs = tuple(_bug(data["name"], base, entry, expected | also_breaks, functools.partial(_refuse_in, refuse, index))
                 for index, entry in enumerate(data.get("bugs", [])))
    return DesignFolder(manifest.parent, data["name"], data.get("label"), data["summary"], data["follows"], base,
                        expected, also_breaks, tuple(data["models"]), module, hooks, strategy, python.get("class"),
                        bugs)


def _refuse_in(refuse: Callable[[str, str], DesignError], index: int, field: str, reason: str) -> DesignError:
    """The error of a field of the manifest's index-th `[[bugs]]`."""
    return refuse(f"bugs.{index}.{field}", reason)


def _bug(design: str, knobs: Knobs, entry: dict[str, Any], breaks: frozenset[str],
         refuse: Callable[[str, str], DesignError]) -> KnownBug:
    """One entry of the manifest's `[[bugs]]`: what it breaks must be among what the design is expected to."""
    if entry["invariant"].partition("/")[0] not in {name.partition("/")[0] for name in breaks}:
        raise refuse("invariant", f"{entry['invariant']!r} is not among what the design is expected to break "
                                  "(expected, also_breaks)")
    story = dict(entry.get("bmc", {}))
    if story and "model" not in entry:
        raise refuse("bmc", "a BMC story runs on the bounds of the bug's reproduction model: name it (model)")
    if "actions" in story:
        story["actions"] = tuple(story["actions"])
    bmc = BmcStory(**story) if story else None
    searches = tuple(BugSearch(**search) for search in entry.get("searches", []))
    return KnownBug(design, entry["label"], knobs, entry["invariant"], entry.get("model"), bmc, searches)


def _member(manifest: Path, text: str, table: dict[str, Any], section: str, key: str) -> Path | None:
    if key not in table:
        return None
    path: Path = (manifest.parent / str(table[key])).resolve()
    if manifest.parent.resolve() not in path.parents:
        raise DesignError(manifest, _line_of(text, [section, key]), f"{section}.{key}",
                          "must name a file inside the design's folder")
    if not path.is_file():
        raise DesignError(manifest, _line_of(text, [section, key]), f"{section}.{key}", f"no such file: {path.name}")
    return path


def field_line(design: DesignFolder, field: str) -> int:
    """The line of the design's manifest that sets a field (dotted: `python.class`)."""
    return _line_of((design.path / MANIFEST).read_text(encoding="utf-8"), field.split("."))


def _line_of(text: str, path: list[Any] | tuple[Any, ...]) -> int:
    """The line where a manifest sets a field: the key's own line, else its table's, else 1. An index in the
    path picks an element of an array of tables (`bugs.1.bmc.depth`: under the second `[[bugs]]`)."""
    parts = [str(part) for part in path]
    keys = [part for part in parts if not part.isdigit()]
    # The element wanted of each array of tables, by the array's dotted name.
    wanted = {".".join(p for p in parts[:i] if not p.isdigit()): int(parts[i])
              for i in range(1, len(parts)) if parts[i].isdigit()}
    element: dict[str, int] = {}
    table: list[str] = []
    best = 1
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = re.match(r"\[\[?([^\]]+)\]\]?", stripped)
        if header:
            table = [part.strip() for part in header[1].split(".")]
            name = ".".join(table)
            if stripped.startswith("[["):
                element[name] = element.get(name, -1) + 1
                for inner in [n for n in element if n.startswith(name + ".")]:
                    del element[inner]
            chosen = all(element.get(array, -1) == at for array, at in wanted.items()
                         if name == array or name.startswith(array + "."))
            if not chosen:
                table = ["\0"]  # another element's table: no key of the path is in it
            elif keys[:len(table)] == table:
                best = number
            continue
        key = re.match(r"([A-Za-z0-9_-]+)\s*=", stripped)
        if key is None:
            continue
        where = [*table, key[1]]
        if keys[:len(where)] == where:
            best = number
    return best


# -- a new design folder ---------------------------------------------------------------------------------------

def module_name(name: str) -> str:
    """The TLA+ module of a design: its name in CamelCase (`trust-leader-hw`: TrustLeaderHw)."""
    return "".join(part.capitalize() for part in name.split("-"))


def new_design(name: str, base: Knobs, base_text: str) -> dict[str, str]:
    """The files of a new design folder starting from a built-in design (`base_text`, as its manifest's `base`
    says it): the manifest, and a TLA+ module that restates every hook of the base design's truncation era under
    the new design's prefix, each under its design point, all bound; edit the rules the design changes and delete
    the others (and their lines in `hooks`). The strategy is the implementation's side
    (kcm.impl.design.strategy_source)."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ValueError(f"design name {name!r}: letters, digits and dashes, lower case, as in trust-leader-hw")
    era, era_prefix = ERA_MODULES[base.truncation]
    module, prefix = module_name(name), name.upper().replace("-", "_") + "_"
    spec = importlib.resources.files("kcm.spec")
    definitions = _definitions(spec.joinpath(f"{era}.tla").read_text(encoding="utf-8"), era_prefix, ERA_HOOKS)
    definitions.update(_definitions(spec.joinpath("KafkaReplication.tla").read_text(encoding="utf-8"), "Default",
                                    tuple(CORE_HOOKS)))
    body = []
    for point in DESIGN_POINTS:
        for hook in point.tla if point.tla_hooks else ():
            note = textwrap.fill(f"{point.name}: {point.meaning}.", 110, initial_indent="\\* ",
                                 subsequent_indent="\\* ")
            own = era_prefix if hook in ERA_HOOKS else "Default"
            body.append(f"{note}\n" + definitions[hook].replace(own, prefix, 1))
    hooks = "".join(f'{hook} = "{prefix}{hook}"\n' for hook in (*ERA_HOOKS, *CORE_HOOKS))
    manifest = (
        f'name = "{name}"\n'
        'summary = "What the design changes, in one paragraph."\n'
        'follows = "The Kafka release or KIP it follows, with a citation (a URL, a file at a release)."\n'
        f'base = "{base_text}"\n'
        "expected = []  # the invariants and properties it is expected to break\n"
        'models = ["ci"]  # the model instances of spec/ it is checked on\n\n'
        f'[tla]\nmodule = "{module}.tla"\n\n[tla.hooks]  # core hook = this module\'s operator\n{hooks}\n'
        f'[python]\nstrategy = "strategy.py"\nclass = "{module}"\n')
    tla = (f"{'-' * 29} MODULE {module} {'-' * 29}\n"
           f"\\* {name}: every hook of the base design ({base.describe()}), restated under {prefix}.\n"
           "\\* Change the rules the design changes; delete the others and their entries in design.toml.\n"
           f"EXTENDS {era}\n\n" + "\n".join(body) + "=" * 77 + "\n")
    return {MANIFEST: manifest, f"{module}.tla": tla}


def _definitions(text: str, prefix: str, hooks: tuple[str, ...]) -> dict[str, str]:
    """A module's definitions of `hooks` under `prefix`, by hook name: each from its first line to the next line
    that starts at the margin."""
    found: dict[str, str] = {}
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        head = re.match(rf"{re.escape(prefix)}(\w+)", line)
        if head is None or head[1] not in hooks:
            continue
        block = [line]
        for rest in lines[index + 1:]:
            if rest.strip() and not rest[0].isspace():
                break
            block.append(rest)
        found[head[1]] = "".join(block).rstrip("\n") + "\n"
    return found
