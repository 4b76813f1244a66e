"""sarek_py: provably exact fusion of GPU kernels."""

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import HelperFunc, Kernel, Module, Var
from sarek_py.ir.types import ArrayType, MemSpace, Scalar

__all__ = ["ArrayType", "HelperFunc", "Kernel", "MemSpace", "Module", "SarekError", "Scalar", "Var"]
__version__ = "0.1.0"
