"""The JSON Schemas (draft-07) of the documents kcm's commands print with `--json` (docs/json.md).

One schema per command, `kcm/tools/schemas/<command>.schema.json`, and for a command whose subcommands print
different documents, one per subcommand, `<command>-<sub>.schema.json` (`kafka-judge`, `pipeline-report`). They
ship as package data. A schema is named by its file without `.schema.json`:

    from kcm.tools.json_schemas import validate
    validate("review", json.loads(text))   # DocumentError (a ValueError) when the document does not follow it
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Final

import fastjsonschema

SUFFIX: Final = ".schema.json"


class UnknownSchemaError(ValueError):
    """A name no schema file has."""


class DocumentError(ValueError):
    """A document that does not follow its schema: the schema's name, where in the document (`name`: the path
    from its top, as `rows[0].cells`; empty for the top itself) and the rule it breaks."""

    def __init__(self, name: str, where: str, reason: str) -> None:
        super().__init__(f"not a valid {name} document ({name}{SUFFIX}): "
                         f"{where or 'the top level'}: {reason}")
        self.name = name
        self.where = where
        self.reason = reason


def _folder() -> Traversable:
    return resources.files("kcm.tools") / "schemas"


def names() -> list[str]:
    """Every schema's name, sorted."""
    return sorted(entry.name.removesuffix(SUFFIX) for entry in _folder().iterdir() if entry.name.endswith(SUFFIX))


def schema(name: str) -> dict[str, Any]:
    """The schema `name` (a fresh copy, the caller's to change); UnknownSchemaError for a name none has."""
    entry = _folder() / f"{name}{SUFFIX}"
    if not entry.is_file():
        raise UnknownSchemaError(f"no JSON schema named {name!r} (known: {', '.join(names())})")
    loaded: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def _validator(name: str) -> Callable[[Any], Any]:
    """The schema compiled, once per name (compiling costs tens of milliseconds)."""
    compiled: Callable[[Any], Any] = fastjsonschema.compile(schema(name))
    return compiled


def validate(name: str, document: Any) -> None:
    """Returns when `document` (parsed JSON) follows the schema `name`; raises DocumentError naming the first
    place it does not, UnknownSchemaError for a name no schema has."""
    try:
        _validator(name)(document)
    except fastjsonschema.JsonSchemaValueException as err:
        where = (err.name or "data").removeprefix("data").lstrip(".")
        reason = err.message.removeprefix(err.name or "data").strip() or err.message
        raise DocumentError(name, where, reason) from err
