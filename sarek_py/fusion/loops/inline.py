"""Inlining of pure helper functions with a scalar result (specs/inlining.md, INL-1..INL-10).

API::

    inline_calls(kernel, select=None) -> Kernel
    inline_report(kernel, select=None) -> tuple[Kernel, list[NotInlined]]
    inline_stmt(stmt, helpers, select=None, taken=()) -> tuple[Stmt, list[NotInlined]]
    inline_call(stmt, call, helpers, taken=()) -> tuple[Stmt, NotInlined | None]   (one call)
    inline_module(module, notes=None) -> Module          (the ``inline`` pass)
    helper_refusal(name, helpers) -> NotInlined | None
    is_self_contained(helper, helpers) -> bool ; self_contained(helpers) -> frozenset[str]

``select(call)`` restricts which calls are inlined (the loop fusion inlines the calls that
receive an intermediate array); a call it rejects is left alone without a report.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from sarek_py.analysis.effects import helper_effects
from sarek_py.fusion.loops.inline_returns import returns_to_assign, tail_returns
from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    EXPR_TYPES,
    Assign,
    Barrier,
    Binary,
    BinaryOp,
    Call,
    Cond,
    Const,
    Expr,
    For,
    HelperFunc,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Loc,
    Module,
    Pragma,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Var,
    While,
    fresh_id,
    iter_stmts,
    seq,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import helper_closure, iter_nodes, map_node

Select = Callable[[Call], bool]

#: inlining stops (leaving calls in place) after this many calls in one kernel
MAX_INLINED = 10_000


@attrs.frozen
class NotInlined:
    """A call left in place, with the rule that keeps it (INL-10)."""

    func: str
    rule: str
    message: str
    loc: Loc | None = attrs.field(default=None, eq=False)

    def __str__(self) -> str:
        at = f"{self.loc}: " if self.loc is not None else ""
        return f"{at}call of '{self.func}' not inlined [{self.rule}]: {self.message}"


# ----------------------------------------------------------------- helper properties


def _calls(node: Stmt | Expr) -> Iterable[Call]:
    return (n for n in iter_nodes(node) if isinstance(n, Call))


def _on_cycle(helpers: Mapping[str, HelperFunc]) -> frozenset[str]:
    """Helpers from which a call chain leads back to themselves."""
    graph = {n: {c.func for c in _calls(h.body) if c.func in helpers} for n, h in helpers.items()}
    out: set[str] = set()
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            x = todo.pop()
            if x == start:
                out.add(start)
                break
            if x not in seen:
                seen.add(x)
                todo.extend(graph[x])
    return frozenset(out)


def _table(helpers: Iterable[HelperFunc]) -> dict[str, HelperFunc]:
    return {h.name: h for h in helpers}


def helper_refusal(name: str, helpers: Iterable[HelperFunc]) -> NotInlined | None:
    """Why calls of ``name`` cannot be inlined (INL-5, INL-6), or ``None``."""
    table = _table(helpers)
    h = table.get(name)
    if h is None:
        return NotInlined(name, "INL-6", "unknown helper")
    if not h.pure:
        return NotInlined(name, "INL-6", "the helper is not pure")
    if h.result is Scalar.UNIT:
        return NotInlined(name, "INL-6", "the helper has no result")
    for n in iter_nodes(h.body):
        if isinstance(n, (Store, Barrier, Stop)):
            what = type(n).__name__.lower()
            return NotInlined(name, "INL-6", f"the helper's body has a {what}")
        if isinstance(n, Intrinsic) and n.name in THREAD_INTRINSICS:
            return NotInlined(name, "INL-6", f"the helper uses thread intrinsic {n.name}")
    if name in _on_cycle(table):
        return NotInlined(name, "INL-6", "the helper is on a call cycle")
    if tail_returns(h.body) is None:
        return NotInlined(name, "INL-5", "a return that does not end the helper's body")
    return None


def self_contained(helpers: Iterable[HelperFunc]) -> frozenset[str]:
    """The names of the self-contained helpers (INL-9), from the one effect summary
    (specs/effects.md, EFF-1, EFF-2)."""
    summary = helper_effects(_table(helpers).values())
    return frozenset(name for name, e in summary.items() if e.self_contained)


def is_self_contained(helper: HelperFunc, helpers: Iterable[HelperFunc]) -> bool:
    """INL-9: ``helper`` reads nothing but what its arguments name."""
    table = _table(helpers)
    table[helper.name] = helper
    return helper.name in self_contained(table.values())


# ------------------------------------------------------------- the rewriting itself


def _zero(t: Scalar) -> Const:
    if t is Scalar.BOOL:
        return Const(False, t)
    return Const(0.0 if t.is_float else 0, t)


def _bound_vars(s: Stmt) -> list[Var]:
    out: list[Var] = []
    for x in iter_stmts(s):
        if isinstance(x, (Let, For)) and x.var not in out:
            out.append(x.var)
    return out


def _names(node: Any) -> set[str]:
    names: set[str] = set()

    def see(v: Var) -> Var:
        names.add(v.name)
        return v

    map_node(node, var=see)
    return names


@attrs.define
class _Inliner:
    helpers: dict[str, HelperFunc]
    select: Select | None
    taken: set[str]
    report: list[NotInlined] = attrs.field(factory=list)
    count: int = 0
    _refusals: dict[str, NotInlined | None] = attrs.field(factory=dict)

    # -- names and reasons

    def fresh(self, base: str, t: Scalar | ArrayType, mutable: bool = False) -> Var:
        name = base
        for k in itertools.count(2):
            if name not in self.taken:
                break
            name = f"{base}_{k}"
        self.taken.add(name)
        return Var(name, fresh_id(), t, mutable)

    def note(self, r: NotInlined) -> None:
        if r not in self.report:
            self.report.append(r)

    def refusal(self, call: Call) -> NotInlined | None:
        if call.func not in self._refusals:
            self._refusals[call.func] = helper_refusal(call.func, self.helpers.values())
        r = self._refusals[call.func]
        if r is None:
            r = self._array_refusal(call)
        return None if r is None else attrs.evolve(r, loc=call.loc)

    def _array_refusal(self, call: Call) -> NotInlined | None:
        h = self.helpers[call.func]
        for p, a in zip(h.params, call.args, strict=True):
            if not isinstance(p.type, ArrayType):
                continue
            if not (isinstance(a, Ref) and isinstance(a.var.type, ArrayType)):
                return NotInlined(call.func, "INL-4", f"array argument '{p.name}' is not an array")
            at = a.var.type
            for k, n in enumerate(p.type.shape):
                if n is not None and (k >= at.rank or at.shape[k] != n):
                    return NotInlined(call.func, "INL-4",
                                      f"dummy '{p.name}' has extent {n} in dimension {k}, "
                                      "which the actual array is not known to have")
        return None

    # -- finding a call in an expression (INL-1, INL-7)

    def take_call(self, e: Expr, res_of: Callable[[Call], Var]) -> tuple[Expr, Call | None, Var]:
        """Replace the first inlinable call evaluated unconditionally in ``e`` by a fresh
        result variable; give the new expression, the call and the variable."""
        box: list[tuple[Call, Var]] = []

        def go(x: Expr) -> Expr:
            if box:
                return x
            match x:
                case Call(args=args):
                    # arguments first: their calls are evaluated before this one
                    new_args = tuple(go(a) for a in args)
                    if box:
                        return attrs.evolve(x, args=new_args)
                    if self.count < MAX_INLINED and (self.select is None or self.select(x)):
                        r = self.refusal(x)
                        if r is None:
                            v = res_of(x)
                            box.append((x, v))
                            return Ref(v, loc=x.loc)
                        self.note(r)
                    return x
                case Binary(op=op, lhs=lhs, rhs=rhs) if op.is_logical:
                    self.skip(rhs, f"right operand of {op.value}")
                    nl = go(lhs)
                    return x if nl is lhs else attrs.evolve(x, lhs=nl)
                case Cond(cond=c, if_true=t, if_false=f):
                    self.skip(t, "arm of a conditional expression")
                    self.skip(f, "arm of a conditional expression")
                    nc = go(c)
                    return x if nc is c else attrs.evolve(x, cond=nc)
            changes: dict[str, Any] = {}
            for fld in attrs.fields(type(x)):
                val = getattr(x, fld.name)
                if isinstance(val, tuple) and val and all(_is_expr(y) for y in val):
                    nv = tuple(go(y) for y in val)
                    if any(a is not b for a, b in zip(nv, val, strict=True)):
                        changes[fld.name] = nv
                elif _is_expr(val):
                    nv1 = go(val)
                    if nv1 is not val:
                        changes[fld.name] = nv1
            return attrs.evolve(x, **changes) if changes else x

        out = go(e)
        if box:
            return out, box[0][0], box[0][1]
        return e, None, _NO_VAR

    def skip(self, e: Expr, where: str) -> None:
        for c in _calls(e):
            if self.select is None or self.select(c):
                self.note(NotInlined(c.func, "INL-7", f"in the {where}, which need not be "
                                     "evaluated", c.loc))

    def skip_while(self, e: Expr) -> None:
        for c in _calls(e):
            if self.select is None or self.select(c):
                self.note(NotInlined(c.func, "INL-7", "in a while condition, evaluated at "
                                     "every iteration", c.loc))

    def res_var(self, call: Call) -> Var:
        h = self.helpers[call.func]
        body = tail_returns(h.body)
        straight = body is not None and _straight(body)
        return self.fresh(f"{call.func}_res", call.result, mutable=not straight)

    # -- statements (INL-1, INL-2)

    def stmt(self, s: Stmt) -> Stmt:
        match s:
            case Let(value=val, body=b):
                nv, call, res = self.take_call(val, self.res_var)
                if call is not None:
                    return self.stmt(self.block(call, res, attrs.evolve(s, value=nv)))
                return attrs.evolve(s, body=self.stmt(b))
            case Assign(value=val):
                nv, call, res = self.take_call(val, self.res_var)
                if call is not None:
                    return self.stmt(self.block(call, res, attrs.evolve(s, value=nv)))
                return s
            case Store(index=idx, value=val):
                for k, ix in enumerate(idx):
                    nix, call, res = self.take_call(ix, self.res_var)
                    if call is not None:
                        new_idx = (*idx[:k], nix, *idx[k + 1:])
                        return self.stmt(self.block(call, res, attrs.evolve(s, index=new_idx)))
                nv, call, res = self.take_call(val, self.res_var)
                if call is not None:
                    return self.stmt(self.block(call, res, attrs.evolve(s, value=nv)))
                return s
            case If(cond=c, then=t, else_=e):
                nc, call, res = self.take_call(c, self.res_var)
                if call is not None:
                    return self.stmt(self.block(call, res, attrs.evolve(s, cond=nc)))
                ne = self.stmt(e) if e is not None else None
                return attrs.evolve(s, then=self.stmt(t), else_=ne)
            case For(start=a, stop=z, body=b):
                na, call, res = self.take_call(a, self.res_var)
                if call is not None:
                    return self.stmt(self.block(call, res, attrs.evolve(s, start=na)))
                nz, call, res = self.take_call(z, self.res_var)
                if call is not None:
                    return self.stmt(self.block(call, res, attrs.evolve(s, stop=nz)))
                return attrs.evolve(s, body=self.stmt(b))
            case While(cond=c, body=b):
                self.skip_while(c)
                return attrs.evolve(s, body=self.stmt(b))
            case Seq(stmts=ss):
                return Seq(tuple(self.stmt(x) for x in ss), loc=s.loc)
            case Pragma(body=For(start=a, stop=z) as f):
                # the bounds' blocks go before the pragma, which stays on its loop
                na, call, res = self.take_call(a, self.res_var)
                if call is not None:
                    loop = attrs.evolve(s, body=attrs.evolve(f, start=na))
                    return self.stmt(self.block(call, res, loop))
                nz, call, res = self.take_call(z, self.res_var)
                if call is not None:
                    loop = attrs.evolve(s, body=attrs.evolve(f, stop=nz))
                    return self.stmt(self.block(call, res, loop))
                return attrs.evolve(s, body=self.stmt(f))
            case Pragma(body=b):
                return attrs.evolve(s, body=self.stmt(b))
        return s

    def block(self, call: Call, res: Var, after: Stmt) -> Stmt:
        """INL-2: bindings, renamed body computing ``res``, then ``after``."""
        self.count += 1
        h = self.helpers[call.func]
        body = tail_returns(h.body)
        assert body is not None
        binds: list[tuple[Var, Expr]] = []
        scalars: dict[Var, Expr] = {}
        arrays: dict[Var, Var] = {}
        for p, a in zip(h.params, call.args, strict=True):  # INL-3, INL-4
            if isinstance(p.type, ArrayType):
                assert isinstance(a, Ref)
                arrays[p] = a.var
            elif isinstance(a, (Ref, Const)):
                scalars[p] = a
            else:
                v = self.fresh(f"{call.func}_{p.name}", p.type)
                binds.append((v, a))
                scalars[p] = Ref(v, loc=a.loc)
        rename = {v: self.fresh(f"{call.func}_{v.name}", v.type, v.mutable)
                  for v in _bound_vars(body)}
        inner = _instantiate(body, rename, scalars, arrays)
        if res.mutable:
            out: Stmt = Let(res, _zero(call.result), seq(returns_to_assign(inner, res), after))
        else:
            out = _straight_to_let(inner, res, after)
        for v, a in reversed(binds):
            out = Let(v, a, out, loc=a.loc)
        return out


_NO_VAR = Var("$none", 0, Scalar.I32)


def _is_expr(x: object) -> bool:
    return isinstance(x, EXPR_TYPES)


def _straight(body: Stmt) -> bool:
    """A chain of ``let``s ending in ``return e``."""
    while isinstance(body, Let):
        body = body.body
    return isinstance(body, Return)


def _straight_to_let(body: Stmt, res: Var, after: Stmt) -> Stmt:
    if isinstance(body, Let):
        return Let(body.var, body.value, _straight_to_let(body.body, res, after), loc=body.loc)
    assert isinstance(body, Return) and body.value is not None
    return Let(res, body.value, after, loc=body.loc)


def _shift(e: Expr, delta: int) -> Expr:
    if delta == 0:
        return e
    t = type_of(e)
    assert isinstance(t, Scalar)
    if delta < 0:
        return Binary(BinaryOp.SUB, e, Const(-delta, t))
    return Binary(BinaryOp.ADD, e, Const(delta, t))


def _instantiate(body: Stmt, rename: Mapping[Var, Var], scalars: Mapping[Var, Expr],
                 arrays: Mapping[Var, Var]) -> Stmt:
    def var(v: Var) -> Var:
        return rename.get(v, v)

    def expr(e: Expr) -> Expr | None:
        match e:
            case Ref(var=v) if v in scalars:
                return scalars[v]
            case Ref(var=v) if v in arrays:
                return Ref(arrays[v], loc=e.loc)
            case Read(array=v, index=idx) if v in arrays:
                actual = arrays[v]
                assert isinstance(v.type, ArrayType) and isinstance(actual.type, ArrayType)
                shifted = tuple(_shift(ix, lo_a - lo_d) for ix, lo_a, lo_d in
                                zip(idx, actual.type.lower, v.type.lower, strict=True))
                return Read(actual, shifted, loc=e.loc)
            case Length(array=v) if v in arrays:
                return attrs.evolve(e, array=arrays[v])
        return None

    out: Stmt = map_node(body, expr=expr, var=var)
    return out


# ---------------------------------------------------------------------------- API


def inline_stmt(
    s: Stmt,
    helpers: Sequence[HelperFunc],
    select: Select | None = None,
    taken: Iterable[str] = (),
) -> tuple[Stmt, list[NotInlined]]:
    """Inline the calls in ``s`` (INL-1..INL-8); ``taken`` are names not to reuse."""
    inl = _Inliner(_table(helpers), select, set(taken) | _names(s))
    out = inl.stmt(s)
    return out, inl.report


def inline_call(
    s: Stmt, call: Call, helpers: Sequence[HelperFunc], taken: Iterable[str] = ()
) -> tuple[Stmt, NotInlined | None]:
    """Inline the one occurrence ``call`` (the node itself, by identity) of statement ``s``;
    give the new statement, or ``s`` and the reason it was not inlined."""
    if not any(c is call for c in _calls(s)):
        return s, NotInlined(call.func, "INL-1", "the call is not in the statement", call.loc)
    out, report = inline_stmt(s, helpers, lambda c: c is call, taken)
    if any(c is call for c in _calls(out)):
        return s, report[0] if report else NotInlined(call.func, "INL-1", "not inlined",
                                                      call.loc)
    return out, None


def inline_report(kernel: Kernel, select: Select | None = None) -> tuple[Kernel, list[NotInlined]]:
    """``kernel`` with its calls inlined, and the calls left in place (INL-10)."""
    taken = _names(kernel.body) | {v.name for v in (*kernel.params, *kernel.locals)}
    body, report = inline_stmt(kernel.body, kernel.helpers, select, taken)
    return attrs.evolve(kernel, body=body, helpers=helper_closure((body,), kernel.helpers)), report


def inline_calls(kernel: Kernel, select: Select | None = None) -> Kernel:
    """``kernel`` with every inlinable call inlined (INL-1..INL-10)."""
    return inline_report(kernel, select)[0]


def inline_module(m: Module, notes: list[str] | None = None) -> Module:
    """Every kernel of ``m`` with its calls inlined; helpers no kernel calls any more are
    dropped (those no kernel called before are kept). Calls left in place are described in
    ``notes``."""
    before = {c.func for k in m.kernels for c in _calls(k.body)}
    kernels: list[Kernel] = []
    for k in m.kernels:
        nk, report = inline_report(k)
        kernels.append(nk)
        if notes is not None:
            notes.extend(f"kernel {k.name}: {r}" for r in report)
    after: set[str] = set()
    for nk in kernels:
        after |= {h.name for h in nk.helpers}
    helpers = tuple(h for h in m.helpers if h.name in after or h.name not in before)
    return attrs.evolve(m, helpers=helpers, kernels=tuple(kernels))
