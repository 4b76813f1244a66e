"""What a repeated pipeline costs the host (specs/frontend.md FE-80 … FE-85; issue 14's
target: under 0.1 ms per repeated pipeline plus its launches).

A three-kernel chain (scale -> shift -> relu) on small f32 arrays, so that the launches
themselves are cheap, is run as ``with pipeline(): ...`` again and again on the same
backend. Printed, each the median of several rounds:

* cold: the first pipeline (analysis, fusion, emit and build), plan cache cleared;
* launches: the fused launches run directly (``Backend.run_kernel`` on the launches the
  pipeline ran), the floor every way of running them pays;
* warm pipeline: a whole repeated pipeline (recording, the cached plan, rebinding, the
  launches); its host cost is warm minus launches;
* replay: ``p.replay()``, the same launches without recording or planning; its host cost
  is replay minus launches.

Usage: ``python benchmarks/pipeline_overhead.py [--backend interp|opencl|cuda] [--n N]
[--repeat R] [--rounds K]``. On a shared machine the medians move: say so with the
numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from chain_kernels import relu, scale, shift  # noqa: E402

from sarek_py.frontend import pipeline, plan_cache
from sarek_py.runtime import get_backend


def per_call(f: Callable[[], Any], repeat: int, rounds: int) -> float:
    """Seconds per call of ``f``: the median over ``rounds`` rounds of ``repeat`` calls."""
    f()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeat):
            f()
        times.append((time.perf_counter() - t) / repeat)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    opts = ap.parse_args()
    be, n = get_backend(opts.backend), opts.n
    x = (np.arange(n, dtype=np.float32) - n / 3).astype(np.float32)
    t1, t2, out = (np.zeros_like(x) for _ in range(3))

    def pipe() -> Any:
        with pipeline(backend=opts.backend) as p:
            scale[n, 64](x, t1, 2.0, n)
            shift[n, 64](t1, t2, 1.0, n)
            relu[n, 64](t2, out, n)
        return p

    plan_cache.clear()
    t = time.perf_counter()
    p = pipe()
    cold = time.perf_counter() - t
    runs = [(lc.kernel, lc.by_name, *lc.counts()) for lc in p.launches]

    def direct() -> None:
        for k, args, threads, block in runs:
            be.run_kernel(k, args, threads, block)

    launches = per_call(direct, opts.repeat, opts.rounds)
    warm = per_call(pipe, opts.repeat, opts.rounds)
    replay = per_call(p.replay, opts.repeat, opts.rounds)
    # the host cost measured directly: a pipeline's time outside Backend.run_kernel (on a
    # shared machine the difference of two medians above moves with the launches' noise)
    inside = [0.0]
    run_kernel = be.run_kernel

    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return run_kernel(*args, **kwargs)
        finally:
            inside[0] += time.perf_counter() - t

    be.run_kernel = timed  # type: ignore[method-assign]
    try:
        outside = []
        for _ in range(opts.rounds):
            inside[0] = 0.0
            t = time.perf_counter()
            for _ in range(opts.repeat):
                pipe()
            outside.append((time.perf_counter() - t - inside[0]) / opts.repeat)
        host = statistics.median(outside)
        outside = []
        for _ in range(opts.rounds):
            inside[0] = 0.0
            t = time.perf_counter()
            p.replay(opts.repeat)
            outside.append((time.perf_counter() - t - inside[0]) / opts.repeat)
        host_replay = statistics.median(outside)
    finally:
        del be.run_kernel
    ms = 1e3
    print(f"backend {be.name}, chain scale -> shift -> relu on {n} f32, "
          f"fused into {', '.join(lc.kernel.name for lc in p.launches)}")
    print(f"cold pipeline (plan, fuse, emit, build):  {cold * ms:9.3f} ms")
    print(f"launches run directly:                    {launches * ms:9.3f} ms")
    print(f"warm pipeline (cached plan):              {warm * ms:9.3f} ms  "
          f"host cost {(warm - launches) * ms:7.3f} ms per pipeline")
    print(f"replay:                                   {replay * ms:9.3f} ms  "
          f"host cost {(replay - launches) * ms:7.3f} ms per replay")
    print(f"host cost outside the launches (timed around run_kernel): "
          f"{host * ms:7.3f} ms per repeated pipeline, {host_replay * ms:7.3f} ms per replay")
    print(f"plan cache: {plan_cache.STATS.hits} hits, {plan_cache.STATS.misses} misses")


if __name__ == "__main__":
    main()
