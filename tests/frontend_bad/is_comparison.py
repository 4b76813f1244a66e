"""Bad input for the front end (FE-12): is comparison."""
# expect: comparison `is` is not supported
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    if x[0] is x[1]:  # <- error
        x[2] = 1.0
