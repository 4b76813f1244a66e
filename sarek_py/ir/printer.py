"""Pretty-printer of the ``.sk`` text form (specs/text-format.md, TXT-18..TXT-22).

The output is OCaml-like with 2-space indentation. It parenthesizes only where the parser
would otherwise read a different tree (operator precedence, sequences and lets in
branches, dangling ``else``, negated literals), prints every literal so that it reads
back as the same value of the same type, and so ``print(parse(print(k))) == print(k)``.
"""

from __future__ import annotations

import math

import numpy as np

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Assign,
    Atomic,
    Barrier,
    Binary,
    BinaryOp,
    Break,
    Call,
    Cast,
    Cond,
    Const,
    Continue,
    Empty,
    Expr,
    For,
    HelperFunc,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Module,
    Pragma,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Unary,
    UnaryOp,
    Var,
    While,
)
from sarek_py.ir.print_names import printable_helper, printable_kernel, printable_stmt
from sarek_py.ir.requires_text import format_requires
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, Type

INDENT = "  "

#: precedence of each binary operator; higher binds tighter (TXT-12)
PRECEDENCE: dict[BinaryOp, int] = {}
for _level, _ops in enumerate((
    (BinaryOp.OR,), (BinaryOp.AND,), (BinaryOp.BOR,), (BinaryOp.BXOR,), (BinaryOp.BAND,),
    (BinaryOp.EQ, BinaryOp.NE), (BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE),
    (BinaryOp.SHL, BinaryOp.SHR), (BinaryOp.ADD, BinaryOp.SUB),
    (BinaryOp.MUL, BinaryOp.DIV, BinaryOp.MOD),
), start=2):
    for _op in _ops:
        PRECEDENCE[_op] = _level
COND_PREC = 1
UNARY_PREC = 12
ATOM_PREC = 13


# ---------------------------------------------------------------------------- literals


def format_float(value: float, type: Scalar) -> str:
    """A float literal that reads back as exactly ``value`` of ``type`` (TXT-9):
    the shortest decimal that round-trips (through float32 for ``f32``, with ``f``)."""
    suffix = "f" if type is Scalar.F32 else ""
    if math.isnan(value):
        return "nan" + suffix
    if math.isinf(value):
        return ("-" if value < 0 else "") + "inf" + suffix
    text = str(np.float32(value)) if type is Scalar.F32 else repr(float(value))
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + suffix


def format_const(c: Const) -> str:
    """The literal of a constant: ``3``, ``3L``, ``1.5``, ``1.5f``, ``true``, ``()``."""
    t, v = c.type, c.value
    if t is Scalar.BOOL:
        return "true" if v else "false"
    if t is Scalar.UNIT:
        return "()"
    if t.is_int:
        assert isinstance(v, (int, np.integer))
        return f"{int(v)}L" if t is Scalar.I64 else str(int(v))
    assert isinstance(v, (int, float, np.number))
    return format_float(float(v), t)


def format_string(s: str) -> str:
    """A string literal (pragma option) with escapes the lexer reads back."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def format_type(t: Type) -> str:
    """``f32``, ``f32[]``, ``f64[,]``, ``shared f32[1:16, 16]`` (TXT-6)."""
    if isinstance(t, Scalar):
        return str(t)
    dims = []
    for lo, n in zip(t.lower, t.shape, strict=True):
        ext = "" if n is None else str(n)
        dims.append(f"{lo}:{ext}" if lo != 0 else ext)
    sep = ", " if any(dims) else ","
    space = "" if t.space is MemSpace.GLOBAL else f"{t.space} "
    return f"{space}{t.elem}[{sep.join(dims)}]"


# ------------------------------------------------------------------------- expressions


def _expr(e: Expr) -> tuple[str, int]:
    """The text of ``e`` and its precedence."""
    match e:
        case Const():
            return format_const(e), ATOM_PREC
        case Ref(var=v):
            return v.name, ATOM_PREC
        case Unary(op=op, arg=a):
            text = expr_at(a, UNARY_PREC)
            if (op is UnaryOp.NEG and isinstance(a, Const)) or text.startswith("-"):
                text = f"({text})"  # `-(1)` is not the literal `-1`; no `--` (TXT-10)
            return op.value + text, UNARY_PREC
        case Binary(op=op, lhs=lhs, rhs=rhs):
            p = PRECEDENCE[op]
            return f"{expr_at(lhs, p)} {op.value} {expr_at(rhs, p + 1)}", p
        case Read(array=a, index=idx):
            return f"{a.name}[{', '.join(print_expr(i) for i in idx)}]", ATOM_PREC
        case Cast(to=t, arg=a):
            return f"{t}({print_expr(a)})", ATOM_PREC
        case Cond(cond=c, if_true=t, if_false=f):
            return (f"{expr_at(c, COND_PREC + 1)} ? {expr_at(t, COND_PREC + 1)} : "
                    f"{expr_at(f, COND_PREC)}", COND_PREC)
        case Intrinsic(name=n, args=args):
            if n in THREAD_INTRINSICS and not args:
                return n, ATOM_PREC
            return f"{n}({', '.join(print_expr(a) for a in args)})", ATOM_PREC
        case Call(func=f, args=args):
            return f"{f}({', '.join(print_expr(a) for a in args)})", ATOM_PREC
        case Length(array=a, dim=d):
            return (f"length({a.name})" if d == 0 else f"length({a.name}, {d})"), ATOM_PREC
        case Atomic(op=op, array=a, index=idx, value=v, compare=c):  # IR-33, TXT-38
            element = f"{a.name}[{', '.join(print_expr(i) for i in idx)}]"
            operands = [print_expr(v)] if c is None else [print_expr(c), print_expr(v)]
            return f"{op.value}({element}, {', '.join(operands)})", ATOM_PREC
    raise TypeError(f"not an expression: {e!r}")


def expr_at(e: Expr, min_prec: int) -> str:
    """``e`` parenthesized when it binds less tightly than ``min_prec``."""
    text, p = _expr(e)
    return f"({text})" if p < min_prec else text


def print_expr(e: Expr) -> str:
    """The text of an expression."""
    return expr_at(e, 0)


# -------------------------------------------------------------------------- statements


def _open_right(s: Stmt) -> bool:
    """Whether an ``else`` after ``s`` would be taken by an ``if`` inside it."""
    match s:
        case If(else_=None):
            return True
        case If(else_=e):
            assert e is not None
            return _open_right(e)
        case Pragma(body=b):
            return _open_right(b)
    return False


def _block(s: Stmt, ind: str) -> list[str]:
    """``s`` as a parenthesized block: ``(``, the statement indented, ``)``."""
    return ["(", *_stmt(s, ind + INDENT), ind + ")"]


def _branch(s: Stmt, ind: str, closed: bool) -> list[str]:
    """A branch of an if or the body of a pragma, parenthesized where needed (TXT-19).

    Returns lines: the first to append after the head, the rest complete lines."""
    if isinstance(s, (Seq, Let)) or (closed and _open_right(s)):
        return _block(s, ind)
    return ["", *_stmt(s, ind + INDENT)]


def _join(head: str, lines: list[str]) -> list[str]:
    """``head`` followed by a branch (see :func:`_branch`)."""
    first, rest = lines[0], lines[1:]
    return [head + (" " + first if first else ""), *rest]


def _stmt(s: Stmt, ind: str) -> list[str]:
    """The lines of a statement, each already indented by ``ind``."""
    match s:
        case Let(var=v, value=value, body=body):
            mut = "mut " if v.mutable else ""
            annot = ""
            if _value_type(value) != v.type:
                annot = f" : {v.type}"
            head = f"{ind}let {mut}{v.name}{annot} = {print_expr(value)} in"
            return [head, *_stmt(body, ind)]
        case Assign(var=v, value=value):
            return [f"{ind}{v.name} := {print_expr(value)}"]
        case Store(array=a, index=idx, value=value):
            index = ", ".join(print_expr(i) for i in idx)
            return [f"{ind}{a.name}[{index}] <- {print_expr(value)}"]
        case Seq(stmts=stmts):
            if not stmts:
                return [f"{ind}()"]
            lines: list[str] = []
            for k, x in enumerate(stmts):
                last = k == len(stmts) - 1
                if isinstance(x, Seq) or (isinstance(x, Let) and not last):
                    part = [ind + "(", *_stmt(x, ind + INDENT), ind + ")"]
                else:
                    part = _stmt(x, ind)
                if not last:
                    part[-1] += ";"
                lines.extend(part)
            return lines
        case If(cond=c, then=t, else_=e):
            head = f"{ind}if {print_expr(c)} then"
            lines = _join(head, _branch(t, ind, closed=e is not None))
            if e is None:
                return lines
            if isinstance(e, If):
                # else if: the nested if starts on the else line
                nested = _stmt(e, ind)
                return [*_else(lines, ind, "else " + nested[0].lstrip()), *nested[1:]]
            br = _branch(e, ind, closed=False)
            return [*_else(lines, ind, "else" + (" " + br[0] if br[0] else "")), *br[1:]]
        case For(var=v, start=a, stop=b, body=body, down=down):
            way = "downto" if down else "to"
            return [f"{ind}for {v.name} = {print_expr(a)} {way} {print_expr(b)} do",
                    *_stmt(body, ind + INDENT), f"{ind}done"]
        case While(cond=c, body=body):
            return [f"{ind}while {print_expr(c)} do", *_stmt(body, ind + INDENT), f"{ind}done"]
        case Return(value=None):
            return [f"{ind}return"]
        case Return(value=value):
            assert value is not None
            return [f"{ind}return {print_expr(value)}"]
        case Barrier():
            return [f"{ind}barrier"]
        case Break():
            return [f"{ind}break"]
        case Continue():
            return [f"{ind}continue"]
        case Empty():
            return [f"{ind}()"]
        case Stop(code=code):
            return [f"{ind}stop {code}"]
        case Pragma(options=opts, body=body):
            head = f"{ind}pragma {' '.join(format_string(o) for o in opts)}"
            if isinstance(body, (Seq, Let)):
                return _join(head, _block(body, ind))
            return [head, *_stmt(body, ind)]
    raise TypeError(f"not a statement: {s!r}")


def _else(lines: list[str], ind: str, else_text: str) -> list[str]:
    """Attach ``else …`` after the then-branch: on the ``)`` line of a block, else on a
    line of its own."""
    if lines[-1] == ind + ")":
        return [*lines[:-1], f"{ind}) {else_text}"]
    return [*lines, f"{ind}{else_text}"]


def _value_type(e: Expr) -> Type | None:
    try:
        return type_of(e)
    except (AssertionError, TypeError):
        return None


def print_stmt(s: Stmt, indent: int = 0, rename: bool = True) -> str:
    """The text of a statement (``indent`` levels of two spaces). A binder that would
    capture a use of another variable of the same name is renamed (TXT-31) unless
    ``rename`` is false (the caller has named the variables already)."""
    if rename:
        s = printable_stmt(s)
    return "\n".join(_stmt(s, INDENT * indent))


# ------------------------------------------------------------------------------- items


def _params(params: tuple[Var, ...]) -> str:
    return ", ".join(f"{p.name} : {format_type(p.type)}" for p in params)


def _decl(v: Var) -> str:
    t = v.type
    if isinstance(t, ArrayType):
        if t.space is MemSpace.GLOBAL:
            raise ValueError(f"local '{v.name}' is a global array: it has no text form")
        return f"{t.space} {v.name} : {format_type(t).split(' ', 1)[1]}"
    return f"var {v.name} : {t}"


def print_helper(h: HelperFunc) -> str:
    """The text of a helper function."""
    h = printable_helper(h)
    pure = "pure " if h.pure else ""
    head = f"{pure}fun {h.name}({_params(h.params)}) : {h.result} ="
    return "\n".join([head, *_stmt(h.body, INDENT)]) + "\n"


def _kernel_only(k: Kernel) -> str:
    k = printable_kernel(k)
    head = f"kernel {k.name}({_params(k.params)})"
    if k.requires is not None or k.ranges:  # LEG-13, LCH-25
        head += "\n" + INDENT + format_requires(k.requires,
                                                [print_expr(c) for c in k.ranges])
    decls = [INDENT + _decl(v) for v in k.locals]
    if decls:
        lines = [head, *decls]
        lines[-1] += " ="
    else:
        lines = [head + " ="]
    return "\n".join([*lines, *_stmt(k.body, INDENT)]) + "\n"


def print_kernel(k: Kernel) -> str:
    """The text of a kernel, its helpers first (a complete ``.sk`` module)."""
    return "\n".join([*(print_helper(h) for h in k.helpers), _kernel_only(k)])


def print_module(m: Module) -> str:
    """The text of a module: its helpers, then its kernels, a blank line between items."""
    return "\n".join([*(print_helper(h) for h in m.helpers),
                      *(_kernel_only(k) for k in m.kernels)])
