"""The shape of a launch of several dimensions on a backend (specs/launch.md, LCH-27).

``grid`` and ``block_shape`` are 1 to 3 positive extents each (``x`` first). The launch has
as many dimensions as the longer of them; a missing grid is ``ceil(threads / block size)``
blocks along ``x``. Threads are numbered as the interpreter numbers them (INT-1): block
after block, ``x`` fastest; the threads numbered ``threads`` or more do not exist. The
grid must hold the threads, and every thread of it must have an ``i32`` number.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.nodes import Kernel
from sarek_py.runtime.limits import MAX_THREADS, DeviceLimits


@attrs.frozen
class LaunchShape:
    """A launch's grid (in blocks) and block (in threads), each of ``dims`` extents."""

    grid: tuple[int, ...]
    block: tuple[int, ...]

    @property
    def dims(self) -> int:
        return len(self.grid)

    @property
    def block_size(self) -> int:
        return math.prod(self.block)

    @property
    def capacity(self) -> int:
        return math.prod(self.grid) * self.block_size

    def padded(self, n: int = 3) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Grid and block with extents of 1 added up to ``n`` dimensions."""
        return (self.grid + (1,) * (n - len(self.grid)),
                self.block + (1,) * (n - len(self.block)))


def _extents(kernel: Kernel, what: str, v: Any) -> tuple[int, ...]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        v = (v,)
    if not isinstance(v, (tuple, list)) or not 1 <= len(v) <= 3 or any(
            isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer))
            or not 1 <= d <= MAX_THREADS for d in v):
        raise LaunchError(f"kernel {kernel.name}: the {what} must be 1 to 3 integers in "
                          f"1..{MAX_THREADS}, not {v!r}")
    return tuple(int(d) for d in v)


def launch_shape(kernel: Kernel, threads: int, block: int, grid: Any,
                 block_shape: Any, limits: DeviceLimits | None) -> LaunchShape:
    """The checked shape of a launch given ``grid`` and/or ``block_shape`` (LCH-27)."""
    bshape = _extents(kernel, "block shape", block if block_shape is None else block_shape)
    bsize = math.prod(bshape)
    if grid is None:
        gshape: tuple[int, ...] = (max(1, -(-threads // bsize)),)
    else:
        gshape = _extents(kernel, "grid", grid)
    dims = max(len(gshape), len(bshape))
    shape = LaunchShape(gshape + (1,) * (dims - len(gshape)),
                        bshape + (1,) * (dims - len(bshape)))
    where = f"kernel {kernel.name}: a grid of {gshape} blocks of {bshape} threads"
    if shape.capacity < threads:
        raise LaunchError(f"{where} holds {shape.capacity} threads, fewer than the "
                          f"{threads} launched")
    if grid is not None and shape.capacity > MAX_THREADS:
        raise LaunchError(f"{where} has {shape.capacity} threads, more than {MAX_THREADS} "
                          "(2^31 - 1), the most a launch can number (global_thread_id is "
                          "an i32)")
    if limits is not None:
        g3, b3 = shape.padded()
        for k, axis in enumerate("xyz"):
            if limits.max_block_dims is not None and b3[k] > limits.max_block_dims[k]:
                raise LaunchError(f"{where}: block extent {b3[k]} along {axis} exceeds the "
                                  f"device's limit of {limits.max_block_dims[k]} "
                                  f"({limits.device})")
            if limits.max_grid_dims is not None and g3[k] > limits.max_grid_dims[k]:
                raise LaunchError(f"{where}: grid extent {g3[k]} along {axis} exceeds the "
                                  f"device's limit of {limits.max_grid_dims[k]} "
                                  f"({limits.device})")
    return shape
