"""``min``/``max`` of floats, one meaning on every backend (specs/codegen.md CG-40): ``-0.0``
is below ``+0.0`` and a NaN operand yields the other one, on the interpreter, OpenCL and
in CUDA source (C's ``fmin``/``fmax`` leave the sign of a zero open: PoCL gave
``min(0.0, -0.0) = -0.0`` where the interpreter gave ``+0.0``)."""

from __future__ import annotations

import itertools
import os
import shutil

import numpy as np
import pytest

from sarek_py.codegen import emit_cuda, emit_opencl
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend

SPECIAL = [0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1.0, -1.0, 5e-324]


def kernel(t: str) -> Kernel:
    m = parse_module(f"""kernel k(a : {t}[], b : {t}[], mn : {t}[], mx : {t}[]) =
  let i = global_thread_id in
  mn[i] <- min(a[i], b[i]);
  mx[i] <- max(a[i], b[i])
""", "minmax.sk")
    check_module(m)
    return m.kernels[0]


@pytest.mark.parametrize("t,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_cg40_min_max_of_special_values_bitwise(t: str, dtype: type) -> None:
    """CG-40: every pair of special values gives the same bits on the interpreter and
    OpenCL, and zeros of both signs order -0.0 below +0.0 in either argument order."""
    try:
        cl = get_backend("opencl")
    except SarekError as exc:
        pytest.skip(f"no OpenCL: {exc}")
    pairs = list(itertools.product(SPECIAL, SPECIAL))
    n = len(pairs)
    base = {"a": np.array([p[0] for p in pairs], dtype), "b": np.array([p[1] for p in pairs], dtype),
            "mn": np.zeros(n, dtype), "mx": np.zeros(n, dtype)}
    out = []
    for be in (get_backend("interp"), cl):
        args = {k: v.copy() for k, v in base.items()}
        be.run_kernel(kernel(t), args, n, 32)
        out.append(args)
    for k in ("mn", "mx"):
        assert out[0][k].tobytes() == out[1][k].tobytes(), k
    w = len(SPECIAL)  # pair (SPECIAL[p], SPECIAL[q]) is at p * w + q
    for x in (0 * w + 1, 1 * w + 0):  # (+0.0, -0.0) and (-0.0, +0.0)
        assert np.signbit(out[0]["mn"][x]) and not np.signbit(out[0]["mx"][x])
    nan_one = 2 * w + 5  # (NaN, 1.0)
    assert out[0]["mn"][nan_one] == 1.0 and out[0]["mx"][nan_one] == 1.0


def test_cg40_emitted_c_calls_the_named_functions() -> None:
    """CG-40: the emitted C calls ``sarek_min_f32``/``sarek_max_f64`` (defined once, before
    the kernel), and integer min/max stay C's ``min``/``max``."""
    for t in ("f32", "f64"):
        for src in (emit_cuda(kernel(t)), emit_opencl(kernel(t))):
            assert src.count(f"sarek_min_{t}(") == 2  # the definition and the call
            # equal operands settled by their bits: OR for min, AND for max (CG-40)
            to_int = {("f32", True): "__float_as_int", ("f64", True): "__double_as_longlong",
                      ("f32", False): "as_int", ("f64", False): "as_long"}[(t, "CUDA" in src)]
            assert f"{to_int}(a) | {to_int}(b)" in src and f"{to_int}(a) & {to_int}(b)" in src
    assert "sarek_min" not in emit_opencl(kernel("i32"))


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("NVCC"),
                    reason="nvcc is not installed")
def test_cg40_cuda_min_max_compile_to_ptx_without_fma() -> None:
    """CG-40: the CUDA functions compile (nvcc --fmad=false -ptx), no fma.rn."""
    from sarek_py.codegen.nvcc import compile_ptx

    for t in ("f32", "f64"):
        ptx = compile_ptx(emit_cuda(kernel(t)))
        assert ".entry" in ptx and "fma.rn" not in ptx
