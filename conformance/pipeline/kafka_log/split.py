"""A Kafka log read in splits, byte ranges of the file parsed apart (one Spark task each in `ingest`), joined into
exactly the events, skipped and quarantined lines of the file read whole.

- Lines: a split begins at the first line at or after its byte offset that begins a record whatever lines
  came before it (`_opens`), and the split before it reads up to there, so a record's wrapped lines and the
  stack trace after it stay with it. Its first line's number is one more than the newlines before it.
- Layout: detected once per file, on its first lines as the whole file's read does (`file_layout`), and
  given to every split.
- State: whether a line's change of a leaf is written depends on what the lines before it showed, so a split
  records its lines' changes as ops (parser.py) and `summarize` says what they do to the state; `link`, on
  the driver, runs through the splits' summaries in file order to give each split the state at its start,
  and `finish` decides its ops from there. A broker's `become` line applies a request received before it,
  maybe in an earlier split: such a line is read again when `link` finds the request pending (`Redo`).
- Controller periods: a controller's lines in one controller epoch may run over several splits, and so may the
  states its machines were loaded with when it began acting in that epoch (`Load`: the first each shows
  leaving in that epoch); `link` joins each split's periods to the one going on at its start and gives each
  split the loads of the periods that begin in it (a controller's first period starts from the Init).
- Run, seq and Init: the file (or a broker's rotation of it, its files one after the other, sources.py) is one
  run; `link` numbers each split's events after those of the splits
  before it and builds the one synthesized Init from every split's brokers and the states each controller's
  first period shows its machines leaving first, which the first split's events start with.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from kcm.conformance.pipeline.kafka_log.layouts import Layout, compile_pattern, detect, starts_record, unwrap
from kcm.conformance.pipeline.kafka_log.parser import (
    MAX_WRAP,
    RAISE,
    SET,
    STAMP,
    Leaf,
    Load,
    Op,
    ParsedLog,
    PendingKey,
    Period,
    Redo,
    SplitParse,
    decode,
    events_of,
    init_event,
    load_of,
    parse_lines,
    record_at,
    redo,
    written,
)
from kcm.conformance.pipeline.sources import is_gzip, log_run_name, open_input
from kcm.spec.trace.format import Event

DEFAULT_SPLIT_SIZE: Final = 32 * 1024 * 1024
_DETECT_LINES: Final = 500  # the layout matching most of the file's first lines is the file's
_WINDOW: Final = 1 << 16  # bytes read at a time to find a split's first line (more when lines are long)
_COUNT_CHUNK: Final = 1 << 24


def file_layout(path: str | Path, pattern: str | None = None) -> Layout:
    """The user's ConversionPattern, or the known layout matching most of the file's first lines."""
    if pattern:
        return compile_pattern(pattern)
    with open_input(path) as handle:
        data, eof = b"", False
        while not eof and data.count(b"\n") < _DETECT_LINES:
            chunk = handle.read(_WINDOW)
            data, eof = data + chunk, not chunk
    raw = data.split(b"\n")
    if eof and raw[-1] == b"":
        raw.pop()
    texts = [decode(chunk) for chunk in raw[:_DETECT_LINES]]
    return detect([text for text in texts if text is not None])


def split_ranges(size: int | None, split_size: int | None) -> list[tuple[int, int | None]]:
    """The byte ranges of a file's splits, the last open-ended (to the end of the file as read); a file of no
    known size (compressed: it cannot be read from an offset) is one split."""
    if size is None or split_size is None or size <= split_size:
        return [(0, None)]
    starts = list(range(0, size, split_size))
    return [(start, starts[i + 1] if i + 1 < len(starts) else None) for i, start in enumerate(starts)]


@contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector paused: a split's lines make many objects that all live to its end (steps,
    events, their columns), and the collections they set off, each over every object alive, took a third of
    the parse and as much again of decoding and writing them. They hold no cycles to collect."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_split(path: str | Path, layout: Layout, start: int, end: int | None) -> SplitParse:
    """The lines of the split of bytes [start, end): from the first line at or after `start` that begins a
    record, to the first at or after `end` that does (or the end of the file)."""
    with collector_paused():
        return _parse_split(path, layout, start, end)


def log_size(path: str | Path) -> int | None:
    """The size to split a log by; None for a gzip file, read whole."""
    return None if is_gzip(path) else os.path.getsize(path)


def _parse_split(path: str | Path, layout: Layout, start: int, end: int | None) -> SplitParse:
    with open_input(path) as handle:
        first = _first_line_at(handle, start, layout)
        stop = None if end is None else _first_line_at(handle, end, layout)
        number = _lines_before(handle, first) + 1
        handle.seek(first)
        data = handle.read() if stop is None else handle.read(stop - first)
    raw = data.split(b"\n")
    complete_last = raw[-1] == b""
    if complete_last:
        raw.pop()
    return parse_lines([decode(chunk) for chunk in raw], layout, str(path), number, complete_last,
                       open_start=first > 0)


def _opens(texts: list[str | None], index: int, layout: Layout) -> bool:
    """Whether a record begins at texts[index] whatever came before: a line that starts as the layout's do is
    never the wrapped part of another (record_at stops at one), so where a record begins on it, the lines
    before it end there."""
    text = texts[index]
    return text is not None and starts_record(layout, unwrap(text)) and record_at(texts, index, layout) is not None


def _first_line_at(handle: IO[bytes], offset: int, layout: Layout) -> int:
    """The byte offset of the first line at or after `offset` on which a record begins whatever came before
    it (the end of the file if none does)."""
    if offset == 0:
        return 0
    position, size = offset - 1, _WINDOW  # a line starts at `offset` when the byte before it is a newline
    while True:
        handle.seek(position)
        data = handle.read(size)
        eof = len(data) < size
        head, *tail = data.split(b"\n")
        if eof and tail and tail[-1] == b"":
            tail.pop()
        elif not eof and tail:
            tail.pop()  # the last line read may go on
        texts = [decode(chunk) for chunk in tail]
        at = position + len(head) + 1
        for index, chunk in enumerate(tail):
            if not eof and index + MAX_WRAP >= len(tail):
                break  # record_at may need lines not read yet
            if _opens(texts, index, layout):
                return at
            at += len(chunk) + 1
        else:
            if eof:
                return position + len(data)
        size *= 2


def _lines_before(handle: IO[bytes], offset: int) -> int:
    handle.seek(0)
    count, left = 0, offset
    while left > 0:
        chunk = handle.read(min(left, _COUNT_CHUNK))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count


@dataclass
class Summary:
    """What a split does to the parser's state, for the splits after it: the last value each leaf was given
    by a SET or FORCE op and the highest RAISE after it (of its steps before the first that may be read
    again), then the ops of that step and those after it; the requests it leaves pending and the pending
    keys it put or took; its brokers and controller periods; and how many events it has."""

    events: int
    sets: dict[Leaf, Op]
    raises: dict[Leaf, Any]
    # A STAMP op whose version test needs the state at the split's start, with the op its leaf had from this
    # split before it (None: none): decided before `sets`, which holds its version from the same line.
    stamps: dict[Leaf, tuple[Op | None, Op]]
    tail: list[tuple[list[Op], Redo | None]]
    pending: dict[PendingKey, dict[str, Any]]
    touched: set[PendingKey]
    brokers: set[int]
    periods: list[Period]


def summarize(parse: SplitParse) -> Summary:
    steps = parse.steps
    cut = next((i for i, step in enumerate(steps) if step.redo is not None), len(steps))
    sets: dict[Leaf, Op] = {}
    raises: dict[Leaf, Any] = {}
    stamps: dict[Leaf, tuple[Op | None, Op]] = {}
    for step in steps[:cut]:
        for op in step.ops:
            kind, leaf, value = op
            if kind == RAISE:
                # A run of RAISEs does what their highest alone does.
                raises[leaf] = max(raises[leaf], value) if leaf in raises else value
            elif kind == STAMP:
                version = sets.get(("partition_version", *leaf[1:]))
                if version is None:
                    stamps[leaf] = (sets.pop(leaf, None), op)
                elif version[2] != value[1]:
                    sets[leaf] = (SET, leaf, value[0])
                    stamps.pop(leaf, None)
            else:
                # After a SET or FORCE, a leaf is what that op alone makes of it.
                sets[leaf] = op
                raises.pop(leaf, None)
                stamps.pop(leaf, None)
    return Summary(sum(1 for step in steps if step.event), sets, raises, stamps,
                   [(step.ops, step.redo) for step in steps[cut:]], parse.pending, parse.touched, parse.brokers,
                   parse.periods)


@dataclass
class Link:
    """What a split needs of the splits before it: the seq of its first event, the state at its start (of the
    leaves it changes), the requests pending there that its `become` lines apply, the loads of the controller
    periods it begins, and (the first split's) the synthesized Init."""

    seq: int
    known: dict[Leaf, Any]
    fields: dict[PendingKey, dict[str, Any]]
    loads: list[Load]
    init: Event | None = None


def link(summaries: list[Summary], run: str, file: str) -> list[Link]:
    known: dict[Leaf, Any] = {}
    pending: dict[PendingKey, dict[str, Any]] = {}
    brokers: set[int] = set()
    # Each split's periods that begin there, each with the period of its controller before it (if any): their
    # loads are known once every split has added what its lines of the period show first.
    begun: list[list[tuple[Period, Period | None]]] = []
    going: dict[str, Period] = {}
    links: list[Link] = []
    seq = 1
    for summary in summaries:
        fields = {r.key: pending[r.key] for _, r in summary.tail if r is not None and r.key in pending}
        tail = [redo(r, fields[r.key], file).ops if r is not None and r.key in fields else ops
                for ops, r in summary.tail]
        leaves = {*summary.sets, *summary.raises, *summary.stamps, *(op[1] for ops in tail for op in ops)}
        begun.append([])
        for period in summary.periods:
            on = going.get(period.controller)
            if period.opens and on is not None and known.get(("acting_controller_epoch", period.controller)) == \
                    period.epoch:
                for leaf, state in period.first.items():
                    on.first.setdefault(leaf, state)
                continue
            fresh = Period(period.controller, period.epoch, False, dict(period.first))
            begun[-1].append((fresh, on))
            going[period.controller] = fresh
        links.append(Link(seq, {leaf: known[leaf] for leaf in leaves if leaf in known}, fields, []))
        for earlier, stamp in summary.stamps.values():
            if earlier is not None:
                written(known, earlier)
            written(known, stamp)
        for op in summary.sets.values():
            written(known, op)
        for leaf, value in summary.raises.items():
            written(known, (RAISE, leaf, value))
        for ops in tail:
            for op in ops:
                written(known, op)
        pending = {key: value for key, value in pending.items() if key not in summary.touched}
        pending.update(summary.pending)
        brokers |= summary.brokers
        seq += summary.events
    # A controller's first period starts from the Init, the later ones from their loads.
    first_state: dict[Leaf, str] = {}
    for place, periods in zip(links, begun, strict=True):
        for period, before in periods:
            if before is None:
                first_state.update(period.first)
                place.loads.append(load_of(period.controller, period.epoch, {}, set()))
            else:
                place.loads.append(load_of(period.controller, period.epoch, period.first, set(before.first)))
    if links:
        links[0].init = init_event(run, file, brokers, first_state)
    return links


def finish(parse: SplitParse, place: Link, run: str, file: str) -> list[Event]:
    """The split's events, the Init first in the first split."""
    head = [place.init] if place.init is not None else []
    with collector_paused():
        return head + events_of(parse.steps, run, place.seq, dict(place.known), place.fields, file, place.loads)


def parse_kafka_log(path: str | Path, run: str | None = None, pattern: str | None = None,
                    split_size: int | None = None) -> ParsedLog:
    """Every line of a state-change.log or controller.log (gzip or not): events in line order, the lines skipped on
    purpose and the lines quarantined, each with its reason. `pattern` is a log4j ConversionPattern that
    replaces layout detection; `split_size` reads the file in splits of about that many bytes, one after the
    other, as `ingest` reads them in parallel (the same result)."""
    file = str(path)
    layout = file_layout(file, pattern)
    parses = [parse_split(file, layout, start, end) for start, end in split_ranges(log_size(file), split_size)]
    name = run or log_run_name(file)
    links = link([summarize(parse) for parse in parses], name, file)
    events = [event for parse, place in zip(parses, links, strict=True) for event in finish(parse, place, name, file)]
    return ParsedLog(events, [entry for parse in parses for entry in parse.quarantine],
                     sum(parse.lines for parse in parses), [entry for parse in parses for entry in parse.skipped],
                     layout.name)
