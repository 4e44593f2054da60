"""Interleaving coverage (docs/interleavings.md): the space, the tracker on a cluster driven step by step, the
verdicts, the steered campaign's reach in the default budget and in the long one, and `kcm conform
--interleavings`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.check.interleavings import InterleavingCoverage, Tracker, matrix_svg
from kcm.conformance.explore.interleaving_campaign import (
    LONG_AIM,
    LONG_RUNS,
    SEEDS,
    STEERED,
    Budget,
    seed_runs,
    steered_runs,
)
from kcm.impl.sim.cluster import Cluster, broker_ids
from kcm.spec.interleavings import (
    ADDING,
    CONTROLLER,
    FAULTS,
    OPERATIONS,
    REMOVING,
    Point,
    points,
    reachable_points,
    unreachable,
)
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import ACTIONS, PROPERTIES, Knobs
from kcm.tools.cli import main

# The checkout's scenario files, named so that an installed package's run counts them too.
SCENARIOS = Path(__file__).parent / "scenarios"


def test_the_space_is_named_from_the_model() -> None:
    assert all(op.judged_by in PROPERTIES for op in OPERATIONS.values())
    assert set(FAULTS.values()) <= set(ACTIONS)
    every = points()
    assert len(every) == len(set(every)) == sum(len(op.steps) * len(FAULTS) * len(op.roles)
                                                  for op in OPERATIONS.values())
    # A rule of the model, never a campaign's miss: each unreachable point says why.
    assert all(unreachable(p) for p in every if p not in reachable_points())
    assert unreachable(Point("controller failover", "electing", "crash", CONTROLLER)) is not None
    assert unreachable(Point("reassignment", "expanding", "crash", ADDING)) is None


class _Driven:
    """A cluster stepped by hand, each event read by the tracker."""

    def __init__(self, brokers: int) -> None:
        self.tracker = Tracker()
        self.reached: list[Point] = []
        self.cluster = Cluster(broker_ids(brokers), Knobs(), self._sink)

    def _sink(self, event: Event) -> None:
        self.reached.extend(self.tracker.observe(event))

    def round_until(self, operation: str, step: str, rounds: int = 50) -> None:
        for _ in range(rounds):
            if any(op == operation and s == step for op, s, _ in self.tracker.under_way()):
                return
            self.cluster.fair_round()
        raise AssertionError(f"{operation} never reached {step}: {self.tracker.under_way()}")


def test_a_crash_of_the_replica_being_added_while_the_reassignment_waits_for_it() -> None:
    driven = _Driven(4)
    cluster = driven.cluster
    cluster.create_topic("t", {0: (1, 2, 3)})
    cluster.stabilize()
    cluster.reassign({"t-0": (2, 3, 4)})
    driven.round_until("reassignment", "expanding")
    assert driven.tracker.roles("reassignment", "t-0", 4) >= {ADDING}
    assert REMOVING in driven.tracker.roles("reassignment", "t-0", 1)
    driven.reached.clear()
    cluster.crash(4)
    assert Point("reassignment", "expanding", "crash", ADDING) in driven.reached
    # Back and caught up, the reassignment runs to its end: nothing stays under way.
    cluster.restart(4)
    cluster.stabilize()
    assert not [u for u in driven.tracker.under_way() if u[0] == "reassignment"]


def test_a_controlled_shutdown_steps_and_the_controller_crash_in_it() -> None:
    driven = _Driven(3)
    cluster = driven.cluster
    cluster.create_topic("t", {0: (1, 2, 3)})
    cluster.stabilize()
    leaving = next(b for b in (1, 2, 3) if b != cluster.controller_holder())
    cluster.request_controlled_shutdown(leaving)
    assert ("controlled shutdown", "requested", str(leaving)) in driven.tracker.under_way()
    driven.reached.clear()
    cluster.crash_controller()
    assert Point("controlled shutdown", "requested", "controller failover", CONTROLLER) in driven.reached


def test_the_verdict_of_a_point_is_what_was_checked_after_it() -> None:
    point = Point("reassignment", "expanding", "crash", ADDING)
    coverage = InterleavingCoverage()
    coverage.add_run(STEERED, [(10, point)], judged=[(5, "ReassignmentCompletes")])
    assert coverage.status(point) == "reached, not judged"  # checked before the fault: not its verdict
    coverage.add_run(STEERED, [(10, point)], judged=[(40, "ReassignmentCompletes")])
    assert coverage.status(point) == "judged"
    coverage.add_run(STEERED, [(10, point)], judged=[(40, "ReassignmentCompletes")],
                     violations=[(40, "ReassignmentCompletes"), (30, "LeaderCompleteness")])
    assert coverage.status(point) == "violated"
    assert coverage.verdicts[point].violated == {"ReassignmentCompletes": 1, "LeaderCompleteness": 1}
    other = Point("topic deletion", "requested", "crash", CONTROLLER)
    coverage.add_run("scenario files", [(3, other)])
    assert coverage.status(other) == "reached, not judged"
    assert coverage.summary()["violated"] == 1


def _assert_every_reachable_point_judged(coverage: InterleavingCoverage, aim: int) -> None:
    missed = [p.key for p in reachable_points() if sum(coverage.reached.get(p, {}).values()) < aim]
    assert not missed
    assert all(coverage.status(p) == "judged" for p in reachable_points())
    # The rules of unreachability are held to the campaigns: none of them ever reaches such a point.
    assert not [p.key for p in coverage.reached if unreachable(p) is not None]


def test_the_default_budget_reaches_and_judges_every_reachable_point() -> None:
    seeded = seed_runs(Knobs(), range(1, 21), 3000)
    before = seeded.coverage.summary()["reached"]
    report = steered_runs(Knobs(), Budget(), seeded.coverage)
    assert not seeded.violations and not report.violations
    _assert_every_reachable_point_judged(report.coverage, 1)
    # The seeds alone leave points open: the steering is what reaches them.
    assert before < len(reachable_points())
    assert set(report.coverage.campaigns()) == {SEEDS, STEERED}


@pytest.mark.long
def test_the_long_budget_reaches_every_reachable_point_five_times() -> None:
    seeded = seed_runs(Knobs(), range(1, 21), 3000)
    report = steered_runs(Knobs(), Budget(runs=LONG_RUNS, aim=LONG_AIM), seeded.coverage)
    assert not seeded.violations and not report.violations
    _assert_every_reachable_point_judged(report.coverage, LONG_AIM)


def test_kcm_conform_interleavings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, html = tmp_path / "conform", tmp_path / "conform.html"
    code = main(["conform", "--examples", "10", "--steps", "30", "--no-step-check", "--interleavings", "--runs", "1",
                 "--scenarios", str(SCENARIOS), "--json", "--out", str(out), "--html", str(html), "--progress", "none"])
    assert code == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)["interleavings"]
    figures = document["summary"]
    assert figures["points"] == len(points()) and figures["reachable"] == len(reachable_points())
    assert 0 < figures["judged"] <= figures["reached"] <= figures["reachable"]
    assert set(document["campaigns"]) == {"hypothesis machines", "scenario files", "simulator seeds", "steered search"}
    assert {row["status"] for row in document["points"]} >= {"judged", "unreachable"}
    picture = Path(document["picture"]).read_text()
    assert picture.startswith("<svg") and "Interleaving coverage" in picture
    assert "Interleaving coverage" in html.read_text()


def test_the_matrix_titles_each_cell_with_its_point() -> None:
    coverage = InterleavingCoverage()
    point = Point("broker startup", "catching up", "lost request", "starting")
    coverage.add_run(STEERED, [(1, point)], judged=[(9, "ReplicasRejoinIsr")])
    svg = matrix_svg(coverage)
    assert f"{point.key}: judged (steered search 1)" in svg
    assert "while a controller is being elected no broker holds the office" in svg


def test_a_scenario_folder_without_scenario_files_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["conform", "--examples", "0", "--interleavings", "--scenarios", str(tmp_path), "--out",
                 str(tmp_path / "conform"), "--progress", "none"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"--scenarios {tmp_path}: no scenario file" in err
