"""Inductive invariants, in the three steps Apalache uses, for the core protocol with unbounded integer
epochs and offsets (logs are lengths; the state node's history is kept in ghost arrays):

- IndInit: the initial states satisfy the inductive invariant `Inv`;
- IndNext: `Inv` and one step of `Next` give `Inv` again;
- IndProp: `Inv` implies the property (for a step property: `Inv` and a step imply it).

Each property is first tried alone (`Inv` = the property; `Inv` = true for a step property). When that
fails, the counterexample to induction is kept, and a strengthening is searched for among the lemmas of
`invariants.lemmas`: Houdini's algorithm keeps the largest subset that is inductive, then lemmas are
dropped one by one while what is left stays inductive and still gives the property.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcm.spec.verdicts import HOLDS, UNKNOWN, VIOLATED
from kcm.spec.vocabulary import Knobs
from kcm.spec.z3.actions import Effect, Relations, next_relation, relation
from kcm.spec.z3.invariants import (
    STATE_INVARIANTS,
    Lemma,
    controller_epoch_monotonic,
    initial,
    leader_epoch_monotonic,
    lemmas,
    stale_controller_fenced,
)
from kcm.spec.z3.model import Config, Rules, State
from kcm.spec.z3.solver import Expr, and_all, int_const, not_, py_value, z3

TARGETS: tuple[str, ...] = (
    "OneLeaderPerEpoch", "IsrSubsetOfReplicas", "LeaderInIsr",
    "ControllerEpochMonotonic", "LeaderEpochMonotonic", "StaleControllerFenced",
)
STEP_TARGETS = frozenset({"ControllerEpochMonotonic", "LeaderEpochMonotonic", "StaleControllerFenced"})
# The lemma that states each state invariant (the pool holds them under their lemma names).
TARGET_LEMMA = {"OneLeaderPerEpoch": "LeadersAreRecorded", "IsrSubsetOfReplicas": "IsrWithinAssignment",
                "LeaderInIsr": "LeaderInIsr"}


@dataclass
class StepResult:
    step: str  # IndInit | IndNext | IndProp
    result: str  # holds | violated | unknown (kcm.spec.verdicts)
    seconds: float
    cti: dict[str, Any] | None = None


@dataclass
class InductionResult:
    invariant: str
    alone: bool
    strengthening: list[str]
    steps: list[StepResult] = field(default_factory=list)
    alone_cti: dict[str, Any] | None = None
    search_seconds: float = 0.0

    @property
    def proved(self) -> bool:
        return all(s.result == HOLDS for s in self.steps)


class Induction:
    def __init__(self, brokers: int = 3, knobs: Knobs | None = None, rules: Rules | None = None,
                 timeout_ms: int = 60_000) -> None:
        self.cfg = Config(brokers=brokers, knobs=knobs or Knobs(), rules=rules or Rules(), logs="length",
                          history="arrays")
        self.s = State(self.cfg, "s.")
        self.t = State(self.cfg, "t.")
        self.choice = int_const("choice")
        rel = Relations(self.cfg, self.s, self.t, tag="a.")
        self.effects: list[Effect] = rel.model_instances()
        self.next = next_relation(self.effects, self.s, self.t, self.choice)
        self.init = initial(self.s)
        self.lemmas: dict[str, Lemma] = {lemma.name: lemma for lemma in lemmas(self.cfg)}
        self.timeout_ms = timeout_ms
        self._houdini: list[str] | None = None
        self._supports: list[Expr] | None = None
        self._tracks: dict[str, Expr] = {}
        self._support_cache: dict[str, list[str] | None] = {}

    # -- queries ---------------------------------------------------------------------------------------

    def _solver(self) -> Expr:
        solver = z3.Solver()
        solver.set("timeout", self.timeout_ms)
        return solver

    def _state_formula(self, name: str) -> Callable[[State], Expr]:
        if name in self.lemmas:
            return self.lemmas[name].formula
        return STATE_INVARIANTS[name]

    def _inv(self, names: list[str], s: State) -> Expr:
        return and_all(self._state_formula(n)(s) for n in names)

    def _step_property(self, name: str) -> Expr:
        s, t = self.s, self.t
        if name == "ControllerEpochMonotonic":
            return controller_epoch_monotonic(s, t)
        if name == "LeaderEpochMonotonic":
            return leader_epoch_monotonic(s, t)
        return stale_controller_fenced(s, t, self.effects, self.choice)

    def check(self, premises: list[Expr], goal: Expr) -> tuple[str, Expr | None]:
        solver = self._solver()
        solver.add(*premises)
        solver.add(not_(goal))
        verdict = solver.check()
        if verdict == z3.unsat:
            return HOLDS, None
        if verdict == z3.sat:
            return VIOLATED, solver.model()
        return UNKNOWN, None

    def after_each_action(self, premises: list[Expr], goal: Expr) -> tuple[str, Expr | None]:
        """`premises` and one step of `Next` give `goal`, asked one action instance at a time: the
        solver answers the small queries in a fraction of the time of one over the whole disjunction."""
        unknown = False
        for index, effect in enumerate(self.effects):
            verdict, model = self.check([*premises, relation(effect, self.s, self.t), self.choice == index], goal)
            if verdict == VIOLATED:
                return verdict, model
            unknown = unknown or verdict == UNKNOWN
        return (UNKNOWN if unknown else HOLDS), None

    def preserved(self, names: list[str], goals: list[str] | None = None) -> tuple[str, Expr | None]:
        """IndNext for `names`: Inv(names) and Next give each of `goals` (default: `names`) afterwards."""
        goals = names if goals is None else goals
        return self.after_each_action([self._inv(names, self.s)], self._inv(goals, self.t))

    # -- Houdini ---------------------------------------------------------------------------------------

    def houdini(self) -> list[str]:
        """The largest inductive subset of the lemmas that hold initially."""
        if self._houdini is not None:
            return self._houdini
        kept = [n for n in self.lemmas if self.check([self.init], self.lemmas[n].formula(self.s))[0] == HOLDS]
        while True:
            verdict, model = self.preserved(kept)
            if verdict == HOLDS:
                break
            if model is None:
                raise RuntimeError(f"z3 answered {verdict} during the search for an inductive invariant")
            broken = []
            undetermined = []
            for n in kept:
                value = model.eval(self.lemmas[n].formula(self.t), model_completion=True)
                if z3.is_false(value):
                    broken.append(n)
                elif not z3.is_true(value):
                    undetermined.append(n)  # a quantified lemma the model does not decide
            if not broken:
                broken = [n for n in undetermined if self.preserved(kept, [n])[0] != HOLDS]
            if not broken:
                raise RuntimeError("no lemma could be dropped, yet the lemmas are not inductive")
            kept = [n for n in kept if n not in broken]
        self._houdini = kept
        return kept

    def _support_solvers(self) -> list[Expr]:
        """One solver per action instance: a query per action is small, and a missing lemma shows on the
        first action that needs it, where one query over all of `Next` would search them all at once."""
        if self._supports is None:
            self._supports = []
            for index, effect in enumerate(self.effects):
                solver = z3.Solver()
                # Without model-based quantifier instantiation a missing lemma shows as "unknown" at once,
                # instead of a long search for a model of the quantified lemmas.
                solver.set("smt.mbqi", False)
                solver.set("timeout", 5_000)
                solver.add(relation(effect, self.s, self.t), self.choice == index)
                for name in self.houdini():
                    solver.add(z3.Implies(self._track(name), self._state_formula(name)(self.s)))
                self._supports.append(solver)
        return self._supports

    def _track(self, name: str) -> Expr:
        return self._tracks.setdefault(name, z3.Bool(f"uses.{name}"))

    def support(self, key: str, goal: Expr) -> list[str] | None:
        """A minimal set of lemmas (held before the step) that proves `goal` after one step of `Next`;
        None when the lemmas of the inductive pool do not prove it."""
        if key in self._support_cache:
            return self._support_cache[key]
        solvers = self._support_solvers()
        pool = self.houdini()
        wants = z3.Bool(f"goal.{key}")
        for solver in solvers:
            solver.add(z3.Implies(wants, not_(goal)))
        order = list(range(len(solvers)))

        def proves(names: list[str]) -> list[str] | None:
            core: set[str] = set()
            for position, index in enumerate(order):
                solver = solvers[index]
                if solver.check([self._track(n) for n in names] + [wants]) != z3.unsat:
                    order.insert(0, order.pop(position))  # the action that needed a lemma is asked first next
                    return None
                core |= {str(c) for c in solver.unsat_core()}
            return [n for n in names if str(self._track(n)) in core]

        current = proves(pool)
        if current is not None:
            for name in list(current):
                if name in current:
                    smaller = proves([n for n in current if n != name])
                    if smaller is not None:
                        current = smaller
        self._support_cache[key] = current
        return current

    def strengthening_for(self, key: str, goal: Expr, seeds: list[str]) -> list[str] | None:
        """An inductive set of lemmas holding `seeds` and proving `goal`: the closure of the minimal
        supports, starting from the goal's."""
        pool = self.houdini()
        if any(s not in pool for s in seeds):
            return None
        first = self.support(key, goal)
        if first is None:
            return None
        chosen = list(dict.fromkeys([*seeds, *first]))
        work = list(chosen)
        while work:
            name = work.pop()
            needed = self.support(name, self._state_formula(name)(self.t))
            if needed is None:
                return None
            for n in needed:
                if n not in chosen:
                    chosen.append(n)
                    work.append(n)
        return [n for n in pool if n in chosen]

    # -- one property ------------------------------------------------------------------------------------

    def prove(self, target: str) -> InductionResult:
        start = time.perf_counter()
        if target in STEP_TARGETS:
            return self._prove_step(target, start)
        return self._prove_state(target, start)

    def _prove_state(self, target: str, start: float) -> InductionResult:
        lemma = TARGET_LEMMA[target]
        verdict, model = self.preserved([lemma])
        alone = verdict == HOLDS
        cti = None if model is None else self.cti(model)
        names = [lemma]
        if not alone:
            found = self.strengthening_for(lemma, self._state_formula(lemma)(self.t), [lemma])
            if found is not None:
                names = found
        result = InductionResult(target, alone, [n for n in names if n != lemma], alone_cti=cti)
        result.steps = self._three_steps(names, lambda inv: self.check([inv], self._inv([lemma], self.s)))
        result.search_seconds = time.perf_counter() - start
        return result

    def _prove_step(self, target: str, start: float) -> InductionResult:
        prop = self._step_property(target)
        verdict, model = self.after_each_action([], prop)
        alone = verdict == HOLDS
        cti = None if model is None else self.cti(model)
        names: list[str] = []
        if not alone:
            found = self.strengthening_for(target, prop, [])
            names = found if found is not None else self.houdini()
        result = InductionResult(target, alone, names, alone_cti=cti)
        result.steps = self._three_steps(names, lambda inv: self.after_each_action([inv], prop))
        result.search_seconds = time.perf_counter() - start
        return result

    def _three_steps(self, names: list[str], prop: Callable[[Expr], tuple[str, Expr | None]]) -> list[StepResult]:
        steps = []
        inv = self._inv(names, self.s)
        for step in ("IndInit", "IndNext", "IndProp"):
            began = time.perf_counter()
            if step == "IndInit":
                verdict, model = self.check([self.init], inv)
            elif step == "IndNext":
                verdict, model = self.preserved(names) if names else (HOLDS, None)
            else:
                verdict, model = prop(inv)
            steps.append(StepResult(step, verdict, time.perf_counter() - began,
                                    None if model is None else self.cti(model)))
        return steps

    # -- counterexamples to induction ---------------------------------------------------------------------

    def cti(self, model: Expr) -> dict[str, Any]:
        """A counterexample to induction: the action taken and the state before, with what changed."""
        s, t = self.s, self.t
        index = int(py_value(model, self.choice))
        effect = self.effects[index] if 0 <= index < len(self.effects) else None
        before: dict[str, Any] = {}
        changed: dict[str, Any] = {}
        for name in s.names():
            if name.startswith("g.") or name.startswith("follower_leo"):
                continue
            a, b = py_value(model, s[name]), py_value(model, t[name])
            before[name] = a
            if a != b:
                changed[name] = f"{a} -> {b}"
        out: dict[str, Any] = {"action": effect.label if effect else "?", "before": before, "changed": changed}
        if effect is not None:
            out["params"] = {k: py_value(model, v) for k, v in effect.params.items() if not k.startswith("isr.")
                             and not k.startswith("replicas.")}
        return out


def run_induction(brokers: int = 3, knobs: Knobs | None = None, rules: Rules | None = None,
                  targets: tuple[str, ...] = TARGETS,
                  on_result: Callable[[InductionResult], None] | None = None) -> list[InductionResult]:
    engine = Induction(brokers, knobs, rules)
    results = []
    for target in targets:
        result = engine.prove(target)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results
