"""The launch check of a kernel's conditions: a fused kernel's (specs/fusion-legality.md
LEG-14) and its conditions over scalar arguments (specs/launch.md LCH-25).

``Kernel.ranges`` holds ``bool`` expressions over the kernel's integer and ``bool``
scalar parameters that every launch must meet: a rows kernel (specs/tiling.md TIL-13)
runs only the iterations whose loop variable keeps the body's offsets of it inside
``i32``, so it requires its bounds within those limits (``hi_1 <= 2147483645``; the text
form writes ``requires range(...)``, TXT-35). :func:`range_problem` says why an
expression cannot be such a condition (the parser, the checker); :func:`check_requires`
evaluates each with the launch's scalar arguments, with the interpreter's operator
semantics, and refuses the launch (:class:`RangeRefused`, naming the rule, the condition
and the arguments' values) when one does not hold, before anything runs. These need
only the IR and are checked here.

The checker itself needs the fusion's legality analysis, a floor above this one: the
fusion package registers it (:func:`register_checker`) when it is imported, which
importing any part of ``sarek_py`` does. A kernel that carries conditions while no
checker is registered is refused, never run unchecked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from sarek_py.ir import interp_ops
from sarek_py.ir.diagnostics import LaunchError, SarekError
from sarek_py.ir.interp_ops import LaneFault
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Kernel,
    Ref,
    Unary,
    Var,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.requires import FusionRequires, ThreadStep
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import Scalar

Checker = Callable[[Kernel, Mapping[str, Any], int, int], None]
_CHECKERS: list[Checker] = []


def register_checker(check: Checker) -> None:
    """Install the function that checks a launch against ``Kernel.requires``."""
    _CHECKERS[:] = [check]


def check_requires(kernel: Kernel, args: Mapping[str, Any], threads: int, block: int,
                   shaped: object = None) -> None:
    """Refuse (raise a :class:`SarekError` naming the rule) a launch of ``kernel`` with
    ``threads`` threads in blocks of ``block`` and arguments ``args`` (numpy arrays or
    device buffers, scalars) that does not meet the kernel's launch conditions (LEG-14);
    ``shaped``: the grid or block shape of a launch in several dimensions, which a fused
    kernel with conditions is refused (the conditions are proved for 1-D launches).
    First, the conditions over the scalar arguments (LCH-25: ``RangeRefused``)."""
    check_ranges(kernel, args)
    if kernel.requires is None:
        return
    if kernel.requires.threadwise:
        _check_dims(kernel, kernel.requires, shaped)
    elif shaped is not None:
        raise SarekError(f"[LEG-14] kernel {kernel.name} is a fused kernel with launch "
                         "conditions: launch it in one dimension (threads and block), "
                         f"not with the grid or block shape {shaped}")
    if not _CHECKERS:
        raise SarekError(f"kernel {kernel.name} is a fused kernel with launch conditions, "
                         "and no checker of them is loaded (import sarek_py.fusion)")
    _CHECKERS[0](kernel, args, threads, block)


def _check_dims(kernel: Kernel, req: FusionRequires, shaped: object) -> None:
    """A thread-wise fused kernel runs on launches of at most the dimensions its proof
    took (LEG-30): every axis from there on has extent 1 in the grid and the block."""
    dims = min(s.dims for s in req.steps if isinstance(s, ThreadStep))
    shapes = shaped if isinstance(shaped, tuple) else ()
    for ext in shapes:
        if not isinstance(ext, tuple):
            continue
        for axis, n in enumerate(ext):
            if axis >= dims and n != 1:
                raise SarekError(
                    f"[LEG-30] kernel {kernel.name} is a thread-wise fusion proved for "
                    f"launches of {dims} dimension{'s' if dims > 1 else ''}; this launch "
                    f"has extent {n} along {'xyz'[axis]} (grid and block {shaped})")


#: the scalar types a condition computes in (integers and ``bool``; no float rounding)
_TYPES = (Scalar.I32, Scalar.I64, Scalar.BOOL)
#: the intrinsics a condition may call
_MATH = ("min", "max", "abs")


class RangeRefused(LaunchError):
    """A launch whose scalar arguments do not meet the kernel's ``range(...)``
    conditions (LCH-25); nothing ran. A host program's launch statement locates it."""


def range_problem(e: Expr, params: Iterable[Var]) -> tuple[str, Expr] | None:
    """Why ``e`` cannot be a launch condition of a kernel with ``params`` (the message
    and the part of ``e`` at fault), or ``None`` when it can: a ``bool`` expression of
    integer and ``bool`` literals, references to integer or ``bool`` scalar parameters,
    operators, conversions between those types, ``c ? a : b`` and ``min``/``max``/``abs``
    (LCH-25)."""
    ids = {p.id for p in params}

    def walk(x: Expr) -> tuple[str, Expr] | None:
        match x:
            case Const(type=t):
                return None if t in _TYPES else (f"a {t} literal", x)
            case Ref(var=v):
                if v.id not in ids:
                    return (f"{v.name} is not a parameter of the kernel", x)
                if v.type not in _TYPES:
                    return (f"parameter {v.name} is {v.type}, not an integer or bool "
                            "scalar", x)
                return None
            case Unary(arg=a):
                return walk(a)
            case Binary(lhs=a, rhs=b):
                return walk(a) or walk(b)
            case Cast(to=t, arg=a):
                return walk(a) if t in _TYPES else (f"a conversion to {t}", x)
            case Cond(cond=c, if_true=a, if_false=b):
                return walk(c) or walk(a) or walk(b)
            case Intrinsic(name=n, args=args) if n in _MATH:
                for a in args:
                    bad = walk(a)
                    if bad is not None:
                        return bad
                return None
            case Intrinsic(name=n):
                return (f"{n} (a condition reads only the launch's scalar arguments)", x)
        return (f"a {type(x).__name__} (a condition reads only the launch's scalar "
                "arguments)", x)

    bad = walk(e)
    if bad is not None:
        return bad
    t = _type(e)
    if t is not Scalar.BOOL:
        return (f"a launch condition is a bool expression, not {t}", e)
    return None


def _type(e: Expr) -> object:
    try:
        return type_of(e)
    except (AssertionError, TypeError, ValueError, KeyError):
        return None


def eval_condition(e: Expr, env: Mapping[str, np.generic]) -> bool:
    """The value of condition ``e`` (checked by :func:`range_problem`) with ``env`` the
    values of the parameters it reads, with the interpreter's operator semantics; an
    undefined operation raises :class:`~sarek_py.ir.interp_ops.LaneFault`."""
    with np.errstate(all="ignore"):
        return bool(_eval(e, env))


def _eval(e: Expr, env: Mapping[str, np.generic]) -> np.generic:
    match e:
        case Const(value=v, type=t):
            return _scalar(t.dtype.type(v))
        case Ref(var=v):
            return env[v.name]
        case Unary(op=op, arg=a):
            return _scalar(interp_ops.unary(op, _eval(a, env)))
        case Binary(op=BinaryOp.AND, lhs=a, rhs=b):
            return np.bool_(bool(_eval(a, env)) and bool(_eval(b, env)))
        case Binary(op=BinaryOp.OR, lhs=a, rhs=b):
            return np.bool_(bool(_eval(a, env)) or bool(_eval(b, env)))
        case Binary(op=op, lhs=a, rhs=b):
            return _scalar(interp_ops.binary(op, _eval(a, env), _eval(b, env), None))
        case Cast(to=t, arg=a):
            return _scalar(interp_ops.cast(_eval(a, env), t, None))
        case Cond(cond=c, if_true=a, if_false=b):
            return _eval(a, env) if bool(_eval(c, env)) else _eval(b, env)
        case Intrinsic(name=n, args=args):
            return _scalar(interp_ops.math(n, [_eval(a, env) for a in args]))
    raise AssertionError(f"not a launch condition: {type(e).__name__}")


def _scalar(v: Any) -> np.generic:
    out = v[()] if isinstance(v, np.ndarray) else v
    assert isinstance(out, np.generic)
    return out


def check_ranges(kernel: Kernel, args: Mapping[str, Any]) -> None:
    """Refuse (:class:`RangeRefused`) a launch of ``kernel`` whose scalar arguments
    ``args`` (by parameter name) do not meet each of ``kernel.ranges`` (LCH-25)."""
    if not kernel.ranges:
        return
    for cond in kernel.ranges:
        bad = range_problem(cond, kernel.params)  # (a kernel built without the checker)
        if bad is not None:
            raise RangeRefused(f"[LCH-25] kernel {kernel.name}: range(...) takes conditions "
                               f"over the launch's scalar arguments: {bad[0]}",
                               bad[1].loc or kernel.loc)
        names = _names(cond)
        env: dict[str, np.generic] = {}
        for v in names:
            if v.name not in args:
                raise LaunchError(f"kernel {kernel.name}: no argument for parameter "
                                  f"{v.name}, which its launch condition "
                                  f"range({print_expr(cond)}) reads", kernel.loc)
            env[v.name] = _value(kernel, v, args[v.name])
        try:
            ok = eval_condition(cond, env)
        except LaneFault as exc:
            raise RangeRefused(f"[LCH-25] kernel {kernel.name}: its launch condition "
                               f"range({print_expr(cond)}) cannot be evaluated with "
                               f"{_values(names, env)}: {exc.message}", kernel.loc) from None
        if not ok:
            raise RangeRefused(
                f"[LCH-25] kernel {kernel.name} requires range({print_expr(cond)}) of its "
                f"launch, and {_values(names, env)} here: the kernel is exact only for "
                "launches that meet it (a rows kernel skips the iterations whose loop "
                "variable is so near an end of i32 that an offset of it in the body "
                "would wrap, TIL-13); pass arguments that meet it, or launch the nest's "
                "flat kernel", kernel.loc)


def _names(e: Expr) -> list[Var]:
    out: dict[int, Var] = {}

    def walk(x: Expr) -> None:
        match x:
            case Ref(var=v):
                out.setdefault(v.id, v)
            case Unary(arg=a) | Cast(arg=a):
                walk(a)
            case Binary(lhs=a, rhs=b):
                walk(a)
                walk(b)
            case Cond(cond=c, if_true=a, if_false=b):
                walk(c)
                walk(a)
                walk(b)
            case Intrinsic(args=args):
                for a in args:
                    walk(a)
            case _:
                pass

    walk(e)
    return list(out.values())


def _values(names: list[Var], env: Mapping[str, np.generic]) -> str:
    if not names:
        return "it is false"
    parts = [f"{v.name} = {_show(env[v.name])}" for v in names]
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _show(v: np.generic) -> str:
    x = v.item()
    return ("true" if x else "false") if isinstance(x, bool) else str(x)


def _value(kernel: Kernel, v: Var, value: Any) -> np.generic:
    """The argument ``value`` of scalar parameter ``v`` as a numpy scalar of its type."""
    assert isinstance(v.type, Scalar)
    if isinstance(value, np.ndarray) or not isinstance(value, (int, bool, np.generic)):
        raise LaunchError(f"kernel {kernel.name}: the argument for scalar parameter "
                          f"{v.name} is not a scalar", kernel.loc)
    try:
        out = v.type.dtype.type(value)
    except (OverflowError, TypeError, ValueError):
        raise LaunchError(f"kernel {kernel.name}: the argument {value} for parameter "
                          f"{v.name} does not fit {v.type}", kernel.loc) from None
    if v.type is not Scalar.BOOL and int(out) != int(value):
        raise LaunchError(f"kernel {kernel.name}: the argument {value} for parameter "
                          f"{v.name} does not fit {v.type}", kernel.loc)
    assert isinstance(out, np.generic)
    return out


__all__ = ["Checker", "RangeRefused", "check_requires", "eval_condition", "range_problem",
           "register_checker"]
