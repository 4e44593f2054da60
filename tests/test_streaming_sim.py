"""`kcm sim` on long runs: the simulated operator keeps the partition count bounded and the clients each
log's length (so are the lines that list every partition or hold a log); a line above the threshold gets a
note naming its step and field; progress goes to stderr as timestamped lines when stderr is no terminal;
running in chunks writes the same bytes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kcm.impl import zk_paths
from kcm.impl.sim.cluster import Cluster, Event
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import TraceWriter
from kcm.spec.vocabulary import Knobs
from kcm.tools import progress
from kcm.tools.cli import main
from kcm.tools.sim import CALM_EVERY

PLAIN = re.compile(r"^\d\d:\d\d:\d\d sim steps: (done in [\d.]+ s, )?[\d,]+/[\d,]+, [\d,]+ MB written$")


def partitions(cluster: Cluster) -> int:
    store = cluster.store
    return sum(len(zk_paths.topic_assignment(store.get(zk_paths.topic_path(topic))[0]))
               for topic in store.children(zk_paths.TOPICS))


def test_the_operator_creates_partitions_only_up_to_the_bound() -> None:
    created: list[Event] = []

    def sink(event: Event) -> None:
        if event["action"] in ("CreateTopic", "CreatePartitions") and not event["args"]["error"]:
            created.append(event)

    sim = Simulator(1, Knobs(), SimConfig(partitions=2, max_partitions=4), sink)
    sim.bootstrap()
    most = 0
    for _ in range(20_000):
        sim.run(1)
        most = max(most, partitions(sim.cluster))
    assert most == 4  # reached, never passed
    assert len(created) > 3  # deletions made room again


def test_clients_write_to_a_log_only_up_to_the_bound() -> None:
    longest = 0

    def sink(event: Event) -> None:
        nonlocal longest
        for logs in event["state"].get("log", {}).values():
            longest = max([longest, *(len(log) for log in logs.values() if log is not None)])

    sim = Simulator(2, Knobs(), SimConfig(partitions=1, max_partitions=1, max_records=20), sink)
    sim.bootstrap()
    sim.run(5_000)
    assert longest == 20


def test_a_large_line_is_noted_with_its_step_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 120 partitions: the controller's failover lists each one's transitions.
    code = main(["sim", "--steps", "20", "--partitions", "120", "--out", str(tmp_path / "t.jsonl")])
    _, err = capsys.readouterr()
    assert code == 0
    first, *rest = err.splitlines()
    assert re.match(r"^note: seq \d+ \(ControllerElect by broker:\d\) is a line of \d+ KB, \d+ KB of it "
                    r"args\.transitions: ", first)
    assert all(line.startswith("note: ") for line in rest)


def test_progress_is_plain_lines_on_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PLAIN_INTERVAL", 0.0)
    # No calm phase: one would end a chunk past its thousand steps.
    assert main(["sim", "--steps", "3000", "--calm-every", "0", "--out", str(tmp_path / "t.jsonl")]) == 0
    lines = capsys.readouterr().err.splitlines()
    # A line per chunk of steps, then the end.
    assert len(lines) == 4 and all(PLAIN.match(line) for line in lines)
    assert lines[0].split(" sim steps: ")[1].startswith("1,000/3,000, ")
    assert re.search(r" sim steps: done in [\d.]+ s, 3,000/3,000, \d+ MB written$", lines[-1])


def test_chunked_run_writes_the_bytes_of_one_run(tmp_path: Path) -> None:
    chunked = tmp_path / "chunked.jsonl"
    assert main(["sim", "--seed", "3", "--steps", "2500", "--out", str(chunked)]) == 0
    whole = tmp_path / "whole.jsonl"
    with TraceWriter(whole) as writer:
        sim = Simulator(3, Knobs(), SimConfig(calm_every=CALM_EVERY), writer.write)
        sim.bootstrap()
        sim.run(2500)
    assert chunked.read_bytes() == whole.read_bytes()
