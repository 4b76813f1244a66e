r"""The fused chain scale -> shift -> relu through the runtime, with launches proved in bounds
(specs/codegen.md CG-70 … CG-75) against every launch checked (``prove_launches = False``).

    .venv/bin/python benchmarks/launch_proof.py [--log2 22] [--rounds 5]

Both runs use device arrays and a pipeline with temporaries (one fused launch, x in, y out),
as benchmarks/peers.py's first chain row; rounds interleave the two, the best time of each
counts (noisy on a shared machine). The results are compared bit for bit, the number of
launches that ran proved-unchecked is printed, and the cost of the proof itself (a cache
hit, and a first decision) is measured.

Whether PoCL vectorized each build's work-group loop (deterministic, unlike the times):

    POCL_KERNEL_CACHE=0 POCL_VECTORIZER_REMARKS=1 .venv/bin/python \
        benchmarks/launch_proof.py --log2 12 --rounds 1 --mark 2>&1 | \
        grep -o '=== .*\|loop not vectorized[^<]*\|vectorized loop ([^)]*)'
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chain_kernels import relu, scale, shift  # noqa: E402

import sarek_py  # noqa: E402
from sarek_py.analysis.launch_bounds import launch_in_bounds  # noqa: E402
from sarek_py.ir.types import ArrayType  # noqa: E402
from sarek_py.runtime import get_backend, launch_proof  # noqa: E402
from sarek_py.runtime.launch_proof import proved_in_bounds  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2", type=int, default=22)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mark", action="store_true",
                    help="print '=== BUILD' on stderr before each build's first launch "
                         "(to attribute PoCL's POCL_VECTORIZER_REMARKS=1 output)")
    opts = ap.parse_args()
    n = 1 << opts.log2
    be = get_backend("opencl")
    x = sarek_py.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32),
                           backend="opencl")
    a, b = np.float32(2.0), np.float32(-0.5)
    outs = {}

    def run(prove: bool) -> sarek_py.Pipeline:
        be.prove_launches = prove
        try:
            with sarek_py.pipeline(backend="opencl") as p:
                t, u = p.empty_like(x), p.empty_like(x)
                scale[n, 256](x, t, a, n)
                shift[n, 256](t, u, b, n)
                relu[n, 256](u, outs[prove], n)
            be.sync()
        finally:
            be.prove_launches = True
        return p

    names = {True: "proved (unchecked build)", False: "checked (prove_launches off)"}
    best = {True: 1e9, False: 1e9}
    for prove in (True, False):
        outs[prove] = sarek_py.empty_like(x, backend="opencl")
        if opts.mark:
            print(f"=== {names[prove]}", file=sys.stderr, flush=True)
        before = be.stats.launches_proved
        run(prove)
        print(f"{names[prove]:30s} launches proved: {be.stats.launches_proved - before}")
    for r in range(opts.rounds):
        for prove in ((True, False) if r % 2 else (False, True)):  # either goes first
            t0 = time.perf_counter()
            run(prove)
            best[prove] = min(best[prove], time.perf_counter() - t0)
    same = np.array_equal(outs[True].get().view(np.uint32), outs[False].get().view(np.uint32))
    for prove in (True, False):
        print(f"{names[prove]:30s} {best[prove] * 1e3:8.2f} ms (best of {opts.rounds}, "
              f"2^{opts.log2} f32)")
    print(f"bitwise equal: {same}; proved/checked = {best[True] / best[False]:.2f}")
    # the proof's own cost, on the fused kernel's launch as the backend asked it
    seen: list[tuple[Any, ...]] = []

    def spy(*call: Any) -> bool:
        seen.append(call)
        return proved_in_bounds(*call)

    launch_proof.proved_in_bounds = spy
    try:
        run(True)
    finally:
        launch_proof.proved_in_bounds = proved_in_bounds
    (call,) = seen
    reps = 2000
    t0 = time.perf_counter()
    for _ in range(reps):
        proved_in_bounds(*call)
    hit = (time.perf_counter() - t0) / reps
    k, dev, threads, block, _, _ = call
    scalars = {q.name: int(dev[q.name]) for q in k.params
               if not isinstance(q.type, ArrayType) and not q.scalar.is_float}
    extents = {q.name: dev[q.name].shape for q in k.params if isinstance(q.type, ArrayType)}
    t0 = time.perf_counter()
    for _ in range(200):
        assert launch_in_bounds(k, scalars, extents, threads, (-(-threads // block),),
                                (block,))
    first = (time.perf_counter() - t0) / 200
    print(f"proof per launch: {hit * 1e6:.1f} us (cache hit), {first * 1e6:.1f} us (decided)")


if __name__ == "__main__":
    main()
