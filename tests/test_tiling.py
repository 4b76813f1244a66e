"""Tiled and flat launches of loop nests (specs/tiling.md, TIL-1 … TIL-8)."""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.codegen import emit_opencl
from sarek_py.host.tiling import (
    Loop,
    Nest,
    TiledKernel,
    TilingRefused,
    choose_launch,
    tile_dims,
    tile_nest,
    tiled_args,
)
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    If,
    Let,
    Read,
    Ref,
    Return,
    Store,
    Var,
    iter_stmts,
    seq,
    var,
)
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import Scalar, array
from sarek_py.runtime import Backend, get_backend

I32 = Scalar.I32


def c(v: int) -> Const:
    return Const(v, I32)


def add(a: Expr, b: Expr) -> Binary:
    return Binary(BinaryOp.ADD, a, b)


def sub(a: Expr, b: Expr) -> Binary:
    return Binary(BinaryOp.SUB, a, b)


def nest2(store: str = "ij", lower: tuple[int, int] = (0, 0)) -> tuple[Nest, Var, Var]:
    """for i = lo0 to lo0+n-1, j = lo1 to lo1+m-1: b[i - lo0, j - lo1] <- 2 * a[...] + i."""
    a = var("a", array(Scalar.F32, 2))
    b = var("b", array(Scalar.F32, 2))
    n, m = var("n", I32), var("m", I32)
    i, j = var("i", I32), var("j", I32)
    zi, zj = sub(Ref(i), c(lower[0])), sub(Ref(j), c(lower[1]))
    idx = (zi, zj) if store == "ij" else (zj, zi)
    body = Store(b, idx, add(Binary(BinaryOp.MUL, Const(2.0, Scalar.F32), Read(a, idx)),
                             Cast(Scalar.F32, Ref(i))))
    loops = (Loop(i, c(lower[0]), add(c(lower[0] - 1), Ref(n))),
             Loop(j, c(lower[1]), add(c(lower[1] - 1), Ref(m))))
    return Nest("twice", (a, b, n, m), loops, body), i, j


def nest3() -> Nest:
    """for k, i, j: b[k, i, j] <- a[k, i, j] + k (three dimensions)."""
    a = var("a", array(Scalar.F64, 3))
    b = var("b", array(Scalar.F64, 3))
    p, n, m = var("p", I32), var("n", I32), var("m", I32)
    k, i, j = var("k", I32), var("i", I32), var("j", I32)
    idx = (Ref(k), Ref(i), Ref(j))
    body = Store(b, idx, add(Read(a, idx), Cast(Scalar.F64, Ref(k))))
    loops = tuple(Loop(v, c(0), sub(Ref(e), c(1))) for v, e in ((k, p), (i, n), (j, m)))
    return Nest("plus_k", (a, b, p, n, m), loops, body)


def backends() -> list[Backend]:
    out = [get_backend("interp")]
    try:
        out.append(get_backend("opencl"))
    except BackendUnavailable:
        pass
    return out


# ----------------------------------------------------------------------------- TIL-1


def test_til1_one_dimension_is_refused() -> None:
    nest, i, _ = nest2()
    one = Nest("one", nest.params, nest.loops[:1], Store(nest.params[1], (Ref(i), c(0)),
                                                         Const(0.0, Scalar.F32)))
    with pytest.raises(TilingRefused, match="TIL-1") as info:
        tile_nest(one)
    assert info.value.rule == "TIL-1"


def test_til1_reduction_is_refused() -> None:
    nest, i, _ = nest2()
    b = nest.params[1]
    red = Nest("red", nest.params, nest.loops, Store(b, (Ref(i), c(0)), Const(1.0, Scalar.F32)))
    with pytest.raises(TilingRefused, match="reduction"):
        tile_nest(red)


# ------------------------------------------------------------------------ TIL-2, TIL-3


def test_til2_til3_dimensions_from_the_stores() -> None:
    assert tile_dims(nest2("ij")[0]) == (1, 0)  # b[i, j]: contiguous in j, then i
    assert tile_dims(nest2("ji")[0]) == (0, 1)  # b[j, i]: contiguous in i, then j
    assert tile_dims(nest3()) == (2, 1)


def test_til2_disagreeing_stores_use_loop_order() -> None:
    nest, i, j = nest2("ij")
    a, b = nest.params[0], nest.params[1]
    both = seq(nest.body, Store(a, (Ref(j), Ref(i)), Const(0.0, Scalar.F32)))
    n2 = Nest("both", nest.params, nest.loops, both)
    assert tile_dims(n2) == (1, 0)  # innermost loop, then the one outside it
    del b


def test_til3_next_dimension_in_loop_order_when_seconds_disagree() -> None:
    nest = nest3()
    a, b = nest.params[0], nest.params[1]
    k, i, j = (lp.var for lp in nest.loops)
    body = seq(Store(b, (Ref(k), Ref(i), Ref(j)), Const(0.0, Scalar.F64)),
               Store(a, (Ref(i), Ref(k), Ref(j)), Const(0.0, Scalar.F64)))
    # both contiguous in j; second-to-last index i vs k: the loop just outside j, i.e. i
    assert tile_dims(Nest("mix", nest.params, nest.loops, body)) == (2, 1)
    # contiguous loop outermost: the next one is the loop inside it
    body2 = Store(b, (Ref(j), Ref(i), Ref(k)), Const(0.0, Scalar.F64))
    body3 = seq(body2, Store(a, (Ref(i), Ref(j), Ref(k)), Const(0.0, Scalar.F64)))
    assert tile_dims(Nest("outer", nest.params, nest.loops, body3)) == (0, 1)


# ------------------------------------------------------------------------ TIL-4, TIL-5


def tk2() -> TiledKernel:
    return tile_nest(nest2()[0])


def test_til4_square_is_tiled() -> None:
    ch = choose_launch(tk2(), (64, 64), 256)
    assert ch.tiled and ch.thread_count == 64 * 64 and ch.padding == 0.0


def test_til4_tall_skinny_is_tiled() -> None:
    ch = choose_launch(tk2(), (10000, 32), 256)
    assert ch.tiled and ch.thread_count == 10000 * 32


def test_til4_small_padding_stays_tiled() -> None:
    ch = choose_launch(tk2(), (70, 60), 256)  # 72 x 64 tiles: 9.7 % padding
    assert ch.tiled and ch.thread_count == 72 * 64
    assert ch.padding == pytest.approx(72 * 64 / 4200 - 1)


def test_til5_short_contiguous_dimension_is_flat() -> None:
    ch = choose_launch(tk2(), (1000, 3), 256)  # 3 -> 32: padding > 25 %
    assert not ch.tiled and ch.thread_count == 3000 and ch.padding > 0.25


def test_til5_short_next_dimension_is_flat() -> None:
    ch = choose_launch(tk2(), (3, 1024), 256)  # 3 rows -> 8
    assert not ch.tiled and ch.thread_count == 3 * 1024


def test_til5_just_over_a_quarter_is_flat() -> None:
    # 8 rows x 40 columns -> 8 x 64 tiles: 60 % padding; 8 x 52 -> 64: 23 % stays tiled
    assert not choose_launch(tk2(), (8, 40), 256).tiled
    assert choose_launch(tk2(), (8, 52), 256).tiled


def test_til5_block_not_a_multiple_of_32_and_empty_nest() -> None:
    assert not choose_launch(tk2(), (64, 64), 100).tiled
    empty = choose_launch(tk2(), (0, 64), 256)
    assert not empty.tiled and empty.thread_count == 0


def test_til4_three_dimensions() -> None:
    tk = tile_nest(nest3())
    ch = choose_launch(tk, (4, 64, 64), 256)
    assert ch.tiled and ch.thread_count == 4 * 64 * 64
    flat = choose_launch(tk, (4, 64, 5), 256)
    assert not flat.tiled and flat.thread_count == 4 * 64 * 5


# ------------------------------------------------------------------------ TIL-6, TIL-7


def test_til6_padded_threads_return_before_the_lower_bounds() -> None:
    tk = tk2()
    check_kernel(tk.kernel)
    stmts = list(iter_stmts(tk.kernel.body))
    ret = next(n for n, s in enumerate(stmts) if isinstance(s, If) and isinstance(s.then,
                                                                                  Return))
    loop_vars = {lp.var for lp in tk.nest.loops}
    binds = [n for n, s in enumerate(stmts) if isinstance(s, Let) and s.var in loop_vars]
    assert binds and all(ret < n for n in binds)


def test_til6_indices_near_the_top_of_i32_do_not_overflow() -> None:
    """Rows start at 2**31 - 10: a padded row (z >= 10) would wrap if its index were
    formed; the interpreter would then report an out-of-bounds store."""
    top = 2**31 - 10
    nest, _, _ = nest2(lower=(top, 0))
    tk = tile_nest(nest)
    for be in backends():
        a = np.random.default_rng(1).standard_normal((10, 40)).astype(np.float32)
        b = np.zeros((10, 40), np.float32)
        args, ch = tiled_args(tk, {"a": a, "b": b, "n": 10, "m": 40}, 256, force=True)
        assert ch.tiled and ch.thread_count == 16 * 64
        be.run_kernel(tk.kernel, args, ch.thread_count, 256)
        rows = (np.arange(top, top + 10, dtype=np.int64)).astype(np.float32)[:, None]
        assert (b == 2 * a + rows).all()


def test_til7_thread_counts_and_arithmetic_are_64_bit() -> None:
    ch = choose_launch(tk2(), (70000, 70000), 256)
    assert ch.tiled and ch.thread_count == 70000 * 70016 and ch.thread_count > 2**32
    k = tk2().kernel
    thread = k.body
    assert isinstance(thread, Let) and thread.var.type is Scalar.I64
    src = emit_opencl(k)
    assert "long thread = (long)(int)get_group_id(0) * (long)(int)get_local_size(0)" in src
    assert all(v.type is Scalar.I64 for v in k.locals)


# ----------------------------------------------------------------------------- TIL-8


@pytest.mark.parametrize("shape", [(64, 64), (45, 70), (300, 3), (5, 200)])
@pytest.mark.parametrize("force", [None, True, False])
def test_til8_tiled_and_flat_match_the_sequential_nest(shape: tuple[int, int],
                                                       force: bool | None) -> None:
    nest, _, _ = nest2(lower=(1, -2))
    tk = tile_nest(nest)
    n, m = shape
    a = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    expect = 2 * a + np.arange(1, n + 1, dtype=np.float32)[:, None]
    for be in backends():
        b = np.zeros(shape, np.float32)
        args, ch = tiled_args(tk, {"a": a, "b": b, "n": n, "m": m}, 128, force)
        if force is not None:
            assert ch.tiled == force
        be.run_kernel(tk.kernel, args, ch.thread_count, 128)
        assert b.tobytes() == expect.tobytes(), (be.name, ch)


@pytest.mark.parametrize("shape", [(3, 40, 64), (2, 5, 7)])
def test_til8_three_dimensions_match(shape: tuple[int, int, int]) -> None:
    tk = tile_nest(nest3())
    p, n, m = shape
    a = np.random.default_rng(3).standard_normal(shape)
    expect = a + np.arange(p, dtype=np.float64)[:, None, None]
    for be in backends():
        for force in (True, False):
            b = np.zeros(shape)
            args, ch = tiled_args(tk, {"a": a, "b": b, "p": p, "n": n, "m": m}, 256, force)
            be.run_kernel(tk.kernel, args, ch.thread_count, 256)
            assert b.tobytes() == expect.tobytes(), (be.name, force)
