"""The checker (specs/ir.md, IR-1..IR-3, IR-8..IR-14, IR-17..IR-30): one test per rule,
each showing a well-formed case passes and an ill-formed one is refused with a located,
clear error."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarek_py.ir.diagnostics import CheckError
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
    Loc,
    Module,
    Pragma,
    Read,
    Ref,
    Return,
    Stmt,
    Stop,
    Store,
    Unary,
    UnaryOp,
    Var,
    While,
    seq,
    var,
)
from sarek_py.ir.typecheck import (
    check_helper,
    check_kernel,
    check_module,
    returns_on_every_path,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, array

I32, I64, F32, F64, BOOL, UNIT = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64,
                                  Scalar.BOOL, Scalar.UNIT)


def c(v: int | float | bool | None, t: Scalar | None = None) -> Const:
    if t is None:
        t = BOOL if isinstance(v, bool) else F32 if isinstance(v, float) else I32
    return Const(v, t)


def b(op: str, lhs: Expr, rhs: Expr) -> Binary:
    return Binary(BinaryOp(op), lhs, rhs)


def tid() -> Intrinsic:
    return Intrinsic("global_thread_id")


def kern(body: Stmt, params: tuple[Var, ...] = (), locals_: tuple[Var, ...] = (),
         helpers: tuple[HelperFunc, ...] = (), loc: Loc | None = None) -> Kernel:
    return Kernel("k", params, locals_, body, helpers, loc=loc)


def refused(k: Kernel | HelperFunc | Module, *fragments: str) -> CheckError:
    with pytest.raises(CheckError) as info:
        if isinstance(k, Kernel):
            check_kernel(k)
        elif isinstance(k, HelperFunc):
            check_helper(k)
        else:
            check_module(k)
    text = str(info.value)
    for f in fragments:
        assert f in text, (f, text)
    return info.value


def store_stmt(e: Expr, t: Scalar = F32) -> Kernel:
    """A kernel storing ``e`` into ``out[0]`` (element type ``t``)."""
    out = var("out", array(t))
    return kern(Store(out, (c(0),), e), (out,))


def saxpy() -> Kernel:
    x, y, a, n = var("x", array(F32)), var("y", array(F32)), var("a", F32), var("n", I32)
    i = var("i", I32)
    body = Let(i, tid(), If(b("<", Ref(i), Ref(n)), Store(
        y, (Ref(i),), b("+", b("*", Ref(a), Read(x, (Ref(i),))), Read(y, (Ref(i),))))))
    return Kernel("saxpy", (x, y, a, n), (), body)


def test_well_formed_kernels_pass() -> None:
    """A saxpy and a block reduction with shared memory, a barrier and a helper pass."""
    check_kernel(saxpy())
    xs, out = var("xs", array(F32)), var("out", array(F32))
    sh = var("sh", ArrayType(F32, MemSpace.SHARED, (0,), (256,)))
    acc = var("acc", F32, mutable=True)
    p, q = var("p", F32), var("q", F32)
    add = HelperFunc("add", (p, q), F32, Return(b("+", Ref(p), Ref(q))), pure=True)
    t, s = var("t", I32), var("s", I32)
    loop = For(s, c(0), c(7), If(b("<", Ref(t), b("<<", c(1), Ref(s))), Store(
        sh, (Ref(t),), Call("add", (Read(sh, (Ref(t),)), Read(sh, (Ref(t),))), F32))))
    body = Let(t, Intrinsic("thread_idx_x"), seq(
        Store(sh, (Ref(t),), Read(xs, (tid(),))), Barrier(), loop, Barrier(),
        Assign(acc, Read(sh, (c(0),))),
        If(b("==", Ref(t), c(0)), Store(out, (Intrinsic("block_idx_x"),), Ref(acc)))))
    k = Kernel("reduce", (xs, out), (sh, acc), body, (add,))
    check_kernel(k)
    check_module(Module((add,), (k,)))


# ----------------------------------------------------------------------------- IR-1..3


@pytest.mark.parametrize("const", [
    Const(True, I32), Const(2**31, I32), Const(-(2**31) - 1, I32), Const(2**63, I64),
    Const(1, F32), Const(1.5, I32), Const(1, BOOL), Const(None, F64), Const(0, UNIT),
])
def test_ir1_constants_fit_their_type(const: Const) -> None:
    if const.type is UNIT:
        k = kern(Let(var("u", UNIT), const, Barrier()))
    else:
        k = store_stmt(const, const.type)
    refused(k, f"constant {const.value!r} is not a value of type {const.type}")


@pytest.mark.parametrize("const", [
    Const(2**31 - 1, I32), Const(-(2**31), I32), Const(2**63 - 1, I64), Const(0.5, F32),
    Const(float("inf"), F64), Const(False, BOOL),
])
def test_ir1_constants_in_range_pass(const: Const) -> None:
    check_kernel(store_stmt(const, const.type))


def test_ir1_unit_has_no_storage() -> None:
    refused(kern(Barrier(), (var("u", UNIT),)), "parameter 'u' has type unit")
    refused(kern(Barrier(), (), (var("u", UNIT, mutable=True),)), "local 'u' has type unit")
    refused(kern(Let(var("u", UNIT, mutable=True), Const(None, UNIT), Barrier())),
            "'let mut u' has type unit")
    with pytest.raises(ValueError):
        array(UNIT)


def test_ir1_unit_call_only_as_let_value() -> None:
    a = var("a", array(F32))
    w = HelperFunc("w", (a,), UNIT, Store(a, (c(0),), c(1.0)))
    ok = kern(Let(var("_", UNIT), Call("w", (Ref(a),), UNIT), Barrier()), (a,), (), (w,))
    check_kernel(ok)
    bad = kern(Store(a, (c(0),), Call("w", (Ref(a),), UNIT)), (a,), (), (w,))
    refused(bad, "store of a unit value")
    bad2 = kern(If(b("==", Call("w", (Ref(a),), UNIT), Call("w", (Ref(a),), UNIT)),
                   Barrier()), (a,), (), (w,))
    refused(bad2, "operator '==' needs numeric or bool operands, got unit")


def test_ir2_params_are_scalars_or_global_arrays() -> None:
    sh = var("s", array(F32, 1, MemSpace.SHARED))
    refused(kern(Barrier(), (sh,)), "parameter 's' is a shared array")
    lo = var("l", ArrayType(F32, MemSpace.LOCAL, (0,), (4,)))
    refused(HelperFunc("f", (lo,), UNIT, Return()), "parameter 'l' is a local array")
    check_kernel(kern(Barrier(), (var("g", array(F32, 2)), var("n", I64))))


def test_ir2_locals_are_not_global_arrays() -> None:
    g = var("g", ArrayType(F32, MemSpace.GLOBAL, (0,), (4,)))
    refused(kern(Barrier(), (), (g,)), "local 'g' is a global array")


def test_ir3_shared_and_local_arrays_have_constant_extents() -> None:
    sh = var("sh", ArrayType(F32, MemSpace.SHARED, (0, 0), (16, None)))
    refused(kern(Barrier(), (), (sh,)), "shared array 'sh' needs constant extents")
    lo = var("lo", ArrayType(I32, MemSpace.LOCAL, (1,), (None,)))
    refused(kern(Barrier(), (), (lo,)), "local array 'lo' needs constant extents")
    ok = var("ok", ArrayType(I32, MemSpace.LOCAL, (1,), (8,)))
    check_kernel(kern(Store(ok, (c(1),), c(3)), (), (ok,)))


# ---------------------------------------------------------------------------- IR-8..13


def test_ir8_thread_intrinsics_take_nothing_and_are_i32() -> None:
    refused(store_stmt(Intrinsic("thread_idx_x", (c(1),)), I32),
            "thread intrinsic 'thread_idx_x' takes no argument")
    refused(store_stmt(Intrinsic("block_dim_y"), I64), "store of a i32 value")
    check_kernel(store_stmt(Intrinsic("grid_dim_z"), I32))


def test_ir8_math_intrinsics_arity_and_types() -> None:
    check_kernel(store_stmt(Intrinsic("abs", (c(-3),)), I32))
    check_kernel(store_stmt(Intrinsic("pow", (c(2.0, F64), c(0.5, F64))), F64))
    refused(store_stmt(Intrinsic("sqrt", (c(4),)), I32), "'sqrt' needs a float argument")
    refused(store_stmt(Intrinsic("min", (c(1), c(1, I64))), I32),
            "'min' arguments have different types i32, i64")
    refused(store_stmt(Intrinsic("pow", (c(1.0),))), "'pow' takes 2 arguments, got 1")
    refused(store_stmt(Intrinsic("max", (c(True), c(False))), BOOL),
            "'max' needs numeric arguments")
    refused(store_stmt(Intrinsic("erf", (c(1.0),))), "unknown intrinsic 'erf'")


def test_ir9_logical_operators_take_bool() -> None:
    check_kernel(store_stmt(b("&&", c(True), Unary(UnaryOp.NOT, c(False))), BOOL))
    refused(store_stmt(b("||", c(1), c(True)), BOOL), "operator '||' needs bool operands")
    refused(store_stmt(Unary(UnaryOp.NOT, c(1)), I32),
            "operator '!' needs a bool operand, got i32")


def test_ir10_arithmetic_has_no_implicit_conversion() -> None:
    check_kernel(store_stmt(b("%", c(7, I64), c(2, I64)), I64))
    check_kernel(store_stmt(Unary(UnaryOp.NEG, b("/", c(1.0, F64), c(3.0, F64))), F64))
    refused(store_stmt(b("+", c(1), c(1, I64)), I64),
            "operator '+' on different types i32 and i64")
    refused(store_stmt(b("*", c(1.0), c(1.0, F64)), F64), "different types f32 and f64")
    refused(store_stmt(b("%", c(1.0), c(2.0))), "operator '%' needs integer operands")
    refused(store_stmt(b("-", c(True), c(False)), BOOL), "operator '-' needs numeric")
    refused(store_stmt(Unary(UnaryOp.NEG, c(True)), BOOL), "operator '-' needs a numeric")


def test_ir11_comparisons_give_bool() -> None:
    check_kernel(store_stmt(b("!=", c(True), b("<=", c(1.0), c(2.0))), BOOL))
    refused(store_stmt(b("<", c(True), c(False)), BOOL), "operator '<' needs numeric")
    refused(store_stmt(b("==", c(1), c(1.0)), BOOL), "different types i32 and f32")
    refused(store_stmt(b(">", c(1), c(2)), I32), "store of a bool value")


def test_ir12_bitwise_and_shifts_on_integers() -> None:
    check_kernel(store_stmt(b("^", b("<<", c(1, I64), c(3, I64)), Unary(UnaryOp.BNOT,
                                                                        c(5, I64))), I64))
    refused(store_stmt(b("&", c(1.0), c(2.0))), "operator '&' needs integer operands")
    refused(store_stmt(b("|", c(True), c(False)), BOOL), "operator '|' needs integer")
    refused(store_stmt(b(">>", c(8, I64), c(1)), I64), "operator '>>' on different types")
    refused(store_stmt(Unary(UnaryOp.BNOT, c(1.0))), "operator '~' needs an integer")


def test_ir13_casts_and_conditionals() -> None:
    check_kernel(store_stmt(Cast(F32, Cast(BOOL, c(3))), F32))
    check_kernel(store_stmt(Cond(c(True), c(1), c(2)), I32))
    refused(kern(Let(var("u", UNIT), Cast(UNIT, c(1)), Barrier())), "cast from i32 to unit")
    refused(store_stmt(Cond(c(1), c(1), c(2)), I32),
            "conditional expression condition has type i32, not bool")
    refused(store_stmt(Cond(c(True), c(1), c(2, I64)), I32),
            "arms have different types i32 and i64")


# -------------------------------------------------------------------------------- IR-14


def _pure(body: Stmt, params: tuple[Var, ...] = (), result: Scalar = F32) -> HelperFunc:
    return HelperFunc("p", params, result, body, pure=True)


def test_ir14_pure_helper_may_read_its_array_arguments() -> None:
    a, i = var("a", array(F32)), var("i", I32)
    check_helper(_pure(Return(Read(a, (Ref(i),))), (a, i)))


def test_ir14_pure_helper_writes_nothing() -> None:
    a = var("a", array(F32))
    refused(_pure(seq(Store(a, (c(0),), c(1.0)), Return(c(1.0))), (a,)),
            "pure helper 'p' stores into array 'a'")
    # the same body is fine in a helper that does not claim to be pure
    check_helper(HelperFunc("p", (a,), F32, seq(Store(a, (c(0),), c(1.0)), Return(c(1.0)))))


def test_ir14_pure_helper_has_no_thread_intrinsic_stop_or_barrier() -> None:
    refused(_pure(Return(Cast(F32, tid()))), "pure helper 'p' uses thread intrinsic")
    refused(_pure(seq(Stop(1), Return(c(0.0)))), "pure helper 'p' has a stop")
    refused(_pure(seq(Barrier(), Return(c(0.0)))), "barrier in helper 'p'")


def test_ir14_pure_helper_calls_only_pure_helpers() -> None:
    g = HelperFunc("g", (), F32, Return(c(1.0)))
    p = _pure(Return(Call("g", (), F32)))
    refused(Module((g, p)), "pure helper 'p' calls 'g', which is not pure")
    check_module(Module((HelperFunc("g", (), F32, Return(c(1.0)), pure=True), p)))


# ------------------------------------------------------------------------------ IR-17


def test_ir17_every_variable_is_bound() -> None:
    x = var("x", I32)
    refused(store_stmt(Ref(x), I32), "unknown variable 'x'", "not bound here")
    out = var("out", array(I32))
    # x is bound only in the let's body
    k = kern(seq(Let(x, c(1), Store(out, (c(0),), Ref(x))), Store(out, (c(1),), Ref(x))),
             (out,))
    refused(k, f"unknown variable 'x' (id {x.id})")
    i = var("i", I32)
    refused(kern(seq(For(i, c(0), c(3), Store(out, (Ref(i),), Ref(i))),
                     Store(out, (Ref(i),), c(0))), (out,)), "unknown variable 'i'")


def test_ir17_use_agrees_with_binder() -> None:
    n = var("n", I32)
    out = var("out", array(I64))
    fake = Var("n", n.id, I64)
    refused(kern(Store(out, (c(0),), Ref(fake)), (out, n)),
            "variable 'n'", "is used as i64 but bound as 'n' : i32")


def test_ir17_no_shadowing_by_id() -> None:
    n = var("n", I32)
    out = var("out", array(I32))
    shadow = kern(Let(n, c(1), Store(out, (c(0),), Ref(n))), (out, n))
    refused(shadow, "'n' (id", "is bound again inside the scope")
    t = var("t", I32)
    nested = kern(Let(t, c(1), Let(t, c(2), Store(out, (c(0),), Ref(t)))), (out,))
    refused(nested, "bound again")
    # disjoint scopes may share an id; distinct ids may share a name
    disjoint = kern(seq(Let(t, c(1), Store(out, (c(0),), Ref(t))),
                        Let(t, c(2), Store(out, (c(1),), Ref(t)))), (out,))
    check_kernel(disjoint)
    other_n = var("n", I32)
    check_kernel(kern(Let(other_n, b("+", Ref(n), c(1)), Store(out, (c(0),), Ref(other_n))),
                      (out, n)))


# ------------------------------------------------------------------------------ IR-18


def test_ir18_distinct_names() -> None:
    a1, a2 = var("a", I32), var("a", F32)
    refused(kern(Barrier(), (a1, a2)), "duplicate parameter name 'a'")
    refused(kern(Barrier(), (a1,), (var("a", I32, mutable=True),)), "duplicate local name 'a'")
    refused(kern(Barrier(), (), (var("v", I32, mutable=True), var("v", F32, mutable=True))),
            "duplicate local name 'v'")
    h = HelperFunc("h", (), I32, Return(c(1)))
    refused(kern(Barrier(), helpers=(h, h)), "duplicate helper function name 'h'")
    refused(Module((), (kern(Barrier()), kern(Barrier()))), "duplicate kernel name 'k'")
    refused(Module((h, h)), "duplicate helper function name 'h'")
    refused(HelperFunc("f", (a1, a2), UNIT, Return()), "duplicate parameter name 'a'")


# ------------------------------------------------------------------------------ IR-19


def test_ir19_assignment_to_mutable_variables_only() -> None:
    out = var("out", array(I32))
    m = var("m", I32, mutable=True)
    check_kernel(kern(Let(m, c(0), seq(Assign(m, c(2)), Store(out, (c(0),), Ref(m)))),
                      (out,)))
    loc_v = var("acc", I32, mutable=True)
    check_kernel(kern(Assign(loc_v, c(3)), (), (loc_v,)))
    t = var("t", I32)
    refused(kern(Let(t, c(0), Assign(t, c(2)))), "assignment to immutable variable 't'")
    n = var("n", I32)
    refused(kern(Assign(n, c(1)), (n,)), "assignment to immutable variable 'n'")
    i = var("i", I32)
    refused(kern(For(i, c(0), c(3), Assign(i, c(1)))), "assignment to immutable variable 'i'")
    refused(kern(Assign(out, c(1)), (out,)), "assignment to array 'out'")
    refused(kern(Let(m, c(0), Assign(m, c(1.0)))), "assignment of a f32 value to 'm'")


def test_ir19_parameters_and_for_variables_are_not_mutable() -> None:
    refused(kern(Barrier(), (var("n", I32, mutable=True),)), "parameter 'n' is mutable")
    i = var("i", I32, mutable=True)
    refused(kern(For(i, c(0), c(1), Barrier())), "for variable 'i' is mutable")


# ------------------------------------------------------------------------------ IR-20


def test_ir20_lets_loops_and_conditions() -> None:
    t = var("t", F32)
    refused(kern(Let(t, c(1), Barrier())), "'let t : f32' is given a value of type i32")
    a = var("a", array(F32))
    refused(kern(Let(var("b", array(F32)), Ref(a), Barrier()), (a,)), "binds an array")
    x = var("x", F32)
    refused(kern(For(x, c(0.0), c(1.0), Barrier())), "for variable 'x' has type f32")
    j = var("j", I64)
    refused(kern(For(j, c(0), c(9, I64), Barrier())),
            "for loop start bound has type i32, loop variable 'j' has type i64")
    check_kernel(kern(For(j, c(9, I64), c(0, I64), Barrier(), down=True)))
    refused(kern(If(c(1), Barrier())), "if condition has type i32, not bool")
    refused(kern(While(c(1.0), Barrier())), "while condition has type f32, not bool")


# ------------------------------------------------------------------------------ IR-21


def test_ir21_reads_and_stores() -> None:
    m = var("m", array(F64, 2))
    i = var("i", I64)
    ok = Store(m, (Ref(i), c(1)), b("*", Read(m, (c(0), Ref(i))), c(2.0, F64)))
    check_kernel(kern(ok, (m, i)))
    refused(kern(Store(m, (c(0),), c(1.0, F64)), (m,)),
            "'m' has 2 dimensions but is indexed with 1 index")
    refused(store_stmt(Read(m, (c(0), c(0), c(0))), F64), "unknown variable 'm'")
    refused(kern(Store(m, (c(0), c(0)), Read(m, (c(0), c(0), c(0)))), (m,)),
            "indexed with 3 indexes")
    refused(kern(Store(m, (c(0), c(0.0)), c(1.0, F64)), (m,)),
            "index 2 of 'm' has type f32, not an integer type")
    refused(kern(Store(m, (c(0), c(0)), c(1.0)), (m,)),
            "store of a f32 value into 'm' of element type f64")
    n = var("n", I32)
    refused(kern(Store(n, (c(0),), c(1)), (n,)), "store into element of 'n', which is a i32")
    out = var("out", array(I32))
    refused(kern(Store(out, (c(0),), Read(n, (c(0),))), (out, n)),
            "read of an element of 'n'")


def test_ir21_arrays_are_not_values() -> None:
    a = var("a", array(F32))
    refused(kern(Let(var("t", F32), Ref(a), Barrier()), (a,)),
            "array 'a' used as a value")
    refused(kern(If(b("==", Ref(a), Ref(a)), Barrier()), (a,)), "array 'a' used as a value")


# ------------------------------------------------------------------------------ IR-22


def test_ir22_length_dimension_in_range() -> None:
    m = var("m", array(F32, 2))
    out = var("out", array(I32))
    check_kernel(kern(Store(out, (c(0),), b("+", Length(m, 0), Length(m, 1))), (out, m)))
    refused(kern(Store(out, (c(0),), Length(m, 2)), (out, m)),
            "length of dimension 2 of 'm', which has rank 2")
    refused(kern(Store(out, (c(0),), Length(m, -1)), (out, m)), "length of dimension -1")
    n = var("n", I32)
    refused(kern(Store(out, (c(0),), Length(n)), (out, n)), "length of 'n'")


# ------------------------------------------------------------------------------ IR-23


def test_ir23_return_in_kernels_has_no_value() -> None:
    check_kernel(kern(If(c(True), Return())))
    refused(kern(Return(c(1))), "return with a value in a kernel")


def test_ir23_return_in_helpers_has_the_result_type() -> None:
    refused(HelperFunc("f", (), I32, Return()), "return without a value in helper 'f'")
    refused(HelperFunc("f", (), I32, Return(c(1, I64))),
            "return of a i64 value from helper 'f' of result type i32")
    refused(HelperFunc("f", (), UNIT, Return(c(1))),
            "return with a value in helper 'f' of result type unit")
    check_helper(HelperFunc("f", (), UNIT, Pragma(("unroll",), Empty())))


def test_ir23_every_path_of_a_helper_returns() -> None:
    x = var("x", I32)
    both = If(b("<", Ref(x), c(0)), Return(c(0)), Return(Ref(x)))
    check_helper(HelperFunc("f", (x,), I32, both))
    one = If(b("<", Ref(x), c(0)), Return(c(0)))
    refused(HelperFunc("f", (x,), I32, one),
            "helper 'f' of result type i32 does not end in a return on every path")
    i = var("i", I32)
    loop = For(i, c(0), Ref(x), Return(Ref(i)))
    refused(HelperFunc("f", (x,), I32, loop), "does not end in a return")
    check_helper(HelperFunc("f", (x,), I32, seq(loop, Return(c(-1)))))
    assert returns_on_every_path(Let(i, c(1), Pragma(("x",), both)))
    assert not returns_on_every_path(While(c(True), Return(c(1))))
    assert not returns_on_every_path(Stop(3))


# ------------------------------------------------------------------------------ IR-24


def test_ir24_barrier_only_at_kernel_level() -> None:
    check_kernel(kern(seq(Barrier(), For(var("i", I32), c(0), c(3), Barrier()))))
    h = HelperFunc("sync", (), UNIT, Barrier())
    refused(h, "barrier in helper 'sync'")
    refused(kern(Let(var("_", UNIT), Call("sync", (), UNIT), Barrier()), helpers=(h,)),
            "barrier in helper 'sync'")


# ------------------------------------------------------------------------------ IR-25


def _two(result: Scalar = F32) -> HelperFunc:
    a, i = var("a", array(F32)), var("i", I32)
    return HelperFunc("get", (a, i), result, Return(Read(a, (Ref(i),))))


def test_ir25_calls_of_known_helpers() -> None:
    x, out = var("x", array(F32)), var("out", array(F32))
    get = _two()
    ok = kern(Store(out, (c(0),), Call("get", (Ref(x), c(3)), F32)), (x, out), (), (get,))
    check_kernel(ok)
    refused(kern(Store(out, (c(0),), Call("get", (Ref(x), c(3)), F32)), (x, out)),
            "call of unknown helper function 'get'")
    # a helper of the module that the kernel does not list is not seen by the kernel
    refused(Module((get,), (kern(Store(out, (c(0),), Call("get", (Ref(x), c(3)), F32)),
                                 (x, out)),)), "unknown helper function 'get'")


def test_ir25_call_arity_and_argument_types() -> None:
    x, out = var("x", array(F32)), var("out", array(F32))
    get = _two()

    def call(*args: Expr, result: Scalar = F32) -> Kernel:
        return kern(Store(out, (c(0),), Call("get", args, result)), (x, out), (), (get,))

    refused(call(Ref(x)), "'get' takes 2 arguments, got 1")
    refused(call(Ref(x), c(1, I64)), "argument 2 of 'get' ('i') has type i64, expected i32")
    refused(call(Read(x, (c(0),)), c(1)), "argument 1 of 'get' ('a') must be an array")
    refused(call(Ref(x), c(1), result=F64), "records result type f64")
    m = var("m", array(F32, 2))
    refused(kern(Store(out, (c(0),), Call("get", (Ref(m), c(0)), F32)), (m, out), (), (get,)),
            "must be an array of type f32[], got array f32[, ]")
    d = var("d", array(F64))
    refused(kern(Store(out, (c(0),), Call("get", (Ref(d), c(0)), F32)), (d, out), (), (get,)),
            "got array f64[]")
    refused(kern(Store(out, (c(0),), Call("get", (c(1), c(0)), F32)), (out,), (), (get,)),
            "must be an array")


def test_ir25_array_arguments_agree_with_constant_extents() -> None:
    p = var("p", ArrayType(F32, MemSpace.GLOBAL, (0,), (4,)))
    first = HelperFunc("first", (p,), F32, Return(Read(p, (c(0),))))
    fixed = var("x", ArrayType(F32, MemSpace.GLOBAL, (0,), (4,)))
    free = var("x", array(F32))
    out = var("out", array(F32))
    check_kernel(kern(Store(out, (c(0),), Call("first", (Ref(fixed),), F32)), (fixed, out),
                      (), (first,)))
    refused(kern(Store(out, (c(0),), Call("first", (Ref(free),), F32)), (free, out), (),
                 (first,)), "must be an array of type f32[4]")
    sh = var("sh", ArrayType(F32, MemSpace.SHARED, (0,), (4,)))
    refused(kern(Store(out, (c(0),), Call("first", (Ref(sh),), F32)), (out,), (sh,),
                 (first,)), "got array shared f32[4]")


# ------------------------------------------------------------------------------ IR-26


def test_ir26_no_recursion() -> None:
    n = var("n", I32)
    fact = HelperFunc("fact", (n,), I32, Return(Cond(
        b("<=", Ref(n), c(1)), c(1), b("*", Ref(n), Call("fact", (b("-", Ref(n), c(1)),),
                                                         I32)))))
    refused(fact, "recursive call of 'fact' (fact -> fact)")
    f = HelperFunc("f", (), I32, Return(Call("g", (), I32)))
    g = HelperFunc("g", (), I32, Return(Call("h", (), I32)))
    h = HelperFunc("h", (), I32, Return(Call("f", (), I32)))
    refused(Module((f, g, h)), "recursive call of 'f' (f -> g -> h -> f)")
    refused(kern(Barrier(), helpers=(g, h, f)), "recursive call", "cannot be recursive")
    h2 = HelperFunc("h", (), I32, Return(c(0)))
    check_module(Module((f, g, h2)))  # a chain, no cycle


# ------------------------------------------------------------------------------ IR-27


@pytest.mark.parametrize("code", [0, -1, 2**31])
def test_ir27_stop_code_positive(code: int) -> None:
    refused(kern(Stop(code)), f"stop code {code} is not in 1..2147483647")


def test_ir27_stop_code_ok() -> None:
    check_kernel(kern(seq(Stop(1), Stop(2**31 - 1))))


# ------------------------------------------------------------------------------ IR-28


def test_ir28_kernel_scalar_locals_are_mutable() -> None:
    refused(kern(Barrier(), (), (var("v", F32),)), "scalar local 'v' must be mutable")
    check_kernel(kern(Barrier(), (), (var("v", F32, mutable=True),)))


# ------------------------------------------------------------------------------ IR-29

FILE = Loc("bad.sk", 3, 9)


def test_ir29_error_at_the_offending_node() -> None:
    out = var("out", array(I32))
    bad = Binary(BinaryOp.ADD, c(1), c(1.0), loc=FILE)
    k = kern(Store(out, (c(0),), bad, loc=Loc("bad.sk", 3, 3)), (out,), loc=Loc("bad.sk", 1, 1))
    err = refused(k)
    assert err.loc == FILE
    text = "kernel k(out : i32[]) =\n\n  out[0] <- 1 + 1.0\n"
    shown = str(err.with_source(text))
    assert shown.splitlines() == [
        "bad.sk:3:9: error: operator '+' on different types i32 and f32 (no implicit "
        "conversion: write f32(1) as C would convert it)",
        "  out[0] <- 1 + 1.0",
        "        ^",
    ]


def test_ir29_error_at_the_nearest_located_ancestor() -> None:
    out = var("out", array(I32))
    stmt_loc = Loc("bad.sk", 4, 3)
    k = kern(seq(Barrier(), Store(out, (c(0),), b("+", c(1), c(1.0)), loc=stmt_loc)), (out,),
             loc=Loc("bad.sk", 1, 1))
    assert refused(k).loc == stmt_loc
    # a declaration error is at the kernel
    k2 = kern(Barrier(), (var("n", UNIT),), loc=Loc("bad.sk", 1, 1))
    assert refused(k2).loc == Loc("bad.sk", 1, 1)


def test_ir29_unlocated_error_names_function_and_construct() -> None:
    err = refused(store_stmt(b("+", c(1), c(1.0)), I32),
                  "operator '+' on different types", "[in kernel 'k']")
    assert err.loc is None
    err2 = refused(_pure(Return(Cast(F32, tid()))), "[in pure helper 'p']")
    assert err2.loc is None


# ------------------------------------------------------------------------------ IR-30


def test_ir30_kernel_checks_its_helpers_and_module_all_helpers() -> None:
    bad = HelperFunc("bad", (), I32, Return(c(1.0)))
    refused(kern(Barrier(), helpers=(bad,)), "[in helper 'bad']")
    refused(Module((bad,), (kern(Barrier()),)), "return of a f32 value from helper 'bad'")
    refused(Module((), (kern(Barrier()), Kernel("k2", (), (), Return(c(1))))),
            "[in kernel 'k2']")


# ------------------------------------------------------------ generated expressions (IR-7)

_NUMERIC = (I32, I64, F32, F64)
_ARRAYS = {t: var(f"arr_{t}", array(t)) for t in (*_NUMERIC, BOOL)}
_SCALARS = {t: var(f"s_{t}", t) for t in (*_NUMERIC, BOOL)}


def _consts(t: Scalar) -> st.SearchStrategy[Expr]:
    if t is BOOL:
        return st.builds(Const, st.booleans(), st.just(t))
    if t.is_int:
        lo = -(2 ** (t.bits - 1))
        return st.builds(Const, st.integers(lo, -lo - 1), st.just(t))
    return st.builds(Const, st.floats(width=t.bits), st.just(t))


def _exprs(t: Scalar, depth: int) -> st.SearchStrategy[Expr]:
    leaves: list[st.SearchStrategy[Expr]] = [
        _consts(t), st.just(Ref(_SCALARS[t])),
        st.builds(lambda i: Read(_ARRAYS[t], (i,)), _consts(I32)),
    ]
    if t is I32:
        leaves += [st.just(tid()), st.just(Length(_ARRAYS[F32]))]
    if depth == 0:
        return st.one_of(leaves)
    sub = _exprs(t, depth - 1)
    anyt = st.sampled_from((*_NUMERIC, BOOL))
    nodes: list[st.SearchStrategy[Expr]] = [
        st.builds(Cond, _exprs(BOOL, depth - 1), sub, sub),
        anyt.flatmap(lambda u: st.builds(Cast, st.just(t), _exprs(u, depth - 1))),
    ]
    if t.is_numeric:
        ops = ["+", "-", "*", "/"] + (["%", "&", "|", "^", "<<", ">>"] if t.is_int else [])
        nodes += [
            st.builds(b, st.sampled_from(ops), sub, sub),
            st.builds(Unary, st.just(UnaryOp.NEG), sub),
            st.builds(lambda n, x, y: Intrinsic(n, (x, y)), st.sampled_from(["min", "max"]),
                      sub, sub),
        ]
        if t.is_int:
            nodes.append(st.builds(Unary, st.just(UnaryOp.BNOT), sub))
        else:
            nodes.append(st.builds(lambda x: Intrinsic("sqrt", (x,)), sub))
    else:
        num = st.sampled_from(_NUMERIC)
        nodes += [
            st.builds(b, st.sampled_from(["&&", "||", "==", "!="]), sub, sub),
            st.builds(Unary, st.just(UnaryOp.NOT), sub),
            num.flatmap(lambda u: st.builds(b, st.sampled_from(["<", "<=", ">", ">=", "=="]),
                                            _exprs(u, depth - 1), _exprs(u, depth - 1))),
        ]
    return st.one_of(*leaves, *nodes)


_TYPED = st.sampled_from((*_NUMERIC, BOOL)).flatmap(lambda t: _exprs(t, 3))
_PARAMS = (*_ARRAYS.values(), *_SCALARS.values())


@settings(max_examples=60 if not os.environ.get("SAREK_FUZZ") else 3000, deadline=None)
@given(_TYPED, st.sampled_from((*_NUMERIC, BOOL)))
def test_ir7_checker_agrees_with_type_of(e: Expr, other: Scalar) -> None:
    """A generated well-typed expression is accepted exactly where ``type_of`` says:
    stored into an array of its type it checks, into any other type it is refused."""
    t = type_of(e)
    assert isinstance(t, Scalar)
    check_kernel(kern(Store(_ARRAYS[t], (c(0),), e), _PARAMS))
    if other != t:
        refused(kern(Store(_ARRAYS[other], (c(0),), e), _PARAMS), "store of a")
