"""Device arrays: a backend's memory as an array a user holds (specs/launch.md LCH-60 …
LCH-66).

``to_device(a)`` copies a numpy array into a backend's memory, ``empty``/``empty_like``
allocate one; a launch takes the :class:`DeviceArray` itself, so nothing is copied in or
out (LCH-62). ``.get()`` (and ``np.asarray``) is a new host copy; indexing is refused,
since a device array is one whole buffer (LCH-61). A device array belongs to one backend
object and a launch on another backend refuses it (LCH-63).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.bool_bytes import bool_array_fault
from sarek_py.ir.diagnostics import LaunchError
from sarek_py.runtime.base import POISON_BYTE, Backend, DeviceArrayBase, DeviceBuffer

#: called with the array before the host reads or writes it (``get``, ``copy_to_host``,
#: ``set``): the front end runs the launches a pipeline recorded on it first (FE-72)
HOST_ACCESS_HOOKS: list[Callable[[DeviceArray], None]] = []


class DeviceArrayError(LaunchError):
    """A device array used in a way it cannot be (indexed, on another backend, ...)."""


class DeviceArray(DeviceArrayBase):
    """An array of ``shape`` and ``dtype`` in the memory of one backend (LCH-60).

    ``owner`` keeps alive the foreign object whose memory this array uses in place (a
    ``pyopencl.array.Array``, an object with ``__cuda_array_interface__``, LCH-70); a
    device array made by :func:`to_device` or :func:`empty` owns its buffer."""

    __slots__ = ("_buffer", "_runtime", "_owner", "__weakref__")

    def __init__(self, buffer: DeviceBuffer, runtime: Backend, owner: Any = None):
        self._buffer = buffer
        self._runtime = runtime
        self._owner = owner

    # ------------------------------------------------------------------ attributes

    @property
    def buffer(self) -> DeviceBuffer:
        """The backend's buffer (what a launch binds)."""
        return self._buffer

    @property
    def runtime(self) -> Backend:
        """The backend object this array's memory belongs to."""
        return self._runtime

    @property
    def owner(self) -> Any:
        """The foreign object whose memory this array uses in place, or ``None``."""
        return self._owner

    @property
    def size(self) -> int:
        return self._buffer.size

    @property
    def nbytes(self) -> int:
        return self._buffer.nbytes

    # ------------------------------------------------------------------ host copies

    def get(self) -> NDArray[Any]:
        """A new host (numpy) array with this array's contents (LCH-61)."""
        try:
            out = np.empty(self.shape, self.dtype)
        except MemoryError:
            raise DeviceArrayError(f"get: the host has no room for a copy of this "
                                   f"{self.dtype}{list(self.shape)} array ({self.nbytes} "
                                   "bytes)") from None
        self.copy_to_host(out)
        return out

    def copy_to_host(self, out: NDArray[Any]) -> NDArray[Any]:
        """Copy the contents into the numpy array ``out`` (same shape and dtype, writable;
        it may be a non-contiguous view) and return it (LCH-61)."""
        if not isinstance(out, np.ndarray):
            raise DeviceArrayError(f"copy_to_host needs a numpy array, not {type(out).__name__}")
        if out.shape != self.shape or out.dtype != self.dtype:
            raise DeviceArrayError(
                f"copy_to_host: the device array is {self.dtype}{list(self.shape)}, the "
                f"host array {out.dtype}{list(out.shape)}: they must be the same")
        if not out.flags.writeable:
            raise DeviceArrayError("copy_to_host: the host array is read-only")
        for hook in HOST_ACCESS_HOOKS:
            hook(self)
        self._runtime.sync()
        self._runtime.copy_out(self._buffer, out)
        return out

    def set(self, host: Any) -> None:
        """Copy the host array ``host`` (same shape and dtype) into this array."""
        a = np.asarray(host)
        if a.shape != self.shape or a.dtype != self.dtype:
            raise DeviceArrayError(
                f"set: the device array is {self.dtype}{list(self.shape)}, the host array "
                f"{a.dtype}{list(a.shape)}: they must be the same")
        _check_bools(a, "set: the host array")
        for hook in HOST_ACCESS_HOOKS:
            hook(self)
        self._runtime.sync()
        self._runtime.copy_in(self._buffer, a)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NDArray[Any]:
        if copy is False:
            raise ValueError("a sarek_py.DeviceArray cannot be viewed as a numpy array "
                             "without a copy: use .get()")
        out = self.get()
        return out if dtype is None else out.astype(dtype, copy=False)

    # ------------------------------------------------------------------ refusals

    def __getitem__(self, index: Any) -> Any:
        raise DeviceArrayError(
            "a sarek_py.DeviceArray is a whole device buffer and cannot be indexed or "
            "sliced: copy it to the host with .get() first (LCH-61)")

    def __setitem__(self, index: Any, value: Any) -> None:
        raise DeviceArrayError(
            "a sarek_py.DeviceArray is a whole device buffer and cannot be assigned by "
            "index: write a numpy array and use .set(host) or sarek_py.to_device (LCH-61)")

    def __iter__(self) -> Any:
        raise DeviceArrayError("a sarek_py.DeviceArray cannot be iterated: use .get() first "
                               "(LCH-61)")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d device array")
        return self.shape[0]

    def __repr__(self) -> str:
        return (f"DeviceArray(shape={self.shape}, dtype={self.dtype}, "
                f"backend={self.backend!r})")

    # ------------------------------------------------------------------ interop

    def __getattr__(self, name: str) -> Any:
        # the interop exports (cl_array, __cuda_array_interface__, __dlpack__, ...) are the
        # backend's: it says which it has (LCH-71, LCH-74)
        if name not in EXPORTS:
            raise AttributeError(name)
        return self._runtime.export_array(self, name)


#: the interop attributes a backend may export (LCH-71, LCH-74)
EXPORTS = frozenset({"cl_array", "__cuda_array_interface__", "__dlpack__",
                     "__dlpack_device__"})


def _check_bools(a: NDArray[Any], what: str) -> None:
    """NAT-70: a device array of bools holds the bytes 0 and 1 only, as launches read."""
    why = bool_array_fault(a, what)
    if why is not None:
        raise DeviceArrayError(why)


def resolve_backend(backend: str | Backend | None) -> Backend:
    """The backend object named ``backend`` (``None``: the default backend, as for
    launches)."""
    from sarek_py.runtime import get_backend

    if isinstance(backend, Backend):
        return backend
    if backend is not None and not isinstance(backend, str):
        raise DeviceArrayError(f"backend must be a backend name, not {type(backend).__name__}")
    return get_backend("default" if backend is None else backend)


def _shape(shape: Any) -> tuple[int, ...]:
    ext = shape if isinstance(shape, tuple | list) else (shape,)
    try:
        out = tuple(operator.index(n) for n in ext)
    except TypeError:
        raise DeviceArrayError(f"a shape is an integer or a tuple of integers, not "
                               f"{shape!r}") from None
    if any(n < 0 for n in out):
        raise DeviceArrayError(f"a shape has no negative extent: {shape!r}")
    return out


def _dtype(dtype: Any) -> np.dtype[Any]:
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except TypeError:
        raise DeviceArrayError(f"{dtype!r} is not a dtype") from None
    if dt.hasobject or dt.fields is not None or dt.itemsize == 0:
        raise DeviceArrayError(f"a device array holds plain numbers, not {dt}")
    return dt


def empty(shape: Any, dtype: Any = np.float32, backend: str | Backend | None = None
          ) -> DeviceArray:
    """A new device array of ``shape`` and ``dtype`` on ``backend`` (None: the default
    backend); its contents are unspecified (the poison byte where the backend poisons,
    LCH-60)."""
    rt = resolve_backend(backend)
    buf = rt.allocate(_shape(shape), _dtype(dtype))
    if rt.poison:
        rt.fill(buf, POISON_BYTE)
    return DeviceArray(buf, rt)


def empty_like(x: Any, backend: str | Backend | None = None) -> DeviceArray:
    """A new device array of ``x``'s shape and dtype (``x``: a numpy or device array), on
    ``backend`` (None: ``x``'s backend for a device array, else the default)."""
    if isinstance(x, DeviceArray):
        return empty(x.shape, x.dtype, x.runtime if backend is None else backend)
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    return empty(a.shape, a.dtype, backend)


def to_device(a: Any, backend: str | Backend | None = None) -> DeviceArray:
    """A new device array on ``backend`` (None: the default backend) holding a copy of
    ``a``: a numpy array, anything ``np.asarray`` reads, an object with a CPU DLPack
    export (``__dlpack__``), or a device array (copied through the host when it is on
    another backend) (LCH-60, LCH-75)."""
    rt = resolve_backend(backend)
    if isinstance(a, DeviceArray):
        a = a.get()
    elif not isinstance(a, np.ndarray) and hasattr(a, "__dlpack__"):
        a = np.from_dlpack(a)  # CPU memory (a device's is refused by numpy, saying so)
    host = np.asarray(a)
    _check_bools(host, "to_device: the array")
    buf = rt.allocate(host.shape, _dtype(host.dtype))
    rt.copy_in(buf, host)
    return DeviceArray(buf, rt)


__all__ = ["DeviceArray", "DeviceArrayError", "empty", "empty_like", "resolve_backend",
           "to_device"]
