"""How every engine reads a design (kcm.spec.design_folder), and what it lacks: the check that no design is known
to one engine and silently unknown to another.

For each design: TLC must bind it (its models exist, its base design's truncation era has its module, its own
hooks name operators of its module) and check what it is expected to break on each of its models; the
implementation must load its strategy; Z3 reads it through knobs or declares it `unsupported` (a design with
hooks or a strategy of its own changes a point Z3 reads only as a knob); an unsafe design (one expected to break
something) is reproduced on its models, where its review rows check it; its known bugs (the manifest's
`[[bugs]]`, the one catalogue) break what it is expected to, name models of spec/ and machines of the conformance
searches, and have BMC stories only where Z3 reads the design.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcm.conformance.explore.stateful import MACHINES
from kcm.impl.design import Design, load_strategy, overridden_points
from kcm.spec.design_folder import DesignError, DesignFolder
from kcm.spec.design_points import design_point
from kcm.spec.tlc.config import declared
from kcm.spec.tlc.modelcheck import models
from kcm.spec.verdicts import UNSUPPORTED
from kcm.spec.vocabulary import ERA_MODULES, PROPERTIES


@dataclass
class Readings:
    """What each engine makes of a design; `problems` lists what it lacks (empty: known to every engine)."""

    design: str
    tla: str = ""
    impl: str = ""
    z3: str = ""
    bmc: list[str] = field(default_factory=list)  # its known bugs BMC has a story for
    search: list[str] = field(default_factory=list)  # the conformance searches of its known bugs
    problems: list[str] = field(default_factory=list)


def unread_by_tlc(design: DesignFolder) -> tuple[str, ...]:
    """The design points the strategy changes and TLC cannot check as the design has them: a point whose TLA+
    reading is no hook a module can define (an action, an operator of the core), or a hook point the module
    leaves to the base design. TLC's rows of such a design are `unsupported`: they would check the base rule."""
    if design.strategy is None:
        return ()
    try:
        changed = overridden_points(load_strategy(design))
    except DesignError:
        return ()  # the strategy that does not load is the implementation's problem (readings says so)
    return tuple(name for name in changed
                 if not design_point(name).tla_hooks or name not in design.changed_points)


def readings(design: DesignFolder) -> Readings:
    found = Readings(design.name)
    _tla(design, found)
    _impl(design, found)
    _z3(design, found)
    _catalogues(design, found)
    return found


def _tla(design: DesignFolder, found: Readings) -> None:
    era, _ = ERA_MODULES[design.base.truncation]
    known = models()
    for model in design.models:
        if model not in known:
            found.problems.append(f"tla: no model {model!r} in spec/ (MC{model}.cfg)")
            continue
        # A review row checks every invariant on its model; a property only where the model's fairness has it.
        properties = set(declared(known[model].config.read_text(), "PROPERTY"))
        for name in sorted(design.expected):
            base = name.partition("/")[0]
            if base in PROPERTIES and base not in properties:
                found.problems.append(f"tla: model {model} does not check {base}, which the design is expected to "
                                      "break")
    hooks = ", ".join(f"{hook} <- {operator}" for hook, operator in sorted(design.hooks.items()))
    found.tla = f"{era}" + (f" + {design.tla_module.name} ({hooks})" if design.tla_module is not None else "")
    if design.strategy is not None and design.tla_module is None:
        found.problems.append("tla: the strategy changes rules the TLA+ model does not (no tla.module): TLC would "
                              "check the base design's")
    elif unread := unread_by_tlc(design):
        found.problems.append(f"tla: {UNSUPPORTED}: the strategy changes {', '.join(unread)}, which the TLA+ module "
                              "does not (no hook of the module's): TLC would check the base design's rule there")


def _impl(design: DesignFolder, found: Readings) -> None:
    try:
        strategy = load_strategy(design)
    except DesignError as err:
        found.problems.append(f"impl: {err}")
        return
    changed = overridden_points(strategy)
    found.impl = type(strategy).__name__ + (f" ({', '.join(changed)})" if changed else "")
    # A point the implementation has no method for (hw-exposure, the checker's) is the module's alone.
    unread = sorted(p for p in set(design.changed_points) - set(changed) if design_point(p).python) \
        if type(strategy) is not Design else []
    for point in unread:
        found.problems.append(f"impl: the TLA+ module changes {point}, the strategy does not")


def _z3(design: DesignFolder, found: Readings) -> None:
    if design.knobs_only:
        found.z3 = f"knobs {design.base.describe()}"
        return
    points = sorted(set(design.changed_points) | set(overridden_points(load_strategy(design))))
    readers = {name: design_point(name).z3 for name in points}
    found.z3 = f"{UNSUPPORTED}: " + "; ".join(f"{name} ({reading or 'not read'})" for name, reading in readers.items())


def _catalogues(design: DesignFolder, found: Readings) -> None:
    """The design's known bugs, as each engine reads them: BMC's stories need knobs alone (Z3 reads no module or
    strategy of a design's own); every bug but one another engine found (also_breaks) has a reproduction model."""
    found.bmc = [bug.label for bug in design.bugs if bug.bmc is not None]
    found.search = [search.name for bug in design.bugs for search in bug.searches]
    known = models()
    for bug in design.bugs:
        if bug.bmc is not None and not design.knobs_only:
            found.problems.append(f"z3: the known bug {bug.label!r} has a BMC story, but Z3 reads no design of one's "
                                  f"own ({UNSUPPORTED})")
        if bug.model is None and bug.invariant.partition("/")[0] in design.expected:
            found.problems.append(f"tla: the known bug {bug.label!r} breaks an expected invariant but names no "
                                  "reproduction model")
        if bug.model is not None and bug.model not in known:
            found.problems.append(f"tla: the known bug {bug.label!r} names no model of spec/: {bug.model!r}")
        for search in bug.searches:
            if search.machine not in MACHINES:
                found.problems.append(f"conformance: the search {search.name!r} names no machine: {search.machine!r}")
