"""Zero copy on a device that shares the host's memory (specs/launch.md LCH-67 … LCH-69),
and the differential test of every array kind (LCH-62, LCH-70): random launches on numpy
arrays (in place or copied), device arrays and pyopencl arrays give the same bytes as the
interpreter on numpy arrays."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from test_device_arrays import axpy, relu, rows, scale

from sarek_py import to_device
from sarek_py.frontend import pipeline
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime import Backend, get_backend


def _ocl() -> Backend:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(exc.message)


@pytest.fixture
def zc() -> Iterator[Backend]:
    """The opencl backend with zero copy on (where the device shares host memory)."""
    be = _ocl()
    if not be.device.host_unified_memory:  # type: ignore[attr-defined]
        pytest.skip(f"{be.device_name} does not share memory with the host")  # type: ignore[attr-defined]
    was = be.zero_copy  # type: ignore[attr-defined]
    be.zero_copy = True  # type: ignore[attr-defined]
    be.stats.reset()
    yield be
    be.zero_copy = was  # type: ignore[attr-defined]


def _f32(n: int, seed: int) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def _want(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], a: float) -> bytes:
    out = np.ascontiguousarray(y).copy()
    axpy[max(len(x), 1), 64](np.ascontiguousarray(x), out, np.float32(a), len(x),
                             backend="interp")
    return out.tobytes()


# --------------------------------------------------------------------------- LCH-67


def test_lch67_zero_copy_is_on_exactly_where_the_device_shares_host_memory() -> None:
    be = _ocl()
    fresh = type(be)()
    assert fresh.zero_copy == bool(be.device.host_unified_memory)  # type: ignore[attr-defined]


def test_lch67_contiguous_numpy_arguments_are_used_in_place(zc: Backend) -> None:
    n = 5000
    x, y = _f32(n, 1), _f32(n, 2)
    want = _want(x, y, 0.25)
    axpy[n, 256](x, y, np.float32(0.25), n, backend="opencl")
    assert y.tobytes() == want
    s = zc.stats
    assert (s.bytes_in, s.bytes_out, s.bytes_allocated) == (0, 0, 0)
    assert s.bytes_mapped == x.nbytes + y.nbytes


def test_lch67_misaligned_arrays_are_used_in_place_and_correct(zc: Backend) -> None:
    n = 1001
    base_x, base_y = _f32(n + 3, 3), _f32(n + 3, 4)
    x, y = base_x[1:n + 1], base_y[3:]  # 4 and 12 bytes past numpy's alignment
    want = _want(x, y, -1.0)
    axpy[n, 128](x, y, np.float32(-1.0), n, backend="opencl")
    assert y.tobytes() == want
    assert zc.stats.bytes_in == 0


def test_lch67_non_contiguous_views_are_copied_and_written_back(zc: Backend) -> None:
    n = 300
    big_x, big_y = _f32(2 * n, 5), _f32(3 * n, 6)
    x, y = big_x[::2], big_y[::-3]
    before = big_y.copy()
    want = _want(x, y, 2.0)
    axpy[n, 64](x, y, np.float32(2.0), n, backend="opencl")
    assert np.ascontiguousarray(y).tobytes() == want
    mask = np.ones(3 * n, bool)
    mask[::-3] = False
    assert (big_y[mask] == before[mask]).all()  # the other elements are untouched
    assert zc.stats.bytes_in == x.nbytes + y.nbytes and zc.stats.bytes_out == y.nbytes


def test_lch67_read_only_and_empty_arrays_take_the_copying_path(zc: Backend) -> None:
    x, y = _f32(64, 7), _f32(64, 8)
    want = _want(x, y, 1.0)
    x.flags.writeable = False
    zc.run_kernel(axpy.ir, {"x": x, "y": y, "a": 1.0, "n": 64}, 64, 64)
    assert y.tobytes() == want
    assert zc.stats.bytes_in == x.nbytes and zc.stats.bytes_mapped == y.nbytes
    e = np.zeros(0, np.float32)
    zc.run_kernel(axpy.ir, {"x": e, "y": e, "a": 1.0, "n": 0}, 1, 1)


def test_lch67_the_same_array_twice_is_one_buffer_in_place(zc: Backend) -> None:
    v = _f32(128, 9)
    want = _want(v, v, 3.0)
    axpy[128, 32](v, v, np.float32(3.0), 128, backend="opencl")
    assert v.tobytes() == want
    assert zc.stats.bytes_mapped == v.nbytes


def test_lch67_a_pipeline_on_numpy_arrays_fuses_in_place(zc: Backend) -> None:
    n = 4096
    x = _f32(n, 10)
    t1, o1 = np.zeros_like(x), np.zeros_like(x)
    scale[n, 256](x, t1, 2.0, n, backend="interp")
    relu[n, 256](t1, o1, n, backend="interp")
    t2, o2 = np.zeros_like(x), np.zeros_like(x)
    with pipeline(backend="opencl") as p:
        scale[n, 256](x, t2, 2.0, n)
        relu[n, 256](t2, o2, n)
    assert [lc.kernel.name for lc in p.launches] == ["scale_relu"]
    assert o2.tobytes() == o1.tobytes() and t2.tobytes() == t1.tobytes()
    assert zc.stats.bytes_in == 0 and zc.stats.bytes_mapped == 3 * x.nbytes


def test_lch68_the_copying_path_when_zero_copy_is_off(zc: Backend) -> None:
    zc.zero_copy = False  # type: ignore[attr-defined]
    x, y = _f32(100, 11), _f32(100, 12)
    want = _want(x, y, 0.5)
    axpy[100, 32](x, y, np.float32(0.5), 100, backend="opencl")
    assert y.tobytes() == want
    assert zc.stats.bytes_mapped == 0 and zc.stats.bytes_in == x.nbytes + y.nbytes


# ----------------------------------------------------------- differential (LCH-69)

Kind = Callable[[np.ndarray[Any, Any], str], Any]


def _kinds(backend: str) -> dict[str, Kind]:
    kinds: dict[str, Kind] = {"numpy": lambda a, be: a,
                              "device": lambda a, be: to_device(a, be)}
    if backend == "opencl":
        import pyopencl.array as cla

        q = get_backend("opencl").queue  # type: ignore[attr-defined]
        kinds["pyopencl"] = lambda a, be: cla.to_device(q, np.ascontiguousarray(a))
    return kinds


def _host(v: Any) -> np.ndarray[Any, Any]:
    if isinstance(v, np.ndarray):
        return v
    return np.asarray(v.get())


@pytest.mark.parametrize("seed", range(24))
def test_lch69_every_array_kind_gives_the_same_bytes(seed: int) -> None:
    """Random sizes (0 included), views, 2-D arrays, the same array twice, and each
    argument a numpy array (in place or copied), a device array or a pyopencl array: the
    bytes are the interpreter's on numpy arrays."""
    rng = np.random.default_rng(seed)
    for backend in ("interp", "opencl"):
        try:
            be = get_backend(backend)
        except BackendUnavailable:
            continue
        kinds = _kinds(backend)
        n = int(rng.choice([0, 1, 7, 256, 1000]))
        which = rng.integers(0, 3)
        zero_copy = bool(rng.integers(0, 2))
        was = getattr(be, "zero_copy", None)
        if was is not None:
            be.zero_copy = zero_copy  # type: ignore[attr-defined]
        try:
            if which == 0:  # axpy, maybe aliased, maybe on views
                x = _f32(2 * n, seed)[:: 2 if rng.integers(0, 2) else 1][:n]
                y = _f32(n, seed + 100) if rng.integers(0, 2) else x.copy()
                alias = bool(rng.integers(0, 2))
                want = _want(x, x if alias else y, 1.5)
                kx, ky = rng.choice(list(kinds)), rng.choice(list(kinds))
                ax = kinds[str(kx)](x if kx == "numpy" else x.copy(), backend)
                ay = ax if alias else kinds[str(ky)](y, backend)
                axpy[max(n, 1), 64](ax, ay, np.float32(1.5), n, backend=backend)
                got = np.ascontiguousarray(_host(ay)).tobytes()
                assert got == want, (backend, n, kx, ky, alias, zero_copy)
            elif which == 1:  # 2-D rows
                c = int(rng.integers(1, 5))
                m = _f32(n * c, seed).reshape(n, c)
                mw, rw = m.copy(), np.zeros(n, np.float32)
                rows[max(n, 1), 32](mw, rw, n, c, backend="interp")
                km, kr = rng.choice(list(kinds)), rng.choice(list(kinds))
                am, ar = kinds[str(km)](m, backend), kinds[str(kr)](np.zeros(n, np.float32),
                                                                   backend)
                rows[max(n, 1), 32](am, ar, n, c, backend=backend)
                assert _host(am).tobytes() == mw.tobytes(), (backend, n, km, zero_copy)
                assert _host(ar).tobytes() == rw.tobytes(), (backend, n, kr, zero_copy)
            else:  # a fused pipeline
                x = _f32(n, seed)
                t1, o1 = np.zeros_like(x), np.zeros_like(x)
                scale[max(n, 1), 64](x, t1, -0.5, n, backend="interp")
                relu[max(n, 1), 64](t1, o1, n, backend="interp")
                ks = [str(rng.choice(list(kinds))) for _ in range(3)]
                ax, at, ao = (kinds[k](a, backend) for k, a in
                              zip(ks, (x, np.zeros_like(x), np.zeros_like(x)), strict=True))
                with pipeline(backend=backend):
                    scale[max(n, 1), 64](ax, at, -0.5, n)
                    relu[max(n, 1), 64](at, ao, n)
                assert _host(at).tobytes() == t1.tobytes(), (backend, n, ks, zero_copy)
                assert _host(ao).tobytes() == o1.tobytes(), (backend, n, ks, zero_copy)
        finally:
            if was is not None:
                be.zero_copy = was  # type: ignore[attr-defined]


def test_lch68_a_fault_is_raised_alike_with_arrays_in_place(zc: Backend) -> None:
    """An out-of-bounds launch (LCH-20) raises the same error with numpy arrays used in
    place; those arrays, like device arrays, may hold what was stored before the fault
    (nothing is copied back either way)."""
    from sarek_py.ir.diagnostics import InterpError
    from sarek_py.ir.parser import parse_file

    k = parse_file("tests/test_device_safety_cases.sk").kernel("scan")
    out = np.full(16, 5, np.int32)
    with pytest.raises(InterpError, match=r"out-of-bounds read of array 'x' at index \[16\]"):
        zc.run_kernel(k, {"x": np.zeros(16, np.int32), "out": out}, 16, 16)
    assert zc.stats.bytes_mapped == 2 * 64 and zc.stats.bytes_out == 0


def test_lch67_disjoint_halves_of_one_array_are_two_buffers_in_place(zc: Backend) -> None:
    n = 512
    base = _f32(2 * n, 13)
    x, y = base[:n], base[n:]
    want = _want(x, y, 4.0)
    axpy[n, 64](x, y, np.float32(4.0), n, backend="opencl")
    assert y.tobytes() == want and zc.stats.bytes_mapped == base.nbytes


def test_lch67_overlapping_views_are_still_refused(zc: Backend) -> None:
    from sarek_py.ir.diagnostics import SarekError

    base = _f32(100, 14)
    with pytest.raises(SarekError, match="overlaps another argument"):
        zc.run_kernel(axpy.ir, {"x": base[:60], "y": base[40:], "a": 1.0, "n": 60}, 60, 60)
