"""The intrinsics of the IR: thread indices and math functions (specs/ir.md, IR-8).

A thread intrinsic takes no argument and is an ``i32``. A math intrinsic takes numeric
arguments of one type and gives that type. ``EXACT_MATH`` are correctly rounded on every
backend (bitwise comparable); the others (``TRANSCENDENTAL``) are compared within a ULP
bound (specs/codegen.md).
"""

from __future__ import annotations

AXES = ("x", "y", "z")

#: intrinsics that are a thread's global index (the seed's ``global_ids``)
GLOBAL_IDS: tuple[str, ...] = ("global_thread_id", "global_idx_x")

#: every thread intrinsic (the seed's ``thread_intrinsics``)
THREAD_INTRINSICS: tuple[str, ...] = (
    "global_thread_id",
    *(f"{kind}_{a}" for kind in ("thread_idx", "block_idx", "block_dim", "grid_dim",
                                 "global_idx") for a in AXES),
)

#: name -> (arity, float arguments only)
MATH: dict[str, tuple[int, bool]] = {
    "sqrt": (1, True),
    "abs": (1, False),
    "min": (2, False),
    "max": (2, False),
    "floor": (1, True),
    "ceil": (1, True),
    "exp": (1, True),
    "log": (1, True),
    "sin": (1, True),
    "cos": (1, True),
    "tan": (1, True),
    "tanh": (1, True),
    "pow": (2, True),
}

EXACT_MATH = frozenset({"sqrt", "abs", "min", "max", "floor", "ceil"})
TRANSCENDENTAL = frozenset(MATH) - EXACT_MATH


def is_thread_intrinsic(name: str) -> bool:
    return name in THREAD_INTRINSICS


def is_intrinsic(name: str) -> bool:
    return name in THREAD_INTRINSICS or name in MATH
