"""The cost of bounds-checked device accesses (specs/codegen.md, CG-22, CG-24): each
workload run with checked and unchecked kernels in turn, on one backend; prints the
medians, the ratio checked / unchecked, and whether the two give bitwise the same arrays.

    .venv/bin/python benchmarks/bounds_checks.py --saxpy-log2 24 --size 512 --steps 40

Workloads: a guarded saxpy of ``2**saxpy-log2`` elements (the kernel alone: arrays stay on
the device, launch + sync per run), and the advection-diffusion example
(examples/advection_diffusion.sk, fused + swap, offloaded; its launches replayed back to
back on device buffers, as benchmarks/advection_diffusion.py's ``kernels`` figure).
Compilation happens before the timed runs; checked and unchecked alternate, so a machine
shared with other jobs slows both alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from advection_diffusion import record_launches, replay, variants  # noqa: E402

from sarek_py.host.interp import run_program  # noqa: E402
from sarek_py.ir.parser import parse_module  # noqa: E402
from sarek_py.runtime import Backend, get_backend  # noqa: E402

SAXPY = parse_module("""
kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i] + y[i]
""").kernel("saxpy")


def saxpy_run(backend: Backend, n: int, block: int) -> tuple[Callable[[], None],
                                                            Callable[[], bytes]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy = backend.allocate(x.shape, x.dtype), backend.allocate(y.shape, y.dtype)
    backend.copy_in(dx, x)

    def run() -> None:
        backend.copy_in(dy, y)
        backend.launch(SAXPY, {"x": dx, "y": dy, "a": np.float32(1.5), "n": np.int32(n)},
                       n, block)
        backend.sync()

    def result() -> bytes:
        out = np.empty_like(y)
        backend.copy_out(dy, out)
        return out.tobytes()

    return run, result


def timed(fn: Callable[[], None]) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def compare(backend: Backend, name: str, make: Callable[[], tuple[Callable[[], None],
                                                                  Callable[[], Any]]],
            repeat: int) -> bool:
    runs: dict[bool, tuple[Callable[[], None], Callable[[], Any]]] = {}
    backend.prove_launches = False  # "checked": every launch checked (no CG-72 proof)
    for checked in (True, False):
        backend.checked = checked
        runs[checked] = make()
        runs[checked][0]()  # compile, warm up
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(repeat):
        for checked in (True, False):
            backend.checked = checked
            times[checked].append(timed(runs[checked][0]))
    backend.checked = True
    backend.prove_launches = True
    same = runs[True][1]() == runs[False][1]()
    med = {c: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
           for c, ts in times.items()}
    best = {c: min(t[0] for t in ts) for c, ts in times.items()}
    print(f"  {name:<34} checked {med[True][0]:8.4f} s wall {med[True][1]:8.4f} s cpu | "
          f"unchecked {med[False][0]:8.4f} s wall {med[False][1]:8.4f} s cpu | "
          f"checked/unchecked wall x{med[True][0] / med[False][0]:.3f} "
          f"(best x{best[True] / best[False]:.3f}), cpu x{med[True][1] / med[False][1]:.3f}"
          f" | bitwise identical: {same}")
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--saxpy-log2", type=int, default=24)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    print(f"bounds checks, backend {backend.name}, block {args.block}, "
          f"median of {args.repeat} runs each")
    n = 2 ** args.saxpy_log2
    ok = compare(backend, f"saxpy 2^{args.saxpy_log2}",
                 lambda: saxpy_run(backend, n, args.block), args.repeat)
    prog = variants(args.block)["fused+swap"]
    preset = {"nx": args.size, "ny": args.size, "nt": args.steps}

    def advection() -> tuple[Callable[[], None], Callable[[], Any]]:
        run_program(prog, {"nx": 8, "ny": 8, "nt": 1}, device=backend, check_races=False)
        launches, u = record_launches(backend, prog, preset)
        return replay(backend, launches), lambda: u.tobytes()

    ok &= compare(backend, f"advection {args.size}^2 x {args.steps} (kernels)", advection,
                  args.repeat)

    def program() -> tuple[Callable[[], None], Callable[[], Any]]:
        out: list[bytes] = []

        def run() -> None:
            r = run_program(prog, preset, device=backend, check_races=False)
            out[:] = [r.array("u").tobytes()]

        return run, lambda: out[0]

    ok &= compare(backend, f"advection {args.size}^2 x {args.steps} (program)", program,
                  args.repeat)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
