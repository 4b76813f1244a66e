"""What the translation of one function knows: its state, scopes and helper objects.

:class:`TranslatorState` holds what the expression, call, loop and statement parts of the
translator share: the source, the names of the enclosing Python scope, the helpers called,
the scoping of variables (FE-3) and the literal-initialised variables that may still take
their type from a later use (FE-5).
"""

from __future__ import annotations

import ast
from typing import Protocol, runtime_checkable

import attrs

from sarek_py.frontend.resolve import Resolver
from sarek_py.frontend.source import FrontendError, FunctionSource
from sarek_py.frontend.unsupported import describe
from sarek_py.ir.nodes import Expr, HelperFunc, Ref, Var
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar, Type


@runtime_checkable
class HelperLike(Protocol):
    """What a kernel needs of a ``@helper`` object it calls."""

    def helper_ir(self) -> HelperFunc: ...

    def helper_deps(self) -> tuple[HelperFunc, ...]: ...


@attrs.frozen
class DeadLoopVar:
    """A loop variable after its loop: Python keeps its last value, kernels do not (FE-6)."""

    line: int


Binding = Var | DeadLoopVar
Env = dict[str, Binding]


class Retype(Exception):
    """An unannotated variable initialised with a literal needs another type (FE-5)."""

    def __init__(self, var: Var, to: Scalar):
        super().__init__(var.name)
        self.var = var
        self.to = to


def is_literal(node: ast.expr) -> bool:
    """A number written in the source (``2``, ``-1.5``): its type comes from its context."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return is_literal(node.operand)
    return (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool))


def literal_is_float(node: ast.expr) -> bool:
    while isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, float)


class TranslatorState:
    """State shared by the expression and statement translation of one function."""

    def __init__(self, src: FunctionSource, resolver: Resolver, *, in_helper: bool):
        self.src = src
        self.resolver = resolver
        self.in_helper = in_helper
        self.helpers: dict[str, HelperFunc] = {}
        #: ids of unannotated variables initialised by a literal, -> literal is a float
        self.literal_init: dict[int, bool] = {}
        #: every name the function assigns somewhere (to explain scoping errors)
        self.assigned: set[str] = set()

    # ----------------------------------------------------------------- helpers

    def err(self, node: ast.AST, message: str) -> FrontendError:
        return self.src.error(node, message)

    def unsupported(self, node: ast.AST) -> FrontendError:
        return self.err(node, f"{describe(node)} is not supported in kernels")

    def scalar(self, e: Expr, node: ast.AST) -> Scalar:
        t = type_of(e)
        if isinstance(t, ArrayType):
            raise self.err(node, "an array cannot be used as a value (only indexed: a[i])")
        return t

    # ------------------------------------------------------------------- names

    def lookup(self, node: ast.Name, env: Env) -> Var:
        b = env.get(node.id)
        if isinstance(b, Var):
            return b
        if isinstance(b, DeadLoopVar):
            raise self.err(node, f"'{node.id}' is the variable of the loop at line {b.line}: "
                           "after a loop Python gives it the last value but a kernel does "
                           "not; copy the value to another variable inside the loop")
        if node.id in self.assigned:
            raise self.err(node, f"'{node.id}' is not defined here: kernels scope a variable "
                           "to the block that assigns it first; assign (or declare, as "
                           f"`{node.id}: f32`) it before that block")
        raise self.err(node, f"'{node.id}' is not defined")

    def expect(self, e: Expr, want: Type, node: ast.AST, what: str) -> None:
        t = type_of(e)
        if t != want:
            if (isinstance(e, Ref) and e.var.id in self.literal_init
                    and isinstance(want, Scalar) and want.is_numeric
                    and (want.is_float or not self.literal_init[e.var.id])):
                raise Retype(e.var, want)
            src = ast.unparse(node) if isinstance(node, ast.expr) else "x"
            raise self.err(node, f"{what} must be {want}, not {t}: kernels have no implicit "
                           f"conversion, cast it ({want}({src}))")
