"""Affine forms, conditions, Fourier-Motzkin and the fusion queries (specs/affine.md)."""

from __future__ import annotations

from fractions import Fraction

from sarek_py.analysis.affine.paths import accesses
from sarek_py.analysis.affine.queries import (
    AffineCtx,
    AffineForm,
    Constraint,
    Dnf,
    Mode,
    StoreSite,
    bounds_of,
    constant_offset,
    constant_offsets,
    covers_exactly_once,
    ge0,
    implies,
    is_empty,
    is_injective,
    reads_within,
    store_sites,
    to_affine,
    to_dnf,
)
from sarek_py.ir.nodes import (
    Assign,
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    For,
    If,
    Intrinsic,
    Length,
    Let,
    Read,
    Ref,
    Return,
    Store,
    Unary,
    UnaryOp,
    Var,
    seq,
    var,
)
from sarek_py.ir.types import Scalar, array

I32, I64, BOOL = Scalar.I32, Scalar.I64, Scalar.BOOL
TID = Intrinsic("global_thread_id")


def c(k: int, t: Scalar = I32) -> Expr:
    return Const(k, t)


def b(op: str, x: Expr, y: Expr) -> Expr:
    return Binary(BinaryOp(op), x, y)


def r(v: Var) -> Expr:
    return Ref(v)


def f(e: Expr, ctx: AffineCtx | None = None) -> AffineForm:
    out = to_affine(e, ctx)
    assert out is not None
    return out


def d(e: Expr, ctx: AffineCtx | None = None, mode: Mode = Mode.EXACT) -> Dnf:
    out = to_dnf(e, ctx, mode)
    assert out is not None
    return out


i, j, n, m = (var(x, I32) for x in "ijnm")
A = var("a", array(Scalar.F32))
Fi, Fj, Fn, Fm = (AffineForm.of_atom(Ref(v)) for v in (i, j, n, m))


# ------------------------------------------------------------------------- forms


def test_aff1_atoms() -> None:
    """AFF-1: intrinsics, lengths, immutable vars, declared indices are atoms; variant and
    undeclared mutable variables are not; invariant expressions become opaque atoms."""
    assert to_affine(TID) == AffineForm.of_atom(TID)
    assert to_affine(Length(A, 0)) == AffineForm.of_atom(Length(A, 0))
    assert to_affine(r(n)) == Fn
    k = var("k", I32, mutable=True)
    assert to_affine(r(k)) is None
    assert to_affine(r(k), AffineCtx(invariant=frozenset({k}))) == AffineForm.of_atom(r(k))
    assert to_affine(r(n), AffineCtx(variant=frozenset({n}))) is None
    half = b("/", r(n), c(2))
    assert to_affine(half) == AffineForm.of_atom(half)
    # an opaque atom may not hide a loop index or a read
    assert to_affine(b("/", r(i), c(2)), AffineCtx(indices=frozenset({i}))) is None
    assert to_affine(b("+", Read(var("q", array(I32)), (c(0),)), c(1))) is None
    assert to_affine(Call("g", (r(n),), I32)) is None
    # nor a per-thread intrinsic, nor a let variable defined from one (the thread id is
    # what the queries substitute: tid / 2 must not stay fixed when tid is replaced)
    assert to_affine(b("/", TID, c(2))) is None
    bd = Intrinsic("block_dim_x")
    assert to_affine(b("/", bd, c(2))) == AffineForm.of_atom(b("/", bd, c(2)))
    h, q = var("h", I32), var("q", I32)
    ctx = AffineCtx(defs={h: b("/", TID, c(2)), q: Cast(I32, Read(A, (c(0),)))})
    assert to_affine(r(h), ctx) is None and to_affine(r(q), ctx) is None
    assert to_affine(b("+", r(h), c(1)), ctx) is None
    # constants fold with C's truncating division and remainder
    assert f(b("/", c(-7), c(2))) == AffineForm.constant(-3)
    assert f(b("%", c(-7), c(2))) == AffineForm.constant(-1)


def test_aff2_normal_form() -> None:
    """AFF-2: equal polynomials give equal, equally hashed forms."""
    e1 = b("+", b("*", c(2), r(i)), b("-", r(n), r(i)))
    e2 = b("-", b("+", r(n), r(i)), c(0))
    assert f(e1) == f(e2) == Fi + Fn
    assert hash(f(e1)) == hash(f(e2))
    assert f(b("-", r(i), r(i))) == AffineForm.constant(0)
    assert (Fi + Fn).terms == (Fn + Fi).terms
    assert (Fi.scale(Fraction(1, 2)) + Fi.scale(Fraction(1, 2))) == Fi


def test_aff3_conversion() -> None:
    """AFF-3: +, -, neg, *const, <<const, exact /const, widening casts; nothing else."""
    assert f(b("*", r(i), c(3))) == Fi.scale(3)
    assert f(Unary(UnaryOp.NEG, r(i))) == -Fi
    assert f(b("<<", r(i), c(2))) == Fi.scale(4)
    assert f(b("/", b("*", r(i), c(4)), c(2))) == Fi.scale(2)
    assert f(Cast(I64, r(i))) == Fi
    loops = AffineCtx(indices=frozenset({i, j}))
    assert to_affine(b("*", r(i), r(j)), loops) is None
    assert to_affine(b("%", r(i), c(2)), loops) is None
    assert to_affine(b(">>", r(i), c(1)), loops) is None
    assert to_affine(b("/", b("+", r(i), c(1)), c(2)), loops) is None
    # without loop indices the same products are invariant: opaque atoms (AFF-1)
    assert to_affine(b("*", r(i), r(j))) == AffineForm.of_atom(b("*", r(i), r(j)))
    assert to_affine(Cast(I32, Const(1.5, Scalar.F32))) is not None  # opaque constant
    assert to_affine(Const(True, BOOL)) is None
    # definitions of immutable lets are expanded
    t = var("t", I32)
    ctx = AffineCtx(defs={t: b("+", TID, c(1))})
    assert f(b("*", r(t), c(2)), ctx) == AffineForm.make({TID: 2}, 2)


def test_aff4_no_narrowing() -> None:
    """AFF-4: a narrowing cast is not expressible; arithmetic is taken as exact."""
    w = var("w", I64)
    assert to_affine(Cast(I32, r(w)), AffineCtx(indices=frozenset({w}))) is None
    big = f(b("*", r(i), c(1 << 20)))
    assert big.coeff(r(i)) == 1 << 20


# ------------------------------------------------------------------- conditions


def test_aff5_tightening() -> None:
    """AFF-5: gcd division with the constant rounded down; constant constraints fold."""
    cons = ge0(Fi.scale(2) - 1)
    assert isinstance(cons, Constraint) and cons.form == Fi - 1
    cons2 = ge0(Fi.scale(Fraction(1, 3)) + Fn.scale(Fraction(2, 3)))
    assert isinstance(cons2, Constraint) and cons2.form == Fi + Fn.scale(2)
    assert ge0(AffineForm.constant(-1)) is False
    assert ge0(AffineForm.constant(0)) is True
    # 2i == 1 has no integer solution: its two tightened halves contradict
    assert is_empty(frozenset(x for x in (ge0(Fi.scale(2) - 1), ge0(1 - Fi.scale(2)))
                              if isinstance(x, Constraint)))


def test_aff6_comparisons_and_connectives() -> None:
    """AFF-6: each comparison, &&, ||, ! pushed through, ternary on booleans."""
    lt = d(b("<", r(i), r(n)))
    assert lt == Dnf.of(ge0(Fn - Fi - 1))
    assert d(b(">", r(i), r(n))) == Dnf.of(ge0(Fi - Fn - 1))
    assert d(b("<=", r(i), r(n))) == Dnf.of(ge0(Fn - Fi))
    assert d(b(">=", r(i), r(n))) == Dnf.of(ge0(Fi - Fn))
    assert d(b("==", r(i), r(n))) == Dnf.of(ge0(Fn - Fi), ge0(Fi - Fn))
    ne = d(b("!=", r(i), r(n)))
    assert len(ne.alts) == 2
    assert d(Unary(UnaryOp.NOT, b("<", r(i), r(n)))) == d(b(">=", r(i), r(n)))
    both = d(b("&&", b("<", r(i), r(n)), b(">=", r(i), c(0))))
    assert len(both.alts) == 1 and len(next(iter(both.alts))) == 2
    either = d(b("||", b("<", r(i), r(n)), b(">=", r(i), c(5))))
    assert len(either.alts) == 2
    # De Morgan: !(a && b) == !a || !b
    nb = d(Unary(UnaryOp.NOT, b("&&", b("<", r(i), r(n)), b(">=", r(i), c(0)))))
    assert nb == d(b("||", b(">=", r(i), r(n)), b("<", r(i), c(0))))
    assert d(Const(True, BOOL)).is_true and d(Const(False, BOOL)).is_false
    tern = d(Cond(b("<", r(i), c(0)), b(">", r(j), c(0)), b("<", r(j), c(0))))
    assert len(tern.alts) == 2


def test_aff7_limits_and_modes() -> None:
    """AFF-7: >64 alternatives or an opaque part: None (exact), true (weaker),
    false (stronger); negation flips the mode."""
    e: Expr = b("!=", r(i), c(0))
    for k in range(1, 7):  # 2^7 = 128 alternatives over 7 variables
        e = b("&&", e, b("!=", r(var(f"v{k}", I32)), c(k)))
    assert to_dnf(e) is None
    assert d(e, mode=Mode.WEAKER).is_true
    assert d(e, mode=Mode.STRONGER).is_false
    opaque = b("<", Cast(I32, Const(1.5, Scalar.F32)), Cast(I32, Read(A, (c(0),))))
    assert to_dnf(opaque) is None
    cond = b("&&", b("<", r(i), r(n)), opaque)
    assert d(cond, mode=Mode.WEAKER) == d(b("<", r(i), r(n)))
    assert d(cond, mode=Mode.STRONGER).is_false
    neg = Unary(UnaryOp.NOT, cond)  # !(x && opaque) = !x || !opaque
    assert d(neg, mode=Mode.WEAKER).is_true
    assert d(neg, mode=Mode.STRONGER) == d(b(">=", r(i), r(n)))


# -------------------------------------------------------------------- decisions


def conj(*cs: Constraint | bool) -> frozenset[Constraint]:
    return frozenset(x for x in cs if isinstance(x, Constraint))


def test_aff8_emptiness() -> None:
    """AFF-8: contradictions found through elimination; feasible systems are not empty."""
    # 0 <= i < n, n <= 0: empty
    assert is_empty(conj(ge0(Fi), ge0(Fn - Fi - 1), ge0(-Fn)))
    assert not is_empty(conj(ge0(Fi), ge0(Fn - Fi - 1)))
    # 1 <= 2i <= 1 over the integers: tightening finds it (rationally non-empty)
    assert is_empty(conj(ge0(Fi.scale(2) - 1), ge0(-Fi.scale(2) + 1)))
    # 3i - 3j == 1 has no integer point (gcd)
    assert is_empty(conj(ge0(Fi.scale(3) - Fj.scale(3) - 1), ge0(Fj.scale(3) - Fi.scale(3) + 1)))
    # chain through an equality: j = i + 1, i >= n, j <= n
    assert is_empty(conj(ge0(Fj - Fi - 1), ge0(Fi - Fj + 1), ge0(Fi - Fn), ge0(Fn - Fj)))


def test_aff9_implication() -> None:
    """AFF-9: implication, with disjunctive goals proved by cases."""
    path = d(b("&&", b(">=", r(i), c(2)), b("<", r(i), b("-", r(n), c(1)))))
    goal = d(b("&&", b(">=", b("-", r(i), c(1)), c(0)), b("<", b("+", r(i), c(1)), r(n))))
    assert implies(path, goal)
    assert not implies(goal, path)
    # i != 0 && 0 <= i <= 2  =>  i == 1 || i == 2 (needs the case split)
    p2 = d(b("&&", b("!=", r(i), c(0)), b("&&", b(">=", r(i), c(0)), b("<=", r(i), c(2)))))
    g2 = d(b("||", b("==", r(i), c(1)), b("==", r(i), c(2))))
    assert implies(p2, g2)
    assert not implies(p2, d(b("==", r(i), c(1))))
    assert implies(Dnf.false(), g2)
    assert implies(p2, Dnf.true())


def test_aff10_bounds() -> None:
    """AFF-10: integer bounds of a form under assumptions."""
    a = d(b("&&", b(">=", r(i), c(2)), b("<=", r(i), c(7))))
    assert bounds_of(Fi.scale(2) + 1, a) == (5, 15)
    assert bounds_of(Fi + Fn, a) == (None, None)
    two = d(b("||", b("==", r(i), c(-3)), b("==", r(i), c(4))))
    assert bounds_of(Fi, two) == (-3, 4)
    assert bounds_of(AffineForm.constant(3)) == (3, 3)


# ---------------------------------------------------------------------- queries


def test_aff11_reads_within() -> None:
    """AFF-11: a stencil read t[i-1], t[i+1] under 1 <= i <= n-2 stays in the producer's
    0 <= k < n; under 0 <= i < n it does not."""
    k = var("k", I32)
    K = r(k)
    domain = d(b("&&", b(">=", K, c(0)), b("<", K, r(n))))
    path = d(b("&&", b(">=", r(i), c(1)), b("<=", r(i), b("-", r(n), c(2)))))
    assert reads_within([Fi - 1], path, [K], domain)
    assert reads_within([Fi + 1], path, [K], domain)
    assert not reads_within([Fi + 2], path, [K], domain)
    wide = d(b("&&", b(">=", r(i), c(0)), b("<", r(i), r(n))))
    assert not reads_within([Fi - 1], wide, [K], domain)
    # simultaneous substitution: the producer's index is the thread id, read at tid + 1
    tdom = d(b("<", TID, b("-", r(n), c(1))))
    tpath = d(b("<", TID, b("-", r(n), c(2))))
    assert reads_within([AffineForm.of_atom(TID) + 1], tpath, [TID], tdom)
    assert not reads_within([AffineForm.of_atom(TID) + 1], tdom, [TID], tdom)


def test_aff12_constant_offsets() -> None:
    """AFF-12: offsets of subscripts from the index."""
    ctx = AffineCtx(indices=frozenset({i, j}))
    assert constant_offset(f(b("-", r(i), c(3)), ctx), r(i)) == -3
    assert constant_offset(f(b("+", r(i), r(n)), ctx), r(i)) is None
    assert constant_offset(f(b("*", r(i), c(2)), ctx), r(i)) is None
    assert constant_offsets([Fi + 1, Fj - 2], [r(i), r(j)]) == (1, -2)
    assert constant_offsets([Fi + 1, Fj + Fj], [r(i), r(j)]) is None


def test_aff13_injectivity() -> None:
    """AFF-13: c*tid + k is injective for c != 0; not with another per-thread atom; guards
    can make a non-injective index injective."""
    t = AffineForm.of_atom(TID)
    nn = frozenset({n})
    assert is_injective([t.scale(3) + Fn], TID, uniform_vars=nn)
    assert not is_injective([t.scale(3) + Fn], TID)  # n not declared uniform
    assert not is_injective([AffineForm.constant(0)], TID)
    tx = Intrinsic("thread_idx_x")
    assert not is_injective([t + AffineForm.of_atom(tx)], TID)
    assert is_injective([t + AffineForm.of_atom(Intrinsic("block_dim_x"))], TID)
    # index 0 for every thread, but only tid == 0 stores: injective
    only0 = d(b("==", TID, c(0)))
    assert is_injective([AffineForm.constant(0)], TID, only0)
    # two dimensions: (tid, 0) is injective, (0, 0) is not
    assert is_injective([t, AffineForm.constant(0)], TID)


def test_aff14_exactly_once() -> None:
    """AFF-14: coverage of [0, count) exactly once."""
    t = AffineForm.of_atom(TID)
    nn = frozenset({n})
    guard = d(b("<", TID, r(n)))
    # if tid < n then out[tid]: threads >= n needed
    assume = d(b(">=", r(m), r(n)))
    mm = frozenset({n, m})
    assert covers_exactly_once([StoreSite((t,), guard)], TID, Fm, Fn, assume, mm)
    assert not covers_exactly_once([StoreSite((t,), guard)], TID, Fm, Fn, Dnf.true(), mm)
    # two halves: out[2*tid] and out[2*tid+1] cover [0, 2n) (even and odd residues)
    halves = [StoreSite((t.scale(2),), Dnf.true()), StoreSite((t.scale(2) + 1,), Dnf.true())]
    assert covers_exactly_once(halves, TID, Fn, Fn.scale(2), uniform_vars=nn)
    # ... but not [0, 2n + 1), and 2*tid with 2*tid + 2 misses the odd elements
    assert not covers_exactly_once(halves, TID, Fn, Fn.scale(2) + 1, uniform_vars=nn)
    evens = [StoreSite((t.scale(2),), Dnf.true()), StoreSite((t.scale(2) + 2,), Dnf.true())]
    res = covers_exactly_once(evens, TID, Fn, Fn.scale(2), uniform_vars=nn)
    assert not res and "stored" in res.reason
    # thirds, one of them reversed (coefficient -3): 3*tid, 3*tid + 1, 3*(n - 1 - tid) + 2
    thirds = [StoreSite((t.scale(3),), Dnf.true()), StoreSite((t.scale(3) + 1,), Dnf.true()),
              StoreSite(((Fn - 1 - t).scale(3) + 2,), Dnf.true())]
    assert covers_exactly_once(thirds, TID, Fn, Fn.scale(3), uniform_vars=nn)
    # a residue that depends on a host symbol (2*tid + n): not provable either way
    odd = [StoreSite((t.scale(2) + Fn,), Dnf.true()),
           StoreSite((t.scale(2) + Fn + 1,), Dnf.true())]
    assert not covers_exactly_once(odd, TID, Fn, Fn.scale(2), uniform_vars=nn)
    # an element stored from two residues' sites: 2*tid and tid (coefficient 1) overlap
    mixed = [StoreSite((t.scale(2),), Dnf.true()), StoreSite((t,), Dnf.true())]
    res = covers_exactly_once(mixed, TID, Fn, Fn, uniform_vars=nn)
    assert not res
    # more residues than MAX_RESIDUES (lcm 9 * 2 = 18): refused with the reason
    many = [StoreSite((t.scale(9),), Dnf.true()), StoreSite((t.scale(2),), Dnf.true())]
    res = covers_exactly_once(many, TID, Fn, Fn, uniform_vars=nn)
    assert not res and "residues" in res.reason
    # out[tid] and out[n - 1 - tid]... overlap: stored twice
    rev = [StoreSite((t,), Dnf.true()), StoreSite((Fn - 1 - t,), Dnf.true())]
    res = covers_exactly_once(rev, TID, Fn, Fn, uniform_vars=nn)
    assert not res and "same element" in res.reason
    # out[tid] for tid < n, and again out[tid - n] for tid >= n: every element twice
    twice = [StoreSite((t,), d(b("<", TID, r(n)))),
             StoreSite((t - Fn,), d(b(">=", TID, r(n))))]
    assert not covers_exactly_once(twice, TID, Fn.scale(2), Fn, uniform_vars=nn)
    # a range split at m (0 <= m <= n) between two stores: exactly once
    split = [StoreSite((t,), d(b("<", TID, r(m)))), StoreSite((t,), d(b(">=", TID, r(m))))]
    in_n = d(b("&&", b(">=", r(m), c(0)), b("<=", r(m), r(n))))
    assert covers_exactly_once(split, TID, Fn, Fn, in_n, mm)
    # the reverse alone covers [0, n) once
    assert covers_exactly_once([StoreSite((Fn - 1 - t,), Dnf.true())], TID, Fn, Fn,
                               uniform_vars=nn)
    # a per-thread atom other than the thread id: refused
    tx = AffineForm.of_atom(Intrinsic("thread_idx_x"))
    assert not covers_exactly_once([StoreSite((tx,), Dnf.true())], TID, Fn, Fn, uniform_vars=nn)


def test_aff15_store_sites() -> None:
    """AFF-15: stores with exact guards; early returns; loops refuse."""
    out = var("out", array(Scalar.F32))
    ii = var("ii", I32)
    val = Const(1.0, Scalar.F32)
    body = Let(ii, TID, seq(
        If(b(">=", r(ii), r(n)), Return()),
        Store(out, (r(ii),), val),
    ))
    sites = store_sites(body, out)
    assert sites is not None and len(sites) == 1
    assert sites[0].index == (AffineForm.of_atom(TID),)
    assert sites[0].guard == d(b("<", TID, r(n)))
    nn = frozenset({n})
    assert covers_exactly_once(sites, TID, Fn, Fn, uniform_vars=nn)
    inloop = Let(ii, TID, For(j, c(0), c(3), Store(out, (r(ii),), val)))
    assert store_sites(inloop, out) is None
    opaque_guard = If(b("<", Cast(I32, Read(A, (c(0),))), c(1)), Store(out, (TID,), val))
    assert store_sites(opaque_guard, out) is None
    mut = var("q", I32, mutable=True)
    assigned = Let(mut, c(0), seq(Assign(mut, TID), Store(out, (r(mut),), val)))
    assert store_sites(assigned, out) is None


def test_aff15_accesses_paths() -> None:
    """AFF-15: reads carry their (weaker) path conditions: loop bounds, if tests, &&."""
    ri = Read(A, (b("-", r(i), c(1)),))
    body = For(i, c(1), b("-", r(n), c(2)), If(b("<", r(i), r(m)),
               Store(A, (r(i),), ri)))
    acc = [x for x in accesses(body) if isinstance(x.node, Read)]
    assert len(acc) == 1
    (x,) = acc
    assert x.in_loop and x.index == (Fi - 1,)
    expect = d(b("&&", b("&&", b(">=", r(i), c(1)), b("<=", r(i), b("-", r(n), c(2)))),
                 b("<", r(i), r(m))))
    assert implies(x.path, expect) and implies(expect, x.path)


def test_aff14_aff15_kernel_store_coverage() -> None:
    """AFF-14, AFF-15: the one-call check on parsed producer kernels."""
    from sarek_py.analysis.affine.queries import kernel_store_coverage
    from sarek_py.ir.parser import parse_module

    m = parse_module("""
kernel guarded(x : f32[], tmp : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then tmp[i] <- x[i]
kernel early(x : f32[], tmp : f32[], n : i32) =
  let i = global_idx_x in
  if i >= n then return;
  tmp[i] <- x[i]
kernel twice(x : f32[], tmp : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then tmp[i] <- x[i];
  if i < n then tmp[i] <- x[i] * 2.0f
kernel shifted(x : f32[], tmp : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then tmp[i + 1] <- x[i]
kernel looped(x : f32[], tmp : f32[], n : i32) =
  let i = global_thread_id in
  for j = 0 to 1 do tmp[i] <- x[i] done
""")
    n = m.kernel("guarded").param("n")
    nref = Ref(n)
    at_least = d(b(">=", nref, c(1000)))  # the guard i < n must let 1000 elements through
    g = kernel_store_coverage(m.kernel("guarded"), "tmp", threads=nref, count=nref)
    assert g, g.reason
    assert kernel_store_coverage(m.kernel("guarded"), "tmp", threads=1024, count=1000,
                                 assume=at_least)
    assert not kernel_store_coverage(m.kernel("guarded"), "tmp", threads=1024, count=1000)
    assert not kernel_store_coverage(m.kernel("guarded"), "tmp", threads=1000, count=1024,
                                     assume=at_least)
    early = m.kernel("early")
    assert kernel_store_coverage(early, "tmp", threads=Ref(early.param("n")),
                                 count=Ref(early.param("n")))
    assert not kernel_store_coverage(early, "tmp", 64, 64, one_dim=False)
    tw = m.kernel("twice")
    res = kernel_store_coverage(tw, "tmp", Ref(tw.param("n")), Ref(tw.param("n")))
    assert not res and "same element" in res.reason
    sh = m.kernel("shifted")
    assert not kernel_store_coverage(sh, "tmp", Ref(sh.param("n")), Ref(sh.param("n")))
    lp = kernel_store_coverage(m.kernel("looped"), "tmp", 64, 64)
    assert not lp and "loop" in lp.reason
    assert not kernel_store_coverage(m.kernel("looped"), "nothere", 64, 64)
