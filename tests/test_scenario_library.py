"""The scenario library: the file format's runner and rewriter, the writer a search uses, and the
environment's refusal of an unexpected violation."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from kcm.conformance.scenario.environment import Environment, fill_expectations, run_scenario
from kcm.conformance.scenario.language import Mismatch, ScenarioError, parse, run_file, script

SMALL: Final = """\
# a tiny scenario
cluster brokers=2
----
0 env Init brokers=[1,2] knobs: defaults (safe design)

create-topic t0 0=1,2
----
{created}
"""


def test_runner_reports_a_wrong_expectation(tmp_path: Path) -> None:
    path = tmp_path / "wrong.txt"
    path.write_text(SMALL.format(created="1 admin CreateTopic topic=t0 assignment=0=[2,1]"))
    with pytest.raises(Mismatch) as failure:
        run_file(path, Environment(), rewrite=False)
    message = str(failure.value)
    assert f"{path}:6:" in message
    assert "-1 admin CreateTopic topic=t0 assignment=0=[2,1]" in message
    assert "+1 admin CreateTopic topic=t0 assignment=0=[1,2]" in message


def test_rewrite_regenerates_expectations(tmp_path: Path) -> None:
    path = tmp_path / "stale.txt"
    path.write_text(SMALL.format(created="stale"))
    run_file(path, Environment(), rewrite=True)
    text = path.read_text()
    assert "# a tiny scenario\n" in text
    assert "1 admin CreateTopic topic=t0 assignment=0=[1,2]" in text
    run_file(path, Environment(), rewrite=False)


def test_parser_requires_the_separator(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text("cluster brokers=1\n0 env Init\n")
    with pytest.raises(ScenarioError, match=r"bad.txt:1: expected '----'"):
        parse(path)


UNCLEAN: Final = """\
cluster brokers=3 unclean_election=true
----

stabilize
----

create-topic t0 0=2,3
----

stabilize
----

crash 3
----

stabilize
----

produce broker=2 partition=t0-0
----

crash 2
----

stabilize
----

restart 3
----

stabilize
----
"""


def test_unexpected_violation_fails(tmp_path: Path) -> None:
    path = tmp_path / "unclean.txt"
    path.write_text(UNCLEAN)
    with pytest.raises(AssertionError, match="unexpected VIOLATION NoCommittedDataLoss"):
        run_scenario(path, rewrite=True)
    assert "VIOLATION NoCommittedDataLoss" in path.read_text()


def test_a_script_is_filled_with_the_outputs_a_run_expects(tmp_path: Path) -> None:
    text = script(["# a tiny scenario", "cluster brokers=2", "create-topic t0 0=1,2"])
    assert text == "# a tiny scenario\ncluster brokers=2\n----\n\ncreate-topic t0 0=1,2\n----\n"
    path = tmp_path / "filled.txt"
    path.write_text(fill_expectations(text))
    assert path.read_text() == SMALL.format(created="1 admin CreateTopic topic=t0 assignment=0=[1,2]")
    run_scenario(path, rewrite=False)


def test_a_store_write_of_another_producers_shape_shows_as_json() -> None:
    """A trace's writes carry the nodes' data as its producer wrote them: the short forms only where kcm's shape
    is there to read (a foreign shape ended check-trace's explanation in a traceback)."""
    from kcm.conformance.scenario.rendering import render_write

    state = "/brokers/topics/t/partitions/0/state"
    assert render_write(["SetData", state, {"leader": 1, "leader_epoch": 2, "isr": [1, 2]}]) == \
        "zk set t-0 leader=1 epoch=2 isr=[1,2]"
    assert render_write(["SetData", state, {"leader": "1"}]) == f'zk set {state} {{"leader":"1"}}'
    assert render_write(["Create", "/brokers/topics/t", {"partitions": {"0": [1], "1": [2]}}]) == \
        "zk create t AR 0=[1] 1=[2]"
    assert render_write(["Create", "/brokers/topics/t", {"partitions": {"x": [1]}}]) == \
        'zk create /brokers/topics/t {"partitions":{"x":[1]}}'
    assert render_write(["Create", "/brokers/topics/t", {"partitions": []}]) == \
        'zk create /brokers/topics/t {"partitions":[]}'
