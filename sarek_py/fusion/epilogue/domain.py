"""The elements an element-wise consumer acts on (specs/fusion-legality.md LEG-18).

A consumer thread ``i`` whose body, for that ``i``, reads, stores and calls nothing does
nothing at all (EF-2: no thread intrinsic, barrier, return or stop): running its body or
not is the same. So the producer need store exactly once only the elements of ``[0, tc)``
on which the consumer's body *acts* — with the standard guard ``if i < n`` and a launch
rounded up to a multiple of the block, the elements ``[0, min(n, tc))``. Fused, the
consumer's body runs right after each store; for an element it does not act on, that
run does nothing, however many times it happens.

:func:`acting_dnf` gives a condition over the consumer's index that *every* acting
element satisfies (a weaker one is sound: the producer must then cover more): the
disjunction of the path conditions, in the weaker mode of AFF-7, of every read, store,
call (and, conservatively, every other statement with an effect) of the body.
:func:`project` drops the constraints on anything but the index and the uniform atoms
(also weakening). :func:`spans` turns a condition in the index alone into intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction

from sarek_py.analysis.affine.conditions import Constraint, Dnf, Mode, to_dnf
from sarek_py.analysis.affine.forms import AffineCtx, Atom
from sarek_py.ir.nodes import (
    Assign,
    Call,
    Empty,
    Expr,
    For,
    If,
    Let,
    Pragma,
    Read,
    Seq,
    Stmt,
    Store,
    Unary,
    UnaryOp,
    While,
)
from sarek_py.ir.visit import iter_nodes

__all__ = ["acting_dnf", "project", "spans"]


def _effect(e: Expr) -> bool:
    """Whether evaluating ``e`` touches memory or calls (a read is an action: LEG-18)."""
    return any(isinstance(n, (Read, Call)) for n in iter_nodes(e))


def _or(a: Dnf, b: Dnf) -> Dnf:
    r = a.or_(b)
    return Dnf.true() if r is None else r  # too many alternatives: every element acts


def _and(path: Dnf, c: Dnf | None) -> Dnf:
    if c is None:
        return path
    r = path.and_(c)
    return path if r is None else r  # dropping a conjunct only weakens: sound


def acting_dnf(body: Stmt, ctx: AffineCtx) -> Dnf:
    """A condition implied by "the body acts" (reads, stores, calls), for one thread."""
    return _acts(body, ctx, Dnf.true())


def _weaker(c: Expr, ctx: AffineCtx, negate: bool) -> Dnf | None:
    return to_dnf(Unary(UnaryOp.NOT, c) if negate else c, ctx, Mode.WEAKER)


def _acts(s: Stmt, ctx: AffineCtx, path: Dnf) -> Dnf:
    no = Dnf.false()
    match s:
        case Let(var=v, value=val, body=b):
            here = path if _effect(val) else no
            inner = ctx if v.mutable else ctx.with_def(v, val)
            return _or(here, _acts(b, inner, path))
        case Assign(value=val):
            return path if _effect(val) else no
        case Seq(stmts=ss):
            acc = no
            for x in ss:
                acc = _or(acc, _acts(x, ctx, path))
            return acc
        case If(cond=c, then=t, else_=e):
            acc = path if _effect(c) else no
            acc = _or(acc, _acts(t, ctx, _and(path, _weaker(c, ctx, False))))
            if e is not None:
                acc = _or(acc, _acts(e, ctx, _and(path, _weaker(c, ctx, True))))
            return acc
        case For(start=a, stop=z, body=b):
            acc = path if _effect(a) or _effect(z) else no
            return _or(acc, _acts(b, ctx, path))  # loop facts left out: weaker
        case While(cond=c, body=b):
            acc = path if _effect(c) else no
            return _or(acc, _acts(b, ctx, path))
        case Pragma(body=b):
            return _acts(b, ctx, path)
        case Empty():
            return no
        case Store():
            return path
    return path  # anything else (barrier, return, stop: EF-2 refuses them) acts


def project(d: Dnf, keep: Callable[[Atom], bool]) -> Dnf:
    """``d`` with every constraint on an atom not kept dropped (a weaker condition)."""
    alts = []
    for alt in d.alts:
        kept = frozenset(c for c in alt if all(keep(a) for a in c.form.atoms))
        if not kept:
            return Dnf.true()
        alts.append(kept)
    out = Dnf.false()
    for a in alts:
        out = _or(out, Dnf(frozenset({a})))
    return out


def spans(d: Dnf, index: Atom, lo: int, hi: int,
          values: Mapping[Atom, int] | None = None) -> list[tuple[int, int]]:
    """The values ``lo <= x <= hi`` of ``index`` where ``d`` (a condition in ``index``
    alone, after ``values`` are put for the other atoms) may hold, as inclusive
    intervals; a constraint on any other atom is left out (weaker)."""
    vals = dict(values or {})
    out: list[tuple[int, int]] = []
    for alt in d.alts:
        a, b = lo, hi
        for c in alt:
            k = _in_index(c, index, vals)
            if k is None:
                continue
            ca, cb = k  # ca*x + cb >= 0
            if ca == 0:
                if cb < 0:
                    a, b = 1, 0
                continue
            if ca > 0:
                a = max(a, -(cb // ca))
            else:
                b = min(b, cb // (-ca))
        if a <= b:
            out.append((a, b))
    return out


def _in_index(c: Constraint, index: Atom, vals: Mapping[Atom, int]) -> tuple[int, int] | None:
    """``c`` as ``a*x + b >= 0`` with integers, the other atoms put in, or ``None`` when
    some other atom has no value."""
    a: int | Fraction = 0
    b: int | Fraction = c.form.const
    for atom, k in c.form.terms:
        if atom == index:
            a += k
        elif atom in vals:
            b += k * vals[atom]
        else:
            return None
    if Fraction(a).denominator != 1 or Fraction(b).denominator != 1:
        return None
    return int(a), int(b)
