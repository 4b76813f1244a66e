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
        "point": 0.01905,
        "byte": 0.01778,
        "load": 0.06002,
        "f32_op": 0.008223,
        "f64_op": 0.01891,
        "f32_div": 0.09004,
        "f64_div": 0.3,
        "f32_transc": 2.782,
        "f64_transc": 8.761,
        "int_op": 0.0253,
        "int_div": 1.556,
        "select": 0.0,
        "branch": 0.0,
        "shift": 0.002834,
        "launch": 65680.0,
        "nd.point": 0.1583,
        "nd.byte": 0.01334,
        "nd.load": 0.03073,
        "nd.f32_op": 0.008143,
        "nd.f64_op": 0.01856,
        "nd.f32_div": 0.08273,
        "nd.f64_div": 0.2975,
        "nd.f32_transc": 2.95,
        "nd.f64_transc": 9.006,
        "nd.int_op": 0.01658,
        "nd.int_div": 1.468,
        "nd.select": 0.0,
        "nd.branch": 0.0,
        "nd.shift": 0.008482,
    },
    "opencl": {
        "point": 0.1739,
        "byte": 0.01778,
        "load": 0.06245,
        "f32_op": 0.01656,
        "f64_op": 0.03348,
        "f32_div": 0.0803,
        "f64_div": 0.2651,
        "f32_transc": 23.52,
        "f64_transc": 19.48,
        "int_op": 0.003977,
        "int_div": 0.4552,
        "select": 0.02197,
        "branch": 0.9491,
        "shift": 0.4241,
        "launch": 40410.0,
        "nd.point": 0.1969,
        "nd.byte": 0.01468,
        "nd.load": 0.04709,
        "nd.f32_op": 0.01563,
        "nd.f64_op": 0.0341,
        "nd.f32_div": 0.067,
        "nd.f64_div": 0.2059,
        "nd.f32_transc": 23.47,
        "nd.f64_transc": 18.31,
        "nd.int_op": 0.003802,
        "nd.int_div": 0.3677,
        "nd.select": 0.02937,
        "nd.branch": 0.7236,
        "nd.shift": 0.4083,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
