"""Python functions → IR kernels and helper functions (specs/frontend.md, FE-1..FE-14).

The translation is syntax-directed over :mod:`ast`. Python's function-wide variables are
mapped onto the IR's block-scoped ``let``: the first assignment of a name binds it for the
rest of its block (``let``), and it is ``let mut`` exactly when that rest assigns it again
(FE-5). Whatever has no exact IR counterpart is refused with a located error (FE-12).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import Any

from sarek_py.frontend.intrinsics import STUBS
from sarek_py.frontend.loops import LoopTranslator
from sarek_py.frontend.resolve import MISSING, Resolver, as_intrinsic
from sarek_py.frontend.scope import (
    Env,
    HelperLike,
    Retype,
    is_literal,
    literal_is_float,
)
from sarek_py.frontend.signature import is_none, scalar_annotation
from sarek_py.frontend.signature import parameters as function_parameters
from sarek_py.frontend.source import FrontendError, FunctionSource, load
from sarek_py.frontend.unsupported import EXPRESSIONS, STATEMENTS
from sarek_py.ir.atomics import ATOMIC_WORDS
from sarek_py.ir.deep import depth_message, too_deep
from sarek_py.ir.dynamic_shared import is_dynamic_shared
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Break,
    Const,
    Continue,
    Empty,
    Expr,
    HelperFunc,
    If,
    Kernel,
    Let,
    Ref,
    Return,
    Stmt,
    Stop,
    Store,
    Var,
    While,
    fresh_id,
    seq,
)
from sarek_py.ir.types import ArrayType, MemSpace, Scalar

#: expressions that are never part of a kernel, wherever they appear
NEVER = frozenset(EXPRESSIONS) - {ast.Tuple, ast.Slice}


def translate_kernel(fn: Callable[..., Any], name: str | None = None) -> Kernel:
    """The IR kernel of a Python function (FE-1, FE-2, FE-13)."""
    src = load(fn)
    t = StmtTranslator(src, Resolver(fn), in_helper=False, result=Scalar.UNIT)
    params = t.parameters()
    if src.tree.returns is not None and not is_none(src.tree.returns):
        raise t.err(src.tree.returns, "a kernel returns nothing: remove the return annotation")
    body = t.function_body(params)
    k = Kernel(name or src.tree.name, params, tuple(t.locals), body,
               in_source_order(t.helpers.values()), loc=src.loc(src.tree))
    _check_depth(body, f"kernel '{k.name}'", src)
    return _checked(k, src)


def translate_helper(fn: Callable[..., Any], *, pure: bool = False
                     ) -> tuple[HelperFunc, tuple[HelperFunc, ...]]:
    """The IR helper function of a Python function, and the helpers it calls (transitively)."""
    src = load(fn)
    r = Resolver(fn)
    result = Scalar.UNIT
    if src.tree.returns is not None and not is_none(src.tree.returns):
        result = scalar_annotation(src, r, src.tree.returns, "a helper's result")
    t = StmtTranslator(src, r, in_helper=True, result=result)
    params = t.parameters()
    body = t.function_body(params)
    if result is not Scalar.UNIT and not _always_returns(src.tree.body):
        raise t.err(src.tree, f"helper '{src.tree.name}' can reach its end without returning "
                    f"a {result}")
    h = HelperFunc(src.tree.name, params, result, body, pure, loc=src.loc(src.tree))
    _check_depth(body, f"helper '{h.name}'", src)
    return h, tuple(t.helpers.values())


def in_source_order(helpers: Iterable[HelperFunc]) -> tuple[HelperFunc, ...]:
    """Helpers in the order of their definitions (file, line), as a ``.sk`` file lists
    them (FE-11)."""
    def key(h: HelperFunc) -> tuple[str, int, int]:
        return (h.loc.file, h.loc.line, h.loc.col) if h.loc is not None else ("", 0, 0)

    return tuple(sorted(helpers, key=key))


def _check_depth(body: object, what: str, src: FunctionSource) -> None:
    """A function nested past :data:`~sarek_py.ir.deep.MAX_DEPTH` levels is a located
    error (FE-21), not a ``RecursionError`` later."""
    deep = too_deep(body)
    if deep is not None:
        raise FrontendError(depth_message(what), deep[1], src.text)


def _checked(k: Kernel, src: FunctionSource) -> Kernel:
    """Run the IR checker when it is available (FE-13); its errors point into the file."""
    try:
        from sarek_py.ir import typecheck
    except ImportError:  # pragma: no cover - the checker is part of the package
        return k
    from sarek_py.ir.diagnostics import SarekError

    try:
        typecheck.check_kernel(k)
    except SarekError as err:
        if err.loc is not None and err.loc.file == src.file:
            err.with_source(src.text)
        raise
    return k


def _assigns(name: str, stmts: list[ast.stmt]) -> bool:
    """Whether ``stmts`` assign ``name`` again (loop targets excepted): ``let mut`` (FE-5)."""
    for s in stmts:
        for n in ast.walk(s):
            targets: list[ast.expr] = []
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, ast.AugAssign | ast.AnnAssign):
                targets = [n.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
    return False


def _always_returns(stmts: list[ast.stmt]) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return False


class StmtTranslator(LoopTranslator):
    """Translates one function's parameters and body."""

    def __init__(self, src: FunctionSource, resolver: Resolver, *, in_helper: bool,
                 result: Scalar):
        super().__init__(src, resolver, in_helper=in_helper)
        self.result = result
        self.locals: list[Var] = []
        self.fixed: dict[int, str] = {}  # ids of parameters and loop variables -> what they are
        self.loop_depth = 0  # the loops around the statement being translated (FE-23)
        self.names = {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)}
        self.refuse_foreign_constructs()
        for n in ast.walk(src.tree):
            if isinstance(n, ast.Assign):
                self.assigned.update(t.id for t in n.targets if isinstance(t, ast.Name))
            elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For) and isinstance(
                    n.target, ast.Name):
                self.assigned.add(n.target.id)

    def refuse_foreign_constructs(self) -> None:
        """Name the first construct that never belongs in a kernel (FE-12), before anything
        that contains it is reported less precisely (``sum([...])`` is a list comprehension
        first, an unknown call second)."""
        found = [n for stmt in self.src.tree.body for n in ast.walk(stmt)
                 if type(n) in NEVER or type(n) in STATEMENTS]
        if found:
            first = min(found, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
            raise self.unsupported(first)

    @property
    def kind(self) -> str:
        return "helper" if self.in_helper else "kernel"

    # -------------------------------------------------------------- signature

    def parameters(self) -> tuple[Var, ...]:
        params = function_parameters(self.src, self.resolver, self.kind)
        for v in params:
            self.fixed[v.id] = "a parameter"
        return params

    def function_body(self, params: tuple[Var, ...]) -> Stmt:
        body = list(self.src.tree.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # docstring
        env: Env = {p.name: p for p in params}
        return self.block(body, env, top=True)

    # ----------------------------------------------------------------- blocks

    def block(self, stmts: list[ast.stmt], env: Env, *, top: bool = False) -> Stmt:
        env = dict(env)
        out: list[Stmt] = []
        for i, s in enumerate(stmts):
            rest = stmts[i + 1:]
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name):
                name = s.targets[0].id
                decl = self.declaration_kind(s.value)
                if decl is not None:
                    self.array_decl(s, name, decl, env, rest, top)
                    continue
                if not isinstance(env.get(name), Var):
                    out.append(self.let(s, name, None, s.value, rest, env, top))
                    break
            elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                name = s.target.id
                if isinstance(env.get(name), Var):
                    raise self.err(s, f"'{name}' is already defined: annotate a variable only "
                                   "where it is first assigned")
                t = scalar_annotation(self.src, self.resolver, s.annotation,
                                       f"the type of '{name}'")
                if s.value is not None:
                    out.append(self.let(s, name, t, s.value, rest, env, top))
                    break
                if not top:
                    raise self.err(s, f"a declaration `{name}: {t}` is only allowed at the top "
                                   f"level of a {self.kind}, not in a nested block")
                v = Var(name, fresh_id(), t, mutable=True)
                if self.in_helper:  # helpers have no locals: a zero-initialised let mut
                    zero = Const(False if t is Scalar.BOOL else 0.0 if t.is_float else 0, t)
                    body = self.block(rest, {**env, name: v}, top=top)
                    out.append(Let(v, zero, body, loc=self.src.loc(s)))
                    break
                self.locals.append(v)
                env[name] = v
                continue
            if isinstance(s, ast.Expr) and (self.is_helper_call(s.value)
                                            or self.is_atomic_call(s.value)):
                # a helper called for its effect: `let _ = h(...) in <rest>` (FE-11); an
                # atomic whose old value is not used, the same way (FE-25)
                call = self.expr(s.value, env)
                v = Var("_", fresh_id(), self.scalar(call, s.value))
                out.append(Let(v, call, self.block(rest, env, top=top), loc=self.src.loc(s)))
                break
            out.append(self.stmt(s, env))
        return seq(*out)

    def is_helper_call(self, node: ast.expr) -> bool:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)):
            return False
        if isinstance(node.func, ast.Name) and node.func.id in self.assigned:
            return False
        return isinstance(self.resolver.node(node.func), HelperLike)

    def is_atomic_call(self, node: ast.expr) -> bool:
        """Whether ``node`` calls an atomic (FE-25)."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)):
            return False
        f = node.func
        if isinstance(f, ast.Name) and f.id in self.assigned:
            return False
        obj = self.resolver.node(f)
        if obj is MISSING and isinstance(f, ast.Name):
            obj = STUBS.get(f.id, MISSING)
        intr = as_intrinsic(obj)
        return intr is not None and intr.name in ATOMIC_WORDS

    def declaration_kind(self, value: ast.expr) -> str | None:
        if not isinstance(value, ast.Call):
            return None
        f = value.func
        if isinstance(f, ast.Name) and f.id in self.assigned:
            return None  # a kernel variable: the call is refused later
        obj = self.resolver.node(f) if isinstance(f, ast.Name | ast.Attribute) else MISSING
        if obj is MISSING and isinstance(f, ast.Name) and f.id in STUBS:
            obj = STUBS[f.id]
        intr = as_intrinsic(obj)
        return intr.name if intr is not None and intr.name in ("shared", "local") else None

    def array_decl(self, s: ast.Assign, name: str, kind: str, env: Env,
                   rest: list[ast.stmt], top: bool) -> None:
        """``tile = shared(f32, 256)`` / ``acc = local(f64, 4, 4)``: a kernel declaration (FE-10)."""
        call = s.value
        assert isinstance(call, ast.Call)
        if self.in_helper:
            raise self.err(s, f"{kind} arrays can only be declared in a kernel, not in a helper")
        if not top:
            raise self.err(s, f"a {kind} array is declared at the top level of the kernel, not "
                           "in a nested block")
        if name in env:
            raise self.err(s, f"'{name}' is already defined")
        if _assigns(name, rest):
            raise self.err(s, f"the {kind} array '{name}' is assigned again later: an array "
                           "name cannot be rebound")
        if call.keywords or len(call.args) < (1 if kind == "shared" else 2):
            raise self.err(call, f"write {kind}(type, extent, ...) with constant extents, e.g. "
                           f"{kind}(f32, 256)" + (", or shared(type) for a shared array "
                                                  "sized at launch" if kind == "shared" else ""))
        elem = scalar_annotation(self.src, self.resolver, call.args[0],
                                  f"the element type of a {kind} array")
        if len(call.args) == 1:  # FE-50: dynamic shared memory, sized by each launch
            other = next((x for x in self.locals if is_dynamic_shared(x.type)), None)
            if other is not None:
                raise self.err(call, f"'{other.name}' is already the kernel's shared array "
                               f"sized at launch: a kernel has at most one (IR-51)")
            v = Var(name, fresh_id(), ArrayType(elem, MemSpace.SHARED, (0,), (None,)))
            self.locals.append(v)
            env[name] = v
            return
        dims_nodes = call.args[1:]
        if len(dims_nodes) == 1 and isinstance(dims_nodes[0], ast.Tuple):
            dims_nodes = list(dims_nodes[0].elts)
        dims = []
        for d in dims_nodes:
            value = self.constant_int(d)
            if value is None or value <= 0:
                raise self.err(d, f"the extent of a {kind} array must be a positive integer "
                               "constant" + (" (write shared(type), without an extent, for "
                                             "a shared array sized at launch)"
                                             if kind == "shared" else ""))
            dims.append(value)
        space = MemSpace.SHARED if kind == "shared" else MemSpace.LOCAL
        v = Var(name, fresh_id(), ArrayType(elem, space, (0,) * len(dims), tuple(dims)))
        self.locals.append(v)
        env[name] = v

    def let(self, s: ast.stmt, name: str, annot: Scalar | None, value_node: ast.expr,
            rest: list[ast.stmt], env: Env, top: bool) -> Stmt:
        """``name = value`` binding ``name`` for the rest of the block (FE-5)."""
        mutable = _assigns(name, rest)
        from_literal = annot is None and is_literal(value_node)
        hint = annot
        while True:
            value = self.expr(value_node, env, hint)
            if isinstance(value, Ref) and isinstance(value.var.type, ArrayType):
                raise self.err(value_node, "an array cannot be copied or renamed in a kernel")
            t = self.scalar(value, value_node)
            if annot is not None:
                self.expect(value, annot, value_node, f"the value of '{name}'")
            v = Var(name, fresh_id(), t, mutable)
            if from_literal:
                self.literal_init[v.id] = literal_is_float(value_node)
            saved = len(self.locals)
            try:
                body = self.block(rest, {**env, name: v}, top=top)
            except Retype as r:
                if r.var.id != v.id:
                    raise
                del self.locals[saved:]
                hint, from_literal = r.to, False
                continue
            return Let(v, value, body, loc=self.src.loc(s))

    # ------------------------------------------------------------- statements

    def stmt(self, s: ast.stmt, env: Env) -> Stmt:
        loc = self.src.loc(s)
        match s:
            case ast.Assign(targets=[ast.Name() as target], value=value):
                v = self.assignable(target, env)
                e = self.expr(value, env, v.scalar)
                self.expect(e, v.type, value, f"the value assigned to '{v.name}'")
                return Assign(v, e, loc=loc)
            case ast.Assign(targets=[ast.Subscript() as target], value=value):
                arr, index = self.store_target(target, env)
                e = self.expr(value, env, arr.scalar)
                self.expect(e, arr.scalar, value, f"the value stored in '{arr.name}'")
                return Store(arr, index, e, loc=loc)
            case ast.Assign(targets=[target]):
                what = "tuple unpacking" if isinstance(target, ast.Tuple | ast.List) else (
                    "assignment to an attribute" if isinstance(target, ast.Attribute)
                    else f"assignment to {ast.unparse(target)}")
                raise self.err(target, f"{what} is not supported in kernels")
            case ast.Assign(targets=targets):
                raise self.err(targets[1], "chained assignment (a = b = v) is not supported in "
                               "kernels: assign each variable on its own line")
            case ast.AugAssign(target=target, op=op, value=value):
                return self.aug_assign(s, target, op, value, env)
            case ast.AnnAssign():
                raise self.err(s, "annotated assignment to a non-variable is not supported")
            case ast.If(test=test, body=body, orelse=orelse):
                c = self.condition(test, env, "the condition of `if`")
                then = self.block(body, env)
                els = self.block(orelse, env) if orelse else None
                return If(c, then, els, loc=loc)
            case ast.While(test=test, body=body, orelse=orelse):
                if orelse:
                    raise self.err(s, "while ... else is not supported in kernels")
                c = self.condition(test, env, "the condition of `while`")
                return While(c, self.loop_block(body, env), loc=loc)
            case ast.For():
                return self.for_loop(s, env)
            case ast.Return(value=value):
                return self.return_(s, value, env)
            case ast.Pass():
                return Empty(loc=loc)
            case ast.Break() | ast.Continue():
                if not self.loop_depth:
                    word = "break" if isinstance(s, ast.Break) else "continue"
                    raise self.err(s, f"`{word}` outside a loop: it must sit in a `for` or "
                                   "`while` loop of this function")
                return Break(loc=loc) if isinstance(s, ast.Break) else Continue(loc=loc)
            case ast.Expr(value=value):
                return self.expr_stmt(value, env)
        if type(s) in STATEMENTS:
            raise self.unsupported(s)
        raise self.err(s, f"{type(s).__name__} statement is not supported in kernels")

    def condition(self, test: ast.expr, env: Env, what: str) -> Expr:
        c = self.expr(test, env, Scalar.BOOL)
        self.want_bool(c, test, what)
        return c

    def assignable(self, target: ast.Name, env: Env) -> Var:
        v = self.lookup(target, env)
        if isinstance(v.type, ArrayType):
            raise self.err(target, f"'{v.name}' is an array: it cannot be rebound (store "
                           "elements with a[i] = v)")
        if v.id in self.fixed:
            raise self.err(target, f"'{v.name}' is {self.fixed[v.id]} and cannot be assigned: "
                           "copy it into a new variable first")
        if not v.mutable:  # pragma: no cover - FE-5 makes every re-assigned let mutable
            raise self.err(target, f"'{v.name}' is not mutable")
        return v

    def store_target(self, target: ast.Subscript, env: Env) -> tuple[Var, tuple[Expr, ...]]:
        if isinstance(target.value, ast.Attribute):
            raise self.err(target, "only array elements can be assigned (a[i] = v)")
        arr = self.array_var(target.value, env)
        return arr, self.indices(target, arr, env)

    def aug_assign(self, s: ast.AugAssign, target: ast.expr, op: ast.operator,
                   value: ast.expr, env: Env) -> Stmt:
        """``x op= v`` is ``x = x op v``; ``a[i] op= v`` reads and stores ``a[i]`` (FE-4)."""
        loc = self.src.loc(s)
        load = _as_load(target)
        rhs = ast.BinOp(left=load, op=op, right=value)
        ast.copy_location(rhs, s)
        if isinstance(target, ast.Name):
            v = self.assignable(target, env)
            e = self.binop(rhs, env, v.scalar)
            self.expect(e, v.type, s, f"the value assigned to '{v.name}'")
            return Assign(v, e, loc=loc)
        if isinstance(target, ast.Subscript):
            if any(isinstance(n, ast.Call) for n in ast.walk(target.slice)):
                raise self.err(target.slice, "an augmented store evaluates its index twice: a "
                               "helper call there is not supported, assign the index first")
            arr, index = self.store_target(target, env)
            e = self.binop(rhs, env, arr.scalar)
            self.expect(e, arr.scalar, s, f"the value stored in '{arr.name}'")
            return Store(arr, index, e, loc=loc)
        raise self.err(target, f"augmented assignment to {ast.unparse(target)} is not supported")

    def return_(self, s: ast.Return, value: ast.expr | None, env: Env) -> Stmt:
        loc = self.src.loc(s)
        if not self.in_helper:
            if value is not None:
                raise self.err(value, "a kernel returns no value: write a bare `return` (store "
                               "results in an array parameter)")
            return Return(None, loc=loc)
        if value is None:
            if self.result is not Scalar.UNIT:
                raise self.err(s, f"this helper returns a {self.result}: `return` needs a value")
            return Return(None, loc=loc)
        if self.result is Scalar.UNIT:
            raise self.err(value, "this helper has no result annotation (-> f32 …) but returns "
                           "a value")
        e = self.expr(value, env, self.result)
        self.expect(e, self.result, value, "the returned value")
        return Return(e, loc=loc)

    def expr_stmt(self, value: ast.expr, env: Env) -> Stmt:
        loc = self.src.loc(value)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return Empty(loc=loc)  # a string used as a comment
        if not isinstance(value, ast.Call):
            raise self.err(value, "an expression statement has no effect in a kernel")
        f = value.func
        local = isinstance(f, ast.Name) and f.id in self.assigned
        obj = self.resolver.node(f) if isinstance(f, ast.Name | ast.Attribute) and not local \
            else MISSING
        if obj is MISSING and isinstance(f, ast.Name) and f.id in STUBS and not local:
            obj = STUBS[f.id]
        intr = as_intrinsic(obj)
        if intr is not None and intr.name == "barrier":
            if value.args or value.keywords:
                raise self.err(value, "barrier() takes no argument")
            if self.in_helper:
                raise self.err(value, "barrier() is only allowed in a kernel, not in a helper")
            return Barrier(loc=loc)
        if intr is not None and intr.name == "stop":
            code = self.constant_int(value.args[0]) if len(value.args) == 1 else None
            if code is None or value.keywords:
                raise self.err(value, "stop(code) takes one integer constant")
            if self.in_helper:
                raise self.err(value, "stop() is only allowed in a kernel")
            return Stop(code, loc=loc)
        if intr is not None and intr.name in ("shared", "local"):
            raise self.err(value, f"a {intr.name} array must be assigned to a name: "
                           f"tile = {intr.name}(f32, 256)")
        e = self.expr(value, env)
        raise self.err(value, f"the value of this call ({type(e).__name__.lower()}) is "
                       "unused: kernels have no expression statements, assign it")

def _as_load(target: ast.expr) -> ast.expr:
    """A copy of an assignment target usable as a value."""
    node = ast.parse(ast.unparse(target), mode="eval").body
    for a, b in zip(ast.walk(node), ast.walk(target), strict=False):
        ast.copy_location(a, b)
    return node


__all__ = ["FrontendError", "translate_helper", "translate_kernel"]
