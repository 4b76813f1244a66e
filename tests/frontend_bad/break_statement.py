"""Bad input for the front end (FE-12, FE-23): break in a for ... else loop (the else
branch runs when no break left the loop: not in the kernel subset)."""
# expect: for ... else is not supported in kernels
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    for i in range(4):  # <- error
        if x[i] > 0.0:
            break
        x[i] = 1.0
    else:
        x[0] = 2.0
