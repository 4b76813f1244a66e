r"""The fused chain scale -> shift -> relu (temporaries: one kernel, x in, y out) as sarek_py
emits it, and variants of it, timed side by side on the OpenCL device (PoCL).

    .venv/bin/python benchmarks/chain_variants.py [--log2 24] [--rounds 7]

Each variant is built from the emitted source by one textual change, so a difference in
time is that change's: flat1 (the thread's number as get_global_id(0) instead of the 3-D
formula), unchecked (no bounds checks: plain loads and stores, CG-24's --unchecked),
restrict (const/restrict on the arrays); and a hand-written kernel of the same operations
(``hand``), with the generated kernel's repeated count tests (``nested ifs``) and with its
3-D thread number and 64-bit guard (``3-D id and guard``).
Every variant's result is compared bit for bit with the generated kernel's. Rounds
interleave the variants; the best time of each counts (noisy on a shared machine).

Whether PoCL vectorized each variant's work-group loop (deterministic, unlike the times):

    POCL_KERNEL_CACHE=0 POCL_VECTORIZER_REMARKS=1 .venv/bin/python \
        benchmarks/chain_variants.py --log2 12 --rounds 1 --mark 2>&1 | \
        grep -o '=== .*\|loop not vectorized[^<]*\|vectorized loop ([^)]*)'
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chain_kernels import relu, scale, shift  # noqa: E402

import sarek_py  # noqa: E402
from sarek_py.frontend.kernel import emit  # noqa: E402

FLAT3 = re.compile(r"long sarek_flat_id\(void\) \{.*?\n\}", re.S)
FLAT1 = "long sarek_flat_id(void) {\n  return (long)get_global_id(0);\n}"
HAND = """
#pragma OPENCL FP_CONTRACT OFF
float sarek_max_f32(float a, float b) {
  return a == b ? as_float(as_int(a) & as_int(b)) : fmax(a, b);
}
__kernel void hand(__global const float* restrict x, float a, float b, int n,
                   __global float* restrict y) {
  int i = get_global_id(0);
  if (i < n) y[i] = sarek_max_f32(a * x[i] + b, 0.0f);
}
"""

#: the generated kernel's control (one test per fused launch's count) with plain accesses
HAND_NESTED = HAND.replace("  if (i < n) y[i] = sarek_max_f32(a * x[i] + b, 0.0f);", """\
  if (i < n) {
    float v = a * x[i];
    if (i < n) { if (i < n) { float w = v + b;
      if (i < n) { if (i < n) { y[i] = sarek_max_f32(w, 0.0f); } } } }
  }""")
#: the hand kernel behind the generated one's thread number and guard
HAND_GUARD = HAND.replace("  int i = get_global_id(0);", """\
  long f = (long)((get_group_id(0) + get_num_groups(0) * (get_group_id(1) + get_num_groups(1) * get_group_id(2)))
      * (get_local_size(0) * get_local_size(1) * get_local_size(2))
      + get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2)));
  if (f >= (long)n) return;
  int i = (int)f;""")


def generated(n: int) -> str:
    x = sarek_py.to_device(np.ones(n, np.float32), backend="opencl")
    y = sarek_py.empty(n, np.float32, backend="opencl")
    with sarek_py.pipeline("opencl") as p:
        t, u = p.empty_like(x), p.empty_like(x)
        scale[n, 256](x, t, 2.0, n)
        shift[n, 256](t, u, 1.0, n)
        relu[n, 256](u, y, n)
    (lc,) = p.launches
    return emit(lc.kernel, "opencl")


def unchecked(src: str) -> str:
    src = re.sub(r"#define sarek_get1\(a, site, i0, n0\) \\\n  \(.*?\)\n",
                 "#define sarek_get1(a, site, i0, n0) ((a)[(i0)])\n", src)
    return re.sub(r"#define sarek_set1\(a, site, i0, n0, v\) \\\n  do \{.*?\} while \(0\)\n",
                  "#define sarek_set1(a, site, i0, n0, v) ((a)[(i0)] = (v))\n", src)


def kernel_args(src: str, named: dict[str, object], count: object) -> list[object]:
    """The arguments of the generated kernel in its parameters' order, read from its
    signature: ``named`` by name, every other parameter (lengths, ``n``, thread counts:
    all ``n`` here; one ``n`` once FE-97 merged them) ``count``."""
    sig = re.search(r"__kernel void scale_shift_relu\((.*?)\)\s*\{", src, re.S)
    assert sig is not None
    names = [p.split()[-1].lstrip("*") for p in sig.group(1).split(",")]
    return [named.get(q, count) for q in names]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--mark", action="store_true",
                    help="print '=== VARIANT' on stderr before each variant's first launch "
                         "(to attribute PoCL's POCL_VECTORIZER_REMARKS=1 output)")
    opts = ap.parse_args()
    n = 1 << opts.log2
    gen = generated(n)
    variants = {"generated": gen, "flat1": FLAT3.sub(FLAT1, gen)}
    variants["flat1+unchecked"] = unchecked(variants["flat1"])
    variants["unchecked"] = unchecked(gen)
    variants["flat1+unchecked+restrict"] = variants["flat1+unchecked"].replace(
        "__global float* p_p_x", "__global const float* restrict p_p_x").replace(
        "__global float* c_y", "__global float* restrict c_y")
    for k, v in variants.items():
        assert k == "generated" or v != gen, k
    ctx = cl.create_some_context(interactive=False)
    q = cl.CommandQueue(ctx)
    mf = cl.mem_flags
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    dx = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=x)
    oob = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(16, np.int32))
    a, b, i32, i64 = np.float32(2.0), np.float32(1.0), np.int32(n), np.int64(n)
    runs = {}
    outs = {}
    for name, src in variants.items():
        k = cl.Program(ctx, src).build().scale_shift_relu
        dy = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
        outs[name] = dy
        args = kernel_args(src, {"p_p_x": dx, "c_y": dy, "p_p_a": a, "p_c_b": b,
                                 "sarek_threads": i64, "sarek_oob": oob}, i32)
        runs[name] = (lambda k=k, args=args: k(q, (n,), (256,), *args))
    for name, src in (("hand", HAND), ("hand, nested ifs", HAND_NESTED),
                      ("hand, 3-D id and guard", HAND_GUARD)):
        hk = cl.Program(ctx, src).build().hand
        dy = outs[name] = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
        runs[name] = (lambda hk=hk, dy=dy: hk(q, (n,), (256,), dx, a, b, i32, dy))
    best = {name: 1e9 for name in runs}
    for name, f in runs.items():  # the first launch builds the work-group function
        if opts.mark:
            print(f"=== {name}", file=sys.stderr, flush=True)
        f()
        q.finish()
    for _ in range(opts.rounds):
        for name, f in runs.items():
            t = time.perf_counter()
            f()
            q.finish()
            best[name] = min(best[name], time.perf_counter() - t)
    ref = np.empty(n, np.float32)
    cl.enqueue_copy(q, ref, outs["generated"])
    for name in runs:
        got = np.empty(n, np.float32)
        cl.enqueue_copy(q, got, outs[name])
        same = np.array_equal(got.view(np.uint32), ref.view(np.uint32))
        print(f"{name:28s} {best[name] * 1e3:8.2f} ms  bitwise {'equal' if same else 'DIFFERS'}")


if __name__ == "__main__":
    main()
