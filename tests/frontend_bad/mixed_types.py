"""Bad input for the front end (FE-12): mixed types."""
# expect: operands have different types f32 and f64
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    x[0] = x[1] + f64(x[2])  # <- error
