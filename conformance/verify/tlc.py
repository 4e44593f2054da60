"""The TLC stage of `kcm verify`: the ci model under the run's knobs, then the review matrix's rows
(kcm.conformance.review), each `as expected` when its design breaks what it is documented to break."""

from __future__ import annotations

from kcm.conformance.review import RowResult, review
from kcm.conformance.verify.stages import StageRow, VerifyContext
from kcm.spec.design_folder import DesignFolder
from kcm.spec.designs import VARIANTS, Variant, design_rows
from kcm.spec.verdicts import HOLDS, UNEXPECTED, UNKNOWN, worst


def stage(ctx: VerifyContext) -> list[StageRow]:
    """The TLC rows of `kcm verify`: the ci model under the run's knobs, exhaustively, then one row per review
    variant, `as expected` when the variant breaks what it is documented to break there (a safe variant
    nothing). By default only the unsafe variants, each checked for its documented invariants (a search that
    ends at the first bad state); `--full` checks every variant on every invariant."""
    if ctx.own_design is not None:
        return _design_rows(ctx, ctx.own_design)
    ci = Variant(f"ci ({ctx.knobs.describe()})", tuple(ctx.knobs.settings()), "ci")
    variants = [v for v in VARIANTS if (v.knobs != ctx.knobs or v.model != "ci") and (ctx.full or v.expected)]
    rows = review([ci, *variants], ctx.out / "tlc", workers=2, reporter=ctx.reporter, quick=not ctx.full,
                  coverage=ctx.coverage)
    return [_stage_row(row, row.variant is ci, ctx.full) for row in rows]


def _design_rows(ctx: VerifyContext, design: DesignFolder) -> list[StageRow]:
    """A design of one's own: its review rows (one per model of its manifest, `as expected` when it breaks what
    it is expected to), after the ci model under its hooks unless the manifest names ci; kcm's own review rows
    are not the design's."""
    ci = None if "ci" in design.models else Variant(f"ci (design {design.name})", tuple(design.base.settings()),
                                                    "ci", design=design)
    rows = [*([ci] if ci else []), *design_rows(design)]
    results = review(rows, ctx.out / "tlc", workers=2, reporter=ctx.reporter, quick=not ctx.full,
                     coverage=ctx.coverage)
    return [_stage_row(row, row.variant is ci, ctx.full) for row in results]


def _stage_row(row: RowResult, is_ci: bool, full: bool) -> StageRow:
    if row.errors:
        return StageRow("tlc", _check_name(row, is_ci), UNKNOWN, row.errors[0], row.seconds)
    shown = min(row.violated, default="")
    trace = (row.cells[shown].trace or "") if shown else ""
    if row.vacuous:
        return StageRow("tlc", _check_name(row, is_ci), UNEXPECTED,
                        f"vacuous: {', '.join(row.variant.model + ' never fires ' + a for a in row.vacuous)} "
                        f"(an action its configuration does not say never fires); "
                        f"kcm check --model {row.variant.model} --coverage", row.seconds)
    if is_ci:
        again = (f"--design {row.variant.design.path}" if row.variant.design is not None else
                 " ".join(f"--set {s}" for s in row.variant.settings))
        detail = (f"{_states(row):,} distinct states, exhaustive" if not row.violated else
                  f"violates {', '.join(sorted(row.violated))}: kcm check --model ci {again}")
        return StageRow("tlc", _check_name(row, is_ci), worst([cell.result for cell in row.cells.values()]), detail,
                        row.seconds, trace, shown)
    broken = ", ".join(sorted(row.violated)) or "nothing"
    detail = f"breaks {broken}"
    if not row.as_expected:
        detail += f", documented: {', '.join(sorted(row.variant.expected)) or 'nothing'}"
    elif not full and len(row.variant.expected) > 1:
        detail += f" (the first found of {len(row.variant.expected)} documented; --full checks each)"
    return StageRow("tlc", _check_name(row, is_ci), row.verdict, detail, row.seconds, trace, shown)


def _check_name(row: RowResult, is_ci: bool) -> str:
    label = row.variant.label
    return "model ci" if is_ci else f"review {label}" + ("" if label.endswith(f"({row.variant.model})") else
                                                         f" ({row.variant.model})")


def _states(row: RowResult) -> int:
    return max((cell.distinct_states for cell in row.cells.values() if cell.result == HOLDS), default=0)
