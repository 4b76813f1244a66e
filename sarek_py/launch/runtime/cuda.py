"""The CUDA backend (PyCUDA, imported lazily) (specs/launch.md, LCH-14).

Kernels are emitted as CUDA C, compiled to PTX by our own nvcc call
(:func:`sarek_py.codegen.nvcc.compile_ptx`: no contraction, IEEE division and square root,
the device's own architecture, cached on disk) and loaded with the driver. Without PyCUDA,
without a driver or without a GPU the backend cannot be created and says why in one
sentence (:class:`~sarek_py.ir.diagnostics.BackendUnavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.codegen.cstyle import Emitted, emit
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.nvcc import compile_ptx
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.nodes import Kernel
from sarek_py.launch.runtime.args import ArgPlan, arg_plan
from sarek_py.launch.runtime.base import Backend, DeviceArray, LaunchError
from sarek_py.launch.runtime.cache import KernelCache, LruCache


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


def _handle(d: DeviceArray) -> Any:
    return d.handle


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
        self._compiled: KernelCache[tuple[Emitted, Any, ArgPlan]] = KernelCache(self._compile)
        self.max_block = int(self.device.get_attribute(
            self.drv.device_attribute.MAX_THREADS_PER_BLOCK))

    @property
    def device_name(self) -> str:
        return f"{self.device.name()} ({self.arch})"

    def compiled(self, kernel: Kernel) -> tuple[Emitted, Any, ArgPlan]:
        """The emitted source and ABI of ``kernel``, its loaded function and its argument
        plan, made at the first launch of this kernel object (LCH-17); one module per
        distinct source."""
        return self._compiled.get(kernel)

    def _compile(self, kernel: Kernel) -> tuple[Emitted, Any, ArgPlan]:
        em = emit(kernel, CUDA)
        self.stats.emits += 1
        hit = self._functions.get(em.source)
        if hit is None:
            module = self.drv.module_from_buffer(compile_ptx(em.source, self.arch).encode())
            self.stats.builds += 1
            hit = (em, module, module.get_function(em.abi.name))
            self._functions.put(em.source, hit)
        return em, hit[2], arg_plan(em.abi, kernel, np.uint8)

    def _alloc(self, nbytes: int) -> Any:
        return self.drv.mem_alloc(max(nbytes, 4))

    def _write(self, handle: Any, host: NDArray[Any]) -> None:
        self.drv.memcpy_htod(handle, host)

    def _read(self, handle: Any, host: NDArray[Any]) -> None:
        self.drv.memcpy_dtoh(host, handle)

    def _fill(self, handle: Any, nbytes: int, byte: int) -> None:
        self.drv.memset_d8(handle, byte, nbytes)

    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceArray | np.generic],
                threads: int, block: int, status: DeviceArray | None,
                check_races: bool) -> None:
        limit = self.max_block
        if block > limit:
            raise LaunchError(f"kernel {kernel.name}: block size {block} exceeds the "
                              f"device's limit of {limit} threads")
        _, fn, plan = self.compiled(kernel)
        values = plan.values(args, threads, status, _handle)
        blocks = -(-threads // block)
        fn(*values, block=(block, 1, 1), grid=(blocks, 1))

    def sync(self) -> None:
        self.drv.Context.synchronize()
