"""Bad input for the front end (FE-12): use after block."""
# expect: 'a' is not defined here
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    if x[0] > 0.0:
        a = 1.0
    else:
        a = 2.0
    x[1] = a  # <- error
