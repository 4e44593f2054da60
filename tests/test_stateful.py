"""The hypothesis state machines: quiet on the safe design, shrunk failures that replay as scenarios and as
traces, and (behind `long`) the known bugs found by search alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.check.validate import StepValidator
from kcm.conformance.explore.config import MachineConfig, campaign_settings
from kcm.conformance.explore.finding import ConformanceFailure, Found
from kcm.conformance.explore.harness import Harness, Tally
from kcm.conformance.explore.known_bugs import KNOWN_BUG_SEARCHES, KnownBugSearch
from kcm.conformance.explore.stateful import MACHINES, run_machine
from kcm.conformance.scenario.environment import run_scenario
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.trace.format import load_trace
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.validate import validate_events

UNCLEAN = Knobs(unclean_election=True)


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_safe_design_passes_the_ci_profile(machine: str) -> None:
    tally = Tally()
    found = run_machine(MachineConfig(Knobs(), machine=machine), campaign_settings("ci"), tally)
    assert found is None, found and found.scenario()
    assert tally.examples >= 40 and tally.steps > 500


def _unclean_history(h: Harness) -> None:
    """A follower leaves the ISR, the leader commits alone and dies, the follower comes back and is
    elected uncleanly."""
    c = h.cluster
    commands: list[tuple[str, Callable[[], object]]] = [
        ("create-topic t0 0=1,2", lambda: c.create_topic("t0", {0: (1, 2)})),
        ("stabilize", c.stabilize), ("crash 2", lambda: c.crash(2)), ("stabilize", c.stabilize),
        ("produce broker=1 partition=t0-0 acks=-1", lambda: c.produce(1, "t0-0", -1)),
        ("stabilize", c.stabilize), ("crash 1", lambda: c.crash(1)), ("stabilize", c.stabilize),
        ("restart 2", lambda: c.restart(2)), ("stabilize", c.stabilize),
    ]
    for command, action in commands:
        h.run(command, action)


def _found(knobs: Knobs, history: Callable[[Harness], None]) -> Found:
    with pytest.raises(ConformanceFailure) as failure:
        history(Harness(MachineConfig(knobs)))
    return failure.value.found


def test_a_failure_prints_a_scenario_the_runner_accepts_and_a_valid_trace(tmp_path: Path) -> None:
    found = _found(UNCLEAN, _unclean_history)
    assert found.invariant == "NoCommittedDataLoss"
    assert found.scenario().splitlines()[2] == "cluster brokers=3 unclean_election=true"
    scenario, trace = found.write(tmp_path, "unclean")
    text = scenario.read_text()
    assert "expect-violation NoCommittedDataLoss" in text and "VIOLATION NoCommittedDataLoss" in text
    run_scenario(scenario, rewrite=False)  # the expectations written match a fresh run, every violation expected
    events = load_trace(trace)
    assert len(events) == len(found.events)
    report = InvariantChecker().check_all(events)
    assert report.verdict("NoCommittedDataLoss") == "violated"
    assert validate_events(events).ok


def test_the_same_history_is_clean_on_the_safe_design() -> None:
    h = Harness(MachineConfig(Knobs()))
    _unclean_history(h)
    assert h.checker.report.ok


def test_targets_limit_what_fails() -> None:
    h = Harness(MachineConfig(UNCLEAN, targets=frozenset({"LeaderInIsr"})))
    _unclean_history(h)
    assert not h.checker.report.ok  # violated, but not a target: the run goes on


def test_a_crash_of_the_implementation_is_a_finding() -> None:
    def history(h: Harness) -> None:
        h.run("crash 9", lambda: h.cluster.crash(9))

    found = _found(Knobs(), history)
    assert found.invariant == "ImplementationError" and "KeyError" in found.message
    assert found.commands[-1] == ("crash 9", [])


def test_step_validator_agrees_with_the_batch_validator() -> None:
    events: list[dict[str, object]] = []
    Simulator(3, Knobs(), SimConfig(), events.append).run(400)
    step = StepValidator(events[0])
    assert all(step.step(e) is None for e in events[1:])
    assert step.report.steps == validate_events(events).steps == 400


def test_step_validator_rejects_a_step_the_model_cannot_explain() -> None:
    events: list[dict[str, object]] = []
    sim = Simulator(3, Knobs(), SimConfig(), events.append)
    sim.bootstrap()
    sim.run(300)
    step = StepValidator(events[0])
    for event in events[1:]:
        step.step(event)
    # a clock tick that changes a leader epoch
    partition = sorted(sim.cluster.partitions)[0]
    epoch = step.state["leader_epoch"][partition] + 5
    bad = {"v": 2, "run": events[0]["run"], "seq": len(events), "actor": "clock", "action": "Tick",
           "args": {"now": 99}, "state": {"leader_epoch": {partition: epoch}}}
    failure = step.step(bad)
    assert failure is not None and failure.partition == partition


@pytest.mark.long
@pytest.mark.parametrize("search", KNOWN_BUG_SEARCHES, ids=lambda s: s.name)
def test_a_known_bug_is_found_by_search(search: KnownBugSearch, tmp_path: Path) -> None:
    """Search alone, steered by the danger scores, finds the bug; its shrunk scenario and trace replay."""
    found = run_machine(search.config(), campaign_settings("ci", search.search.examples, search.search.steps))
    assert found is not None and found.invariant.split("/")[0] == search.invariant, found and found.scenario()
    scenario, trace = found.write(tmp_path, "found")
    run_scenario(scenario, rewrite=False)
    assert InvariantChecker().check_all(load_trace(trace)).verdict(search.invariant) == "violated"
