"""One element-wise launch on OpenCL with numpy arrays copied, numpy arrays used in place
(zero copy, specs/launch.md LCH-67) and device arrays (LCH-62): best of ``--repeat``.

    .venv/bin/python benchmarks/zero_copy.py --log2n 22 --repeat 7
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import sarek_py
from sarek_py import Vec, f32, i32, kernel
from sarek_py.frontend import global_thread_id


@kernel
def saxpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = a * x[i] + y[i]


def best(fn: Callable[[], None], repeat: int) -> float:
    fn()  # warm: build, first allocation
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--log2n", type=int, default=22)
    ap.add_argument("--repeat", type=int, default=7)
    opts = ap.parse_args()
    n = 1 << opts.log2n
    be = sarek_py.get_backend("opencl")
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    a = np.float32(0.5)

    def launch(xx: object, yy: object) -> Callable[[], None]:
        return lambda: saxpy[n, 256](xx, yy, a, n, backend="opencl")

    rows = []
    was = be.zero_copy  # type: ignore[attr-defined]
    be.zero_copy = False  # type: ignore[attr-defined]
    rows.append(("numpy arrays, copied in and out", best(launch(x, y), opts.repeat)))
    be.zero_copy = True  # type: ignore[attr-defined]
    rows.append(("numpy arrays, in place (zero copy)", best(launch(x, y), opts.repeat)))
    be.zero_copy = was  # type: ignore[attr-defined]
    dx, dy = sarek_py.to_device(x, "opencl"), sarek_py.to_device(y, "opencl")
    rows.append(("device arrays", best(launch(dx, dy), opts.repeat)))
    rows.append(("numpy y = a * x + y (reference)",
                 best(lambda: np.add(a * x, y, out=y), opts.repeat)))
    print(f"saxpy, 2^{opts.log2n} f32, {be.device_name}, best of {opts.repeat}")  # type: ignore[attr-defined]
    for what, t in rows:
        print(f"  {what:40s} {t * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
