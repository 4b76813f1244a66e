"""Hypothesis strategies that generate well-typed IR: constants, expressions, statements,
helper functions, kernels and modules (reusable by every test module).

The trees are *well typed* (they pass ``sarek_py.ir.typecheck.check_kernel``): operands
of one type, scopes respected, ``return`` values of the helper's result type, barriers
only in kernels, pure helpers without thread intrinsics. They are not guaranteed to run
without run-time errors (division by zero, out-of-bounds indices): a test that runs them
must guard against that itself.

Entry points: :func:`kernels`, :func:`modules`, :func:`helper_funcs`, :func:`exprs`,
:func:`stmts`, :func:`consts`, with an :class:`Env` describing what is in scope.
Names are drawn from a small pool, so inner bindings often shadow outer ones (a use
always refers to the innermost binding of its name, as in the text form).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from hypothesis import strategies as st

from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
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
    var,
)
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.ir.visit import iter_nodes

#: the scalar types a value can have (unit has no values worth generating)
VALUE_TYPES = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64, Scalar.BOOL)
NUMERIC = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64)
INTS = (Scalar.I32, Scalar.I64)

#: names of local bindings (let, for); shared between levels so that shadowing happens
LOCAL_NAMES = ("i", "j", "k", "x", "y", "t", "acc", "tmp", "v")
#: names of parameters and kernel locals (distinct within a kernel)
PARAM_NAMES = ("a", "b", "c", "n", "m", "src", "dst", "alpha", "w", "q")
ARITH = (BinaryOp.ADD, BinaryOp.SUB, BinaryOp.MUL, BinaryOp.DIV)
INT_ONLY = (BinaryOp.MOD, BinaryOp.BAND, BinaryOp.BOR, BinaryOp.BXOR, BinaryOp.SHL,
            BinaryOp.SHR)
ORDER = (BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ, BinaryOp.NE)


@attrs.frozen
class Env:
    """What generated code may use: variables in scope (the innermost binding of each
    name), helpers it may call, and the kind of body being generated."""

    scope: tuple[tuple[str, Var], ...] = ()
    helpers: tuple[HelperFunc, ...] = ()
    in_kernel: bool = True
    pure: bool = False
    result: Scalar | None = None
    allow_nan: bool = False

    def bind(self, v: Var) -> Env:
        """This environment with ``v`` hiding any variable of the same name."""
        rest = tuple((n, x) for n, x in self.scope if n != v.name)
        return attrs.evolve(self, scope=(*rest, (v.name, v)))

    @property
    def vars(self) -> list[Var]:
        return [v for _, v in self.scope]

    def scalars(self, t: Scalar) -> list[Var]:
        return [v for v in self.vars if v.type == t]

    def arrays(self, elem: Scalar | None = None) -> list[Var]:
        return [v for v in self.vars
                if isinstance(v.type, ArrayType) and (elem is None or v.type.elem == elem)]

    def mutables(self) -> list[Var]:
        return [v for v in self.vars if v.mutable and isinstance(v.type, Scalar)]


# ------------------------------------------------------------------------------ constants


def consts(t: Scalar, allow_nan: bool = False) -> st.SearchStrategy[Const]:
    """A constant of type ``t``; floats include ±0, infinities, subnormals (and NaN when
    ``allow_nan``); f32 values are exactly representable in float32."""
    if t is Scalar.BOOL:
        return st.booleans().map(lambda b: Const(b, t))
    if t is Scalar.I32:
        ints = st.one_of(st.integers(-4, 16), st.integers(-(2**31), 2**31 - 1))
        return ints.map(lambda v: Const(v, t))
    if t is Scalar.I64:
        ints = st.one_of(st.integers(-4, 16), st.integers(-(2**63), 2**63 - 1))
        return ints.map(lambda v: Const(v, t))
    if t is Scalar.F32:
        return st.floats(width=32, allow_nan=allow_nan).map(lambda v: Const(v, t))
    if t is Scalar.F64:
        return st.floats(allow_nan=allow_nan).map(lambda v: Const(v, t))
    raise ValueError(f"no constants of {t}")


# ---------------------------------------------------------------------------- expressions


@st.composite
def exprs(draw: st.DrawFn, env: Env, t: Scalar, depth: int = 3) -> Expr:
    """A well-typed expression of type ``t`` over ``env``, at most ``depth`` deep."""
    options = ["const"]
    if env.scalars(t):
        options += ["ref", "ref"]
    if t is Scalar.I32:
        if env.in_kernel or not env.pure:
            options.append("thread")
        if env.arrays():
            options.append("length")
    if env.arrays(t):
        options.append("read")
    if depth > 0:
        if t is not Scalar.BOOL:
            options += ["unary", "binary", "binary", "math"]
        else:
            options += ["not", "compare", "compare", "logical"]
        options += ["cast", "cond"]
        if t.is_int:
            options.append("bitwise")
        if _callable(env, t):
            options.append("call")
    kind = draw(st.sampled_from(options))
    sub = depth - 1
    match kind:
        case "const":
            return draw(consts(t, env.allow_nan))
        case "ref":
            return Ref(draw(st.sampled_from(env.scalars(t))))
        case "thread":
            return Intrinsic(draw(st.sampled_from(THREAD_INTRINSICS)))
        case "length":
            a = draw(st.sampled_from(env.arrays()))
            assert isinstance(a.type, ArrayType)
            return Length(a, draw(st.integers(0, a.type.rank - 1)))
        case "read":
            a = draw(st.sampled_from(env.arrays(t)))
            return Read(a, draw(indices(env, a, max(sub, 0))))
        case "unary":
            if t.is_int and draw(st.booleans()):
                return Unary(UnaryOp.BNOT, draw(exprs(env, t, sub)))
            return Unary(UnaryOp.NEG, draw(exprs(env, t, sub)))
        case "binary":
            op = draw(st.sampled_from(ARITH))
            return Binary(op, draw(exprs(env, t, sub)), draw(exprs(env, t, sub)))
        case "bitwise":
            op = draw(st.sampled_from(INT_ONLY))
            return Binary(op, draw(exprs(env, t, sub)), draw(exprs(env, t, sub)))
        case "math":
            names = [n for n, (_, float_only) in MATH.items() if t.is_float or not float_only]
            name = draw(st.sampled_from(sorted(names)))
            args = tuple(draw(exprs(env, t, sub)) for _ in range(MATH[name][0]))
            return Intrinsic(name, args)
        case "not":
            return Unary(UnaryOp.NOT, draw(exprs(env, t, sub)))
        case "compare":
            op = draw(st.sampled_from(ORDER))
            s = draw(st.sampled_from(VALUE_TYPES if op in (BinaryOp.EQ, BinaryOp.NE)
                                     else NUMERIC))
            return Binary(op, draw(exprs(env, s, sub)), draw(exprs(env, s, sub)))
        case "logical":
            op = draw(st.sampled_from((BinaryOp.AND, BinaryOp.OR)))
            return Binary(op, draw(exprs(env, t, sub)), draw(exprs(env, t, sub)))
        case "cast":
            s = draw(st.sampled_from(VALUE_TYPES))
            return Cast(t, draw(exprs(env, s, sub)))
        case "cond":
            return Cond(draw(exprs(env, Scalar.BOOL, sub)), draw(exprs(env, t, sub)),
                        draw(exprs(env, t, sub)))
        case "call":
            h = draw(st.sampled_from(_callable(env, t)))
            args = []
            for p in h.params:
                assert isinstance(p.type, Scalar)
                args.append(draw(exprs(env, p.type, sub)))
            return Call(h.name, tuple(args), h.result)
    raise AssertionError(kind)


def _callable(env: Env, t: Scalar) -> list[HelperFunc]:
    """Helpers of result ``t`` that code in ``env`` may call (pure code calls pure ones)."""
    return [h for h in env.helpers if h.result == t and (h.pure or not env.pure)]


@st.composite
def indices(draw: st.DrawFn, env: Env, a: Var, depth: int = 1) -> tuple[Expr, ...]:
    """One integer index per dimension of array ``a`` (each i32 or i64)."""
    assert isinstance(a.type, ArrayType)
    return tuple(draw(exprs(env, draw(st.sampled_from(INTS)), depth))
                 for _ in range(a.type.rank))


# ----------------------------------------------------------------------------- statements

_PRAGMA_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"),
                       min_size=1, max_size=6)


@st.composite
def stmts(draw: st.DrawFn, env: Env, depth: int = 3) -> Stmt:
    """A well-typed statement over ``env``, at most ``depth`` deep."""
    options = ["empty"] if env.pure else ["empty", "stop"]
    if env.mutables():
        options += ["assign", "assign"]
    if env.arrays() and not env.pure:
        options += ["store", "store"]
    if env.in_kernel:
        options += ["return", "barrier"]
    elif env.result is not None:
        options.append("return")
    if depth > 0:
        options += ["let", "let", "seq", "seq", "if", "for", "while", "pragma"]
    kind = draw(st.sampled_from(options))
    sub = depth - 1
    ed = min(depth, 2)
    match kind:
        case "empty":
            return Empty()
        case "stop":
            return Stop(draw(st.one_of(st.integers(1, 9), st.integers(1, 2**31 - 1))))
        case "barrier":
            return Barrier()
        case "return":
            if env.in_kernel or env.result is None:
                return Return()
            return Return(draw(exprs(env, env.result, ed)))
        case "assign":
            v = draw(st.sampled_from(env.mutables()))
            assert isinstance(v.type, Scalar)
            return Assign(v, draw(exprs(env, v.type, ed)))
        case "store":
            a = draw(st.sampled_from(env.arrays()))
            idx = draw(indices(env, a, 1))
            return Store(a, idx, draw(exprs(env, a.scalar, ed)))
        case "let":
            t = draw(st.sampled_from(VALUE_TYPES))
            value = draw(exprs(env, t, ed))
            v = var(draw(st.sampled_from(LOCAL_NAMES)), t, draw(st.booleans()))
            return Let(v, value, draw(stmts(env.bind(v), sub)))
        case "seq":
            n = draw(st.integers(2, 3))
            return Seq(tuple(draw(stmts(env, sub)) for _ in range(n)))
        case "if":
            cond = draw(exprs(env, Scalar.BOOL, ed))
            then = draw(stmts(env, sub))
            else_ = draw(st.one_of(st.none(), stmts(env, sub)))
            return If(cond, then, else_)
        case "for":
            t = draw(st.sampled_from(INTS))
            v = var(draw(st.sampled_from(LOCAL_NAMES)), t)
            lo, hi = draw(exprs(env, t, 1)), draw(exprs(env, t, 1))
            return For(v, lo, hi, draw(stmts(env.bind(v), sub)), draw(st.booleans()))
        case "while":
            return While(draw(exprs(env, Scalar.BOOL, ed)), draw(stmts(env, sub)))
        case "pragma":
            opts = tuple(draw(st.lists(_PRAGMA_TEXT, min_size=1, max_size=3)))
            return Pragma(opts, draw(stmts(env, sub)))
    raise AssertionError(kind)


# --------------------------------------------------------------------------------- items


@st.composite
def array_types(draw: st.DrawFn, space: MemSpace = MemSpace.GLOBAL) -> ArrayType:
    """An array type: rank 1 to 3, lower bounds mostly 0, extents run-time for global
    arrays (sometimes constant) and constant for shared/local ones."""
    rank = draw(st.integers(1, 3))
    elem = draw(st.sampled_from(VALUE_TYPES))
    lower = tuple(draw(st.sampled_from((0, 0, 0, 1, -2))) for _ in range(rank))
    if space is MemSpace.GLOBAL:
        shape = tuple(draw(st.one_of(st.none(), st.none(), st.integers(0, 64)))
                      for _ in range(rank))
    else:
        shape = tuple(draw(st.integers(1, 16)) for _ in range(rank))
    return ArrayType(elem, space, lower, shape)


@st.composite
def _params(draw: st.DrawFn, names: Sequence[str], arrays: bool) -> tuple[Var, ...]:
    out = []
    for name in names:
        if arrays and draw(st.booleans()):
            out.append(var(name, draw(array_types())))
        else:
            out.append(var(name, draw(st.sampled_from(VALUE_TYPES))))
    return tuple(out)


@st.composite
def helper_funcs(draw: st.DrawFn, name: str = "f", callable_: tuple[HelperFunc, ...] = (),
                 allow_nan: bool = False, depth: int = 2) -> HelperFunc:
    """A helper with scalar parameters whose body ends with ``return``; it may call the
    helpers ``callable_`` (declared before it)."""
    n = draw(st.integers(0, 3))
    names = draw(st.permutations(PARAM_NAMES))[:n]
    params = draw(_params(names, arrays=False))
    result = draw(st.sampled_from(VALUE_TYPES))
    pure = draw(st.booleans())
    env = Env(helpers=callable_, in_kernel=False, pure=pure, result=result,
              allow_nan=allow_nan)
    for p in params:
        env = env.bind(p)
    final = Return(draw(exprs(env, result, depth)))
    if draw(st.booleans()):
        body: Stmt = Seq((draw(stmts(env, depth)), final))
    else:
        body = final
    return HelperFunc(name, params, result, body, pure)


def called_helpers(body: Stmt, helpers: Sequence[HelperFunc]) -> tuple[HelperFunc, ...]:
    """The helpers ``body`` calls, transitively, in the order of ``helpers``."""
    by_name = {h.name: h for h in helpers}
    seen: set[str] = set()
    todo: list[Stmt] = [body]
    while todo:
        for node in iter_nodes(todo.pop()):
            if isinstance(node, Call) and node.func not in seen:
                seen.add(node.func)
                todo.append(by_name[node.func].body)
    return tuple(h for h in helpers if h.name in seen)


@st.composite
def helper_lists(draw: st.DrawFn, max_helpers: int = 2,
                 allow_nan: bool = False) -> tuple[HelperFunc, ...]:
    """Helpers ``f0, f1, …``, each may call the ones before it."""
    out: list[HelperFunc] = []
    for k in range(draw(st.integers(0, max_helpers))):
        out.append(draw(helper_funcs(f"f{k}", tuple(out), allow_nan)))
    return tuple(out)


@st.composite
def kernels(draw: st.DrawFn, name: str = "k", helpers: tuple[HelperFunc, ...] | None = None,
            allow_nan: bool = False, depth: int = 3) -> Kernel:
    """A well-typed kernel: parameters (arrays and scalars), locals (``var`` scalars,
    shared and local arrays), a body of every statement kind, and the helpers it calls."""
    if helpers is None:
        helpers = draw(helper_lists(allow_nan=allow_nan))
    n_params = draw(st.integers(1, 4))
    n_locals = draw(st.integers(0, 3))
    names = draw(st.permutations(PARAM_NAMES))
    params = draw(_params(names[:n_params], arrays=True))
    locals_: list[Var] = []
    for lname in names[n_params:n_params + n_locals]:
        kind = draw(st.sampled_from(("var", "shared", "local")))
        if kind == "var":
            locals_.append(var(lname, draw(st.sampled_from(VALUE_TYPES)), True))
        else:
            space = MemSpace.SHARED if kind == "shared" else MemSpace.LOCAL
            locals_.append(var(lname, draw(array_types(space)), True))
    env = Env(helpers=helpers, allow_nan=allow_nan)
    for v in (*params, *locals_):
        env = env.bind(v)
    body = draw(stmts(env, depth))
    return Kernel(name, params, tuple(locals_), body, called_helpers(body, helpers))


@st.composite
def modules(draw: st.DrawFn, allow_nan: bool = False, max_kernels: int = 2) -> Module:
    """A module: a few helpers and kernels that call some of them."""
    helpers = draw(helper_lists(allow_nan=allow_nan))
    ks = tuple(draw(kernels(f"k{i}", helpers, allow_nan))
               for i in range(draw(st.integers(1, max_kernels))))
    return Module(helpers, ks)
