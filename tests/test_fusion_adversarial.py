"""Red-team cases for epilogue fusion (specs/epilogue-fusion.md EF-*, specs/fusion-legality.md
LEG-*).

Every case is a producer ``p`` and a consumer ``c`` launched on named buffers. The
promise under attack: the pair is either refused with a rule id, or fused into a kernel
whose run gives bitwise the buffers of running ``p`` then ``c`` (NaN-poisoned outputs,
interpreter with race checking). Each case names the rule it exercises.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from sarek_py.fusion.epilogue.sequence import fuse_pair
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Expr, Ref, var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.types import Scalar

N = 24


def _buffers(n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out: dict[str, np.ndarray] = {}
    for name in ("X", "Y", "Z", "W"):
        a = rng.standard_normal(n).astype(np.float32)
        a[::3] = np.nan  # poisoned: an element nobody stores stays NaN, and is compared
        out[name] = a
    out["K"] = np.arange(n, dtype=np.int32) % 5 - 1
    return out


def _bind(args: Mapping[str, object], bufs: Mapping[str, np.ndarray],
          env: Mapping[str, int]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in args.items():
        if isinstance(v, str):
            out[k] = bufs[v]
        elif isinstance(v, Expr):
            out[k] = _eval(v, env)
        else:
            out[k] = v
    return out


def _eval(e: object, env: Mapping[str, int]) -> int:
    from sarek_py.ir.host.evaluate import host_eval

    return int(host_eval(e, dict(env)))  # type: ignore[arg-type]


def _run(lc: KernelLaunch, bufs: Mapping[str, np.ndarray], env: Mapping[str, int]) -> None:
    threads = lc.threads if isinstance(lc.threads, int) else _eval(lc.threads, env)
    run_kernel(lc.kernel, _bind(lc.by_name, bufs, env), threads, lc.block)


def outcome(text: str, tp: int | Expr, tc: int | Expr, *,
            p_args: Mapping[str, object] | None = None,
            c_args: Mapping[str, object] | None = None,
            env: Mapping[str, int] | None = None, block: int = 4) -> str | None:
    """``None`` when fused (and checked bitwise equal to unfused), else the refusal's
    rule. Fails the test when fused and different."""
    m = parse_module(text, "adv.sk")
    check_module(m)
    pa: dict[str, object] = {"x": "X", "y": "Y", "n": N}
    pa.update(p_args or {})
    ca: dict[str, object] = {"y": "Y", "z": "Z"}
    ca.update(c_args or {})
    pk, ck = m.kernel("p"), m.kernel("c")
    pl = KernelLaunch(pk, tp, block, {p.name: pa[p.name] for p in pk.params})  # type: ignore[misc]
    cl = KernelLaunch(ck, tc, 8, {p.name: ca[p.name] for p in ck.params})  # type: ignore[misc]
    try:
        fl = fuse_pair(pl, cl)
    except FusionRefused as r:
        assert f"[{r.rule}]" in str(r)
        return r.rule
    check_module(parse_module("", "empty.sk").__class__([], [fl.kernel]))
    values = env or {}
    ref, got = _buffers(N), _buffers(N)
    _run(pl, ref, values)
    _run(cl, ref, values)
    _run(fl, got, values)
    for k in ref:
        assert ref[k].tobytes() == got[k].tobytes(), (
            f"fused differs from unfused on buffer {k}:\n{ref[k]}\n{got[k]}")
    return None


CONS = "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in z[i] <- y[i] * 2.0f\n"
PROD = ("kernel p(x : f32[], y : f32[], n : i32) =\n"
        "  let i = global_thread_id in if i < n then y[i] <- x[i] + 1.0f\n")


def test_ef12_baseline_pair_fuses_bitwise() -> None:
    """EF-12 / LEG-3: the plain pair is accepted and equal (the harness itself works)."""
    assert outcome(PROD + CONS, N, N) is None


# ---------------------------------------------------------------- the consumer's index


@pytest.mark.parametrize("body", [
    "let j = i + 1 in z[i] <- y[j]",                         # disguised through a let
    "let mut j = i in (j := j + 1; z[i] <- y[j - 1])",        # through a mutable variable
    "z[i] <- at(y, i)",                                       # through a helper
    "z[i] <- y[(i + 1) - 1]",                                 # arithmetic that is i
])
def test_ef9_leg7_disguised_consumer_index_refused(body: str) -> None:
    """EF-9/LEG-7: C may read the intermediate only at exactly ``[i]``; any disguise is
    refused (soundly, even when it happens to be ``i``)."""
    text = ("fun at(a : f32[], k : i32) : f32 = return a[k]\n" + PROD
            + f"kernel c(y : f32[], z : f32[]) = let i = global_thread_id in {body}\n")
    assert outcome(text, N, N - 1) == "LEG-7"


def test_ef3_let_copy_of_the_index_is_the_index() -> None:
    """EF-3: ``let j = i`` is ``i`` itself, renamed: reading ``y[j]`` is at the index, and
    the fused pair is bitwise equal (it was refused as a disguise before issue 11)."""
    text = ("fun at(a : f32[], k : i32) : f32 = return a[k]\n" + PROD
            + "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in "
            "let j = i in z[j] <- y[j]\n")
    assert outcome(text, N, N - 1) is None


def test_ef4_consumer_reads_what_it_writes_elsewhere() -> None:
    """EF-4: C writes z[i] and reads z[i+1]."""
    text = PROD + ("kernel c(y : f32[], z : f32[]) = let i = global_thread_id in\n"
                   "  if i + 1 < 24 then z[i] <- y[i] + z[i + 1]\n")
    assert outcome(text, N, N) == "EF-4"


# ---------------------------------------------------------------- the producer's stores


@pytest.mark.parametrize("body,rule", [
    ("if i < n then (y[i] <- x[i]; y[i] <- 2.0f)", "LEG-3"),           # stored twice
    ("y[i / 2] <- x[i]", "LEG-2"),                                        # not affine
    ("if i < n then y[i % 12] <- x[i]", "LEG-2"),
    ("if x[i] > 0.0f then y[i] <- 1.0f", "LEG-4"),                        # skips data
    ("if x[i] > 0.0f then y[i] <- 1.0f else y[i] <- 2.0f", None),         # both store
    ("for k = 0 to K[i] do y[i] <- x[i] done", "LEG-5"),                  # data trip count
    ("let m = i * 2 in if m < n then y[m] <- 1.0f else y[m - n + 1] <- 2.0f", None),
    ("if i < n then (if x[i] > 0.0f then return; y[i] <- 1.0f)", "LEG-4"),  # return on data
    ("if i >= 4 then return; y[i] <- 1.0f", "LEG-3"),   # threads 4.. return: 4..23 missing
    ("if i < n then (y[i] <- x[i]; if x[i] > 0.0f then return)", "LEG-4"),  # after: safe
    ("y[i] <- 1.0f; stop 3", "LEG-5"),                                    # stop after store
    ("for k = 0 to 1 do if 2 * i + k < n then y[2 * i + k] <- x[k] done", None),
    ("let b = i < 12 in if b then y[2 * i] <- 1.0f else y[2 * (i - 12) + 1] <- 2.0f", None),
])
def test_leg3_leg4_leg5_producer_stores(body: str, rule: str | None) -> None:
    """LEG-3 (exactly once), LEG-4 (data-dependent), LEG-5 (control flow) on stores
    that are repeated, skipped, under data-dependent loops, returns and stops."""
    text = ("kernel p(x : f32[], y : f32[], K : i32[], n : i32) =\n"
            f"  let i = global_thread_id in {body}\n" + CONS)
    assert outcome(text, N, N, p_args={"K": "K"}) == rule


def test_leg3_fewer_producer_threads_than_consumer() -> None:
    """LEG-3: P launched with fewer threads than C stores too few elements."""
    assert outcome(PROD + CONS, N - 4, N) == "LEG-3"


def test_leg5_stop_in_a_producer_helper_refused() -> None:
    """LEG-5: a ``stop`` reached through a helper function P calls is a stop on the way:
    the thread that stops never stores (and the fused kernel never computes C's element)."""
    text = ("fun check(a : f32[], k : i32) : i32 = (if a[k] > 0.5f then stop 2; return 0)\n"
            "kernel p(x : f32[], y : f32[], n : i32) =\n"
            "  let i = global_thread_id in let d = check(x, i) in y[i] <- x[i]\n" + CONS)
    assert outcome(text, N, N) == "LEG-5"


def test_ef2_stop_in_a_consumer_helper_refused() -> None:
    """EF-2: a ``stop`` reached through a helper C calls would stop P's thread in the
    fused kernel (ending P's later stores)."""
    text = ("fun check(v : f32) : f32 = (if v > 0.5f then stop 2; return v)\n"
            "kernel p(x : f32[], y : f32[], n : i32) =\n"
            "  let i = global_thread_id in if i < 12 then (y[2 * i] <- x[i]; "
            "y[2 * i + 1] <- x[i + 12])\n"
            "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in\n"
            "  z[i] <- check(y[i])\n")
    assert outcome(text, 12, N) == "EF-2"


# --------------------------------------------------------------------- overflow (LEG-6)


@pytest.mark.parametrize("body", [
    "y[i * 65536 * 65536 + i] <- 1.0f",
    "y[(i + 2147483647) - 2147483647] <- 1.0f",
    "if i + 2147483647 >= 2147483647 then y[i] <- 1.0f",
    "y[i32(i64(i) * 4294967296L + i64(i))] <- 1.0f",
])
def test_leg6_wrapping_index_or_guard_refused(body: str) -> None:
    """LEG-6: an index or guard that would wrap is not known (the device wraps)."""
    text = ("kernel p(x : f32[], y : f32[], n : i32) =\n"
            f"  let i = global_thread_id in {body}\n" + CONS)
    assert outcome(text, N, N) == "LEG-6"


def _sym() -> tuple[Ref, dict[str, int]]:
    return Ref(var("n", Scalar.I32, mutable=True)), {"n": N}


@pytest.mark.parametrize("body,ok", [
    ("if i < n then y[i] <- x[i]", True),
    ("if i + 2147483647 >= 2147483647 then y[i] <- x[i]", False),   # wraps for i >= 1
    ("if i < n then (y[i] <- x[i]; y[(i + 1) * 65536 * 65536 + i] <- 2.0f)", False),
    ("if i * 65536 * 32768 >= 0 then y[i] <- x[i]", False),        # odd i: -2**31
    ("if i < n then y[n - 1 - i] <- x[i]", True),
])
def test_leg12_symbolic_counts_respect_wrapping(body: str, ok: bool) -> None:
    """LEG-12 with LEG-6: with a symbolic thread count the affine analysis takes integers to
    be exact, so an expression around the stores that may wrap must be refused."""
    n, env = _sym()
    text = ("kernel p(x : f32[], y : f32[], n : i32) =\n"
            f"  let i = global_thread_id in {body}\n"
            "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in\n"
            "  z[i] <- z[i] + y[i]\n")
    got = outcome(text, n, n, p_args={"n": n}, env=env)
    assert (got is None) == ok, got
    if not ok:
        assert got == "LEG-6"


# ----------------------------------------------------------------- aliasing (LEG-7)


def test_leg7_in_place_consumer_on_the_intermediate() -> None:
    """LEG-7: C writing the intermediate in place (same buffer twice) is legal when P does
    not read it, and the result is bitwise equal."""
    assert outcome(PROD + CONS, N, N, c_args={"z": "Y"}) is None


def test_leg7_in_place_consumer_when_producer_reads_intermediate() -> None:
    """LEG-7: ... refused when P reads the intermediate (at another element)."""
    text = ("kernel p(x : f32[], y : f32[], n : i32) =\n"
            "  let i = global_thread_id in if i < n then y[i] <- x[i] + y[(i + 1) % n]\n")
    assert outcome(text + CONS, N, N, c_args={"z": "Y"}) == "LEG-7"


def test_leg7_consumer_writes_what_producer_reads() -> None:
    """LEG-7: C writes X, which P reads (a later P thread would see C's value)."""
    assert outcome(PROD + CONS, N, N, c_args={"z": "X"}) == "LEG-7"


def test_leg7_consumer_reads_output_under_another_name() -> None:
    """LEG-7: C reads buffer Z away from its index under the name w and writes it as z."""
    text = PROD + ("kernel c(y : f32[], z : f32[], w : f32[]) = let i = global_thread_id in\n"
                   "  z[i] <- y[i] + w[(i + 1) % 24]\n")
    assert outcome(text, N, N, c_args={"w": "Z"}) == "LEG-7"


def test_leg7_overlapping_views_refused() -> None:
    """LEG-7: numpy views that overlap without being the same view are refused."""
    m = parse_module(PROD + CONS, "adv.sk")
    base = np.zeros(N + 1, np.float32)
    pl = KernelLaunch(m.kernel("p"), N, 4, {"x": base[1:], "y": base[:N], "n": N})
    cl = KernelLaunch(m.kernel("c"), N, 4, {"y": base[:N], "z": np.zeros(N, np.float32)})
    with pytest.raises(FusionRefused) as ei:
        fuse_pair(pl, cl)
    assert ei.value.rule == "LEG-7"


def test_leg7_producer_writes_intermediate_under_two_names() -> None:
    """LEG-7: P binds Y to y and to w and writes both."""
    text = ("kernel p(x : f32[], y : f32[], w : f32[], n : i32) =\n"
            "  let i = global_thread_id in (y[i] <- x[i]; if i == 0 then w[3] <- 5.0f)\n")
    assert outcome(text + CONS, N, N, p_args={"w": "Y"}) == "LEG-7"


# ------------------------------------------------------------- consumer constructs (EF-2)


@pytest.mark.parametrize("body,decl", [
    ("z[i] <- y[i] + f32(thread_idx_x)", ""),
    ("z[i] <- y[i] + tid(1)", ""),
    ("(barrier; z[i] <- y[i])", ""),
    ("(if y[i] > 0.0f then return; z[i] <- y[i])", ""),
    ("(s[0] <- y[i]; z[i] <- s[0])", " shared s : f32[4]"),
    ("(if y[i] > 100.0f then stop 1; z[i] <- y[i])", ""),
])
def test_ef2_thread_specific_consumer_refused(body: str, decl: str) -> None:
    """EF-2: thread intrinsics (also through a helper), barrier, return, stop, shared."""
    text = ("fun tid(k : i32) : f32 = return f32(block_idx_x + k)\n" + PROD
            + f"kernel c(y : f32[], z : f32[]){decl} = let i = global_thread_id in {body}\n")
    assert outcome(text, N, N) == "EF-2"


def test_ef1_consumer_index_not_global_id() -> None:
    """EF-1: ``let i = thread_idx_x`` is not element-wise."""
    text = PROD + "kernel c(y : f32[], z : f32[]) = let i = thread_idx_x in z[i] <- y[i]\n"
    assert outcome(text, N, N) == "EF-1"


# ---------------------------------------------------------------- names (EF-5, EF-11)


def test_ef5_names_that_look_like_prefixes() -> None:
    """EF-5: variables already named ``c_i``, ``ep_t``, ``p_y``, ``ep_tc`` in both kernels
    are not captured."""
    text = ("kernel p(x : f32[], y : f32[], n : i32) var ep_t : i32 =\n"
            "  let c_i = global_thread_id in let ep_tc = c_i + 1 in\n"
            "  (ep_t := ep_tc; if c_i < n then y[c_i] <- x[c_i] + f32(ep_t))\n"
            "kernel c(y : f32[], z : f32[]) var p_y : f32 = let ep_t = global_thread_id in\n"
            "  let p_i = ep_t in (p_y := p_y + y[ep_t]; z[ep_t] <- p_y + f32(p_i))\n")
    assert outcome(text, N, N) is None


def test_ef10_consumer_locals_reset_per_element() -> None:
    """EF-10: C's locals start at zero for every element, even when one P thread
    computes several of C's elements."""
    text = ("kernel p(x : f32[], y : f32[], n : i32) =\n"
            "  let i = global_thread_id in if i < 12 then (y[2 * i] <- x[i]; "
            "y[2 * i + 1] <- 3.0f)\n"
            "kernel c(y : f32[], z : f32[]) var acc : f32 local l : f32[3] =\n"
            "  let i = global_thread_id in\n"
            "  (acc := acc + y[i]; l[1] <- l[1] + 1.0f; z[i] <- acc + l[1])\n")
    assert outcome(text, 12, N) is None


def test_ef11_same_helper_name_different_bodies() -> None:
    """EF-11: helpers named alike with different bodies are Incompatible; the same body
    (up to ids) is shared once."""
    pt = ("fun f(a : f32) : f32 = return a + 1.0f\n"
          "kernel p(x : f32[], y : f32[], n : i32) =\n"
          "  let i = global_thread_id in y[i] <- f(x[i])\n")
    ct = ("fun f(a : f32) : f32 = return a + {}\n"
          "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in z[i] <- f(y[i])\n")
    from sarek_py.fusion.epilogue.fuse_kernels import fuse

    p = parse_module(pt, "p.sk").kernel("p")
    for const, same in (("1.0f", True), ("2.0f", False)):
        c = parse_module(ct.format(const), "c.sk").kernel("c")
        if same:
            k = fuse(p, c, shared={"y": "y"})
            assert [h.name for h in k.helpers] == ["f"]
        else:
            with pytest.raises(FusionRefused) as ei:
                fuse(p, c, shared={"y": "y"})
            assert ei.value.rule == "EF-11"


# -------------------------------------------------------------- producer barriers, i64


def test_ef8_producer_barrier_and_i64_index() -> None:
    """EF-8: a barrier in P stays where it is; an i64 store index compares in i64."""
    text = ("kernel p(x : f32[], y : f32[], n : i32) shared s : f32[4] =\n"
            "  let i = global_thread_id in (s[thread_idx_x] <- x[i]; barrier;\n"
            "  y[i64(i)] <- s[3 - thread_idx_x])\n" + CONS)
    assert outcome(text, N, N - 5) is None


def test_ef8_store_index_with_side_effect_free_evaluation_order() -> None:
    """EF-8: the store index is evaluated once, before the value, as in P."""
    text = ("kernel p(x : f32[], y : f32[], K : i32[], n : i32) =\n"
            "  let i = global_thread_id in if i < n then y[(i + 0) * 1] <- x[K[i] + 1]\n"
            + CONS)
    assert outcome(text, N, N, p_args={"K": "K"}) is None

