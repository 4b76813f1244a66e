"""The c backend: kernels as C + OpenMP, compiled by the system C compiler and called
through ctypes (specs/native.md, NAT-13 … NAT-30).

Device memory is host memory. A buffer the backend allocates is a numpy byte array; a
contiguous, writable, aligned numpy argument is used in place (zero copy, LCH-67,
counted in ``bytes_mapped``), any other is copied in and back as on every backend. A launch
runs to its end before ``_launch`` returns (the ctypes call releases the GIL while the
OpenMP threads run); :meth:`CBackend.sync` then reports the bounds faults (LCH-20).

Each kernel object is emitted once per backend (LCH-17); the library of its source is
found in, or compiled into, the disk cache of :mod:`sarek_py.runtime.ccompiler` and loaded
once per process. A kernel this backend cannot run exactly (:func:`~sarek_py.codegen.c99.
refusal`: a barrier, shared memory, atomics) is refused with the reason (NAT-4); the
automatic choice (``get_backend("default")``, LCH-15) sends it to the next backend instead
(:class:`AutoCBackend`, NAT-25).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Hashable, Mapping
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.codegen.c99 import C99, refusal
from sarek_py.codegen.cstyle import Emitted, emit
from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.nodes import Kernel, While
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes
from sarek_py.runtime import hostmem
from sarek_py.runtime.args import ArgPlan, arg_plan
from sarek_py.runtime.base import Backend, DeviceArrayBase, DeviceBuffer
from sarek_py.runtime.cache import KernelCache
from sarek_py.runtime.ccompiler import compiler, probe
from sarek_py.runtime.clibrary import cancel_flag, kernel_function
from sarek_py.runtime.faults import FaultWatch
from sarek_py.runtime.interop import DL_CPU
from sarek_py.runtime.interruptible import call_interruptibly
from sarek_py.runtime.limits import CPU_LOCAL_BYTES, MAX_THREADS, DeviceLimits
from sarek_py.runtime.native_launch import NativeLaunch, launch_geometry
from sarek_py.runtime.once import OnceKernelCache
from sarek_py.runtime.prepared import PreparedLaunch
from sarek_py.runtime.shape import LaunchShape


class CRefused(LaunchError):
    """A kernel the c backend does not run (NAT-4): the reason names the construct."""


_CTYPES: dict[Scalar, Any] = {Scalar.I32: ctypes.c_int, Scalar.I64: ctypes.c_longlong,
                              Scalar.F32: ctypes.c_float, Scalar.F64: ctypes.c_double,
                              Scalar.BOOL: ctypes.c_ubyte}


@attrs.frozen(eq=False)
class Compiled:
    """One kernel ready to launch: its emitted C and ABI, the C function, its argument plan
    and, per argument, the conversion of the plan's value to what ctypes passes."""

    emitted: Emitted
    function: Any
    plan: ArgPlan
    convert: tuple[Any, ...]
    #: the library's ``sarek_cancel`` word where the kernel has a ``while`` loop: its
    #: launches can be interrupted (NAT-45); None otherwise
    cancel: Any = None


def _pointer(v: Any) -> int:
    return int(v.ctypes.data)


def _scalar(conv: type) -> Any:
    return lambda v: conv(v.item() if isinstance(v, np.generic) else v)


def _f32_bits(v: Any) -> Any:
    """An f32 argument with its bits (NAT-72): through a Python float, a signalling NaN
    would be widened to a double and quietened."""
    return ctypes.c_float.from_buffer_copy(np.float32(v).tobytes())


def _address(d: DeviceBuffer) -> Any:
    return d.handle


class CBackend(Backend):
    """Kernels as C with OpenMP on this machine's cores (the backend named ``c``)."""

    name = "c"
    whole_blocks_for_barriers = False  # kernels with barriers are refused (NAT-4)
    host_arrays_in_place = True  # kernels run on host memory, done when they return (OFF-16)
    #: a flat 1-D launch indexes with a wrapping ``lo + t`` (CG-18) that GCC does not
    #: vectorise as consecutive accesses; the rows kernel's 64-bit index and leading guard
    #: are split into an unguarded simd loop (NAT-65): 3.7x (a copy) to 5.4x (a 3-point
    #: stencil) faster per point (NAT-80)
    rows_1d = True

    def __init__(self) -> None:
        super().__init__()
        probe()  # a compiler that builds OpenMP code, or BackendUnavailable (NAT-15)
        if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
            # NAT-19: idle OpenMP threads sleep instead of spinning, so a launch does not
            # wait for a spinning thread the system has descheduled (read when the OpenMP
            # runtime loads, with the first kernel)
            os.environ["OMP_WAIT_POLICY"] = "passive"
        self.compiler = compiler()
        #: use contiguous writable numpy arguments in place (LCH-67, NAT-20); False takes
        #: the copying path
        self.zero_copy = True
        # NAT-71: threads launching one new kernel emit and build it once
        self._checked: KernelCache[Compiled] = OnceKernelCache(
            lambda k: self._compile(k, True))
        self._unchecked: KernelCache[Compiled] = OnceKernelCache(
            lambda k: self._compile(k, False))
        self._threads = threading.local()
        self._limits = DeviceLimits(device=f"the CPU (C + OpenMP, {os.cpu_count()} cores)",
                                    max_block=MAX_THREADS, max_blocks=None, max_global=None,
                                    shared_bytes=0, local_bytes=CPU_LOCAL_BYTES)

    @property
    def faults(self) -> FaultWatch:
        """The fault buffers of the calling Python thread's launches (NAT-21): a launch has
        finished when it returns, in the thread that made it, so each thread's ``sync``
        reports its own launches' faults, not those of a launch running in another."""
        watch: FaultWatch | None = getattr(self._threads, "watch", None)
        if watch is None:
            watch = FaultWatch(self._alloc, self._zero, self._read, lambda: None)
            self._threads.watch = watch
        return watch

    def device_limits(self) -> DeviceLimits:
        return self._limits

    @property
    def device_name(self) -> str:
        return self._limits.device

    # ------------------------------------------------------------ kernels

    def refusal(self, kernel: Kernel) -> str | None:
        """Why this backend does not run ``kernel`` (NAT-4), or ``None``."""
        return refusal(kernel)

    def launch_shape(self, kernel: Kernel, threads: int, block: int, grid: Any,
                     block_shape: Any, shared: int | None = None
                     ) -> tuple[int, int, LaunchShape | None]:
        """NAT-4: a kernel this backend does not run is refused first, before its launch
        is checked against limits or anything is allocated."""
        why = refusal(kernel)
        if why is not None:
            raise CRefused(why, kernel.loc)
        return super().launch_shape(kernel, threads, block, grid, block_shape, shared)

    def compiled(self, kernel: Kernel, checked: bool | None = None) -> Compiled:
        """The kernel's C function and argument plan, made at its first launch (LCH-17);
        the checked build (CG-22) when ``checked`` (default: :attr:`checked`)."""
        if checked is None:
            checked = self.checked
        return (self._checked if checked else self._unchecked).get(kernel)

    def _compile(self, kernel: Kernel, checked: bool) -> Compiled:
        why = refusal(kernel)
        if why is not None:
            raise CRefused(why, kernel.loc)
        em = emit(kernel, C99, checked=checked)
        self.stats.emits += 1
        fn, loaded = kernel_function(em.source, em.abi.name)  # checked: NAT-14, NAT-41
        if loaded:
            self.stats.builds += 1
        plan = arg_plan(em.abi, kernel, np.uint8)
        argtypes: list[Any] = []
        convert: list[Any] = []
        for kind, param, _dim, _conv in plan.slots:
            if kind in ("array", "status", "fault"):
                argtypes.append(ctypes.c_void_p)
                convert.append(None)
            elif kind in ("extent", "shared_extent"):
                argtypes.append(ctypes.c_int)
                convert.append(_scalar(int))
            elif kind == "threads":
                argtypes.append(ctypes.c_longlong)
                convert.append(_scalar(int))
            else:
                t = kernel.param(param).scalar
                argtypes.append(_CTYPES[t])
                convert.append(_f32_bits if t is Scalar.F32
                               else _scalar(float if t.is_float else int))
        fn.argtypes = [*argtypes, ctypes.c_void_p]
        fn.restype = None
        loops = any(isinstance(n, While) for body in (kernel.body, *(h.body for h in
                                                                     kernel.helpers))
                    for n in iter_nodes(body))
        return Compiled(em, fn, plan, tuple(convert), cancel_flag(em.source) if loops else None)

    # ------------------------------------------------------------ memory

    def shares_arrays(self, other: Backend) -> bool:
        """NAT-43: the c backend and the default that picks it share their device arrays
        (numpy byte buffers of host memory)."""
        return isinstance(other, CBackend)

    def buffer_id(self, handle: Any) -> Hashable:
        """The address of the memory (LCH-64)."""
        return _pointer(handle)

    def export_array(self, array: DeviceArrayBase, name: str) -> Any:
        """``__dlpack__`` and ``__dlpack_device__`` of a device array of this backend: its
        host memory, no copy, as a CPU DLPack tensor (NAT-74); other exports are
        refused."""
        if name == "__dlpack_device__":
            return lambda: (DL_CPU, 0)
        if name == "__dlpack__":
            view = self._bytes(array.buffer.handle)[: array.buffer.nbytes].view(array.dtype)
            return view.reshape(array.shape).__dlpack__
        return super().export_array(array, name)

    def use_host(self, host: NDArray[Any]) -> Any:
        """The numpy array itself (LCH-67, NAT-20), or None: zero copy off, an empty,
        non-contiguous, read-only or unaligned array (those are copied)."""
        if (not self.zero_copy or not host.nbytes or not host.flags.c_contiguous
                or not host.flags.writeable or not host.flags.aligned):
            return None
        return host

    def host_zeros(self, shape: tuple[int, ...], dtype: Any) -> NDArray[Any]:
        """Large arrays on huge pages (NAT-78): the kernels touch them first, in place."""
        return hostmem.zeros(shape, dtype)

    def _alloc(self, nbytes: int) -> Any:
        # an empty array still has the 8 bytes a checked access out of bounds reads (CG-22);
        # a large buffer on huge pages, as a host program's arrays (NAT-79)
        return hostmem.zeros((max(nbytes, 8),), np.uint8)

    @staticmethod
    def _bytes(handle: Any) -> NDArray[np.uint8]:
        return np.asarray(handle).reshape(-1).view(np.uint8)

    def _write(self, handle: Any, host: NDArray[Any]) -> None:
        self._bytes(handle)[: host.nbytes] = host.reshape(-1).view(np.uint8)

    def _read(self, handle: Any, host: NDArray[Any]) -> None:
        host.reshape(-1).view(np.uint8)[...] = self._bytes(handle)[: host.nbytes]

    def _fill(self, handle: Any, nbytes: int, byte: int) -> None:
        self._bytes(handle)[:nbytes] = byte

    def _zero(self, handle: Any, nbytes: int) -> None:
        self._bytes(handle)[:nbytes] = 0

    # ------------------------------------------------------------ launches

    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                threads: int, block: int, status: DeviceBuffer | None,
                check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None:
        c = self.compiled(
            kernel, self.launch_checked(kernel, args, threads, block, shape, shared))  # CG-72
        geometry = launch_geometry(threads, block, shape)
        fault = self.faults.arm(kernel.name, c.emitted.abi)
        try:
            values = c.plan.values(args, threads, status, _address, fault, shared)
            cargs = [(_pointer(v) if conv is None else conv(v))
                     for v, conv in zip(values, c.convert, strict=True)]
            if c.cancel is None:
                c.function(*cargs, _pointer(geometry))
            else:  # a while loop may not end: Ctrl-C must reach it (NAT-45)
                call_interruptibly(lambda: c.function(*cargs, _pointer(geometry)), c.cancel)
        except BaseException:
            if fault is not None:
                self.faults.forget()
            raise
        self.faults.launched()

    def _prepare(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                 threads: int, block: int, shape: LaunchShape | None, shared: int | None,
                 check_races: bool) -> PreparedLaunch:
        """NAT-62: the checked launch with its C arguments built once; a subclass that
        sends some launches elsewhere (the default's fallback, NAT-25) runs each through
        its own ``_launch``."""
        if type(self)._launch is not CBackend._launch:
            return super()._prepare(kernel, args, threads, block, shape, shared, check_races)
        return NativeLaunch(self, kernel, args, threads, block, shape, shared, check_races)

    def sync(self) -> None:
        """Every launch has finished already; raise the first bounds fault (LCH-20)."""
        self.faults.check()
