"""Array accesses of a statement with their path conditions (specs/affine.md, AFF-15).

:func:`accesses` lists every read and store with a *weaker* path condition (implied by
the real one: good for assumptions). :func:`store_sites` lists the stores of one array with
their *exact* guard (the store runs exactly when the guard holds, once per thread), or
gives ``None`` when it cannot.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from sarek_py.analysis.affine.conditions import MAX_ALTERNATIVES, Dnf, Mode, ge0, to_dnf
from sarek_py.analysis.affine.forms import AffineCtx, AffineForm, to_affine
from sarek_py.analysis.affine.reasons import affine_cause
from sarek_py.ir.jumps import jump_word
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinaryOp,
    Break,
    Cond,
    Continue,
    Empty,
    Expr,
    For,
    If,
    Let,
    Loc,
    Pragma,
    Read,
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
from sarek_py.ir.visit import children, ends_every_path


@attrs.frozen
class StoreSite:
    """A store ``array[index] <- …`` run exactly when ``guard`` holds (once per thread)."""

    index: tuple[AffineForm, ...]
    guard: Dnf
    loc: Loc | None = attrs.field(default=None, eq=False)


@attrs.frozen
class Access:
    """A read or store with its subscripts' forms (``None`` where not affine) and a weaker
    path condition; ``in_loop`` when it sits in a ``for``/``while`` body."""

    node: Read | Store
    index: tuple[AffineForm | None, ...]
    path: Dnf
    in_loop: bool


def assigned_vars(s: Stmt) -> frozenset[Var]:
    """Variables assigned (``:=``) anywhere in ``s``."""
    return frozenset(x.var for x in iter_stmts(s) if isinstance(x, Assign))


def region_ctx(s: Stmt, base: AffineCtx | None = None) -> AffineCtx:
    """``base`` with every variable assigned in ``s`` declared variant."""
    base = base or AffineCtx()
    return attrs.evolve(base, variant=base.variant | assigned_vars(s))


#: the statements that leave a thread's code: every path ending in one "always leaves"
LEAVE = (Return, Stop)


def may_leave(s: Stmt) -> bool:
    return any(isinstance(x, (Return, Stop)) for x in iter_stmts(s))


def _and(a: Dnf, b: Dnf | None) -> Dnf:
    """``a ∧ b`` on the weaker side: when not expressible, ``a`` alone."""
    if b is None:
        return a
    r = a.and_(b)
    return a if r is None else r


def accesses(s: Stmt, ctx: AffineCtx | None = None) -> list[Access]:
    """Every read and store in ``s`` with its weaker path condition."""
    out: list[Access] = []
    _Walker(out).stmt(s, region_ctx(s, ctx), Dnf.true(), False)
    return out


@attrs.define
class _Walker:
    out: list[Access]

    def weaker(self, c: Expr, ctx: AffineCtx, neg: bool = False) -> Dnf | None:
        return to_dnf(Unary(UnaryOp.NOT, c) if neg else c, ctx, Mode.WEAKER)

    def expr(self, e: Expr, ctx: AffineCtx, path: Dnf, loop: bool) -> None:
        match e:
            case Read(array=_, index=idx):
                forms = tuple(to_affine(i, ctx) for i in idx)
                self.out.append(Access(e, forms, path, loop))
            case Binary(op=BinaryOp.AND | BinaryOp.OR as op, lhs=lhs, rhs=rhs):
                self.expr(lhs, ctx, path, loop)
                self.expr(rhs, ctx, _and(path, self.weaker(lhs, ctx, op is BinaryOp.OR)), loop)
                return
            case Cond(cond=c, if_true=t, if_false=f):
                self.expr(c, ctx, path, loop)
                self.expr(t, ctx, _and(path, self.weaker(c, ctx)), loop)
                self.expr(f, ctx, _and(path, self.weaker(c, ctx, True)), loop)
                return
        for ch in children(e):
            self.expr(ch, ctx, path, loop)

    def stmt(self, s: Stmt, ctx: AffineCtx, path: Dnf, loop: bool) -> Dnf:
        """Walk ``s``; give the weaker path condition after it."""
        match s:
            case Let(var=v, value=val, body=b):
                self.expr(val, ctx, path, loop)
                inner = ctx if v.mutable else ctx.with_def(v, val)
                return self.stmt(b, inner, path, loop)
            case Assign(value=val):
                self.expr(val, ctx, path, loop)
            case Store(index=idx, value=val):
                for i in idx:
                    self.expr(i, ctx, path, loop)
                self.expr(val, ctx, path, loop)
                forms = tuple(to_affine(i, ctx) for i in idx)
                self.out.append(Access(s, forms, path, loop))
            case Seq(stmts=ss):
                for x in ss:
                    path = self.stmt(x, ctx, path, loop)
            case If(cond=c, then=t, else_=e):
                self.expr(c, ctx, path, loop)
                pos = self.weaker(c, ctx)
                negc = self.weaker(c, ctx, True)
                self.stmt(t, ctx, _and(path, pos), loop)
                if e is not None:
                    self.stmt(e, ctx, _and(path, negc), loop)
                if ends_every_path(t, LEAVE) and (e is None or not ends_every_path(e, LEAVE)):
                    return _and(path, negc)
                if e is not None and ends_every_path(e, LEAVE) and not ends_every_path(t, LEAVE):
                    return _and(path, pos)
            case For(var=v, start=a, stop=z, body=b, down=down):
                self.expr(a, ctx, path, loop)
                self.expr(z, ctx, path, loop)
                fa, fz = to_affine(a, ctx), to_affine(z, ctx)
                inner = ctx.with_index(v)
                vf = to_affine(Ref(v), inner)
                lo, hi = (fz, fa) if down else (fa, fz)
                body_path = path
                if vf is not None and lo is not None:
                    body_path = _and(body_path, _ge(vf, lo))
                if vf is not None and hi is not None:
                    body_path = _and(body_path, _ge(hi, vf))
                self.stmt(b, inner, body_path, True)
            case While(cond=c, body=b):
                self.expr(c, ctx, path, loop)
                self.stmt(b, ctx, _and(path, self.weaker(c, ctx)), True)
            case Pragma(body=b):
                return self.stmt(b, ctx, path, loop)
            case Return() | Stop() | Barrier() | Empty():
                pass
            case Break() | Continue():
                # the path after it in the body is not narrowed: weaker, so sound (IR-32)
                pass
            case _:
                raise TypeError(f"not a statement: {s!r}")
        return path


def _ge(a: AffineForm, b: AffineForm) -> Dnf:
    return Dnf.of(ge0(a - b))


# ------------------------------------------------------------------ exact store sites


@attrs.frozen
class NotExact:
    """Why the stores of an array have no exact guards (AFF-15): ``kind`` is ``"index"``
    (a subscript is not affine), ``"condition"`` (a test around a store is not expressible
    exactly: ``data`` says whether it depends on memory or on a mutable variable),
    ``"alternatives"`` (too many alternatives), ``"loop"`` (a store in a loop) or
    ``"leave"`` (a ``return``/``stop`` that does not end every path of its branch or loop,
    before a store)."""

    kind: str
    reason: str
    loc: Loc | None = attrs.field(default=None, eq=False)
    data: bool = False


class _Inexact(Exception):
    def __init__(self, why: NotExact):
        super().__init__(why.reason)
        self.why = why


def store_sites(body: Stmt, array: Var, ctx: AffineCtx | None = None) -> list[StoreSite] | None:
    """Every store of ``array`` in ``body`` with its exact guard, or ``None`` (AFF-15)."""
    got = store_sites_why(body, array, ctx)
    return None if isinstance(got, NotExact) else got


def store_sites_why(body: Stmt, array: Var,
                    ctx: AffineCtx | None = None) -> list[StoreSite] | NotExact:
    """:func:`store_sites`, or why there are no exact guards (the first cause met)."""
    sites: list[StoreSite] = []
    try:
        _exact(body, region_ctx(body, ctx), Dnf.true(), array, sites.append)
    except _Inexact as exc:
        return exc.why
    return sites


def _stores(s: Stmt, array: Var) -> bool:
    return any(isinstance(x, Store) and x.array == array for x in iter_stmts(s))


Guard = Dnf | NotExact
"""An exact guard, or why it is not known."""


def _exact_and(a: Guard, b: Guard, loc: Loc | None) -> Guard:
    if isinstance(a, NotExact):
        return a
    if isinstance(b, NotExact):
        return b
    r = a.and_(b)
    if r is None:
        return NotExact("alternatives", "the conditions around the store have more than "
                        f"{MAX_ALTERNATIVES} alternatives together (as a disjunction of "
                        "conjunctions of affine constraints)", loc)
    return r


def _condition(c: Expr, ctx: AffineCtx, loc: Loc | None) -> Guard:
    d = to_dnf(c, ctx, Mode.EXACT)
    if d is not None:
        return d
    why = affine_cause(c, ctx)
    kind = "alternatives" if why.kind == "alternatives" else "condition"
    return NotExact(kind, f"the test {quote_expr(c)} around the store is not known "
                    f"exactly: {why.text}", why.loc or loc, why.data_dependent)


def _negated(d: Guard, c: Expr, loc: Loc | None) -> Guard:
    if isinstance(d, NotExact):
        return d
    n = d.negate()
    if n is None:
        return NotExact("alternatives", f"the negation of the test {quote_expr(c)} (its "
                        f"else side) has more than {MAX_ALTERNATIVES} alternatives", loc)
    return n


def _left(s: Stmt, where: str) -> NotExact:
    leave = next((x for x in iter_stmts(s) if isinstance(x, (Return, Stop))), None)
    what = "a stop" if isinstance(leave, Stop) else "a return"
    return NotExact("leave", f"{what} {where} does not end every path there, so which "
                    "threads reach the stores after it is not known exactly",
                    leave.loc if leave is not None else s.loc)


def quote_expr(e: Expr) -> str:
    return f"`{print_expr(e)}`"


def _exact(
    s: Stmt, ctx: AffineCtx, guard: Guard, array: Var, emit: Callable[[StoreSite], None]
) -> Guard:
    """Record the stores of ``array`` in ``s``; give the exact guard after ``s`` (or why
    it is not known)."""
    match s:
        case Let(var=v, value=val, body=b):
            return _exact(b, ctx if v.mutable else ctx.with_def(v, val), guard, array, emit)
        case Store(array=a, index=idx) if a == array:
            forms = tuple(to_affine(i, ctx) for i in idx)
            bad = next((i for i, f in zip(idx, forms, strict=True) if f is None), None)
            if bad is not None:
                why = affine_cause(bad, ctx)
                raise _Inexact(NotExact(
                    "index", f"the store index {quote_expr(bad)} of {a.name} is not affine: "
                    f"{why.text}", why.loc or s.loc, why.data_dependent))
            if isinstance(guard, NotExact):
                raise _Inexact(guard)
            emit(StoreSite(tuple(f for f in forms if f is not None), guard, loc=s.loc))
        case Seq(stmts=ss):
            for x in ss:
                guard = _exact(x, ctx, guard, array, emit)
        case If(cond=c, then=t, else_=e):
            pos = _condition(c, ctx, s.loc)
            neg = _negated(pos, c, s.loc)
            _exact(t, ctx, _exact_and(guard, pos, s.loc), array, emit)
            if e is not None:
                _exact(e, ctx, _exact_and(guard, neg, s.loc), array, emit)
            lt = ends_every_path(t, LEAVE)
            le = e is not None and ends_every_path(e, LEAVE)
            if lt and le:
                return Dnf.false()
            if lt and (e is None or not may_leave(e)):
                return _exact_and(guard, neg, s.loc)
            if le and not may_leave(t):
                return _exact_and(guard, pos, s.loc)
            if may_leave(t) or (e is not None and may_leave(e)):
                return _left(s, "in a branch of this test")
        case For() | While():
            b = s.body
            loop = f"the loop over {s.var.name}" if isinstance(s, For) else "a while loop"
            if _stores(b, array):
                st = next(x for x in iter_stmts(b) if isinstance(x, Store) and x.array == array)
                raise _Inexact(NotExact(
                    "loop", f"the store of {array.name} is in {loop} (each iteration "
                    "stores again: its elements are not one store site)", st.loc or s.loc))
            if may_leave(b):
                return _left(b, f"in {loop}")
        case Pragma(body=b):
            return _exact(b, ctx, guard, array, emit)
        case Return() | Stop():
            return Dnf.false()
        case Break() | Continue():  # only in a loop body, which is not walked here
            raise _Inexact(NotExact("loop", f"a {jump_word(s)} outside a loop", s.loc))
    return guard
