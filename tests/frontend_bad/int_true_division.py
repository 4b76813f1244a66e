"""Bad input for the front end (FE-12): int true division."""
# expect: `/` on i32 operands
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    i = global_thread_id()
    x[0] = f32(i / 2)  # <- error
