"""Wrap-around checks for the affine analysis (specs/affine.md, AFF-17).

The affine analysis takes integer arithmetic to be exact (AFF-4), but the interpreter and
the devices wrap (specs/interpreter.md INT-4): a guard ``i + 2147483647 >= 2147483647`` is
true for every ``i >= 0`` in exact arithmetic and false for ``i >= 1`` on the device. A
proof by the affine analysis therefore only holds where no integer subexpression it
relies on leaves its type. :func:`wrap_risk` finds an affine subexpression not proved to
stay within its type from what is known (loop boxes, thread ranges) and the range of every
atom (its type's, or ``[-bound, bound]`` for the atoms a host test can check at run time);
:func:`bound_check` is that host test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs

from sarek_py.analysis.affine.conditions import Constraint, Dnf, Mode, ge0, to_dnf
from sarek_py.analysis.affine.fm import bounds_of
from sarek_py.analysis.affine.forms import AffineCtx, AffineForm, Atom, to_affine
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    For,
    If,
    Let,
    Pragma,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Unary,
    UnaryOp,
    Var,
    While,
    iter_stmts,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import ends_every_path, iter_nodes

__all__ = ["TYPE_RANGE", "WRAP_BOUND", "Wrap", "bound_check", "find_wrap", "guarded_exprs",
           "tests_and_lets", "wrap_risk"]

#: the bound a host test may impose on run-time atoms (sizes, host scalars)
WRAP_BOUND = 2**28

TYPE_RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}


def tests_and_lets(body: Stmt) -> tuple[list[Expr], dict[Var, Expr]]:
    """What a proof about ``body`` relies on besides subscripts: the condition of every
    ``if`` and the value of every immutable ``let`` (in order), and the ``let``
    definitions the analysis may see through."""
    exprs: list[Expr] = []
    defs: dict[Var, Expr] = {}
    for s in iter_stmts(body):
        match s:
            case If(cond=c):
                exprs.append(c)
            case Let(var=v, value=val) if not v.mutable:
                exprs.append(val)
                defs[v] = val
            case _:
                pass
    return exprs, defs


def _range(a: Atom, bound: int | None) -> list[Constraint | bool]:
    f = AffineForm.of_atom(a)
    if bound is not None:
        return [ge0(f + bound), ge0(bound - f)]
    t = type_of(a)
    if t not in TYPE_RANGE:
        return []
    lo, hi = TYPE_RANGE[t]
    return [ge0(f - lo), ge0(hi - f)]


def wrap_risk(
    exprs: Iterable[Expr],
    ctx: AffineCtx,
    known: Sequence[Constraint | bool] = (),
    bounded: Callable[[Atom], bool] = lambda a: False,
    bound: int | None = None,
) -> Expr | None:
    """The first integer subexpression (arithmetic or cast) of ``exprs`` that is affine in
    ``ctx`` but not proved to stay within its type, or ``None``.

    ``known`` holds what is known of the atoms (e.g. a loop index within its bounds);
    every atom of a form or of ``known`` is also within its type, or within
    ``[-bound, bound]`` when ``bounded(atom)`` and ``bound`` is given (to be checked at
    run time by :func:`bound_check`). Non-affine subexpressions are not looked at: the
    analysis does not rely on them.
    """
    known_atoms: set[Atom] = set()
    for c in known:
        if isinstance(c, Constraint):
            known_atoms |= set(c.form.atoms)
    for e in exprs:
        for sub in iter_nodes(e):
            if not isinstance(sub, (Binary, Unary, Cast)):
                continue
            t = type_of(sub)
            if t not in TYPE_RANGE:
                continue
            f = to_affine(sub, ctx)
            if f is None:
                continue
            if f.is_constant and f.const.denominator == 1:
                lo = hi = int(f.const)
            else:
                facts: list[Constraint | bool] = list(known)
                for a in sorted(set(f.atoms) | known_atoms, key=repr):
                    facts += _range(a, bound if bounded(a) else None)
                lo_, hi_ = bounds_of(f, Dnf.of(*facts))
                if lo_ is None or hi_ is None:
                    return sub
                lo, hi = lo_, hi_
            tlo, thi = TYPE_RANGE[t]
            if lo < tlo or hi > thi:
                return sub
    return None


def bound_check(atoms: Iterable[Atom], bound: int = WRAP_BOUND) -> Expr | None:
    """``-bound <= a && a <= bound`` (in ``i64``) for every atom, or ``None`` for none."""
    tests: list[Expr] = []
    for a in atoms:
        x: Expr = a if type_of(a) is Scalar.I64 else Cast(Scalar.I64, a)
        tests.append(Binary(BinaryOp.GE, x, Const(-bound, Scalar.I64)))
        tests.append(Binary(BinaryOp.LE, x, Const(bound, Scalar.I64)))
    if not tests:
        return None
    out = tests[0]
    for t in tests[1:]:
        out = Binary(BinaryOp.AND, out, t)
    return out



# ------------------------------------------------------------ path-sensitive (AFF-19)


@attrs.frozen
class Wrap:
    """An integer subexpression not proved to stay within its type: the type, and the
    bounds found for it from what is known (``None``: no bound found)."""

    expr: Expr
    type: Scalar
    lo: int | None
    hi: int | None

    def text(self) -> str:
        """The expression and the bound of its type that it is not proved to keep."""
        tlo, thi = TYPE_RANGE[self.type]
        e = f"`{print_expr(self.expr)}`"
        if self.hi is None or self.hi > thi:
            reach = "is not bounded above by what is known" if self.hi is None else \
                f"may reach {self.hi}"
            return f"{e} may exceed {thi}, the largest {self.type} ({e} {reach})"
        reach = "is not bounded below by what is known" if self.lo is None else \
            f"may reach {self.lo}"
        return f"{e} may fall below {tlo}, the smallest {self.type} ({e} {reach})"


def guarded_exprs(body: Stmt, ctx: AffineCtx,
                  stores_of: Var | None = None) -> list[tuple[Expr, Dnf]]:
    """The expressions a proof about ``body`` relies on — the subscripts of the stores of
    ``stores_of``, every ``if`` test (the right side of ``&&``/``||`` separately, under
    the left side), every immutable ``let`` value — each with a condition implied by
    reaching it (its path, in the weaker mode of AFF-7: ``if`` tests, the negation of a
    test whose branch returns, loop bounds). An expression is only evaluated there, so
    only there must it not wrap (AFF-19)."""
    out: list[tuple[Expr, Dnf]] = []
    _guarded(body, ctx, Dnf.true(), stores_of, out)
    return out


def _and(a: Dnf, b: Dnf | None) -> Dnf:
    if b is None:
        return a
    r = a.and_(b)
    return a if r is None else r  # a weaker path: sound


def _test(c: Expr, ctx: AffineCtx, path: Dnf, out: list[tuple[Expr, Dnf]]) -> None:
    if isinstance(c, Binary) and c.op in (BinaryOp.AND, BinaryOp.OR):
        _test(c.lhs, ctx, path, out)
        left = c.lhs if c.op is BinaryOp.AND else Unary(UnaryOp.NOT, c.lhs)
        _test(c.rhs, ctx, _and(path, to_dnf(left, ctx, Mode.WEAKER)), out)
        return
    out.append((c, path))


def _guarded(s: Stmt, ctx: AffineCtx, path: Dnf, arr: Var | None,
             out: list[tuple[Expr, Dnf]]) -> Dnf:
    """Collect into ``out``; give the (weaker) path after ``s``."""
    leave = (Return, Stop)
    match s:
        case Let(var=v, value=val, body=b):
            if not v.mutable:
                out.append((val, path))
                ctx = ctx.with_def(v, val)
            return _guarded(b, ctx, path, arr, out)
        case Store(array=a, index=idx) if arr is not None and a == arr:
            out.extend((ix, path) for ix in idx)
        case Seq(stmts=ss):
            for x in ss:
                path = _guarded(x, ctx, path, arr, out)
        case If(cond=c, then=t, else_=e):
            _test(c, ctx, path, out)
            pos = to_dnf(c, ctx, Mode.WEAKER)
            neg = to_dnf(Unary(UnaryOp.NOT, c), ctx, Mode.WEAKER)
            _guarded(t, ctx, _and(path, pos), arr, out)
            if e is not None:
                _guarded(e, ctx, _and(path, neg), arr, out)
            lt = ends_every_path(t, leave)
            le = e is not None and ends_every_path(e, leave)
            if lt and not le:
                return _and(path, neg)
            if le and not lt:
                return _and(path, pos)
        case For(var=v, start=a, stop=z, body=b, down=down):
            out.extend(((a, path), (z, path)))
            inner = ctx.with_index(v)
            fa, fz, fv = to_affine(a, ctx), to_affine(z, ctx), AffineForm.of_atom(_ref(v))
            lo, hi = (fz, fa) if down else (fa, fz)
            bp = path
            if lo is not None:
                bp = _and(bp, Dnf.of(ge0(fv - lo)))
            if hi is not None:
                bp = _and(bp, Dnf.of(ge0(hi - fv)))
            _guarded(b, inner, bp, arr, out)
        case While(cond=c, body=b):
            _test(c, ctx, path, out)
            _guarded(b, ctx, _and(path, to_dnf(c, ctx, Mode.WEAKER)), arr, out)
        case Pragma(body=b):
            return _guarded(b, ctx, path, arr, out)
    return path


def _ref(v: Var) -> Expr:
    return Ref(v)


def find_wrap(
    items: Iterable[tuple[Expr, Dnf]],
    ctx: AffineCtx,
    known: Sequence[Constraint | bool] = (),
) -> Wrap | None:
    """The first integer subexpression (arithmetic or cast) of an item's expression that
    is affine in ``ctx`` but not proved, from ``known``, the item's path condition and
    the range of each atom's type, to stay within its type (AFF-19)."""
    base = Dnf.of(*known)
    for e, path in items:
        facts0 = _and(base, path)
        if facts0.is_false:
            continue  # never evaluated: nothing to wrap
        for sub in iter_nodes(e):
            if not isinstance(sub, (Binary, Unary, Cast)):
                continue
            t = type_of(sub)
            if t not in TYPE_RANGE:
                continue
            f = to_affine(sub, ctx)
            if f is None:
                continue
            if f.is_constant and f.const.denominator == 1:
                lo: int | None = int(f.const)
                hi: int | None = lo
            else:
                atoms = set(f.atoms)
                for alt in facts0.alts:
                    for c in alt:
                        atoms |= set(c.form.atoms)
                ranges: list[Constraint | bool] = []
                for a in sorted(atoms, key=repr):
                    ranges += _range(a, None)
                lo, hi = bounds_of(f, _and(facts0, Dnf.of(*ranges)))
            assert isinstance(t, Scalar)
            tlo, thi = TYPE_RANGE[t]
            if lo is None or hi is None or lo < tlo or hi > thi:
                return Wrap(sub, t, lo, hi)
    return None
