"""The steered interleaving campaign: the simulator's faults aimed at the points of the interleaving space
(`kcm.spec.interleavings`) no run has reached yet, each run checked by every invariant and, after its calm phase,
by the progress properties that judge the operations its faults landed in.

A run starts the operation with the most points still open, lets the protocol (and only the protocol) step it,
and at each step fires a fault at a broker whose role in an operation under way opens a point not yet reached,
or reached fewer than `aim` times; then the cluster heals (every broker that is down restarts), a calm phase
runs the fair schedule for the properties' bounds, and the next operation starts. Seeded: the same seeds and
budget, the same runs and counts. The plain simulator seeds are a campaign too (`seed_runs`)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kcm.conformance.check.interleavings import InterleavingCoverage, Recorder
from kcm.conformance.check.invariants import InvariantChecker
from kcm.conformance.reporter import Reporter
from kcm.impl.design import Design
from kcm.impl.sim.cluster import Cluster
from kcm.impl.sim.quiescence import calm_phase
from kcm.impl.sim.simulator import SimConfig, Simulator
from kcm.spec.interleavings import (
    DELETION,
    FAILOVER,
    FAULTS,
    PREFERRED,
    REASSIGNMENT,
    SHUTDOWN,
    STARTUP,
    Point,
    points,
    unreachable,
)
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import NO_LEADER, Knobs

STEERED, SEEDS, SCENARIO_FILES, MACHINES = (
    "steered search", "simulator seeds", "scenario files", "hypothesis machines")
# Four brokers, three replicas: a reassignment can both add and remove a replica.
STEERED_CONFIG: Final = SimConfig(brokers=4, partitions=2, replication_factor=3, faults=0.0, admin=0.0)
SEED_CONFIG: Final = SimConfig(calm_every=300)
# The chance that the next move is a round of the fair schedule rather than one random protocol step: rounds
# carry an operation through its steps in tens of moves instead of hundreds, random steps vary the windows.
FAIR: Final = 0.3


LONG_RUNS, LONG_AIM = 60, 5  # the `long` campaign: more runs, each point reached five times


@dataclass(frozen=True)
class Budget:
    runs: int = 12
    operations: int = 30  # operations started per run
    steps: int = 300  # moves per operation at most before the cluster heals
    faults: int = 3  # aimed faults per operation at most (a crash to prepare a restart among them)
    aim: int = 1  # occurrences of each point wanted


@dataclass
class CampaignReport:
    coverage: InterleavingCoverage = field(default_factory=InterleavingCoverage)
    runs: int = 0
    events: int = 0
    violations: list[tuple[str, int, str]] = field(default_factory=list)  # (run, seq, name)
    stopped: list[str] = field(default_factory=list)  # scenario files that stopped before their end, why


class _Run:
    """One seeded run of the steered campaign."""

    def __init__(self, seed: int, knobs: Knobs, coverage: InterleavingCoverage, budget: Budget,
                 design: Design | None = None) -> None:
        self.rng = random.Random(seed)
        self.checked = _Checked(knobs)
        self.recorder = self.checked.recorder
        self.simulator = Simulator(seed, knobs, STEERED_CONFIG, self.checked, design=design)
        self.cluster: Cluster = self.simulator.cluster
        self.coverage = coverage
        self.budget = budget
        self.topics = 0
        self.simulator.bootstrap()

    # -- what is still open ----------------------------------------------------------------------------------

    def _wanted(self, point: Point) -> bool:
        mine = self.recorder.counts[point]
        reached = sum(self.coverage.reached.get(point, {}).values()) + mine
        return reached < self.budget.aim and unreachable(point) is None

    def _open_steps(self) -> dict[tuple[str, str], int]:
        """(operation, step) -> its points still wanted."""
        open_steps: dict[tuple[str, str], int] = {}
        for p in points():
            if self._wanted(p):
                open_steps[(p.operation, p.step)] = open_steps.get((p.operation, p.step), 0) + 1
        return open_steps

    # -- the run ---------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Each round aims at one step of one operation, drawn by its points still open: the operation starts,
        and the first time it is at that step with a wanted point enabled, the fault fires."""
        for _ in range(self.budget.operations):
            wanted = self._open_steps()
            if not wanted:
                return
            steps = sorted(wanted)
            target = self.rng.choices(steps, weights=[wanted[s] for s in steps])[0]
            self._start(*target)
            fired = 0
            for _ in range(self.budget.steps):
                if not self.recorder.tracker.under_way():
                    break
                if fired < self.budget.faults and self._aim(target):
                    fired += 1
                elif self.rng.random() < FAIR:
                    self.cluster.fair_round()
                else:
                    self.simulator.run(1)
            self._heal()

    def _start(self, operation: str, step: str) -> None:
        cluster, rng = self.cluster, self.rng
        live = cluster.live_brokers()
        partitions = sorted(cluster.partitions)
        brokers = sorted(cluster.managers)
        if operation == SHUTDOWN and step == "retrying" and len(live) > 2:
            self._shutdown_that_must_retry()
        elif operation == SHUTDOWN and len(live) > 1 and cluster.controller_holder() != NO_LEADER:
            cluster.request_controlled_shutdown(rng.choice(live))
        elif operation == REASSIGNMENT and partitions:
            cluster.reassign({rng.choice(partitions): tuple(rng.sample(brokers, STEERED_CONFIG.replication_factor))})
        elif operation == DELETION:
            # A topic of its own, so that the first topic's partitions stay for the other operations.
            topic = f"d{self.topics}"
            self.topics += 1
            cluster.create_topic(topic, {0: tuple(rng.sample(brokers, STEERED_CONFIG.replication_factor))})
            for _ in range(self.budget.steps // 2):
                self.simulator.run(1)
            # Half the time one of its replicas is down when the deletion starts, so that it has to retry
            # (ReplicaDeletionIneligible until the broker is back).
            replicas = [b for b in self.recorder.tracker.state["assignment"].get(f"{topic}-0", ())
                        if b in cluster.live_brokers()]
            if replicas and len(cluster.live_brokers()) > 2 and rng.random() < 0.5:
                cluster.crash(rng.choice(replicas))
            cluster.delete_topic(topic)
        elif operation == PREFERRED and partitions:
            cluster.preferred_election(rng.sample(partitions, min(2, len(partitions))))
        elif operation == FAILOVER and len(live) > 1:
            cluster.crash_controller()
        elif operation == STARTUP and len(live) > 1:
            victim = rng.choice(live)
            cluster.crash(victim)
            self.simulator.run(3)
            cluster.restart(victim)

    def _shutdown_that_must_retry(self) -> None:
        """A controlled shutdown is answered with partitions remaining only where no other replica can lead:
        all but two brokers go down first, and the one leaving is the one that leads the most partitions."""
        cluster = self.cluster
        for broker in self.rng.sample(cluster.live_brokers(), len(cluster.live_brokers()) - 2):
            cluster.crash(broker)
        for _ in range(4):
            cluster.fair_round()
        leading = Counter(b for b in self.recorder.tracker.state["leader"].values() if b in cluster.live_brokers())
        if leading and cluster.controller_holder() != NO_LEADER:
            cluster.request_controlled_shutdown(leading.most_common(1)[0][0])

    def _aim(self, target: tuple[str, str]) -> bool:
        """Fires one fault that opens a wanted point of the target step, if one is enabled now; whether it fired."""
        tracker = self.recorder.tracker
        choices: list[tuple[str, int]] = []
        for op, step, subject in tracker.under_way():
            if (op, step) != target:
                continue
            for fault in FAULTS:
                for broker in self._targets(fault):
                    if any(self._wanted(Point(op, step, fault, role)) for role in tracker.roles(op, subject, broker)):
                        choices.append((fault, broker))
        if not choices:
            return self._prepare(target)
        fault, broker = self.rng.choice(sorted(set(choices)))
        self._fire(fault, broker)
        return True

    def _prepare(self, target: tuple[str, str]) -> bool:
        """A restart needs a broker that is down: crashes one whose role at the target step a wanted restart
        point names, so that a later move can restart it there; whether it crashed one."""
        tracker, live = self.recorder.tracker, self.cluster.live_brokers()
        if len(live) < 2:
            return False
        candidates = [b for op, step, subject in tracker.under_way() if (op, step) == target for b in live
                      if any(self._wanted(Point(op, step, "restart", role)) for role in tracker.roles(op, subject, b))]
        if not candidates:
            return False
        self.cluster.crash(self.rng.choice(sorted(set(candidates))))
        return True

    def _targets(self, fault: str) -> list[int]:
        cluster = self.cluster
        live = cluster.live_brokers()
        if fault == "crash":
            return live if len(live) > 1 else []
        if fault == "restart":
            return [b for b, m in cluster.managers.items() if not m.alive]
        if fault == "session expiry":
            return live
        if fault == "controller failover":
            holder = cluster.controller_holder()
            return [holder] if holder in live and len(live) > 1 else []
        in_flight = cluster.network.in_flight
        indexes = cluster.network.lossy() if fault == "lost request" else range(len(in_flight))
        return sorted({in_flight[i].envelope.dst for i in indexes})

    def _fire(self, fault: str, broker: int) -> None:
        cluster = self.cluster
        fire: dict[str, Callable[[], object]] = {
            "crash": lambda: cluster.crash(broker),
            "restart": lambda: cluster.restart(broker),
            "session expiry": lambda: cluster.expire_session(broker),
            "controller failover": cluster.crash_controller,
            "lost request": lambda: cluster.drop(self._message_to(broker, cluster.network.lossy())),
            "duplicated request": lambda: cluster.duplicate(
                self._message_to(broker, range(len(cluster.network.in_flight)))),
        }
        fire[fault]()

    def _message_to(self, broker: int, indexes: range | list[int]) -> int:
        in_flight = self.cluster.network.in_flight
        return self.rng.choice([i for i in indexes if in_flight[i].envelope.dst == broker])

    def _heal(self) -> None:
        """Every broker that is down comes back, then a calm phase judges what the faults left."""
        for broker in [b for b, m in self.cluster.managers.items() if not m.alive]:
            self.cluster.restart(broker)
            self.simulator.run(2)
        calm_phase(self.cluster)


def steered_runs(knobs: Knobs, budget: Budget, coverage: InterleavingCoverage | None = None,
                 design: Design | None = None, on_run: Callable[[], None] | None = None) -> CampaignReport:
    """The steered campaign, seeds 1..budget.runs, adding to `coverage` (what earlier campaigns reached is not
    aimed at again)."""
    report = CampaignReport(coverage if coverage is not None else InterleavingCoverage())
    for seed in range(1, budget.runs + 1):
        run = _Run(seed, knobs, report.coverage, budget, design)
        run.run()
        run.checked.record(report, STEERED, f"steered-{seed}")
        if on_run is not None:
            on_run()
    return report


def seed_runs(knobs: Knobs, seeds: range, steps: int, coverage: InterleavingCoverage | None = None,
              design: Design | None = None, on_run: Callable[[], None] | None = None) -> CampaignReport:
    """The plain simulator (random faults, calm phases every 300 steps) over `seeds`, its points counted."""
    report = CampaignReport(coverage if coverage is not None else InterleavingCoverage())
    for seed in seeds:
        checked = _Checked(knobs)
        simulator = Simulator(seed, knobs, SEED_CONFIG, checked, design=design)
        simulator.bootstrap()
        simulator.run(steps)
        checked.record(report, SEEDS, f"seed-{seed}")
        if on_run is not None:
            on_run()
    return report


def scenario_runs(folder: Path, coverage: InterleavingCoverage) -> list[str]:
    """The points the scenario files of `folder` reach (counted, not judged: a file's expected outputs judge it);
    the files that stopped before their end, each with its error (what they reached until then counts)."""
    from kcm.conformance.scenario.environment import Environment
    from kcm.conformance.scenario.language import ScenarioError, parse, run_case, scenario_files

    stopped = []
    for path in scenario_files(folder) if folder.is_dir() else []:
        environment, recorder = Environment(), Recorder()
        environment.observers.append(recorder.observe)
        try:
            for case in parse(path).cases:
                run_case(case, environment)
        except ScenarioError as err:
            stopped.append(str(err))
        coverage.add_run(SCENARIO_FILES, recorder.occurrences)
    return stopped


class _Checked:
    """A run's sink: every event tracked for its points and checked by every invariant and property."""

    def __init__(self, knobs: Knobs) -> None:
        self.recorder = Recorder()
        self.checker = InvariantChecker(knobs.truncation)
        self.events = 0

    def __call__(self, event: Event) -> None:
        self.events += 1
        self.recorder.observe(event)
        self.checker.step(event)

    def record(self, report: CampaignReport, campaign: str, run: str) -> None:
        found = [(v.seq, v.invariant) for v in self.checker.report.violations]
        report.coverage.add_run(campaign, self.recorder.occurrences, self.checker.progress.judged, found)
        report.violations.extend((run, seq, name) for seq, name in found)
        report.runs += 1
        report.events += self.events


def interleaving_campaign(knobs: Knobs, budget: Budget, scenarios: Path | None, reporter: Reporter,
                          machines: Recorder | None = None, design: Design | None = None,
                          seeds: int = 20, seed_steps: int = 3000) -> CampaignReport:
    """Every campaign's points in one coverage: the hypothesis machines' (already run, their recorder), the
    scenario files', the simulator seeds' and, last, the steered search aimed at what those left open."""
    report = CampaignReport()
    if machines is not None:
        report.coverage.add_run(MACHINES, machines.occurrences)
    if scenarios is not None:
        with reporter.task("scenario files", 1) as task:
            report.stopped.extend(scenario_runs(scenarios, report.coverage))
            task.advance()
    with reporter.task("simulator seeds", seeds) as task:
        seeded = seed_runs(knobs, range(1, seeds + 1), seed_steps, report.coverage, design, task.advance)
    with reporter.task("steered search", budget.runs) as task:
        steered = steered_runs(knobs, budget, report.coverage, design, task.advance)
    for part in (seeded, steered):
        report.runs += part.runs
        report.events += part.events
        report.violations.extend(part.violations)
    return report
