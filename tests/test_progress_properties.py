"""The progress properties on traces (docs/invariants.md, "Progress properties"): the safe design passes each
after quiescence, and each is flagged on a cluster with a bug that breaks it and only that bug."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

import pytest

from kcm.conformance.check.invariants import CheckReport, InvariantChecker
from kcm.conformance.check.progress import STORM_ACTIONS
from kcm.conformance.check.replay import replay
from kcm.conformance.explore.campaign import run_seed
from kcm.conformance.scenario.environment import Environment
from kcm.conformance.scenario.language import parse
from kcm.impl import election
from kcm.impl.controller import Controller
from kcm.impl.replica_manager import ReplicaManager
from kcm.impl.request_batch import RequestBatch
from kcm.impl.sim.cluster import Cluster, Event, broker_ids
from kcm.impl.sim.quiescence import calm_phase, progress_bounds
from kcm.impl.sim.simulator import SimConfig
from kcm.impl.topic_deletion import TopicDeletionManager
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.trace.format import make_event
from kcm.spec.vocabulary import INVARIANTS, PROPERTIES, Knobs
from kcm.spec.z3.validate import Validator
from kcm.tools.interpreted import compiled

# These tests patch a bug into implementation methods, which a compiled install's classes do not take.
patches_impl = pytest.mark.skipif(compiled(), reason="the bug is patched into implementation methods, which "
                                                     "compiled classes call directly")


def calm_steps(events: Iterable[Event]) -> int:
    """Events taken in calm phases: from each Quiesce marker to the next storm event."""
    calm, count = False, 0
    for event in events:
        if event["action"] == "Quiesce":
            calm = True
        elif event["action"] in STORM_ACTIONS:
            calm = False
        count += calm
    return count


def assert_safe_design_holds(seeds: range, steps: int, config: SimConfig, at_least: int) -> None:
    calm = 0
    for seed in seeds:
        result = run_seed(seed, Knobs(), config, steps, keep_events=True)
        assert result.violations == [], f"seed {seed}: {result.violations[0]}"
        assert all(result.checks[name] > 0 for name in PROPERTIES), f"seed {seed}: {result.checks}"
        calm += calm_steps(result.events)
    assert calm >= at_least


def test_the_safe_design_passes_every_property_on_ten_thousand_steps_after_quiescence() -> None:
    assert_safe_design_holds(range(20), 5000, SimConfig(calm_every=1000), at_least=10_000)


# Four brokers under three times the faults; no network delay; the longest delay with four partitions.
WIDER: Final = (SimConfig(brokers=4, faults=3.0, calm_every=700), SimConfig(max_delay=0, calm_every=500),
                SimConfig(max_delay=4, partitions=4, calm_every=1500))


@pytest.mark.long
@pytest.mark.parametrize("config", WIDER, ids=["stormy", "no-delay", "long-delay"])
def test_the_safe_design_passes_every_property_on_wider_clusters(config: SimConfig) -> None:
    assert_safe_design_holds(range(100, 150), 6000, config, at_least=100_000)


def test_a_trace_without_a_calm_phase_leaves_the_properties_unobserved() -> None:
    result = run_seed(1, Knobs(), SimConfig(), 1000, keep_events=True)
    report = InvariantChecker().check_all(result.events)
    assert {report.verdict(name) for name in PROPERTIES} == {"unobserved"}
    assert {report.verdict(name) for name in INVARIANTS} == {"holds"}


# -- hand-built traces: deadlines and cancellations -------------------------------------------------------


def hand_trace(after_marker: list[tuple[str, str]], bound: int = 2) -> list[Event]:
    """One broker, alive, with no controller; a marker due after `bound` rounds, then the given events."""
    events = [make_event("run", 0, "env", "Init", {"knobs": {}, "brokers": [1]},
                         {"controller": -1, "controller_epoch": 0, "alive": {"1": True},
                          "acting_controller_epoch": {"1": 0}}, full=True),
              make_event("run", 1, "env", "Quiesce", {"bounds": dict.fromkeys(PROPERTIES, bound)}, {})]
    for actor, action in after_marker:
        args: dict[str, Any] = {"now": len(events)} if action == "Tick" else {"broker": 1}
        events.append(make_event("run", len(events), actor, action, args, {}))
    return events


def test_a_property_is_judged_at_the_tick_that_ends_its_last_round() -> None:
    checker = InvariantChecker()
    events = hand_trace([("clock", "Tick"), ("clock", "Tick"), ("clock", "Tick")])
    found = [checker.step(event) for event in events]
    assert [len(f) for f in found] == [0, 0, 0, 1, 0]
    violation = found[3][0]
    assert violation.invariant == "ControllerElected" and violation.seq == 3
    assert violation.message == ("no controller although brokers 1 are live 2 rounds after quiescence at seq 1 "
                                 "(due at seq 3)")


def test_a_storm_event_before_the_deadline_leaves_the_property_unjudged() -> None:
    report = InvariantChecker().check_all(hand_trace([("clock", "Tick"), ("env", "SessionExpire"),
                                                      ("clock", "Tick"), ("clock", "Tick")]))
    assert report.violations == []
    assert report.verdict("ControllerElected") == "unobserved"


# -- a bug per property: flagged with it, holding without it ----------------------------------------------


Bug = Callable[[pytest.MonkeyPatch], None]
Setup = Callable[[Cluster], Any]


def calm_run(setup: Setup, bug: Bug | None, monkeypatch: pytest.MonkeyPatch, brokers: int = 3) -> CheckReport:
    """A cluster with topic t0 (two partitions, replicas on brokers 1-3), the bug injected, `setup` done,
    then a calm phase; the trace's check."""
    events: list[Event] = []
    cluster = Cluster(broker_ids(brokers), Knobs(), events.append)
    cluster.stabilize()
    cluster.create_topic("t0", {0: (1, 2, 3), 1: (2, 3, 1)})
    cluster.stabilize()
    for partition, leader in (("t0-0", 1), ("t0-1", 2)):
        for _ in range(3):
            cluster.produce(leader, partition)
    cluster.stabilize()
    if bug is not None:
        bug(monkeypatch)
    setup(cluster)
    calm_phase(cluster)
    return InvariantChecker().check_all(events)


def never_elect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Controller, "_try_elect", lambda self, batch, result: None)


def no_offline_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(election, "offline_partition_leader", lambda *args: None)


def frozen_hw(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ReplicaManager, "_maybe_advance_hw", lambda self, replica: None)


def leaving_broker_never_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller moves leadership off a broker in controlled shutdown without telling that broker."""
    add = RequestBatch.add_leader_and_isr

    def add_leader_and_isr(self: RequestBatch, ctx: Any, brokers: set[int], partition: str) -> None:
        add(self, ctx, brokers - ctx.shutting_down, partition)

    monkeypatch.setattr(RequestBatch, "add_leader_and_isr", add_leader_and_isr)


def reassignment_never_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Controller, "_on_reassignment_isr_change", lambda self, partition, batch: None)


def isr_never_expands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ReplicaManager, "_in_sync", lambda self, replica, offset: False)


def crash_and_restart(cluster: Cluster) -> None:
    cluster.crash(3)
    cluster.restart(3)


def deletion_never_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TopicDeletionManager, "succeed", lambda self, replicas: None)


CASES: dict[str, tuple[Bug, Setup, str]] = {
    "ControllerElected": (never_elect, Cluster.crash_controller, "no controller although brokers 2, 3, 4 are live"),
    "LeaderElected": (no_offline_leader, lambda c: c.crash(1),
                      # broker 1 is the controller: the failover takes it out of the ISR and the leadership
                      "t0-0: no leader although ISR member(s) 2, 3 are live and not shutting down"),
    "HighWatermarkCatchesUp": (frozen_hw, lambda c: c.produce(1, "t0-0"),
                               "t0-0: HW has not caught up with the ISR's log end 4"),
    "ControlledShutdownCompletes": (leaving_broker_never_told, lambda c: c.request_controlled_shutdown(2),
                                    "t0-1: broker 2 completed its controlled shutdown at seq"),
    "ReassignmentCompletes": (reassignment_never_resumes, lambda c: c.reassign({"t0-0": (4, 2, 3)}),
                              "t0-0: reassignment to [4, 2, 3] not complete (assignment [4, 2, 3, 1])"),
    "TopicDeletionCompletes": (deletion_never_succeeds, lambda c: c.delete_topic("t0"),
                               "topic t0: deletion not complete (partitions t0-0, t0-1 remain)"),
    # The restarted broker follows and catches up, but its leader never takes it back: the HW, which counts the
    # ISR only, moves on without it.
    "ReplicasRejoinIsr": (isr_never_expands, crash_and_restart, "t0-0: live replica(s) 3 not in the ISR [1, 2] of "
                                                                "leader 1"),
}


@patches_impl
@pytest.mark.parametrize("name", PROPERTIES)
def test_each_property_is_flagged_on_a_bug_that_breaks_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bug, setup, message = CASES[name]
    report = calm_run(setup, bug, monkeypatch, brokers=4)
    assert report.verdict(name) == "violated"
    assert any(v.invariant == name and v.message.startswith(message) for v in report.violations), \
        [v.message for v in report.violations]


@pytest.mark.parametrize("name", PROPERTIES)
def test_without_the_bug_the_same_run_passes_every_property(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, setup, _ = CASES[name]
    report = calm_run(setup, None, monkeypatch, brokers=4)
    assert report.violations == []
    assert {report.verdict(p) for p in PROPERTIES} == {"holds"}


def test_the_bounds_grow_with_the_network_delay_and_the_longest_log() -> None:
    base = progress_bounds(0, 0)
    assert all(progress_bounds(2, 0)[name] > base[name] for name in PROPERTIES)
    assert progress_bounds(0, 400)["HighWatermarkCatchesUp"] > base["HighWatermarkCatchesUp"]
    assert progress_bounds(0, 400)["ControllerElected"] == base["ControllerElected"]


def run_commands(commands: list[str], bug_after: int, monkeypatch: pytest.MonkeyPatch) -> Environment:
    """Runs scenario commands one by one, the controller's election broken after the first `bug_after`."""
    environment = Environment()
    text = "".join(f"{command}\n----\n\n" for command in commands)
    for number, case in enumerate(parse(Path("progress.txt"), text).cases):
        if number == bug_after:
            never_elect(monkeypatch)
        environment(case)
    return environment


COMMANDS = ["cluster brokers=3 truncation=hw", "stabilize", "crash-controller", "quiesce"]


@patches_impl
def test_expect_violation_names_a_progress_property_on_an_unsafe_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = run_commands([*COMMANDS, "expect-violation ControllerElected"], 2, monkeypatch)
    environment.finish()


@patches_impl
def test_a_progress_violation_not_expected_fails_the_scenario(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = run_commands(COMMANDS, 2, monkeypatch)
    with pytest.raises(AssertionError, match="unexpected VIOLATION ControllerElected: no controller"):
        environment.finish()


# -- every consumer takes a calm phase --------------------------------------------------------------------

CALM_SMALL = SimConfig(brokers=2, partitions=1, replication_factor=2, admin=0.0, calm_every=20)


def calm_trace() -> list[Event]:
    result = run_seed(1, Knobs(), CALM_SMALL, 60, keep_events=True)
    assert [e["action"] for e in result.events].count("Quiesce") >= 1
    return result.events


def test_replay_and_the_z3_validator_follow_a_calm_phase() -> None:
    events = calm_trace()
    report = replay(events)
    assert report.divergence is None and report.steps == len(events) - 1, report.divergence
    assert Validator(events).run().ok


@pytest.mark.tlc
def test_tlc_explains_a_calm_phase_by_its_stutter_step() -> None:
    events = calm_trace()
    check = validate_with_tlc(events)
    assert check.accepted, check.to_json()
    assert check.matched == len(events)
