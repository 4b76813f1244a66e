"""Does a loop's point cost depend on its shape? (issue 15, H6; docs/performance.md "Cost
model agreement": the misses still open.)

    .venv/bin/python benchmarks/cost_shapes.py [--backend opencl] [--points 524288]
        [--repeat 5] [--steps 32] [--clock wall|cpu] [--rows-1d backend|on|off|both]

The cost table (benchmarks/calibrate.py) is measured on 1-D loops only. This times the
same work as 1-D and 2-D loops over about the same number of points: a copy, and a
three-point f64 stencil read along the last (contiguous) dimension and along the first.
A step's time is the difference of runs of T1 = 2 and T1 + ``--steps`` steps (best of
``--repeat`` interleaved runs), per point. Where the 2-D figures differ from the 1-D ones,
the 1-D rows misprice 2-D pairs (the model would need the rank, or the offsets' dimension,
among its kinds). ``--rows-1d``: a 1-D loop offloaded as the backend does
(``Backend.rows_1d``, OFF-17), as a rows kernel of one dimension, as a flat launch, or
both side by side. About 30 s.
"""

from __future__ import annotations

import argparse
import math
import time

from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

#: (name, rank, body): the loop bodies timed
CASES = (
    ("copy 1-D", 1, "y[i] <- x[i]"),
    ("copy 2-D", 2, "y[i, j] <- x[i, j]"),
    ("stencil 1-D", 1, "y[i] <- x[i - 1] * 0.5 + x[i] * 0.25 + x[i + 1] * 0.125"),
    ("stencil 2-D along the last dimension", 2,
     "y[i, j] <- x[i, j - 1] * 0.5 + x[i, j] * 0.25 + x[i, j + 1] * 0.125"),
    ("stencil 2-D along the first dimension", 2,
     "y[i, j] <- x[i - 1, j] * 0.5 + x[i, j] * 0.25 + x[i + 1, j] * 0.125"),
)


def program(rank: int, n: int, steps: int, body: str) -> Program:
    names = ("i", "j")[:rank]
    shape = ", ".join("0:" for _ in names)
    alloc = ", ".join("0:n - 1" for _ in names)
    full = ", ".join(f"{v} = 0 to n - 1" for v in names)
    inner = ", ".join(f"{v} = 2 to n - 3" for v in names)
    idx = ", ".join(names)
    return parse_program(
        f"program shapes\n  var n : i32 = {n};\n  var steps : i32 = {steps};\n"
        f"  var x : f64[{shape}] allocatable;\n  var y : f64[{shape}] allocatable;\nbegin\n"
        f"  allocate x[{alloc}]; allocate y[{alloc}];\n"
        f"  parallel for ({full}) do (x[{idx}] <- 1.0; y[{idx}] <- 0.0) done;\n"
        f"  for t = 1 to steps do\n    parallel for ({inner}) do {body} done\n  done\nend\n",
        "shapes.sk")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--points", type=int, default=1 << 19)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--rows-1d", choices=("backend", "on", "off", "both"), default="backend",
                    help="how a 1-D loop is offloaded (OFF-17): as the backend does, as rows, "
                         "flat, or both")
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    be = get_backend(args.backend)
    t1, t2 = 2, 2 + args.steps
    print(f"ns per point on {be.name}, about {args.points} points, clock {args.clock}")
    forms = {"backend": (be.rows_1d,), "on": (True,), "off": (False,),
             "both": (False, True)}[args.rows_1d]
    for (name, rank, body), rows_1d in [(c, r) for c in CASES
                                        for r in (forms if c[1] == 1 else (be.rows_1d,))]:
        if rank == 1 and args.rows_1d != "backend":
            name = f"{name} ({'rows' if rows_1d else 'flat'})"
        n = args.points if rank == 1 else math.isqrt(args.points)
        progs = {t: offload(program(rank, n, t, body), rows_1d=rows_1d) for t in (t1, t2)}
        for p in progs.values():
            run_program(p, device=be, check_races=False)  # builds
        best = dict.fromkeys(progs, math.inf)
        for _ in range(args.repeat):
            for t, p in progs.items():
                s = clock()
                run_program(p, device=be, check_races=False)
                best[t] = min(best[t], clock() - s)
        points = (n - 4) ** rank
        per_point = (best[t2] - best[t1]) / (t2 - t1) / points * 1e9
        print(f"  {name:<40} n={n:<7} {per_point:.3f} ns/point")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
