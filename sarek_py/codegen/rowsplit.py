"""Where a row of threads passes the kernel's leading guard (specs/native.md, NAT-65 …).

An offloaded n-D nest starts with ``let``s of its indices and the guard that sends the
threads outside the nest away, ``if j_64 < lo || j_64 > hi || i_64 < lo || i_64 > hi then
return``; a hand-written kernel often starts ``if i < n then …``. In a row of a block
(``thread_idx_x`` counting, the rest of the thread's place fixed) each test of such a guard
is either the same for the whole row or holds on one side of a point: the values compared
are affine in the thread's x with coefficient ±1. The c backend's launch then computes,
once per row, the range of the row's threads that pass the guard and runs them without it
(an unguarded, vectorisable loop), the others with it.

:func:`row_guard` finds such a guard: the kernel's body is a chain of ``let``s, then an
``if`` without ``else``, either ``if G then return`` with ``G`` an ``||`` of tests, or ``if
C then S`` with ``C`` an ``&&`` of tests (a thread passes where each test of ``G`` fails,
or where each test of ``C`` holds), each test

* a comparison ``a < b`` (``<= > >=``) of integers whose difference is ``c * x + r``, ``c``
  one of -1, 0, 1, ``x`` the thread's ``thread_idx_x`` (``global_idx_x`` and
  ``global_thread_id`` are ``x`` plus the row's first value), every operation between
  them and the comparison proved by the ranges not to wrap, so the value is exactly the
  affine one;
* or a test that does not depend on the thread's x at all.

Every value that stays in the bounds (``r``, a test without x) reads only the kernel's
scalar parameters, extents and the thread intrinsics, which the launch function has for the
row's first thread; it calls no helper and reads no array or local. Anything else gives
``None``: the launch keeps one guarded loop (the guard is then tested by every thread, as
before).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from sarek_py.analysis.ranges import Range, int_range, intrinsic_key, no_overflow, type_range
from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Empty,
    Expr,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Ref,
    Return,
    Seq,
    Stmt,
    Unary,
    UnaryOp,
    Var,
)
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes, map_node, substitute

#: the thread intrinsics that change along a row (x counting), each by one from thread to
#: thread (``global_thread_id`` too: a row's threads are numbered one after the other)
_X = {"thread_idx_x": 1, "global_idx_x": 1, "global_thread_id": 1}
_MOVING = set(_X)
#: a thread that runs is numbered below the count, at most 2^31 - 1 (LCH-21), and so is
#: its global x (threads past the count do not run, NAT-31): both are at most 2^31 - 2
_GLOBAL_X: Range = (0, type_range(Scalar.I32)[1] - 1)


@attrs.frozen
class Bound:
    """One test of the guard in a row, which a thread passes where the test is false: with
    ``step`` 1 the threads ``x >= lhs - rhs`` (plus 1 when ``strict`` is false) pass it,
    with ``step`` -1 the threads ``x <= lhs - rhs`` (less 1 when ``strict`` is false);
    with ``step`` 0 the test is ``lhs`` (a ``bool`` expression), the same for the whole
    row. ``lhs`` and ``rhs`` are their values at ``x = 0``, integers whose difference, and
    that plus or less one, the ranges keep within ``long long``."""

    step: int
    lhs: Expr
    rhs: Expr | None = None
    strict: bool = True


@attrs.frozen
class RowGuard:
    """The kernel's leading guard (the ``If`` statement of the body, by identity) and its
    tests as bounds on the row's threads that pass it; ``enter``: the guard is ``if C then
    S`` (the threads that pass run ``S`` without testing ``C``), else ``if G then
    return`` (they go on without testing ``G``)."""

    guard: If = attrs.field(eq=False)
    bounds: tuple[Bound, ...]
    enter: bool = False


def row_guard(kernel: Kernel) -> RowGuard | None:
    """The leading guard of ``kernel`` split into per-row bounds (module doc), or None."""
    params = {p.id for p in kernel.params}
    lets: dict[Var, Expr] = {}
    s: Stmt = kernel.body
    while True:
        if isinstance(s, Let) and not s.var.mutable and s.var.scalar is not Scalar.UNIT:
            lets[s.var] = substitute(s.value, lets)
            s = s.body
        elif isinstance(s, Seq) and s.stmts:
            s = s.stmts[0]
        else:
            break
    if not (isinstance(s, If) and _is_empty(s.else_)):
        return None
    enter = not _is_return(s.then)
    cond = substitute(s.cond, lets)
    # `if G then return`: a thread passes where every test of G fails; `if C then S`: it
    # runs S where every test of C holds, i.e. where each test's negation fails
    tests = [_negate(t) for t in _split(cond, BinaryOp.AND)] if enter \
        else _split(cond, BinaryOp.OR)
    env: dict[int, Range] = {intrinsic_key(n): _GLOBAL_X for n in ("global_idx_x",
                                                                    "global_thread_id")}
    bounds: list[Bound] = []
    for test in tests:
        b = _bound(test, params, env)
        if b is None:
            return None
        bounds.append(b)
    if not any(b.step for b in bounds):
        return None  # the same for the whole row: nothing to split
    return RowGuard(s, tuple(bounds), enter)


def _is_return(s: Stmt) -> bool:
    if isinstance(s, Seq):
        return len(s.stmts) == 1 and _is_return(s.stmts[0])
    return isinstance(s, Return) and s.value is None


def _is_empty(s: Stmt | None) -> bool:
    return s is None or isinstance(s, Empty) or (isinstance(s, Seq) and not s.stmts)


def _split(e: Expr, op: BinaryOp) -> list[Expr]:
    """The operands of a chain of ``op`` (``||`` or ``&&``)."""
    if isinstance(e, Binary) and e.op is op:
        return [*_split(e.lhs, op), *_split(e.rhs, op)]
    return [e]


_NOT = {BinaryOp.LT: BinaryOp.GE, BinaryOp.LE: BinaryOp.GT, BinaryOp.GT: BinaryOp.LE,
        BinaryOp.GE: BinaryOp.LT}


def _negate(e: Expr) -> Expr:
    """``!e``, an integer comparison as the opposite comparison (exact for integers)."""
    if isinstance(e, Binary) and e.op in _NOT and scalar_type_of(e.lhs).is_int:
        return Binary(_NOT[e.op], e.lhs, e.rhs)
    if isinstance(e, Unary) and e.op is UnaryOp.NOT:
        return e.arg
    return Unary(UnaryOp.NOT, e)


_FLIP = {BinaryOp.GT: BinaryOp.LT, BinaryOp.GE: BinaryOp.LE}


def _bound(test: Expr, params: set[int], env: Mapping[int, Range]) -> Bound | None:
    """``test`` (one disjunct of the guard) as a :class:`Bound`, or None."""
    if not _moves(test):
        return Bound(0, test) if _fixed(test, params) else None
    if not (isinstance(test, Binary) and test.op in (BinaryOp.LT, BinaryOp.LE,
                                                     BinaryOp.GT, BinaryOp.GE)):
        return None
    a, b = test.lhs, test.rhs
    op: BinaryOp = test.op
    if op in _FLIP:
        a, b, op = b, a, _FLIP[op]
    if not scalar_type_of(a).is_int:
        return None
    ca, cb = _coef(a, params, env), _coef(b, params, env)
    if ca is None or cb is None or ca - cb not in (-1, 1):
        return None
    ra, rb = at_zero(a), at_zero(b)
    (la, ha), (lb, hb) = int_range(ra, env), int_range(rb, env)
    i64_lo, i64_hi = type_range(Scalar.I64)
    if la - hb - 1 < i64_lo or ha - lb + 1 > i64_hi or lb - ha - 1 < i64_lo \
            or hb - la + 1 > i64_hi:
        return None  # the difference, a step of one further, must stay within 64 bits
    # a < b holds where (ca - cb) * x < rb - ra: with ca - cb = 1 it fails from x = rb - ra
    # on, with -1 up to x = ra - rb (<=: one further)
    if ca - cb == 1:
        return Bound(1, rb, ra, op is BinaryOp.LT)
    return Bound(-1, ra, rb, op is BinaryOp.LT)


def _moves(e: Expr) -> bool:
    return any(isinstance(n, Intrinsic) and n.name in _MOVING for n in iter_nodes(e))


def _fixed(e: Expr, params: set[int]) -> bool:
    """Whether ``e`` reads only what the launch function has for a row: scalar
    parameters, extents, constants and the thread intrinsics (no helper, no array read,
    no local)."""
    for n in iter_nodes(e):
        match n:
            case Ref(var=v) if v.id not in params:
                return False
            case Intrinsic(name=name) if name not in THREAD_INTRINSICS and name not in (
                    "min", "max", "abs"):
                return False
            case Const() | Ref() | Length() | Intrinsic() | Unary() | Binary() | Cast() | Cond():
                pass
            case _:
                return False
    return True


def _coef(e: Expr, params: set[int], env: Mapping[int, Range]) -> int | None:
    """The ``c`` of ``e == c * x + e(x = 0)`` for every thread of a row (``x`` the
    thread's ``thread_idx_x``), where no operation on the way can wrap; None otherwise."""
    if not _moves(e):
        return 0 if _fixed(e, params) else None
    t = scalar_type_of(e)
    match e:
        case Intrinsic(name=n, args=()) if n in _X:
            return _X[n]
        case Cast(to=to, arg=a) if to in (Scalar.I32, Scalar.I64) and scalar_type_of(a) in (
                Scalar.I32, Scalar.I64):
            c = _coef(a, params, env)
            lo, hi = int_range(a, env)
            t_lo, t_hi = type_range(to)
            return c if c is not None and t_lo <= lo and hi <= t_hi else None
        case Unary(op=UnaryOp.NEG, arg=a):
            c = _coef(a, params, env)
            ok = int_range(a, env)[0] > type_range(t)[0]
            return -c if c is not None and ok else None
        case Binary(op=BinaryOp.ADD | BinaryOp.SUB as op, lhs=a, rhs=b):
            ca, cb = _coef(a, params, env), _coef(b, params, env)
            if ca is None or cb is None or not no_overflow(op, int_range(a, env),
                                                           int_range(b, env), t):
                return None
            return ca + cb if op is BinaryOp.ADD else ca - cb
        case Binary(op=BinaryOp.MUL, lhs=a, rhs=b):
            k, other = (a, b) if isinstance(a, Const) else (b, a)
            if not isinstance(k, Const) or not isinstance(k.value, int):
                return None
            c = _coef(other, params, env)
            if c is None or not no_overflow(BinaryOp.MUL, int_range(a, env),
                                            int_range(b, env), t):
                return None
            return k.value * c
    return None


def at_zero(e: Expr) -> Expr:
    """``e`` for the row's first thread, ``thread_idx_x`` 0 (``global_idx_x`` then is
    ``block_idx_x * block_dim_x``, below 2^31 by LCH-21; ``global_thread_id`` stays: the
    launch function sets the row's ``flat`` to its first thread's number)."""

    def first(x: Expr) -> Expr | None:
        match x:
            case Intrinsic(name="thread_idx_x"):
                return Const(0, Scalar.I32)
            case Intrinsic(name="global_idx_x"):
                return Binary(BinaryOp.MUL, Intrinsic("block_idx_x"), Intrinsic("block_dim_x"))
            # what x = 0 leaves, written as a C programmer would: (long long)0 is 0LL,
            # and a + 0 is a (adding zero changes no integer)
            case Cast(to=Scalar.I64, arg=Const(value=int(v), type=Scalar.I32)):
                return Const(v, Scalar.I64)
            case Binary(op=BinaryOp.ADD | BinaryOp.SUB, lhs=a, rhs=Const(value=0, type=t)) \
                    if t.is_int:
                return a
            case Binary(op=BinaryOp.ADD, lhs=Const(value=0, type=t), rhs=b) if t.is_int:
                return b
        return None

    return map_node(e, expr=first)


@attrs.frozen
class RowRange:
    """The C of a :class:`RowGuard` for the launch function, which evaluates it once per
    row: the row's threads ``x`` with ``x >= f`` for every ``f`` of ``first`` and ``x <
    e`` for every ``e`` of ``end`` (``long long`` expressions) pass the guard, unless one
    of ``whole`` (``bool`` expressions) holds, which sends the whole row to it."""

    first: tuple[str, ...]
    end: tuple[str, ...]
    whole: tuple[str, ...]
