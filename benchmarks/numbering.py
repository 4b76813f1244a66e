"""How a launch's threads number a loop nest (OFF-10, OFF-11, TIL-10, TIL-11): flat,
rows and tiles, side by side in one run, on one backend, at contiguous extents chosen for
their padding: whole rows of 256 threads pad an extent of 512 by nothing, 300 by 71 %,
257 by 99 %, 130 by 97 %.

    .venv/bin/python benchmarks/numbering.py --repeat 5

The nest is a 2-D stencil (three reads of ``u`` around each point, one store); each extent
runs about 2**21 iterations per launch, 20 launches back to back per timing; the median of
``--repeat`` timings counts. ``rows`` is what the host picks under TIL-11 (the rows kernel
at these paddings); ``flat`` is OFF-1's numbering; ``tiles`` TIL-4's. The ratios are
flat / rows and flat / tiles (above 1: faster than flat). Results are checked bitwise
equal across the three.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from sarek_py.host.interp import run_program
from sarek_py.host.offload import NUMBERINGS, offload
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

SOURCE = """
program stencil
  var n : i32 = 64; var m : i32 = 64; var reps : i32 = 1;
  var w : f64[0:, 0:] allocatable; var u : f64[0:, 0:] allocatable;
begin
  allocate w[0:m - 1, 0:n - 1]; allocate u[0:m + 1, 0:n + 1];
  parallel for (j = 0 to m + 1, i = 0 to n + 1) do
    u[j, i] <- f64((j * 7 + i * 3) % 11) * 0.25
  done;
  for r = 1 to reps do
    parallel for (j = 0 to m - 1, i = 0 to n - 1) do
      w[j, i] <- (u[j + 1, i] + u[j + 1, i + 2]) / 3.0 - 0.5 * u[j, i + 1] + u[j + 2, i + 1]
    done
  done
end
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--extents", default="512,300,257,130")
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    src = parse_program(SOURCE)
    progs = {name: offload(src, numbering=name) for name in NUMBERINGS}
    print(f"numbering of a 2-D stencil nest, backend {backend.name}, block 256, "
          f"{args.launches} launches, median of {args.repeat} (ms per launch, CPU time)")
    print(f"  {'extent':>6} {'m':>6} {'padding':>8}" + "".join(f"{n:>9}" for n in progs)
          + "   flat/rows  flat/tiles")
    ok = True
    for n in (int(x) for x in args.extents.split(",")):
        m = max(1, 2**21 // n)
        preset: dict[str, Any] = {"n": n, "m": m, "reps": args.launches}
        times: dict[str, list[float]] = {name: [] for name in progs}
        outs = {}
        for name, p in progs.items():  # compile, and the result to compare
            outs[name] = run_program(p, {**preset, "reps": 1}, device=backend,
                                     check_races=False).array("w").tobytes()
        ok &= len(set(outs.values())) == 1
        for _ in range(args.repeat):
            for name, p in progs.items():
                c = time.process_time()
                run_program(p, preset, device=backend, check_races=False)
                times[name].append((time.process_time() - c) / args.launches * 1e3)
        med = {name: statistics.median(t) for name, t in times.items()}
        padded = -(-n // 256) * 256
        print(f"  {n:6d} {m:6d} {100 * (padded - n) / n:7.0f}%"
              + "".join(f"{med[name]:9.3f}" for name in progs)
              + f"   {med['flat'] / med['rows']:9.2f}  {med['flat'] / med['tiles']:10.2f}")
    print(f"  bitwise identical across the numberings: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
