"""Bad input for the front end (FE-12): nested def."""
# expect: nested function definition is not supported in kernels
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    def inner(v: f32) -> f32:  # <- error
        return v

    x[0] = inner(x[1])
