"""The words every kcm command uses for a result, in its tables and its JSON alike (docs/verdicts.md).

A check of a property ends `holds` (exhaustively, or for every input of a proof), `violated` (with a
counterexample), `holds to depth K` (a bounded search found nothing up to K steps: never a proof), or `unknown`
(the engine could not decide: a solver's unknown, a tool's error). A review row compares what a design breaks
with what it is documented to break: `as expected` or `unexpected`. A trace that never carries a variable an
invariant reads leaves that invariant `unobserved` (not checked, and not a failure).
"""

from __future__ import annotations

from typing import Final

HOLDS: Final = "holds"
VIOLATED: Final = "violated"
UNKNOWN: Final = "unknown"
UNOBSERVED: Final = "unobserved"
AS_EXPECTED: Final = "as expected"
UNEXPECTED: Final = "unexpected"
_DEPTH_PREFIX: Final = "holds to depth "


def holds_to_depth(depth: int) -> str:
    return f"{_DEPTH_PREFIX}{depth}"


def passed(verdict: str) -> bool:
    """Whether a verdict is what a correct design gets: the run that has only these exits 0."""
    return verdict in (HOLDS, AS_EXPECTED) or verdict.startswith(_DEPTH_PREFIX)


def severity(verdict: str) -> int:
    """0 passed, 1 a counterexample (a violation, a review row off its documentation), 2 undecided."""
    if passed(verdict) or verdict == UNOBSERVED:
        return 0
    return 1 if verdict in (VIOLATED, UNEXPECTED) else 2


def worst(verdicts: list[str]) -> str:
    """The verdict of a run made of these: the most severe one; a run of nothing holds."""
    return max(verdicts, key=severity, default=HOLDS)
