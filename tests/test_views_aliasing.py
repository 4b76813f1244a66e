"""Numpy views as launch buffers (issue 11 item 4; specs/fusion-legality.md LEG-1, LEG-7,
LEG-15, specs/frontend.md FE-17).

Two arrays are one buffer only when they are the same memory range with the same shape,
strides and dtype; any other overlap is partial aliasing, which fusion refuses. A fused
kernel's ``length`` of a parameter is always that parameter's own.
"""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.fusion.epilogue.buffers import buffer_key
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.parser import parse_module

SRC = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i]

kernel lenk(y : f32[], z : f32[]) =
  let i = global_thread_id in
  if i < length(y) then z[i] <- y[i] + 1.0f

kernel lenx(y : f32[], x : f32[], z : f32[]) =
  let i = global_thread_id in
  if i < length(x) then z[i] <- y[i] + x[i]

kernel bits(y : i32[], z : i32[]) =
  let i = global_thread_id in
  z[i] <- y[i] + 1
"""
M = parse_module(SRC, "views.sk")


def _run(launches: list[KernelLaunch]) -> None:
    for lc in launches:
        run_kernel(lc.kernel, dict(lc.by_name), lc.threads, lc.block)  # type: ignore[arg-type]


def _both(make: object) -> tuple[list[np.ndarray], list[np.ndarray], list[str]]:
    """Run the launches ``make(arrays)`` builds unfused and fused, on fresh arrays."""
    assert callable(make)
    a1, a2 = _arrays(), _arrays()
    _run(make(a1))
    new, report = fuse_launches(make(a2))
    _run(new)
    return a1, a2, [str(d) for d in report]


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal(10).astype(np.float32), np.full(10, np.nan, np.float32),
            np.full(10, np.nan, np.float32)]


def test_leg1_prefix_view_of_the_intermediate_is_not_its_buffer() -> None:
    """LEG-1/LEG-7: consumer launched on ``t[:6]`` of the producer's ``t`` (which it sizes
    with ``length``): refused, and the launches give the unfused bytes."""
    def make(a: list[np.ndarray]) -> list[KernelLaunch]:
        x, t, out = a
        return [KernelLaunch(M.kernel("scale"), 10, 4, {"x": x, "y": t, "a": 2.0, "n": 10}),
                KernelLaunch(M.kernel("lenk"), 6, 4, {"y": t[:6], "z": out})]

    a1, a2, report = _both(make)
    assert "not fused: [LEG-7]" in report[0], report
    assert all(u.tobytes() == v.tobytes() for u, v in zip(a1, a2, strict=True))


def test_leg1_prefix_view_of_a_read_only_input_is_not_its_buffer() -> None:
    """LEG-1/LEG-7: the consumer reads a prefix ``x[:6]`` of the producer's read-only
    input ``x`` and loops to ``length(x)``: the fused kernel must not take the producer's
    length; refused, same bytes as unfused."""
    def make(a: list[np.ndarray]) -> list[KernelLaunch]:
        x, t, out = a
        return [KernelLaunch(M.kernel("scale"), 10, 4, {"x": x, "y": t, "a": 2.0, "n": 10}),
                KernelLaunch(M.kernel("lenx"), 10, 4, {"y": t, "x": x[:6], "z": out})]

    a1, a2, report = _both(make)
    assert "not fused" in report[0], report
    assert all(u.tobytes() == v.tobytes() for u, v in zip(a1, a2, strict=True))


@pytest.mark.parametrize("view", ["full", "slice_all", "copy_of_shape"])
def test_leg1_identical_views_are_one_buffer(view: str) -> None:
    """LEG-1: ``t`` and ``t[:]`` (same range, shape, strides, dtype) are one buffer and
    fuse; a separate array is another buffer."""
    def make(a: list[np.ndarray]) -> list[KernelLaunch]:
        x, t, out = a
        tc = {"full": t, "slice_all": t[:], "copy_of_shape": t}[view]
        return [KernelLaunch(M.kernel("scale"), 10, 4, {"x": x, "y": t, "a": 2.0, "n": 10}),
                KernelLaunch(M.kernel("lenk"), 10, 4, {"y": tc, "z": out})]

    a1, a2, report = _both(make)
    assert "fused into" in report[0], report
    assert all(u.tobytes() == v.tobytes() for u, v in zip(a1, a2, strict=True))


def test_leg1_reinterpreted_dtype_is_not_the_same_buffer() -> None:
    """LEG-1: ``t.view(np.int32)`` has the memory of ``t`` but another dtype."""
    t = np.zeros(10, np.float32)
    assert buffer_key(t) != buffer_key(t.view(np.int32))
    assert buffer_key(t[::-1]) != buffer_key(t) and buffer_key(t[::2]) != buffer_key(t[:5])
    x, out = np.ones(10, np.float32), np.zeros(10, np.int32)
    launches = [KernelLaunch(M.kernel("scale"), 10, 4, {"x": x, "y": t, "a": 2.0, "n": 10}),
                KernelLaunch(M.kernel("bits"), 10, 4, {"y": t.view(np.int32), "z": out})]
    _, report = fuse_launches(launches)
    assert not report[0].fused and report[0].rule == "LEG-7"


def test_leg15_fused_launch_refuses_overlapping_views() -> None:
    """LEG-15: a fused kernel launched with its output bound to a view that overlaps an
    input (here ``c_z`` to ``x[::-1]``) is refused at launch, naming both parameters."""
    x, t, out = _arrays()
    launches = [KernelLaunch(M.kernel("scale"), 10, 4, {"x": x, "y": t, "a": 2.0, "n": 10}),
                KernelLaunch(M.kernel("lenx"), 10, 4, {"y": t, "x": x, "z": out})]
    new, report = fuse_launches(launches)
    assert report[0].fused
    fk = new[0].kernel
    assert fk.requires is not None and fk.requires.same == ()
    run_kernel(fk, dict(new[0].by_name), 10)  # type: ignore[arg-type]
    for bad in (x[::-1], x[:5], x.view(np.int32).view(np.float32)[2:7]):
        args = {**new[0].by_name, "c_z": bad}
        with pytest.raises(FusionRefused) as ei:
            run_kernel(fk, args, 10)  # type: ignore[arg-type]
        assert ei.value.rule == "LEG-15" and "p_x" in ei.value.reason
        assert "c_z" in ei.value.reason


# ------------------------------------------------------------------ the front end (FE-17)


@kernel
def fe_scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def fe_lenk(t: Vec[f32], out: Vec[f32]):
    i = global_thread_id()
    if i < len(t):
        out[i] = t[i] + 1.0


def test_fe17_pipeline_on_a_prefix_view_matches_unfused() -> None:
    """FE-17 + LEG-1: ``fe_lenk`` launched on ``t[:6]`` inside a pipeline writes 6
    elements, as unfused (it was fused and wrote 10 before)."""
    def go(fuse: bool) -> tuple[np.ndarray, str]:
        x = np.arange(10, dtype=np.float32)
        t = np.zeros(10, np.float32)
        out = np.full(10, -1.0, np.float32)
        with pipeline("interp", fuse=fuse) as p:
            fe_scale[10, 4](x, t, np.float32(2.0), 10)
            fe_lenk[10, 4](t[:6], out)
        return out, p.report()

    (plain, _), (fused, report) = go(False), go(True)
    assert plain.tobytes() == fused.tobytes(), report
    assert (fused[6:] == -1.0).all()


def test_leg14_pipeline_fused_kernel_carries_and_meets_its_conditions() -> None:
    """LEG-13/LEG-14 on the front end: the kernel a pipeline fused carries its
    conditions, its own launch meets them, and the same kernel launched on the backend
    with the consumer acting on an element the producer does not store is refused."""
    from sarek_py.frontend.kernel import get_backend

    x = np.arange(10, dtype=np.float32)
    t, out = np.zeros(10, np.float32), np.zeros(10, np.float32)
    with pipeline("interp") as p:
        fe_scale[10, 4](x, t, np.float32(2.0), 10)
        fe_lenk[10, 4](t, out)
    (lc,) = p.launches
    assert lc.kernel.requires is not None
    args = dict(lc.by_name)
    get_backend("interp").run_kernel(lc.kernel, args, 10, 4)
    # the pipeline made p_n and ep_tc (both 10) one parameter n (FE-97): on 9 threads the
    # producer stores 9 elements, and element 9 that fe_lenk acts on is not stored
    assert "ep_tc" not in args and args["n"] == 10
    get_backend("interp").run_kernel(lc.kernel, {**args, "n": 11}, 10, 4)
    with pytest.raises(FusionRefused) as ei:
        get_backend("interp").run_kernel(lc.kernel, args, 9, 4)
    assert ei.value.rule == "LEG-14"
    # the same pair fused by fuse_launches (no merging) keeps p_n and ep_tc apart
    (lc,), _ = fuse_launches([
        KernelLaunch(fe_scale.ir, 10, 4, {"x": x, "t": t, "a": np.float32(2.0), "n": 10}),
        KernelLaunch(fe_lenk.ir, 10, 4, {"t": t, "out": out})])
    args = dict(lc.by_name)
    get_backend("interp").run_kernel(lc.kernel, args, 10, 4)
    # ep_tc = 11 alone is fine now: fe_lenk acts only on i < len(t) = 10 (LEG-18); with
    # the producer storing 9 elements, element 9 it acts on is not stored: refused
    get_backend("interp").run_kernel(lc.kernel, {**args, "ep_tc": 11}, 10, 4)
    with pytest.raises(FusionRefused) as ei:
        get_backend("interp").run_kernel(lc.kernel, {**args, "p_n": 9, "ep_tc": 11}, 10, 4)
    assert ei.value.rule == "LEG-14"


def test_leg7_interleaved_views_do_not_overlap() -> None:
    """LEG-7: ``t[::2]`` and ``t[1::2]`` share no element: they are two buffers that do
    not overlap (decided exactly, not by address ranges), so fusing over them is allowed;
    the report of a real overlap says why."""
    t = np.zeros(20, np.float32)
    x, out = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    launches = [KernelLaunch(M.kernel("scale"), 10, 4, {"x": x, "y": t[::2], "a": 2.0,
                                                         "n": 10}),
                KernelLaunch(M.kernel("lenx"), 10, 4, {"y": t[::2], "x": t[1::2], "z": out})]
    new, report = fuse_launches(launches)
    assert report[0].fused, report
    bad = [launches[0], KernelLaunch(M.kernel("lenx"), 10, 4,
                                     {"y": t[::2], "x": t[2:12], "z": out})]
    _, report = fuse_launches(bad)
    assert report[0].rule == "LEG-7" and "same buffer" in (report[0].reason or "")
