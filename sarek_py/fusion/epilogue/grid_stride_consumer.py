"""A consumer launch that is a grid-stride loop, as the element-wise consumer launch it
equals (specs/epilogue-fusion.md EF-25), so that the epilogue fusion (which inlines an
element-wise consumer after each store, EF-1) fuses it too."""

from __future__ import annotations

import attrs
import numpy as np

from sarek_py.fusion.epilogue.grid_stride import (
    RANGE,
    NotGridStride,
    increment_wraps,
    induction,
)
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.intrinsics import GLOBAL_IDS
from sarek_py.ir.nodes import (
    Assign,
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    If,
    Intrinsic,
    Let,
    Read,
    Ref,
    Seq,
    Stmt,
    Store,
    Var,
    While,
    iter_stmts,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes, substitute


def _value(e: Expr, env: dict[Var, int], threads: int, block: int) -> int | None:
    """The integer value of a consumer's uniform expression at its launch, or ``None``."""
    match e:
        case Const(value=int() as v) if not isinstance(v, bool):
            return v
        case Ref(var=v):
            return env.get(v)
        case Intrinsic(name="block_dim_x", args=()):
            return block
        case Intrinsic(name="grid_dim_x", args=()):
            return -(-threads // block)
        case Cast(to=t, arg=a) if isinstance(t, Scalar) and t in RANGE:
            return _value(a, env, threads, block)
        case Binary(op=op, lhs=lhs, rhs=rhs):
            x, y = _value(lhs, env, threads, block), _value(rhs, env, threads, block)
            if x is None or y is None:
                return None
            if op is BinaryOp.ADD:
                return x + y
            if op is BinaryOp.SUB:
                return x - y
            if op is BinaryOp.MUL:
                return x * y
            if op in (BinaryOp.DIV, BinaryOp.MOD) and y != 0:
                q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
                return q if op is BinaryOp.DIV else x - q * y
    return None


def _in_type(v: int, t: object) -> bool:
    return isinstance(t, Scalar) and t in RANGE and RANGE[t][0] <= v <= RANGE[t][1]


def element_wise_consumer(c: Launch) -> Launch:
    """A consumer launch whose kernel is a grid-stride loop, as the element-wise consumer
    launch it equals (EF-25): ``lets; i := g; while i < m do body; i := i + s done`` on
    ``T`` threads becomes ``let i = global_thread_id in lets; if i < m then body`` on
    ``max(m, 0)`` threads. Any other launch is returned as it is (EF-1 then decides).

    Why they are equal: with the launch's numbers, ``s`` is ``T`` (or ``m <= min(s, T)``:
    one iteration a thread) and ``m - 1 + s`` fits the counter's type, so by the element
    view's proof (module docstring) the loop runs ``body`` exactly once for each ``i``
    in ``[0, m)``; ``body`` keeps no state from one iteration to the next (it reads no
    mutable variable or local array bound outside it but the counter) and, by EF-2 …
    EF-4, does nothing thread-specific and touches other elements only by reading arrays
    it does not write — so which thread runs which element, and in which order, does not
    change what it computes."""
    k = c.kernel
    lets: list[Let] = []
    b = k.body
    while isinstance(b, Let) and not b.var.mutable:
        lets.append(b)
        b = b.body
    counter: Var | None = None
    start: Expr | None = None
    loop: Stmt | None = None
    if isinstance(b, Seq) and len(b.stmts) == 2 and isinstance(b.stmts[0], Assign) \
            and isinstance(b.stmts[1], While):
        counter, start, loop = b.stmts[0].var, b.stmts[0].value, b.stmts[1]
    elif isinstance(b, Let) and b.var.mutable and isinstance(b.body, While):
        counter, start, loop = b.var, b.value, b.body
    if not isinstance(loop, While) or counter is None or start is None:
        return c
    who = f"consumer {k.name}"
    values = {lt.var: lt.value for lt in lets}
    while isinstance(start, Ref) and start.var in values:
        start = values[start.var]
    if not (isinstance(start, Intrinsic) and start.name in GLOBAL_IDS and not start.args):
        # a loop whose counter does not start at the thread's element is no grid-stride
        # loop: the consumer is decided as written (a red-team regression: `let mut k = 0
        # in while k < 2 do …` was refused EF-25 instead of fusing)
        return c
    gs = induction(loop)
    if isinstance(gs, NotGridStride):
        raise FusionRefused("EF-25", f"{who} is a while loop that is not a grid-stride "
                            f"loop: {gs.reason}", gs.loc or loop.loc)
    if gs.var != counter:
        raise FusionRefused("EF-25", f"{who}: {gs.name} counts {gs.var.name}, not "
                            f"{counter.name}, the variable assigned before it", loop.loc)
    threads, block = c.threads, c.block
    if not (isinstance(threads, int) and isinstance(block, int)) or c.shaped:
        raise FusionRefused("EF-25", f"{who} is a grid-stride loop: it is fused only on a "
                            "1-D launch whose thread count and block size are numbers "
                            "(here they are host expressions or shapes)", c.loc or k.loc)
    env: dict[Var, int] = {}
    for p, a in zip(k.params, c.args, strict=False):
        if not p.is_array and isinstance(a, (int, np.integer)) and not isinstance(a, bool):
            env[p] = int(a)
    for lt in lets:
        v = _value(lt.value, env, threads, block)
        if v is not None and _in_type(v, lt.var.type):
            env[lt.var] = v
    m, s = (_value(e, env, threads, block) for e in (gs.bound, gs.stride))
    for what, e, got in (("bound", gs.bound, m), ("stride", gs.stride, s)):
        if got is None:
            raise FusionRefused("EF-25", f"{who}: the {what} {print_expr(e)} of {gs.name} "
                                "is not a number at this launch", e.loc or loop.loc)
    assert m is not None and s is not None
    if m > 0:
        if s <= 0:
            raise FusionRefused("EF-25", f"{who}: the stride {print_expr(gs.stride)} of "
                                f"{gs.name} is {s}: the loop would not end", loop.loc)
        if not (s == threads or m <= min(s, threads)):
            raise FusionRefused(
                "EF-25", f"{who}: {gs.name} does not visit each element of [0, {m}) "
                f"exactly once: its stride {print_expr(gs.stride)} is {s}, not the launch's "
                f"{threads} threads", loop.loc)
        wraps = increment_wraps(gs, m, s)
        if wraps is not None:
            raise FusionRefused("LEG-22", f"{who}: {gs.name}: {wraps}",
                                gs.stride.loc or loop.loc)
    in_loop = {id(x) for x in iter_stmts(loop)}
    outer_mut = set(k.locals) | {x.var for x in iter_stmts(k.body) if isinstance(x, Let)
                                 and x.var.mutable and id(x) not in in_loop}
    outer_mut.discard(gs.var)
    used = next((x for x in iter_nodes(gs.body) if (isinstance(x, Ref) and x.var in outer_mut)
                 or (isinstance(x, (Store, Read)) and x.array in outer_mut)), None)
    if used is not None:
        name = used.var.name if isinstance(used, Ref) else used.array.name
        raise FusionRefused("EF-25", f"{who}: the body of {gs.name} uses {name}, which "
                            "keeps its value from one iteration to the next (an element "
                            "would depend on the ones the thread computed before)",
                            used.loc or loop.loc)
    i = Var(gs.var.name, gs.var.id, gs.var.type)
    body: Stmt = If(Binary(BinaryOp.LT, Ref(i), gs.bound), gs.body, loc=loop.loc)
    body = substitute(body, {gs.var: Ref(i)})
    for lt in reversed(lets):  # the lets the body needs (a thread id's would be EF-2)
        if any(isinstance(x, Ref) and x.var == lt.var for x in iter_nodes(body)):
            body = attrs.evolve(lt, body=body)
    new = attrs.evolve(k, body=Let(i, Intrinsic("global_thread_id"), body, loc=k.loc),
                       locals=tuple(v for v in k.locals if v != counter))
    return attrs.evolve(c, kernel=new, thread_count=max(m, 0))
