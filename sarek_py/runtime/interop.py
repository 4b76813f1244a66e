"""Other libraries' arrays used in place (specs/launch.md LCH-70 … LCH-75).

:func:`adopt` turns an array argument that is neither numpy nor a
:class:`~sarek_py.runtime.arrays.DeviceArray` into one of them without copying: a
``pyopencl.array.Array`` of the opencl backend's context (LCH-70), an object with
``__cuda_array_interface__`` (CuPy, PyTorch, Numba, PyCUDA ``GPUArray``, LCH-72) or a
DLPack export on the CPU (a numpy view of its memory) or on CUDA (LCH-73, LCH-75).
Anything else, or such an array the launch cannot use whole and in place (strided, offset,
read-only, a dtype with no C type), is refused with one sentence saying why.
"""

from __future__ import annotations

import ctypes
import math
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.runtime.arrays import DeviceArray
from sarek_py.runtime.base import DeviceBuffer

if TYPE_CHECKING:
    from sarek_py.runtime.base import Backend


class InteropError(LaunchError):
    """A foreign array that cannot be used in place."""


def is_foreign_array(obj: Any) -> bool:
    """Whether ``obj`` is an array :func:`adopt` knows how to read: a pyopencl array, an
    object with ``__cuda_array_interface__`` or with ``__dlpack__``."""
    return (is_pyopencl_array(obj) or hasattr(obj, "__cuda_array_interface__")
            or hasattr(obj, "__dlpack__"))


def adopt(obj: Any, where: str = "the argument") -> DeviceArray | NDArray[Any]:
    """``obj`` as a device array (or, for CPU memory, a numpy view) of the same memory:
    no copy (LCH-70, LCH-72, LCH-73). ``where`` names the argument in errors."""
    if is_pyopencl_array(obj):
        from sarek_py.runtime import get_backend

        return from_pyopencl(obj, get_backend("opencl"), where)
    if hasattr(obj, "__cuda_array_interface__"):
        from sarek_py.runtime import get_backend

        return from_cuda_interface(obj, get_backend("cuda"), where)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        kind = int(obj.__dlpack_device__()[0])
        if kind in (DL_CPU, DL_CUDA_HOST):
            return from_dlpack_host(obj, where)
        if kind == DL_CUDA:
            from sarek_py.runtime import get_backend

            return from_dlpack_cuda(obj, get_backend("cuda"), where)
        raise InteropError(f"{where} is a DLPack array on device type {kind}, which no "
                           "sarek_py backend runs on (CPU: 1, CUDA: 2)")
    raise InteropError(
        f"{where} must be a numpy array, a sarek_py.DeviceArray, a pyopencl array or an "
        f"object with __cuda_array_interface__ or __dlpack__, not {type(obj).__name__}")


# ------------------------------------------------------------------------------ OpenCL


def is_pyopencl_array(obj: Any) -> bool:
    """Whether ``obj`` is a ``pyopencl.array.Array`` (without importing pyopencl)."""
    return any(c.__module__ == "pyopencl.array" and c.__name__ == "Array"
               for c in type(obj).__mro__)


def from_pyopencl(a: Any, backend: Backend, where: str = "the argument") -> DeviceArray:
    """The pyopencl array ``a`` as a device array of the opencl ``backend`` (LCH-70): its
    context must be the backend's (``sarek_py.get_backend("opencl").context``), it must
    be C-contiguous with offset 0; work queued on another queue of that context is waited
    for before a launch reads it (:meth:`Backend.acquire`)."""
    ctx = getattr(backend, "context", None)
    if ctx is None or a.context != ctx:
        raise InteropError(
            f"{where} is a pyopencl array of another OpenCL context than the opencl "
            "backend's: make it with sarek_py.get_backend('opencl').queue (or .context), "
            "or copy it with sarek_py.to_device(x.get(), backend='opencl') (LCH-70)")
    if not a.flags.c_contiguous:
        raise InteropError(f"{where} is a pyopencl array that is not C-contiguous (strides "
                           f"{a.strides}): a launch binds whole buffers; pass a copy "
                           "(x.copy()) (LCH-70)")
    if a.offset:
        raise InteropError(f"{where} is a pyopencl array at offset {a.offset} in its buffer: "
                           "a launch binds whole buffers; pass a copy (x.copy()) (LCH-70)")
    dtype = np.dtype(a.dtype)
    shape = tuple(int(n) for n in a.shape)
    if a.size == 0 or a.base_data is None:
        handle = backend.allocate(shape, dtype).handle  # no memory to share
    else:
        handle = a.base_data
    return DeviceArray(DeviceBuffer(handle, shape, dtype), backend, owner=a)


# -------------------------------------------------------------------------------- CUDA


@attrs.frozen
class DeviceView:
    """What an interface says of an array in device memory: its address, shape, dtype."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    stream: int | None = None


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None,
                itemsize: int) -> bool:
    if strides is None:
        return True
    want = itemsize
    for n, s in zip(reversed(shape), reversed(strides), strict=True):
        if n > 1 and s != want:
            return False
        want *= n
    return True


def cuda_interface(obj: Any, where: str = "the argument") -> DeviceView:
    """Read ``obj.__cuda_array_interface__`` (versions 0 to 3), refusing what a launch
    cannot bind in place: a read-only or masked array, strides that are not C-contiguous,
    a dtype of no C type (LCH-72)."""
    cai = obj.__cuda_array_interface__
    if not isinstance(cai, dict):
        raise InteropError(f"{where}: __cuda_array_interface__ is not a dict")
    for key in ("shape", "typestr", "data", "version"):
        if key not in cai:
            raise InteropError(f"{where}: __cuda_array_interface__ has no {key!r}")
    version = cai["version"]
    if not isinstance(version, int) or not 0 <= version <= 3:
        raise InteropError(f"{where}: __cuda_array_interface__ version {version!r} is not "
                           "one of 0..3")
    try:
        shape = tuple(int(n) for n in cai["shape"])
        dtype = np.dtype(cai["typestr"])
    except (TypeError, ValueError):
        raise InteropError(f"{where}: __cuda_array_interface__ has shape {cai['shape']!r} "
                           f"and typestr {cai['typestr']!r}, not a shape and a dtype") from None
    if dtype.byteorder == ">" or dtype.kind not in "biuf" or dtype.hasobject:
        raise InteropError(f"{where}: a CUDA array of {cai['typestr']!r} has no C type a "
                           "kernel takes (LCH-72)")
    data = cai["data"]
    if not isinstance(data, tuple) or len(data) != 2:
        raise InteropError(f"{where}: __cuda_array_interface__ 'data' must be a (pointer, "
                           "read_only) pair")
    pointer, read_only = data
    if read_only:
        raise InteropError(f"{where} is a read-only CUDA array: a launch may write its "
                           "arguments in place, so pass a writable one (LCH-72)")
    if cai.get("mask") is not None:
        raise InteropError(f"{where} is a masked CUDA array, which a launch cannot bind")
    strides = cai.get("strides")
    if strides is not None:
        strides = tuple(int(s) for s in strides)
        if len(strides) != len(shape) or not _contiguous(shape, strides, dtype.itemsize):
            raise InteropError(
                f"{where} is a CUDA array with strides {strides} for shape {shape}, not "
                "C-contiguous: a launch binds whole buffers; pass a contiguous copy (LCH-72)")
    stream = cai.get("stream") if version >= 3 else None
    if pointer is None or (not isinstance(pointer, int) or pointer < 0):
        raise InteropError(f"{where}: __cuda_array_interface__ data pointer {pointer!r} is "
                           "not an address")
    if pointer == 0 and any(n > 0 for n in shape):
        raise InteropError(f"{where}: a CUDA array with elements at address 0")
    return DeviceView(pointer, shape, dtype, stream if isinstance(stream, int) else None)


def from_cuda_interface(obj: Any, backend: Backend, where: str = "the argument"
                        ) -> DeviceArray:
    """``obj`` (with ``__cuda_array_interface__``) as a device array of the cuda
    ``backend``, its memory in place (LCH-72)."""
    return _cuda_array(cuda_interface(obj, where), backend, obj)


def _cuda_array(view: DeviceView, backend: Backend, owner: Any) -> DeviceArray:
    if view.pointer == 0 or math.prod(view.shape) == 0:
        handle = backend.allocate(view.shape, view.dtype).handle  # nothing to share
    else:
        handle = view.pointer
    return DeviceArray(DeviceBuffer(handle, view.shape, view.dtype), backend, owner=owner)


def cuda_interface_of(buffer: DeviceBuffer) -> dict[str, Any]:
    """The ``__cuda_array_interface__`` (version 3) of the buffer of a CUDA device array:
    its memory, C-contiguous, writable; ``stream`` None since sarek_py's launches have
    finished when they return (LCH-74)."""
    return {"shape": buffer.shape, "typestr": buffer.dtype.str,
            "data": (int(buffer.handle), False), "strides": None, "version": 3,
            "stream": None}


# ------------------------------------------------------------------------------ DLPack

#: DLPack device types (dlpack.h DLDeviceType)
DL_CPU, DL_CUDA, DL_CUDA_HOST = 1, 2, 3
_DL_CODES = {0: "i", 1: "u", 2: "f", 6: "b"}  # DLDataTypeCode: int, uint, float, bool


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def dlpack_view(capsule: Any, where: str = "the argument") -> tuple[DeviceView, int]:
    """The array a DLPack capsule (``"dltensor"``, not yet consumed) describes, and its
    device type; refused: strided, lanes, a dtype of no C type (LCH-73)."""
    if not _capsule_valid(capsule, b"dltensor"):
        raise InteropError(f"{where}: __dlpack__() did not return an unused 'dltensor' capsule")
    managed = _DLManagedTensor.from_address(_capsule_get(capsule, b"dltensor"))
    t = managed.dl_tensor
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    if code not in _DL_CODES or lanes != 1 or bits % 8:
        raise InteropError(f"{where}: a DLPack array of type code {code}, {bits} bits, "
                           f"{lanes} lanes has no C type a kernel takes (LCH-73)")
    dtype = np.dtype(f"{_DL_CODES[code]}{bits // 8}") if code != 6 else np.dtype(np.bool_)
    strides = (None if not t.strides else
               tuple(int(t.strides[i]) * dtype.itemsize for i in range(t.ndim)))
    if not _contiguous(shape, strides, dtype.itemsize):
        raise InteropError(f"{where}: a DLPack array with strides {strides} for shape "
                           f"{shape}, not C-contiguous: pass a contiguous copy (LCH-73)")
    pointer = int(t.data or 0) + int(t.byte_offset)
    return DeviceView(pointer, shape, dtype), int(t.device.device_type)


def from_dlpack_host(obj: Any, where: str = "the argument") -> NDArray[Any]:
    """A numpy view of a CPU DLPack array's memory, no copy (LCH-75)."""
    try:
        out: NDArray[Any] = np.from_dlpack(obj)
    except (BufferError, TypeError, ValueError, RuntimeError) as exc:
        raise InteropError(f"{where}: numpy cannot view this DLPack array ({exc})") from None
    return out


def from_dlpack_cuda(obj: Any, backend: Backend, where: str = "the argument") -> DeviceArray:
    """A CUDA DLPack array as a device array of the cuda ``backend``, its memory in place;
    the producer is asked to order its work before ours (``stream=None``: the legacy
    default stream), and the array keeps the producer alive (LCH-73)."""
    capsule = obj.__dlpack__(stream=None)
    view, kind = dlpack_view(capsule, where)
    if kind != DL_CUDA:
        raise InteropError(f"{where}: a DLPack array on device type {kind}, not CUDA (2)")
    # the capsule stays unconsumed: its destructor calls the producer's deleter, and the
    # device array keeps the capsule (and obj) alive while it is used
    return _cuda_array(view, backend, (obj, capsule))


@attrs.define(eq=False)
class _Export:
    """What a DLPack export keeps alive until the consumer calls its deleter."""

    managed: _DLManagedTensor
    shape: Any
    owner: Any


_LIVE: dict[int, _Export] = {}


def _delete_export(address: int | None) -> None:
    if address is not None:
        _LIVE.pop(address, None)


#: the deleter every capsule made here carries (a C callback: kept for the process)
_delete = _DELETER(_delete_export)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# the capsule destructor gets the capsule as a bare address (it is being freed: no Python
# reference may be made to it), so these two take addresses
_raw_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_raw_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _destroy_capsule(capsule: int | None) -> None:
    """A capsule no consumer took (still named ``dltensor``) releases its export; a
    consumed one (``used_dltensor``) is the consumer's to delete."""
    if capsule is not None and _raw_name(capsule) == b"dltensor":
        _delete_export(_raw_pointer(capsule, b"dltensor"))


_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_destroy_capsule)


def dlpack_capsule(pointer: int, shape: tuple[int, ...], dtype: np.dtype[Any],
                   device: tuple[int, int], owner: Any) -> Any:
    """A DLPack ``dltensor`` capsule of the C-contiguous array at ``pointer`` on
    ``device`` (type, id); ``owner`` is kept alive until the consumer deletes it, or until
    the capsule is freed unconsumed (LCH-74)."""
    codes = {v: k for k, v in _DL_CODES.items()}
    if dtype.kind not in codes:
        raise InteropError(f"a {dtype} array has no DLPack type")
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    managed = _DLManagedTensor()
    t = managed.dl_tensor
    t.data = pointer or None
    t.device = _DLDevice(*device)
    t.ndim = len(shape)
    t.dtype = _DLDataType(codes[dtype.kind], dtype.itemsize * 8, 1)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.POINTER(ctypes.c_int64)()  # NULL: C-contiguous
    t.byte_offset = 0
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _LIVE[address] = _Export(managed, dims, owner)
    return _capsule_new(address, b"dltensor", ctypes.cast(_DESTRUCTOR, ctypes.c_void_p))


__all__ = ["DeviceView", "InteropError", "adopt", "cuda_interface", "cuda_interface_of",
           "dlpack_capsule", "dlpack_view", "from_cuda_interface", "from_dlpack_cuda",
           "is_foreign_array",
           "from_dlpack_host", "from_pyopencl", "is_pyopencl_array"]
