"""The predicted time of a fusion plan, fused against unfused (specs/loop-fusion.md,
LF-62).

:func:`price` completes the LF-13 decision of a :class:`~sarek_py.fusion.loops.plan.Plan`
with a :class:`~sarek_py.fusion.loops.cost.Prediction` for the backend of
:class:`~sarek_py.fusion.loops.fusion.FusionOptions` from the cost table:

* unfused: the producer's loop and the consumer's loop, two launches, each point priced by
  its counts (:func:`~sarek_py.fusion.loops.cost_counts.count`) on the roofline
  (:func:`ns`: the larger of its bytes' time and its compute's time, LF-75);
* fused: the fused loop as the rewrite builds it (:func:`fused_loop`: each read of an
  intermediate is the producer's expression, with its loads, so recompute multiplies the
  producer's loads too), priced on its interior branch when LF-52 split it (the boundary
  branch runs on a vanishing share of the points) plus the interior test, and one copy
  loop (a launch, a load and a store per point) per renamed array not ping-ponged (PP-4);
* fused with a box (LF-85): the pieces the fused branch runs (:func:`fused_pieces`,
  LF-100): the interior nest at the plain recompute's counts (no test), each boundary
  strip at the select form's, each over its own points (LF-101), a launch per piece that
  has points (LF-102); the producer does not run in a fused iteration (LF-50).

When the bounds of both loops are literals or read integer scalars whose declared value
no statement changes, the totals per iteration of the time loop, launches included,
decide; else the per-point times (the limit of a large domain), the producer's domain
taken as large as the consumer's (and, split, the interior nest's points: LF-101).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from sarek_py.analysis.effects import stmt_effects
from sarek_py.fusion.loops.cost import Prediction
from sarek_py.fusion.loops.cost_counts import Counts, count
from sarek_py.fusion.loops.cost_table import TABLE
from sarek_py.fusion.loops.fused_loop import copy_loop, fused_loop, fused_loops
from sarek_py.fusion.loops.plan import Plan
from sarek_py.ir.host.program import ParFor, Program
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    HelperFunc,
    If,
    Intrinsic,
    Ref,
    Var,
)

LAUNCH = "launch"


#: the kind priced on the memory side of the roofline (LF-75); every other kind is compute
MEMORY = "byte"


def memory_ns(counts: Counts, row: Mapping[str, float]) -> float:
    """The memory side of one point (LF-75): its bytes streamed at the row's ns per byte."""
    return row.get(MEMORY, 0.0) * counts[MEMORY]


def compute_ns(counts: Counts, row: Mapping[str, float]) -> float:
    """The compute side of one point (LF-75): every other kind at its ns (the point's own
    cost, loads, operations by type and kind, selects)."""
    return sum(row.get(k, 0.0) * v for k, v in counts.as_dict().items() if k != MEMORY)


def ns(counts: Counts, row: Mapping[str, float]) -> float:
    """The time in ns of one point with ``counts`` on a backend's ``row``: the roofline,
    the larger of the memory and the compute side -- a loop streaming its bytes while it
    computes is bound by the slower of the two (LF-75)."""
    return max(memory_ns(counts, row), compute_ns(counts, row))


#: the prefix of a row's kinds measured on nests of two or more dimensions (LF-114)
ND = "nd."


def row_for(row: Mapping[str, float], rank: int) -> Mapping[str, float]:
    """The kinds of ``row`` that price a loop of ``rank`` dimensions (LF-114): a nest of
    two or more is priced by the row's ``nd.`` kinds when it has them (the backend
    compiles it differently: on c the rows kernel of OFF-11, vectorised along its
    contiguous dimension), every other loop by its plain kinds."""
    if rank >= 2 and any(k.startswith(ND) for k in row):
        return {k[len(ND):]: v for k, v in row.items() if k.startswith(ND)}
    return row


def loop_ns(loop: ParFor, counts: Counts, row: Mapping[str, float]) -> float:
    """:func:`ns` of one point of ``loop`` on the part of ``row`` for its rank (LF-114)."""
    return ns(counts, row_for(row, len(loop.indices)))


def fused_counts(plan: Plan, helpers: Mapping[str, HelperFunc]) -> Counts:
    """The per-point counts of the fused loop (LF-61, LF-62); with a box (LF-85), of the
    interior nest, which runs the plain recompute with no test (LF-100)."""
    if _is_split(plan):
        return count(fused_loops(plan, {})[0].body, helpers)
    loop = fused_loop(plan, {})
    body = loop.body
    if plan.interior is not None and isinstance(body, If):
        # LF-52: the interior branch, plus its test (a select and the test's operations)
        return count(body.then, helpers) + _test_counts(body, helpers)
    return count(body, helpers)


def _is_split(plan: Plan) -> bool:
    """The fused loop runs as the interior nest and the boundary strips (LF-85)."""
    return plan.split is not None and plan.interior is not None


def fused_pieces(plan: Plan, helpers: Mapping[str, HelperFunc]
                 ) -> tuple[tuple[ParFor, Counts], ...]:
    """The loops the fused branch runs, each with its per-point counts (LF-100): the fused
    loop (:func:`fused_counts`), or, with a box (LF-85), the interior nest (the plain
    recompute, no test) then each boundary strip (the select form of LF-50: the
    producer's expression and the stored element, both arms, the domain test, the
    select). The producer's loop is not among them: a fused iteration stores nothing of
    the producer's (LF-50)."""
    if not _is_split(plan):
        return ((fused_loop(plan, {}), fused_counts(plan, helpers)),)
    return tuple((lp, count(lp.body, helpers)) for lp in fused_loops(plan, {}))


def _test_counts(body: If, helpers: Mapping[str, HelperFunc]) -> Counts:
    whole = count(If(body.cond, body.then), helpers)
    then = count(body.then, helpers)
    d = {k: whole[k] - then[k] for k in whole.as_dict()}
    d["point"] = 0.0
    d["byte"] = 0.0
    return Counts(tuple(d.items()))


def declared_values(program: Program) -> dict[Var, int]:
    """The integer scalars of ``program`` with a literal initial value that no statement
    of the program changes (EFF-4: assigned, read, or passed to a procedure that does)."""
    writes = stmt_effects(program.body, program).writes
    return {d.var: int(d.init.value) for d in program.decls
            if isinstance(d.init, Const) and type(d.init.value) is int
            and d.var not in writes}


def _value(e: Expr, env: Mapping[Var, int]) -> int | None:
    match e:
        case Const(value=v) if type(v) is int:
            return v
        case Ref(var=v):
            return env.get(v)
        case Cast(to=t, arg=a) if t.is_int:
            return _value(a, env)
        case Intrinsic(name="min" | "max" as name, args=(a, b)):
            # the pieces' bounds of LF-86 (LF-101)
            x, y = _value(a, env), _value(b, env)
            if x is None or y is None:
                return None
            return min(x, y) if name == "min" else max(x, y)
        case Binary(op=op, lhs=lhs, rhs=rhs) if op in _INT_OPS:
            x, y = _value(lhs, env), _value(rhs, env)
            return None if x is None or y is None else _INT_OPS[op](x, y)
    return None


_INT_OPS = {BinaryOp.ADD: lambda x, y: x + y, BinaryOp.SUB: lambda x, y: x - y,
            BinaryOp.MUL: lambda x, y: x * y}


def points(loop: ParFor, env: Mapping[Var, int]) -> int | None:
    """The number of points of ``loop`` when its bounds are literals or read only the
    declared values ``env`` (:func:`declared_values`), else None (LF-62)."""
    n = 1
    for ix in loop.indices:
        a, b = _value(ix.start, env), _value(ix.stop, env)
        if a is None or b is None:
            return None
        n *= max(b - a + 1, 0)
    return n


def predict(plan: Plan, backend: str, row: Mapping[str, float],
            helpers: Mapping[str, HelperFunc], copies: int,
            env: Mapping[Var, int] = {}) -> Prediction:  # noqa: B006
    """Fused against unfused on ``row`` (LF-62); ``copies``: the renamed arrays copied back
    each iteration; ``env``: the declared values the bounds may read. A split pair
    (LF-85) is priced as its pieces run (LF-100..LF-102)."""
    nc, np_ = points(plan.consumer, env), points(plan.producer, env)
    known = bool(nc) and np_ is not None
    share = np_ / nc if nc and np_ is not None else 1.0
    unfused = loop_ns(plan.producer, count(plan.producer.body, helpers), row) * share \
        + loop_ns(plan.consumer, count(plan.consumer.body, helpers), row)
    copy_ns = 0.0
    for v in plan.renamed[:copies]:
        cl = copy_loop(plan.consumer, [(v, v)])
        copy_ns += loop_ns(cl, count(cl.body, helpers), row)
    pieces = fused_pieces(plan, helpers)
    split: tuple[int, ...] | None = None
    if len(pieces) == 1:
        fused, launches = loop_ns(pieces[0][0], pieces[0][1], row), 1
    else:
        sizes = [points(lp, env) for lp, _ in pieces] if known else []
        if known and all(s is not None for s in sizes):
            # LF-101: every piece over its own points, per point of the consumer's domain;
            # LF-102: a piece without points starts no thread, no launch
            split = tuple(s or 0 for s in sizes)
            assert nc is not None
            fused = sum(s * loop_ns(lp, c, row)
                        for s, (lp, c) in zip(split, pieces, strict=True)) / nc
            launches = sum(1 for s in split if s > 0)
        else:
            # LF-101: the limit of a large domain, the interior nest's points
            known, split = False, ()
            fused, launches = loop_ns(pieces[0][0], pieces[0][1], row), len(pieces)
    return Prediction(backend, fused + copy_ns, unfused, launches + copies, 2,
                      row.get(LAUNCH, 0.0), nc if known else None, split)


def price(plan: Plan, backend: str | None, helpers: Mapping[str, HelperFunc],
          swapped: bool, program: Program | None = None) -> Plan:
    """``plan`` with its cost decided on ``backend`` (LF-62, LF-64); ``swapped``: the
    renamed arrays ping-pong (no copy back); ``program``: where the bounds' declared
    values are read."""
    if backend is None:
        return plan
    row = TABLE.get(backend)
    if row is None:
        return attrs.evolve(plan, cost=attrs.evolve(plan.cost, uncalibrated=backend))
    copies = 0 if swapped else len(plan.renamed)
    env = declared_values(program) if program is not None else {}
    pred = predict(plan, backend, row, helpers, copies, env)
    return attrs.evolve(plan, cost=attrs.evolve(plan.cost, prediction=pred))


__all__ = ["MEMORY", "ND", "compute_ns", "declared_values", "fused_counts", "fused_pieces",
           "loop_ns", "memory_ns", "ns", "points", "predict", "price", "row_for"]
