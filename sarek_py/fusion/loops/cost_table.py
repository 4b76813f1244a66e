"""The per-backend cost table of loop fusion (specs/loop-fusion.md, LF-60).

Written by ``benchmarks/calibrate.py --backend NAME --write`` (do not edit by hand): for
each calibrated backend, the time in ns of each kind of per-point work counted by
:mod:`~sarek_py.fusion.loops.cost_counts` (a byte streamed, a load, an f32/f64
operation, division and transcendental, an integer operation, a select or branch, a
point of a loop) and of a launch. A backend without a row is uncalibrated (LF-64).
"""

from __future__ import annotations

#: backend name -> kind -> ns (KINDS of cost_counts, and "launch")
TABLE: dict[str, dict[str, float]] = {
    "c": {
        "point": 0.5786,
        "byte": 0.002701,
        "load": 0.06996,
        "f32_op": 0.06126,
        "f64_op": 0.0686,
        "f32_div": 0.5248,
        "f64_div": 0.8329,
        "f32_transc": 1.831,
        "f64_transc": 7.505,
        "int_op": 0.0464,
        "int_div": 1.119,
        "select": 0.0,
        "launch": 137500.0,
    },
    "opencl": {
        "point": 0.5187,
        "byte": 0.009119,
        "load": 0.219,
        "f32_op": 0.08679,
        "f64_op": 0.08316,
        "f32_div": 0.5202,
        "f64_div": 0.8785,
        "f32_transc": 16.78,
        "f64_transc": 15.27,
        "int_op": 0.03636,
        "int_div": 1.715,
        "select": 0.02362,
        "launch": 140200.0,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
