"""A run of the layout checked as a stream (conformance/pipeline/stream.py), without Spark: the checker's verdicts
whatever the files a run is spread over, the layout's rules row by row, windows, sampling and the older layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.pipeline.stream import WINDOW, RunCheck, check_run, sampled
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import Event
from kcm.spec.trace.parquet import ARROW_SCHEMA, run_folder, write_parquet
from kcm.spec.vocabulary import Knobs


def _run(seed: int, steps: int, knobs: Knobs | None = None) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, knobs or Knobs(), SimConfig(), events.append)
    simulator.bootstrap()
    simulator.run(steps)
    for event in events:
        event["run"] = "r"
    return events


def _files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.iterdir())


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Rows as another tool might write them: any order, any `state` text."""
    schema = ARROW_SCHEMA.remove(ARROW_SCHEMA.get_field_index("run"))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _row(event: Event, **changes: Any) -> dict[str, Any]:
    row = {"v": event["v"], "seq": event["seq"], "actor": event["actor"], "action": event["action"],
           "args": json.dumps(event["args"]), "state": json.dumps(event["state"]), "full": bool(event.get("full"))}
    return {**row, **changes}


def _expected(events: list[Event]) -> tuple[dict[str, str], list[tuple[int, str]]]:
    checker = InvariantChecker()
    found = [(event["seq"], v.invariant) for event in events for v in checker.step(event)]
    return checker.report.verdicts(), found


def test_a_run_spread_over_files_checks_as_one(tmp_path: Path) -> None:
    events = _run(7, 1500, Knobs(truncation="hw"))
    verdicts, found = _expected(events)
    assert found, "the seed must break an invariant under truncation=hw"
    # Interleaved, not consecutive: the merge by seq is what puts them back in order.
    for part in range(3):
        write_parquet(events[part::3], tmp_path, part=part)
    result = check_run("r", _files(tmp_path / run_folder("r")))
    assert (result.read, result.checked, result.quarantine) == (len(events), len(events), [])
    assert result.verdicts == verdicts
    assert sum(result.violation_counts.values()) == len(found)
    assert min(result.first_seq.values()) == found[0][0]


def test_the_layout_rules_quarantine_row_by_row(tmp_path: Path) -> None:
    events = _run(3, 60)
    first, second = tmp_path / "part-0.parquet", tmp_path / "part-1.parquet"
    rows = [_row(e) for e in events[:40]]
    rows[10] = _row(events[10], action="Teleport")
    rows[11] = _row(events[11], actor="client")  # an action of the controller's taken by a client
    rows[12] = _row(events[12], state='{"weather":1}')
    rows[13] = _row(events[13], args="[1]")
    rows[14] = _row(events[14], state="{not json")
    rows[15] = _row(events[15], v=1)
    rows.insert(30, _row(events[5]))  # out of order in its file
    _write_rows(first, rows)
    _write_rows(second, [_row(e) for e in events[38:]])  # 38 and 39 again: duplicates in the later file
    result = check_run("r", [str(first), str(second)])
    reasons = sorted((q["file"][-14:], q["line"], q["reason"].split(":")[0]) for q in result.quarantine)
    assert reasons == [
        ("part-0.parquet", 11, "unknown action"), ("part-0.parquet", 12, "wrong actor"),
        ("part-0.parquet", 13, "unknown state variable"), ("part-0.parquet", 14, "invalid args"),
        ("part-0.parquet", 15, "invalid state"), ("part-0.parquet", 16, "trace format v1"),
        ("part-0.parquet", 31, "out-of-order seq"),
        ("part-1.parquet", 1, "duplicate seq"), ("part-1.parquet", 2, "duplicate seq")]
    assert result.read == len(rows) + len(events) - 38 == result.checked + len(result.quarantine)


def test_windows_hold_the_events_around_each_violation(tmp_path: Path) -> None:
    events = _run(7, 1500, Knobs(truncation="hw"))
    write_parquet(events, tmp_path)
    result = check_run("r", _files(tmp_path / run_folder("r")))
    assert result.violations
    seqs = {e["seq"] for e in events}
    for row in result.violations:
        around = [s for s in range(row["seq"] - WINDOW, row["seq"] + WINDOW + 1) if s in seqs]
        assert [entry["seq"] for entry in row["window"]] == around
        assert json.loads(next(e["state"] for e in row["window"] if e["seq"] == row["seq"])) == \
            events[row["seq"]]["state"]


def test_empty_deltas_are_null_and_the_older_text_reads_the_same(tmp_path: Path) -> None:
    events = _run(3, 300)
    write_parquet(events, tmp_path / "new")
    path = _files(tmp_path / "new" / run_folder("r"))[0]
    states = pq.read_table(path, columns=["state"]).column("state").to_pylist()
    assert states.count(None) == sum(1 for e in events if not e["state"]) > 0
    _write_rows(tmp_path / "old" / "part-0.parquet", [_row(e) for e in events])  # `{}`, as written before
    new, old = check_run("r", [path]), check_run("r", [str(tmp_path / "old" / "part-0.parquet")])
    assert new.to_json() == old.to_json()


def test_the_sample_is_a_hash_of_the_run_name() -> None:
    names = [f"run-{i}" for i in range(2000)]
    chosen = [n for n in names if sampled(n, 0.1)]
    assert chosen == [n for n in names if sampled(n, 0.1)]
    assert 150 < len(chosen) < 250
    assert all(sampled(n, 1.0) for n in names) and not any(sampled(n, 0.0) for n in names)


def test_a_sampled_run_is_validated_by_z3(tmp_path: Path) -> None:
    events = _run(3, 120)
    write_parquet(events, tmp_path)
    result: RunCheck = check_run("r", _files(tmp_path / run_folder("r")), validate=True)
    assert result.validation is not None
    assert (result.validation["ok"], result.validation["steps"]) == (True, len(events) - 1)  # Init is no step


@pytest.mark.parametrize("synthesized", [True, False])
def test_a_synthesized_init_is_checked_not_counted_as_read(tmp_path: Path, synthesized: bool) -> None:
    events = _run(3, 50)
    if synthesized:
        events[0]["args"]["synthesized"] = True
    write_parquet(events, tmp_path)
    result = check_run("r", _files(tmp_path / run_folder("r")))
    assert result.synthesized == int(synthesized)
    assert result.read == result.checked == len(events) - int(synthesized)
