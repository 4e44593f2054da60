"""Coverage of a campaign (actions, state transitions, the picture) and `kcm conform` on the command line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check.coverage import Coverage, valid_edges
from kcm.tools.cli import main


def _event(action: str, **args: Any) -> dict[str, Any]:
    return {"v": 2, "run": "r", "seq": 1, "actor": "controller:1", "action": action, "args": args, "state": {}}


def test_transitions_are_counted_and_unreached_ones_listed() -> None:
    coverage = Coverage()
    coverage.observe(_event("TopicChange", transitions=[
        ["partition", "t0-0", "NonExistentPartition", "NewPartition"],
        ["partition", "t0-0", "NewPartition", "OnlinePartition"],
        ["replica", "t0-0", "1", "NonExistentReplica", "NewReplica"],
        ["partition", "t0-1", None, "OnlinePartition"],  # a context load, not a transition
    ]))
    coverage.observe(_event("BrokerChange", invalid_transitions=[["replica", "t0-0", "1", "NewReplica",
                                                                  "ReplicaDeletionStarted"]]))
    summary = coverage.to_json()
    assert summary["actions"] == {"BrokerChange": 1, "TopicChange": 1}
    assert summary["partition_transitions"]["NewPartition -> OnlinePartition"] == 1
    assert summary["partition_transitions_covered"] == f"2/{len(valid_edges('partition'))}"
    assert "OnlinePartition -> OfflinePartition" in summary["partition_transitions_unreached"]
    assert summary["replica_transitions_invalid"] == {"NewReplica -> ReplicaDeletionStarted": 1}
    assert "ControllerElect" in summary["actions_unreached"]


def test_the_picture_is_well_formed_svg_with_every_valid_edge() -> None:
    coverage = Coverage()
    coverage.observe(_event("X", transitions=[["partition", "p", "OnlinePartition", "OfflinePartition"]] * 3))
    root = ET.fromstring(coverage.svg())
    ns = "{http://www.w3.org/2000/svg}"
    edges = [p for p in root.iter(f"{ns}path") if p.find(f"{ns}title") is not None]
    assert len(edges) == len(valid_edges("partition")) + len(valid_edges("replica"))
    titles = {p.find(f"{ns}title").text for p in edges}  # type: ignore[union-attr]
    assert "OnlinePartition -> OfflinePartition: 3" in titles
    dashed = [p for p in edges if p.get("stroke-dasharray")]
    assert len(dashed) == len(edges) - 1  # every edge but the one taken is drawn as never reached


def test_kcm_conform_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conform", "--examples", "6", "--steps", "8", "--json", "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    summary = json.loads(out)
    assert code == 0
    assert summary["examples"] >= 6 and summary["steps"] > 0 and summary["violations"] == []
    assert summary["coverage"]["actions"]["CreateTopic"] > 0
    assert Path(summary["coverage"]["picture"]).exists()


@pytest.mark.parametrize("argv,message", [
    (["--examples", "-1"], "--examples: must be at least 0, not -1"),
    (["--steps", "0"], "at least 1"),
    (["--set", "truncation=nope"], "truncation"),
])
def test_kcm_conform_bad_input_is_one_line(argv: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conform", "--out", str(tmp_path), *argv])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_kcm_conform_of_no_example_is_unobserved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38, item 8: a campaign of 0 examples checked nothing; it must not pass (exit 0)."""
    code = main(["conform", "--out", str(tmp_path), "--examples", "0", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["examples"] == 0
    assert err.strip().splitlines() == ["kcm: error: conform: no example ran (unobserved): the campaign does not pass"]
