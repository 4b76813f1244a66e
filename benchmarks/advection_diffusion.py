"""The seed's workload: examples/programs/advection_diffusion.sk unfused, fused, and fused + swap,
offloaded and run with device-resident arrays on one backend; prints the times and the
ratios, and checks that the three give bitwise the same fields.

    .venv/bin/python benchmarks/advection_diffusion.py --size 512 --steps 40 --backend opencl

Each variant is run once at a small size first (kernel compilation), then timed
``--repeat`` times at the full size; the best time counts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from sarek_py.fusion.loop_fusion import FusionOptions, fuse_program
from sarek_py.launch.host_interp import run_program
from sarek_py.launch.offload import offload
from sarek_py.launch.program import Program
from sarek_py.launch.program_text import parse_program_file
from sarek_py.launch.runtime import get_backend

EXAMPLE = (Path(__file__).resolve().parent.parent / "examples" / "programs"
           / "advection_diffusion.sk")


def variants(block: int) -> dict[str, Program]:
    src = parse_program_file(EXAMPLE)
    fused, _ = fuse_program(src, FusionOptions(swap=False))
    swapped, _ = fuse_program(src, FusionOptions(swap=True))
    return {name: offload(p, block_size=block)
            for name, p in (("unfused", src), ("fused", fused), ("fused+swap", swapped))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    progs = variants(args.block)
    preset = {"nx": args.size, "ny": args.size, "nt": args.steps}
    for p in progs.values():  # compile every kernel
        run_program(p, {"nx": 8, "ny": 8, "nt": 1}, device=backend, check_races=False)
    times: dict[str, float] = {}
    fields: dict[str, Any] = {}
    for _ in range(args.repeat):
        for name, p in progs.items():
            t0 = time.perf_counter()
            r = run_program(p, preset, device=backend, check_races=False)
            dt = time.perf_counter() - t0
            times[name] = min(times.get(name, dt), dt)
            fields[name] = r.array("u")
    base = fields["unfused"].tobytes()
    same = all(f.tobytes() == base for f in fields.values())
    print(f"advection-diffusion {args.size}x{args.size}, {args.steps} steps, "
          f"backend {backend.name}, block {args.block}")
    for name, t in times.items():
        print(f"  {name:<11} {t:8.3f} s")
    print(f"  fusion:     x{times['unfused'] / times['fused']:.2f} (unfused / fused)")
    print(f"  swap:       x{times['fused'] / times['fused+swap']:.2f} (fused / fused+swap)")
    print(f"  total:      x{times['unfused'] / times['fused+swap']:.2f}")
    print(f"  bitwise identical u across the three: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
