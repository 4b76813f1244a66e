"""Bad input for the front end (FE-12): del statement."""
# expect: del statement is not supported in kernels
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


@kernel
def bad(x: Vec[f32]):
    a = 1.0
    del a  # <- error
    x[0] = 1.0
