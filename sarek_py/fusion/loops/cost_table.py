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
        "point": 0.1216,
        "byte": 0.01101,
        "load": 0.01789,
        "f32_op": 0.01287,
        "f64_op": 0.01887,
        "f32_div": 0.05847,
        "f64_div": 0.2983,
        "f32_transc": 3.18,
        "f64_transc": 8.083,
        "int_op": 0.0167,
        "int_div": 1.628,
        "select": 0.0,
        "branch": 0.06468,
        "shift": 0.0,
        "launch": 44270.0,
        "nd.point": 0.1229,
        "nd.byte": 0.01101,
        "nd.load": 0.04316,
        "nd.f32_op": 0.007532,
        "nd.f64_op": 0.01799,
        "nd.f32_div": 0.08441,
        "nd.f64_div": 0.4843,
        "nd.f32_transc": 1.993,
        "nd.f64_transc": 8.504,
        "nd.int_op": 0.01515,
        "nd.int_div": 0.994,
        "nd.select": 0.0,
        "nd.branch": 0.007995,
        "nd.shift": 0.0,
    },
    "opencl": {
        "point": 0.1061,
        "byte": 0.01616,
        "load": 0.05036,
        "f32_op": 0.01541,
        "f64_op": 0.02813,
        "f32_div": 0.0773,
        "f64_div": 0.2639,
        "f32_transc": 20.45,
        "f64_transc": 15.79,
        "int_op": 0.004569,
        "int_div": 0.3959,
        "select": 0.02659,
        "branch": 0.5875,
        "shift": 0.01214,
        "launch": 28600.0,
        "nd.point": 0.1588,
        "nd.byte": 0.01468,
        "nd.load": 0.04699,
        "nd.f32_op": 0.01398,
        "nd.f64_op": 0.02557,
        "nd.f32_div": 0.07197,
        "nd.f64_div": 0.2727,
        "nd.f32_transc": 21.95,
        "nd.f64_transc": 19.02,
        "nd.int_op": 0.004019,
        "nd.int_div": 2.711,
        "nd.select": 0.0302,
        "nd.branch": 0.3082,
        "nd.shift": 0.009251,
    },
}

#: backend name -> how its row was measured (machine, sizes, date)
SOURCES: dict[str, str] = {
    "c": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, c), 2026-12-02",
    "opencl": "benchmarks/calibrate.py --points 524288 --clock cpu on vm (cpu, opencl), 2026-12-02",
}

__all__ = ["SOURCES", "TABLE"]
