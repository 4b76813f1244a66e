"""What a name in a kernel refers to outside it: helpers, intrinsics, types, constants (FE-8).

Names not bound inside the function are looked up like Python would at the time of the
translation: the function's closure, then its module globals, then builtins. ``math.sqrt``
and the builtins ``min``/``max``/``abs`` are accepted as the math intrinsics of the same
name; ``len`` is ``length``.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Callable
from typing import Any

from sarek_py.frontend.intrinsics import STUBS, IntrinsicStub

MISSING: Any = object()

#: Python functions that stand for a kernel intrinsic
PY_EQUIVALENTS: dict[int, IntrinsicStub] = {
    id(builtins.min): STUBS["min"],
    id(builtins.max): STUBS["max"],
    id(builtins.abs): STUBS["abs"],
    id(builtins.len): STUBS["length"],
    **{id(getattr(math, n)): STUBS[n]
       for n in ("sqrt", "floor", "ceil", "exp", "log", "sin", "cos", "tan", "tanh", "pow")},
}


class Resolver:
    """Looks names up in a function's closure, globals and builtins."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.closure: dict[str, Any] = {}
        code = getattr(fn, "__code__", None)
        cells = getattr(fn, "__closure__", None) or ()
        if code is not None:
            for name, cell in zip(code.co_freevars, cells, strict=False):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # an empty cell: defined later in the enclosing function
                    pass
        self.globals: dict[str, Any] = getattr(fn, "__globals__", {})

    def name(self, name: str) -> Any:
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, MISSING)

    def node(self, node: ast.expr) -> Any:
        """The object a ``Name`` or dotted ``Attribute`` stands for, or ``MISSING``."""
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Attribute):
            base = self.node(node.value)
            if base is MISSING:
                return MISSING
            return getattr(base, node.attr, MISSING)
        return MISSING


def as_intrinsic(obj: Any) -> IntrinsicStub | None:
    """The intrinsic ``obj`` stands for, if any."""
    if isinstance(obj, IntrinsicStub):
        return obj
    try:
        return PY_EQUIVALENTS.get(id(obj))
    except TypeError:
        return None
