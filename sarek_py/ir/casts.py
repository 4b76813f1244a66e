"""Which cast to write where C would convert implicitly (specs/ir.md IR-40, specs/frontend.md
FE-40).

Kernels have no implicit conversion: C's usual arithmetic conversions and Python's
promotions differ (``f32 * f64`` is ``f64`` in C, an ``int`` times a ``float`` is a double
in Python), and the bitwise promise of fusion needs one meaning. The checker's error
says instead which cast gives C's meaning, in the user's own words.
"""

from __future__ import annotations

from sarek_py.ir.types import Scalar


def _rank(t: Scalar) -> int:
    return {Scalar.I32: 0, Scalar.I64: 1, Scalar.F32: 2, Scalar.F64: 3}[t]


def operands_hint(lhs: str, lt: Scalar, rhs: str, rt: Scalar) -> str:
    """What to write for an operator on ``lhs : lt`` and ``rhs : rt`` (numeric, unequal):
    the operand C would convert, cast to the other's type (C's usual arithmetic
    conversions); between ``f32`` and ``f64`` also the cast that stays in ``f32``."""
    if not (lt.is_numeric and rt.is_numeric) or lt is rt:
        return "use a cast"
    low, low_t, high_t = (lhs, lt, rt) if _rank(lt) < _rank(rt) else (rhs, rt, lt)
    high = rhs if low is lhs else lhs
    hint = f"write {high_t}({low}) as C would convert it"
    if low_t is Scalar.F32 and high_t is Scalar.F64:
        hint += f", or {low_t}({high}) to compute in {low_t}"
    return hint


def value_hint(value: str, vt: Scalar, target: Scalar) -> str:
    """What to write to store or assign ``value : vt`` where a ``target`` is wanted."""
    if not (vt.is_numeric and target.is_numeric):
        return ""
    return f": write {target}({value}), the conversion C would make"
