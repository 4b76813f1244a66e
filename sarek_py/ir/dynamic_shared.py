"""Dynamic shared memory: the one shared array whose extent each launch gives
(specs/ir.md IR-50..IR-52, specs/launch.md LCH-50..LCH-53).

CUDA's ``extern __shared__ float s[];`` is, in the kernel IR, a shared local array of rank
one, lower bound 0 and no extent: ``shared s : f32[]``. A kernel has at most one. Each
launch of it gives the array's extent in *elements* (``Launch.shared``, the ``shared``
clause of the launch text, ``shared=`` of the runtimes); ``length(s)`` is that extent.
"""

from __future__ import annotations

import numpy as np

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Kernel, Var
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, Type


def is_dynamic_shared(t: Type) -> bool:
    """Whether ``t`` is the type of a dynamic shared array (``shared T[]``, IR-50)."""
    return (isinstance(t, ArrayType) and t.space is MemSpace.SHARED
            and t.shape == (None,) and t.lower == (0,))


def _dynamic_shared(kernel: Kernel) -> Var | None:
    return next((v for v in kernel.locals if is_dynamic_shared(v.type)), None)


#: per kernel object (every launch asks, FE-82)
_DYNAMIC: IdentityCache[Kernel, Var | None] = IdentityCache(_dynamic_shared)


def dynamic_shared(kernel: Kernel) -> Var | None:
    """The kernel's dynamic shared array, or None (IR-51: there is at most one)."""
    return _DYNAMIC.get(kernel)


def local_extent_problem(name: str, t: ArrayType) -> str | None:
    """Why the local array ``name`` of type ``t`` is not allowed, or None (IR-50): every
    extent is a constant, except the one of a rank-1, zero-based shared array."""
    if t.is_constant_shape:
        return None
    if t.space is MemSpace.SHARED:
        if t.rank != 1:
            return (f"shared array '{name}' needs constant extents, has {t}: only a rank-1 "
                    f"shared array is sized at launch (write shared {name} : {t.elem}[] and "
                    "index it row-major)")
        if t.lower != (0,):
            return (f"shared array '{name}' needs constant extents, has {t}: a shared array "
                    f"sized at launch starts at 0 (write shared {name} : {t.elem}[])")
        return None
    return (f"{t.space} array '{name}' needs constant extents, has {t}: only a shared array "
            f"is sized at launch (shared {name} : {t.elem}[])")


def element_bytes(elem: Scalar) -> int:
    """The bytes of one element in device memory (``bool`` elements are bytes)."""
    return 1 if elem is Scalar.BOOL else elem.dtype.itemsize


def shared_arrays(kernel: Kernel, dynamic: int | None = None) -> list[tuple[str, int]]:
    """The kernel's shared arrays and their sizes in bytes (``bool`` elements are bytes);
    the dynamic shared array (IR-50) counts ``dynamic`` elements (0 when not given)."""
    out = []
    for v in kernel.locals:
        t = v.type
        if isinstance(t, ArrayType) and t.space is MemSpace.SHARED:
            n = (dynamic or 0) if is_dynamic_shared(t) else t.size
            out.append((v.name, n * element_bytes(t.elem)))
    return out


def static_shared_bytes(kernel: Kernel) -> int:
    """The bytes of the kernel's shared arrays of constant extent (its dynamic one, whose
    extent each launch gives, not counted): what a fused kernel adds up (LEG-34)."""
    return sum(n for _, n in shared_arrays(kernel))


def dynamic_extent(kernel: Kernel, shared: object) -> int | None:
    """The dynamic shared extent ``shared`` (elements) of a launch of ``kernel``, checked
    (LCH-50): a :class:`LaunchError` when the kernel has a dynamic shared array and no
    extent is given, when an extent is given for a kernel without one, or when it is not
    an integer in 0..2**31-1."""
    dyn = dynamic_shared(kernel)
    if dyn is None:
        if shared is None:
            return None
        raise LaunchError(f"[LCH-50] kernel {kernel.name} has no dynamic shared array "
                          f"(shared x : T[]), so the launch cannot give a shared extent "
                          f"({shared!r})")
    if shared is None:
        raise LaunchError(f"[LCH-50] kernel {kernel.name} has the dynamic shared array "
                          f"{dyn.name} ({dyn.type}): the launch must give its extent in "
                          "elements (shared=N)", kernel.loc)
    if isinstance(shared, bool | np.bool_) or not isinstance(shared, int | np.integer) \
            or not 0 <= int(shared) < 2 ** 31:
        raise LaunchError(f"kernel {kernel.name}: the shared extent of {dyn.name} must be "
                          f"an integer in 0..{2 ** 31 - 1} (elements), not {shared!r}")
    return int(shared)
