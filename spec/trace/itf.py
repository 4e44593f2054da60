"""ITF (the Informal Trace Format of Apalache and Quint) to and from trace format v2, losslessly.

ITF is one JSON document: `vars` (the variable names), `states` (each a full assignment of the variables
plus a `#meta` object). A v2 trace is a sequence of deltas; going to ITF replays them into full states and
keeps each event's fields in the state's `#meta`, going back diffs consecutive states at each variable's
depth (docs/trace-format.md, "Conversion to and from ITF").

Value encoding: integers are JSON numbers when they fit a double exactly, `{"#bigint": "..."}` beyond;
depth-1..3 variables are `#map`s keyed by the v2 key strings; log entries are `#tup` pairs; other lists
stay JSON arrays (sequences). Read back, `#set` becomes a sorted list (an ISR as a set), `#map` keys are
turned into strings (a broker id given as a number becomes its decimal form).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from kcm.spec.atomic_output import write_output
from kcm.spec.trace.format import (
    Continuity,
    Event,
    TraceError,
    apply_event,
    decode_json,
    empty_value,
    make_event,
)
from kcm.spec.vocabulary import VARIABLES

Itf = dict[str, Any]

_SAFE_INT: Final = 2**53 - 1
# Event fields kept in each state's #meta, besides the index.
_META_FIELDS: Final = ("v", "run", "seq", "actor", "action", "args", "full")
# A full event names some variables, possibly at their empty value; ITF states cannot tell which.
_GIVEN: Final = "given"
# The delta of an event that diffing would not give back (a writer that repeats unchanged leaves).
_DELTA: Final = "delta"
_TUPLE_VARS: Final = frozenset({"log"})
_SAME: Final = object()


# -- v2 -> ITF ---------------------------------------------------------------------------------------------


def observed_variables(events: list[Event]) -> list[str]:
    """The variables some event names, in vocabulary order."""
    named = {name for event in events for name in event["state"]}
    return [name for name in VARIABLES if name in named]


def to_itf(events: list[Event], source: str = "") -> Itf:
    variables = observed_variables(events)
    state: dict[str, Any] = {}
    previous: dict[str, Any] = {}
    states = []
    for index, event in enumerate(events):
        apply_event(state, event)
        current = {name: state[name] for name in variables}
        meta: dict[str, Any] = {"index": index}
        meta.update({key: event[key] for key in _META_FIELDS if key in event})
        if event.get("full"):
            meta[_GIVEN] = list(event["state"])
        elif json.dumps(diff_states(previous, current)) != json.dumps(event["state"]):
            # Also when only the order of keys differs: the round trip gives back the same bytes.
            meta[_DELTA] = event["state"]
        states.append({"#meta": meta, **{name: _encode(current[name], name) for name in variables}})
        previous = json.loads(json.dumps(current))
    return {
        "#meta": {"format": "ITF", "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
                  "source": source, "description": "converted from kcm trace format v2"},
        "vars": variables,
        "states": states,
    }


def _encode(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return {"#map": [[key, _encode(inner, name)] for key, inner in value.items()]}
    if isinstance(value, list):
        if name in _TUPLE_VARS and value and isinstance(value[0], list):
            return [{"#tup": list(entry)} for entry in value]
        return [_encode(item, name) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _SAFE_INT:
        return {"#bigint": str(value)}
    return value


# -- ITF -> v2 ---------------------------------------------------------------------------------------------


def diff_states(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The v2 delta from `old` to `new`: changed leaves at each variable's depth, null for removed keys."""
    delta: dict[str, Any] = {}
    for name in new:
        depth = VARIABLES[name]
        changed = _diff(old.get(name, empty_value(name)), new[name], depth)
        if changed is not _SAME:
            delta[name] = changed
    return delta


def _diff(old: Any, new: Any, depth: int) -> Any:
    if depth == 0:
        return _SAME if old == new else new
    out: dict[str, Any] = {}
    for key, value in new.items():
        if depth == 1:
            if key not in old or old[key] != value:
                out[key] = value
            continue
        inner = _diff(old.get(key, {}), value, depth - 1)
        if inner is not _SAME:
            out[key] = inner
        elif key not in old:
            # A broker's map that appears empty: the delta creates it, as the v2 merge would.
            out[key] = {}
    for key in old:
        if key not in new:
            out[key] = None if depth == 1 else _nulls(old[key], depth - 1)
    return out if out else _SAME


def _nulls(old: dict[str, Any], depth: int) -> dict[str, Any]:
    return {key: None if depth == 1 else _nulls(value, depth - 1) for key, value in old.items()}


class _Reader:
    """Decodes one ITF document, naming the file and the JSON path of the first fault."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, field: str, reason: str) -> TraceError:
        return TraceError(self.file, 0, field, reason)

    def events(self, doc: Any) -> list[Event]:
        if not isinstance(doc, dict):
            raise self.fail("-", "an ITF trace is a JSON object")
        variables = doc.get("vars")
        states = doc.get("states")
        if not isinstance(variables, list) or not all(isinstance(v, str) for v in variables):
            raise self.fail("vars", "missing or not a list of variable names")
        unknown = [v for v in variables if v not in VARIABLES]
        if unknown:
            raise self.fail(f"vars.{unknown[0]}", "unknown state variable")
        if not isinstance(states, list) or not states:
            raise self.fail("states", "missing or empty")
        run = Path(self.file).stem
        continuity = Continuity(self.file)
        previous: dict[str, Any] = {}
        out = []
        for index, raw in enumerate(states):
            where = f"states[{index}]"
            current = self._state(raw, variables, where)
            event = self._event(raw.get("#meta", {}), where, index, run, previous, current)
            try:
                out.append(continuity.check(event, index))
            except TraceError as err:
                raise self.fail(f"{where}.{err.field}", err.reason) from None
            previous = current
        return out

    def _state(self, raw: Any, variables: list[str], where: str) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise self.fail(where, "a state is a JSON object")
        missing = [v for v in variables if v not in raw]
        if missing:
            raise self.fail(f"{where}.{missing[0]}", "variable listed in vars has no value")
        extra = [k for k in raw if k != "#meta" and k not in variables]
        if extra:
            raise self.fail(f"{where}.{extra[0]}", "variable not listed in vars")
        return {name: self._value(raw[name], VARIABLES[name], f"{where}.{name}") for name in variables}

    def _value(self, value: Any, depth: int, where: str) -> Any:
        if depth == 0:
            return self._plain(value, where)
        if not isinstance(value, dict) or "#map" not in value:
            raise self.fail(where, "expected a #map")
        pairs = value["#map"]
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise self.fail(f"{where}.#map", "expected a list of [key, value] pairs")
        out = {}
        for key, inner in pairs:
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise self.fail(f"{where}.#map", f"key {json.dumps(key)} is neither a string nor an integer")
            out[str(key)] = self._value(inner, depth - 1, f"{where}.{key}")
        return out

    def _plain(self, value: Any, where: str) -> Any:
        """A leaf value: numbers, booleans, strings, and sequences, tuples and sets of them."""
        if isinstance(value, list):
            return [self._plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, dict):
            return self._tagged(value, where)
        # As in a line of a trace, a number is an integer (format.decode_json): 2.0 is not one.
        if isinstance(value, float):
            raise self.fail(where, f"{value} is not an integer")
        return value

    def _tagged(self, value: dict[str, Any], where: str) -> Any:
        if len(value) != 1:
            raise self.fail(where, "expected one of #bigint, #tup, #set as the only key")
        tag, inner = next(iter(value.items()))
        if tag == "#bigint":
            try:
                return int(inner)
            except (TypeError, ValueError):
                raise self.fail(f"{where}.#bigint", f"{inner!r} is not an integer") from None
        if tag in ("#tup", "#set") and isinstance(inner, list):
            items = [self._plain(item, f"{where}.{tag}[{i}]") for i, item in enumerate(inner)]
            return sorted(items, key=json.dumps) if tag == "#set" else items
        raise self.fail(f"{where}.{tag}", "unsupported ITF value here (a trace v2 leaf cannot hold it)")

    def _event(self, meta: Any, where: str, index: int, run: str, previous: dict[str, Any],
               current: dict[str, Any]) -> Event:
        if not isinstance(meta, dict):
            raise self.fail(f"{where}.#meta", "must be an object")
        first = index == 0
        full = bool(meta.get("full", first))
        action = meta.get("action", "Init" if first else None)
        if action is None:
            raise self.fail(f"{where}.#meta.action", "missing (only the first state defaults to Init)")
        actor = meta.get("actor", "env" if first else "observer")
        if full:
            given = meta.get(_GIVEN, list(current))
            if not isinstance(given, list) or any(name not in current for name in given):
                raise self.fail(f"{where}.#meta.{_GIVEN}", "must list variables of vars")
            delta = {name: current[name] for name in given}
        elif _DELTA in meta:
            delta = meta[_DELTA]
        else:
            delta = diff_states(previous, current)
        event = make_event(meta.get("run", run), meta.get("seq", index), actor, action, meta.get("args", {}),
                           delta, full)
        event["v"] = meta.get("v", event["v"])
        return event


def from_itf(doc: Any, file: str = "<itf>") -> list[Event]:
    """The v2 events of an ITF document; raises TraceError (file, JSON path, reason) at the first fault."""
    return _Reader(file).events(doc)


def read_itf(path: str | Path) -> list[Event]:
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise TraceError(file, 0, "-", reason) from None
    try:
        doc = decode_json(text, file, 0)
    except json.JSONDecodeError as err:
        raise TraceError(file, err.lineno, "-", f"invalid JSON: {err.msg} (column {err.colno})") from None
    return from_itf(doc, file)


def write_itf(events: list[Event], path: str | Path, source: str = "") -> None:
    """Writes the ITF document whole: a reader, or a command cut off, never leaves half of one (atomic_output)."""
    write_output(path, json.dumps(to_itf(events, source), separators=(",", ":")) + "\n")
