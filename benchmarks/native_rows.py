"""The advection stage's launch function with and without the row split (specs/native.md,
NAT-65 … NAT-69): the kernel's own time, called directly through ctypes, no host code.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/native_rows.py [--sizes 512,509]

The stage is one step of the advection-diffusion example fused + swap and offloaded with
the rows numbering (f64, blocks of 256 along a row). It is emitted for the c backend's
unchecked build twice: as the backend emits it (each row's threads inside the nest run
without the guard, NAT-65) and with the split off (every thread tests the guard, as
before NAT-65), and compiled with the backend's flags; a hand-written C loop nest of the
same stage (benchmarks/native_codegen.py's) is the third column. Each is called
``--reps`` times per batch on the same inputs; the figure is the least time per call over
``--repeat`` batches, CPU time (``time.process_time``: with one OpenMP thread, the call's
own work, little disturbed by other jobs) and wall time. The script fails unless the
split and the unsplit launch write the same bytes (du and the written field).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import ctypes  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from advection_diffusion import variants  # noqa: E402
from native_codegen import HAND  # noqa: E402

from sarek_py.codegen import cstyle  # noqa: E402
from sarek_py.codegen.c99 import C99  # noqa: E402
from sarek_py.codegen.cstyle import Emitted, emit  # noqa: E402
from sarek_py.ir.nodes import Kernel  # noqa: E402
from sarek_py.ir.types import Scalar  # noqa: E402
from sarek_py.runtime.ccompiler import library  # noqa: E402

BLOCK = 256
_CTYPES = {Scalar.F64: ctypes.c_double, Scalar.F32: ctypes.c_float, Scalar.I32: ctypes.c_int,
           Scalar.I64: ctypes.c_longlong}
SCALARS = {"ca": 0.3, "cb": 0.7, "cx": 0.11, "cy": 0.13, "dt": 0.01, "kx": 0.2, "ky": 0.21,
           "rdx": 3.0, "rdy": 3.1}


def stage() -> Kernel:
    for k in variants(BLOCK)["fused+swap"].kernels:
        if k.name.endswith("_rows") and {"du", "u", "u_copy"} <= {p.name for p in k.params}:
            return k
    raise SystemExit("no rows stage kernel in the fused + swap program")


def unsplit(k: Kernel) -> Emitted:
    """The unchecked C with every thread testing the guard (before NAT-65)."""
    real = cstyle.row_guard
    cstyle.row_guard = lambda kernel: None  # type: ignore[assignment]
    try:
        return emit(k, C99, checked=False)
    finally:
        cstyle.row_guard = real


def caller(em: Emitted, k: Kernel, arrays: dict[str, Any], n: int) -> Callable[[], None]:
    """A call of the emitted launch function on ``arrays`` for an ``n`` x ``n`` nest."""
    fn = getattr(ctypes.CDLL(str(library(em.source))), em.abi.name)
    gx = -(-n // BLOCK)
    shape = np.array([gx, n, 1, BLOCK, 1, 1], np.int32)
    types = {p.name: p.type for p in k.params}
    values = {**SCALARS, "lo_0": 1, "lo_1": 1, "hi_0": n, "hi_1": n}
    args: list[Any] = []
    for a in em.abi.args:
        if a.kind == "array":
            args.append(ctypes.c_void_p(arrays[a.param].ctypes.data))
        elif a.kind == "extent":
            args.append(ctypes.c_int(arrays[a.param].shape[a.dim]))
        elif a.kind == "scalar":
            t = types[a.param]
            assert isinstance(t, Scalar)
            args.append(_CTYPES[t](values[str(a.param)]))
        elif a.kind == "threads":
            args.append(ctypes.c_longlong(gx * BLOCK * n))
        else:
            raise SystemExit(f"the stage takes an argument this script does not make: {a}")
    args.append(ctypes.c_void_p(shape.ctypes.data))
    return lambda: fn(*args)


def inputs(n: int) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    u = rng.random((n + 4, n + 4))
    return {"du": rng.random((n, n)), "u": np.zeros_like(u), "u_copy": u}


def best(run: Callable[[], None], reps: int, repeat: int) -> tuple[float, float]:
    """The least (CPU, wall) seconds per call of ``run`` over ``repeat`` batches."""
    run()
    cpu = wall = float("inf")
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(reps):
            run()
        cpu = min(cpu, (time.process_time() - c0) / reps)
        wall = min(wall, (time.perf_counter() - w0) / reps)
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,509")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    o = ap.parse_args()
    k = stage()
    split, plain = emit(k, C99, checked=False), unsplit(k)
    assert "sarek_edge" in split.source and "sarek_edge" not in plain.source
    hand = ctypes.CDLL(str(library(HAND))).stage
    fp, i32, f64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    hand.argtypes = [fp, fp, fp, i32, i32, *[f64] * 9]
    print(f"# ms per launch, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"least of {o.repeat} x {o.reps}: CPU / wall")
    print(f"{'stage (rows, f64)':20} {'split':>15} {'unsplit':>15} {'hand C':>15}  bitwise")
    ok = True
    for n in (int(s) for s in o.sizes.split(",")):
        a, b, h = inputs(n), inputs(n), inputs(n)
        run_a, run_b = caller(split, k, a, n), caller(plain, k, b, n)
        sc = [SCALARS[x] for x in ("ca", "cb", "cx", "cy", "dt", "kx", "ky", "rdx", "rdy")]

        def run_h(h: dict[str, Any] = h, n: int = n, sc: list[float] = sc) -> None:
            hand(h["du"].ctypes.data, h["u_copy"].ctypes.data, h["u"].ctypes.data, n, n, *sc)

        run_a()
        run_b()
        same = a["du"].tobytes() == b["du"].tobytes() and a["u"].tobytes() == b["u"].tobytes()
        ok &= same
        times = [best(r, o.reps, o.repeat) for r in (run_a, run_b, run_h)]
        cells = " ".join(f"{c * 1e3:7.3f}/{w * 1e3:7.3f}" for c, w in times)
        print(f"{n}^2{'':{16 - len(str(n))}} {cells}  {'same' if same else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
