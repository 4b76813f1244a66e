"""sarek_py: provably exact fusion of GPU kernels.

The names most users need are here: the Python front end (``kernel``, ``helper``,
``pipeline``, the type markers), ``fuse`` (epilogue fusion of two kernels, IR or front
end), the text form (``parse_module``, ``print_module``), the IR's main classes, and the
errors a user may catch: every one is a ``SarekError``; ``FusionRefused`` (a fusion
refused, with its rule), ``FrontendError`` (a kernel outside the Python subset),
``LaunchError`` (a launch the runtime refuses; ``DeviceArrayError``, ``InteropError`` for
device arrays and other libraries' arrays), ``InterpError`` (a run-time fault: out of
bounds, a race — a fused kernel's named in the user's kernels and parameters, FE-90),
``ReplayError`` (``p.replay()`` refused, FE-86 … FE-89) and ``TemporaryError`` /
``DeadTemporaryError`` (a pipeline temporary misused, FE-70 … FE-76).
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
from sarek_py.frontend.replay import ReplayError
from sarek_py.frontend.temporaries import DeadTemporaryError, TemporaryError
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import InterpError, LaunchError, SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.nodes import HelperFunc, Kernel, Module, Var
from sarek_py.ir.parser import parse_file, parse_module
from sarek_py.ir.printer import print_kernel, print_module
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.runtime import get_backend
from sarek_py.runtime.arrays import DeviceArray, DeviceArrayError, empty, empty_like, to_device
from sarek_py.runtime.interop import InteropError

__all__ = [
    "ArrayType",
    "DeadTemporaryError",
    "DeviceArray",
    "DeviceArrayError",
    "FrontendError",
    "FusionRefused",
    "InteropError",
    "InterpError",
    "KernelLaunch",
    "HelperFunc",
    "Kernel",
    "Launch",
    "LaunchError",
    "MemSpace",
    "Module",
    "Pipeline",
    "ReplayError",
    "SarekError",
    "Scalar",
    "TemporaryError",
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
