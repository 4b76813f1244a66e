"""Which build a device launch runs: the unchecked one when the launch is proved in bounds
(specs/codegen.md CG-70 … CG-75, specs/launch.md LCH-90).

:func:`proved_in_bounds` asks :func:`~sarek_py.analysis.launch_bounds.launch_in_bounds`
with the launch's own values: its integer and ``bool`` scalar arguments, the extents of its
device buffers, the thread count, grid and block, and the dynamic shared extent. Every
launch asks, so the answer is cached per kernel object by the values the proof depends on
(float scalars and the bytes of arrays are not among them): a host loop relaunching a
kernel with the same shape pays a dictionary look-up.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from sarek_py.analysis.launch_bounds import launch_in_bounds
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.runtime.cache import KernelCache, LruCache

if TYPE_CHECKING:
    from sarek_py.runtime.shape import LaunchShape

#: distinct launches remembered per kernel object
PER_KERNEL = 64

_PROOFS: KernelCache[LruCache[Hashable, bool]] = KernelCache(lambda k: LruCache(PER_KERNEL))


def proved_in_bounds(kernel: Kernel, args: Mapping[str, Any],
                     threads: int, block: int, shape: LaunchShape | None,
                     shared: int | None) -> bool:
    """Whether every array access of this launch provably lies in bounds (CG-70); the
    launch's arguments as :meth:`Backend._launch` gets them: a ``DeviceBuffer`` (its
    ``shape``) per array, a numpy scalar per scalar."""
    key: list[Hashable] = [threads, block, shared,
                           None if shape is None else (shape.grid, shape.block)]
    scalars: dict[str, int] = {}
    extents: dict[str, tuple[int, ...]] = {}
    for p in kernel.params:
        v = args.get(p.name)
        if isinstance(p.type, ArrayType):
            ext = getattr(v, "shape", None)
            if isinstance(v, np.generic) or not isinstance(ext, tuple):
                return False
            extents[p.name] = ext
            key.append(ext)
        elif p.scalar.is_int or p.scalar is Scalar.BOOL:
            if not isinstance(v, (np.generic, int)):
                return False
            scalars[p.name] = int(v)
            key.append(scalars[p.name])
    cache = _PROOFS.get(kernel)
    k = tuple(key)
    known = cache.get(k)
    if known is not None:
        return known
    if shape is None:
        grid: tuple[int, ...] = (-(-threads // block),) if threads > 0 else (1,)
        blk: tuple[int, ...] = (block,)
    else:
        grid, blk = shape.grid, shape.block
    proved = launch_in_bounds(kernel, scalars, extents, threads, grid, blk, shared)
    cache.put(k, proved)
    return proved
