"""The real corpus (tests/data/kafka/real/, sources in SOURCES.md): lines Kafka brokers printed, as found in
public bug reports and docs. Every line is an event, skipped with a reason or quarantined with one; the
state-change lines become events; a healthy cluster's excerpt shows no violation; and one line of a real
excerpt altered into a real anomaly is flagged at that line."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline.kafka_log import ParsedLog, parse_kafka_log
from kcm.spec.trace.format import Event

REAL = Path(__file__).resolve().parent / "data" / "kafka" / "real"
FILES = sorted(REAL.glob("*.log"))
# The share of state.change.logger lines that must become events (issue 22's acceptance list).
EVENT_SHARE = 0.95
_CONTINUATION = "skipped on purpose: wrapped part of line"
# Layouts the corpus's SOURCES.md names that kcm does not detect: the user gives them as --log-pattern.
REAL_PATTERNS = {"34": ">>> %d{yy/MM/dd HH:mm:ss} %p %c: %m%n", "40": "%d %p %c: %m%n"}


@cache
def _states() -> dict[str, str]:
    """SOURCES.md's `state` column by file: `healthy ...` or `incident ...`."""
    rows: dict[str, str] = {}
    for line in (REAL / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 7 and cells[0].endswith(".log"):
            rows[cells[0]] = cells[-1]
    return rows


@cache
def _parsed(path: Path) -> ParsedLog:
    return parse_kafka_log(path, pattern=REAL_PATTERNS.get(path.name[:2]))


def _event_lines(parsed: ParsedLog) -> set[int]:
    """The lines that became events (`args.log` is `file:line`; the parser's Init names no line)."""
    return {int(str(e["args"]["log"]).rpartition(":")[2]) for e in parsed.events if "log" in e["args"]}


def _violations(events: list[Event]) -> list[tuple[int, str, str]]:
    checker = InvariantChecker()
    return [(e["seq"], v.invariant, str(e["args"].get("log"))) for e in events for v in checker.step(e)]


def test_the_corpus_is_what_the_acceptance_asks() -> None:
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in FILES)
    assert lines >= 200
    assert set(_states()) == {p.name for p in FILES}, "every file has its row in SOURCES.md"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:2])
def test_every_line_is_an_event_skipped_or_quarantined_with_its_reason(path: Path) -> None:
    parsed = _parsed(path)
    skipped = {s["line"] for s in parsed.skipped}
    quarantined = {q["line"] for q in parsed.quarantine}
    joined = {s["line"] for s in parsed.skipped if s["reason"].startswith(_CONTINUATION)}
    events = _event_lines(parsed)
    assert not (skipped & quarantined) and not (events & quarantined) and not (events & (skipped - joined))
    assert events | skipped | quarantined == set(range(1, parsed.lines + 1))
    assert all(entry["reason"].strip() for entry in [*parsed.skipped, *parsed.quarantine])


@pytest.mark.parametrize("path", [p for p in FILES if _states()[p.name].startswith("healthy")],
                         ids=lambda p: p.name[:2])
def test_a_healthy_excerpt_shows_no_violation(path: Path) -> None:
    assert _violations(_parsed(path).events) == []


# -- state-change lines become events ------------------------------------------------------------------------


def _state_change_outcomes() -> dict[str, list[tuple[str, int]]]:
    """Per outcome (event, skipped, quarantined), the (file, line) of every record of state.change.logger in
    the corpus, a record counted once at its first line."""
    out: dict[str, list[tuple[str, int]]] = {"event": [], "skipped": [], "quarantined": []}
    for path in sorted(REAL.glob("*.log")):
        parsed = parse_kafka_log(path, pattern=REAL_PATTERNS.get(path.name[:2]))
        texts = path.read_text(encoding="utf-8", errors="replace").split("\n")
        parts: dict[int, list[int]] = {}
        for entry in parsed.skipped:
            if "wrapped part of line" in entry["reason"]:
                parts.setdefault(int(entry["reason"].rsplit(" ", 1)[1]), []).append(int(entry["line"]))
        found = {"event": [int(e["args"]["log"].rsplit(":", 1)[1]) for e in parsed.events[1:]],
                 "skipped": [int(s["line"]) for s in parsed.skipped if "wrapped part" not in s["reason"]],
                 "quarantined": [int(q["line"]) for q in parsed.quarantine]}
        for outcome, numbers in found.items():
            out[outcome] += [(path.name[:2], n) for n in numbers
                             if "state.change.logger" in "".join(texts[k - 1] for k in [n, *parts.get(n, [])])]
    return out


def test_the_state_change_lines_of_the_corpus_become_events() -> None:
    outcomes = _state_change_outcomes()
    total = sum(len(lines) for lines in outcomes.values())
    assert total >= 170
    assert len(outcomes["event"]) >= 0.95 * total
    # Left: a pre-2.6 trunk form no release printed (PR 8320), and a line the source cut at its start.
    assert outcomes["quarantined"] == [("01", 9), ("46", 1)]
    assert outcomes["skipped"] == []


def test_the_offline_leader_selections_of_the_corpus_are_events() -> None:
    for name, partition, leader in (("32", "LIVETOPICOLD-0", 1), ("33", "__consumer_offsets-14", 6)):
        parsed = parse_kafka_log(next(REAL.glob(f"{name}-*.log")))
        assert parsed.quarantine == [] and parsed.skipped == []
        assert parsed.events[1]["state"] == {"leader": {partition: leader}, "leader_epoch": {partition: 1},
                                             "isr": {partition: [leader]}}


# -- one line altered to a real anomaly ------------------------------------------------------------------------

# A controller's write of a partition's leader and leader epoch (1.0 and later: `Changed partition P ... with
# state LeaderAndIsr(leader=1, leaderEpoch=3, ...)`).
_STORE_LEADER = re.compile(r"Changed partition (?P<p>\S+) .*LeaderAndIsr\(leader=(?P<leader>\d+), "
                           r"leaderEpoch=(?P<epoch>\d+)")
# A broker starting to apply a controller's request (`[Broker id=2] Handling LeaderAndIsr request correlationId 5
# from controller 1 epoch 3 starting the become-...`): Kafka logs it only for a request it took.
_APPLIED = re.compile(r"\[Broker id=(?P<b>\d+)\] Handling LeaderAndIsr request correlationId \d+ "
                      r"from controller \d+ epoch (?P<epoch>\d+) starting")

Case = tuple[Path, int, str, str]  # excerpt, line, text of the line altered, the invariant it must break


def _healthy() -> list[Path]:
    return [p for p in FILES if _states()[p.name].startswith("healthy")]


def _second_leader(path: Path) -> Case | None:
    """The excerpt's second store write, turned into another leader of the first write's partition and epoch
    (what a zombie controller's write would be): another broker of the excerpt, or one more when it shows one."""
    lines = path.read_text(encoding="utf-8").splitlines()
    writes = [(n, m) for n, text in enumerate(lines, start=1) if (m := _STORE_LEADER.search(text))]
    brokers = {int(b) for text in lines for b in re.findall(r"(?:Broker id=|Controller id=|replica )(\d+)", text)}
    if len(writes) < 2:
        return None
    (_, first), (number, second) = writes[0], writes[1]
    others = sorted(brokers - {int(first["leader"])}) or [max(brokers) + 1]
    text = lines[number - 1]
    altered = (text[:second.start("p")] + first["p"] + text[second.end("p"):second.start("leader")] + str(others[0])
               + text[second.end("leader"):second.start("epoch")] + first["epoch"] + text[second.end("epoch"):])
    return path, number, altered, "OneLeaderPerEpoch"


def _stale_request(path: Path) -> Case | None:
    """A broker's later request, from a controller epoch below one the broker had already taken."""
    lines = path.read_text(encoding="utf-8").splitlines()
    taken: dict[str, int] = {}
    for number, text in enumerate(lines, start=1):
        match = _APPLIED.search(text)
        if match is None:
            continue
        if taken.get(match["b"], 0) > 0:
            stale = str(taken[match["b"]] - 1)
            return path, number, text[:match.start("epoch")] + stale + text[match.end("epoch"):], \
                "StaleControllerFenced"
        taken[match["b"]] = max(taken.get(match["b"], 0), int(match["epoch"]))
    return None


CASES: list[Case] = [c for p in _healthy() for make in (_second_leader, _stale_request) if (c := make(p))]


def test_the_corpus_has_excerpts_of_both_anomalies_to_alter() -> None:
    assert {c[3] for c in CASES} == {"OneLeaderPerEpoch", "StaleControllerFenced"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].name[:2]}:{c[1]}:{c[3]}")
def test_one_line_altered_to_an_anomaly_is_flagged_at_that_line(case: Case, tmp_path: Path) -> None:
    path, number, altered, invariant = case
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[number - 1] = altered
    out = tmp_path / path.name
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flagged = {(v, int(log.rpartition(":")[2])) for _, v, log in _violations(parse_kafka_log(out).events)}
    assert (invariant, number) in flagged, sorted(flagged)
    assert min(line for _, line in flagged) == number
