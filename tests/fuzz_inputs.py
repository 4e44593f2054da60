"""Hypothesis strategies of bad input for the fuzz campaign of the command line (tests/test_fuzz_cli.py).

Every strategy draws a `Case`: the files to lay out in a fresh folder, the arguments of one `kcm` command, the
environment to run it in, and the exit codes the answer may have. The material is real: traces the simulator
writes (the safe design, and one that breaks invariants) and the Kafka state-change logs of tests/data, mutated
line by line, value by value, or byte by byte; argument lists are a command's valid options with at least one
bad one among them.

`Case.bad` says whether the input is wrong by the documented rules (docs/trace-format.md, each command's
--help): a bad case must end in exit 2 (3 where the command quarantines instead), an input that stays valid may
end in any decision (0, 1) or 2 (undecided).
"""

from __future__ import annotations

import functools
import gzip
import io
import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from hypothesis import strategies as st

from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import SCHEMA_PATH, TraceWriter
from kcm.spec.vocabulary import INVARIANTS, Knobs

DATA: Final = Path(__file__).parent / "data"
KAFKA_LOGS: Final = tuple(sorted((DATA / "kafka").glob("state-change-*.log")) +
                          sorted((DATA / "kafka" / "rendered").glob("*.log")))
PIPELINE_SUMMARY: Final = DATA / "report" / "pipeline" / "summary.json"

# Folders every case finds beside its inputs: a directory where a file is expected, a file where a folder is.
A_DIR: Final = "adir"
A_FILE: Final = "afile"
# An output no one can write, even root: /proc takes no new files.
UNWRITABLE: Final = "/proc/kcm-fuzz/out"
MISSING: Final = "missing.jsonl"

# A name no case's folder holds: any text but a path separator, NUL (no path can hold it) or a name of "." and
# ".." (which lead out of where they are put).
NAMES: Final = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="/\x00"), min_size=1,
                       max_size=16).filter(lambda name: name not in (".", ".."))

# Exit codes (kcm.tools.errors): a decision, bad input, input quarantined.
DECIDED: Final = frozenset({0, 1})
USAGE: Final = frozenset({2})


@dataclass(frozen=True)
class Case:
    """One invocation: argv after `kcm`, files to create (relative to the case's folder), environment
    overrides (None unsets), the exits allowed, and what was done to the input (shown on failure)."""

    argv: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...] = ()
    env: tuple[tuple[str, str | None], ...] = ()
    allowed: frozenset[int] = USAGE
    label: str = ""
    # Outputs the command is asked to write: after exit 2 each is absent (or as it was), after 0, 1 or 3 whole.
    outputs: tuple[str, ...] = field(default=())

    @property
    def bad(self) -> bool:
        return not self.allowed & DECIDED

    def __repr__(self) -> str:
        # What hypothesis prints of a failing case: the files by name and size (the label says what they hold).
        files = ", ".join(f"{name} ({len(content):,} bytes)" for name, content in self.files)
        return (f"Case(argv={self.argv!r}, files=[{files}], env={self.env!r}, allowed={sorted(self.allowed)}, "
                f"label={self.label!r})")


# -- the real material -------------------------------------------------------------------------------------------


def _simulated(seed: int, steps: int, settings: Sequence[str] = ()) -> bytes:
    out = io.StringIO()
    writer = TraceWriter(out)
    sim = Simulator(seed, Knobs().with_settings(list(settings)), SimConfig(), writer.write)
    sim.bootstrap()
    sim.run(steps)
    return out.getvalue().encode()


@functools.cache
def valid_traces() -> tuple[bytes, ...]:
    """Two short simulator traces: the safe design (every invariant holds) and unclean election (violations)."""
    return (_simulated(1, 25), _simulated(2, 40, ["unclean_election=true"]))


@functools.cache
def kafka_log_lines() -> tuple[tuple[bytes, ...], ...]:
    return tuple(tuple(p.read_bytes().splitlines(keepends=True)) for p in KAFKA_LOGS)


# -- JSON Lines traces -------------------------------------------------------------------------------------------

_Lines = list[bytes]
_Mutation = Callable[[_Lines, st.DrawFn], tuple[_Lines, bool, str]]

BIG_INTS: Final = (str(2**64), str(10**40))
NASTY_NUMBERS: Final = ("1e308", "-1e308", "1e400", "NaN", "Infinity", "-Infinity", "1.5", "-0.0", *BIG_INTS,
                        str(-(2**63) - 1), "-1", "-5")
NASTY_VALUES: Final[tuple[Any, ...]] = ("", "x", "\u0000", "\ud800", [], {}, None, True, False, [[]], {"": None},
                                        "broker:1", -1, 0)
NASTY_ACTORS: Final = ("broker:999", "broker:-5", "broker:", "controller:x", "", "broker:1:2", "BROKER:1",
                       "broker: 1", "broker:01", "observer:1", "nobody", "broker:" + "9" * 30)


def _json_line(event: Any) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"


def _pick(draw: st.DrawFn, lines: _Lines) -> int:
    return draw(st.integers(0, len(lines) - 1))


def _event_at(draw: st.DrawFn, lines: _Lines) -> tuple[int, dict[str, Any]] | None:
    """A line that is still a whole event (an earlier mutation may have broken some), and its event."""
    events = []
    for i, line in enumerate(lines):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # a line an earlier mutation broke, or nested past Python's stack
            continue
        if isinstance(event, dict) and isinstance(event.get("state"), dict) and isinstance(event.get("args"), dict):
            events.append((i, event))
    return draw(st.sampled_from(events)) if events else None


def _drop(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    # A middle line: the first (Init) or the last dropped may leave a partial trace, or a prefix (_prefix).
    i = draw(st.integers(1, len(lines) - 2))
    return lines[:i] + lines[i + 1:], True, f"drop line {i + 1}"


def _duplicate(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    i = _pick(draw, lines)
    return lines[:i + 1] + lines[i:], True, f"duplicate line {i + 1}"


def _swap(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    i = draw(st.integers(0, len(lines) - 2))
    j = draw(st.integers(i + 1, len(lines) - 1))
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return out, True, f"swap lines {i + 1} and {j + 1}"


def _prefix(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    """Still a trace: every line of it is whole and consecutive."""
    n = draw(st.integers(1, len(lines)))
    return lines[:n], False, f"first {n} lines"


def _truncate_last(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    last = lines[-1]
    if len(last) < 3:
        return _splice_bytes(lines, draw)
    cut = draw(st.integers(1, len(last) - 2))
    return [*lines[:-1], last[:cut]], True, f"last line cut at byte {cut}"


def _splice_bytes(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    i = _pick(draw, lines)
    line = lines[i]
    at = draw(st.integers(0, max(0, len(line) - 1)))
    junk = draw(st.sampled_from([b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\r", b"\x1b[2J",
                                 b"\n", b"{", b"}"]))
    # A carriage return between tokens is white space; a brace, or a byte-order mark (a character JSON takes in a
    # string), inside an argument's string is a string: each may leave a valid line.
    bad = junk not in (b"\r", b"{", b"}", b"\xef\xbb\xbf")
    # A line end splits the line in two, each a line of the file: a later mutation that rewrites the one it picks
    # (parsed and written again) must not take the break away with it, as it would from one list entry "\n{...}".
    spliced = re.split(b"(?<=\n)(?=.)", line[:at] + junk + line[at:], flags=re.S)  # at "\n" alone, as a reader
    return [*lines[:i], *spliced, *lines[i + 1:]], bad, f"{junk!r} at byte {at} of line {i + 1}"


def _blank_line(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    i = draw(st.integers(0, len(lines)))
    blank = draw(st.sampled_from([b"\n", b"   \n", b"\r\n", b"\t\n"]))
    return [*lines[:i], blank, *lines[i:]], True, f"blank line before line {i + 1}"


def _deep(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    depth = draw(st.sampled_from([1_000, 5_000, 100_000]))
    where = draw(st.sampled_from(["args", "state", "line"]))
    nested = "[" * depth + "]" * depth
    found = _event_at(draw, lines)
    if where == "line" or found is None:
        i = _pick(draw, lines)
        text = nested
    else:
        i, event = found
        event[where] = "@DEEP@"
        text = json.dumps(event, separators=(",", ":")).replace('"@DEEP@"', '{"x":' + nested + "}")
    # An argument the format does not name is the producer's own: nesting there is no fault of the format, only a
    # test of the reader.
    bad = where != "args" or found is None
    return [*lines[:i], text.encode() + b"\n", *lines[i + 1:]], bad, f"nesting {depth} deep in {where} of line {i + 1}"


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path of a JSON value, its own root excluded."""
    found: list[tuple[Any, ...]] = []
    items: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    for key, value in items:
        found.append((*prefix, key))
        found.extend(_paths(value, (*prefix, key)))
    return found


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


def _token_value(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    """A value replaced by a number JSON cannot hold as an integer (or a JSON extension token): only where the
    schema types the value (the envelope, the state) is the trace certainly wrong."""
    found = _event_at(draw, lines)
    if found is None:
        return _splice_bytes(lines, draw)
    i, event = found
    path = draw(st.sampled_from(_paths(event)))
    token = draw(st.sampled_from(NASTY_NUMBERS))
    parent = _at(event, path[:-1])
    parent[path[-1]] = "@TOKEN@"
    text = json.dumps(event, separators=(",", ":")).replace('"@TOKEN@"', token)
    # -1 is a valid epoch or leader, -0.0 an integer by JSON Schema's reading, and the format sets no upper
    # bound on a state's integers.
    typed = path[0] != "args" and token != "-0.0" and not (path[0] == "state" and token in ("-1", *BIG_INTS))
    return [*lines[:i], text.encode() + b"\n", *lines[i + 1:]], typed, f"{'.'.join(map(str, path))} = {token} " \
                                                                         f"on line {i + 1}"


def _retype(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    found = _event_at(draw, lines)
    if found is None:
        return _splice_bytes(lines, draw)
    i, event = found
    path = draw(st.sampled_from(_paths(event)))
    value = draw(st.sampled_from(NASTY_VALUES))
    parent = _at(event, path[:-1])
    old = parent[path[-1]]
    parent[path[-1]] = value
    # The schema types the envelope, the state's variables and the arguments it names (one type per name):
    # deeper, a value of the same JSON type may be right.
    typed = type(old) is not type(value) and (path[0] in ("v", "run", "seq", "actor", "action", "full") or (
        len(path) == 2 and (path[0] == "state" or path[1] in _typed_arguments())))
    return [*lines[:i], _json_line(event), *lines[i + 1:]], typed, f"{'.'.join(map(str, path))} = {value!r} " \
                                                                   f"on line {i + 1}"


@functools.cache
def _typed_arguments() -> frozenset[str]:
    """The arguments the trace format types, by name (docs/trace-format.md, "Arguments")."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return frozenset(schema["definitions"]["args"]["properties"])


def _drop_argument(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    """An argument left out: every argument is optional (a trace rebuilt from TLC or from logs has few), so
    the trace stays valid, and an engine that needs one must say so in a line."""
    found = _event_at(draw, lines)
    if found is None:
        return _splice_bytes(lines, draw)
    i, event = found
    # Init's brokers stay: they are what the other lines' actors are held to (a trace that names none may have any
    # broker act), so leaving them out would make another mutation's verdict (an actor broker:999) depend on it.
    names = sorted(name for name in event["args"] if not (event.get("action") == "Init" and name == "brokers"))
    if not names:
        return _splice_bytes(lines, draw)
    name = draw(st.sampled_from(names))
    del event["args"][name]
    return [*lines[:i], _json_line(event), *lines[i + 1:]], False, f"args.{name} left out on line {i + 1}"


def _envelope(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    """A broken envelope: wrong version, unknown field, a field missing, a bad actor, a seq gap, another run."""
    found = _event_at(draw, lines)
    if found is None:
        return _splice_bytes(lines, draw)
    i, event = found
    kind = draw(st.sampled_from(["version", "unknown", "missing", "actor", "seq", "run", "state-var"]))
    if kind == "version":
        event["v"] = draw(st.sampled_from([0, 1, 3, "2", 2.5, -2, None]))
        # A v1 line is v2 only where it names no leader: a v1 line among v2 lines is a mixed file all the same.
    elif kind == "unknown":
        event[draw(st.sampled_from(["extra", "V", "seq ", "__proto__", ""]))] = 1
    elif kind == "missing":
        event.pop(draw(st.sampled_from(["v", "run", "seq", "actor", "action", "args", "state"])), None)
    elif kind == "actor":
        event["actor"] = draw(st.sampled_from(NASTY_ACTORS))
    elif kind == "seq":
        seq = event.get("seq")
        # A seq an earlier mutation took away is made certainly wrong, not by chance right.
        event["seq"] = seq + draw(st.sampled_from([-1, 2, 10, 10**6])) if isinstance(seq, int) else -1
    elif kind == "run":
        event["run"] = draw(st.sampled_from(["", "other", " seed-1", "seed-1\n"]))
    else:
        event["state"][draw(st.sampled_from(["bogus", "Leader", "leader_epochs"]))] = {}
    return [*lines[:i], _json_line(event), *lines[i + 1:]], True, f"{kind} broken on line {i + 1}"


def _init_brokers(lines: _Lines, draw: st.DrawFn) -> tuple[_Lines, bool, str]:
    """Init's broker list made wrong: a negative broker, none, duplicates, not numbers."""
    try:
        event = json.loads(lines[0])
    except (ValueError, RecursionError):
        return _splice_bytes(lines, draw)
    if not isinstance(event, dict) or not isinstance(event.get("args"), dict):
        return _splice_bytes(lines, draw)
    brokers = draw(st.sampled_from([[-5, 1, 2], [], ["1", "2"], [1.5], [2**70], None, "1,2,3"]))
    event["args"]["brokers"] = brokers
    return [_json_line(event), *lines[1:]], True, f"Init brokers {brokers!r}"


MUTATIONS: Final[tuple[_Mutation, ...]] = (_drop, _duplicate, _swap, _truncate_last, _splice_bytes,
                                           _blank_line, _deep, _token_value, _retype, _drop_argument, _envelope,
                                           _init_brokers)


@st.composite
def trace_bytes(draw: st.DrawFn) -> tuple[bytes, bool, str]:
    """(file content, whether it breaks the format, what was done): one to three mutations of a real trace,
    or a whole-file fault (empty, gzip'd, a BOM, CRLF line ends, an ITF document under a .jsonl name)."""
    base = draw(st.sampled_from(valid_traces()))
    whole = draw(st.sampled_from(["lines", "lines", "lines", "lines", "empty", "gzip", "bom", "crlf", "random"]))
    if whole == "empty":
        return b"", True, "empty file"
    if whole == "gzip":
        return gzip.compress(base), True, "gzip'd trace"
    if whole == "bom":
        return b"\xef\xbb\xbf" + base, True, "UTF-8 byte order mark"
    if whole == "crlf":
        # JSON takes the carriage return for white space: a reader may accept the file.
        return base.replace(b"\n", b"\r\n"), False, "CRLF line ends"
    if whole == "random":
        return draw(st.binary(min_size=1, max_size=200)), True, "random bytes"
    lines = base.splitlines(keepends=True)
    done = []
    # A prefix first, never after a mutation, whose evidence it could cut away (two lines swapped, then both
    # cut off).
    if draw(st.booleans()):
        lines, _, what = _prefix(lines, draw)
        base = b"".join(lines)
        done.append(what)
    # Judged on what is left, not on what was done: a line duplicated then dropped, or a broken last line then cut
    # off, leaves a (partial) trace. Each line a mutation wrote is kept with the line it replaced, or None (a
    # line of its own), and whether it breaks the format.
    written: dict[bytes, tuple[int | None, bool]] = {}
    for _ in range(draw(st.integers(0 if done else 1, 3))):
        if len(lines) < 3:
            break
        before = lines
        lines, broke, what = draw(st.sampled_from(MUTATIONS))(lines, draw)
        done.append(what)
        _note_written(base, before, lines, broke, written)
    content = b"".join(lines)
    return content, _broken(base, lines, written), "; ".join(done)


def _note_written(base: bytes, before: _Lines, after: _Lines, broke: bool,
                  written: dict[bytes, tuple[int | None, bool]]) -> None:
    """The lines a mutation wrote: in place of a line (same count of lines), or inserted (one more)."""
    known = set(before)
    for k, line in enumerate(after):
        if line in known or line in written:
            continue
        replaced = before[k] if len(after) == len(before) else None
        origin, was_broken = _origin(base, replaced, written) if replaced is not None else (None, False)
        written[line] = (origin, broke or was_broken or origin is None)


def _origin(base: bytes, line: bytes, written: dict[bytes, tuple[int | None, bool]]) -> tuple[int | None, bool]:
    if line in written:
        return written[line]
    lines = base.splitlines(keepends=True)
    return (lines.index(line), False) if line in lines else (None, True)


def _broken(base: bytes, lines: _Lines, written: dict[bytes, tuple[int | None, bool]]) -> bool:
    """Whether the lines left break the format: a line written broken, or lines not consecutive lines of the
    real trace (in place or as a valid rewrite of one)."""
    origins = []
    for line in lines:
        origin, broke = _origin(base, line, written)
        if broke or origin is None:
            return True
        origins.append(origin)
    return not lines[-1].endswith(b"\n") or any(b != a + 1 for a, b in itertools.pairwise(origins))


# -- Kafka state-change logs ---------------------------------------------------------------------------------------


@st.composite
def kafka_log_bytes(draw: st.DrawFn) -> tuple[bytes, str]:
    """A real state-change log with lines dropped, duplicated, cut, swapped, spliced with bytes; or emptied,
    gzip'd."""
    lines = list(draw(st.sampled_from(kafka_log_lines())))
    whole = draw(st.sampled_from(["lines", "lines", "lines", "empty", "gzip", "binary"]))
    if whole == "empty":
        return b"", "empty log"
    if whole == "gzip":
        return gzip.compress(b"".join(lines)), "gzip'd log"
    if whole == "binary":
        return draw(st.binary(min_size=1, max_size=300)), "random bytes"
    done = []
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        kind = draw(st.sampled_from(["drop", "dup", "cut", "swap", "bytes", "numbers", "long"]))
        line = lines[i]
        if kind == "drop" and len(lines) > 1:
            del lines[i]
        elif kind == "dup":
            lines.insert(i, line)
        elif kind == "cut":
            lines[i] = line[:draw(st.integers(0, max(0, len(line) - 1)))]
        elif kind == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "bytes":
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(st.sampled_from([b"\x00", b"\xff\xfe", b"\r", b"(", b")", b"=", b","])) + \
                line[at:]
        elif kind == "numbers":
            number = draw(st.sampled_from([b"-1", b"99999999999999999999", b"-5", b"x", b"1e308", b""]))
            digits = [k for k, c in enumerate(line) if 48 <= c <= 57]
            if digits:
                k = draw(st.sampled_from(digits))
                lines[i] = line[:k] + number + line[k + 1:]
        else:
            lines[i] = line.rstrip(b"\n") + b"x" * draw(st.sampled_from([1000, 100_000])) + b"\n"
        done.append(f"{kind} at line {i + 1}")
    return b"".join(lines), "; ".join(done)


# -- JSON documents for `kcm report` ---------------------------------------------------------------------------------

JSON_LEAVES: Final = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
JSON_VALUES: Final = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=4) |
                                  st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
# The keys `kcm report` tells a JSON document's kind by (kcm.tools.report.command).
REPORT_KINDS: Final = (("columns", "rows"), ("records", "verdicts", "runs"), ("stages", "result"),
                       ("examples", "coverage", "violations"))


@st.composite
def report_document(draw: st.DrawFn) -> tuple[bytes, str]:
    """The pipeline summary of tests/data with a value replaced, or a document with one kind's keys holding
    arbitrary JSON."""
    if draw(st.booleans()):
        summary = json.loads(PIPELINE_SUMMARY.read_text())
        path = draw(st.sampled_from(_paths(summary)))
        value = draw(JSON_VALUES)
        _at(summary, path[:-1])[path[-1]] = value
        return json.dumps(summary).encode(), f"summary.json: {'.'.join(map(str, path))} = {value!r}"[:300]
    keys = draw(st.sampled_from(REPORT_KINDS))
    document = {key: draw(JSON_VALUES) for key in keys}
    return json.dumps(document).encode(), f"keys {keys} of arbitrary values"


# -- arguments ------------------------------------------------------------------------------------------------------

BAD_INTS: Final = ("-1", "-5", "x", "1.5", "", "1e3", "0x10", " ", "--", "NaN")
BAD_COUNTS: Final = ("-1", "-5", "x", "1.5", "", "NaN", "0")
BAD_FLOATS: Final = ("nan", "-1", "inf", "-inf", "x", "")
# An infinite budget may mean "no limit"; none of these can.
BAD_BUDGETS: Final = ("nan", "-1", "-inf", "x", "")
BAD_KNOBS: Final = ("bogus=1", "min_isr=x", "min_isr=-1", "truncation=zzz", "unclean_election=maybe", "noequals",
                    "=", "min_isr=", "truncation=kip320=1", "broker_epoch=2")
BAD_OUTPUT_FILES: Final = (UNWRITABLE, A_DIR, f"{A_FILE}/x.out", "")
BAD_OUTPUT_FOLDERS: Final = (UNWRITABLE, A_FILE, f"{A_FILE}/sub", "")
# A counterexample's --out may name a folder (the file takes its default name in it): only these are bad.
BAD_COUNTEREXAMPLE_OUTPUTS: Final = (UNWRITABLE, f"{A_FILE}/x.out")
VALID_KNOBS: Final = ("truncation=hw", "unclean_election=true", "min_isr=2", "leader_epoch_check=false")
UNKNOWN_INVARIANTS: Final = ("NoSuchInvariant", "", "oneleaderperepoch")


def _options(draw: st.DrawFn, valid: Sequence[Sequence[str]], poisons: Sequence[Sequence[str]]) -> list[str]:
    """Some valid options, then (last, so that it wins where an option repeats) one bad one, or two."""
    argv: list[str] = []
    for option in draw(st.lists(st.sampled_from(valid), max_size=3, unique_by=tuple)):
        argv += option
    for poison in draw(st.lists(st.sampled_from(poisons), min_size=1, max_size=2)):
        argv += poison
    return argv


def _flag(name: str, values: Sequence[str]) -> list[list[str]]:
    return [[name, value] for value in values]


COMMON_POISONS: Final = (["--bogus"], ["--progress", "sideways"], ["stray"])

SIM_VALID: Final = (["--seed", "3"], ["--steps", "5"], ["--brokers", "2"], ["--partitions", "1"], ["--faults", "0.5"],
                    ["--first-broker-id", "0"], ["--calm-every", "3"], ["--set", "min_isr=2"], ["--progress", "none"])
SIM_POISONS: Final = (*_flag("--steps", BAD_INTS), *_flag("--brokers", BAD_COUNTS), *_flag("--seed", ("x", "1.5")),
                      *_flag("--partitions", BAD_COUNTS), *_flag("--faults", BAD_FLOATS),
                      *_flag("--first-broker-id", ("-1", "-5", "x")), *_flag("--calm-every", ("-1", "x")),
                      *_flag("--set", BAD_KNOBS), *COMMON_POISONS)


@st.composite
def sim_case(draw: st.DrawFn) -> Case:
    out = draw(st.sampled_from(["t.jsonl", *BAD_OUTPUT_FILES]))
    argv = ["sim", "--steps", "5", *_options(draw, SIM_VALID, SIM_POISONS if out == "t.jsonl" else SIM_VALID)]
    return Case(("sim", *argv[1:], "--out", out), outputs=(out,), label=f"--out {out}")


VERIFY_VALID: Final = (["--seeds", "1"], ["--brokers", "2"], ["--set", "min_isr=2"], ["--json"],
                       ["--progress", "none"])
VERIFY_POISONS: Final = (*_flag("--seeds", BAD_COUNTS[:-1]), *_flag("--steps", BAD_INTS),
                         *_flag("--only", ("bogus", "")), *_flag("--skip", ("bogus",)),
                         *_flag("--out", BAD_OUTPUT_FOLDERS[:-1]), *_flag("--html", BAD_OUTPUT_FILES[:-1]),
                         *SIM_POISONS)


@st.composite
def verify_case(draw: st.DrawFn) -> Case:
    # Only the simulation engine, on few short seeds: a poison kcm misses must not start the whole verify.
    return Case(("verify", "--only", "simulation", "--seeds", "1", "--steps", "20",
                 *_options(draw, VERIFY_VALID, VERIFY_POISONS)))


CHECK_VALID: Final = (["--set", "min_isr=2"], ["--workers", "1"], ["--heap", "512"], ["--json"],
                      ["--progress", "none"], ["--invariant", "LeaderInIsr"])
CHECK_POISONS: Final = (*_flag("--model", ("nosuch", "", "../MCci")), *_flag("--set", BAD_KNOBS),
                        *_flag("--invariant", UNKNOWN_INVARIANTS), *_flag("--workers", BAD_COUNTS),
                        *_flag("--heap", BAD_COUNTS), ["--property", "Progress"], ["--liveness", "--invariant", "X"],
                        ["--liveness", "--property", "NoSuchProperty"], *_flag("--out", BAD_COUNTEREXAMPLE_OUTPUTS),
                        *_flag("--html", BAD_OUTPUT_FILES[:-1]), *COMMON_POISONS)


@st.composite
def check_case(draw: st.DrawFn) -> Case:
    return Case(("check", "--model", "kafka1211", *_options(draw, CHECK_VALID, CHECK_POISONS)))


HUNT_POISONS: Final = (*_flag("--model", ("nosuch", "")), *_flag("--set", BAD_KNOBS),
                       *_flag("--invariant", UNKNOWN_INVARIANTS), *_flag("--budget", BAD_BUDGETS),
                       *_flag("--cores", BAD_COUNTS), *_flag("--out", BAD_OUTPUT_FOLDERS[:-1]), *COMMON_POISONS)


@st.composite
def hunt_case(draw: st.DrawFn) -> Case:
    return Case(("hunt", "--model", "kafka1211", "--budget", "20", "--cores", "1",
                 *_options(draw, (["--json"], ["--progress", "none"]), HUNT_POISONS)))


PROVE_VALID: Final = (["--brokers", "2"], ["--json"], ["--progress", "none"], ["--set", "min_isr=2"])
PROVE_POISONS: Final = (*_flag("--brokers", BAD_COUNTS), *_flag("--bmc", BAD_INTS), *_flag("--only", ("bogus", "")),
                        *_flag("--invariant", UNKNOWN_INVARIANTS), *_flag("--set", BAD_KNOBS),
                        ["--bmc", "2", "--capacity", "-1"], ["--bmc", "2", "--actions", "Bogus,Fetch"],
                        ["--bmc", "2", "--controller", "-1"], ["--bmc", "2", "--controller", "99"],
                        *(["--bmc", "2", "--out", out] for out in BAD_COUNTEREXAMPLE_OUTPUTS), *COMMON_POISONS)


@st.composite
def prove_case(draw: st.DrawFn) -> Case:
    return Case(("prove", *_options(draw, PROVE_VALID, PROVE_POISONS)))


REVIEW_POISONS: Final = (*_flag("--workers", BAD_COUNTS), *_flag("--heap", BAD_COUNTS),
                         *_flag("--row", ("nosuch", "", "defaults")), *_flag("--out", BAD_OUTPUT_FOLDERS[:-1]),
                         *_flag("--html", BAD_OUTPUT_FILES[:-1]), *COMMON_POISONS)


@st.composite
def review_case(draw: st.DrawFn) -> Case:
    return Case(("review", "--quick", "--row", "unclean_election=true",
                 *_options(draw, (["--json"], ["--progress", "none"]), REVIEW_POISONS)))


@st.composite
def zk_case(draw: st.DrawFn) -> Case:
    """Never a `start` that could succeed: a server left running would outlive the test. Its folders are under a
    file or under /proc, which no one can create."""
    action = draw(st.sampled_from(["start", "stop", "status"]))
    name = draw(NAMES)
    unusable = [UNWRITABLE, f"{UNWRITABLE}/{name}", A_FILE, f"{A_FILE}/{name}"]
    folder = draw(st.sampled_from(unusable if action == "start" else [*unusable, A_DIR, f"missing-{name}"]))
    extra = draw(st.sampled_from([[], ["--servers", "3"], ["--servers", "2"], ["--servers", "x"]]))
    return Case(("zk", action, "--dir", folder, *extra), label=f"zk {action} --dir {folder}")


@st.composite
def pipeline_args_case(draw: st.DrawFn) -> Case:
    """Arguments every stage refuses before Spark starts."""
    stage = draw(st.sampled_from(["generate", "ingest", "check", "report"]))
    if stage == "generate":
        argv = ["generate", "--runs", "1", "--steps", "5", "--out", "P",
                *_options(draw, (["--seed", "2"],), (*_flag("--runs", BAD_COUNTS), *_flag("--steps", BAD_INTS),
                                                     *_flag("--calm-every", ("-1", "x")), *_flag("--set", BAD_KNOBS),
                                                     *_flag("--out", (A_FILE, f"{A_FILE}/sub")),
                                                     *_flag("--master", ("bogus://x",)), *COMMON_POISONS))]
    elif stage == "ingest":
        inputs = draw(st.sampled_from([[], ["--trace", MISSING], ["--trace", A_DIR], ["--kafka-log", MISSING],
                                       ["--kafka-log", A_DIR], ["--trace", "good.jsonl", MISSING]]))
        out = draw(st.sampled_from(["P", A_FILE, f"{A_FILE}/sub"]))
        if inputs or out != "P":
            argv = ["ingest", *inputs, "--out", out]
        else:
            argv = ["ingest", "--trace", "good.jsonl", "--out", out, "--log-pattern",
                    draw(st.sampled_from(["%q", "%d{", ""]))]
    elif stage == "check":
        source = draw(st.sampled_from([MISSING, A_FILE, A_DIR]))
        argv = ["check", "--in", source, "--out", "C", *draw(st.sampled_from(
            [[], ["--validate-sample", "2"], ["--validate-sample", "-0.1"], ["--validate-sample", "x"]]))]
    else:
        argv = ["report", "--in", draw(st.sampled_from([MISSING, A_FILE, A_DIR])), "--json"]
    return Case(("pipeline", *argv), label=f"pipeline {stage}")


# -- environment ------------------------------------------------------------------------------------------------------


_CHECK: Final = ("check", "--model", "kafka1211")
_REVIEW: Final = ("review", "--quick", "--row", "unclean_election=true")
_HUNT: Final = ("hunt", "--model", "kafka1211", "--budget", "20", "--cores", "1")
_VALIDATE_TLC: Final = ("validate", "--tlc", "good.jsonl")
# (variable, value, the commands that need it right). A jar that is a file but no jar is only found out by
# running it, and `kcm hunt` may answer without TLC (by BMC): it is left out there.
_ENVIRONMENTS: Final = (
    ("KCM_OUT", A_FILE, (("zk", "status"), ("zk", "stop"), _CHECK, _REVIEW, _HUNT)),
    ("KCM_OUT", f"{A_FILE}/sub", (("zk", "status"), ("zk", "stop"), _CHECK, _REVIEW, _HUNT)),
    ("TLA2TOOLS_JAR", "/nonexistent/tla2tools.jar", (_CHECK, _VALIDATE_TLC, _REVIEW, _HUNT)),
    ("TLA2TOOLS_JAR", A_DIR, (_CHECK, _VALIDATE_TLC, _REVIEW, _HUNT)),
    ("TLA2TOOLS_JAR", "good.jsonl", (_CHECK, _VALIDATE_TLC, _REVIEW)),
)


@st.composite
def environment_case(draw: st.DrawFn) -> Case:
    """A bad environment under a command that needs it: KCM_OUT naming a file, TLA2TOOLS_JAR missing, a folder
    or no jar."""
    variable, value, commands = draw(st.sampled_from(_ENVIRONMENTS))
    # Any name under the bad place is as bad: it keeps the family from running out of cases.
    if value != "good.jsonl" and draw(st.booleans()):
        value = f"{value}/{draw(NAMES)}"
    return Case(draw(st.sampled_from(commands)), env=((variable, value),), label=f"{variable}={value}")


# -- the commands that read a trace ----------------------------------------------------------------------------------

TRACE_COMMANDS: Final = ("check-trace", "validate", "replay", "convert-itf", "convert-v2", "report")


@st.composite
def trace_case(draw: st.DrawFn) -> Case:
    """A mutated trace under one of the commands that read traces, their outputs named and sometimes there
    already (an earlier output must survive a failure unchanged)."""
    content, bad, label = draw(trace_bytes())
    command = draw(st.sampled_from(TRACE_COMMANDS))
    name = draw(st.sampled_from(["in.jsonl", "in.jsonl", "dir with space.jsonl", "line\nbreak.jsonl", "é.jsonl"]))
    files = [(name, content)]
    outputs: tuple[str, ...] = ()
    if command in ("check-trace", "validate", "replay"):
        argv: tuple[str, ...] = (command, name, *draw(st.sampled_from([(), ("--json",)])))
    elif command == "report":
        outputs = ("page.html",)
        argv = ("report", name, "--out", "page.html")
    else:
        outputs = ("out.itf.json",) if command == "convert-itf" else ("out.jsonl",)
        argv = ("trace", "convert", name, outputs[0], "--to", "itf" if command == "convert-itf" else "v2")
    earlier = draw(st.booleans())
    if outputs and earlier:
        files.append((outputs[0], b"earlier output\n"))
    return Case(argv, files=tuple(files), allowed=USAGE if bad else DECIDED | USAGE, label=label, outputs=outputs)


@st.composite
def trace_args_case(draw: st.DrawFn) -> Case:
    """The trace commands' own arguments gone wrong: a missing file, a folder, /proc, a bad option value."""
    command = draw(st.sampled_from(["check-trace", "validate", "replay", "convert", "report"]))
    name = draw(NAMES)
    source = draw(st.sampled_from(["good.jsonl", MISSING, f"missing-{name}", f"missing-{name}.jsonl",
                                   f"{A_FILE}/{name}.jsonl", A_DIR, "/proc/self/mem", "/dev/null", "", "-"]))
    if source == "good.jsonl":
        if command == "replay":
            extra: list[str] = draw(st.sampled_from([["--invariant", i] for i in UNKNOWN_INVARIANTS]))
        elif command == "report":
            extra = draw(st.sampled_from([["--window", "-1"], ["--window", "x"], *_flag("--out",
                                                                                        BAD_OUTPUT_FILES[:-1])]))
        elif command == "convert":
            extra = draw(st.sampled_from([["--to", "xml"], *([out] for out in BAD_OUTPUT_FILES[:-1])]))
        else:
            extra = draw(st.sampled_from([["--bogus"], ["extra"]]))
    else:
        extra = ["out.json"] if command == "convert" else []
    argv = ["trace", "convert", source, *extra] if command == "convert" else [command, source, *extra]
    return Case(tuple(argv), label=f"{command} {source}")


@st.composite
def report_case(draw: st.DrawFn) -> Case:
    """`kcm report` on JSON documents of a known kind with arbitrary content: a page, or one line."""
    content, label = draw(report_document())
    name = draw(st.sampled_from(["doc.json", "summary.json", "review.json"]))
    return Case(("report", name, "--out", "page.html"), files=((name, content),), allowed=frozenset({0, 2}),
                label=label, outputs=("page.html",))


# -- Spark-backed ingest ---------------------------------------------------------------------------------------------


@st.composite
def ingest_case(draw: st.DrawFn) -> Case:
    """`kcm pipeline ingest` of mutated traces and logs together, each file one run: what breaks the format is
    quarantined (exit 3), a file with nothing usable is refused (2), a clean batch is accepted (0)."""
    files: list[tuple[str, bytes]] = []
    labels: list[str] = []
    for n in range(draw(st.integers(1, 4))):
        content, _, label = draw(trace_bytes())
        files.append((f"t{n}.jsonl", content))
        labels.append(f"t{n}.jsonl: {label}")
    for n in range(draw(st.integers(0, 3))):
        content, label = draw(kafka_log_bytes())
        files.append((f"broker-{n}/state-change.log", content))
        labels.append(f"broker-{n}/state-change.log: {label}")
    traces = [name for name, _ in files if name.endswith(".jsonl")]
    logs = [name for name, _ in files if name.endswith(".log")]
    argv = ["pipeline", "ingest", "--trace", *traces, *(["--kafka-log", *logs] if logs else []), "--out", "P",
            "--master", "local[1]"]
    # Refusing the whole job is right only where some file holds no line at all to judge.
    unusable = any(not content.strip(b"\n") or content[:2] == b"\x1f\x8b" for _, content in files)
    return Case(tuple(argv), files=tuple(files), allowed=frozenset({0, 2, 3} if unusable else {0, 3}),
                label="\n".join(labels), outputs=("P/manifest.json",))


def kinds_of_input() -> dict[str, Any]:
    """Each family of cases by name; the invariant names the argument strategies use are kcm's own."""
    assert "LeaderInIsr" in INVARIANTS
    return {"trace": trace_case(), "trace-args": trace_args_case(), "report": report_case(), "sim": sim_case(),
            "verify": verify_case(), "check": check_case(), "hunt": hunt_case(), "prove": prove_case(),
            "review": review_case(), "zk": zk_case(), "pipeline-args": pipeline_args_case(),
            "environment": environment_case()}
