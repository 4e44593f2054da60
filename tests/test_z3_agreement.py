"""Z3 bounded model checking and TLC agree on the known bugs (marker `tlc`, run by .ci/run): on each
known-bug design the two engines report the same violated invariant, and each counterexample, read back as
trace format v1, breaks that invariant under kcm's own checker too. (The two count steps differently:
TLC's reproductions fuse a fetch round into one step, so the lengths are not compared.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.spec.tlc.modelcheck import CheckOutcome, model_knobs, vocabulary_name
from kcm.spec.trace.format import TraceWriter, load_trace
from kcm.spec.z3.bmc import BMC_BUGS, BmcBug


def checker_invariants(trace: Path) -> set[str]:
    return {v.invariant for v in InvariantChecker().check_all(load_trace(trace)).violations}


@pytest.mark.tlc
@pytest.mark.parametrize("bug", BMC_BUGS, ids=[bug.model for bug in BMC_BUGS])
def test_bmc_and_tlc_report_the_same_invariant(
    tmp_path: Path, reproduction: Callable[[str], CheckOutcome], bug: BmcBug
) -> None:
    knobs = bug.knobs
    # The reproduction model is the TLA+ counterpart of the knob setting, not another design.
    assert model_knobs(bug.model) == knobs
    tlc = reproduction(bug.model)
    assert tlc.result.violated is not None
    assert vocabulary_name(tlc.result.violated) == bug.invariant

    bmc = bug.run()
    assert bmc.invariant == bug.invariant
    bmc_trace = tmp_path / "bmc.jsonl"
    with TraceWriter(bmc_trace, validate=True) as writer:
        for event in bmc.events:
            writer.write(event)
    # (a diverged log may lose committed data in the same counterexample: the checker finds both)
    assert bug.invariant in checker_invariants(bmc_trace)
    # one event a step, and the request of each fetch (SendFetch) before it
    assert bmc.depth == bug.story.depth == len([e for e in bmc.events if e["action"] != "SendFetch"]) - 1
