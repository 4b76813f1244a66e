"""Affine forms over atoms and the conversion of integer expressions (specs/affine.md).

An *atom* (AFF-1) is an IR expression whose integer value does not change in the region
being analysed: a thread intrinsic, ``length(a, d)``, an allowed variable (``Ref``), or an
opaque invariant expression. An :class:`AffineForm` is ``const + Σ coeff·atom`` in a normal
form (AFF-2), so equal forms compare and hash equal. :func:`to_affine` converts an integer
expression exactly or gives ``None`` (AFF-3, AFF-4): the analysis never approximates.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from fractions import Fraction

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Ref,
    Unary,
    UnaryOp,
    Var,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar

Atom = Expr
"""An atom is an IR expression (``Ref``, ``Intrinsic``, ``Length`` or an opaque one)."""

Coeff = int | Fraction
"""An exact coefficient: an ``int`` when integral (fast), else a ``Fraction``."""


AtomKey = tuple[int, int, str]


def atom_key(a: Atom) -> AtomKey:
    """A total order on atoms: variables by id, then intrinsics, lengths, opaque ones."""
    match a:
        case Ref(var=v):
            return (0, v.id, "")
        case Intrinsic(name=n, args=()):
            return (1, 0, n)
        case Length(array=v, dim=d):
            return (2, v.id, str(d))
    return (3, 0, repr(a))


def atom_text(a: Atom) -> str:
    """A short readable name for an atom (variables by name, others printed)."""
    match a:
        case Ref(var=v):
            return v.name
        case Intrinsic(name=n, args=()):
            return n
        case Length(array=v, dim=d):
            return f"length({v.name}, {d})"
    try:
        printer = importlib.import_module("sarek_py.ir.printer")
    except ImportError:  # the printer is written separately; a plain name will do
        return f"<{type(a).__name__}>"
    return f"({printer.print_expr(a)})"


def _coeff(x: int | Fraction) -> Coeff:
    """The normal representation of a coefficient: integral values as ``int``."""
    if type(x) is int:  # the common case, without Fraction's (ABC) isinstance check
        return x
    if isinstance(x, Fraction) and x.denominator == 1:
        return x.numerator
    return x


@attrs.frozen(cache_hash=True)
class AffineForm:
    """``const + Σ c·atom`` with terms sorted by :func:`atom_key` and no zero coefficient.

    Build forms with :meth:`make`, :meth:`constant`, :meth:`of_atom` and the arithmetic
    operators; the constructor expects terms already in normal form.
    """

    terms: tuple[tuple[Atom, Coeff], ...] = ()
    const: Coeff = 0

    # -------------------------------------------------------------- construction
    @staticmethod
    def make(coeffs: Mapping[Atom, int | Fraction], const: int | Fraction = 0) -> AffineForm:
        """The normal form of ``const + Σ coeffs[a]·a``."""
        items = [(a, _coeff(c)) for a, c in coeffs.items() if c != 0]
        items.sort(key=lambda t: atom_key(t[0]))
        return AffineForm(tuple(items), _coeff(const))

    @staticmethod
    def constant(c: int | Fraction) -> AffineForm:
        return AffineForm((), _coeff(c))

    @staticmethod
    def of_atom(a: Atom) -> AffineForm:
        return AffineForm(((a, 1),), 0)

    # ---------------------------------------------------------------- inspection
    @property
    def coeffs(self) -> dict[Atom, Coeff]:
        return dict(self.terms)

    @property
    def atoms(self) -> tuple[Atom, ...]:
        return tuple(a for a, _ in self.terms)

    @property
    def is_constant(self) -> bool:
        return not self.terms

    @property
    def is_integral(self) -> bool:
        """Every coefficient and the constant are integers."""
        return self.const.denominator == 1 and all(c.denominator == 1 for _, c in self.terms)

    def coeff(self, a: Atom) -> Coeff:
        for b, c in self.terms:
            if b == a:
                return c
        return 0

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, other: AffineForm | int) -> AffineForm:
        if not isinstance(other, AffineForm):
            return AffineForm(self.terms, _coeff(self.const + other))
        acc = dict(self.terms)
        for a, c in other.terms:
            acc[a] = acc.get(a, 0) + c
        return AffineForm.make(acc, self.const + other.const)

    def __radd__(self, other: int) -> AffineForm:
        return self + other

    def __rsub__(self, other: int) -> AffineForm:
        return (-self) + other

    def __neg__(self) -> AffineForm:
        return AffineForm(tuple((a, -c) for a, c in self.terms), -self.const)

    def __sub__(self, other: AffineForm | int) -> AffineForm:
        if not isinstance(other, AffineForm):
            return AffineForm(self.terms, _coeff(self.const - other))
        return self + (-other)

    def scale(self, k: int | Fraction) -> AffineForm:
        if k == 0:
            return AffineForm()
        return AffineForm(tuple((a, _coeff(c * k)) for a, c in self.terms),
                          _coeff(self.const * k))

    def substitute(self, mapping: Mapping[Atom, AffineForm]) -> AffineForm:
        """Replace atoms by forms, all at once (simultaneous substitution)."""
        if not mapping or not any(a in mapping for a, _ in self.terms):
            return self
        out = AffineForm.constant(self.const)
        for a, c in self.terms:
            out = out + (mapping[a] if a in mapping else AffineForm.of_atom(a)).scale(c)
        return out

    def evaluate(self, env: Mapping[Atom, int]) -> Fraction:
        """The value of the form when each atom has the value ``env`` gives it."""
        return Fraction(self.const) + sum((c * env[a] for a, c in self.terms), Fraction(0))

    def __str__(self) -> str:
        parts: list[str] = []
        for a, c in self.terms:
            name = atom_text(a)
            if c == 1:
                parts.append(f"+ {name}")
            elif c == -1:
                parts.append(f"- {name}")
            elif c < 0:
                parts.append(f"- {-c}*{name}")
            else:
                parts.append(f"+ {c}*{name}")
        if self.const != 0 or not parts:
            parts.append(f"- {-self.const}" if self.const < 0 else f"+ {self.const}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


# ------------------------------------------------------------------------ conversion


@attrs.frozen
class AffineCtx:
    """What the conversion may treat as an atom (AFF-1).

    ``indices``: loop indices (atoms although they vary between iterations).
    ``variant``: variables assigned in the region (never atoms, never expanded).
    ``invariant``: mutable variables known not to be assigned in the region (atoms).
    ``defs``: immutable variables with their defining expression, expanded when that
    expression is itself affine (otherwise the variable is an atom).
    """

    indices: frozenset[Var] = frozenset()
    variant: frozenset[Var] = frozenset()
    invariant: frozenset[Var] = frozenset()
    defs: Mapping[Var, Expr] = attrs.field(factory=dict)

    def with_def(self, v: Var, value: Expr) -> AffineCtx:
        d = dict(self.defs)
        d[v] = value
        return attrs.evolve(self, defs=d)

    def with_index(self, v: Var) -> AffineCtx:
        return attrs.evolve(self, indices=self.indices | {v})

    def var_is_atom(self, v: Var) -> bool:
        if v.is_array or not v.scalar.is_int:
            return False
        if v in self.indices:
            return True
        if v in self.variant:
            return False
        return not v.mutable or v in self.invariant


def _is_int(e: Expr) -> bool:
    t = type_of(e)
    return isinstance(t, Scalar) and t.is_int


#: thread intrinsics with one value for the whole launch (the others vary per thread)
UNIFORM_INTRINSICS = frozenset(
    n for n in THREAD_INTRINSICS if n.startswith(("block_dim_", "grid_dim_"))
)


def _opaque_ok(e: Expr, ctx: AffineCtx, depth: int = 0) -> bool:
    """May ``e`` be (part of) an opaque atom (AFF-1)? It must be independent of what the
    analysis quantifies over: no loop index, no per-thread intrinsic, no variant variable,
    no let variable defined from those; and no read or call (memory may change)."""
    if depth > 64:
        return False
    d = depth + 1
    match e:
        case Const(type=t):
            return t is not Scalar.UNIT
        case Ref(var=v):
            if v.is_array or v in ctx.indices or v in ctx.variant:
                return False
            if v.mutable:
                return v in ctx.invariant
            return v not in ctx.defs or _opaque_ok(ctx.defs[v], ctx, d)
        case Length():
            return True
        case Intrinsic(name=n, args=()):
            return n in UNIFORM_INTRINSICS or n not in THREAD_INTRINSICS
        case Intrinsic(args=args):
            return all(_opaque_ok(a, ctx, d) for a in args)
        case Unary(arg=a) | Cast(arg=a):
            return _opaque_ok(a, ctx, d)
        case Binary(lhs=lhs, rhs=rhs):
            return _opaque_ok(lhs, ctx, d) and _opaque_ok(rhs, ctx, d)
        case Cond(cond=c, if_true=t, if_false=f):
            return _opaque_ok(c, ctx, d) and _opaque_ok(t, ctx, d) and _opaque_ok(f, ctx, d)
    return False


def _c_div(x: int, y: int) -> tuple[int, int]:
    """C's truncating quotient and remainder."""
    q = abs(x) // abs(y)
    if (x < 0) != (y < 0):
        q = -q
    return q, x - q * y


def exact_div(f: AffineForm, k: int) -> AffineForm | None:
    if not f.is_integral:
        return None
    if f.const % k != 0 or any(c % k != 0 for _, c in f.terms):
        return None
    return f.scale(Fraction(1, k))


def _const_int(f: AffineForm | None) -> int | None:
    if f is None or not f.is_constant or f.const.denominator != 1:
        return None
    return int(f.const)


def to_affine(e: Expr, ctx: AffineCtx | None = None) -> AffineForm | None:
    """The affine form of the integer expression ``e``, or ``None`` (AFF-3)."""
    return _to_affine(e, ctx or AffineCtx(), 0)


def _to_affine(e: Expr, ctx: AffineCtx, depth: int) -> AffineForm | None:
    if depth > 64 or not _is_int(e):
        return None
    form = _structural(e, ctx, depth)
    if form is not None:
        return form
    if not isinstance(e, (Const, Ref)) and _opaque_ok(e, ctx):
        return _product_atom(e)
    return None


def _product_atom(e: Expr) -> AffineForm:
    """An opaque atom; a product is one atom up to the order and grouping of its factors,
    its integer literal factors taken out as the coefficient (AFF-20): `1 * hA * wB`,
    `wB * hA` and `hA * wB` are one atom, `2 * n * m` twice it. Exact on the device too:
    multiplication in one integer type, wrapping or not, is commutative and associative
    modulo 2^bits."""
    t = type_of(e)
    factors: list[Expr] = []
    coeff = 1

    def flat(x: Expr) -> None:
        nonlocal coeff
        if isinstance(x, Binary) and x.op is BinaryOp.MUL and type_of(x) == t:
            flat(x.lhs)
            flat(x.rhs)
        elif isinstance(x, Const) and isinstance(x.value, int) \
                and not isinstance(x.value, bool):
            coeff *= x.value
        else:
            factors.append(x)

    flat(e)
    if len(factors) < 2 or coeff == 0:
        return AffineForm.of_atom(e)
    factors.sort(key=lambda f: (atom_key(f)[:2], atom_text(f)))
    prod = factors[0]
    for f in factors[1:]:
        prod = Binary(BinaryOp.MUL, prod, f)
    return AffineForm.of_atom(prod).scale(coeff)


def _structural(e: Expr, ctx: AffineCtx, depth: int) -> AffineForm | None:
    d = depth + 1
    match e:
        case Const(value=v):
            if isinstance(v, bool) or not isinstance(v, int):
                return None
            return AffineForm.constant(v)
        case Ref(var=v):
            if v in ctx.defs and v not in ctx.variant and not v.mutable:
                f = _to_affine(ctx.defs[v], ctx, d)
                if f is not None:
                    return f
                # an inexpressible definition: an atom only if independent of the indices
                if not _opaque_ok(ctx.defs[v], ctx, d):
                    return None
            return AffineForm.of_atom(e) if ctx.var_is_atom(v) else None
        case Intrinsic(name=n, args=()) if n in THREAD_INTRINSICS:
            return AffineForm.of_atom(e)
        case Length():
            return AffineForm.of_atom(e)
        case Unary(op=UnaryOp.NEG, arg=a):
            f = _to_affine(a, ctx, d)
            return None if f is None else -f
        case Cast(to=to, arg=a):
            src = type_of(a)
            if not isinstance(src, Scalar) or not src.is_int:
                return None
            if to is src or (to is Scalar.I64 and src is Scalar.I32):
                return _to_affine(a, ctx, d)
            return None
        case Binary(op=op, lhs=lhs, rhs=rhs):
            return _binary(op, lhs, rhs, ctx, d)
    return None


def _binary(op: BinaryOp, lhs: Expr, rhs: Expr, ctx: AffineCtx, d: int) -> AffineForm | None:
    if op in (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL):
        fl = _to_affine(lhs, ctx, d)
        fr = _to_affine(rhs, ctx, d)
        if fl is None or fr is None:
            return None
        if op is BinaryOp.ADD:
            return fl + fr
        if op is BinaryOp.SUB:
            return fl - fr
        if fl.is_constant:
            return fr.scale(fl.const)
        if fr.is_constant:
            return fl.scale(fr.const)
        return None
    if op is BinaryOp.SHL:
        k = _const_int(_to_affine(rhs, ctx, d))
        fl = _to_affine(lhs, ctx, d)
        if k is None or fl is None or not 0 <= k < 31:
            return None
        return fl.scale(1 << k)
    if op in (BinaryOp.DIV, BinaryOp.MOD):
        k = _const_int(_to_affine(rhs, ctx, d))
        fl = _to_affine(lhs, ctx, d)
        if not k or fl is None:
            return None
        x = _const_int(fl)
        if x is not None:  # both constant: C's truncating division
            return AffineForm.constant(_c_div(x, k)[0 if op is BinaryOp.DIV else 1])
        return exact_div(fl, k) if op is BinaryOp.DIV else None
    return None


def atoms_of(forms: Iterable[AffineForm]) -> set[Atom]:
    """Every atom appearing in ``forms``."""
    out: set[Atom] = set()
    for f in forms:
        out.update(f.atoms)
    return out
