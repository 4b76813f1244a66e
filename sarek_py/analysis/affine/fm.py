"""Fourier-Motzkin elimination with integer tightening (specs/affine.md, AFF-8..AFF-10).

A system is a conjunction of :class:`Constraint` (``e >= 0``). Internally each constraint
is a row of integer coefficients, one per atom, and a constant; every row is tightened
(divided by the gcd of its coefficients, constant rounded down), which is valid because
atoms take integer values. A contradiction found this way is a proof that the system has
no integer point; the elimination never claims more (it gives up beyond ``ROW_LIMIT``).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from fractions import Fraction

from sarek_py.analysis.affine.conditions import Conj, Constraint, Dnf, ge0
from sarek_py.analysis.affine.forms import AffineForm, AtomKey, atom_key
from sarek_py.ir.nodes import Ref, var
from sarek_py.ir.types import Scalar

#: the elimination gives up (answers "not proved") when a system grows beyond this
ROW_LIMIT = 4000
#: at most this many choices of negated constraints are tried by :func:`implies`
MAX_NEGATION_CHOICES = 4096

Coeffs = tuple[int, ...]
System = dict[Coeffs, int]  # coefficient vector -> tightest constant


class _Contradiction(Exception):
    pass


class _GaveUp(Exception):
    pass


def _add(sys: System, coeffs: Coeffs, const: int) -> None:
    """Add ``coeffs·x + const >= 0`` tightened; raise on a contradiction."""
    g = 0
    for c in coeffs:
        g = math.gcd(g, c)
    if g == 0:
        if const < 0:
            raise _Contradiction
        return
    if g > 1:
        coeffs = tuple(c // g for c in coeffs)
        const = const // g  # floor: the integer tightening of AFF-5
    old = sys.get(coeffs)
    if old is not None and old <= const:
        return
    sys[coeffs] = const
    opp = sys.get(tuple(-c for c in coeffs))
    if opp is not None and opp + const < 0:
        raise _Contradiction


def _to_system(conj: Iterable[Constraint], keys: list[AtomKey]) -> System:
    index = {k: i for i, k in enumerate(keys)}
    n = len(keys)
    sys: System = {}
    for c in conj:
        row = [0] * n
        for k, v in c.row:
            row[index[k]] = v
        _add(sys, tuple(row), int(c.form.const))
    return sys


def _find_unit_equality(sys: System, live: set[int]) -> tuple[Coeffs, int, int] | None:
    for coeffs, const in sys.items():
        opp = sys.get(tuple(-c for c in coeffs))
        if opp is None or opp + const != 0:
            continue
        for v in live:
            if coeffs[v] in (1, -1):
                return coeffs, const, v
    return None


def _eliminate(sys: System, n: int, keep: frozenset[int]) -> System:
    """Project ``sys`` on the atoms of ``keep``; raise :class:`_Contradiction` when empty."""
    while True:
        live = {v for coeffs in sys for v in range(n) if coeffs[v] != 0 and v not in keep}
        if not live:
            return sys
        eq = _find_unit_equality(sys, live)
        new: System = {}
        if eq is not None:
            e, ec, v = eq
            a = e[v]  # ±1: x_v = -a * (rest + ec), exact over the integers
            opp = tuple(-c for c in e)
            for coeffs, const in sys.items():
                if coeffs == e or coeffs == opp:
                    continue
                k = coeffs[v]
                if k == 0:
                    _add(new, coeffs, const)
                else:
                    m = k * a
                    _add(new, tuple(c - m * ec_ for c, ec_ in zip(coeffs, e, strict=True)),
                         const - m * ec)
            sys = new
            continue
        best: tuple[int, int] | None = None
        for v in live:
            pos = sum(1 for coeffs in sys if coeffs[v] > 0)
            neg = sum(1 for coeffs in sys if coeffs[v] < 0)
            cost = pos * neg - pos - neg
            if best is None or cost < best[0]:
                best = (cost, v)
        assert best is not None
        v = best[1]
        pos_rows = [(c, k) for c, k in sys.items() if c[v] > 0]
        neg_rows = [(c, k) for c, k in sys.items() if c[v] < 0]
        for coeffs, const in sys.items():
            if coeffs[v] == 0:
                _add(new, coeffs, const)
        for (p, pc), (q, qc) in itertools.product(pos_rows, neg_rows):
            a, b = p[v], -q[v]
            _add(new, tuple(b * x + a * y for x, y in zip(p, q, strict=True)), b * pc + a * qc)
            if len(new) > ROW_LIMIT:
                raise _GaveUp
        sys = new


def _keys(conj: Iterable[Constraint]) -> list[AtomKey]:
    seen: set[AtomKey] = set()
    for c in conj:
        seen.update(k for k, _ in c.row)
    return sorted(seen)


@functools.lru_cache(maxsize=1 << 16)
def is_empty(conj: Conj) -> bool:
    """``True`` when the conjunction has no integer point, proved by elimination (AFF-8)."""
    keys = _keys(conj)
    try:
        _eliminate(_to_system(conj, keys), len(keys), frozenset())
    except _Contradiction:
        return True
    except _GaveUp:
        return False
    return False


def dnf_is_empty(d: Dnf) -> bool:
    """Every alternative of ``d`` is empty."""
    return all(is_empty(alt) for alt in d.alts)


def conj_implies(alt: Conj, c: Constraint) -> bool:
    """``alt ⇒ c``: ``alt ∧ ¬c`` is empty."""
    return c in alt or is_empty(alt | {c.negate()})


def implies(a: Dnf, b: Dnf) -> bool:
    """``A ⇒ B`` over the integers, proved (AFF-9). ``False`` means "not proved"."""
    if b.is_true:
        return True
    for alt in a.alts:
        if is_empty(alt):
            continue
        if any(all(conj_implies(alt, c) for c in balt) for balt in b.alts):
            continue
        if not _implies_by_cases(alt, b):
            return False
    return True


def _implies_by_cases(alt: Conj, b: Dnf) -> bool:
    choices = 1
    for balt in b.alts:
        choices *= max(len(balt), 1)
    if choices > MAX_NEGATION_CHOICES or b.is_false:
        return False
    negs = [[c.negate() for c in balt] for balt in b.alts]
    return all(is_empty(alt | frozenset(pick)) for pick in itertools.product(*negs))


def bounds_of(form: AffineForm, assume: Dnf | None = None) -> tuple[int | None, int | None]:
    """Integers ``lo``, ``hi`` with ``assume ⇒ lo <= form <= hi`` (``None``: not found) (AFF-10).

    With an empty ``assume`` there is nothing to bound and ``(None, None)`` is returned.
    """
    if form.is_constant:
        if form.const.denominator != 1:
            return (math.ceil(form.const), math.floor(form.const))
        return (int(form.const), int(form.const))
    assume = assume if assume is not None else Dnf.true()
    t = Ref(var("$bound", Scalar.I64))
    tf = AffineForm.of_atom(t)
    los: list[int | None] = []
    his: list[int | None] = []
    for alt in assume.alts:
        full = set(alt)
        for c in (ge0(tf - form), ge0(form - tf)):
            assert isinstance(c, Constraint)
            full.add(c)
        keys = _keys(full)
        ti = keys.index(atom_key(t))
        try:
            sys = _eliminate(_to_system(full, keys), len(keys), frozenset({ti}))
        except _Contradiction:
            continue
        except _GaveUp:
            return (None, None)
        lo: int | None = None
        hi: int | None = None
        for coeffs, const in sys.items():
            k = coeffs[ti]
            if k > 0:
                b = math.ceil(Fraction(-const, k))
                lo = b if lo is None else max(lo, b)
            elif k < 0:
                b = math.floor(Fraction(const, -k))
                hi = b if hi is None else min(hi, b)
        los.append(lo)
        his.append(hi)
    if not los:
        return (None, None)
    lo_all = None if any(x is None for x in los) else min(x for x in los if x is not None)
    hi_all = None if any(x is None for x in his) else max(x for x in his if x is not None)
    return (lo_all, hi_all)

