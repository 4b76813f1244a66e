"""Capture and replay: ``p.replay(times)`` (specs/frontend.md FE-85 … FE-87).

A replay is compared, bit for bit, with the pipeline's launches run again one by one
(unfused) on copies of the arrays as they are at the replay.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sarek_py
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.frontend.replay import ReplayError
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.runtime import get_backend


@kernel
def scale(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = a * x[i]


@kernel
def accumulate(x: Vec[f32], y: Vec[f32], n: i32):
    """Not idempotent: each replay adds ``x`` again."""
    i = global_thread_id()
    if i < n:
        y[i] = y[i] + x[i] * 0.5


@kernel
def relu(x: Vec[f32], y: Vec[f32], n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = max(x[i], 0.0)


N = 100


def backends() -> list[Any]:
    out: list[Any] = ["interp"]
    try:
        get_backend("opencl")
        out.append(pytest.param("opencl", marks=pytest.mark.opencl))
    except BackendUnavailable:
        pass
    return out


def arrays(seed: int) -> dict[str, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(N).astype(np.float32),
            "t": np.zeros(N, np.float32), "acc": rng.standard_normal(N).astype(np.float32),
            "out": np.zeros(N, np.float32)}


def chain(a: dict[str, np.ndarray[Any, Any]], backend: str | None = None) -> None:
    """scale x -> t, accumulate t into acc, relu acc -> out (unfused with a backend)."""
    kw: dict[str, Any] = {} if backend is None else {"backend": backend}
    scale[N, 32](a["x"], a["t"], 1.5, N, **kw)
    accumulate[N, 32](a["t"], a["acc"], N, **kw)
    relu[N, 32](a["acc"], a["out"], N, **kw)


def same(a: dict[str, np.ndarray[Any, Any]], b: dict[str, np.ndarray[Any, Any]]) -> None:
    for k in a:
        assert np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32)), k


@pytest.mark.parametrize("backend", backends())
def test_fe85_replay_runs_the_last_run_again_on_the_current_contents(backend: str) -> None:
    got, want = arrays(1), arrays(1)
    with pipeline(backend=backend) as p:
        chain(got)
    assert any(d.fused for d in p.decisions), p.report()
    chain(want, backend)
    same(got, want)
    launches, results = list(p.launches), list(p.results)
    p.replay()
    chain(want, backend)
    same(got, want)
    # host writes between replays are seen, as at any launch
    got["x"][::3] = 7.0
    want["x"][::3] = 7.0
    got["acc"][:5] = -1.0
    want["acc"][:5] = -1.0
    out = p.replay(times=3)
    for _ in range(3):
        chain(want, backend)
    same(got, want)
    assert len(out) == len(p.launches)
    assert p.launches == launches and p.results == results  # a replay adds nothing


@pytest.mark.parametrize("backend", backends())
def test_fe85_replay_times_is_that_many_single_replays(backend: str) -> None:
    a, b = arrays(2), arrays(2)
    with pipeline(backend=backend) as p:
        chain(a)
    with pipeline(backend=backend) as q:
        chain(b)
    p.replay(times=4)
    for _ in range(4):
        q.replay()
    same(a, b)
    before = {k: v.copy() for k, v in a.items()}
    assert p.replay(times=0) == []
    same(a, before)


def test_fe89_a_block_run_in_parts_is_not_replayed() -> None:
    """FE-89 (was: FE-85 replayed the last part alone, red team x18): a block whose
    launches ran in two parts (``p.run()`` inside it) is refused by a replay, which would
    repeat the last part only; nothing runs."""
    a = arrays(3)
    with pipeline(backend="interp") as p:
        scale[N, 32](a["x"], a["t"], 2.0, N)
        p.run()
        relu[N, 32](a["t"], a["out"], N)
    before = {k: v.copy() for k, v in a.items()}
    a["t"][:] = -5.0
    before["t"][:] = -5.0
    with pytest.raises(ReplayError, match="2 parts"):
        p.replay()
    same(a, before)


def test_fe89_replay_inside_another_block_is_refused() -> None:
    """FE-89 (red team x30): ``p.replay()`` inside another pipeline's with block would
    run before that block's recorded launches: refused."""
    a = arrays(6)
    with pipeline(backend="interp") as p:
        scale[N, 32](a["x"], a["t"], 2.0, N)
    with pytest.raises(ReplayError, match="another pipeline"):
        with pipeline(backend="interp"):
            relu[N, 32](a["t"], a["out"], N)
            p.replay()


def test_fe85_replay_with_device_arrays_in_place() -> None:
    h = arrays(4)
    want = {k: v.copy() for k, v in h.items()}
    d = {k: sarek_py.to_device(v, backend="interp") for k, v in h.items()}
    with pipeline(backend="interp") as p:
        chain(d)
    p.replay(times=2)
    for _ in range(3):
        chain(want, "interp")
    same({k: v.get() for k, v in d.items()}, want)


def test_fe86_replay_of_an_open_pipeline_is_an_error() -> None:
    a = arrays(5)
    with pipeline(backend="interp") as p:
        chain(a)
        with pytest.raises(ReplayError, match="still open"):
            p.replay()
        p.run()
        with pytest.raises(ReplayError, match="still open"):
            p.replay()


def test_fe86_replay_without_a_completed_run_is_an_error() -> None:
    p = pipeline(backend="interp")
    with pytest.raises(ReplayError, match="no completed run"):
        p.replay()
    a = arrays(6)
    with pytest.raises(ZeroDivisionError), pipeline(backend="interp") as q:
        chain(a)
        1 / 0  # noqa: B018
    with pytest.raises(ReplayError, match="no completed run"):
        q.replay()
    # a run whose launch is refused leaves nothing to replay either
    buf = np.zeros(N + 1, np.float32)
    with pipeline(backend="interp") as r:
        scale[N, 32](a["x"], a["t"], 2.0, N)
    r.replay()
    with pytest.raises(SarekError, match="overlaps"), r:
        scale[N, 32](buf[:N], buf[1:], 2.0, N)  # overlapping arguments of one launch
    with pytest.raises(ReplayError, match="no completed run"):
        r.replay()


@pytest.mark.parametrize("times", [-1, 1.5, True, "2", None])
def test_fe87_times_must_be_a_count(times: Any) -> None:
    with pipeline(backend="interp") as p:
        scale[N, 32](arrays(7)["x"], np.zeros(N, np.float32), 2.0, N)
    with pytest.raises(ReplayError, match="non-negative integer"):
        p.replay(times)


def test_fe87_an_array_made_read_only_since_the_run_is_refused() -> None:
    a = arrays(8)
    with pipeline(backend="interp") as p:
        chain(a)
    a["out"].flags.writeable = False
    with pytest.raises(ReplayError, match="read-only"):
        p.replay()


def test_fe87_an_array_reshaped_in_place_is_checked_as_at_any_launch() -> None:
    a = arrays(9)
    with pipeline(backend="interp") as p:
        chain(a)
    a["t"].shape = (10, 10)
    with pytest.raises(SarekError, match="1-d array"):
        p.replay()



def test_fe85_a_run_without_launches_leaves_the_last_run() -> None:
    a = arrays(10)
    with pipeline(backend="interp") as p:
        scale[N, 32](a["x"], a["t"], 2.0, N)
    with p:  # the same pipeline again, recording nothing
        pass
    a["t"][:] = 0.0
    p.replay()
    assert np.array_equal(a["t"], np.float32(2.0) * a["x"])
    with pipeline(backend="interp") as q:
        pass
    with pytest.raises(ReplayError, match="no completed run"):
        q.replay()
