"""Write kernels as Python functions (specs/frontend.md, docs/tutorial.md).

Example (kernels must live in a file, since their source is read)::

    from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel

    @kernel
    def saxpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
        i = global_thread_id()
        if i < n:
            y[i] = a * x[i] + y[i]

    saxpy[n, 256](x, y, 2.0, n)          # numpy arrays; y holds the result

``with pipeline(): ...`` records launches and runs them fused when the block ends.
"""

from __future__ import annotations

from sarek_py.frontend.adapt import as_ir, fuse
from sarek_py.frontend.annotations import Vec, Vec2, Vec3, boolean, f32, f64, i32, i64
from sarek_py.frontend.intrinsics import (
    atomic,
    atomic_add,
    atomic_cas,
    atomic_exch,
    atomic_max,
    atomic_min,
    barrier,
    block_dim_x,
    block_dim_y,
    block_dim_z,
    block_idx_x,
    block_idx_y,
    block_idx_z,
    ceil,
    cos,
    exp,
    floor,
    global_idx_x,
    global_idx_y,
    global_idx_z,
    global_thread_id,
    grid_dim_x,
    grid_dim_y,
    grid_dim_z,
    length,
    local,
    log,
    pow,
    shared,
    sin,
    sqrt,
    stop,
    tan,
    tanh,
    thread_idx_x,
    thread_idx_y,
    thread_idx_z,
)
from sarek_py.frontend.kernel import HelperFunction, KernelFunction, helper, kernel
from sarek_py.frontend.pipeline import Pipeline, pipeline
from sarek_py.frontend.source import FrontendError

__all__ = [
    "FrontendError", "HelperFunction", "KernelFunction", "Pipeline", "pipeline", "Vec", "Vec2", "Vec3", "as_ir", "atomic",
    "atomic_add", "atomic_cas", "atomic_exch", "atomic_max", "atomic_min", "barrier",
    "block_dim_x", "block_dim_y", "block_dim_z", "block_idx_x", "block_idx_y", "block_idx_z",
    "boolean", "ceil", "cos", "exp", "f32", "f64", "floor", "fuse", "global_idx_x", "global_idx_y",
    "global_idx_z", "global_thread_id", "grid_dim_x", "grid_dim_y", "grid_dim_z", "helper",
    "i32", "i64", "kernel", "length", "local", "log", "pow", "shared", "sin", "sqrt", "stop",
    "tan", "tanh", "thread_idx_x", "thread_idx_y", "thread_idx_z",
]
