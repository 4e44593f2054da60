"""`kcm hunt`'s route: the fastest counterexample for a design, then the shortest one, then its confirmation.

The design's reproduction model (the review row of the same knob settings, else `ci`: `model_for`) is searched
by a portfolio of engines raced in parallel processes, one per core (kcm.conformance.explore.hunt): TLC's
simulation mode from several seeds, Z3 bounded model checking where a known bug's story applies and is
shallow, TLC's breadth-first search where the cores allow (`portfolio`). The first counterexample wins and
every other engine is stopped. Unless it is a shortest one already, it is then shortened: TLC breadth first,
bounded by the depth found, raced the same way (`hunt_races`). The shortest counterexample is confirmed by
replay in the implementation and by TLC trace validation (`confirm`). `kcm hunt`, `kcm review --quick` and
`kcm verify` take this route; docs/hunt.md has the measurements behind its choices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kcm.conformance.check.replay import Replayer, ReplayError
from kcm.conformance.explore.hunt import BFS, BMC, SHORTEST, SIMULATE, STEERED, Answer, Engine, Hunt, Race, race
from kcm.spec.design_folder import DesignFolder
from kcm.spec.designs import VARIANTS
from kcm.spec.tlc.runner import TlcError, TlcSetupError
from kcm.spec.tlc.validate import validate_with_tlc
from kcm.spec.verdicts import UNKNOWN, held, holds_to_depth
from kcm.spec.vocabulary import Knobs

# Behaviours TLC simulates are at most this long: on the KIP-279 case (13 steps at the shortest), depth 15 found
# nothing in 40 s, depth 20 found it in 6 to 11 s, depth 30 in 10 to 32 s (docs/hunt.md).
SIMULATION_DEPTH: Final = 20
# BMC runs on a known bug of at most this depth: deeper, TLC wins (docs/hunt.md).
BMC_SHALLOW: Final = 8
# The reproduction models whose bug TLC's simulation does not find within minutes (the KIP-320 case: seeds 1-3,
# depths 16 to 30, 45 to 120 s, docs/hunt.md): a simulation beside the breadth-first search would only take its
# core, measured 14.9-15.7 s alone against 18.1 s raced.
UNSIMULATED: Final = frozenset({"kip279"})


def model_for(knobs: Knobs) -> str:
    """The review row's model for these knob settings (the smallest that shows the design), else `ci`."""
    return next((v.model for v in VARIANTS if v.knobs == knobs), "ci")


def portfolio(hunt: Hunt, cores: int) -> list[Engine]:
    """The engines of the first race, one per core. On a shallow known bug, BMC alone (on two loaded cores a
    TLC beside it slows it more than it adds); otherwise the breadth-first search (the only engine that finds
    the KIP-320 case within minutes, and the one that proves a correct design), then TLC simulations from
    distinct seeds, except on a known bug no simulation finds (UNSIMULATED). docs/hunt.md has the
    measurements."""
    bug = hunt.known_bug()
    # BMC's answer must be a behaviour of the specification: a review cell or a hunt reports it as one.
    shallow = bug is not None and bug.story.depth <= BMC_SHALLOW and not bug.story.not_a_behaviour
    unsimulated = bug is not None and hunt.model in UNSIMULATED
    simulations = max(cores - 2, 0) if shallow else 0 if unsimulated else cores - 1
    return [Engine(BMC if shallow else BFS),
            *(Engine(SIMULATE, seed, SIMULATION_DEPTH) for seed in range(1, simulations + 1))]


@dataclass
class HuntResult:
    """The race for a first counterexample, and the shortest one: from a breadth-first engine of that race
    kept running, or from a second race bounded by the depth found (`shortening`), or the first itself."""

    first: Race
    shortest: Answer | None  # None: the shortening gave up (its budget ran out, or it failed)
    seconds_to_shortest: float  # to the shortest, or until the shortening gave up
    shortening: Race | None = None


def hunt_races(hunt: Hunt, cores: int, budget: float, on_progress: Callable[[str], None] | None = None) -> HuntResult:
    """The race for a first counterexample, then its shortest: the first itself (BFS, BMC), or the race's
    breadth-first search kept running, or (a race without one) a race of TLC breadth first bounded by the
    depth found. Each race has the budget. `kcm review` and `kcm verify` take their unsafe rows this way."""
    engines = portfolio(hunt, cores)

    def show(phase: str) -> Callable[[str], None] | None:
        return None if on_progress is None else lambda text: on_progress(f"{phase}: {text}")

    first = race(hunt, engines, budget, show(f"hunt {hunt.model}"), keep_shortest=True)
    found = first.winner
    if found is not None and found.invariant is not None and found.engine.kind not in SHORTEST \
            and any(engine.kind in SHORTEST for engine in engines):
        # The race's own breadth-first search, kept running: its shortest, or the budget ran out on it.
        return HuntResult(first, first.shortest, first.seconds_to_shortest)
    return shorten(hunt, first, budget, on_progress)


def shorten(hunt: Hunt, first: Race, budget: float, on_progress: Callable[[str], None] | None = None) -> HuntResult:
    """The shortest counterexample after a first race (forked engines, or the swarm on Spark) that kept no
    breadth-first search running: the first itself when a shortest engine found it, else TLC breadth first
    bounded by the depth found, within the budget."""
    found = first.winner
    if found is None or found.invariant is None or found.engine.kind in SHORTEST:
        return HuntResult(first, found, first.seconds)
    show = None if on_progress is None else lambda text: on_progress(f"shorten {found.steps} steps: {text}")
    again = race(hunt, [Engine(BFS, depth=found.steps)], budget, show)
    best = again.winner if again.winner is not None and again.winner.invariant else None
    return HuntResult(first, best, first.seconds + again.seconds, again)


def no_counterexample(answer: Answer | None) -> str:
    """The verdict of a race that ended without a counterexample: only an exhaustive search decides (to its
    depth bound, if it had one), and one that explored no state observed nothing (kcm.spec.verdicts.held)."""
    if answer is None or not answer.exhaustive:
        return UNKNOWN
    return held(answer.states) if answer.bound is None else holds_to_depth(answer.bound)


@dataclass
class Confirmation:
    replay: str
    tlc: str

    def to_json(self) -> dict[str, str]:
        return {"replay": self.replay, "tlc_validation": self.tlc}


def confirm(answer: Answer, design: DesignFolder | None = None) -> Confirmation:
    """Replay in the implementation, and TLC trace validation against the specification for a trace TLC did
    not find itself (a TLC counterexample is one of the specification's behaviours by construction, and its
    steps carry TLC's action names, not the arguments trace validation matches)."""
    try:
        report = Replayer(answer.events, answer.invariant, design).run()
        divergence = report.divergence
        replay = (f"the implementation follows all {report.steps} steps and breaks {answer.invariant}"
                  if report.verdict == "same-invariant" else
                  f"not confirmed: {report.verdict}" + (f" at seq {divergence.seq} ({divergence.action})"
                                                         if divergence is not None else ""))
    except ReplayError as err:
        replay = f"not replayed: {err}"
    if answer.engine.kind not in (BMC, STEERED):
        return Confirmation(replay, "a behaviour of the TLA+ model by construction (TLC found it)")
    try:
        check = validate_with_tlc(answer.events)
        tlc = (f"the specification explains all {check.events} events" if check.accepted
               else f"not confirmed: event {check.matched} is explained by no behaviour")
    except (ValueError, TlcError, TlcSetupError) as err:
        tlc = f"not validated: {err}"
    return Confirmation(replay, tlc)
