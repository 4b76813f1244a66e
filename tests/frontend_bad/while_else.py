"""Bad input for the front end (FE-12): while else."""
# expect: while ... else is not supported
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    while x[0] > 0.0:  # <- error
        x[0] = x[0] - 1.0
    else:
        x[1] = 0.0
