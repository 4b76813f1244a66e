"""Launch overhead and tiling, in one run (docs/performance.md, "Launches and tiling").

1. saxpy on 2**24 f32 elements: the OpenCL backend's time (kernel only, data resident on
   the device; and the whole ``run_kernel`` round trip with copies) against numpy's
   ``y = a*x + y`` on the same arrays;
2. what one launch costs the host: 1000 launches of saxpy on 256 resident elements, one
   sync at the end (``Backend.launch``: cached kernel, argument binding, enqueue), and
   ``run_kernel`` on 256 host elements (copies in and out, sync) per call;
3. one Jacobi step of a 2-D 5-point stencil (a loop nest made into a kernel by
   :mod:`sarek_py.host.tiling`), launched tiled and flat: points per second each way.

Usage: ``python benchmarks/launch_overhead.py [--quick] [--backend opencl|cuda]``. Times are
the median of several runs after a warm-up; ratios are within this one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sarek_py.host.tiling import Loop, Nest, tile_nest, tiled_args
from sarek_py.ir.nodes import Binary, BinaryOp, Const, Expr, Read, Ref, Store, var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import Scalar, array
from sarek_py.runtime import Backend, DeviceBuffer, get_backend

SAXPY = parse_module("""
kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i] + y[i]
""").kernel("saxpy")


def median_time(f: Callable[[], Any], repeat: int) -> float:
    f()  # warm-up (builds the program, touches the pages)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_saxpy(be: Backend, n: int, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(1.5)
    dx, dy = be.allocate((n,), np.float32), be.allocate((n,), np.float32)
    be.copy_in(dx, x)
    be.copy_in(dy, y)
    args: dict[str, DeviceBuffer | np.generic] = {"x": dx, "y": dy, "a": a, "n": np.int32(n)}

    def device() -> None:
        be.launch(SAXPY, args, n, 256)
        be.sync()

    y2 = y.copy()

    def round_trip() -> None:
        be.run_kernel(SAXPY, {"x": x, "y": y2, "a": a, "n": n}, n, 256)

    tmp = np.empty_like(y)
    y3 = y.copy()

    def numpy_saxpy() -> None:
        np.multiply(x, a, out=tmp)
        np.add(tmp, y3, out=y3)

    return {"kernel": median_time(device, repeat), "round_trip": median_time(round_trip, repeat),
            "numpy": median_time(numpy_saxpy, repeat)}


def bench_launch_cost(be: Backend, launches: int, repeat: int) -> dict[str, float]:
    """Seconds per launch of a tiny saxpy: back to back on resident buffers, and as a whole
    ``run_kernel`` round trip."""
    n = 256
    x = np.arange(n, dtype=np.float32)
    dx, dy = be.allocate((n,), np.float32), be.allocate((n,), np.float32)
    be.copy_in(dx, x)
    be.copy_in(dy, x)
    args: dict[str, DeviceBuffer | np.generic] = {"x": dx, "y": dy, "a": np.float32(0.5),
                                                 "n": np.int32(n)}

    def burst() -> None:
        for _ in range(launches):
            be.launch(SAXPY, args, n, 256)
        be.sync()

    y = x.copy()

    def trips() -> None:
        for _ in range(launches // 10):
            be.run_kernel(SAXPY, {"x": x, "y": y, "a": 0.5, "n": n}, n, 256)

    return {"launch": median_time(burst, repeat) / launches,
            "run_kernel": median_time(trips, repeat) / (launches // 10)}


def stencil_nest() -> Nest:
    src, dst = var("src", array(Scalar.F32, 2)), var("dst", array(Scalar.F32, 2))
    n, m = var("n", Scalar.I32), var("m", Scalar.I32)
    i, j = var("i", Scalar.I32), var("j", Scalar.I32)
    one = Const(1, Scalar.I32)

    def at(di: int, dj: int) -> Read:
        return Read(src, (Binary(BinaryOp.ADD, Ref(i), Const(di, Scalar.I32)),
                          Binary(BinaryOp.ADD, Ref(j), Const(dj, Scalar.I32))))

    total: Expr = at(0, 0)
    for d in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        total = Binary(BinaryOp.ADD, total, at(*d))
    body = Store(dst, (Ref(i), Ref(j)), Binary(BinaryOp.MUL, Const(0.2, Scalar.F32), total))
    loops = (Loop(i, one, Binary(BinaryOp.SUB, Ref(n), Const(2, Scalar.I32))),
             Loop(j, one, Binary(BinaryOp.SUB, Ref(m), Const(2, Scalar.I32))))
    return Nest("jacobi", (src, dst, n, m), loops, body)


def bench_stencil(be: Backend, side: int, repeat: int) -> dict[str, Any]:
    tk = tile_nest(stencil_nest())
    src = np.random.default_rng(1).standard_normal((side, side)).astype(np.float32)
    dsrc, ddst = be.allocate(src.shape, np.float32), be.allocate(src.shape, np.float32)
    be.copy_in(dsrc, src)
    be.copy_in(ddst, np.zeros_like(src))
    out: dict[str, Any] = {"points": (side - 2) ** 2}
    results = {}
    for label, force in (("tiled", True), ("flat", False)):
        host_args, choice = tiled_args(tk, {"src": src, "dst": src, "n": side, "m": side},
                                       256, force)
        dev_args = {"src": dsrc, "dst": ddst, "n": np.int32(side), "m": np.int32(side),
                    tk.flat_param: np.bool_(host_args[tk.flat_param])}

        def run(ch: Any = choice, da: Any = dev_args) -> None:
            be.launch(tk.kernel, da, ch.thread_count, ch.block)
            be.sync()

        out[label] = median_time(run, repeat)
        result = np.empty_like(src)
        be.copy_out(ddst, result)
        results[label] = result
        out[f"{label}_threads"] = choice.thread_count
    assert results["tiled"].tobytes() == results["flat"].tobytes()
    out["chosen"] = "tiled" if tiled_args(tk, {"src": src, "dst": src, "n": side, "m": side},
                                          256)[1].tiled else "flat"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    ap.add_argument("--backend", default="opencl", help="opencl (default) or cuda")
    args = ap.parse_args(argv)
    be = get_backend(args.backend)
    n = 2**16 if args.quick else 2**24
    side = 256 if args.quick else 4096
    repeat = 3 if args.quick else 7
    name = getattr(be, "device_name", be.name)
    print(f"backend: {be.name} ({name})")
    s = bench_saxpy(be, n, repeat)
    print(f"saxpy, n = 2**{n.bit_length() - 1} f32 elements (median of {repeat}):")
    print(f"  {be.name} kernel (data on the device):  {s['kernel'] * 1e3:9.2f} ms  "
          f"({3 * 4 * n / s['kernel'] / 1e9:6.2f} GB/s)")
    print(f"  {be.name} run_kernel (copies in/out):  {s['round_trip'] * 1e3:9.2f} ms")
    print(f"  numpy a*x + y:                     {s['numpy'] * 1e3:9.2f} ms  "
          f"({3 * 4 * n / s['numpy'] / 1e9:6.2f} GB/s)")
    print(f"  ratio kernel / numpy: {s['kernel'] / s['numpy']:.2f}; "
          f"round trip / numpy: {s['round_trip'] / s['numpy']:.2f}")
    c = bench_launch_cost(be, 1000, repeat)
    print(f"one launch of saxpy on 256 elements (median of {repeat} bursts):")
    print(f"  launch (resident, 1000 back to back, one sync): {c['launch'] * 1e6:8.1f} us")
    print(f"  run_kernel (copy in, launch, sync, copy out):    {c['run_kernel'] * 1e6:8.1f} us")
    st = bench_stencil(be, side, repeat)
    pts = st["points"]
    print(f"2-D 5-point stencil, {side} x {side} (median of {repeat}); "
          f"the host would choose: {st['chosen']}")
    for label in ("tiled", "flat"):
        print(f"  {label:5s}: {st[label] * 1e3:9.2f} ms  {pts / st[label] / 1e6:9.1f} Mpoints/s"
              f"  ({st[f'{label}_threads']} threads)")
    print(f"  ratio tiled / flat time: {st['tiled'] / st['flat']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
