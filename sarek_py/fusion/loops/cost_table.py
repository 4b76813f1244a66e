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
        "point": 0.05423,
        "byte": 0.01334,
        "load": 0.0423,
        "f32_op": 0.008201,
        "f64_op": 0.01816,
        "f32_div": 0.09225,
        "f64_div": 0.3009,
        "f32_transc": 2.75,
        "f64_transc": 8.557,
        "int_op": 0.02406,
        "int_div": 1.666,
        "select": 0.0,
        "branch": 0.0,
        "shift": 0.0,
        "launch": 41800.0,
        "nd.point": 0.1393,
        "nd.byte": 0.01212,
        "nd.load": 0.05534,
        "nd.f32_op": 0.00622,
        "nd.f64_op": 0.01886,
        "nd.f32_div": 0.07987,
        "nd.f64_div": 0.2878,
        "nd.f32_transc": 2.134,
        "nd.f64_transc": 8.856,
        "nd.int_op": 0.01452,
        "nd.int_div": 1.199,
        "nd.select": 0.0,
        "nd.branch": 0.0,
        "nd.shift": 0.0,
    },
    "opencl": {
        "point": 0.2002,
        "byte": 0.01957,
        "load": 0.05531,
        "f32_op": 0.0162,
        "f64_op": 0.03304,
        "f32_div": 0.07048,
        "f64_div": 0.2691,
        "f32_transc": 21.51,
        "f64_transc": 15.85,
        "int_op": 0.008288,
        "int_div": 0.4177,
        "select": 0.01833,
        "branch": 0.642,
        "shift": 0.44,
        "launch": 33490.0,
        "nd.point": 0.1714,
        "nd.byte": 0.01778,
        "nd.load": 0.05332,
        "nd.f32_op": 0.01358,
        "nd.f64_op": 0.02892,
        "nd.f32_div": 0.06756,
        "nd.f64_div": 0.2263,
        "nd.f32_transc": 23.85,
        "nd.f64_transc": 17.78,
        "nd.int_op": 0.004569,
        "nd.int_div": 0.3846,
        "nd.select": 0.04391,
        "nd.branch": 0.5516,
        "nd.shift": 0.415,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
