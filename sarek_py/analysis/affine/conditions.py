"""Constraints ``e >= 0`` and conditions in disjunctive normal form (specs/affine.md).

A :class:`Constraint` is kept tightened over the integers (AFF-5). A :class:`Dnf` is a
set of alternatives, each a set of constraints (AFF-6). :func:`to_dnf` converts a boolean
IR expression; the :class:`Mode` says what to do with what cannot be expressed (AFF-7).
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Mapping

import attrs

from sarek_py.analysis.affine.forms import (
    AffineCtx,
    AffineForm,
    Atom,
    AtomKey,
    atom_key,
    to_affine,
)
from sarek_py.ir.nodes import Binary, BinaryOp, Cond, Const, Expr, Ref, Unary, UnaryOp
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar

#: a DNF with more alternatives than this is not expressible (AFF-7)
MAX_ALTERNATIVES = 64


@attrs.frozen(cache_hash=True)
class Constraint:
    """``form >= 0`` with integer, gcd-reduced atom coefficients (AFF-5).

    Build it with :func:`ge0` (which also recognises constant truths); the constructor
    expects an already tightened form with at least one atom.
    """

    form: AffineForm
    #: the form as (atom key, integer coefficient) pairs, for the elimination (derived)
    row: tuple[tuple[AtomKey, int], ...] = attrs.field(
        init=False, eq=False, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "row", tuple((atom_key(a), int(c)) for a, c in self.form.terms))

    def negate(self) -> Constraint:
        """``form < 0``, i.e. ``-form - 1 >= 0`` over the integers."""
        c = ge0(-self.form - 1)
        assert isinstance(c, Constraint)
        return c

    def substitute(self, mapping: Mapping[Atom, AffineForm]) -> Constraint | bool:
        return ge0(self.form.substitute(mapping))

    def __str__(self) -> str:
        return f"{self.form} >= 0"


def tighten(form: AffineForm) -> AffineForm:
    """Integer coefficients divided by their gcd, the constant rounded down (AFF-5)."""
    if not form.terms:
        return form
    den = 1
    for _, c in form.terms:
        den = math.lcm(den, c.denominator)
    den = math.lcm(den, form.const.denominator)
    ints = [(a, int(c * den)) for a, c in form.terms]
    g = 0
    for _, k in ints:
        g = math.gcd(g, k)
    const = int(form.const * den)  # integral: den is a multiple of its denominator
    return AffineForm(tuple((a, k // g) for a, k in ints), const // g)


def ge0(form: AffineForm) -> Constraint | bool:
    """The constraint ``form >= 0``, or its truth value when it has no atom."""
    if form.is_constant:
        return form.const >= 0
    return Constraint(tighten(form))


Conj = frozenset[Constraint]


def _contradictory(a: Constraint, b: Constraint) -> bool:
    """``a`` and ``b`` have opposite coefficients and no integer in between."""
    s = a.form + b.form
    return s.is_constant and s.const < 0


@attrs.frozen(cache_hash=True)
class Dnf:
    """A disjunction of conjunctions of constraints. ``Dnf.true()`` has one empty
    alternative, ``Dnf.false()`` none."""

    alts: frozenset[Conj]

    @staticmethod
    def true() -> Dnf:
        return _TRUE

    @staticmethod
    def false() -> Dnf:
        return _FALSE

    @staticmethod
    def of(*constraints: Constraint | bool) -> Dnf:
        """The conjunction of ``constraints`` (booleans allowed)."""
        alt: set[Constraint] = set()
        for c in constraints:
            if c is False:
                return _FALSE
            if isinstance(c, Constraint):
                alt.add(c)
        return Dnf._from_alts([frozenset(alt)])

    @staticmethod
    def _from_alts(alts: Iterable[Conj]) -> Dnf:
        kept: set[Conj] = set()
        for alt in alts:
            if not _alt_contradictory(alt):
                kept.add(alt)
        if frozenset() in kept:
            return _TRUE
        return Dnf(frozenset(kept))

    @property
    def is_true(self) -> bool:
        return frozenset() in self.alts

    @property
    def is_false(self) -> bool:
        return not self.alts

    def sorted_alts(self) -> list[list[Constraint]]:
        """The alternatives in a deterministic order (for printing)."""
        out = [sorted(a, key=str) for a in self.alts]
        out.sort(key=lambda cs: [str(c) for c in cs])
        return out

    def or_(self, other: Dnf) -> Dnf | None:
        if self.is_true or other.is_true:
            return _TRUE
        alts = self.alts | other.alts
        return None if len(alts) > MAX_ALTERNATIVES else Dnf(alts)

    def and_(self, other: Dnf) -> Dnf | None:
        if self.is_true:
            return other
        if other.is_true:
            return self
        if len(self.alts) * len(other.alts) > MAX_ALTERNATIVES * 64:
            return None
        out = Dnf._from_alts(a | b for a, b in itertools.product(self.alts, other.alts))
        return None if len(out.alts) > MAX_ALTERNATIVES else out

    def negate(self) -> Dnf | None:
        acc: Dnf | None = _TRUE
        for alt in self.alts:
            neg = Dnf._from_alts(frozenset({c.negate()}) for c in alt)
            acc = None if acc is None else acc.and_(neg)
            if acc is None:
                return None
        return acc

    def substitute(self, mapping: Mapping[Atom, AffineForm]) -> Dnf:
        alts: list[Conj] = []
        for alt in self.alts:
            new: set[Constraint] = set()
            ok = True
            for c in alt:
                r = c.substitute(mapping)
                if r is False:
                    ok = False
                    break
                if isinstance(r, Constraint):
                    new.add(r)
            if ok:
                alts.append(frozenset(new))
        return Dnf._from_alts(alts)

    def __str__(self) -> str:
        if self.is_true:
            return "true"
        if self.is_false:
            return "false"
        return " || ".join(
            "(" + " && ".join(str(c) for c in alt) + ")" for alt in self.sorted_alts()
        )


def _alt_contradictory(alt: Conj) -> bool:
    if len(alt) < 2:
        return False
    by_atoms: dict[tuple[Atom, ...], list[Constraint]] = {}
    for c in alt:
        by_atoms.setdefault(c.form.atoms, []).append(c)
    return any(
        _contradictory(a, b)
        for cs in by_atoms.values() if len(cs) > 1
        for a, b in itertools.combinations(cs, 2)
    )


_TRUE = Dnf(frozenset({frozenset()}))
_FALSE = Dnf(frozenset())


# ------------------------------------------------------------------------ conversion


class Mode(enum.Enum):
    """What an inexpressible part of a condition becomes (AFF-7)."""

    EXACT = "exact"  # the whole condition is None
    WEAKER = "weaker"  # true: the result is implied by the condition (assumptions)
    STRONGER = "stronger"  # false: the result implies the condition (goals)

    def flipped(self) -> Mode:
        if self is Mode.WEAKER:
            return Mode.STRONGER
        if self is Mode.STRONGER:
            return Mode.WEAKER
        return self


def compare(op: BinaryOp, lhs: AffineForm, rhs: AffineForm) -> Dnf:
    """The DNF of ``lhs op rhs`` over the integers (AFF-6)."""
    d = rhs - lhs
    match op:
        case BinaryOp.LT:
            return Dnf.of(ge0(d - 1))
        case BinaryOp.LE:
            return Dnf.of(ge0(d))
        case BinaryOp.GT:
            return Dnf.of(ge0(-d - 1))
        case BinaryOp.GE:
            return Dnf.of(ge0(-d))
        case BinaryOp.EQ:
            return Dnf.of(ge0(d), ge0(-d))
        case BinaryOp.NE:
            r = Dnf.of(ge0(d - 1)).or_(Dnf.of(ge0(-d - 1)))
            assert r is not None
            return r
    raise ValueError(f"not a comparison: {op}")


_NEGATED = {
    BinaryOp.LT: BinaryOp.GE, BinaryOp.LE: BinaryOp.GT, BinaryOp.GT: BinaryOp.LE,
    BinaryOp.GE: BinaryOp.LT, BinaryOp.EQ: BinaryOp.NE, BinaryOp.NE: BinaryOp.EQ,
}


def to_dnf(cond: Expr, ctx: AffineCtx | None = None, mode: Mode = Mode.EXACT) -> Dnf | None:
    """The DNF of the boolean expression ``cond`` (AFF-6, AFF-7).

    ``None`` only in :attr:`Mode.EXACT`, when some part is not expressible.
    """
    return _dnf_impl(cond, ctx or AffineCtx(), False, mode, 0)


def _unknown(mode: Mode) -> Dnf | None:
    if mode is Mode.WEAKER:
        return _TRUE
    if mode is Mode.STRONGER:
        return _FALSE
    return None


def _checked(r: Dnf | None, mode: Mode) -> Dnf | None:
    return _unknown(mode) if r is None else r


def _dnf_impl(e: Expr, ctx: AffineCtx, neg: bool, mode: Mode, depth: int) -> Dnf | None:
    if depth > 64:
        return _unknown(mode)
    d = depth + 1
    match e:
        case Const(value=v) if isinstance(v, bool):
            return _TRUE if v != neg else _FALSE
        case Unary(op=UnaryOp.NOT, arg=a):
            return _dnf_impl(a, ctx, not neg, mode, d)
        case Ref(var=v) if v in ctx.defs and not v.mutable and v not in ctx.variant:
            return _dnf_impl(ctx.defs[v], ctx, neg, mode, d)
        case Binary(op=op, lhs=lhs, rhs=rhs) if op.is_logical:
            da = _dnf_impl(lhs, ctx, neg, mode, d)
            db = _dnf_impl(rhs, ctx, neg, mode, d)
            if da is None or db is None:
                return None
            conj = (op is BinaryOp.AND) != neg
            return _checked(da.and_(db) if conj else da.or_(db), mode)
        case Binary(op=op, lhs=lhs, rhs=rhs) if op.is_compare:
            t = type_of(lhs)
            if not (isinstance(t, Scalar) and t.is_int):
                return _unknown(mode)
            fl = to_affine(lhs, ctx)
            fr = to_affine(rhs, ctx)
            if fl is None or fr is None:
                return _unknown(mode)
            return compare(_NEGATED[op] if neg else op, fl, fr)
        case Cond(cond=c, if_true=t, if_false=f) if type_of(t) is Scalar.BOOL:
            # (c && t) || (!c && f), negated: (c && !t) || (!c && !f)
            pc = _dnf_impl(c, ctx, False, Mode.EXACT, d)
            nc = _dnf_impl(c, ctx, True, Mode.EXACT, d)
            if pc is None or nc is None:
                return _unknown(mode)
            tt = _dnf_impl(t, ctx, neg, mode, d)
            ff = _dnf_impl(f, ctx, neg, mode, d)
            if tt is None or ff is None:
                return None
            left = pc.and_(tt)
            right = nc.and_(ff)
            if left is None or right is None:
                return _unknown(mode)
            return _checked(left.or_(right), mode)
    return _unknown(mode)

