"""The reference interpreter: launch, arguments, operators and casts (specs/interpreter.md,
INT-1 to INT-10, INT-20, INT-21). Control flow, memory, barriers and races are in
tests/test_interp_flow.py and tests/test_interp_memory.py."""

from __future__ import annotations

import functools
import math
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarek_py.ir.diagnostics import InterpError, LaunchError, SarekError
from sarek_py.ir.interp import InterpResult, run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    If,
    Intrinsic,
    Kernel,
    Let,
    Read,
    Ref,
    Store,
    var,
)
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.types import Scalar, array

FUZZ = int(os.environ.get("SAREK_FUZZ", "0"))


def kernel(src: str, name: str | None = None) -> Kernel:
    """Parse and check ``src``; its kernel ``name`` (the last one by default)."""
    m = parse_module(src, "test.sk")
    check_module(m)
    return m.kernel(name) if name else m.kernels[-1]


@functools.cache
def binop_kernel(op: str, t: str) -> Kernel:
    return kernel(
        f"""
kernel k(a : {t}[], b : {t}[], out : {t}[]) =
  let i = global_thread_id in
  out[i] <- a[i] {op} b[i]
"""
    )


def c_div(a: int, b: int) -> int:
    """C's truncating division on Python integers."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


# ---------------------------------------------------------------------------- launch


def test_int1_threads_beyond_count_do_not_exist() -> None:
    k = kernel("""
kernel k(out : i32[]) =
  out[global_thread_id] <- thread_idx_x + 100 * block_idx_x
""")
    out = np.full(12, -1, dtype=np.int32)
    res = run_kernel(k, {"out": out}, threads=10, block=4)
    assert out.tolist() == [0, 1, 2, 3, 100, 101, 102, 103, 200, 201, -1, -1]
    assert isinstance(res, InterpResult)
    assert res.stop_codes.shape == (10,) and res.stop_codes.dtype == np.int32


def test_int1_block_and_grid_dims_1d() -> None:
    k = kernel("""
kernel k(out : i32[,]) =
  let i = global_thread_id in
  out[i, 0] <- block_dim_x; out[i, 1] <- grid_dim_x; out[i, 2] <- global_idx_x;
  out[i, 3] <- thread_idx_y; out[i, 4] <- block_idx_z
""")
    out = np.full((7, 5), -1, dtype=np.int32)
    with pytest.raises(LaunchError, match=r"\[LCH-26\] kernel k reads block_idx_z"):
        run_kernel(k, {"out": out}, threads=7, block=3)  # y, z: not axes of a 1-D launch
    run_kernel(k, {"out": out}, threads=7, grid=(3, 1, 1), block_shape=(3, 1, 1))
    assert out[:, 0].tolist() == [3] * 7
    assert out[:, 1].tolist() == [3] * 7
    assert out[:, 2].tolist() == list(range(7))
    assert out[:, 3:].tolist() == [[0, 0]] * 7


def test_int1_multidimensional_launch() -> None:
    k = kernel("""
kernel k(out : i32[,]) =
  let t = global_thread_id in
  out[t, 0] <- thread_idx_x; out[t, 1] <- thread_idx_y;
  out[t, 2] <- block_idx_x; out[t, 3] <- block_idx_y;
  out[t, 4] <- global_idx_x; out[t, 5] <- global_idx_y;
  out[t, 6] <- block_dim_y; out[t, 7] <- grid_dim_y
""")
    grid, bs = (2, 3), (4, 2)
    n = 2 * 3 * 4 * 2
    out = np.full((n, 8), -1, dtype=np.int32)
    run_kernel(k, {"out": out}, n, grid=grid, block_shape=bs)
    for t in range(n):
        bl, tl = divmod(t, 8)
        tx, ty = tl % 4, tl // 4
        bx, by = bl % 2, bl // 2
        assert out[t].tolist() == [tx, ty, bx, by, bx * 4 + tx, by * 2 + ty, 2, 3], t


def test_int1_launch_shape_errors() -> None:
    k = kernel("kernel k(out : i32[]) = out[global_thread_id] <- 1")
    out = np.zeros(100, dtype=np.int32)
    with pytest.raises(InterpError, match="fewer than the 100"):
        run_kernel(k, {"out": out}, 100, grid=(2,), block_shape=(8,))
    with pytest.raises(InterpError, match="block shape"):
        run_kernel(k, {"out": out}, 10, block=0)
    with pytest.raises(InterpError, match="thread count"):
        run_kernel(k, {"out": out}, -1)
    assert run_kernel(k, {"out": out}, 0).stop_codes.size == 0
    assert not out.any()


# ---------------------------------------------------------------------------- arguments


SAXPY = """
kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then
    y[i] <- a * x[i] + y[i]
"""


def _saxpy_args(n: int = 8) -> dict[str, object]:
    return {
        "x": np.arange(n, dtype=np.float32),
        "y": np.ones(n, dtype=np.float32),
        "a": 2.0,
        "n": n,
    }


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.pop("y"), "missing argument.*y"),
        (lambda a: a.update(z=1), "unexpected argument.*z"),
        (lambda a: a.update(x=np.zeros(8, np.float64)), "'x' must have dtype float32"),
        (lambda a: a.update(x=np.zeros((8, 1), np.float32)), "'x' must have rank 1"),
        (lambda a: a.update(x=1.0), "'x' must be a numpy array"),
        (lambda a: a.update(n=2**31), "'n'.*out of range"),
        (lambda a: a.update(n=1.5), "'n'.*must be an integer"),
        (lambda a: a.update(n=True), "'n'.*must be a number"),
        (lambda a: a.update(a=np.zeros(2, np.float32)), "'a'.*must be a scalar"),
    ],
)
def test_int2_argument_validation(change: object, message: str) -> None:
    args = _saxpy_args()
    change(args)  # type: ignore[operator]
    with pytest.raises(InterpError, match=message) as err:
        run_kernel(kernel(SAXPY), args, 8)  # type: ignore[arg-type]
    assert "kernel saxpy" in str(err.value)


def test_int2_constant_extent_and_bool_params() -> None:
    k = kernel("""
kernel k(a : i32[4], f : bool, out : i32[]) =
  let i = global_thread_id in
  if f then out[i] <- a[i] else out[i] <- 0 - a[i]
""")
    out = np.zeros(4, np.int32)
    with pytest.raises(InterpError, match="extent 5"):
        run_kernel(k, {"a": np.zeros(5, np.int32), "f": True, "out": out}, 4)
    with pytest.raises(InterpError, match="must be a bool"):
        run_kernel(k, {"a": np.zeros(4, np.int32), "f": 1, "out": out}, 4)
    run_kernel(k, {"a": np.arange(4, dtype=np.int32), "f": np.bool_(False), "out": out}, 4)
    assert out.tolist() == [0, -1, -2, -3]


def test_int2_f32_scalar_is_rounded() -> None:
    k = kernel("kernel k(a : f32, out : f64[]) = out[global_thread_id] <- f64(a)")
    out = np.zeros(1, np.float64)
    run_kernel(k, {"a": 0.1, "out": out}, 1)
    assert out[0] == float(np.float32(0.1)) != 0.1


# ---------------------------------------------------------------------------- arrays


def test_int3_lower_bounds_2d_and_length() -> None:
    k = kernel("""
kernel k(a : f32[1:, 1:], out : f32[1:, 1:], dims : i32[]) =
  let t = global_thread_id in
  let i = t / length(a, 1) + 1 in
  let j = t % length(a, 1) + 1 in
  out[i, j] <- a[i, j] * 2.0f + f32(10 * i + j);
  if t == 0 then (dims[0] <- length(a, 0); dims[1] <- length(a))
""")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros((3, 4), np.float32)
    dims = np.zeros(2, np.int32)
    run_kernel(k, {"a": a, "out": out, "dims": dims}, 12)
    ii, jj = np.meshgrid(np.arange(1, 4), np.arange(1, 5), indexing="ij")
    assert np.array_equal(out, a * 2 + (10 * ii + jj).astype(np.float32))
    assert dims.tolist() == [3, 3]


def test_int3_non_contiguous_array_updated_in_place() -> None:
    k = kernel("kernel k(y : i32[]) = let i = global_thread_id in y[i] <- y[i] + i")
    base = np.zeros(10, np.int32)
    view = base[::2]
    run_kernel(k, {"y": view}, 5)
    assert base.tolist() == [0, 0, 1, 0, 2, 0, 3, 0, 4, 0]


# ---------------------------------------------------------------------------- integers


@pytest.mark.parametrize("t, bits", [("i32", 32), ("i64", 64)])
def test_int4_integer_arithmetic_wraps(t: str, bits: int) -> None:
    dt = np.dtype(np.int32 if bits == 32 else np.int64)
    big = 2 ** (bits - 1) - 1
    a = np.array([big, -big - 1, big, 3], dtype=dt)
    b = np.array([1, 1, 2, -4], dtype=dt)
    for op, ref in [("+", lambda x, y: x + y), ("-", lambda x, y: x - y),
                    ("*", lambda x, y: x * y)]:
        out = np.zeros(4, dt)
        run_kernel(binop_kernel(op, t), {"a": a, "b": b, "out": out}, 4)
        want = [((ref(int(x), int(y)) + 2 ** (bits - 1)) % 2**bits) - 2 ** (bits - 1)
                for x, y in zip(a, b, strict=True)]
        assert out.tolist() == want, op
    neg = kernel(f"kernel k(a : {t}[], out : {t}[]) = "
                 "let i = global_thread_id in out[i] <- -a[i]")
    out = np.zeros(2, dt)
    run_kernel(neg, {"a": np.array([-big - 1, 5], dt), "out": out}, 2)
    assert out.tolist() == [-big - 1, -5]


@pytest.mark.parametrize("t", ["i32", "i64"])
def test_int5_c_division_and_modulo_on_negatives(t: str) -> None:
    dt = np.dtype(np.int32 if t == "i32" else np.int64)
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, -3), (-1, 5), (6, 3), (-6, 3)]
    a = np.array([p[0] for p in pairs], dt)
    b = np.array([p[1] for p in pairs], dt)
    q = np.zeros(len(pairs), dt)
    r = np.zeros(len(pairs), dt)
    run_kernel(binop_kernel("/", t), {"a": a, "b": b, "out": q}, len(pairs))
    run_kernel(binop_kernel("%", t), {"a": a, "b": b, "out": r}, len(pairs))
    assert q.tolist() == [3, -3, -3, 3, 0, 0, 2, -2]
    assert r.tolist() == [1, -1, 1, -1, 0, -1, 0, 0]
    assert q.tolist() != (a // b).tolist()  # numpy floors; C truncates


@settings(max_examples=60 + 400 * FUZZ, deadline=None)
@given(st.data())
def test_int5_division_matches_c_reference(data: st.DataObject) -> None:
    bits = data.draw(st.sampled_from([32, 64]))
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    n = 16
    xs = data.draw(st.lists(st.integers(lo + 1, hi), min_size=n, max_size=n))
    ys = data.draw(st.lists(st.integers(lo, hi).filter(lambda v: v != 0),
                            min_size=n, max_size=n))
    t, dt = ("i32", np.int32) if bits == 32 else ("i64", np.int64)
    q = np.zeros(n, dt)
    r = np.zeros(n, dt)
    a, b = np.array(xs, dt), np.array(ys, dt)
    run_kernel(binop_kernel("/", t), {"a": a, "b": b, "out": q}, n)
    run_kernel(binop_kernel("%", t), {"a": a, "b": b, "out": r}, n)
    assert q.tolist() == [c_div(x, y) for x, y in zip(xs, ys, strict=True)]
    assert r.tolist() == [c_mod(x, y) for x, y in zip(xs, ys, strict=True)]


@pytest.mark.parametrize("op", ["/", "%"])
def test_int5_division_by_zero_and_overflow_are_errors(op: str) -> None:
    k = binop_kernel(op, "i32")
    out = np.zeros(3, np.int32)
    a = np.array([1, 2, 3], np.int32)
    with pytest.raises(InterpError, match=r"kernel k, thread 2: integer .* by zero"):
        run_kernel(k, {"a": a, "b": np.array([1, 1, 0], np.int32), "out": out}, 3)
    mn = np.array([-(2**31), 0, 0], np.int32)
    with pytest.raises(InterpError, match=r"thread 0: integer overflow"):
        run_kernel(k, {"a": mn, "b": np.array([-1, 1, 1], np.int32), "out": out}, 3)


def test_int5_guarded_division_by_zero_is_fine() -> None:
    k = kernel("""
kernel k(a : i32[], b : i32[], out : i32[]) =
  let i = global_thread_id in
  if b[i] != 0 then out[i] <- a[i] / b[i] else out[i] <- 99
""")
    out = np.zeros(3, np.int32)
    run_kernel(k, {"a": np.array([9, 9, 9], np.int32), "b": np.array([0, 3, -2], np.int32),
                   "out": out}, 3)
    assert out.tolist() == [99, 3, -4]


def test_int6_shifts() -> None:
    a = np.array([-16, 1, 0x40000000, -1], np.int32)
    b = np.array([2, 31, 1, 0], np.int32)
    out = np.zeros(4, np.int32)
    run_kernel(binop_kernel(">>", "i32"), {"a": a, "b": b, "out": out}, 4)
    assert out.tolist() == [-4, 0, 0x20000000, -1]
    run_kernel(binop_kernel("<<", "i32"), {"a": a, "b": b, "out": out}, 4)
    assert out.tolist() == [-64, -(2**31), -(2**31), -1]
    out64 = np.zeros(1, np.int64)
    run_kernel(binop_kernel("<<", "i64"), {"a": np.array([3], np.int64),
                                          "b": np.array([40], np.int64), "out": out64}, 1)
    assert out64.tolist() == [3 << 40]


@pytest.mark.parametrize("count", [32, -1, 100])
def test_int6_shift_count_out_of_range_is_an_error(count: int) -> None:
    out = np.zeros(2, np.int32)
    with pytest.raises(InterpError, match=rf"thread 1: shift count {count} outside \[0, 32\)"):
        run_kernel(binop_kernel("<<", "i32"),
                   {"a": np.ones(2, np.int32), "b": np.array([1, count], np.int32),
                    "out": out}, 2)


def test_int4_bitwise_operators() -> None:
    a = np.array([0b1100, -1], np.int32)
    b = np.array([0b1010, 5], np.int32)
    for op, want in [("&", [0b1000, 5]), ("|", [0b1110, -1]), ("^", [0b0110, -6])]:
        out = np.zeros(2, np.int32)
        run_kernel(binop_kernel(op, "i32"), {"a": a, "b": b, "out": out}, 2)
        assert out.tolist() == want, op
    k = kernel("kernel k(a : i32[], out : i32[]) = "
               "let i = global_thread_id in out[i] <- ~a[i]")
    out = np.zeros(2, np.int32)
    run_kernel(k, {"a": a, "out": out}, 2)
    assert out.tolist() == [~0b1100, 0]


# ---------------------------------------------------------------------------- floats


def _fma_case(t: str) -> tuple[float, float, float]:
    """a, b, c with a*b+c rounded twice == 0 but exact (fused) != 0."""
    e = 13 if t == "f32" else 30
    a = 1.0 + 2.0**-e
    return a, a, -(1.0 + 2.0 ** (1 - e))


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_int7_one_rounding_per_operation_no_fma(t: str) -> None:
    k = kernel(f"""
kernel k(a : {t}[], b : {t}[], c : {t}[], out : {t}[]) =
  let i = global_thread_id in
  out[i] <- a[i] * b[i] + c[i]
""")
    dt = np.float32 if t == "f32" else np.float64
    a, b, c = _fma_case(t)
    out = np.zeros(1, dt)
    run_kernel(k, {"a": np.array([a], dt), "b": np.array([b], dt), "c": np.array([c], dt),
                   "out": out}, 1)
    from fractions import Fraction
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    assert exact != 0  # a fused multiply-add would give a non-zero result
    assert out[0] == 0.0
    assert out[0] == (dt(a) * dt(b)) + dt(c)


def test_int7_f32_rounds_each_operation_in_single_precision() -> None:
    k = kernel("""
kernel k(x : f32[], out : f32[]) =
  let i = global_thread_id in
  out[i] <- (x[i] + 1.0e8f) - 1.0e8f
""")
    out = np.zeros(1, np.float32)
    run_kernel(k, {"x": np.array([3.0], np.float32), "out": out}, 1)
    assert out[0] == np.float32(np.float32(3.0) + np.float32(1e8)) - np.float32(1e8)
    assert out[0] != 3.0  # in f64 it would be exact


def test_int7_float_division_by_zero_is_ieee() -> None:
    out = np.zeros(3, np.float32)
    run_kernel(binop_kernel("/", "f32"),
               {"a": np.array([1, -1, 0], np.float32), "b": np.zeros(3, np.float32),
                "out": out}, 3)
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


# ---------------------------------------------------------------------------- casts


def _cast_kernel(src: str, dst: str) -> Kernel:
    return kernel(f"kernel k(a : {src}[], out : {dst}[]) = "
                  f"let i = global_thread_id in out[i] <- {dst}(a[i])")


def test_int8_casts() -> None:
    cases = [
        ("f32", "i32", [2.7, -2.7, 0.5, -0.0], [2, -2, 0, 0]),
        ("i64", "i32", [2**32 + 5, -(2**31) - 1, 7, -7], [5, 2**31 - 1, 7, -7]),
        ("i32", "f32", [16777217, -16777219, 3, 0], [16777216.0, -16777220.0, 3.0, 0.0]),
        ("i32", "bool", [0, 5, -1, 0], [False, True, True, False]),
        ("bool", "i32", [True, False, True, True], [1, 0, 1, 1]),
        ("f64", "f32", [0.1, 1e40, -1e-50, 2.5], [float(np.float32(0.1)), math.inf, -0.0, 2.5]),
        ("f64", "i64", [-9.2e18, 9.2e18, 1.9, -1.9], [-9200000000000000000,
                                                    9200000000000000000, 1, -1]),
    ]
    for src, dst, vals, want in cases:
        a = np.array(vals, Scalar(src).dtype)
        out = np.zeros(4, Scalar(dst).dtype)
        run_kernel(_cast_kernel(src, dst), {"a": a, "out": out}, 4)
        assert out.tolist() == want, (src, dst)


@pytest.mark.parametrize(
    "src, dst, value",
    [("f32", "i32", float("nan")), ("f32", "i32", 3.0e9), ("f64", "i32", -2147483649.0),
     ("f64", "i64", 9.3e18), ("f32", "i64", float("inf"))],
)
def test_int8_float_to_int_out_of_range_is_an_error(src: str, dst: str, value: float) -> None:
    a = np.array([1.0, value], Scalar(src).dtype)
    out = np.zeros(2, Scalar(dst).dtype)
    with pytest.raises(InterpError, match=rf"thread 1: conversion .* to {dst} is out of range"):
        run_kernel(_cast_kernel(src, dst), {"a": a, "out": out}, 2)


def test_int8_largest_in_range_conversion_is_fine() -> None:
    a = np.array([2147483647.9, -2147483648.9], np.float64)
    out = np.zeros(2, np.int32)
    run_kernel(_cast_kernel("f64", "i32"), {"a": a, "out": out}, 2)
    assert out.tolist() == [2147483647, -2147483648]


# ---------------------------------------------------------------------------- short circuit


def test_int9_and_protects_an_out_of_bounds_read() -> None:
    k = kernel("""
kernel k(a : i32[], n : i32, out : i32[]) =
  let i = global_thread_id in
  if i < n && a[i] > 0 then out[i] <- 1 else out[i] <- 2
""")
    out = np.zeros(6, np.int32)
    run_kernel(k, {"a": np.array([1, -1, 3, 0], np.int32), "n": 4, "out": out}, 6)
    assert out.tolist() == [1, 2, 1, 2, 2, 2]
    unguarded = kernel("""
kernel k(a : i32[], n : i32, out : i32[]) =
  let i = global_thread_id in
  if a[i] > 0 then out[i] <- 1 else out[i] <- 2
""")
    with pytest.raises(InterpError, match="thread 4: out-of-bounds read of array 'a'"):
        run_kernel(unguarded, {"a": np.array([1, -1, 3, 0], np.int32), "n": 4, "out": out}, 6)


def test_int9_or_and_conditional_expression() -> None:
    k = kernel("""
kernel k(a : i32[], n : i32, out : i32[]) =
  let i = global_thread_id in
  out[i] <- (i >= n || a[i] == 0) ? 10 : a[i] / a[i];
  if n > 100 && a[n] > 0 then out[i] <- 77
""")
    out = np.zeros(6, np.int32)
    run_kernel(k, {"a": np.array([0, 5, -3, 0], np.int32), "n": 4, "out": out}, 6)
    assert out.tolist() == [10, 1, 1, 10, 10, 10]


def test_int9_conditional_with_uniform_condition() -> None:
    k = kernel("""
kernel k(a : f32[], flag : bool, out : f32[]) =
  let i = global_thread_id in
  out[i] <- flag ? a[i] : a[i + 1000]
""")
    out = np.zeros(3, np.float32)
    run_kernel(k, {"a": np.arange(3, dtype=np.float32), "flag": True, "out": out}, 3)
    assert out.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(InterpError, match=r"index \[1000\]"):
        run_kernel(k, {"a": np.arange(3, dtype=np.float32), "flag": False, "out": out}, 3)


# ---------------------------------------------------------------------------- math


def test_int10_math_intrinsics_in_argument_dtype() -> None:
    k = kernel("""
kernel k(x : f32[], y : f32[], out : f32[,]) =
  let i = global_thread_id in
  out[i, 0] <- sqrt(x[i]); out[i, 1] <- exp(x[i]); out[i, 2] <- min(x[i], y[i]);
  out[i, 3] <- max(x[i], y[i]); out[i, 4] <- pow(x[i], y[i]); out[i, 5] <- floor(y[i]);
  out[i, 6] <- sin(x[i]); out[i, 7] <- abs(y[i])
""")
    x = np.array([2.0, 0.5, np.nan, 9.0], np.float32)
    y = np.array([np.nan, -1.5, 3.0, 0.5], np.float32)
    out = np.zeros((4, 8), np.float32)
    run_kernel(k, {"x": x, "y": y, "out": out}, 4)
    want = np.stack([np.sqrt(x), np.exp(x), np.fmin(x, y), np.fmax(x, y), np.power(x, y),
                     np.floor(y), np.sin(x), np.abs(y)], axis=1)
    assert want.dtype == np.float32
    assert np.array_equal(out, want, equal_nan=True)
    assert out[0, 2] == 2.0 and out[2, 3] == 3.0  # fminf/fmaxf drop the NaN


def test_int10_integer_min_max_abs() -> None:
    k = kernel("""
kernel k(a : i32[], b : i32[], out : i32[,]) =
  let i = global_thread_id in
  out[i, 0] <- min(a[i], b[i]); out[i, 1] <- max(a[i], b[i]); out[i, 2] <- abs(a[i])
""")
    a = np.array([-(2**31), 4], np.int32)
    b = np.array([0, -4], np.int32)
    out = np.zeros((2, 3), np.int32)
    run_kernel(k, {"a": a, "b": b, "out": out}, 2)
    assert out.tolist() == [[-(2**31), 0, -(2**31)], [-4, 4, 4]]


# ---------------------------------------------------------------------------- errors, speed


def test_int20_error_is_located_and_names_kernel_and_thread() -> None:
    src = "kernel k(a : i32[], out : i32[]) =\n  let i = global_thread_id in\n" \
          "  out[i] <- a[i + 1]\n"
    k = kernel(src)
    with pytest.raises(SarekError) as err:
        run_kernel(k, {"a": np.zeros(3, np.int32), "out": np.zeros(3, np.int32)}, 3)
    e = err.value
    assert isinstance(e, InterpError)
    assert e.loc is not None and e.loc.line == 3
    text = str(e.with_source(src))
    assert text.startswith("test.sk:3:")
    assert "error: kernel k, thread 2: out-of-bounds read of array 'a' at index [3]" in text
    assert text.endswith("^")


def test_int20_error_without_locations_built_by_hand() -> None:
    a = var("a", array(Scalar.I32))
    i = var("i", Scalar.I32)
    body = Let(i, Intrinsic("global_thread_id"),
               Store(a, (Binary(BinaryOp.MUL, Ref(i), Const(2, Scalar.I32)),),
                     Cast(Scalar.I32, Const(1.0, Scalar.F64))))
    k = Kernel("hand", (a,), (), body)
    with pytest.raises(InterpError, match=r"^error: kernel hand, thread 2: out-of-bounds store of "
                                          r"array 'a' at index \[4\] \(bounds 0\.\.3\)$"):
        run_kernel(k, {"a": np.zeros(4, np.int32)}, 3)


def test_int21_saxpy_matches_numpy_bitwise() -> None:
    n = 1 << 16
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    want = np.float32(1.7) * x + y
    for threads in (n, n + 300):
        yy = y.copy()
        run_kernel(kernel(SAXPY), {"x": x, "y": yy, "a": 1.7, "n": n}, threads, 128)
        assert np.array_equal(yy, want)


def test_int21_results_do_not_depend_on_block_size() -> None:
    k = kernel("""
kernel k(a : i32[], out : i32[]) =
  let i = global_thread_id in
  let mut s = 0 in
  for j = 0 to i % 7 do s := s + a[(i + j) % length(a)] done;
  if s % 2 == 0 then out[i] <- s else out[i] <- -s
""")
    a = np.arange(50, dtype=np.int32) * 3 - 40
    ref = np.zeros(50, np.int32)
    run_kernel(k, {"a": a, "out": ref}, 50, 1)
    for block in (3, 32, 64, 1024):
        out = np.zeros(50, np.int32)
        run_kernel(k, {"a": a, "out": out}, 50, block)
        assert np.array_equal(out, ref), block


def test_int21_built_with_node_constructors() -> None:
    """The saxpy of the benchmark, built by hand (no parser), with the guard."""
    x = var("x", array(Scalar.F32))
    y = var("y", array(Scalar.F32))
    n = var("n", Scalar.I32)
    i = var("i", Scalar.I32)
    body = Let(i, Intrinsic("global_thread_id"),
               If(Binary(BinaryOp.LT, Ref(i), Ref(n)),
                  Store(y, (Ref(i),), Binary(BinaryOp.MUL, Read(x, (Ref(i),)),
                                             Const(0.5, Scalar.F32)))))
    k = Kernel("half", (x, y, n), (), body)
    xs = np.arange(10, dtype=np.float32)
    ys = np.zeros(10, np.float32)
    run_kernel(k, {"x": xs, "y": ys, "n": 7}, 16)
    assert ys.tolist() == [v / 2 for v in range(7)] + [0.0] * 3


def test_int7_float_bits_are_numpy_float32() -> None:
    """Every f32 operation equals numpy's float32 result bit for bit (INT-7)."""
    k = kernel("""
kernel k(a : f32[], b : f32[], out : f32[,]) =
  let i = global_thread_id in
  out[i, 0] <- a[i] / b[i]; out[i, 1] <- a[i] - b[i] * a[i]; out[i, 2] <- -a[i]
""")
    rng = np.random.default_rng(3)
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    out = np.zeros((64, 3), np.float32)
    run_kernel(k, {"a": a, "b": b, "out": out}, 64)
    want = np.stack([a / b, a - b * a, -a], axis=1)
    bits = struct.Struct(f"{want.size}I")
    assert bits.unpack(out.tobytes()) == bits.unpack(want.tobytes())


def test_int11_lane_id_comparisons_with_uniform_bounds() -> None:
    k = kernel("""
kernel k(n : i32, out : i32[,]) =
  let i = global_thread_id in
  out[i, 0] <- i < n ? 1 : 0; out[i, 1] <- n > i ? 1 : 0; out[i, 2] <- i == n ? 1 : 0;
  out[i, 3] <- i != n ? 1 : 0; out[i, 4] <- i >= n ? 1 : 0
""")
    for n in (-3, 0, 4, 7, 8, 100):
        out = np.zeros((8, 5), np.int32)
        run_kernel(k, {"n": n, "out": out}, 8)
        i = np.arange(8)
        want = np.stack([i < n, n > i, i == n, i != n, i >= n], axis=1).astype(np.int32)
        assert np.array_equal(out, want), n


def test_int5_uniform_divisor() -> None:
    k = kernel("""
kernel k(a : i32[], out : i32[,]) =
  let i = global_thread_id in
  out[i, 0] <- a[i] / 3; out[i, 1] <- a[i] % 3; out[i, 2] <- a[i] / -3
""")
    for vals in ([0, 1, 2, 3, 7, 100], [5, -1, -7, 8, -9, 0]):
        out = np.zeros((6, 3), np.int32)
        run_kernel(k, {"a": np.array(vals, np.int32), "out": out}, 6)
        assert out.tolist() == [[c_div(v, 3), c_mod(v, 3), c_div(v, -3)] for v in vals]


def test_int1_three_dimensional_launch_and_partial_grid() -> None:
    k = kernel("""
kernel k(out : i32[,]) =
  let t = global_thread_id in
  out[t, 0] <- thread_idx_z; out[t, 1] <- block_idx_z; out[t, 2] <- global_idx_z;
  out[t, 3] <- global_idx_y; out[t, 4] <- grid_dim_z; out[t, 5] <- block_dim_z
""")
    grid, bs = (2, 1, 3), (2, 2, 2)
    n = 2 * 3 * 8 - 5  # the last block is partial: its last five threads do not exist
    out = np.full((n + 5, 6), -1, dtype=np.int32)
    run_kernel(k, {"out": out}, n, grid=grid, block_shape=bs)
    for t in range(n):
        bl, tl = divmod(t, 8)
        ty, tz = tl // 2 % 2, tl // 4
        by, bz = bl // 2 % 1, bl // 2
        assert out[t].tolist() == [tz, bz, bz * 2 + tz, by * 2 + ty, 3, 2], t
    assert (out[n:] == -1).all()
