"""The vectorised interpreter against a thread-by-thread reference on random kernels
(specs/interpreter.md, INT-4, INT-5, INT-6, INT-9, INT-11 to INT-14, INT-16, INT-18, INT-21).

Hypothesis builds well-formed kernels of divergent control flow -- ``if``, ``for`` with a
trip count per thread, bounded ``while``, early ``return``, ``stop``, a helper that
returns from inside a loop, local arrays -- whose operations cannot fault (divisors are
``(e & 15) + 1``, shift counts ``e & 31``, indices masked to the array). A small scalar
interpreter written here with Python integers runs each thread on its own; the outputs
and stop codes must agree exactly. A second family alternates shared-memory write and
read phases separated by barriers, checked against the same reference run phase by phase.
``SAREK_FUZZ=1`` runs many more examples.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    For,
    HelperFunc,
    If,
    Intrinsic,
    Kernel,
    Let,
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
    seq,
    var,
)
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, array

FUZZ = int(os.environ.get("SAREK_FUZZ", "0"))
I32, I64, BOOL = Scalar.I32, Scalar.I64, Scalar.BOOL


def c32(v: int) -> Const:
    return Const(v, I32)


def band(e: Expr, m: int) -> Expr:
    return Binary(BinaryOp.BAND, e, c32(m))


class Gen:
    """Draws random expressions and statements."""

    def __init__(self, data: st.DataObject, a: Var, loc: Var, out: Var,
                 helper: str | None):
        self.data = data
        self.a = a
        self.loc = loc
        self.out = out
        self.helper = helper

    def pick(self, n: int) -> int:
        return self.data.draw(st.integers(0, n - 1))

    def expr(self, depth: int, scope: list[Var]) -> Expr:
        k = self.pick(2 if depth <= 0 else 12)
        d = depth - 1
        if k == 0:
            return c32(self.data.draw(st.sampled_from(
                [0, 1, 2, 3, -1, -7, 1000, 2**31 - 1, -(2**31)])))
        if k == 1:  # the thread id (scope[0] in a kernel) half of the time
            return Ref(scope[0] if self.pick(2) else scope[self.pick(len(scope))])
        if k == 2:
            op = [BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL][self.pick(3)]
            return Binary(op, self.expr(d, scope), self.expr(d, scope))
        if k == 3:
            op = [BinaryOp.DIV, BinaryOp.MOD][self.pick(2)]
            divisor = Binary(BinaryOp.ADD, band(self.expr(d, scope), 15), c32(1))
            return Binary(op, self.expr(d, scope), divisor)
        if k == 4:
            op = [BinaryOp.BAND, BinaryOp.BOR, BinaryOp.BXOR][self.pick(3)]
            return Binary(op, self.expr(d, scope), self.expr(d, scope))
        if k == 5:
            op = [BinaryOp.SHL, BinaryOp.SHR][self.pick(2)]
            return Binary(op, self.expr(d, scope), band(self.expr(d, scope), 31))
        if k == 6:
            return Unary([UnaryOp.NEG, UnaryOp.BNOT][self.pick(2)], self.expr(d, scope))
        if k == 7:
            return Cond(self.cond(d, scope), self.expr(d, scope), self.expr(d, scope))
        if k == 8 and self.helper is not None:
            return Read(self.a, (band(self.expr(d, scope), 7),))
        if k == 9 and self.helper is not None:
            return Read(self.loc, (band(self.expr(d, scope), 3),))
        if k == 10 and self.helper is not None:
            return Call(self.helper, (self.expr(d, scope), self.expr(d, scope)), I32)
        wide = Binary(BinaryOp.MUL, Cast(I64, self.expr(d, scope)),
                      Cast(I64, self.expr(d, scope)))
        return Cast(I32, wide)

    def cond(self, depth: int, scope: list[Var]) -> Expr:
        k = self.pick(1 if depth <= 0 else 4)
        d = depth - 1
        if k == 0:
            op = [BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ,
                  BinaryOp.NE][self.pick(6)]
            return Binary(op, self.expr(d, scope), self.expr(d, scope))
        if k == 1:
            op = [BinaryOp.AND, BinaryOp.OR][self.pick(2)]
            return Binary(op, self.cond(d, scope), self.cond(d, scope))
        if k == 2:
            return Unary(UnaryOp.NOT, self.cond(d, scope))
        return Const(bool(self.pick(2)), BOOL)

    def block(self, depth: int, scope: list[Var], mutables: list[Var]) -> Stmt:
        return seq(*[self.stmt(depth, scope, mutables) for _ in range(1 + self.pick(3))])

    def stmt(self, depth: int, scope: list[Var], mutables: list[Var]) -> Stmt:
        k = self.pick(4 if depth <= 0 else 9)
        d = depth - 1
        e = 2
        if k in (0, 1):
            return Assign(mutables[self.pick(len(mutables))], self.expr(e, scope))
        if k == 2:
            return Store(self.out, (Ref(scope[0]),), self.expr(e, scope))
        if k == 3:
            return Store(self.loc, (band(self.expr(1, scope), 3),), self.expr(e, scope))
        if k == 4:
            other = self.block(d, scope, mutables) if self.pick(2) else None
            return If(self.cond(2, scope), self.block(d, scope, mutables), other)
        if k == 5:
            j = var("j", I32)
            return For(j, band(self.expr(1, scope), 3), band(self.expr(1, scope), 3),
                       self.block(d, [*scope, j], mutables), down=bool(self.pick(2)))
        if k == 6:
            c = var("c", I32, mutable=True)
            test = Binary(BinaryOp.AND,
                          Binary(BinaryOp.LT, Ref(c), band(self.expr(1, scope), 3)),
                          self.cond(1, scope))
            body = seq(self.block(d, scope, mutables),
                       Assign(c, Binary(BinaryOp.ADD, Ref(c), c32(1))))
            return Let(c, c32(0), While(test, body))
        if k == 7:
            return If(self.cond(1, scope), Return())
        return If(self.cond(1, scope), Stop(1 + self.pick(5)))


def make_helper(data: st.DataObject) -> HelperFunc:
    """``h(p, q)``: returns from a branch, from inside a loop, or at the end."""
    p, q = var("p", I32), var("q", I32)
    g = Gen(data, var("_", array(I32)), var("_", array(I32)), var("_", array(I32)), None)
    j = var("j", I32)
    scope = [p, q]
    body = seq(
        If(g.cond(2, scope), Return(g.expr(2, scope))),
        For(j, c32(0), band(g.expr(1, scope), 3),
            If(g.cond(2, [*scope, j]), Return(g.expr(2, [*scope, j])))),
        Return(g.expr(2, scope)),
    )
    return HelperFunc("h", (p, q), I32, body)


def make_kernel(data: st.DataObject) -> Kernel:
    a = var("a", array(I32))
    out = var("out", array(I32))
    n = var("n", I32)
    x = var("x", I32, mutable=True)
    y = var("y", I32, mutable=True)
    loc = var("loc", ArrayType(I32, MemSpace.LOCAL, (0,), (4,)), mutable=True)
    i = var("i", I32)
    g = Gen(data, a, loc, out, "h")
    # x and y differ from thread to thread from the start: conditions diverge
    prelude = seq(
        Assign(x, Binary(BinaryOp.SUB, Binary(BinaryOp.MUL, Ref(i), c32(7)), Ref(n))),
        Assign(y, Read(a, (band(Ref(i), 7),))),
    )
    body = seq(prelude, g.block(3, [i, n, x, y], [x, y]))
    final = Store(out, (Ref(i),), Binary(BinaryOp.BXOR, Ref(x),
                                         Binary(BinaryOp.MUL, Ref(y), c32(31))))
    return Kernel("fuzz", (a, out, n), (x, y, loc),
                  Let(i, Intrinsic("global_thread_id"), seq(body, final)),
                  (make_helper(data),))


# ---------------------------------------------------------------------------- reference


def wrap(v: int, bits: int = 32) -> int:
    return ((v + 2 ** (bits - 1)) % 2**bits) - 2 ** (bits - 1)


class _Return(Exception):
    def __init__(self, value: int | None):
        self.value = value


class _Stop(Exception):
    def __init__(self, code: int):
        self.code = code


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


class Scalar1:
    """Runs one thread, with Python integers."""

    def __init__(self, k: Kernel, arrays: dict[Var, list[int]], env: dict[Var, Any],
                 thread: tuple[int, int, int] = (0, 0, 1)):
        self.k = k
        self.arrays = arrays
        self.env = env
        #: global thread id, index in the block, block size
        self.thread = thread

    def ev(self, e: Expr) -> Any:
        match e:
            case Const(value=v):
                return v
            case Intrinsic(name=name, args=()):
                t, tx, bd = self.thread
                return {"global_thread_id": t, "thread_idx_x": tx, "block_dim_x": bd}[name]
            case Ref(var=v):
                return self.env[v]
            case Unary(op=UnaryOp.NEG, arg=a):
                return wrap(-self.ev(a))
            case Unary(op=UnaryOp.BNOT, arg=a):
                return ~self.ev(a)
            case Unary(op=UnaryOp.NOT, arg=a):
                return not self.ev(a)
            case Binary(op=BinaryOp.AND, lhs=lhs, rhs=rhs):
                return bool(self.ev(lhs)) and bool(self.ev(rhs))
            case Binary(op=BinaryOp.OR, lhs=lhs, rhs=rhs):
                return bool(self.ev(lhs)) or bool(self.ev(rhs))
            case Binary(op=op, lhs=lhs, rhs=rhs):
                return self.binary(op, self.ev(lhs), self.ev(rhs), lhs)
            case Cond(cond=c, if_true=t, if_false=f):
                return self.ev(t) if self.ev(c) else self.ev(f)
            case Read(array=arr, index=(ix,)):
                return self.arrays[arr][self.ev(ix)]
            case Cast(to=to, arg=a):
                return wrap(self.ev(a), 64 if to is I64 else 32)
            case Call(func=name, args=args):
                h = self.k.helper(name)
                vals = [self.ev(x) for x in args]
                sub = Scalar1(self.k, {}, dict(zip(h.params, vals, strict=True)))
                try:
                    sub.run(h.body)
                except _Return as r:
                    return r.value
                raise AssertionError("helper fell off its end")
        raise AssertionError(f"unexpected {e!r}")

    def binary(self, op: BinaryOp, a: int, b: int, lhs: Expr) -> Any:
        bits = 64 if isinstance(lhs, Cast) and lhs.to is I64 else 32
        match op:
            case BinaryOp.ADD:
                return wrap(a + b, bits)
            case BinaryOp.SUB:
                return wrap(a - b, bits)
            case BinaryOp.MUL:
                return wrap(a * b, bits)
            case BinaryOp.DIV:
                return wrap(c_div(a, b))
            case BinaryOp.MOD:
                return a - b * c_div(a, b)
            case BinaryOp.BAND:
                return a & b
            case BinaryOp.BOR:
                return a | b
            case BinaryOp.BXOR:
                return a ^ b
            case BinaryOp.SHL:
                return wrap(a << b)
            case BinaryOp.SHR:
                return a >> b
            case BinaryOp.LT:
                return a < b
            case BinaryOp.LE:
                return a <= b
            case BinaryOp.GT:
                return a > b
            case BinaryOp.GE:
                return a >= b
            case BinaryOp.EQ:
                return a == b
            case BinaryOp.NE:
                return a != b
        raise AssertionError(op)

    def run(self, s: Stmt) -> None:
        match s:
            case Seq(stmts=ss):
                for x in ss:
                    self.run(x)
            case Let(var=v, value=val, body=b):
                self.env[v] = self.ev(val)
                self.run(b)
            case Assign(var=v, value=val):
                self.env[v] = self.ev(val)
            case Store(array=arr, index=(ix,), value=val):
                index = self.ev(ix)
                self.arrays[arr][index] = self.ev(val)
            case If(cond=c, then=t, else_=f):
                if self.ev(c):
                    self.run(t)
                elif f is not None:
                    self.run(f)
            case For(var=v, start=a, stop=b, body=body, down=down):
                lo, hi = self.ev(a), self.ev(b)
                for j in (range(lo, hi - 1, -1) if down else range(lo, hi + 1)):
                    self.env[v] = j
                    self.run(body)
            case While(cond=c, body=body):
                while self.ev(c):
                    self.run(body)
            case Return(value=v):
                raise _Return(None if v is None else self.ev(v))
            case Stop(code=code):
                raise _Stop(code)
            case _:
                raise AssertionError(f"unexpected {s!r}")


def reference(k: Kernel, a: list[int], n: int, threads: int) -> tuple[list[int], list[int]]:
    pa, pout, pn = k.params
    out = [0] * threads
    codes = [0] * threads
    for t in range(threads):
        env: dict[Var, Any] = {pn: n, k.body.var: t}  # type: ignore[union-attr]
        for v in k.locals:
            if not v.is_array:
                env[v] = 0
        loc = next(v for v in k.locals if v.is_array)
        one = Scalar1(k, {pa: a, pout: out, loc: [0] * 4}, env)
        try:
            one.run(k.body.body)  # type: ignore[union-attr]
        except _Return:
            pass
        except _Stop as s:
            codes[t] = s.code
    return out, codes


@settings(max_examples=40 + 1000 * FUZZ, deadline=None)
@given(st.data())
def test_int21_vectorised_equals_thread_by_thread(data: st.DataObject) -> None:
    k = make_kernel(data)
    check_kernel(k)
    threads = data.draw(st.integers(1, 24))
    block = data.draw(st.sampled_from([1, 4, 8, 256]))
    a = data.draw(st.lists(st.sampled_from([0, 1, -1, 5, -6, 77, 2**31 - 1, -(2**31)]),
                           min_size=8, max_size=8))
    n = data.draw(st.integers(-3, 30))
    out = np.zeros(threads, np.int32)
    res = run_kernel(k, {"a": np.array(a, np.int32), "out": out, "n": n}, threads, block)
    want_out, want_codes = reference(k, a, n, threads)
    assert res.stop_codes.tolist() == want_codes
    assert out.tolist() == want_out


# ---------------------------------------------------------------------------- barriers


def make_phased_kernel(data: st.DataObject, block: int) -> tuple[Kernel, list[list[Stmt]]]:
    """A kernel whose top level alternates write phases (each thread stores its own slot
    of a shared array) and read phases (any slot), separated by barriers; inside a phase,
    control flow diverges freely. Returns the kernel and its phases."""
    a = var("a", array(I32))
    out = var("out", array(I32))
    n = var("n", I32)
    x = var("x", I32, mutable=True)
    y = var("y", I32, mutable=True)
    loc = var("loc", ArrayType(I32, MemSpace.LOCAL, (0,), (4,)), mutable=True)
    sh = var("s", ArrayType(I32, MemSpace.SHARED, (0,), (block,)), mutable=True)
    g = Gen(data, a, loc, out, None)
    tid = Intrinsic("thread_idx_x")
    gid = Intrinsic("global_thread_id")

    def local_block() -> Stmt:
        scope = [x, y, n]
        stmts = [Assign([x, y][g.pick(2)], g.expr(2, scope)) for _ in range(1 + g.pick(2))]
        if g.pick(2):
            return If(g.cond(2, scope), seq(*stmts))
        return seq(*stmts)

    start = Assign(x, Binary(BinaryOp.ADD, gid, Read(a, (band(gid, 7),))))
    phases: list[list[Stmt]] = [[start, Assign(y, Binary(BinaryOp.MUL, tid, c32(3)))]]
    for r in range(1 + g.pick(3)):
        if r:
            phases.append([])  # a barrier between the reads and the next writes
        write = Store(sh, (tid,), Binary(BinaryOp.BXOR, Ref(x), c32(r)))
        phases[-1] += [local_block(), write]
        shift = c32(1 + g.pick(block))
        other = Binary(BinaryOp.MOD, Binary(BinaryOp.ADD, tid, shift), Intrinsic("block_dim_x"))
        read = Assign(y, Binary(BinaryOp.ADD, Ref(y), Read(sh, (other,))))
        phases.append([read, local_block()])
    phases[-1].append(Store(out, (gid,), Binary(BinaryOp.BXOR, Ref(x), Ref(y))))
    body: list[Stmt] = []
    for k, ph in enumerate(phases):
        if k:
            body.append(Barrier())
        body.extend(ph)
    return Kernel("phased", (a, out, n), (x, y, loc, sh), seq(*body)), phases


def phased_reference(k: Kernel, phases: list[list[Stmt]], a: list[int], n: int,
                     threads: int, block: int) -> list[int]:
    pa, pout, pn = k.params
    x, y, loc, sh = k.locals
    out = [0] * threads
    shared = [[0] * block for _ in range(threads // block)]
    envs = [{pn: n, x: 0, y: 0} for _ in range(threads)]
    locs = [[0] * 4 for _ in range(threads)]
    for ph in phases:
        for t in range(threads):
            one = Scalar1(k, {pa: a, pout: out, loc: locs[t], sh: shared[t // block]},
                          envs[t], (t, t % block, block))
            for s in ph:
                one.run(s)
    return out


@settings(max_examples=20 + 500 * FUZZ, deadline=None)
@given(st.data())
def test_int16_barrier_phases_equal_thread_by_thread(data: st.DataObject) -> None:
    block = data.draw(st.sampled_from([1, 2, 4, 8]))
    k, phases = make_phased_kernel(data, block)
    check_kernel(k)
    threads = block * data.draw(st.integers(1, 4))
    a = data.draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=8, max_size=8))
    n = data.draw(st.integers(-3, 30))
    out = np.zeros(threads, np.int32)
    run_kernel(k, {"a": np.array(a, np.int32), "out": out, "n": n}, threads, block)
    assert out.tolist() == phased_reference(k, phases, a, n, threads, block)
