"""Bad input for the front end (FE-12): nonlocal declaration."""
# expect: nonlocal declaration is not supported
# ruff: noqa
from __future__ import annotations

import json

from sarek_py.frontend import Vec, f32, f64, global_thread_id, kernel

COUNTER = 0
TABLE = [1.0, 2.0]


def outer() -> object:
    COUNTER = 1

    @kernel
    def bad(x: Vec[f32]):
        nonlocal COUNTER  # <- error

    return bad


bad = outer()
