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
        "point": 0.4664,
        "byte": 0.04642,
        "load": 0.2435,
        "f32_op": 0.01026,
        "f64_op": 0.01158,
        "f32_div": 0.02012,
        "f64_div": 0.09539,
        "f32_transc": 1.693,
        "f64_transc": 7.677,
        "int_op": 0.01164,
        "int_div": 0.1512,
        "select": 0.0,
        "branch": 0.5686,
        "shift": 0.0,
        "launch": 35060.0,
    },
    "opencl": {
        "point": 0.1168,
        "byte": 0.01957,
        "load": 0.08309,
        "f32_op": 0.0158,
        "f64_op": 0.03151,
        "f32_div": 0.05387,
        "f64_div": 0.1981,
        "f32_transc": 16.08,
        "f64_transc": 14.35,
        "int_op": 0.002795,
        "int_div": 0.3725,
        "select": 0.02132,
        "branch": 0.5014,
        "shift": 0.2764,
        "launch": 31280.0,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
