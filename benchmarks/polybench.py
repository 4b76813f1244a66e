"""PolyBench/C 4.2 stencils as published (tests/corpus/polybench/*.sk), fused by the loop
passes (LF-50: boundary reads) against unfused, offloaded on one backend, side by side in
one run (issue 15's acceptance: the PolyBench ratios).

    .venv/bin/python benchmarks/polybench.py [--repeat 5] [--backend opencl] [--swap]

Each program runs once first (kernel builds), then ``--repeat`` times alternately fused
(forced: LF-13 with an unbounded threshold) and unfused; the fastest run of each counts.
The last column is the cost model's decision for the backend (LF-62: fused or refused,
with its prediction). The final arrays are compared bitwise (the
script fails otherwise). The sizes are larger than PolyBench's MINI so that the kernels,
not the host, dominate.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = (("jacobi-1d", {"n": 100000, "tsteps": 20}, "A"),
            ("jacobi-2d", {"n": 512, "tsteps": 20}, "A"),
            ("heat-3d", {"n": 64, "tsteps": 20}, "A"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--swap", action="store_true",
                    help="ping-pong the renamed arrays (PP-4) instead of copying them back")
    args = ap.parse_args()
    be = get_backend(args.backend)
    print(f"PolyBench stencils, backend {be.name}, best of {args.repeat}: ms of the whole "
          "program, and µs of one time step (the difference of runs of tsteps and 2 tsteps "
          "steps, what the cost model predicts)")
    print(f"  {'program':<10} {'sizes':<28} {'unfused':>8} {'fused':>8} {'ratio':>6} "
          f"{'step u':>8} {'step f':>8} {'ratio':>6}  model")
    ok = True
    for name, sizes, out in PROGRAMS:
        progs = {}
        for steps in (sizes["tsteps"], 2 * sizes["tsteps"]):
            text = (ROOT / "tests" / "corpus" / "polybench" / f"{name}.sk").read_text()
            for v, x in {**sizes, "tsteps": steps}.items():
                text = re.sub(rf"var {v} : i32 = \d+;", f"var {v} : i32 = {x};", text)
            p = parse_program(text)
            q, _ = fuse_program(p, FusionOptions(threshold=1e300, swap=args.swap,
                                                 backend=be.name))
            progs[False, steps], progs[True, steps] = offload(p), offload(q)
        _, model = fuse_program(p, FusionOptions(swap=args.swap, backend=be.name))
        costs = "; ".join(("fuses: " + str(r.plan.cost)) if r.plan is not None else
                          f"refuses: [{r.refusal.rule}] {r.refusal.reason}"
                          if r.refusal is not None else "" for r in model)
        t1 = sizes["tsteps"]
        ra = run_program(progs[False, t1], device=be, check_races=False)
        rb = run_program(progs[True, t1], device=be, check_races=False)
        same = ra.array(out).tobytes() == rb.array(out).tobytes()
        ok &= same
        best = dict.fromkeys(progs, float("inf"))
        for _ in range(args.repeat):
            for key, prog in progs.items():
                t = time.perf_counter()
                run_program(prog, device=be, check_races=False)
                best[key] = min(best[key], time.perf_counter() - t)
        a, b = best[False, t1], best[True, t1]
        sa, sb = ((best[f, 2 * t1] - best[f, t1]) / t1 for f in (False, True))
        print(f"  {name:<10} {str(sizes):<28} {a * 1e3:8.1f} {b * 1e3:8.1f} {b / a:6.2f} "
              f"{sa * 1e6:8.0f} {sb * 1e6:8.0f} {sb / sa:6.2f}"
              f"  {costs or 'nothing fused'}{'' if same else '  NOT BITWISE'}")
    print(f"  bitwise identical {'every' if ok else 'NOT every'} final array")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
