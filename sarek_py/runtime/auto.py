"""The automatic choice on a machine without CUDA: each kernel on the c backend where it
can run there, else on the next backend, OpenCL or the interpreter (specs/native.md,
NAT-25 … NAT-29; specs/launch.md, LCH-15).

``get_backend("default")`` is this backend when no GPU is usable and a C compiler with
OpenMP is. Its memory is the c backend's (numpy arrays, host memory), so device arrays,
residency and pipelines work unchanged; a kernel the c backend refuses (a barrier, shared
memory, atomics: NAT-4) is launched on the next backend over the same memory: on OpenCL
through buffers that use the host memory in place (copied in and out where the device does
not share it), on the interpreter through views of it. The choice is per kernel and is
recorded: :attr:`AutoCBackend.choices` maps each kernel launched to the backend that ran
it and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from sarek_py.ir.diagnostics import BackendUnavailable, LaunchError
from sarek_py.ir.nodes import Kernel
from sarek_py.runtime.base import Backend, DeviceBuffer
from sarek_py.runtime.cache import kernel_facts
from sarek_py.runtime.limits import DeviceLimits
from sarek_py.runtime.native import CBackend
from sarek_py.runtime.shape import LaunchShape

#: the backends a kernel the c backend refuses goes to, in order (NAT-25)
FALLBACKS = ("opencl", "interp")


class AutoCBackend(CBackend):
    """The c backend, sending the kernels it refuses to the next backend (NAT-25)."""

    name = "c"
    _checked_flag: bool = True

    def __init__(self) -> None:
        super().__init__()
        self._fallback: Backend | None = None
        #: per kernel name, the backend that ran its last launch and why (NAT-27)
        self.choices: dict[str, str] = {}

    @property
    def checked(self) -> bool:
        """Whether launches are bounds-checked (CG-22): ``False`` (``run --unchecked``) runs
        the unchecked build on whichever backend runs the kernel, the fallback included
        (NAT-73); the interpreter always checks."""
        return self._checked_flag

    @checked.setter
    def checked(self, value: bool) -> None:
        self._checked_flag = value
        if getattr(self, "_fallback", None) is not None:
            self._fallback_checks()

    def _fallback_checks(self) -> None:
        assert self._fallback is not None
        if self._fallback.name != "interp":  # NAT-73: the interpreter always checks
            self._fallback.checked = self._checked_flag

    @property
    def fallback(self) -> Backend:
        """The first of :data:`FALLBACKS` available here (made at the first refusal)."""
        if self._fallback is None:
            from sarek_py.runtime import get_backend

            for name in FALLBACKS:
                try:
                    self._fallback = get_backend(name)
                    break
                except BackendUnavailable:
                    continue
            assert self._fallback is not None, "the interpreter is always available"
            if not self._checked_flag:
                self._fallback_checks()
        return self._fallback

    def device_limits(self) -> DeviceLimits:
        # kernels with shared memory go to the fallback: its shared memory is the limit
        limits = super().device_limits()
        theirs = self.fallback.device_limits()
        return attrs.evolve(limits, shared_bytes=theirs.shared_bytes
                            if theirs is not None else 1 << 30)

    def launch_shape(self, kernel: Kernel, threads: int, block: int, grid: Any,
                     block_shape: Any, shared: int | None = None
                     ) -> tuple[int, int, LaunchShape | None]:
        """The fallback's checks for a kernel it will run (its limits, LCH-21)."""
        if self.refusal(kernel) is not None:
            return self.fallback.launch_shape(kernel, threads, block, grid, block_shape,
                                              shared)
        return super().launch_shape(kernel, threads, block, grid, block_shape, shared)

    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                threads: int, block: int, status: DeviceBuffer | None,
                check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None:
        why = self.refusal(kernel)
        if why is None:
            self.choices[kernel.name] = "c"
            super()._launch(kernel, args, threads, block, status, check_races, shape, shared)
            return
        other = self.fallback
        self.choices[kernel.name] = f"{other.name} ({why.split(',')[0]})"
        if (other.whole_blocks_for_barriers and threads % block
                and kernel_facts(kernel).has_barrier):
            raise LaunchError(
                f"kernel {kernel.name} has a barrier: its {threads} threads must fill whole "
                f"blocks of {block} on the {other.name} backend (LCH-6)")
        # the fallback's buffers over this backend's memory, exactly the bytes of each
        views: dict[int, DeviceBuffer] = {}

        def view(d: DeviceBuffer) -> DeviceBuffer:
            found = views.get(id(d))
            if found is None:
                raw = self._bytes(d.handle)[: d.nbytes]
                found = views[id(d)] = DeviceBuffer(raw, d.shape, d.dtype)
            return found

        theirs: dict[str, DeviceBuffer | np.generic] = {
            n: view(v) if isinstance(v, DeviceBuffer) else v for n, v in args.items()}
        their_status = None if status is None else view(status)
        if other.name == "interp":
            other._launch(kernel, theirs, threads, block, their_status, check_races, shape,
                          shared)
            other.sync()
            return
        self._on_device(other, kernel, theirs, threads, block, their_status, check_races,
                        shape, shared)

    @staticmethod
    def _on_device(other: Backend, kernel: Kernel,
                   args: Mapping[str, DeviceBuffer | np.generic], threads: int, block: int,
                   status: DeviceBuffer | None, check_races: bool,
                   shape: LaunchShape | None, shared: int | None) -> None:
        """Run ``kernel`` on device backend ``other`` over host byte views: each used in
        place where ``other`` can (LCH-67), else copied in and back; then waited for, so
        its bounds faults are raised here (LCH-20)."""
        moved: list[tuple[DeviceBuffer, DeviceBuffer, bool]] = []
        mine: dict[int, DeviceBuffer] = {}

        def bind(d: DeviceBuffer) -> DeviceBuffer:
            found = mine.get(id(d))
            if found is not None:
                return found
            raw = d.handle
            handle = other.use_host(raw) if raw.nbytes else None
            if handle is not None:
                found = DeviceBuffer(handle, d.shape, d.dtype)
                moved.append((d, found, True))
            else:
                found = other.allocate(d.shape, d.dtype)
                if raw.nbytes:
                    other._write(found.handle, raw)
                moved.append((d, found, False))
            mine[id(d)] = found
            return found

        bound: dict[str, DeviceBuffer | np.generic] = {
            n: bind(v) if isinstance(v, DeviceBuffer) else v for n, v in args.items()}
        their_status = None if status is None else bind(status)
        try:
            other._launch(kernel, bound, threads, block, their_status, check_races, shape,
                          shared)
            other.sync()
        finally:
            for d, theirs, in_place in moved:
                if in_place:
                    other.release_host(theirs.handle, d.handle, True)
                elif d.nbytes:
                    other._read(theirs.handle, d.handle)
