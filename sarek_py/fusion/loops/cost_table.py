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
        "point": 0.4059,
        "byte": 0.07499,
        "load": 0.6284,
        "f32_op": 0.02065,
        "f64_op": 0.02518,
        "f32_div": 0.07773,
        "f64_div": 0.2291,
        "f32_transc": 2.659,
        "f64_transc": 8.788,
        "int_op": 0.02269,
        "int_div": 0.3191,
        "select": 0.0,
        "branch": 1.005,
        "shift": 0.0,
        "launch": 41070.0,
        "nd.point": 0.128,
        "nd.byte": 0.01334,
        "nd.load": 0.04467,
        "nd.f32_op": 0.008073,
        "nd.f64_op": 0.02052,
        "nd.f32_div": 0.09077,
        "nd.f64_div": 0.3433,
        "nd.f32_transc": 3.238,
        "nd.f64_transc": 8.938,
        "nd.int_op": 0.02017,
        "nd.int_div": 1.554,
        "nd.select": 0.0,
        "nd.branch": 0.08915,
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
