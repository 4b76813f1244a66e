"""A pipeline in a time loop finds its plan again when a scalar that decides nothing
changes (specs/frontend.md FE-93, FE-94).

The plan cache keys a value-only scalar (one whose value only becomes stored values) by
its type, and a scalar that a decision reads (an index, a condition, a bound) by its
value. Every run is compared, bit for bit, with the same launches run one by one
(unfused); a scalar that decides whether a pair may fuse changes the plan exactly when it
changes the decision.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from sarek_py.analysis.value_scalars import value_only_params
from sarek_py.frontend import (
    Vec,
    f32,
    global_thread_id,
    helper,
    i32,
    kernel,
    pipeline,
    plan_cache,
)
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime import get_backend

N = 40


@kernel
def advance(x: Vec[f32], t: Vec[f32], dt: f32, k: i32):
    """``dt`` only becomes stored values; ``k`` decides which elements are stored."""
    i = global_thread_id()
    if i < k:
        t[i] = x[i] + dt * x[i]


@kernel
def damp(t: Vec[f32], y: Vec[f32], c: f32, n: i32):
    i = global_thread_id()
    if i < n:
        y[i] = t[i] * c - c


def backends() -> list[Any]:
    out: list[Any] = ["interp"]
    try:
        get_backend("opencl")
        out.append(pytest.param("opencl", marks=pytest.mark.opencl))
    except BackendUnavailable:
        pass
    return out


@pytest.fixture(autouse=True)
def _no_plans() -> None:
    plan_cache.clear()


def names(k: Any) -> set[str]:
    return {k.ir.params[i].name for i in value_only_params(k.ir)}


def one_step(backend: str, x: np.ndarray[Any, Any], dt: Any, k: int, c: Any) -> Any:
    """The pair in a pipeline and one by one on copies; asserts equal bytes."""
    t, y = np.full(N, 7.0, np.float32), np.full(N, 3.0, np.float32)
    t2, y2 = t.copy(), y.copy()
    with pipeline(backend) as p:
        advance[N, 8](x, t, dt, k)
        damp[N, 8](t, y, c, N)
    advance.launch(x, t2, dt, k, threads=N, block=8, backend=backend)
    damp.launch(t2, y2, c, N, threads=N, block=8, backend=backend)
    for g, w in ((t, t2), (y, y2)):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32)), p.report()
    return p


def test_fe93_value_only_params_of_the_kernels() -> None:
    assert names(advance) == {"dt"}
    assert names(damp) == {"c"}


@pytest.mark.parametrize("backend", backends())
def test_fe93_time_loop_hits_with_a_changing_value_only_scalar(backend: str) -> None:
    """The time loop of the issue: ``dt * step`` changes every step; one plan."""
    x = np.linspace(-1, 1, N, dtype=np.float32)
    dt = 0.37
    for step in range(6):
        p = one_step(backend, x, dt * step, N, 1.0 - 0.1 * step)
        assert [d.fused for d in p.decisions] == [True]
    assert plan_cache.STATS.misses == 1 and plan_cache.STATS.hits == 5


@pytest.mark.parametrize("backend", backends())
def test_fe93_differential_deciding_scalar_vs_value_only(backend: str) -> None:
    """A scalar that decides legality (``k``: the pair fuses only when the producer stores
    every element the consumer reads, k >= N) and one that does not (``dt``, ``c``),
    changed at random over 30 steps: bytes equal to the unfused run at every step, fused
    exactly when k >= N, and a plan per value of ``k`` (never one of another ``k``)."""
    rng = random.Random(93)
    x = np.linspace(-2, 3, N, dtype=np.float32)
    seen: set[int] = set()
    steps = 30 if backend == "interp" else 15
    for _ in range(steps):
        k = rng.choice((N, N - 3, N + 2, 0))
        before = plan_cache.STATS.hits
        p = one_step(backend, x, rng.uniform(-1, 1), k, np.float32(rng.uniform(-2, 2)))
        assert [d.fused for d in p.decisions] == [k >= N], (k, p.report())
        assert plan_cache.STATS.hits == before + (k in seen), k
        seen.add(k)


def test_fe94_one_scalar_object_passed_twice_then_two() -> None:
    """Launches (``fuse_launches``' records, as ``cached_fuse`` takes them) that pass one
    numpy scalar object to both kernels, then two objects: the second run does not find
    the first's plan (whose two parameters would come from one place), and each run's
    fused launch binds its own scalars (FE-94)."""
    from sarek_py.fusion.policy import target
    from sarek_py.ir.host.launch import Launch

    x, t, y = (np.zeros(N, np.float32) for _ in range(3))
    tgt = target("interp")

    def run(dt: Any, c: Any) -> Any:
        launches = [Launch(advance.ir, N, 8, (x, t, dt, np.int32(N))),
                    Launch(damp.ir, N, 8, (t, y, c, np.int32(N)))]
        (fused,), _ = plan_cache.cached_fuse(launches, backend="interp", target=tgt)
        return fused.by_name

    s = np.float32(0.5)
    run(s, s)
    dt, c = np.float32(0.25), np.float32(-3.0)
    got = run(dt, c)
    assert plan_cache.STATS.hits == 0 and plan_cache.STATS.misses == 2
    assert got["p_dt"] is dt and got["c_c"] is c
    dt, c = np.float32(1.25), np.float32(4.0)
    got = run(dt, c)
    assert plan_cache.STATS.hits == 1
    assert got["p_dt"] is dt and got["c_c"] is c


# ---------------------------------------------------------- what makes a scalar decide


@helper
def twice(v: f32) -> f32:
    return v + v


@kernel
def uses(x: Vec[f32], y: Vec[f32], a: f32, b: f32, c: f32, d: f32, e: f32,
         f: i32, g: i32, h: f32, n: i32):
    i = global_thread_id()
    if i < n:
        v = a * x[i] + b                 # a, b: stored only
        w = c                            # c: bound, and w decides below
        if w > 0.0:
            y[i] = v
        y[i] = x[i] if d > 0.0 else v    # d: a select's condition
        y[i] = twice(e)                  # e: a helper's argument
        y[f] = v                         # f: an index
        for _j in range(g):              # g: a loop bound
            y[i] = y[i] + h              # h: stored only


def test_fe93_what_decides() -> None:
    assert names(uses) == {"a", "b", "h"}


# ------------------------------------------- the cached plan is the plan found afresh


@kernel
def gate(x: Vec[f32], t: Vec[f32], lim: f32, n: i32):
    """``lim`` decides (a branch), ``n`` decides."""
    i = global_thread_id()
    if i < n:
        if x[i] > lim:
            t[i] = x[i]
        else:
            t[i] = lim


@kernel
def offset(t: Vec[f32], y: Vec[f32], s: f32, k: i32, n: i32):
    """``k`` decides (an index of the intermediate); ``s`` is stored only."""
    i = global_thread_id()
    if i < n:
        y[i] = t[i + k] * s + s


@kernel
def partial(x: Vec[f32], t: Vec[f32], a: f32, k: i32):
    """``k`` decides which elements are stored; ``a`` is stored only."""
    i = global_thread_id()
    if i < k:
        t[i] = x[i] - a


CHAINS = ((advance, damp), (gate, damp), (partial, offset), (gate, offset), (advance, offset))


def _scalars(rng: random.Random, k: Any) -> list[Any]:
    out: list[Any] = []
    for p in k.ir.params:
        if p.is_array:
            continue
        if str(p.type) == "i32":
            out.append(rng.choice((N, N, N - 2, 0)) if p.name != "k" else rng.choice((0, 0, 1)))
        else:
            out.append(rng.choice((0.5, -1.25, 0.0, -0.0, 3.0)))
    return out


def test_fe93_cached_plan_is_the_fresh_plan_at_every_step() -> None:
    """For 200 random steps of five pairs whose scalars decide or not, the decisions of
    the plan the cache gives are those ``fuse_launches`` finds afresh for that step's
    values, and the fused launch binds this step's scalars."""
    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.fusion.policy import target
    from sarek_py.ir.host.launch import Launch

    rng = random.Random(930)
    tgt = target("interp")
    x, t, y = (np.zeros(2 * N, np.float32) for _ in range(3))
    for _ in range(200):
        k1, k2 = rng.choice(CHAINS)
        s1, s2 = _scalars(rng, k1), _scalars(rng, k2)
        b1 = [np.float32(v) if isinstance(v, float) else np.int32(v) for v in s1]
        b2 = [np.float32(v) if isinstance(v, float) else np.int32(v) for v in s2]
        launches = [Launch(k1.ir, N, 8, (x, t, *b1)), Launch(k2.ir, N, 8, (t, y, *b2))]
        got, dec = plan_cache.cached_fuse(launches, backend="interp", target=tgt)
        fresh, fdec = fuse_launches(launches, target=tgt)
        assert [(d.fused, d.rule, d.reason) for d in dec] == \
            [(d.fused, d.rule, d.reason) for d in fdec], (k1.name, s1, k2.name, s2)
        assert [lc.kernel for lc in got] == [lc.kernel for lc in fresh]
        for g, f in zip(got, fresh, strict=True):
            for a, b in zip(g.args, f.args, strict=True):
                if isinstance(a, np.generic):  # a value the key fixed, or this step's
                    assert type(a) is type(b) and a.tobytes() == b.tobytes()
                else:
                    assert a is b or (type(a) is int and a == b), (k1.name, k2.name)
    assert plan_cache.STATS.hits > 50


@pytest.mark.parametrize("backend", backends())
def test_fe93_time_loop_with_a_temporary_hits_and_drops_its_stores(backend: str) -> None:
    """The time loop with the intermediate a pipeline temporary (FE-70): one plan, the
    temporary's stores dropped at every step, the result that of the unfused launches."""
    x = np.linspace(-1, 1, N, dtype=np.float32)
    for step in range(4):
        y = np.zeros(N, np.float32)
        with pipeline(backend) as p:
            t = p.empty_like(x)
            advance[N, 8](x, t, 0.25 * step, N)
            damp[N, 8](t, y, 1.5 - step, N)
        t2, y2 = np.zeros(N, np.float32), np.zeros(N, np.float32)
        advance.launch(x, t2, 0.25 * step, N, threads=N, block=8, backend=backend)
        damp.launch(t2, y2, 1.5 - step, N, threads=N, block=8, backend=backend)
        assert np.array_equal(y.view(np.uint32), y2.view(np.uint32))
        assert "c_t" not in p.source() and "p_t" not in [q.name for q in
                                                          p.launches[0].kernel.params]
    assert plan_cache.STATS.misses == 1 and plan_cache.STATS.hits == 3


@pytest.mark.parametrize("backend", ["c", "opencl"])
def test_fe93_time_loop_with_a_temporary_emits_its_kernel_once(backend: str) -> None:
    """FE-93 with FE-71 (regression: the dead-store rewrite was keyed by the value of
    every scalar, so each step of a time loop with a temporary made a new kernel object,
    emitted and looked up its program again, ~10 ms a step): the rewritten kernel is
    found again while only value-only scalars change, and the bytes are the unfused
    launches'; a deciding scalar's new value still plans again."""
    try:
        be = get_backend(backend)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    x = np.linspace(-1, 1, N, dtype=np.float32)
    emits = []
    for step in range(5):
        dt, c = np.float32(0.37 * step), np.float32(1.0 - 0.1 * step)
        y, t2, y2 = (np.full(N, 3.0, np.float32) for _ in range(3))
        advance.launch(x, t2, dt, N, threads=N, block=8, backend=backend)
        damp.launch(t2, y2, c, N, threads=N, block=8, backend=backend)
        be.stats.reset()
        with pipeline(backend) as p:
            t = p.empty(N, np.float32)
            advance[N, 8](x, t, dt, N)
            damp[N, 8](t, y, c, N)
        emits.append(be.stats.emits)
        assert np.array_equal(y.view(np.uint32), y2.view(np.uint32)), p.report()
        assert "t: stores dropped" in p.report(), p.report()
    assert emits[1:] == [0, 0, 0, 0], emits  # dt and c changed: the same kernel
    misses = plan_cache.STATS.misses
    with pipeline(backend) as p:
        t = p.empty(N, np.float32)
        advance[N, 8](x, t, np.float32(0.5), N - 3)
        damp[N, 8](t, np.zeros(N - 3, np.float32), np.float32(2), N - 3)
    assert plan_cache.STATS.misses == misses + 1  # k decides: planned again
