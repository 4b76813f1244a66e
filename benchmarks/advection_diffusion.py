"""The seed's workload: examples/advection_diffusion.sk unfused, fused, and fused + swap,
offloaded and run with device-resident arrays on one backend; prints the times and the
ratios, and checks that the three give bitwise the same fields.

    .venv/bin/python benchmarks/advection_diffusion.py --size 1024 --steps 20 --repeat 7

Each variant is run once at a small size first (kernel compilation), then ``--repeat`` times
at the full size, the variants in turn; the medians of wall-clock and CPU time count (CPU
time of the whole process, PoCL's worker threads included: the steadier figure when other
jobs share the machine), and the ratios of the fastest runs are printed too (a shared
machine only ever slows a run down). Two figures per variant:

* ``program``: the whole offloaded program run by the host interpreter (host loop, launch
  expressions, copies, launches, syncs): what a user of the program sees;
* ``kernels``: the same launches replayed back to back on the same device buffers, without
  the host interpreter (each launch still goes through ``Backend.launch``): the device's
  share. The launches of one program run are recorded, then replayed and synced.

The difference between the two is the host's cost (printed per launch; the ``--size 16``
run shows it alone).
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

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import NUMBERINGS, Numbering, offload
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program_file
from sarek_py.runtime import Backend, get_backend

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "advection_diffusion.sk"


def variants(block: int, numbering: Numbering = "rows") -> dict[str, Program]:
    src = parse_program_file(EXAMPLE)
    fused, _ = fuse_program(src, FusionOptions(swap=False))
    swapped, _ = fuse_program(src, FusionOptions(swap=True))
    return {name: offload(p, block_size=block, numbering=numbering)
            for name, p in (("unfused", src), ("fused", fused), ("fused+swap", swapped))}


def record_launches(backend: Backend, program: Program,
                    preset: dict[str, int]) -> tuple[list[tuple[Any, ...]], Any]:
    """Run ``program`` once, keeping every launch's arguments (kernel, device arguments,
    threads, block, status, and the keywords: a rows launch's grid, TIL-14); returns them
    and the final ``u``."""
    seen: list[tuple[Any, ...]] = []
    real = backend.launch

    def launch(kernel: Any, args: Any, threads: int, block: int = 256,
               status: Any = None, *, check_races: bool = True, **kw: Any) -> None:
        seen.append((kernel, dict(args), threads, block, status, kw))
        real(kernel, args, threads, block, status, check_races=check_races, **kw)

    backend.launch = launch  # type: ignore[method-assign]
    try:
        r = run_program(program, preset, device=backend, check_races=False)
    finally:
        del backend.launch  # back to the class's method
    return seen, r.array("u")


def replay(backend: Backend, launches: list[tuple[Any, ...]]) -> Callable[[], None]:
    def run() -> None:
        for kernel, args, threads, block, status, kw in launches:
            backend.launch(kernel, args, threads, block, status, check_races=False, **kw)
        backend.sync()

    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--numbering", choices=NUMBERINGS, default="rows",
                    help="how a launch's threads number a nest's iterations (OFF-10)")
    ap.add_argument("--unchecked", action="store_true",
                    help="kernels without bounds checks (CG-24), as measured before CG-22")
    args = ap.parse_args(argv)
    backend = get_backend(args.backend)
    backend.checked = not args.unchecked
    progs = variants(args.block, args.numbering)
    preset = {"nx": args.size, "ny": args.size, "nt": args.steps}
    for p in progs.values():  # compile every kernel
        run_program(p, {"nx": 8, "ny": 8, "nt": 1}, device=backend, check_races=False)
    fields: dict[str, Any] = {}
    replays: dict[str, Callable[[], None]] = {}
    counts: dict[str, int] = {}
    for name, p in progs.items():
        launches, fields[name] = record_launches(backend, p, preset)
        replays[name] = replay(backend, launches)
        counts[name] = len(launches)
    # (wall, cpu) seconds per run; cpu counts every thread of the process (PoCL's workers
    # too), so it is the steadier figure on a machine shared with other jobs
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in progs}
    kernel_times: dict[str, list[tuple[float, float]]] = {n: [] for n in progs}
    for _ in range(args.repeat):
        for name, p in progs.items():
            w, c = time.perf_counter(), time.process_time()
            r = run_program(p, preset, device=backend, check_races=False)
            times[name].append((time.perf_counter() - w, time.process_time() - c))
            if r.array("u").tobytes() != fields[name].tobytes():
                print(f"{name}: two runs differ", file=sys.stderr)
                return 1
            w, c = time.perf_counter(), time.process_time()
            replays[name]()
            kernel_times[name].append((time.perf_counter() - w, time.process_time() - c))
    base = fields["unfused"].tobytes()
    same = all(f.tobytes() == base for f in fields.values())

    def med(tab: dict[str, list[tuple[float, float]]], i: int) -> dict[str, float]:
        return {n: statistics.median(x[i] for x in t) for n, t in tab.items()}

    def best(tab: dict[str, list[tuple[float, float]]], i: int) -> dict[str, float]:
        return {n: min(x[i] for x in t) for n, t in tab.items()}

    cols = {"program wall": med(times, 0), "program cpu": med(times, 1),
            "kernels wall": med(kernel_times, 0), "kernels cpu": med(kernel_times, 1)}
    bests = {"program cpu": best(times, 1), "kernels cpu": best(kernel_times, 1)}
    print(f"advection-diffusion {args.size}x{args.size}, {args.steps} steps, "
          f"backend {backend.name}, block {args.block}, numbering {args.numbering}, "
          f"{'unchecked' if args.unchecked else 'bounds-checked'} accesses, "
          f"median of {args.repeat} (seconds)")
    print(f"  {'variant':<11} {'launches':>8}" + "".join(f"{c:>14}" for c in cols))
    for name in progs:
        print(f"  {name:<11} {counts[name]:8d}"
              + "".join(f"{tab[name]:14.3f}" for tab in cols.values()))
    for label, tab in cols.items():
        print(f"  {label:<12}: fusion x{tab['unfused'] / tab['fused']:.2f} (unfused / fused), "
              f"swap x{tab['fused'] / tab['fused+swap']:.2f} (fused / fused+swap), "
              f"total x{tab['unfused'] / tab['fused+swap']:.2f}")
    for label, tab in bests.items():
        print(f"  {label + ' best':<16}: fusion x{tab['unfused'] / tab['fused']:.2f}, "
              f"swap x{tab['fused'] / tab['fused+swap']:.2f}, "
              f"total x{tab['unfused'] / tab['fused+swap']:.2f} (fastest of the runs)")
    host = {n: (cols["program cpu"][n] - cols["kernels cpu"][n]) / counts[n] * 1e3
            for n in progs}
    print("  host cpu per launch (program - kernels): "
          + ", ".join(f"{n} {h:.2f} ms" for n, h in host.items()))
    print(f"  bitwise identical u across the three: {same}")
    # the example's dt keeps it within both explicit limits at every size (issue 15)
    finite = bool(np.isfinite(fields["unfused"]).all())
    peak = float(np.abs(fields["unfused"]).max()) if fields["unfused"].size else 0.0
    print(f"  u finite: {finite} (max |u| = {peak:.3g}; the initial peak is 1)")
    if not finite or peak > 1.0:
        print("the field blew up: the example's dt is outside a stability limit",
              file=sys.stderr)
        return 1
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
