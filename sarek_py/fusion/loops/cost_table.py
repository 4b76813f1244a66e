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
        "point": 0.3552,
        "byte": 0.05623,
        "load": 0.3028,
        "f32_op": 0.01007,
        "f64_op": 0.01375,
        "f32_div": 0.03101,
        "f64_div": 0.09818,
        "f32_transc": 1.612,
        "f64_transc": 7.986,
        "int_op": 0.01599,
        "int_div": 0.1892,
        "select": 0.0,
        "branch": 1.576,
        "launch": 44700.0,
    },
    "opencl": {
        "point": 0.0,
        "byte": 0.01957,
        "load": 0.06964,
        "f32_op": 0.01906,
        "f64_op": 0.05092,
        "f32_div": 0.07675,
        "f64_div": 0.2294,
        "f32_transc": 16.53,
        "f64_transc": 15.18,
        "int_op": 0.00579,
        "int_div": 0.4297,
        "select": 0.03097,
        "branch": 0.7482,
        "launch": 15160.0,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
