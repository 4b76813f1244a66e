"""Deep expressions as C compilers take them (specs/codegen.md, CG-60).

C compilers bound how deeply brackets nest (clang, hence PoCL: 256), and a long Horner
polynomial or a deeply nested expression in a kernel or a parallel loop's body nests one
bracket per level. Before emission, :func:`shallow_kernel` binds every subexpression
whose tree reaches :data:`MAX_HEIGHT` levels to a ``let`` placed right before its
statement, bottom-up, so that no emitted expression is deeper than that.

Only subexpressions the statement always evaluates are moved (not under either branch of
``?:`` nor the right operand of ``&&``/``||``, never a ``while`` condition, which is
evaluated at every test), and never one that calls a helper or holds an atomic (whose
order relative to the rest could matter): evaluating an always-evaluated pure
subexpression first gives the same value, so the emitted program computes the same bytes.
A kernel with no expression that deep is returned as it is (the emitted text unchanged).
"""

from __future__ import annotations

import attrs

from sarek_py.ir.nodes import (
    Assign,
    Atomic,
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Expr,
    For,
    HelperFunc,
    If,
    Intrinsic,
    Kernel,
    Let,
    Pragma,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Store,
    Unary,
    Var,
    While,
    var,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar

#: the tree height of an expression kept in one C expression (well under clang's 256)
MAX_HEIGHT = 96

_Hoists = list[tuple[Var, Expr]]


def _cut(e: Expr, strict: bool, out: _Hoists) -> tuple[Expr, int, bool]:
    """``e`` with its deep always-evaluated parts bound in ``out``; its height; whether it
    calls a helper or holds an atomic."""
    match e:
        case Unary(arg=a) | Cast(arg=a):
            a2, h, impure = _cut(a, strict, out)
            node: Expr = e if a2 is a else attrs.evolve(e, arg=a2)
        case Binary(op=op, lhs=x, rhs=y):
            x2, hx, ix = _cut(x, strict, out)
            lazy = op in (BinaryOp.AND, BinaryOp.OR)
            y2, hy, iy = _cut(y, strict and not lazy, out)
            h, impure = max(hx, hy), ix or iy
            node = e if x2 is x and y2 is y else attrs.evolve(e, lhs=x2, rhs=y2)
        case Cond(cond=c, if_true=t, if_false=f):
            c2, hc, ic = _cut(c, strict, out)
            t2, ht, it = _cut(t, False, out)
            f2, hf, if_ = _cut(f, False, out)
            h, impure = max(hc, ht, hf), ic or it or if_
            node = e if c2 is c and t2 is t and f2 is f \
                else attrs.evolve(e, cond=c2, if_true=t2, if_false=f2)
        case Read(index=idx) | Intrinsic(args=idx) | Call(args=idx):
            parts = [_cut(i, strict, out) for i in idx]
            h = max((p[1] for p in parts), default=0)
            impure = isinstance(e, Call) or any(p[2] for p in parts)
            new = tuple(p[0] for p in parts)
            if all(a is b for a, b in zip(new, idx, strict=True)):
                node = e
            elif isinstance(e, Read):
                node = attrs.evolve(e, index=new)
            else:
                node = attrs.evolve(e, args=new)
        case Atomic():
            return e, 1, True
        case _:
            return e, 1, False
    h += 1
    if strict and not impure and h >= MAX_HEIGHT:
        ty = type_of(node)
        if isinstance(ty, Scalar):
            v = var("deep_", ty)
            out.append((v, node))
            return Ref(v), 1, False
    return node, h, impure


def _wrap(hoists: _Hoists, s: Stmt) -> Stmt:
    for v, e in reversed(hoists):
        s = Let(v, e, s)
    return s


def _stmt(s: Stmt) -> Stmt:
    out: _Hoists = []
    match s:
        case Let(value=e, body=b):
            e2, _, _ = _cut(e, True, out)
            new: Stmt = attrs.evolve(s, value=e2, body=_stmt(b))
        case Assign(value=e):
            e2, _, _ = _cut(e, True, out)
            new = attrs.evolve(s, value=e2)
        case Store(index=idx, value=e):
            idx2 = tuple(_cut(i, True, out)[0] for i in idx)
            e2, _, _ = _cut(e, True, out)
            new = attrs.evolve(s, index=idx2, value=e2)
        case Return(value=e) if e is not None:
            e2, _, _ = _cut(e, True, out)
            new = attrs.evolve(s, value=e2)
        case If(cond=c, then=t, else_=f):
            c2, _, _ = _cut(c, True, out)
            new = attrs.evolve(s, cond=c2, then=_stmt(t), else_=None if f is None else _stmt(f))
        case For(start=a, stop=b, body=body):
            a2, _, _ = _cut(a, True, out)
            b2, _, _ = _cut(b, True, out)
            new = attrs.evolve(s, start=a2, stop=b2, body=_stmt(body))
        case While(body=body):
            new = attrs.evolve(s, body=_stmt(body))
        case Seq(stmts=ss):
            new = attrs.evolve(s, stmts=tuple(_stmt(x) for x in ss))
        case Pragma(body=body):
            new = attrs.evolve(s, body=_stmt(body))
        case _:
            return s
    return _wrap(out, new)


def _depth(s: Stmt) -> int:
    """The depth of the tree of ``s`` (statements and expressions), without recursion."""
    best, todo = 0, [(s, 1)]
    while todo:
        x, d = todo.pop()
        best = max(best, d)
        for f in attrs.fields(type(x)):
            v = getattr(x, f.name)
            for y in (v if isinstance(v, tuple) else (v,)):
                if attrs.has(type(y)) and not isinstance(y, Var):
                    todo.append((y, d + 1))
    return best


def shallow_kernel(k: Kernel) -> Kernel:
    """CG-60: ``k`` and its helpers with no always-evaluated expression deeper than
    :data:`MAX_HEIGHT` (``k`` itself when none is)."""
    bodies = (k.body, *(h.body for h in k.helpers))
    if all(_depth(b) < MAX_HEIGHT for b in bodies):
        return k
    helpers: tuple[HelperFunc, ...] = tuple(attrs.evolve(h, body=_stmt(h.body))
                                            for h in k.helpers)
    return attrs.evolve(k, body=_stmt(k.body), helpers=helpers)


__all__ = ["MAX_HEIGHT", "shallow_kernel"]
