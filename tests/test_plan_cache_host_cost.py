"""The repeated pipeline's fast path keeps every check of the plan key (specs/frontend.md
FE-96): an array's start is read from the array object where that reads what
``__array_interface__`` says, and a run whose arrays changed in place since the last one
(shape, writability, memory) still does not find the last run's plan."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline, plan_cache
from sarek_py.frontend.plan_cache import _interface_address, data_address

N = 32


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def relu(t: Vec[f32], y: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        y[i] = max(t[i], 0.0)


@pytest.fixture(autouse=True)
def _no_plans() -> None:
    plan_cache.clear()


def test_fe96_the_start_read_from_the_object_is_the_interface_start() -> None:
    rng = random.Random(96)
    bases = [np.arange(300, dtype=d) for d in (np.float32, np.float64, np.int8, np.int64)]
    bases += [np.zeros((7, 9, 5), np.float32), np.empty(0, np.float32),
              np.frombuffer(bytes(64), np.int32), np.broadcast_to(np.float32(1), (5, 4))]
    for _ in range(500):
        b = rng.choice(bases)
        v: Any = b
        for d in range(b.ndim):
            n = b.shape[d]
            lo = rng.randrange(n + 1) if n else 0
            step = rng.choice((1, 2, 3, -1, -2))
            idx = [slice(None)] * b.ndim
            idx[d] = slice(lo, None, step) if step > 0 else slice(None, lo or None, step)
            v = v[tuple(idx)]
        if rng.random() < 0.2 and v.size and v.dtype.itemsize == 4 and v.flags.c_contiguous:
            v = v.view(np.int32)
        assert data_address(v) == _interface_address(v)


def run(x: Any, t: Any, y: Any, a: float = 2.0) -> Any:
    """The pair in a pipeline, and one by one on copies: equal bytes."""
    x2, t2 = x.copy(), t.copy()
    y2 = t2 if y is t else y.copy()
    with pipeline("interp") as p:
        scale[N, 8](x, t, a, N)
        relu[N, 8](t, y, N)
    scale.launch(x2, t2, a, N, threads=N, block=8, backend="interp")
    relu.launch(t2, y2, N, threads=N, block=8, backend="interp")
    for g, w in ((t, t2), (y, y2)):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32))
    return p


def test_fe96_arrays_changed_in_place_miss() -> None:
    x = np.linspace(-1, 1, N, dtype=np.float32)
    t, y = np.zeros(N, np.float32), np.zeros(N, np.float32)
    run(x, t, y)
    run(x, t, y, a=3.0)
    assert plan_cache.STATS.hits == 1  # the same arrays, a value-only scalar changed
    x.flags.writeable = False  # the producer only reads it: allowed, another key
    run(x, t, y)
    assert plan_cache.STATS.hits == 1
    y.resize(N + 8, refcheck=False)  # a longer output, the same object, maybe new memory
    run(x, t, y)
    assert plan_cache.STATS.hits == 1
    run(x, t, y)
    assert plan_cache.STATS.hits == 2


def test_fe96_the_same_object_now_an_alias_misses() -> None:
    """``t`` then ``t`` aliased by ``y`` (the consumer in place): the buffer numbering
    changes, so does the key."""
    x = np.linspace(-1, 1, N, dtype=np.float32)
    t, y = np.zeros(N, np.float32), np.zeros(N, np.float32)
    run(x, t, y)
    run(x, t, t)
    assert plan_cache.STATS.hits == 0


def test_fe96_launch_configurations_are_checked_as_before() -> None:
    """``k[threads, block]`` of two ints is made once; a bool, a numpy integer, a zero or
    a negative count is checked (and refused) as at the first launch, whatever came
    before."""
    from sarek_py.frontend.kernel import LaunchArgumentError

    x, t = np.ones(N, np.float32), np.zeros(N, np.float32)
    assert scale[1, 64] is scale[1, 64]
    scale[1, 64](x, t, 2.0, N, backend="interp")
    for bad in ((True, 64), (1, True), (0, 64), (1, -2), (1.0, 64)):
        for _ in range(2):
            with pytest.raises(LaunchArgumentError):
                scale[bad](x, t, 2.0, N, backend="interp")
    scale[np.int64(N), 8](x, t, 2.0, N, backend="interp")
    assert np.array_equal(t, 2 * x)
