"""C-family code generation: one emitter (:mod:`cstyle`), CUDA and OpenCL dialect tables."""

from __future__ import annotations

from sarek_py.codegen.cstyle import CodegenError, Emitted, KernelAbi, emit
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.opencl import OPENCL
from sarek_py.ir.nodes import Kernel


def emit_cuda(kernel: Kernel) -> str:
    """CUDA C source of ``kernel`` (``extern "C" __global__``), helpers first."""
    return emit(kernel, CUDA).source


def emit_opencl(kernel: Kernel) -> str:
    """OpenCL C source of ``kernel`` (``__kernel``), helpers first."""
    return emit(kernel, OPENCL).source


__all__ = ["CUDA", "OPENCL", "CodegenError", "Emitted", "KernelAbi", "emit", "emit_cuda",
           "emit_opencl"]
