"""`make demo`: the main job of sarek_py in a few seconds.

Two kernels (scale, then relu) are launched one after the other, then fused in a
pipeline whose intermediate ``t`` is a pipeline temporary (``p.empty_like``): nobody
reads it afterwards, so the fused kernel keeps it in a register and never stores it. The
demo prints the fusion report, the fused kernel's OpenCL and CUDA source, checks that the
fused result is bit-for-bit the unfused one, and times both on the default backend
(PoCL's OpenCL on the CPU here) with device arrays, best of several runs.

    .venv/bin/python examples/demo.py [--n N] [--repeat R]

``SAREK_DEMO_N`` sets the default ``--n`` (the tests run the demo at a small size).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

import sarek_py
from sarek_py import Vec, f32, i32, kernel, pipeline
from sarek_py.frontend import global_thread_id
from sarek_py.ir.diagnostics import SarekError


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def relu(t: Vec[f32], y: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = max(t[i], 0.0)


def best_of(run: Callable[[], object], sync: Callable[[], None], repeat: int) -> float:
    """The fastest of ``repeat`` timed runs (seconds), after one untimed warm-up run."""
    run()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def positive(text: str) -> int:
    """A command-line count: an integer from 1 to 2^31 - 1 (the kernels' ``n`` is i32)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value < 1 << 31:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and 2^31 - 1")
    return value


def kernel_only(source: str, start: str) -> str:
    """The kernel function of ``source`` (the helpers before it are summarised)."""
    at = source.index(start)
    helpers = source[:at].count("\n")
    return (f"// ... {helpers} lines of helpers (bounds checks, exact max) ...\n"
            + source[at:].strip())


def section(title: str) -> None:
    print(f"\n== {title}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=positive, default=os.environ.get("SAREK_DEMO_N"),
                    help="elements per array, 1 to 2^31 - 1 (default $SAREK_DEMO_N, else 2^24; "
                         "2^16 on the interpreter)")
    ap.add_argument("--repeat", type=positive, default=7,
                    help="timed runs of each (best counts)")
    ap.add_argument("--backend", default=None,
                    help="opencl, cuda or interp (default: the default backend)")
    args = ap.parse_args(argv)
    try:
        return demo(args.backend, args.n, args.repeat)
    except SarekError as exc:
        print(f"demo.py: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"demo.py: error: out of memory for {args.n} elements", file=sys.stderr)
        return 1


def demo(backend_name: str | None, n: int | None, repeat: int) -> int:
    """Run the demo; exit status 0 when fused and unfused agree bit for bit (and with
    numpy: two runs that both wrote nothing would agree too)."""
    backend = sarek_py.get_backend("default" if backend_name is None else backend_name)
    on = backend.name
    if n is None:
        n = 1 << 16 if on == "interp" else 1 << 24
    block = 256
    print(f"sarek-py {sarek_py.__version__}: scale (t = 2x) then relu (y = max(t, 0)), "
          f"{n} f32 elements, backend {on}")
    if on == "interp":
        print("(the reference interpreter: no OpenCL or CUDA device here, so the times say "
              "nothing about fusion)")

    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    d_x = sarek_py.to_device(x, backend=on)         # copied to the device once
    d_t, d_y1, d_y2 = (sarek_py.empty_like(d_x) for _ in range(3))

    def unfused() -> None:                          # two launches, t goes through memory
        scale[n, block](d_x, d_t, 2.0, n, backend=on)
        relu[n, block](d_t, d_y1, n, backend=on)

    def fused() -> sarek_py.Pipeline:               # one launch, t never leaves the thread
        with pipeline(backend=on) as p:
            t = p.empty_like(d_x)                   # a temporary: device-only, not kept
            scale[n, block](d_x, t, 2.0, n)
            relu[n, block](t, d_y2, n)
        return p

    unfused()
    p = fused()
    backend.sync()
    section("fusion report")
    print(p.report())
    section("fused kernel, OpenCL C (FP_CONTRACT OFF: no fused multiply-add, exact)")
    print(kernel_only(p.source("opencl"), "__kernel void"))
    section("the same kernel, CUDA C (for nvcc --fmad=false)")
    print(kernel_only(p.source("cuda"), 'extern "C" __global__'))

    section("bitwise check")
    same = d_y1.get().tobytes() == d_y2.get().tobytes()
    print(f"fused == unfused, bit for bit (y, {d_y1.nbytes} bytes): "
          f"{'yes' if same else 'NO'}")
    expected = np.maximum(np.float32(2.0) * x, np.float32(0.0))
    right = d_y1.get().tobytes() == expected.tobytes()
    print(f"and both == numpy's maximum(2 * x, 0): {'yes' if right else 'NO'}")

    section(f"time on {on}, device arrays, best of {repeat}")
    t_unfused = best_of(unfused, backend.sync, repeat)
    t_fused = best_of(fused, backend.sync, repeat)
    print(f"unfused: {t_unfused * 1e3:8.2f} ms  (2 launches)")
    print(f"fused:   {t_fused * 1e3:8.2f} ms  (1 launch)")
    print(f"speed-up: {t_unfused / t_fused:.2f}x (unfused / fused)")
    return 0 if same and right else 1


if __name__ == "__main__":
    sys.exit(main())
