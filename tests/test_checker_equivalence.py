"""The invariant checker against reports frozen from its first, straightforward version (revision 9bee798,
before it kept verified log prefixes and memos): the same violations, counts, observed variables and
verdicts, or the same exception at the same event, on simulator traces under unsafe knobs, on partial, cut
and corrupted variants of them, and on parsed Kafka logs. The state the checker keeps must stay the fold of
the trace's deltas.

The traces are frozen too (tests/data/checker/traces.jsonl.gz), so that a change to the simulator does not
move the expectations. To regenerate expected.json after an intended change of what the checker reports,
run `python tests/test_checker_equivalence.py` and review the diff.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.spec.trace.format import Event, apply_event, empty_state, make_event
from kcm.spec.vocabulary import INVARIANTS

DATA = Path(__file__).parent / "data" / "checker"
TRACES = DATA / "traces.jsonl.gz"
EXPECTED = DATA / "expected.json"

STORE_VIEW = ("assignment", "leader", "leader_epoch", "isr", "controller_epoch", "broker_controller_epoch")
REPLICA_VIEW = ("role", "local_leader_epoch", "log", "hw", "epoch_start_offset", "alive")
MACHINE_VIEW = ("partition_state", "replica_state", "acting_controller_epoch", "controller_epoch")
STATES = ("NonExistentPartition", "NewPartition", "OnlinePartition", "OfflinePartition", "NewReplica",
          "OnlineReplica", "OfflineReplica", "ReplicaDeletionStarted", "ReplicaDeletionSuccessful",
          "ReplicaDeletionIneligible", "NonExistentReplica", "Bogus", None)


def base_traces() -> dict[str, list[Event]]:
    traces: dict[str, list[Event]] = {}
    with gzip.open(TRACES, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            traces.setdefault(record["trace"], []).append(record["event"])
    return traces


def _keep(events: list[Event], names: tuple[str, ...]) -> list[Event]:
    return [{**e, "state": {k: v for k, v in e["state"].items() if k in names}} for e in events]


def _perturbed(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return max(0, value + rng.choice((-2, -1, 1, 2)))
    if isinstance(value, list):
        if value and rng.random() < 0.5:
            return value[:-1] if rng.random() < 0.5 else value[1:]
        if value and isinstance(value[0], list):
            i = rng.randrange(len(value))
            return [*value[:i], [value[i][0], value[i][1] + 1000], *value[i + 1 :]]
        return [*value, rng.choice((1, 2, 3))]
    return rng.choice(("leader", "follower", *STATES[:-1]))


def _corrupted(events: list[Event], rng: random.Random) -> list[Event]:
    """Values nudged, records rewritten, transitions and epochs falsified, actors and actions swapped."""
    out = []
    for event in json.loads(json.dumps(events)):
        state, args, r = event["state"], event["args"], rng.random()
        if r < 0.08 and state:
            name = rng.choice(sorted(state))
            node, key = state, name
            while isinstance(node[key], dict) and node[key]:
                node, key = node[key], rng.choice(sorted(node[key]))
            if not isinstance(node[key], dict):
                removable = node is not state and name != "broker_controller_epoch"
                node[key] = None if removable and rng.random() < 0.1 else _perturbed(node[key], rng)
        elif r < 0.12 and args.get("transitions"):
            entry = rng.choice(args["transitions"])
            entry[rng.choice((-2, -1))] = rng.choice(STATES)
        elif r < 0.14 and "controller_epoch" in args:
            args["controller_epoch"] = max(0, args["controller_epoch"] - rng.randint(1, 3))
        elif r < 0.15:
            event["actor"] = rng.choice(("controller:1", "controller:2", "broker:1", "broker:2", "env"))
        elif r < 0.16 and event["action"] != "Init":
            event["action"] = rng.choice(("LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControllerElect"))
        out.append(event)
    return out


def variants(traces: dict[str, list[Event]]) -> Iterator[tuple[str, list[Event], str]]:
    """(name, events, the checker's truncation knob) for each trace and its variants."""
    for name, events in sorted(traces.items()):
        yield name, events, "kip320"
        if name.startswith("kafka"):
            continue
        yield f"{name}/store-only", _keep(events, STORE_VIEW), "kip320"
        yield f"{name}/replicas-only", _keep(events, REPLICA_VIEW), "hw"
        yield f"{name}/machines-only", _keep(events, MACHINE_VIEW), "kip320"
        yield f"{name}/from-300", events[300:], "hw"
        yield f"{name}/two-runs", events[:400] + events[200:], "kip320"
        for n in range(3):
            yield f"{name}/corrupted-{n}", _corrupted(events, random.Random(f"{name}/{n}")), "kip320"


def outcome(events: list[Event], truncation: str) -> dict[str, Any]:
    """What the checker reports on the events, reduced to a comparable record."""
    checker = InvariantChecker(truncation)
    raised = None
    for i, event in enumerate(events):
        try:
            checker.step(json.loads(json.dumps(event)))  # a fresh copy: the checker keeps leaf values
        except Exception as err:  # which exception, and where, is part of the outcome
            raised = [type(err).__name__, str(err), i]
            break
    report = checker.report
    violations: list[list[Any]] = [[v.invariant, v.seq, v.message] for v in report.violations]
    by_invariant: dict[str, int] = {}
    for v in report.violations:
        by_invariant[v.invariant] = by_invariant.get(v.invariant, 0) + 1
    return {
        "raised": raised,
        "events": report.events,
        "checks": dict(sorted(report.checks.items())),
        "observed": sorted(report.observed),
        # The frozen reports predate the progress properties (these traces have no calm phase).
        "verdicts": {name: report.verdict(name) for name in INVARIANTS},
        "violations": by_invariant,
        "first": violations[:3],
        "digest": hashlib.sha256(json.dumps(violations).encode()).hexdigest(),
    }


@pytest.fixture(scope="module")
def all_variants() -> dict[str, tuple[list[Event], str]]:
    return {name: (events, truncation) for name, events, truncation in variants(base_traces())}


def _expected() -> dict[str, dict[str, Any]]:
    expected: dict[str, dict[str, Any]] = json.loads(EXPECTED.read_text(encoding="utf-8"))
    return expected


@pytest.mark.parametrize("name", sorted(_expected()))
def test_the_report_is_the_frozen_one(name: str, all_variants: dict[str, tuple[list[Event], str]]) -> None:
    events, truncation = all_variants[name]
    assert outcome(events, truncation) == _expected()[name]


def test_the_frozen_reports_cover_every_kind_of_violation() -> None:
    expected = _expected()
    found = {invariant for record in expected.values() for invariant in record["violations"]}
    assert len(found) == len(INVARIANTS) + 1  # every invariant, HighWatermarkMonotonic in its two readings
    assert any(record["raised"] for record in expected.values())


def test_the_checkers_state_is_the_fold_of_the_deltas() -> None:
    for name, events in sorted(base_traces().items()):
        if name.startswith("mut-"):
            continue  # a mutant's trace makes the checker raise
        checker = InvariantChecker()
        folded = empty_state()
        for i, event in enumerate(events):
            checker.step(json.loads(json.dumps(event)))
            apply_event(folded, json.loads(json.dumps(event)))
            if i % 50 == 0 or i == len(events) - 1:
                assert checker.state == folded, (name, i)


def _pair(seq: int, state: dict[str, Any], full: bool = False) -> Event:
    return make_event("r", seq, "env", "Init" if full else "Tick", {}, state, full=full)


def test_a_record_rewritten_below_verified_prefixes_is_caught_at_every_check() -> None:
    log = [[0, 1], [0, 2]]
    checker = InvariantChecker()
    checker.step(_pair(0, {"log": {"1": {"p": log}, "2": {"p": list(log)}}, "hw": {"1": {"p": 2}, "2": {"p": 2}}},
                       full=True))
    assert checker.report.ok  # both logs now verified equal below 2
    checker.step(_pair(1, {"log": {"2": {"p": [[0, 1], [1, 9]]}}}))
    checker.step(_pair(2, {"hw": {"1": {"p": 2}}}))  # nothing of the logs changes: reported again
    assert [(v.seq, v.message) for v in checker.report.violations] == [
        (1, "p: brokers 1 and 2 disagree at offset 1, below both HWs: broker 1 has [0, 2] (leader epoch 0), "
            "broker 2 has [1, 9] (leader epoch 1)"),
        (2, "p: brokers 1 and 2 disagree at offset 1, below both HWs: broker 1 has [0, 2] (leader epoch 0), "
            "broker 2 has [1, 9] (leader epoch 1)"),
    ]


def test_a_committed_record_replaced_in_an_isr_members_log_is_caught() -> None:
    log = [[0, 1], [0, 2]]
    checker = InvariantChecker()
    checker.step(_pair(0, {
        "leader": {"p": 1}, "leader_epoch": {"p": 0}, "isr": {"p": [1, 2]},
        "role": {"1": {"p": "leader"}, "2": {"p": "follower"}}, "local_leader_epoch": {"1": {"p": 0}},
        "log": {"1": {"p": log}, "2": {"p": list(log)}}, "hw": {"1": {"p": 2}, "2": {"p": 2}},
    }, full=True))
    assert checker.committed["p"] == log and checker.report.ok
    checker.step(_pair(1, {"log": {"2": {"p": [[0, 1], [0, 7]]}}, "hw": {"2": {"p": 1}}}))
    assert [(v.invariant, v.message) for v in checker.report.violations] == [
        ("NoCommittedDataLoss", "p: committed record [0, 2] (leader epoch 0) at offset 1 is replaced by [0, 7] "
                                "(leader epoch 0) in the log of broker 2; committed at step 0 when the HW of leader 1 "
                                "passed offset 1; now held by broker(s) 1"),
    ]


if __name__ == "__main__":
    frozen = {name: outcome(events, truncation) for name, events, truncation in variants(base_traces())}
    EXPECTED.write_text(json.dumps(frozen, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(frozen)} reports written to {EXPECTED}", file=sys.stderr)
