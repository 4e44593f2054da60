"""The design points (kcm.spec.design_points): each is read by every engine, under the names the catalogue gives
it, and the implementation takes a design of one's own in place of a knob."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.impl.design import Design
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.design_points import DESIGN_POINTS, DesignPoint, design_point
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import KNOB_CONSTANTS, Knobs

SPEC = Path(__file__).resolve().parents[1] / "spec"


@pytest.mark.parametrize("point", DESIGN_POINTS, ids=lambda p: p.name)
def test_every_point_is_read_where_the_catalogue_says(point: DesignPoint) -> None:
    core = (SPEC / "KafkaReplication.tla").read_text()
    for name in point.tla:
        assert re.search(rf"\b{name}\b", core), f"{point.name}: {name} is not in the TLA+ core"
    for method in point.python:
        assert callable(getattr(Design, method, None)), f"{point.name}: Design.{method} is missing"
    for knob in point.knobs:
        assert knob in KNOB_CONSTANTS


def test_every_method_of_the_implementations_design_is_a_point() -> None:
    named = {method for point in DESIGN_POINTS for method in point.python}
    methods = {name for name in vars(Design) if not name.startswith("_") and callable(vars(Design)[name])}
    assert methods == named


def test_an_unknown_point_is_refused_by_name() -> None:
    with pytest.raises(KeyError, match="unknown design point 'nope'"):
        design_point("nope")


class _LongestLogOnEmptyIsr(Design):
    """A design of one's own: with no live ISR member, the live replica with the longest log leads (here, as
    the implementation's election sees no logs, the last live replica in assignment order)."""

    def offline_partition_leader(self, assignment: Sequence[int], isr: Collection[int],
                                 live: Collection[int]) -> int | None:
        chosen = super().offline_partition_leader(assignment, isr, live)
        if chosen is not None:
            return chosen
        return next((r for r in reversed(assignment) if r in live), None)


def _run(design: Design | None, seed: int) -> list[Event]:
    events: list[Event] = []
    simulator = Simulator(seed, Knobs(), SimConfig(), events.append, design=design)
    simulator.bootstrap()
    simulator.run(4000)
    return events


def test_the_simulator_runs_a_design_of_ones_own() -> None:
    """The safe design's knobs with one rule replaced: the implementation follows the design, not the knob, and
    the rule breaks what an unclean election breaks."""
    broken = [seed for seed in range(1, 9)
              if "NoCommittedDataLoss" in _broken(_run(_LongestLogOnEmptyIsr(Knobs()), seed))]
    assert broken
    assert not _broken(_run(None, broken[0]))


def _broken(events: list[Event]) -> set[str]:
    return {v.invariant.partition("/")[0] for v in InvariantChecker().check_all(events).violations}
