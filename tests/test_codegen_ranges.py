"""The value ranges behind CG-18 and CG-19 are sound (specs/codegen.md, CG-18).

Random integer expressions over parameters set to values at and around the ends of their
types, under a random condition: whenever the interpreter evaluates the expression where
the condition holds, its value lies in the interval ``int_range`` gives with the ranges
``refine`` draws from the condition. An unsound range would let the emitter drop a
wrap-around guard (CG-18) or write a loop that steps past the end of its type (CG-19).
``SAREK_FUZZ=1`` runs many more examples.
"""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sarek_py.analysis.ranges import int_range, refine, type_range
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    If,
    Intrinsic,
    Kernel,
    Length,
    Ref,
    Store,
    Unary,
    UnaryOp,
    var,
)
from sarek_py.ir.types import Scalar, array

FUZZ = bool(os.environ.get("SAREK_FUZZ"))

X, Y = var("x", Scalar.I32), var("y", Scalar.I32)
Z = var("z", Scalar.I64)
A = var("a", array(Scalar.F32))
OUT32, OUT64 = var("out32", array(Scalar.I32)), var("out64", array(Scalar.I64))
ENDS = {Scalar.I32: [2**31 - 1, 2**31 - 2, -(2**31), -(2**31) + 1, -1, 0, 1, 2, 7, 100],
        Scalar.I64: [2**63 - 1, 2**63 - 2, -(2**63), -(2**63) + 1, -1, 0, 1, 2**31, 7]}
_ARITH = [BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL]


def consts(t: Scalar) -> st.SearchStrategy[Expr]:
    return st.sampled_from(ENDS[t]).map(lambda v: Const(v, t))


@st.composite
def int_exprs(draw: st.DrawFn, t: Scalar, depth: int = 3) -> Expr:
    leaves: list[Expr] = [Ref(Z)] if t is Scalar.I64 else [
        Ref(X), Ref(Y), Length(A), Intrinsic("thread_idx_x"), Intrinsic("global_thread_id")]
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(st.sampled_from(leaves), consts(t)))
    kind = draw(st.integers(0, 7))
    sub = int_exprs(t, depth - 1)
    if kind <= 2:
        return Binary(draw(st.sampled_from(_ARITH)), draw(sub), draw(sub))
    if kind == 3:
        c = draw(st.sampled_from([1, 2, 3, 4, 7, 100, -3]))
        op = draw(st.sampled_from([BinaryOp.MOD, BinaryOp.DIV, BinaryOp.BAND, BinaryOp.SHR]))
        if op is BinaryOp.SHR:
            c = abs(c) % 8
        return Binary(op, draw(sub), Const(c, t))
    if kind == 4:
        return Unary(UnaryOp.NEG, draw(sub))
    if kind == 5:
        other = Scalar.I64 if t is Scalar.I32 else Scalar.I32
        return Cast(t, draw(int_exprs(other, depth - 1)))
    if kind == 6:
        return Intrinsic(draw(st.sampled_from(["min", "max"])), (draw(sub), draw(sub)))
    return Cond(draw(conds(depth - 1)), draw(sub), draw(sub))


@st.composite
def conds(draw: st.DrawFn, depth: int = 1) -> Expr:
    t = draw(st.sampled_from([Scalar.I32, Scalar.I64]))
    v = Ref(Z) if t is Scalar.I64 else draw(st.sampled_from([Ref(X), Ref(Y)]))
    op = draw(st.sampled_from([BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE,
                               BinaryOp.EQ, BinaryOp.NE]))
    other = draw(int_exprs(t, depth))
    c: Expr = Binary(op, v, other) if draw(st.booleans()) else Binary(op, other, v)
    if depth > 0 and draw(st.booleans()):
        c = Binary(draw(st.sampled_from([BinaryOp.AND, BinaryOp.OR])), c,
                   draw(conds(depth - 1)))
    if draw(st.booleans()):
        c = Unary(UnaryOp.NOT, c)
    return c


@settings(max_examples=1000 if FUZZ else 150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([Scalar.I32, Scalar.I64]).flatmap(
    lambda t: st.tuples(st.just(t), int_exprs(t))), conds(),
    st.sampled_from(ENDS[Scalar.I32]), st.sampled_from(ENDS[Scalar.I32]),
    st.sampled_from(ENDS[Scalar.I64]), st.booleans())
def test_cg18_ranges_contain_every_value(te: tuple[Scalar, Expr], cond: Expr, x: int, y: int,
                                         z: int, holds: bool) -> None:
    t, e = te
    out = OUT32 if t is Scalar.I32 else OUT64
    guard = cond if holds else Unary(UnaryOp.NOT, cond)
    k = Kernel("r", (X, Y, Z, A, OUT32, OUT64), (),
               If(guard, Store(out, (Const(0, Scalar.I32),), e)))
    bufs = {"out32": np.zeros(1, np.int32), "out64": np.zeros(1, np.int64)}
    bufs["out32"][0], bufs["out64"][0] = 7, 7
    sentinel = int(bufs[out.name][0])
    try:
        run_kernel(k, {"x": np.int32(x), "y": np.int32(y), "z": np.int64(z),
                       "a": np.zeros(5, np.float32), **bufs}, 1, 1)
    except InterpError:
        return  # undefined here (a division overflow …): nothing to check
    env = refine(cond, {}, holds)
    lo, hi = int_range(e, env)
    assert type_range(t)[0] <= lo <= hi <= type_range(t)[1]
    got = int(bufs[out.name][0])
    wrote = got != sentinel or _holds(cond, holds, x, y, z, k)
    if wrote:
        assert lo <= got <= hi, (e, env, got)
    # every refined variable's actual value is in its range when the branch is taken
    if _holds(cond, holds, x, y, z, k):
        for v, val in ((X, x), (Y, y), (Z, z)):
            if v.id in env:
                assert env[v.id][0] <= val <= env[v.id][1], (cond, holds, v.name, val)


def _holds(cond: Expr, holds: bool, x: int, y: int, z: int, k: Kernel) -> bool:
    """Whether the branch is taken, by the interpreter (stores 1 when it is)."""
    flag = var("flag", array(Scalar.I32))
    guard = cond if holds else Unary(UnaryOp.NOT, cond)
    probe = Kernel("p", (X, Y, Z, A, flag), (),
                   If(guard, Store(flag, (Const(0, Scalar.I32),), Const(1, Scalar.I32))))
    buf = np.zeros(1, np.int32)
    run_kernel(probe, {"x": np.int32(x), "y": np.int32(y), "z": np.int64(z),
                       "a": np.zeros(5, np.float32), "flag": buf}, 1, 1)
    return bool(buf[0])
