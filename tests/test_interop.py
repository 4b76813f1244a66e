"""Other libraries' arrays in launches, no copy, and device arrays exported to them
(specs/launch.md LCH-70 … LCH-75, specs/frontend.md FE-61).

pyopencl arrays run on PoCL here. The CUDA paths (CuPy, PyTorch, PyCUDA) need a GPU: they
are skipped with the reason where it is missing, and the interface parsing they rely on is
tested with small fake objects carrying ``__cuda_array_interface__`` and with DLPack
capsules made by numpy and by sarek_py itself."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

from sarek_py import Vec, empty, f32, i32, kernel, to_device
from sarek_py.frontend import global_thread_id
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.runtime import Backend, get_backend, interop
from sarek_py.runtime.interop import InteropError


@kernel
def axpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = a * x[i] + y[i]


def _backend(name: str) -> Backend:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)


def _cla() -> Any:
    return pytest.importorskip("pyopencl.array")


def _want(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], a: float) -> np.ndarray[Any, Any]:
    out = y.copy()
    axpy[len(x), 64](x, out, np.float32(a), len(x), backend="interp")
    return out


def _f32(n: int, seed: int) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


# --------------------------------------------------------------------------- LCH-70


def test_lch70_a_pyopencl_array_is_used_in_place() -> None:
    be, cla = _backend("opencl"), _cla()
    n = 777
    x, y = _f32(n, 1), _f32(n, 2)
    cx, cy = cla.to_device(be.queue, x), cla.to_device(be.queue, y)
    be.stats.reset()
    axpy[n, 64](cx, cy, np.float32(0.5), n, backend="opencl")
    assert (be.stats.bytes_in, be.stats.bytes_out, be.stats.bytes_allocated) == (0, 0, 0)
    assert cy.get().tobytes() == _want(x, y, 0.5).tobytes()


def test_lch70_pyopencl_array_mixed_with_numpy_and_device_arrays() -> None:
    be, cla = _backend("opencl"), _cla()
    n = 100
    x, y = _f32(n, 3), _f32(n, 4)
    cx = cla.to_device(be.queue, x)
    y1 = y.copy()
    axpy[n, 32](cx, y1, np.float32(2.0), n, backend="opencl")
    dy = to_device(y, "opencl")
    axpy[n, 32](cx, dy, np.float32(2.0), n, backend="opencl")
    want = _want(x, y, 2.0).tobytes()
    assert y1.tobytes() == want and dy.get().tobytes() == want


def test_lch70_a_pyopencl_array_of_another_context_is_refused() -> None:
    be, cla = _backend("opencl"), _cla()
    cl = be.cl
    ctx = cl.Context([be.device])
    q = cl.CommandQueue(ctx)
    cx = cla.to_device(q, np.zeros(8, np.float32))
    with pytest.raises(SarekError, match="another OpenCL context.*get_backend\\('opencl'\\)"):
        axpy[8, 8](cx, cx, np.float32(1), 8, backend="opencl")


def test_lch70_strided_and_offset_pyopencl_arrays_are_refused() -> None:
    be, cla = _backend("opencl"), _cla()
    c = cla.to_device(be.queue, np.zeros(16, np.float32))
    with pytest.raises(SarekError, match="not C-contiguous"):
        axpy[8, 8](c[::2], c[::2], np.float32(1), 8, backend="opencl")
    with pytest.raises(SarekError, match="offset"):
        axpy[8, 8](c[8:], c[8:], np.float32(1), 8, backend="opencl")


def test_lch70_a_pyopencl_array_on_another_queue_is_waited_for() -> None:
    be, cla = _backend("opencl"), _cla()
    q2 = be.cl.CommandQueue(be.context)
    n = 1 << 16
    cy = cla.zeros(q2, n, np.float32)
    cy.fill(np.float32(3.0))  # queued on q2, perhaps not done yet
    cx = cla.to_device(q2, np.ones(n, np.float32))
    axpy[n, 256](cx, cy, np.float32(2.0), n, backend="opencl")
    assert (cy.get() == 5.0).all()


def test_lch70_a_prefix_and_its_array_overlap_without_being_one_buffer() -> None:
    """``c[:8]`` has offset 0 and the same buffer as ``c``: the same memory, another
    shape — refused as a partial overlap (LCH-64), like numpy's ``t[:k]`` and ``t``."""
    be, cla = _backend("opencl"), _cla()
    c = cla.to_device(be.queue, np.zeros(16, np.float32))
    with pytest.raises(SarekError, match="overlaps another argument"):
        axpy[8, 8](c[:8], c, np.float32(1), 8, backend="opencl")


# --------------------------------------------------------------------------- LCH-71


def test_lch71_cl_array_exports_the_buffer_without_a_copy() -> None:
    be, _ = _backend("opencl"), _cla()
    x = np.arange(10, dtype=np.float32)
    d = to_device(x, "opencl")
    be.stats.reset()
    c = d.cl_array
    assert c.shape == (10,) and c.dtype == np.float32 and c.base_data.int_ptr == \
        d.buffer.handle.int_ptr
    c.fill(np.float32(7.0))
    assert (d.get() == 7.0).all()
    # the device array and its export are one buffer in a launch
    axpy[10, 10](d, c, np.float32(1), 10, backend="opencl")
    assert (d.get() == 14.0).all()
    assert be.stats.bytes_in == 0


def test_lch71_an_interp_device_array_has_no_cl_array() -> None:
    d = to_device(np.zeros(3, np.float32), "interp")
    with pytest.raises(AttributeError, match="interp backend has no cl_array"):
        d.cl_array  # noqa: B018
    assert not hasattr(d, "__cuda_array_interface__")


# --------------------------------------------------------------------------- LCH-72


class FakeCuda:
    """A stand-in for a CuPy/PyTorch/PyCUDA array: only the interface."""

    def __init__(self, **cai: Any) -> None:
        base = {"shape": (4, 3), "typestr": "<f4", "data": (0x7F000000, False),
                "strides": None, "version": 3}
        base.update(cai)
        self.__cuda_array_interface__ = {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()


def test_lch72_the_cuda_array_interface_is_read() -> None:
    v = interop.cuda_interface(FakeCuda())
    assert (v.pointer, v.shape, v.dtype) == (0x7F000000, (4, 3), np.dtype(np.float32))
    ok = interop.cuda_interface(FakeCuda(strides=(24, 8), version=2, typestr="<i8",
                                         stream=5))
    assert ok.dtype == np.int64 and ok.stream is None  # stream exists from version 3
    assert interop.cuda_interface(FakeCuda(stream=7)).stream == 7
    # a contiguous array's strides may be given; extent-1 axes may have any stride
    interop.cuda_interface(FakeCuda(shape=(4, 1), strides=(4, 999)))


@pytest.mark.parametrize(("cai", "why"), [
    ({"strides": (4, 16)}, "not C-contiguous"),
    ({"strides": (24, 8)}, "not C-contiguous"),
    ({"typestr": "|O"}, "no C type"),
    ({"typestr": ">f4"}, "no C type"),
    ({"typestr": "<c8"}, "no C type"),
    ({"data": (0x7F000000, True)}, "read-only"),
    ({"mask": object()}, "masked"),
    ({"version": 9}, "version"),
    ({"shape": _DROP}, "no 'shape'"),
    ({"data": 5}, "pair"),
    ({"data": (0, False)}, "address 0"),
    ({"data": (-4, False)}, "not an address"),
])
def test_lch72_cuda_arrays_a_launch_cannot_bind_are_refused(cai: dict[str, Any],
                                                            why: str) -> None:
    with pytest.raises(InteropError, match=why):
        interop.cuda_interface(FakeCuda(**cai), "argument 'x' of kernel 'k'")


def test_lch72_an_adopted_cuda_array_is_its_memory_in_place() -> None:
    """Adoption makes a device array whose handle is the foreign address (here on a
    stand-in backend object: no GPU), keeping the foreign object alive."""
    from sarek_py.runtime.interp import InterpBackend

    fake, host = FakeCuda(), InterpBackend()
    d = interop.from_cuda_interface(fake, host)
    assert d.buffer.handle == 0x7F000000 and d.shape == (4, 3) and d.owner is fake
    empty_fake = FakeCuda(shape=(0,), data=(0, False))
    assert interop.from_cuda_interface(empty_fake, host).size == 0


def test_lch72_a_cuda_array_without_a_gpu_says_why() -> None:
    try:
        get_backend("cuda")
    except BackendUnavailable:
        pass
    else:
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(BackendUnavailable):
        axpy[4, 4](FakeCuda(shape=(4,)), FakeCuda(shape=(4,)), np.float32(1), 4)


@pytest.mark.parametrize("lib", ["cupy", "torch", "pycuda.gpuarray"])
def test_lch72_real_cuda_arrays_in_place(lib: str) -> None:
    mod = pytest.importorskip(lib, reason=f"{lib} is not installed")
    _backend("cuda")
    n = 256
    x, y = _f32(n, 5), _f32(n, 6)
    if lib == "cupy":
        cx, cy = mod.asarray(x), mod.asarray(y)
        back = cy.get
    elif lib == "torch":
        cx, cy = mod.from_numpy(x).cuda(), mod.from_numpy(y).cuda()
        back = lambda: cy.cpu().numpy()  # noqa: E731
    else:
        cx, cy = mod.to_gpu(x), mod.to_gpu(y)
        back = cy.get
    axpy[n, 64](cx, cy, np.float32(1.5), n, backend="cuda")
    assert back().tobytes() == _want(x, y, 1.5).tobytes()


# --------------------------------------------------------------------------- LCH-73


def test_lch73_a_dlpack_capsule_is_read() -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    view, kind = interop.dlpack_view(a.__dlpack__())
    assert kind == interop.DL_CPU
    assert (view.pointer, view.shape, view.dtype) == (a.ctypes.data, (3, 4), np.int32)


@pytest.mark.parametrize(("make", "why"), [
    (lambda: np.zeros(8, np.float32)[::2], "not C-contiguous"),
    (lambda: np.zeros(4, np.complex64), "no C type"),
])
def test_lch73_dlpack_arrays_a_launch_cannot_bind_are_refused(make: Any, why: str) -> None:
    with pytest.raises(InteropError, match=why):
        interop.dlpack_view(make().__dlpack__())


def test_lch73_a_used_capsule_is_refused() -> None:
    cap = np.zeros(3, np.float32).__dlpack__()
    np.from_dlpack(_Wrap(cap))
    with pytest.raises(InteropError, match="unused 'dltensor'"):
        interop.dlpack_view(cap)


class _Fwd:
    """A foreign CPU array with only the DLPack methods (like a PyTorch CPU tensor)."""

    def __init__(self, a: np.ndarray[Any, Any]) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> Any:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class _Wrap:
    """A fixed (legacy, unversioned) capsule."""

    def __init__(self, capsule: Any, device: tuple[int, int] = (1, 0)) -> None:
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


def test_lch73_a_dlpack_array_on_another_device_is_refused() -> None:
    with pytest.raises(SarekError, match="device type 4"):
        axpy[1, 1](_Wrap(None, (4, 0)), np.zeros(1, np.float32), np.float32(1), 1,
                   backend="interp")


# --------------------------------------------------------------------------- LCH-74


def test_lch74_a_dlpack_capsule_made_by_sarek_py_is_read_by_numpy() -> None:
    """The capsule builder the CUDA export uses, on CPU memory: numpy reads it as a view
    of the same memory and calls its deleter when done."""
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    before = len(interop._LIVE)
    cap = interop.dlpack_capsule(a.ctypes.data, a.shape, a.dtype, (interop.DL_CPU, 0), a)
    v = np.from_dlpack(_Wrap(cap))
    assert v.shape == (2, 3) and v.dtype == np.float64 and np.shares_memory(v, a)
    assert np.array_equal(v, a)
    del v
    gc.collect()
    assert len(interop._LIVE) == before  # the deleter ran


def test_lch74_the_cuda_array_interface_of_a_device_array() -> None:
    from sarek_py.runtime.arrays import DeviceArray
    from sarek_py.runtime.base import DeviceBuffer
    from sarek_py.runtime.interp import InterpBackend

    d = DeviceArray(DeviceBuffer(0x1000, (5, 2), np.dtype(np.float32)), InterpBackend())
    cai = interop.cuda_interface_of(d.buffer)
    assert cai == {"shape": (5, 2), "typestr": "<f4", "data": (0x1000, False),
                   "strides": None, "version": 3, "stream": None}
    back = interop.cuda_interface(type("Obj", (), {"__cuda_array_interface__": cai})())
    assert (back.pointer, back.shape, back.dtype) == (0x1000, (5, 2), np.float32)


def test_lch74_real_export_to_cupy() -> None:
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    _backend("cuda")
    d = to_device(np.arange(8, dtype=np.float32), "cuda")
    assert cp.asarray(d).get().tolist() == list(range(8))
    assert cp.from_dlpack(d).get().tolist() == list(range(8))


# --------------------------------------------------------------------------- LCH-75


def test_lch75_an_interp_device_array_lends_no_numpy_view() -> None:
    """The interpreter's device memory is numpy memory, but no numpy view of it is lent
    (no ``__dlpack__``, ``__array__`` copies): a numpy argument can never alias a device
    array, which buffer identity (LCH-64) assumes."""
    d = to_device(np.arange(4, dtype=np.float32), "interp")
    assert not hasattr(d, "__dlpack__") and not hasattr(d, "__dlpack_device__")
    v = np.asarray(d)
    v[0] = 42.0
    assert d.get().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_lch75_a_cpu_dlpack_object_is_copied_by_to_device_and_used_in_place() -> None:
    x = _f32(50, 7)
    y = _f32(50, 8)
    d = to_device(_Fwd(x), "interp")
    assert d.get().tobytes() == x.tobytes()
    for be in ("interp", "opencl"):
        _backend(be)
        y1 = y.copy()
        axpy[50, 16](x, _Fwd(y1), np.float32(3), 50, backend=be)
        assert y1.tobytes() == _want(x, y, 3).tobytes()  # written into y1's own memory


def test_lch75_a_legacy_capsule_is_read_only_and_refused_as_an_output() -> None:
    """numpy views an unversioned DLPack capsule read-only (it carries no flag): a
    launch refuses it rather than write into memory it was not lent."""
    y = np.zeros(4, np.float32)
    with pytest.raises(SarekError, match="read-only"):
        axpy[4, 4](y, _Wrap(y.__dlpack__()), np.float32(1), 4, backend="interp")


def test_lch75_a_read_only_dlpack_array_is_refused_but_copied_by_to_device() -> None:
    jnp = pytest.importorskip("jax.numpy", reason="jax is not installed")
    j = jnp.arange(4, dtype=jnp.float32)
    assert to_device(j, "interp").get().tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(SarekError, match="read-only"):
        axpy[4, 4](j, j, np.float32(1), 4, backend="interp")


def test_fe61_foreign_arrays_go_through_the_same_checks() -> None:
    """A foreign array becomes a numpy view or a device array, then meets the dtype and
    rank check of FE-15/FE-60."""
    x = np.zeros(4, np.float64)
    with pytest.raises(SarekError, match="dtype float32"):
        axpy[4, 4](_Wrap(x.__dlpack__()), np.zeros(4, np.float32), np.float32(1), 4,
                   backend="interp")
    d = empty(4, np.float32, "interp")
    assert d.backend == "interp"


def test_lch73_a_cuda_dlpack_capsule_is_adopted_in_place() -> None:
    """A CUDA (device type 2) capsule, made here by the export's builder over a fake
    address, becomes a device array of that address on a stand-in backend object; the
    capsule and the producer are kept alive with it."""
    from sarek_py.runtime.interp import InterpBackend

    keep = object()

    class FakeTorch:
        def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
            return interop.dlpack_capsule(0xABC000, (3, 4), np.dtype(np.int64),
                                          (interop.DL_CUDA, 0), keep)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (interop.DL_CUDA, 0)

    producer = FakeTorch()
    d = interop.from_dlpack_cuda(producer, InterpBackend())
    assert (d.buffer.handle, d.shape, d.dtype) == (0xABC000, (3, 4), np.int64)
    assert d.owner[0] is producer
    cpu = _Wrap(np.zeros(2, np.float32).__dlpack__())
    with pytest.raises(InteropError, match="not CUDA"):
        interop.from_dlpack_cuda(cpu, InterpBackend())


def test_lch70_a_pipeline_over_pyopencl_arrays_fuses() -> None:
    """Each launch adopts the pyopencl array anew; the wrappers are one buffer (LCH-64),
    so the producer's output and the consumer's input are seen as the same array."""
    from sarek_py.frontend import pipeline

    be, cla = _backend("opencl"), _cla()

    @kernel
    def scale(x: Vec[f32], t: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            t[i] = 2.0 * x[i]

    @kernel
    def neg(t: Vec[f32], out: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            out[i] = -t[i]

    n = 1000
    x = _f32(n, 9)
    cx, ct, co = (cla.to_device(be.queue, a) for a in (x, np.zeros_like(x), np.zeros_like(x)))
    with pipeline(backend="opencl") as p:
        scale[n, 64](cx, ct, n)
        neg[n, 64](ct, co, n)
    assert [lc.kernel.name for lc in p.launches] == ["scale_neg"]
    assert co.get().tobytes() == (-(np.float32(2) * x)).tobytes()


def test_lch72_a_foreign_address_is_passed_to_pycuda_as_a_pointer() -> None:
    """PyCUDA takes a numpy integer as a pointer argument and refuses a Python int, so a
    foreign address is bound as ``np.uintp``; its own allocations pass as they are."""
    from sarek_py.runtime.base import DeviceBuffer
    from sarek_py.runtime.cuda import _handle

    h = _handle(DeviceBuffer(0x7F000000, (4,), np.dtype(np.float32)))
    assert isinstance(h, np.uintp) and int(h) == 0x7F000000
    alloc = object()
    assert _handle(DeviceBuffer(alloc, (4,), np.dtype(np.float32))) is alloc


def test_lch64_a_pyopencl_prefix_and_its_array_are_not_fused() -> None:
    """``c[:n]`` written by the producer and ``c`` read by the consumer: the same memory,
    another shape — a partial overlap, which fusion refuses (LEG-7) and the launches run
    one after the other."""
    from sarek_py.frontend import pipeline

    be, cla = _backend("opencl"), _cla()

    @kernel
    def double(x: Vec[f32], t: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            t[i] = 2.0 * x[i]

    @kernel
    def negate(t: Vec[f32], out: Vec[f32], n: i32):
        i = global_thread_id()
        if i < n:
            out[i] = -t[i]

    n = 300
    c = cla.to_device(be.queue, np.zeros(2 * n, np.float32))
    x = cla.to_device(be.queue, _f32(n, 10))
    o = cla.zeros(be.queue, n, np.float32)
    with pipeline(backend="opencl") as p:
        double[n, 64](x, c[:n], n)
        negate[n, 64](c, o, n)
    assert "not fused: [LEG-7]" in p.report() and len(p.launches) == 2
    assert o.get().tobytes() == (-(np.float32(2) * x.get())).tobytes()


def test_lch74_a_cuda_device_array_exports_both_interfaces() -> None:
    """The cuda backend's exports, on a backend object made without a driver (no GPU
    here): the interface dict, the DLPack device and a capsule of the same address."""
    from sarek_py.runtime.arrays import DeviceArray
    from sarek_py.runtime.base import DeviceBuffer
    from sarek_py.runtime.cuda import CudaBackend

    fake = object.__new__(CudaBackend)
    Backend.__init__(fake)
    synced: list[bool] = []
    fake.sync = lambda: synced.append(True)  # type: ignore[method-assign]
    d = DeviceArray(DeviceBuffer(0x5000, (2, 3), np.dtype(np.float32)), fake)
    assert d.__cuda_array_interface__["data"] == (0x5000, False)
    assert d.__dlpack_device__() == (interop.DL_CUDA, 0)
    view, kind = interop.dlpack_view(d.__dlpack__(stream=None))
    assert (kind, view.pointer, view.shape, view.dtype) == (interop.DL_CUDA, 0x5000, (2, 3),
                                                           np.float32)
    assert synced == [True]  # our launches are done before the consumer reads
    assert d.buffer_id == ("cuda", id(fake), 0x5000)
    with pytest.raises(AttributeError, match="cuda backend has no cl_array"):
        d.cl_array  # noqa: B018


def test_lch74_an_unconsumed_capsule_releases_its_export() -> None:
    a = np.arange(3, dtype=np.float32)
    before = len(interop._LIVE)
    cap = interop.dlpack_capsule(a.ctypes.data, a.shape, a.dtype, (interop.DL_CPU, 0), a)
    assert len(interop._LIVE) == before + 1
    del cap
    gc.collect()
    assert len(interop._LIVE) == before
    used = interop.dlpack_capsule(a.ctypes.data, a.shape, a.dtype, (interop.DL_CPU, 0), a)
    v = np.from_dlpack(_Wrap(used))  # consumed: numpy calls the deleter when v dies
    del used
    gc.collect()
    assert len(interop._LIVE) == before + 1 and v.tolist() == [0.0, 1.0, 2.0]
    del v
    gc.collect()
    assert len(interop._LIVE) == before
