"""What a host expression's value depends on, so that an unchanged input gives the previous
value without evaluating again (specs/host-program.md HP-13, specs/offload.md OFF-13).

An expression whose value depends only on integer or ``bool`` scalar variables and on array
extents (``length``) — no array element read, no float variable (whose ``-0.0`` equals
``0.0`` but may not give the same result), no bare array — is a function of the key
:func:`memo_key` builds: each input's type and value (an array's shape). Equal keys give
bitwise equal results, since host evaluation is pure. The host interpreter keeps the last
value of each such expression (:class:`Memo`); a launch site keys its whole launch on the
union of its expressions' inputs (:mod:`sarek_py.host.launch_site`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from sarek_py.host.frame import Frame
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Expr, Length, Read, Ref, Var
from sarek_py.ir.visit import iter_nodes

#: an input of a key: the variable, and whether the key holds its shape (an array whose
#: extents are read) rather than its type and value
Input = tuple[Var, bool]


def memo_inputs(exprs: Iterable[Expr]) -> tuple[Input, ...] | None:
    """The inputs the values of ``exprs`` depend on, in a fixed order, or ``None`` when
    one of them reads an array element, a float variable or a bare array (no key)."""
    inputs: dict[Var, bool] = {}
    for e in exprs:
        for n in iter_nodes(e):
            if isinstance(n, Read):
                return None
            if isinstance(n, Length):
                inputs[n.array] = True
            elif isinstance(n, Ref):
                if n.var.is_array or n.var.scalar.is_float:
                    return None
                inputs.setdefault(n.var, False)
    return tuple(inputs.items())


def memo_key(inputs: tuple[Input, ...], f: Frame) -> tuple[Any, ...]:
    """The key of ``inputs`` in frame ``f``: per scalar its type and value, per array its
    shape (``None`` while it is not allocated)."""
    out: list[Any] = []
    for v, is_array in inputs:
        x = f.get_var(v)
        if is_array:
            out.append(x.shape if isinstance(x, np.ndarray) else x)
        else:
            out.append(type(x))
            out.append(x)
    return tuple(out)


#: each expression's inputs, found once per expression object (the IR is immutable), not
#: once per run of a program
_INPUTS: IdentityCache[Expr, tuple[Input, ...] | None] = \
    IdentityCache(lambda e: memo_inputs((e,)), 8192)


@attrs.define(eq=False)
class Memo:
    """The last evaluation of one expression (``inputs`` is ``None`` for an expression that
    is always evaluated)."""

    expr: Expr
    inputs: tuple[Input, ...] | None
    last_key: tuple[Any, ...] | None = None
    last_value: Any = None

    @staticmethod
    def of(e: Expr) -> Memo:
        return Memo(e, _INPUTS.get(e))

    def key(self, f: Frame) -> tuple[Any, ...]:
        assert self.inputs is not None
        return memo_key(self.inputs, f)


__all__ = ["Memo", "memo_inputs", "memo_key"]
