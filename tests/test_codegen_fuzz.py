"""Random well-typed kernels on OpenCL against the interpreter (specs/codegen.md, CG-15).

Kernels come from tests/strategies.py. Each runs as one thread (so no generated kernel
races); a kernel the interpreter rejects (out of bounds, division by zero, an undefined
conversion …) has no defined meaning and is not compared. Every other one must write the
interpreter's bytes on OpenCL, NaN payloads aside; kernels that call transcendental
intrinsics are held to the ULP bound instead, and not compared when they also loop (the
trip count may then differ). ``SAREK_FUZZ=1`` runs many more examples;
``SAREK_FUZZ_TRACE=FILE`` writes each kernel to FILE before the device runs it (the last
one is the culprit when a run hangs).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import kernels
from test_codegen_exact import TRANSCENDENTAL_ULP, opencl_or_skip, ulp_distance

from sarek_py.codegen import CodegenError
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.intrinsics import TRANSCENDENTAL
from sarek_py.ir.nodes import For, Intrinsic, Kernel, While
from sarek_py.ir.types import ArrayType
from sarek_py.ir.visit import iter_nodes

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
#: iterations of all loops of one launch the interpreter runs before giving up (INT-22)
LOOP_BUDGET = 2**14


def inputs(k: Kernel, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for p in k.params:
        t = p.type
        if isinstance(t, ArrayType):
            shape = tuple(n if n is not None else 3 for n in t.shape)
            if t.elem.is_float:
                out[p.name] = rng.uniform(-4, 4, shape).astype(t.elem.dtype)
            elif t.elem.is_int:
                out[p.name] = rng.integers(-5, 6, shape).astype(t.elem.dtype)
            else:
                out[p.name] = rng.integers(0, 2, shape) == 1
        elif t.is_float:
            out[p.name] = t.dtype.type(rng.uniform(-4, 4))
        elif t.is_int:
            out[p.name] = t.dtype.type(rng.integers(-5, 6))
        else:
            out[p.name] = bool(rng.integers(0, 2))
    return out


def same_bytes_nan_aside(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    if a.tobytes() == b.tobytes():
        return True
    if a.dtype.kind != "f":
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(((a == b) & (np.signbit(a) == np.signbit(b)) | both_nan).all())


def run_one(k: Kernel, seed: int) -> None:
    be = opencl_or_skip()
    args = inputs(k, seed)
    ref, dev = copy.deepcopy(args), copy.deepcopy(args)
    try:
        # a small loop budget (INT-22): a random loop of millions of iterations is not
        # compared (under typeguard the interpreter would take minutes on it)
        # one thread on a 3-D launch: the kernels read y and z intrinsics (LCH-26)
        r_ref = run_kernel(k, ref, 1, 1, loop_budget=LOOP_BUDGET, grid=(1, 1, 1),
                           block_shape=(1, 1, 1))
    except InterpError:
        return  # undefined behaviour, or a loop past the budget: nothing to compare
    loose = any(isinstance(n, Intrinsic) and n.name in TRANSCENDENTAL
                for b in (k.body, *(h.body for h in k.helpers)) for n in iter_nodes(b))
    if loose and any(isinstance(n, (For, While)) for b in (k.body, *(h.body for h in k.helpers))
                     for n in iter_nodes(b)):
        # a loop may test values the device computes within the ULP bound of CG-13, not
        # bitwise: its trip count (even whether it ends) need not be the interpreter's
        return
    if os.environ.get("SAREK_FUZZ_TRACE"):
        from sarek_py.ir.printer import print_kernel

        Path(os.environ["SAREK_FUZZ_TRACE"]).write_text(print_kernel(k) + f"\n// seed {seed}\n")
    try:
        r_dev = be.run_kernel(k, dev, 1, 1, grid=(1, 1, 1), block_shape=(1, 1, 1))
    except CodegenError:
        return  # stop inside a helper (CG-11)
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes)
    for p in k.params:
        if not isinstance(p.type, ArrayType):
            continue
        a, b = ref[p.name], dev[p.name]
        if same_bytes_nan_aside(a, b):
            continue
        assert loose and p.type.elem.is_float, f"{p.name}: {a!r} != {b!r}"
        fin = np.isfinite(a) & np.isfinite(b)
        assert (np.isnan(a) == np.isnan(b)).all()
        assert ulp_distance(a[fin], b[fin]).max(initial=0) <= TRANSCENDENTAL_ULP


@pytest.mark.opencl
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(depth=2), st.integers(0, 2**16))
def test_cg15_random_kernels_match_the_interpreter(k: Kernel, seed: int) -> None:
    run_one(k, seed)


@pytest.mark.slow
@pytest.mark.opencl
@settings(max_examples=400 if FUZZ else 40, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(kernels(depth=3), st.integers(0, 2**16))
def test_cg15_random_kernels_fuzz(k: Kernel, seed: int) -> None:
    run_one(k, seed)
