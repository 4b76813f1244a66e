"""Calls of procedures in parallel loops (specs/host-program.md, HP-42, HP-43).

A ``call p(args)`` in the body of a parallel loop is read as the procedure's body, inlined
as kernel statements over the iteration's values, when the procedure can run in one
iteration: it names nothing but its dummies, its locals and its own loop variables
(self-contained, HP-6), and its statements are assignments, stores, ``if``, ``for`` (unit
step), ``while``, ``break``/``continue``, ``return`` outside its loops, and calls of such
procedures. Anything else (input/output, allocation, pointer association, a parallel loop,
a launch, ``stop``, a program variable) is refused with a located ``ParseError`` naming
the statement and why.

The inlined form, for dummies ``x : f64 in`` and ``y : f64 out`` and an array dummy
``a``::

    let x_ = ARG in let mut x = x_ in let mut y = 0.0 in
    (while true do (BODY[a := ACTUAL]; break) done; b[s] <- y)

An ``in``/``value`` dummy starts as its argument's value; ``inout`` as the actual's, ``out``
at zero; each ``out``/``inout`` dummy is copied back to its actual (a mutable local or an
array element whose subscripts are evaluated once, before the call) when the procedure
ends. Array dummies name the actual array (by reference, HP-6). The ``while true … break``
wrapper appears only when the body has a ``return``, which becomes its ``break``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from sarek_py.ir.host.program import (
    Block,
    Break,
    CallProc,
    Continue,
    HAssign,
    HFor,
    HIf,
    HostStmt,
    HReturn,
    HStore,
    HWhile,
    Intent,
    Procedure,
    iter_host,
    named_vars,
)
from sarek_py.ir.nodes import (
    Assign,
    Const,
    Empty,
    Expr,
    For,
    If,
    Let,
    Loc,
    Read,
    Ref,
    Seq,
    Stmt,
    Store,
    Var,
    While,
    var,
)
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import map_node

#: what a refusal of a host statement in an inlined procedure says it does
_HOST_ONLY = {
    "Output": "output", "Input": "input ('read')", "Allocate": "an allocation",
    "Deallocate": "a deallocation", "PointerAssoc": "a pointer association",
    "ParFor": "a parallel loop", "Launch": "a launch", "Sync": "a sync",
    "HStop": "a 'stop'",
}


class InlineRefused(Exception):
    """Why a procedure cannot be called in a parallel loop, and where."""

    def __init__(self, message: str, loc: Loc | None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc


def _zero(t: Scalar) -> Const:
    return Const(False if t is Scalar.BOOL else 0.0 if t.is_float else 0, t)


def _seq(stmts: list[Stmt]) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        elif not isinstance(s, Empty):
            flat.append(s)
    if not flat:
        return Empty()
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def _where(proc: Procedure, s: HostStmt) -> str:
    loc = getattr(s, "loc", None)
    return f" (line {loc.line})" if loc is not None else ""


def check_inlinable(proc: Procedure, procs: Mapping[str, Procedure]) -> None:
    """HP-43: raise :class:`InlineRefused` unless ``proc`` can run in one iteration of a
    parallel loop."""
    own = {p.var for p in proc.params} | {d.var for d in proc.decls}
    for d in proc.decls:
        if isinstance(d.var.type, ArrayType):
            raise InlineRefused(
                f"procedure '{proc.name}' declares array '{d.var.name}': a procedure called "
                "in a parallel loop has scalar locals only (pass the array, or declare it "
                "with the loop's 'local')", d.loc)
    for s in iter_host(proc.body):
        kind = type(s).__name__
        if kind in _HOST_ONLY:
            raise InlineRefused(
                f"procedure '{proc.name}' does {_HOST_ONLY[kind]}{_where(proc, s)}, which "
                "an iteration of a parallel loop cannot do", getattr(s, "loc", None))
        if isinstance(s, HFor):
            own.add(s.var)
            if s.step is not None and not (isinstance(s.step, Const) and s.step.value == 1):
                raise InlineRefused(
                    f"procedure '{proc.name}' has a 'for' with a step{_where(proc, s)}: in a "
                    "parallel loop, a procedure's loops count up by one (use a 'while')",
                    s.loc)
        if isinstance(s, HReturn) and _in_loop(proc.body, s):
            raise InlineRefused(
                f"procedure '{proc.name}' returns from inside a loop{_where(proc, s)}: in a "
                "parallel loop, a procedure may return only outside its loops", s.loc)
        if isinstance(s, CallProc):
            callee = procs[s.proc]
            check_inlinable(callee, procs)
    for s in iter_host(proc.body):
        outside = named_vars(s) - own
        if outside:
            name = sorted(v.name for v in outside)[0]
            raise InlineRefused(
                f"procedure '{proc.name}' names program variable '{name}'{_where(proc, s)}: "
                "a procedure called in a parallel loop may name only its dummies and locals "
                "(HP-6, self-contained)", getattr(s, "loc", None))


def _in_loop(body: HostStmt, target: HostStmt) -> bool:
    def go(s: HostStmt, inside: bool) -> bool:
        if s is target:
            return inside
        match s:
            case Block(stmts=ss):
                return any(go(x, inside) for x in ss)
            case HIf(then=t, else_=e):
                return go(t, inside) or (e is not None and go(e, inside))
            case HFor(body=b) | HWhile(body=b):
                return go(b, True)
        return False
    return go(body, False)


def _lvalue(arg: Expr, what: str, loc: Loc | None, type_of: Callable[[Expr], object]
            ) -> tuple[list[tuple[Var, Expr]], Expr, Callable[[Expr], Stmt]]:
    """An ``out``/``inout`` actual: its subscripts bound once (``let``s), its current
    value, and a statement storing a value into it."""
    if isinstance(arg, Ref) and not arg.var.is_array and arg.var.mutable:
        v = arg.var
        return [], arg, lambda x: Assign(v, x)
    if isinstance(arg, Read):
        lets: list[tuple[Var, Expr]] = []
        parts: list[Expr] = []
        for k, i in enumerate(arg.index):
            if isinstance(i, Const) or (isinstance(i, Ref) and not i.var.mutable):
                parts.append(i)  # a loop index or a constant: the same after the call
                continue
            t = type_of(i)
            v = var(f"s{k}_", t if isinstance(t, Scalar) else Scalar.I32)
            lets.append((v, i))
            parts.append(Ref(v))
        idx = tuple(parts)
        a = arg.array
        return lets, Read(a, idx), lambda x: Store(a, idx, x)
    raise InlineRefused(f"the argument for {what} must be a mutable variable or an array "
                        "element", loc)


def inline_call(proc: Procedure, args: tuple[Expr, ...], procs: Mapping[str, Procedure],
                loc: Loc | None, type_of: Callable[[Expr], object]) -> Stmt:
    """The kernel statement that runs ``call proc(args)`` in one iteration (HP-42);
    :class:`InlineRefused` when it cannot (HP-43). ``type_of`` gives an index's type."""
    check_inlinable(proc, procs)
    mapping: dict[Var, Var] = {}
    lets: list[tuple[Var, Expr]] = []
    backs: list[Stmt] = []
    for prm, arg in zip(proc.params, args, strict=True):
        d = prm.var
        what = f"{prm.intent} dummy '{d.name}' of '{proc.name}'"
        if d.is_array:
            if not (isinstance(arg, Ref) and arg.var.is_array and arg.var.type == d.type):
                raise InlineRefused(f"the argument for array dummy '{d.name}' of "
                                    f"'{proc.name}' must be an array of type {d.type}", loc)
            mapping[d] = arg.var
            continue
        fresh = var(d.name, d.type, mutable=True)
        mapping[d] = fresh
        assert isinstance(d.type, Scalar)
        if prm.intent in (Intent.IN, Intent.VALUE):
            lets.append((fresh, arg))
            continue
        subs, current, store = _lvalue(arg, what, loc, type_of)
        lets.extend(subs)
        lets.append((fresh, current if prm.intent is Intent.INOUT else _zero(d.type)))
        backs.append(store(Ref(fresh)))
    for dcl in proc.decls:
        fresh = var(dcl.var.name, dcl.var.type, mutable=True)
        mapping[dcl.var] = fresh
        assert isinstance(dcl.var.type, Scalar)
        init = _zero(dcl.var.type) if dcl.init is None else dcl.init
        lets.append((fresh, init))
    has_return = any(isinstance(s, HReturn) for s in iter_host(proc.body))
    body = _stmt(proc.body, mapping, procs, type_of)
    if has_return:
        body = While(Const(True, Scalar.BOOL), _seq([body, Break()]))
    out: Stmt = _seq([body, *backs])
    for v, e in reversed(lets):
        out = Let(v, _subst(e, mapping), out)
    return attrs.evolve(out, loc=loc)


def _subst(e: Expr, mapping: Mapping[Var, Var]) -> Expr:
    return map_node(e, var=lambda v: mapping.get(v, v))


def _stmt(s: HostStmt, mapping: dict[Var, Var], procs: Mapping[str, Procedure],
          type_of: Callable[[Expr], object]) -> Stmt:
    m = mapping
    match s:
        case HAssign(var=v, value=e):
            return Assign(m.get(v, v), _subst(e, m), loc=s.loc)
        case HStore(array=a, index=idx, value=e):
            return Store(m.get(a, a), tuple(_subst(i, m) for i in idx), _subst(e, m),
                         loc=s.loc)
        case Block(stmts=ss):
            return _seq([_stmt(x, m, procs, type_of) for x in ss])
        case HIf(cond=c, then=t, else_=e):
            return If(_subst(c, m), _stmt(t, m, procs, type_of),
                      None if e is None else _stmt(e, m, procs, type_of), loc=s.loc)
        case HFor(var=v, start=a, stop=b, body=body):
            fresh = var(v.name, v.type)
            inner = {**m, v: fresh}
            return For(fresh, _subst(a, m), _subst(b, m), _stmt(body, inner, procs, type_of),
                       loc=s.loc)
        case HWhile(cond=c, body=body):
            return While(_subst(c, m), _stmt(body, m, procs, type_of), loc=s.loc)
        case Break() | Continue():
            return s
        case HReturn():
            return Break(loc=s.loc)
        case CallProc(proc=name, args=args):
            actual = tuple(_subst(a, m) for a in args)
            return inline_call(procs[name], actual, procs, s.loc, type_of)
    raise InlineRefused(f"{type(s).__name__} cannot run in a parallel loop",  # pragma: no cover
                        getattr(s, "loc", None))


__all__ = ["InlineRefused", "check_inlinable", "inline_call"]
