"""Epilogue fusion on a memory-bound pair: unfused vs fused OpenCL time (docs/performance.md).

The pair is examples/scale_relu.sk: ``scale`` writes ``tmp = a * x``, ``relu`` reads
``tmp`` at the same index and writes ``y = tmp > 0 ? tmp : 0``, on 2^24 f32 (override with
``SAREK_BENCH_LOG2N``). Unfused, the launches move 16 bytes an element (read x, write tmp;
read tmp, write y); fused, 12 (the fused kernel still writes tmp, but reads it back from
its own cache line), so the byte-traffic bound of fused/unfused is 0.75. The same
computation in numpy (two passes, like the unfused kernels) and numexpr (two passes and
one) is timed next to it. Times are medians of repeated runs, device buffers resident,
each launch sequence followed by a sync; outputs of fused and unfused are checked to be
bitwise identical.

Run: ``.venv/bin/python benchmarks/epilogue.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sarek_py.fusion.epilogue.sequence import fuse_launches  # noqa: E402
from sarek_py.ir.diagnostics import BackendUnavailable  # noqa: E402
from sarek_py.ir.host.launch import KernelLaunch  # noqa: E402
from sarek_py.ir.parser import parse_module  # noqa: E402
from sarek_py.runtime import get_backend  # noqa: E402

REPEAT = int(os.environ.get("SAREK_BENCH_REPEAT", "15"))


def interleaved(fns: dict[str, Callable[[], object]],
                repeat: int = REPEAT) -> dict[str, tuple[float, float]]:
    """Median wall-clock and CPU seconds of each function, run in turn ``repeat`` times
    (interleaved, so that a burst of load from other jobs hits every variant alike). CPU
    time is the process's, PoCL's worker threads included."""
    for fn in fns.values():
        fn()  # warm up (compilation, first touch)
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - w0)
            cpu[k].append(time.process_time() - c0)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fns}


def main() -> int:
    log2n = int(os.environ.get("SAREK_BENCH_LOG2N", "24"))
    n = 1 << log2n
    block = 256
    m = parse_module((ROOT / "examples" / "scale_relu.sk").read_text(), "scale_relu.sk")
    scale, relu = m.kernel("scale"), m.kernel("relu")
    a = np.float32(1.5)
    unfused = [
        KernelLaunch(scale, n, block, {"x": "X", "tmp": "T", "a": a, "n": n}),
        KernelLaunch(relu, n, block, {"tmp": "T", "y": "Y", "n": n}),
    ]
    fused, report = fuse_launches(unfused)
    print(f"# epilogue fusion, scale -> relu, n = 2^{log2n} f32")
    for d in report:
        print(f"# {d}")
    if len(fused) != 1:
        print("fusion refused: nothing to compare")
        return 1
    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        print(f"OpenCL is not available: {exc}")
        return 1
    print(f"# device: {getattr(be, 'device_name', 'opencl')}")

    rng = np.random.default_rng(0)
    host = {"X": rng.standard_normal(n).astype(np.float32)}
    dev = {}
    for name in ("X", "T", "Y"):
        dev[name] = be.allocate((n,), np.float32)
    be.copy_in(dev["X"], host["X"])

    def bind(lc: KernelLaunch) -> dict[str, object]:
        return {k: (dev[v] if isinstance(v, str) else np.asarray(v)[()])
                for k, v in lc.by_name.items()}

    def run(launches: list[KernelLaunch]) -> Callable[[], None]:
        bound = [(lc, bind(lc)) for lc in launches]

        def go() -> None:
            for lc, args in bound:
                be.launch(lc.kernel, args, lc.threads, lc.block,  # type: ignore[arg-type]
                          check_races=False)
            be.sync()

        return go

    outs = {}
    for label, launches in (("unfused", unfused), ("fused", fused)):
        for name in ("T", "Y"):
            be.fill(dev[name], 0xFF)  # NaN poison
        run(launches)()
        outs[label] = [np.empty(n, np.float32) for _ in range(2)]
        be.copy_out(dev["T"], outs[label][0])
        be.copy_out(dev["Y"], outs[label][1])
    same = all(u.tobytes() == f.tobytes() for u, f in zip(outs["unfused"], outs["fused"],
                                                          strict=True))

    x = host["X"]
    tmp = np.empty_like(x)
    y = np.empty_like(x)
    zero = np.float32(0)

    def numpy_two_pass() -> None:
        np.multiply(a, x, out=tmp)
        np.copyto(y, np.where(tmp > zero, tmp, zero))

    fns: dict[str, Callable[[], object]] = {
        "OpenCL unfused (2 launches)": run(unfused),
        "OpenCL fused (1 launch)": run(fused),
        "numpy, two passes": numpy_two_pass,
    }
    traffic = {"OpenCL unfused (2 launches)": 16 * n, "OpenCL fused (1 launch)": 12 * n,
               "numpy, two passes": 16 * n}
    try:
        import numexpr as ne

        env = {"a": a, "x": x, "tmp": tmp, "zero": zero}

        def ne_two() -> None:
            ne.evaluate("a * x", local_dict=env, out=tmp)
            ne.evaluate("where(tmp > zero, tmp, zero)", local_dict=env, out=y)

        def ne_one() -> None:
            ne.evaluate("where(a * x > zero, a * x, zero)", local_dict=env, out=y)

        cores = ne.detect_number_of_cores()
        fns[f"numexpr, two passes ({cores} threads)"] = ne_two
        fns[f"numexpr, one pass ({cores} threads)"] = ne_one
        traffic[f"numexpr, two passes ({cores} threads)"] = 16 * n
        traffic[f"numexpr, one pass ({cores} threads)"] = 8 * n
    except ImportError:
        print("# numexpr is not installed")
    times = interleaved(fns)
    numpy_two_pass()
    numpy_same = y.tobytes() == outs["fused"][1].tobytes()

    print(f"{'variant':36s} {'wall ms':>8s} {'cpu ms':>8s} {'MB moved':>9s} {'GB/s':>6s}")
    for label, (w, c) in times.items():
        nbytes = traffic[label]
        print(f"{label:36s} {w * 1e3:8.1f} {c * 1e3:8.1f} {nbytes / 1e6:9.1f} "
              f"{nbytes / 1e9 / w:6.2f}")
    (wu, cu), (wf, cf) = times["OpenCL unfused (2 launches)"], times["OpenCL fused (1 launch)"]
    print(f"fused/unfused: wall {wf / wu:.3f}, cpu {cf / cu:.3f}   "
          f"byte-traffic bound: {12 / 16:.3f}   target: <= 0.80")
    print(f"fused output bitwise equal to unfused: {same}; "
          f"numpy output bitwise equal: {numpy_same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
