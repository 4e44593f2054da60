"""What `ingest` reads, as runs: each input file, or each broker's rotation of a log, is one source, and each
source one run of its own, whose name no other source of the folder has.

A run is named after what it is: a trace's own run name, or `log-<name>` for a Kafka log (`log-state-change`
for `state-change.log`). Where two sources would share a name (two traces of `seed-2`, the `state-change.log` of
two brokers, a trace whose run is `log-state-change` beside such a log), or a run of an earlier ingest of
another source has it, each gets `<name>@<the shortest end of its path that tells it apart>`
(`log-state-change@broker-1/state-change.log`). The source (its resolved path) is recorded with the run in
the manifest, so an ingest of the same source again replaces its run and that of another never does.

Kafka's brokers log through log4j's DailyRollingFileAppender, which renames `state-change.log` to
`state-change.log.YYYY-MM-DD-HH` every hour and starts a new one (apache/kafka config/log4j.properties,
2.x and 3.x: `log4j.appender.stateChangeAppender=org.apache.log4j.DailyRollingFileAppender`,
`DatePattern='.'yyyy-MM-dd-HH`, `File=${kafka.logs.dir}/state-change.log`); logrotate often compresses the
renamed files (`.gz`). The files of one folder with one log name are one broker's log: one run, read oldest
first (the date orders them) and the live file last.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Final, Literal, cast

import orjson

GZIP_MAGIC: Final = b"\x1f\x8b"
# `<log>.log`, `<log>.log.2024-01-31-23` (the DatePattern above; a pattern without the hour too), either `.gz`.
_LOG_FILE: Final = re.compile(r"(?P<live>.+?\.log)(?:\.(?P<date>\d{4}-\d{2}-\d{2}(?:-\d{2}){0,2}))?(?:\.gz)?")
# Lines read to find the run a trace names (the first line that is an event names it).
_RUN_LINES: Final = 1000

Kind = Literal["log", "trace"]


@dataclass(frozen=True)
class Source:
    """One run's input: a trace, or a Kafka log's files in the order they were written; `key`, the resolved
    path of the trace or of the live log, tells sources apart; `claims`, the run the trace names (for a log,
    its log name), is what the events' run must be."""

    kind: Kind
    key: str
    files: tuple[str, ...]
    claims: str
    run: str = ""


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def open_input(path: str | Path) -> IO[bytes]:
    """The file's bytes, decompressed when it is gzip (by its magic bytes, whatever its name)."""
    if is_gzip(path):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def log_name(path: str | Path) -> str:
    """The live log a file is, or is a rotation of: `state-change.log` for `state-change.log.2024-01-01-00.gz`."""
    name = Path(path).name
    matched = _LOG_FILE.fullmatch(name)
    return matched["live"] if matched else name


def _rotation_order(path: str) -> tuple[int, str]:
    matched = _LOG_FILE.fullmatch(Path(path).name)
    date = matched["date"] if matched else None
    return (1, "") if date is None else (0, date)


def log_run_name(path: str | Path) -> str:
    return f"log-{Path(log_name(path)).stem}"


def trace_run(path: str | Path) -> str | None:
    """The run the first event of a trace names (None when no line of its first ones is one)."""
    try:
        with open_input(path) as handle:
            for _, raw in zip(range(_RUN_LINES), handle, strict=False):
                try:
                    event = orjson.loads(raw)
                except orjson.JSONDecodeError:  # orjson refuses nesting past 1024, no recursion to overflow
                    continue
                if isinstance(event, dict) and isinstance(event.get("run"), str):
                    run: str = event["run"]
                    return run
    except (OSError, EOFError):  # unreadable: the reading task quarantines the file
        return None
    return None


def plan(logs: Sequence[str], traces: Sequence[str], taken: dict[str, str] | None = None) -> list[Source]:
    """The sources of the files, each with its run named; `taken` holds the runs already in the folder with
    their sources' keys ("" when unknown). A file given twice is a ValueError."""
    seen: dict[str, str] = {}
    for path in [*logs, *traces]:
        resolved = str(Path(path).resolve())
        if resolved in seen:
            raise ValueError(f"{path}: given twice (as {seen[resolved]})")
        seen[resolved] = path
    rotations: dict[str, list[str]] = {}
    for path in logs:
        live = Path(path).resolve().parent / log_name(path)
        rotations.setdefault(str(live), []).append(path)
    sources = [Source("log", key, tuple(sorted(files, key=_rotation_order)), log_run_name(key))
               for key, files in rotations.items()]
    for path in traces:
        key = str(Path(path).resolve())
        sources.append(Source("trace", key, (path,), trace_run(path) or f"trace-{Path(path).stem}"))
    return name_runs(sources, taken or {})


def name_runs(sources: Sequence[Source], taken: dict[str, str]) -> list[Source]:
    """Each source's run: the name it claims where it is alone with it, else the name and the end of its path."""
    again = {key: run for run, key in taken.items() if key}
    others = {run: key for run, key in taken.items() if key not in {s.key for s in sources} or not key}
    named: dict[int, str] = {}
    by_claim: dict[str, list[int]] = {}
    for index, source in enumerate(sources):
        if source.key in again:
            named[index] = again[source.key]  # ingested before: its run is replaced, under its name
        else:
            by_claim.setdefault(source.claims, []).append(index)
    used = set(named.values()) | set(others)
    for claim, members in by_claim.items():
        if len(members) == 1 and claim not in used:
            named[members[0]] = claim
            used.add(claim)
            continue
        # Told apart from each other, and from the sources of the runs of that name already in the folder.
        rivals = [Path(key).parts for run, key in others.items() if key and (run == claim or
                                                                             run.startswith(f"{claim}@"))]
        parts = {i: Path(sources[i].key).parts for i in members}
        for i in members:
            near = [p for j, p in parts.items() if j != i] + rivals
            k = 1
            while k < len(parts[i]) and (any(p[-k:] == parts[i][-k:] for p in near)
                                         or f"{claim}@{'/'.join(parts[i][-k:])}" in used):
                k += 1
            name = f"{claim}@{'/'.join(parts[i][-k:]).lstrip('/')}"
            if name in used:
                raise ValueError(f"{sources[i].files[0]}: its run {claim} is taken in the folder, and so is {name}")
            named[i] = name
            used.add(name)
    return [replace(source, run=named[index]) for index, source in enumerate(sources)]
