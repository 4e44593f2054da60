"""Z3 bounded model checking and TLC agree on the known bugs (marker `tlc`, run by .ci/run): on each
known-bug design the two engines report the same violated invariant, and each counterexample, read back as
trace format v1, breaks that invariant under kcm's own checker too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcm.conformance.invariants import InvariantChecker
from kcm.conformance.trace import TraceWriter, load_trace
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.bmc import run_bmc
from kcm.tools.check import check_model, model_knobs, vocabulary_name

# design knobs, the TLA+ reproduction model, and the bounds BMC needs to reach the shortest counterexample
KNOWN_BUGS = [
    pytest.param(["unclean_election=true"], "unclean", {"brokers": 2}, 6, id="unclean"),
    pytest.param(["controller_epoch_fencing=false"], "zombie", {"brokers": 2}, 6, id="fencing-off"),
    pytest.param(["truncation=hw"], "kafka1211", {"brokers": 3, "capacity": 1, "min_depth": 7}, 7,
                 id="kafka-1211"),
    pytest.param(["truncation=kip279"], "kafka2334", {"brokers": 2}, 8, id="kafka-2334"),
    # MCstaleepoch produces no records; BMC gets the same actions (with records it loses committed data first)
    pytest.param(["leader_epoch_check=false"], "staleepoch",
                 {"brokers": 2, "actions": ["BrokerCrash", "BrokerRestart", "SessionExpire", "BrokerReregister",
                                            "ControllerElect", "ControllerResign", "BrokerChange", "LeaderAndIsr"]},
                 6, id="leader-epoch-check-off"),
]


def checker_invariants(trace: Path) -> set[str]:
    return {v.invariant for v in InvariantChecker().check_all(load_trace(trace)).violations}


@pytest.mark.tlc
@pytest.mark.parametrize(("settings", "model", "bounds", "depth"), KNOWN_BUGS)
def test_bmc_and_tlc_report_the_same_invariant(
    tmp_path: Path, settings: list[str], model: str, bounds: dict[str, Any], depth: int
) -> None:
    knobs = Knobs().with_settings(settings)
    # The reproduction model is the TLA+ counterpart of the knob setting, not another design.
    assert model_knobs(model) == knobs
    tlc = check_model(model, knobs, heap_mb=2048, trace_out=tmp_path / "tlc.jsonl")
    assert tlc.result.violated is not None
    tlc_invariant = vocabulary_name(tlc.result.violated)

    # Straight to the known depth, BMC is asked about the one invariant (a shortest counterexample to it).
    bmc = run_bmc(knobs, depth, invariants=[tlc_invariant] if "min_depth" in bounds else None, **bounds)
    assert bmc.invariant == tlc_invariant
    bmc_trace = tmp_path / "bmc.jsonl"
    with TraceWriter(bmc_trace, validate=True) as writer:
        for event in bmc.events:
            writer.write(event)
    assert checker_invariants(bmc_trace) == {tlc_invariant}
    # BMC's counterexample is a shortest one: it is no longer than TLC's breadth-first one, each counted in
    # the steps of its own model.
    assert len(bmc.events) - 1 <= tlc.result.depth
