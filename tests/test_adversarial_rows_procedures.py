"""Red-team tests of four new features: CG-21 (thread-count test merged into the kernel's
own guard), the rows numbering (TIL-10, TIL-11, OFF-11), loop fusion inside procedures
(LF-17) and exactly-once coverage with strided stores (AFF-14, LEG-12).

Tests named ``test_fixed_*`` are the unsound cases the red-team pass found (each failed
before its fix: parameter and ``let`` names of the rows kernel clashing with host names,
an ``i32`` extent wrapping for an empty dimension, an aliased dummy read in a consumer's
bound, a new ``t_last`` clashing with a loop variable, a wrapping symbolic thread count);
the others record cases that were checked and found correct.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from fusion_strategies import run_launches, same_bits

from sarek_py.analysis.affine.queries import AffineForm, Dnf, StoreSite, covers_exactly_once, ge0
from sarek_py.codegen import emit_opencl
from sarek_py.fusion.epilogue.legality import index_slice
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.evaluate import host_eval
from sarek_py.ir.host.launch import KernelLaunch, is_symbolic
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Binary, BinaryOp, Const, Intrinsic, Kernel, Ref, var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import Scalar
from sarek_py.runtime import get_backend


def device_backends() -> list[Any]:
    out: list[Any] = [get_backend("interp")]
    try:
        out.append(get_backend("opencl"))
    except BackendUnavailable:
        pass
    return out


# ============================================================================ CG-21

CG21_PREFIXES = {
    # accepted: every divisor provably >= 1, shifts by constants, casts int -> int
    "int_min_div": ("-2147483648 / max(n, 1)", True),
    "mod_masked": ("t % ((n & 7) + 1)", True),
    "shift_and_block_dim": ("(t >> 31) + n / block_dim_x", True),
    "cond_grid_dim": ("b ? t / grid_dim_x : t % block_dim_x", True),
    "narrowing_cast": ("i32(i64(t) * 3000000000L)", True),
    # refused: divisor may be 0 or -1, float -> int, shift by a variable, abs, hidden cast
    "div_by_shifted": ("t / (n >> 29)", False),
    "div_by_minus_one": ("t / -1", False),
    "float_to_int": ("i32(f)", False),
    "shift_by_variable": ("t << n", False),
    "div_by_abs": ("t / (abs(n) + 1)", False),
    "float_cast_in_cond": ("b ? 1 : i32(f)", False),
}


def cg21_kernel(expr: str) -> Kernel:
    src = f"""kernel k(out : i32[], n : i32, b : bool, f : f32) =
  let t = global_thread_id in
  let q = {expr} in
  if t >= n then return;
  out[t] <- q
"""
    return parse_module(src, "cg21.sk").kernel("k")


@pytest.mark.parametrize("name", sorted(CG21_PREFIXES))
def test_cg21_prefix_safety_and_results(name: str) -> None:
    """CG-21 (holds): a prefix is merged into the guard exactly when it is safe past the
    count (INT_MIN / max(n,1), % by (n&7)+1, >> 31, / block_dim, conditionals, narrowing
    int casts are; / (n>>29), / -1, float->int casts, shifts by a variable, abs are not),
    and for the merged ones the OpenCL results equal the interpreter's for counts that are
    not whole blocks."""
    expr, merged = CG21_PREFIXES[name]
    k = cg21_kernel(expr)
    [line] = [ln for ln in emit_opencl(k).splitlines()
              if "sarek_threads" in ln and "return" in ln]
    assert ("||" in line) == merged, line
    if not merged:
        return  # (these divide by zero or convert out of range for valid threads too)
    results = []
    for be in device_backends():
        for threads, n, b in ((257, 290, True), (100, 90, False), (3, 300, True)):
            out = np.full(300, -1, np.int32)
            be.run_kernel(k, {"out": out, "n": n, "b": b, "f": np.float32(2.5)}, threads, 64)
            results.append((be.name, threads, out.tobytes()))
    by_case: dict[int, set[bytes]] = {}
    for _, threads, data in results:
        by_case.setdefault(threads, set()).add(data)
    assert all(len(v) == 1 for v in by_case.values())


# ====================================================================== TIL-10/OFF-11


def rows_program(name: str, ty: str, value: str) -> str:
    conv = f"i64({name})" if ty == "i32" else name
    return f"""
program p
  var {name} : {ty} = {value};
  var w : i64[0:, 0:] allocatable;
begin
  allocate w[0:3, 0:299];
  parallel for (a = 0 to 3, b = 0 to 299) do
    w[a, b] <- {conv} * 100000L + i64(a) * 1000L + i64(b)
  done;
end
"""


@pytest.mark.parametrize("name", ["lo_0", "hi_1"])
def test_fixed_off11_rows_kernel_params_clash_with_host_scalar(name: str) -> None:
    """OFF-11/OFF-2 (FAILS): the rows kernel's bound parameters are named lo_k/hi_k without
    avoiding the host names it also receives (the flat kernel renames them _lo_0 …).
    Minimal input: `var lo_0 : i32 = 5` read in the body of a 4x300 nest (rows launch);
    the offloaded program gives different w on the interp and OpenCL devices (the kernel
    has two parameters called lo_0)."""
    p = parse_program(rows_program(name, "i32", "5"))
    ref = run_program(p).array("w")
    q = offload(p)
    for be in device_backends():
        got = run_program(q, device=be).array("w")
        assert got.tobytes() == ref.tobytes(), be.name


@pytest.mark.parametrize(("name", "ty", "value"), [
    ("n_b", "i64", "11L"), ("z_a", "i64", "17L"), ("rows_c", "i64", "13L"),
    ("place_0", "i64", "19L")])
def test_fixed_off11_printed_rows_kernel_rebinds_host_names(name: str, ty: str,
                                                          value: str) -> None:
    """TIL-10/OFF-11 (FAILS): the rows kernel's own lets (n_<var>, z_<var>, rows_c,
    place_k) shadow a host scalar of the same name the body reads. The IR runs right, but
    the printed offloaded program (what `sarek-py opt -p offload` writes) reparses with the
    body reading the let instead of the parameter. Minimal input: `var n_b : i64 = 11L`
    read in `parallel for (a = 0 to 3, b = 0 to 299)`."""
    p = parse_program(rows_program(name, ty, value))
    ref = run_program(p).array("w")
    q = offload(p)
    again = parse_program(print_program(q))
    got = run_program(again, device=get_backend("interp")).array("w")
    assert got.tobytes() == ref.tobytes()


WRAPPED_EMPTY = """
program p
  var lo : i32 = 2147483647; var hi : i32 = -2147483648;
  var w : i32[2, 2];
begin
  parallel for (i = 0 to 1, j = lo to hi) do w[i, j & 1] <- 7 done;
end
"""


def test_fixed_off1_empty_dimension_with_wrapping_extent_runs() -> None:
    """OFF-1/OFF-11 (FAILS): the host computes extents `hi - lo + 1` in i32; for
    lo = INT_MAX, hi = INT_MIN (an empty dimension) it wraps to 2, so the flat launch (the
    one TIL-11 picks at block 256) runs 4 iterations of an empty nest and writes w (all 7
    instead of all 0). The rows kernel (64-bit extents) is right; see the block-2 test."""
    p = parse_program(WRAPPED_EMPTY)
    ref = run_program(p).array("w")
    assert not ref.any()
    q = offload(p, block_size=256)
    for be in device_backends():
        assert run_program(q, device=be).array("w").tobytes() == ref.tobytes(), be.name


def test_off11_rows_kernel_handles_wrapping_empty_extent() -> None:
    """TIL-10 (holds): with block 2 TIL-11 picks the rows launch for the nest above; its
    64-bit extents see the dimension is empty and nothing is stored."""
    p = parse_program(WRAPPED_EMPTY)
    q = offload(p, block_size=2)
    for be in device_backends():
        assert not run_program(q, device=be).array("w").any(), be.name


NEST3 = """
program p
  var a : i32 = 0; var b : i32 = 0; var c : i32 = 0;
  var na : i32 = 3; var nb : i32 = 5; var nc : i32 = 7;
  var w : i64[0:, 0:, 0:] allocatable;
begin
  allocate w[0:na - 1, 0:nc - 1, 0:nb - 1];
  parallel for (k = a to a + na - 1, i = b to b + nb - 1, j = c to c + nc - 1) do
    w[k - a, j - c, i - b] <- i64(k) * 1000000L + i64(i) * 1000L + i64(j)
  done;
end
"""


@pytest.mark.parametrize("block", [1, 3, 7, 96, 100])
def test_til10_three_dim_odd_blocks_extreme_bounds(block: int) -> None:
    """TIL-10/TIL-11 (holds): a 3-D nest whose contiguous dimension is the middle loop, with
    lower bounds near INT_MIN/INT_MAX, one-element and empty dimensions, block sizes that
    are not powers of two: both devices give the host's w (rows or flat launch)."""
    p = parse_program(NEST3)
    q = offload(p, block_size=block)
    presets = [dict(a=-5, b=2147483000, c=-2147483648, na=2, nb=3, nc=5),
               dict(a=0, b=0, c=0, na=1, nb=1, nc=1),
               dict(a=0, b=0, c=0, na=4, nb=0, nc=3),
               dict(a=-5, b=-2147483648, c=3, na=2, nb=150, nc=3),
               dict(a=2147483646, b=-77, c=-1, na=2, nb=13, nc=4)]
    for pre in presets:
        ref = run_program(p, pre).array("w")
        for be in device_backends():
            got = run_program(q, pre, device=be).array("w")
            assert got.tobytes() == ref.tobytes(), (be.name, pre)


# ============================================================================ LF-17

ALIASED_BOUND = """
program p
  var n : i32 = 20; var u : f64[0:] allocatable; var r : f64[0:] allocatable;
  proc step(x : f64[0:] in, y : f64[0:] inout, o : f64[0:] inout, m : i32 in)
    var g : f64[0:] allocatable;
  =
    allocate g[0:m];
    parallel for (i = 0 to m) do g[i] <- -1.0 done;
    for t = 1 to 2 do
      parallel for (i = 0 to m) do y[i] <- f64(10 - 3 * t) done;
      parallel for (i = 0 to i32(x[3])) do g[i] <- y[i] + f64(t) done
    done;
    parallel for (i = 0 to m) do o[i] <- g[i] done
  end
begin
  allocate u[0:n]; allocate r[0:n];
  parallel for (i = 0 to n) do u[i] <- 0.0 done;
  call step(u, u, r, n)
end
"""


@pytest.mark.parametrize("swap", [False, True])
def test_fixed_lf17_consumer_bound_reads_aliased_dummy(swap: bool) -> None:
    """LF-17 (FAILS): _check_shared counts only the arrays named in the loop bodies, not
    in the consumer's bounds. Minimal input: producer `y[i] <- f64(10 - 3*t)`, consumer
    `for i = 0 to i32(x[3]) do g[i] <- y[i] + f64(t)` (g local), called as step(u, u, …):
    the pair is fused, the fused loop reads the bound x[3] = y[3] before the producer's
    write, so at t = 1 it runs 0..0 instead of 0..7 and r[5..7] stay -1 instead of 8."""
    prog = parse_program(ALIASED_BOUND)
    fused, _ = fuse_program(prog, FusionOptions(swap=swap))
    assert run_program(fused).array("r").tobytes() == run_program(prog).array("r").tobytes()


T_LAST_CLASH = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
program p
  var n : i32 = 20; var u : f64[0:] allocatable;
  proc step(o : f64[0:] inout, m : i32 in)
    var h : f64[0:] allocatable; var f : f64[0:] allocatable;
  =
    allocate h[0:m]; allocate f[0:m];
    parallel for (i = 0 to m) do h[i] <- f64(i % 5) done;
    for t = 1 to 2 do
      for t_last = 1 to 3 do
        parallel for (i = 0 to m - 1) do f[i] <- avg(h[i], h[i + 1]) done;
        parallel for (i = 1 to m - 1) do o[i] <- f[i] - f[i - 1] + f64(t_last * 10 + t) done
      done
    done
  end
begin
  allocate u[0:n];
  parallel for (i = 0 to n) do u[i] <- 0.0 done;
  call step(u, n)
end
"""


def test_fixed_lf17_new_t_last_clashes_with_loop_variable() -> None:
    """LF-14/LF-17 (FAILS): the rewrite's fresh names avoid declarations and dummies but
    not host loop variables. Minimal input: a pair inside `for t … do for t_last … do`;
    the outer loop's end copy is named t_last, and running the fused program fails with
    CheckError "duplicate parameter name 't_last'" instead of giving u."""
    prog = parse_program(T_LAST_CLASH)
    fused, reps = fuse_program(prog)
    assert any(r.fused for r in reps)
    assert run_program(fused).array("u").tobytes() == run_program(prog).array("u").tobytes()


TWO_PROCS = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
program p
  var n : i32 = 24; var u : f64[0:] allocatable; var v : f64[0:] allocatable;
  var h_copy : f64[0:] allocatable; var t_last : i32 = 5; var swapped : i32 = 9;
  proc one(o : f64[0:] inout, m : i32 in)
    var h : f64[0:] allocatable; var f : f64[0:] allocatable;
  =
    allocate h[0:m]; allocate f[0:m];
    parallel for (i = 0 to m) do h[i] <- f64(i % 5) + f64(t_last) done;
    for t = 1 to 4 do
      parallel for (i = 0 to m - 1) do f[i] <- avg(h[i], h[i + 1]) done;
      parallel for (i = 1 to m - 1) do h[i] <- h[i] + 0.5 * (f[i] - f[i - 1]) done
    done;
    parallel for (i = 0 to m) do o[i] <- h[i] + f64(swapped) done
  end
  proc two(o : f64[0:] inout, m : i32 in)
    var h : f64[0:] allocatable; var f : f64[0:] allocatable;
  =
    allocate h[0:m]; allocate f[0:m];
    parallel for (i = 0 to m) do h[i] <- f64(i % 3) done;
    for t = 1 to 3 do
      parallel for (i = 0 to m - 1) do f[i] <- avg(h[i], h[i + 1]) done;
      parallel for (i = 1 to m - 1) do h[i] <- h[i] - 0.25 * (f[i] - f[i - 1]) done
    done;
    parallel for (i = 0 to m) do o[i] <- h[i] done;
    call one(o, m - 2)
  end
begin
  allocate u[0:n]; allocate v[0:n]; allocate h_copy[0:1];
  for k = 1 to 2 do
    call one(u, n);
    call two(v, n)
  done
end
"""


@pytest.mark.parametrize("swap", [False, True])
def test_lf17_two_procedures_nested_calls_and_program_names(swap: bool) -> None:
    """LF-17 (holds): two procedures with a renamed pair each, one calling the other,
    called from a host loop, with program variables named h_copy, t_last and swapped that
    the procedures read: fused (with and without ping-pong) and re-parsed from its text,
    the program gives the same u and v bitwise."""
    prog = parse_program(TWO_PROCS)
    fused, reps = fuse_program(prog, FusionOptions(swap=swap))
    assert sum(r.fused for r in reps) == 2
    ref = run_program(prog)
    for q in (fused, parse_program(print_program(fused))):
        got = run_program(q)
        for a in ("u", "v"):
            assert got.array(a).tobytes() == ref.array(a).tobytes(), a


# ===================================================================== AFF-14 / LEG-12

TID = Intrinsic("global_thread_id")
NV, MV = var("n", Scalar.I32), var("m", Scalar.I32)
N, M = Ref(NV), Ref(MV)
T, FN, FM = AffineForm.of_atom(TID), AffineForm.of_atom(N), AffineForm.of_atom(M)
UNIFORM = frozenset({NV, MV})


def _ev(f: AffineForm, t: int, n: int, m: int) -> int:
    v = f.evaluate({TID: t, N: n, M: m})
    assert v.denominator == 1
    return int(v)


def _holds(d: Dnf, t: int, n: int, m: int) -> bool:
    return any(all(c.form.evaluate({TID: t, N: n, M: m}) >= 0 for c in alt)
               for alt in d.alts)


def _brute(sites: list[StoreSite], th: AffineForm, cnt: AffineForm, n: int, m: int) -> bool:
    tt, cc = _ev(th, 0, n, m), _ev(cnt, 0, n, m)
    hits = [0] * max(cc, 0)
    for t in range(max(tt, 0)):
        for s in sites:
            if _holds(s.guard, t, n, m):
                x = _ev(s.index[0], t, n, m)
                if 0 <= x < cc:
                    hits[x] += 1
    return all(h == 1 for h in hits)


def _s(f: AffineForm, g: Dnf | None = None) -> StoreSite:
    return StoreSite((f,), g if g is not None else Dnf.true())


LT_N = Dnf.of(ge0(FN - T - 1))
AFF14_CASES: dict[str, tuple[list[StoreSite], AffineForm, AffineForm, bool]] = {
    "2t,2t+1": ([_s(T.scale(2)), _s(T.scale(2) + 1)], FN, FN.scale(2), True),
    "reversed -2t": ([_s(T.scale(-2) + FN.scale(2) - 2), _s(T.scale(-2) + FN.scale(2) - 1)],
                     FN, FN.scale(2), True),
    "mixed 4t,4t+2,2t+1": ([_s(T.scale(4)), _s(T.scale(4) + 2), _s(T.scale(2) + 1)],
                           FN, FN.scale(2), True),
    "6 residues": ([_s(T.scale(6) + r) for r in range(6)], FN, FN.scale(6), True),
    "8 residues": ([_s(T.scale(8) + r) for r in range(8)], FN, FN.scale(8), True),
    "16 residues (refused)": ([_s(T.scale(16) + r) for r in range(16)], FN, FN.scale(16),
                              False),
    "2t+n parity (refused)": ([_s(T.scale(2) + FN), _s(T.scale(2) + FN + 1)], FN,
                              FN.scale(2), False),
    "guarded": ([_s(T.scale(2), LT_N), _s(T.scale(2) + 1, LT_N)], FN + 3, FN.scale(2), True),
    "gap 2t,2t+2": ([_s(T.scale(2)), _s(T.scale(2) + 2)], FN, FN.scale(2), False),
    "2t, -2t+2n+1": ([_s(T.scale(2)), _s(T.scale(-2) + FN.scale(2) + 1)], FN + 1,
                     FN.scale(2), True),
    "same site twice": ([_s(T.scale(2)), _s(T.scale(2)), _s(T.scale(2) + 1)], FN,
                        FN.scale(2), False),
    "t and 2t+1 overlap": ([_s(T), _s(T.scale(2) + 1)], FN, FN, False),
}


@pytest.mark.parametrize("name", sorted(AFF14_CASES))
def test_aff14_strided_cases_against_brute_force(name: str) -> None:
    """AFF-14 (holds): negative, mixed and non-dividing coefficients, up to 8 residues,
    guards and symbolic offsets: the proof says yes exactly in the cases listed, and every
    yes holds by enumeration for n, m in -4..13."""
    sites, th, cnt, expect = AFF14_CASES[name]
    res = covers_exactly_once(sites, TID, th, cnt, Dnf.true(), UNIFORM)
    assert bool(res) == expect, res.reason
    if res:
        assert all(_brute(sites, th, cnt, n, m) for n in range(-4, 14) for m in range(-4, 8))


def test_aff14_random_two_symbols_sound() -> None:
    """AFF-14 (holds): 300 random site sets with coefficients in {-3..4}, offsets in two
    symbols n, m (coefficients up to 3), guards mixing tid, n and m; every proof holds by
    enumeration for n, m in -5..9 where the assumption holds."""
    rng = random.Random(1414)

    def guard() -> Dnf:
        a = rng.randint(-3, 3)
        k = rng.randint(0, 5)
        if k == 0:
            return Dnf.of(ge0(FN + a - T - 1))
        if k == 1:
            return Dnf.of(ge0(T - a))
        if k == 2:
            d = Dnf.of(ge0(T - a - 1)).or_(Dnf.of(ge0(-T + a - 1)))
            assert d is not None
            return d
        if k == 3:
            return Dnf.of(ge0(FN.scale(rng.choice([1, 2])) - T.scale(rng.choice([1, 2, 3])) + a))
        if k == 4:
            return Dnf.of(ge0(FM - T + a))
        return Dnf.true()

    for _ in range(300):
        L = rng.choice([1, 2, 3, 4])
        sites = []
        for r in range(L):
            d = rng.choice([x for x in (1, 2, 4) if L % x == 0])
            sym = FN.scale(d * rng.choice([0, 0, 1, -1])) + FM.scale(d * rng.choice([0, 1]))
            off = r % d + rng.choice([0, 0, 0, 1, -1])
            f = (T.scale(d) + off if rng.random() < 0.7
                 else T.scale(-d) + FN.scale(L) + (off - d)) + sym
            sites.append(_s(f, guard() if rng.random() < 0.3 else None))
        th = FN + rng.choice([0, 0, 1, -1]) + FM.scale(rng.choice([0, 0, 1]))
        cnt = FN.scale(L) + rng.choice([0, 0, 1, -1]) + FM.scale(rng.choice([0, 0, 1]))
        assume = rng.choice([Dnf.true(), Dnf.of(ge0(FN)), Dnf.of(ge0(FN), ge0(FM))])
        if covers_exactly_once(sites, TID, th, cnt, assume, UNIFORM):
            for n in range(-5, 10):
                for m in range(-5, 10):
                    if _holds(assume, 0, n, m):
                        assert _brute(sites, th, cnt, n, m), (sites, th, cnt, n, m)


def test_fixed_leg12_wrapping_thread_count_is_trusted() -> None:
    """LEG-12/LEG-6/LEG-14/LEG-19 (fixed): the symbolic proof takes the launches' thread
    counts as exact integers, but the host computes them in i32 with wrap-around; the
    fusion holds where they do not wrap, and the launch of wrapped counts is refused. Minimal input: P `y[i] <- x[i]` over `n * 65536 + 5` threads, C `z[i] <- 2 y[i]`
    over `n - 65526` threads. Index_slice proves [0, n - 65526) covered (true over the
    integers) and the launches are fused; at n = 65536 P runs 5 threads (wrapped) and C 10,
    so unfused z[5..9] = 2 * y (old) = -14 but the fused kernel (5 threads) leaves them NaN."""
    mod = parse_module("""
kernel copy(x : f32[], y : f32[]) =
  let i = global_thread_id in y[i] <- x[i]

kernel double(y : f32[], z : f32[]) =
  let i = global_thread_id in z[i] <- y[i] * 2.0f
""", "wrap.sk")
    n = Ref(var("n", Scalar.I32, mutable=True))
    threads = Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, n, Const(65536, Scalar.I32)),
                     Const(5, Scalar.I32))
    count = Binary(BinaryOp.SUB, n, Const(65526, Scalar.I32))
    prod = KernelLaunch(mod.kernel("copy"), threads, 8, {"x": "X", "y": "Y"})
    cons = KernelLaunch(mod.kernel("double"), count, 8, {"y": "Y", "z": "Z"})
    new, _ = fuse_launches([prod, cons])

    def concrete(lc: KernelLaunch, k: int) -> KernelLaunch:
        def val(v: object) -> object:
            return int(host_eval(v, {"n": k})) if is_symbolic(v) else v  # type: ignore[arg-type]

        return KernelLaunch(lc.kernel, val(lc.threads), lc.block,  # type: ignore[arg-type]
                            {a: val(v) for a, v in lc.by_name.items()})  # type: ignore[misc]

    def interp(k: Kernel, args: dict[str, object], threads: int, block: int) -> None:
        run_kernel(k, args, threads, block)  # type: ignore[arg-type]

    k = 65536
    bufs = {"X": np.arange(16, dtype=np.float32) + 1, "Y": np.full(16, -7, np.float32),
            "Z": np.full(16, np.nan, np.float32)}
    b1 = {a: v.copy() for a, v in bufs.items()}
    b2 = {a: v.copy() for a, v in bufs.items()}
    run_launches([concrete(prod, k), concrete(cons, k)], b1, interp)
    # LEG-19: the symbolic proof holds where the counts do not wrap; every launch re-proves
    # it with its own numbers (LEG-14), so the fused launch of the wrapped counts is refused
    # before it runs, and nothing it would have written differs from the unfused run.
    from sarek_py.fusion.refusal import FusionRefused

    with pytest.raises(FusionRefused) as ei:
        run_launches([concrete(x, k) for x in new], b2, interp)
    assert ei.value.rule == "LEG-14" and "LEG-3" in ei.value.reason
    for a in b2:
        assert same_bits(b2[a], bufs[a]), a


def test_leg12_symbolic_index_slice_checks_store_wraps() -> None:
    """LEG-6, LEG-19: `i << 1` and `i + i` under `i < n` are proved not to wrap where the
    consumer's count 2n fits i32 (the fused kernel's count parameter is an i32, and every
    launch re-proves the coverage with its own numbers, LEG-14); `4 * i` may wrap for
    counts that fit and is refused with LEG-6; 64-bit strided stores are proved."""
    from sarek_py.fusion.refusal import FusionRefused
    from sarek_py.ir.nodes import Cast

    n = Ref(var("n", Scalar.I32, mutable=True))
    two_n = Binary(BinaryOp.MUL, Cast(Scalar.I64, n), Const(2, Scalar.I64))
    bodies = {
        "if i < n then (y[i64(i << 1)] <- x[0]; y[i64(i << 1) + 1L] <- x[0])": None,
        "let j = i + i in if i < n then (y[i64(j)] <- x[0]; y[i64(j) + 1L] <- x[0])": None,
        "if i < n then (y[i64((4 * i) / 2)] <- x[0]; y[i64((4 * i) / 2) + 1L] <- x[0])":
            "LEG-6",
        "if i < n then (y[i64(i) << 1] <- x[0]; y[(i64(i) << 1) + 1L] <- x[0])": None,
    }
    for body, rule in bodies.items():
        mod = parse_module("kernel k(x : f32[], y : f32[], n : i32) =\n"
                           f"  let i = global_thread_id in\n  {body}\n", "k.sk")
        lc = KernelLaunch(mod.kernel("k"), n, 8, {"x": "X", "y": "Y", "n": n})
        if rule is None:
            index_slice(lc, "y", two_n)
        else:
            with pytest.raises(FusionRefused) as ei:
                index_slice(lc, "y", two_n)
            assert ei.value.rule == rule, body
