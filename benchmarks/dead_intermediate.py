"""A dead intermediate: scale -> relu through a pipeline temporary, on device arrays
(specs/epilogue-fusion.md EF-30 .. EF-35, specs/frontend.md FE-70 .. FE-76).

``scale`` writes ``t = a * x``, ``relu`` reads ``t`` and writes ``y = max(t, 0)``, on 2^24
f32 (``SAREK_BENCH_LOG2N`` to change it), ``x`` and ``y`` device arrays of the OpenCL
backend. Three variants, each captured once in a pipeline and timed by ``p.replay()``
(the same host path for all, no planning per run), each followed by a sync:

- unfused: two launches, ``t`` a device array (16 bytes an element: read x, write t,
  read t, write y);
- fused, ``t`` kept (``p.keep(t)``): one launch that still stores ``t`` (traffic bound
  16 bytes an element, EF-35, of which the read-back of ``t`` hits its own cache line);
- fused, ``t`` dead: one launch without ``t``'s stores or parameter (8 bytes: 0.50).

Times are medians of interleaved repeats (``SAREK_BENCH_REPEAT``); ``y`` is checked
bitwise equal across the variants. The issue's target: fused dead / unfused <= 0.60.

Run: ``.venv/bin/python benchmarks/dead_intermediate.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chain_kernels import relu, scale  # noqa: E402

import sarek_py  # noqa: E402
from sarek_py.ir.diagnostics import BackendUnavailable  # noqa: E402

REPEAT = int(os.environ.get("SAREK_BENCH_REPEAT", "9"))
BACKEND = os.environ.get("SAREK_BENCH_BACKEND", "opencl")


def interleaved(fns: dict[str, Callable[[], object]],
                repeat: int = REPEAT) -> dict[str, float]:
    """Median wall-clock seconds of each function, run in turn ``repeat`` times."""
    for fn in fns.values():
        fn()  # warm up: compilation, first touch
    wall: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            wall[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in wall.items()}


def main() -> int:
    log2n = int(os.environ.get("SAREK_BENCH_LOG2N", "24"))
    n = 1 << log2n
    try:
        be = sarek_py.get_backend(BACKEND)
    except BackendUnavailable as exc:
        print(f"{BACKEND} is not available: {exc}")
        return 1
    x = sarek_py.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32),
                           BACKEND)
    ys = {k: sarek_py.empty(n, np.float32, BACKEND) for k in ("unfused", "kept", "dead")}
    t_dev = sarek_py.empty(n, np.float32, BACKEND)
    pipes: dict[str, Any] = {}
    with sarek_py.pipeline(backend=BACKEND, fuse=False) as p:
        scale[n, 256](x, t_dev, 1.5, n)
        relu[n, 256](t_dev, ys["unfused"], n)
    pipes["unfused"] = p
    with sarek_py.pipeline(backend=BACKEND) as p:
        t = p.keep(p.empty(n, np.float32))
        scale[n, 256](x, t, 1.5, n)
        relu[n, 256](t, ys["kept"], n)
    pipes["kept"] = p
    with sarek_py.pipeline(backend=BACKEND) as p:
        t = p.empty(n, np.float32)
        scale[n, 256](x, t, 1.5, n)
        relu[n, 256](t, ys["dead"], n)
    pipes["dead"] = p
    print(f"# dead intermediate, scale -> relu, n = 2^{log2n} f32, device arrays on "
          f"{BACKEND} ({getattr(be, 'device_name', BACKEND)})")
    for line in pipes["dead"].report().splitlines():
        print(f"# {line}")

    def replay(key: str) -> Callable[[], None]:
        def go() -> None:
            pipes[key].replay()
            be.sync()
        return go

    labels = {"unfused": "unfused (2 launches, t stored)",
              "kept": "fused, t kept (1 launch)",
              "dead": "fused, t dead (1 launch, no t)"}
    traffic = {"unfused": 16 * n, "kept": 16 * n, "dead": 8 * n}
    times = interleaved({k: replay(k) for k in labels})
    outs = {k: y.get() for k, y in ys.items()}
    same = outs["unfused"].tobytes() == outs["kept"].tobytes() == outs["dead"].tobytes()
    print(f"{'variant':34s} {'wall ms':>8s} {'MB bound':>9s} {'GB/s':>6s}")
    for k, label in labels.items():
        print(f"{label:34s} {times[k] * 1e3:8.2f} {traffic[k] / 1e6:9.1f} "
              f"{traffic[k] / 1e9 / times[k]:6.2f}")
    print(f"fused dead / unfused: {times['dead'] / times['unfused']:.3f}   "
          f"fused kept / unfused: {times['kept'] / times['unfused']:.3f}   "
          f"traffic bound: {8 / 16:.2f}   target: <= 0.60")
    print(f"y bitwise equal in the three variants: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
