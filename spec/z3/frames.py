"""Facts proven of every reachable state, for bounded model checking to assume at each state of its
unrolling: they remove only unreachable states, so a counterexample stays a shortest one, and a SAT
search over the unrolling need not explore assignments no run can reach.

A lemma is kept only if it holds in the unrolling's initial state and is inductive (with the others
kept) under the transition relation of the very search: the same knobs, the same actions, the same
initial controller. Houdini's algorithm drops every lemma that is not, until what is left is inductive.
The proof runs in the induction's model (unbounded integers, the state node's history in ghost arrays),
which allows at least the steps of the unrolling: a LeaderAndIsr request of the unrolling carries the
node of an earlier state, and every write of the node takes a new version, so the ghost arrays hold
each such node at its version; the unrolling's bit-vectors are wide enough for its depth
(`bmc.bits_for`), so its integers never wrap. Only lemmas that read no ghost array are assumed by BMC
(the others may be needed to prove them, but the unrolling has no such leaves).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from kcm.spec.vocabulary import Knobs

from ._z3 import Expr, implies, int_const, not_, z3
from .actions import Relations, next_relation
from .invariants import Lemma, StateFormula, initial, lemmas, log_lemmas
from .model import Config, State

# A query the solver cannot settle within this time drops its lemma: an unproven lemma is never assumed.
QUERY_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class ProvenLemmas:
    kept: tuple[Lemma, ...]  # inductive together, initially true: assumed at every state of the unrolling
    dropped: tuple[str, ...]  # not initially true, not inductive, or reading the induction's ghosts
    seconds: float

    @property
    def formulas(self) -> tuple[StateFormula, ...]:
        return tuple(lemma.formula for lemma in self.kept)


class _Houdini:
    """One incremental solver holding one step of the relation; each lemma is switched on before the step
    and its negation after the step by a literal, so every query reuses what the solver has internalised."""

    def __init__(self, cfg: Config, actions: frozenset[str] | None, controller: int, pool: list[Lemma]) -> None:
        s, t = State(cfg, "s."), State(cfg, "t.")
        effects = [e for e in Relations(cfg, s, t, tag="a.").model_instances()
                   if actions is None or e.action in actions]
        self.solver = z3.Solver()
        # Without model-based quantifier instantiation a lemma that does not follow is "unknown" at once
        # instead of a long search for a model of the quantified lemmas; "unknown" drops it all the same.
        self.solver.set("smt.mbqi", False)
        self.solver.set("timeout", QUERY_TIMEOUT_MS)
        self.solver.add(next_relation(effects, s, t, int_const("choice")))
        self.initially = z3.Bool("frames.initially")
        self.solver.add(implies(self.initially, initial(s, controller)))
        self.holds: dict[str, Expr] = {}
        self.fails_before: dict[str, Expr] = {}
        self.fails_after: dict[str, Expr] = {}
        for lemma in pool:
            self.holds[lemma.name] = self._literal("holds", lemma.name, lemma.formula(s))
            self.fails_before[lemma.name] = self._literal("fails_before", lemma.name, not_(lemma.formula(s)))
            self.fails_after[lemma.name] = self._literal("fails_after", lemma.name, not_(lemma.formula(t)))

    def _literal(self, kind: str, name: str, formula: Expr) -> Expr:
        literal = z3.Bool(f"frames.{kind}.{name}")
        self.solver.add(implies(literal, formula))
        return literal

    def initially_true(self, name: str) -> bool:
        return bool(self.solver.check(self.initially, self.fails_before[name]) == z3.unsat)

    def preserved(self, name: str, kept: list[str]) -> bool:
        return bool(self.solver.check(*[self.holds[k] for k in kept], self.fails_after[name]) == z3.unsat)

    def run(self, names: list[str]) -> list[str]:
        kept = [n for n in names if self.initially_true(n)]
        while True:
            broken = [n for n in kept if not self.preserved(n, kept)]
            if not broken:
                return kept
            kept = [n for n in kept if n not in broken]


def reads_ghosts(lemma: Lemma, cfg: Config) -> bool:
    """Whether the lemma reads a leaf the unrolling does not have (the induction's ghost arrays)."""
    probe = State(cfg, "probe.")
    probe.accessed = set()
    lemma.formula(probe)
    unrolled = set(State(Config(brokers=cfg.brokers, knobs=cfg.knobs, logs="content", capacity=cfg.capacity,
                                history="states"), "unrolled.").names())
    return not probe.accessed <= unrolled


def candidate_pool(cfg: Config) -> list[Lemma]:
    return lemmas(cfg) + log_lemmas(cfg)


def proven_lemmas(knobs: Knobs, brokers: int, capacity: int, actions: Iterable[str] | None = None,
                  controller: int = 1, pool: list[Lemma] | None = None) -> ProvenLemmas:
    """The lemmas of `pool` (default: the induction's and `log_lemmas`) that bounded model checking with
    these knobs, actions and initial controller may assume at every state."""
    start = time.perf_counter()
    cfg = Config(brokers=brokers, knobs=knobs, logs="content", capacity=capacity, history="arrays")
    candidates = candidate_pool(cfg) if pool is None else pool
    chosen = None if actions is None else frozenset(actions)
    inductive = set(_Houdini(cfg, chosen, controller, candidates).run([c.name for c in candidates]))
    kept = tuple(c for c in candidates if c.name in inductive and not reads_ghosts(c, cfg))
    dropped = tuple(c.name for c in candidates if c not in kept)
    return ProvenLemmas(kept, dropped, time.perf_counter() - start)
