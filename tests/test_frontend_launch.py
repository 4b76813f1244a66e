"""Launching front-end kernels and pipelines (specs/frontend.md, FE-14..FE-17)."""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.frontend import Vec, f32, global_thread_id, i32, i64, kernel, pipeline
from sarek_py.frontend.kernel import LaunchArgumentError
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.printer import print_kernel


@kernel
def saxpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
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
def shift(t: Vec[f32], out: Vec[f32], n: i32):
    """Reads a neighbour: not element-wise, so not fusable after a producer of t."""
    i = global_thread_id()
    if i < n - 1:
        out[i] = t[i + 1]


@kernel
def count(c: Vec[i64], n: i64):
    i = global_thread_id()
    if i == 0:
        c[0] = n


def inputs(n: int = 1000, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))


def opencl_or_skip() -> str:
    from sarek_py.runtime import get_backend

    try:
        get_backend("opencl")
    except BackendUnavailable as err:
        pytest.skip(str(err))
    return "opencl"


# ---------------------------------------------------------------------------------- FE-14


def test_fe14_text_and_sources() -> None:
    assert saxpy.text() == print_kernel(saxpy.ir)
    assert "kernel saxpy(x : f32[], y : f32[], a : f32, n : i32)" in saxpy.text()
    assert "__kernel void saxpy" in saxpy.source("opencl")
    assert "__global__" in saxpy.source("cuda")
    with pytest.raises(SarekError, match="unknown target"):
        saxpy.source("metal")


def test_fe14_calling_a_kernel_directly_says_how_to_launch() -> None:
    with pytest.raises(LaunchArgumentError, match=r"saxpy\[threads, block\]"):
        saxpy(1, 2)


def test_fe14_fuse_accepts_frontend_and_ir_kernels() -> None:
    from sarek_py.frontend import as_ir, fuse
    from sarek_py.fusion.epilogue.fuse_kernels import fuse as fuse_ir
    from sarek_py.ir.visit import canonical_ids

    assert as_ir(scale) is scale.ir and as_ir(scale.ir) is scale.ir
    want = fuse_ir(scale.ir, relu.ir, shared={"t": "t"}, p_array="t")
    for p, c in ((scale, relu), (scale.ir, relu), (scale, relu.ir)):
        got = fuse(p, c, shared={"t": "t"}, p_array="t")
        assert canonical_ids(got) == canonical_ids(want)
    x, _ = inputs(100)
    t, out = np.zeros_like(x), np.zeros_like(x)
    run_kernel(want, {"p_x": x, "p_t": t, "p_a": np.float32(2.0), "p_n": 100, "c_out": out,
                      "c_n": 100, "ep_tc": 100}, threads=100, block=32)
    assert np.array_equal(out, np.maximum(np.float32(2.0) * x, 0))


# ---------------------------------------------------------------------------------- FE-15


def test_fe15_arguments_by_position_and_name() -> None:
    x, y = inputs(10)
    bound = saxpy.bind((x,), {"y": y, "a": 2, "n": 10})
    assert bound["x"] is x and bound["y"] is y
    assert isinstance(bound["a"], np.float32) and bound["a"] == 2.0
    assert isinstance(bound["n"], np.int32)


@pytest.mark.parametrize("args,kwargs,message", [
    ((np.zeros(4, np.float64), np.zeros(4, np.float32), 1.0, 4), {}, "dtype float32 and rank 1"),
    ((np.zeros((2, 2), np.float32), np.zeros(4, np.float32), 1.0, 4), {}, "rank 1"),
    ((np.zeros(4, np.float32),), {}, "misses argument(s) y, a, n"),
    ((1, 2, 3, 4, 5), {}, "takes 4 arguments, 5 given"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0), {"a": 2.0, "n": 1}, "given twice"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0, 4), {"m": 1}, "no parameter 'm'"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0, 2**31), {}, "does not fit in i32"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), 1.0, 4.0), {}, "must be an integer"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), True, 4), {}, "not a bool"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), "1", 4), {}, "must be a number"),
    ((np.zeros(4, np.float32), 3.0, 1.0, 4), {}, "must be a numpy array"),
    ((np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(1), 4), {}, "not an array"),
])
def test_fe15_bad_arguments(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(LaunchArgumentError) as info:
        saxpy[4, 4](*args, **kwargs)
    assert message in info.value.message


@kernel
def named_like_options(threads: Vec[i32], block: i32):
    threads[0] = block


def test_fe15_parameters_may_be_named_threads_or_block() -> None:
    t = np.zeros(1, np.int32)
    named_like_options[1, 1](threads=t, block=7, backend="interp")
    assert t[0] == 7


def test_fe15_read_only_arrays_and_bad_geometry() -> None:
    x, y = inputs(4)
    y.flags.writeable = False
    with pytest.raises(LaunchArgumentError, match="read-only"):
        saxpy[4, 4](x, y, 1.0, 4)
    y = y.copy()
    for cfg in [(0, 4), (4, -1), (4, 2.5)]:
        with pytest.raises(LaunchArgumentError, match="positive integer"):
            saxpy[cfg](x, y, 1.0, 4)  # type: ignore[index]


# ---------------------------------------------------------------------------------- FE-16


def test_fe16_launch_on_the_interpreter_updates_the_arrays() -> None:
    x, y = inputs(1000)
    want = np.float32(2.5) * x + y
    saxpy[1024, 128](x, y, 2.5, 1000, backend="interp")
    assert np.array_equal(y, want)
    c = np.zeros(1, np.int64)
    count.launch(c, 2**40, threads=1, block=1, backend="interp")
    assert c[0] == 2**40


def test_fe16_default_backend_and_launch_method_agree_with_the_interpreter() -> None:
    x, y = inputs(300, seed=2)
    y_ref = y.copy()
    run_kernel(saxpy.ir, {"x": x, "y": y_ref, "a": np.float32(-1.5), "n": 300},
               threads=320, block=64)
    saxpy.launch(x, y, -1.5, 300, threads=320, block=64)
    assert np.array_equal(y, y_ref)


@pytest.mark.opencl
def test_fe16_opencl_gives_the_interpreters_outputs() -> None:
    backend = opencl_or_skip()
    x, y = inputs(777, seed=3)
    y_ref = y.copy()
    saxpy[800, 32](x, y_ref, 0.75, 777, backend="interp")
    saxpy[800, 32](x, y, 0.75, 777, backend=backend)
    assert np.array_equal(y, y_ref)


# ---------------------------------------------------------------------------------- FE-17


def unfused(backend: str, x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    t, out = np.zeros_like(x), np.zeros_like(x)
    scale[n, 64](x, t, 2.0, n, backend=backend)
    relu[n, 64](t, out, n, backend=backend)
    return t, out


def test_fe17_pipeline_fuses_and_matches_the_unfused_run() -> None:
    x, _ = inputs(500)
    t_ref, out_ref = unfused("interp", x, 500)
    t, out = np.zeros_like(x), np.zeros_like(x)
    with pipeline(backend="interp") as p:
        assert scale[500, 64](x, t, 2.0, 500) is None  # recorded, not run
        relu[500, 64](t, out, 500)
        assert not out.any()
    assert [lc.kernel.name for lc in p.launches] == ["scale_relu"]
    assert "scale -> relu: fused into scale_relu" in p.report()
    assert np.array_equal(out, out_ref) and np.array_equal(t, t_ref)
    assert "__kernel void scale_relu" in p.source("opencl")


def test_fe17_report_says_why_a_pair_was_not_fused() -> None:
    x, _ = inputs(200)
    t, out = np.zeros_like(x), np.zeros_like(x)
    t2, out2 = np.zeros_like(x), np.zeros_like(x)
    scale[200, 64](x, t2, 2.0, 200, backend="interp")
    shift[200, 64](t2, out2, 200, backend="interp")
    with pipeline(backend="interp") as p:
        scale[200, 64](x, t, 2.0, 200)
        shift[200, 64](t, out, 200)
    report = p.report()
    assert "scale -> shift: not fused: [LEG-" in report
    assert [lc.kernel.name for lc in p.launches] == ["scale", "shift"]
    assert np.array_equal(out, out2)


def test_fe17_buffers_are_bound_by_array_identity() -> None:
    x, _ = inputs(200)
    t, t_copy, out = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    with pipeline(backend="interp") as p:
        scale[200, 64](x, t, 2.0, 200)
        relu[200, 64](t_copy, out, 200)  # equal values, different buffer: no producer
    assert not any(d.fused for d in p.decisions)
    assert not out.any()  # relu read t_copy (zeros), not t


def test_fe17_overlapping_views_are_aliasing() -> None:
    x, _ = inputs(200)
    buf, out = np.zeros(201, np.float32), np.zeros(200, np.float32)
    ref, out_ref = np.zeros(201, np.float32), np.zeros(200, np.float32)
    scale[200, 64](x, ref[:200], 2.0, 200, backend="interp")
    relu[200, 64](ref[1:], out_ref, 200, backend="interp")
    with pipeline(backend="interp") as p:
        scale[200, 64](x, buf[:200], 2.0, 200)
        relu[200, 64](buf[1:], out, 200)  # overlaps what scale wrote, shifted by one
    assert not any(d.fused for d in p.decisions), p.report()
    assert np.array_equal(buf, ref) and np.array_equal(out, out_ref)


def test_fe17_the_same_view_is_the_same_buffer() -> None:
    x, _ = inputs(200)
    buf, out = np.zeros(300, np.float32), np.zeros(200, np.float32)
    with pipeline(backend="interp") as p:
        scale[200, 64](x, buf[:200], 2.0, 200)
        relu[200, 64](buf[:200], out, 200)  # another view object of the same elements
    assert [d.fused for d in p.decisions] == [True]
    assert np.array_equal(out, np.maximum(np.float32(2.0) * x, 0))


def test_fe17_error_in_block_runs_nothing_and_run_on_demand() -> None:
    x, _ = inputs(100)
    t, out = np.zeros_like(x), np.zeros_like(x)
    with pytest.raises(ZeroDivisionError), pipeline(backend="interp") as p:
        scale[100, 64](x, t, 2.0, 100)
        1 / 0  # noqa: B018
    assert not t.any() and p.launches == []
    with pipeline(backend="interp") as q:
        scale[100, 64](x, t, 2.0, 100)
        q.run()
        assert np.array_equal(t, np.float32(2.0) * x)
        relu[100, 64](t, out, 100)
        assert "1 launch(es) recorded, not run yet" in q.report()
    assert [lc.kernel.name for lc in q.launches] == ["scale", "relu"]
    assert np.array_equal(out, np.maximum(t, 0))


def test_fe17_launch_backend_must_match_the_pipeline() -> None:
    x, _ = inputs(10)
    with pytest.raises(SarekError, match="give the backend to pipeline"), \
            pipeline(backend="interp"):
        scale[10, 8](x, np.zeros_like(x), 2.0, 10, backend="opencl")


def test_fe17_pipelines_do_not_nest() -> None:
    x, _ = inputs(10)
    t = np.zeros_like(x)
    with pytest.raises(SarekError, match="cannot be nested"), pipeline(backend="interp"):
        scale[10, 8](x, t, 2.0, 10)
        with pipeline(backend="interp"):
            pass
    assert not t.any()


def test_fe17_fusion_can_be_switched_off() -> None:
    x, _ = inputs(100)
    t, out = np.zeros_like(x), np.zeros_like(x)
    with pipeline(backend="interp", fuse=False) as p:
        scale[100, 64](x, t, 2.0, 100)
        relu[100, 64](t, out, 100)
    assert [lc.kernel.name for lc in p.launches] == ["scale", "relu"]
    assert "fusion is off" in p.report()


@pytest.mark.opencl
def test_fe17_fused_on_opencl_is_identical_to_unfused() -> None:
    backend = opencl_or_skip()
    x, _ = inputs(4096, seed=5)
    t_ref, out_ref = unfused(backend, x, 4096)
    t, out = np.zeros_like(x), np.zeros_like(x)
    with pipeline(backend=backend) as p:
        scale[4096, 64](x, t, 2.0, 4096)
        relu[4096, 64](t, out, 4096)
    assert [lc.kernel.name for lc in p.launches] == ["scale_relu"]
    assert np.array_equal(out, out_ref) and np.array_equal(t, t_ref)
