"""Which buffer a launch argument names, and whether two bound arrays are one buffer or
overlap (specs/fusion-legality.md LEG-1, LEG-7, LEG-15).

Used by the launch legality (:mod:`~sarek_py.fusion.epilogue.legality`), the launch
conditions checked at every launch (:mod:`~sarek_py.fusion.epilogue.conditions`) and the
launch sequences (:mod:`~sarek_py.fusion.epilogue.sequence`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, TypeGuard

import numpy as np

from sarek_py.ir.host.launch import Launch
from sarek_py.ir.nodes import Ref

#: how much work ``np.shares_memory`` may do before two arrays count as overlapping
_SHARES_WORK = 100_000


def buffer_key(v: object) -> Hashable | None:
    """The identity of the buffer an argument names (``None`` for a scalar).

    A buffer name (``str``) and a ``Ref`` of the host array of that name are one buffer
    (the launches of a host program and of ``KernelLaunch`` decide alike, LCH-24). Two
    numpy arrays are the same buffer only when they are the same memory range with the
    same shape, strides and dtype (a prefix ``t[:k]`` of ``t``, or ``t.view(i32)``, is not
    ``t``); arrays that overlap otherwise are refused as partial aliasing (LEG-1, LEG-7).
    """
    if isinstance(v, str):
        return ("buffer", v)
    if isinstance(v, Ref) and v.var.is_array:
        return ("buffer", v.var.name)
    if isinstance(v, np.ndarray):
        start = v.__array_interface__["data"][0]
        return ("array", start, v.shape, v.strides, v.dtype.str)
    if isinstance(v, np.generic | int | float):
        return None  # a scalar
    # a device array (HeldArray's three attributes, asked directly: isinstance against
    # the protocol costs tens of microseconds at every launch): one whole buffer (LCH-64)
    bid = getattr(v, "buffer_id", None)
    if bid is not None and hasattr(v, "shape") and hasattr(v, "dtype"):
        return ("device", bid, tuple(v.shape), np.dtype(v.dtype).str)
    return None


def arg_buffer(launch: Launch, index: int, role: str) -> Hashable | None:
    """The buffer of argument ``index`` of ``launch``: a scratch argument is a
    device-only buffer of this launch alone, whatever host variable names it (LCH-5;
    ``role`` tells the launches compared apart), any other argument
    :func:`buffer_key`'s."""
    if any(s.argument == index for s in launch.scratch):
        return ("scratch", role, index)
    return buffer_key(launch.args[index])


def is_array(v: object) -> TypeGuard[Any]:
    """Whether a bound argument is an array: a numpy array, a device buffer or a device
    array (``buffer_id``, LCH-64)."""
    return isinstance(v, np.ndarray) or (
        (hasattr(v, "handle") or hasattr(v, "buffer_id")) and hasattr(v, "shape"))


def _device_id(v: object) -> Any:
    """The memory identity of a device array (``buffer_id``), else ``None``."""
    return None if isinstance(v, np.ndarray) else getattr(v, "buffer_id", None)


def same_buffer(a: Any, b: Any) -> bool:
    """Whether two bound arrays are one buffer: the same memory range with the same
    shape, strides and dtype (LEG-1); two device buffers, the same buffer."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
                    and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)
    da, db = _device_id(a), _device_id(b)
    if da is not None and db is not None:  # device arrays: the same memory (LCH-64)
        return bool(da == db and tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype)
    return a is b


def overlap(a: Any, b: Any) -> bool:
    """Whether two bound arrays may share memory (exactly decided up to a work bound;
    past it they count as overlapping)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        try:
            return bool(np.shares_memory(a, b, max_work=_SHARES_WORK))  # type: ignore[arg-type]
        except np.exceptions.TooHardError:
            return True
    da, db = _device_id(a), _device_id(b)
    if da is not None and db is not None:  # whole buffers: overlap iff the same memory
        return bool(da == db)
    return a is b


def overlaps_itself(a: Any) -> str | None:
    """Why two distinct elements of the numpy array ``a`` may share memory (a stride of 0,
    or one smaller than the elements it steps over: ``as_strided`` views), else ``None``.
    Such an array is not a buffer of distinct elements, which every fusion proof assumes
    (LEG-1). Decided per axis, the axes sorted by stride, each stride at least the span of
    the smaller ones: exact for one axis, conservative (it may say so wrongly) for more."""
    if not isinstance(a, np.ndarray) or a.size <= 1:
        return None
    reach = a.itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(a.strides, a.shape, strict=True)
                            if n > 1):
        if stride < reach:
            return (f"its elements overlap one another (strides {a.strides} for "
                    f"{a.itemsize}-byte elements, shape {a.shape})")
        reach += stride * (n - 1)
    return None
