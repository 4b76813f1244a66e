"""What one iteration of a parallel loop costs, counted by kind (specs/loop-fusion.md, LF-61).

:func:`count` walks a loop body (a kernel-IR statement, one point of the nest) and gives a
:class:`Counts`: the loads (each array read evaluated), the bytes streamed (each distinct
array read, and each distinct array written, once per point at its element size), and the
operations by kind, and the loads at an offset in the last dimension of a 2-D or n-D
array (``shift``, LF-95). The cost model (:mod:`~sarek_py.fusion.loops.cost`) prices each kind
with a per-backend table (:mod:`~sarek_py.fusion.loops.cost_table`); the calibration
benchmark (``benchmarks/calibrate.py``) fits that table with the same counts, so the two
cannot disagree on what is counted.

Counting rules (LF-61): subscripts are address arithmetic and count nothing but the load
or store they address; a load of an element already loaded in the point (the same array
and the same linear subscript: ``u[i - 1 + 1]`` is ``u[i]``) counts once, and a distinct
load of an array of rank 2 or more whose last subscript is an index plus a nonzero literal
(``u[i, j - 1]``) counts a ``shift`` too (LF-95); an operation
already evaluated in the same expression (the same operator on the same operands, reads
compared by their linear subscripts) counts once, as the compiler's common subexpression
elimination computes it once (LF-82: a recomputed producer read at overlapping offsets
shares its terms); everything else in the body counts once per point, both arms of a
conditional included (a vectorised loop evaluates both), an ``if`` statement's test as a
``branch`` apart from a conditional expression's ``select`` (LF-76); a helper call counts its
callee's body; a sequential ``for`` inside the body counts its body once per iteration
when its bounds are literals, else once (said by :attr:`Counts.unknown_trips`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS, TRANSCENDENTAL
from sarek_py.ir.nodes import (
    EXPR_TYPES,
    STMT_TYPES,
    Assign,
    Atomic,
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    For,
    HelperFunc,
    If,
    Intrinsic,
    Length,
    Let,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Store,
    Unary,
    UnaryOp,
    Var,
    While,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import children

#: the kinds of per-point cost, in the order of the table's columns (LF-60)
KINDS = ("point", "byte", "load", "f32_op", "f64_op", "f32_div", "f64_div",
         "f32_transc", "f64_transc", "int_op", "int_div", "select", "branch", "shift")

#: math intrinsics priced as an arithmetic operation (exact, one instruction or two)
_CHEAP_MATH = frozenset({"abs", "min", "max", "floor", "ceil"})


@attrs.frozen
class Counts:
    """Per point of a loop: how many of each kind (:data:`KINDS`; ``point`` is 1 per
    loop), and whether a nested loop's trip count was unknown."""

    values: tuple[tuple[str, float], ...]
    unknown_trips: bool = False

    def __getitem__(self, kind: str) -> float:
        return dict(self.values).get(kind, 0.0)

    def as_dict(self) -> dict[str, float]:
        return {k: self[k] for k in KINDS}

    def __add__(self, other: Counts) -> Counts:
        a, b = self.as_dict(), other.as_dict()
        return _make({k: a[k] + b[k] for k in KINDS}, self.unknown_trips or other.unknown_trips)

    def scaled(self, factor: float) -> Counts:
        return _make({k: v * factor for k, v in self.as_dict().items()}, self.unknown_trips)

    def __str__(self) -> str:
        return ", ".join(f"{k} {v:g}" for k, v in self.as_dict().items() if v)


def _make(d: Mapping[str, float], unknown: bool = False) -> Counts:
    return Counts(tuple((k, float(d.get(k, 0.0))) for k in KINDS), unknown)


@attrs.define
class _Counter:
    helpers: Mapping[str, HelperFunc]
    n: dict[str, float] = attrs.field(factory=lambda: dict.fromkeys(KINDS, 0.0))
    read: set[Var] = attrs.field(factory=set)
    written: set[Var] = attrs.field(factory=set)
    loads: set[tuple[Var, tuple[object, ...]]] = attrs.field(factory=set)
    unknown: bool = False
    stack: tuple[str, ...] = ()
    weight: float = 1.0
    #: the values already counted in the expression being walked (LF-82)
    seen: set[int] = attrs.field(factory=set)
    #: value numbering (LF-82): a node's number by its identity, and the number of each
    #: shape (operator, the operands' numbers), so a key hashes in constant time
    numbers: dict[int, int | None] = attrs.field(factory=dict)
    shapes: dict[object, int] = attrs.field(factory=dict)

    def add(self, kind: str, k: float = 1.0) -> None:
        self.n[kind] += k * self.weight

    def top(self, e: Expr) -> None:
        """Count a statement's expression: its common subexpressions once (LF-82)."""
        self.seen = set()
        self.expr(e)

    def value_number(self, e: Expr) -> int | None:
        """The number of ``e``'s value within one expression (LF-82): equal for the same
        operator on the same operands, reads compared by array and linear subscripts
        (:func:`_linear`); None where it may differ (an atomic, a call, a thread's
        intrinsic, or an expression holding one)."""
        if id(e) in self.numbers:
            return self.numbers[id(e)]
        shape: object | None
        match e:
            case Const() | Ref() | Length():
                shape = e  # equality ignores the location; a literal's keeps -0.0 apart
            case Read(array=a, index=ix):
                shape = ("read", a, tuple(_linear(x) for x in ix))
            case Binary(op=op, lhs=lhs, rhs=rhs):
                shape = self._shape(("bin", op), (lhs, rhs))
            case Unary(op=op, arg=a):
                shape = self._shape(("un", op), (a,))
            case Cast(to=t, arg=a):
                shape = self._shape(("cast", t), (a,))
            case Cond(cond=c, if_true=t, if_false=f):
                shape = self._shape(("cond",), (c, t, f))
            case Intrinsic(name=name, args=args) if name not in THREAD_INTRINSICS:
                shape = self._shape(("math", name), args)
            case _:
                shape = None
        number = None if shape is None else self.shapes.setdefault(shape, len(self.shapes))
        self.numbers[id(e)] = number
        return number

    def _shape(self, head: tuple[object, ...], args: tuple[Expr, ...]) -> object | None:
        numbers = tuple(self.value_number(x) for x in args)
        return None if None in numbers else (*head, numbers)

    def expr(self, e: Expr) -> None:
        number = self.value_number(e)
        if number is not None and not isinstance(e, Read):
            if number in self.seen:  # computed once by the compiler (LF-82)
                return
            self.seen.add(number)
        match e:
            case Const() | Ref() | Length():
                return
            case Read(array=a, index=ix):
                key = (a, tuple(_linear(x) for x in ix))
                if key not in self.loads:  # the same element twice is one load
                    self.loads.add(key)
                    self.add("load")
                    if _shifted(ix):  # LF-95: and at an offset in the last dimension
                        self.add("shift")
                self.read.add(a)
                return  # subscripts: address arithmetic (LF-61)
            case Atomic(array=a, value=v, compare=c):
                self.add("load")
                self.read.add(a)
                self.written.add(a)
                self.expr(v)
                if c is not None:
                    self.expr(c)
                return
            case Binary(op=op, lhs=lhs, rhs=rhs):
                self.add(_binary_kind(op, type_of(lhs)))
                self.expr(lhs)
                self.expr(rhs)
            case Unary(op=op, arg=a):
                t = type_of(a)
                self.add(_float_kind(t, "op") if op is UnaryOp.NEG and _is_float(t)
                         else "int_op")
                self.expr(a)
            case Cast(arg=a):
                self.add("int_op")
                self.expr(a)
            case Cond(cond=c, if_true=t, if_false=f):
                self.add("select")
                for x in (c, t, f):
                    self.expr(x)
            case Intrinsic(name=name, args=args):
                if name not in THREAD_INTRINSICS:
                    self.add(_math_kind(name, type_of(args[0]) if args else Scalar.F32))
                for x in args:
                    self.expr(x)
            case Call(func=f, args=args):
                for x in args:
                    self.expr(x)
                if f in self.helpers and f not in self.stack:
                    inner = attrs.evolve(self, stack=(*self.stack, f))
                    inner.stmt(self.helpers[f].body)
                    self.unknown = self.unknown or inner.unknown

    def stmt(self, s: Stmt) -> None:
        match s:
            case Store(array=a, value=v):
                self.written.add(a)
                self.top(v)
            case Let(value=v, body=b):
                self.top(v)
                self.stmt(b)
            case Assign(value=v) | Return(value=v):
                if v is not None:
                    self.top(v)
            case Seq(stmts=ss):
                for x in ss:
                    self.stmt(x)
            case If(cond=c, then=t, else_=e):
                self.add("branch")  # a statement's test: LF-76 (a select is an expression's)
                self.top(c)
                self.stmt(t)
                if e is not None:
                    self.stmt(e)
            case For(start=a, stop=b, body=body):
                self.top(a)
                self.top(b)
                trips = _literal_trips(a, b)
                if trips is None:
                    self.unknown = True
                    trips = 1
                old = self.weight
                self.weight = old * trips
                self.stmt(body)
                self.weight = old
            case _:  # While (unknown trips), Stop, Barrier, Pragma, Empty, Break, Continue
                if isinstance(s, While):
                    self.unknown = True
                for c in children(s):
                    if isinstance(c, EXPR_TYPES):
                        self.top(c)
                    elif isinstance(c, STMT_TYPES):
                        self.stmt(cast(Stmt, c))


def _linear(e: Expr) -> object:
    """A subscript as a comparable key: its linear form (``i - 1 + 1`` is ``i``) when it is
    a sum of variables times literals, else the expression itself."""
    form = _lin(e)
    return frozenset(form.items()) if form is not None else e


def _lin(e: Expr) -> dict[object, int] | None:
    match e:
        case Const(value=v) if type(v) is int:
            return {1: v} if v else {}
        case Ref(var=v):
            return {v: 1}
        case Cast(arg=arg):
            return _lin(arg)
        case Unary(op=UnaryOp.NEG, arg=arg):
            f = _lin(arg)
            return None if f is None else {k: -c for k, c in f.items()}
        case Binary(op=BinaryOp.ADD | BinaryOp.SUB as op, lhs=lhs, rhs=rhs):
            f, g = _lin(lhs), _lin(rhs)
            if f is None or g is None:
                return None
            sign = 1 if op is BinaryOp.ADD else -1
            out = dict(f)
            for k, c in g.items():
                out[k] = out.get(k, 0) + sign * c
            return {k: c for k, c in out.items() if c}
        case Binary(op=BinaryOp.MUL, lhs=lhs, rhs=rhs):
            f, g = _lin(lhs), _lin(rhs)
            if f is None or g is None:
                return None
            for lit, other in ((f, g), (g, f)):
                if set(lit) <= {1}:
                    k = lit.get(1, 0)
                    return {x: k * c for x, c in other.items() if k * c}
    return None


def _shifted(ix: tuple[Expr, ...]) -> bool:
    """Whether a read's subscripts address an array of rank 2 or more at a literal nonzero
    offset from an index in its last (contiguous) dimension: ``x[i, j - 1]``, not
    ``x[i, j]`` nor ``x[i - 1, j]`` nor a 1-D ``x[i - 1]`` (LF-95)."""
    if len(ix) < 2:
        return False
    form = _lin(ix[-1])
    if form is None:
        return False
    terms = [c for k, c in form.items() if k != 1]
    return terms == [1] and form.get(1, 0) != 0


def _literal_trips(a: Expr, b: Expr) -> int | None:
    if isinstance(a, Const) and isinstance(b, Const) and isinstance(a.value, int) \
            and isinstance(b.value, int) and not isinstance(a.value, bool):
        return max(abs(int(b.value) - int(a.value)) + 1, 0)
    return None


def _is_float(t: object) -> bool:
    return t in (Scalar.F32, Scalar.F64)


def _float_kind(t: object, what: str) -> str:
    return f"{'f64' if t == Scalar.F64 else 'f32'}_{what}"


def _binary_kind(op: BinaryOp, t: object) -> str:
    if not _is_float(t) or op.is_compare or op.is_logical:
        return "int_div" if op in (BinaryOp.DIV, BinaryOp.MOD) and not _is_float(t) \
            else "int_op"
    return _float_kind(t, "div" if op is BinaryOp.DIV else "op")


def _math_kind(name: str, t: object) -> str:
    if not _is_float(t):
        return "int_op"
    if name == "sqrt":
        return _float_kind(t, "div")
    if name in TRANSCENDENTAL:
        return _float_kind(t, "transc")
    assert name in _CHEAP_MATH
    return _float_kind(t, "op")


def count(body: Stmt, helpers: Mapping[str, HelperFunc] = {}) -> Counts:  # noqa: B006
    """The per-point counts of a loop body (LF-61)."""
    c = _Counter(helpers)
    c.stmt(body)
    n = dict(c.n)
    n["point"] = 1.0
    n["byte"] = float(sum(_itemsize(v) for v in c.read) + sum(_itemsize(v) for v in c.written))
    return _make(n, c.unknown)


def _itemsize(v: Var) -> int:
    t = v.type
    assert isinstance(t, ArrayType)
    return int(t.elem.dtype.itemsize)


__all__ = ["KINDS", "Counts", "count"]
