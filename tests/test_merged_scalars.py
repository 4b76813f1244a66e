"""A pipeline's fused launch makes the scalars bound to one value one parameter
(specs/frontend.md FE-97 .. FE-99).

The chain scale -> shift -> relu launched with the user's ``n`` three times fuses into a
kernel that tests ``i < n`` once in effect; every run is compared bit for bit with the
launches run one by one, over equal and unequal scalar patterns and over a time loop
whose pattern changes between steps (a plan is never reused for another pattern).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline, plan_cache
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.runtime import get_backend

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from chain_kernels import relu, scale, shift  # noqa: E402

N = 37


@kernel
def add_k(x: Vec[f32], t: Vec[f32], k: i32, n: i32):  # type: ignore[no-untyped-def]
    """``k`` only becomes stored values (value-only, FE-93)."""
    i = global_thread_id()
    if i < n:
        t[i] = x[i] + f32(k)


@kernel
def mul_k(t: Vec[f32], y: Vec[f32], k: i32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        y[i] = t[i] * f32(k)


def backends() -> list[Any]:
    out: list[Any] = ["interp"]
    for name, mark in (("opencl", pytest.mark.opencl), ("c", None)):
        try:
            get_backend(name)
        except BackendUnavailable:
            continue
        out.append(pytest.param(name, marks=mark) if mark else name)
    return out


@pytest.fixture(autouse=True)
def _no_plans() -> None:
    plan_cache.clear()


def _x() -> np.ndarray[Any, Any]:
    return np.linspace(-3.0, 3.0, N).astype(np.float32)


A, B = np.float32(2.5), np.float32(-1.25)


def chain(backend: str, ns: tuple[int, int, int], a: Any = A, b: Any = B,
          temps: bool = False) -> tuple[Any, Any]:
    """The chain in a pipeline and one by one; asserts equal bytes; (pipeline, y)."""
    x = _x()
    t, u, y = (np.full(N, 7.0, np.float32) for _ in range(3))
    t2, u2, y2 = t.copy(), u.copy(), y.copy()
    with pipeline(backend) as p:
        if temps:
            t = p.empty(N, np.float32)
            u = p.empty(N, np.float32)
        scale[N, 8](x, t, a, np.int32(ns[0]))
        shift[N, 8](t, u, b, np.int32(ns[1]))
        relu[N, 8](u, y, np.int32(ns[2]))
    scale.launch(x, t2, a, np.int32(ns[0]), threads=N, block=8, backend=backend)
    shift.launch(t2, u2, b, np.int32(ns[1]), threads=N, block=8, backend=backend)
    relu.launch(u2, y2, np.int32(ns[2]), threads=N, block=8, backend=backend)
    pairs = [(y, y2)] if temps else [(t, t2), (u, u2), (y, y2)]
    for g, w in pairs:
        assert np.array_equal(np.asarray(g).view(np.uint32), w.view(np.uint32)), p.report()
    return p, y


def _fused_params(p: Any) -> list[str]:
    (lc,) = p.launches
    return [q.name for q in lc.kernel.params if not q.is_array]


def test_fe97_emitted_chain_has_one_n() -> None:
    """FE-97: the fused kernel has one parameter ``n`` where the user passed ``n``
    three times, and its C reads ``i < n``."""
    p, _ = chain("interp", (N, N, N), temps=True)
    params = _fused_params(p)
    assert params.count("n") == 1 and not any(q.endswith("_n") for q in params), params
    for target in ("opencl", "cuda"):
        src = p.source(target)
        assert "int n," in src and "p_c_n" not in src and "c_n" not in src, src
        # the user's three tests and the two inserted thread-count tests (FE-97)
        assert src.count("< n)") == 5 and "ep_tc" not in src, src


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("ns", [(N, N, N), (N, N - 3, N), (N - 5, N - 5, N), (N, 9, 4),
                                (0, 0, 0)])
def test_fe97_bitwise_over_scalar_patterns(backend: str, ns: tuple[int, int, int]) -> None:
    """FE-97, FE-98: equal n's merge, unequal ones stay apart; the bytes are the unfused
    launches' on every backend."""
    # temporaries only where every element read was written (else their bytes are not
    # defined, FE-70)
    for temps in (False, True) if ns[0] >= ns[1] >= ns[2] else (False,):
        p, _ = chain(backend, ns, temps=temps)
        for lc in p.launches:  # no two integers of a fused launch left bound to one value
            bound = [int(a) for q, a in zip(lc.kernel.params, lc.args, strict=True)
                     if not q.is_array and str(q.type) == "i32"]
            if lc.kernel.requires is not None:
                assert len(bound) == len(set(bound)), (bound, p.report())
        if ns == (N, N, N):  # the thread counts too: one integer parameter
            assert [q for q in _fused_params(p) if not q.startswith(("p_p_a", "p_c_b"))] \
                == ["n"], p.report()


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("temps", [False, True])
def test_fe98_time_loop_pattern_changes_between_steps(backend: str, temps: bool) -> None:
    """FE-98: a loop whose value-only ``a`` changes every step hits its plan; a step
    where one n differs misses and runs an unmerged kernel; the next equal step hits the
    first plan again; every step bitwise equal to the unfused launches."""
    pattern = [(N, N, N), (N, N, N), (N, N, N - 1), (N, N, N), (N, N, N - 1)]
    kernels = []
    for step, ns in enumerate(pattern):
        before = plan_cache.STATS.hits
        p, _ = chain(backend, ns, a=np.float32(0.5 + step), temps=temps)
        kernels.append(p.launches[0].kernel if not temps else p.source("opencl"))
        hit = plan_cache.STATS.hits > before
        assert hit == (step in (1, 3, 4)), (step, plan_cache.STATS)
        n_params = [q for q in _fused_params(p) if q == "n" or q.endswith("_n")]
        assert len(n_params) == (1 if len(set(ns)) == 1 else 2), n_params
    if not temps:  # the plan's fused kernel itself, found again
        assert kernels[0] is kernels[1] is kernels[3]
        assert kernels[2] is kernels[4] and kernels[2] is not kernels[0]
    else:  # the stores dropped again at each run (EF-30): the same source
        assert kernels[0] == kernels[1] == kernels[3] != kernels[2] == kernels[4]


def test_fe98_value_only_scalars_are_never_merged() -> None:
    """FE-98: two equal value-only scalars (keyed by type, not value) stay two
    parameters, so a later run with unequal ones cannot reuse a merged kernel; floats are
    never merged (FE-97)."""
    from sarek_py.analysis.value_scalars import value_only_params

    assert {2} <= value_only_params(add_k.ir) and {2} <= value_only_params(mul_k.ir)
    x = _x()
    for ka, kb in ((np.int32(3), np.int32(3)), (np.int32(3), np.int32(4))):
        t, y = np.zeros(N, np.float32), np.zeros(N, np.float32)
        t2, y2 = t.copy(), y.copy()
        with pipeline("interp") as p:
            add_k[N, 8](x, t, ka, np.int32(N))
            mul_k[N, 8](t, y, kb, np.int32(N))
        add_k.launch(x, t2, ka, np.int32(N), threads=N, block=8, backend="interp")
        mul_k.launch(t2, y2, kb, np.int32(N), threads=N, block=8, backend="interp")
        assert np.array_equal(y.view(np.uint32), y2.view(np.uint32))
        params = _fused_params(p)
        assert "p_k" in params and "c_k" in params and "n" in params, params
    # the chain's equal floats a == b stay apart
    p, _ = chain("interp", (N, N, N), a=np.float32(2.0), b=np.float32(2.0))
    assert {"p_p_a", "p_c_b"} <= set(_fused_params(p))


def test_fe99_report_names_the_merged_parameters() -> None:
    """FE-99: the report says which of the user's parameters were merged."""
    p, _ = chain("interp", (N, N, N), temps=True)
    text = p.report()
    assert (f"scale_shift_relu: scale's n, shift's n, relu's n, shift's thread count, "
            f"relu's thread count are one parameter n (all bound to {N}; FE-97)") in text, text
    p, _ = chain("interp", (N, 5, 5), temps=True)
    text = p.report()
    # two groups: the first keeps the user's name, the second its fused kernel's name
    assert (f"scale's n, shift's thread count, relu's thread count are one parameter n "
            f"(all bound to {N}; FE-97)") in text, text
    assert "shift's n, relu's n are one parameter p_c_n (all bound to 5; FE-97)" in text


def test_fe74_report_names_each_temporary_made_on_one_line() -> None:
    """FE-74 (regression): two temporaries made on one line (``t = p.empty(…); u =
    p.empty(…)``) are named ``t`` and ``u`` in the report, not both ``t``."""
    x = _x()
    y = np.zeros(N, np.float32)
    with pipeline("interp") as p:
        t = p.empty(N, np.float32); u = p.empty_like(t)  # noqa: E702
        scale[N, 8](x, t, np.float32(2), np.int32(N))
        shift[N, 8](t, u, np.float32(1), np.int32(N))
        relu[N, 8](u, y, np.int32(N))
    assert t.name == "t" and u.name == "u", (t.name, u.name)
    text = p.report()
    assert "u: stores dropped from scale_shift_relu (nobody reads it: the consumer relu" \
        in text, text


def test_fe97_merged_kernel_prints_and_parses_back() -> None:
    """FE-97: a step whose count was merged keeps its own names' prefix, printed as
    ``fused(…, n as p_ep_tc)``; the text parses back to the same launch conditions."""
    from sarek_py.ir.parser import parse_module
    from sarek_py.ir.printer import print_kernel

    for temps in (False, True):
        p, _ = chain("interp", (N, N, N), temps=temps)
        k = p.launches[0].kernel
        text = print_kernel(k)
        assert "n as p_ep_tc" in text and "n as ep_tc" in text, text
        assert parse_module(text).kernels[0].requires == k.requires


@pytest.mark.parametrize("backend", backends())
def test_fe97_merged_count_is_still_checked_at_each_launch(backend: str) -> None:
    """FE-97, LEG-14: the merged kernel launched again by hand with an ``n`` over the
    producer's stores is refused by the launch check, which finds the inserted bodies by
    the step's prefix; with the right ``n`` it runs and gives the unfused bytes."""
    from sarek_py.fusion.refusal import FusionRefused

    p, y = chain(backend, (N, N, N))
    lc = p.launches[0]
    be = get_backend(backend)
    args = dict(lc.by_name)
    y2 = np.full(N, 9.0, np.float32)
    args["c_y"] = y2
    with pytest.raises(FusionRefused, match="LEG-14"):
        be.run_kernel(lc.kernel, {**args, "n": np.int32(N + 5)}, N, 8)
    with pytest.raises(FusionRefused, match="LEG-14"):  # fewer threads than n
        be.run_kernel(lc.kernel, {**args, "n": np.int32(N)}, N - 8, 8)
    be.run_kernel(lc.kernel, args, N, 8)
    assert np.array_equal(y2.view(np.uint32), y.view(np.uint32))


def test_fe97_text_form_refuses_a_bad_own_name() -> None:
    """FE-97 (TXT-35, LEG-13): after ``as`` the text names the step's own count, ending
    in ``ep_tc``; anything else is a located error."""
    from sarek_py.ir.parser import parse_module
    from sarek_py.ir.printer import print_kernel

    p, _ = chain("interp", (N, N, N))
    text = print_kernel(p.launches[0].kernel)
    bad = text.replace("n as p_ep_tc", "n as p_ep_tx")
    assert bad != text
    with pytest.raises(SarekError, match="must end in ep_tc"):
        parse_module(bad)
