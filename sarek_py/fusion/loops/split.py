"""The interior and the boundary of a fused pair as separate loops (specs/loop-fusion.md,
LF-85..LF-90).

LF-52 splits a fused consumer that reads an intermediate outside the producer's domain by
one test inside the loop: ``if interior then <plain recompute> else <with selects>``. A
test on every iteration keeps the loop from vectorising, and the select branch is compiled
into the same body. When every such read is the consumer's index plus a constant in each
dimension (``B[i - 1, j]``), the interior is a box, and the fused loop is emitted as the
interior nest (plain recompute, no test) followed by the boundary strips (the select form),
``1 + 2·d`` parallel loops over a partition of the consumer's domain (d: the dimensions
whose reads leave the domain).

The box in a dimension ``v = a to b`` is ``l = max(a, lo_k - c, …)`` to
``h = min(b, hi_k - c, …)`` over the reads ``B[…, v + c, …]`` of dimension ``k`` of the
producer's bounds ``lo_k to hi_k``. The partition of ``[a, b]`` is
``[a, L - 1]``, ``[L, H]``, ``[H + 1, b]`` with ``L = min(l, b + 1)`` and
``H = max(h, L - 1)``: ``a ≤ L ≤ b + 1`` and ``L - 1 ≤ H ≤ b``, so the three ranges are
disjoint and cover ``[a, b]`` (all empty when ``[a, b]`` is); a non-empty ``[L, H]`` lies in
``[l, h]``. The dimensions are peeled in order: the strips of dimension ``d`` span the
interior range of the dimensions before it and the whole range of those after it.

API: :func:`box_of` (the analysis: a :class:`Split` or why there is none),
:func:`box_test` (the affine test the proof checks), :func:`bound_leaves` (the integer
expressions of the pieces' bounds, for the wrap check), :func:`pieces` (the loops).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from sarek_py.analysis.affine.queries import AffineCtx, to_affine
from sarek_py.analysis.affine.wrap import TYPE_RANGE
from sarek_py.ir.host.program import LoopIndex, ParFor
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Call,
    Const,
    Expr,
    For,
    Intrinsic,
    Let,
    Read,
    Ref,
    Stmt,
    Var,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import free_vars, iter_exprs, iter_nodes

if TYPE_CHECKING:  # plan.py holds a Split
    from sarek_py.fusion.loops.intermediate import Intermediate

#: (base, constant): the expression ``base + constant`` (``base`` ``None``: the constant)
Term = tuple[Expr | None, int]


@attrs.frozen
class Split:
    """LF-85: the interior box of a fused consumer, per dimension of the consumer: the
    terms whose maximum is the box's lower bound and those whose minimum is its upper
    bound (the consumer's own bounds among them); ``peeled`` are the dimensions some read
    constrains (the others are not split)."""

    lower: tuple[tuple[Term, ...], ...]
    upper: tuple[tuple[Term, ...], ...]
    peeled: tuple[int, ...]

    @property
    def loops(self) -> int:
        """How many parallel loops the fused loop becomes (LF-85)."""
        return 1 + 2 * len(self.peeled)


def _peel(e: Expr) -> Term:
    """``e`` as ``base + constant`` where ``e`` is visibly so."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return None, e.value
    if isinstance(e, Binary) and e.op in (BinaryOp.ADD, BinaryOp.SUB):
        if isinstance(e.rhs, Const) and isinstance(e.rhs.value, int) \
                and not isinstance(e.rhs.value, bool):
            base, k = _peel(e.lhs)
            return base, k + (e.rhs.value if e.op is BinaryOp.ADD else -e.rhs.value)
        if e.op is BinaryOp.ADD and isinstance(e.lhs, Const) \
                and isinstance(e.lhs.value, int) and not isinstance(e.lhs.value, bool):
            base, k = _peel(e.rhs)
            return base, k + e.lhs.value
    return e, 0


def _expr(t: Term, ty: Scalar) -> Expr:
    base, k = t
    if base is None:
        return Const(k, ty)
    if k == 0:
        return base
    op = BinaryOp.ADD if k > 0 else BinaryOp.SUB
    return Binary(op, base, Const(abs(k), ty))


def _shift(ts: Sequence[Term], by: int) -> tuple[Term, ...]:
    return tuple((b, k + by) for b, k in ts)


def _fold(ts: Sequence[Term], biggest: bool) -> tuple[Term, ...]:
    """The terms with one per base: the largest (``biggest``) or smallest constant; the
    constants alone fold into one."""
    best: dict[str, Term] = {}
    order: list[str] = []
    for b, k in ts:
        key = "" if b is None else print_expr(b)
        if key not in best:
            order.append(key)
            best[key] = (b, k)
        elif (k > best[key][1]) == biggest and k != best[key][1]:
            best[key] = (b, k)
    return tuple(best[key] for key in order)


def _combine(ts: Sequence[Term], name: str, ty: Scalar) -> Expr:
    """``max(t0, max(t1, …))`` (``name`` ``"max"`` or ``"min"``) of the folded terms."""
    folded = _fold(ts, name == "max")
    out = _expr(folded[-1], ty)
    for t in reversed(folded[:-1]):
        out = Intrinsic(name, (_expr(t, ty), out))
    return out


def box_of(producer: ParFor, consumer: ParFor, inters: Sequence[Intermediate],
           edges: frozenset[Var], body: Stmt, ctx: AffineCtx) -> Split | str:
    """LF-85: the interior box of the reads of ``edges`` in ``body``, or why the interior
    is not a box (the split then stays a test inside the loop, LF-52)."""
    by_array = {i.array: i for i in inters}
    cvars = consumer.vars
    lower: list[list[Term]] = [[_peel(ix.start)] for ix in consumer.indices]
    upper: list[list[Term]] = [[_peel(ix.stop)] for ix in consumer.indices]
    peeled: set[int] = set()
    for e in iter_exprs(body):
        if not (isinstance(e, Read) and e.array in edges):
            continue
        it = by_array[e.array]
        bounds = _domain_box(producer, it)
        if isinstance(bounds, str):
            return bounds
        for s, (los, his) in zip(e.index, bounds, strict=True):
            f = to_affine(s, ctx)
            dims = [d for d, v in enumerate(cvars) if f is not None and f.coeff(Ref(v)) != 0]
            if f is None or len(dims) != 1 or len(f.atoms) != 1 \
                    or f.coeff(Ref(cvars[dims[0]])) != 1 or f.const.denominator != 1:
                return (f"the subscript `{print_expr(s)}` of '{it.array.name}' is not one "
                        "of the consumer's indices plus a constant")
            d, c = dims[0], int(f.const)
            if abs(c) > 2**20:
                return (f"the subscript `{print_expr(s)}` of '{it.array.name}' has an "
                        "offset beyond 2^20")
            lower[d] += _shift(los, -c)
            upper[d] += _shift(his, -c)
            peeled.add(d)
    if not peeled:
        return "no read leaves the producer's domain through an index"
    for d in peeled:
        lo, hi = TYPE_RANGE.get(cvars[d].scalar, (0, -1))
        for b, k in (*lower[d], *upper[d]):
            # every constant the pieces' bounds write, one either side (LF-87)
            if b is None and not (lo <= k - 1 and k + 1 <= hi):
                return (f"the bound {k} of a piece is near the limit of the index's type "
                        f"{cvars[d].scalar}")
    for t in (t for ts in (*lower, *upper) for t in ts):
        if t[0] is not None and any(isinstance(x, (Read, Call)) for x in iter_nodes(t[0])):
            # the pieces' bounds are evaluated before each piece: an array element the
            # consumer writes could change between them
            return f"the bound `{print_expr(t[0])}` reads an array element or calls"
    return Split(tuple(tuple(x) for x in lower), tuple(tuple(x) for x in upper),
                 tuple(sorted(peeled)))


_FLIP = {BinaryOp.LE: BinaryOp.GE, BinaryOp.GE: BinaryOp.LE, BinaryOp.LT: BinaryOp.GT,
         BinaryOp.GT: BinaryOp.LT}


def _domain_box(producer: ParFor, it: Intermediate
                ) -> list[tuple[tuple[Term, ...], tuple[Term, ...]]] | str:
    """The producer's domain for ``it`` as a box: per dimension the terms whose maximum is
    its lower and whose minimum is its upper bound -- the loop's bounds, then each test of
    the store that is a conjunction of ``v ≥ e``, ``v > e``, ``v ≤ e``, ``v < e`` with ``v``
    the producer's index and ``e`` a host value (no index, array or variable of the
    body); or why the domain is not such a box."""
    los = [[_peel(ix.start)] for ix in producer.indices]
    his = [[_peel(ix.stop)] for ix in producer.indices]
    inner = {x.var for x in iter_nodes(producer.body) if isinstance(x, (Let, For))}
    local = set(producer.vars) | set(producer.locals) | inner
    why = (f"the producer stores '{it.array.name}' under a test that is not a bound of "
           "one index by a host value, so its domain is not a box")
    todo = list(it.guards)
    while todo:
        g = todo.pop()
        if isinstance(g, Binary) and g.op is BinaryOp.AND:
            todo += [g.lhs, g.rhs]
            continue
        if not (isinstance(g, Binary) and g.op in _FLIP):
            return why
        op, lhs, rhs = g.op, g.lhs, g.rhs
        if not (isinstance(lhs, Ref) and lhs.var in producer.vars):
            op, lhs, rhs = _FLIP[op], rhs, lhs
        if not (isinstance(lhs, Ref) and lhs.var in producer.vars) or type_of(rhs) != \
                lhs.var.type or any(v.is_array or v in local for v in free_vars(rhs)):
            return why
        d = producer.vars.index(lhs.var)
        base, k = _peel(rhs)
        if op in (BinaryOp.GE, BinaryOp.GT):
            los[d].append((base, k + (op is BinaryOp.GT)))
        else:
            his[d].append((base, k - (op is BinaryOp.LT)))
    return [(tuple(lo), tuple(hi)) for lo, hi in zip(los, his, strict=True)]


def box_test(consumer: ParFor, split: Split) -> Expr:
    """``t ≤ v`` for every lower term and ``v ≤ t`` for every upper term of each peeled
    dimension (one per base: the largest lower, the smallest upper constant, which imply
    the others): the box as an affine test (LF-86: the proof that the plain recompute is
    exact in it)."""
    tests: list[Expr] = []
    for d in split.peeled:
        v = consumer.vars[d]
        ty = v.scalar
        tests += [Binary(BinaryOp.LE, _expr(t, ty), Ref(v))
                  for t in _fold(split.lower[d], True)]
        tests += [Binary(BinaryOp.LE, Ref(v), _expr(t, ty))
                  for t in _fold(split.upper[d], False)]
    out = tests[0]
    for t in tests[1:]:
        out = Binary(BinaryOp.AND, out, t)
    return out


def _ranges(split: Split, d: int, ty: Scalar
            ) -> tuple[tuple[Expr, Expr], tuple[Expr, Expr], tuple[Expr, Expr]]:
    """The strips before and after the box and the box in dimension ``d``:
    ``[a, L − 1]``, ``[H + 1, b]``, ``[L, H]`` with ``L = min(l, b + 1)``,
    ``H = max(h, L − 1)``, every ``± 1`` moved onto the terms (LF-86)."""
    lo, up = split.lower[d], split.upper[d]
    a, b = lo[0], up[0]
    big_l = _combine_min([_combine(lo, "max", ty)], [(b[0], b[1] + 1)], ty)
    l_minus = _combine_min([_combine(_shift(lo, -1), "max", ty)], [b], ty)
    big_h = Intrinsic("max", (_combine(up, "min", ty), l_minus))
    h_plus = Intrinsic("max", (_combine(_shift(up, 1), "min", ty),
                               _combine_min([_combine(lo, "max", ty)],
                                            [(b[0], b[1] + 1)], ty)))
    return (_expr(a, ty), l_minus), (h_plus, _expr(b, ty)), (big_l, big_h)


def _combine_min(first: Sequence[Expr], terms: Sequence[Term], ty: Scalar) -> Expr:
    out = _expr(terms[0], ty)
    for e in first:
        out = Intrinsic("min", (e, out))
    return out


def bound_leaves(consumer: ParFor, split: Split) -> list[Expr]:
    """The integer expressions the pieces' bounds compute (every term, and the consumer's
    bounds plus or minus one): the wrap check of LF-87 looks at each."""
    out: list[Expr] = []
    for d in split.peeled:
        ty = consumer.vars[d].scalar
        lo, up = split.lower[d], split.upper[d]
        for t in (*lo, *_shift(lo, -1), *up, *_shift(up, 1), (up[0][0], up[0][1] + 1)):
            out.append(_expr(t, ty))
    return out


def pieces(consumer: ParFor, split: Split, interior: Stmt, boundary: Stmt
           ) -> tuple[ParFor, ...]:
    """LF-85: the interior nest (``interior``: the plain recompute), then the boundary
    strips (``boundary``: the select form), each over its part of the consumer's
    domain."""
    idx = list(consumer.indices)
    strips: list[ParFor] = []
    for d in split.peeled:
        v = consumer.vars[d]
        before, after, box = _ranges(split, d, v.scalar)
        for lo, hi in (before, after):
            cut = [*idx]
            cut[d] = LoopIndex(v, lo, hi)
            strips.append(ParFor(tuple(cut), boundary, consumer.locals, loc=consumer.loc))
        idx[d] = LoopIndex(v, *box)
    inner = ParFor(tuple(idx), interior, consumer.locals, loc=consumer.loc)
    return (inner, *strips)


__all__ = ["Split", "box_of", "box_test", "bound_leaves", "pieces"]
