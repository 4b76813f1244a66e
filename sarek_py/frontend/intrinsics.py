"""The names a kernel calls: thread indices, math, ``barrier``, ``shared``, ``local`` (FE-9).

These are markers, not implementations: the translator recognises them by identity (or by
name when a kernel uses one without importing it). Called from ordinary Python they raise
:class:`KernelOnly`, since they mean something only inside a kernel.
"""

from __future__ import annotations

from typing import Any

import attrs

from sarek_py.ir.atomics import ATOMIC_WORDS
from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS

#: statement-like intrinsics and declarations, beside the IR's thread and math intrinsics
SPECIAL = ("barrier", "shared", "local", "stop", "length")


class KernelOnly(RuntimeError):
    """A kernel intrinsic was called outside a kernel."""


@attrs.frozen
class IntrinsicStub:
    """A kernel intrinsic named ``name``; calling it in Python is an error."""

    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelOnly(f"{self.name}() can only be used inside a @kernel or @helper function")

    def __repr__(self) -> str:
        return f"<kernel intrinsic {self.name}>"


STUBS: dict[str, IntrinsicStub] = {
    name: IntrinsicStub(name) for name in (*THREAD_INTRINSICS, *MATH, *SPECIAL, *ATOMIC_WORDS)
}


@attrs.frozen
class AtomicNamespace:
    """``atomic.add(a, i, v)`` … as numba's ``cuda.atomic.add`` spells them (FE-25)."""

    add: IntrinsicStub
    min: IntrinsicStub
    max: IntrinsicStub
    exch: IntrinsicStub
    cas: IntrinsicStub

global_thread_id = STUBS["global_thread_id"]
thread_idx_x = STUBS["thread_idx_x"]
thread_idx_y = STUBS["thread_idx_y"]
thread_idx_z = STUBS["thread_idx_z"]
block_idx_x = STUBS["block_idx_x"]
block_idx_y = STUBS["block_idx_y"]
block_idx_z = STUBS["block_idx_z"]
block_dim_x = STUBS["block_dim_x"]
block_dim_y = STUBS["block_dim_y"]
block_dim_z = STUBS["block_dim_z"]
grid_dim_x = STUBS["grid_dim_x"]
grid_dim_y = STUBS["grid_dim_y"]
grid_dim_z = STUBS["grid_dim_z"]
global_idx_x = STUBS["global_idx_x"]
global_idx_y = STUBS["global_idx_y"]
global_idx_z = STUBS["global_idx_z"]
sqrt = STUBS["sqrt"]
floor = STUBS["floor"]
ceil = STUBS["ceil"]
exp = STUBS["exp"]
log = STUBS["log"]
sin = STUBS["sin"]
cos = STUBS["cos"]
tan = STUBS["tan"]
tanh = STUBS["tanh"]
pow = STUBS["pow"]  # noqa: A001  (the kernel intrinsic, not the builtin)
barrier = STUBS["barrier"]
shared = STUBS["shared"]
local = STUBS["local"]
stop = STUBS["stop"]
length = STUBS["length"]
#: atomics (FE-25): ``old = atomic_add(a, i, v)`` (``i`` an index or a tuple of them),
#: ``atomic_cas(a, i, expected, new)``; the value is the element's old value
atomic_add = STUBS["atomic_add"]
atomic_min = STUBS["atomic_min"]
atomic_max = STUBS["atomic_max"]
atomic_exch = STUBS["atomic_exch"]
atomic_cas = STUBS["atomic_cas"]
atomic = AtomicNamespace(atomic_add, atomic_min, atomic_max, atomic_exch, atomic_cas)
