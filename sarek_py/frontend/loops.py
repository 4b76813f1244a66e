"""``for`` loops over ``range`` (FE-6).

``range(a, b)`` is the IR's inclusive ``for i = a to b - 1``, ``range(a, b, -1)`` its
``downto``; any other constant step is lowered exactly into a ``while`` loop over a mutable
counter. The loop variable is scoped to the body, immutable, and dead after the loop.
"""

from __future__ import annotations

import abc
import ast
import builtins

from sarek_py.frontend.scope import DeadLoopVar, Env, is_literal, literal_is_float
from sarek_py.frontend.translate_expr import ExprTranslator
from sarek_py.ir.jumps import has_continue
from sarek_py.ir.nodes import (
    Assign,
    Binary,
    BinaryOp,
    Const,
    Expr,
    For,
    Intrinsic,
    Let,
    Ref,
    Stmt,
    Unary,
    UnaryOp,
    Var,
    While,
    fresh_id,
    seq,
)
from sarek_py.ir.types import Scalar


def int_literal(node: ast.expr) -> int | None:
    """The value of an integer literal (``3``, ``-2``), else None."""
    if not is_literal(node) or literal_is_float(node):
        return None
    sign = 1
    while isinstance(node, ast.UnaryOp):  # any number of signs (`--3`), as is_literal
        if isinstance(node.op, ast.USub):
            sign = -sign
        node = node.operand
    assert isinstance(node, ast.Constant) and isinstance(node.value, int)
    return sign * node.value


class LoopTranslator(ExprTranslator, abc.ABC):
    """The loop part of the statement translator."""

    #: ids of parameters and loop variables -> what they are (they cannot be assigned)
    fixed: dict[int, str]
    #: every name used in the function, and the names made up so far
    names: set[str]
    #: the loops around the statement being translated (FE-23)
    loop_depth: int

    @abc.abstractmethod
    def block(self, stmts: list[ast.stmt], env: Env, *, top: bool = False) -> Stmt:
        """The translation of a block of statements."""

    def loop_block(self, stmts: list[ast.stmt], env: Env) -> Stmt:
        """A loop's body, where ``break`` and ``continue`` are allowed (FE-23)."""
        self.loop_depth += 1
        try:
            return self.block(stmts, env)
        finally:
            self.loop_depth -= 1

    def constant_int(self, node: ast.expr) -> int | None:
        """An integer literal or an integer constant of the enclosing scope (FE-9)."""
        lit = int_literal(node)
        if lit is not None:
            return lit
        if isinstance(node, ast.Name | ast.Attribute):
            obj = self.resolver.node(node)
            if isinstance(obj, int) and not isinstance(obj, bool):
                return obj
        return None

    def for_loop(self, s: ast.For, env: Env) -> Stmt:
        """``for i in range(a, b[, k])`` (FE-6)."""
        loc = self.src.loc(s)
        if s.orelse:
            raise self.err(s, "for ... else is not supported in kernels")
        if not isinstance(s.target, ast.Name):
            raise self.err(s.target, "the loop variable must be a single name")
        name = s.target.id
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and self.resolver.node(it.func) is builtins.range):
            raise self.err(it, "only `for i in range(...)` loops are supported in kernels")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.err(it, "range takes 1 to 3 positional arguments")
        if isinstance(env.get(name), Var):
            raise self.err(s.target, f"the loop variable '{name}' would overwrite the variable "
                           f"'{name}' defined before: choose another name")
        step = 1
        if len(it.args) == 3:
            k = self.constant_int(it.args[2])
            if k is None:
                return self.expr_step_loop(s, env)
            if k == 0:
                raise self.err(it.args[2], "range() step must not be zero")
            step = k
        if len(it.args) == 1:
            stop = self.expr(it.args[0], env)
            t = self.scalar(stop, it.args[0])
            start: Expr = Const(0, t, loc=self.src.loc(it)) if t.is_int else stop
        else:
            start, stop = self.pair(it.args[0], it.args[1], env, None, it)
            t = self.scalar(start, it.args[0])
        if not t.is_int:
            raise self.err(it, f"range bounds must be integers, not {t}")
        v = Var(name, fresh_id(), t)
        self.fixed[v.id] = "a loop variable"
        body = self.loop_block(s.body, {**env, name: v})
        env[name] = DeadLoopVar(self.src.loc(s).line)
        if step in (1, -1):
            down = step == -1
            last = _offset(stop, 1 if down else -1, t)
            return For(v, start, last, body, down, loc=loc)
        return self.strided_loop(s, v, start, stop, step, body)

    def strided_loop(self, s: ast.For, v: Var, start: Expr, stop: Expr, step: int,
                     body: Stmt) -> Stmt:
        """``range(a, b, k)`` with ``|k| > 1``: a while loop over a mutable counter (FE-6)."""
        loc = self.src.loc(s)
        t = v.scalar
        ctr = Var(self.fresh_name(f"{v.name}_next"), fresh_id(), t, mutable=True)
        bound = stop
        stop_var: Var | None = None
        if not (isinstance(stop, Const) or (isinstance(stop, Ref) and not stop.var.mutable)):
            stop_var = Var(self.fresh_name(f"{v.name}_stop"), fresh_id(), t)
            bound = Ref(stop_var)
        cmp = BinaryOp.LT if step > 0 else BinaryOp.GT
        advance = Assign(ctr, Binary(BinaryOp.ADD, Ref(ctr), Const(step, t)))
        # a `continue` of the body goes to the while's test: the counter must have advanced
        # before the body runs (FE-23); else it advances after, as before
        step_body = (Let(v, Ref(ctr), seq(advance, body)) if has_continue(body)
                     else seq(Let(v, Ref(ctr), body), advance))
        loop: Stmt = While(Binary(cmp, Ref(ctr), bound), step_body, loc=loc)
        if stop_var is not None:
            loop = Let(stop_var, stop, loop, loc=loc)
        return Let(ctr, start, loop, loc=loc)

    def expr_step_loop(self, s: ast.For, env: Env) -> Stmt:
        """``range(a, b, s)`` with a step that is not a constant (FE-26): ``s`` and ``b``
        are evaluated once, before the first iteration, as in Python. A step that is
        positive by construction (a product of ``block_dim_*``/``grid_dim_*`` and positive
        literals: the grid-stride idiom) gives ``while i_next < b``, the form the fusion
        analyses recognise (LEG-21); any other step tests its sign at run time, and a zero
        step runs no iteration (a kernel cannot raise Python's ``ValueError``)."""
        it = s.iter
        assert isinstance(it, ast.Call) and isinstance(s.target, ast.Name)
        name = s.target.id
        start, stop = self.pair(it.args[0], it.args[1], env, None, it)
        t = self.scalar(start, it.args[0])
        if not t.is_int:
            raise self.err(it, f"range bounds must be integers, not {t}")
        step = self.expr(it.args[2], env, t)
        ts = self.scalar(step, it.args[2])
        if ts is not t:
            raise self.err(it.args[2], f"the step of range must be an integer of the bounds' "
                           f"type {t}, not {ts} (write {t}(...) around it)")
        v = Var(name, fresh_id(), t)
        self.fixed[v.id] = "a loop variable"
        body = self.loop_block(s.body, {**env, name: v})
        env[name] = DeadLoopVar(self.src.loc(s).line)
        loc = self.src.loc(s)
        ctr = Var(self.fresh_name(f"{name}_next"), fresh_id(), t, mutable=True)
        stop_var = Var(self.fresh_name(f"{name}_stop"), fresh_id(), t)
        step_var = Var(self.fresh_name(f"{name}_step"), fresh_id(), t)
        zero = Const(0, t)
        below = Binary(BinaryOp.LT, Ref(ctr), Ref(stop_var))
        test: Expr = below
        if not _positive(step):
            above = Binary(BinaryOp.GT, Ref(ctr), Ref(stop_var))
            test = Binary(BinaryOp.OR,
                          Binary(BinaryOp.AND, Binary(BinaryOp.GT, Ref(step_var), zero), below),
                          Binary(BinaryOp.AND, Binary(BinaryOp.LT, Ref(step_var), zero), above))
        advance = Assign(ctr, Binary(BinaryOp.ADD, Ref(ctr), Ref(step_var)))
        step_body = (Let(v, Ref(ctr), seq(advance, body)) if has_continue(body)
                     else seq(Let(v, Ref(ctr), body), advance))
        loop: Stmt = While(test, step_body, loc=loc)
        return Let(step_var, step, Let(stop_var, stop, Let(ctr, start, loop, loc=loc), loc=loc),
                   loc=loc)

    def fresh_name(self, base: str) -> str:
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}{n}"
        self.names.add(name)
        return name


def _offset(e: Expr, delta: int, t: Scalar) -> Expr:
    """``e + delta``, folded when ``e`` is a constant (``range(0, 8)`` is ``0 to 7``)."""
    value = _const_int(e)
    if value is not None:
        return Const(value + delta, t, loc=e.loc)
    op = BinaryOp.ADD if delta > 0 else BinaryOp.SUB
    return Binary(op, e, Const(abs(delta), t), loc=e.loc)


def _const_int(e: Expr) -> int | None:
    """The value of an integer literal (``3``, ``-1``), else None."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    if isinstance(e, Unary) and e.op is UnaryOp.NEG:
        inner = _const_int(e.arg)
        return None if inner is None else -inner
    return None


def _positive(e: Expr) -> bool:
    """Whether ``e`` is positive by construction: a product of block and grid dimensions
    (each at least 1 on every launch) and positive integer literals (FE-26)."""
    match e:
        case Const(value=int() as k):
            return k > 0
        case Intrinsic(name=n, args=()):
            return n.startswith(("block_dim_", "grid_dim_"))
        case Binary(op=BinaryOp.MUL, lhs=a, rhs=b):
            return _positive(a) and _positive(b)
    return False
