"""Regressions from the red team of issue 14 (device arrays, temporaries, cached
pipelines, replay): each test failed before its fix; the scripts are named in the note.
Rules: FE-15, FE-63, FE-70, FE-72, FE-73, FE-74, FE-82, LCH-15, LCH-60."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import sarek_py
import sarek_py.runtime as runtime
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.frontend.temporaries import DeadTemporaryError
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.runtime import get_backend


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def relu(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = max(t[i], 0.0)


@kernel
def copy(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = t[i]


N = 40
BACKENDS = ["interp", "opencl"]


def backend(name: str) -> Any:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("name", BACKENDS)
def test_fe73_a_dead_temporary_passed_in_a_second_block_is_refused(name: str) -> None:
    """FE-73 (red team x14): a pipeline entered again, passing the temporary whose stores
    the first block dropped to a launch, is a DeadTemporaryError (it read poison)."""
    backend(name)
    x = np.arange(N, dtype=np.float32)
    out, out2 = np.zeros(N, np.float32), np.zeros(N, np.float32)
    p = pipeline(backend=name)
    with p:
        t = p.empty_like(x)
        scale[N, 32](x, t, 2.0, N)
        relu[N, 32](t, out, N)
    assert out.tobytes() == np.maximum(2 * x, 0).tobytes()
    with pytest.raises(DeadTemporaryError, match="p.keep"):
        with p:
            copy[N, 32](t, out2, N)
    assert not out2.any()


def test_lch15_one_backend_object_per_name_across_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LCH-15 (red team x5b): threads that first ask for a backend at the same time get
    one object, so device arrays made in any of them launch in all."""
    import time

    monkeypatch.setattr(runtime, "_instances", {})  # a first touch (restored after)
    make = runtime._make

    def slow_make(name: str) -> Any:  # a backend as slow to make as an OpenCL context
        time.sleep(0.05)
        return make(name)

    monkeypatch.setattr(runtime, "_make", slow_make)
    go = threading.Barrier(4)
    made: list[Any] = []

    def worker() -> None:
        go.wait()
        made.append(sarek_py.to_device(np.ones(8, np.float32), backend="interp"))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({id(d.runtime) for d in made}) == 1
    out = np.zeros(8, np.float32)
    for d in made:
        scale[8, 8](d, out, 2.0, 8, backend="interp")


@pytest.mark.parametrize("name", BACKENDS)
def test_fe82_unnamed_temporaries_do_not_rebuild_the_kernel(name: str) -> None:
    """FE-82, EF-33 (red team x9b): a temporary without a variable name (a new 'temporary
    #k' each run) finds its rewritten kernel again: nothing is emitted after the first
    run."""
    be = backend(name)
    n = 64
    d_x = sarek_py.to_device(np.ones(n, np.float32), backend=name)
    d_y = sarek_py.empty_like(d_x)

    def run() -> None:
        with pipeline(backend=name) as p:
            tmps = [p.empty_like(d_x)]
            scale[n, 32](d_x, tmps[0], 2.0, n)
            relu[n, 32](tmps[0], d_y, n)

    run()
    be.stats.reset()
    for _ in range(3):
        run()
    assert be.stats.emits == 0
    assert d_y.get().tobytes() == np.full(n, 2.0, np.float32).tobytes()


def test_fe63_type_markers_are_dtypes() -> None:
    """FE-63 (red team x20): ``p.empty(n, f32)`` and ``sarek_py.empty(n, f32)`` — the
    issue's own spelling — take the front end's type markers; an object dtype is refused
    by both; ``p.empty_like`` of a list says what to write."""
    d = sarek_py.empty(4, sarek_py.f32, backend="interp")
    assert d.dtype == np.float32
    with pipeline(backend="interp") as p:
        t = p.empty(4, sarek_py.i32)
        assert t.dtype == np.int32
        with pytest.raises(SarekError, match="plain numbers"):
            p.empty(4, object)
        with pytest.raises(SarekError, match="np.asarray"):
            p.empty_like([1.0, 2.0])
    with pytest.raises(SarekError, match="plain numbers"):
        sarek_py.empty(4, object, backend="interp")


@pytest.mark.parametrize("name", BACKENDS)
def test_lch60_an_allocation_the_device_cannot_make_is_one_sentence(name: str) -> None:
    """LCH-60 (red team x12, x22): an allocation past the device's memory is a
    LaunchError naming the bytes and the backend, not a raw LogicError/MemoryError."""
    backend(name)
    with pytest.raises(SarekError, match="cannot allocate 4398046511104 bytes"):
        sarek_py.empty(1 << 40, np.float32, backend=name)


@pytest.mark.parametrize("name", BACKENDS)
def test_fe15_read_only_arrays_the_kernel_only_reads(name: str) -> None:
    """FE-15 (red team x1/x6): a read-only numpy array (a JAX export, a constant) is
    accepted for a parameter the kernel only reads, alone and in a pipeline, and refused
    where the kernel stores, saying to pass a writable copy."""
    backend(name)
    x = np.arange(N, dtype=np.float32)
    x.flags.writeable = False
    y = np.zeros(N, np.float32)
    scale[N, 32](x, y, 2.0, N, backend=name)
    assert y.tobytes() == (2 * x).tobytes()
    z = np.zeros(N, np.float32)
    with pipeline(backend=name):
        scale[N, 32](x, y, 3.0, N)
        relu[N, 32](y, z, N)
    assert z.tobytes() == np.maximum(3 * x, 0).tobytes()
    with pytest.raises(SarekError, match="writable copy"):
        scale[N, 32](y, x, 2.0, N, backend=name)


@pytest.mark.parametrize("name", BACKENDS)
def test_fe72_a_device_array_read_inside_the_block_sees_the_launches(name: str) -> None:
    """FE-72 (red team x29): a device array's get() inside the block runs the launches
    recorded so far first (as a temporary's does), and its set() does not change what an
    earlier recorded launch reads."""
    backend(name)
    x = np.arange(4, dtype=np.float32) + 1
    d_x = sarek_py.to_device(x, backend=name)
    d_t = sarek_py.empty_like(d_x)
    with pipeline(backend=name):
        scale[4, 4](d_x, d_t, 2.0, 4)
        seen = d_t.get()
        d_x.set(np.zeros(4, np.float32))
        scale[4, 4](d_x, d_t, 3.0, 4)
    assert seen.tobytes() == (2 * x).tobytes()
    assert not d_t.get().any()


def test_fe74_the_note_of_a_temporary_only_read() -> None:
    """FE-74 (red team x4 D): a temporary that the one launch using it only reads is
    said to hold no value written here, not to be that launch's result."""
    x = np.arange(N, dtype=np.float32)
    out = np.zeros(N, np.float32)
    with pipeline(backend="interp") as p:
        t = p.empty_like(x)
        relu[N, 32](t, out, N)
    text = p.report()
    assert "only reads it" in text and "launch's result" not in text
