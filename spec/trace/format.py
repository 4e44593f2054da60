"""Trace format v2: one JSON object per line, each an event carrying the delta of the state it produced.

Every engine of kcm (the implementation, TLC and Z3 counterexamples, parsed Kafka logs) writes and reads
this one format, so a trace from any of them can be replayed through the same invariant checker.
docs/trace-format.md describes the format for users; schema.json is its single-event schema.

Format v1 differs in one value only: it wrote "no leader" and "no controller" as 0, so its broker ids
started at 1. The readers accept v1 and hand out v2 events (`upgrade_v1`); the writers write v2 only.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, NoReturn

import fastjsonschema

from kcm.spec.atomic_output import OutputError, open_output
from kcm.spec.vocabulary import ACTIONS, NO_LEADER, VARIABLES, KnobError, Knobs

Event = dict[str, Any]

# Located through the package, not __file__, which a compiled module does not set to its own folder.
SCHEMA_PATH: Final = importlib.resources.files("kcm.spec.trace").joinpath("schema.json")
FORMAT_VERSION: Final = 2
V1: Final = 1
V1_NO_LEADER: Final = 0

# The order keys are written in; fixed so the same run always produces the same bytes.
KEY_ORDER: Final[tuple[str, ...]] = ("v", "run", "seq", "actor", "action", "args", "state", "full")

# An observer reports a step whose actor it could not see (a parsed log line, a store snapshot), so it
# may stand in for any actor kind.
OBSERVER: Final = "observer"

# Init's args key that marks a snapshot a parser made up (a Kafka log has no line for the state before it):
# such an event is checked like any other but is no record of the input, so the pipeline does not count it.
SYNTHESIZED: Final = "synthesized"

# How deep a line may nest arrays and objects. kcm's own lines nest at most 7 deep (a log entry inside a
# delta); the bound keeps every reader, and every consumer of an event that walks it, well inside Python's
# recursion limit, whatever a line holds.
MAX_DEPTH: Final = 64

NO_FIELD: Final = "-"
_DEFINITIONS: Final = "#/definitions/"
_LONG_ENUM: Final = 8

_Validator = Callable[[Any], Any]
_validator: _Validator | None = None


class TraceError(Exception):
    """A trace that breaks the format; the one exception type the readers and writers raise."""

    def __init__(self, file: str, line: int, field: str, reason: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = reason
        # Keys and values come from the trace itself; escaping line breaks keeps the message one line.
        # Line 0 is the whole file (unreadable, empty), and "-" no field in particular: neither is printed.
        where = f"{file}:{line}" if line else file
        message = f"{where}: {reason}" if field == "-" else f"{where}: {field}: {reason}"
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, int, str, str]]:
        # The default reduce would call __init__ with the message alone.
        return (TraceError, (self.file, self.line, self.field, self.reason))


def _inline_refs(node: Any, definitions: dict[str, Any]) -> Any:
    """Replace each local `$ref` by the definition it names.

    fastjsonschema turns every `$ref` into a call that formats the error path even when the value is
    valid; inlined, validation runs about three times faster on the reader's hot path.
    """
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFINITIONS):
            return _inline_refs(definitions[ref[len(_DEFINITIONS) :]], definitions)
        return {key: _inline_refs(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline_refs(item, definitions) for item in node]
    return node


def schema_validator() -> _Validator:
    # Compiled on first use: compiling costs tens of milliseconds that importers who never read a trace
    # should not pay.
    global _validator
    if _validator is None:
        schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        definitions = schema.pop("definitions", {})
        _validator = fastjsonschema.compile(_inline_refs(schema, definitions))
    return _validator


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def schema_error(err: fastjsonschema.JsonSchemaValueException) -> tuple[str, str]:
    """The (field, reason) of a schema violation, naming the offending key rather than its parent."""
    name = err.name or "data"
    prefix = name[len("data.") :] if name.startswith("data.") else ""
    value = err.value
    definition = err.definition if isinstance(err.definition, dict) else {}
    if err.rule == "required" and isinstance(value, dict):
        missing = [key for key in definition.get("required", []) if key not in value]
        return _join(prefix, missing[0] if missing else NO_FIELD), "missing required field"
    if err.rule == "additionalProperties" and isinstance(value, dict):
        known = definition.get("properties", {})
        extra = [key for key in value if key not in known]
        what = "unknown state variable" if prefix == "state" else "unknown field"
        return _join(prefix, str(extra[0]) if extra else NO_FIELD), what
    if err.rule == "propertyNames" and isinstance(value, dict):
        names = definition.get("propertyNames", {})
        pattern = re.compile(names.get("pattern", ""))
        bad = [key for key in value if not pattern.search(str(key))]
        what = names.get("description", "an allowed key")
        return _join(prefix, str(bad[0]) if bad else NO_FIELD), f"not {what}"
    if err.rule == "enum":
        allowed = [item for item in definition.get("enum", []) if item is not None]
        # Long lists (the action catalogue) would drown the one-line message.
        shown = "" if len(allowed) > _LONG_ENUM else f" (expected one of {', '.join(map(str, allowed))})"
        return prefix or NO_FIELD, f"unknown value {value!r}{shown}"
    message = err.message or "invalid"
    reason = message[len(name) + 1 :] if message.startswith(name + " ") else message
    return prefix or NO_FIELD, reason


def actor_kind(actor: str) -> str:
    """`broker:3` -> `broker`; a kind without an id is its own kind."""
    return actor.partition(":")[0]


# The variables keyed by broker first: these depth-1 ones and every deeper one.
_BROKER_KEYED: Final = frozenset(
    {"acting_controller_epoch", "alive", "broker_controller_epoch"} | {n for n, d in VARIABLES.items() if d >= 2}
)
# Where a v1 event names a broker: the actor, Init's broker list, the broker keys of the broker-keyed
# variables, the replica keys of `replica_state` and the members of these replica lists.
_V1_REPLICA_LISTS: Final = ("assignment", "isr")


def _version(event: Any) -> int | None:
    """The format version a line declares; None when it declares none the readers know (the schema says why)."""
    v = event.get("v") if isinstance(event, dict) else None
    # bool is an int: `"v": true` is no version.
    return v if type(v) is int and v in (V1, FORMAT_VERSION) else None


def upgrade_v1(event: Any, file: str, line: int) -> Any:
    """A v1 event as v2: every "no leader"/"no controller" 0 becomes NO_LEADER; anything else is returned
    as given (the schema judges it). A v1 event that names broker 0 as a broker, or writes -1 where v1
    wrote 0, is an error: v1 had no broker 0, so such a file was not written as v1."""
    if _version(event) != V1:
        return event
    upgraded = dict(event, v=FORMAT_VERSION)
    _check_v1_actor(event.get("actor"), file, line)
    args = event.get("args")
    if isinstance(args, dict):
        brokers = args.get("brokers")
        if isinstance(brokers, list) and V1_NO_LEADER in brokers:
            raise TraceError(file, line, "args.brokers", "a v1 trace names broker 0, which v1 cannot hold")
        upgraded["args"] = _upgrade_args(args, "args", file, line)
    state = event.get("state")
    if isinstance(state, dict):
        _check_v1_brokers(state, file, line)
        upgraded["state"] = _upgrade_state(state, file, line)
    return upgraded


def _v1_leader(value: Any, field: str, file: str, line: int) -> Any:
    if not isinstance(value, int) or isinstance(value, bool):
        return value
    if value == NO_LEADER:
        raise TraceError(file, line, field, f"{NO_LEADER} in a v1 trace (v1 wrote no leader as 0)")
    return NO_LEADER if value == V1_NO_LEADER else value


def _upgrade_state(state: dict[str, Any], file: str, line: int) -> dict[str, Any]:
    out = dict(state)
    if "controller" in state:
        out["controller"] = _v1_leader(state["controller"], "state.controller", file, line)
    leaders = state.get("leader")
    if isinstance(leaders, dict):
        out["leader"] = {p: _v1_leader(v, f"state.leader.{p}", file, line) for p, v in leaders.items()}
    return out


def _upgrade_args(value: Any, field: str, file: str, line: int) -> Any:
    """Every `leader` field of the arguments (a request's partition states, a written state node)."""
    if isinstance(value, dict):
        return {
            key: _v1_leader(inner, f"{field}.{key}", file, line)
            if key == "leader"
            else _upgrade_args(inner, f"{field}.{key}", file, line)
            for key, inner in value.items()
        }
    if isinstance(value, list):
        return [_upgrade_args(inner, f"{field}.{i}", file, line) for i, inner in enumerate(value)]
    return value


def _check_v1_actor(actor: Any, file: str, line: int) -> None:
    if isinstance(actor, str) and actor_kind(actor) in ("broker", "controller") and actor.endswith(":0"):
        raise TraceError(file, line, "actor", f"a v1 trace names broker 0 ({actor}), which v1 cannot hold")


def _v1_brokers_named(state: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(field, broker) for every place a v1 delta names a broker: a key or a replica-list member."""
    for name, value in state.items():
        if not isinstance(value, dict):
            continue
        if name in _V1_REPLICA_LISTS:
            for p, members in value.items():
                if isinstance(members, list):
                    yield from ((f"state.{name}.{p}", r) for r in members)
            continue
        if name not in _BROKER_KEYED:
            continue
        for b, parts in value.items():
            yield f"state.{name}.{b}", b
            if name not in ("replica_state", "local_isr") or not isinstance(parts, dict):
                continue
            for p, inner in parts.items():
                where = f"state.{name}.{b}.{p}"
                if isinstance(inner, dict):
                    yield from ((f"{where}.{r}", r) for r in inner)
                elif isinstance(inner, list):
                    yield from ((where, r) for r in inner)


def _check_v1_brokers(state: dict[str, Any], file: str, line: int) -> None:
    for field, broker in _v1_brokers_named(state):
        if broker in (V1_NO_LEADER, str(V1_NO_LEADER)) and not isinstance(broker, bool):
            raise TraceError(file, line, field, "a v1 trace names broker 0, which v1 cannot hold")


class Continuity:
    """The rules of a trace that span its lines or that the schema cannot express: one format version, one
    run, each seq one more than the one before, and an actor of the kind the action needs and among the
    brokers Init names. Every reader of a trace holds its lines to these rules: a file's lines through
    `read_line`, events from elsewhere (an ITF document, a writer) through `check`.

    A reader may go on past a line it refuses (one that quarantines it): a refused line sets nothing
    the lines after it are held to, and since it may have held the next event, each refused line lets the
    next accepted one skip one more seq. A seq skipped with no line refused (a line left out) is an error,
    and so is every line after it: none of them is one more than the last accepted line plus the lines
    refused since."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.version: int | None = None
        self.run: str | None = None
        self.last_seq: int | None = None  # of the last accepted event
        self.refused = 0  # lines refused since it
        # Init's args.brokers, when it names them: the brokers a broker or controller actor may be, and the
        # keys (as strings) a broker-keyed variable may have.
        self.brokers: frozenset[int] | None = None
        self._broker_keys: frozenset[str] = frozenset()

    def read_line(self, raw: bytes, line: int) -> Event:
        """Line `line` of the file (from 1), decoded (`parse_line`) and checked; TraceError if not."""
        try:
            value = parse_line(raw, self.file, line)
        except TraceError:
            self.refused += 1
            raise
        return self.check(value, line)

    def check(self, event: Any, line: int) -> Event:
        """The event of a line, upgraded to v2 and checked; TraceError (file, line, field, reason) if not."""
        try:
            checked = self._check(event, line)
        except TraceError:
            self.refused += 1
            raise
        self.refused = 0
        return checked

    def _check(self, event: Any, line: int) -> Event:
        version = self._check_version(event, line)
        event = upgrade_v1(event, self.file, line)
        try:
            schema_validator()(event)
        except fastjsonschema.JsonSchemaValueException as err:
            field, reason = schema_error(err)
            raise TraceError(self.file, line, field, reason) from None
        run, seq, actor, action = event["run"], event["seq"], event["actor"], event["action"]
        if self.run is not None and run != self.run:
            raise TraceError(self.file, line, "run", f"run {run!r} differs from the trace's run {self.run!r}")
        self._check_seq(seq, line)
        if action == "Init" and "knobs" in event["args"]:
            # Every engine reads the design off these: a knob it does not know is this line's fault, not theirs.
            try:
                Knobs.from_dict(event["args"]["knobs"])
            except KnobError as err:
                raise TraceError(self.file, line, "args.knobs", str(err)) from None
        # An Init's state is held to the brokers it names itself.
        named = event["args"].get("brokers") if action == "Init" else None
        brokers, keys = (self.brokers, self._broker_keys) if named is None else \
            (frozenset(named), frozenset(map(str, named)))
        self._check_actor(actor, action, brokers, line)
        if brokers is not None:
            self._check_broker_keys(event["state"], brokers, keys, line)
        # Accepted: only now does the line set what later lines are held to.
        self.version, self.run, self.last_seq = version, run, seq
        self.brokers, self._broker_keys = brokers, keys
        checked: Event = event
        return checked

    def _check_seq(self, seq: int, line: int) -> None:
        if self.last_seq is None:
            return
        low, high = self.last_seq + 1, self.last_seq + 1 + self.refused
        if not low <= seq <= high:
            lines = "line" if self.refused == 1 else "lines"
            after = f" (up to {high} after {self.refused} refused {lines})" if self.refused else ""
            raise TraceError(self.file, line, "seq", f"expected seq {low}{after}, got {seq}")

    def _check_version(self, event: Any, line: int) -> int | None:
        version = _version(event)
        if version is not None and self.version is not None and version != self.version:
            raise TraceError(self.file, line, "v", f"a v{version} line in a v{self.version} trace "
                                                   "(a trace is written in one format version)")
        return version

    def _check_actor(self, actor: str, action: str, brokers: frozenset[int] | None, line: int) -> None:
        kind, _, ident = actor.partition(":")
        needed = ACTIONS[action]
        if kind != needed and kind != OBSERVER:
            shown = f"{needed}:N" if needed in ("broker", "controller") else needed
            raise TraceError(
                self.file, line, "actor", f"action {action} needs a {shown} actor, got {actor!r}"
            )
        # The schema's pattern gives every broker and controller actor a decimal id.
        if ident and brokers is not None and int(ident) not in brokers:
            raise self._unknown_broker(int(ident), "actor", brokers, line)

    def _check_broker_keys(self, state: dict[str, Any], brokers: frozenset[int], keys: frozenset[str],
                           line: int) -> None:
        """The brokers a delta keys its broker-keyed variables by, as the keys the schema makes them (decimal,
        no leading zero). A replica a broker holds may be any broker id: a log names replicas of brokers
        that log nothing."""
        for name, value in state.items():
            if name in _BROKER_KEYED and not keys.issuperset(value):
                key = next(key for key in value if key not in keys)
                raise self._unknown_broker(int(key), f"state.{name}.{key}", brokers, line)

    def _unknown_broker(self, broker: int, field: str, brokers: frozenset[int], line: int) -> TraceError:
        named = ", ".join(map(str, sorted(brokers))) or "none"
        return TraceError(self.file, line, field,
                          f"broker {broker} is not one of the trace's brokers (Init's args.brokers: {named})")


class _Refused(Exception):
    """A JSON value a trace cannot hold, met while decoding."""


def _refuse_fraction(literal: str) -> NoReturn:
    raise _Refused(f"{literal} is not an integer (every number of a trace is an integer)")


def _refuse_constant(literal: str) -> NoReturn:
    raise _Refused(f"{literal} is not a JSON number")


# Python's json decodes 1e308 and 2.0 as floats, and the schema (draft-07) calls an integral float an
# integer: refused while decoding, no fraction or exponent reaches an epoch, an offset or a seq.
_DECODER: Final = json.JSONDecoder(parse_float=_refuse_fraction, parse_constant=_refuse_constant)
_TOO_DEEP: Final = f"nested too deeply (more than {MAX_DEPTH} levels of arrays and objects)"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep in a decoded value (the decoder's own dicts and
    lists). Level by level, in a loop: no recursion, and a few times faster than a walk node by node."""
    level = [value]
    depth = 1
    while level:
        if depth > limit:
            return True
        level = [child for node in level for child in (node.values() if type(node) is dict else node)
                 if type(child) is dict or type(child) is list]
        depth += 1
    return False


def decode_json(text: str, file: str, line: int) -> Any:
    """JSON text as a trace may hold it (a line of a trace, an ITF document, a Parquet row's args or state):
    TraceError for a number that is not an integer, for NaN and Infinity, and for nesting deeper than
    MAX_DEPTH; json.JSONDecodeError for text that is not JSON, which the caller words."""
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except _Refused as err:
        raise TraceError(file, line, NO_FIELD, str(err)) from None
    except RecursionError:
        raise TraceError(file, line, NO_FIELD, _TOO_DEEP) from None
    except ValueError:
        # The one other ValueError of the decoder: an integer longer than Python converts.
        raise TraceError(file, line, NO_FIELD, f"an integer of more than {sys.get_int_max_str_digits()} "
                                                "digits") from None
    # A line holds at least as many brackets as it nests deep: most lines need no walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise TraceError(file, line, NO_FIELD, _TOO_DEEP)
    return value


def parse_line(raw: bytes, file: str, line: int) -> Any:
    """One line of a trace, decoded: the JSON value, or TraceError naming the file, the line and why not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TraceError(file, line, NO_FIELD, f"not UTF-8 (byte {err.start} of the line)") from None
    if not text.strip():
        raise TraceError(file, line, NO_FIELD, "blank line")
    try:
        return decode_json(text, file, line)
    except json.JSONDecodeError as err:
        # Only the last line can lack its newline; broken JSON there means the writer was cut off.
        if not raw.endswith(b"\n"):
            raise TraceError(file, line, NO_FIELD, "truncated file (last line incomplete)") from None
        raise TraceError(file, line, NO_FIELD, f"invalid JSON: {err.msg} (column {err.colno})") from None


def read_trace(path: str | Path) -> Iterator[Event]:
    """Stream the events of a trace file, validating each; raises TraceError at the first fault."""
    file = str(path)
    continuity = Continuity(file)
    line = 0
    try:
        with open(path, "rb") as handle:
            for line, raw in enumerate(handle, start=1):
                yield continuity.read_line(raw, line)
    except OSError as err:
        raise TraceError(file, line, NO_FIELD, err.strerror or str(err)) from None
    if line == 0:
        raise TraceError(file, 0, NO_FIELD, "empty trace")


def load_trace(path: str | Path) -> list[Event]:
    return list(read_trace(path))


class TraceFile:
    """A trace file read as a stream each time it is iterated: engines that look at a trace twice (first
    for its brokers or variables, then step by step) take it in place of a list, so that no more than a
    step's events are held at once."""

    def __init__(self, path: str | Path) -> None:
        self.path = path

    def __iter__(self) -> Iterator[Event]:
        return read_trace(self.path)


# What the engines that read a trace more than once take: a list, or a file read again for each pass.
Events = Sequence[Event] | TraceFile


def empty_value(name: str) -> Any:
    """A variable's value before anything sets it: no controller, epoch 0, or an empty map."""
    if VARIABLES[name] > 0:
        return {}
    return NO_LEADER if name == "controller" else 0


def empty_state() -> dict[str, Any]:
    return {name: empty_value(name) for name in VARIABLES}


def _merge1(target: dict[str, Any], delta: dict[str, Any]) -> None:
    for key, value in delta.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


def _merge2(target: dict[str, Any], delta: dict[str, Any]) -> None:
    for key, inner in delta.items():
        into = target.get(key)
        if into is None:
            # A fresh dict, never the delta's own: the state is mutated by later deltas.
            into = target[key] = {}
        _merge1(into, inner)


def _merge3(target: dict[str, Any], delta: dict[str, Any]) -> None:
    for key, inner in delta.items():
        into = target.get(key)
        if into is None:
            into = target[key] = {}
        _merge2(into, inner)


_MERGES: Final = (None, _merge1, _merge2, _merge3)


def merge_variable(state: dict[str, Any], name: str, value: Any) -> None:
    """Merge one variable of a delta into a full state in place, at the variable's key depth."""
    merge = _MERGES[VARIABLES[name]]
    if merge is None:
        state[name] = value
    else:
        merge(state[name], value)


def apply_delta(state: dict[str, Any], delta: dict[str, Any]) -> None:
    """Merge a validated delta into a full state in place, at each variable's key depth.

    Leaf values (lists) are shared with the delta, not copied: treat both as immutable.
    """
    for name, value in delta.items():
        merge_variable(state, name, value)


def apply_event(state: dict[str, Any], event: Event) -> None:
    """Advance a full state by one event; a `full` event first resets every variable."""
    if event.get("full"):
        state.clear()
        state.update(empty_state())
    apply_delta(state, event["state"])


def make_event(
    run: str,
    seq: int,
    actor: str,
    action: str,
    args: dict[str, Any],
    state: dict[str, Any],
    full: bool = False,
) -> Event:
    """An event with its keys in the written order; `full` is present only when true."""
    event: Event = {
        "v": FORMAT_VERSION,
        "run": run,
        "seq": seq,
        "actor": actor,
        "action": action,
        "args": args,
        "state": state,
    }
    if full:
        event["full"] = True
    return event


def _ordered(event: Event, file: str, line: int) -> Event:
    ordered = {key: event[key] for key in KEY_ORDER if key in event}
    if len(ordered) != len(event):
        extra = next(key for key in event if key not in ordered)
        raise TraceError(file, line, str(extra), "unknown field")
    return ordered


class TraceWriter:
    """Writes events as compact JSON lines, to a path or to a text stream. A path is claimed for this writer
    alone and published whole when the writer closes without error (kcm.spec.atomic_output); a block that
    raises leaves the path as it was."""

    # One encoder for every line: `json.dumps` with separators builds a new encoder on every call.
    _ENCODER: Final = json.JSONEncoder(separators=(",", ":"))

    def __init__(self, target: str | Path | IO[str], validate: bool = False) -> None:
        self._claim: contextlib.ExitStack | None = None
        if isinstance(target, str | Path):
            self.file = str(target)
            claim = contextlib.ExitStack()
            try:
                self._stream: IO[str] = claim.enter_context(open_output(target))
            except OutputError as err:
                raise TraceError(self.file, 0, NO_FIELD, err.reason) from None
            self._claim = claim
        else:
            self.file = str(getattr(target, "name", "<stream>"))
            self._stream = target
        self._continuity = Continuity(self.file) if validate else None
        self.lines = 0

    def write(self, event: Event) -> None:
        line = self.lines + 1
        if tuple(event) != KEY_ORDER[: len(event)]:
            event = _ordered(event, self.file, line)
        if self._continuity is not None:
            self._continuity.check(event, line)
        self._stream.write(self._ENCODER.encode(event) + "\n")
        self.lines = line

    def close(self) -> None:
        """Publishes the file (a path) or flushes the stream."""
        if self._claim is not None:
            claim, self._claim = self._claim, None
            claim.close()
        else:
            self._stream.flush()

    def abandon(self, exc: BaseException) -> None:
        """Drops what was written to a path: the file stays as it was before this writer."""
        if self._claim is not None:
            claim, self._claim = self._claim, None
            claim.__exit__(type(exc), exc, exc.__traceback__)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
        else:
            self.abandon(exc)
