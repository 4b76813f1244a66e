"""The reference interpreter: shared memory, bounds, barriers and data races
(specs/interpreter.md, INT-14 to INT-19)."""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module


def kernel(src: str, name: str | None = None) -> Kernel:
    m = parse_module(src, "mem.sk")
    check_module(m)
    return m.kernel(name) if name else m.kernels[-1]


REDUCE = """
kernel block_sum(x : f32[], out : f32[]) shared s : f32[64] =
  let tid = thread_idx_x in
  s[tid] <- x[global_thread_id];
  barrier;
  let mut stride = block_dim_x / 2 in
  while stride > 0 do
    if tid < stride then s[tid] <- s[tid] + s[tid + stride];
    barrier;
    stride := stride / 2
  done;
  if tid == 0 then out[block_idx_x] <- s[0]
"""


# ---------------------------------------------------------------------------- shared memory


@pytest.mark.parametrize("block", [64, 16, 2])
def test_int16_block_reduction_with_shared_memory_and_barriers(block: int) -> None:
    n = 256
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n // block, np.float32)
    run_kernel(kernel(REDUCE), {"x": x, "out": out}, n, block)
    # the same tree of f32 additions, in numpy
    s = x.reshape(-1, block).copy()
    w = block // 2
    while w > 0:
        s[:, :w] = s[:, :w] + s[:, w: 2 * w]
        w //= 2
    assert np.array_equal(out, s[:, 0])


def test_int14_shared_arrays_are_per_block() -> None:
    k = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  let t = thread_idx_x in
  s[t] <- block_idx_x * 10 + t;
  barrier;
  out[global_thread_id] <- s[3 - t]
""")
    out = np.zeros(12, np.int32)
    run_kernel(k, {"out": out}, 12, 4)
    assert out.tolist() == [b * 10 + 3 - t for b in range(3) for t in range(4)]


def test_int14_uninitialised_shared_read_is_an_error() -> None:
    k = kernel("""
kernel k(out : i32[]) shared s : i32[8] =
  let t = thread_idx_x in
  if t < 6 then s[t] <- t;
  barrier;
  out[global_thread_id] <- s[7 - t]
""")
    with pytest.raises(InterpError, match=r"thread 0: read of uninitialised element \[7\] of "
                                          r"shared array 's'"):
        run_kernel(k, {"out": np.zeros(8, np.int32)}, 8, 8)


def test_int14_shared_stays_uninitialised_for_missing_threads() -> None:
    """A partial last block: its missing threads store nothing, so reading their slots
    is an uninitialised read (the reduction must be launched on whole blocks)."""
    x = np.ones(100, np.float32)
    with pytest.raises(InterpError, match="uninitialised element .* of block 1"):
        run_kernel(kernel(REDUCE), {"x": x, "out": np.zeros(2, np.float32)}, 100, 64)


# ---------------------------------------------------------------------------- bounds


def test_int15_out_of_bounds_read_names_kernel_array_index_thread() -> None:
    k = kernel("""
kernel shift(x : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- x[i + 2]
""")
    with pytest.raises(InterpError) as err:
        run_kernel(k, {"x": np.zeros(10, np.float32), "y": np.zeros(10, np.float32)}, 10)
    msg = str(err.value)
    assert "kernel shift, thread 8:" in msg
    assert "out-of-bounds read of array 'x' at index [10] (bounds 0..9)" in msg
    assert msg.startswith("mem.sk:4:")


def test_int15_identity_index_past_the_end() -> None:
    k = kernel("kernel k(x : f32[], y : f32[]) = "
               "let i = global_thread_id in y[i] <- x[i]")
    with pytest.raises(InterpError, match=r"thread 6: out-of-bounds read of array 'x' at "
                                          r"index \[6\]"):
        run_kernel(k, {"x": np.zeros(6, np.float32), "y": np.zeros(9, np.float32)}, 9)
    with pytest.raises(InterpError, match=r"thread 4: out-of-bounds store of array 'y' at "
                                          r"index \[4\]"):
        run_kernel(k, {"x": np.zeros(9, np.float32), "y": np.zeros(4, np.float32)}, 9)


def test_int15_two_dimensional_index_with_lower_bounds() -> None:
    k = kernel("""
kernel k(a : i32[1:, -2:]) =
  let t = global_thread_id in
  a[1 + t / 3, t % 4 - 2] <- t
""")
    a = np.zeros((2, 3), np.int32)
    with pytest.raises(InterpError, match=r"thread 3: out-of-bounds store of array 'a' at "
                                          r"index \[2, 1\] \(bounds 1\.\.2, -2\.\.0\)"):
        run_kernel(k, {"a": a}, 6)


def test_int15_uniform_index_out_of_bounds() -> None:
    k = kernel("kernel k(a : i32[], out : i32[]) = out[global_thread_id] <- a[5]")
    with pytest.raises(InterpError, match=r"thread 0: out-of-bounds read .* index \[5\]"):
        run_kernel(k, {"a": np.zeros(5, np.int32), "out": np.zeros(3, np.int32)}, 3)
    out = np.zeros(3, np.int32)
    run_kernel(k, {"a": np.arange(6, dtype=np.int32), "out": out}, 3)
    assert out.tolist() == [5, 5, 5]


# ---------------------------------------------------------------------------- barriers


def test_int16_divergent_barrier_is_an_error() -> None:
    k = kernel("""
kernel k(out : i32[]) shared s : i32[8] =
  let t = thread_idx_x in
  if t < 4 then (s[t] <- t; barrier);
  out[global_thread_id] <- t
""")
    with pytest.raises(InterpError, match=r"divergent barrier in block 0: thread 0 reached "
                                          r"it but thread 4 did not"):
        run_kernel(k, {"out": np.zeros(8, np.int32)}, 8, 8)


def test_int16_barrier_after_early_return_is_divergent() -> None:
    k = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  let t = thread_idx_x in
  if global_thread_id == 5 then return;
  s[t] <- t;
  barrier;
  out[global_thread_id] <- s[(t + 1) % 4]
""")
    with pytest.raises(InterpError, match=r"block 1: thread 4 reached it but thread 5 did not"):
        run_kernel(k, {"out": np.zeros(8, np.int32)}, 8, 4)


def test_int16_barrier_in_loop_uniform_per_block_and_missing_threads() -> None:
    """Blocks may run different trip counts; the missing threads of the last block never
    count as absent from a barrier."""
    k = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  let t = thread_idx_x in
  let mut acc = 0 in
  for r = 0 to block_idx_x do
    s[t] <- r + t;
    barrier;
    acc := acc + s[(t + 1) % block_dim_x % 3];
    barrier
  done;
  out[global_thread_id] <- acc
""")
    out = np.zeros(11, np.int32)
    run_kernel(k, {"out": out}, 11, 4)
    want = []
    for g in range(11):
        b, t = divmod(g, 4)
        want.append(sum(r + (t + 1) % 4 % 3 for r in range(b + 1)))
    assert out.tolist() == want


# ---------------------------------------------------------------------------- races


def test_int17_write_write_race_on_global() -> None:
    k = kernel("kernel k(out : i32[]) = out[0] <- global_thread_id")
    with pytest.raises(InterpError, match=r"data race on array 'out' element \[0\]: thread 1 "
                                          r"stores it as does thread 0"):
        run_kernel(k, {"out": np.zeros(1, np.int32)}, 4)
    k2 = kernel("kernel k(out : i32[]) = out[global_thread_id / 2] <- 1")
    with pytest.raises(InterpError, match=r"element \[0\]: thread 1 stores it as does thread 0"):
        run_kernel(k2, {"out": np.zeros(4, np.int32)}, 8)


def test_int17_write_write_race_across_statements() -> None:
    k = kernel("""
kernel k(out : i32[]) =
  let i = global_thread_id in
  out[i] <- 1;
  if i == 3 then out[0] <- 2
""")
    with pytest.raises(InterpError, match=r"thread 3 stores it after it was stored by thread 0"):
        run_kernel(k, {"out": np.zeros(4, np.int32)}, 4)


def test_int17_read_after_write_race() -> None:
    k = kernel("""
kernel k(a : i32[], b : i32[]) =
  let i = global_thread_id in
  a[i] <- i;
  b[i] <- a[(i + 1) % 4]
""")
    with pytest.raises(InterpError, match=r"element \[1\]: thread 0 reads it after it was "
                                          r"stored by thread 1 in this launch"):
        run_kernel(k, {"a": np.zeros(4, np.int32), "b": np.zeros(4, np.int32)}, 4)


def test_int17_write_after_read_race() -> None:
    k = kernel("""
kernel k(a : i32[], b : i32[]) =
  let i = global_thread_id in
  b[i] <- a[(i + 1) % 4];
  a[i] <- i
""")
    with pytest.raises(InterpError, match=r"element \[0\]: thread 0 stores it after it was "
                                          r"read by thread 3"):
        run_kernel(k, {"a": np.zeros(4, np.int32), "b": np.zeros(4, np.int32)}, 4)
    k2 = kernel("""
kernel k(a : i32[], b : i32[]) =
  let i = global_thread_id in
  b[i] <- a[0];
  if i == 2 then a[0] <- 5
""")
    with pytest.raises(InterpError, match=r"thread 2 stores it after it was read by several "
                                          r"other threads"):
        run_kernel(k2, {"a": np.zeros(4, np.int32), "b": np.zeros(4, np.int32)}, 4)


def test_int17_own_elements_and_read_only_sharing_are_not_races() -> None:
    k = kernel("""
kernel k(a : i32[], c : i32[], b : i32[]) =
  let i = global_thread_id in
  a[i] <- a[i] + c[0] + c[i % 2];
  a[i] <- a[i] * 2;
  b[i] <- a[i]
""")
    a = np.arange(6, dtype=np.int32)
    b = np.zeros(6, np.int32)
    run_kernel(k, {"a": a, "c": np.array([10, 20], np.int32), "b": b}, 6, 2)
    want = [(i + 10 + (10, 20)[i % 2]) * 2 for i in range(6)]
    assert a.tolist() == want and b.tolist() == want


def test_int17_global_race_even_across_a_barrier() -> None:
    k = kernel("""
kernel k(a : i32[], b : i32[]) =
  let i = global_thread_id in
  a[i] <- i;
  barrier;
  b[i] <- a[i ^ 1]
""")
    with pytest.raises(InterpError, match=r"thread 0 reads it after it was stored by thread 1"):
        run_kernel(k, {"a": np.zeros(4, np.int32), "b": np.zeros(4, np.int32)}, 4)


def test_int17_identity_then_gather_conflict() -> None:
    """An identity store (the fast path) followed by a shifted read still conflicts."""
    k = kernel("""
kernel k(a : f32[], b : f32[]) =
  let i = global_thread_id in
  a[i] <- 1.0f;
  if i > 0 then b[i] <- a[i - 1]
""")
    with pytest.raises(InterpError, match=r"element \[0\]: thread 1 reads it after it was "
                                          r"stored by thread 0"):
        run_kernel(k, {"a": np.zeros(5, np.float32), "b": np.zeros(5, np.float32)}, 5)


def test_int18_shared_races_since_the_last_barrier() -> None:
    racy = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  let t = thread_idx_x in
  s[t] <- t;
  out[global_thread_id] <- s[(t + 1) % 4]
""")
    with pytest.raises(InterpError, match=r"data race on shared array 's' element \[1\] of "
                                          r"block 0: thread 0 reads it after it was stored by "
                                          r"thread 1 since the last barrier"):
        run_kernel(racy, {"out": np.zeros(8, np.int32)}, 8, 4)
    ww = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  s[0] <- thread_idx_x;
  barrier;
  out[global_thread_id] <- s[0]
""")
    with pytest.raises(InterpError, match=r"shared array 's' element \[0\]: thread 1 stores "
                                          r"it as does thread 0"):
        run_kernel(ww, {"out": np.zeros(4, np.int32)}, 4, 4)
    war = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  let t = thread_idx_x in
  s[t] <- t;
  barrier;
  out[global_thread_id] <- s[(t + 1) % 4];
  s[t] <- 0
""")
    with pytest.raises(InterpError, match=r"element \[0\]: thread 0 stores it after it was "
                                          r"read by thread 3"):
        run_kernel(war, {"out": np.zeros(4, np.int32)}, 4, 4)


def test_int18_same_pattern_is_fine_with_barriers() -> None:
    k = kernel("""
kernel k(out : i32[]) shared s : i32[4] =
  let t = thread_idx_x in
  s[t] <- t;
  barrier;
  let v = s[(t + 1) % 4] in
  barrier;
  s[t] <- v * 10;
  barrier;
  out[global_thread_id] <- s[(t + 1) % 4]
""")
    out = np.zeros(8, np.int32)
    run_kernel(k, {"out": out}, 8, 4)
    assert out.tolist() == [(t + 2) % 4 * 10 for _ in range(2) for t in range(4)]


def test_int19_races_unchecked_on_request() -> None:
    k = kernel("kernel k(out : i32[]) = out[0] <- global_thread_id + 1")
    out = np.zeros(1, np.int32)
    run_kernel(k, {"out": out}, 4, check_races=False)
    assert out[0] in (1, 2, 3, 4)
    with pytest.raises(InterpError, match="data race"):
        run_kernel(k, {"out": out}, 4)
    oob = kernel("kernel k(out : i32[]) = out[global_thread_id] <- 1")
    with pytest.raises(InterpError, match="out-of-bounds"):
        run_kernel(oob, {"out": out}, 4, check_races=False)


def test_int17_masked_identity_accesses_then_shifted_read() -> None:
    """Identity stores under a mask are remembered lane by lane (the tracker is built
    only when a non-identity access comes)."""
    k = kernel("""
kernel k(a : i32[], b : i32[]) =
  let i = global_thread_id in
  if i % 2 == 1 then a[i] <- i;
  if i % 2 == 0 && i > 0 then b[i] <- a[i - 2];
  if i == 4 then b[i] <- a[i - 1]
""")
    with pytest.raises(InterpError, match=r"element \[3\]: thread 4 reads it after it was "
                                          r"stored by thread 3"):
        run_kernel(k, {"a": np.zeros(6, np.int32), "b": np.zeros(6, np.int32)}, 6)


def test_int3_variable_keeps_value_read_before_a_store() -> None:
    k = kernel("""
kernel k(y : f32[], out : f32[]) =
  let i = global_thread_id in
  let v = y[i] in
  y[i] <- 0.0f;
  let t = v * 2.0f in
  out[i] <- t + 1.0f;
  y[i] <- t + v
""")
    y = np.arange(5, dtype=np.float32)
    out = np.zeros(5, np.float32)
    run_kernel(k, {"y": y, "out": out}, 5)
    assert out.tolist() == [2 * v + 1 for v in range(5)]
    assert y.tolist() == [3 * v for v in range(5)]


def test_int3_i64_indices_and_negative_lower_bounds() -> None:
    k = kernel("""
kernel k(a : f64[-3:, 2:], out : f64[]) =
  let t = global_thread_id in
  let r = i64(t / 4) - 3L in
  let c = i64(t % 4) + 2L in
  out[t] <- a[r, c] + a[-3, 2]
""")
    a = np.arange(12, dtype=np.float64).reshape(3, 4) * 1.5
    out = np.zeros(12, np.float64)
    run_kernel(k, {"a": a, "out": out}, 12)
    assert out.tolist() == (a.reshape(-1) + a[0, 0]).tolist()
