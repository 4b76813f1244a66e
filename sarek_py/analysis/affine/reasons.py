"""Why an integer expression or a condition is not known to an analysis (LEG-17, LF-19).

The analyses (the affine forms of :mod:`sarek_py.analysis.affine.forms`, the conditions of
:mod:`sarek_py.analysis.affine.conditions`, the launch-level analysis of
:mod:`sarek_py.fusion.epilogue.legality`) answer "not expressible" with ``None``. A refusal must
say *why*, in the user's words: :func:`cause` walks down from the expression to the
smallest part the analysis does not know whose own parts it does know, and says what that
part is (a read of memory, a mutable variable, a product of two varying values, a
comparison of floats, too many alternatives …), with its location.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from sarek_py.analysis.affine.conditions import MAX_ALTERNATIVES, Mode, to_dnf
from sarek_py.analysis.affine.forms import AffineCtx, to_affine
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Loc,
    Read,
    Ref,
    Var,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import children, iter_nodes


@attrs.frozen
class Cause:
    """The part of an expression an analysis does not know, and why (one phrase)."""

    expr: Expr
    text: str
    loc: Loc | None = None
    #: what kind of cause: ``"data"`` (reads memory, calls), ``"mutable"``, ``"overflow"``,
    #: ``"alternatives"``, ``"float"``, ``"form"`` (an operation outside the class)
    kind: str = "form"

    @property
    def data_dependent(self) -> bool:
        return self.kind in ("data", "mutable")


def quote(e: Expr) -> str:
    """An expression as the user would write it, in backquotes."""
    return f"`{print_expr(e)}`"


def _kind_of(e: Expr) -> str:
    t = type_of(e)
    if t is Scalar.BOOL:
        return "bool"
    return "int" if isinstance(t, Scalar) and t.is_int else "other"


def _data_part(e: Expr) -> Expr | None:
    """The first read, call or mutable variable inside ``e``."""
    for n in iter_nodes(e):
        if isinstance(n, (Read, Call)):
            return n
        if isinstance(n, Ref) and n.var.mutable and not n.var.is_array:
            return n
    return None


def describe(e: Expr, defs: Mapping[Var, Expr] | None = None) -> Cause:
    """Why ``e`` itself (its parts being known) is outside the affine class."""
    loc = e.loc
    match e:
        case Read(array=a):
            return Cause(e, f"{quote(e)} reads array {a.name}, so it depends on the data",
                         loc, "data")
        case Call(func=f):
            return Cause(e, f"{quote(e)} calls {f}, whose result may depend on the data",
                         loc, "data")
        case Ref(var=v) if v.mutable:
            return Cause(e, f"{v.name} is a mutable variable (`let mut`), whose value may "
                         "change", loc, "mutable")
        case Ref(var=v):
            return Cause(e, f"{v.name} has no value known to the analysis", loc)
        case Intrinsic(name=n):
            return Cause(e, f"{quote(e)} ({n}) is not known to the analysis", loc)
        case Length(array=v):
            return Cause(e, f"the length of {v.name} is not known to the analysis", loc)
        case Binary(op=BinaryOp.MUL):
            return Cause(e, f"{quote(e)} multiplies two values that vary", loc)
        case Binary(op=BinaryOp.DIV):
            return Cause(e, f"{quote(e)} divides a varying value (not exactly)", loc)
        case Binary(op=BinaryOp.MOD):
            return Cause(e, f"{quote(e)} takes the remainder of a varying value", loc)
        case Binary(op=BinaryOp.SHL):
            return Cause(e, f"{quote(e)} shifts by an amount that is not a known small "
                         "constant", loc)
        case Binary(op=op) if op.is_compare and _kind_of(e.lhs) == "other":
            inner = _data_part(e)
            if inner is not None:
                return describe(inner, defs)
            return Cause(e, f"{quote(e)} compares floating-point values", loc, "float")
        case Binary(op=op) if op.is_logical:
            return Cause(e, f"{quote(e)} has more than {MAX_ALTERNATIVES} alternatives "
                         "(as a disjunction of conjunctions of affine constraints)", loc,
                         "alternatives")
        case Binary(op=op):
            return Cause(e, f"{quote(e)} uses operator {op.value}, outside the affine "
                         "class", loc)
        case Cast(to=t, arg=a):
            src = type_of(a)
            if isinstance(src, Scalar) and not src.is_int:
                return Cause(e, f"{quote(e)} converts a {src} value to an integer", loc)
            return Cause(e, f"{quote(e)} narrows to {t} (it may wrap)", loc)
        case Cond():
            return Cause(e, f"{quote(e)} is a conditional expression", loc)
        case Const(type=t) if not t.is_int:
            return Cause(e, f"{quote(e)} is not an integer", loc)
    inner = _data_part(e)
    if inner is not None and inner is not e:
        return describe(inner, defs)
    return Cause(e, f"{quote(e)} is outside the affine class", loc)


def cause(
    e: Expr,
    known: Callable[[Expr], bool],
    defs: Mapping[Var, Expr] | None = None,
    leaf: Callable[[Expr], Cause | None] | None = None,
) -> Cause:
    """The cause of ``known(e)`` being false: the smallest unknown part of ``e`` whose
    integer and boolean parts are all known, described (``leaf`` may describe it first).
    Immutable variables bound in ``defs`` are followed into their definitions."""
    seen: set[int] = set()
    cur = e
    for _ in range(256):
        nxt: Expr | None = None
        if isinstance(cur, Ref) and defs is not None and cur.var in defs \
                and not cur.var.mutable and id(defs[cur.var]) not in seen:
            seen.add(id(defs[cur.var]))
            d = defs[cur.var]
            if not known(d):
                sub = cause(d, known, defs, leaf)
                return attrs.evolve(sub, text=f"{cur.var.name} = {print_expr(d)}, and "
                                    + sub.text, loc=sub.loc or cur.loc)
        for ch in children(cur):
            if isinstance(ch, Expr) and _kind_of(ch) in ("int", "bool") and not known(ch):
                nxt = ch
                break
        if nxt is None:
            break
        cur = nxt
    got = leaf(cur) if leaf is not None else None
    out = got if got is not None else describe(cur, defs)
    if out.loc is None:
        out = attrs.evolve(out, loc=cur.loc or e.loc)
    return out


def affine_cause(e: Expr, ctx: AffineCtx) -> Cause:
    """Why ``to_affine(e, ctx)`` (an integer) or ``to_dnf(e, ctx, EXACT)`` (a boolean) is
    ``None`` (AFF-3, AFF-7)."""

    def known(x: Expr) -> bool:
        k = _kind_of(x)
        if k == "int":
            return to_affine(x, ctx) is not None
        if k == "bool":
            return to_dnf(x, ctx, Mode.EXACT) is not None
        return False

    def leaf(x: Expr) -> Cause | None:
        if isinstance(x, Ref) and x.var in ctx.variant:
            return Cause(x, f"{x.var.name} is assigned in the region (its value changes)",
                         x.loc, "mutable")
        return None

    return cause(e, known, ctx.defs, leaf)
