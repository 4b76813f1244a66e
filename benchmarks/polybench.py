"""PolyBench/C 4.2 stencils as published (tests/corpus/polybench/*.sk), fused by the loop
passes (LF-50: boundary reads) against unfused, offloaded on one backend, side by side in
one run (issue 15's acceptance: the PolyBench ratios).

    .venv/bin/python benchmarks/polybench.py [--repeat 5] [--backend opencl]

Each program runs once first (kernel builds), then ``--repeat`` times alternately fused
and unfused; the fastest run of each counts. The final arrays are compared bitwise (the
script fails otherwise). The sizes are larger than PolyBench's MINI so that the kernels,
not the host, dominate.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from sarek_py.fusion.loops.fusion import fuse_program
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
    args = ap.parse_args()
    be = get_backend(args.backend)
    print(f"PolyBench stencils, backend {be.name}, best of {args.repeat} (ms, whole program)")
    print(f"  {'program':<10} {'sizes':<28} {'unfused':>9} {'fused':>9} {'fused/unfused':>14}"
          "  cost model")
    ok = True
    for name, sizes, out in PROGRAMS:
        text = (ROOT / "tests" / "corpus" / "polybench" / f"{name}.sk").read_text()
        for v, x in sizes.items():
            text = re.sub(rf"var {v} : i32 = \d+;", f"var {v} : i32 = {x};", text)
        p = parse_program(text)
        q, reports = fuse_program(p)
        costs = "; ".join(str(r).split("(", 1)[-1].rstrip(")") for r in reports if r.fused)
        unfused, fused = offload(p), offload(q)
        ra = run_program(unfused, device=be, check_races=False)
        rb = run_program(fused, device=be, check_races=False)
        same = ra.array(out).tobytes() == rb.array(out).tobytes()
        ok &= same
        ta, tb = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            run_program(unfused, device=be, check_races=False)
            ta.append(time.perf_counter() - t)
            t = time.perf_counter()
            run_program(fused, device=be, check_races=False)
            tb.append(time.perf_counter() - t)
        a, b = min(ta), min(tb)
        print(f"  {name:<10} {str(sizes):<28} {a * 1e3:9.1f} {b * 1e3:9.1f} {b / a:14.2f}"
              f"  {costs or 'nothing fused'}{'' if same else '  NOT BITWISE'}")
    print(f"  bitwise identical {'every' if ok else 'NOT every'} final array")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
