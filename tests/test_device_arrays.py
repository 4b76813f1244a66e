"""Device arrays (specs/launch.md LCH-60 … LCH-66, specs/frontend.md FE-60 … FE-64): made,
read back, passed to launches and pipelines with no copy, refused where they cannot go.
Every result is compared bitwise with the same launches on numpy arrays."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import sarek_py
from sarek_py import DeviceArray, Vec, Vec2, empty, empty_like, f32, i32, kernel, to_device
from sarek_py.frontend import global_thread_id, pipeline
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.runtime import Backend, get_backend
from sarek_py.runtime.arrays import DeviceArrayError


@kernel
def axpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = a * x[i] + y[i]


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def relu(t: Vec[f32], out: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        out[i] = max(t[i], 0.0)


@kernel
def rows(m: Vec2[f32], r: Vec[f32], n: i32, c: i32):
    i = global_thread_id()
    if i < n:
        s = 0.0
        for j in range(c):
            s = s + m[i, j]
            m[i, j] = s
        r[i] = s


def _backend(name: str) -> Backend:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)


@pytest.fixture(params=["interp", "opencl"])
def be(request: pytest.FixtureRequest) -> Iterator[Backend]:
    b = _backend(request.param)
    b.stats.reset()
    yield b


def _f32(n: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


# --------------------------------------------------------------------------- LCH-60


def test_lch60_to_device_empty_and_empty_like_have_the_array_attributes(be: Backend) -> None:
    x = _f32(10).reshape(2, 5)
    d = to_device(x, backend=be.name)
    assert isinstance(d, DeviceArray) and isinstance(d, sarek_py.DeviceArray)
    assert (d.shape, d.dtype, d.size, d.nbytes, d.ndim, d.backend) == (
        (2, 5), np.dtype(np.float32), 10, 40, 2, be.name)
    e = empty((3, 4), np.int32, backend=be.name)
    assert (e.shape, e.dtype, e.backend) == ((3, 4), np.dtype(np.int32), be.name)
    assert empty(7, backend=be.name).shape == (7,)
    like = empty_like(d)
    assert (like.shape, like.dtype, like.backend) == (d.shape, d.dtype, be.name)
    like_np = empty_like(x, backend=be.name)
    assert (like_np.shape, like_np.dtype) == (x.shape, x.dtype)
    assert be.stats.bytes_in == x.nbytes  # to_device is the one copy


def test_lch60_the_default_backend_is_the_launches_default() -> None:
    assert to_device(np.zeros(3, np.float32)).backend == get_backend("default").name


@pytest.mark.parametrize("shape", [-1, (2, -3), 2.5, "4"])
def test_lch60_bad_shapes_are_refused(shape: Any) -> None:
    with pytest.raises(DeviceArrayError, match="shape"):
        empty(shape, np.float32, backend="interp")


def test_lch60_object_dtypes_and_unknown_backends_are_refused() -> None:
    with pytest.raises(DeviceArrayError, match="plain numbers"):
        empty(3, object, backend="interp")
    with pytest.raises(SarekError, match="unknown backend"):
        empty(3, np.float32, backend="vulkan")


def test_lch60_to_device_of_a_device_array_copies_across_backends() -> None:
    ob = _backend("opencl")
    x = _f32(33)
    d = to_device(x, backend="interp")
    e = to_device(d, backend=ob.name)
    assert e.backend == "opencl" and np.array_equal(e.get(), x)
    d.set(np.zeros_like(x))  # e is its own copy
    assert np.array_equal(e.get(), x)


# --------------------------------------------------------------------------- LCH-61


def test_lch61_get_asarray_and_copy_to_host_are_host_copies(be: Backend) -> None:
    x = _f32(12).reshape(3, 4)
    d = to_device(x, backend=be.name)
    g = d.get()
    assert np.array_equal(g, x) and g is not x
    g[0, 0] = 99.0
    assert np.array_equal(d.get(), x)  # a copy, not a view
    assert np.array_equal(np.asarray(d), x)
    assert np.asarray(d, dtype=np.float64).dtype == np.float64
    big = np.zeros((3, 8), np.float32)
    d.copy_to_host(big[:, ::2])  # a non-contiguous destination
    assert np.array_equal(big[:, ::2], x) and not big[:, 1::2].any()
    with pytest.raises(DeviceArrayError, match="same"):
        d.copy_to_host(np.zeros((4, 3), np.float32))
    with pytest.raises(DeviceArrayError, match="read-only"):
        ro = np.zeros((3, 4), np.float32)
        ro.flags.writeable = False
        d.copy_to_host(ro)
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(d, copy=False)


def test_lch61_indexing_a_device_array_is_refused_with_get_first() -> None:
    d = to_device(np.arange(4, dtype=np.float32), backend="interp")
    for bad in (lambda: d[0], lambda: d[1:], lambda: list(d)):
        with pytest.raises(DeviceArrayError, match=r"\.get\(\)"):
            bad()
    with pytest.raises(DeviceArrayError, match="set"):
        d[0] = 1.0
    assert len(d) == 4 and "DeviceArray(shape=(4,)" in repr(d)


def test_lch61_set_copies_in_and_checks_the_shape(be: Backend) -> None:
    d = empty(5, np.float32, backend=be.name)
    d.set(np.arange(5, dtype=np.float32))
    assert d.get().tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(DeviceArrayError):
        d.set(np.arange(6, dtype=np.float32))


# --------------------------------------------------------------------------- LCH-62


def test_lch62_a_launch_on_device_arrays_copies_nothing(be: Backend) -> None:
    n = 1000
    x, y = _f32(n, 1), _f32(n, 2)
    want = y.copy()
    axpy[n, 256](x, want, np.float32(1.5), n, backend="interp")
    dx, dy = to_device(x, be.name), to_device(y, be.name)
    be.stats.reset()
    axpy[n, 256](dx, dy, np.float32(1.5), n, backend=be.name)
    axpy.launch(dx, dy, np.float32(0.0), n, threads=n, backend=be.name)
    assert (be.stats.bytes_in, be.stats.bytes_out, be.stats.bytes_mapped) == (0, 0, 0)
    assert be.stats.bytes_allocated == 0 and be.stats.launches == 2
    assert dy.get().tobytes() == want.tobytes()


def test_lch62_numpy_and_device_arguments_mix_in_one_launch(be: Backend) -> None:
    n = 300
    x, y = _f32(n, 3), _f32(n, 4)
    want = y.copy()
    axpy[n, 64](x, want, np.float32(-2.0), n, backend="interp")
    dx = to_device(x, be.name)
    y1 = y.copy()
    axpy[n, 64](dx, y1, np.float32(-2.0), n, backend=be.name)  # numpy written back
    assert y1.tobytes() == want.tobytes()
    dy = to_device(y, be.name)
    axpy[n, 64](x, dy, np.float32(-2.0), n, backend=be.name)
    assert dy.get().tobytes() == want.tobytes()


def test_lch62_the_same_device_array_twice_is_one_buffer(be: Backend) -> None:
    v = _f32(64, 5)
    want = v.copy()
    axpy[64, 64](want, want, np.float32(3.0), 64, backend="interp")
    d = to_device(v, be.name)
    axpy[64, 64](d, d, np.float32(3.0), 64, backend=be.name)
    assert d.get().tobytes() == want.tobytes()


def test_lch62_two_d_and_empty_device_arrays(be: Backend) -> None:
    m = _f32(35, 6).reshape(7, 5)
    mw, rw = m.copy(), np.zeros(7, np.float32)
    rows[7, 4](mw, rw, 7, 5, backend="interp")
    dm, dr = to_device(m, be.name), empty(7, np.float32, be.name)
    rows[7, 4](dm, dr, 7, 5, backend=be.name)
    assert dm.get().tobytes() == mw.tobytes() and dr.get().tobytes() == rw.tobytes()
    z = empty(0, np.float32, be.name)
    axpy[1, 1](z, z, np.float32(1.0), 0, backend=be.name)
    assert z.get().shape == (0,)


# --------------------------------------------------------------------------- LCH-63


def test_lch63_a_device_array_of_another_backend_is_refused() -> None:
    _backend("opencl")
    d = to_device(np.zeros(8, np.float32), backend="interp")
    y = np.zeros(8, np.float32)
    with pytest.raises(SarekError, match=r"device array of the interp backend.*opencl.*"
                       r"to_device"):
        axpy[8, 8](d, y, np.float32(1.0), 8, backend="opencl")


def test_lch63_another_backend_object_of_the_same_name_is_refused() -> None:
    from sarek_py.runtime.interp import InterpBackend

    other = InterpBackend()
    d = to_device(np.zeros(8, np.float32), backend=other)
    with pytest.raises(SarekError, match="another interp backend object"):
        axpy[8, 8](d, d, np.float32(1.0), 8, backend="interp")


# --------------------------------------------------------------------------- LCH-64


def test_lch64_a_pipeline_fuses_over_device_arrays_with_no_copy(be: Backend) -> None:
    n = 4096
    x = _f32(n, 7)
    t1, o1 = np.zeros_like(x), np.zeros_like(x)
    scale[n, 256](x, t1, 2.0, n, backend="interp")
    relu[n, 256](t1, o1, n, backend="interp")
    dx, dt, do = to_device(x, be.name), empty_like(x, be.name), empty_like(x, be.name)
    be.stats.reset()
    with pipeline(backend=be.name) as p:
        scale[n, 256](dx, dt, 2.0, n)
        relu[n, 256](dt, do, n)
    assert [lc.kernel.name for lc in p.launches] == ["scale_relu"]
    assert (be.stats.bytes_in, be.stats.bytes_out) == (0, 0)
    assert do.get().tobytes() == o1.tobytes() and dt.get().tobytes() == t1.tobytes()


def test_lch64_the_same_device_array_as_producer_output_and_consumer_input(be: Backend
                                                                           ) -> None:
    """relu in place on the producer's output: one buffer, as numpy's t, t."""
    n = 512
    x = _f32(n, 8)
    t1 = np.zeros_like(x)
    scale[n, 128](x, t1, -1.0, n, backend="interp")
    relu[n, 128](t1, t1, n, backend="interp")
    dx, dt = to_device(x, be.name), empty(n, np.float32, be.name)
    with pipeline(backend=be.name) as p:
        scale[n, 128](dx, dt, -1.0, n)
        relu[n, 128](dt, dt, n)
    assert dt.get().tobytes() == t1.tobytes()
    assert p.launches  # ran


def test_lch64_a_fused_kernel_rechecks_device_array_bindings(be: Backend) -> None:
    """A fused kernel launched again on device arrays is checked against the buffers it
    was proved for (LEG-13 … LEG-15): t and out were distinct buffers, binding one device
    array to both is refused; distinct device arrays run."""
    n = 256
    dx, dt, do = (to_device(_f32(n, s), be.name) for s in (9, 10, 11))
    with pipeline(backend=be.name) as p:
        scale[n, 64](dx, dt, 2.0, n)
        relu[n, 64](dt, do, n)
    fused = p.launches[0]
    assert fused.kernel.name == "scale_relu"
    names = [q.name for q in fused.kernel.params]
    args = dict(fused.by_name)
    same = dict(args)
    x_name = next(k for k in names if args[k] is dx)
    out_name = next(k for k in names if args[k] is do)
    same[out_name] = dx  # out aliases x: not what was proved
    same[x_name] = dx
    with pytest.raises(FusionRefused, match="LEG-15"):
        be.run_kernel(fused.kernel, same, n, 64)
    other = dict(args)
    other[out_name] = empty(n, np.float32, be.name)
    be.run_kernel(fused.kernel, other, n, 64)  # distinct buffers: fine


# ---------------------------------------------------------------------------- FE-60


def test_fe60_device_array_of_the_wrong_dtype_or_rank_is_refused() -> None:
    d64 = to_device(np.zeros(4, np.float64), backend="interp")
    d2 = to_device(np.zeros((2, 2), np.float32), backend="interp")
    y = np.zeros(4, np.float32)
    with pytest.raises(SarekError, match="dtype float32 and rank 1, not a device array of "
                       "dtype float64"):
        axpy[4, 4](d64, y, np.float32(1), 4, backend="interp")
    with pytest.raises(SarekError, match="rank 1, not a device array of dtype float32 and "
                       "rank 2"):
        axpy[4, 4](d2, y, np.float32(1), 4, backend="interp")
    with pytest.raises(SarekError, match="scalar"):
        axpy[4, 4](y, y, d64, 4, backend="interp")


def test_fe60_an_unknown_array_kind_names_what_is_accepted() -> None:
    with pytest.raises(SarekError, match=r"numpy array of f32 \(rank 1\), a "
                       "sarek_py.DeviceArray, a pyopencl"):
        axpy[4, 4]([0.0] * 4, np.zeros(4, np.float32), np.float32(1), 4, backend="interp")


# ----------------------------------------------------------------- LCH-65, LCH-66


def test_lch65_host_copies_wait_for_the_launches_made_before(be: Backend) -> None:
    n = 2048
    x = _f32(n, 12)
    dx, dy = to_device(x, be.name), empty(n, np.float32, be.name)
    dy.set(np.zeros(n, np.float32))
    pending = be.start(axpy.ir, {"x": dx, "y": dy, "a": np.float32(2), "n": n}, n, 256)
    got = dy.get()  # no sync by the caller: get() waits
    be.finish(pending)
    assert got.tobytes() == (np.float32(2) * x).tobytes()
    assert pending.hosts == () and pending.mapped == ()  # nothing to copy at finish


def test_lch66_write_discard_does_not_touch_a_device_array(be: Backend) -> None:
    """``overwritten`` names a device array: no poison fill, nothing counted as discarded;
    a kernel that reads it first (axpy reads y) sees its contents."""
    n = 64
    x, y = _f32(n, 13), _f32(n, 14)
    want = y.copy()
    axpy[n, 64](x, want, np.float32(1), n, backend="interp")
    dx, dy = to_device(x, be.name), to_device(y, be.name)
    be.stats.reset()
    be.run_kernel(axpy.ir, {"x": dx, "y": dy, "a": 1.0, "n": n}, n, 64, overwritten=["y"])
    assert be.stats.bytes_discarded == 0
    assert dy.get().tobytes() == want.tobytes()


# ---------------------------------------------------------------------------- FE-62


def test_fe62_the_device_array_api_is_at_the_top_of_the_package() -> None:
    for name in ("DeviceArray", "to_device", "empty", "empty_like"):
        assert name in sarek_py.__all__ and hasattr(sarek_py, name)
    assert sarek_py.DeviceArray is DeviceArray
