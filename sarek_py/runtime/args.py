"""The argument list of an emitted kernel, in the order its ABI gives (CG-6, CG-10, CG-11).

:func:`arg_plan` reads the ABI once per kernel (LCH-17) into an :class:`ArgPlan`: per C
argument, where its value comes from and its C type; :meth:`ArgPlan.values` then only
looks the values up at each launch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import numpy as np

from sarek_py.codegen.cstyle import KernelAbi
from sarek_py.ir.dynamic_shared import element_bytes
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import Scalar
from sarek_py.runtime.base import DeviceBuffer, LaunchError

#: how a C argument is made: kind, parameter name (or ""), dimension, and the function
#: making the C scalar (a numpy scalar type, or a bool conversion)
_Slot = tuple[str, str, int, Any]


@attrs.frozen
class ArgPlan:
    """How to make the C arguments of one kernel: ``slots`` in ABI order (kind, parameter,
    dimension, conversion to the C scalar), and ``dtypes``, the C type of each scalar argument
    (``None`` for a buffer), as PyOpenCL's ``set_scalar_arg_dtypes`` wants them."""

    kernel: str
    slots: tuple[_Slot, ...]
    dtypes: tuple[np.dtype[Any] | None, ...]

    def values(self, args: Mapping[str, DeviceBuffer | np.generic], threads: int,
               status: DeviceBuffer | None, handle: Callable[[DeviceBuffer], Any],
               fault: Any = None, shared: int | None = None,
               local: Callable[[int], Any] | None = None) -> list[Any]:
        """Values for the C parameters: buffers (through ``handle``), scalars as numpy
        scalars of the C type, each array's extents as ``int32``, the 64-bit thread count,
        the status buffer and the fault buffer's handle ``fault`` (CG-22); the dynamic
        shared array's extent ``shared`` (elements) as ``int32`` and, where the target
        passes the array itself, ``local(nbytes)``, its buffer (CG-50)."""
        out: list[Any] = []
        for kind, param, dim, ctype in self.slots:
            if kind in ("shared", "shared_extent"):
                if shared is None:
                    raise LaunchError(f"[LCH-50] kernel {self.kernel} has the dynamic shared "
                                      f"array {param}: the launch must give its extent")
                if kind == "shared_extent":
                    out.append(np.int32(shared))
                else:
                    if local is None:
                        raise LaunchError(f"kernel {self.kernel}: this backend cannot bind "
                                          f"the dynamic shared array {param}")
                    out.append(local(shared * dim))
            elif kind == "scalar":
                out.append(ctype(args[param]))
            elif kind == "array":
                a = args[param]
                assert isinstance(a, DeviceBuffer)
                out.append(handle(a))
            elif kind == "extent":
                a = args[param]
                assert isinstance(a, DeviceBuffer)
                out.append(np.int32(a.shape[dim]))
            elif kind == "threads":
                out.append(np.int64(threads))
            elif kind == "fault":
                if fault is None:
                    raise LaunchError(f"kernel {self.kernel} checks its accesses: it needs a "
                                      "fault buffer")
                out.append(fault)
            else:
                if status is None:
                    raise LaunchError(f"kernel {self.kernel} can stop: it needs a status buffer")
                out.append(handle(status))
        return out


def kernel_local(kernel: Kernel, name: str) -> Scalar:
    """The element type of the kernel's local array ``name``."""
    v = next(v for v in kernel.locals if v.name == name)
    return v.scalar


def _to_bool(bool_type: type) -> Callable[[Any], Any]:
    def conv(v: Any) -> Any:
        return bool_type(bool(v))

    return conv


def arg_plan(abi: KernelAbi, kernel: Kernel, bool_type: type) -> ArgPlan:
    """The :class:`ArgPlan` of an emitted kernel; ``bool`` scalars are passed as
    ``bool_type`` (one byte)."""
    slots: list[_Slot] = []
    dtypes: list[np.dtype[Any] | None] = []
    for a in abi.args:
        if a.kind in ("array", "status", "fault"):
            slots.append((a.kind, a.param or "", a.dim, None))
            dtypes.append(None)
        elif a.kind == "shared":  # CG-50: dim holds the bytes of one element
            assert a.param is not None
            elem = kernel_local(kernel, a.param)
            slots.append((a.kind, a.param, element_bytes(elem), None))
            dtypes.append(None)
        elif a.kind == "shared_extent":
            slots.append((a.kind, a.param or "", 0, np.int32))
            dtypes.append(np.dtype(np.int32))
        elif a.kind == "extent":
            slots.append((a.kind, a.param or "", a.dim, np.int32))
            dtypes.append(np.dtype(np.int32))
        elif a.kind == "threads":
            slots.append((a.kind, "", 0, np.int64))
            dtypes.append(np.dtype(np.int64))
        else:
            assert a.param is not None
            t = kernel.param(a.param).scalar
            conv: Any = _to_bool(bool_type) if t is Scalar.BOOL else t.dtype.type
            slots.append(("scalar", a.param, 0, conv))
            dtypes.append(np.dtype(bool_type) if t is Scalar.BOOL else t.dtype)
    return ArgPlan(kernel.name, tuple(slots), tuple(dtypes))


def kernel_arguments(
    abi: KernelAbi,
    kernel: Kernel,
    args: Mapping[str, DeviceBuffer | np.generic],
    threads: int,
    status: DeviceBuffer | None,
    handle: Callable[[DeviceBuffer], Any],
    bool_type: type,
) -> list[Any]:
    """Values for the C parameters of one launch (the plan made and used at once)."""
    return arg_plan(abi, kernel, bool_type).values(args, threads, status, handle)
