"""Launch-time bounds proofs (specs/codegen.md CG-70 … CG-75, specs/launch.md LCH-90).

The soundness oracle is the reference interpreter: whenever the proof says a launch stays
in bounds, the interpreter must record no out-of-bounds access for that launch (over the
generic kernels of tests/strategies.py and over guarded-index kernels made to be proved
often). Hand cases cover the idioms a proof could get wrong at the edges; on OpenCL a
proved launch runs the unchecked build and writes the checked build's bytes.
"""

from __future__ import annotations

import copy
import os
import re
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rule_citations import assert_rules_cited
from strategies import kernels

from sarek_py.analysis.launch_bounds import launch_in_bounds
from sarek_py.ir.diagnostics import InterpError, SarekError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.types import ArrayType

FUZZ = bool(os.environ.get("SAREK_FUZZ"))


def kernel_of(src: str) -> Kernel:
    m = parse_module(src)
    check_module(m)
    return m.kernels[-1]


def inputs(k: Kernel, scalars: dict[str, int], extents: dict[str, tuple[int, ...]],
           seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for p in k.params:
        t = p.type
        if isinstance(t, ArrayType):
            shape = extents[p.name]
            if t.elem.is_float:
                out[p.name] = rng.uniform(-4, 4, shape).astype(t.elem.dtype)
            elif t.elem.is_int:
                out[p.name] = rng.integers(-3, 8, shape).astype(t.elem.dtype)
            else:
                out[p.name] = rng.integers(0, 2, shape) == 1
        elif t.is_float:
            out[p.name] = t.dtype.type(rng.uniform(-4, 4))
        elif t.is_int:
            out[p.name] = t.dtype.type(scalars[p.name])
        else:
            out[p.name] = bool(scalars[p.name])
    return out


def interp_faults(k: Kernel, args: dict[str, Any], threads: int, grid: tuple[int, ...],
                  block: tuple[int, ...], shared: int | None = None) -> bool | None:
    """Whether the interpreter records an out-of-bounds access (None: another error came
    first, so the launch says nothing either way)."""
    try:
        run_kernel(k, copy.deepcopy(args), threads, grid=grid, block_shape=block,
                   loop_budget=2**12, shared=shared)
    except InterpError as err:
        return True if "out-of-bounds" in str(err) else None
    except SarekError:
        return None
    return False


def prove(k: Kernel, scalars: dict[str, int], extents: dict[str, tuple[int, ...]],
          threads: int, grid: tuple[int, ...], block: tuple[int, ...],
          shared: int | None = None) -> bool:
    return launch_in_bounds(k, scalars, extents, threads, grid, block, shared)


# ------------------------------------------------------------------ hand cases

CHAIN = """
kernel chain(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[i] * 2.0f
"""

LE = """
kernel le(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i <= n then y[i] <- x[i]
"""

LEFT = """
kernel left(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[i - 1]
"""

LEFT_GUARDED = """
kernel leftg(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i >= 1 && i < n then y[i] <- x[i - 1]
"""

EARLY = """
kernel early(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i >= n then return;
  y[i] <- x[i] + x[n - 1 - i]
"""

LENGTH = """
kernel bylen(x : f32[], y : f32[]) =
  let i = global_thread_id in
  if i < length(y) && i < length(x) then y[i] <- x[i]
"""

TWO_D = """
kernel two(a : f32[,], out : f32[,], w : i32, h : i32) =
  let c = global_idx_x in
  let r = global_idx_y in
  if c < w && r < h then out[r, c] <- a[r, c] + 1.0f
"""

THREE_D = """
kernel three(a : f32[,,], n0 : i32, n1 : i32, n2 : i32) =
  let x = global_idx_x in
  let y = global_idx_y in
  let z = global_idx_z in
  if x < n2 && y < n1 && z < n0 then a[z, y, x] <- 1.0f
"""

SCALAR_INDEX = """
kernel pick(x : f32[], y : f32[], k : i32) =
  let i = global_thread_id in
  if i < length(y) then y[i] <- x[k]
"""

GATHER = """
kernel gather(idx : i32[], x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[idx[i]]
"""

HELPER = """
fun peek(v : f32[], k : i32) : f32 =
  return v[k + 1]

kernel neighbour(x : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- peek(x, i)
"""

LOOP = """
kernel rowsum(a : f32[,], out : f32[], rows : i32, cols : i32) =
  let r = global_thread_id in
  if r < rows then
    let mut s = 0.0f in
    (for c = 0 to cols - 1 do s := s + a[r, c] done;
     out[r] <- s)
"""

WRAP = """
kernel wrap(y : f32[], n : i32, m : i32) =
  let i = global_thread_id in
  let j = i * m in
  if j < n then y[j] <- 1.0f
"""

MUTABLE = """
kernel mutidx(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  let mut j = i in
  if j < n then y[j] <- x[i]
"""

SHARED = """
kernel tile(x : f32[], out : f32[], n : i32)
  shared buf : f32[64]
  =
  let t = thread_idx_x in
  let i = global_thread_id in
  buf[t] <- 1.0f;
  barrier;
  if i < n then out[i] <- buf[t] + x[i]
"""

COND = """
kernel sel(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < length(y) then y[i] <- (i < n ? x[i] : 0.0f)
"""

LOWER = """
kernel lower(a : f32[1:], out : f32[]) =
  let i = global_thread_id in
  if i < length(out) then out[i] <- a[i + 1]
"""

LOWER_ZERO = """
kernel lower0(a : f32[1:], out : f32[]) =
  let i = global_thread_id in
  if i < length(out) then out[i] <- a[i]
"""

# (name, source, scalars, extents, threads, grid, block, proved)
CASES: list[tuple[str, str, dict[str, int], dict[str, tuple[int, ...]], int,
                  tuple[int, ...], tuple[int, ...], bool]] = [
    ("chain", CHAIN, {"n": 100}, {"x": (100,), "y": (100,)}, 128, (1,), (128,), True),
    ("chain_n_past_the_array", CHAIN, {"n": 101}, {"x": (100,), "y": (101,)}, 128, (1,),
     (128,), False),
    ("chain_more_threads_than_n", CHAIN, {"n": 100}, {"x": (100,), "y": (100,)}, 1000,
     (8,), (128,), True),
    # a branch no thread reaches is not recognised (CG-71): its accesses still must be in
    # bounds, so a launch on empty arrays is left checked
    ("chain_negative_n", CHAIN, {"n": -5}, {"x": (0,), "y": (0,)}, 64, (1,), (64,), False),
    ("off_by_one_guard", LE, {"n": 100}, {"x": (100,), "y": (100,)}, 128, (1,), (128,),
     False),
    ("off_by_one_guard_fits", LE, {"n": 99}, {"x": (100,), "y": (100,)}, 128, (1,), (128,),
     True),
    ("negative_offset_at_zero", LEFT, {"n": 10}, {"x": (10,), "y": (10,)}, 16, (1,), (16,),
     False),
    ("negative_offset_guarded", LEFT_GUARDED, {"n": 10}, {"x": (10,), "y": (10,)}, 16, (1,),
     (16,), True),
    ("early_return", EARLY, {"n": 10}, {"x": (10,), "y": (10,)}, 16, (1,), (16,), True),
    ("early_return_short_x", EARLY, {"n": 10}, {"x": (9,), "y": (10,)}, 16, (1,), (16,),
     False),
    ("lengths", LENGTH, {}, {"x": (7,), "y": (9,)}, 32, (1,), (32,), True),
    ("zero_size", LENGTH, {}, {"x": (0,), "y": (0,)}, 32, (1,), (32,), False),
    ("two_d_rounded_grid", TWO_D, {"w": 10, "h": 7}, {"a": (7, 10), "out": (7, 10)}, 4 * 2 * 16,
     (4, 2), (4, 4), True),
    ("two_d_swapped_extents", TWO_D, {"w": 10, "h": 7}, {"a": (10, 7), "out": (7, 10)},
     4 * 2 * 16, (4, 2), (4, 4), False),
    ("three_d_rounded_grid", THREE_D, {"n0": 3, "n1": 5, "n2": 6}, {"a": (3, 5, 6)},
     2 * 2 * 2 * 32, (2, 2, 2), (4, 4, 2), True),
    ("scalar_index_in", SCALAR_INDEX, {"k": 3}, {"x": (4,), "y": (8,)}, 8, (1,), (8,), True),
    ("scalar_index_out", SCALAR_INDEX, {"k": 4}, {"x": (4,), "y": (8,)}, 8, (1,), (8,), False),
    ("index_read_from_memory", GATHER, {"n": 8}, {"idx": (8,), "x": (100,), "y": (8,)}, 8,
     (1,), (8,), False),
    ("helper_past_the_end", HELPER, {"n": 8}, {"x": (8,), "out": (8,)}, 8, (1,), (8,), False),
    ("helper_in_bounds", HELPER, {"n": 8}, {"x": (9,), "out": (8,)}, 8, (1,), (8,), True),
    ("loop", LOOP, {"rows": 5, "cols": 3}, {"a": (5, 3), "out": (5,)}, 8, (1,), (8,), True),
    ("loop_cols_past", LOOP, {"rows": 5, "cols": 4}, {"a": (5, 3), "out": (5,)}, 8, (1,),
     (8,), False),
    ("i32_wrap", WRAP, {"n": 8, "m": 2**20}, {"y": (8,)}, 4096, (16,), (256,), False),
    ("no_wrap", WRAP, {"n": 8, "m": 2}, {"y": (8,)}, 4096, (16,), (256,), True),
    ("mutable_index", MUTABLE, {"n": 8}, {"x": (8,), "y": (8,)}, 8, (1,), (8,), False),
    ("shared_by_thread_index", SHARED, {"n": 128}, {"x": (128,), "out": (128,)}, 128, (2,),
     (64,), True),
    ("shared_block_too_big", SHARED, {"n": 128}, {"x": (128,), "out": (128,)}, 128, (1,),
     (128,), False),
    ("lower_bound", LOWER, {}, {"a": (8,), "out": (8,)}, 16, (1,), (16,), True),
    ("lower_bound_short", LOWER, {}, {"a": (7,), "out": (8,)}, 16, (1,), (16,), False),
    ("below_the_lower_bound", LOWER_ZERO, {}, {"a": (8,), "out": (8,)}, 16, (1,), (16,),
     False),
    ("conditional_expression", COND, {"n": 5}, {"x": (5,), "y": (9,)}, 16, (1,), (16,), True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_cg70_cg71_hand_cases_and_the_interpreter_agrees(
        case: tuple[str, str, dict[str, int], dict[str, tuple[int, ...]], int,
                    tuple[int, ...], tuple[int, ...], bool]) -> None:
    """CG-70, CG-71, CG-73: the proof's answer for each edge, and a proved launch runs
    without an out-of-bounds access in the interpreter."""
    _, src, scalars, extents, threads, grid, block, want = case
    k = kernel_of(src)
    assert prove(k, scalars, extents, threads, grid, block) is want
    faults = interp_faults(k, inputs(k, scalars, extents), threads, grid, block)
    if want:
        assert faults is False


@pytest.mark.parametrize("name", ["chain_n_past_the_array", "off_by_one_guard",
                                  "negative_offset_at_zero", "early_return_short_x",
                                  "two_d_swapped_extents", "scalar_index_out",
                                  "helper_past_the_end", "loop_cols_past", "i32_wrap",
                                  "lower_bound_short", "below_the_lower_bound",
                                  "shared_block_too_big"])
def test_cg73_a_launch_that_faults_is_not_proved(name: str) -> None:
    """CG-73: these launches do fault in the interpreter, and the proof refuses them."""
    _, src, scalars, extents, threads, grid, block, want = next(c for c in CASES
                                                                if c[0] == name)
    k = kernel_of(src)
    assert not want and not prove(k, scalars, extents, threads, grid, block)
    assert interp_faults(k, inputs(k, scalars, extents), threads, grid, block) is True


def test_cg75_thread_ranges_of_a_1d_launch_stop_at_the_count() -> None:
    """CG-75: a 1-D launch of 100 threads in blocks of 64 ranges the global index by the
    count (0..99), not the rounded grid (0..127)."""
    k = kernel_of(CHAIN)
    ext = {"x": (100,), "y": (100,)}
    assert prove(k, {"n": 1000}, ext, 100, (2,), (64,))
    assert not prove(k, {"n": 1000}, ext, 101, (2,), (64,))


def test_cg70_dynamic_shared_extent_is_the_launch_s() -> None:
    """CG-70: the dynamic shared array's extent is the launch's ``shared``."""
    k = kernel_of("""
kernel dyn(out : f32[])
  shared s : f32[]
  =
  let t = thread_idx_x in
  s[t] <- 1.0f;
  barrier;
  if global_thread_id < length(out) then out[global_thread_id] <- s[t]
""")
    assert prove(k, {}, {"out": (64,)}, 64, (2,), (32,), shared=32)
    assert not prove(k, {}, {"out": (64,)}, 64, (2,), (32,), shared=31)
    assert not prove(k, {}, {"out": (64,)}, 64, (2,), (32,), shared=None)


# ------------------------------------------------------------- soundness oracle

@st.composite
def launches(draw: st.DrawFn, k: Kernel) -> tuple[dict[str, int], dict[str, tuple[int, ...]],
                                                   int, tuple[int, ...], tuple[int, ...]]:
    scalars: dict[str, int] = {}
    extents: dict[str, tuple[int, ...]] = {}
    for p in k.params:
        t = p.type
        if isinstance(t, ArrayType):
            extents[p.name] = tuple(n if n is not None else draw(st.integers(0, 9))
                                    for n in t.shape)
        elif t.is_int:
            scalars[p.name] = draw(st.integers(-3, 12))
        elif not t.is_float:
            scalars[p.name] = draw(st.integers(0, 1))
    dims = draw(st.sampled_from((1, 2, 3)))  # a 1-D kernel reading y is refused (LCH-26)
    block = tuple(draw(st.integers(1, 8 if dims == 1 else 4)) for _ in range(dims))
    grid = tuple(draw(st.integers(1, 3)) for _ in range(dims))
    cap = int(np.prod(block)) * int(np.prod(grid))
    threads = draw(st.integers(1, cap))
    return scalars, extents, threads, grid, block


def oracle(k: Kernel, data: st.DataObject) -> None:
    scalars, extents, threads, grid, block = data.draw(launches(k))
    if not prove(k, scalars, extents, threads, grid, block):
        return
    # proved: the interpreter must find no out-of-bounds access (another error first,
    # e.g. a division by zero, tells nothing)
    assert interp_faults(k, inputs(k, scalars, extents), threads, grid, block) is not True


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kernels(depth=2), st.data())
def test_cg73_generated_kernels_proved_launches_never_fault(k: Kernel,
                                                            data: st.DataObject) -> None:
    """CG-73 (soundness): over generated kernels of the whole language and random 3-D
    launches, a launch proved in bounds never faults in the interpreter."""
    oracle(k, data)


_IDX = ("i", "i + 1", "i - 1", "n - 1 - i", "i * 2", "i / 2", "i % 3", "min(i, m)",
        "max(i, m)", "m", "i + m", "(i < m ? i : m)", "i & 7", "i >> 1")
_GUARD = ("i < n", "i <= n", "i < length(y)", "i >= 1 && i < n", "i < n && i < m",
          "i < n || i < m", "!(i >= n)", "n > i", "true")
_ID = ("global_thread_id", "global_idx_x", "thread_idx_x + block_idx_x * block_dim_x",
       "thread_idx_x")


@st.composite
def guarded_kernels(draw: st.DrawFn) -> Kernel:
    """Kernels whose accesses a launch proof often decides: a thread index, a guard, a
    few index shapes, sometimes a loop, a helper or an early return."""
    ident = draw(st.sampled_from(_ID))
    guard = draw(st.sampled_from(_GUARD))
    out, inp = draw(st.sampled_from(_IDX)), draw(st.sampled_from(_IDX))
    form = draw(st.sampled_from(("if", "early", "loop", "helper", "else")))
    head = "kernel g(x : f32[], y : f32[], n : i32, m : i32) =\n  let i = " + ident + " in\n"
    helper = ""
    if form == "if":
        body = f"  if {guard} then y[{out}] <- x[{inp}]"
    elif form == "early":
        body = f"  if !({guard}) then return;\n  y[{out}] <- x[{inp}]"
    elif form == "else":
        body = f"  if {guard} then y[{out}] <- x[{inp}] else x[{inp}] <- 0.0f"
    elif form == "loop":
        by_j = re.sub(r"\bi\b", "j", inp)
        body = (f"  if {guard} then\n    for j = 0 to m - 1 do y[{out}] <- "
                f"y[{out}] + x[{by_j}] done")
    else:
        helper = "fun get(v : f32[], k : i32, n : i32, m : i32) : f32 =\n" \
                 f"  let i = k in return v[{inp}]\n\n"
        body = f"  if {guard} then y[{out}] <- get(x, i, n, m)"
    return kernel_of(helper + head + body + "\n")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(guarded_kernels(), st.data())
def test_cg73_guarded_kernels_proved_launches_never_fault(k: Kernel,
                                                          data: st.DataObject) -> None:
    """CG-73 (soundness): guarded-index kernels (proved often) never fault when proved."""
    oracle(k, data)


@pytest.mark.slow
@settings(max_examples=3000 if FUZZ else 100, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.one_of(kernels(depth=3), guarded_kernels()), st.data())
def test_cg73_launch_proof_fuzz(k: Kernel, data: st.DataObject) -> None:
    """CG-73 at fuzz size (``SAREK_FUZZ=1``): thousands of kernels and launches."""
    oracle(k, data)


def test_cg73_guarded_generator_proves_often() -> None:
    """The guarded generator is not vacuous: the chain idioms it makes are proved."""
    k = kernel_of("kernel g(x : f32[], y : f32[], n : i32, m : i32) =\n"
                  "  let i = global_thread_id in\n  if i < n then y[min(i, m)] <- x[i / 2]\n")
    assert prove(k, {"n": 8, "m": 3}, {"x": (8,), "y": (8,)}, 16, (1,), (16,))


# ------------------------------------------------------------------ the runtime

def opencl() -> Any:
    from sarek_py.runtime import get_backend

    try:
        return get_backend("opencl")
    except SarekError as err:
        pytest.skip(str(err))


def test_cg74_proof_is_cached_by_the_values_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """CG-74: the proof is decided once per kernel object and launch values; a launch with
    the same integer scalars, extents and shape finds it (no second decision), a changed
    float scalar is not part of the key, a changed integer one is decided again. A hit is
    cheap (loose bound 1 ms: typeguard and a shared machine; benchmarks/launch_proof.py
    prints the real figure)."""
    from sarek_py.runtime import launch_proof
    from sarek_py.runtime.base import DeviceBuffer

    decided: list[str] = []
    real = launch_proof.launch_in_bounds

    def counting(k: Kernel, *rest: Any) -> bool:
        decided.append(k.name)
        return real(k, *rest)

    monkeypatch.setattr(launch_proof, "launch_in_bounds", counting)
    k = kernel_of(CHAIN.replace("x[i] * 2.0f", "x[i] * a").replace("n : i32)",
                                                                  "n : i32, a : f32)"))
    args: dict[str, Any] = {"x": DeviceBuffer(None, (100,), np.dtype(np.float32)),
                            "y": DeviceBuffer(None, (100,), np.dtype(np.float32)),
                            "n": np.int32(100), "a": np.float32(1.5)}
    assert launch_proof.proved_in_bounds(k, args, 128, 64, None, None)
    t = time.perf_counter()
    for _ in range(100):
        args["a"] = np.float32(time.perf_counter())
        assert launch_proof.proved_in_bounds(k, args, 128, 64, None, None)
    assert (time.perf_counter() - t) / 100 < 1e-3
    assert decided == ["chain"]
    args["n"] = np.int32(101)  # another value: decided again, and refused
    assert not launch_proof.proved_in_bounds(k, args, 128, 64, None, None)
    args["y"] = DeviceBuffer(None, (101,), np.dtype(np.float32))
    assert not launch_proof.proved_in_bounds(k, args, 128, 64, None, None)  # x is short
    assert decided == ["chain"] * 3


VIEW_CASES = ["chain", "chain_more_threads_than_n", "negative_offset_guarded", "early_return",
              "lengths", "two_d_rounded_grid", "three_d_rounded_grid",
              "helper_in_bounds", "loop", "shared_by_thread_index", "conditional_expression",
              "no_wrap", "scalar_index_in", "lower_bound"]


@pytest.mark.opencl
@pytest.mark.parametrize("name", VIEW_CASES)
@pytest.mark.parametrize("views", [False, True], ids=["contiguous", "views"])
def test_cg72_cg73_lch90_proved_unchecked_equals_checked_on_opencl(name: str,
                                                                   views: bool) -> None:
    """CG-72, CG-73, LCH-90: a proved launch runs the unchecked build (counted in
    ``stats.launches_proved``) and writes the checked build's bytes, also with numpy
    views (strided, not contiguous) as arguments."""
    be = opencl()
    _, src, scalars, extents, threads, grid, block, want = next(c for c in CASES
                                                                if c[0] == name)
    assert want
    k = kernel_of(src)
    base = inputs(k, scalars, extents, seed=3)
    if views:  # every array a strided view of a twice larger one
        for p in k.params:
            if isinstance(p.type, ArrayType):
                a = base[p.name]
                big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
                v = big[tuple(slice(None, None, 2) for _ in a.shape)]
                v[...] = a
                base[p.name] = v
    shape: dict[str, Any] = {"grid": grid, "block_shape": block}
    runs = []
    for prove_launches in (True, False):
        args = {n: (v.copy() if v.base is None else
                    _strided_copy(v)) if isinstance(v, np.ndarray) else v
                for n, v in base.items()}
        be.prove_launches = prove_launches
        before = be.stats.launches_proved
        try:
            be.run_kernel(k, args, threads, **shape)
        finally:
            be.prove_launches = True
        assert be.stats.launches_proved - before == (1 if prove_launches else 0)
        runs.append(args)
    ref = copy.deepcopy(base)
    run_kernel(k, ref, threads, grid=grid, block_shape=block)
    for p in k.params:
        if isinstance(p.type, ArrayType):
            assert runs[0][p.name].tobytes() == runs[1][p.name].tobytes() \
                == ref[p.name].tobytes(), p.name


def _strided_copy(v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    big = np.zeros(tuple(2 * n for n in v.shape), v.dtype)
    out = big[tuple(slice(None, None, 2) for _ in v.shape)]
    out[...] = v
    return out


@pytest.mark.opencl
def test_cg72_proved_launch_takes_no_fault_buffer_and_faults_still_report() -> None:
    """CG-72, CG-73: the proved launch's build has no bounds check and arms no fault
    buffer; the next launch of the same kernel that would fault is not proved, runs the
    checked build and reports the interpreter's error."""
    be = opencl()
    k = kernel_of(CHAIN)
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    be.run_kernel(k, {"x": x, "y": y, "n": 100}, 100, 64)
    em, _, _ = be.compiled(k, False)
    assert "sarek_in1" not in em.source and em.abi.fault_words == 0
    assert be.compiled(k, True)[0].abi.fault_words > 0
    with pytest.raises(InterpError, match=r"out-of-bounds read of array 'x' at index \[100\]"):
        be.run_kernel(k, {"x": x, "y": np.zeros(101, np.float32), "n": 101}, 101, 64)


@pytest.mark.opencl
def test_cg72_checked_false_and_prove_off_are_unchanged() -> None:
    """CG-72: ``checked = False`` counts no proof (it is unchecked anyway), and
    ``prove_launches = False`` keeps the checked build for a provable launch."""
    be = opencl()
    k = kernel_of(CHAIN)
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    n0 = be.stats.launches_proved
    be.checked = False
    try:
        be.run_kernel(k, {"x": x, "y": y, "n": 100}, 100, 64)
    finally:
        be.checked = True
    assert be.stats.launches_proved == n0
    be.prove_launches = False
    try:
        be.run_kernel(k, {"x": x, "y": y, "n": 100}, 100, 64)
    finally:
        be.prove_launches = True
    assert be.stats.launches_proved == n0


@pytest.mark.opencl
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(guarded_kernels(), st.data())
def test_cg73_generated_proved_launches_bitwise_on_opencl(k: Kernel,
                                                          data: st.DataObject) -> None:
    """CG-73: generated guarded kernels, proved launches: the unchecked build's bytes are
    the checked build's and the interpreter's."""
    be = opencl()
    scalars, extents, threads, grid, block = data.draw(launches(k))
    if not prove(k, scalars, extents, threads, grid, block):
        return
    base = inputs(k, scalars, extents, seed=1)
    ref = copy.deepcopy(base)
    try:
        run_kernel(k, ref, threads, grid=grid, block_shape=block)
    except SarekError:
        return  # a race or another error: no defined bytes to compare
    outs = []
    for prove_launches in (True, False):
        args = copy.deepcopy(base)
        be.prove_launches = prove_launches
        try:
            be.run_kernel(k, args, threads, grid=grid, block_shape=block)
        finally:
            be.prove_launches = True
        outs.append(args)
    for name in ("x", "y"):
        assert outs[0][name].tobytes() == outs[1][name].tobytes() == ref[name].tobytes()


def test_cg70_every_rule_of_the_launch_proof_is_cited() -> None:
    """Each rule CG-70 … CG-75 and LCH-90 is cited by a test of this file."""
    assert_rules_cited(__file__, "codegen", "CG", 70, 75)
    assert_rules_cited(__file__, "launch", "LCH", 90, 90)


@pytest.mark.parametrize("name", ["chain", "two_d_rounded_grid", "helper_in_bounds", "loop",
                                  "lower_bound"])
def test_cg72_the_c_backend_runs_proved_launches_unchecked_bitwise(name: str) -> None:
    """CG-72, CG-73: the c backend asks the same hook; its proved launch is counted and
    writes the checked build's and the interpreter's bytes."""
    from sarek_py.runtime import get_backend

    try:
        be = get_backend("c")
    except SarekError as err:
        pytest.skip(str(err))
    _, src, scalars, extents, threads, grid, block, want = next(c for c in CASES
                                                                if c[0] == name)
    k = kernel_of(src)
    base = inputs(k, scalars, extents, seed=5)
    outs = []
    for prove_launches in (True, False):
        args = copy.deepcopy(base)
        be.prove_launches = prove_launches
        before = be.stats.launches_proved
        try:
            be.run_kernel(k, args, threads, grid=grid, block_shape=block)
        finally:
            be.prove_launches = True
        assert be.stats.launches_proved - before == (1 if prove_launches else 0)
        outs.append(args)
    ref = copy.deepcopy(base)
    run_kernel(k, ref, threads, grid=grid, block_shape=block)
    for p in k.params:
        if isinstance(p.type, ArrayType):
            assert outs[0][p.name].tobytes() == outs[1][p.name].tobytes() \
                == ref[p.name].tobytes(), p.name
