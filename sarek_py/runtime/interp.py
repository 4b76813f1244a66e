"""The reference interpreter as a backend (specs/launch.md, LCH-12).

Device memory is numpy arrays held by the backend; a launch runs
:func:`sarek_py.ir.interp.run_kernel` on them at once (a launch that has finished early is
still a launch that has not been waited for), and the stop codes it returns are written into
the status buffer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.nodes import Kernel
from sarek_py.runtime.base import Backend, DeviceBuffer
from sarek_py.runtime.shape import LaunchShape


class InterpBackend(Backend):
    """Runs kernels in the reference interpreter; always available."""

    name = "interp"
    whole_blocks_for_barriers = False  # the interpreter runs a partial last block exactly

    def _alloc(self, nbytes: int) -> Any:
        return np.zeros(nbytes, np.uint8)

    def _write(self, handle: Any, host: NDArray[Any]) -> None:
        handle[: host.nbytes] = host.reshape(-1).view(np.uint8)

    def _read(self, handle: Any, host: NDArray[Any]) -> None:
        host.reshape(-1).view(np.uint8)[...] = handle[: host.nbytes]

    def _fill(self, handle: Any, nbytes: int, byte: int) -> None:
        handle[:nbytes] = byte

    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                threads: int, block: int, status: DeviceBuffer | None,
                check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None:
        from sarek_py.ir.interp import run_kernel  # the interpreter imports numpy only

        views: dict[str, Any] = {}
        for name, v in args.items():
            if isinstance(v, DeviceBuffer):
                views[name] = v.handle.view(v.dtype).reshape(v.shape)
            else:
                views[name] = v
        res = run_kernel(kernel, views, threads, block, check_races=check_races,
                         grid=None if shape is None else shape.grid,
                         block_shape=None if shape is None else shape.block, shared=shared,
                         bool_bytes=False)  # NAT-70: checked by start
        if status is not None:
            status.handle.view(np.int32)[:threads] = res.stop_codes

    def sync(self) -> None:
        pass

