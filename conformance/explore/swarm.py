"""A swarm of seeded random searches as Spark tasks (`kcm check --model M --swarm N`, `kcm hunt --spark`).

Each task is one seed of one engine (kcm.conformance.explore.hunt): TLC's simulation mode on the model
(`tlc-sim`, behaviours of at most its depth) or the implementation's simulator steered towards a known bug
(`steered`), each bounded by a quota (behaviours, examples) so that what a seed did is a fact a rerun
repeats. The driver keeps as many seeds running as Spark has task slots, each seed a job of one task in the
swarm's job group; the first counterexample cancels the group, and Spark kills the cancelled tasks' Python
workers, whose TLC dies with them (kcm.spec.child_processes.tie_children_to_me).

Every seed that ends is written to the seed ledger (a JSON Lines file: a header naming what is searched,
then one line per seed: engine, seed, depth, quota, fate, states, seconds), flushed as it comes: a run that
is stopped, by its budget, a Ctrl-C or a lost machine, is resumed from its ledger and runs only the seeds
that did not finish; a seed's line is what a rerun of that seed gives again (but its seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kcm.conformance.explore.hunt import SIMULATE, STEERED, Answer, Engine, Hunt, Race, search
from kcm.spec import child_processes
from kcm.spec.atomic_output import replace
from kcm.spec.design_folder import read_design
from kcm.spec.vocabulary import Knobs

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

LEDGER_VERSION: Final = 1
SWARM_KINDS: Final = (SIMULATE, STEERED)
# A seed's quota by default: TLC simulates about 2,000 states/s per core on the ci models, so 1,000 behaviours of
# at most 20 steps are seconds to a minute a seed (docs/hunt.md, "The swarm").
DEFAULT_BEHAVIOURS: Final = 1000
DEFAULT_EXAMPLES: Final = 200
DEFAULT_DEPTHS: Final = (20, 30, 40)
VIOLATED_FATE: Final = "violated"
NOTHING_FOUND: Final = "nothing found"
STOPPED: Final = "stopped"
FAILED: Final = "failed"
POLL_SECONDS: Final = 0.2


class LedgerError(ValueError):
    """A seed ledger that cannot be read or is another search's: one line for the user."""


@dataclass(frozen=True)
class SeedRun:
    """What one seed did: its engine (kind, seed, depth, quota), how it ended, and what it explored."""

    engine: Engine
    fate: str  # violated | nothing found | stopped | failed
    seconds: float
    states: int = 0
    invariant: str | None = None
    steps: int | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine.kind, "seed": self.engine.seed, "depth": self.engine.depth,
                "quota": self.engine.quota, "fate": self.fate, "invariant": self.invariant, "steps": self.steps,
                "states": self.states, "seconds": round(self.seconds, 2),
                **({"detail": self.detail} if self.detail else {})}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SeedRun:
        engine = Engine(data["engine"], data["seed"], data["depth"], data["quota"])
        return cls(engine, data["fate"], data["seconds"], data["states"], data["invariant"], data["steps"],
                   data.get("detail", ""))

    @property
    def finished(self) -> bool:
        """Whether the seed ran to its end (a rerun gives the same): a stopped or failed one runs again."""
        return self.fate in (VIOLATED_FATE, NOTHING_FOUND)

    @property
    def name(self) -> str:
        return self.engine.name


def identity(hunt: Hunt) -> dict[str, Any]:
    """What a ledger's seeds searched: a ledger is resumed only for the same model, knobs, invariants and design."""
    return {"model": hunt.model, "knobs": hunt.knobs.to_dict(),
            "invariants": list(hunt.invariants) if hunt.invariants is not None else None,
            "design": hunt.design.name if hunt.design is not None else None}


class Ledger:
    """The seed ledger of a swarm: `path`, its header (`identity`) and the seeds it records, one line each."""

    def __init__(self, path: Path, header: dict[str, Any], runs: list[SeedRun]) -> None:
        self.path = path
        self.header = header
        self.runs = runs
        self._lock = threading.Lock()

    @classmethod
    def start(cls, path: Path, hunt: Hunt, resume: bool) -> Ledger:
        """A new ledger at `path` (replacing any), or with `resume` the one there, which must be this hunt's; the
        caller holds the file against other kcm writers (kcm.spec.atomic_output.held_file)."""
        header = {"kcm_seed_ledger": LEDGER_VERSION, **identity(hunt)}
        if not resume:
            replace(path, json.dumps(header) + "\n")
            return cls(path, header, [])
        found, runs = read_ledger(path)
        for key, value in identity(hunt).items():
            if found.get(key) != value:
                raise LedgerError(f"{path}: line 1: {key}: the ledger searched {found.get(key)!r}, not {value!r}")
        return cls(path, header, runs)

    def done(self) -> set[Engine]:
        return {run.engine for run in self.runs if run.finished}

    def record(self, run: SeedRun) -> None:
        with self._lock:
            self.runs.append(run)
            with self.path.open("a") as out:
                out.write(json.dumps(run.to_json()) + "\n")
                out.flush()
                os.fsync(out.fileno())


def read_ledger(path: Path) -> tuple[dict[str, Any], list[SeedRun]]:
    """A ledger's header and seeds; a LedgerError naming the line and field of what does not read."""
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise LedgerError(f"{path}: cannot read the seed ledger: {err.strerror or err}") from None
    if not lines:
        raise LedgerError(f"{path}: line 1: empty, not a seed ledger")
    header = _json_line(path, 1, lines[0])
    if header.get("kcm_seed_ledger") != LEDGER_VERSION:
        raise LedgerError(f"{path}: line 1: kcm_seed_ledger: not a seed ledger of version {LEDGER_VERSION}")
    runs = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        data = _json_line(path, number, line)
        try:
            runs.append(SeedRun.from_json(data))
        except KeyError as err:
            raise LedgerError(f"{path}: line {number}: {err.args[0]}: missing") from None
        except TypeError as err:
            raise LedgerError(f"{path}: line {number}: {err}") from None
    return header, runs


def _json_line(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise LedgerError(f"{path}: line {number}: not JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise LedgerError(f"{path}: line {number}: not a JSON object")
    return data


def plan(hunt: Hunt, seeds: int, first_seed: int = 1, depths: Sequence[int] = DEFAULT_DEPTHS,
         behaviours: int = DEFAULT_BEHAVIOURS, examples: int = DEFAULT_EXAMPLES,
         kinds: Sequence[str] = (SIMULATE,)) -> list[Engine]:
    """`seeds` engines from `first_seed` on, the kinds taken in turn, each simulation with the next depth of
    `depths` in turn (a swarm's members differ in depth as well as in seed). The steered kind only where the
    design has a steered search of a known bug."""
    usable = [kind for kind in kinds if kind != STEERED or hunt.steered_search() is not None]
    if not usable:
        raise ValueError(f"no engine of {', '.join(kinds)} applies to {hunt.model} under {hunt.knobs.describe()}")
    engines = []
    for index in range(seeds):
        kind = usable[index % len(usable)]
        seed = first_seed + index
        if kind == SIMULATE:
            engines.append(Engine(SIMULATE, seed, depths[index // len(usable) % len(depths)], behaviours))
        else:
            engines.append(Engine(STEERED, seed, 0, examples))
    return engines


@dataclass
class SwarmResult:
    """A swarm's outcome: the winner (the first counterexample, or None), every seed that ran, the seeds the
    ledger already had as finished (skipped), and the seconds from the first task to the end."""

    winner: Answer | None
    runs: list[SeedRun]
    skipped: int
    seconds: float
    slots: int
    ledger: Path
    planned: int = 0
    states: int = field(default=0)

    def race(self) -> Race:
        """The swarm as a race of kcm.conformance.explore.hunt (what `kcm hunt` reports and shortens)."""
        fates = {}
        for run in self.runs:
            fates[run.name] = (f"{run.invariant} in {run.steps} steps after {run.seconds:.1f} s"
                               if run.fate == VIOLATED_FATE else
                               f"{run.fate}: {run.detail}" if run.fate == FAILED else
                               f"{run.fate} after {run.seconds:.1f} s")
        return Race(self.winner, self.seconds, fates)


def run_swarm(spark: SparkSession, hunt: Hunt, engines: Sequence[Engine], ledger: Ledger, budget: float,
              on_progress: Callable[[str], None] | None = None) -> SwarmResult:
    """The engines the ledger has not finished, as many at once as Spark has task slots, until one finds a
    counterexample, all have ended, or `budget` seconds pass; every seed that ends is written to the ledger
    as it ends (a stopped one too, as stopped: it runs again on resume)."""
    context = spark.sparkContext
    slots = max(1, context.defaultParallelism)
    done = ledger.done()
    todo = [engine for engine in engines if engine not in done]
    queue: Iterator[Engine] = iter(todo)
    group = f"kcm-swarm-{os.getpid()}-{time.monotonic_ns()}"
    scratch = f"kcm-swarm-{os.getpid()}-{time.monotonic_ns()}"
    started = time.monotonic()
    deadline = started + budget
    runs: list[SeedRun] = []
    winner: Answer | None = None
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="kcm-swarm")
    running: dict[Future[dict[str, Any]], tuple[Engine, float]] = {}

    def submit() -> None:
        engine = next(queue, None)
        if engine is not None:
            running[pool.submit(_job, context, group, hunt, engine, scratch)] = engine, time.monotonic()

    try:
        for _ in range(slots):
            submit()
        while running and winner is None and time.monotonic() < deadline:
            finished, _ = wait(running, timeout=min(POLL_SECONDS, max(deadline - time.monotonic(), 0.0)),
                               return_when=FIRST_COMPLETED)
            for future in finished:
                engine, since = running.pop(future)
                run, answer = _ended(engine, future, since)
                runs.append(run)
                ledger.record(run)
                if answer is not None and winner is None:
                    winner = answer
                if winner is None:
                    submit()
            if on_progress is not None:
                on_progress(_progress_text(runs, [engine for engine, _ in running.values()], len(todo), started))
    except BaseException:
        # An interrupt leaves the seeds running to kcm, which ends Spark's JVM and with it the workers and their
        # TLC (a cancel now would only make the dying JVM log errors), and their threads with it; the ledger
        # keeps what ended, and the seeds still running run again on resume.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        shutil.rmtree(Path(tempfile.gettempdir()) / scratch, ignore_errors=True)
    # The budget or a counterexample: the seeds still running are cancelled and stopped.
    context.cancelJobGroup(group)
    for future, (engine, since) in running.items():
        wait([future])
        run, _ = _ended(engine, future, since, stopped=True)
        runs.append(run)
        ledger.record(run)
    pool.shutdown()
    return SwarmResult(winner, runs, len(engines) - len(todo), time.monotonic() - started, slots, ledger.path,
                       len(engines), sum(run.states for run in runs))


def _progress_text(runs: list[SeedRun], running: list[Engine], todo: int, started: float) -> str:
    states = sum(run.states for run in runs)
    names = ", ".join(engine.name for engine in running)
    return (f"{len(runs)} of {todo} seeds done, {states:,} states, {time.monotonic() - started:.0f} s; "
            f"running {names or 'none'}")


def _job(context: SparkContext, group: str, hunt: Hunt, engine: Engine, scratch: str) -> dict[str, Any]:
    """One seed as a Spark job of one task, in the swarm's job group (a thread's own, as PySpark pins it)."""
    context.setJobGroup(group, engine.name, interruptOnCancel=True)
    task = _seed_task(_plain(hunt), scratch)
    rows: list[dict[str, Any]] = context.parallelize([(engine.kind, engine.seed, engine.depth, engine.quota)], 1) \
        .map(task).collect()
    return rows[0]


def _plain(hunt: Hunt) -> dict[str, Any]:
    """The hunt as plain data: a compiled install's objects (Knobs) do not survive the pickling to a task."""
    return {"model": hunt.model, "knobs": hunt.knobs.to_dict(), "invariants": hunt.invariants,
            "heap_mb": hunt.heap_mb, "design": str(hunt.design.path) if hunt.design is not None else None}


def _hunt_of(plain: dict[str, Any]) -> Hunt:
    design = read_design(plain["design"]) if plain["design"] is not None else None
    return Hunt(plain["model"], Knobs.from_dict(plain["knobs"]), plain["invariants"], plain["heap_mb"], design)


def _seed_task(plain: dict[str, Any], scratch: str) -> Callable[[tuple[str, int, int, int]], dict[str, Any]]:
    def run(fields: tuple[str, int, int, int]) -> dict[str, Any]:
        engine, hunt = Engine(*fields), _hunt_of(plain)
        # Spark kills this worker when it cancels the job: its TLC goes with it, and its files stay in the
        # swarm's scratch folder, which the driver removes.
        child_processes.tie_children_to_me()
        folder = Path(tempfile.gettempdir()) / scratch
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.tempdir = str(folder)
        os.environ["TMPDIR"] = str(folder)
        started = time.monotonic()
        try:
            return {"answer": search(hunt, engine).to_json()}
        except Exception as err:  # the seed's fate, in one line
            return {"failed": f"{type(err).__name__}: {err}", "seconds": time.monotonic() - started}

    return run


def _ended(engine: Engine, future: Future[dict[str, Any]], since: float,
           stopped: bool = False) -> tuple[SeedRun, Answer | None]:
    """The seed's run as the ledger keeps it, and its answer when it found a counterexample; a seed without an
    answer of its own is timed from its submission."""
    try:
        row = future.result()
    except Exception as err:  # a cancelled job, a lost executor
        seconds = time.monotonic() - since
        if stopped:
            return SeedRun(engine, STOPPED, seconds), None
        lines = str(err).strip().splitlines()
        return SeedRun(engine, FAILED, seconds, detail=lines[0][:200] if lines else type(err).__name__), None
    if "failed" in row:
        return SeedRun(engine, FAILED, row["seconds"], detail=row["failed"]), None
    answer = Answer.from_json(row["answer"])
    if answer.invariant is None:
        return SeedRun(engine, NOTHING_FOUND, answer.seconds, answer.states), None
    return SeedRun(engine, VIOLATED_FATE, answer.seconds, answer.states, answer.invariant, answer.steps), answer
