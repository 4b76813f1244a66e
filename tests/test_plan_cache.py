"""Cached pipeline plans (specs/frontend.md FE-80 … FE-84, FE-88).

Every test that runs a pipeline twice compares its arrays, bit for bit, with the same
launches run one by one (unfused) on copies of the same memory: a plan found again must
never give other bytes, and a run whose launches differ in anything the fusion reads must
not find the plan of another.
"""

from __future__ import annotations

import gc
import os
import random
import weakref
from typing import Any

import numpy as np
import pytest

from sarek_py.frontend import (
    Vec,
    Vec2,
    f32,
    global_idx_x,
    global_idx_y,
    global_thread_id,
    i32,
    kernel,
    pipeline,
    plan_cache,
)
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime import get_backend


@kernel
def k_scale(x: Vec[f32], y: Vec[f32], a: f32, m: i32):
    i = global_thread_id()
    if i < m:
        y[i] = a * x[i]


@kernel
def k_shift(x: Vec[f32], y: Vec[f32], a: f32, m: i32):
    i = global_thread_id()
    if i < m:
        y[i] = x[i] + a


@kernel
def k_relu(x: Vec[f32], y: Vec[f32], a: f32, m: i32):
    i = global_thread_id()
    if i < m:
        y[i] = max(x[i] * a, 0.0)


@kernel
def k_square(x: Vec[f32], y: Vec[f32], a: f32, m: i32):
    i = global_thread_id()
    if i < m:
        y[i] = x[i] * x[i] - a


def _other_relu(x: Vec[f32], y: Vec[f32], a: f32, m: i32):
    i = global_thread_id()
    if i < m:
        y[i] = min(x[i] * a, 0.0)


#: another kernel with k_relu's name and signature, and another body
k_relu_too = kernel(name="k_relu")(_other_relu)

KERNELS = (k_scale, k_shift, k_relu, k_square)

#: one launch: kernel, index of the input view, of the output view, a, m, threads, block
Step = tuple[Any, int, int, float, int, int, int]
#: one view: base buffer, offset, step (elements)
View = tuple[int, int, int]


@pytest.fixture(autouse=True)
def _no_plans() -> None:
    """Each test starts with no plan (another test's plans would be hits)."""
    plan_cache.clear()


def opencl_or_skip() -> str:
    try:
        get_backend("opencl")
    except BackendUnavailable as err:
        pytest.skip(str(err))
    return "opencl"


def bases_for(n: int, count: int, seed: int) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(2 * n + 4).astype(np.float32) for _ in range(count)]


def views_of(bases: list[np.ndarray[Any, Any]], views: list[View], n: int,
             devices: list[Any] | None = None) -> list[Any]:
    """The views; a view ``(b, 0, 1)`` with ``b < 0`` is the whole device array
    ``devices[-b - 1]`` (a device array is one buffer: no view of it)."""
    return [devices[-b - 1] if b < 0 and devices is not None else
            bases[b][o: o + s * (n - 1) + 1: s] for b, o, s in views]


def run_both(backend: str, n: int, views: list[View], steps: list[Step], seed: int,
             **opts: Any) -> tuple[list[Any], Any]:
    """The steps in a pipeline and one by one on copies of the same bases; asserts that
    every base is bitwise equal, and returns the pipeline's bases and the pipeline. Views
    ``(b, 0, 1)`` with ``b < 0`` are device arrays (``sarek_py.to_device``) in the
    pipeline and numpy arrays in the unfused run."""
    import sarek_py

    nbases = max((b for b, _, _ in views if b >= 0), default=-1) + 1
    ndev = max((-b for b, _, _ in views if b < 0), default=0)
    got, want = bases_for(n, nbases, seed), bases_for(n, nbases, seed)
    dinit = [d[:n] for d in bases_for(n, ndev, seed + 7)]
    gdev = [sarek_py.to_device(d.copy(), backend=backend) for d in dinit]
    wdev = [d.copy() for d in dinit]
    gv, wv = views_of(got, views, n, gdev), views_of(want, views, n, wdev)
    with pipeline(backend=backend, **opts) as p:
        for k, i, o, a, m, threads, block in steps:
            k[threads, block](gv[i], gv[o], a, m)
    for k, i, o, a, m, threads, block in steps:
        k[threads, block](wv[i], wv[o], a, m, backend=backend)
    for g, w in zip([*got, *(d.get() for d in gdev)], [*want, *wdev], strict=True):
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32)), p.report()
    return got, p


def hits() -> int:
    return plan_cache.STATS.hits


CHAIN: list[Step] = [(k_scale, 0, 1, 2.0, 64, 64, 32), (k_shift, 1, 2, 1.5, 64, 64, 32),
                     (k_relu, 2, 3, 1.0, 64, 64, 32)]
CHAIN_VIEWS: list[View] = [(0, 0, 1), (1, 0, 1), (2, 0, 1), (3, 0, 1)]


# ---------------------------------------------------------------------------- FE-80, FE-81


def test_fe80_fe81_a_run_again_finds_its_plan_and_rebinds_new_arrays() -> None:
    _, p1 = run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=1)
    before = hits()
    _, p2 = run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=2)  # new arrays, same pattern
    assert hits() == before + 1
    assert [lc.kernel.name for lc in p2.launches] == ["k_scale_k_shift_k_relu"]
    assert p2.launches[0].kernel is p1.launches[0].kernel
    assert p2.report() == p1.report()
    # the launch binds this run's arrays, not the first run's
    assert all(a is not b for a, b in zip(p1.launches[0].args, p2.launches[0].args,
                                          strict=True) if isinstance(a, np.ndarray))


def test_fe81_the_same_buffer_by_another_view_object_rebinds_by_position() -> None:
    """``t`` and ``t[:]`` are one buffer (LEG-1): the plan found for the first run applies,
    and each position gets the object passed there."""
    steps: list[Step] = [(k_scale, 0, 1, 2.0, 64, 64, 32), (k_relu, 2, 3, 1.0, 64, 64, 32)]
    views: list[View] = [(0, 0, 1), (1, 0, 1), (1, 0, 1), (2, 0, 1)]  # 1 and 2: one buffer
    _, p1 = run_both("interp", 64, views, steps, seed=3)
    assert [d.fused for d in p1.decisions] == [True]
    before = hits()
    run_both("interp", 64, views, steps, seed=4)
    assert hits() == before + 1


def test_fe84_a_plan_keeps_no_array_alive() -> None:
    bases = bases_for(64, 4, 5)
    refs = [weakref.ref(b) for b in bases]
    gv = views_of(bases, CHAIN_VIEWS, 64)
    with pipeline(backend="interp") as p:
        for k, i, o, a, m, threads, block in CHAIN:
            k[threads, block](gv[i], gv[o], a, m)
    del bases, gv, p
    gc.collect()
    assert all(r() is None for r in refs)


def test_fe84_clear_forgets_the_plans() -> None:
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=6)
    plan_cache.clear()
    assert plan_cache.STATS.hits == plan_cache.STATS.misses == 0
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=7)
    assert plan_cache.STATS.misses == 1 and plan_cache.STATS.hits == 0


def test_fe82_a_hit_runs_no_fusion_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=8)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("fuse_launches called on a hit")

    from sarek_py.fusion.epilogue import conditions

    monkeypatch.setattr(plan_cache, "fuse_launches", boom)
    # the launch check derives the producer's parts of a fused kernel once per kernel
    monkeypatch.setattr(conditions, "producer_part", boom)
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=9)
    with pytest.raises(AssertionError, match="on a hit"):  # a miss does call it
        run_both("interp", 64, CHAIN_VIEWS, CHAIN[:2], seed=9)


@pytest.mark.opencl
def test_fe82_a_hit_emits_and_builds_nothing_on_opencl() -> None:
    backend = opencl_or_skip()
    run_both(backend, 64, CHAIN_VIEWS, CHAIN, seed=10)
    stats = get_backend(backend).stats
    emits, builds, before = stats.emits, stats.builds, hits()
    for seed in range(11, 14):
        run_both(backend, 64, CHAIN_VIEWS, CHAIN, seed=seed)
    assert hits() == before + 3
    assert (stats.emits, stats.builds) == (emits, builds)


# ------------------------------------------------------------------------- FE-83: misses

#: (what changes, views of the second run, steps of the second run, options)
MISSES: list[tuple[str, list[View], list[Step], dict[str, Any]]] = [
    ("an in-place consumer: the output is now its input", CHAIN_VIEWS,
     [CHAIN[0], (k_shift, 1, 1, 1.5, 64, 64, 32), (k_relu, 1, 3, 1.0, 64, 64, 32)], {}),
    ("two outputs now one buffer", [(0, 0, 1), (1, 0, 1), (2, 0, 1), (1, 0, 1)], CHAIN, {}),
    ("the last output now overlaps the first intermediate, shifted by one",
     [(0, 0, 1), (1, 0, 1), (2, 0, 1), (1, 1, 1)], CHAIN, {}),
    ("a view with other strides", [(0, 0, 1), (1, 0, 2), (2, 0, 1), (3, 0, 1)], CHAIN, {}),
    ("the last output is the first intermediate with other strides",
     [(0, 0, 1), (1, 0, 1), (2, 0, 1), (1, 0, 2)], CHAIN, {}),
    ("the producer now stores fewer elements than the consumer reads (m)", CHAIN_VIEWS,
     [(k_scale, 0, 1, 2.0, 60, 64, 32), *CHAIN[1:]], {}),
    # a value-only scalar (``a``) changing is a hit (FE-93, tests/test_plan_cache_scalars.py)
    ("another kernel with the same name", CHAIN_VIEWS,
     [*CHAIN[:2], (k_relu_too, 2, 3, 1.0, 64, 64, 32)], {}),
    ("another block", CHAIN_VIEWS, [(k_scale, 0, 1, 2.0, 64, 64, 64), *CHAIN[1:]], {}),
    ("another thread count", CHAIN_VIEWS,
     [(k_scale, 0, 1, 2.0, 64, 50, 32), *CHAIN[1:]], {}),
    ("force", CHAIN_VIEWS, CHAIN, {"force": True}),
]


@pytest.mark.parametrize("what,views,steps,opts", MISSES, ids=[m[0] for m in MISSES])
def test_fe83_a_run_that_differs_misses_and_gives_the_unfused_bytes(
        what: str, views: list[View], steps: list[Step], opts: dict[str, Any]) -> None:
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=20)
    before = hits()
    run_both("interp", 64, views, steps, seed=21, **opts)
    assert hits() == before, what
    run_both("interp", 64, views, steps, seed=22, **opts)  # and that one is found again
    assert hits() == before + 1, what


def test_fe83_array_shapes_are_in_the_key() -> None:
    """Longer arrays with the same counts and scalars: another plan (the producer's proof
    read the arrays' lengths, LEG-3)."""
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=23)
    before = hits()
    run_both("interp", 66, CHAIN_VIEWS, CHAIN, seed=24)
    assert hits() == before


@pytest.mark.opencl
def test_fe83_another_backend_misses() -> None:
    backend = opencl_or_skip()
    run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=25)
    before = hits()
    run_both(backend, 64, CHAIN_VIEWS, CHAIN, seed=26)
    assert hits() == before


def test_fe80_fusion_off_does_not_plan() -> None:
    before = (plan_cache.STATS.hits, plan_cache.STATS.misses)
    _, p = run_both("interp", 64, CHAIN_VIEWS, CHAIN, seed=27, fuse=False)
    assert len(p.launches) == 3
    assert (plan_cache.STATS.hits, plan_cache.STATS.misses) == before


def test_fe80_the_key_reads_no_address_or_content() -> None:
    """The key of two runs on different arrays of one pattern is one key; a key changes
    with the pattern (plan_key directly)."""
    from sarek_py.fusion.policy import target
    from sarek_py.ir.host.launch import KernelLaunch

    def launches(arrs: list[np.ndarray[Any, Any]]) -> list[Any]:
        return [KernelLaunch(k_scale.ir, 8, 8, {"x": arrs[0], "y": arrs[1],
                                               "a": np.float32(2), "m": np.int32(8)}),
                KernelLaunch(k_relu.ir, 8, 8, {"x": arrs[1], "y": arrs[2],
                                              "a": np.float32(1), "m": np.int32(8)})]

    def key(arrs: list[np.ndarray[Any, Any]]) -> Any:
        return plan_cache.plan_key(launches(arrs), "interp", target("interp"), False)

    a = [np.zeros(8, np.float32) for _ in range(3)]
    b = [np.ones(8, np.float32) for _ in range(3)]
    assert key(a) == key(b)
    assert key(a) != key([a[0], a[1], a[1]])  # an alias
    buf = np.zeros(20, np.float32)
    assert key([a[0], buf[:8], buf[8:16]]) == key(a)  # disjoint views of one base
    assert key([a[0], buf[:8], buf[7:15]]) != key(a)  # overlapping views


# ------------------------------------------------------------------ FE-88: the generator

GEN_N = 48


def random_case(rng: random.Random) -> tuple[list[View], list[Step]]:
    """A chain of 2 to 4 launches over 2 to 5 views of 1 to 3 bases (aliases, partial
    overlaps and strided views included) or of 2 device arrays, with random scalars,
    counts and blocks."""
    nbases = rng.randint(1, 3)
    nviews = rng.randint(2, 5)
    views: list[View] = []
    for _ in range(nviews):
        if rng.random() < 0.2:  # a whole device array
            views.append((-1 - rng.randrange(2), 0, 1))
            continue
        s = rng.choice((1, 1, 1, 2))
        o = rng.choice((0, 0, 1) if s == 2 else (0, 0, 1, GEN_N))
        views.append((rng.randrange(nbases), o, s))
    steps: list[Step] = []
    cur = rng.randrange(nviews)
    block = rng.choice((16, 32))
    for _ in range(rng.randint(2, 4)):
        out = rng.randrange(nviews)
        m = rng.choice((GEN_N, GEN_N, GEN_N - 3))
        threads = rng.choice((GEN_N, GEN_N, GEN_N + 5))
        a = rng.choice((2.0, -0.5, 1.0, 0.0))
        b = block if rng.random() < 0.9 else 64
        steps.append((rng.choice(KERNELS), cur, out, a, m, threads, b))
        cur = out if rng.random() < 0.8 else rng.randrange(nviews)
    return views, steps


def valid(views: list[View], steps: list[Step]) -> bool:
    """No launch passes two views that overlap without being one buffer (each launch
    refuses that, LCH-9)."""
    arrs = views_of(bases_for(GEN_N, 3, 0), views, GEN_N,
                    [np.zeros(GEN_N, np.float32) for _ in range(2)])
    for _, i, o, *_rest in steps:
        a, b = arrs[i], arrs[o]
        same = a.ctypes.data == b.ctypes.data and a.strides == b.strides
        if not same and np.shares_memory(a, b):
            return False
    return True


def mutate(rng: random.Random, views: list[View], steps: list[Step]
           ) -> tuple[list[View], list[Step]]:
    """The same case (a plan hit expected) or one that differs in one thing."""
    choice = rng.randrange(4)
    views, steps = list(views), list(steps)
    if choice == 1:  # another view
        i = rng.randrange(len(views))
        b, o, s = views[i]
        if b < 0 or rng.random() < 0.2:  # a device array for a numpy view, or back
            views[i] = (0, 0, 1) if b < 0 else (-1, 0, 1)
        else:
            views[i] = (b, o, 1 if s == 2 else 2) if o <= 1 else (b, 1, s)
    elif choice == 2:  # another scalar or count
        j = rng.randrange(len(steps))
        k, i, o, a, m, threads, block = steps[j]
        steps[j] = (k, i, o, a, m - 1, threads, block) if rng.random() < 0.5 else \
            (k, i, o, -a, m, threads, block)
    elif choice == 3:  # another input (an alias pattern changes)
        j = rng.randrange(len(steps))
        k, i, o, a, m, threads, block = steps[j]
        steps[j] = (k, o, o, a, m, threads, block)
    return views, steps


def run_generated(backend: str, cases: int, seed: int) -> tuple[int, int]:
    """Each case twice through a pipeline (the second time the same or mutated), every
    run bitwise against the unfused launches; (plan hits, fused pairs)."""
    rng = random.Random(seed)
    found = fused = 0
    for c in range(cases):
        views, steps = random_case(rng)
        while not valid(views, steps):
            views, steps = random_case(rng)
        _, p = run_both(backend, GEN_N, views, steps, seed=c)
        fused += sum(d.fused for d in p.decisions)
        views2, steps2 = mutate(rng, views, steps)
        while not valid(views2, steps2):
            views2, steps2 = mutate(rng, views, steps)
        before = hits()
        run_both(backend, GEN_N, views2, steps2, seed=c + 10_000)
        if repr((views2, steps2)) == repr((views, steps)):  # (-0.0 == 0.0, but another key)
            assert hits() == before + 1
        found += hits() - before
    return found, fused


FUZZ = bool(os.environ.get("SAREK_FUZZ"))


def _check_generated(backend: str, cases: int, seed: int) -> None:
    found, fused = run_generated(backend, cases, seed)
    assert found >= cases // 8 and fused >= cases // 4, (found, fused)


def test_fe88_generated_pipelines_twice_bitwise_interp() -> None:
    _check_generated("interp", 400 if FUZZ else 40, seed=88)


@pytest.mark.opencl
def test_fe88_generated_pipelines_twice_bitwise_opencl() -> None:
    _check_generated(opencl_or_skip(), 300 if FUZZ else 25, seed=89)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_fe88_generated_pipelines_twice_bitwise_long(backend: str) -> None:
    if backend == "opencl":
        opencl_or_skip()
    cases = 2000 if FUZZ else 200
    _check_generated(backend, cases, seed=880 if backend == "interp" else 890)



# ----------------------------------------------------------------- device arrays (FE-80)


@pytest.mark.parametrize("backend", ["interp", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_fe80_fe81_device_arrays_find_their_plan_and_keep_their_aliasing(backend: str
                                                                         ) -> None:
    import sarek_py

    if backend == "opencl":
        opencl_or_skip()

    def run(seed: int, alias: bool) -> None:
        host = bases_for(64, 4, seed)
        want = [h[:64].copy() for h in host]
        d = [sarek_py.to_device(h[:64].copy(), backend=backend) for h in host]
        if alias:  # the last output is the first intermediate: one device array
            d[3], want[3] = d[1], want[1]
        with pipeline(backend=backend):
            for k, i, o, a, m, threads, block in CHAIN:
                k[threads, block](d[i], d[o], a, m)
        for k, i, o, a, m, threads, block in CHAIN:
            k[threads, block](want[i], want[o], a, m, backend=backend)
        for got, w in zip(d, want, strict=True):
            assert np.array_equal(got.get().view(np.uint32), w.view(np.uint32))

    run(30, alias=False)
    before = hits()
    run(31, alias=False)  # new device arrays, one pattern
    assert hits() == before + 1
    run(32, alias=True)  # a device array passed twice: another key
    assert hits() == before + 1
    run(33, alias=True)
    assert hits() == before + 2


def test_fe80_the_byte_range_shortcut_agrees_with_overlap() -> None:
    """The key's shortcut (disjoint byte ranges: no overlap, without asking
    ``np.shares_memory``) answers as ``fusion/epilogue/buffers.overlap`` on views of every
    kind: reversed, strided, 2-D, transposed, empty."""
    from sarek_py.fusion.epilogue.buffers import overlap

    rng = np.random.default_rng(40)
    base = np.zeros((12, 10), np.float32)
    flat = base.reshape(-1)

    def view() -> np.ndarray[Any, Any]:
        kind = rng.integers(6)
        a, b = sorted(int(v) for v in rng.integers(0, 120, 2))
        s = int(rng.integers(1, 4))
        if kind == 0:
            return flat[a:b:s]
        if kind == 1:
            return flat[b:a:-s] if b > a else flat[a:a]
        r0, r1 = sorted(int(v) for v in rng.integers(0, 12, 2))
        c0, c1 = sorted(int(v) for v in rng.integers(0, 10, 2))
        if kind == 2:
            return base[r0:r1 + 1, c0:c1 + 1]
        if kind == 3:
            return base[r0:r1 + 1, c0:c1 + 1].T
        if kind == 4:
            return base[r1:r0 - 1 if r0 else None:-1, ::s]
        return flat[a:a]  # empty

    checked = 0
    for _ in range(600):
        x, y = view(), view()
        ex = plan_cache._extent(x, x.__array_interface__["data"][0])
        ey = plan_cache._extent(y, y.__array_interface__["data"][0])
        assert plan_cache._may_overlap(x, y, ex, ey) == overlap(x, y), (x.strides, y.strides)
        checked += not overlap(x, y)
    assert checked > 100


def test_fe80_launches_the_key_cannot_describe_plan_anew_every_time() -> None:
    """Buffer names (the launches of a host program) are not described by the key: each
    call plans anew and keeps nothing, and decides as ``fuse_launches``."""
    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.fusion.policy import target
    from sarek_py.ir.host.launch import KernelLaunch

    launches = [KernelLaunch(k_scale.ir, 8, 8, {"x": "x", "y": "t", "a": np.float32(2),
                                               "m": np.int32(8)}),
                KernelLaunch(k_relu.ir, 8, 8, {"x": "t", "y": "out", "a": np.float32(1),
                                              "m": np.int32(8)})]
    want = fuse_launches(launches, target=target("interp"))
    for _ in range(2):
        got = plan_cache.cached_fuse(launches, backend="interp", target=target("interp"))
        assert [lc.kernel.name for lc in got[0]] == [lc.kernel.name for lc in want[0]]
        assert got[1] == want[1]
    assert (plan_cache.STATS.hits, plan_cache.STATS.misses, plan_cache.STATS.uncached) \
        == (0, 0, 2)


@kernel
def scale2(x: Vec2[f32], y: Vec2[f32], a: f32):
    j = global_idx_x()
    i = global_idx_y()
    if i < len(x) and j < 12:
        y[i, j] = a * x[i, j]


@kernel
def relu2(y: Vec2[f32], z: Vec2[f32]):
    j = global_idx_x()
    i = global_idx_y()
    if i < len(y) and j < 12:
        z[i, j] = max(y[i, j], 0.0)


@pytest.mark.parametrize("backend", ["interp", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_fe80_fe83_nd_launches_key_their_grid_and_the_arrays_layout(backend: str) -> None:
    """A thread-wise fusion of 2-D launches (LEG-30): found again with new arrays; another
    grid, or an input in Fortran order (other strides), plans anew; every run bitwise
    equal to the unfused launches."""
    if backend == "opencl":
        opencl_or_skip()

    def run(seed: int, grid: tuple[int, int], fortran: bool = False) -> None:
        x = np.random.default_rng(seed).standard_normal((9, 12)).astype(np.float32)
        if fortran:
            x = np.asfortranarray(x)
        y, z, y2, z2 = (np.zeros((9, 12), np.float32) for _ in range(4))
        with pipeline(backend=backend) as p:
            scale2[grid, (8, 4)](x, y, np.float32(2.0))
            relu2[grid, (8, 4)](y, z)
        assert [lc.kernel.name for lc in p.launches] == ["scale2_relu2"], p.report()
        scale2[grid, (8, 4)](x, y2, np.float32(2.0), backend=backend)
        relu2[grid, (8, 4)](y2, z2, backend=backend)
        assert y.tobytes() == y2.tobytes() and z.tobytes() == z2.tobytes()

    run(1, (2, 3))
    before = hits()
    run(2, (2, 3))
    assert hits() == before + 1
    run(3, (2, 2))  # rows 8.. are not computed: another plan
    run(4, (2, 3), fortran=True)
    assert hits() == before + 1
