"""Scalar parameters whose values only become stored values (specs/frontend.md FE-93).

Fusion decides from where a kernel stores and reads, under which conditions, how often:
array indices, branch and loop conditions, loop bounds, thread counts, helper calls. A
scalar parameter that reaches none of them — its value only flows, through arithmetic and
``let``s, into the values stored (``t[i] <- a * x[i]``) — cannot change a decision: the
answer for one value of it is the answer for every value. :func:`value_only_params` finds
those parameters, conservatively: a use anywhere else (an index, a condition, a select's
condition, a loop bound, a call or intrinsic argument, an atomic, the kernel's launch
conditions, a variable assigned from it that is used so) makes a parameter decide.
A pipeline's plan cache (FE-80) keys such a scalar by its type and not its value, so a
time loop whose step value changes finds its plan again.
"""

from __future__ import annotations

from typing import cast

from sarek_py.ir.nodes import (
    STMT_TYPES,
    Assign,
    Binary,
    Cast,
    Cond,
    Const,
    Expr,
    Kernel,
    Let,
    Read,
    Ref,
    Stmt,
    Store,
    Unary,
    Var,
)
from sarek_py.ir.requires import FusionStep
from sarek_py.ir.visit import children, iter_exprs

#: a value's destination: ``None`` a decision (index, condition …), ``_STORED`` a stored
#: value, a :class:`Var` the variable it is bound or assigned to
_STORED = object()


class _Flow:
    def __init__(self) -> None:
        self.deciding: set[int] = set()  # ids of variables used where a decision reads
        self.into: dict[int, set[int]] = {}  # variable -> the variables its value reads

    def expr(self, e: Expr, sink: object) -> None:
        match e:
            case Ref(var=v):
                if sink is None:
                    self.deciding.add(v.id)
                elif isinstance(sink, Var):
                    self.into.setdefault(sink.id, set()).add(v.id)
            case Const():
                pass
            case Binary(lhs=a, rhs=b):
                self.expr(a, sink)
                self.expr(b, sink)
            case Unary(arg=a) | Cast(arg=a):
                self.expr(a, sink)
            case Read(index=idx):
                for i in idx:
                    self.expr(i, None)
            case Cond(cond=c, if_true=t, if_false=f):
                self.expr(c, None)
                self.expr(t, sink)
                self.expr(f, sink)
            case _:  # calls, intrinsics, atomics, lengths …: everything in them decides
                for x in iter_exprs(e):
                    if isinstance(x, Ref):
                        self.deciding.add(x.var.id)

    def stmt(self, s: Stmt) -> None:
        match s:
            case Store(index=idx, value=v):
                for i in idx:
                    self.expr(i, None)
                self.expr(v, _STORED)
            case Let(var=var, value=v, body=body):
                self.expr(v, var)
                self.stmt(body)
            case Assign(var=var, value=v):
                self.expr(v, var)
            case _:  # if, for, while, return …: their expressions decide
                for c in children(s):
                    if isinstance(c, STMT_TYPES):
                        self.stmt(cast(Stmt, c))
                    else:
                        self.expr(cast(Expr, c), None)


#: the answer per kernel object (by id, the kernel held so that its id stays its own); a
#: plain dict, emptied when full: asked at every launch of a pipeline (FE-82)
_CACHE: dict[int, tuple[Kernel, frozenset[int]]] = {}
_LIMIT = 1024


def value_only_params(k: Kernel) -> frozenset[int]:
    """The positions of ``k``'s scalar parameters whose values only become stored values
    (never read by a decision of fusion, FE-93); cached per kernel object."""
    hit = _CACHE.get(id(k))
    if hit is not None and hit[0] is k:
        return hit[1]
    if len(_CACHE) >= _LIMIT:
        _CACHE.clear()
    flow = _Flow()
    flow.stmt(k.body)
    for r in k.ranges:
        flow.expr(r, None)
    names = {p.name: p.id for p in k.params}
    if k.requires is not None:
        for step in k.requires.steps:
            if isinstance(step, FusionStep):
                for n in (step.count, *(step.threads or ())):
                    if isinstance(n, str) and n in names:
                        flow.deciding.add(names[n])
        for n in k.requires.within:
            flow.deciding.add(names.get(n, -1))
    deciding = set(flow.deciding)
    todo = list(deciding)
    while todo:
        for v in flow.into.get(todo.pop(), ()):
            if v not in deciding:
                deciding.add(v)
                todo.append(v)
    out = frozenset(i for i, p in enumerate(k.params)
                    if not p.is_array and p.id not in deciding)
    _CACHE[id(k)] = (k, out)
    return out


__all__ = ["value_only_params"]
