"""Dead stores of pipeline temporaries: dropped exactly when nobody can see them
(specs/epilogue-fusion.md EF-30 .. EF-35, specs/frontend.md FE-71, FE-74).

Each case runs a pipeline with temporaries, checks which stores were dropped or kept (and
the reason, in the user's names), and checks every numpy array and kept temporary bitwise
against the same launches run one by one on numpy arrays on the same backend."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import sarek_py
from sarek_py.frontend import (
    Vec,
    Vec2,
    f32,
    global_idx_x,
    global_idx_y,
    global_thread_id,
    helper,
    i32,
    kernel,
)
from sarek_py.fusion.epilogue.dead_stores import drop_dead_stores, user_text
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.epilogue.traffic import traffic_bound
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.requires import FusionRequires, FusionStep
from sarek_py.runtime import get_backend

BACKENDS = ["interp", "opencl"]
N = 300
FUZZ = bool(os.environ.get("SAREK_FUZZ"))


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def shift(t: Vec[f32], u: Vec[f32], b: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        u[i] = t[i] + b


@kernel
def relu(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = max(t[i], 0.0)


@kernel
def scale_twice(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]
        t[i] = t[i] + 1.0


@kernel
def scale_reads(x: Vec[f32], t: Vec[f32], w: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]
        w[i] = t[i] + 1.0


@kernel
def relu_in_place(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = max(t[i], 0.0)
        out[i] = t[i]


@kernel
def inc(a: Vec[f32], t: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a[i] + 1.0


@kernel
def next_one(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n - 1:
        out[i] = t[i + 1]


@kernel
def relu_len(t: Vec[f32], out: Vec[f32]):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < len(t):
        out[i] = max(t[i], 0.0)


@kernel
def scale_loop(x: Vec[f32], t: Vec[f32], w: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    while i < n:
        t[i] = a * x[i]
        w[i] = t[i] * 2.0
        i += 64


@kernel
def scale2(x: Vec2[f32], y: Vec2[f32], a: f32):  # type: ignore[no-untyped-def]
    j = global_idx_x()
    i = global_idx_y()
    if i < len(x) and j < 12:
        y[i, j] = a * x[i, j]


@kernel
def relu2(y: Vec2[f32], z: Vec2[f32]):  # type: ignore[no-untyped-def]
    j = global_idx_x()
    i = global_idx_y()
    if i < len(y) and j < 12:
        z[i, j] = max(y[i, j], 0.0)


def _x(n: int = N, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def _notes(p: sarek_py.Pipeline) -> list[str]:
    return [str(n) for n in p.temporaries.notes]


def _one(p: sarek_py.Pipeline, name: str) -> str:
    found = [s for s in _notes(p) if s.startswith(name + ":")]
    assert len(found) == 1, _notes(p)
    return found[0]


def _dropped(p: sarek_py.Pipeline, name: str) -> bool:
    return " stores dropped " in _one(p, name)


# --------------------------------------------------------------------- the main case


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef30_ef33_ef35_fe74_scale_relu_drops_t_and_halves_the_traffic(backend: str) -> None:
    """EF-30..EF-33, EF-35, FE-74: scale then relu through a temporary: fused, ``t``'s
    stores and parameter dropped, the report says so in the user's names, the traffic
    bound is 0.50 of unfused, and ``y`` is the unfused launches' bytes."""
    x = _x()
    y, ref_t, ref_y = (np.zeros(N, np.float32) for _ in range(3))
    scale[N, 64](x, ref_t, 2.0, N, backend=backend)
    relu[N, 64](ref_t, ref_y, N, backend=backend)
    with sarek_py.pipeline(backend=backend) as p:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)
    assert y.tobytes() == ref_y.tobytes()
    (lc,) = p.launches
    assert [q.name for q in lc.kernel.params if q.is_array] == ["p_x", "c_out"]
    assert not re.search(r"\bp_t\b", print_kernel(lc.kernel).split(") =", 1)[1])
    report = p.report()
    assert "t: stores dropped from scale_relu" in report
    assert "(0.50 of unfused)" in report
    assert t.state == "dead" and t.array is None  # never allocated (FE-70)
    assert not re.search(r"\bp_t\b", p.source())  # neither the stores nor the parameter


def test_ef35_traffic_bound_of_scale_relu_is_half() -> None:
    """EF-35: 16 bytes an element unfused (read x, write t, read t, write y), 12 fused
    keeping t (the fused kernel writes it and reads it back: counted both ways), 8 with t
    dropped: 0.50."""
    x, t, y = _x(), np.zeros(N, np.float32), np.zeros(N, np.float32)
    launches = [Launch(scale.ir, N, 64, (x, t, np.float32(2), np.int32(N))),
                Launch(relu.ir, N, 64, (t, y, np.int32(N)))]
    assert traffic_bound(launches) == 16 * N
    fused, _ = fuse_launches(launches)
    assert traffic_bound(fused) == 16 * N
    new, notes = drop_dead_stores(fused[0], {"p_t": N}, {"p_t": "t"})
    assert notes[0].dropped
    assert traffic_bound([new]) == 8 * N
    assert traffic_bound([new]) / traffic_bound(launches) == 0.5  # type: ignore[operator]
    assert traffic_bound([Launch(scale.ir, N, 64, ("x", "t", 2.0, N))]) is None


# ------------------------------------------------------------------ what keeps them


def _run(backend: str, body: Callable[[sarek_py.Pipeline, np.ndarray[Any, Any],
                                       np.ndarray[Any, Any]], Any],
         ) -> tuple[sarek_py.Pipeline, np.ndarray[Any, Any], Any]:
    x, y = _x(), np.zeros(N, np.float32)
    with sarek_py.pipeline(backend=backend) as p:
        got = body(p, x, y)
    return p, y, got


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("later", ["next_one", "shift"])
def test_fe71_a_later_launch_reading_t_keeps_its_stores(backend: str, later: str) -> None:
    """FE-71, EF-30: a later launch reads t: kept, and its read sees the bytes. Not fused
    (``next_one`` reads t[i + 1]): another launch uses t; fused into the same kernel
    (``shift``): t is the intermediate of two steps, whose reads are not both forwarded."""
    x = _x()
    y, z, ref_t, ref_y, ref_z = (np.zeros(N, np.float32) for _ in range(5))
    k = next_one if later == "next_one" else shift
    extra = () if later == "next_one" else (1.0,)
    scale[N, 64](x, ref_t, 2.0, N, backend=backend)
    relu[N, 64](ref_t, ref_y, N, backend=backend)
    k[N, 64](ref_t, ref_z, *extra, N, backend=backend)
    with sarek_py.pipeline(backend=backend) as p:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)
        k[N, 64](t, z, *extra, N)
    why = ("another launch of the pipeline uses it too" if later == "next_one"
           else "it is the intermediate of 2 fused steps (consumers relu, shift read it)")
    assert why in _one(p, "t")
    assert y.tobytes() == ref_y.tobytes() and z.tobytes() == ref_z.tobytes()
    assert t.get().tobytes() == ref_t.tobytes()  # live: a read after works


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe71_a_kept_temporary_keeps_its_stores(backend: str) -> None:
    """FE-71: ``p.keep(t)``: kept, readable after the pipeline, bitwise the unfused t."""
    x = _x()
    ref_t = np.zeros(N, np.float32)
    scale[N, 64](x, ref_t, 2.0, N, backend=backend)
    with sarek_py.pipeline(backend=backend) as p:
        t = p.keep(p.empty_like(x))
        y = np.zeros(N, np.float32)
        scale[N, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)
    assert "it is kept (p.keep(t))" in _one(p, "t")
    assert isinstance(t.array, sarek_py.DeviceArray) and t.array.backend == backend
    assert np.asarray(t).tobytes() == ref_t.tobytes()
    assert y.tobytes() == np.maximum(ref_t, np.float32(0)).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe72_a_host_read_between_launches_keeps_the_stores(backend: str) -> None:
    """FE-72: ``t.get()`` between the launches runs scale first and sees its bytes; the
    stores of t stay (the read is the host seeing t)."""
    x = _x()
    ref_t = np.zeros(N, np.float32)
    scale[N, 64](x, ref_t, 2.0, N, backend=backend)
    seen: list[np.ndarray[Any, Any]] = []

    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        seen.append(t.get())
        relu[N, 64](t, y, N)

    p, y, _ = _run(backend, body)
    assert seen[0].tobytes() == ref_t.tobytes()
    assert "the host read it inside the pipeline" in _one(p, "t")
    assert y.tobytes() == np.maximum(ref_t, np.float32(0)).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe71_a_mid_way_run_keeps_every_store(backend: str) -> None:
    """FE-71: an explicit ``p.run()`` in the block drops nothing: scale ran before relu
    was recorded, and t (bound in that earlier run) keeps its stores."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Any:
        t = p.empty_like(x)
        u = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        shift[N, 64](t, u, 0.5, N)
        p.run()
        relu[N, 64](u, y, N)
        return t, u

    p, y, (t, u) = _run("interp", body)
    assert "it ran in a p.run() inside the with block" in _one(p, "t")
    assert "it ran in a p.run() inside the with block" in _one(p, "u")
    assert t.state == u.state == "live"
    ref = np.maximum(_x() * np.float32(2) + np.float32(0.5), np.float32(0))
    assert y.tobytes() == ref.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef30_an_alias_in_the_fused_launch_keeps_the_stores(backend: str) -> None:
    """EF-30, FE-71: the same temporary passed twice to the producer (``inc(t, t)``) is
    bound to two parameters of the fused launch: kept (the pipeline sees it twice; the
    kernel rewrite alone refuses a ``same`` group too, checked with numpy arrays; the
    temporary's first contents are unspecified, so only the decision is checked here)."""
    with sarek_py.pipeline(backend=backend) as p:
        t = p.empty(N, np.float32)
        inc[N, 64](t, t, N)
        relu[N, 64](t, np.zeros(N, np.float32), N)
    assert "fused into inc_relu" in p.report()
    assert "it is passed twice to the launch (aliased)" in _one(p, "t")
    a, y = _x(), np.zeros(N, np.float32)
    fused, _ = fuse_launches([Launch(inc.ir, N, 64, (a, a, np.int32(N))),
                              Launch(relu.ir, N, 64, (a, y, np.int32(N)))])
    assert fused[0].kernel.requires is not None and fused[0].kernel.requires.same
    out, notes = drop_dead_stores(fused[0], {"p_t": N}, {"p_t": "t"})
    assert out is fused[0] and "bound to another parameter" in notes[0].reason


def test_ef30_the_same_temporary_read_twice_by_the_consumer_is_forwarded_twice() -> None:
    """EF-31: a consumer reading t at its element under two parameters (``shift(t, t)``
    would write it; here ``relu`` reads t and writes y, and the fused launch binds t once):
    the drop is proved; checked bitwise."""
    @kernel
    def add2(t: Vec[f32], u: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
        i = global_thread_id()
        if i < n:
            out[i] = t[i] + u[i]

    x = _x()
    for backend in BACKENDS:
        y = np.zeros(N, np.float32)
        with sarek_py.pipeline(backend=backend) as p:
            t = p.empty_like(x)
            scale[N, 64](x, t, 2.0, N)
            add2[N, 64](t, t, y, N)
        assert _dropped(p, "t")
        assert y.tobytes() == (x * np.float32(2) + x * np.float32(2)).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef32_a_producer_that_reads_its_own_store_keeps_it(backend: str) -> None:
    """EF-32: ``t[i] = a*x[i]; w[i] = t[i] + 1`` in the producer: the fused kernel still
    reads t[i] after forwarding, so the stores stay (named as the user wrote it)."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Any:
        t = p.empty_like(x)
        w = np.zeros(N, np.float32)
        scale_reads[N, 64](x, t, w, 2.0, N)
        relu[N, 64](t, y, N)
        return w

    p, y, w = _run(backend, body)
    assert "still reads t[i]" in _one(p, "t")
    two = _x() * np.float32(2)
    assert w.tobytes() == (two + np.float32(1)).tobytes()
    assert y.tobytes() == np.maximum(two, np.float32(0)).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef30_a_producer_storing_t_twice_is_not_fused_and_keeps_it(backend: str) -> None:
    """EF-30: ``t[i] = a; t[i] = t[i] + 1`` stores each element twice: the pair is refused
    (LEG-3), so t's stores are the unfused launch's result: kept, and the values right."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
        t = p.empty_like(x)
        scale_twice[N, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)

    p, y, _ = _run(backend, body)
    assert "was not fused" in _one(p, "t")
    ref = np.maximum(_x() * np.float32(2) + np.float32(1), np.float32(0))
    assert y.tobytes() == ref.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef31_a_consumer_that_writes_t_keeps_its_stores(backend: str) -> None:
    """EF-31: the consumer writes t (``t[i] = max(t[i], 0)``): the value it reads after
    its own store is not the producer's, so nothing is forwarded and the stores stay."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu_in_place[N, 64](t, y, N)

    p, y, _ = _run(backend, body)
    assert "relu_in_place writes it too" in _one(p, "t")
    assert y.tobytes() == np.maximum(_x() * np.float32(2), np.float32(0)).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef30_a_temporary_written_by_the_consumer_is_its_result(backend: str) -> None:
    """EF-30: a temporary the consumer writes and nobody reads is the consumer's output,
    not an intermediate: its stores stay (there is no later consumer to give them to)."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Any:
        t = p.empty_like(x)
        out = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu[N, 64](t, out, N)
        return out

    p, _, out = _run(backend, body)
    assert _dropped(p, "t")
    assert "not the intermediate of an epilogue fusion" in _one(p, "out")
    assert out.state == "live"


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef30_a_refused_pair_keeps_the_stores(backend: str) -> None:
    """EF-30: ``next_one`` reads t[i + 1] (not element-wise): not fused, t kept."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        next_one[N, 64](t, y, N)

    p, y, _ = _run(backend, body)
    assert "not fused" in p.report()
    assert "was not fused" in _one(p, "t")
    assert y[:-1].tobytes() == (_x() * np.float32(2))[1:].tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef32_a_length_read_keeps_the_stores(backend: str) -> None:
    """EF-32: the consumer reads ``len(t)``: the parameter cannot go, so the stores stay."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu_len[N, 64](t, y)

    p, y, _ = _run(backend, body)
    assert "reads its length" in _one(p, "t")
    assert y.tobytes() == np.maximum(_x() * np.float32(2), np.float32(0)).tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef32_a_grid_stride_producer_that_reads_t_keeps_it(backend: str) -> None:
    """EF-32: a grid-stride producer that reads t in its loop: kept; bitwise."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Any:
        t = p.empty_like(x)
        w = np.zeros(N, np.float32)
        scale_loop[64, 64](x, t, w, 2.0, N)
        relu[N, 64](t, y, N)
        return w

    p, y, w = _run(backend, body)
    two = _x() * np.float32(2)
    assert "fused into scale_loop_relu" in p.report()
    assert "still reads t[i]" in _one(p, "t")
    assert w.tobytes() == (two * np.float32(2)).tobytes()
    assert y.tobytes() == np.maximum(two, np.float32(0)).tobytes()


@kernel
def scale_loop_only(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    while i < n:
        t[i] = a * x[i]
        i += 64


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef31_a_grid_stride_producer_forwards_inside_its_loop(backend: str) -> None:
    """EF-31, EF-33 with EF-24: the store inside a grid-stride loop is forwarded and
    dropped; each launch proves the dead step on the loop's ghost stores; bitwise."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> None:
        t = p.empty_like(x)
        scale_loop_only[64, 64](x, t, 2.0, N)
        relu[N, 64](t, y, N)

    p, y, _ = _run(backend, body)
    assert _dropped(p, "t")
    assert y.tobytes() == np.maximum(_x() * np.float32(2), np.float32(0)).tobytes()


def test_ef30_a_threadwise_fusion_keeps_the_stores() -> None:
    """EF-30: a thread-wise fusion (LEG-30, 2-D launches) reads the intermediate back from
    memory at another thread's element: kept, saying so."""
    x = np.random.default_rng(1).standard_normal((6, 12)).astype(np.float32)
    z = np.zeros_like(x)
    with sarek_py.pipeline(backend="interp") as p:
        y = p.empty_like(x)
        scale2[(2, 3), (8, 4)](x, y, 2.0)
        relu2[(2, 3), (8, 4)](y, z)
    assert "fused into" in p.report()
    assert "thread-wise fusion (LEG-30)" in _one(p, "y")
    assert z.tobytes() == np.maximum(x * np.float32(2), np.float32(0)).tobytes()


# ---------------------------------------------------------------------- chains of three


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("keep", [None, "t1", "t2"])
def test_ef30_fe71_a_chain_of_three_keeps_exactly_what_it_must(backend: str,
                                                               keep: str | None) -> None:
    """EF-30..EF-33, FE-71: scale -> shift -> relu with two temporaries, fused into one
    kernel: both dropped, or the kept one kept and the other dropped; bitwise."""
    x = _x()
    ref_t1, ref_t2, ref_y, y = (np.zeros(N, np.float32) for _ in range(4))
    scale[N, 64](x, ref_t1, 2.0, N, backend=backend)
    shift[N, 64](ref_t1, ref_t2, -0.25, N, backend=backend)
    relu[N, 64](ref_t2, ref_y, N, backend=backend)
    with sarek_py.pipeline(backend=backend) as p:
        t1 = p.empty_like(x)
        t2 = p.empty_like(x)
        if keep is not None:
            p.keep(t1 if keep == "t1" else t2)
        scale[N, 64](x, t1, 2.0, N)
        shift[N, 64](t1, t2, -0.25, N)
        relu[N, 64](t2, y, N)
    assert len(p.launches) == 1
    assert y.tobytes() == ref_y.tobytes()
    for name, t, ref in (("t1", t1, ref_t1), ("t2", t2, ref_t2)):
        assert _dropped(p, name) == (keep != name)
        if keep == name:
            assert t.get().tobytes() == ref.tobytes()
    text = print_kernel(p.launches[0].kernel)
    assert text.count(" dead ") == (2 if keep is None else 1)
    assert parse_module(text).kernels[0].requires == p.launches[0].kernel.requires


# ------------------------------------------------------- the kernel rewrite and its proof


def _fused_scale_relu(n: int = N, tc: int = N) -> Launch:
    x, t, y = _x(n), np.zeros(n, np.float32), np.zeros(n, np.float32)
    launches = [Launch(scale.ir, n, 64, (x, t, np.float32(2), np.int32(n))),
                Launch(relu.ir, tc, 64, (t, y, np.int32(tc)))]
    fused, _ = fuse_launches(launches)
    assert len(fused) == 1
    return fused[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef33_every_launch_proves_the_dead_step_again(backend: str) -> None:
    """EF-33, LEG-14: the kernel without t's stores still proves, at each launch, that the
    producer part stores each element the consumer acts on exactly once (on ghost stores
    where the dropped ones were): ``ep_tc`` past the stored elements is refused."""
    lc = _fused_scale_relu()
    new, notes = drop_dead_stores(lc, {"p_t": N}, {"p_t": "t"})
    assert notes[0].dropped and new.kernel.requires is not None
    step = new.kernel.requires.steps[0]
    assert isinstance(step, FusionStep) and step.dead and step.array == "p_t"
    args = dict(new.by_name)
    get_backend(backend).run_kernel(new.kernel, args, N, 64)  # accepted
    bad = dict(args, ep_tc=np.int32(N + 5), c_n=np.int32(N + 5))
    with pytest.raises(SarekError, match="LEG-14"):
        get_backend(backend).run_kernel(new.kernel, bad, N, 64)


def test_ef33_dead_names_read_back_and_are_checked() -> None:
    """EF-33, TXT-35, LEG-13: ``fused(P, C, dead p_t, ep_tc)`` reads back; a ``dead``
    name that is a parameter is a parse error; a record built in code naming one is
    refused at launch."""
    lc = _fused_scale_relu()
    new, _ = drop_dead_stores(lc, {"p_t": N})
    text = print_kernel(new.kernel)
    assert "fused(scale, relu, dead p_t, ep_tc)" in text
    assert parse_module(text).kernels[0].requires == new.kernel.requires
    with pytest.raises(SarekError, match="'dead p_x' names a parameter"):
        parse_module(text.replace("dead p_t", "dead p_x"))
    req = new.kernel.requires
    assert req is not None
    wrong = FusionRequires((FusionStep("scale", "relu", "p_x", "ep_tc", dead=True),))
    import attrs

    k = attrs.evolve(new.kernel, requires=wrong)
    with pytest.raises(FusionRefused, match="LEG-13"):
        get_backend("interp").run_kernel(k, dict(new.by_name), N, 64)


def test_ef34_stores_outside_the_buffer_are_kept() -> None:
    """EF-34: a buffer shorter than the elements the producer stores (the unfused launch
    would fault): the stores stay, saying why."""
    lc = _fused_scale_relu()
    new, notes = drop_dead_stores(lc, {"p_t": N - 1}, {"p_t": "t"})
    assert new is lc and not notes[0].dropped
    assert "stores elements 0..299 of it, not all within its 299 elements" in notes[0].reason


def test_ef34_the_pipeline_faults_like_the_unfused_launch() -> None:
    """EF-34: a temporary shorter than the stores: the pipeline faults as unfused does."""
    x = _x()
    with pytest.raises(SarekError, match="out-of-bounds store"):
        with sarek_py.pipeline(backend="interp"):
            scale[N, 64](x, np.zeros(N - 1, np.float32), 2.0, N)
    with pytest.raises(SarekError, match="out-of-bounds store"):
        with sarek_py.pipeline(backend="interp") as p:
            t = p.empty(N - 1, np.float32)
            scale[N, 64](x, t, 2.0, N)
            relu[N - 1, 64](t, np.zeros(N, np.float32), N - 1)


def test_ef30_candidates_that_are_not_intermediates_keep_their_stores() -> None:
    """EF-30: an unfused launch, an output parameter and a ``same`` group keep theirs."""
    x, t = _x(), np.zeros(N, np.float32)
    plain = Launch(scale.ir, N, 64, (x, t, np.float32(2), np.int32(N)))
    out, notes = drop_dead_stores(plain, {"t": N})
    assert out is plain and "not a fused kernel" in notes[0].reason
    lc = _fused_scale_relu()
    out, notes = drop_dead_stores(lc, {"c_out": N}, {"c_out": "y"})
    assert out is lc and "not the intermediate" in notes[0].reason
    assert str(notes[0]).startswith("y: stores kept in scale_relu")


def test_ef32_user_text_takes_off_the_fusion_prefixes() -> None:
    """EF-32: accesses are named as the user wrote them (EF-5's prefixes off)."""
    assert user_text("p_c_t[p_i + 1]") == "t[i + 1]"
    assert user_text("ep_t") == "ep_t"


# ------------------------------------------------------------------ more adversaries


@kernel
def relu_gs(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    while i < n:
        out[i] = max(t[i], 0.0)
        i += 128


@kernel
def iota(t: Vec[i32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = i * 3 - 7


@kernel
def to_f32(t: Vec[i32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = f32(t[i]) * 0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef31_a_grid_stride_consumer_and_an_int_temporary_drop_bitwise(backend: str) -> None:
    """EF-31..EF-33 with EF-25: a grid-stride consumer (read as element-wise) and an i32
    temporary are forwarded and dropped; special floats (NaN, infinities, -0.0) pass
    through the local bit for bit."""
    x = _x()
    x[:6] = [np.nan, -np.inf, np.inf, -0.0, 0.0, np.float32(3e38)]
    ref_t, ref_y = np.zeros(N, np.float32), np.zeros(N, np.float32)
    scale[N, 64](x, ref_t, 2.0, N, backend=backend)
    relu_gs[128, 64](ref_t, ref_y, N, backend=backend)
    y, z = np.zeros(N, np.float32), np.zeros(N, np.float32)
    with sarek_py.pipeline(backend=backend) as p:
        t = p.empty_like(x)
        scale[N, 64](x, t, 2.0, N)
        relu_gs[128, 64](t, y, N)
        k = p.empty(N, np.int32)
        iota[N, 64](k, N)
        to_f32[N, 64](k, z, N)
    assert _dropped(p, "t") and _dropped(p, "k")
    assert y.tobytes() == ref_y.tobytes()
    ref_z = (np.arange(N, dtype=np.int32) * 3 - 7).astype(np.float32) * np.float32(0.5)
    assert z.tobytes() == ref_z.tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_fe71_a_cached_plan_drops_again_with_new_temporaries(backend: str) -> None:
    """FE-71 with FE-80: the same pipeline run twice (its fusion plan found again) drops
    each run's own temporary, and each run's y is right; the second run gets the same
    rewritten kernel object (so nothing is emitted, built or proved again: a new kernel
    each run cost 10 ms a pipeline before)."""
    kernels = []
    for a in (2.0, 2.0, -3.0):
        x, y = _x(), np.zeros(N, np.float32)
        with sarek_py.pipeline(backend=backend) as p:
            t = p.empty_like(x)
            scale[N, 64](x, t, a, N)
            relu[N, 64](t, y, N)
        assert _dropped(p, "t") and t.array is None
        assert y.tobytes() == np.maximum(x * np.float32(a), np.float32(0)).tobytes()
        kernels.append(p.launches[0].kernel)
    assert kernels[0] is kernels[1]


def test_fe71_a_live_temporary_in_a_later_pipeline_is_a_device_array() -> None:
    """FE-71: a temporary kept by one pipeline and passed to the next is its device array
    there (not fresh memory, so not offered); the later pipeline drops only its own."""
    x = _x()
    with sarek_py.pipeline(backend="interp") as p:
        t = p.keep(p.empty_like(x))
        scale[N, 64](x, t, 2.0, N)
    y = np.zeros(N, np.float32)
    with sarek_py.pipeline(backend="interp") as q:
        u = q.empty_like(x)
        shift[N, 64](t, u, 1.0, N)
        relu[N, 64](u, y, N)
    assert _dropped(q, "u") and len(q.temporaries.notes) == 1
    assert t.get().tobytes() == (x * np.float32(2)).tobytes()
    assert y.tobytes() == np.maximum(x * np.float32(2) + np.float32(1),
                                     np.float32(0)).tobytes()


def test_fe70_empty_temporaries_and_zero_threads() -> None:
    """FE-70: a 0-element temporary on launches that store and read nothing (n = 0): the
    pair fuses, the (empty) stores go, nothing faults."""
    x = np.zeros(0, np.float32)
    y = np.zeros(0, np.float32)
    with sarek_py.pipeline(backend="interp") as p:
        t = p.empty(0, np.float32)
        scale[1, 64](x, t, 2.0, 0)
        relu[1, 64](t, y, 0)
    assert "fused into scale_relu" in p.report()
    assert _dropped(p, "t")  # it stores nothing, which nobody reads
    assert y.size == 0


def test_ef33_the_rewritten_kernel_reads_back_checks_and_compiles() -> None:
    """EF-33: the chain's kernel without both intermediates prints, reads back and passes
    the checker, and its CUDA source compiles to PTX without ``fma`` (contraction off)."""
    from sarek_py.codegen import emit_cuda
    from sarek_py.codegen.nvcc import compile_ptx, find_nvcc
    from sarek_py.ir.typecheck import check_kernel

    x, y = _x(), np.zeros(N, np.float32)
    with sarek_py.pipeline(backend="interp") as p:
        t1 = p.empty_like(x)
        t2 = p.empty_like(x)
        scale[N, 64](x, t1, 2.0, N)
        shift[N, 64](t1, t2, 1.0, N)
        relu[N, 64](t2, y, N)
    k = p.launches[0].kernel
    back = parse_module(print_kernel(k)).kernels[0]
    check_kernel(k)
    check_kernel(back)
    assert print_kernel(back) == print_kernel(k)
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    ptx = compile_ptx(emit_cuda(k))
    assert "fma.rn" not in ptx and ".entry" in ptx


@helper
def peek(a: Vec[f32], i: i32) -> f32:  # type: ignore[no-untyped-def]
    return a[i] * 2.0


@kernel
def scale_peek(x: Vec[f32], t: Vec[f32], w: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]
        w[i] = peek(t, i)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef32_a_helper_call_taking_t_keeps_the_stores(backend: str) -> None:
    """EF-32: the producer passes t to a helper function that reads it: kept; bitwise."""
    def body(p: sarek_py.Pipeline, x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> Any:
        t = p.empty_like(x)
        w = np.zeros(N, np.float32)
        scale_peek[N, 64](x, t, w, 2.0, N)
        relu[N, 64](t, y, N)
        return w

    p, y, w = _run(backend, body)
    assert "fused into scale_peek_relu" in p.report()
    assert "passes it to a helper function" in _one(p, "t")
    two = _x() * np.float32(2)
    assert w.tobytes() == (two * np.float32(2)).tobytes()
    assert y.tobytes() == np.maximum(two, np.float32(0)).tobytes()


# --------------------------------------------- generated pairs (EF-31 .. EF-34, EF-12)


def _interp_run(k: Any, args: dict[str, object], threads: int, block: int) -> None:
    get_backend("interp").run_kernel(k, args, threads, block)  # type: ignore[arg-type]


def check_dead_pair(case: Any) -> bool | None:
    """Fuse the generated pair; offer its intermediate's buffer (as if nobody else could
    see it); dropped exactly when the consumer does not write it; every other buffer
    bitwise the unfused launches'. ``None`` when the pair is not an epilogue fusion."""
    from fusion_strategies import run_launches, same_bits

    from sarek_py.ir.effects import kernel_writes

    new, report = fuse_launches(list(case.launches))
    req = new[0].kernel.requires if report[0].fused else None
    if req is None or req.threadwise:
        return None
    lc = new[0]
    step = req.steps[0]
    assert isinstance(step, FusionStep)
    buf = lc.by_name[step.array]
    assert isinstance(buf, str)
    out, notes = drop_dead_stores(lc, {step.array: case.buffers[buf].size})
    (note,) = notes
    consumer_writes = "src" in kernel_writes(case.consumer)
    assert note.dropped == (not consumer_writes), (note, case.story)
    ref, got = case.fresh_buffers(), case.fresh_buffers()
    run_launches(list(case.launches), ref, _interp_run)
    run_launches([out], got, _interp_run)
    for name in ref:
        if name == buf and note.dropped:
            assert same_bits(got[name], case.buffers[name])  # never stored
            continue
        assert same_bits(ref[name], got[name]), (name, case.story)
    return note.dropped


def test_ef31_ef34_generated_pairs_without_their_intermediate_are_exact() -> None:
    """EF-31..EF-34 (and EF-12 for what stays): the epilogue pairs of the launch-pair
    generator (guards, returns, branches on data, two stores, loops, reversed, halves,
    i64 indices; local, ``let mut`` and local-array consumers; helpers), with their
    intermediate offered: dropped unless the consumer writes it, every other buffer
    bitwise the unfused pair's on the interpreter."""
    _generated_pairs(60, derandomize=True)


@pytest.mark.slow
def test_ef31_ef34_generated_pairs_fuzz() -> None:
    """EF-31..EF-34: the long run (``SAREK_FUZZ=1``: 2000 pairs, else 300), new draws."""
    _generated_pairs(2000 if FUZZ else 300, derandomize=False)


def _generated_pairs(count: int, derandomize: bool) -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from fusion_strategies import cases
    from hypothesis import HealthCheck, given, settings

    seen = {True: 0, False: 0}

    @settings(max_examples=count, deadline=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), database=None)
    @given(cases(flaw_rate=1000))
    def run(case: Any) -> None:
        got = check_dead_pair(case)
        if got is not None:
            seen[got] += 1

    run()
    assert seen[True] > count // 6 and seen[False] > 0, seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_ef33_a_kernel_without_its_intermediate_fuses_further(backend: str) -> None:
    """EF-33: the rewritten kernel is the producer of a further fusion: its dead step is
    renamed with it (``dead p_p_t``) and each launch of the new kernel proves both steps;
    bitwise the three launches unfused."""
    lc = _fused_scale_relu()
    new, _ = drop_dead_stores(lc, {"p_t": N})
    y, z = new.by_name["c_out"], np.zeros(N, np.float32)
    out, report = fuse_launches([new, Launch(shift.ir, N, 64,
                                             (y, z, np.float32(1), np.int32(N)))])
    assert report[0].fused
    assert "fused(scale, relu, dead p_p_t, p_ep_tc)" in print_kernel(out[0].kernel)
    get_backend(backend).run_kernel(out[0].kernel, out[0].by_name, *out[0].counts())
    x = new.by_name["p_x"]
    assert isinstance(x, np.ndarray)
    ref = np.maximum(x * np.float32(2), np.float32(0)) + np.float32(1)
    assert z.tobytes() == ref.tobytes()
