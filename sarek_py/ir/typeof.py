"""The type of an expression, read off its nodes (IR-7).

``type_of`` assumes a well-typed expression (the checker's job, :mod:`typecheck`); on an
ill-typed one it returns what the node would have if it were well typed.
"""

from __future__ import annotations

from collections import OrderedDict

from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Atomic,
    Binary,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Read,
    Ref,
    Unary,
    UnaryOp,
)
from sarek_py.ir.types import ArrayType, Scalar, Type

#: the types of recently asked compound expressions, by identity (the node is kept with
#: its type, so its id stays valid): asking for the type of each level of a deep chain
#: (`- - - … x`, a long sum) is then linear, not quadratic (TXT-32)
_RECENT: OrderedDict[int, tuple[Expr, Type]] = OrderedDict()
_RECENT_SIZE = 4096


def type_of(e: Expr) -> Type:
    if not isinstance(e, Unary | Binary | Cond | Intrinsic):
        return _type_of(e)
    hit = _RECENT.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    t = _type_of(e)
    _RECENT[id(e)] = (e, t)
    if len(_RECENT) > _RECENT_SIZE:
        _RECENT.popitem(last=False)
    return t


def _type_of(e: Expr) -> Type:
    match e:
        case Const(type=t):
            return t
        case Ref(var=v):
            return v.type
        case Unary(op=UnaryOp.NOT):
            return Scalar.BOOL
        case Unary(arg=a):
            return type_of(a)
        case Binary(op=op, lhs=lhs):
            if op.is_compare or op.is_logical:
                return Scalar.BOOL
            return type_of(lhs)
        case Read(array=a):
            assert isinstance(a.type, ArrayType)
            return a.type.elem
        case Cast(to=t):
            return t
        case Cond(if_true=t):
            return type_of(t)
        case Intrinsic(name=n, args=args):
            if n in THREAD_INTRINSICS:
                return Scalar.I32
            if n in MATH and args:
                return type_of(args[0])
            return Scalar.UNIT
        case Call(result=r):
            return r
        case Length():
            return Scalar.I32
        case Atomic(array=a):
            assert isinstance(a.type, ArrayType)
            return a.type.elem
    raise TypeError(f"not an expression: {e!r}")


def scalar_type_of(e: Expr) -> Scalar:
    """The type of an expression that must be a scalar."""
    t = type_of(e)
    if isinstance(t, ArrayType):
        raise TypeError("array used as a scalar value")
    return t
