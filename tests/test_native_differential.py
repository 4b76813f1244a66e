"""Generated kernels on the native C backend against the interpreter (specs/native.md
NAT-50, NAT-51, NAT-52).

Three generators reach the ``c`` backend: tests/strategies.py's well-typed kernels (every
statement kind in every position, every scalar type, stops, helpers, local and shared
arrays, barriers; one thread of a 3-D launch, as tests/test_codegen_fuzz.py runs them), the
same kernels again on numpy views (strided, offset, read-only) and with one array passed for
two parameters, tests/break_continue_gen.py's ``break``/``continue`` kernels (48 threads
of blocks of 16 over 37 elements: a guard, a partial last block) and
tests/test_nd_launch_diff.py's n-D launches (1 to 3 axes, odd extents, partial grids).
Every kernel the backend accepts writes the interpreter's bytes; every one it refuses is
refused with a reason, and only for a barrier or shared memory (or CG-11); the outcomes are
counted, so a generator that stops reaching the backend fails. ``SAREK_FUZZ=1`` (``make
fuzz``) runs the long versions: 5,300 generated kernels, over 3,000 of them run on ``c``
and compared (1,500 + 1,500 of tests/strategies.py, 500 with special float values, 300
over aliased arrays, 500 with jumps, 500 n-D launches).
"""

from __future__ import annotations

import copy
import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_diff import (
    aliased,
    assert_same,
    c_backend,
    needs_gpu,
    one_thread,
    run_both,
    transcendental,
    views_of,
)
from rule_citations import assert_rules_cited
from strategies import VALUE_TYPES, Env, array_types, kernels, stmts
from test_break_continue_device import compare_generated
from test_codegen_fuzz import inputs
from test_nd_launch_diff import _kernel, _run, case

from sarek_py.ir.effects import kernel_writes
from sarek_py.ir.nodes import Kernel, var
from sarek_py.runtime import Backend, get_backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))


def shapes_of_arguments(be: Backend, k: Kernel, seed: int, counts: Counter[str]) -> None:
    """NAT-51: ``k`` (which both backends ran) on numpy views of its inputs and with one
    array passed for two parameters: the interpreter's bytes in the same views; a
    read-only view is left as it was."""
    loose = transcendental(k)
    args = inputs(k, seed)
    written = kernel_writes(k)
    ref, dev = views_of(args, k, written, seed), views_of(args, k, written, seed)
    before = {n: np.array(v) for n, v in dev.items() if isinstance(v, np.ndarray)}
    if run_both(be, k, ref, dev) is None:
        counts["views"] += 1
        assert_same(k, ref, dev, loose, "views: ")
        for n, v in dev.items():
            if isinstance(v, np.ndarray) and not v.flags.writeable:
                assert v.tobytes() == before[n].tobytes(), f"read-only {n} was written"
    two = aliased(args, k)
    if two is None:
        return
    a_ref, names = two
    a_dev = aliased(copy.deepcopy(args), k)
    assert a_dev is not None
    if run_both(be, k, a_ref, a_dev[0]) is None:
        counts["aliased"] += 1
        assert_same(k, a_ref, a_dev[0], loose, f"{names[0]} and {names[1]} one array: ")
    if args[names[0]].size > 1 and args[names[0]].ndim == 1:
        # an overlapping view of the same memory (not the same array): refused alike (LCH-62)
        base_r = np.array(args[names[0]])
        base_d = base_r.copy()
        o_ref = {**args, names[0]: base_r, names[1]: base_r[::-1]}
        o_dev = {**args, names[0]: base_d, names[1]: base_d[::-1]}
        outcome = run_both(be, k, o_ref, o_dev)
        if outcome is not None and outcome != "undefined":
            counts["overlap refused alike"] += 1


def generated(be: Backend, examples: int, depth: int, runnable: bool = False,
              special: bool = False) -> tuple[Counter[str], Counter[str]]:
    """``examples`` kernels of tests/strategies.py; ``runnable``: only those without a
    barrier, shared memory or an atomic (the ones the backend must run); ``special``: NaN
    and infinite constants, and special float values in the inputs."""
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    drawn = kernels(depth=depth, allow_nan=special)
    if runnable:
        drawn = drawn.filter(lambda k: not needs_gpu(k))

    @settings(max_examples=examples, deadline=None, database=None, derandomize=not FUZZ,
              suppress_health_check=list(HealthCheck))
    @given(drawn, st.integers(0, 2**16))
    def run(k: Kernel, seed: int) -> None:
        if one_thread(be, k, seed, counts, reasons, special) == "compared" and not special:
            shapes_of_arguments(be, k, seed, counts)

    run()
    print(f"\nc backend, {examples} generated kernels: {dict(counts)}; refusals: "
          f"{dict(reasons)}")
    return counts, reasons


def test_nat50_nat51_generated_kernels_bitwise_on_c() -> None:
    """NAT-50, NAT-51 (``make test`` sample): strategies' kernels, then on views and
    aliases."""
    be = c_backend()
    counts, _ = generated(be, 20, 2)
    assert counts["compared"] >= 4, counts  # the generator reaches the backend
    assert counts["compared"] + counts["refused"] + counts["undefined"] \
        + counts["loose loop"] == 20


@pytest.mark.slow
def test_nat50_nat51_generated_kernels_bitwise_on_c_fuzz() -> None:
    """``make fuzz`` size: 1,500 kernels of depth 3 (SAREK_FUZZ=1; 60 otherwise)."""
    be = c_backend()
    n = 1500 if FUZZ else 60
    counts, reasons = generated(be, n, 3)
    assert counts["compared"] >= n // 5, counts
    assert counts["refused"] >= 1 and reasons["barrier, shared memory or atomic"] >= 1, reasons


@pytest.mark.slow
def test_nat50_nat51_runnable_generated_kernels_bitwise_on_c_fuzz() -> None:
    """``make fuzz`` size: 1,500 kernels of depth 3 without a barrier, shared memory or an
    atomic (SAREK_FUZZ=1; 40 otherwise): none may be refused but for CG-11."""
    be = c_backend()
    n = 1500 if FUZZ else 40
    counts, reasons = generated(be, n, 3, runnable=True)
    assert counts["compared"] >= n // 2 and not reasons["barrier, shared memory or atomic"], \
        counts


def test_nat50_special_float_values_bitwise_on_c() -> None:
    """NAT-50 (``make test`` sample): NaN and infinite constants, inputs with NaN,
    infinities, signed zeros, subnormals."""
    counts, _ = generated(c_backend(), 12, 2, runnable=True, special=True)
    assert counts["compared"] >= 4, counts


@pytest.mark.slow
def test_nat50_special_float_values_bitwise_on_c_fuzz() -> None:
    """``make fuzz`` size: 500 kernels (SAREK_FUZZ=1; 30 otherwise)."""
    n = 500 if FUZZ else 30
    counts, _ = generated(c_backend(), n, 3, runnable=True, special=True)
    assert counts["compared"] >= n // 2, counts


def test_nat50_unchecked_kernels_bitwise_on_c() -> None:
    """NAT-50 with ``backend.checked = False`` (CG-24: the C without bounds checks, what
    ``--unchecked`` benchmarks run): the kernels the interpreter runs in bounds give its
    bytes; half of them on special float values."""
    be = c_backend()
    be.checked = False
    try:
        counts, _ = generated(be, 12, 2, runnable=True)
        special, _ = generated(be, 12, 2, runnable=True, special=True)
    finally:
        be.checked = True
    assert counts["compared"] >= 4 and special["compared"] >= 4, (counts, special)


def default_backend() -> Backend:
    """The automatic choice when it is the c backend with its fallback (NAT-25)."""
    c_backend()
    be = get_backend("default")
    if be.name == "cuda":
        pytest.skip("the default backend is CUDA here: the c backend's fallback is not used")
    return be


def test_nat57_the_default_backend_runs_every_generated_kernel() -> None:
    """NAT-57 (``make test`` sample): barriers, shared memory and all, on views too."""
    counts, reasons = generated(default_backend(), 12, 2)
    assert counts["compared"] >= 4 and not counts["refused"], (counts, reasons)


@pytest.mark.slow
def test_nat57_the_default_backend_runs_every_generated_kernel_fuzz() -> None:
    """``make fuzz`` size: 300 kernels (SAREK_FUZZ=1; 30 otherwise)."""
    n = 300 if FUZZ else 30
    counts, reasons = generated(default_backend(), n, 3)
    assert counts["compared"] >= n // 3 and not counts["refused"], (counts, reasons)


@st.composite
def aliasable_kernels(draw: st.DrawFn) -> Kernel:
    """A kernel whose first two or three parameters are arrays of one type (so one array
    can be passed for all of them), then a scalar, and a body of every statement kind."""
    t = draw(array_types())
    params = [var(n, t) for n in ("a", "b", "c")[:draw(st.integers(2, 3))]]
    params.append(var("n", draw(st.sampled_from(VALUE_TYPES))))
    env = Env()
    for p in params:
        env = env.bind(p)
    return Kernel("k", tuple(params), (), draw(stmts(env, 3)))


def aliases(be: Backend, examples: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    @settings(max_examples=examples, deadline=None, database=None, derandomize=not FUZZ,
              suppress_health_check=list(HealthCheck))
    @given(aliasable_kernels(), st.integers(0, 2**16))
    def run(k: Kernel, seed: int) -> None:
        if one_thread(be, k, seed, counts, reasons) == "compared":
            shapes_of_arguments(be, k, seed, counts)

    run()
    print(f"\nc backend, {examples} kernels over aliased arrays: {dict(counts)}; refusals: "
          f"{dict(reasons)}")
    return counts


def test_nat51_one_array_for_several_parameters_on_c() -> None:
    """NAT-51 (``make test`` sample): the same array for two parameters; an overlapping
    view of it refused alike."""
    counts = aliases(c_backend(), 12)
    assert counts["aliased"] >= 3, counts


@pytest.mark.slow
def test_nat51_one_array_for_several_parameters_on_c_fuzz() -> None:
    """``make fuzz`` size: 300 kernels (SAREK_FUZZ=1; 30 otherwise)."""
    n = 300 if FUZZ else 30
    counts = aliases(c_backend(), n)
    assert counts["aliased"] >= n // 4 and counts["overlap refused alike"] >= 1, counts


def break_continue(be: Backend, seeds: range) -> None:
    jumps = compare_generated(be, seeds)
    assert jumps >= len(seeds)


def test_nat50_break_continue_kernels_bitwise_on_c() -> None:
    """NAT-50: jumps in every position, lanes diverging, a guard and a partial block."""
    break_continue(c_backend(), range(12))


@pytest.mark.slow
def test_nat50_break_continue_kernels_bitwise_on_c_fuzz() -> None:
    """``make fuzz`` size: 500 kernels (SAREK_FUZZ=1; 40 otherwise)."""
    break_continue(c_backend(), range(2000, 2000 + (500 if FUZZ else 40)))


def nd_launches(be: Backend, seeds: range) -> tuple[int, int]:
    """NAT-52: tests/test_nd_launch_diff.py's cases on the interpreter and on ``be``."""
    interp = get_backend("interp")
    compared = refused = 0
    for seed in seeds:
        text, grid, block, threads, axes = case(seed)
        k = _kernel(text)
        want, got = _run(interp, k, grid, block, threads), _run(be, k, grid, block, threads)
        if axes > max(len(grid), len(block)):
            assert isinstance(want, str) and want == got and "[LCH-26]" in want, \
                (seed, want, got)
            refused += 1
            continue
        assert not isinstance(want, str) and not isinstance(got, str), (seed, want, got)
        assert want[0].tobytes() == got[0].tobytes() and want[1].tobytes() == got[1].tobytes(), \
            f"seed {seed}: grid {grid} block {block} threads {threads}\n{text}"
        compared += 1
    return compared, refused


def test_nat52_generated_nd_launches_bitwise_on_c() -> None:
    """NAT-52 (``make test`` sample)."""
    compared, refused = nd_launches(c_backend(), range(16))
    assert compared >= 10 and refused >= 1


@pytest.mark.slow
def test_nat52_generated_nd_launches_bitwise_on_c_fuzz() -> None:
    """``make fuzz`` size: 500 cases (SAREK_FUZZ=1; 40 otherwise)."""
    n = 500 if FUZZ else 40
    compared, refused = nd_launches(c_backend(), range(5000, 5000 + n))
    assert compared >= n // 2 and refused >= 1


def test_nat50_every_adversarial_rule_is_cited() -> None:
    """Every rule NAT-50 … NAT-79 of specs/native.md is cited by a test of the adversarial
    files (tests/test_native_{differential,corpus,march,peers,adversarial,redteam2,
    rowsplit,prepared,hostmem}.py)."""
    others = [f"test_native_{name}.py" for name in ("corpus", "march", "peers", "adversarial",
                                                    "redteam2", "rowsplit", "prepared",
                                                    "hostmem")]
    assert_rules_cited(__file__, "native", "NAT", 50, 79, *others, gaps=(58, 59, 64))
