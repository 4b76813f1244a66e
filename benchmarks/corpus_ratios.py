"""Fused / unfused time of the corpus pairs that fuse, at sizes where the work shows
(docs/corpus.md's ratio column, docs/performance.md).

The kernels are the corpus's own (``tests/corpus/*.sk``, faithful translations of
published kernels), launched as their originals are (rounded-up 1-D grids, 2-D 32x8
blocks) on sizes much larger than the corpus tests use. Each pair is fused by
``fuse_launches`` exactly as the tests do; buffers stay on the device; the fused and the
unfused launches are first checked bitwise identical, then timed interleaved (median of
``SAREK_BENCH_REPEAT`` runs, each followed by a sync) on OpenCL. The ratio is fused time /
unfused time (below 1: the fusion pays).

Run: ``.venv/bin/python benchmarks/corpus_ratios.py [--write]``; ``--write`` records the
figures in ``benchmarks/results/corpus_ratios.json``, which ``tests/corpus/table.py`` reads
into docs/corpus.md.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sarek_py.fusion.epilogue.sequence import fuse_launches  # noqa: E402
from sarek_py.ir.diagnostics import BackendUnavailable  # noqa: E402
from sarek_py.ir.host.launch import KernelLaunch, Launch  # noqa: E402
from sarek_py.ir.nodes import Kernel  # noqa: E402
from sarek_py.ir.parser import parse_module  # noqa: E402
from sarek_py.ir.typecheck import check_module  # noqa: E402
from sarek_py.runtime import get_backend  # noqa: E402

REPEAT = int(os.environ.get("SAREK_BENCH_REPEAT", "9"))
CORPUS = ROOT / "tests" / "corpus"
OUT = ROOT / "benchmarks" / "results" / "corpus_ratios.json"
F32 = np.float32


def kernel(file: str, name: str) -> Kernel:
    m = parse_module((CORPUS / file).read_text(), file)
    check_module(m)
    return m.kernel(name)


def cases() -> list[tuple[str, str, list[Launch], dict[str, tuple[int, ...]], str]]:
    """(producer, consumer, launches, buffers and their lengths, size in words)."""
    out = []
    n = 1 << 22
    g = (n + 255) // 256
    out.append(("vectorAdd", "biasRelu", [
        KernelLaunch(kernel("vectorAdd.sk", "vectorAdd"), (g,), (256,),
                     {"A": "A", "B": "B", "C": "C", "numElements": n}),
        KernelLaunch(kernel("biasRelu.sk", "biasRelu"), (g,), (256,),
                     {"C": "C", "bias": F32(0.25), "D": "D", "numElements": n})],
        {k: (n,) for k in "ABCD"}, "n = 2^22"))
    g2 = (n + 127) // 128
    out.append(("gelu_forward_kernel1", "residual_forward_kernel1", [
        KernelLaunch(kernel("gelu_forward.sk", "gelu_forward_kernel1"), (g2,), (128,),
                     {"out": "G", "inp": "X", "N": n}),
        KernelLaunch(kernel("residual_forward.sk", "residual_forward_kernel1"), (g2,), (128,),
                     {"out": "R", "inp1": "G", "inp2": "Y", "N": n})],
        {k: (n,) for k in ("G", "X", "R", "Y")}, "N = 2^22"))
    b, t, oc = 8, 256, 2048
    total = b * t * oc
    out.append(("add_bias", "gelu_forward_kernel1", [
        KernelLaunch(kernel("add_bias.sk", "add_bias"), ((total + 255) // 256,), (256,),
                     {"out": "O", "bias": "W", "B": b, "T": t, "OC": oc}),
        KernelLaunch(kernel("gelu_forward.sk", "gelu_forward_kernel1"),
                     ((total + 127) // 128,), (128,), {"out": "G", "inp": "O", "N": total})],
        {"O": (total,), "W": (oc,), "G": (total,)}, "B*T*OC = 2^22"))
    ni = nj = 2048
    grid = ((nj + 31) // 32, (ni + 7) // 8)
    out.append(("convolution2D_kernel", "threshold2D", [
        KernelLaunch(kernel("convolution2D.sk", "convolution2D_kernel"), grid, (32, 8),
                     {"ni": ni, "nj": nj, "A": "A", "B": "B"}),
        KernelLaunch(kernel("threshold2D.sk", "threshold2D"), grid, (32, 8),
                     {"ni": ni, "nj": nj, "B": "B", "T": "T", "level": F32(0.1)})],
        {k: (ni * nj,) for k in "ABT"}, "2048 x 2048"))
    nx = ny = 2048
    grid = ((ny + 31) // 32, (nx + 7) // 8)
    common = {"nx": nx, "ny": ny, "ex": "ex", "ey": "ey", "hz": "hz", "t": 1}
    out.append(("fdtd_step1_kernel", "fdtd_step2_kernel", [
        KernelLaunch(kernel("fdtd2d.sk", "fdtd_step1_kernel"), grid, (32, 8),
                     {**common, "_fict_": "fict"}),
        KernelLaunch(kernel("fdtd2d.sk", "fdtd_step2_kernel"), grid, (32, 8), common)],
        {"fict": (4,), "ex": (nx * ny,), "ey": (nx * ny,), "hz": (nx * ny,)},
        "2048 x 2048"))
    return out


def interleaved(fns: dict[str, Callable[[], object]]) -> dict[str, tuple[float, float]]:
    """Median wall-clock and CPU seconds of each function, run in turn (interleaved, so a
    burst of load from other jobs hits every variant alike); CPU time is the process's,
    PoCL's worker threads included."""
    for fn in fns.values():
        fn()
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(REPEAT):
        for k, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - w0)
            cpu[k].append(time.process_time() - c0)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fns}


def main(argv: list[str]) -> int:
    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        print(f"OpenCL is not available: {exc}")
        return 1
    device = str(getattr(be, "device_name", "opencl"))
    rows: list[dict[str, Any]] = []
    print(f"# corpus pairs, fused / unfused, OpenCL on {device}, median of {REPEAT}")
    for p, c, launches, sizes, what in cases():
        fused, report = fuse_launches(launches)
        if len(fused) != 1:
            print(f"{p} -> {c}: not fused here: {report[0]}")
            return 1
        rng = np.random.default_rng(1)
        dev = {}
        hosts = {}
        for name, shape in sizes.items():
            hosts[name] = rng.standard_normal(shape).astype(F32)
            dev[name] = be.allocate(shape, F32)

        def bind(lc: Launch, dev: dict[str, Any] = dev) -> dict[str, Any]:
            return {k: (dev[v] if isinstance(v, str) else np.asarray(v)[()])
                    for k, v in lc.by_name.items()}

        def runner(ls: list[Launch]) -> Callable[[], None]:
            bound = [(lc, bind(lc), lc.shape()) for lc in ls]

            def go() -> None:
                for lc, args, shape in bound:
                    if shape is None:  # by thread count and block size
                        threads, block = lc.counts()
                        be.launch(lc.kernel, args, threads, block, check_races=False)
                        continue
                    grid, bshape = shape
                    threads = int(np.prod(grid)) * int(np.prod(bshape))
                    be.launch(lc.kernel, args, threads, int(np.prod(bshape)),
                              check_races=False, grid=grid, block_shape=bshape)
                be.sync()
            return go

        outs = []
        for ls in (launches, fused):
            for name in sizes:
                be.copy_in(dev[name], hosts[name])
            runner(ls)()
            got = {}
            for name, shape in sizes.items():
                got[name] = np.empty(shape, F32)
                be.copy_out(dev[name], got[name])
            outs.append(got)
        same = all(outs[0][k].tobytes() == outs[1][k].tobytes() for k in sizes)
        t = interleaved({"unfused": runner(launches), "fused": runner(fused)})
        ratio = t["fused"][0] / t["unfused"][0]
        cpu_ratio = t["fused"][1] / t["unfused"][1]
        print(f"{p} -> {c} ({what}): unfused {t['unfused'][0] * 1e3:.2f} ms "
              f"(cpu {t['unfused'][1] * 1e3:.2f}), fused {t['fused'][0] * 1e3:.2f} ms "
              f"(cpu {t['fused'][1] * 1e3:.2f}), ratio {ratio:.2f} wall, {cpu_ratio:.2f} cpu, "
              f"bitwise equal: {same}")
        if not same:
            return 1
        rows.append({"producer": p, "consumer": c, "size": what,
                     "unfused_ms": round(t["unfused"][0] * 1e3, 3),
                     "fused_ms": round(t["fused"][0] * 1e3, 3), "ratio": round(ratio, 2),
                     "cpu_ratio": round(cpu_ratio, 2)})
    if "--write" in argv:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps({
            "command": ".venv/bin/python benchmarks/corpus_ratios.py --write",
            "device": device, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "date": time.strftime("%Y-%m-%d"), "repeat": REPEAT, "rows": rows},
            indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
