"""Local arrays past a CPU thread's stack are refused before the launch (specs/launch.md,
LCH-91): a 16 MB per-thread array killed the process on c and on PoCL (red team, finding
1); 1 MiB and less run, bitwise the interpreter's."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from sarek_py.ir.diagnostics import BackendUnavailable, LaunchError
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.limits import CPU_LOCAL_BYTES


def kernel(elems: int):  # type: ignore[no-untyped-def]
    return parse_module(textwrap.dedent(f"""
        kernel big(x : f32[], n : i32)
          local acc : f32[{elems}] =
          let i = global_thread_id in
          acc[{elems - 1}] <- 2.0f;
          acc[i] <- 1.0f;
          if i < n then x[i] <- acc[{elems - 1}] + acc[i]
        """), "big.sk").kernels[0]


@pytest.mark.parametrize("backend", ["c", "opencl"])
def test_lch91_a_local_array_past_the_stack_is_refused(backend: str) -> None:
    """LCH-91: 16 MB of local array a thread is a LaunchError naming the array and the
    limit, and the process lives on (before: SIGSEGV)."""
    try:
        be = get_backend(backend)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    x = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match=r"\[LCH-91\] kernel big: its local arrays "
                       r"\(acc: 16000000 bytes\).*use a global array"):
        be.run_kernel(kernel(4_000_000), {"x": x, "n": 4}, 4, 4)
    assert not x.any()


@pytest.mark.parametrize("backend", ["c", "opencl"])
def test_lch91_a_local_array_within_the_budget_runs(backend: str) -> None:
    """LCH-91: exactly the budget runs, bitwise the interpreter's."""
    try:
        be = get_backend(backend)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    k = kernel(CPU_LOCAL_BYTES // 4)
    a, b = np.zeros(9, np.float32), np.zeros(9, np.float32)
    be.run_kernel(k, {"x": a, "n": 9}, 9, 4)
    get_backend("interp").run_kernel(k, {"x": b, "n": 9}, 9, 4)
    assert a.tobytes() == b.tobytes() and a[0] == 3.0
