"""Host expressions compiled once into Python closures (specs/host-program.md HP-51 … HP-53).

The host interpreter evaluates the same expressions again and again (a launch's bounds and
arguments, ``ca := ra[s]``, a loop's condition, in every iteration of a time loop). Walking
the tree and dispatching on its node kinds at every evaluation costs more than the
arithmetic; :func:`compiled` turns an expression into a nest of closures once (per
expression object: the IR is immutable), each node's kind, operator and constant decided
at compile time.

The closures have exactly the semantics of the tree walk
(:meth:`sarek_py.host.interp.HostInterp._eval`, HP-51): the same values bit for bit and of
the same numpy type, the same errors (type, message, location) at the same point of the
evaluation order. A fast path is taken only where it is the same numpy operation: two
operands of one numpy scalar type under ``+ - * == != < <= > >= & | ^`` (numpy's scalar
operators run the ufunc's loop for that type), an integer ``min``/``max``, a conversion
that cannot fault, ``/`` and ``%`` on two integers of one type (C's, with the reference
interpreter's faults and messages, HP-52). Everything else (shifts, float-to-integer
conversions, float ``min``/``max``, other intrinsics, operands of two types or arrays) calls
:mod:`sarek_py.ir.interp_ops` as the tree walk does. An integer expression's last value is
kept across runs (:class:`HostExpr`, HP-53). Nothing is checked at compile time that
the tree walk checks at run time: a node the host cannot evaluate compiles to a closure
that raises when (and only when) it is reached.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from sarek_py.host.expr_memo import memo_inputs
from sarek_py.host.frame import Frame
from sarek_py.ir import interp_ops
from sarek_py.ir.host.program import HostError
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Loc,
    Read,
    Ref,
    Unary,
    UnaryOp,
    Var,
)
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import iter_nodes

#: a compiled expression: its value in a frame
Fn = Callable[[Frame], Any]

_MISSING = object()
_ndarray = np.ndarray

#: the operators whose numpy scalar form, on two operands of one numpy type, is the ufunc
#: that :func:`sarek_py.ir.interp_ops.binary` applies to scalars
_SAME_TYPE_OPS: dict[BinaryOp, Callable[[Any, Any], Any]] = {
    BinaryOp.ADD: operator.add,
    BinaryOp.SUB: operator.sub,
    BinaryOp.MUL: operator.mul,
    BinaryOp.EQ: operator.eq,
    BinaryOp.NE: operator.ne,
    BinaryOp.LT: operator.lt,
    BinaryOp.LE: operator.le,
    BinaryOp.GT: operator.gt,
    BinaryOp.GE: operator.ge,
    BinaryOp.BAND: operator.and_,
    BinaryOp.BOR: operator.or_,
    BinaryOp.BXOR: operator.xor,
}

#: the numpy scalar types of the host's types (specs/host-program.md): integers, floats,
#: and bool; an integer or bool converts without a fault
_INTS = frozenset({np.int32, np.int64})
_FLOATS = frozenset({np.float32, np.float64})
_INTS_AND_BOOL = _INTS | {np.bool_}
_NUMBERS = _INTS | _FLOATS
#: the operand types of each fast operator: arithmetic on numbers, comparisons and bitwise
#: operators on bool too
_ARITHMETIC = frozenset({BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL})


def scalar(v: Any) -> Any:
    """A 0-d result as its numpy scalar (what the tree walk's ``_scalar`` does)."""
    return v[()] if isinstance(v, np.ndarray) else v


def array_of(a: Var, f: Frame, loc: Loc | None) -> np.ndarray[Any, Any]:
    """The array ``a`` holds in ``f``; an error where it is not allocated."""
    arr = f.get_var(a)
    if not isinstance(arr, np.ndarray):
        raise HostError(f"array '{a.name}' is not allocated", loc)
    return arr


def element_index(a: Var, arr: np.ndarray[Any, Any], idx: list[Any],
                  loc: Loc | None) -> tuple[int, ...]:
    """The 0-based position of the element of ``a`` at the indices ``idx`` (declared lower
    bounds); an error naming the array when one is out of bounds."""
    assert isinstance(a.type, ArrayType)
    out = []
    for d, (i, lo) in enumerate(zip(idx, a.type.lower, strict=True)):
        k = int(i) - lo
        if not 0 <= k < arr.shape[d]:
            raise HostError(f"index {int(i)} of '{a.name}' (dimension {d}) is out of "
                            f"bounds {lo}:{lo + arr.shape[d] - 1}", loc)
        out.append(k)
    return tuple(out)


# ----------------------------------------------------------------------- the nodes


def _const(e: Const) -> Fn:
    t, v = e.type, e.value
    try:
        value = t.dtype.type(v)
    except Exception:  # noqa: BLE001 - raised where the tree walk raises it: when run
        def raising(f: Frame) -> Any:
            return t.dtype.type(v)
        return raising
    return lambda f: value  # numpy scalars are immutable


def _ref(e: Ref) -> Fn:
    v = e.var

    def ref(f: Frame) -> Any:
        x = f.own.get(v, _MISSING)
        if x is _MISSING:
            return f.get_var(v)
        return x
    return ref


def _length(e: Length) -> Fn:
    a, d, loc = e.array, e.dim, e.loc
    int32 = np.int32

    def length(f: Frame) -> Any:
        return int32(array_of(a, f, loc).shape[d])
    return length


def _read(e: Read) -> Fn:
    a, loc = e.array, e.loc
    idx = [_compile(i) for i in e.index]
    lower = a.type.lower if isinstance(a.type, ArrayType) else None
    if lower is not None and len(idx) == 1 == len(lower):
        (i0,), (lo,) = idx, lower

        def read1(f: Frame) -> Any:
            arr = array_of(a, f, loc)
            i = i0(f)
            k = int(i) - lo
            if not 0 <= k < arr.shape[0]:
                raise HostError(f"index {int(i)} of '{a.name}' (dimension 0) is out of "
                                f"bounds {lo}:{lo + arr.shape[0] - 1}", loc)
            return arr[(k,)]
        return read1

    def read(f: Frame) -> Any:
        arr = array_of(a, f, loc)
        return arr[element_index(a, arr, [i(f) for i in idx], loc)]
    return read


def _unary(e: Unary) -> Fn:
    op, x = e.op, _compile(e.arg)
    fast: Callable[[Any], Any] | None = \
        operator.neg if op is UnaryOp.NEG else operator.invert if op is UnaryOp.BNOT else None
    if fast is not None:
        operands = _NUMBERS if op is UnaryOp.NEG else _INTS_AND_BOOL

        def unary_fast(f: Frame) -> Any:
            a = x(f)
            if type(a) in operands:
                return fast(a)
            return scalar(interp_ops.unary(op, a))
        return unary_fast

    def unary(f: Frame) -> Any:
        return scalar(interp_ops.unary(op, x(f)))
    return unary


def _binary(e: Binary) -> Fn:
    op, x, y = e.op, _compile(e.lhs), _compile(e.rhs)
    true, false = np.True_, np.False_
    if op is BinaryOp.AND:
        def and_(f: Frame) -> Any:
            return true if bool(x(f)) and bool(y(f)) else false
        return and_
    if op is BinaryOp.OR:
        def or_(f: Frame) -> Any:
            return true if bool(x(f)) or bool(y(f)) else false
        return or_
    fast = _SAME_TYPE_OPS.get(op)
    binary = interp_ops.binary
    if fast is not None:
        numeric = _NUMBERS if op in _ARITHMETIC else _NUMBERS | {np.bool_}

        def binary_fast(f: Frame) -> Any:
            a = x(f)
            b = y(f)
            if type(a) is type(b) and type(a) in numeric:
                return fast(a, b)
            return scalar(binary(op, a, b, None))
        return binary_fast

    if op in (BinaryOp.DIV, BinaryOp.MOD):
        return _division(op, x, y)

    def binary_general(f: Frame) -> Any:
        a = x(f)
        return scalar(binary(op, a, y(f), None))
    return binary_general


def _division(op: BinaryOp, x: Fn, y: Fn) -> Fn:
    """C ``/`` and ``%`` (INT-5): on two integers of one type, computed on Python integers
    with :func:`sarek_py.ir.interp_ops.binary`'s faults and messages; otherwise by it."""
    binary = interp_ops.binary
    what = "division" if op is BinaryOp.DIV else "modulo"
    div = op is BinaryOp.DIV
    lowest = {np.int32: -(2 ** 31), np.int64: -(2 ** 63)}

    def division(f: Frame) -> Any:
        a = x(f)
        b = y(f)
        kind = type(a)
        if kind is type(b) and kind in _INTS:
            ia, ib = int(a), int(b)
            if ib == 0:
                raise interp_ops.LaneFault(f"integer {what} by zero ({ia} {op.value} 0)", 0)
            lo = lowest[kind]
            if ia == lo and ib == -1:
                raise interp_ops.LaneFault(f"integer overflow in {lo} {op.value} -1", 0)
            q = abs(ia) // abs(ib)
            if (ia < 0) != (ib < 0):
                q = -q
            return kind(q) if div else kind(ia - ib * q)
        return scalar(binary(op, a, b, None))
    return division


def _cast(e: Cast) -> Fn:
    to, x = e.to, _compile(e.arg)
    target = to.dtype.type
    dt = to.dtype
    cast = interp_ops.cast
    if to is Scalar.BOOL:
        def cast_general(f: Frame) -> Any:
            return scalar(cast(x(f), to, None))
        return cast_general
    # a conversion that cannot fault: integer (or bool) to anything, float to float
    safe = _INTS_AND_BOOL if to.is_int else _NUMBERS | {np.bool_}

    def cast_fast(f: Frame) -> Any:
        v = x(f)
        kind = type(v)
        if kind is target:
            return v
        if kind in safe:
            return v.astype(dt)
        return scalar(cast(v, to, None))
    return cast_fast


def _cond(e: Cond) -> Fn:
    c, x, y = _compile(e.cond), _compile(e.if_true), _compile(e.if_false)

    def cond(f: Frame) -> Any:
        return x(f) if bool(c(f)) else y(f)
    return cond


def _intrinsic(e: Intrinsic) -> Fn:
    name = e.name
    args = [_compile(a) for a in e.args]
    if not args:
        return _cannot(e)
    math = interp_ops.math
    if name in ("min", "max") and len(args) == 2:
        x, y = args
        low = name == "min"

        def min_max(f: Frame) -> Any:
            a = x(f)
            b = y(f)
            if type(a) is type(b) and type(a) in _INTS:
                return (a if a <= b else b) if low else (a if a >= b else b)
            return scalar(math(name, [a, b]))
        return min_max

    def intrinsic(f: Frame) -> Any:
        return scalar(math(name, [a(f) for a in args]))
    return intrinsic


def _cannot(e: Expr) -> Fn:
    message = (f"the host cannot evaluate {type(e).__name__} (helper calls and thread "
               "intrinsics belong in parallel loops)")
    loc = e.loc

    def cannot(f: Frame) -> Any:
        raise HostError(message, loc)
    return cannot


_COMPILERS: dict[type, Callable[[Any], Fn]] = {
    Const: _const,
    Ref: _ref,
    Length: _length,
    Read: _read,
    Unary: _unary,
    Binary: _binary,
    Cast: _cast,
    Cond: _cond,
    Intrinsic: _intrinsic,
}


def _compile(e: Expr) -> Fn:
    make = _COMPILERS.get(type(e))
    return _cannot(e) if make is None else make(e)


#: the fewest nodes of an expression whose last value is kept (HP-53): below it, building
#: the key of its inputs costs about what running its closure does
MEMO_MIN_NODES = 8


def _memo_worth(e: Expr) -> bool:
    n = 0
    for _ in iter_nodes(e):
        n += 1
        if n >= MEMO_MIN_NODES:
            return True
    return False


class HostExpr:
    """An expression the host interpreter evaluates (HP-51, HP-53): its closure, and, for
    an integer expression of :data:`MEMO_MIN_NODES` nodes or more, the inputs its value
    depends on (:func:`~sarek_py.host.expr_memo.memo_inputs`) and its last evaluation
    ``(key, value)`` -- one tuple, replaced whole, so that threads running programs at
    once never see the key of one evaluation with the value of another. Shared by every
    run of every program holding the expression: its value is a function of the key."""

    __slots__ = ("expr", "fn", "inputs", "last")

    def __init__(self, e: Expr) -> None:
        self.expr = e
        self.fn = _compile(e)
        self.inputs = memo_inputs((e,)) if _memo_worth(e) else None
        self.last: tuple[tuple[Any, ...], Any] | None = None


_ENTRIES: IdentityCache[Expr, HostExpr] = IdentityCache(HostExpr, 16384)


def host_expr(e: Expr) -> HostExpr:
    """The :class:`HostExpr` of ``e``, made at its first look-up."""
    return _ENTRIES.get(e)


def compiled(e: Expr) -> Fn:
    """The closure computing ``e`` in a frame (HP-51): numpy's floating-point warnings must
    be off, and a :class:`~sarek_py.ir.interp_ops.LaneFault` it raises is the caller's to
    locate (as for the tree walk)."""
    return _ENTRIES.get(e).fn


__all__ = ["MEMO_MIN_NODES", "Fn", "HostExpr", "array_of", "compiled", "element_index",
           "host_expr", "scalar"]
