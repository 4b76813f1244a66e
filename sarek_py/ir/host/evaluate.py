"""Host-side evaluation of a launch's scalar expressions (thread count, block size,
scalar arguments, workspace sizes, ``overwritten_if`` conditions) (LCH-2).

The host evaluates each once, at the launch, with the interpreter's operator semantics
(:mod:`sarek_py.ir.interp_ops` on numpy scalars). Variables are looked up by name in the
host environment; ``length(a, d)`` reads a host array's extent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sarek_py.ir import interp_ops
from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.interp_ops import LaneFault
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Ref,
    Unary,
)


def host_eval(e: Expr, env: Mapping[str, Any]) -> np.generic:
    """The value of scalar expression ``e`` in ``env`` (a numpy scalar of its type)."""
    try:
        with np.errstate(all="ignore"):
            return _eval(e, env)
    except LaneFault as exc:
        raise LaunchError(f"on the host: {exc.message}", e.loc) from None


def _eval(e: Expr, env: Mapping[str, Any]) -> np.generic:
    match e:
        case Const(value=v, type=t):
            return t.dtype.type(v)
        case Ref(var=v):
            if v.name not in env:
                raise LaunchError(f"host variable {v.name} has no value", e.loc)
            val = env[v.name]
            if isinstance(val, np.ndarray):
                raise LaunchError(f"host array {v.name} used as a scalar", e.loc)
            return v.scalar.dtype.type(val)
        case Length(array=a, dim=d):
            arr = env.get(a.name)
            if not isinstance(arr, np.ndarray):
                raise LaunchError(f"host array {a.name} is not allocated", e.loc)
            return np.int32(arr.shape[d])
        case Unary(op=op, arg=a):
            return _scalar(interp_ops.unary(op, _eval(a, env)))
        case Binary(op=BinaryOp.AND, lhs=lhs, rhs=rhs):
            return np.bool_(bool(_eval(lhs, env)) and bool(_eval(rhs, env)))
        case Binary(op=BinaryOp.OR, lhs=lhs, rhs=rhs):
            return np.bool_(bool(_eval(lhs, env)) or bool(_eval(rhs, env)))
        case Binary(op=op, lhs=lhs, rhs=rhs):
            return _scalar(interp_ops.binary(op, _eval(lhs, env), _eval(rhs, env), None))
        case Cast(to=t, arg=a):
            return _scalar(interp_ops.cast(_eval(a, env), t, None))
        case Cond(cond=c, if_true=t, if_false=f):
            return _eval(t, env) if bool(_eval(c, env)) else _eval(f, env)
        case Intrinsic(name=n, args=args) if n in ("min", "max", "abs"):
            return _scalar(interp_ops.math(n, [_eval(a, env) for a in args]))
    raise LaunchError(f"the host cannot evaluate {type(e).__name__} here", e.loc)


def _scalar(v: Any) -> np.generic:
    out = v[()] if isinstance(v, np.ndarray) else v
    assert isinstance(out, np.generic)
    return out
