"""Launch-level legality of epilogue fusion (specs/fusion-legality.md, LEG-1 … LEG-9)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarek_py.fusion.epilogue.legality import (
    Aff,
    GSet,
    _Analysis,
    _overlap,
    _Unsure,
    buffer_key,
    check_launches,
    derive_shared,
    exactly_once,
    index_slice,
)
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.policy import Target, check_contraction, contraction_refusal, target
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.nodes import Binary, BinaryOp, Const, Expr, Intrinsic, Unary, UnaryOp, var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import Scalar, array

CONSUMER = """
kernel c(y : f32[], z : f32[]) = let i = global_thread_id in z[i] <- y[i] + 1.0f
"""


def launches(p_body: str, tp: int, tc: int, *, p_args: dict[str, object] | None = None,
             params: str = "n : i32", block: int = 8) -> tuple[KernelLaunch, KernelLaunch]:
    text = (f"kernel p(x : f32[], y : f32[], {params}) =\n"
            f"  let i = global_thread_id in\n{p_body}\n" + CONSUMER)
    m = parse_module(text, "t.sk")
    args: dict[str, object] = {"x": "X", "y": "Y"}
    args.update(p_args or {})
    return (KernelLaunch(m.kernel("p"), tp, block, args),  # type: ignore[arg-type]
            KernelLaunch(m.kernel("c"), tc, 4, {"y": "Y", "z": "Z"}))


def verdict(p_body: str, tp: int, tc: int, **kw: object) -> str | None:
    """``None`` when legal, else the rule of the refusal."""
    pl, cl = launches(p_body, tp, tc, **kw)  # type: ignore[arg-type]
    try:
        check_launches(pl, cl)
    except FusionRefused as r:
        return r.rule
    return None


# ------------------------------------------------------------------------------- LEG-1


def test_leg1_launch_record_and_bindings() -> None:
    pl, cl = launches("  if i < n then y[i] <- x[i]", 10, 10, p_args={"n": 10})
    assert pl.threads == 10 and pl.block == 8 and pl.by_name["y"] == "Y"
    bad = KernelLaunch(cl.kernel, 10, 4, {"y": "Y"})
    with pytest.raises(FusionRefused) as ei:
        check_launches(pl, bad)
    assert ei.value.rule == "LEG-1" and "z" in ei.value.message
    bad2 = KernelLaunch(cl.kernel, 10, 4, {"y": "Y", "z": 3})
    with pytest.raises(FusionRefused) as ei:
        check_launches(pl, bad2)
    assert ei.value.rule == "LEG-1"


def test_leg1_buffer_identity_of_numpy_views() -> None:
    a = np.zeros(10, np.float32)
    assert buffer_key(a) == buffer_key(a[:]) != buffer_key(a[:5])  # LEG-1: same range only
    assert buffer_key(a) != buffer_key(a.view(np.int32))  # same memory, another dtype
    assert buffer_key(a) != buffer_key(a[1:]) and buffer_key(a) != buffer_key(a[::2])
    assert buffer_key(a) != buffer_key(a.copy())
    assert buffer_key("Y") == buffer_key("Y") != buffer_key("Z")
    assert buffer_key(3) is None and buffer_key(np.float32(1)) is None


# ------------------------------------------------------------------------------- LEG-2


@pytest.mark.parametrize("body, tp, tc, legal", [
    ("  if i < n then y[i] <- x[i]", 12, 10, True),
    ("  if i < n then y[i + block_dim_x - 8] <- x[i]", 12, 10, True),
    ("  if i < length(x) then y[i] <- x[i]", 12, 10, True),
    ("  let j = i * 3 - 2 * i in if j < n then y[j] <- x[j]", 12, 10, True),
    ("  if i < n then y[(i * 4) / 4] <- x[i]", 12, 10, False),
    ("  if i < n then y[i % 16] <- x[i]", 12, 10, False),
    ("  let mut j = i in if j < n then y[j] <- x[j]", 12, 10, False),
])
def test_leg2_affine_class(body: str, tp: int, tc: int, legal: bool) -> None:
    pl, cl = launches(body, tp, tc, p_args={"n": 10})
    pl = KernelLaunch(pl.kernel, pl.threads, pl.block,
                      {**pl.by_name, "x": np.zeros(10, np.float32)})
    cl = KernelLaunch(cl.kernel, cl.threads, cl.block, dict(cl.by_name))
    try:
        check_launches(pl, cl)
        got = True
    except FusionRefused as r:
        assert r.rule == "LEG-2" and "not affine" in r.message
        got = False
    assert got == legal


def _atom(draw: st.DrawFn, g: Expr) -> Expr:
    a = draw(st.integers(-3, 3))
    bb = draw(st.integers(-10, 10))
    op = draw(st.sampled_from([o for o in BinaryOp if o.is_compare]))
    lhs = Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, Const(a, Scalar.I32), g), Const(bb, Scalar.I32))
    return Binary(op, lhs, Const(draw(st.integers(-5, 20)), Scalar.I32))


@st.composite
def conditions(draw: st.DrawFn, depth: int = 3) -> Expr:
    g = Intrinsic("global_thread_id")
    if depth == 0 or draw(st.booleans()):
        return _atom(draw, g)
    k = draw(st.sampled_from(["&&", "||", "!"]))
    if k == "!":
        return Unary(UnaryOp.NOT, draw(conditions(depth - 1)))
    return Binary(BinaryOp(k), draw(conditions(depth - 1)), draw(conditions(depth - 1)))


def _eval(e: Expr, g: int) -> int | bool:
    match e:
        case Const(value=v):
            assert isinstance(v, int)
            return v
        case Intrinsic():
            return g
        case Unary(arg=x):
            return not _eval(x, g)
        case Binary(op=op, lhs=lhs, rhs=rhs):
            if op is BinaryOp.AND:
                return bool(_eval(lhs, g)) and bool(_eval(rhs, g))
            if op is BinaryOp.OR:
                return bool(_eval(lhs, g)) or bool(_eval(rhs, g))
            x, y = _eval(lhs, g), _eval(rhs, g)
            return {BinaryOp.ADD: lambda: x + y, BinaryOp.MUL: lambda: x * y,
                    BinaryOp.LT: lambda: x < y, BinaryOp.LE: lambda: x <= y,
                    BinaryOp.GT: lambda: x > y, BinaryOp.GE: lambda: x >= y,
                    BinaryOp.EQ: lambda: x == y, BinaryOp.NE: lambda: x != y}[op]()
    raise AssertionError(e)


@settings(max_examples=120, deadline=None)
@given(conditions(), st.integers(1, 40))
def test_leg2_conditions_are_exact_sets(cond: Expr, tp: int) -> None:
    """LEG-2: a known condition denotes exactly the threads where it holds."""
    pl, _ = launches("  y[i] <- x[i]", tp, 1, p_args={"n": 1})
    an = _Analysis(pl, pl.kernel.param("y"), GSet.range(0, tp - 1))
    s = an.cond(cond)
    assert s is not None
    want = [g for g in range(tp) if _eval(cond, g)]
    got = [g for lo, hi in s.spans for g in range(lo, hi + 1)]
    assert got == want


# ------------------------------------------------------------------------------- LEG-3


@pytest.mark.parametrize("body, tp, tc, legal", [
    ("  if i < n then y[i] <- x[i]", 10, 10, True),
    ("  if i < n then y[i] <- x[i]", 9, 10, False),           # element 9 missing
    ("  if i < n then y[i] <- x[i]", 10, 11, False),
    ("  y[i] <- x[i]; if i == 3 then y[3] <- 0.0f", 10, 10, False),  # stored twice
    ("  y[0] <- x[i]", 2, 1, False),                              # by several threads
    ("  y[0] <- x[i]", 1, 1, True),
    ("  (y[2 * i] <- x[i]; y[2 * i + 1] <- x[i])", 5, 10, True),
    ("  (y[2 * i] <- x[i]; y[2 * i + 2] <- x[i])", 5, 10, False),
    ("  if i < 5 then (y[i] <- x[i]; y[i + 5] <- x[i])", 8, 10, True),
    ("  if i < 5 then (y[i] <- x[i]; y[i + 4] <- x[i])", 8, 9, False),
    ("  if i < n then y[n - 1 - i] <- x[i]", 12, 10, True),
    ("  if i < n then y[3 * i] <- x[i]", 12, 10, False),
    ("  if i < n then y[i] <- x[i] else y[i] <- 1.0f", 12, 10, True),  # beyond tc: free
])
def test_leg3_exactly_once(body: str, tp: int, tc: int, legal: bool) -> None:
    rule = verdict(body, tp, tc, p_args={"n": 10})
    assert (rule is None) == legal, rule
    if not legal:
        assert rule == "LEG-3"


def _brute(items: list[tuple[GSet, Aff]], tc: int) -> bool:
    count = [0] * tc
    for gs, f in items:
        for lo, hi in gs.spans:
            for g in range(lo, hi + 1):
                v = f.at(g)
                if 0 <= v < tc:
                    count[v] += 1
    return all(c == 1 for c in count)


@st.composite
def pieces(draw: st.DrawFn) -> list[tuple[GSet, Aff]]:
    out = []
    for _ in range(draw(st.integers(0, 4))):
        lo = draw(st.integers(-3, 15))
        gs = GSet.range(lo, lo + draw(st.integers(-1, 12)))
        out.append((gs, Aff(draw(st.integers(-3, 3)), draw(st.integers(-6, 12)))))
    return out


@settings(max_examples=500, deadline=None)
@given(pieces(), st.integers(1, 20))
def test_leg3_decision_matches_enumeration(items: list[tuple[GSet, Aff]], tc: int) -> None:
    """LEG-3: the exact decision agrees with counting every store."""
    try:
        exactly_once(items, tc, "y")
        got = True
    except _Unsure as u:
        assert u.rule == "LEG-3"
        got = False
    assert got == _brute(items, tc)


@settings(max_examples=500, deadline=None)
@given(st.integers(-4, 4), st.integers(-8, 8), st.integers(-4, 4), st.integers(-8, 8),
       st.integers(-5, 5), st.integers(0, 8), st.integers(-5, 5), st.integers(0, 8))
def test_leg3_overlap_is_exact(a1: int, b1: int, a2: int, b2: int,
                               l1: int, n1: int, l2: int, n2: int) -> None:
    p, q = (l1, l1 + n1, Aff(a1, b1)), (l2, l2 + n2, Aff(a2, b2))
    want = bool({a1 * g + b1 for g in range(l1, l1 + n1 + 1)}
                & {a2 * g + b2 for g in range(l2, l2 + n2 + 1)})
    assert _overlap(p, q) == want


# ------------------------------------------------------------------------------- LEG-4


def test_leg4_data_dependent_branches() -> None:
    same = "  if i < n then (if x[i] > 0.0f then y[i] <- x[i] else y[i] <- 0.0f)"
    assert verdict(same, 10, 10, p_args={"n": 10}) is None
    one_sided = "  if i < n then (if x[i] > 0.0f then y[i] <- x[i])"
    assert verdict(one_sided, 10, 10, p_args={"n": 10}) == "LEG-4"
    returns = "  if x[i] > 0.0f then return; y[i] <- x[i]"
    assert verdict(returns, 10, 10, p_args={"n": 10}) == "LEG-4"


# ------------------------------------------------------------------------------- LEG-5


@pytest.mark.parametrize("body, legal, rule", [
    ("  if i >= n then return; y[i] <- x[i]", True, None),
    ("  if i >= n then return; y[i] <- x[i]; y[i] <- x[i]", False, "LEG-3"),
    ("  for k = 0 to 3 do y[4 * i + k] <- x[i] done", True, None),
    ("  for k = 3 downto 0 do y[4 * i + k] <- x[i] done", True, None),
    ("  for k = 0 to i do y[4 * i + k] <- x[i] done", False, "LEG-5"),
    # the same element in each of 5001 iterations: stored twice (LEG-23, LEG-3)
    ("  for k = 0 to 5000 do y[i] <- x[i] done", False, "LEG-3"),
    ("  for k = 0 to 5000 do if k == 7 then y[i] <- x[i] done", False, "LEG-5"),
    # a counted while loop is followed iteration by iteration (LEG-21): once is exact,
    # twice is not; a loop that is not `k < n; k := k + s` is still LEG-5
    ("  let mut k = 0 in while k < 1 do (y[i] <- x[i]; k := k + 1) done", True, None),
    ("  let mut k = 0 in while k < 2 do (y[i] <- x[i]; k := k + 1) done", False, "LEG-3"),
    ("  let mut k = 0 in while k * k < 1 do (y[i] <- x[i]; k := k + 1) done", False,
     "LEG-5"),
    ("  let mut k = 0 in (while k < 3 do k := k + 1 done; y[i] <- x[i])", True, None),
    ("  if i == 3 then stop 1; y[i] <- x[i]", False, "LEG-5"),
])
def test_leg5_control_flow(body: str, legal: bool, rule: str | None) -> None:
    tp = 3 if "4 * i" in body else 10
    got = verdict(body, tp, 10 if tp == 10 else 12, p_args={"n": 10})
    assert got == rule


# ------------------------------------------------------------------------------- LEG-6


def test_leg6_overflow_is_not_affine() -> None:
    body = "  if i < n then y[i * 1000000000 - i * 1000000000 + i] <- x[i]"
    assert verdict(body, 4, 4, p_args={"n": 4}) == "LEG-6"  # i * 1e9 wraps for i >= 3
    assert verdict(body, 2, 2, p_args={"n": 2}) is None      # …but not below
    big = "  if i < n then y[i + 2147483000] <- x[i]"
    assert verdict(big, 1000, 10, p_args={"n": 10}) == "LEG-6"


# ------------------------------------------------------------------------------- LEG-7


def test_leg7_aliasing_through_buffers() -> None:
    pl, cl = launches("  if i < n then y[i] <- x[i]", 10, 10, p_args={"n": 10})
    ok = KernelLaunch(cl.kernel, 10, 4, {"y": "Y", "z": "Z"})
    assert check_launches(pl, ok).p_array == "y"
    bad = KernelLaunch(cl.kernel, 10, 4, {"y": "Y", "z": "X"})  # C writes what P reads
    with pytest.raises(FusionRefused) as ei:
        check_launches(pl, bad)
    assert ei.value.rule == "LEG-7" and "writes z" in ei.value.message
    # z aliasing the intermediate is an in-place update at the same index: legal
    assert check_launches(pl, KernelLaunch(cl.kernel, 10, 4, {"y": "Y", "z": "Y"}))
    x = np.zeros(10, np.float32)
    pa = KernelLaunch(pl.kernel, 10, 8, {"x": x, "y": "Y", "n": 10})
    for z in (x[::-1], x[1:]):
        bad = KernelLaunch(cl.kernel, 10, 4, {"y": "Y", "z": z})
        with pytest.raises(FusionRefused) as ei:
            check_launches(pa, bad)
        assert ei.value.rule == "LEG-7"


def test_leg7_intermediate_written_under_two_names() -> None:
    m = parse_module("""
kernel p(y : f32[], y2 : f32[]) =
  let i = global_thread_id in (y[i] <- 1.0f; if i == 0 then y2[1] <- 2.0f)
""" + CONSUMER, "t.sk")
    pl = KernelLaunch(m.kernel("p"), 4, 4, {"y": "Y", "y2": "Y"})
    cl = KernelLaunch(m.kernel("c"), 4, 4, {"y": "Y", "z": "Z"})
    with pytest.raises(FusionRefused) as ei:
        check_launches(pl, cl)
    assert ei.value.rule == "LEG-7" and "y2" in ei.value.message


def test_leg7_consumer_reads_other_output_of_producer() -> None:
    m = parse_module("""
kernel p(y : f32[], w : f32[]) = let i = global_thread_id in (y[i] <- 1.0f; w[i] <- 2.0f)
kernel c(y : f32[], v : f32[], z : f32[]) =
  let i = global_thread_id in z[i] <- y[i] + v[i]
""", "t.sk")
    pl = KernelLaunch(m.kernel("p"), 4, 4, {"y": "Y", "w": "W"})
    cl = KernelLaunch(m.kernel("c"), 4, 4, {"y": "Y", "v": "W", "z": "Z"})
    with pytest.raises(FusionRefused) as ei:
        check_launches(pl, cl, p_array="y")
    assert ei.value.rule == "LEG-7" and "v" in ei.value.message


# ------------------------------------------------------------------------------- LEG-8


def test_leg8_derived_shared_and_intermediate() -> None:
    pl, cl = launches("  if i < n then y[i] <- x[i]", 10, 10, p_args={"n": 10})
    assert derive_shared(pl, cl) == {"y": "y"}
    plan = check_launches(pl, cl)
    assert plan.p_array == "y" and dict(plan.shared) == {"y": "y"}
    none = KernelLaunch(cl.kernel, 10, 4, {"y": "Q", "z": "Z"})
    with pytest.raises(FusionRefused) as ei:
        check_launches(pl, none)
    assert ei.value.rule == "LEG-8"
    m = parse_module("""
kernel p(y : f32[], w : f32[]) = let i = global_thread_id in (y[i] <- 1.0f; w[i] <- 2.0f)
kernel c(y : f32[], v : f32[], z : f32[]) =
  let i = global_thread_id in z[i] <- y[i] + v[i]
""", "t.sk")
    two = (KernelLaunch(m.kernel("p"), 4, 4, {"y": "Y", "w": "W"}),
           KernelLaunch(m.kernel("c"), 4, 4, {"y": "Y", "v": "W", "z": "Z"}))
    with pytest.raises(FusionRefused) as ei:
        check_launches(*two)
    assert ei.value.rule == "LEG-8" and "several" in ei.value.message


def test_leg8_index_slice_names_kernel() -> None:
    pl, _ = launches("  if i < n then y[i] <- x[i]", 9, 10, p_args={"n": 10})
    with pytest.raises(FusionRefused) as ei:
        index_slice(pl, "y", 10)
    assert ei.value.reason.startswith("p:") and "9 of the 10" in ei.value.message


# ------------------------------------------------------------------------------- LEG-9


def test_leg9_contraction_policy() -> None:
    for name in ("interp", "opencl", "cuda"):
        assert contraction_refusal(target(name)) is None
    on = target("cuda", contraction=True)
    r = contraction_refusal(on)
    assert r is not None and r.rule == "LEG-9" and "cuda" in r.message
    assert contraction_refusal(on, force=True) is None
    assert target("hip").contraction  # unknown: assume it contracts
    with pytest.raises(FusionRefused):
        check_contraction(Target("opencl", True))
    pl, cl = launches("  if i < n then y[i] <- x[i]", 10, 10, p_args={"n": 10})
    new, rep = fuse_launches([pl, cl], target=on)
    assert len(new) == 2 and not rep[0].fused and rep[0].rule == "LEG-9"
    new, rep = fuse_launches([pl, cl], target=on, force=True)
    assert len(new) == 1 and rep[0].fused


def test_leg2_scalar_argument_types() -> None:
    """LEG-2: booleans and integers from the launch are known; floats are not."""
    body = "  if flag && i < n then y[i] <- x[i] else (if i < n then y[i] <- 0.0f)"
    assert verdict(body, 10, 10, p_args={"n": 10, "flag": True},
                   params="n : i32, flag : bool") is None
    body2 = "  if f32(i) < s then y[i] <- x[i]"
    assert verdict(body2, 10, 10, p_args={"s": 10.0}, params="s : f32") == "LEG-4"
    v = var("q", array(Scalar.F32))
    assert v.is_array


def test_leg2_rebound_variable_forgets_its_value() -> None:
    """LEG-2: a binder bound again to an unknown value (fused kernels reuse ep_t) is not
    known any more."""
    from sarek_py.ir.nodes import Cast, Empty, Kernel, Let, Read, Ref, Store, seq

    pl, _ = launches("  y[i] <- x[i]", 4, 4)
    k = pl.kernel
    x, y = k.param("x"), k.param("y")
    t = var("t", Scalar.I32)
    g = Intrinsic("global_thread_id")
    body = seq(Let(t, g, Empty()),
               Let(t, Cast(Scalar.I32, Read(x, (g,))), Store(y, (Ref(t),), Const(1.0, Scalar.F32))))
    bad = KernelLaunch(Kernel("p", k.params, (), body), 4, 4, pl.by_name)
    with pytest.raises(FusionRefused) as ei:
        index_slice(bad, "y", 4)
    assert ei.value.rule == "LEG-2"


def test_leg2_store_through_helper_refused() -> None:
    m = parse_module("""
fun put(a : f32[], k : i32) : f32 = (a[k] <- 1.0f; return 0.0f)
kernel p(x : f32[], y : f32[]) = let i = global_thread_id in let d = put(y, i) in ()
""", "t.sk")
    pl = KernelLaunch(m.kernel("p"), 4, 4, {"x": "X", "y": "Y"})
    with pytest.raises(FusionRefused) as ei:
        index_slice(pl, "y", 4)
    assert ei.value.rule == "LEG-2" and "put" not in ei.value.message and "y" in ei.value.message
