"""Differential runs of kernels with dynamic shared memory (INT-50, CG-50, LCH-50): each
case draws an element type (bool, i32, i64, f32, f64 — the bytes OpenCL's local buffer
and CUDA's ``shared=`` are sized by), a block size, a shared extent (larger or smaller
than the block) and an element count; every block copies its slice into the dynamic
shared array, waits at a barrier and writes it back rotated by ``k``. The interpreter
(race-checked) must give numpy's answer and OpenCL the interpreter's bytes. A few cases
run by default; ``SAREK_FUZZ=1`` (``make fuzz``) runs the long one."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend

TYPES = ("bool", "i32", "i64", "f32", "f64")
ZERO = {"bool": "false", "i32": "0", "i64": "i64(0)", "f32": "f32(0)", "f64": "f64(0)"}


def rotate_kernel(t: str) -> Kernel:
    return parse_module(f"""kernel rot(x : {t}[], out : {t}[], n : i32, k : i32)
  shared s : {t}[] =
  let tid = thread_idx_x in
  let l = length(s) in
  let base = block_idx_x * l in
  let mut j = tid in
  while j < l do
    s[j] <- (base + j < n ? x[base + j] : {ZERO[t]});
    j := j + block_dim_x
  done;
  barrier;
  let mut m = tid in
  while m < l do
    if base + m < n then out[base + m] <- s[(m + k) % l];
    m := m + block_dim_x
  done""", f"rot_{t}.sk").kernels[0]


KERNELS = {t: rotate_kernel(t) for t in TYPES}


def case(seed: int) -> tuple[Kernel, dict[str, Any], int, int, int, np.ndarray]:
    """The kernel, arguments, threads, block, shared extent and expected output."""
    rng = np.random.default_rng(seed)
    t = TYPES[seed % len(TYPES)]
    block = int(rng.choice([1, 2, 4, 8, 16, 32, 64]))
    ext = int(rng.integers(1, 200))
    n = int(rng.integers(1, 600))
    k = int(rng.integers(0, 3 * ext))
    dtype = KERNELS[t].params[0].scalar.dtype
    if t == "bool":
        x = rng.integers(0, 2, n).astype(np.bool_)
    elif t in ("i32", "i64"):
        x = rng.integers(-10**6, 10**6, n).astype(dtype)
    else:
        x = rng.standard_normal(n).astype(dtype)
    blocks = -(-n // ext)
    pad = np.zeros(blocks * ext, dtype)
    pad[:n] = x
    rows = pad.reshape(blocks, ext)
    want = np.roll(rows, -(k % ext), axis=1).reshape(-1)[:n]
    args = {"x": x, "out": np.zeros(n, dtype), "n": n, "k": k}
    return KERNELS[t], args, blocks * block, block, ext, want


def run_cases(seeds: range) -> int:
    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    for seed in seeds:
        k, ref, threads, block, ext, want = case(seed)
        dev = {a: (v.copy() if isinstance(v, np.ndarray) else v) for a, v in ref.items()}
        run_kernel(k, ref, threads, block, shared=ext)
        be.run_kernel(k, dev, threads, block, shared=ext)
        assert ref["out"].tobytes() == want.tobytes(), seed
        assert dev["out"].tobytes() == ref["out"].tobytes(), seed
    return len(seeds)


def test_int50_cg50_dynamic_shared_differential_default() -> None:
    """INT-50, CG-50: five cases, one of each element type."""
    assert run_cases(range(5)) == 5


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SAREK_FUZZ"), reason="SAREK_FUZZ=1 runs it")
def test_int50_cg50_dynamic_shared_differential_long() -> None:
    """The long run of ``make fuzz``: 1000 cases."""
    assert run_cases(range(5, 1005)) == 1000


@pytest.mark.parametrize("t", TYPES)
def test_cg50_local_buffer_is_extent_times_element_bytes(t: str) -> None:
    """CG-50: the OpenCL local buffer bound to the array has the launch's extent times the
    element's bytes (a bool is one byte) — PoCL does not fault on a short one, so the size
    is checked at the ABI; the extent argument is the element count."""
    from sarek_py.codegen.cstyle import emit
    from sarek_py.codegen.opencl import OPENCL
    from sarek_py.runtime.args import arg_plan
    from sarek_py.runtime.base import DeviceBuffer

    k = KERNELS[t]
    plan = arg_plan(emit(k, OPENCL).abi, k, np.uint8)
    dt = k.params[0].scalar.dtype
    x = DeviceBuffer(np.zeros(4 * dt.itemsize, np.uint8), (4,), dt)
    kinds = [s[0] for s in plan.slots]
    assert kinds[-2:] == ["shared", "shared_extent"]
    values = plan.values({"x": x, "out": x, "n": np.int32(4), "k": np.int32(0)}, 4, None,
                         lambda d: d, fault=object(), shared=37, local=lambda nb: ("local", nb))
    size = 1 if t == "bool" else k.params[0].scalar.dtype.itemsize
    assert values[-2] == ("local", 37 * size) and values[-1] == np.int32(37)
