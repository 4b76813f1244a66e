"""Reference interpreter vs numpy on saxpy with 2^20 threads (docs/performance.md).

Runs, in one process, numpy computing ``a*x + y`` in float32 and the interpreter running the
saxpy kernel (race checks on, the default, and off), in rounds of consecutive runs of
each, after checking that both give the same bits; prints the median wall-clock and CPU
time of each and their ratios. The target of issue 2
is a ratio of at most 20.

    .venv/bin/python benchmarks/interp_saxpy.py [--threads T] [--n N] [--repeat R]

``--n`` below the thread count makes the guard ``i < n`` divergent (a lane mask).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    If,
    Intrinsic,
    Kernel,
    Let,
    Read,
    Ref,
    Store,
    var,
)
from sarek_py.ir.types import Scalar, array


def saxpy_kernel() -> Kernel:
    """``let i = global_thread_id in if i < n then y[i] <- a * x[i] + y[i]``."""
    x = var("x", array(Scalar.F32))
    y = var("y", array(Scalar.F32))
    a = var("a", Scalar.F32)
    n = var("n", Scalar.I32)
    i = var("i", Scalar.I32)
    body = Let(
        i,
        Intrinsic("global_thread_id"),
        If(
            Binary(BinaryOp.LT, Ref(i), Ref(n)),
            Store(
                y,
                (Ref(i),),
                Binary(
                    BinaryOp.ADD,
                    Binary(BinaryOp.MUL, Ref(a), Read(x, (Ref(i),))),
                    Read(y, (Ref(i),)),
                ),
            ),
        ),
    )
    return Kernel("saxpy", (x, y, a, n), (), body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1 << 20)
    ap.add_argument("--n", type=int, default=None, help="elements (default: threads)")
    ap.add_argument("--repeat", type=int, default=30)
    opts = ap.parse_args(argv)
    threads = opts.threads
    n = threads if opts.n is None else opts.n
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)
    a = np.float32(2.5)
    kernel = saxpy_kernel()
    y = y0.copy()
    run_kernel(kernel, {"x": x, "y": y, "a": a, "n": n}, threads)
    if not np.array_equal(y, a * x + y0):
        print("MISMATCH: the interpreter and numpy disagree", file=sys.stderr)
        return 1
    # wall-clock and CPU time of each run: on a shared machine the CPU time is the fair
    # measure (a preempted run takes longer on the wall clock, not in CPU time)
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    runs: dict[str, dict[str, list[float]]] = {
        w: {c: [] for c in clocks} for w in ("numpy", "interp", "norace")
    }

    def timed(what: str, fn: Callable[[], object]) -> None:
        t0 = {c: f() for c, f in clocks.items()}
        fn()
        for c, f in clocks.items():
            runs[what][c].append(f() - t0[c])

    args = {"x": x, "y": y, "a": a, "n": n}  # y keeps being updated in place: y += a*x
    work: dict[str, Callable[[], object]] = {
        "numpy": lambda: a * x + y0,
        "interp": lambda: run_kernel(kernel, args, threads),
        "norace": lambda: run_kernel(kernel, args, threads, check_races=False),
    }
    # rounds of consecutive runs of each: the run right after a different kind of work
    # pays for the memory the previous one freed (a few ms on a virtual machine)
    rounds = 3
    for _ in range(rounds):
        for what, fn in work.items():
            for _ in range(max(1, opts.repeat // rounds)):
                timed(what, fn)
    med = {w: {c: statistics.median(v) for c, v in d.items()} for w, d in runs.items()}
    print(f"saxpy, {threads} threads, n = {n}, f32, median of "
          f"{len(runs['numpy']['wall'])} runs (wall / cpu)")
    for w, label in [("numpy", "numpy a*x+y"), ("interp", "interpreter"),
                     ("norace", "interpreter, check_races=False")]:
        print(f"{label:31}: {med[w]['wall'] * 1e3:8.3f} ms / {med[w]['cpu'] * 1e3:8.3f} ms")
    for c in clocks:
        ratio = med["interp"][c] / med["numpy"][c]
        print(f"ratio ({c:4})                   : {ratio:8.2f}x (target <= 20x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
