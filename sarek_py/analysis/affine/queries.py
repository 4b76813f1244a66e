"""Affine analysis: forms, conditions, Fourier-Motzkin, and the queries fusion asks
(specs/affine.md, AFF-1..AFF-15).

The analysis is *sound*: whatever it cannot express gives no constraint, so a ``True``
answer is a proof and ``False`` means "not proved".

API (all re-exported here)::

    AffineCtx(indices=, variant=, invariant=, defs=)   what may be an atom (AFF-1)
    AffineForm                                          const + Σ coeff·atom, normal form (AFF-2)
    to_affine(expr, ctx) -> AffineForm | None            exact conversion (AFF-3, AFF-4)
    Constraint, ge0(form)                                form >= 0, tightened (AFF-5)
    Dnf, Mode, to_dnf(cond, ctx, mode) -> Dnf | None     conditions (AFF-6, AFF-7)
    is_empty(conj), implies(A, B), bounds_of(form, A)    decisions (AFF-8..AFF-10)

    reads_within(subscripts, path, indices, domain) -> bool                   AFF-11
    constant_offset(form, index) -> int | None                                AFF-12
    constant_offsets(subscripts, indices) -> tuple[int, ...] | None           AFF-12
    is_injective(index, tid, guard=Dnf.true(), uniform_vars=frozenset()) -> bool   AFF-13
    covers_exactly_once(sites, tid, threads, count, assume=Dnf.true(),
                        uniform_vars=frozenset(), domain=None) -> Coverage    AFF-14, AFF-18
    store_sites(body, array, ctx=None) -> list[StoreSite] | None             AFF-15
    kernel_store_coverage(kernel, array, threads, count, assume=None,
                          one_dim=True) -> Coverage                      AFF-14, AFF-15

For the epilogue's index-slice check, ``kernel_store_coverage(producer, "I", threads=tp,
count=tc)`` does it all (``tp``/``tc`` ints or expressions over the producer's scalar
parameters). Step by step: take the producer's body ``p.body``, call
``sites = store_sites(p.body, p_array)`` (subscripts in terms of ``global_thread_id``; let
variables defined from it are expanded), then ``covers_exactly_once(sites, tid=
Intrinsic("global_thread_id"), threads=<form of the producer's thread count>,
count=<form of the consumer's thread count>, assume=<what is known of them>,
uniform_vars=<scalar parameters>)``; the result is truthy when every element of
``[0, count)`` is stored exactly once, and ``.reason`` says why not otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from sarek_py.analysis.affine.conditions import (
    MAX_ALTERNATIVES,
    Conj,
    Constraint,
    Dnf,
    Mode,
    compare,
    ge0,
    tighten,
    to_dnf,
)
from sarek_py.analysis.affine.fm import bounds_of, conj_implies, dnf_is_empty, implies, is_empty
from sarek_py.analysis.affine.forms import (
    UNIFORM_INTRINSICS,
    AffineCtx,
    AffineForm,
    Atom,
    atom_key,
    atom_text,
    atoms_of,
    exact_div,
    to_affine,
)
from sarek_py.analysis.affine.paths import StoreSite, store_sites
from sarek_py.ir.nodes import Expr, Intrinsic, Kernel, Length, Ref, Var, var
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_exprs

__all__ = [
    "MAX_ALTERNATIVES", "AffineCtx", "AffineForm", "Atom", "Conj", "Constraint", "Coverage",
    "Dnf", "Mode", "StoreSite", "UNIFORM_INTRINSICS", "atom_key", "atom_text", "atoms_of", "bounds_of", "compare",
    "conj_implies", "constant_offset", "constant_offsets", "covers_exactly_once",
    "dnf_is_empty", "ge0", "implies", "is_empty", "is_injective", "is_uniform_atom",
    "kernel_store_coverage",
    "reads_within", "store_sites", "tighten", "to_affine", "to_dnf",
]



def reads_within(
    subscripts: Sequence[AffineForm], path: Dnf, indices: Sequence[Atom], domain: Dnf
) -> bool:
    """Every point of ``path`` reads, at ``subscripts``, a point of ``domain`` (AFF-11).

    ``domain`` is over the producer's ``indices`` (one per subscript) and invariants;
    ``path`` should be a *weaker* form of the read's path condition (assumption side) and
    ``domain`` an *exact* one (goal side).
    """
    if len(subscripts) != len(indices):
        return False
    goal = domain.substitute(dict(zip(indices, subscripts, strict=True)))
    return implies(path, goal)


def constant_offset(form: AffineForm, index: Atom) -> int | None:
    """``k`` when ``form`` is exactly ``index + k`` for an integer ``k`` (AFF-12)."""
    rest = form - AffineForm.of_atom(index)
    if rest.is_constant and rest.const.denominator == 1:
        return int(rest.const)
    return None


def constant_offsets(
    subscripts: Sequence[AffineForm], indices: Sequence[Atom]
) -> tuple[int, ...] | None:
    """The offset of each subscript from its index, or ``None`` (AFF-12)."""
    if len(subscripts) != len(indices):
        return None
    out: list[int] = []
    for f, i in zip(subscripts, indices, strict=True):
        k = constant_offset(f, i)
        if k is None:
            return None
        out.append(k)
    return tuple(out)


def is_uniform_atom(a: Atom, uniform_vars: frozenset[Var]) -> bool:
    """Same value in every thread of a launch: lengths, block/grid dims, the given
    variables, and opaque atoms built only from those."""
    match a:
        case Length():
            return True
        case Intrinsic(name=n, args=()):
            return n in UNIFORM_INTRINSICS
        case Ref(var=v):
            return v in uniform_vars
    return all(is_uniform_atom(x, uniform_vars) for x in iter_exprs(a)
               if isinstance(x, (Ref, Length)) or (isinstance(x, Intrinsic) and not x.args))


def _fresh_copy(tid: Atom) -> Atom:
    return Ref(var("$t", Scalar.I64))


def _uniform_except(
    forms: Sequence[AffineForm], guards: Sequence[Dnf], tid: Atom, uniform_vars: frozenset[Var]
) -> bool:
    atoms = atoms_of(forms)
    for g in guards:
        for alt in g.alts:
            atoms |= atoms_of(c.form for c in alt)
    return all(a == tid or is_uniform_atom(a, uniform_vars) for a in atoms)


def _eq_conj(a: AffineForm, b: AffineForm) -> list[Constraint | bool]:
    return [ge0(a - b), ge0(b - a)]


def is_injective(
    index: Sequence[AffineForm],
    tid: Atom,
    guard: Dnf | None = None,
    uniform_vars: frozenset[Var] = frozenset(),
) -> bool:
    """Two threads with different ``tid`` satisfying ``guard`` never store the same index
    tuple (AFF-13). Other atoms must be uniform (:func:`is_uniform_atom`)."""
    guard = guard if guard is not None else Dnf.true()
    if not _uniform_except(index, [guard], tid, uniform_vars):
        return False
    if any(f.coeff(tid) != 0 for f in index):
        return True  # c·tid + (uniform), c ≠ 0: equal indices force equal tids
    t1, t2 = tid, _fresh_copy(tid)
    sub = {tid: AffineForm.of_atom(t2)}
    g2 = guard.substitute(sub)
    eqs: list[Constraint | bool] = []
    for f in index:
        eqs += _eq_conj(f, f.substitute(sub))
    order = Dnf.of(ge0(AffineForm.of_atom(t2) - AffineForm.of_atom(t1) - 1), *eqs)
    both = guard.and_(g2)
    system = None if both is None else both.and_(order)
    return system is not None and dnf_is_empty(system)


@attrs.frozen
class Coverage:
    """The answer of :func:`covers_exactly_once`: truthy when proved; ``reason`` otherwise."""

    proved: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.proved


#: most residues the coverage proof splits the elements into (the lcm of the stores'
#: thread-id coefficients, AFF-14)
MAX_RESIDUES = 8


def covers_exactly_once(
    sites: Sequence[StoreSite],
    tid: Atom,
    threads: AffineForm,
    count: AffineForm,
    assume: Dnf | None = None,
    uniform_vars: frozenset[Var] = frozenset(),
    domain: tuple[Atom, Dnf] | None = None,
) -> Coverage:
    """Do threads ``0 <= tid < threads`` store every element of ``[0, count)`` exactly once
    (AFF-14)?

    Each site stores at its (one-dimensional) ``index`` when its exact ``guard`` holds, once
    per thread. ``assume`` holds what is known of the uniform atoms (e.g. ``count <=
    threads``). ``domain = (x, D)`` restricts the elements that must be stored exactly
    once to those of ``[0, count)`` where the condition ``D`` over the atom ``x`` (and
    uniform atoms) holds (AFF-18); elements outside it may be stored any number of times.
    """
    assume = assume if assume is not None else Dnf.true()
    tf = AffineForm.of_atom(tid)
    in_threads = Dnf.of(ge0(tf), ge0(threads - tf - 1))
    forms: list[AffineForm] = [threads, count]
    for s in sites:
        if len(s.index) != 1:
            return Coverage(False, "a store with more than one subscript")
        forms.append(s.index[0])
    guards = [assume, *(s.guard for s in sites)]
    if domain is not None:
        elem, dcond = domain
        if any(a == tid for alt in dcond.alts for c in alt for a in c.form.atoms):
            return Coverage(False, "the consumer's domain depends on the thread id")
        # the element atom stands for any element: not a per-thread value
        guards.append(dcond.substitute({elem: AffineForm.constant(0)}))

    def within(f: AffineForm) -> Dnf:
        if domain is None:
            return Dnf.true()
        return domain[1].substitute({domain[0]: f})

    if not _uniform_except(forms, guards, tid, uniform_vars):
        return Coverage(False, "an index or guard depends on a per-thread value other than "
                        f"{atom_text(tid)}")
    # coverage: 0 <= x < count  =>  some site stores x. With L the lcm of the sites'
    # thread-id coefficients (at most MAX_RESIDUES), x = L*y + r for each residue r: a
    # site c*tid + k stores x exactly when tid = y*(L/c) + (r - k)/c, an integer form when
    # c divides every coefficient of r - k; such a site's guard at that tid is its image
    L = 1
    for s in sites:
        c = s.index[0].coeff(tid)
        if c != 0 and c.denominator == 1:
            L = math.lcm(L, abs(int(c)))
    if L > MAX_RESIDUES:
        return Coverage(False, f"the stores' thread-id coefficients need {L} residues "
                        f"(at most {MAX_RESIDUES} are tried)")
    y = Ref(var("$y", Scalar.I64))
    yf = AffineForm.of_atom(y)
    for r in range(L):
        xf = yf.scale(L) + r
        images = Dnf.false()
        for s in sites:
            f = s.index[0]
            c = f.coeff(tid)
            if c == 0 or c.denominator != 1:
                continue
            rest = exact_div(AffineForm.constant(r) - (f - tf.scale(c)), int(c))
            if rest is None:
                continue  # this site's elements are not (provably) all of residue r
            t_of_x = yf.scale(L // int(c)) + rest
            dom = s.guard.and_(in_threads)
            img = None if dom is None else dom.substitute({tid: t_of_x})
            images_or = None if img is None else images.or_(img)
            if images_or is None:
                return Coverage(False, "too many alternatives in the stores' guards")
            images = images_or
        target = _conj_all([Dnf.of(ge0(xf), ge0(count - xf - 1)), assume, within(xf)])
        if target is None or not implies(target, images):
            return Coverage(False, "not every element of [0, count) is proved to be stored")
    # at most once: per site (injective on [0, count)) and pairwise disjoint
    for i, s in enumerate(sites):
        f = s.index[0]
        lim = Dnf.of(ge0(f), ge0(count - f - 1))
        g = _conj_all([s.guard, in_threads, lim, assume, within(f)])
        if g is None or not is_injective([f], tid, g, uniform_vars):
            return Coverage(False, f"store {i} may write one element of [0, count) twice")
        for j in range(i + 1, len(sites)):
            if not _disjoint(s, sites[j], tid, in_threads, count, _conj_all(
                    [assume, within(f)]) or Dnf.true()):
                return Coverage(False, f"stores {i} and {j} may write the same element")
    return Coverage(True)


def _conj_all(ds: Sequence[Dnf]) -> Dnf | None:
    acc: Dnf | None = Dnf.true()
    for d in ds:
        acc = None if acc is None else acc.and_(d)
    return acc


def _disjoint(
    a: StoreSite, b: StoreSite, tid: Atom, in_threads: Dnf, count: AffineForm, assume: Dnf
) -> bool:
    t2 = _fresh_copy(tid)
    sub = {tid: AffineForm.of_atom(t2)}
    fa = a.index[0]
    fb = b.index[0].substitute(sub)
    meet = Dnf.of(*_eq_conj(fa, fb), ge0(fa), ge0(count - fa - 1))
    parts = [a.guard, in_threads, b.guard.substitute(sub), in_threads.substitute(sub),
             assume, meet]
    system = _conj_all(parts)
    return system is not None and dnf_is_empty(system)



def _form_of(x: int | Expr) -> AffineForm | None:
    return AffineForm.constant(x) if isinstance(x, int) else to_affine(x)


def kernel_store_coverage(
    kernel: Kernel,
    array: str,
    threads: int | Expr,
    count: int | Expr,
    assume: Dnf | None = None,
    one_dim: bool = True,
) -> Coverage:
    """Does ``kernel``, launched with ``threads`` threads, store every element of
    ``[0, count)`` of its parameter ``array`` exactly once (AFF-14, AFF-15)?

    ``threads`` and ``count`` are integers or expressions over the kernel's scalar
    parameters (uniform across threads). With ``one_dim`` (a 1-D launch) ``global_idx_x``
    is the same value as ``global_thread_id``.
    """
    try:
        arr = kernel.param(array)
    except KeyError:
        return Coverage(False, f"{kernel.name} has no parameter {array}")
    sites = store_sites(kernel.body, arr)
    if sites is None:
        return Coverage(False, f"a store of {array} is in a loop, follows an exit the analysis "
                        "does not model, or has a subscript or guard that is not affine")
    if not sites:
        return Coverage(False, f"{kernel.name} never stores {array}")
    tid: Atom = Intrinsic("global_thread_id")
    if one_dim:
        alias: dict[Atom, AffineForm] = {Intrinsic("global_idx_x"): AffineForm.of_atom(tid)}
        sites = [StoreSite(tuple(f.substitute(alias) for f in s.index),
                           s.guard.substitute(alias), loc=s.loc) for s in sites]
    tf, cf = _form_of(threads), _form_of(count)
    if tf is None or cf is None:
        return Coverage(False, "the thread count or the element count is not affine")
    uniform = frozenset(p for p in kernel.params if not p.is_array)
    return covers_exactly_once(sites, tid, tf, cf, assume, uniform)
