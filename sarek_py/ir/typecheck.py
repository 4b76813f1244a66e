"""The checker: is a module, kernel or helper well formed? (specs/ir.md: IR-1..IR-3,
IR-8..IR-14, IR-17..IR-30).

``check_module``, ``check_kernel`` and ``check_helper`` return ``None`` or raise a
:class:`CheckError` located at the offending node (or the nearest enclosing node with a
location). Passes, the interpreter and the emitters assume a checked program.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from sarek_py.ir.atomics import ATOMIC_TYPES
from sarek_py.ir.casts import operands_hint, value_hint
from sarek_py.ir.deep import deep
from sarek_py.ir.diagnostics import CheckError
from sarek_py.ir.dynamic_shared import is_dynamic_shared, local_extent_problem
from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS
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
    Loc,
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
from sarek_py.ir.printer import print_expr
from sarek_py.ir.requires_check import range_problem
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, Type
from sarek_py.ir.visit import ends_every_path, iter_nodes

__all__ = ["check_helper", "check_kernel", "check_module", "returns_on_every_path"]

_INT_RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}
_STOP_MAX = 2**31 - 1


@deep
def check_module(m: Module) -> None:
    """Check every helper and every kernel of ``m`` (IR-30)."""
    _distinct_names(((h.name, h.loc) for h in m.helpers), "helper function", None)
    _distinct_names(((k.name, k.loc) for k in m.kernels), "kernel", None)
    _no_recursion(m.helpers, None)
    for h in m.helpers:
        _check_helper_body(h, m.helpers)
    for k in m.kernels:
        check_kernel(k)


@deep
def check_kernel(k: Kernel) -> None:
    """Check ``k``: its helpers (against ``k.helpers``), declarations and body."""
    where = f"kernel '{k.name}'"
    _distinct_names(((h.name, h.loc) for h in k.helpers), "helper function", where)
    _no_recursion(k.helpers, where)
    for h in k.helpers:
        _check_helper_body(h, k.helpers)
    c = _Checker(where, k.loc, {h.name: h for h in k.helpers}, helper=None)
    c.declare_params(k.params)
    for cond in k.ranges:  # launch conditions over the scalar arguments (LCH-25)
        c.expr(cond)
        bad = range_problem(cond, k.params)
        if bad is not None:
            raise _fail(f"range(...) takes conditions over the launch's scalar arguments: "
                        f"{bad[0]}", bad[1].loc or k.loc, where)
    c.declare_locals(k.locals)
    c.stmt(k.body)


def check_helper(h: HelperFunc, helpers: Sequence[HelperFunc] = ()) -> None:
    """Check ``h``; its calls resolve against ``helpers`` (``h`` itself is always seen)."""
    table = list(helpers)
    if all(x.name != h.name for x in table):
        table.append(h)
    _no_recursion(table, None)
    _check_helper_body(h, table)


def returns_on_every_path(s: Stmt) -> bool:
    """Whether every path through ``s`` ends in a ``return`` (the rule of IR-23)."""
    return ends_every_path(s)


# ------------------------------------------------------------------------------ helpers


def _fail(msg: str, loc: Loc | None, where: str | None) -> CheckError:
    if loc is None and where is not None:
        msg = f"{msg} [in {where}]"
    return CheckError(msg, loc)


def _distinct_names(items: Iterable[tuple[str, Loc | None]], what: str,
                    where: str | None) -> None:
    """IR-18: each name is given once."""
    seen: set[str] = set()
    for name, loc in items:
        if name in seen:
            raise _fail(f"duplicate {what} name '{name}'", loc, where)
        seen.add(name)


def _calls(s: Stmt | Expr) -> Iterator[Call]:
    for n in iter_nodes(s):
        if isinstance(n, Call):
            yield n


def _no_recursion(helpers: Sequence[HelperFunc], where: str | None) -> None:
    """IR-26: the call graph of ``helpers`` is acyclic."""
    table = {h.name: h for h in helpers}
    state: dict[str, int] = {}  # 1 = on the path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for call in _calls(table[name].body):
            if call.func not in table:
                continue  # reported by the call's check (IR-25)
            if state.get(call.func) == 1:
                cycle = [*path[path.index(call.func):], call.func]
                raise _fail(
                    f"recursive call of '{call.func}' ({' -> '.join(cycle)}): "
                    "helper functions cannot be recursive (GPU code has no call stack)",
                    call.loc or table[name].loc, where or f"helper '{name}'")
            if call.func not in state:
                visit(call.func, [*path, call.func])
        state[name] = 2

    for h in helpers:
        if h.name not in state:
            visit(h.name, [h.name])


def _check_helper_body(h: HelperFunc, helpers: Iterable[HelperFunc]) -> None:
    where = f"{'pure ' if h.pure else ''}helper '{h.name}'"
    c = _Checker(where, h.loc, {x.name: x for x in helpers}, helper=h)
    c.declare_params(h.params)
    c.stmt(h.body)
    if h.result is not Scalar.UNIT and not returns_on_every_path(h.body):
        raise _fail(
            f"helper '{h.name}' of result type {h.result} does not end in a return "
            "on every path", h.loc, where)


def _desc(t: Type) -> str:
    return f"array {t}" if isinstance(t, ArrayType) else str(t)


class _Checker:
    """Checks one function body: scopes, types, mutability, purity."""

    def __init__(self, where: str, loc: Loc | None, helpers: Mapping[str, HelperFunc],
                 helper: HelperFunc | None) -> None:
        self.where = where
        self.locs: list[Loc | None] = [loc]
        self.helpers = helpers
        self.helper = helper
        self.scope: dict[int, Var] = {}
        #: the loops around the statement being checked, in this function only (IR-32)
        self.loops = 0

    # -- errors and locations

    def error(self, msg: str, node: object = None) -> CheckError:
        loc = getattr(node, "loc", None)
        if loc is None:
            loc = next((x for x in reversed(self.locs) if x is not None), None)
        return _fail(msg, loc, self.where)

    @contextmanager
    def at(self, node: Expr | Stmt) -> Iterator[None]:
        self.locs.append(node.loc)
        try:
            yield
        finally:
            self.locs.pop()

    @property
    def pure(self) -> bool:
        return self.helper is not None and self.helper.pure

    # -- declarations

    def bind(self, v: Var, node: object) -> None:
        if v.id in self.scope:
            raise self.error(
                f"'{v.name}' (id {v.id}) is bound again inside the scope of "
                f"'{self.scope[v.id].name}' (id {v.id}): no shadowing by id", node)
        self.scope[v.id] = v

    def declare_params(self, params: Sequence[Var]) -> None:
        _distinct_names(((p.name, self.locs[0]) for p in params), "parameter", self.where)
        for p in params:
            if isinstance(p.type, ArrayType):
                if p.type.space is not MemSpace.GLOBAL:
                    raise self.error(
                        f"parameter '{p.name}' is a {p.type.space} array: parameters are "
                        "scalars or global arrays")
            elif p.type is Scalar.UNIT:
                raise self.error(f"parameter '{p.name}' has type unit")
            if p.mutable:
                raise self.error(f"parameter '{p.name}' is mutable: parameters are not")
            self.bind(p, None)

    def declare_locals(self, locs: Sequence[Var]) -> None:
        taken = set(v.name for v in self.scope.values())
        dynamic: str | None = None
        for v in locs:
            if v.name in taken:
                raise self.error(f"duplicate local name '{v.name}'")
            taken.add(v.name)
            if isinstance(v.type, ArrayType):
                if v.type.space is MemSpace.GLOBAL:
                    raise self.error(
                        f"local '{v.name}' is a global array: a kernel declares only "
                        "shared and local arrays")
                why = local_extent_problem(v.name, v.type)  # IR-50
                if why is not None:
                    raise self.error(why)
                if is_dynamic_shared(v.type):
                    if dynamic is not None:  # IR-51
                        raise self.error(
                            f"shared arrays '{dynamic}' and '{v.name}' are both sized at "
                            "launch: a kernel has at most one dynamic shared array (give "
                            "the others constant extents, or take them as slices of one)")
                    dynamic = v.name
            else:
                if v.type is Scalar.UNIT:
                    raise self.error(f"local '{v.name}' has type unit")
                if not v.mutable:
                    raise self.error(f"scalar local '{v.name}' must be mutable")
            self.bind(v, None)

    def use(self, v: Var, node: object) -> Var:
        """IR-17: ``v`` is bound here, with its binder's name, type and mutability."""
        b = self.scope.get(v.id)
        if b is None:
            raise self.error(f"unknown variable '{v.name}' (id {v.id}): not bound here", node)
        if (b.name, b.type, b.mutable) != (v.name, v.type, v.mutable):
            raise self.error(
                f"variable '{v.name}' (id {v.id}) is used as {_desc(v.type)}"
                f"{' mutable' if v.mutable else ''} but bound as '{b.name}' : "
                f"{_desc(b.type)}{' mutable' if b.mutable else ''}", node)
        return b

    def array(self, v: Var, node: object, what: str) -> ArrayType:
        self.use(v, node)
        if not isinstance(v.type, ArrayType):
            raise self.error(f"{what} of '{v.name}', which is a {v.type} scalar, not an array",
                             node)
        return v.type

    # -- statements

    def stmt(self, s: Stmt) -> None:
        with self.at(s):
            self._stmt(s)

    def _stmt(self, s: Stmt) -> None:
        match s:
            case Let(var=v, value=e, body=b):
                if isinstance(v.type, ArrayType):
                    raise self.error(f"'let {v.name}' binds an array: arrays are not values", s)
                if v.mutable and v.type is Scalar.UNIT:
                    raise self.error(f"'let mut {v.name}' has type unit", s)
                t = self.value(e)
                if t != v.type:
                    raise self.error(
                        f"'let {v.name} : {v.type}' is given a value of type {_desc(t)}", s)
                self.bind(v, s)
                self.stmt(b)
                del self.scope[v.id]
            case Assign(var=v, value=e):
                self.use(v, s)
                if isinstance(v.type, ArrayType):
                    raise self.error(f"assignment to array '{v.name}': store elements instead",
                                     s)
                if not v.mutable:
                    raise self.error(
                        f"assignment to immutable variable '{v.name}' (only 'let mut' "
                        "variables and kernel locals can be assigned)", s)
                t = self.value(e)
                if t != v.type:
                    hint = value_hint(print_expr(e), t, v.type) if isinstance(
                        t, Scalar) and isinstance(v.type, Scalar) else ""
                    raise self.error(f"assignment of a {_desc(t)} value to '{v.name}' of type "
                                     f"{v.type}{hint}", s)
            case Store(array=a, index=idx, value=e):
                at = self.array(a, s, "store into element")
                if self.pure:
                    raise self.error(
                        f"pure helper '{self._hname()}' stores into array '{a.name}'", s)
                self.indices(a, at, idx, s)
                t = self.expr(e)
                if t != at.elem:
                    hint = value_hint(print_expr(e), t, at.elem) if isinstance(t, Scalar) \
                        else ""
                    raise self.error(
                        f"store of a {_desc(t)} value into '{a.name}' of element type "
                        f"{at.elem}{hint}", s)
            case Seq(stmts=ss):
                for x in ss:
                    self.stmt(x)
            case If(cond=c, then=t, else_=e):
                self.condition(c, "if")
                self.stmt(t)
                if e is not None:
                    self.stmt(e)
            case For(var=v, start=lo, stop=hi, body=b):
                if v.mutable:
                    raise self.error(f"for variable '{v.name}' is mutable: it must not be", s)
                if not (isinstance(v.type, Scalar) and v.type.is_int):
                    raise self.error(
                        f"for variable '{v.name}' has type {_desc(v.type)}, not an integer "
                        "type", s)
                for what, bound in (("start", lo), ("stop", hi)):
                    t = self.expr(bound)
                    if t != v.type:
                        raise self.error(
                            f"for loop {what} bound has type {_desc(t)}, loop variable "
                            f"'{v.name}' has type {v.type}", bound)
                self.bind(v, s)
                self.loop_body(b)
                del self.scope[v.id]
            case While(cond=c, body=b):
                self.condition(c, "while")
                self.loop_body(b)
            case Break() | Continue():
                if not self.loops:
                    word = "break" if isinstance(s, Break) else "continue"
                    where = (f"helper '{self.helper.name}'" if self.helper is not None
                             else "the kernel")
                    raise self.error(
                        f"'{word}' outside a loop: it must sit in a for or while loop of "
                        f"{where} (a loop around a call does not count)", s)
            case Return(value=e):
                self.ret(s, e)
            case Barrier():
                if self.helper is not None:
                    raise self.error(
                        f"barrier in helper '{self.helper.name}': barriers are allowed "
                        "only in a kernel's body", s)
            case Stop(code=code):
                if self.pure:
                    raise self.error(f"pure helper '{self._hname()}' has a stop", s)
                if not 1 <= code <= _STOP_MAX:
                    raise self.error(f"stop code {code} is not in 1..{_STOP_MAX}", s)
            case Pragma(body=b):
                self.stmt(b)
            case Empty():
                pass
            case _:
                raise self.error(f"not a statement: {type(s).__name__}", s)

    def loop_body(self, b: Stmt) -> None:
        self.loops += 1
        try:
            self.stmt(b)
        finally:
            self.loops -= 1

    def _hname(self) -> str:
        return self.helper.name if self.helper is not None else "?"

    def ret(self, s: Return, e: Expr | None) -> None:
        if self.helper is None:
            if e is not None:
                raise self.error("return with a value in a kernel", s)
            return
        r = self.helper.result
        if r is Scalar.UNIT:
            if e is not None:
                raise self.error(
                    f"return with a value in helper '{self.helper.name}' of result type unit",
                    s)
            return
        if e is None:
            raise self.error(
                f"return without a value in helper '{self.helper.name}' of result type {r}", s)
        t = self.expr(e)
        if t != r:
            raise self.error(
                f"return of a {_desc(t)} value from helper '{self.helper.name}' of result "
                f"type {r}", s)

    def condition(self, c: Expr, what: str) -> None:
        t = self.expr(c)
        if t is not Scalar.BOOL:
            raise self.error(f"{what} condition has type {_desc(t)}, not bool", c)

    def indices(self, a: Var, at: ArrayType, idx: tuple[Expr, ...], node: object) -> None:
        if len(idx) != at.rank:
            raise self.error(
                f"'{a.name}' has {at.rank} dimension{'s' if at.rank > 1 else ''} but is "
                f"indexed with {len(idx)} index{'es' if len(idx) != 1 else ''}", node)
        for k, i in enumerate(idx):
            t = self.expr(i)
            if not (isinstance(t, Scalar) and t.is_int):
                raise self.error(
                    f"index {k + 1} of '{a.name}' has type {_desc(t)}, not an integer type", i)

    # -- expressions

    def value(self, e: Expr) -> Type:
        """The type of the value of a ``let`` or an assignment: the one place an atomic
        may stand (IR-34)."""
        if isinstance(e, Atomic):
            with self.at(e):
                return self.atomic(e)
        return self.expr(e)

    def atomic(self, e: Atomic) -> Scalar:
        """IR-33: an atomic updates an element of a global or shared array of ``i32``,
        ``i64``, ``f32`` or ``f64`` with operands of the element's type."""
        word, a = e.op.value, e.array
        at = self.array(a, e, f"{word} of an element")
        if at.space is MemSpace.LOCAL:
            raise self.error(
                f"{word} on local array '{a.name}': atomics update global or shared arrays "
                f"(a local array belongs to one thread: update it with a plain store, "
                f"{a.name}[i] <- ...)", e)
        if at.elem not in ATOMIC_TYPES:
            raise self.error(
                f"{word} on '{a.name}' of element type {at.elem}: atomics take i32, i64, "
                "f32 or f64 elements", e)
        if self.pure:
            raise self.error(
                f"pure helper '{self._hname()}' updates array '{a.name}' with {word}", e)
        self.indices(a, at, e.index, e)
        operands = [("value", e.value)] if e.compare is None else [
            ("expected value", e.compare), ("new value", e.value)]
        for what, x in operands:
            t = self.expr(x)
            if t != at.elem:
                hint = (f": cast it, {at.elem}(...)" if isinstance(t, Scalar) and t.is_numeric
                        else "")
                raise self.error(
                    f"{word} {what} has type {_desc(t)}, '{a.name}' has element type "
                    f"{at.elem} (no implicit conversion{hint})", x)
        return at.elem

    def expr(self, e: Expr, array_ok: bool = False) -> Type:
        with self.at(e):
            t = self._expr(e)
        if isinstance(t, ArrayType) and not array_ok:
            name = e.var.name if isinstance(e, Ref) else "?"
            raise self.error(
                f"array '{name}' used as a value: arrays are indexed, measured with length, "
                "or passed whole to a helper", e)
        return t

    def scalar(self, e: Expr) -> Scalar:
        t = self.expr(e)
        assert isinstance(t, Scalar)
        return t

    def _expr(self, e: Expr) -> Type:
        match e:
            case Const(value=v, type=t):
                self.const(e, v, t)
                return t
            case Ref(var=v):
                return self.use(v, e).type
            case Unary(op=op, arg=a):
                return self.unary(e, op, self.scalar(a))
            case Binary(op=op, lhs=lhs, rhs=rhs):
                return self.binary(e, op, self.scalar(lhs), self.scalar(rhs))
            case Read(array=a, index=idx):
                at = self.array(a, e, "read of an element")
                self.indices(a, at, idx, e)
                return at.elem
            case Cast(to=to, arg=a):
                t = self.scalar(a)
                ok = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64, Scalar.BOOL)
                if to not in ok or t not in ok:
                    raise self.error(f"cast from {t} to {to}: casts convert between numeric "
                                     "and bool scalars", e)
                return to
            case Cond(cond=c, if_true=a, if_false=b):
                self.condition(c, "conditional expression")
                ta, tb = self.scalar(a), self.scalar(b)
                if ta != tb:
                    raise self.error(
                        f"conditional expression arms have different types {ta} and {tb}", e)
                return ta
            case Intrinsic(name=n, args=args):
                return self.intrinsic(e, n, args)
            case Call():
                return self.call(e)
            case Length(array=a, dim=d):
                at = self.array(a, e, "length")
                if not 0 <= d < at.rank:
                    raise self.error(
                        f"length of dimension {d} of '{a.name}', which has rank {at.rank}", e)
                return Scalar.I32
            case Atomic(op=op):
                raise self.error(
                    f"{op.value} inside an expression: an atomic is the whole value of a let "
                    f"or an assignment (write 'let old = {op.value}(...) in ...' and use "
                    "old)", e)
        raise self.error(f"not an expression: {type(e).__name__}", e)

    def const(self, e: Expr, v: object, t: Scalar) -> None:
        if t.is_int:
            lo, hi = _INT_RANGE[t]
            ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
        elif t.is_float:
            ok = isinstance(v, float)
        elif t is Scalar.BOOL:
            ok = isinstance(v, bool)
        else:
            ok = v is None
        if not ok:
            raise self.error(f"constant {v!r} is not a value of type {t}", e)

    def unary(self, e: Expr, op: UnaryOp, t: Scalar) -> Scalar:
        if op is UnaryOp.NEG and t.is_numeric:
            return t
        if op is UnaryOp.NOT and t is Scalar.BOOL:
            return t
        if op is UnaryOp.BNOT and t.is_int:
            return t
        need = {UnaryOp.NEG: "a numeric", UnaryOp.NOT: "a bool", UnaryOp.BNOT: "an integer"}
        raise self.error(f"operator '{op.value}' needs {need[op]} operand, got {t}", e)

    def binary(self, e: Expr, op: BinaryOp, lt: Scalar, rt: Scalar) -> Scalar:
        sym = op.value
        if op.is_logical:
            if lt is Scalar.BOOL and rt is Scalar.BOOL:
                return Scalar.BOOL
            raise self.error(f"operator '{sym}' needs bool operands, got {lt} and {rt}", e)
        if lt != rt:
            hint = "use a cast"
            if isinstance(e, Binary):  # IR-40: the cast C's conversions would make
                hint = operands_hint(print_expr(e.lhs), lt, print_expr(e.rhs), rt)
            raise self.error(
                f"operator '{sym}' on different types {lt} and {rt} (no implicit "
                f"conversion: {hint})", e)
        if op in (BinaryOp.EQ, BinaryOp.NE):
            if lt.is_numeric or lt is Scalar.BOOL:
                return Scalar.BOOL
            raise self.error(f"operator '{sym}' needs numeric or bool operands, got {lt}", e)
        if op.is_compare:
            if lt.is_numeric:
                return Scalar.BOOL
            raise self.error(f"operator '{sym}' needs numeric operands, got {lt}", e)
        if op is BinaryOp.MOD or op.is_bitwise or op.is_shift:
            if lt.is_int:
                return lt
            raise self.error(f"operator '{sym}' needs integer operands, got {lt}", e)
        if lt.is_numeric:  # + - * /
            return lt
        raise self.error(f"operator '{sym}' needs numeric operands, got {lt}", e)

    def intrinsic(self, e: Expr, n: str, args: tuple[Expr, ...]) -> Scalar:
        if n in THREAD_INTRINSICS:
            if args:
                raise self.error(f"thread intrinsic '{n}' takes no argument", e)
            if self.pure:
                raise self.error(
                    f"pure helper '{self._hname()}' uses thread intrinsic '{n}'", e)
            return Scalar.I32
        if n not in MATH:
            raise self.error(f"unknown intrinsic '{n}'", e)
        arity, float_only = MATH[n]
        if len(args) != arity:
            raise self.error(
                f"'{n}' takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}", e)
        ts = [self.scalar(a) for a in args]
        if any(t != ts[0] for t in ts):
            raise self.error(
                f"'{n}' arguments have different types {', '.join(map(str, ts))}", e)
        t = ts[0]
        if float_only and not t.is_float:
            raise self.error(f"'{n}' needs a float argument, got {t}", e)
        if not t.is_numeric:
            raise self.error(f"'{n}' needs numeric arguments, got {t}", e)
        return t

    def call(self, e: Call) -> Scalar:
        h = self.helpers.get(e.func)
        if h is None:
            raise self.error(f"call of unknown helper function '{e.func}'", e)
        if self.pure and not h.pure:
            raise self.error(
                f"pure helper '{self._hname()}' calls '{h.name}', which is not pure", e)
        if e.result != h.result:
            raise self.error(
                f"call of '{h.name}' records result type {e.result}, the helper returns "
                f"{h.result}", e)
        if len(e.args) != len(h.params):
            raise self.error(
                f"'{h.name}' takes {len(h.params)} argument{'s' if len(h.params) != 1 else ''}"
                f", got {len(e.args)}", e)
        for k, (a, p) in enumerate(zip(e.args, h.params, strict=True)):
            t = self.expr(a, array_ok=True)
            if isinstance(p.type, ArrayType):
                if not isinstance(a, Ref) or not isinstance(t, ArrayType) or not _fits(
                        t, p.type):
                    raise self.error(
                        f"argument {k + 1} of '{h.name}' ('{p.name}') must be an array of "
                        f"type {p.type}, got {_desc(t)}", a)
            elif t != p.type:
                raise self.error(
                    f"argument {k + 1} of '{h.name}' ('{p.name}') has type {_desc(t)}, "
                    f"expected {p.type}", a)
        return h.result


def _fits(arg: ArrayType, param: ArrayType) -> bool:
    """IR-25: an array argument for an array parameter."""
    if (arg.elem, arg.space, arg.lower) != (param.elem, param.space, param.lower):
        return False
    return all(p is None or p == a for a, p in zip(arg.shape, param.shape, strict=True))
