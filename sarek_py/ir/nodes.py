"""The kernel IR: variables, expressions, statements, helper functions, kernels (specs/ir.md).

Every node is an immutable ``attrs`` class compared by value (IR-4). A variable is
compared by its id alone, as in Sarek (IR-5). Nodes may carry a source location
(``loc``) that takes no part in equality or hashing, so a parsed kernel equals the same
kernel built by hand.
"""

from __future__ import annotations

import enum
import itertools
import math
import struct
from collections.abc import Iterator
from typing import Any

import attrs

from sarek_py.ir.requires import FusionRequires
from sarek_py.ir.types import ArrayType, Scalar, Type


@attrs.frozen
class Loc:
    """A position in a source file: 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def _loc() -> Any:
    return attrs.field(default=None, eq=False, repr=False, kw_only=True)


_ids = itertools.count(1)


def fresh_id() -> int:
    """A variable id never handed out before in this process."""
    return next(_ids)


def reserve_ids(above: int) -> None:
    """Make sure every later :func:`fresh_id` is greater than ``above``."""
    global _ids
    nxt = next(_ids)
    _ids = itertools.count(max(nxt, above + 1))


@attrs.frozen(eq=False)
class Var:
    """A variable: name, unique id, type; ``mutable`` for ``let mut`` and locals.

    Equality and hashing use the id alone (IR-5): two variables with the same name are
    different variables unless they have the same id.
    """

    name: str
    id: int
    type: Type
    mutable: bool = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Var) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def is_array(self) -> bool:
        return isinstance(self.type, ArrayType)

    @property
    def scalar(self) -> Scalar:
        """The element type of an array variable, or the type of a scalar one."""
        return self.type.elem if isinstance(self.type, ArrayType) else self.type


def var(name: str, type: Type, mutable: bool = False) -> Var:
    """A fresh variable."""
    return Var(name, fresh_id(), type, mutable)


# ---------------------------------------------------------------------------- expressions


class UnaryOp(enum.Enum):
    NEG = "-"
    NOT = "!"
    BNOT = "~"


class BinaryOp(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    MOD = "%"
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    AND = "&&"
    OR = "||"
    BAND = "&"
    BOR = "|"
    BXOR = "^"
    SHL = "<<"
    SHR = ">>"

    @property
    def is_arith(self) -> bool:
        return self in _ARITH

    @property
    def is_compare(self) -> bool:
        return self in _COMPARE

    @property
    def is_logical(self) -> bool:
        return self in (BinaryOp.AND, BinaryOp.OR)

    @property
    def is_bitwise(self) -> bool:
        return self in (BinaryOp.BAND, BinaryOp.BOR, BinaryOp.BXOR)

    @property
    def is_shift(self) -> bool:
        return self in (BinaryOp.SHL, BinaryOp.SHR)


_ARITH = frozenset({BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL, BinaryOp.DIV, BinaryOp.MOD})
_COMPARE = frozenset(
    {BinaryOp.EQ, BinaryOp.NE, BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE}
)


def _literal_key(v: int | float | bool | None) -> object:
    """What equality of literals compares (IR-31): the value, except that a float zero
    keeps its sign and a NaN is equal to a NaN of the same bits, so ``0.0`` and ``-0.0``
    differ (they give different results) and a NaN literal equals itself."""
    if isinstance(v, float):
        if math.isnan(v):
            return ("nan", struct.pack("<d", v))
        if v == 0.0:
            return ("zero", math.copysign(1.0, v))
    return v


@attrs.frozen
class Const:
    """A literal of a scalar type (``unit`` has the single value ``None``). Equality and
    hashing compare float values by sign of zero and NaN bits (IR-31)."""

    value: int | float | bool | None = attrs.field(eq=_literal_key)
    type: Scalar
    loc: Loc | None = _loc()


@attrs.frozen
class Ref:
    """The value of a scalar variable."""

    var: Var
    loc: Loc | None = _loc()


@attrs.frozen
class Unary:
    op: UnaryOp
    arg: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Binary:
    """A binary operator. ``&&`` and ``||`` short-circuit: ``rhs`` is evaluated only where
    it decides the value (IR-9)."""

    op: BinaryOp
    lhs: Expr
    rhs: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Read:
    """``array[i, j, ...]``: one index per dimension, counted from the dimension's lower bound."""

    array: Var
    index: tuple[Expr, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class Cast:
    """A C conversion to ``to`` (float to int truncates toward zero)."""

    to: Scalar
    arg: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Cond:
    """``cond ? if_true : if_false``; only the chosen arm is evaluated."""

    cond: Expr
    if_true: Expr
    if_false: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Intrinsic:
    """A thread intrinsic (``global_thread_id``, ``thread_idx_x`` …) or a math function
    (``sqrt``, ``min`` …). The table of names is in :mod:`sarek_py.ir.intrinsics`."""

    name: str
    args: tuple[Expr, ...] = ()
    loc: Loc | None = _loc()


@attrs.frozen
class Call:
    """A call of a helper function; ``result`` is the function's result type."""

    func: str
    args: tuple[Expr, ...]
    result: Scalar
    loc: Loc | None = _loc()


@attrs.frozen
class Length:
    """The extent of dimension ``dim`` of an array (an ``i32``)."""

    array: Var
    dim: int = 0
    loc: Loc | None = _loc()


class AtomicOp(enum.Enum):
    """The atomic read-modify-write operations (IR-33); the value is the text's word."""

    ADD = "atomic_add"
    MIN = "atomic_min"
    MAX = "atomic_max"
    EXCH = "atomic_exch"
    CAS = "atomic_cas"


@attrs.frozen
class Atomic:
    """``atomic_add(a[i], v)``, ``atomic_cas(a[i], expected, desired)`` …: one indivisible
    read-modify-write of the element ``array[index]`` of a global or shared array; its
    value is the element's old value (IR-33). ``compare`` is the expected value of
    ``atomic_cas`` and ``None`` for the other operations. An atomic is the whole value of
    a ``let`` or an assignment, nowhere else (IR-34)."""

    op: AtomicOp
    array: Var
    index: tuple[Expr, ...]
    value: Expr
    compare: Expr | None = None
    loc: Loc | None = _loc()


Expr = Const | Ref | Unary | Binary | Read | Cast | Cond | Intrinsic | Call | Length | Atomic
EXPR_TYPES: tuple[type, ...] = (Const, Ref, Unary, Binary, Read, Cast, Cond, Intrinsic, Call, Length,
                                Atomic)


# ----------------------------------------------------------------------------- statements


@attrs.frozen
class Let:
    """``let v = value in body`` (``let mut`` when ``var.mutable``); ``var`` is scoped to body."""

    var: Var
    value: Expr
    body: Stmt
    loc: Loc | None = _loc()


@attrs.frozen
class Assign:
    """``v := value`` for a mutable variable."""

    var: Var
    value: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Store:
    """``array[i, ...] <- value``."""

    array: Var
    index: tuple[Expr, ...]
    value: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Seq:
    """Statements in order."""

    stmts: tuple[Stmt, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class If:
    cond: Expr
    then: Stmt
    else_: Stmt | None = None
    loc: Loc | None = _loc()


@attrs.frozen
class For:
    """``for v = start to stop do body done`` (``downto`` when ``down``); bounds inclusive,
    evaluated once, before the first iteration. ``var`` is immutable inside the body."""

    var: Var
    start: Expr
    stop: Expr
    body: Stmt
    down: bool = False
    loc: Loc | None = _loc()


@attrs.frozen
class While:
    cond: Expr
    body: Stmt
    loc: Loc | None = _loc()


@attrs.frozen
class Return:
    """Leaves a helper function with ``value``, or a kernel (no value) for this thread."""

    value: Expr | None = None
    loc: Loc | None = _loc()


@attrs.frozen
class Barrier:
    """Every thread of the block waits here; allowed only at kernel level (not in helpers)."""

    loc: Loc | None = _loc()


@attrs.frozen
class Empty:
    loc: Loc | None = _loc()


@attrs.frozen
class Pragma:
    """Options for the device compiler (``unroll`` …) attached to ``body``."""

    options: tuple[str, ...]
    body: Stmt
    loc: Loc | None = _loc()


@attrs.frozen
class Break:
    """Leaves the innermost enclosing ``for``/``while`` loop of the same function (IR-32);
    in a host program, the innermost sequential loop (HP-19)."""

    loc: Loc | None = _loc()


@attrs.frozen
class Continue:
    """Ends the current iteration of the innermost enclosing ``for``/``while`` loop of the
    same function: a ``for`` steps to its next value, a ``while`` tests its condition
    again (IR-32)."""

    loc: Loc | None = _loc()


@attrs.frozen
class Stop:
    """The thread stops the kernel's work with ``code`` (recorded in the launch's stop status)."""

    code: int
    loc: Loc | None = _loc()


Stmt = (Let | Assign | Store | Seq | If | For | While | Return | Barrier | Empty | Pragma | Stop
        | Break | Continue)
STMT_TYPES: tuple[type, ...] = (
    Let, Assign, Store, Seq, If, For, While, Return, Barrier, Empty, Pragma, Stop, Break,
    Continue,
)


# ---------------------------------------------------------------------------- declarations


@attrs.frozen
class HelperFunc:
    """A device function called from kernels. ``pure``: reads only its arguments (and
    arrays passed to it), writes nothing, has no barrier and no thread intrinsic — the
    checker verifies the claim (IR-14)."""

    name: str
    params: tuple[Var, ...]
    result: Scalar
    body: Stmt
    pure: bool = False
    loc: Loc | None = _loc()


@attrs.frozen
class Kernel:
    """A kernel: parameters (scalars and arrays), locals (mutable scalars, local and shared
    arrays, zero-initialised except shared ones), body, and the helper functions it calls."""

    name: str
    params: tuple[Var, ...]
    locals: tuple[Var, ...]
    body: Stmt
    helpers: tuple[HelperFunc, ...] = ()
    #: the launch conditions of a fused kernel (specs/fusion-legality.md LEG-13)
    requires: FusionRequires | None = attrs.field(default=None, kw_only=True)
    #: conditions over its scalar arguments that every launch must meet (``bool``
    #: expressions over scalar parameters; a rows kernel's bounds, specs/launch.md LCH-25)
    ranges: tuple[Expr, ...] = attrs.field(default=(), kw_only=True)
    loc: Loc | None = _loc()

    def helper(self, name: str) -> HelperFunc:
        for h in self.helpers:
            if h.name == name:
                return h
        raise KeyError(name)

    def param(self, name: str) -> Var:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


@attrs.frozen
class Module:
    """What a ``.sk`` file holds: helper functions and kernels, in source order."""

    helpers: tuple[HelperFunc, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    loc: Loc | None = _loc()

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


Node = Expr | Stmt | HelperFunc | Kernel


def seq(*stmts: Stmt) -> Stmt:
    """A sequence, flattened, without empty statements; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(x for x in s.stmts if not isinstance(x, Empty))
        elif not isinstance(s, Empty):
            flat.append(s)
    if not flat:
        return Empty()
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))


def iter_stmts(s: Stmt) -> Iterator[Stmt]:
    """Pre-order walk of the statements of ``s`` (``s`` included)."""
    yield s
    match s:
        case Let(body=b) | For(body=b) | While(body=b) | Pragma(body=b):
            yield from iter_stmts(b)
        case Seq(stmts=ss):
            for x in ss:
                yield from iter_stmts(x)
        case If(then=t, else_=e):
            yield from iter_stmts(t)
            if e is not None:
                yield from iter_stmts(e)
        case _:
            pass
