"""Calibrate the loop-fusion cost table for one backend (specs/loop-fusion.md, LF-60, LF-67).

    .venv/bin/python benchmarks/calibrate.py [--backend opencl] [--points 524288]
        [--repeat 5] [--steps 24] [--clock wall|cpu] [--write]

A few micro loops -- a copy, streams, a stencil's loads, chains of f32/f64 operations,
divisions, transcendentals, integer operations and selects -- each run as a host program
(``for t = 1 to T do parallel for … done``) offloaded to the backend; the time of one
step is the difference of a run of T2 and of T1 steps (build and transfers cancel), the
time of a point the difference of a step over N and over N/4 points (the launch cancels).
A loop of a few points gives the launch cost (the median of three runs of it, at the
start, the middle and the end: LF-119); the per-point costs are the roofline fit
(:func:`fit_roofline`, LF-77: each loop's point costs the larger of its bytes' time and its
compute's time, LF-75) of the loops' per-point times on their counts
(:func:`sarek_py.fusion.loops.cost_counts.count`, the counts the model prices). The
``shift`` (a read at an offset in a 2-D array's last dimension, LF-95) is fitted apart from
2-D stencils and their twins reading the same offsets in the first dimension
(:data:`LOOPS_2D`, :func:`fit_shift`, LF-96). Prints
the row and how well it fits each loop; ``--write`` stores it in
``sarek_py/fusion/loops/cost_table.py`` (the other backends' rows kept), and refuses to
when a loop measured zero or the fit misses a loop by more than half (a busy machine).
``--clock cpu`` times by the process's CPU time (PoCL's worker threads included), steadier
on a shared machine; ``benchmarks/cost_sweep.py`` must then use ``--clock cpu`` too. The
default domain, 2^19 points, is the sweep's largest (LF-80): the table holds for loops
whose arrays stay in the last-level cache. About 1 to 2 minutes on 2
cores with ``--steps 64``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sarek_py.fusion.loops.cost_counts import KINDS, count
from sarek_py.fusion.loops.cost_table import SOURCES, TABLE
from sarek_py.fusion.loops.predict import ND
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent
#: the clock runs are timed with: wall (``time.perf_counter``) or the process's CPU time,
#: PoCL's worker threads included (``--clock cpu``: steadier on a shared machine)
CLOCK = [time.perf_counter]
TABLE_FILE = ROOT / "sarek_py" / "fusion" / "loops" / "cost_table.py"


def _chain(start: str, step: str, k: int) -> str:
    e = start
    for j in range(k):
        e = step.format(e=e, j=j)
    return e


def _tree(leaves: list[str]) -> str:
    """A balanced sum of ``leaves`` (independent operations, as in stencil code, not a
    chain that only measures latency)."""
    while len(leaves) > 1:
        leaves = [f"({x} + {y})" for x, y in zip(leaves[::2], leaves[1::2], strict=False)] \
            + (leaves[-1:] if len(leaves) % 2 else [])
    return leaves[0]


def _leaves(fmt: str, k: int) -> list[str]:
    return [fmt.format(c=1.0 + (j + 1) / 1024) for j in range(k)]


#: name -> loop body over i (arrays x, z, w, y: f64; a, c, b: f32)
LOOPS: dict[str, str] = {
    "store": "y[i] <- 1.5",
    "copy f64": "y[i] <- x[i]",
    "copy f32": "b[i] <- a[i]",
    "streams f64": "y[i] <- x[i] + z[i] + w[i]",
    "stencil loads": "y[i] <- " + " + ".join(f"x[i + {d}]" for d in range(-4, 5)),
    "streams f32": "b[i] <- a[i] + c[i]",
    "f64 ops": "y[i] <- " + _tree(_leaves("x[i] * {c}", 24)),
    "f64 many ops": "y[i] <- " + _tree(_leaves("x[i] * {c}", 96)),
    "f32 ops": "b[i] <- " + _tree(_leaves("a[i] * {c}", 24)),
    "f64 div": "y[i] <- " + _tree(_leaves("x[i] / {c}", 8)),
    "f32 div": "b[i] <- " + _tree(_leaves("a[i] / {c}", 8)),
    "f64 transc": "y[i] <- " + _tree(_leaves("sin(x[i] * {c})", 2)),
    "f32 transc": "b[i] <- " + _tree(_leaves("sin(a[i] * {c})", 2)),
    "int ops": "y[i] <- f64(" + _chain("i", "(({e}) * 3 + {j}) & 1023", 12) + ")",
    "int div": "y[i] <- f64(" + _chain("i", "(({e}) + {j}) % 1021", 6) + ")",
    "selects": "y[i] <- " + _chain("x[i]", "(i > {j} ? {e} : 0.5)", 8),
    "branch": "if i > 7 && i < n - 9 then y[i] <- x[i] + z[i] else y[i] <- x[i]",
    "mixed": "y[i] <- sqrt(x[i] * x[i] + 1.0) / (z[i] + 2.0) + f64(i % 7)",
}


#: name -> (loop body over i, j of 2-D f64 arrays u, v; its twin reading the same offsets
#: in the first dimension): the loops that fit the ``shift`` kind (LF-96)
LOOPS_2D: dict[str, tuple[str, str]] = {
    "2-D stencil 3": ("v[i, j] <- u[i, j - 1] + u[i, j] + u[i, j + 1]",
                      "v[i, j] <- u[i - 1, j] + u[i, j] + u[i + 1, j]"),
    "2-D stencil 5": ("v[i, j] <- u[i, j - 2] + u[i, j - 1] + u[i, j] + u[i, j + 1] "
                      "+ u[i, j + 2]",
                      "v[i, j] <- u[i - 2, j] + u[i - 1, j] + u[i, j] + u[i + 1, j] "
                      "+ u[i + 2, j]"),
}


def program_2d(body: str, n: int, steps: int) -> Program:
    """A host program running ``body`` over about ``n`` points (``isqrt(n)`` squared) of
    the 2-D f64 arrays u and v, ``steps`` times (LF-96)."""
    m = math.isqrt(n)
    text = (f"program calibrate2\n  var n : i32 = {m};\n  var steps : i32 = {steps};\n"
            "  var u : f64[0:, 0:] allocatable;\n  var v : f64[0:, 0:] allocatable;\n"
            "begin\n  allocate u[0:n - 1, 0:n - 1];\n  allocate v[0:n - 1, 0:n - 1];\n"
            "  parallel for (i = 0 to n - 1, j = 0 to n - 1) do (u[i, j] <- f64((i + j) % 100)"
            " * 0.01; v[i, j] <- 0.0) done;\n"
            "  for t = 1 to steps do\n"
            f"    parallel for (i = 4 to n - 5, j = 4 to n - 5) do {body} done\n  done\nend\n")
    return parse_program(text, "calibrate2.sk")


#: how many times the 1-D loops' steps the 2-D nests run per timed run (LF-115)
ND_STEPS = 3


def body_nd(body: str) -> str:
    """A 1-D loop body of :data:`LOOPS` as the same work over a 2-D nest (LF-115): the loop
    variable ``i`` becomes the contiguous ``j`` and every subscript gains the row ``i``
    (``y[i] <- x[i + 1]`` is ``y[i, j] <- x[i, j + 1]``)."""
    body = re.sub(r"\bi\b", "j", body)
    return re.sub(r"(\w)\[([^\]]*)\]", r"\1[i, \2]", body)


def program_nd(body: str, n: int, steps: int) -> Program:
    """A host program running the 2-D ``body`` over about ``n`` points (``isqrt(n)``
    squared) of the 2-D arrays of :func:`program` (x, z, w, y: f64; a, c, b: f32),
    ``steps`` times (LF-115)."""
    return _program(body, math.isqrt(n), steps, 2)


def fit_shift(shifts: np.ndarray, last: np.ndarray, first: np.ndarray) -> float:
    """The ns of a ``shift`` (LF-96): the non-negative least squares slope, by relative
    error, of what each 2-D loop reading at offsets in its last dimension (``last``, ns per
    point) costs more than its twin reading the same offsets in its first (``first``), on
    the twin's ``shift`` counts less (``shifts``: the loop's count; the twin counts none).
    The same work in the same loop shape: only the dimension of the offsets differs, so the
    1-D row's error on 2-D loops cancels."""
    w = 1.0 / np.maximum(last, 0.25)
    s, d = shifts * w, (last - first) * w
    den = float(s @ s)
    return max(float(s @ d) / den, 0.0) if den > 0 else 0.0


def program(body: str, n: int, steps: int) -> Program:
    """A host program running the 1-D ``body`` over ``n`` points of the arrays x, z, w, y
    (f64) and a, c, b (f32), ``steps`` times (LF-60)."""
    return _program(body, n, steps, 1)


#: the calibration programs' arrays and their element types
_ARRAYS = (("x", "f64"), ("z", "f64"), ("w", "f64"), ("y", "f64"), ("a", "f32"), ("c", "f32"),
           ("b", "f32"))


def _program(body: str, extent: int, steps: int, rank: int) -> Program:
    """The arrays of :data:`_ARRAYS` of ``rank`` (1 or 2) dimensions of ``extent`` each,
    initialised, then ``body`` over the points 4 .. extent - 5 of each, ``steps`` times."""
    names = ("i", "j")[:rank]
    shape, ext = ", ".join("0:" for _ in names), ", ".join("0:n - 1" for _ in names)
    idx = ", ".join(names)
    seed = "i % 100" if rank == 1 else f"({' + '.join(names)}) % 100"
    decls = "".join(f"  var {v} : {t}[{shape}] allocatable;\n" for v, t in _ARRAYS)
    allocs = "".join(f"  allocate {v}[{ext}];\n" for v, _ in _ARRAYS)
    init = "; ".join(f"{v}[{idx}] <- {t}({seed}) * 0.01" for v, t in _ARRAYS)
    full = ", ".join(f"{v} = 0 to n - 1" for v in names)
    inner = ", ".join(f"{v} = 4 to n - 5" for v in names)
    name = "calibrate" if rank == 1 else "calibrate_nd"
    text = (f"program {name}\n  var n : i32 = {extent};\n  var steps : i32 = {steps};\n"
            f"{decls}begin\n{allocs}  parallel for ({full}) do ({init}) done;\n"
            f"  for t = 1 to steps do\n    parallel for ({inner}) do {body} done\n  done\nend\n")
    return parse_program(text, f"{name}.sk")


def loop_of(p: Program) -> ParFor:
    loops = [s for s in iter_host(p.body) if isinstance(s, ParFor)]
    return loops[-1]


def step_ns(body: str, sizes: tuple[int, ...], backend: object, t1: int, t2: int,
            repeat: int, make: Callable[[str, int, int], Program] | None = None
            ) -> list[float]:
    """ns per step of the loop over each of ``sizes`` points (the difference of T2 and T1
    steps, the best of ``repeat`` runs, all runs interleaved); ``make``: the program
    builder (:func:`program`, 1-D, by default)."""
    make = make or program
    rows_1d = getattr(backend, "rows_1d", False)  # as run_program_on offloads (OFF-17)

    def build(t2: int) -> dict[tuple[int, int], Program]:
        return {(n, t): offload(make(body, n, t), rows_1d=rows_1d)
                for n in sizes for t in (t1, t2)}

    progs = build(t2)
    took: dict[tuple[int, int], float] = {}
    for key, q in progs.items():
        s = CLOCK[0]()
        run_program(q, device=backend, check_races=False)  # builds
        took[key] = CLOCK[0]() - s
    # LF-118: the timed steps of the largest domain take at least RUN_MS
    n0 = max(sizes)
    more = longer_steps(t1, t2, took[n0, t2] - took[n0, t1], RUN_MS[0])
    if more != t2:
        t2 = more
        progs = build(t2)
        for key in [k for k in progs if k[1] == t2]:
            run_program(progs[key], device=backend, check_races=False)  # builds
    best = dict.fromkeys(progs, float("inf"))
    for _ in range(repeat):
        for key, q in progs.items():
            s = CLOCK[0]()
            run_program(q, device=backend, check_races=False)
            best[key] = min(best[key], CLOCK[0]() - s)
    return [max(best[n, t2] - best[n, t1], 0.0) / (t2 - t1) * 1e9 for n in sizes]


#: how long, in ms, the timed steps of a loop's larger domain run at least (LF-118)
RUN_MS = [100.0]


def longer_steps(t1: int, t2: int, seconds: float, run_ms: float) -> int:
    """T2, or more when the ``t2 - t1`` steps took ``seconds`` (a first, untimed run) and
    ``run_ms`` needs more of them (LF-118): a loop of a fraction of a nanosecond a point
    runs 2^19 points in tens of microseconds, and a few milliseconds of timed steps left
    the scheduler's jitter in its per-point figure. At most 64 times as many steps."""
    if seconds <= 0:
        return t1 + 4 * (t2 - t1)  # too fast to see at all: four times the steps
    need = math.ceil((t2 - t1) * run_ms / (seconds * 1e3))
    return t1 + min(max(need, t2 - t1), 64 * (t2 - t1))


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (Lawson-Hanson, scipy's)."""
    try:
        from scipy.optimize import nnls as scipy_nnls
    except ImportError:
        sys.exit("benchmarks/calibrate.py needs scipy for its fit (pip install scipy)")
    x, _ = scipy_nnls(a, b)
    return np.asarray(x)


#: the ns per byte tried by the roofline fit (0: no memory side, the linear model)
BYTE_GRID = (0.0, *np.geomspace(1e-4, 1.0, 97))


def fit_roofline(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The per-kind costs (columns of ``a``: :data:`KINDS`) whose roofline -- per loop, the
    larger of its bytes' time and its compute's time (LF-75) -- fits the measured per-point
    times ``b`` best by relative error: for each ns per byte of :data:`BYTE_GRID`, the
    compute kinds are the non-negative least squares fit of the loops that time does not
    explain (compute-bound: measured above 1.1 times their bytes' time); the best total
    error wins. Returns the coefficients and the fitted times."""
    j = KINDS.index("byte")
    comp = [k for k in range(len(KINDS)) if k != j]
    scale = np.maximum(b, 0.25)  # relative error: every loop counts alike
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for per_byte in BYTE_GRID:
        mem = a[:, j] * per_byte
        bound = b > 1.1 * mem
        if not bound.any():
            continue
        w = 1.0 / scale[bound]
        x = nnls(a[bound][:, comp] * w[:, None], b[bound] * w)
        fitted = np.maximum(mem, a[:, comp] @ x)
        err = float(np.sum(((fitted - b) / scale) ** 2))
        if best is None or err < best[0]:
            coef = np.zeros(len(KINDS))
            coef[comp] = x
            coef[j] = per_byte
            best = (err, coef, fitted)
    if best is None:  # no loop measured above zero: nothing to fit (misfits says so)
        return np.zeros(len(KINDS)), np.zeros(len(b))
    return best[1], best[2]


def misfits(names: list[str], measured: np.ndarray, fitted: np.ndarray) -> list[str]:
    """The loops that measured zero or that the fit misses by more than half (LF-60, LF-77:
    ``--write`` refuses the row)."""
    return [nm for nm, m, f in zip(names, measured, fitted, strict=True)
            if m <= 0 or abs(f - m) > 0.5 * m]


#: the loop whose steps give a launch's cost: a copy of a few points (LF-60)
LAUNCH_LOOP = ("y[i] <- x[i]", 10)


def launch_ns(backend: object, t1: int, repeat: int) -> float:
    """One measurement of a launch's cost (LF-60): a step of :data:`LAUNCH_LOOP`, whose
    points cost next to nothing. :func:`calibrate` takes three, at its start, after the
    1-D loops and at its end, and keeps their median (LF-119)."""
    body, n = LAUNCH_LOOP
    return step_ns(body, (n,), backend, t1, 40, repeat)[0]


def calibrate(backend_name: str, n: int, repeat: int, steps: int = 24
              ) -> tuple[dict[str, float], list[str], bool]:
    be = get_backend(backend_name)
    t1, t2 = 2, 2 + steps
    launches = [launch_ns(be, t1, repeat)]  # LF-119: one of three, spread over the run
    rows, times, names = [], [], []
    for name, body in LOOPS.items():
        c = count(loop_of(program(body, n, 1)).body)
        # two domains: the launch's cost cancels in the difference
        big, small = step_ns(body, (n, n // 4), be, t1, t2, repeat)
        per_point = max(big - small, 0.0) / (n - n // 4)
        rows.append([c[k] for k in KINDS])
        times.append(per_point)
        names.append(name)
    a, b = np.array(rows), np.array(times)
    coef, fit = fit_roofline(a, b)
    row = {k: float(f"{v:.4g}") for k, v in zip(KINDS, coef, strict=True)}
    launches.append(launch_ns(be, t1, repeat))
    lines = [f"  {nm:<14} measured {m:8.3f} ns/point  fitted {f:8.3f}"
             for nm, m, f in zip(names, b, fit, strict=True)]
    bad = misfits(names, b, fit)
    # LF-96: the shift, from 2-D twins (offsets in the last dimension against the first)
    shifts, last, first = [], [], []
    for name, (body, twin) in LOOPS_2D.items():
        per = []
        for text in (body, twin):
            big, small = step_ns(text, (n, n // 4), be, t1, t2, repeat, program_2d)
            pts = (math.isqrt(n) - 8) ** 2 - (math.isqrt(n // 4) - 8) ** 2
            per.append(max(big - small, 0.0) / pts)
        shifts.append(count(loop_of(program_2d(body, 64, 1)).body)["shift"])
        last.append(per[0])
        first.append(per[1])
        lines.append(f"  {name:<14} measured {per[0]:8.3f} ns/point  (offsets in the first "
                     f"dimension: {per[1]:.3f})")
        if min(per) <= 0:
            bad.append(name)
    row["shift"] = float(f"{fit_shift(np.array(shifts), np.array(last), np.array(first)):.4g}")
    # LF-115: the kinds of nests of two or more dimensions, fitted on the same loops as 2-D
    # nests and on the twins above (their offsets along the contiguous dimension: shifts)
    pts = (math.isqrt(n) - 8) ** 2 - (math.isqrt(n // 4) - 8) ** 2
    nd_rows, nd_times, nd_names = [], [], []
    for name, body in LOOPS.items():
        text = body_nd(body)
        # the nests run 2 to 5 times faster than the 1-D loops: more steps, as long a run
        big, small = step_ns(text, (n, n // 4), be, t1, t1 + ND_STEPS * steps, repeat,
                             program_nd)
        c = count(loop_of(program_nd(text, 64, 1)).body)
        nd_rows.append([c[k] for k in KINDS])
        nd_times.append(max(big - small, 0.0) / pts)
        nd_names.append(f"2-D {name}")
    for (name, (body, twin)), t_last, t_first in zip(LOOPS_2D.items(), last, first,
                                                    strict=True):
        for text, t, what in ((body, t_last, ""), (twin, t_first, " (first dim.)")):
            c = count(loop_of(program_2d(text, 64, 1)).body)
            nd_rows.append([c[k] for k in KINDS])
            nd_times.append(t)
            nd_names.append(f"{name}{what}")
    a2, b2 = np.array(nd_rows), np.array(nd_times)
    coef2, fit2 = fit_roofline(a2, b2)
    for k, v in zip(KINDS, coef2, strict=True):
        row[f"{ND}{k}"] = float(f"{v:.4g}")
    lines += [f"  {nm:<26} measured {m:8.3f} ns/point  fitted {f:8.3f}"
              for nm, m, f in zip(nd_names, b2, fit2, strict=True)]
    bad += misfits(nd_names, b2, fit2)
    launches.append(launch_ns(be, t1, repeat))
    row["launch"] = float(f"{statistics.median(launches):.4g}")
    lines.append("  launch         measured " + ", ".join(f"{x / 1e3:.1f}" for x in launches)
                 + f" µs: the median, {row['launch'] / 1e3:.1f} µs (LF-119)")
    if bad:
        lines.append(f"  noisy: {', '.join(bad)} measured at zero or fitted more than 50 % "
                     "off (a busy machine?); --write refuses such a row")
    return row, lines, not bad


def render(table: dict[str, dict[str, float]], sources: dict[str, str]) -> str:
    """The data part of cost_table.py: one row per backend, kinds in LF-61's order."""
    out = ["#: backend name -> kind -> ns (KINDS of cost_counts, and \"launch\")",
           "TABLE: dict[str, dict[str, float]] = {"]
    for name in sorted(table):
        out.append(f"    {name!r}: {{".replace("'", '"'))
        nd = [f"{ND}{k}" for k in KINDS if f"{ND}{k}" in table[name]]
        for k in (*KINDS, "launch", *nd):
            out.append(f"        \"{k}\": {table[name].get(k, 0.0)!r},")
        out.append("    },")
    out += ["}", "", "#: backend name -> how its row was measured (machine, sizes, date)",
            "SOURCES: dict[str, str] = {"]
    for name in sorted(sources):
        out.append(f"    \"{name}\": {json.dumps(sources[name], ensure_ascii=False)},")
    out += ["}", "", "__all__ = [\"SOURCES\", \"TABLE\"]", ""]
    return "\n".join(out)


def write_table(backend: str, row: dict[str, float], source: str) -> None:
    table = {**TABLE, backend: row}
    sources = {**SOURCES, backend: source}
    text = TABLE_FILE.read_text()
    head = text[:text.index("#: backend name -> kind -> ns")]
    TABLE_FILE.write_text(head + render(table, sources))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="opencl")
    ap.add_argument("--points", type=int, default=1 << 19)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=24,
                    help="steps timed per run beyond the first two (more: steadier, slower)")
    ap.add_argument("--write", action="store_true", help="store the row in cost_table.py")
    ap.add_argument("--run-ms", type=float, default=100.0,
                    help="time each loop's steps for at least this long (LF-118)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time runs by wall clock (default) or by the process's CPU time")
    args = ap.parse_args()
    CLOCK[0] = time.perf_counter if args.clock == "wall" else time.process_time
    RUN_MS[0] = args.run_ms
    start = time.perf_counter()
    row, lines, good = calibrate(args.backend, args.points, args.repeat, args.steps)
    print(f"cost table row for {args.backend} ({args.points} points, best of {args.repeat}), "
          "ns:")
    print("  " + ", ".join(f"{k} {v:g}" for k, v in row.items()))
    print("\n".join(lines))
    print(f"({time.perf_counter() - start:.0f} s)")
    if args.write and not good:
        print("not written: the fit is too noisy (rerun on a quiet machine)")
        return 1
    if args.write:
        today = datetime.date.today().isoformat()
        write_table(args.backend, row, f"benchmarks/calibrate.py --points {args.points} "
                    f"--clock {args.clock} on "
                    f"{platform.node() or 'this machine'} ({platform.processor() or 'cpu'}"
                    f", {get_backend(args.backend).name}), {today}")
        print(f"written: {TABLE_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
