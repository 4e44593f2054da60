"""The words every kcm command uses for a result, in its tables and its JSON alike (docs/verdicts.md).

A check of a property ends `holds` (exhaustively, or for every input of a proof), `violated` (with a
counterexample), `holds to depth K` (a bounded search found nothing up to K steps: never a proof), or `unknown`
(the engine could not decide: a solver's unknown, a tool's error). A review row compares what a design breaks
with what it is documented to break: `as expected` or `unexpected`. A trace that never carries a variable an
invariant reads leaves that invariant `unobserved` (not checked, and not a failure). An engine that cannot read
a design's rule at a point the design changes says `unsupported` for it, never the default design's verdict.

A verdict never rests on zero work: a check that ran on nothing (no seed, no step, no example, no event, no
state) is `unobserved`, never `holds` (`held`). A run made of results takes the worst of those that observed
something; a run that observed nothing is `unobserved`, which is not a pass: it exits 2, like `unknown`.
"""

from __future__ import annotations

from typing import Final

HOLDS: Final = "holds"
VIOLATED: Final = "violated"
UNKNOWN: Final = "unknown"
UNOBSERVED: Final = "unobserved"
AS_EXPECTED: Final = "as expected"
UNEXPECTED: Final = "unexpected"
UNSUPPORTED: Final = "unsupported"
_DEPTH_PREFIX: Final = "holds to depth "


def holds_to_depth(depth: int) -> str:
    return f"{_DEPTH_PREFIX}{depth}"


def passed(verdict: str) -> bool:
    """Whether a verdict is what a correct design gets: the run that has only these exits 0."""
    return verdict in (HOLDS, AS_EXPECTED) or verdict.startswith(_DEPTH_PREFIX)


def held(work: int) -> str:
    """The verdict of a check that found no counterexample in `work` units (seeds' steps, examples, events,
    states): it holds only if it looked at something."""
    return HOLDS if work > 0 else UNOBSERVED


def severity(verdict: str) -> int:
    """0 passed, 1 a counterexample (a violation, a review row off its documentation), 2 undecided (unknown,
    or unobserved: nothing was checked)."""
    if passed(verdict):
        return 0
    return 1 if verdict in (VIOLATED, UNEXPECTED) else 2


def _rank(verdict: str) -> int:
    # A part that saw nothing fails the run, but a counterexample found elsewhere says more, and an engine's
    # failure more again (it outranks a counterexample, as severity has it).
    return 1 if verdict == UNOBSERVED else 0 if passed(verdict) else severity(verdict) + 1


def worst(verdicts: list[str]) -> str:
    """The verdict of one check made of these (a trace's invariants, an engine's rows): the most severe of
    those that observed something, since a property a trace cannot show does not undo the others; it is
    unobserved when none did, and a run of nothing is unobserved."""
    return max((v for v in verdicts if v != UNOBSERVED), key=severity, default=UNOBSERVED)


def combined(parts: list[str]) -> str:
    """The verdict of a run of separate parts each asked for (`kcm verify`'s engines, each part's verdict by
    `worst`): a part that observed nothing makes the run unobserved, for a run that was asked to check
    something and did not must not pass, unless another part found a counterexample or could not decide; a
    run of no parts is unobserved. A part that cannot read the design (`unsupported`, shown in its rows) is left
    out, unless no part could: a run that read the design nowhere is unsupported."""
    read = [part for part in parts if part != UNSUPPORTED] or parts
    return max(read, key=_rank, default=UNOBSERVED)
