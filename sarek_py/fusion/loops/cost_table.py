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
        "point": 0.4167,
        "byte": 0.04217,
        "load": 0.2201,
        "f32_op": 0.01184,
        "f64_op": 0.0118,
        "f32_div": 0.03257,
        "f64_div": 0.09695,
        "f32_transc": 1.475,
        "f64_transc": 7.494,
        "int_op": 0.01251,
        "int_div": 0.1652,
        "select": 0.0,
        "branch": 0.7245,
        "shift": 0.0,
        "launch": 39100.0,
    },
    "opencl": {
        "point": 0.151,
        "byte": 0.01616,
        "load": 0.05479,
        "f32_op": 0.02313,
        "f64_op": 0.03244,
        "f32_div": 0.04473,
        "f64_div": 0.1888,
        "f32_transc": 15.51,
        "f64_transc": 14.35,
        "int_op": 0.003868,
        "int_div": 0.3565,
        "select": 0.02581,
        "branch": 0.7134,
        "shift": 0.2479,
        "launch": 22010.0,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02; shift: benchmarks/calibrate.py --steps 24 --clock cpu at 07:52 UTC (loaded machine)",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02; shift: benchmarks/calibrate.py --steps 24 --clock cpu at 07:52 UTC (loaded machine)",
}

__all__ = ["SOURCES", "TABLE"]
