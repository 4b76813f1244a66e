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
        "point": 0.4489,
        "byte": 0.0,
        "load": 0.3978,
        "f32_op": 0.01682,
        "f64_op": 0.02553,
        "f32_div": 0.04726,
        "f64_div": 0.2084,
        "f32_transc": 2.171,
        "f64_transc": 7.804,
        "int_op": 0.01697,
        "int_div": 0.2318,
        "select": 0.0,
        "branch": 0.8235,
        "shift": 0.0,
        "launch": 13490.0,
    },
    "opencl": {
        "point": 0.1298,
        "byte": 0.01468,
        "load": 0.03764,
        "f32_op": 0.01637,
        "f64_op": 0.02986,
        "f32_div": 0.07692,
        "f64_div": 0.2687,
        "f32_transc": 20.13,
        "f64_transc": 15.93,
        "int_op": 0.009773,
        "int_div": 0.4097,
        "select": 0.01833,
        "branch": 0.4808,
        "shift": 0.3355,
        "launch": 30140.0,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
