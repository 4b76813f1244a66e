"""The c backend's generated C against a hand-written C loop nest of the same stage, one
OpenMP thread, CPU time of one launch (specs/native.md, NAT-30 … NAT-39).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/native_codegen.py [--log2n 22] [--size 512]

Three stages: saxpy (2^log2n f32), scale -> relu fused by epilogue fusion (2^log2n f32) and
one stage of the advection-diffusion program fused + swap and offloaded with the rows
numbering (size x size f64). Each runs through ``CBackend.launch`` in the checked and the
unchecked build, and as a hand-written C loop compiled with the backend's own flags
(:data:`sarek_py.runtime.ccompiler.FLAGS`) and called through ctypes. The figure is the
process's CPU time (``time.process_time``) per launch, the least of ``--repeat`` batches:
with one OpenMP thread it is the launch's own work, little disturbed by other jobs on a
shared machine. Each generated run's output is compared bitwise with the hand-written one.
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

from advection_diffusion import record_launches, variants  # noqa: E402

from sarek_py.fusion.epilogue.sequence import fuse_launches  # noqa: E402
from sarek_py.ir.host.launch import KernelLaunch  # noqa: E402
from sarek_py.ir.parser import parse_module  # noqa: E402
from sarek_py.runtime import get_backend  # noqa: E402
from sarek_py.runtime.ccompiler import library  # noqa: E402

HAND = r"""
#include <math.h>
void saxpy(const float* x, float* y, float a, int n) {
  #pragma omp parallel for simd schedule(static)
  for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i];
}
// the fused launch stores tmp too (the caller's array)
void scale_relu(const float* x, float* tmp, float* y, float a, int n) {
  #pragma omp parallel for simd schedule(static)
  for (int i = 0; i < n; i++) { float v = a * x[i]; tmp[i] = v; y[i] = v > 0.0f ? v : 0.0f; }
}
static inline double adv4(double a, double b, double c, double d, double vel) {
  return vel * (7.0 * (b + c) - (a + d)) / 12.0;
}
static inline double dif4(double a, double b, double c, double d, double k) {
  return k * (15.0 * (c - b) - (d - a)) / 12.0;
}
// u and u_copy: [-1:ny+2, -1:nx+2] (row length nx + 4), du: [1:ny, 1:nx]
void stage(double* du, const double* u, double* uc, int nx, int ny, double ca, double cb,
           double cx, double cy, double dt, double kx, double ky, double rdx, double rdy) {
  const long w = nx + 4;
  #pragma omp parallel for schedule(static)
  for (int j = 1; j <= ny; j++) {
    const double* r = u + (j + 1) * w + 1;       // r[i] is u[j, i]
    const double* rn = r + w, *rs = r - w, *rnn = r + 2 * w, *rss = r - 2 * w;
    #pragma omp simd  // as the generated row (NAT-36): no run-time alias checks
    for (int i = 1; i <= nx; i++) {
      double div = (adv4(r[i - 1], r[i], r[i + 1], r[i + 2], cx)
                    - adv4(r[i - 2], r[i - 1], r[i], r[i + 1], cx)
                    - (dif4(r[i - 1], r[i], r[i + 1], r[i + 2], kx)
                       - dif4(r[i - 2], r[i - 1], r[i], r[i + 1], kx))) * rdx
                 + (adv4(rs[i], r[i], rn[i], rnn[i], cy) - adv4(rss[i], rs[i], r[i], rn[i], cy)
                    - (dif4(rs[i], r[i], rn[i], rnn[i], ky)
                       - dif4(rss[i], rs[i], r[i], rn[i], ky))) * rdy;
      double d = ca * du[(long)(j - 1) * nx + (i - 1)] - dt * div;
      du[(long)(j - 1) * nx + (i - 1)] = d;
      uc[(j + 1) * w + i + 1] = r[i] + cb * d;
    }
  }
}
"""


def per_launch(run: Callable[[], None], reps: int, repeat: int) -> float:
    """The least CPU seconds per call of ``run`` over ``repeat`` batches of ``reps``."""
    run()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(reps):
            run()
        best = min(best, (time.process_time() - t0) / reps)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=22)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    o = ap.parse_args()
    hand = ctypes.CDLL(str(library(HAND)))
    be = get_backend("c")
    n = 1 << o.log2n
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    a = np.float32(1.5)
    rows: list[tuple[str, float, float, float, bool]] = []
    fp, f32, i32, f64 = ctypes.c_void_p, ctypes.c_float, ctypes.c_int, ctypes.c_double

    def dev(host: Any) -> Any:
        d = be.allocate(host.shape, host.dtype)
        be.copy_in(d, host)
        return d

    def view(d: Any) -> Any:
        return np.asarray(d.handle)[: d.nbytes].view(d.dtype)

    def measure(name: str, launch: Callable[[], None], hand_run: Callable[[], None],
                got: Callable[[], Any], want: Callable[[], Any],
                reset: Callable[[], None] = lambda: None) -> None:
        times = []
        for checked in (True, False):
            be.checked = checked
            times.append(per_launch(launch, o.reps, o.repeat))
        be.checked = True
        h = per_launch(hand_run, o.reps, o.repeat)
        reset()  # then one run of each from the same inputs, compared bitwise
        launch()
        be.sync()
        hand_run()
        same = bytes(np.ascontiguousarray(got())) == bytes(np.ascontiguousarray(want()))
        rows.append((name, times[0], times[1], h, same))

    # saxpy: y = a x + y, y reset before each run so the values stay put
    m = parse_module((ROOT / "examples" / "saxpy.sk").read_text(), "saxpy.sk")
    y0 = rng.standard_normal(n).astype(np.float32)
    yh = y0.copy()
    xd, yd, sd = dev(x), dev(y0), dev(np.zeros(n, np.float32))
    yg = view(yd)
    hand.saxpy.argtypes = [fp, fp, f32, i32]
    measure(f"saxpy 2^{o.log2n} f32",
            lambda: be.launch(m.kernel("saxpy"), {"x": xd, "y": yd, "a": a,  # type: ignore
                                                  "n": np.int32(n)}, n, 256,
                              check_races=False),
            lambda: hand.saxpy(x.ctypes.data, yh.ctypes.data, a, n),
            lambda: yg, lambda: yh, lambda: (yg.__setitem__(..., y0), yh.__setitem__(..., y0)))

    # scale -> relu fused
    m = parse_module((ROOT / "examples" / "scale_relu.sk").read_text(), "scale_relu.sk")
    fused, _ = fuse_launches([
        KernelLaunch(m.kernel("scale"), n, 256, {"x": "X", "tmp": "T", "a": a, "n": n}),
        KernelLaunch(m.kernel("relu"), n, 256, {"tmp": "T", "y": "Y", "n": n})])
    assert len(fused) == 1, "scale -> relu did not fuse"
    lc = fused[0]
    yhs = np.zeros(n, np.float32)
    ys = view(sd)
    arrays = {"X": xd, "Y": sd, "T": dev(np.zeros(n, np.float32))}
    th = np.zeros(n, np.float32)
    args = {k: (arrays[v] if isinstance(v, str) else np.asarray(v)[()])
            for k, v in lc.by_name.items()}
    hand.scale_relu.argtypes = [fp, fp, fp, f32, i32]
    measure(f"scale->relu fused 2^{o.log2n} f32",
            lambda: be.launch(lc.kernel, args, lc.threads, lc.block,  # type: ignore
                              check_races=False),
            lambda: hand.scale_relu(x.ctypes.data, th.ctypes.data, yhs.ctypes.data, a, n),
            lambda: ys, lambda: yhs)

    # one stage of advection-diffusion, fused + swap, rows numbering
    prog = variants(256)["fused+swap"]
    seen, _ = record_launches(be, prog, {"nx": o.size, "ny": o.size, "nt": 1})
    stages = [x for x in seen if "u_copy" in x[1] and "du" in x[1]]
    assert stages, f"no fused stage launch: {[x[0].name for x in seen]}"
    kernel, dargs, threads, block, status, kw = stages[-1]
    for k in ("u", "u_copy", "du"):
        assert k in dargs, f"the stage kernel has no argument {k}: {sorted(dargs)}"
    def arr(k: str) -> Any:
        return view(dargs[k])

    du0 = arr("du").copy()

    def sc(k: str) -> float:
        return float(dargs[k])

    # the swapped program's stages read u and write u_copy, then the other way round
    reads_copy = "div = (adv4(u_copy[" in be.compiled(kernel, False).emitted.source
    src, dst = ("u_copy", "u") if reads_copy else ("u", "u_copy")
    du_h, uc_h = du0.copy(), arr(dst).copy()
    hand.stage.argtypes = [fp, fp, fp, i32, i32, *[ctypes.c_double] * 9]
    sz = o.size

    def gen() -> None:
        be.launch(kernel, dargs, threads, block, status, check_races=False, **kw)

    def hnd() -> None:
        hand.stage(du_h.ctypes.data, arr(src).ctypes.data, uc_h.ctypes.data, sz, sz,
                   *(sc(k) for k in ("ca", "cb", "cx", "cy", "dt", "kx", "ky", "rdx", "rdy")))

    def reset_then(f: Callable[[], None], du: Any) -> Callable[[], None]:
        def run() -> None:  # du is updated in place: restore it so every run is the same
            du[...] = du0
            f()
        return run

    measure(f"advection stage {sz}^2 f64 (rows)", reset_then(gen, arr("du")),
            reset_then(hnd, du_h),
            lambda: (arr("du").tobytes() + arr(dst).tobytes()),
            lambda: (du_h.tobytes() + uc_h.tobytes()))
    _ = f64
    print(f"# CPU ms per launch, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"least of {o.repeat} x {o.reps}")
    print(f"{'stage':36} {'checked':>9} {'unchecked':>10} {'hand C':>8}  bitwise")
    for name, c, u, h, same in rows:
        print(f"{name:36} {c * 1e3:9.3f} {u * 1e3:10.3f} {h * 1e3:8.3f}  "
              f"{'same' if same else 'DIFFERENT'}")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
