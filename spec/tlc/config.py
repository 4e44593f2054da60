"""The configuration TLC reads: a `.cfg` of spec/ plus the bindings of the knobs and era hooks.

A `.cfg` of spec/ holds only what is its own: the bounds, the initial state and next-state relation, the
invariants, and the knobs it sets apart from the defaults (`Truncation = "hw"`, `UncleanElection = TRUE`).
The knob constants and the era hooks every configuration needs are written here, from the vocabulary, for
model checking and trace validation alike. By hand, `python -m kcm.spec.tlc.config < spec/MCci.cfg`
prints the configuration of a `.cfg` under its own knobs, ready for TLC's `-config`.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Final

from kcm.spec.vocabulary import CORE_HOOKS, ERA_HOOKS, ERA_MODULES, KNOB_CONSTANTS, Knobs

KNOB_OF_CONSTANT: Final = {constant: knob for knob, constant in KNOB_CONSTANTS.items()}


def tla(value: Any) -> str:
    """A Python value as a TLA+ value: booleans, integers, strings, sets (frozensets), sequences."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, frozenset):
        return "{" + ", ".join(tla(item) for item in sorted(value)) + "}"
    if isinstance(value, tuple | list):
        return "<<" + ", ".join(tla(item) for item in value) + ">>"
    raise ValueError(f"no TLA+ value for {value!r}")


def _knob_setting(line: str) -> tuple[str, str] | None:
    """(knob, value as written) if the line sets a knob's constant."""
    name, sep, value = line.partition("=")
    knob = KNOB_OF_CONSTANT.get(name.strip())
    return (knob, value.strip()) if sep and knob else None


def knob_settings(cfg: str) -> Knobs:
    """The knobs a configuration sets: the defaults, but for the knob constants it assigns."""
    knobs = Knobs()
    for line in cfg.splitlines():
        setting = _knob_setting(line)
        if setting:
            knob, value = setting
            knobs = knobs.with_value(knob, json.loads(value) if value.startswith('"') else value)
    return knobs


def bindings(knobs: Knobs, hooks: dict[str, str] | None = None) -> str:
    """A CONSTANTS section binding the knob constants and the era hooks of the knobs' truncation rule, but for
    the `hooks` a design binds to operators of its own."""
    _, prefix = ERA_MODULES[knobs.truncation]
    own = hooks or {}
    lines = [f"    {KNOB_CONSTANTS[knob]} = {tla(value)}" for knob, value in knobs.to_dict().items()]
    lines += [f"    {hook} <- {own.get(hook, prefix + hook)}" for hook in ERA_HOOKS]
    lines += [f"    {hook} <- {own.get(hook, default)}" for hook, default in CORE_HOOKS.items()]
    return "CONSTANTS\n" + "\n".join(lines) + "\n"


def configure(cfg: str, knobs: Knobs, invariants: list[str] | None = None,
              properties: list[str] | None = None, hooks: dict[str, str] | None = None) -> str:
    """The configuration under `knobs` (which replace the ones it sets), with a design's own `hooks` and, if
    given, only `invariants` and only the temporal `properties`."""
    text = "".join(f"{line}\n" for line in cfg.splitlines() if not _knob_setting(line)) + bindings(knobs, hooks)
    for section, names in (("INVARIANT", invariants), ("PROPERTY", properties)):
        if names:
            text = re.sub(_section(section), "", text)
            text += f"{_PLURAL[section]}\n" + "".join(f"    {n}\n" for n in names)
    return text


_PLURAL: Final = {"INVARIANT": "INVARIANTS", "PROPERTY": "PROPERTIES"}


def _section(section: str) -> str:
    """A section of a configuration, singular or plural, up to the next keyword."""
    return rf"(?ms)^(?:{section}|{_PLURAL[section]})\b(.*?)(?=^[A-Z]+\b|\Z)"


def declared(cfg: str, section: str) -> list[str]:
    """The names a configuration lists under `section` (`INVARIANT` or `PROPERTY`, singular or plural)."""
    names: list[str] = []
    for match in re.finditer(_section(section), cfg):
        names += [word for word in match.group(1).split() if not word.startswith("\\*")]
    return names


if __name__ == "__main__":
    given = sys.stdin.read()
    sys.stdout.write(configure(given, knob_settings(given)))
