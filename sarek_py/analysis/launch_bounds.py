"""Launch-time bounds proofs: whether every array access of one launch stays in bounds
(specs/codegen.md, CG-70 … CG-75).

The emitter cannot prove ``y[i]`` in bounds under ``if i < n``: it knows neither ``n`` nor
the length of ``y``. A launch knows both, and the launch shape. :func:`launch_in_bounds`
walks the kernel once with those facts: every integer scalar parameter is its exact value,
every array length its extent, every thread intrinsic the range the launch gives it; the
range analysis of CG-18 (:mod:`sarek_py.analysis.ranges`) does the arithmetic, refined by
the conditions that guard each access (``if``, ``?:``, ``&&``, ``||``, an earlier ``if c
then return``), by ``for`` bounds and by immutable ``let``s. Mutable variables, values read
from memory and helpers' results are unknown (their type's whole range), so an access they
index is not proved; helpers are walked at each call with the ranges of its arguments.
The answer is ``True`` only when every read, store and atomic of every thread, in every
branch, provably lies within its array's bounds, with no index arithmetic that can wrap.
"""

from __future__ import annotations

from collections.abc import Mapping

from sarek_py.analysis.ranges import Range, int_range, intrinsic_key, length_key, refine
from sarek_py.ir.intrinsics import AXES, THREAD_INTRINSICS
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
    Pragma,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Unary,
    Var,
    While,
)
from sarek_py.ir.types import ArrayType, Scalar

#: helper calls nested deeper than this are not walked: the launch is not proved
MAX_DEPTH = 16

_INTRINSIC_KEYS = frozenset(intrinsic_key(n) for n in THREAD_INTRINSICS)

#: an array's lower bounds and extents
Bounds = tuple[tuple[int, ...], tuple[int, ...]]


class _Unproved(Exception):
    """Some access is not proved in bounds."""


def thread_ranges(threads: int, grid: tuple[int, ...], block: tuple[int, ...]
                  ) -> dict[int, Range]:
    """The range of each thread intrinsic over the threads of a launch that run array
    accesses: ``threads`` threads numbered from 0, in ``grid`` blocks of ``block`` (1 to 3
    extents each, ``x`` first, as the interpreter numbers them, INT-1). Threads past the
    count run no array access (CG-21), so the global thread number is below ``threads``;
    the other indices are ranged by the whole grid."""
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    one_d = g[1] * g[2] * b[1] * b[2] == 1
    last = threads - 1
    env: dict[int, Range] = {intrinsic_key("global_thread_id"): (0, last)}
    for k, a in enumerate(AXES):
        env[intrinsic_key(f"block_dim_{a}")] = (b[k], b[k])
        env[intrinsic_key(f"grid_dim_{a}")] = (g[k], g[k])
        if one_d and k == 0:  # a 1-D launch: the thread number itself
            env[intrinsic_key("thread_idx_x")] = (0, min(b[0], threads) - 1)
            env[intrinsic_key("block_idx_x")] = (0, last // b[0])
            env[intrinsic_key("global_idx_x")] = (0, last)
        else:
            env[intrinsic_key(f"thread_idx_{a}")] = (0, b[k] - 1)
            env[intrinsic_key(f"block_idx_{a}")] = (0, g[k] - 1)
            env[intrinsic_key(f"global_idx_{a}")] = (0, g[k] * b[k] - 1)
    return env


def launch_in_bounds(kernel: Kernel, scalars: Mapping[str, int],
                     extents: Mapping[str, tuple[int, ...]], threads: int, grid: tuple[int, ...], block: tuple[int, ...],
                     shared: int | None = None) -> bool:
    """Whether every array access of this launch of ``kernel`` provably lies in bounds
    (CG-70): ``scalars`` the integer and ``bool`` scalar arguments by parameter name (as
    ints; float ones are not needed), ``extents`` every array argument's shape, ``threads``
    the thread count in ``grid`` blocks of ``block``, ``shared`` the dynamic shared array's
    extent in elements. ``False`` whenever it cannot decide (CG-71)."""
    if threads < 1:
        return True  # no thread runs
    env = thread_ranges(threads, grid, block)
    arrays: dict[int, Bounds] = {}
    for p in kernel.params:
        if isinstance(p.type, ArrayType):
            shape = extents.get(p.name)
            if shape is None or len(shape) != p.type.rank:
                return False
            arrays[p.id] = (p.type.lower, tuple(shape))
        elif (p.scalar.is_int or p.scalar is Scalar.BOOL) and not p.mutable:
            value = scalars.get(p.name)
            if value is not None:
                env[p.id] = (int(value), int(value))
    for v in kernel.locals:
        if isinstance(v.type, ArrayType):
            if v.type.is_constant_shape:
                arrays[v.id] = (v.type.lower, tuple(int(n or 0) for n in v.type.shape))
            elif shared is not None and v.type.rank == 1:  # the dynamic shared array
                arrays[v.id] = (v.type.lower, (shared,))
    for vid, (_, shape) in arrays.items():
        for d, n in enumerate(shape):
            env[length_key(vid, d)] = (n, n)
    try:
        _Walk(kernel, arrays, 0).stmt(kernel.body, env)
    except _Unproved:
        return False
    return True


class _Walk:
    """One function's walk (the kernel's or a helper's at one call) with its arrays."""

    def __init__(self, kernel: Kernel, arrays: dict[int, Bounds], depth: int) -> None:
        self.kernel = kernel
        self.arrays = arrays
        self.depth = depth

    # ---------------------------------------------------------------- statements

    def stmt(self, s: Stmt, env: Mapping[int, Range]) -> None:
        match s:
            case Seq(stmts=ss):
                cur = env
                for x in ss:
                    self.stmt(x, cur)
                    if isinstance(x, If) and _leaves(x.then) and (
                            x.else_ is None or isinstance(x.else_, Empty)):
                        cur = refine(x.cond, cur, False)  # past `if c then return`
            case Let(var=v, value=val, body=body):
                self.expr(val, env)
                if (v.scalar.is_int or v.scalar is Scalar.BOOL) and not v.mutable \
                        and not isinstance(v.type, ArrayType):
                    env = {**env, v.id: int_range(val, env)}
                self.stmt(body, env)
            case Assign(value=val):
                self.expr(val, env)
            case Store(array=a, index=ix, value=val):
                for e in ix:
                    self.expr(e, env)
                self.expr(val, env)
                self.access(a, ix, env)
            case If(cond=c, then=t, else_=e):
                self.expr(c, env)
                self.stmt(t, refine(c, env, True))
                if e is not None:
                    self.stmt(e, refine(c, env, False))
            case For(var=v, start=a, stop=b, body=body, down=down):
                self.expr(a, env)
                self.expr(b, env)
                ra, rb = int_range(a, env), int_range(b, env)
                span = (rb[0], ra[1]) if down else (ra[0], rb[1])
                inner = dict(env)
                if span[0] <= span[1]:
                    inner[v.id] = span
                self.stmt(body, inner)
            case While(cond=c, body=body):
                # immutable values keep their ranges at every iteration; mutable ones are
                # unknown (never in env)
                self.expr(c, env)
                self.stmt(body, refine(c, env, True))
            case Return(value=v):
                if v is not None:
                    self.expr(v, env)
            case Pragma(body=body):
                self.stmt(body, env)
            case Empty() | Barrier() | Break() | Continue() | Stop():
                pass
            case _:
                raise _Unproved

    # ---------------------------------------------------------------- expressions

    def expr(self, e: Expr, env: Mapping[int, Range]) -> None:
        match e:
            case Const() | Ref() | Length():
                pass
            case Read(array=a, index=ix):
                for x in ix:
                    self.expr(x, env)
                self.access(a, ix, env)
            case Atomic(array=a, index=ix, value=val, compare=cmp):
                for x in ix:
                    self.expr(x, env)
                self.expr(val, env)
                if cmp is not None:
                    self.expr(cmp, env)
                self.access(a, ix, env)
            case Binary(op=BinaryOp.AND, lhs=a, rhs=b):
                self.expr(a, env)
                self.expr(b, refine(a, env, True))
            case Binary(op=BinaryOp.OR, lhs=a, rhs=b):
                self.expr(a, env)
                self.expr(b, refine(a, env, False))
            case Binary(lhs=a, rhs=b):
                self.expr(a, env)
                self.expr(b, env)
            case Cond(cond=c, if_true=a, if_false=b):
                self.expr(c, env)
                self.expr(a, refine(c, env, True))
                self.expr(b, refine(c, env, False))
            case Unary(arg=a) | Cast(arg=a):
                self.expr(a, env)
            case Intrinsic(args=args):
                for x in args:
                    self.expr(x, env)
            case Call():
                self.call(e, env)
            case _:
                raise _Unproved

    def call(self, e: Call, env: Mapping[int, Range]) -> None:
        """A helper's accesses at this call: its scalar parameters ranged by the
        arguments, its array parameters bound to the caller's arrays."""
        for x in e.args:
            self.expr(x, env)
        h = _helper(self.kernel, e.func)
        if h is None or len(h.params) != len(e.args) or self.depth >= MAX_DEPTH:
            raise _Unproved
        inner = {k: r for k, r in env.items() if k in _INTRINSIC_KEYS}  # the launch's
        arrays: dict[int, Bounds] = {}
        for p, a in zip(h.params, e.args, strict=True):
            if isinstance(p.type, ArrayType):
                if not isinstance(a, Ref) or a.var.id not in self.arrays:
                    raise _Unproved
                arrays[p.id] = self.arrays[a.var.id]
                for d, n in enumerate(arrays[p.id][1]):
                    inner[length_key(p.id, d)] = (n, n)
            elif (p.scalar.is_int or p.scalar is Scalar.BOOL) and not p.mutable:
                inner[p.id] = int_range(a, env)
        _Walk(self.kernel, arrays, self.depth + 1).stmt(h.body, inner)

    def access(self, a: Var, index: tuple[Expr, ...], env: Mapping[int, Range]) -> None:
        """Raise unless every index of this access lies in its dimension's bounds."""
        b = self.arrays.get(a.id)
        if b is None or len(b[1]) != len(index):
            raise _Unproved
        for ix, lo, n in zip(index, b[0], b[1], strict=True):
            r = int_range(ix, env)
            if r[0] < lo or r[1] > lo + n - 1:
                raise _Unproved


def _helper(kernel: Kernel, name: str) -> HelperFunc | None:
    try:
        return kernel.helper(name)
    except KeyError:
        return None


def _leaves(s: Stmt) -> bool:
    """Whether ``s`` always ends the function or the thread (``return`` or ``stop`` last)."""
    if isinstance(s, Seq):
        return bool(s.stmts) and _leaves(s.stmts[-1])
    if isinstance(s, Let):
        return _leaves(s.body)
    return isinstance(s, (Return, Stop))
