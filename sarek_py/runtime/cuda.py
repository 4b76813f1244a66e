"""The CUDA backend (PyCUDA, imported lazily) (specs/launch.md, LCH-14).

Kernels are emitted as CUDA C, compiled to PTX by our own nvcc call
(:func:`sarek_py.codegen.nvcc.compile_ptx`: no contraction, IEEE division and square root,
the device's own architecture, cached on disk) and loaded with the driver. Without PyCUDA,
without a driver or without a GPU the backend cannot be created and says why in one
sentence (:class:`~sarek_py.ir.diagnostics.BackendUnavailable`). Launch parameters are checked
against the device's attributes first (LCH-21); :meth:`CudaBackend.sync` reads each launch's
bounds-check record (CG-22, LCH-20).

Device arrays (LCH-60 …): an object with ``__cuda_array_interface__`` or a CUDA DLPack
export is used in place (LCH-72, LCH-73, :mod:`sarek_py.runtime.interop`); a device array
of this backend exports ``__cuda_array_interface__``, ``__dlpack__`` and
``__dlpack_device__`` (LCH-74). A buffer handle is a PyCUDA allocation or a raw address.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.codegen.cstyle import Emitted, emit
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.nvcc import compile_ptx
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.dynamic_shared import dynamic_shared, element_bytes
from sarek_py.ir.nodes import Kernel
from sarek_py.runtime.args import ArgPlan, arg_plan
from sarek_py.runtime.base import Backend, DeviceArrayBase, DeviceBuffer
from sarek_py.runtime.cache import KernelCache, LruCache
from sarek_py.runtime.faults import FaultWatch
from sarek_py.runtime.limits import DeviceLimits
from sarek_py.runtime.shape import LaunchShape


def _import_driver() -> Any:
    try:
        import pycuda.driver as drv
    except ImportError:
        raise BackendUnavailable(
            "PyCUDA is not installed (pip install 'sarek_py[cuda]' on a machine with a CUDA "
            "driver), so the cuda backend cannot run.") from None
    except Exception as exc:  # pycuda present but libcuda missing
        raise BackendUnavailable(f"PyCUDA cannot load the CUDA driver ({exc}).") from None
    try:
        drv.init()
        count = drv.Device.count()
    except Exception as exc:
        raise BackendUnavailable(f"the CUDA driver cannot start ({exc}).") from None
    if count < 1:
        raise BackendUnavailable("the CUDA driver found no GPU.")
    return drv


def _handle(d: DeviceBuffer) -> Any:
    """The kernel argument of a buffer: a PyCUDA allocation as is, a foreign device address
    (an ``int``, LCH-72) as ``np.uintp``, which PyCUDA passes as a pointer."""
    h = d.handle
    return np.uintp(h) if isinstance(h, int) else h


class CudaBackend(Backend):
    """Kernels as CUDA C on GPU 0, through PyCUDA."""

    name = "cuda"

    def __init__(self) -> None:
        super().__init__()
        self.drv = _import_driver()
        self.device = self.drv.Device(0)
        self.context = self.device.retain_primary_context()
        self.context.push()
        major, minor = self.device.compute_capability()
        self.arch = f"sm_{major}{minor}"
        self._functions: LruCache[str, tuple[Emitted, Any, Any]] = LruCache()
        #: emitted, loaded kernels, checked (CG-22) and unchecked
        self._checked: KernelCache[tuple[Emitted, Any, ArgPlan]] = KernelCache(
            lambda k: self._compile(k, True))
        self._unchecked: KernelCache[tuple[Emitted, Any, ArgPlan]] = KernelCache(
            lambda k: self._compile(k, False))
        attr = self.drv.device_attribute

        def get(name: str) -> int:
            return int(self.device.get_attribute(getattr(attr, name)))

        self.max_block = min(get("MAX_THREADS_PER_BLOCK"), get("MAX_BLOCK_DIM_X"))
        self._limits = DeviceLimits(
            device=f"CUDA device {self.device_name}", max_block=self.max_block,
            max_blocks=get("MAX_GRID_DIM_X"), max_global=None,
            shared_bytes=get("MAX_SHARED_MEMORY_PER_BLOCK"),
            max_block_dims=(get("MAX_BLOCK_DIM_X"), get("MAX_BLOCK_DIM_Y"),
                            get("MAX_BLOCK_DIM_Z")),
            max_grid_dims=(get("MAX_GRID_DIM_X"), get("MAX_GRID_DIM_Y"),
                           get("MAX_GRID_DIM_Z")))
        self.faults = FaultWatch(self._alloc, lambda h, n: self._fill(h, n, 0), self._read,
                                 self.drv.Context.synchronize)

    def device_limits(self) -> DeviceLimits:
        return self._limits

    # ------------------------------------------------------------------ device arrays

    def buffer_id(self, handle: Any) -> Hashable:
        """The device address: one buffer, an allocation or a foreign address (LCH-64)."""
        return int(handle)

    def export_array(self, array: DeviceArrayBase, name: str) -> Any:
        """``__cuda_array_interface__`` (version 3), ``__dlpack__`` and
        ``__dlpack_device__`` of a device array of this backend, its memory (LCH-74)."""
        from sarek_py.runtime import interop

        if name == "__cuda_array_interface__":
            return interop.cuda_interface_of(array.buffer)
        if name == "__dlpack_device__":
            return lambda: (interop.DL_CUDA, self.device_ordinal)
        if name == "__dlpack__":
            def capsule(stream: Any = None, **_: Any) -> Any:
                self.sync()  # our launches are done before the consumer's stream reads
                return interop.dlpack_capsule(int(array.buffer.handle), array.shape,
                                              array.dtype, (interop.DL_CUDA,
                                                            self.device_ordinal), array)
            return capsule
        return super().export_array(array, name)

    @property
    def device_ordinal(self) -> int:
        return 0

    def acquire(self, array: DeviceArrayBase) -> None:
        """A foreign array (LCH-72, LCH-73): the context is synchronized first, so work
        its producer queued on any stream is done before the launch."""
        if array.owner is not None:
            self.drv.Context.synchronize()

    @property
    def device_name(self) -> str:
        return f"{self.device.name()} ({self.arch})"

    def compiled(self, kernel: Kernel, checked: bool | None = None
                 ) -> tuple[Emitted, Any, ArgPlan]:
        """The emitted source and ABI of ``kernel``, its loaded function and its argument
        plan, made at the first launch of this kernel object (LCH-17); one module per
        distinct source; the checked build (CG-22) when ``checked`` (default:
        :attr:`checked`)."""
        if checked is None:
            checked = self.checked
        return (self._checked if checked else self._unchecked).get(kernel)

    def _compile(self, kernel: Kernel, checked: bool) -> tuple[Emitted, Any, ArgPlan]:
        em = emit(kernel, CUDA, checked=checked)
        self.stats.emits += 1
        hit = self._functions.get(em.source)
        if hit is None:
            module = self.drv.module_from_buffer(compile_ptx(em.source, self.arch).encode())
            self.stats.builds += 1
            hit = (em, module, module.get_function(em.abi.name))
            self._functions.put(em.source, hit)
        return em, hit[2], arg_plan(em.abi, kernel, np.uint8)

    def _alloc(self, nbytes: int) -> Any:
        # an empty array still has the 8 bytes a checked access out of bounds reads (CG-22)
        return self.drv.mem_alloc(max(nbytes, 8))

    def _write(self, handle: Any, host: NDArray[Any]) -> None:
        self.drv.memcpy_htod(handle, host)

    def _read(self, handle: Any, host: NDArray[Any]) -> None:
        self.drv.memcpy_dtoh(host, handle)

    def _fill(self, handle: Any, nbytes: int, byte: int) -> None:
        self.drv.memset_d8(handle, byte, nbytes)

    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                threads: int, block: int, status: DeviceBuffer | None,
                check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None:
        em, fn, plan = self.compiled(
            kernel, self.launch_checked(kernel, args, threads, block, shape, shared))  # CG-72
        fault = self.faults.arm(kernel.name, em.abi)
        try:
            values = plan.values(args, threads, status, _handle, fault, shared)
            dyn = dynamic_shared(kernel)
            # CG-50: the bytes of the extern __shared__ array, given with the launch
            kw: dict[str, Any] = {} if dyn is None or shared is None else {
                "shared": shared * element_bytes(dyn.scalar)}
            if shape is None:
                blocks = -(-threads // block)
                fn(*values, block=(block, 1, 1), grid=(blocks, 1), **kw)
            else:  # grid and block dims (LCH-27)
                g3, b3 = shape.padded()
                fn(*values, block=b3, grid=g3, **kw)
        except BaseException:
            if fault is not None:
                self.faults.forget()
            raise

    def sync(self) -> None:
        """Wait for every launch, then raise the first out-of-bounds fault (LCH-20)."""
        self.drv.Context.synchronize()
        self.faults.check()
