"""Generic traversal of the IR: fold, map, substitution, renaming (IR-15, IR-16).

The mappers are generic over the attrs fields of the nodes, so a new node kind needs no
change here. A mapper rebuilds a node only when one of its children changed, so the
identity of unchanged subtrees is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from sarek_py.ir.nodes import (
    EXPR_TYPES,
    STMT_TYPES,
    Call,
    Expr,
    For,
    HelperFunc,
    If,
    Kernel,
    Let,
    Module,
    Pragma,
    Ref,
    Return,
    Seq,
    Stmt,
    Var,
)

N = TypeVar("N")


def _is_node(x: object) -> bool:
    return isinstance(x, EXPR_TYPES) or isinstance(x, STMT_TYPES)


def children(node: Expr | Stmt) -> Iterator[Any]:
    """The expression and statement children of a node, in field order."""
    for f in attrs.fields(type(node)):
        v = getattr(node, f.name)
        if _is_node(v):
            yield v
        elif isinstance(v, tuple):
            for x in v:
                if _is_node(x):
                    yield x


def iter_exprs(node: Expr | Stmt) -> Iterator[Expr]:
    """Every expression in ``node`` (sub-expressions included), pre-order."""
    if isinstance(node, EXPR_TYPES):
        yield node  # type: ignore[misc]
    for c in children(node):
        yield from iter_exprs(c)


def iter_nodes(node: Expr | Stmt) -> Iterator[Expr | Stmt]:
    """Every statement and expression in ``node``, pre-order."""
    yield node
    for c in children(node):
        yield from iter_nodes(c)


def var_names(*nodes: object) -> set[str]:
    """The name of every variable anywhere in ``nodes`` (IR nodes, kernels, and any other
    ``attrs`` tree over them, such as a host program): declared, bound or only used. What
    a new name must avoid for the printed text to read back the same."""
    out: set[str] = set()
    stack: list[object] = list(nodes)
    while stack:
        y = stack.pop()
        if isinstance(y, Var):
            out.add(y.name)
        elif isinstance(y, (tuple, frozenset)):
            stack.extend(y)
        elif attrs.has(type(y)):
            stack.extend(getattr(y, f.name) for f in attrs.fields(type(y))  # type: ignore[arg-type]
                         if f.name != "loc")
    return out


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base`` with ``_`` in front until no name in ``taken`` is it; the
    name is added to ``taken``."""
    name = base
    while name in taken:
        name = "_" + name
    taken.add(name)
    return name


def fold(f: Callable[[N, Expr | Stmt], N], acc: N, node: Expr | Stmt) -> N:
    """``f`` applied to every node, pre-order, threading ``acc``."""
    for n in iter_nodes(node):
        acc = f(acc, n)
    return acc


def map_node(
    node: N,
    expr: Callable[[Expr], Expr | None] | None = None,
    stmt: Callable[[Stmt], Stmt | None] | None = None,
    var: Callable[[Var], Var] | None = None,
) -> N:
    """Rebuild ``node`` bottom-up.

    ``expr``/``stmt`` are called on each rebuilt expression/statement and may return a
    replacement (or ``None`` to keep it); ``var`` maps every variable occurrence, binders
    and array names included.
    """

    def go(x: Any) -> Any:
        if isinstance(x, Var):
            return var(x) if var is not None else x
        if isinstance(x, tuple):
            items = tuple(go(y) for y in x)
            return x if all(a is b for a, b in zip(items, x, strict=True)) else items
        if not (_is_node(x) or isinstance(x, (HelperFunc, Kernel, Module))):
            return x
        changes = {}
        for f in attrs.fields(type(x)):
            v = getattr(x, f.name)
            nv = go(v)
            if nv is not v:
                changes[f.name] = nv
        out = attrs.evolve(x, **changes) if changes else x
        if expr is not None and isinstance(out, EXPR_TYPES):
            r = expr(out)  # type: ignore[arg-type]
            if r is not None:
                return r
        if stmt is not None and isinstance(out, STMT_TYPES):
            r2 = stmt(out)  # type: ignore[arg-type]
            if r2 is not None:
                return r2
        return out

    result: N = go(node)
    return result


def substitute(node: N, mapping: Mapping[Var, Expr]) -> N:
    """Replace each reference to a variable of ``mapping`` by its expression."""
    if not mapping:
        return node

    def e(x: Expr) -> Expr | None:
        if isinstance(x, Ref) and x.var in mapping:
            return mapping[x.var]
        return None

    return map_node(node, expr=e)


def free_vars(node: Expr | Stmt) -> set[Var]:
    """Variables used in ``node`` and not bound in it (arrays included)."""
    used: set[Var] = set()
    bound: set[Var] = set()
    for n in iter_nodes(node):
        if isinstance(n, (Let, For)):
            bound.add(n.var)
        for f in attrs.fields(type(n)):
            v = getattr(n, f.name)
            if isinstance(v, Var):
                used.add(v)
    return used - bound


@attrs.frozen
class RenameCtx:
    """How :func:`rename` changes names (the seed's ``Ir_rename.ctx``).

    Each variable not in ``mapping`` gets ``prefix`` before its name and ``id_shift``
    added to its id; a variable in ``mapping`` (by id) becomes the mapped variable.
    """

    prefix: str = ""
    id_shift: int = 0
    mapping: Mapping[int, Var] = attrs.field(factory=dict)

    def var(self, v: Var) -> Var:
        if v.id in self.mapping:
            return self.mapping[v.id]
        return Var(self.prefix + v.name, v.id + self.id_shift, v.type, v.mutable)


def rename(node: N, ctx: RenameCtx) -> N:
    """``node`` with every variable renamed by ``ctx`` (helper function names unchanged)."""
    return map_node(node, var=ctx.var)


def max_var_id(node: Expr | Stmt | Kernel | HelperFunc) -> int:
    """The largest variable id in ``node`` (0 when it has none)."""
    best = 0

    def see(v: Var) -> Var:
        nonlocal best
        best = max(best, v.id)
        return v

    map_node(node, var=see)
    return best


def canonical_ids(node: N, start: int = 1) -> N:
    """``node`` with variable ids renumbered in order of first appearance.

    Two trees equal up to variable ids have equal canonical forms (used by round-trip
    tests: ``canonical_ids(parse(print(k))) == canonical_ids(k)``).
    """
    table: dict[int, int] = {}

    def renum(v: Var) -> Var:
        if v.id not in table:
            table[v.id] = start + len(table)
        return Var(v.name, table[v.id], v.type, v.mutable)

    return map_node(node, var=renum)


def ends_every_path(s: Stmt, ends: tuple[type, ...] = (Return,)) -> bool:
    """Whether every path through ``s`` ends in a statement of a kind in ``ends``.

    A sequence ends when one of its statements does, an ``if`` only with both branches,
    loops never (they may run no iteration).
    """
    match s:
        case Seq(stmts=ss):
            return any(ends_every_path(x, ends) for x in ss)
        case If(then=t, else_=e):
            return e is not None and ends_every_path(t, ends) and ends_every_path(e, ends)
        case Let(body=b) | Pragma(body=b):
            return ends_every_path(b, ends)
    return isinstance(s, ends)


def helper_closure(
    roots: Iterable[Expr | Stmt], helpers: Sequence[HelperFunc]
) -> tuple[HelperFunc, ...]:
    """The helpers of ``helpers`` that ``roots`` call, directly or through one another,
    in the order of ``helpers``; calls of names not in ``helpers`` are ignored."""
    table = {h.name: h for h in helpers}
    used: set[str] = set()
    todo = [e.func for r in roots for e in iter_exprs(r) if isinstance(e, Call)]
    while todo:
        n = todo.pop()
        if n in used or n not in table:
            continue
        used.add(n)
        todo.extend(e.func for e in iter_exprs(table[n].body) if isinstance(e, Call))
    return tuple(h for h in helpers if h.name in used)
