"""C-family code generation: one emitter (:mod:`cstyle`), CUDA and OpenCL dialect tables."""

from __future__ import annotations

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


__all__ = ["CUDA", "OPENCL", "CodegenError", "Emitted", "KernelAbi", "emit", "emit_cuda",
           "emit_opencl"]
