"""The one module that imports z3 (it ships no type stubs): everything z3 hands back is typed `Expr`.

The helpers here are the few idioms every part of the encoding uses: ITE folds over a fixed list of
candidates, minimum and maximum, and turning a model value back into a Python value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

import z3  # type: ignore[import-untyped]

Expr: TypeAlias = Any
"""A z3 expression (BoolRef, ArithRef, ArrayRef, ...); z3 has no stubs, so this is Any by necessity."""

__all__ = ["Expr", "z3"]

TRUE: Expr = z3.BoolVal(True)
FALSE: Expr = z3.BoolVal(False)


def int_const(name: str, width: int | None = None) -> Expr:
    """An integer constant: unbounded (Int), or a signed bit-vector of `width` bits for bounded search."""
    return z3.Int(name) if width is None else z3.BitVec(name, width)


def num(value: int, width: int | None = None) -> Expr:
    return z3.IntVal(value) if width is None else z3.BitVecVal(value, width)


def num_like(expr: Expr, value: int) -> Expr:
    """`value` in the sort of `expr` (Int or bit-vector)."""
    return z3.BitVecVal(value, expr.size()) if z3.is_bv(expr) else z3.IntVal(value)


def bool_const(name: str) -> Expr:
    return z3.Bool(name)


def int_array(name: str) -> Expr:
    return z3.Array(name, z3.IntSort(), z3.IntSort())


def bool_array(name: str) -> Expr:
    return z3.Array(name, z3.IntSort(), z3.BoolSort())


def const_int_array(value: int) -> Expr:
    return z3.K(z3.IntSort(), z3.IntVal(value))


def const_bool_array(value: bool) -> Expr:
    return z3.K(z3.IntSort(), z3.BoolVal(value))


def and_(*parts: Expr) -> Expr:
    flat = [p for p in parts if not (isinstance(p, bool) and p)]
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else z3.And(*flat)


def and_all(parts: Iterable[Expr]) -> Expr:
    return and_(*parts)


def or_(*parts: Expr) -> Expr:
    flat = list(parts)
    if not flat:
        return FALSE
    return flat[0] if len(flat) == 1 else z3.Or(*flat)


def or_all(parts: Iterable[Expr]) -> Expr:
    return or_(*parts)


def implies(a: Expr, b: Expr) -> Expr:
    return z3.Implies(a, b)


def not_(a: Expr) -> Expr:
    return z3.Not(a)


def ite(c: Expr, a: Expr, b: Expr) -> Expr:
    return z3.If(c, a, b)


def min2(a: Expr, b: Expr) -> Expr:
    return z3.If(a <= b, a, b)


def max2(a: Expr, b: Expr) -> Expr:
    return z3.If(a >= b, a, b)


def select(array: Expr, index: Expr) -> Expr:
    return z3.Select(array, index)


def store(array: Expr, index: Expr, value: Expr) -> Expr:
    return z3.Store(array, index, value)


def first(candidates: Sequence[tuple[Expr, Expr]], none: Expr | int) -> Expr:
    """The first `value` whose `condition` holds, scanning in order; `none` when no condition holds."""
    result: Expr = none
    for value, condition in reversed(candidates):
        result = z3.If(condition, value, result)
    return result


def count(conditions: Iterable[Expr], width: int | None = None) -> Expr:
    one, zero = num(1, width), num(0, width)
    return z3.Sum([z3.If(c, one, zero) for c in conditions] or [zero])


def py_value(model: Expr, expr: Expr) -> int | bool:
    """A model's value of an Int or Bool expression as a Python value (unconstrained values: 0 / False)."""
    value = model.eval(expr, model_completion=True)
    if z3.is_bool(value):
        return bool(z3.is_true(value))
    if z3.is_bv_value(value):
        return int(value.as_signed_long())
    return int(value.as_long())
