"""The reference interpreter: divergent control flow, helpers, returns, stops and locals
(specs/interpreter.md, INT-11 to INT-14)."""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Call,
    Const,
    HelperFunc,
    If,
    Intrinsic,
    Kernel,
    Let,
    Ref,
    Return,
    Store,
    var,
)
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.types import Scalar, array


def kernel(src: str, name: str | None = None) -> Kernel:
    m = parse_module(src, "flow.sk")
    check_module(m)
    return m.kernel(name) if name else m.kernels[-1]


# ---------------------------------------------------------------------------- loops


def test_int11_for_loops_with_a_trip_count_per_lane() -> None:
    k = kernel("""
kernel k(out : i32[], down : i32[]) =
  let i = global_thread_id in
  let mut s = 0 in
  let mut c = 0 in
  for j = 1 to i do s := s + j done;
  for j = i downto 2 do c := c * 10 + j % 10 done;
  out[i] <- s; down[i] <- c
""")
    out = np.zeros(8, np.int32)
    down = np.zeros(8, np.int32)
    run_kernel(k, {"out": out, "down": down}, 8, 3)
    assert out.tolist() == [i * (i + 1) // 2 for i in range(8)]
    assert down.tolist() == [0, 0, 2, 32, 432, 5432, 65432, 765432]


def test_int11_for_bounds_evaluated_once_and_counter_cannot_overflow() -> None:
    k = kernel("""
kernel k(out : i32[]) =
  let mut m = 3 in
  let mut n = 0 in
  for j = 0 to m do m := m + 1; n := n + 1 done;
  out[0] <- n;
  let mut c = 0 in
  for j = 2147483645 to 2147483647 do c := c + 1 done;
  for j = -2147483647 downto -2147483648 do c := c + 10 done;
  out[1] <- c
""")
    out = np.zeros(2, np.int32)
    run_kernel(k, {"out": out}, 1)
    assert out.tolist() == [4, 23]


def test_int11_while_loops_per_lane() -> None:
    """Collatz steps: each thread leaves its loop at its own iteration."""
    k = kernel("""
kernel k(out : i32[]) =
  let i = global_thread_id in
  let mut x = i + 1 in
  let mut steps = 0 in
  while x != 1 do
    if x % 2 == 0 then x := x / 2 else x := 3 * x + 1;
    steps := steps + 1
  done;
  out[i] <- steps
""")
    out = np.zeros(30, np.int32)
    run_kernel(k, {"out": out}, 30, 8)

    def collatz(x: int) -> int:
        n = 0
        while x != 1:
            x = x // 2 if x % 2 == 0 else 3 * x + 1
            n += 1
        return n

    assert out.tolist() == [collatz(i + 1) for i in range(30)]


def test_int11_divergent_if_else_and_nested_loops() -> None:
    k = kernel("""
kernel k(out : i32[]) =
  let i = global_thread_id in
  let mut acc = 0 in
  if i % 3 == 0 then
    for a = 0 to i do for b = a to i do acc := acc + 1 done done
  else if i % 3 == 1 then
    acc := -i
  else
    (let mut t = i in while t > 0 do acc := acc + t; t := t - 2 done);
  out[i] <- acc
""")
    out = np.zeros(12, np.int32)
    run_kernel(k, {"out": out}, 12, 5)
    want = []
    for i in range(12):
        if i % 3 == 0:
            want.append((i + 1) * (i + 2) // 2)
        elif i % 3 == 1:
            want.append(-i)
        else:
            want.append(sum(range(i, 0, -2)))
    assert out.tolist() == want


# ---------------------------------------------------------------------------- return


def test_int12_early_return_in_kernel() -> None:
    k = kernel("""
kernel k(out : i32[]) =
  let i = global_thread_id in
  out[i] <- 1;
  if i % 2 == 0 then return;
  for j = 0 to 10 do
    if j == i then return;
    out[i] <- out[i] + 1
  done;
  out[i] <- -out[i]
""")
    out = np.zeros(14, np.int32)
    run_kernel(k, {"out": out}, 14, 4)
    assert out.tolist() == [1 if i % 2 == 0 else (1 + i if i <= 10 else -12) for i in range(14)]


def test_int12_helper_returns_from_inside_a_loop() -> None:
    k = kernel("""
fun find(a : i32[], n : i32, v : i32) : i32 =
  for j = 0 to n - 1 do
    if a[j] == v then return j
  done;
  return -1

fun sign(x : i32) : i32 =
  if x < 0 then return -1;
  if x == 0 then return 0;
  return 1

kernel k(a : i32[], n : i32, out : i32[]) =
  let i = global_thread_id in
  out[i] <- find(a, n, i) * 10 + sign(i - 3)
""")
    a = np.array([5, 3, 1, 3, 0, 7], np.int32)
    out = np.zeros(8, np.int32)
    run_kernel(k, {"a": a, "n": 6, "out": out}, 8, 4)
    find = [list(a).index(i) if i in a else -1 for i in range(8)]
    assert out.tolist() == [f * 10 + (i > 3) - (i < 3) for i, f in enumerate(find)]


def test_int12_helper_stores_through_its_array_parameter() -> None:
    k = kernel("""
fun put(b : i32[], i : i32, v : i32) : i32 =
  b[i] <- v * 2;
  return v

kernel k(out : i32[], b : i32[]) =
  let i = global_thread_id in
  out[i] <- put(b, i, i + 1)
""")
    out = np.zeros(5, np.int32)
    b = np.zeros(5, np.int32)
    run_kernel(k, {"out": out, "b": b}, 5)
    assert out.tolist() == [1, 2, 3, 4, 5]
    assert b.tolist() == [2, 4, 6, 8, 10]


def test_int12_helper_without_return_is_an_error() -> None:
    """Built by hand (the checker would refuse it, IR-23): the interpreter still says so."""
    x = var("x", Scalar.I32)
    h = HelperFunc("pos", (x,), Scalar.I32,
                   If(Binary(BinaryOp.GT, Ref(x), Const(0, Scalar.I32)),
                      Return(Const(1, Scalar.I32))))
    out = var("out", array(Scalar.I32))
    i = var("i", Scalar.I32)
    body = Let(i, Intrinsic("global_thread_id"),
               Store(out, (Ref(i),), Call("pos", (Binary(BinaryOp.SUB, Ref(i),
                                                          Const(1, Scalar.I32)),), Scalar.I32)))
    k = Kernel("k", (out,), (), body, (h,))
    with pytest.raises(InterpError, match=r"thread 0 \(in helper pos\): reached the end"):
        run_kernel(k, {"out": np.zeros(3, np.int32)}, 3)
    ok_body = Let(i, Intrinsic("global_thread_id"),
                  Store(out, (Ref(i),), Call("pos", (Binary(BinaryOp.ADD, Ref(i),
                                                             Const(1, Scalar.I32)),), Scalar.I32)))
    o = np.zeros(3, np.int32)
    run_kernel(Kernel("k", (out,), (), ok_body, (h,)), {"out": o}, 3)
    assert o.tolist() == [1, 1, 1]


# ---------------------------------------------------------------------------- stop


def test_int13_stop_codes_and_nothing_after() -> None:
    k = kernel("""
kernel k(out : i32[]) =
  let i = global_thread_id in
  out[i] <- 1;
  if i % 3 == 0 then stop 7;
  if i % 3 == 1 then (for j = 0 to 5 do if j == 2 then stop 9 done);
  out[i] <- 2
""")
    out = np.zeros(9, np.int32)
    res = run_kernel(k, {"out": out}, 9, 4)
    assert res.stop_codes.tolist() == [7, 9, 0] * 3
    assert out.tolist() == [1, 1, 2] * 3
    assert res.stopped


def test_int13_stop_inside_helper_ends_the_calling_statement() -> None:
    k = kernel("""
fun check(v : i32) : i32 =
  if v < 0 then stop 3;
  return v + 1

kernel k(a : i32[], out : i32[], after : i32[]) =
  let i = global_thread_id in
  out[i] <- check(a[i]) + 100 / (a[i] + 1);
  after[i] <- 1
""")
    a = np.array([0, -1, 2, -1], np.int32)  # a + 1 == 0 would divide by zero
    out = np.zeros(4, np.int32)
    after = np.zeros(4, np.int32)
    res = run_kernel(k, {"a": a, "out": out, "after": after}, 4)
    assert res.stop_codes.tolist() == [0, 3, 0, 3]
    assert out.tolist() == [101, 0, 36, 0]
    assert after.tolist() == [1, 0, 1, 0]


def test_int13_no_stop_means_zero_codes() -> None:
    k = kernel("kernel k(out : i32[]) = out[global_thread_id] <- 1")
    res = run_kernel(k, {"out": np.zeros(5, np.int32)}, 5)
    assert res.stop_codes.tolist() == [0] * 5 and not res.stopped


# ---------------------------------------------------------------------------- locals


def test_int14_scalar_locals_and_local_arrays_start_at_zero_per_thread() -> None:
    k = kernel("""
kernel k(out : i32[]) local h : i32[4] var s : i32 =
  let i = global_thread_id in
  h[i % 4] <- h[i % 4] + i;
  for j = 0 to 3 do s := s + h[j] done;
  out[i] <- s
""")
    out = np.zeros(10, np.int32)
    run_kernel(k, {"out": out}, 10, 4)
    assert out.tolist() == list(range(10))


def test_int14_local_array_out_of_bounds() -> None:
    k = kernel("""
kernel k(out : i32[]) local h : f32[2, 3] =
  let i = global_thread_id in
  h[1, i] <- 1.0f
""")
    with pytest.raises(InterpError, match=r"thread 3: out-of-bounds store of local array 'h' "
                                          r"at index \[1, 3\] \(bounds 0\.\.1, 0\.\.2\)"):
        run_kernel(k, {"out": np.zeros(1, np.int32)}, 5)


def test_int12_operands_left_to_right_around_a_storing_helper() -> None:
    """The read on the left sees the value from before the helper's store (INT-12)."""
    k = kernel("""
fun put(b : i32[], i : i32, v : i32) : i32 =
  b[i] <- v;
  return v

kernel k(y : i32[], out : i32[]) =
  let i = global_thread_id in
  out[i] <- y[i] + put(y, i, 2 * i) * 10 + y[i] * 1000
""")
    y = np.full(4, 7, np.int32)
    out = np.zeros(4, np.int32)
    run_kernel(k, {"y": y, "out": out}, 4)
    assert out.tolist() == [7 + 20 * i + 2000 * i for i in range(4)]
    assert y.tolist() == [0, 2, 4, 6]


def test_int21_pooled_buffers_are_not_reused_while_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every lane-sized temporary comes from the scratch pool (threshold 0 here): values
    bound to variables, loop counters and masks must never be overwritten by reuse."""
    from sarek_py.ir import interp_scratch

    monkeypatch.setattr(interp_scratch, "MIN_BYTES", 0)
    k = kernel("""
kernel k(a : i32[], out : i32[]) =
  let i = global_thread_id in
  let t = a[i] * 3 in
  let mut s = 0 in
  for j = 0 to i % 5 do
    let u = t + j in
    let v = u * 2 in
    if v % 3 == 0 then s := s + v else s := s - 1
  done;
  out[i] <- s + t
""")
    n = 3000
    a = (np.arange(n, dtype=np.int32) * 7919) % 1000 - 500
    for _ in range(2):
        out = np.zeros(n, np.int32)
        run_kernel(k, {"a": a, "out": out}, n, 64)
        want = []
        for i, x in enumerate(a.tolist()):
            t, s = 3 * x, 0
            for j in range(i % 5 + 1):
                v = 2 * (t + j)
                s = s + v if v % 3 == 0 else s - 1
            want.append(s + t)
        assert out.tolist() == want
    interp_scratch.clear()


def test_int11_lanes_with_no_iteration_fall_through() -> None:
    """A thread whose ``for`` runs zero times goes on with the next statement."""
    k = kernel("""
kernel k(out : i32[]) =
  let i = global_thread_id in
  let mut s = 100 in
  for j = i to 2 do s := s + j done;
  for j = 1 downto i do s := s * 2 done;
  out[i] <- s
""")
    out = np.full(5, -1, np.int32)
    run_kernel(k, {"out": out}, 5)
    assert out.tolist() == [(100 + 3) * 4, (100 + 3) * 2, 102, 100, 100]


def test_int13_every_thread_stops_inside_a_helper_of_a_store() -> None:
    k = kernel("""
fun check(v : i32) : i32 =
  if v < 0 then stop 4;
  return v

kernel k(a : i32[], out : i32[]) =
  out[0] <- check(a[0]);
  out[1] <- 9
""")
    out = np.zeros(2, np.int32)
    res = run_kernel(k, {"a": np.array([-5], np.int32), "out": out}, 1)
    assert res.stop_codes.tolist() == [4] and out.tolist() == [0, 0]
    run_kernel(k, {"a": np.array([5], np.int32), "out": out}, 1)
    assert out.tolist() == [5, 9]


def test_int22_loop_budget_stops_a_loop_that_does_not_end() -> None:
    """INT-22: an endless while loop is an InterpError located at the loop, not a hang."""
    m = parse_module(
        "kernel spin(x : i32[]) =\n"
        "  let mut k = 0 in\n"
        "  while k >= 0 do k := k * 1 done;\n"
        "  x[0] <- k\n",
        "spin.sk",
    )
    x = np.zeros(1, dtype=np.int32)
    with pytest.raises(InterpError, match="INT-22") as err:
        run_kernel(m.kernel("spin"), {"x": x}, 4, 4, loop_budget=1000)
    assert str(err.value).startswith("spin.sk:3:")
    # a loop within the budget runs to its end
    m2 = parse_module(
        "kernel count(x : i32[]) =\n"
        "  let mut k = 0 in\n"
        "  for j = 1 to 999 do k := k + 1 done;\n"
        "  x[0] <- k\n",
        "count.sk",
    )
    run_kernel(m2.kernel("count"), {"x": x}, 1, 1, loop_budget=1000)
    assert x[0] == 999
    with pytest.raises(InterpError, match="INT-22"):
        run_kernel(m2.kernel("count"), {"x": x}, 1, 1, loop_budget=998)
