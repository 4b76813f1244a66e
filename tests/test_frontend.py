# ruff: noqa: F841, B018, B007, E741, F821, UP037
# (the kernels below are read, not run: unused names, bare `.ir` and odd code are the point)
"""The Python front end's translation (specs/frontend.md, FE-1..FE-13).

Most tests compare the translated kernel with the same kernel written in the text form,
up to variable ids: the text form is the specification of the IR each Python construct
must give.
"""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.frontend import (
    Vec,
    Vec2,
    Vec3,
    barrier,
    block_dim_x,
    boolean,
    f32,
    f64,
    global_thread_id,
    helper,
    i32,
    i64,
    kernel,
    length,
    local,
    shared,
    sqrt,
    stop,
    thread_idx_x,
)
from sarek_py.frontend.intrinsics import KernelOnly
from sarek_py.frontend.source import FrontendError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Cast, Const, Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import MemSpace, Scalar, array
from sarek_py.ir.visit import canonical_ids

SCALE = 3
HALF = 0.5
NAMES = ["not", "a", "constant"]


def same(k: Kernel, text: str) -> None:
    """``k`` is the kernel of ``text`` (with its helpers) up to variable ids."""
    m = parse_module(text)
    want = m.kernels[0]
    assert canonical_ids(k) == canonical_ids(want), f"\n{k}\n!=\n{want}"


def fails(fn: object, *fragments: str) -> FrontendError:
    """Translating ``fn`` raises a FrontendError located in this file with ``fragments``."""
    with pytest.raises(FrontendError) as info:
        fn.ir  # type: ignore[attr-defined]
    err = info.value
    assert err.loc is not None and err.loc.file == __file__
    for f in fragments:
        assert f in err.message, err.message
    return err


# ------------------------------------------------------------------------------ FE-1, FE-2


def test_fe1_source_is_read_and_translated_on_first_use() -> None:
    @kernel
    def saxpy(x: Vec[f32], y: Vec[f32], a: f32, n: i32):
        i = global_thread_id()
        if i < n:
            y[i] = a * x[i] + y[i]

    assert saxpy._ir is None  # nothing translated at decoration
    same(saxpy.ir, """
        kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
          let i = global_thread_id in
          if i < n then y[i] <- a * x[i] + y[i]""")
    assert saxpy.ir is saxpy.ir  # cached
    assert saxpy.ir.loc is not None and saxpy.ir.loc.file == __file__


def test_fe1_kernel_name_option_and_nested_definition_locations() -> None:
    class Holder:
        @kernel(name="renamed")
        def k(x: Vec[i32]):  # noqa: N805 - a kernel, not a method
            x[0] = 1

    assert Holder.k.ir.name == "renamed"
    store = Holder.k.ir.body
    assert store.loc is not None
    line = open(__file__).read().splitlines()[store.loc.line - 1]
    assert line[store.loc.col - 1:].startswith("x[0] = 1")


def test_fe1_lambda_is_refused() -> None:
    k = kernel(lambda x: None)
    with pytest.raises(FrontendError, match="lambda cannot be a kernel"):
        k.ir


def test_fe2_parameter_types() -> None:
    @kernel
    def k(a: Vec[f32], b: Vec2[f64], c: Vec3[i64], d: i32, e: i64, f: f64, g: boolean,
          h: "Vec[i32]"):
        return

    assert [p.type for p in k.ir.params] == [
        array(Scalar.F32), array(Scalar.F64, 2), array(Scalar.I64, 3), Scalar.I32,
        Scalar.I64, Scalar.F64, Scalar.BOOL, array(Scalar.I32)]


def test_fe2_bad_signatures() -> None:
    @kernel
    def no_annot(x):
        return

    fails(no_annot, "parameter 'x' needs a type annotation")

    @kernel
    def default(x: i32 = 1):
        return

    fails(default, "default values are not supported")

    @kernel
    def star(*xs: i32):
        return

    fails(star, "*args is not supported")

    @kernel
    def unknown(x: int):
        return

    fails(unknown, "unknown parameter type `int`")

    @kernel
    def returns(x: i32) -> i32:
        return

    fails(returns, "a kernel returns nothing")


# ----------------------------------------------------------------------------------- FE-3


def test_fe3_first_assignment_is_let_reassignment_makes_let_mut() -> None:
    @kernel
    def k(x: Vec[i32], n: i32):
        a = n + 1
        b = 0
        for j in range(n):
            b += a
        x[0] = b

    same(k.ir, """
        kernel k(x : i32[], n : i32) =
          let a = n + 1 in
          let mut b = 0 in
          for j = 0 to n - 1 do b := b + a done;
          x[0] <- b""")


def test_fe3_rebinding_in_separate_blocks_gives_separate_immutable_lets() -> None:
    @kernel
    def k(x: Vec[i32], n: i32):
        if n > 0:
            t = n
            x[0] = t
        else:
            t = 2
            x[1] = t

    same(k.ir, """
        kernel k(x : i32[], n : i32) =
          if n > 0 then (let t = n in x[0] <- t) else (let t = 2 in x[1] <- t)""")


def test_fe3_use_outside_the_binding_block_is_an_error() -> None:
    @kernel
    def k(x: Vec[i32], n: i32):
        if n > 0:
            t = 1
        else:
            t = 2
        x[0] = t

    fails(k, "'t' is not defined here", "declare")


def test_fe3_declaration_is_a_zero_initialised_local() -> None:
    @kernel
    def k(x: Vec[f32], n: i32):
        t: f32
        if n > 0:
            t = 1.5
        x[0] = t

    same(k.ir, """
        kernel k(x : f32[], n : i32) var t : f32 =
          if n > 0 then t := 1.5f;
          x[0] <- t""")
    assert k.ir.locals[0].mutable


def test_fe3_annotated_let() -> None:
    @kernel
    def k(x: Vec[i64]):
        a: i64 = 3
        x[0] = a

    same(k.ir, "kernel k(x : i64[]) = let a = 3L in x[0] <- a")


def test_fe3_parameters_loop_variables_and_arrays_cannot_be_assigned() -> None:
    @kernel
    def param(n: i32):
        n = n + 1

    fails(param, "'n' is a parameter and cannot be assigned")

    @kernel
    def loopvar(n: i32):
        for j in range(n):
            j = 2

    fails(loopvar, "'j' is a loop variable")

    @kernel
    def arr(x: Vec[i32], y: Vec[i32]):
        x = y

    fails(arr, "'x' is an array")

    @kernel
    def copy(x: Vec[i32]):
        z = x
        z[0] = 1

    fails(copy, "an array cannot be copied")

    @kernel
    def declared_twice(x: Vec[i32]):
        a = 1
        a: i32 = 2
        x[0] = a

    fails(declared_twice, "'a' is already defined")


# ----------------------------------------------------------------------------------- FE-4


def test_fe4_stores_and_augmented_assignments() -> None:
    @kernel
    def k(m: Vec2[f32], y: Vec[f32], n: i32):
        i = global_thread_id()
        m[i, 0] = y[i]
        y[i] *= 2.0
        m[i, i] -= y[0]
        s = 1
        s <<= 2
        s //= n
        y[s] = 0.0

    same(k.ir, """
        kernel k(m : f32[,], y : f32[], n : i32) =
          let i = global_thread_id in
          m[i, 0] <- y[i];
          y[i] <- y[i] * 2.0f;
          m[i, i] <- m[i, i] - y[0];
          let mut s = 1 in
          s := s << 2;
          s := s / n;
          y[s] <- 0.0f""")


def test_fe4_unsupported_assignments() -> None:
    @kernel
    def tup(x: Vec[i32]):
        a, b = 1, 2

    fails(tup, "tuple unpacking is not supported")

    @kernel
    def chain(x: Vec[i32]):
        a = b = 1

    fails(chain, "chained assignment")

    @helper
    def h(i: i32) -> i32:
        return i

    @kernel
    def call_in_aug_index(x: Vec[i32]):
        x[h(0)] += 1

    fails(call_in_aug_index, "evaluates its index twice")


# ----------------------------------------------------------------------------------- FE-5


def test_fe5_literals_take_the_type_of_their_context() -> None:
    @kernel
    def k(x: Vec[f32], d: Vec[f64], l: Vec[i64], n: i64):
        x[0] = 1.5
        x[1] = x[0] * 0.1 - -2.5
        d[0] = 0.1
        l[0] = n + 1
        l[1] = -7
        x[2] = 2 * x[0]
        if 3 < 0.5:
            x[3] = 1
        if (0.5 + 1) * 2 < x[0]:
            x[4] = min(1, 2) * x[0]
        if 3 < sqrt(abs(3)):
            x[5] = sqrt(2)

    same(k.ir, """
        kernel k(x : f32[], d : f64[], l : i64[], n : i64) =
          x[0] <- 1.5f;
          x[1] <- x[0] * 0.1f - -2.5f;
          d[0] <- 0.1;
          l[0] <- n + 1L;
          l[1] <- -7L;
          x[2] <- 2.0f * x[0];
          if 3.0 < 0.5 then x[3] <- 1.0f;
          if (0.5 + 1.0) * 2.0 < x[0] then x[4] <- min(1.0, 2.0) * x[0];
          if 3.0 < sqrt(abs(3.0)) then x[5] <- sqrt(2.0f)""")
    # f32 literals are rounded once from the decimal spelling
    c = k.ir.body.stmts[2].value  # type: ignore[attr-defined]
    assert isinstance(c, Const) and c.value == float(np.float64(0.1))
    c32 = k.ir.body.stmts[1].value.lhs.rhs  # type: ignore[attr-defined]
    assert c32.value == float(np.float32(0.1)) and c32.type is Scalar.F32


def test_fe5_literal_variable_takes_the_type_its_use_demands() -> None:
    @kernel
    def k(x: Vec[f32], n: i32):
        acc = 0.0
        k2 = 0
        for j in range(n):
            acc += x[j]
            k2 += 1
        x[0] = acc

    same(k.ir, """
        kernel k(x : f32[], n : i32) =
          let mut acc = 0.0f in
          let mut k2 = 0 in
          for j = 0 to n - 1 do acc := acc + x[j]; k2 := k2 + 1 done;
          x[0] <- acc""")


def test_fe5_type_errors_are_not_converted() -> None:
    @kernel
    def mixed(x: Vec[f32], d: Vec[f64]):
        x[0] = x[1] + d[0]

    fails(mixed, "operands have different types f32 and f64", "cast")

    @kernel
    def float_to_int(x: Vec[i32]):
        x[0] = x[1] + 1.5

    fails(float_to_int, "different types")

    @kernel
    def float_var_to_int(x: Vec[i32]):
        a = 1.5
        x[0] = a

    fails(float_var_to_int, "must be i32, not f64")

    @kernel
    def inexact(x: Vec[f32]):
        x[0] = x[1] + 16777217

    fails(inexact, "not exactly representable as f32")

    @kernel
    def too_big(x: Vec[i32]):
        a = 3000000000
        x[0] = 1

    fails(too_big, "does not fit in i32")


# ----------------------------------------------------------------------------------- FE-6


def test_fe6_range_forms() -> None:
    @kernel
    def k(x: Vec[i32], n: i32):
        for a in range(n):
            x[a] = 1
        for b in range(2, 8):
            x[b] = 2
        for c in range(n - 1, -1, -1):
            x[c] = 3
        for d in range(1, n, 1):
            x[d] = 4

    same(k.ir, """
        kernel k(x : i32[], n : i32) =
          for a = 0 to n - 1 do x[a] <- 1 done;
          for b = 2 to 7 do x[b] <- 2 done;
          for c = n - 1 downto 0 do x[c] <- 3 done;
          for d = 1 to n - 1 do x[d] <- 4 done""")


def test_fe6_constant_step_becomes_a_while_loop() -> None:
    @kernel
    def k(x: Vec[i32], n: i32):
        for a in range(1, n + 1, 3):
            x[a] = a
        for b in range(n, 0, -2):
            x[b] = b

    same(k.ir, """
        kernel k(x : i32[], n : i32) =
          (let mut a_next = 1 in
           let a_stop = n + 1 in
           while a_next < a_stop do (let a = a_next in x[a] <- a); a_next := a_next + 3 done);
          (let mut b_next = n in
           while b_next > 0 do (let b = b_next in x[b] <- b); b_next := b_next + -2 done)""")


@pytest.mark.parametrize("start,stop,step", [(0, 10, 3), (1, 11, 3), (9, -1, -2), (5, 5, 2),
                                             (7, 3, -3), (0, 1, 5), (3, 0, 2), (3, 8, 1),
                                             (5, 3, 1), (8, 3, -1), (0, 5, -1), (-2, 2, 1)])
def test_fe6_loops_visit_what_python_visits(start: int, stop: int, step: int) -> None:
    @kernel
    def visit(x: Vec[i32], a: i32, b: i32):
        c = 0
        for i in range(a, b, STEP):
            x[c] = i
            c += 1
        x[15] = c

    global STEP
    STEP = step
    x = np.full(16, -99, np.int32)
    run_kernel(visit.ir, {"x": x, "a": start, "b": stop}, threads=1, block=1)
    want = list(range(start, stop, step))
    assert x[15] == len(want) and list(x[:len(want)]) == want


STEP = 1


def test_fe6_loop_errors() -> None:
    @kernel
    def after(x: Vec[i32], n: i32):
        for j in range(n):
            x[j] = 0
        x[0] = j

    fails(after, "'j' is the variable of the loop")

    @kernel
    def shadow(x: Vec[i32], n: i32):
        j = 1
        for j in range(n):
            x[j] = 0

    fails(shadow, "would overwrite the variable 'j'")

    @kernel
    def brk(x: Vec[i32], n: i32):
        while n > 0:
            break
        else:
            x[0] = 1

    # break itself is in the subset (FE-23, tests/test_break_continue.py); the else of a
    # loop, which runs when no break ran, is not
    fails(brk, "while ... else is not supported")

    @kernel
    def over_array(x: Vec[i32]):
        for v in x:
            x[0] = v

    fails(over_array, "only `for i in range(...)` loops")

    @kernel
    def var_step(x: Vec[i32], n: f32):
        for j in range(0, 10, n):
            x[j] = 0

    # an integer step that is not a constant is FE-26 (tests/test_grid_stride.py)
    fails(var_step, "the step of range must be an integer of the bounds' type i32, not f32")

    @kernel
    def zero_step(x: Vec[i32]):
        for j in range(0, 10, 0):
            x[j] = 0

    fails(zero_step, "must not be zero")

    @kernel
    def for_else(x: Vec[i32]):
        for j in range(3):
            x[j] = 0
        else:
            x[0] = 1

    fails(for_else, "for ... else")


def test_fe6_while() -> None:
    @kernel
    def k(x: Vec[i32], n: i32):
        j = n
        while j > 0 and x[j] != 0:
            j -= 1
        x[0] = j

    same(k.ir, """
        kernel k(x : i32[], n : i32) =
          let mut j = n in
          while j > 0 && x[j] != 0 do j := j - 1 done;
          x[0] <- j""")


# ----------------------------------------------------------------------------------- FE-7


def test_fe7_c_division_and_remainder() -> None:
    @kernel
    def k(x: Vec[i32], f: Vec[f64]):
        x[2] = x[0] // x[1]
        x[3] = x[0] % x[1]
        f[2] = f[0] / f[1]
        x[4] = ~x[0] & 7 | x[1] ^ 2 >> 1

    same(k.ir, """
        kernel k(x : i32[], f : f64[]) =
          x[2] <- x[0] / x[1];
          x[3] <- x[0] % x[1];
          f[2] <- f[0] / f[1];
          x[4] <- ~x[0] & 7 | x[1] ^ 2 >> 1""")
    x = np.array([-7, 2, 0, 0, 0], np.int32)
    f = np.array([1.0, 4.0, 0.0])
    run_kernel(k.ir, {"x": x, "f": f}, threads=1, block=1)
    assert x[2] == -3 and x[3] == -1  # C: truncation; Python would give -4 and 1
    assert (-7 // 2, -7 % 2) == (-4, 1)
    assert f[2] == 0.25


def test_fe7_operators_outside_c_semantics_are_errors() -> None:
    @kernel
    def int_div(x: Vec[i32]):
        x[0] = x[1] / 2

    fails(int_div, "`/` on i32 operands", "`//`")

    @kernel
    def float_floordiv(x: Vec[f32]):
        x[0] = x[1] // 2.0

    fails(float_floordiv, "`//` on f32 operands")

    @kernel
    def float_mod(x: Vec[f32]):
        x[0] = x[1] % 2.0

    fails(float_mod, "`%` on f32 operands")

    @kernel
    def power(x: Vec[f32]):
        x[0] = x[1] ** 2

    fails(power, "`**` is not supported", "pow")


# ----------------------------------------------------------------------------------- FE-8


def test_fe8_comparisons_and_logic() -> None:
    @kernel
    def k(x: Vec[i32], b: Vec[boolean], n: i32):
        i = global_thread_id()
        if 0 <= i < n and not b[i] or i == 5:
            x[i] = 1 if b[0] else 2

    same(k.ir, """
        kernel k(x : i32[], b : bool[], n : i32) =
          let i = global_thread_id in
          if 0 <= i && i < n && !b[i] || i == 5 then x[i] <- b[0] ? 1 : 2""")


def test_fe8_truthiness_and_identity_are_errors() -> None:
    @kernel
    def truth(x: Vec[i32], n: i32):
        if n:
            x[0] = 1

    fails(truth, "is i32, not bool", "n != 0")

    @kernel
    def ident(x: Vec[i32], n: i32):
        if n is x:
            x[0] = 1

    fails(ident, "comparison `is` is not supported")


# ----------------------------------------------------------------------------------- FE-9


def test_fe9_intrinsics_builtins_and_constants() -> None:
    import math

    @kernel
    def k(x: Vec[f32], y: Vec[i32]):
        i = thread_idx_x() + block_dim_x()
        x[0] = sqrt(x[1]) + math.exp(x[2]) + min(x[3], 1) + abs(x[4]) * HALF
        y[0] = max(y[1], SCALE) + len(y) + f32
        return

    fails(k, "'f32'", "cannot be used as a value")

    @kernel
    def k2(x: Vec[f32], y: Vec[i32]):
        i = thread_idx_x() + block_dim_x()
        x[0] = sqrt(x[1]) + math.exp(x[2]) + min(x[3], 1) + abs(x[4]) * HALF
        y[i] = max(y[1], SCALE) + len(y)
        x[1] = f32(y[0])

    same(k2.ir, """
        kernel k2(x : f32[], y : i32[]) =
          let i = thread_idx_x + block_dim_x in
          x[0] <- sqrt(x[1]) + exp(x[2]) + min(x[3], 1.0f) + abs(x[4]) * 0.5f;
          y[i] <- max(y[1], 3) + length(y);
          x[1] <- f32(y[0])""")
    assert isinstance(k2.ir.body.body.stmts[2].value, Cast)  # type: ignore[attr-defined]


def test_fe9_numpy_scalar_constants_keep_their_type() -> None:
    big = np.int64(5)

    @kernel
    def k(x: Vec[i64]):
        x[0] = big

    same(k.ir, "kernel k(x : i64[]) = x[0] <- 5L")


def test_fe9_unsupported_objects_and_calls() -> None:
    @kernel
    def lst(x: Vec[i32]):
        x[0] = NAMES

    fails(lst, "a Python list", "cannot be used as a value")

    @kernel
    def pyfunc(x: Vec[i32]):
        x[0] = print(1)

    fails(pyfunc, "call of print is not supported")

    @kernel
    def int_cast(x: Vec[i32], f: Vec[f32]):
        x[0] = int(f[0])

    fails(int_cast, "int(x) is not supported", "i32(x)")

    @kernel
    def sqrt_int(x: Vec[i32]):
        x[0] = sqrt(x[1])

    fails(sqrt_int, "sqrt takes float arguments, not i32")

    @kernel
    def arity(x: Vec[f32]):
        x[0] = min(x[1])

    fails(arity, "min takes 2 arguments, not 1")

    @kernel
    def undefined(x: Vec[f32]):
        x[0] = nowhere_defined_name

    fails(undefined, "'nowhere_defined_name' is not defined")


# ---------------------------------------------------------------------------------- FE-10


def test_fe10_shared_local_barrier_stop_length() -> None:
    @kernel
    def k(x: Vec[f32], m: Vec2[f32]):
        tile = shared(f32, 64)
        acc = local(f32, (2, 3))
        t = thread_idx_x()
        tile[t] = x[t]
        barrier()
        acc[1, 2] = tile[63 - t]
        if t == 0:
            stop(3)
        m[t, 0] = acc[1, 2] + f32(m.shape[1] + length(m, 0))

    same(k.ir, """
        kernel k(x : f32[], m : f32[,]) shared tile : f32[64] local acc : f32[2, 3] =
          let t = thread_idx_x in
          tile[t] <- x[t];
          barrier;
          acc[1, 2] <- tile[63 - t];
          if t == 0 then stop 3;
          m[t, 0] <- acc[1, 2] + f32(length(m, 1) + length(m, 0))""")
    assert [v.type.space for v in k.ir.locals] == [MemSpace.SHARED, MemSpace.LOCAL]  # type: ignore[union-attr]


def test_fe10_array_errors() -> None:
    @kernel
    def rank(m: Vec2[f32]):
        m[0] = 1.0

    fails(rank, "'m' has rank 2 but is indexed with 1 index")

    @kernel
    def sliced(x: Vec[f32]):
        x[0:2] = 1.0

    fails(sliced, "slice is not supported")

    @kernel
    def nested_shared(x: Vec[f32], n: i32):
        if n > 0:
            t = shared(f32, 4)
            t[0] = 1.0

    fails(nested_shared, "top level of the kernel")

    @kernel
    def dyn_shared(x: Vec[f32], n: i32):
        t = shared(f32, n)

    fails(dyn_shared, "positive integer constant")

    @kernel
    def float_index(x: Vec[f32]):
        x[x[0]] = 1.0

    fails(float_index, "an array index is f32")

    @helper
    def barrier_in_helper(a: i32) -> i32:
        barrier()
        return a

    @kernel
    def calls_it(x: Vec[i32]):
        x[0] = barrier_in_helper(1)

    fails(calls_it, "barrier() is only allowed in a kernel")


# ---------------------------------------------------------------------------------- FE-11


@helper(pure=True)
def square(v: f32) -> f32:
    return v * v


@helper(pure=True)
def norm2(a: f32, b: f32) -> f32:
    return sqrt(square(a) + square(b))


@helper
def clamp_index(i: i32, n: i32) -> i32:
    if i < 0:
        return 0
    elif i >= n:
        return n - 1
    return i


def test_fe11_helpers_are_collected_in_source_order() -> None:
    @kernel
    def k(x: Vec[f32], n: i32):
        i = global_thread_id()
        x[clamp_index(i, n)] = norm2(x[i], 2)

    same(k.ir, """
        pure fun square(v : f32) : f32 = return v * v
        pure fun norm2(a : f32, b : f32) : f32 = return sqrt(square(a) + square(b))
        fun clamp_index(i : i32, n : i32) : i32 =
          if i < 0 then return 0 else if i >= n then return n - 1;
          return i
        kernel k(x : f32[], n : i32) =
          let i = global_thread_id in
          x[clamp_index(i, n)] <- norm2(x[i], 2.0f)""")
    assert [h.name for h in k.ir.helpers] == ["square", "norm2", "clamp_index"]
    assert [h.pure for h in k.ir.helpers] == [True, True, False]


def test_fe11_helper_errors() -> None:
    @helper
    def no_return(a: i32) -> i32:
        if a > 0:
            return a

    @kernel
    def k1(x: Vec[i32]):
        x[0] = no_return(1)

    fails(k1, "can reach its end without returning")

    @helper
    def rec(a: i32) -> i32:
        return rec(a)

    @kernel
    def k2(x: Vec[i32]):
        x[0] = rec(1)

    fails(k2, "recursion is not supported")

    @kernel
    def k3(x: Vec[f32]):
        sqrt(x[0])

    fails(k3, "unused")

    @kernel
    def other(x: Vec[f32]):
        return

    @kernel
    def k4(x: Vec[f32]):
        x[0] = other(x)

    fails(k4, "cannot call the kernel 'other'")

    @kernel
    def k5(x: Vec[i32]):
        x[0] = clamp_index(1.5, 2)

    fails(k5, "argument 'i' of 'clamp_index' must be i32, not f64")

    @helper
    def returns_in_kernelish(a: i32):
        return a

    @kernel
    def k6(x: Vec[i32]):
        x[0] = returns_in_kernelish(1)

    fails(k6, "no result annotation")


def test_fe11_helpers_and_intrinsics_are_not_callable_from_python() -> None:
    with pytest.raises(KernelOnly):
        square(1.0)
    with pytest.raises(KernelOnly):
        global_thread_id()
    assert f32(1.5) == np.float32(1.5) and isinstance(i64(3), np.int64)


# ---------------------------------------------------------------------------------- FE-12


def test_fe12_error_is_located_with_line_and_caret() -> None:
    @kernel
    def k(x: Vec[i32]):
        i = global_thread_id()
        x[i] = sum([v for v in range(3)])

    err = fails(k, "list comprehension is not supported in kernels")
    text = str(err)
    lines = open(__file__).read().splitlines()
    assert err.loc is not None
    assert lines[err.loc.line - 1].strip() == "x[i] = sum([v for v in range(3)])"
    assert lines[err.loc.line - 1][err.loc.col - 1:].startswith("[v for v")
    assert text.startswith(f"{__file__}:{err.loc.line}:{err.loc.col}: error:")
    assert text.splitlines()[-1].strip() == "^"


def test_fe12_docstrings_and_pass_are_comments() -> None:
    @kernel
    def k(x: Vec[i32]):
        """A docstring."""
        "a string statement"
        pass
        x[0] = 1

    same(k.ir, "kernel k(x : i32[]) = x[0] <- 1")


# ---------------------------------------------------------------------------------- FE-13


def test_fe13_checker_errors_point_into_the_python_file() -> None:
    from sarek_py.ir.diagnostics import CheckError

    @helper(pure=True)
    def impure(x: Vec[f32]) -> f32:
        x[0] = 1.0
        return x[1]

    @kernel
    def k(x: Vec[f32], n: i32):
        x[2] = impure(x)

    with pytest.raises(CheckError) as info:
        k.ir
    err = info.value
    assert err.loc is not None and err.loc.file == __file__
    assert "x[0] = 1.0" in str(err) or "impure" in str(err)


def test_fe13_kernel_return_value_refused() -> None:
    @kernel
    def k(x: Vec[f32]):
        return 1

    fails(k, "a kernel returns no value")


def test_fe9_kernel_stop_requires_constant() -> None:
    @kernel
    def k(x: Vec[f32], n: i32):
        stop(n)

    fails(k, "stop(code) takes one integer constant")


def test_fe10_shared_declaration_must_be_named() -> None:
    @kernel
    def k(x: Vec[f32]):
        shared(f32, 4)

    fails(k, "must be assigned to a name")


def test_fe2_i64_scalars() -> None:
    @kernel
    def k(x: Vec[i64], n: i64):
        for j in range(n):
            x[j] = j * 2

    same(k.ir, "kernel k(x : i64[], n : i64) = for j = 0L to n - 1L do x[j] <- j * 2L done")


TILE = 32


def test_fe10_extents_from_module_constants() -> None:
    @kernel
    def k(x: Vec[f32]):
        tile = local(f32, TILE, 2)
        tile[0, 1] = x[0]
        x[1] = tile[TILE - 1, 1]

    same(k.ir, """
        kernel k(x : f32[]) local tile : f32[32, 2] =
          tile[0, 1] <- x[0];
          x[1] <- tile[32 - 1, 1]""")


def test_fe3_declarations_in_helpers_and_nested_blocks() -> None:
    @helper
    def h(n: i32) -> i32:
        s: i32
        if n > 0:
            s = n
        return s

    @kernel
    def k(x: Vec[i32]):
        x[0] = h(x[1])

    same(k.ir, """
        fun h(n : i32) : i32 = let mut s = 0 in if n > 0 then s := n; return s
        kernel k(x : i32[]) = x[0] <- h(x[1])""")

    @kernel
    def nested(x: Vec[i32], n: i32):
        if n > 0:
            s: i32  # noqa: F842
            x[0] = 1

    fails(nested, "only allowed at the top level")


@helper
def set_at(x: Vec[f32], i: i32):
    x[i] = 1.0


@helper
def bump(x: Vec[f32]) -> f32:
    x[0] += 1.0
    return x[0]


def test_fe11_helper_called_for_its_effect() -> None:
    @kernel
    def k(x: Vec[f32]):
        set_at(x, 3)
        bump(x)
        x[1] = 2.0

    same(k.ir, """
        fun set_at(x : f32[], i : i32) : unit = x[i] <- 1.0f
        fun bump(x : f32[]) : f32 = x[0] <- x[0] + 1.0f; return x[0]
        kernel k(x : f32[]) = let _ = set_at(x, 3) in let _ = bump(x) in x[1] <- 2.0f""")
    x = np.zeros(4, np.float32)
    run_kernel(k.ir, {"x": x}, threads=1, block=1)
    assert list(x) == [1.0, 2.0, 0.0, 1.0]


def test_fe12_columns_count_characters_not_bytes() -> None:
    @kernel
    def k(x: Vec[f32]):
        é = 1.0; x[0] = [é][0]  # noqa: E702

    err = fails(k, "list is not supported")
    assert err.loc is not None
    line = open(__file__, encoding="utf-8").read().splitlines()[err.loc.line - 1]
    assert line[err.loc.col - 1:].startswith("[é][0]")


def test_fe7_constant_integer_overflow_is_refused() -> None:
    @kernel
    def shl(x: Vec[i32]):
        x[0] = 1 << 40

    fails(shl, "shift count 40 is outside [0, 32)")

    @kernel
    def mul(x: Vec[i32]):
        x[0] = 65536 * 65536

    fails(mul, "is 4294967296, which overflows i32")

    @kernel
    def fine(x: Vec[i64]):
        x[0] = 65536 * 65536

    same(fine.ir, "kernel fine(x : i64[]) = x[0] <- 65536L * 65536L")


def test_fe9_local_names_shadow_intrinsics() -> None:
    @kernel
    def k(x: Vec[f32]):
        barrier = 1.0
        barrier()

    fails(k, "'barrier' is a kernel variable, not a function")

    @kernel
    def k2(x: Vec[f32]):
        sqrt = 2.0
        x[0] = sqrt(x[1])

    fails(k2, "'sqrt' is a kernel variable")
