"""The simulated cluster under faults: determinism, the safe design holding, the unsafe ones caught."""

from __future__ import annotations

import copy
import io
import os
from typing import Final

import pytest
from histories import stale_isr_cache

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.explore.campaign import run_campaign, run_seed
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import TraceWriter, apply_event, empty_state
from kcm.spec.vocabulary import INVARIANTS, NO_LEADER, Knobs


def trace_bytes(seed: int, knobs: Knobs, steps: int = 600) -> str:
    out = io.StringIO()
    with TraceWriter(out) as writer:
        sim = Simulator(seed, knobs, SimConfig(), writer.write)
        sim.bootstrap()
        sim.run(steps)
    return out.getvalue()


def test_same_seed_and_knobs_give_the_same_trace_byte_for_byte() -> None:
    assert trace_bytes(11, Knobs()) == trace_bytes(11, Knobs())


def test_another_seed_or_knob_gives_another_trace() -> None:
    base = trace_bytes(11, Knobs())
    assert trace_bytes(12, Knobs()) != base
    assert trace_bytes(11, Knobs(truncation="hw")) != base


def test_a_run_exercises_the_whole_protocol() -> None:
    result = run_seed(3, Knobs(), SimConfig(), 4000, keep_events=True)
    actions = {e["action"] for e in result.events}
    for expected in ("ControllerElect", "BrokerChange", "LeaderAndIsr", "StopReplica", "Fetch", "FetchResponse",
                     "OffsetsForLeaderEpoch", "Produce", "BrokerCrash", "BrokerRestart", "SessionExpire",
                     "BrokerReregister", "IsrChangeNotification", "PartitionReassignment",
                     "PreferredReplicaElection", "DropMessage", "DuplicateMessage"):
        assert expected in actions, expected


def test_safe_design_holds_over_100k_steps_under_faults() -> None:
    result = run_campaign(Knobs(), range(50), 2000)
    assert result.steps >= 100_000
    first = result.first_violation()
    assert first is None, f"seed {first[0].seed}: {first[1]}" if first else ""
    verdicts = result.verdicts()
    for invariant in INVARIANTS:
        assert verdicts[invariant] == "holds", invariant
        assert sum(n for k, n in result.checks.items() if k.split("/")[0] == invariant) > 0, invariant


STORMY: Final = SimConfig(brokers=4, faults=3.0)


def test_the_failover_takes_a_dead_leader_out_before_it_can_grow_a_stale_isr() -> None:
    """docs/invariants.md, "A history the failover closes": broker 2, elected controller while leader 1 is
    unregistered, writes the partition leaderless in a new epoch (Kafka's ReplicaStateMachine.startup); broker
    1, registered again and still leading epoch 1 locally, cannot add broker 2 to the ISR in the store (its
    compare-and-set meets the new version), so the startup of broker 1 sends nothing staler than the store
    and no committed record is lost."""
    events = stale_isr_cache("run")
    assert InvariantChecker().check_all(copy.deepcopy(events)).violations == []
    state = empty_state()
    failover = next(e for e in events if e["action"] == "ControllerElect" and e["actor"] == "broker:2"
                    and e["args"].get("elected"))
    for event in events[:failover["seq"] + 1]:
        apply_event(state, event)
    assert (state["leader"]["t0-0"], state["leader_epoch"]["t0-0"], state["isr"]["t0-0"]) == (NO_LEADER, 2, [1])
    produced = next(e for e in events if e["action"] == "Produce")
    for event in events[failover["seq"] + 1:produced["seq"] + 1]:
        apply_event(state, event)
    assert state["isr"]["t0-0"] == [1]  # broker 1's expansion in epoch 1 did not reach the store
    startup = next(e for e in events[produced["seq"]:] if e["action"] == "LeaderAndIsr" and e["actor"] == "broker:1"
                   and e["args"]["partitions"][0]["leader"] == 1)
    assert startup["args"]["partitions"][0]["leader_epoch"] == 3


@pytest.mark.long
def test_safe_design_holds_over_a_long_campaign() -> None:
    seeds = int(os.environ.get("KCM_LONG_SEEDS", "1000"))
    span = range(1000, 1000 + seeds)
    for config in (SimConfig(), SimConfig(brokers=5, partitions=3), STORMY):
        result = run_campaign(Knobs(), span, 3000, config)
        broken = {r.seed: (r.violations[0].invariant.split("/")[0], r.violations[0].seq)
                  for r in result.seeds if r.violations}
        assert broken == {}, config


def broken_until(knobs: Knobs, wanted: str, seeds: int = 40, steps: int = 3000) -> set[str]:
    """The invariants broken by a bounded number of seeds, up to the first seed that breaks `wanted`."""
    broken: set[str] = set()
    for seed in range(seeds):
        broken |= {v.invariant.split("/")[0] for v in run_seed(seed, knobs, SimConfig(), steps).violations}
        if wanted in broken:
            break
    return broken


@pytest.mark.parametrize(
    ("settings", "invariant"),
    [
        ({"truncation": "hw"}, "NoCommittedDataLoss"),
        ({"unclean_election": True}, "NoCommittedDataLoss"),
        ({"controller_epoch_fencing": False}, "StaleControllerFenced"),
        # Connections deliver in order and a duplicate never overtakes what was sent after it, so a broker
        # without the check meets no older leader epoch from its own controller. It re-applies a same-epoch
        # LeaderAndIsr whose ISR is older than the one its leader has since written, and then commits
        # without a member of the ISR.
        ({"leader_epoch_check": False}, "NoCommittedDataLoss"),
        # An older leader epoch takes a deposed controller's request, which fencing would have refused.
        ({"leader_epoch_check": False, "controller_epoch_fencing": False}, "LeaderEpochMonotonic"),
    ],
)
def test_unsafe_design_is_caught_within_bounded_seeds(settings: dict[str, object], invariant: str) -> None:
    assert invariant in broken_until(Knobs.from_dict(settings), invariant)


def test_hw_truncation_loses_data_only_with_crashes() -> None:
    quiet = SimConfig(faults=0.0, admin=0.0)
    for seed in range(10):
        assert not run_seed(seed, Knobs(truncation="hw"), quiet, 1500).violations


def test_zombie_controller_needs_session_expiry() -> None:
    """Without session expiry no controller is ever deposed while alive, so no fence is needed."""
    config = SimConfig(faults=0.0)
    for seed in range(10):
        result = run_seed(seed, Knobs(controller_epoch_fencing=False), config, 1500)
        assert not result.violations


@pytest.mark.parametrize("faults", [float("inf"), float("nan"), -1.0])
def test_a_fault_intensity_that_is_no_weight_is_refused(faults: float) -> None:
    """`kcm sim --faults inf` ended in an IndexError (an infinite weight breaks the draw), NaN and negative
    intensities in a run without faults that said nothing (found by tests/test_fuzz_cli.py)."""
    with pytest.raises(ValueError, match="fault intensity"):
        SimConfig(faults=faults)
    with pytest.raises(ValueError, match="operator intensity"):
        SimConfig(admin=faults)
