"""Hypothesis generator of producer/consumer launch pairs for epilogue fusion (EF-12).

A :class:`Case` is a producer P and a consumer C with their launches (buffers bound by
name) and the initial contents of the buffers: inputs random, outputs NaN-poisoned so an
element nobody wrote shows. P's shapes: guarded stores, ``return`` guards, affine and
data-dependent branches, several stores per thread, loops of stores, reversed and split
indices, i64 indices; C's: element-wise with locals (scalar and array), ``let mut``
accumulation loops, helper functions, in-place update of the intermediate, read-only
arrays read anywhere. Parameter and variable names clash between P and C on purpose
(both have ``x``, ``n``, ``a``, ``i``, ``j``, ``h`` …).

``Case.legal`` says whether the case is built to be fusable (every element of C's
domain stored exactly once, no interference); the tests check that those are fused and
that the others are refused. Some mutations (``flaw``) make a case illegal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
import numpy as np
from hypothesis import strategies as st

from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.nodes import Assign as _Assign
from sarek_py.ir.nodes import (
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
    Stmt,
    Store,
    Var,
    seq,
    var,
)
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, array
from sarek_py.ir.visit import iter_exprs

F32, I32, I64, BOOL = Scalar.F32, Scalar.I32, Scalar.I64, Scalar.BOOL

# ------------------------------------------------------------------------- IR shorthands


def c32(v: int) -> Const:
    return Const(v, I32)


def f(v: float) -> Const:
    return Const(float(v), F32)


def b(op: str, x: Expr, y: Expr) -> Binary:
    return Binary(BinaryOp(op), x, y)


def r(v: Var) -> Ref:
    return Ref(v)


def at(a: Var, ix: Expr) -> Read:
    return Read(a, (ix,))


def st_(a: Var, ix: Expr, v: Expr) -> Store:
    return Store(a, (ix,), v)


def gid() -> Intrinsic:
    return Intrinsic("global_thread_id")


def helper(name: str, flavour: int) -> HelperFunc:
    """``fun name(u, v) : f32 = return <flavour>``: flavours differ in their body."""
    u, v = var("u", F32), var("v", F32)
    body = [b("+", b("*", r(u), r(v)), f(1.5)), b("-", r(u), b("*", r(v), f(0.25))),
            Cond(b("<", r(u), r(v)), r(u), r(v))][flavour]
    return HelperFunc(name, (u, v), F32, Return(body), pure=True)


# ---------------------------------------------------------------------------- the case


@attrs.frozen(eq=False)
class Case:
    producer: Kernel
    consumer: Kernel
    launches: tuple[KernelLaunch, KernelLaunch]
    buffers: Mapping[str, np.ndarray]
    legal: bool
    story: str

    def fresh_buffers(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.buffers.items()}


def bind(launch: KernelLaunch, bufs: Mapping[str, np.ndarray]) -> dict[str, object]:
    """The launch's arguments with buffer names replaced by the arrays of ``bufs``."""
    return {k: (bufs[v] if isinstance(v, str) else v) for k, v in launch.by_name.items()}


def run_launches(launches: list[KernelLaunch] | tuple[KernelLaunch, ...],
                 bufs: dict[str, np.ndarray],
                 run: Callable[[Kernel, dict[str, object], int, int], None]) -> None:
    for lc in launches:
        run(lc.kernel, bind(lc, bufs), lc.threads, lc.block)


def same_bits(a: np.ndarray, b_: np.ndarray) -> bool:
    return a.dtype == b_.dtype and a.shape == b_.shape and a.tobytes() == b_.tobytes()


# ----------------------------------------------------------------------------- values


@st.composite
def fexpr(draw: st.DrawFn, leaves: list[Expr], calls: list[str], depth: int = 2) -> Expr:
    """An f32 expression over ``leaves`` with ``+ - *``, conditionals and helper calls."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.sampled_from(["+", "-", "*", "cond", "call", "min"]))
    x = draw(fexpr(leaves, calls, depth - 1))
    y = draw(fexpr(leaves, calls, depth - 1))
    if kind == "cond":
        return Cond(b(">", x, f(0.0)), x, y)
    if kind == "call" and calls:
        return Call(draw(st.sampled_from(calls)), (x, y), F32)
    if kind == "min":
        return Intrinsic("min", (x, y))
    return b(kind if kind in "+-*" else "+", x, y)


# -------------------------------------------------------------------------- producers

P_SHAPES = ("guard", "return", "affine_branch", "data_branch", "two_stores", "loop",
            "reversed", "halves", "i64_index")
FLAWS = ("none", "double_store", "too_few_threads", "one_sided_data_branch",
         "nonaffine_index", "consumer_reads_neighbour", "consumer_writes_input",
         "consumer_uses_thread_id", "helper_clash", "consumer_writes_side_output")


@st.composite
def cases(draw: st.DrawFn, flaw_rate: int = 4) -> Case:
    """A producer/consumer pair with launches; about one case in ``flaw_rate`` is flawed."""
    n = draw(st.integers(1, 70))
    block = draw(st.sampled_from([1, 3, 8, 32, 64]))
    shape = draw(st.sampled_from(P_SHAPES))
    flaw = "none" if draw(st.integers(0, flaw_rate - 1)) else draw(st.sampled_from(FLAWS[1:]))
    slack = draw(st.integers(0, 3))
    tc = n if flaw == "too_few_threads" else n - draw(st.integers(0, min(2, n - 1)))

    # ---- P's parameters: x input, I intermediate, w side output, a scale, n count
    x, inter, w = var("x", array(F32)), var("y", array(F32)), var("w", array(F32))
    a, pn = var("a", F32), var("n", I32)
    i = var("i", I32)
    p_calls: list[str] = []
    p_helpers: list[HelperFunc] = []
    if draw(st.booleans()):
        p_helpers.append(helper("h", 0))
        p_calls.append("h")

    def value(ix: Expr, extra: list[Expr] | None = None) -> Expr:
        leaves: list[Expr] = [at(x, ix), r(a), f(draw(st.sampled_from([0.5, -2.0, 3.25])))]
        return draw(fexpr(leaves + (extra or []), p_calls))

    side = draw(st.booleans())

    def store(ix: Expr, extra: list[Expr] | None = None) -> Stmt:
        s: Stmt = st_(inter, ix, value(ix, extra))
        if side:
            s = seq(s, st_(w, ix, b("*", at(x, ix), r(a))))
        return s

    tp = n + draw(st.integers(0, 5))
    lt_n = b("<", r(i), r(pn))
    body: Stmt
    if shape == "guard":
        body = If(lt_n, store(r(i)))
    elif shape == "return":
        body = seq(If(b(">=", r(i), r(pn)), Return()), store(r(i)))
    elif shape == "affine_branch":
        m = draw(st.integers(0, n))
        body = If(b("<", r(i), c32(m)), store(r(i)), If(lt_n, store(r(i))))
    elif shape == "data_branch":
        body = If(lt_n, If(b(">", at(x, r(i)), f(0.0)), store(r(i)), store(r(i))))
    elif shape == "two_stores":
        j = var("j", I32)
        tp = (n + 1) // 2 + draw(st.integers(0, 2))
        body = Let(j, b("*", c32(2), r(i)), seq(
            If(b("<", r(j), r(pn)), store(r(j))),
            If(b("<", b("+", r(j), c32(1)), r(pn)), store(b("+", r(j), c32(1))))))
    elif shape == "loop":
        k_ = draw(st.integers(1, 4))
        kv, j = var("k", I32), var("j", I32)
        tp = -(-n // k_) + draw(st.integers(0, 2))
        inner = Let(j, b("+", b("*", c32(k_), r(i)), r(kv)),
                    If(b("<", r(j), r(pn)), store(r(j), [Cast(F32, r(kv))])))
        body = For(kv, c32(0), c32(k_ - 1), inner)
    elif shape == "reversed":
        body = If(lt_n, store(b("-", b("-", r(pn), c32(1)), r(i))))
    elif shape == "halves":
        h = (n + 1) // 2
        tp = h + draw(st.integers(0, 2))
        body = seq(If(b("<", r(i), c32(h)), store(r(i))),
                   If(b("&&", b("<", r(i), c32(h)), b("<", b("+", r(i), c32(h)), r(pn))),
                      store(b("+", r(i), c32(h)))))
    else:  # i64_index
        one: Stmt = st_(inter, Cast(I64, r(i)), value(r(i)))
        if side:
            one = seq(one, st_(w, r(i), b("*", at(x, r(i)), r(a))))
        body = If(lt_n, one)
    legal = True
    if flaw == "double_store":
        body = seq(body, If(b("==", r(i), c32(0)), st_(inter, c32(0), f(7.0))))
        legal = False
    elif flaw == "too_few_threads":
        tp = 0 if shape in ("two_stores", "loop", "halves") else n - 1
        legal = False
    elif flaw == "one_sided_data_branch":
        body = seq(body, If(b(">", at(x, c32(0)), f(0.0)),
                            If(b("==", r(i), c32(0)), st_(inter, c32(0), f(1.0)))))
        legal = False
    elif flaw == "nonaffine_index":
        body = If(lt_n, st_(inter, b("%", b("*", r(i), c32(7)), b("+", r(pn), c32(0))),
                            f(2.0)))
        legal = False
    producer = Kernel("prod", (x, inter, w, a, pn), (), Let(i, gid(), body),
                      tuple(p_helpers))

    # ---- C: reads the intermediate (named src) and another input (named x), writes out
    src, cx, out = var("src", array(F32)), var("x", array(F32)), var("out", array(F32))
    ca, cn = var("a", F32), var("n", I32)
    ci = var("i", I32)
    c_helpers: list[HelperFunc] = []
    c_calls: list[str] = []
    if draw(st.booleans()):
        c_helpers.append(helper("h", 0))
        c_calls.append("h")
    if draw(st.booleans()):
        c_helpers.append(helper("g", draw(st.integers(0, 2))))
        c_calls.append("g")
    if flaw == "helper_clash":
        c_helpers = [hh for hh in c_helpers if hh.name != "h"] + [helper("h", 1)]
        if not p_helpers:
            p_helpers.append(helper("h", 0))
            producer = attrs.evolve(producer, helpers=tuple(p_helpers))
        legal = False
    in_place = draw(st.integers(0, 3)) == 0 and not side
    dest = src if in_place else out
    leaves: list[Expr] = [at(src, r(ci)), at(cx, r(ci)), r(ca), f(1.0)]
    if draw(st.booleans()):
        leaves.append(at(cx, c32(0)))  # a read-only array read anywhere
    locals_: list[Var] = []
    style = draw(st.sampled_from(["plain", "local", "let_mut", "local_array"]))
    cbody: Stmt
    val = draw(fexpr(leaves, c_calls))
    if not any(isinstance(e, Read) and e.array == src for e in iter_exprs(val)):
        val = b(draw(st.sampled_from(["+", "*"])), at(src, r(ci)), val)
    if style == "plain":
        cbody = st_(dest, r(ci), val)
    elif style == "local":  # a kernel local accumulates: must restart at zero per element
        acc = var("acc", F32, mutable=True)
        locals_.append(acc)
        cbody = seq(_Assign(acc, b("+", r(acc), val)), _Assign(acc, b("+", r(acc), f(1.0))),
                    st_(dest, r(ci), r(acc)))
    elif style == "let_mut":
        acc, kk = var("acc", F32, mutable=True), var("k", I32)
        cbody = Let(acc, f(0.0), seq(
            For(kk, c32(0), c32(2), _Assign(acc, b("+", r(acc), b("*", val, f(0.5))))),
            st_(dest, r(ci), r(acc))))
    else:
        tmp = var("t", ArrayType(F32, MemSpace.LOCAL, (0,), (3,)))
        locals_.append(tmp)
        cbody = seq(Store(tmp, (c32(1),), b("+", Read(tmp, (c32(1),)), val)),
                    Store(tmp, (c32(2),), b("+", Read(tmp, (c32(1),)), Read(tmp, (c32(2),)))),
                    st_(dest, r(ci), Read(tmp, (c32(2),))))
    if flaw == "consumer_reads_neighbour":
        cbody = seq(cbody, If(b("<", b("+", r(ci), c32(1)), r(cn)),
                              st_(out, r(ci), at(src, b("+", r(ci), c32(1))))))
        legal = False
    elif flaw == "consumer_writes_input":
        cbody = seq(cbody, st_(cx, r(ci), f(0.0)))
        # C writes what P reads (when P's values happen to read x at all), or what it
        # reads itself away from its index (x[0])
        legal = legal and not any(isinstance(e, Read) and e.array == x
                                  for e in iter_exprs(producer.body))
        legal = legal and not any(isinstance(e, Read) and e.array == cx
                                  and e.index != (r(ci),) for e in iter_exprs(cbody))
    elif flaw == "consumer_uses_thread_id":
        cbody = seq(cbody, st_(out, r(ci), Cast(F32, Intrinsic("thread_idx_x"))))
        legal = False
    consumer = Kernel("cons", (src, cx, out, ca, cn), tuple(locals_),
                      Let(ci, gid(), If(b("<", r(ci), r(cn)), cbody)), tuple(c_helpers))

    # ---- buffers and launches
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    size = n + slack
    bufs = {
        "X": rng.standard_normal(size).astype(np.float32),
        "Y": np.full(size, np.nan, np.float32),
        "W": np.full(size, np.nan, np.float32),
        "Z": rng.standard_normal(size).astype(np.float32),
        "OUT": np.full(size, np.nan, np.float32),
    }
    c_out = "OUT"
    if flaw == "consumer_writes_side_output":
        c_out = "W"
        legal = legal and not side
    if flaw == "consumer_writes_input":
        # C's x is P's x: C writes what P reads
        c_x = "X"
    else:
        c_x = draw(st.sampled_from(["X", "Z"]))
    scale = float(np.float32(draw(st.sampled_from([0.5, -1.25, 3.0]))))
    pl = KernelLaunch(producer, tp, block, {"x": "X", "y": "Y", "w": "W", "a": scale, "n": n})
    cl = KernelLaunch(consumer, tc, draw(st.sampled_from([1, 8, 64])),
                      {"src": "Y", "x": c_x, "out": c_out, "a": float(np.float32(-scale)),
                       "n": tc})
    story = f"shape={shape} flaw={flaw} n={n} tp={tp} tc={tc} block={block} style={style} " \
            f"in_place={in_place} side={side}"
    return Case(producer, consumer, (pl, cl), bufs, legal, story)
