"""Where the emitter may test the launch's thread count (specs/codegen.md, CG-21).

The C launch rounds the thread count up to whole blocks, so the emitted kernel sends the
threads numbered past the count back (CG-9). It does so at the start of the body, unless
the body opens with its own guard: leading ``let``s (and ``if``s of them) that only
compute scalars, then ``if c then return``. The emitter then tests the count in that
guard, ``if (id >= count || c) return;``, and a thread past the count runs the leading
statements first (not ``c``: C's ``||`` stops at the count). One early return instead of two is what lets PoCL's work-group
vectorizer keep the kernel's loads contiguous (measured: a rows kernel of the
advection-diffusion example runs about twice as fast).

That is only sound when running the leading statements can do nothing a program could
see, for any thread number: :func:`speculation_guard` accepts them only when they read no
memory, write only their own scalars, call nothing, and cannot be undefined in C: an
integer ``/`` or ``%`` needs a divisor the range analysis proves positive, a shift a
constant amount below the width, and no float is converted to an integer (C leaves an
out-of-range conversion undefined). Signed ``+ - *`` are already emitted wrapping (CG-18).
"""

from __future__ import annotations

from collections.abc import Mapping

from sarek_py.analysis.ranges import Range, int_range
from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Empty,
    Expr,
    If,
    Intrinsic,
    Let,
    Ref,
    Return,
    Seq,
    Stmt,
    Unary,
)
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import ArrayType, Scalar


def _safe(e: Expr, ranges: Mapping[int, Range]) -> bool:
    """``e`` reads no memory, calls nothing and is defined in C for every value."""
    match e:
        case Const():
            return True
        case Ref(var=v):
            return not isinstance(v.type, ArrayType)
        case Intrinsic(name=n, args=()):
            return n in THREAD_INTRINSICS
        case Intrinsic(name="min" | "max", args=(a, b)):
            return scalar_type_of(e).is_int and _safe(a, ranges) and _safe(b, ranges)
        case Cast(to=to, arg=a):
            return (not (to.is_int and scalar_type_of(a).is_float)) and _safe(a, ranges)
        case Unary(arg=a):
            return _safe(a, ranges)
        case Cond(cond=c, if_true=a, if_false=b):
            return _safe(c, ranges) and _safe(a, ranges) and _safe(b, ranges)
        case Binary(op=op, lhs=a, rhs=b):
            if not (_safe(a, ranges) and _safe(b, ranges)):
                return False
            t = scalar_type_of(a)
            if op in (BinaryOp.DIV, BinaryOp.MOD) and t.is_int:
                return int_range(b, ranges)[0] >= 1
            if op in (BinaryOp.SHL, BinaryOp.SHR):
                return (t.is_int and isinstance(b, Const) and isinstance(b.value, int)
                        and 0 <= b.value < t.bits)
            return True
    return False


def _is_guard(s: Stmt) -> bool:
    return (isinstance(s, If) and isinstance(s.then, Return) and s.then.value is None
            and (s.else_ is None or isinstance(s.else_, Empty)))


def speculation_guard(body: Stmt, ranges: Mapping[int, Range]) -> If | None:
    """The kernel's own leading guard ``if c then return`` when every statement before it
    is safe to run for a thread past the launch's count (CG-21), else ``None``."""
    env = dict(ranges)
    s = body
    while True:
        match s:
            case Let(var=v, value=val, body=rest) if not isinstance(v.type, ArrayType):
                if v.scalar is Scalar.UNIT or not _safe(val, env):
                    return None
                if v.scalar.is_int and not v.mutable:
                    env[v.id] = int_range(val, env)
                s = rest
            case Seq(stmts=(first, *_)):
                return first if isinstance(first, If) and _is_guard(first) else None
            case If() if _is_guard(s):
                return s
            case _:
                return None
