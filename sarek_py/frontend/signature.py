"""Annotations and parameters of a kernel or helper function (FE-2).

An annotation is resolved in the function's scope, never evaluated: ``Vec[f32]``,
``Vec2[f64]``, ``Vec3[i32]`` are global arrays, ``f32`` … ``boolean`` scalars. String
annotations (``from __future__ import annotations``) are parsed first.
"""

from __future__ import annotations

import ast
from typing import Any

from sarek_py.frontend.annotations import ArrayMarker, ScalarMarker, Vec
from sarek_py.frontend.resolve import Resolver
from sarek_py.frontend.source import FunctionSource
from sarek_py.ir.nodes import Var, fresh_id
from sarek_py.ir.types import Scalar, Type


def is_none(node: ast.expr) -> bool:
    """``-> None``."""
    return isinstance(node, ast.Constant) and node.value is None


def annotation_object(src: FunctionSource, r: Resolver, node: ast.expr) -> Any:
    """The marker an annotation stands for (``MISSING`` or another object if none)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            parsed = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            raise src.error(node, f"cannot read the annotation {node.value!r}") from None
        return annotation_object(src, r, ast.copy_location(parsed, node))
    if isinstance(node, ast.Subscript):
        base = r.node(node.value)
        item = annotation_object(src, r, node.slice)
        if isinstance(base, type) and issubclass(base, Vec) and isinstance(item, ScalarMarker):
            return base.__class_getitem__(item)
        raise src.error(node, f"unknown annotation `{ast.unparse(node)}`: use Vec[t], "
                        "Vec2[t], Vec3[t] or a scalar type (f32, f64, i32, i64, boolean)")
    return r.node(node)


def scalar_annotation(src: FunctionSource, r: Resolver, node: ast.expr, what: str) -> Scalar:
    """The scalar type an annotation names, or a located error about ``what``."""
    obj = annotation_object(src, r, node)
    if not isinstance(obj, ScalarMarker):
        raise src.error(node, f"{what} must be a scalar type (f32, f64, i32, i64, boolean), "
                        f"not `{ast.unparse(node)}`")
    return obj.scalar


def parameters(src: FunctionSource, r: Resolver, kind: str) -> tuple[Var, ...]:
    """Fresh variables for the parameters of ``src``'s function (a ``kind``: kernel/helper)."""
    a = src.tree.args
    for extra, what in ((a.vararg, "*args"), (a.kwarg, "**kwargs")):
        if extra is not None:
            raise src.error(extra, f"{what} is not supported in a {kind}'s parameters")
    if a.kwonlyargs or a.posonlyargs:
        node = (a.kwonlyargs or a.posonlyargs)[0]
        raise src.error(node, "keyword-only and positional-only parameters are not "
                        f"supported in a {kind}")
    if a.defaults:
        raise src.error(a.defaults[0], f"default values are not supported in a {kind}'s "
                        "parameters")
    params = []
    for arg in a.args:
        if arg.annotation is None:
            raise src.error(arg, f"parameter '{arg.arg}' needs a type annotation (Vec[f32], "
                            "f32, i32 …)")
        obj = annotation_object(src, r, arg.annotation)
        t: Type
        if isinstance(obj, ArrayMarker):
            t = obj.type
        elif isinstance(obj, ScalarMarker) and obj.scalar is not Scalar.UNIT:
            t = obj.scalar
        else:
            raise src.error(arg.annotation, "unknown parameter type "
                            f"`{ast.unparse(arg.annotation)}`: use Vec[t], Vec2[t], Vec3[t] "
                            "or a scalar type (f32, f64, i32, i64, boolean)")
        params.append(Var(arg.arg, fresh_id(), t))
    return tuple(params)
