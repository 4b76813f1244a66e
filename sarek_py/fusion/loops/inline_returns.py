"""Bringing a helper's returns to the end of its body (specs/inlining.md, INL-5).

A helper body can be inlined when every ``return`` is in *tail position*: it ends
straight-line code, or both arms of an ``if`` that ends the body. :func:`tail_returns`
rewrites ``if c then (… return a) ; rest`` to ``if c then (… return a) else (rest)``
(exact: ``rest`` runs exactly when the ``then`` arm did not return) and gives ``None``
when some ``return`` stays elsewhere. :func:`returns_to_assign` then replaces each tail
``return e`` by an assignment of the result variable.
"""

from __future__ import annotations

from sarek_py.ir.nodes import (
    Assign,
    Break,
    Continue,
    For,
    If,
    Let,
    Pragma,
    Return,
    Seq,
    Stmt,
    Var,
    While,
    iter_stmts,
    seq,
)
from sarek_py.ir.visit import ends_every_path


def _has_return(s: Stmt) -> bool:
    return any(isinstance(x, Return) for x in iter_stmts(s))


def _tail_seq(ss: list[Stmt]) -> Stmt | None:
    """Normal form of the statements ``ss`` run in order up to the end of the body."""
    for k, s in enumerate(ss):
        rest = ss[k + 1:]
        if not rest:
            last = _tail_one(s)
            return None if last is None else seq(*ss[:k], last)
        if isinstance(s, If) and _has_return(s):
            t_ret = ends_every_path(s.then)
            e_ret = s.else_ is not None and ends_every_path(s.else_)
            if t_ret and not e_ret:
                tail = _tail_seq([s.else_, *rest] if s.else_ is not None else rest)
                head = _tail_one(s.then)
                if tail is None or head is None:
                    return None
                return seq(*ss[:k], If(s.cond, head, tail, loc=s.loc))
            if e_ret and not t_ret and s.else_ is not None:
                tail = _tail_seq([s.then, *rest])
                head = _tail_one(s.else_)
                if tail is None or head is None:
                    return None
                return seq(*ss[:k], If(s.cond, tail, head, loc=s.loc))
            return None
        if isinstance(s, Let):
            body = _tail_seq([s.body, *rest])
            if body is None:
                return None
            return seq(*ss[:k], Let(s.var, s.value, body, loc=s.loc))
        if _has_return(s):
            return None  # a return followed by more code, or in a loop
    return seq()


def _tail_one(s: Stmt) -> Stmt | None:
    match s:
        case Return():
            return s
        case Seq(stmts=ss):
            return _tail_seq(list(ss))
        case If(cond=c, then=t, else_=e):
            if not _has_return(s):
                return s
            nt = _tail_one(t)
            ne = _tail_one(e) if e is not None else None
            if nt is None or (e is not None and ne is None):
                return None
            return If(c, nt, ne, loc=s.loc)
        case Let(var=v, value=val, body=b):
            nb = _tail_one(b)
            return None if nb is None else Let(v, val, nb, loc=s.loc)
        case Pragma(options=o, body=b):
            nb = _tail_one(b)
            return None if nb is None else Pragma(o, nb, loc=s.loc)
        case For() | While():
            # its own break/continue stay inside it, wherever it is inlined (IR-32)
            return None if _has_return(s) else s
        case Break() | Continue():
            return None  # outside a loop of the helper: not a checked body (IR-32)
    return s


def tail_returns(body: Stmt) -> Stmt | None:
    """``body`` with every ``return`` in tail position and returning on every path, or
    ``None`` when that cannot be done exactly."""
    out = _tail_one(body)
    if out is None or not ends_every_path(out):
        return None
    return out


def returns_to_assign(body: Stmt, result: Var) -> Stmt:
    """Each (tail) ``return e`` of ``body`` becomes ``result := e``."""
    match body:
        case Return(value=v):
            assert v is not None
            return Assign(result, v, loc=body.loc)
        case Seq(stmts=ss):
            return seq(*ss[:-1], returns_to_assign(ss[-1], result))
        case If(cond=c, then=t, else_=e):
            ne = returns_to_assign(e, result) if e is not None else None
            return If(c, returns_to_assign(t, result), ne, loc=body.loc)
        case Let(var=v, value=val, body=b):
            return Let(v, val, returns_to_assign(b, result), loc=body.loc)
        case Pragma(options=o, body=b):
            return Pragma(o, returns_to_assign(b, result), loc=body.loc)
    return body
