"""OpenMP's idle threads on the c backend: passive (NAT-19, the default) against a short
spin (``GOMP_SPINCOUNT``), quiet and beside one busy process, side by side in one run.

    .venv/bin/python benchmarks/omp_wait.py                 # 64^2 and 256^2 and 512^2, 40 steps

Each setting runs examples/advection_diffusion.sk fused + swap (122 launches) in a fresh
process (the OpenMP runtime reads its settings when it loads), 7 times; best and median
are printed. ``--busy`` runs the same with a Python busy loop on one core beside it: the
case NAT-19 guards against (a spinning thread the system deschedules holds up a launch).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import sys, time
sys.path.insert(0, {here!r})
from advection_diffusion import variants
from sarek_py.host.interp import run_program
from sarek_py.runtime import get_backend
b = get_backend("c")
p = variants(256)["fused+swap"]
run_program(p, {{"nx": 8, "ny": 8, "nt": 1}}, device=b, check_races=False)
ts = []
for _ in range(7):
    t0 = time.perf_counter()
    run_program(p, {{"nx": {n}, "ny": {n}, "nt": {steps}}}, device=b, check_races=False)
    ts.append(time.perf_counter() - t0)
ts.sort()
print(f"{{ts[0] * 1e3:.2f}} {{ts[3] * 1e3:.2f}}")
"""


def run(n: int, steps: int, spin: str | None) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    if spin is not None:
        env["GOMP_SPINCOUNT"] = spin
    out = subprocess.run([sys.executable, "-c", CHILD.format(here=str(HERE), n=n, steps=steps)],
                         capture_output=True, text=True, env=env, check=True)
    best, median = out.stdout.split()
    return float(best), float(median)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="64,256,512")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--spin", default="30000", help="the GOMP_SPINCOUNT compared")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"advection fused+swap on c, {args.steps} steps, ms (best / median of 7)")
    for busy in (False, True):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
        try:
            time.sleep(0.2)
            for n in sizes:
                cells = []
                for spin in (None, args.spin):
                    best, median = run(n, args.steps, spin)
                    cells.append(f"{'passive' if spin is None else 'spin ' + spin}: "
                                 f"{best:7.2f} / {median:7.2f}")
                print(f"  {'busy' if busy else 'quiet'} {n:4d}^2   " + "   ".join(cells))
        finally:
            if hog is not None:
                hog.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
