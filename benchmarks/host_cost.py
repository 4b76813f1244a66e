"""The host's cost per launch of an offloaded host program on the c backend (specs/offload.md
OFF-13 … OFF-15, specs/native.md NAT-60 … NAT-62): examples/advection_diffusion.sk fused +
swap (the program of ``benchmarks/peers.py``), whole program, and the time spent inside the
kernels' C functions.

    .venv/bin/python benchmarks/host_cost.py --size 512 --steps 40 --repeat 5

Each run of the whole program is timed (wall clock); every kernel's C function is wrapped
by a timer, so the sum of the kernels' times is measured in the same run. The host's cost is
the difference: the host interpreter's statements, the launch sites, residency, checks and
argument conversion. The ctypes call itself (its conversion of the C arguments by their
``argtypes``, and the timer's ~0.3 µs) is inside the timed call: it counts as kernel time. ``--size 16`` shows the host's cost nearly alone. Medians and the fastest run
are printed; a machine shared with other jobs only slows a run down.

A second set of runs (``host only``) calls no kernel at all (each C function is replaced by
one that returns at once) and times the main thread's CPU time (``time.thread_time``): the
host's cost alone, which other jobs on a shared machine do not inflate (the fields are not
computed; the program's control flow does not depend on them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from advection_diffusion import variants  # noqa: E402

from sarek_py.host.interp import run_program  # noqa: E402
from sarek_py.runtime import get_backend  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--variant", default="fused+swap",
                    choices=("unfused", "fused", "fused+swap"))
    args = ap.parse_args(argv)
    backend = get_backend("c")
    program = variants(256)[args.variant]
    preset = {"nx": args.size, "ny": args.size, "nt": args.steps}
    run_program(program, {"nx": 8, "ny": 8, "nt": 1}, device=backend, check_races=False)
    spent = [0.0]
    cpu = [0.0]
    call_kernels = [True]

    def timed(fn: Any) -> Any:
        def call(*a: Any) -> None:
            if call_kernels[0]:
                t = time.perf_counter()
                fn(*a)
                spent[0] += time.perf_counter() - t
        return call

    for k in program.kernels:  # both builds of each kernel, before any run prepares them
        if backend.refusal(k) is None:
            for checked in (True, False):
                c = backend.compiled(k, checked)
                object.__setattr__(c, "function", timed(c.function))

    def runs() -> list[tuple[float, float, int]]:
        rows: list[tuple[float, float, int]] = []
        for _ in range(args.repeat):
            backend.stats.reset()
            spent[0] = 0.0
            t, c = time.perf_counter(), time.thread_time()
            run_program(program, preset, device=backend, check_races=False)
            wall = time.perf_counter() - t
            cpu[0] = time.thread_time() - c
            rows.append((wall if call_kernels[0] else cpu[0], spent[0], backend.stats.launches))
        return rows

    rows = runs()
    call_kernels[0] = False
    host_only = runs()
    call_kernels[0] = True
    launches = rows[0][2]

    def report(label: str, wall: float, kernels: float) -> None:
        host = wall - kernels
        print(f"  {label:<7} program {wall * 1e3:8.2f} ms  kernels {kernels * 1e3:8.2f} ms  "
              f"host {host * 1e3:8.2f} ms = {host / launches * 1e3:.4f} ms per launch")

    print(f"advection-diffusion {args.variant} on c, {args.size}^2 x {args.steps} steps, "
          f"{launches} launches, {args.repeat} runs")
    report("median", statistics.median(r[0] for r in rows),
           statistics.median(r[1] for r in rows))
    best = min(rows, key=lambda r: r[0] - r[1])
    report("best", best[0], best[1])
    print("  host only (no kernel called; the main thread's CPU time, which other jobs "
          "do not inflate):")
    report("median", statistics.median(r[0] for r in host_only), 0.0)
    report("best", min(r[0] for r in host_only), 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
