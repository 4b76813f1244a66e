"""The element-wise chain the benchmarks time — ``scale`` (``t = a * x``), ``shift``
(``u = t + b``), ``relu`` (``y = max(u, 0)``), one thread an element, guarded by ``n`` —
shared by benchmarks/peers.py, pipeline_overhead.py and dead_intermediate.py."""

from __future__ import annotations

from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def shift(t: Vec[f32], u: Vec[f32], b: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        u[i] = t[i] + b


@kernel
def relu(u: Vec[f32], y: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        y[i] = max(u[i], 0.0)
