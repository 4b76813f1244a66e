"""Integer value ranges: where the emitted C may drop its wrap-around guards (CG-18, CG-19).

The interpreter's ``i32``/``i64`` ``+ - *``, unary ``-`` and ``<<`` wrap (INT-4, INT-6);
C's signed ones are undefined on overflow. The emitter writes them through the unsigned
type unless this module proves that they cannot overflow, and writes a ``for`` loop in its
plain C form only where the loop counter provably cannot step past the type's end.

:func:`int_range` gives a sound interval ``(lo, hi)`` of an integer expression's values,
from constants, lengths, thread indices, the ranges of immutable variables in scope
(``env``) and interval arithmetic that does not overflow; anything else is the type's
whole range. At a launch (CG-70) ``env`` may also hold the exact extents of arrays and the
ranges of the thread intrinsics, under the negative keys :func:`length_key` and
:func:`intrinsic_key`; the emitter's ``env`` holds none. :func:`refine` narrows the ranges of immutable variables under a condition
known to hold (``i < n`` gives ``i <= hi(n) - 1``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sarek_py.ir.intrinsics import GLOBAL_IDS, THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Ref,
    Stmt,
    Unary,
    UnaryOp,
    Var,
)
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_exprs

#: an inclusive interval of integer values
Range = tuple[int, int]

_BITS = {Scalar.I32: 32, Scalar.I64: 64}


def length_key(array_id: int, dim: int) -> int:
    """The ``env`` key of the exact extent of dimension ``dim`` of the array variable
    ``array_id`` where a launch knows it (CG-70): negative, so it is no variable's id."""
    return -(32 * (array_id + 1) + dim + 1)


def intrinsic_key(name: str) -> int:
    """The ``env`` key of a thread intrinsic's range in a known launch (CG-70)."""
    return -(THREAD_INTRINSICS.index(name) + 9)


def type_range(t: Scalar) -> Range:
    """Every value of integer type ``t`` (``bool``: 0 and 1)."""
    if t is Scalar.BOOL:
        return (0, 1)
    bits = _BITS[t]
    return (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def fits(r: Range, t: Scalar) -> bool:
    lo, hi = type_range(t)
    return lo <= r[0] and r[1] <= hi


def _arith(op: BinaryOp, a: Range, b: Range) -> Range | None:
    """The exact interval of ``a op b`` for ``+ - *`` in unbounded integers."""
    if op is BinaryOp.ADD:
        return (a[0] + b[0], a[1] + b[1])
    if op is BinaryOp.SUB:
        return (a[0] - b[1], a[1] - b[0])
    if op is BinaryOp.MUL:
        ps = [x * y for x in a for y in b]
        return (min(ps), max(ps))
    return None


def no_overflow(op: BinaryOp, a: Range, b: Range, t: Scalar) -> bool:
    """Whether ``a op b`` (``+ - * <<``) on operands in these ranges always fits ``t``."""
    if op is BinaryOp.SHL:
        if a[0] < 0 or b[0] < 0:
            return False
        return b[1] < _BITS[t] and fits((0, a[1] << b[1]), t)
    r = _arith(op, a, b)
    return r is not None and fits(r, t)


def int_range(e: Expr, env: Mapping[int, Range]) -> Range:
    """A sound interval of the values of integer (or ``bool``) expression ``e``."""
    t = scalar_type_of(e)
    full = type_range(t)
    r = _range(e, env, t)
    if r is None or not fits(r, t):
        return full
    return r


def _range(e: Expr, env: Mapping[int, Range], t: Scalar) -> Range | None:
    match e:
        case Const(value=v) if isinstance(v, (int, bool)):
            return (int(v), int(v))
        case Ref(var=v):
            return env.get(v.id)
        case Length(array=a, dim=d):
            return env.get(length_key(a.id, d), (0, type_range(Scalar.I32)[1]))
        case Intrinsic(name=n, args=()) if n in THREAD_INTRINSICS and intrinsic_key(n) in env:
            return env[intrinsic_key(n)]  # a launch's own value (CG-70)
        case Intrinsic(name=n, args=()) if n in THREAD_INTRINSICS:
            # block-relative indices are never negative and extents are at least 1; a
            # global index is the C conversion of a wider number, so any int
            if n in GLOBAL_IDS or n.startswith("global_idx"):
                return None
            return (1 if n.startswith(("block_dim", "grid_dim")) else 0,
                    type_range(Scalar.I32)[1])
        case Intrinsic(name="min" | "max" as n, args=(a, b)) if t.is_int:
            ra, rb = int_range(a, env), int_range(b, env)
            pick = min if n == "min" else max
            return (pick(ra[0], rb[0]), pick(ra[1], rb[1]))
        case Cast(to=to, arg=a) if to.is_int:
            src = scalar_type_of(a)
            if src.is_int or src is Scalar.BOOL:
                r = int_range(a, env)
                return r if fits(r, to) else None
            return None
        case Unary(op=UnaryOp.NEG, arg=a):
            r = int_range(a, env)
            return (-r[1], -r[0])
        case Binary(op=op, lhs=a, rhs=b) if op in (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL):
            return _arith(op, int_range(a, env), int_range(b, env))
        case Binary(op=BinaryOp.MOD, lhs=a, rhs=b) if t.is_int:
            # C's remainder: the dividend's sign, smaller in size than the divisor and
            # than the dividend (a zero divisor is never computed: CG-7)
            ra, rb = int_range(a, env), int_range(b, env)
            m = max(abs(rb[0]), abs(rb[1])) - 1
            return (0 if ra[0] >= 0 else max(ra[0], -m), 0 if ra[1] <= 0 else min(ra[1], m))
        case Binary(op=BinaryOp.DIV, lhs=a, rhs=b) if t.is_int and int_range(b, env)[0] >= 1:
            # truncating division by a positive divisor: monotone in each operand
            ra, rb = int_range(a, env), int_range(b, env)
            qs = [_tdiv(x, y) for x in ra for y in rb]
            return (min(qs), max(qs))
        case Binary(op=BinaryOp.BAND, rhs=Const(value=int(c))) if c >= 0:
            return (0, c)
        case Binary(op=BinaryOp.SHR, rhs=Const(value=int(c))) if 0 <= c < _BITS.get(t, 0):
            ra = int_range(e.lhs, env)
            return (ra[0] >> c, ra[1] >> c)
        case Cond(if_true=a, if_false=b):
            ra, rb = int_range(a, env), int_range(b, env)
            return (min(ra[0], rb[0]), max(ra[1], rb[1]))
    return None


def _tdiv(a: int, c: int) -> int:
    """C's truncating division by a positive ``c``."""
    q = abs(a) // c
    return q if a >= 0 else -q


_FLIP = {BinaryOp.LT: BinaryOp.GT, BinaryOp.LE: BinaryOp.GE, BinaryOp.GT: BinaryOp.LT,
         BinaryOp.GE: BinaryOp.LE, BinaryOp.EQ: BinaryOp.EQ, BinaryOp.NE: BinaryOp.NE}
_NOT = {BinaryOp.LT: BinaryOp.GE, BinaryOp.LE: BinaryOp.GT, BinaryOp.GT: BinaryOp.LE,
        BinaryOp.GE: BinaryOp.LT, BinaryOp.EQ: BinaryOp.NE, BinaryOp.NE: BinaryOp.EQ}


def refine(cond: Expr, env: Mapping[int, Range], holds: bool = True) -> dict[int, Range]:
    """``env`` narrowed by ``cond`` being ``holds``: comparisons of an immutable integer
    variable with an expression, under ``&&`` (true), ``||`` (false) and ``!``."""
    out = dict(env)
    match cond:
        case Unary(op=UnaryOp.NOT, arg=a):
            return refine(a, env, not holds)
        case Binary(op=BinaryOp.AND, lhs=a, rhs=b) if holds:
            return refine(b, refine(a, env, True), True)
        case Binary(op=BinaryOp.OR, lhs=a, rhs=b) if not holds:
            return refine(b, refine(a, env, False), False)
        case Binary(op=op, lhs=a, rhs=b) if op in _FLIP and scalar_type_of(a).is_int:
            if not holds:
                op = _NOT[op]
            for v, other, o in ((a, b, op), (b, a, _FLIP[op])):
                if isinstance(v, Ref) and not v.var.mutable:
                    cur = out.get(v.var.id, type_range(v.var.scalar))
                    out[v.var.id] = _narrow(cur, o, int_range(other, out))
    return out


def _narrow(cur: Range, op: BinaryOp, other: Range) -> Range:
    """``cur`` narrowed by ``v op x`` with ``x`` in ``other`` (never empty: a branch no
    value reaches keeps a one-value range)."""
    lo, hi = cur
    if op is BinaryOp.LT:
        hi = min(hi, other[1] - 1)
    elif op is BinaryOp.LE:
        hi = min(hi, other[1])
    elif op is BinaryOp.GT:
        lo = max(lo, other[0] + 1)
    elif op is BinaryOp.GE:
        lo = max(lo, other[0])
    elif op is BinaryOp.EQ:
        lo, hi = max(lo, other[0]), min(hi, other[1])
    if lo > hi:
        return cur
    return (lo, hi)


#: the largest constant offset :func:`offsets` counts (a larger one is left unproved)
MAX_OFFSET = 2**16


def _offset(e: Expr, v: Var) -> int | None:
    """``c`` when ``e`` is ``v`` plus or minus constants (``v - 1 + 2``, ``1 + v``)."""
    match e:
        case Ref(var=x) if x.id == v.id:
            return 0
        case Binary(op=BinaryOp.ADD, lhs=a, rhs=Const(value=int(c))) \
                | Binary(op=BinaryOp.ADD, lhs=Const(value=int(c)), rhs=a):
            r = _offset(a, v)
            return None if r is None else r + c
        case Binary(op=BinaryOp.SUB, lhs=a, rhs=Const(value=int(c))):
            r = _offset(a, v)
            return None if r is None else r - c
    return None


def offsets(node: Stmt | Expr, v: Var) -> Range:
    """The least and the greatest ``c`` (0 included) such that ``v + c`` is computed in
    ``node`` as a chain of ``+``/``-`` by constants from ``v`` (each step counts:
    ``v - 1 - 1`` gives -1 and -2), ignoring offsets larger than ``MAX_OFFSET``
    (specs/tiling.md TIL-13)."""
    lo = hi = 0
    for e in iter_exprs(node):
        if isinstance(e, Binary):
            c = _offset(e, v)
            if c is not None and abs(c) <= MAX_OFFSET:
                lo, hi = min(lo, c), max(hi, c)
    return (lo, hi)
