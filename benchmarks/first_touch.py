"""What huge pages save a whole program on the c backend (specs/native.md NAT-78), side by
side in one run: examples/advection_diffusion.sk fused + swap at ``--size`` squared, with
``nt`` = 0, 1 and ``--steps`` time steps, its large arrays allocated on huge pages (the
default) and on 4 KiB pages (``np.zeros``: the huge-page advice switched off), runs of the
two interleaved.

    .venv/bin/python benchmarks/first_touch.py              # 512^2, 40 steps, best of 7

A program run allocates its arrays and frees them when its result is dropped: each
kernel that touches an array first maps its pages. The difference between the two rows is
the page faults of those first touches (and, with nt = 0, the initial field's array).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from advection_diffusion import variants  # noqa: E402

from sarek_py.host.interp import run_program  # noqa: E402
from sarek_py.runtime import get_backend, hostmem  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    backend = get_backend("c")
    program = variants(256)["fused+swap"]
    run_program(program, {"nx": 8, "ny": 8, "nt": 1}, device=backend, check_races=False)
    real = hostmem.advice
    plain = lambda: None  # noqa: E731 - no advice: hostmem.zeros is np.zeros
    steps = (0, 1, args.steps)
    best = {(huge, nt): float("inf") for huge in (True, False) for nt in steps}
    try:
        for _ in range(args.repeat):
            for nt in steps:
                for huge in (True, False):
                    hostmem.advice = real if huge else plain  # type: ignore[assignment]
                    preset = {"nx": args.size, "ny": args.size, "nt": nt}
                    t0 = time.perf_counter()
                    run_program(program, preset, device=backend, check_races=False)
                    best[huge, nt] = min(best[huge, nt], time.perf_counter() - t0)
    finally:
        hostmem.advice = real  # type: ignore[assignment]
    print(f"advection fused+swap on c, {args.size}^2, whole program, best of {args.repeat} "
          f"(ms); huge-page advice {'available' if real() is not None else 'NOT available'}")
    print("  " + f"{'':26s}" + "".join(f"{f'nt = {nt}':>12s}" for nt in steps))
    for huge, name in ((False, "4 KiB pages (np.zeros)"), (True, "huge pages (NAT-78)")):
        print(f"  {name:26s}" + "".join(f"{best[huge, nt] * 1e3:12.2f}" for nt in steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
