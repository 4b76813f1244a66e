"""Calls in kernels: casts, intrinsics, ``len``/``length`` and ``@helper`` functions
(FE-9, FE-10, FE-11)."""

from __future__ import annotations

import abc
import ast

from sarek_py.frontend.annotations import ScalarMarker
from sarek_py.frontend.intrinsics import STUBS
from sarek_py.frontend.resolve import MISSING, as_intrinsic
from sarek_py.frontend.scope import Env, HelperLike, TranslatorState
from sarek_py.frontend.source import FrontendError
from sarek_py.ir.atomics import ATOMIC_WORDS
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.intrinsics import MATH, THREAD_INTRINSICS
from sarek_py.ir.nodes import Atomic, AtomicOp, Call, Cast, Expr, Intrinsic, Length, Ref, Var
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar


class CallTranslator(TranslatorState, abc.ABC):
    """The call part of the expression translator."""

    @abc.abstractmethod
    def expr(self, node: ast.expr, env: Env, hint: Scalar | None = None) -> Expr:
        """The translation of an expression."""

    @abc.abstractmethod
    def pair(self, a: ast.expr, b: ast.expr, env: Env, hint: Scalar | None,
             at: ast.AST) -> tuple[Expr, Expr]:
        """Two operands of one type."""

    @abc.abstractmethod
    def untyped(self, node: ast.expr) -> bool:
        """Whether ``node`` is made of literals only."""

    @abc.abstractmethod
    def array_var(self, node: ast.expr, env: Env) -> Var:
        """The array a name stands for."""

    def call(self, node: ast.Call, env: Env, hint: Scalar | None) -> Expr:
        loc = self.src.loc(node)
        if node.keywords:
            raise self.err(node.keywords[0].value, "keyword arguments are not supported in "
                           "kernel calls")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.unsupported(a)
        f = node.func
        if isinstance(f, ast.Name) and (f.id in env or f.id in self.assigned):
            raise self.err(f, f"'{f.id}' is a kernel variable, not a function")
        obj = self.resolver.node(f) if isinstance(f, ast.Name | ast.Attribute) else MISSING
        fname = ast.unparse(f)
        if obj is MISSING and isinstance(f, ast.Name) and f.id in STUBS:
            obj = STUBS[f.id]
        if isinstance(obj, ScalarMarker):
            if len(node.args) != 1:
                raise self.err(node, f"the cast {fname}(x) takes one argument")
            arg = self.expr(node.args[0], env, None)
            self.scalar(arg, node.args[0])
            return Cast(obj.scalar, arg, loc=loc)
        if isinstance(obj, HelperLike):
            return self.helper_call(node, obj, env)
        intr = as_intrinsic(obj)
        if intr is None:
            if obj is MISSING:
                raise self.err(f, f"'{fname}' is not defined")
            what = getattr(obj, "__name__", fname)
            if hasattr(obj, "kernel_ir"):
                raise self.err(node, f"a kernel cannot call the kernel '{what}': make it a "
                               "@helper")
            if any(obj is t for t in (int, float, bool)):
                raise self.err(node, f"{what}(x) is not supported in kernels: cast with i32(x), "
                               "i64(x), f32(x), f64(x)")
            raise self.err(node, f"call of {what} is not supported in kernels (only "
                           "intrinsics, @helper functions and casts)")
        name = intr.name
        if name in THREAD_INTRINSICS:
            if node.args:
                raise self.err(node, f"{name}() takes no argument")
            return Intrinsic(name, (), loc=loc)
        if name in MATH:
            return self.math(node, name, env, hint)
        if name == "length":
            return self.length(node, env)
        if name in ATOMIC_WORDS:
            return self.atomic(node, ATOMIC_WORDS[name], env)
        raise self.err(node, f"{name}() is a statement, not a value")

    def atomic(self, node: ast.Call, op: AtomicOp, env: Env) -> Expr:
        """FE-25: ``atomic_add(a, i, v)`` (``i`` an index or a tuple of indices),
        ``atomic_cas(a, i, expected, new)``: the element's old value."""
        name = op.value
        shape = (f"{name}(array, index, expected, new)" if op is AtomicOp.CAS
                 else f"{name}(array, index, value)")
        if len(node.args) != 3 + (op is AtomicOp.CAS):
            raise self.err(node, f"{shape} takes {3 + (op is AtomicOp.CAS)} arguments, not "
                           f"{len(node.args)}")
        arr = self.array_var(node.args[0], env)
        assert isinstance(arr.type, ArrayType)
        where = node.args[1]
        items = list(where.elts) if isinstance(where, ast.Tuple) else [where]
        if len(items) != arr.type.rank:
            raise self.err(where, f"'{arr.name}' has rank {arr.type.rank} but {name} gives "
                           f"{len(items)} index{'es' if len(items) != 1 else ''}")
        index: list[Expr] = []
        for it in items:
            e = self.expr(it, env, None)
            if not self.scalar(e, it).is_int:
                raise self.err(it, f"an array index is {type_of(e)}, not an integer")
            index.append(e)
        elem = arr.type.elem
        operands: list[Expr] = []
        for x in node.args[2:]:
            e = self.expr(x, env, elem)
            self.expect(e, elem, x, f"the operand of {name} on '{arr.name}'")
            operands.append(e)
        compare = operands[0] if op is AtomicOp.CAS else None
        return Atomic(op, arr, tuple(index), operands[-1], compare, loc=self.src.loc(node))

    def math(self, node: ast.Call, name: str, env: Env, hint: Scalar | None) -> Expr:
        arity, float_only = MATH[name]
        if len(node.args) != arity:
            raise self.err(node, f"{name} takes {arity} argument{'s' if arity > 1 else ''}, "
                           f"not {len(node.args)}")
        if float_only and (hint is None or not hint.is_float) \
                and all(self.untyped(x) for x in node.args):
            hint = Scalar.F64  # sqrt(2): the literal is a float, as Python's would be
        if arity == 2:
            a, b = self.pair(node.args[0], node.args[1], env, hint, node)
            args: tuple[Expr, ...] = (a, b)
        else:
            args = (self.expr(node.args[0], env, hint),)
        t = self.scalar(args[0], node.args[0])
        if float_only and not t.is_float or not t.is_numeric:
            raise self.err(node, f"{name} takes {'float' if float_only else 'numeric'} "
                           f"arguments, not {t}" + (f"; cast it: {name}(f32(x))"
                                                    if t.is_int else ""))
        return Intrinsic(name, args, loc=self.src.loc(node))

    def length(self, node: ast.Call, env: Env) -> Expr:
        if not 1 <= len(node.args) <= 2:
            raise self.err(node, "length(a[, dim]) takes an array and an optional dimension")
        arr = self.array_var(node.args[0], env)
        dim = 0
        if len(node.args) == 2:
            d = node.args[1]
            if not (isinstance(d, ast.Constant) and isinstance(d.value, int)):
                raise self.err(d, "the dimension of length must be an integer constant")
            dim = d.value
        assert isinstance(arr.type, ArrayType)
        if not 0 <= dim < arr.type.rank:
            raise self.err(node, f"dimension {dim} out of range: '{arr.name}' has rank "
                           f"{arr.type.rank}")
        return Length(arr, dim, loc=self.src.loc(node))

    def helper_call(self, node: ast.Call, h: HelperLike, env: Env) -> Expr:
        try:
            hf = h.helper_ir()
        except FrontendError:
            raise
        except SarekError as err:
            if err.loc is not None:
                raise
            raise self.err(node, err.message) from None
        for dep in (*h.helper_deps(), hf):
            have = self.helpers.get(dep.name)
            if have is not None and have != dep:
                raise self.err(node, f"two different helper functions are named '{dep.name}'")
            self.helpers[dep.name] = dep
        if len(node.args) != len(hf.params):
            raise self.err(node, f"helper '{hf.name}' takes {len(hf.params)} arguments, not "
                           f"{len(node.args)}")
        args: list[Expr] = []
        for a, p in zip(node.args, hf.params, strict=True):
            if isinstance(p.type, ArrayType):
                v = self.array_var(a, env)
                if v.type != p.type:
                    raise self.err(a, f"argument '{p.name}' of '{hf.name}' is {p.type}, not "
                                   f"{v.type}")
                args.append(Ref(v, loc=self.src.loc(a)))
                continue
            e = self.expr(a, env, p.type)
            self.expect(e, p.type, a, f"argument '{p.name}' of '{hf.name}'")
            args.append(e)
        return Call(hf.name, tuple(args), hf.result, loc=self.src.loc(node))
