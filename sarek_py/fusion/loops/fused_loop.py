"""The loops a fusion plan becomes (specs/loop-fusion.md, LF-14, LF-50, LF-52, LF-85; specs/ping-pong.md, PP-4):
:func:`fused_loop`, the consumer's loop reading the producer's expressions;
:func:`fused_loops`, the same as the interior nest and the boundary strips when the
interior is a box (LF-85);
:func:`copy_loop` and :func:`whole_copy_loop`, device copies of arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sarek_py.fusion.loops.boundary import in_domain
from sarek_py.fusion.loops.plan import Plan
from sarek_py.fusion.loops.split import pieces
from sarek_py.ir.host.program import LoopIndex, ParFor
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    If,
    Length,
    Read,
    Ref,
    Seq,
    Stmt,
    Store,
    Var,
    var,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import map_node, substitute


def fused_loop(plan: Plan, copies: Mapping[Var, Var], reads_from: Mapping[Var, Var]
               | None = None) -> ParFor:
    """LF-14: the consumer's loop with each intermediate read replaced by the producer's
    expression at its subscripts; stores to a renamed array go to its copy (``copies``),
    reads of it come from ``reads_from`` (the array itself by default). Reads of an array
    of ``plan.edges`` keep the stored element outside the producer's domain (LF-50), except
    in the interior of ``plan.interior`` (LF-52)."""
    if not plan.edges:
        return _fused(plan, copies, reads_from, selects=False)
    with_selects = _fused(plan, copies, reads_from, selects=True)
    if plan.interior is None:
        return with_selects
    plain = _fused(plan, copies, reads_from, selects=False)
    body = If(_retarget_reads(plan.interior, dict(reads_from or {})), plain.body,
              with_selects.body)
    return ParFor(plan.consumer.indices, body, plan.consumer.locals, loc=plan.consumer.loc)


def fused_loops(plan: Plan, copies: Mapping[Var, Var], reads_from: Mapping[Var, Var]
                | None = None) -> tuple[ParFor, ...]:
    """The loops the fused pair runs: :func:`fused_loop`, or, when the interior is a box
    (``plan.split``, LF-85), the interior nest with the plain recompute followed by the
    boundary strips with the selects."""
    if plan.split is None or plan.interior is None:
        return (fused_loop(plan, copies, reads_from),)
    plain = _fused(plan, copies, reads_from, selects=False)
    with_selects = _fused(plan, copies, reads_from, selects=True)
    return pieces(plan.consumer, plan.split, plain.body, with_selects.body)


def _fused(plan: Plan, copies: Mapping[Var, Var], reads_from: Mapping[Var, Var] | None,
           selects: bool) -> ParFor:
    by_array = {i.array: i for i in plan.intermediates}
    pvars = plan.producer.vars
    src = dict(reads_from or {})

    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Read) and e.array in by_array:
            it = by_array[e.array]
            # a subscript of another integer type than the producer's index is converted:
            # the read was in bounds, so its value fits the index's type (LF-14); reads
            # that may leave the domain have the index's type (LF-51)
            subs = [x if type_of(x) == v.type else Cast(v.scalar, x)
                    for v, x in zip(pvars, e.index, strict=True)]
            value = substitute(it.value, dict(zip(pvars, subs, strict=True)))
            if selects and e.array in plan.edges:
                value = Cond(in_domain(plan.producer, it, subs), value, e)
            return _retarget_reads(value, src)
        if isinstance(e, Read) and e.array in src:
            return Read(src[e.array], e.index, loc=e.loc)
        return None

    def stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.array in copies:
            return Store(copies[s.array], s.index, s.value, loc=s.loc)
        return None

    body = map_node(plan.consumer_body, expr=expr, stmt=stmt)
    return ParFor(plan.consumer.indices, body, plan.consumer.locals, loc=plan.consumer.loc)


def _retarget_reads(e: Expr, src: Mapping[Var, Var]) -> Expr:
    if not src:
        return e

    def ex(x: Expr) -> Expr | None:
        if isinstance(x, Read) and x.array in src:
            return Read(src[x.array], x.index, loc=x.loc)
        return None

    out: Expr = map_node(e, expr=ex)
    return out


def copy_loop(c: ParFor, pairs: Sequence[tuple[Var, Var]]) -> ParFor:
    """``dst[i…] <- src[i…]`` over the consumer's iterations for each ``(dst, src)``."""
    own = tuple(Ref(v) for v in c.vars)
    stmts: list[Stmt] = [Store(dst, own, Read(src, own)) for dst, src in pairs]
    body: Stmt = stmts[0] if len(stmts) == 1 else Seq(tuple(stmts))
    return ParFor(c.indices, body, loc=c.loc)


def whole_copy_loop(dst: Var, src: Var) -> ParFor:
    """``dst[…] <- src[…]`` over every element of ``src`` (same lower bounds)."""
    assert isinstance(src.type, ArrayType)
    idx = []
    body_index: list[Expr] = []
    for d, lo in enumerate(src.type.lower):
        v = var(f"k{d}_", Scalar.I32)
        stop = Binary(BinaryOp.SUB, Binary(BinaryOp.ADD, Const(lo, Scalar.I32), Length(src, d)),
                      Const(1, Scalar.I32))
        idx.append(LoopIndex(v, Const(lo, Scalar.I32), stop))
        body_index.append(Ref(v))
    return ParFor(tuple(idx), Store(dst, tuple(body_index), Read(src, tuple(body_index))))


__all__ = ["copy_loop", "fused_loop", "fused_loops", "whole_copy_loop"]
