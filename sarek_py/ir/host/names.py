"""Printable names of a host program (TXT-31, HP-16).

The scopes of a host program as :class:`~sarek_py.ir.host.text.HostParser` builds
them: the program's declarations (distinct names); a procedure's dummies and locals
(distinct, inside the program's scope); a sequential loop's variable; a parallel loop's
indices and private locals (distinct, inside the enclosing host scope); the ``let`` and
``for`` binders of a parallel loop's body (kernel scopes inside it). A binder whose name
would capture another variable used in its scope (a host scalar moved into a loop body by
a pass, under a ``let``, a loop index or a dummy of the same name) gets a fresh name;
:func:`printable_program` returns the program with those names, which prints as text that
reads back to a program with the same meaning.
"""

from __future__ import annotations

from sarek_py.ir.host.program import (
    Block,
    HFor,
    HIf,
    HostStmt,
    HWhile,
    ParFor,
    Procedure,
    Program,
)
from sarek_py.ir.nodes import Var
from sarek_py.ir.print_names import Env, Namer


def _walk(namer: Namer, s: HostStmt, env: Env) -> None:
    match s:
        case Block(stmts=ss):
            for x in ss:
                _walk(namer, x, env)
        case HIf(then=t, else_=e):
            _walk(namer, t, env)
            if e is not None:
                _walk(namer, e, env)
        case HWhile(body=body):
            _walk(namer, body, env)
        case HFor(var=v, body=body):
            _walk(namer, body, namer.bind(env, v, (body,)))
        case ParFor(indices=ixs, body=body, locals=locs):
            scope: dict[str, Var] = {}
            inner = namer.params(env, (ix.var for ix in ixs), (locs, body), scope)
            inner = namer.params(inner, locs, (body,), scope)
            namer.stmt(body, inner)


def _proc(namer: Namer, p: Procedure, env: Env) -> None:
    scope: dict[str, Var] = {}
    inner = namer.params(env, (q.var for q in p.params), (p.decls, p.body), scope)
    inner = namer.params(inner, (d.var for d in p.decls), (p.decls, p.body), scope)
    _walk(namer, p.body, inner)


def printable_program(p: Program) -> Program:
    """``p`` with every capturing binder renamed (helpers and kernels are printed, and
    renamed, as items of their own)."""
    namer = Namer(p.decls, p.procedures, p.body)
    scope: dict[str, Var] = {}
    env = namer.params({}, (d.var for d in p.decls), (p.procedures, p.body), scope)
    for proc in p.procedures:
        _proc(namer, proc, env)
    _walk(namer, p.body, env)
    skip = frozenset({"kernel", "helpers", "kernels"})
    return namer.apply(p, skip)
