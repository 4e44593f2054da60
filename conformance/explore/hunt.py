"""A portfolio of searches for a counterexample, raced in parallel processes (`kcm hunt`).

Each engine runs in a forked process, in a process group of its own, so that TLC's java, its child, goes
with it (kcm.spec.child_processes.children_in_my_group): the first engine to answer wins, and every other
group is killed (SIGKILL to the group) and reaped. The group exists from the moment the engine is started
(parent and engine both make it), and kcm owns it until it is gone: an interrupted kcm ends it too. An
engine's temporary files go under a folder the race owns (TMPDIR), removed at the end, since a killed process
cleans up nothing.

The engines (measured in docs/hunt.md):
- `tlc-sim`: TLC's simulation mode on a reproduction model, random behaviours of bounded depth from a seed;
  finds deep counterexamples long before the breadth-first search has exhausted the levels above them,
  but they are longer than the shortest and it proves nothing.
- `tlc-bfs`: TLC's breadth-first search (what `kcm check` runs), optionally bounded in depth: its
  counterexample is a shortest one; a search that ends without one proves the invariants (to the bound).
- `bmc`: Z3 bounded model checking of a known bug's story (kcm.spec.designs.KNOWN_BUGS), shortest too, and
  the fastest route on the shallow bugs.
- `steered`: the implementation's simulator under hypothesis, steered by the danger scores
  (conformance/explore/danger.py) towards a known bug's preconditions (KNOWN_BUG_SEARCHES) from a seed, until
  its first failing example: an implementation trace, long and unshrunk, and it proves nothing.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final

import hypothesis
from hypothesis.stateful import run_state_machine_as_test

from kcm.conformance.explore.config import campaign_settings
from kcm.conformance.explore.derandomize import no_local_constants
from kcm.conformance.explore.finding import ConformanceFailure
from kcm.conformance.explore.known_bugs import KNOWN_BUG_SEARCHES, KnownBugSearch, searches_of
from kcm.conformance.explore.stateful import machine_class
from kcm.spec import child_processes
from kcm.spec.design_folder import DesignFolder
from kcm.spec.tlc.modelcheck import Simulation, check_model, vocabulary_name
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.bmc import BMC_BUGS, BmcBug

SIMULATE: Final = "tlc-sim"
BFS: Final = "tlc-bfs"
BMC: Final = "bmc"
STEERED: Final = "steered"
KINDS: Final = (SIMULATE, BFS, BMC, STEERED)
# Whose counterexample is a shortest one (breadth first, or depth by depth).
SHORTEST: Final = frozenset({BFS, BMC})
POLL_SECONDS: Final = 0.05
REAP_SECONDS: Final = 10.0


@dataclass(frozen=True)
class Engine:
    """One search: `depth` bounds a simulated behaviour (tlc-sim), the search (tlc-bfs; 0: unbounded) or the
    unrolling (bmc; 0: the known bug's own depth); `quota` bounds a seeded search (tlc-sim: behaviours;
    steered: examples; 0: until it finds or is stopped), so that what a seed did is a fact that a rerun repeats."""

    kind: str
    seed: int = 0
    depth: int = 0
    quota: int = 0

    @property
    def name(self) -> str:
        if self.kind in (SIMULATE, STEERED):
            return f"{self.kind} seed {self.seed}"
        return f"{self.kind} to depth {self.depth}" if self.depth else self.kind


@dataclass(frozen=True)
class Hunt:
    """What is hunted: a reproduction model of spec/ under knobs, for some of its invariants (TLA+ names;
    None: those its configuration checks); `heap_mb`: each TLC's heap (None: the runner's default)."""

    model: str
    knobs: Knobs
    invariants: tuple[str, ...] | None = None
    heap_mb: int | None = None
    # A design folder of one's own: TLC binds its hooks; the known bugs (of knobs) are not its.
    design: DesignFolder | None = None

    def steered_search(self) -> KnownBugSearch | None:
        """The steered search of a known bug of this design, when the invariants hunted include its own: of
        the bug this model reproduces, if it has one. A design of one's own has its manifest's known bugs."""
        hunted = None if self.invariants is None else {vocabulary_name(n).split("/")[0] for n in self.invariants}
        searches = KNOWN_BUG_SEARCHES if self.design is None else searches_of(self.design.bugs, self.design)
        fitting = [search for search in searches if (self.design is not None or search.knobs == self.knobs)
                   and (hunted is None or search.invariant in hunted)]
        return next((s for s in fitting if s.bug.model == self.model), next(iter(fitting), None))

    def known_bug(self) -> BmcBug | None:
        """The known bug BMC has a story for on this model and design, when the invariants hunted include
        its invariant (none for a design of one's own: Z3 cannot read it)."""
        if self.design is not None:
            return None
        for bug in BMC_BUGS:
            wanted = self.invariants is None or bug.invariant in {vocabulary_name(n) for n in self.invariants}
            if bug.model == self.model and bug.knobs == self.knobs and wanted:
                return bug
        return None


@dataclass
class Answer:
    """What one engine found: a counterexample (the invariant it breaks, in the vocabulary's names) or none,
    and whether its search was exhaustive (then no counterexample means none exists, to its depth bound)."""

    engine: Engine
    invariant: str | None
    events: list[Event]
    seconds: float
    exhaustive: bool
    states: int = 0
    bound: int | None = None  # an exhaustive search's depth bound (None: the whole model)

    @property
    def steps(self) -> int:
        return len(self.events) - 1

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.engine.kind, "seed": self.engine.seed, "depth": self.engine.depth,
                "quota": self.engine.quota, "invariant": self.invariant, "events": self.events, "seconds": self.seconds,
                "exhaustive": self.exhaustive, "states": self.states, "bound": self.bound}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Answer:
        engine = Engine(data["kind"], data["seed"], data["depth"], data.get("quota", 0))
        return cls(engine, data["invariant"], data["events"], data["seconds"], data["exhaustive"], data["states"],
                   data["bound"])


def search(hunt: Hunt, engine: Engine) -> Answer:
    """One engine's search, in this process."""
    started = time.monotonic()
    if engine.kind == BMC:
        bug = hunt.known_bug()
        if bug is None:
            raise ValueError(f"bmc: no known bug's story for model {hunt.model} under {hunt.knobs.describe()}")
        found = bug.run(engine.depth or None)
        return Answer(engine, found.invariant, found.events, time.monotonic() - started, True, bound=found.depth)
    if engine.kind == STEERED:
        return _steered(hunt, engine, started)
    simulate = (Simulation(engine.seed, engine.depth, *(engine.quota,) if engine.quota else ())
                if engine.kind == SIMULATE else None)
    invariants = list(hunt.invariants) if hunt.invariants is not None else None
    # A simulation answers in seconds or not at all: the JVM tuned for that (measured in docs/hunt.md).
    outcome = check_model(hunt.model, hunt.knobs, invariants, heap_mb=hunt.heap_mb, simulate=simulate,
                          max_depth=engine.depth if engine.kind == BFS and engine.depth else None,
                          quick=simulate is not None, design=hunt.design)
    result = outcome.result
    invariant = vocabulary_name(result.violated) if result.violated else None
    # A simulation counts the states it generated: it has no set of distinct ones.
    states = result.generated_states if simulate is not None else result.distinct_states
    return Answer(engine, invariant, outcome.events, time.monotonic() - started, engine.kind == BFS,
                  states, engine.depth or None)


def _steered(hunt: Hunt, engine: Engine, started: float) -> Answer:
    """The steered search from the engine's seed until its first failing example (not derandomized, as the
    `ci` profile is, so that the seed decides; not shrunk: a shortening follows, as after a simulation)."""
    search_ = hunt.steered_search()
    if search_ is None:
        raise ValueError(f"steered: no steered search of a known bug under {hunt.knobs.describe()}")
    machine = hypothesis.seed(engine.seed)(machine_class(search_.config(steer=True)))
    run_settings = hypothesis.settings(campaign_settings("ci", engine.quota or 10**9, search_.search.steps,
                                                         shrink=False), derandomize=False)
    try:
        # The same draws whatever modules the process has loaded (hypothesis's pool of their literals).
        with no_local_constants():
            run_state_machine_as_test(machine, settings=run_settings)
    except ConformanceFailure as failure:
        found = failure.found
        return Answer(engine, found.invariant, found.events, time.monotonic() - started, False)
    return Answer(engine, None, [], time.monotonic() - started, False)


@dataclass
class Race:
    """The outcome of a race: the winning answer (a counterexample, or an exhaustive search that found
    none), or None when the budget ran out first or every engine gave up; every engine's fate."""

    winner: Answer | None
    seconds: float
    fates: dict[str, str] = field(default_factory=dict)
    groups: list[int] = field(default_factory=list)  # the process groups started, all gone by now
    # With `keep_shortest`: a shortest counterexample from a breadth-first engine kept running after the win.
    shortest: Answer | None = None
    seconds_to_shortest: float = 0.0


@dataclass
class _Runner:
    engine: Engine
    process: BaseProcess
    result: Path
    log: Path

    @property
    def exit_code(self) -> int | None:
        return self.process.exitcode


# Forked, an engine starts with the modules this process has loaded (TLC, Z3 and kcm: a second or more of
# imports otherwise).
_FORK: Final = multiprocessing.get_context("fork")


def race(hunt: Hunt, engines: Sequence[Engine], budget: float, on_progress: Callable[[str], None] | None = None,
         keep_shortest: bool = False) -> Race:
    """Runs the engines in parallel until one answers (or `budget` seconds pass), then stops the others.
    `keep_shortest`: when the winner's counterexample may not be a shortest one, every engine that finds
    shortest ones (tlc-bfs, bmc) is kept running, the others stopped, until one of them answers too (or the
    budget runs out): a breadth-first search that has already explored the shallow levels is not restarted."""
    if not engines:
        raise ValueError("a race needs at least one engine")
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="kcm-hunt-"))
    runners = [_start(hunt, engine, folder / f"engine{i}") for i, engine in enumerate(engines)]
    outcome = Race(None, 0.0, groups=[r.process.pid or 0 for r in runners])
    try:
        _await(runners, outcome, started + budget, on_progress)
        winner = outcome.winner
        if keep_shortest and winner is not None and winner.invariant and winner.engine.kind not in SHORTEST:
            outcome.seconds = time.monotonic() - started
            shorteners = [r for r in runners if r.engine.kind in SHORTEST and r.engine.name not in outcome.fates]
            for runner in runners:
                if runner not in shorteners:
                    _stop(runner, outcome)
            _await(shorteners, outcome, started + budget, on_progress)
            outcome.winner, outcome.shortest = winner, outcome.winner if outcome.winner is not winner else None
            outcome.seconds_to_shortest = time.monotonic() - started
            return outcome
    finally:
        for runner in runners:
            _stop(runner, outcome)
        shutil.rmtree(folder, ignore_errors=True)
    if outcome.shortest is None:
        outcome.seconds = time.monotonic() - started
    return outcome


def _start(hunt: Hunt, engine: Engine, folder: Path) -> _Runner:
    folder.mkdir(parents=True)
    runner = _Runner(engine, _FORK.Process(target=_engine, args=(hunt, engine, folder), daemon=True),
                     folder / "result.json", folder / "engine.log")
    runner.process.start()
    pid = runner.process.pid
    assert pid is not None
    # Made here too, not only by the engine: a group killed before the engine ran its first line must exist.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.setpgid(pid, pid)
    child_processes.adopt(pid, leads_group=True)
    return runner


def _engine(hunt: Hunt, engine: Engine, folder: Path) -> None:
    """An engine's process: a session (so a process group) of its own, its temporary files in `folder`, its
    output in a log; its answer written whole (renamed into place) or not at all."""
    with contextlib.suppress(PermissionError):  # the parent made the group first
        os.setpgid(0, 0)
    child_processes.children_in_my_group()
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None
    log = os.open(folder / "engine.log", os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        answer = search(hunt, engine)
    except Exception as err:  # the race reports it as the engine's fate, in one line
        print(f"{type(err).__name__}: {err}", file=sys.stderr, flush=True)
        os._exit(1)
    partial = folder / "result.part"
    partial.write_text(json.dumps(answer.to_json()))
    partial.replace(folder / "result.json")
    sys.stdout.flush()
    os._exit(0)


def _await(runners: list[_Runner], outcome: Race, deadline: float,
           on_progress: Callable[[str], None] | None) -> None:
    running = [r for r in runners if r.engine.name not in outcome.fates]
    while running and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        for runner in [r for r in running if r.exit_code is not None]:
            running.remove(runner)
            answer = _answer(runner, outcome)
            if answer is not None and (answer.invariant is not None or answer.exhaustive):
                outcome.winner = answer
                return
        if on_progress is not None:
            on_progress("searching: " + ", ".join(r.engine.name for r in running))


def _answer(runner: _Runner, outcome: Race) -> Answer | None:
    name = runner.engine.name
    if runner.exit_code != 0 or not runner.result.is_file():
        lines = runner.log.read_text(errors="replace").strip().splitlines() if runner.log.is_file() else []
        outcome.fates[name] = f"failed: {lines[-1] if lines else f'exit {runner.exit_code}'}"
        return None
    answer = Answer.from_json(json.loads(runner.result.read_text()))
    if answer.invariant is not None:
        outcome.fates[name] = f"{answer.invariant} in {answer.steps} steps after {answer.seconds:.1f} s"
    else:
        outcome.fates[name] = f"{'holds' if answer.exhaustive else 'nothing found'} after {answer.seconds:.1f} s"
    return answer


def _stop(runner: _Runner, outcome: Race) -> None:
    """Kills the engine's whole process group (TLC's java with it) and reaps the engine. The engine itself is
    killed by its id too: stopped before its first instruction, it has no group of its own yet."""
    pid = runner.process.pid
    assert pid is not None
    if runner.exit_code is None:
        outcome.fates[runner.engine.name] = "stopped"
    elif runner.engine.name not in outcome.fates:
        _answer(runner, outcome)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    runner.process.join()
    # TLC's java, orphaned by the kill, is reaped by whoever adopts it (init, or a subreaper that may take its
    # time): a member of the group that has ended is gone, reaped or not.
    deadline = time.monotonic() + REAP_SECONDS
    while time.monotonic() < deadline:
        if not child_processes.running(pid, group=True):
            child_processes.release(pid)
            return
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"{runner.engine.name}: process group {pid} outlived SIGKILL")
