"""The host interpreter's compiled expressions and statement dispatch (specs/host-program.md
HP-51 … HP-54): generated host expressions over every operator, intrinsic, conversion and
type — edge values, operands of two types, arrays, errors — give the tree walk's value bit
for bit and of its type, or its error (type, message, location); integer division faults
as C's undefined cases do; the last value of a large integer expression is kept across
runs and only for an equal key; statements run by their exact class."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rule_citations import assert_rules_cited

from sarek_py.host import compiled_expr
from sarek_py.host.compiled_expr import MEMO_MIN_NODES, compiled, host_expr
from sarek_py.host.frame import Frame
from sarek_py.host.interp import HostInterp, run_program
from sarek_py.ir.host.program import HAssign, HostError
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.intrinsics import MATH
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Length,
    Loc,
    Read,
    Ref,
    Unary,
    UnaryOp,
    Var,
)
from sarek_py.ir.types import ArrayType, Scalar

TYPES = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64, Scalar.BOOL)
EDGES: dict[Scalar, list[Any]] = {
    Scalar.I32: [0, 1, -1, 2, 3, -7, 31, 32, 2 ** 31 - 1, -(2 ** 31)],
    Scalar.I64: [0, 1, -1, 5, -9, 63, 64, 2 ** 63 - 1, -(2 ** 63), 2 ** 40],
    Scalar.F32: [0.0, -0.0, 1.5, -2.5, float("nan"), float("inf"), -float("inf"), 3e9,
                 1e-40, 2.0 ** 31],
    Scalar.F64: [0.0, -0.0, 0.1, -1.75, float("nan"), float("inf"), 1e300, -3e18,
                 2.0 ** 63, 5e-324],
    Scalar.BOOL: [False, True],
}

#: one scalar variable of each type, two of i32
SCALARS = {t: Var(f"s_{t.value}", 100 + i, t, True) for i, t in enumerate(TYPES)}
OTHER_I32 = Var("k", 120, Scalar.I32, True)
#: arrays: 1-D from 1, 2-D from (0, -1), a bool array, one not allocated
ARRAYS = (
    Var("xs", 130, ArrayType(Scalar.F64, lower=(1,), shape=(None,)), True),
    Var("ms", 131, ArrayType(Scalar.I32, lower=(0, -1), shape=(None, None)), True),
    Var("bs", 132, ArrayType(Scalar.BOOL, lower=(0,), shape=(None,)), True),
    Var("us", 133, ArrayType(Scalar.F32, lower=(0,), shape=(None,)), True),
)
INT_OPS = [op for op in BinaryOp if op not in (BinaryOp.AND, BinaryOp.OR)]


def _program() -> Any:
    return parse_program("program p\n  var n : i32;\nbegin\n  n := 1\nend\n")


def _values(draw: st.DrawFn) -> Frame:
    own: dict[Var, Any] = {}
    for t, v in SCALARS.items():
        own[v] = t.dtype.type(draw(st.sampled_from(EDGES[t])))
    own[OTHER_I32] = np.int32(draw(st.sampled_from(EDGES[Scalar.I32])))
    own[ARRAYS[0]] = np.array([1.5, -0.0, float("nan"), 7.25])
    own[ARRAYS[1]] = np.arange(-3, 3, dtype=np.int32).reshape(3, 2)
    own[ARRAYS[2]] = np.array([True, False, True])
    own[ARRAYS[3]] = None
    return Frame(own)


@st.composite
def host_exprs(draw: st.DrawFn, t: Scalar, depth: int = 3) -> Expr:
    """A host expression of type ``t`` mostly; one in ten operands of another type."""
    loc = Loc("gen.sk", draw(st.integers(1, 10_000)), 1)
    if draw(st.integers(0, 9)) == 0:
        t = draw(st.sampled_from(TYPES))
    leaf = depth <= 0 or draw(st.integers(0, 3)) == 0
    if leaf:
        kinds = ["const"] * 3 + ["ref"] * 4 + ["read"] * 2
        if t is Scalar.I32:
            kinds += ["length", "length", "cannot"]
        kind = draw(st.sampled_from(kinds))
        if kind == "const":
            return Const(t.dtype.type(draw(st.sampled_from(EDGES[t]))).item(), t, loc=loc)
        if kind == "ref":
            v = OTHER_I32 if t is Scalar.I32 and draw(st.booleans()) else SCALARS[t]
            return Ref(v, loc=loc)
        if kind == "length":
            a = draw(st.sampled_from(ARRAYS))
            assert isinstance(a.type, ArrayType)
            return Length(a, draw(st.integers(0, a.type.rank - 1)), loc=loc)
        if kind == "cannot":
            return draw(st.sampled_from([Intrinsic("global_thread_id", (), loc=loc),
                                         Call("f", (), Scalar.I32, loc=loc)]))
        a = draw(st.sampled_from(ARRAYS + ARRAYS[:3]))  # one read in seven unallocated
        assert isinstance(a.type, ArrayType)
        index = tuple(draw(st.one_of(
            st.builds(lambda k: Const(k, Scalar.I32, loc=loc), st.integers(-2, 4)),
            host_exprs(Scalar.I32, 0))) for _ in range(a.type.rank))
        return Read(a, index, loc=loc)
    sub = depth - 1
    kind = draw(st.sampled_from(["unary", "binary", "binary", "binary", "cast", "cond",
                                 "math", "logic"]))
    if kind == "unary":
        op = draw(st.sampled_from(list(UnaryOp)))
        return Unary(op, draw(host_exprs(t, sub)), loc=loc)
    if kind == "binary":
        op = draw(st.sampled_from(INT_OPS))
        lt = Scalar.I32 if op.is_compare and draw(st.booleans()) else t
        rt = draw(st.sampled_from([Scalar.I32, Scalar.I64])) if op.is_shift else lt
        return Binary(op, draw(host_exprs(lt, sub)), draw(host_exprs(rt, sub)), loc=loc)
    if kind == "logic":
        op = draw(st.sampled_from([BinaryOp.AND, BinaryOp.OR]))
        return Binary(op, draw(host_exprs(Scalar.BOOL, sub)),
                      draw(host_exprs(Scalar.BOOL, sub)), loc=loc)
    if kind == "cast":
        return Cast(t, draw(host_exprs(draw(st.sampled_from(TYPES)), sub)), loc=loc)
    if kind == "cond":
        return Cond(draw(host_exprs(Scalar.BOOL, sub)), draw(host_exprs(t, sub)),
                    draw(host_exprs(t, sub)), loc=loc)
    name = draw(st.sampled_from(sorted(MATH)))
    arity = MATH[name][0]
    return Intrinsic(name, tuple(draw(host_exprs(t, sub)) for _ in range(arity)), loc=loc)


def _outcome(run: Any) -> tuple[Any, ...]:
    try:
        v = run()
    except Exception as exc:  # noqa: BLE001 - the error is what is compared
        return ("error", type(exc), str(exc), getattr(exc, "loc", None))
    if isinstance(v, np.ndarray):
        return ("array", id(v))
    return ("value", type(v), np.asarray(v).tobytes())


def _both(interp: HostInterp, e: Expr, f: Frame) -> tuple[tuple[Any, ...], ...]:
    walk = _outcome(lambda: interp._eval_checked(e, f))
    closure = _outcome(lambda: interp._run_checked(compiled(e), e, f))
    evaluated = _outcome(lambda: interp.eval(e, f))
    again = _outcome(lambda: interp.eval(e, f))  # a kept value (HP-53), if any
    return walk, closure, evaluated, again


@settings(max_examples=5000 if os.environ.get("SAREK_FUZZ") else 400)
@given(st.data())
def test_hp51_hp52_generated_expressions_match_the_tree_walk(data: st.DataObject) -> None:
    """HP-51, HP-52: every generated expression (every operator, intrinsic, conversion and
    type; edge values, mixed operand types, arrays, errors) gives the tree walk's value
    bitwise and of its type, or its error with the same type, message and location —
    through the closure, through ``eval`` and through ``eval`` again."""
    interp = HostInterp(_program())
    f = _values(data.draw)
    e = data.draw(host_exprs(data.draw(st.sampled_from(TYPES))))
    walk, closure, evaluated, again = _both(interp, e, f)
    assert closure == walk, e
    assert evaluated == walk, e
    assert again == walk, e


@pytest.mark.parametrize("op", INT_OPS)
@pytest.mark.parametrize("t", [Scalar.I32, Scalar.I64])
def test_hp51_hp52_every_integer_operator_over_every_edge_pair(op: BinaryOp, t: Scalar) -> None:
    """HP-51, HP-52: each integer operator over every pair of edge values (division and
    modulo by zero, MIN / -1 and MIN % -1, shift counts out of range, wrap-around)."""
    interp = HostInterp(_program())
    a, b = Var("a", 1, t, True), Var("b", 2, t, True)
    e = Binary(op, Ref(a), Ref(b), loc=Loc("ops.sk", 3, 4))
    for x in EDGES[t]:
        for y in EDGES[t]:
            f = Frame({a: t.dtype.type(x), b: t.dtype.type(y)})
            walk, closure, evaluated, _ = _both(interp, e, f)
            assert closure == walk == evaluated, (op, x, y)


@pytest.mark.parametrize("to", TYPES)
@pytest.mark.parametrize("src", TYPES)
def test_hp51_every_conversion_over_every_edge_value(src: Scalar, to: Scalar) -> None:
    """HP-51: a conversion between any two types of every edge value (NaN and out-of-range
    floats to integers fault with the tree walk's message)."""
    interp = HostInterp(_program())
    a = Var("a", 1, src, True)
    e = Cast(to, Ref(a), loc=Loc("cast.sk", 5, 6))
    for x in EDGES[src]:
        f = Frame({a: src.dtype.type(x)})
        walk, closure, evaluated, _ = _both(interp, e, f)
        assert closure == walk == evaluated, (src, to, x)


def test_hp52_division_faults_are_located_at_the_expression() -> None:
    """HP-52: a division by zero in a host assignment is a HostError with the reference
    interpreter's message, located at the expression."""
    program = parse_program("program p\n  var a : i32 = 7;\n  var b : i32;\n  var c : i32;\n"
                            "begin\n  c := a / b\nend\n", "div.sk")
    with pytest.raises(HostError, match=re.escape("integer division by zero (7 / 0)")) as err:
        run_program(program)
    assert err.value.loc is not None and err.value.loc.line == 6
    program = parse_program("program p\n  var a : i64 = -9223372036854775807 - 1;\n"
                            "  var c : i64;\nbegin\n  c := a % -1\nend\n", "mod.sk")
    with pytest.raises(HostError, match=re.escape("integer overflow in "
                                                   "-9223372036854775808 % -1")):
        run_program(program)


def test_hp51_a_node_the_host_cannot_evaluate_raises_only_when_reached() -> None:
    """HP-51: a helper call in the arm of a condition not taken is never evaluated; taken,
    it is the tree walk's HostError at the node."""
    interp = HostInterp(_program())
    b = Var("b", 1, Scalar.BOOL, True)
    call = Call("f", (), Scalar.I32, loc=Loc("c.sk", 9, 2))
    e = Cond(Ref(b), call, Const(3, Scalar.I32))
    assert interp.eval(e, Frame({b: np.False_})) == 3
    with pytest.raises(HostError, match="cannot evaluate Call") as err:
        interp.eval(e, Frame({b: np.True_}))
    assert err.value.loc == Loc("c.sk", 9, 2)


def _big(v: Var) -> Expr:
    """An integer expression of more than MEMO_MIN_NODES nodes over ``v``."""
    e: Expr = Ref(v)
    for k in range(MEMO_MIN_NODES):
        e = Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, e, Const(3, Scalar.I32)),
                   Const(k, Scalar.I32))
    return e


def _reference(e: Expr, f: Frame) -> Any:
    return HostInterp(_program())._eval_checked(e, f)


def test_hp53_kept_value_across_interpreters_only_for_an_equal_key() -> None:
    """HP-53: the last value is shared by every run, replaced for another key, and never
    given for a key of another type (i32 7 and i64 7 are different keys)."""
    v = Var("v", 1, Scalar.I32, True)
    e = _big(v)
    c = host_expr(e)
    assert c.inputs is not None
    for x in (np.int32(7), np.int32(7), np.int32(-2), np.int64(7), np.int32(7)):
        f = Frame({v: x})
        got = HostInterp(_program()).eval(e, f)
        want = _reference(e, f)
        assert type(got) is type(want) and got == want
        assert c.last is not None and c.last[1] is got
    assert c.last is not None and c.last[0] == (np.int32, np.int32(7))


def test_hp53_what_is_never_kept() -> None:
    """HP-53: a small expression, a float one, one reading an array element: no kept value."""
    v = Var("v", 1, Scalar.I32, True)
    small = Binary(BinaryOp.ADD, Ref(v), Const(1, Scalar.I32))
    assert host_expr(small).inputs is None
    x = Var("x", 2, Scalar.F64, True)
    floats = _big(v)
    floats = Binary(BinaryOp.LT, Cast(Scalar.F64, floats), Ref(x))
    assert host_expr(floats).inputs is None
    a = Var("a", 3, ArrayType(Scalar.I32, lower=(0,), shape=(None,)), True)
    reads = Binary(BinaryOp.ADD, _big(v), Read(a, (Const(0, Scalar.I32),)))
    assert host_expr(reads).inputs is None
    interp = HostInterp(_program())
    for k in (1, 2):
        f = Frame({v: np.int32(1), a: np.array([k], np.int32)})
        assert interp.eval(reads, f) == _reference(reads, f)


def test_hp53_threads_see_their_own_values() -> None:
    """HP-53: threads evaluating one expression with different inputs each get the value of
    their own inputs (the kept pair is replaced whole)."""
    v = Var("v", 1, Scalar.I64, True)
    e = _big(v)
    bad: list[tuple[int, Any, Any]] = []

    def work(seed: int) -> None:
        interp = HostInterp(_program())
        for i in range(300):
            x = np.int64((seed * 1000 + i) % 7)
            f = Frame({v: x})
            got, want = interp.eval(e, f), _reference(e, f)
            if got != want:
                bad.append((seed, got, want))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_hp54_a_statement_of_another_class_is_refused() -> None:
    """HP-54: statements dispatch by their exact class; a subclass of a statement class is
    not a host statement."""

    class Sneaky(HAssign):
        pass

    v = Var("n", 1, Scalar.I32, True)
    interp = HostInterp(_program())
    f = Frame({v: np.int32(0)})
    interp.stmt(HAssign(v, Const(4, Scalar.I32)), f)
    assert f.get_var(v) == 4
    with pytest.raises(HostError, match="not a host statement: Sneaky"):
        interp.stmt(Sneaky(v, Const(5, Scalar.I32)), f)
    assert f.get_var(v) == 4


def test_hp54_every_statement_class_is_in_the_table() -> None:
    """HP-54: the table holds every member of the HostStmt union."""
    import typing

    from sarek_py.host import interp as interp_module
    from sarek_py.ir.host import program as program_module

    members = set(typing.get_args(program_module.HostStmt))
    assert members and members <= set(interp_module._STATEMENTS)


def test_hp51_hp54_the_example_programs_run_as_before() -> None:
    """HP-51, HP-54: the advection-diffusion example runs on the interpreter with the tree
    walk in place of the closures and gives the same bytes."""
    source = Path(__file__).resolve().parent.parent / "examples" / "advection_diffusion.sk"
    program = parse_program(source.read_text(), str(source))
    preset = {"nx": 12, "ny": 10, "nt": 2}
    fast = run_program(program, preset, check_races=False)
    original = compiled_expr._compile
    try:  # every closure replaced by the tree walk of its expression
        def walk(e: Expr) -> compiled_expr.Fn:
            interp = HostInterp(program)
            return lambda f: interp._eval(e, f)
        compiled_expr._compile = walk
        compiled_expr._ENTRIES.clear()
        slow = run_program(program, preset, check_races=False)
    finally:
        compiled_expr._compile = original
        compiled_expr._ENTRIES.clear()
    assert fast.values.keys() == slow.values.keys()
    for name, x in fast.values.items():
        y = slow.values[name]
        assert type(x) is type(y)
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes(), name


def test_hp51_hp54_every_rule_is_cited() -> None:
    """Every rule HP-51 … HP-54 that specs/host-program.md defines is cited by a test here."""
    assert_rules_cited(__file__, "host-program", "HP", 51, 54)


RESIDENT = """
kernel k(a : f64[]) =
  let i = global_thread_id in
  a[i] <- a[i] + 1.0

program p
  var s : f64;
  var u : i32;
  var a : f64[4];
begin
  for t = 1 to 3 do
    u := t * 2;
    launch k(a) threads 4 block 4;
    sync;
    s := s + a[2] * f64(u)
  done
end
"""


@pytest.mark.parametrize("device", ["c", "interp"])
def test_hp54_a_statement_naming_an_array_brings_it_back_every_time(device: str) -> None:
    """HP-54: a statement that names no array is remembered as such; one that reads an
    array a launch writes asks the residency at every run of it, so it reads each
    launch's result (s = 1*2 + 2*4 + 3*6), bitwise the interpreter's."""
    from native_diff import c_backend

    from sarek_py.runtime import get_backend

    dev = c_backend() if device == "c" else get_backend("interp")
    program = parse_program(RESIDENT)
    ref = run_program(program, check_races=False)
    run = HostInterp(program, device=dev, check_races=False)
    got = run.run()
    assert float(got.values["s"]) == 28.0
    assert np.asarray(got.values["s"]).tobytes() == np.asarray(ref.values["s"]).tobytes()
    assert got.array("a").tobytes() == ref.array("a").tobytes()
    bare = {type(s).__name__ + ":" + getattr(getattr(s, "var", None), "name", "")
            for s in run._bare.values()}
    assert "HAssign:u" in bare and "HAssign:s" not in bare
