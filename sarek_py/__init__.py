"""sarek_py: provably exact fusion of GPU kernels.

The names most users need are here: the Python front end (``kernel``, ``helper``,
``pipeline``, the type markers), ``fuse`` (epilogue fusion of two kernels, IR or front
end), the text form (``parse_module``, ``print_module``) and the IR's main classes.
"""

from sarek_py.cli.registry import VERSION
from sarek_py.codegen import emit_cuda, emit_opencl
from sarek_py.frontend import (
    FrontendError,
    Pipeline,
    Vec,
    Vec2,
    Vec3,
    boolean,
    f32,
    f64,
    fuse,
    helper,
    i32,
    i64,
    kernel,
    pipeline,
)
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.nodes import HelperFunc, Kernel, Module, Var
from sarek_py.ir.parser import parse_file, parse_module
from sarek_py.ir.printer import print_kernel, print_module
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.runtime import get_backend
from sarek_py.runtime.arrays import DeviceArray, empty, empty_like, to_device

__all__ = [
    "ArrayType",
    "DeviceArray",
    "FrontendError",
    "FusionRefused",
    "KernelLaunch",
    "HelperFunc",
    "Kernel",
    "Launch",
    "MemSpace",
    "Module",
    "Pipeline",
    "SarekError",
    "Scalar",
    "Var",
    "Vec",
    "Vec2",
    "Vec3",
    "boolean",
    "emit_cuda",
    "emit_opencl",
    "empty",
    "empty_like",
    "f32",
    "f64",
    "fuse",
    "fuse_launches",
    "get_backend",
    "helper",
    "i32",
    "i64",
    "kernel",
    "parse_file",
    "parse_module",
    "pipeline",
    "print_kernel",
    "print_module",
    "to_device",
]
__version__ = VERSION  # one version: `sarek-py --version` prints it too (CLI-20)
