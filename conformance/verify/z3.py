"""The Z3 engine's rows: the universal proofs, the induction and the data proof, one row per obligation as
`kcm prove` tables them, and the Z3 stage of `kcm verify` (the proofs and the induction, one summary row each).
Each reports its obligations as a task of the reporter."""

from __future__ import annotations

import time
from typing import Any

from kcm.conformance.design_readings import readings
from kcm.conformance.reporter import Reporter
from kcm.conformance.verify.stages import StageRow, VerifyContext, unsupported_row
from kcm.spec.verdicts import HOLDS, UNKNOWN, UNSUPPORTED, VIOLATED, worst
from kcm.spec.vocabulary import Knobs


def proof_rows(reporter: Reporter, brokers: int, knobs: Knobs) -> list[dict[str, Any]]:
    """The universal proofs, one row each, with a progress task over the obligations."""
    from kcm.conformance.check.tables import implementation_rules
    from kcm.spec.z3.proofs import discharge, obligations

    todo = obligations(brokers, knobs, implementation_rules())
    rows = []
    with reporter.task(f"z3 universal proofs ({brokers} brokers)", len(todo)) as task:
        for obligation in todo:
            result = discharge(obligation)
            task.advance(detail=f"{result.property}: {result.result}")
            rows.append(result.to_json())
    return rows


def induction_rows(reporter: Reporter, brokers: int, knobs: Knobs,
                   targets: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The induction, one row per obligation (IndInit, IndNext, IndProp) of each invariant."""
    from kcm.spec.z3.induction import TARGETS, InductionResult, run_induction

    chosen = targets or TARGETS
    with reporter.task(f"z3 induction ({brokers} brokers)", len(chosen)) as task:

        def done(result: InductionResult) -> None:
            task.advance(detail=f"{result.invariant}: {worst([step.result for step in result.steps])}")

        results = run_induction(brokers, knobs, targets=chosen, on_result=done)
    rows = []
    for result in results:
        note = "inductive alone" if result.alone else "strengthened with " + ", ".join(result.strengthening)
        for step in result.steps:
            row: dict[str, Any] = {"property": f"{result.invariant}: {step.step}", "result": step.result,
                                   "seconds": round(step.seconds, 4), "group": "induction", "detail": note}
            if step.cti is not None:
                row["model"] = step.cti
            if step.step == "IndNext" and not result.alone and result.alone_cti is not None:
                row["alone_cti"] = result.alone_cti
            rows.append(row)
    return rows


def data_rows(reporter: Reporter, brokers: int, knobs: Knobs, full: bool = False) -> list[dict[str, Any]]:
    """The data proof (docs/z3.md, "The data proof"), one row per obligation: IndInit, IndNext per action,
    Implied per implied lemma, IndProp per data invariant, for the design the knob truncation names.  A
    counterexample to induction settles that the invariant is not proved, so the rest runs only with `full`:
    on an unsafe design a lemma that breaks without a small counterexample uses up every attempt."""
    from kcm.spec.z3.data import DataProof

    proof = DataProof(brokers, knobs.truncation)
    todo = list(proof.obligations())
    rows: list[dict[str, Any]] = []
    with reporter.task(f"z3 data proof ({brokers} brokers, truncation={knobs.truncation})", len(todo)) as task:
        for obligation in todo:
            result = obligation()
            task.advance(detail=f"{result.name}: {result.result}")
            rows.append(result.to_json())
            if result.result == VIOLATED and not full:
                left = len(todo) - len(rows)
                if left:
                    rows[-1]["detail"] += f"; the {left} obligations after it not run (--full runs them)"
                break
    return rows


def stage(ctx: VerifyContext) -> list[StageRow]:
    """The Z3 rows of `kcm verify`: the universal proofs and the induction, one summary row each, timed whole
    (the induction's search for strengthening lemmas included)."""
    if ctx.own_design is not None:
        return [unsupported_row("z3", ctx.own_design, readings(ctx.own_design).z3.removeprefix(f"{UNSUPPORTED}: ")
                                + ": Z3 reads these points as knobs only")]
    started = time.perf_counter()
    proofs = proof_rows(ctx.reporter, 8, ctx.knobs)
    proved = time.perf_counter()
    steps = induction_rows(ctx.reporter, 3, ctx.knobs)
    ended = time.perf_counter()
    invariants = {row["property"].partition(":")[0] for row in steps}
    strengthened = {row["property"].partition(":")[0] for row in steps if row["detail"] != "inductive alone"}
    return [
        StageRow("z3", "universal proofs (8 brokers)", worst([r["result"] for r in proofs]),
                 _tally([r["result"] for r in proofs]), proved - started),
        StageRow("z3", "inductive invariants (IndInit, IndNext, IndProp)", worst([r["result"] for r in steps]),
                 _tally([r["result"] for r in steps]) + f"; strengthened: {len(strengthened)} of {len(invariants)}",
                 ended - proved),
    ]


def _tally(results: list[str]) -> str:
    return ", ".join(f"{results.count(r)} {r}" for r in (HOLDS, VIOLATED, UNKNOWN) if r in results)
