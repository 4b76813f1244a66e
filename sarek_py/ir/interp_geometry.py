"""The shape of a launch for the reference interpreter: lanes, blocks and the values of the
thread intrinsics (specs/interpreter.md, INT-1).

Lane ``t`` of the interpreter is the thread whose linear global id is ``t``; only the
``threads`` existing threads are lanes. Threads are numbered block after block, and inside a
block and inside the grid ``x`` varies fastest::

    t = block_linear * block_size + thread_linear
    block_linear = bx + gx * (by + gy * bz),  thread_linear = tx + dx * (ty + dy * tz)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.interp_ops import Val

_LANES: list[NDArray[np.int32]] = [np.arange(0, dtype=np.int32)]


def _lane_ids(threads: int) -> NDArray[np.int32]:
    """A read-only ``arange(threads)``, a view of one cached vector (launches reuse it)."""
    if _LANES[0].size < threads:
        lanes = np.arange(threads, dtype=np.int32)
        lanes.flags.writeable = False
        _LANES[0] = lanes
    return _LANES[0][:threads]


class Geometry:
    """Lanes and blocks of one launch, and the thread intrinsics as lane values (cached)."""

    def __init__(self, threads: int, block: tuple[int, int, int], grid: tuple[int, int, int]):
        self.threads = threads
        self.block = block
        self.grid = grid
        self.block_size = block[0] * block[1] * block[2]
        self.nblocks = grid[0] * grid[1] * grid[2]
        #: the global linear thread id of each lane (the identity lane vector, read-only)
        self.lane_ids: NDArray[np.int32] = _lane_ids(threads)
        self._cache: dict[str, Val] = {}
        self._block_of_lane: NDArray[np.int64] | None = None

    @property
    def block_of_lane(self) -> NDArray[np.int64]:
        """The linear block number of each lane."""
        if self._block_of_lane is None:
            self._block_of_lane = np.arange(self.threads, dtype=np.int64) // self.block_size
        return self._block_of_lane

    def existing_per_block(self) -> NDArray[np.int64]:
        """How many existing threads each block has (the last ones may have fewer)."""
        counts = np.full(self.nblocks, self.block_size, dtype=np.int64)
        full, rest = divmod(self.threads, self.block_size)
        counts[full:] = 0
        if rest and full < self.nblocks:
            counts[full] = rest
        return counts

    def _split(self, linear: NDArray[Any], dims: tuple[int, int, int]) -> list[Val]:
        """Coordinates (x, y, z) of ``linear`` in a box of ``dims``; a coordinate that is
        zero in every lane is a uniform scalar."""
        out: list[Val] = []
        rest: NDArray[Any] = linear
        for k, d in enumerate(dims):
            if d == 1:
                out.append(np.int32(0))
                continue
            last = all(e == 1 for e in dims[k + 1:])
            out.append((rest if last else rest % d).astype(np.int32))
            rest = rest // d
        return out

    def intrinsic(self, name: str) -> Val:
        """The value of a thread intrinsic in every lane (an ``i32``)."""
        v = self._cache.get(name)
        if v is not None:
            return v
        if name == "global_thread_id":
            v = self.lane_ids
        elif name.startswith("block_dim_"):
            v = np.int32(self.block["xyz".index(name[-1])])
        elif name.startswith("grid_dim_"):
            v = np.int32(self.grid["xyz".index(name[-1])])
        elif name.startswith("thread_idx_"):
            tl = self.lane_ids % np.int32(self.block_size)
            for axis, c in zip("xyz", self._split(tl, self.block), strict=True):
                self._cache[f"thread_idx_{axis}"] = c
            v = self._cache[name]
        elif name.startswith("block_idx_"):
            bl = self.lane_ids // np.int32(self.block_size)
            for axis, c in zip("xyz", self._split(bl, self.grid), strict=True):
                self._cache[f"block_idx_{axis}"] = c
            v = self._cache[name]
        elif name.startswith("global_idx_"):
            axis = name[-1]
            k = "xyz".index(axis)
            one_d = self.block[1] * self.block[2] * self.grid[1] * self.grid[2] == 1
            if axis == "x" and one_d:
                v = self.lane_ids
            else:
                b: Any = self.intrinsic(f"block_idx_{axis}")
                t: Any = self.intrinsic(f"thread_idx_{axis}")
                v = b * np.int32(self.block[k]) + t
        else:
            raise ValueError(f"unknown thread intrinsic {name}")
        self._cache[name] = v
        return v
