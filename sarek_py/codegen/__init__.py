"""C-family code generation: one emitter (:mod:`cstyle`), CUDA, OpenCL and C + OpenMP
dialect tables."""

from __future__ import annotations

from sarek_py.codegen.c99 import C99
from sarek_py.codegen.cstyle import CodegenError, Emitted, KernelAbi, emit
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.opencl import OPENCL
from sarek_py.ir.nodes import Kernel


def emit_cuda(kernel: Kernel, *, checked: bool = True) -> str:
    """CUDA C source of ``kernel`` (``extern "C" __global__``), helpers first; accesses
    bounds-checked unless ``checked=False`` (CG-22)."""
    return emit(kernel, CUDA, checked=checked).source


def emit_opencl(kernel: Kernel, *, checked: bool = True) -> str:
    """OpenCL C source of ``kernel`` (``__kernel``), helpers first; accesses bounds-checked
    unless ``checked=False`` (CG-22)."""
    return emit(kernel, OPENCL, checked=checked).source


def emit_c(kernel: Kernel, *, checked: bool = True) -> str:
    """C + OpenMP source of ``kernel`` (the thread function and the exported launch
    function, NAT-2, NAT-3); a kernel the c backend cannot run exactly is refused with a
    :class:`CodegenError` naming the construct (NAT-4)."""
    return emit(kernel, C99, checked=checked).source


__all__ = ["C99", "CUDA", "OPENCL", "CodegenError", "Emitted", "KernelAbi", "emit", "emit_c", "emit_cuda",
           "emit_opencl"]
