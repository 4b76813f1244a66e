"""Python expressions → IR expressions, with C semantics and context-typed literals (FE-4..FE-9).

Every expression is translated with an optional *hint*: the type its context wants. Only
literals use it (an ``int`` literal takes the hint's type, a ``float`` literal a float
hint's type, as unsuffixed literals of the text form do); every other expression has its own
type and a mismatch is an error, since the IR has no implicit conversion.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np

from sarek_py.frontend.calls import CallTranslator
from sarek_py.frontend.intrinsics import STUBS
from sarek_py.frontend.resolve import MISSING, as_intrinsic
from sarek_py.frontend.scope import Env, Retype, is_literal
from sarek_py.frontend.unsupported import EXPRESSIONS, describe
from sarek_py.ir.casts import operands_hint
from sarek_py.ir.intrinsics import MATH
from sarek_py.ir.lexer import f32_from_decimal
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cond,
    Const,
    Expr,
    Length,
    Read,
    Ref,
    Unary,
    UnaryOp,
    Var,
)
from sarek_py.ir.types import ArrayType, Scalar

BINOPS: dict[type, BinaryOp] = {
    ast.Add: BinaryOp.ADD,
    ast.Sub: BinaryOp.SUB,
    ast.Mult: BinaryOp.MUL,
    ast.FloorDiv: BinaryOp.DIV,
    ast.Mod: BinaryOp.MOD,
    ast.BitAnd: BinaryOp.BAND,
    ast.BitOr: BinaryOp.BOR,
    ast.BitXor: BinaryOp.BXOR,
    ast.LShift: BinaryOp.SHL,
    ast.RShift: BinaryOp.SHR,
}

COMPARES: dict[type, BinaryOp] = {
    ast.Eq: BinaryOp.EQ,
    ast.NotEq: BinaryOp.NE,
    ast.Lt: BinaryOp.LT,
    ast.LtE: BinaryOp.LE,
    ast.Gt: BinaryOp.GT,
    ast.GtE: BinaryOp.GE,
}

_NUMPY_SCALARS = {s.dtype: s for s in (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64)}

_INT_RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}




def _shown(value: int | float | str) -> str:
    """A number as an error message shows it: in full, or its first and last digits and
    its length when longer than 40 characters (a Python int past 4300 digits cannot even
    be converted to text, FE-21)."""
    if isinstance(value, int) and abs(value).bit_length() > 4000 * 3.33:
        return f"{'-' if value < 0 else ''}<an integer of about {abs(value).bit_length() * 0.30103:.0f} digits>"
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}…{text[-10:]} ({len(text)} characters)"


class ExprTranslator(CallTranslator):
    """Python expressions to IR expressions."""


    def name(self, node: ast.Name, env: Env, hint: Scalar | None) -> Expr:
        if node.id in env or node.id in self.assigned:
            return Ref(self.lookup(node, env), loc=self.src.loc(node))
        obj = self.resolver.name(node.id)
        return self.global_value(node, obj, hint)

    def global_value(self, node: ast.expr, obj: Any, hint: Scalar | None) -> Expr:
        """A constant from the enclosing Python scope, read at translation time (FE-8)."""
        loc = self.src.loc(node)
        if isinstance(obj, bool | np.bool_):
            return Const(bool(obj), Scalar.BOOL, loc=loc)
        if isinstance(obj, np.generic) and obj.dtype in _NUMPY_SCALARS:
            t = _NUMPY_SCALARS[obj.dtype]
            value: int | float = float(obj) if t.is_float else int(obj)
            return self.number(node, value, t, is_float=t.is_float)
        if isinstance(obj, int):
            return self.number(node, obj, hint, is_float=False)
        if isinstance(obj, float):
            return self.number(node, obj, hint, is_float=True)
        what = ast.unparse(node)
        if obj is MISSING:
            raise self.err(node, f"'{what}' is not defined")
        raise self.err(node, f"'{what}' (a Python {type(obj).__name__}) cannot be used as a "
                       "value in a kernel: only int, float and bool constants can")

    # ---------------------------------------------------------------- literals

    def number(self, node: ast.AST, value: int | float, hint: Scalar | None,
               *, is_float: bool, text: str | None = None) -> Const:
        """A typed constant; ``text`` is the literal's spelling, rounded exactly to f32."""
        loc = self.src.loc(node)
        if is_float:
            t = hint if hint is not None and hint.is_float else Scalar.F64
            if t is Scalar.F32 and math.isfinite(value):
                exact = text.replace("_", "") if text is not None else repr(float(value))
                negative = exact.startswith("-")
                v32 = f32_from_decimal(exact.lstrip("-"))
                if math.isinf(v32):
                    raise self.err(node, f"float literal {_shown(exact)} overflows f32")
                return Const(-v32 if negative else v32, t, loc=loc)
            # inf and nan (math.inf, float('inf'), numpy constants) are themselves in f32
            return Const(float(value), t, loc=loc)
        if hint is not None and hint.is_float:
            f = float(hint.dtype.type(value)) if abs(value) < 2 ** 1024 else math.inf
            if f != value:
                raise self.err(node, f"{_shown(value)} is not exactly representable as {hint}")
            return Const(f, hint, loc=loc)
        t = hint if hint is not None and hint.is_int else Scalar.I32
        lo, hi = _INT_RANGE[t]
        if not lo <= value <= hi:
            raise self.err(node, f"integer literal {_shown(value)} does not fit in {t}"
                           + ("; write i64(...) around an i64 value" if t is Scalar.I32 else ""))
        return Const(int(value), t, loc=loc)

    def literal(self, node: ast.expr, hint: Scalar | None, negate: bool = False,
                at: ast.expr | None = None) -> Const:
        """A numeric literal; a minus sign before it is part of it, as in the text form."""
        if isinstance(node, ast.UnaryOp):
            flip = isinstance(node.op, ast.USub)
            return self.literal(node.operand, hint, negate != flip, at or node)
        assert isinstance(node, ast.Constant) and isinstance(node.value, int | float)
        v = node.value
        text = self.src.segment(node) if isinstance(v, float) else None
        if negate:
            v = -v
            text = None if text is None else "-" + text
        return self.number(at or node, v, hint, is_float=isinstance(v, float), text=text)

    # ------------------------------------------------------------ expressions

    def expr(self, node: ast.expr, env: Env, hint: Scalar | None = None) -> Expr:
        loc = self.src.loc(node)
        match node:
            case ast.Constant(value=v):
                if isinstance(v, bool):
                    return Const(v, Scalar.BOOL, loc=loc)
                if isinstance(v, int | float):
                    return self.literal(node, hint)
                what = "string" if isinstance(v, str) else repr(v)
                raise self.err(node, f"{what} constant is not supported in kernels")
            case ast.UnaryOp() if is_literal(node):
                return self.literal(node, hint)
            case ast.Name():
                return self.name(node, env, hint)
            case ast.BinOp():
                return self.binop(node, env, hint)
            case ast.UnaryOp(op=op, operand=a):
                if isinstance(op, ast.Not):
                    arg = self.expr(a, env, Scalar.BOOL)
                    self.want_bool(arg, a, "the operand of `not`")
                    return Unary(UnaryOp.NOT, arg, loc=loc)
                arg = self.expr(a, env, hint)
                if isinstance(op, ast.UAdd):
                    return arg
                return Unary(UnaryOp.NEG if isinstance(op, ast.USub) else UnaryOp.BNOT, arg,
                             loc=loc)
            case ast.BoolOp(op=op, values=values):
                bop = BinaryOp.AND if isinstance(op, ast.And) else BinaryOp.OR
                out: Expr | None = None
                for operand in values:
                    e = self.expr(operand, env, Scalar.BOOL)
                    self.want_bool(e, operand, f"an operand of `{'and' if bop is BinaryOp.AND else 'or'}`")
                    out = e if out is None else Binary(bop, out, e, loc=loc)
                assert out is not None
                return out
            case ast.Compare():
                return self.compare(node, env)
            case ast.IfExp(test=t, body=b, orelse=o):
                c = self.expr(t, env, Scalar.BOOL)
                self.want_bool(c, t, "the condition of `x if c else y`")
                lhs, rhs = self.pair(b, o, env, hint, node)
                return Cond(c, lhs, rhs, loc=loc)
            case ast.Subscript():
                return self.subscript(node, env)
            case ast.Call():
                return self.call(node, env, hint)
            case ast.Attribute():
                obj = self.resolver.node(node)
                if obj is MISSING and isinstance(node.value, ast.Name) and node.value.id in env:
                    raise self.err(node, f"attribute `.{node.attr}` is not supported in kernels"
                                   + (" (write a.shape[d] or len(a))" if node.attr == "shape"
                                      else ""))
                return self.global_value(node, obj, hint)
        if type(node) in EXPRESSIONS:
            raise self.unsupported(node)
        raise self.err(node, f"{describe(node)} expression is not supported in kernels")

    def want_bool(self, e: Expr, node: ast.AST, what: str) -> None:
        t = self.scalar(e, node)
        if t is not Scalar.BOOL:
            raise self.err(node, f"{what} is {t}, not bool: kernels do not test numbers for "
                           "truth, write an explicit comparison such as `n != 0`")

    def pair(self, a: ast.expr, b: ast.expr, env: Env, hint: Scalar | None,
             at: ast.AST) -> tuple[Expr, Expr]:
        """Two operands of one type: a literal takes the other operand's type (FE-5)."""
        ua, ub = self.untyped(a), self.untyped(b)
        if ua and ub and (self.wants_float(a) or self.wants_float(b)):
            both = hint if hint is not None and hint.is_float else Scalar.F64
            ea, eb = self.expr(a, env, both), self.expr(b, env, both)
        elif ua and not ub:
            eb = self.expr(b, env, hint)
            ea = self.expr(a, env, self.scalar(eb, b))
        else:
            ea = self.expr(a, env, hint)
            eb = self.expr(b, env, self.scalar(ea, a))
        ta, tb = self.scalar(ea, a), self.scalar(eb, b)
        if ta is not tb:
            for e, to in ((ea, tb), (eb, ta)):
                if (isinstance(e, Ref) and e.var.id in self.literal_init and to.is_numeric
                        and (to.is_float or not self.literal_init[e.var.id])):
                    raise Retype(e.var, to)
            cast = operands_hint(ast.unparse(a), ta, ast.unparse(b), tb)  # FE-40
            raise self.err(at, f"operands have different types {ta} and {tb}: kernels have no "
                           f"implicit conversion (cast: {cast})")
        return ea, eb

    def untyped(self, node: ast.expr) -> bool:
        """Whether ``node`` is made of number literals only (``2``, ``0.5 * 3``,
        ``min(1, 2)``): its type then comes from its context, as in the text form (FE-5)."""
        match node:
            case ast.Constant(value=v):
                return isinstance(v, int | float) and not isinstance(v, bool)
            case ast.UnaryOp(op=op, operand=a):
                return not isinstance(op, ast.Not) and self.untyped(a)
            case ast.BinOp(left=a, right=b):
                return self.untyped(a) and self.untyped(b)
            case ast.IfExp(body=a, orelse=b):
                return self.untyped(a) and self.untyped(b)
            case ast.Call(func=ast.Name(id=f) | ast.Attribute(attr=f), args=args) if args:
                if isinstance(node.func, ast.Name) and f in self.assigned:
                    return False
                obj = self.resolver.node(node.func)
                if obj is MISSING and f in STUBS:
                    obj = STUBS[f]
                intr = as_intrinsic(obj)
                return (intr is not None and intr.name in MATH
                        and all(self.untyped(x) for x in args))
        return False

    def wants_float(self, node: ast.expr) -> bool:
        """Whether an untyped expression is a float: it has a float literal or a call of
        a float-only math intrinsic (``sqrt(2)``)."""
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, float):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute):
                obj = self.resolver.node(n.func)
                name = n.func.id if isinstance(n.func, ast.Name) else n.func.attr
                intr = as_intrinsic(STUBS.get(name, MISSING) if obj is MISSING else obj)
                if intr is not None and MATH.get(intr.name, (0, False))[1]:
                    return True
        return False

    def binop(self, node: ast.BinOp, env: Env, hint: Scalar | None) -> Expr:
        loc = self.src.loc(node)
        op = node.op
        if isinstance(op, ast.Pow):
            raise self.err(node, "`**` is not supported in kernels: use pow(x, y) on floats "
                           "or multiply")
        if isinstance(op, ast.MatMult):
            raise self.err(node, "`@` (matrix product) is not supported in kernels")
        lhs, rhs = self.pair(node.left, node.right, env, hint, node)
        t = self.scalar(lhs, node.left)
        if isinstance(op, ast.Div):
            if not t.is_float:
                raise self.err(node, f"`/` on {t} operands: Python's `/` gives a float; use "
                               "`//` for the C integer division (truncates toward zero) or "
                               "cast to a float type first")
            return Binary(BinaryOp.DIV, lhs, rhs, loc=loc)
        if isinstance(op, ast.FloorDiv) and not t.is_int:
            raise self.err(node, f"`//` on {t} operands is not supported: `//` is the C "
                           "integer division; for floats write floor(a / b)")
        if isinstance(op, ast.Mod) and not t.is_int:
            raise self.err(node, f"`%` on {t} operands is not supported: `%` is the C "
                           "integer remainder")
        if type(op) not in BINOPS:  # pragma: no cover - every ast operator is handled above
            raise self.unsupported(node)
        bop = BINOPS[type(op)]
        if t.is_int:
            self.constant_overflow(node, bop, lhs, rhs, t)
        return Binary(bop, lhs, rhs, loc=loc)

    def constant_overflow(self, node: ast.AST, op: BinaryOp, lhs: Expr, rhs: Expr,
                          t: Scalar) -> None:
        """Refuse integer arithmetic on two constants whose exact (Python) value does not
        fit ``t``: C would wrap or be undefined where Python is exact (FE-7)."""
        if not (isinstance(lhs, Const) and isinstance(rhs, Const)):
            return
        a, b = lhs.value, rhs.value
        assert isinstance(a, int) and isinstance(b, int)
        lo, hi = _INT_RANGE[t]
        if op is BinaryOp.SHL or op is BinaryOp.SHR:
            if not 0 <= b < t.bits:
                raise self.err(node, f"shift count {b} is outside [0, {t.bits}) for {t}")
            if op is BinaryOp.SHR:
                return
            value = a << b
        elif op in (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL):
            value = {BinaryOp.ADD: a + b, BinaryOp.SUB: a - b, BinaryOp.MUL: a * b}[op]
        else:
            return
        if not lo <= value <= hi:
            raise self.err(node, f"this constant expression is {value}, which overflows {t}: "
                           "use i64 operands (i64(…)) for a larger value")

    def compare(self, node: ast.Compare, env: Env) -> Expr:
        loc = self.src.loc(node)
        out: Expr | None = None
        left = node.left
        for i, (op, right) in enumerate(zip(node.ops, node.comparators, strict=True)):
            if type(op) not in COMPARES:
                word = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
                        ast.NotIn: "not in"}.get(type(op), type(op).__name__)
                raise self.err(node, f"comparison `{word}` is not supported in kernels")
            if i > 0 and _has_call(left):
                raise self.err(left, "a chained comparison evaluates its middle operand twice; "
                               "a helper call there is not supported: assign it to a "
                               "variable first")
            lhs, rhs = self.pair(left, right, env, None, node)
            c: Expr = Binary(COMPARES[type(op)], lhs, rhs, loc=loc)
            out = c if out is None else Binary(BinaryOp.AND, out, c, loc=loc)
            left = right
        assert out is not None
        return out

    def subscript(self, node: ast.Subscript, env: Env) -> Expr:
        loc = self.src.loc(node)
        # a.shape[d]
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            arr = self.array_var(node.value.value, env)
            d = node.slice
            if not (isinstance(d, ast.Constant) and isinstance(d.value, int)
                    and not isinstance(d.value, bool)):
                raise self.err(d, "the dimension in a.shape[d] must be an integer constant")
            assert isinstance(arr.type, ArrayType)
            if not 0 <= d.value < arr.type.rank:
                raise self.err(d, f"dimension {d.value} out of range: '{arr.name}' has rank "
                               f"{arr.type.rank}")
            return Length(arr, d.value, loc=loc)
        arr = self.array_var(node.value, env)
        return Read(arr, self.indices(node, arr, env), loc=loc)

    def array_var(self, node: ast.expr, env: Env) -> Var:
        if not isinstance(node, ast.Name):
            raise self.err(node, "only a named array can be indexed in a kernel")
        v = self.lookup(node, env) if (node.id in env or node.id in self.assigned) else None
        if v is None or not isinstance(v.type, ArrayType):
            raise self.err(node, f"'{node.id}' is not an array")
        return v

    def indices(self, node: ast.Subscript, arr: Var, env: Env) -> tuple[Expr, ...]:
        sl = node.slice
        items = list(sl.elts) if isinstance(sl, ast.Tuple) else [sl]
        for it in items:
            if isinstance(it, ast.Slice):
                raise self.err(it, "slice is not supported in kernels: index one element")
        assert isinstance(arr.type, ArrayType)
        if len(items) != arr.type.rank:
            raise self.err(node, f"'{arr.name}' has rank {arr.type.rank} but is indexed with "
                           f"{len(items)} index{'es' if len(items) != 1 else ''}")
        out = []
        for it in items:
            e = self.expr(it, env, None)
            t = self.scalar(e, it)
            if not t.is_int:
                raise self.err(it, f"an array index is {t}, not an integer")
            out.append(e)
        return tuple(out)

    # ------------------------------------------------------------------- calls


def _has_call(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))
