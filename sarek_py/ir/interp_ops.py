"""Operator semantics of the reference interpreter, on lane vectors (specs/interpreter.md).

A *value* is either a numpy array with one entry per lane or a numpy scalar (the same
value in every lane, "uniform"). Every function here computes in the operands' own dtype
(numpy float32/float64 round once per operation, integers wrap), and reports an operation
that C leaves undefined -- integer division by zero, ``MIN / -1``, a shift count outside
``[0, bits)``, a float-to-integer conversion of NaN or of a value out of range -- by
raising :class:`LaneFault` for the first *active* lane where it happens (INT-4..INT-10).
Inactive lanes may compute garbage; they never fault.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.interp_scratch import scratch
from sarek_py.ir.nodes import BinaryOp, UnaryOp
from sarek_py.ir.types import Scalar

#: a value over the lanes: one entry per lane, or a uniform numpy scalar
Val = NDArray[Any] | np.generic
#: the active lanes: ``None`` is every lane; otherwise a boolean array (possibly all False)
Mask = NDArray[np.bool_] | None


class LaneFault(Exception):
    """An undefined operation in ``lane`` (a global thread id); the caller adds the kernel
    name and the source location."""

    def __init__(self, message: str, lane: int):
        super().__init__(message)
        self.message = message
        self.lane = lane


def first_lane(bad: Val, mask: Mask) -> int | None:
    """The first active lane where ``bad`` holds, or ``None``."""
    if isinstance(bad, np.ndarray):
        b = bad if mask is None else bad & mask
        if not b.any():
            return None
        return int(np.argmax(b))
    if not bool(bad):
        return None
    if mask is None:
        return 0
    if not mask.any():
        return None
    return int(np.argmax(mask))


def lane_value(v: Val, lane: int) -> Any:
    """The value ``v`` holds in ``lane`` (a Python scalar)."""
    if isinstance(v, np.ndarray):
        return v[lane].item()
    return v.item()


# ---------------------------------------------------------------------------- arithmetic


def _int_div(op: BinaryOp, a: Val, b: Val, mask: Mask) -> Val:
    """C ``/`` (truncating) and ``%`` (sign of the dividend) on integers (INT-5)."""
    if (
        not isinstance(b, np.ndarray) and int(b) > 0
        and isinstance(a, np.ndarray) and a.size and a.min() >= 0
    ):
        # non-negative by positive: floor and truncation agree (numpy divides fast by a
        # uniform divisor)
        fast: Val = np.floor_divide(a, b) if op is BinaryOp.DIV else np.remainder(a, b)
        return fast
    lane = first_lane(b == 0, mask)
    if lane is not None:
        what = "division" if op is BinaryOp.DIV else "modulo"
        raise LaneFault(f"integer {what} by zero ({lane_value(a, lane)} {op.value} 0)", lane)
    lo = np.iinfo(a.dtype).min
    lane = first_lane((a == lo) & (b == -1), mask)
    if lane is not None:
        raise LaneFault(f"integer overflow in {lo} {op.value} -1", lane)
    r = np.fmod(a, b)
    if op is BinaryOp.MOD:
        return r
    # a - r is an exact multiple of b, so floor division is exact there
    q: Val = np.floor_divide(a - r, b)
    return q


def _shift(op: BinaryOp, a: Val, b: Val, mask: Mask) -> Val:
    """``<<`` and ``>>`` with a count in ``[0, bits)`` (INT-6). ``>>`` is arithmetic on
    the signed types; ``<<`` keeps the low bits (two's complement)."""
    bits = a.dtype.itemsize * 8
    cnt: Any = b
    bad: Val = (cnt < 0) | (cnt >= bits)
    lane = first_lane(bad, mask)
    if lane is not None:
        raise LaneFault(
            f"shift count {lane_value(b, lane)} outside [0, {bits}) in "
            f"{lane_value(a, lane)} {op.value} {lane_value(b, lane)}",
            lane,
        )
    if isinstance(bad, np.ndarray) and bad.any():
        b = np.where(bad, 0, b)
    count = b.astype(a.dtype)
    out: Val = np.left_shift(a, count) if op is BinaryOp.SHL else np.right_shift(a, count)
    return out


_BOOL = np.dtype(np.bool_)

_PLAIN = {
    BinaryOp.ADD: np.add,
    BinaryOp.SUB: np.subtract,
    BinaryOp.MUL: np.multiply,
    BinaryOp.EQ: np.equal,
    BinaryOp.NE: np.not_equal,
    BinaryOp.LT: np.less,
    BinaryOp.LE: np.less_equal,
    BinaryOp.GT: np.greater,
    BinaryOp.GE: np.greater_equal,
    BinaryOp.BAND: np.bitwise_and,
    BinaryOp.BOR: np.bitwise_or,
    BinaryOp.BXOR: np.bitwise_xor,
}


def binary(op: BinaryOp, a: Val, b: Val, mask: Mask) -> Val:
    """A strict binary operator (``&&``/``||`` are short-circuited by the caller).

    Both operands have the same type (shift counts may be of another integer type).
    """
    f = _PLAIN.get(op)
    if f is not None:
        out: Val
        lanes = a if isinstance(a, np.ndarray) else b
        if isinstance(lanes, np.ndarray):
            dt = _BOOL if op.is_compare else a.dtype
            out = f(a, b, out=scratch(dt, lanes.size))
        else:
            out = f(a, b)
        return out
    if op.is_shift:
        return _shift(op, a, b, mask)
    if op in (BinaryOp.DIV, BinaryOp.MOD):
        if np.issubdtype(a.dtype, np.integer):
            return _int_div(op, a, b, mask)
        res: Val = np.true_divide(a, b) if op is BinaryOp.DIV else np.fmod(a, b)
        return res
    if op is BinaryOp.AND:
        return np.logical_and(a, b)
    if op is BinaryOp.OR:
        return np.logical_or(a, b)
    raise ValueError(f"unknown binary operator {op}")


def unary(op: UnaryOp, a: Val) -> Val:
    """``-`` (wraps on integers), ``!`` on bool, ``~`` on integers."""
    out: Val
    if op is UnaryOp.NEG:
        out = np.negative(a)
    elif op is UnaryOp.NOT:
        out = np.logical_not(a)
    else:
        out = np.invert(a)
    return out


# ---------------------------------------------------------------------------- casts


def cast(v: Val, to: Scalar, mask: Mask) -> Val:
    """A C conversion (INT-8): integer to integer wraps, integer to float rounds to
    nearest, float to float rounds, float to integer truncates toward zero and faults on
    NaN or on a value out of the target's range; to bool is ``!= 0``; bool is 0 or 1."""
    dt = to.dtype
    if v.dtype == dt:
        return v
    if to is Scalar.BOOL:
        out: Val = np.not_equal(v, 0)
        return out
    if np.issubdtype(v.dtype, np.floating) and to.is_int:
        bits = dt.itemsize * 8
        t: Any = np.trunc(v)
        ok: Any = (t >= -(2.0 ** (bits - 1))) & (t < 2.0 ** (bits - 1))
        lane = first_lane(~ok, mask)
        if lane is not None:
            raise LaneFault(
                f"conversion of {lane_value(v, lane)!r} ({v.dtype}) to {to} is out of range",
                lane,
            )
        if isinstance(ok, np.ndarray) and not ok.all():
            t = np.where(ok, t, 0)
        res: Val = t.astype(dt)
        return res
    return v.astype(dt)


# ---------------------------------------------------------------------------- math


_FLOAT_MATH = {
    "sqrt": np.sqrt,
    "floor": np.floor,
    "ceil": np.ceil,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
}


def math(name: str, args: list[Val]) -> Val:
    """A math intrinsic in its argument's dtype (INT-10): ``min``/``max`` on floats are C's
    ``fmin``/``fmax`` (a NaN operand yields the other one), ``abs`` of the most negative
    integer wraps to itself."""
    a = args[0]
    out: Val
    is_float = np.issubdtype(a.dtype, np.floating)
    if name in _FLOAT_MATH:
        out = _FLOAT_MATH[name](a)
    elif name == "abs":
        out = np.abs(a)
    elif name == "min":
        out = _zero_signed(np.fmin(a, args[1]), a, args[1], True) if is_float \
            else np.minimum(a, args[1])
    elif name == "max":
        out = _zero_signed(np.fmax(a, args[1]), a, args[1], False) if is_float \
            else np.maximum(a, args[1])
    elif name == "pow":
        out = np.power(a, args[1])
    else:
        raise ValueError(f"unknown math intrinsic {name}")
    return out


def _zero_signed(r: Any, a: Any, b: Any, low: bool) -> Any:
    """``fmin``/``fmax`` with ``-0.0`` below ``+0.0`` (IR-8, CG-40): where the operands are
    equal the one whose sign says so (``a == b`` holds for two zeros of either sign)."""
    # NAT-42: a NaN operand, quiet or signalling, yields the other one (numpy's scalar
    # fmin, glibc's, gives a NaN for a signalling NaN where its vector loop does not)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if np.any(nan_a) or np.any(nan_b):
        r = np.where(nan_a, b, np.where(nan_b, a, r)).astype(r.dtype, copy=False)
        r = r[()] if np.ndim(r) == 0 else r
    eq = a == b
    if not np.any(eq):
        return r
    pick = np.where(np.signbit(a), a, b) if low else np.where(np.signbit(a), b, a)
    out = np.where(eq, pick, r).astype(r.dtype, copy=False)
    return out[()] if np.ndim(r) == 0 else out

