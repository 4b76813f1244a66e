"""Printable names: rename binders whose name would capture another variable (TXT-31).

Variables are identified by id (IR-5); the text names them. A pass may leave a binder
(``let``, ``for``, a parameter, a local, a loop index, a procedure dummy) whose name is the
name of another variable that is used inside the binder's scope: printed as is, the text
would read that use as the binder (capture). :class:`Namer` walks the scopes the parser
builds and gives such a binder a fresh name (``x_1``, ``x_2``, … not used anywhere in what
is printed); a binder that captures nothing keeps its name, so text without capture
prints as written. Two different variables declared in one scope that requires distinct
names (parameters and locals, program declarations) are told apart the same way.

The host-program scopes are walked by :mod:`sarek_py.ir.host.names`, which uses
this :class:`Namer`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Break,
    Continue,
    Empty,
    For,
    HelperFunc,
    If,
    Kernel,
    Let,
    Pragma,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Var,
    While,
)
from sarek_py.ir.visit import free_vars, var_names

T = TypeVar("T")

Env = Mapping[str, Var]


class Namer:
    """The printed name of each variable (by id) for one item or program."""

    def __init__(self, *roots: object) -> None:
        self._roots = roots
        self._taken: set[str] | None = None
        self.names: dict[int, str] = {}
        self._ids: dict[int, tuple[object, frozenset[int]]] = {}

    # ------------------------------------------------------------------ queries
    def name(self, v: Var) -> str:
        return self.names.get(v.id, v.name)

    def ids(self, node: object) -> frozenset[int]:
        """The ids of every variable occurring in ``node`` (memoised per node object)."""
        if isinstance(node, Var):
            return frozenset((node.id,))
        key = id(node)
        hit = self._ids.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        out: set[int] = set()
        if isinstance(node, (tuple, list, frozenset)):
            for x in node:
                out |= self.ids(x)
        elif attrs.has(type(node)):
            for f in attrs.fields(type(node)):  # type: ignore[arg-type]
                if f.name != "loc":
                    out |= self.ids(getattr(node, f.name))
        res = frozenset(out)
        self._ids[key] = (node, res)
        return res

    def fresh(self, base: str) -> str:
        """``base_K``, the smallest ``K >= 1`` naming no variable of the roots and no name
        given before (the names in use are collected at the first renaming)."""
        if self._taken is None:
            self._taken = var_names(*self._roots)
        k = 1
        while f"{base}_{k}" in self._taken or f"{base}_{k}" in THREAD_INTRINSICS:
            k += 1
        name = f"{base}_{k}"
        self._taken.add(name)
        return name

    # ------------------------------------------------------------------ binding
    def bind(self, env: Env, v: Var, region: Iterable[object],
             scope: dict[str, Var] | None = None) -> dict[str, Var]:
        """``env`` with ``v`` bound over ``region`` (what the binder's scope holds).

        ``v`` is renamed when its printed name is the name of another variable visible in
        ``env`` that ``region`` uses (capture), or, with ``scope`` (the names of a scope
        whose declarations must differ), when another variable of the scope has it."""
        n = self.name(v)
        other = env.get(n)
        clash = scope is not None and n in scope and scope[n] != v
        if not clash and other is not None and other != v:
            clash = any(other.id in self.ids(r) for r in region)
        if clash:
            n = self.fresh(v.name)
            self.names[v.id] = n
        out = dict(env)
        out[n] = v
        if scope is not None:
            scope[n] = v
        return out

    def stmt(self, s: Stmt, env: Env) -> None:
        """Walk a kernel statement in ``env`` (the variables visible by printed name)."""
        match s:
            case Let(var=v, body=body):
                self.stmt(body, self.bind(env, v, (body,)))
            case For(var=v, body=body):
                self.stmt(body, self.bind(env, v, (body,)))
            case Seq(stmts=ss):
                for x in ss:
                    self.stmt(x, env)
            case If(then=t, else_=e):
                self.stmt(t, env)
                if e is not None:
                    self.stmt(e, env)
            case While(body=b) | Pragma(body=b):
                self.stmt(b, env)
            case (Assign() | Store() | Return() | Barrier() | Empty() | Stop() | Break()
                  | Continue()):
                pass  # no binder
            case _:
                raise TypeError(f"not a statement: {s!r}")

    def params(self, env: Env, params: Iterable[Var], rest: tuple[object, ...],
               scope: dict[str, Var]) -> dict[str, Var]:
        """Declarations of one distinct scope, each bound over the later ones and ``rest``."""
        ps = list(params)
        out = dict(env)
        for k, p in enumerate(ps):
            out = self.bind(out, p, (tuple(ps[k + 1:]), *rest), scope)
        return out

    def kernel(self, k: Kernel) -> None:
        scope: dict[str, Var] = {}
        env = self.params({}, (*k.params, *k.locals), (k.body,), scope)
        self.stmt(k.body, env)

    def helper(self, h: HelperFunc) -> None:
        env = self.params({}, h.params, (h.body,), {})
        self.stmt(h.body, env)

    # ------------------------------------------------------------------ applying
    def apply(self, node: T, skip: frozenset[str] = frozenset()) -> T:
        """``node`` with every variable given its printed name (fields named in ``skip``
        are left as they are)."""
        if not self.names:
            return node
        return _apply(node, self.names, skip)  # type: ignore[no-any-return]


def _apply(x: Any, names: Mapping[int, str], skip: frozenset[str]) -> Any:
    if isinstance(x, Var):
        n = names.get(x.id)
        return x if n is None or n == x.name else attrs.evolve(x, name=n)
    if isinstance(x, tuple):
        items = tuple(_apply(y, names, skip) for y in x)
        return x if all(a is b for a, b in zip(items, x, strict=True)) else items
    if not attrs.has(type(x)):
        return x
    changes = {}
    for f in attrs.fields(type(x)):
        if f.name == "loc" or f.name in skip:
            continue
        v = getattr(x, f.name)
        nv = _apply(v, names, skip)
        if nv is not v:
            changes[f.name] = nv
    return attrs.evolve(x, **changes) if changes else x


def printable_stmt(s: Stmt, outer: Env | None = None) -> Stmt:
    """``s`` with binders renamed so that no use of a variable bound outside it (its free
    variables, or the variables of ``outer``) is captured."""
    env: dict[str, Var] = dict(outer) if outer is not None else _free_env(s)
    namer = Namer(s, *env.values())
    namer.stmt(s, env)
    return namer.apply(s)


def _free_env(s: Stmt) -> dict[str, Var]:
    return {v.name: v for v in sorted(free_vars(s), key=lambda v: v.id)}


def printable_kernel(k: Kernel) -> Kernel:
    namer = Namer(k)
    namer.kernel(k)
    return namer.apply(k, frozenset({"helpers"}))


def printable_helper(h: HelperFunc) -> HelperFunc:
    namer = Namer(h)
    namer.helper(h)
    return namer.apply(h)


__all__ = ["Namer", "printable_helper", "printable_kernel", "printable_stmt"]
