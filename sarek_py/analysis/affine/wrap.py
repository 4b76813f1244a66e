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

from sarek_py.analysis.affine.conditions import Constraint, Dnf, ge0
from sarek_py.analysis.affine.fm import bounds_of
from sarek_py.analysis.affine.forms import AffineCtx, AffineForm, Atom, to_affine
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    If,
    Let,
    Stmt,
    Unary,
    Var,
    iter_stmts,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes

__all__ = ["TYPE_RANGE", "WRAP_BOUND", "bound_check", "tests_and_lets", "wrap_risk"]

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

