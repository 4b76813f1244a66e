"""The argument list of an emitted kernel, in the order its ABI gives (CG-6, CG-10, CG-11)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sarek_py.codegen.cstyle import KernelAbi
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import Scalar
from sarek_py.launch.runtime.base import DeviceArray, LaunchError


def kernel_arguments(
    abi: KernelAbi,
    kernel: Kernel,
    args: Mapping[str, DeviceArray | np.generic],
    threads: int,
    status: DeviceArray | None,
    handle: Callable[[DeviceArray], Any],
    bool_type: type,
) -> list[Any]:
    """Values for the C parameters: buffers (through ``handle``), scalars as numpy scalars
    of the C type (``bool`` as ``bool_type``), each array's extents as ``int32``, the
    64-bit thread count and the status buffer."""
    out: list[Any] = []
    for a in abi.args:
        if a.kind == "threads":
            out.append(np.int64(threads))
            continue
        if a.kind == "status":
            if status is None:
                raise LaunchError(f"kernel {kernel.name} can stop: it needs a status buffer")
            out.append(handle(status))
            continue
        assert a.param is not None
        v = args[a.param]
        if a.kind == "array":
            assert isinstance(v, DeviceArray)
            out.append(handle(v))
        elif a.kind == "extent":
            assert isinstance(v, DeviceArray)
            out.append(np.int32(v.shape[a.dim]))
        else:
            assert isinstance(v, np.generic)
            t = kernel.param(a.param).scalar
            out.append(bool_type(bool(v)) if t is Scalar.BOOL else t.dtype.type(v))
    return out
