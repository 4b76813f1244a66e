"""The host-program IR (specs/host-program.md, HP-1..HP-9).

A :class:`Program` is what runs on the host around kernels: declared variables (scalars and
arrays, :class:`Decl`), procedures (:class:`Procedure`), the helper functions and kernels
its parallel loops and launches use, and a body of host statements.

Host statements are the classes below plus the launch node's :class:`Launch` and
:class:`Sync`. Their expressions are ordinary kernel-IR expressions over host variables
(:class:`~sarek_py.ir.nodes.Var`); the body of a :class:`ParFor` is a kernel-IR statement,
one iteration of the nest, with the loop indices as its free index variables.

Arrays keep their declared constant lower bounds; the extents of an allocatable or pointer
array are run-time values fixed by ``allocate`` (or by pointer association), so the upper
bound of dimension ``d`` is ``lower[d] + length(a, d) - 1`` (HP-2).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import attrs

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch, Sync
from sarek_py.ir.nodes import Break as Break  # host statements too (IR-32, HP-19)
from sarek_py.ir.nodes import Continue as Continue
from sarek_py.ir.nodes import (
    Expr,
    HelperFunc,
    Kernel,
    Loc,
    Stmt,
    Store,
    Var,
    iter_stmts,
)
from sarek_py.ir.types import ArrayType
from sarek_py.ir.visit import free_vars


class HostError(SarekError):
    """A run-time error of a host program (bad subscript, unallocated array, …)."""


def _loc() -> Any:
    return attrs.field(default=None, eq=False, repr=False, kw_only=True)


class Attr(enum.Enum):
    """Attributes of a host variable (HP-2). ``common`` is storage shared under other
    names (a Fortran common block): like ``target`` and ``volatile`` it lets the variable
    change through another name."""

    ALLOCATABLE = "allocatable"
    POINTER = "pointer"
    TARGET = "target"
    VOLATILE = "volatile"
    COMMON = "common"

    def __str__(self) -> str:
        return self.value


class Intent(enum.Enum):
    """How a procedure uses a dummy argument (HP-6)."""

    IN = "in"
    OUT = "out"
    INOUT = "inout"
    VALUE = "value"

    def __str__(self) -> str:
        return self.value


@attrs.frozen
class Decl:
    """A host variable with its attributes and, for a scalar, an optional initial value."""

    var: Var
    attrs: frozenset[Attr] = frozenset()
    init: Expr | None = None
    loc: Loc | None = _loc()
    #: the declared type as the source spelled it (``f64[0:, 0:]``), printed while it
    #: still spells the variable's type (HP-44); not part of the value
    written: str | None = _loc()

    @property
    def allocatable(self) -> bool:
        return Attr.ALLOCATABLE in self.attrs

    @property
    def may_alias(self) -> bool:
        """May change through another name: pointer, target, volatile, common (HP-2)."""
        return bool(self.attrs & {Attr.POINTER, Attr.TARGET, Attr.VOLATILE, Attr.COMMON})


# ------------------------------------------------------------------------- statements


@attrs.frozen
class HAssign:
    """``v := e`` for a host scalar."""

    var: Var
    value: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class HStore:
    """``a[i, …] <- e`` run on the host (one element)."""

    array: Var
    index: tuple[Expr, ...]
    value: Expr
    loc: Loc | None = _loc()


@attrs.frozen
class Block:
    """Statements in order (``( … )``)."""

    stmts: tuple[HostStmt, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class HIf:
    cond: Expr
    then: HostStmt
    else_: HostStmt | None = None
    loc: Loc | None = _loc()


@attrs.frozen
class HFor:
    """A sequential loop ``for v = start to stop [step s] do … done`` (HP-3): bounds and step
    evaluated once; a zero step is an error; ``v`` is not assigned by the body."""

    var: Var
    start: Expr
    stop: Expr
    step: Expr | None
    body: HostStmt
    loc: Loc | None = _loc()


@attrs.frozen
class HWhile:
    """A sequential loop ``while cond do … done`` (HP-40): ``cond`` is evaluated before
    every iteration; ``break`` leaves it, ``continue`` goes to the next test of ``cond``."""

    cond: Expr
    body: HostStmt
    loc: Loc | None = _loc()


# ``Break`` and ``Continue`` are the kernel IR's own statements (IR-32): one class each, so
# that a dump names them once (TXT-26) and a parallel loop's body may hold them (HP-19).


@attrs.frozen
class HReturn:
    """Leave the procedure (or the program)."""

    loc: Loc | None = _loc()


@attrs.frozen
class HStop:
    """End the program with ``code``."""

    code: int
    loc: Loc | None = _loc()


@attrs.frozen
class LoopIndex:
    """One dimension of a parallel nest: ``var = start to stop`` (inclusive)."""

    var: Var
    start: Expr
    stop: Expr


@attrs.frozen
class ParFor:
    """``parallel for (j = a to b, i = c to d) [local …] do body done`` (HP-4).

    The iterations are independent (the seed's ``do concurrent``): any order, or all at
    once, gives the same result; the last index varies fastest. ``locals`` are private
    variables of an iteration (mutable scalars and local arrays, zero at its start).
    """

    indices: tuple[LoopIndex, ...]
    body: Stmt
    locals: tuple[Var, ...] = ()
    loc: Loc | None = _loc()

    @property
    def vars(self) -> tuple[Var, ...]:
        return tuple(ix.var for ix in self.indices)


@attrs.frozen
class CallProc:
    """``call p(args)``: an argument is a variable (by reference) or, for an ``in``/``value``
    dummy, any expression (HP-6)."""

    proc: str
    args: tuple[Expr, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class Output:
    """``print [(spec, …)] items`` or ``write (spec, …) items`` (HP-7).

    ``specifiers`` are ``(key, value)`` pairs; a key ``"unit"`` or ``"fmt"`` only says where
    and how; ``iostat``/``iomsg``/``id`` name a variable the statement defines.
    """

    kind: str
    specifiers: tuple[tuple[str, Expr | str], ...]
    items: tuple[Expr, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class Input:
    """``read v, …``: scalars taken from the program's input."""

    vars: tuple[Var, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class Bound:
    """One dimension of an allocation: ``lower:upper`` or, with ``lower`` None, an extent
    counted from the declared lower bound."""

    lower: Expr | None
    upper: Expr


@attrs.frozen
class Allocate:
    array: Var
    dims: tuple[Bound, ...]
    loc: Loc | None = _loc()


@attrs.frozen
class Deallocate:
    array: Var
    loc: Loc | None = _loc()


@attrs.frozen
class PointerAssoc:
    """``p => a``: pointer array ``p`` names the storage of ``a`` (a target or pointer)."""

    pointer: Var
    target: Var
    loc: Loc | None = _loc()


HostStmt = (HAssign | HStore | Block | HIf | HFor | HWhile | Break | Continue | HReturn | HStop
            | ParFor | CallProc | Output | Input | Allocate | Deallocate | PointerAssoc
            | Launch | Sync)
HOST_STMT_TYPES: tuple[type, ...] = (
    HAssign, HStore, Block, HIf, HFor, HWhile, Break, Continue, HReturn, HStop, ParFor,
    CallProc, Output, Input, Allocate, Deallocate, PointerAssoc, Launch, Sync,
)


# ------------------------------------------------------------------------- declarations


@attrs.frozen
class Param:
    """A dummy argument of a procedure and its intent."""

    var: Var
    intent: Intent = Intent.INOUT


@attrs.frozen
class Procedure:
    """A host procedure (HP-6). ``pure``: assigns only its ``out``/``inout`` dummies and its
    locals, does no input or output. Whether it is self-contained (names nothing but its
    dummies and locals) is computed by :func:`is_self_contained`."""

    name: str
    params: tuple[Param, ...]
    decls: tuple[Decl, ...]
    body: HostStmt
    pure: bool = False
    loc: Loc | None = _loc()


@attrs.frozen
class Program:
    """A host program: helpers and kernels (for parallel loops and launches), procedures,
    declarations and the body."""

    name: str
    decls: tuple[Decl, ...]
    body: HostStmt
    procedures: tuple[Procedure, ...] = ()
    helpers: tuple[HelperFunc, ...] = ()
    kernels: tuple[Kernel, ...] = ()
    loc: Loc | None = _loc()

    def decl(self, name: str) -> Decl:
        for d in self.decls:
            if d.var.name == name:
                return d
        raise KeyError(name)

    def procedure(self, name: str) -> Procedure:
        for p in self.procedures:
            if p.name == name:
                return p
        raise KeyError(name)

    def var(self, name: str) -> Var:
        return self.decl(name).var


def block(*stmts: HostStmt) -> HostStmt:
    """A flattened block; a single statement stays itself."""
    flat: list[HostStmt] = []
    for s in stmts:
        if isinstance(s, Block):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return Block(tuple(flat))


def host_children(s: HostStmt) -> tuple[HostStmt, ...]:
    """The host statements directly inside ``s``."""
    match s:
        case Block(stmts=ss):
            return ss
        case HIf(then=t, else_=e):
            return (t,) if e is None else (t, e)
        case HFor(body=b) | HWhile(body=b):
            return (b,)
    return ()


def iter_host(s: HostStmt) -> Iterator[HostStmt]:
    """Pre-order walk of the host statements of ``s`` (parallel-loop bodies not entered)."""
    yield s
    for c in host_children(s):
        yield from iter_host(c)


def is_array(v: Var) -> bool:
    return isinstance(v.type, ArrayType)


def expr_vars(*es: Expr | None) -> frozenset[Var]:
    out: set[Var] = set()
    for e in es:
        if e is not None:
            out |= free_vars(e)
    return frozenset(out)


def kernel_stores(s: Stmt) -> frozenset[Var]:
    return frozenset(x.array for x in iter_stmts(s) if isinstance(x, Store))


def named_vars(s: HostStmt) -> set[Var]:
    """Variables a statement names directly (not in nested host statements)."""
    match s:
        case HAssign(var=v, value=e):
            return {v} | set(expr_vars(e))
        case HStore(array=a, index=idx, value=e):
            return {a} | set(expr_vars(*idx, e))
        case HIf(cond=c):
            return set(expr_vars(c))
        case HFor(start=a, stop=b, step=st):
            return set(expr_vars(a, b, st))
        case HWhile(cond=c):
            return set(expr_vars(c))
        case ParFor(indices=ixs, body=body):
            return set(expr_vars(*(e for ix in ixs for e in (ix.start, ix.stop)))) | (
                free_vars(body) - set(s.vars) - set(s.locals))
        case CallProc(args=args):
            return set(expr_vars(*args))
        case Output(specifiers=specs, items=items):
            return set(expr_vars(*items, *(v for _, v in specs if not isinstance(v, str))))
        case Input(vars=vs):
            return set(vs)
        case Allocate(array=a, dims=dims):
            return {a} | set(expr_vars(*(e for d in dims for e in (d.lower, d.upper))))
        case Deallocate(array=a):
            return {a}
        case PointerAssoc(pointer=p, target=t):
            return {p, t}
    return set()
