"""The OpenCL backend (PyOpenCL; PoCL on the CPU here) (specs/launch.md, LCH-13).

Programs are built once per source with :data:`~sarek_py.codegen.opencl.BUILD_OPTIONS`
(correctly rounded single-precision division and square root, no contraction, no fast
math) and kept in a process-wide cache, since a PoCL build takes most of a second. Each
kernel object is emitted once per backend (LCH-17): its source, ABI and ``cl.Kernel`` are
cached, so a later launch of it only binds the arguments and enqueues.
Launches go to an in-order queue and do not wait; :meth:`OpenCLBackend.sync` does, and
then reads each launch's bounds-check record (CG-22, LCH-20). Launch parameters are checked
against the device's limits first (LCH-21).
``$SAREK_OPENCL_DEVICE`` picks a device whose platform or device name contains it.

Device arrays (LCH-60 …): a ``pyopencl.array.Array`` of this backend's context is used in
place (LCH-70) and a device array exports its buffer as ``.cl_array`` (LCH-71). On a device
that shares memory with the host (``CL_DEVICE_HOST_UNIFIED_MEMORY``: PoCL on the CPU) a
contiguous writable numpy argument is bound in place with ``CL_MEM_USE_HOST_PTR`` and mapped
after the launch, instead of copied in and out (LCH-67; :attr:`OpenCLBackend.zero_copy`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.codegen.atomics import missing_extensions
from sarek_py.codegen.cstyle import Emitted, emit
from sarek_py.codegen.opencl import BUILD_OPTIONS, OPENCL
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.nodes import Kernel
from sarek_py.runtime.args import ArgPlan, arg_plan
from sarek_py.runtime.base import Backend, DeviceArrayBase, DeviceBuffer, LaunchError
from sarek_py.runtime.cache import KernelCache, LruCache
from sarek_py.runtime.faults import FaultWatch
from sarek_py.runtime.limits import CPU_LOCAL_BYTES, DeviceLimits
from sarek_py.runtime.pocl import missing_linker
from sarek_py.runtime.shape import LaunchShape

#: built programs by (context id, source): shared by every backend object of the process
_PROGRAMS: LruCache[tuple[int, str], Any] = LruCache()


def _import_cl() -> Any:
    try:
        import pyopencl
    except ImportError:
        raise BackendUnavailable(
            "PyOpenCL is not installed (pip install pyopencl), so the opencl backend "
            "cannot run.") from None
    return pyopencl


def _pick_device(cl: Any) -> Any:
    try:
        platforms = cl.get_platforms()
    except Exception:  # pyopencl raises LogicError/RuntimeError without any ICD
        platforms = []
    want = os.environ.get("SAREK_OPENCL_DEVICE", "").lower()
    found: list[Any] = []
    for p in platforms:
        try:
            devices = p.get_devices()
        except Exception:
            continue
        for d in devices:
            if want and want not in (p.name + " " + d.name).lower():
                continue
            found.append(d)
    if not found:
        raise BackendUnavailable(
            "no OpenCL platform with a device was found (install an OpenCL driver such as "
            "the Debian package pocl-opencl-icd)." if not want else
            f"no OpenCL device matches SAREK_OPENCL_DEVICE={want!r}.")
    gpus = [d for d in found if d.type & cl.device_type.GPU]
    return (gpus or found)[0]


def _three(sizes: Any) -> tuple[int, int, int]:
    """The device's largest work-group extents along x, y, z."""
    s = [int(n) for n in sizes] + [1, 1, 1]
    return s[0], s[1], s[2]


def _handle(d: DeviceBuffer) -> Any:
    return d.handle


class OpenCLBackend(Backend):
    """Kernels as OpenCL C on the first OpenCL device (a GPU when there is one)."""

    name = "opencl"

    def __init__(self) -> None:
        super().__init__()
        self.cl = _import_cl()
        self.device = _pick_device(self.cl)
        no_ld = missing_linker(self.device, self.cl)
        if no_ld is not None:  # NAT-76: PoCL would abort the process at the first launch
            raise BackendUnavailable(no_ld)
        self.context = self.cl.Context([self.device])
        self.queue = self.cl.CommandQueue(self.context)
        self._kernels: LruCache[tuple[str, str], Any] = LruCache()
        self._built_limits: LruCache[tuple[str, str], tuple[int, int]] = LruCache()
        #: emitted, built kernels, checked (CG-22) and unchecked
        self._checked: KernelCache[tuple[Emitted, Any, ArgPlan]] = KernelCache(
            lambda k: self._compile(k, True))
        self._unchecked: KernelCache[tuple[Emitted, Any, ArgPlan]] = KernelCache(
            lambda k: self._compile(k, False))
        dev = self.device
        self.max_block = min(int(dev.max_work_group_size), int(dev.max_work_item_sizes[0]))
        self._limits = DeviceLimits(
            device=f"OpenCL device {dev.name}", max_block=self.max_block, max_blocks=None,
            max_global=2 ** int(dev.address_bits) - 1, shared_bytes=int(dev.local_mem_size),
            unit="work-items", max_block_dims=_three(dev.max_work_item_sizes),
            local_bytes=CPU_LOCAL_BYTES if dev.type & self.cl.device_type.CPU else None)
        self.faults = FaultWatch(self._alloc, self._zero, self._read, self.queue.finish,
                                 self._read_async)
        #: bind contiguous writable numpy arguments in place (LCH-67): on by default where
        #: the device shares memory with the host; False takes the copying path a
        #: discrete GPU takes
        self.zero_copy = bool(getattr(dev, "host_unified_memory", False))

    # ------------------------------------------------- device arrays, zero copy

    def buffer_id(self, handle: Any) -> Hashable:
        """The ``cl_mem`` address: one buffer, whatever Python object wraps it (LCH-64)."""
        return int(handle.int_ptr)

    def use_host(self, host: NDArray[Any]) -> Any:
        """A ``CL_MEM_USE_HOST_PTR`` buffer over ``host`` (LCH-67), or None: zero copy off,
        an empty, non-contiguous or read-only array (those are copied)."""
        if (not self.zero_copy or not host.nbytes or not host.flags.c_contiguous
                or not host.flags.writeable):
            return None
        mf = self.cl.mem_flags
        return self.cl.Buffer(self.context, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host)

    def release_host(self, handle: Any, host: NDArray[Any], written: bool) -> None:
        """Map and unmap the in-place buffer: what the device wrote is then in ``host``'s
        memory, as OpenCL guarantees only after a map (LCH-67)."""
        if not written:
            return  # the device read it only: the host's bytes are as they were
        mapped, _ = self.cl.enqueue_map_buffer(self.queue, handle, self.cl.map_flags.READ,
                                               0, host.shape, host.dtype, is_blocking=True)
        mapped.base.release(self.queue)

    def export_array(self, array: DeviceArrayBase, name: str) -> Any:
        """``cl_array``: the device array's buffer as a ``pyopencl.array.Array`` on this
        backend's queue, no copy (LCH-71)."""
        if name != "cl_array":
            return super().export_array(array, name)
        import pyopencl.array as cla

        return cla.Array(self.queue, array.shape, array.dtype, data=array.buffer.handle)

    def acquire(self, array: DeviceArrayBase) -> None:
        """A pyopencl array on another queue of this context: that queue is finished
        first, so the work queued on it before the launch is done (LCH-70)."""
        queue = getattr(array.owner, "queue", None)
        if queue is not None and queue != self.queue:
            queue.finish()

    def device_limits(self) -> DeviceLimits:
        return self._limits

    @property
    def device_name(self) -> str:
        return f"{self.device.platform.name}: {self.device.name}"

    def program(self, source: str) -> Any:
        """The built program of ``source`` (built once per context)."""
        key = (id(self.context), source)
        prg = _PROGRAMS.get(key)
        if prg is None:
            try:
                prg = self.cl.Program(self.context, source).build(
                    options=list(BUILD_OPTIONS))
            except self.cl.Error as exc:  # CG-61: the compiler's words, not a traceback
                lines = [ln.strip() for ln in str(exc).splitlines() if "error:" in ln]
                why = lines[0].split("error:", 1)[1].strip() if lines else "see its log"
                why = re.sub(r"^\S+\.cl:\d+:\d+:\s*", "", why)  # PoCL's temporary file
                raise LaunchError(f"the OpenCL compiler refused the emitted program: {why}"
                                  ) from None
            _PROGRAMS.put(key, prg)
            self.stats.builds += 1
        return prg

    def compiled(self, kernel: Kernel, checked: bool | None = None
                 ) -> tuple[Emitted, Any, ArgPlan]:
        """The emitted source and ABI of ``kernel``, its ``cl.Kernel`` (scalar argument
        types declared, so binding the arguments is a packing, not a type inquiry) and its
        argument plan, made at the first launch of this kernel object (LCH-17); the checked
        build (CG-22) when ``checked`` (default: :attr:`checked`)."""
        if checked is None:
            checked = self.checked
        return (self._checked if checked else self._unchecked).get(kernel)

    def _compile(self, kernel: Kernel, checked: bool) -> tuple[Emitted, Any, ArgPlan]:
        em = emit(kernel, OPENCL, checked=checked)
        self.stats.emits += 1
        self._check_extensions(kernel, em)
        key = (em.source, em.abi.name)
        k = self._kernels.get(key)
        plan = arg_plan(em.abi, kernel, np.uint8)
        if k is None:
            k = getattr(self.program(em.source), em.abi.name)
            # the same source has the same ABI, hence the same types: set once per object.
            # NAT-72: an f32 is passed as its numpy scalar's bytes (no type: PyOpenCL would
            # pack it through a double, quietening a signalling NaN)
            k.set_scalar_arg_dtypes([None if d == np.float32 else d for d in plan.dtypes])
            self._kernels.put(key, k)
        return em, k, plan

    def _check_extensions(self, kernel: Kernel, em: Emitted) -> None:
        """CG-31: a kernel whose atomics need an OpenCL extension the device lacks is
        refused before it is built, naming the extension and the atomic."""
        missing = missing_extensions(em.extensions, str(self.device.extensions))
        if missing:
            ext, why = missing[0]
            raise LaunchError(f"kernel {kernel.name}: {why} needs the OpenCL extension "
                              f"{ext}, which {self._limits.device} lacks")

    def _alloc(self, nbytes: int) -> Any:
        # an empty array still has the 8 bytes a checked access out of bounds reads (CG-22)
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, size=max(nbytes, 8))

    def _write(self, handle: Any, host: NDArray[Any]) -> None:
        self.cl.enqueue_copy(self.queue, handle, host, is_blocking=True)

    def _read(self, handle: Any, host: NDArray[Any]) -> None:
        self.cl.enqueue_copy(self.queue, host, handle, is_blocking=True)

    def _fill(self, handle: Any, nbytes: int, byte: int) -> None:
        self.cl.enqueue_fill_buffer(self.queue, handle, np.uint8(byte), 0, nbytes)

    def _zero(self, handle: Any, nbytes: int) -> None:
        self.cl.enqueue_fill_buffer(self.queue, handle, np.int32(0), 0, nbytes)

    def _read_async(self, handle: Any, host: NDArray[Any]) -> None:
        self.cl.enqueue_copy(self.queue, host, handle, is_blocking=False)

    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                threads: int, block: int, status: DeviceBuffer | None,
                check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None:
        em, k, plan = self.compiled(
            kernel, self.launch_checked(kernel, args, threads, block, shape, shared))  # CG-72
        self._check_built(kernel, em, k, block)
        fault = self.faults.arm(kernel.name, em.abi)
        try:
            k.set_args(*plan.values(args, threads, status, _handle, fault, shared,
                                    self._local_memory))
            if shape is None:
                blocks = -(-threads // block)
                glob: tuple[int, ...] = (blocks * block,)
                local: tuple[int, ...] = (block,)
            else:  # an ND-range: global size = grid * block along each axis (LCH-27)
                glob = tuple(g * b for g, b in zip(shape.grid, shape.block, strict=True))
                local = shape.block
            self.cl.enqueue_nd_range_kernel(self.queue, k, glob, local)
        except BaseException:
            if fault is not None:
                self.faults.forget()
            raise
        self.faults.launched()

    def _local_memory(self, nbytes: int) -> Any:
        """A ``__local`` buffer of ``nbytes`` for the dynamic shared array (CG-50); OpenCL
        refuses a local argument of size 0, so an empty one gets 8 bytes (its extent is 0:
        every access is still checked against it)."""
        return self.cl.LocalMemory(max(nbytes, 8))

    def _check_built(self, kernel: Kernel, em: Emitted, k: Any, block: int) -> None:
        """The built kernel's own limits (LCH-21): its largest work-group and the local
        memory it uses, as the driver reports them (asked once per source)."""
        key = (em.source, em.abi.name)
        known = self._built_limits.get(key)
        if known is None:
            info = self.cl.kernel_work_group_info
            known = (int(k.get_work_group_info(info.WORK_GROUP_SIZE, self.device)),
                     int(k.get_work_group_info(info.LOCAL_MEM_SIZE, self.device)))
            self._built_limits.put(key, known)
        most, local = known
        if block > most:
            raise LaunchError(f"kernel {kernel.name}: block size {block} exceeds the "
                              f"built kernel's limit of {most} work-items "
                              f"({self._limits.device})")
        if local > self._limits.shared_bytes:
            raise LaunchError(f"kernel {kernel.name}: the built kernel uses {local} bytes of "
                              f"local memory, more than the {self._limits.shared_bytes} "
                              f"bytes a work-group has ({self._limits.device})")

    def sync(self) -> None:
        """Wait for every launch, then raise the first out-of-bounds fault (LCH-20)."""
        self.queue.finish()
        self.faults.check()
