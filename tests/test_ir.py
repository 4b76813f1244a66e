"""The IR's data (specs/ir.md, IR-1..IR-8, IR-15, IR-16): types, nodes, equality,
sequences, ``type_of``, intrinsic tables, fold/map, renaming, substitution."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from sarek_py.ir.intrinsics import (
    EXACT_MATH,
    GLOBAL_IDS,
    MATH,
    THREAD_INTRINSICS,
    TRANSCENDENTAL,
    is_intrinsic,
)
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
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Loc,
    Read,
    Ref,
    Seq,
    Stmt,
    Store,
    Unary,
    UnaryOp,
    Var,
    fresh_id,
    reserve_ids,
    seq,
    var,
)
from sarek_py.ir.typeof import scalar_type_of, type_of
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, array
from sarek_py.ir.visit import (
    RenameCtx,
    canonical_ids,
    children,
    fold,
    free_vars,
    iter_exprs,
    map_node,
    max_var_id,
    rename,
    substitute,
)

I32, I64, F32, F64, BOOL, UNIT = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64,
                                  Scalar.BOOL, Scalar.UNIT)


def c(v: int | float | bool, t: Scalar = I32) -> Const:
    return Const(v, t)


def saxpy() -> Kernel:
    x, y, a, n = var("x", array(F32)), var("y", array(F32)), var("a", F32), var("n", I32)
    i = var("i", I32)
    body = Let(i, Intrinsic("global_thread_id"), If(
        Binary(BinaryOp.LT, Ref(i), Ref(n)),
        Store(y, (Ref(i),), Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, Ref(a), Read(x, (Ref(i),))),
                                   Read(y, (Ref(i),))))))
    return Kernel("saxpy", (x, y, a, n), (), body)


# ---------------------------------------------------------------------------- IR-1..3


def test_ir1_scalar_kinds_and_dtypes() -> None:
    assert [s for s in Scalar if s.is_int] == [I32, I64]
    assert [s for s in Scalar if s.is_float] == [F32, F64]
    assert not BOOL.is_numeric and not UNIT.is_numeric
    assert (I32.dtype, I64.dtype, F32.dtype, F64.dtype, BOOL.dtype) == (
        np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32), np.dtype(np.float64),
        np.dtype(np.bool_))
    assert (I32.bits, I64.bits, F32.bits, F64.bits) == (32, 64, 32, 64)
    with pytest.raises(ValueError):
        _ = UNIT.dtype
    assert str(F32) == "f32"


def test_ir2_memory_spaces_print() -> None:
    assert str(ArrayType(F32, MemSpace.SHARED, (0,), (16,))) == "shared f32[16]"
    assert str(ArrayType(I32, MemSpace.LOCAL, (1, 0), (4, 2))) == "local i32[1:4, 2]"
    assert array(F64, 2).space is MemSpace.GLOBAL


def test_ir3_array_types() -> None:
    t = ArrayType(F32, MemSpace.GLOBAL, (0, 1), (None, 8))
    assert t.rank == 2 and not t.is_constant_shape
    assert str(t) == "f32[, 1:8]"
    with pytest.raises(ValueError):
        _ = t.size
    assert ArrayType(I32, MemSpace.LOCAL, (0, 0), (3, 4)).size == 12
    assert array(F32, 3) == ArrayType(F32, MemSpace.GLOBAL, (0, 0, 0), (None,) * 3)
    with pytest.raises(ValueError, match="at least one dimension"):
        ArrayType(F32, MemSpace.GLOBAL, (), ())
    with pytest.raises(ValueError, match="lower bound per dimension"):
        ArrayType(F32, MemSpace.GLOBAL, (0,), (None, None))
    with pytest.raises(ValueError, match="negative"):
        ArrayType(F32, MemSpace.GLOBAL, (0,), (-1,))
    with pytest.raises(ValueError, match="unit"):
        ArrayType(UNIT)


# ------------------------------------------------------------------------------ IR-4..6


def test_ir4_nodes_are_immutable() -> None:
    e = Binary(BinaryOp.ADD, c(1), c(2))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        e.op = BinaryOp.SUB  # type: ignore[misc]
    evolved = attrs.evolve(e, op=BinaryOp.SUB)
    assert evolved.op is BinaryOp.SUB and e.op is BinaryOp.ADD


def test_ir4_value_equality_ignores_locations() -> None:
    k1, k2 = saxpy(), saxpy()
    assert k1 != k2  # fresh variables: different ids
    assert canonical_ids(k1) == canonical_ids(k2)
    a = Binary(BinaryOp.ADD, c(1), c(2), loc=Loc("a.sk", 1, 1))
    b = Binary(BinaryOp.ADD, c(1), c(2))
    assert a == b and hash(a) == hash(b)
    assert a != Binary(BinaryOp.ADD, c(2), c(1))
    assert Const(1, I32) != Const(1, I64)


def test_ir5_variables_compare_by_id() -> None:
    v = var("x", F32)
    same_id = Var("renamed", v.id, I64)
    assert v == same_id and hash(v) == hash(same_id)
    assert var("x", F32) != var("x", F32)
    assert Ref(v) == Ref(same_id)
    assert len({v, same_id, var("x", F32)}) == 2
    ids = [fresh_id() for _ in range(5)]
    assert len(set(ids)) == 5
    reserve_ids(ids[-1] + 1000)
    assert fresh_id() > ids[-1] + 1000
    assert var("m", I32, mutable=True).mutable and not var("m", I32).mutable
    assert var("a", array(F32, 2)).is_array and var("a", array(F32, 2)).scalar is F32


def test_ir6_seq_flattens() -> None:
    a, b_, c_ = Barrier(), Assign(var("m", I32, True), c(1)), Barrier(loc=Loc("f", 1, 2))
    assert seq() == Empty()
    assert seq(Empty(), Empty()) == Empty()
    assert seq(a) is a
    assert seq(a, Empty(), seq(b_, c_)) == Seq((a, b_, c_))
    assert seq(Seq((a, Empty(), b_)), c_) == Seq((a, b_, c_))


# ------------------------------------------------------------------------------ IR-7, 8


def test_ir7_type_of() -> None:
    f, i, m = var("f", F64), var("i", I64), var("m", array(F32, 2))
    cases: list[tuple[Expr, Scalar]] = [
        (Binary(BinaryOp.LT, Ref(f), Ref(f)), BOOL),
        (Binary(BinaryOp.AND, c(True, BOOL), c(False, BOOL)), BOOL),
        (Binary(BinaryOp.SHL, Ref(i), Ref(i)), I64),
        (Unary(UnaryOp.NOT, c(True, BOOL)), BOOL),
        (Unary(UnaryOp.NEG, Ref(f)), F64),
        (Read(m, (c(0), c(0))), F32),
        (Cast(I32, Ref(f)), I32),
        (Cond(c(True, BOOL), Ref(i), Ref(i)), I64),
        (Intrinsic("block_dim_y"), I32),
        (Intrinsic("pow", (Ref(f), Ref(f))), F64),
        (Call("g", (), F32), F32),
        (Length(m, 1), I32),
    ]
    for e, t in cases:
        assert type_of(e) == t, e
        assert scalar_type_of(e) == t
    assert type_of(Ref(m)) == array(F32, 2)
    with pytest.raises(TypeError):
        scalar_type_of(Ref(m))


def test_ir8_intrinsic_tables() -> None:
    assert "global_thread_id" in THREAD_INTRINSICS
    for kind in ("thread_idx", "block_idx", "block_dim", "grid_dim"):
        for axis in "xyz":
            assert f"{kind}_{axis}" in THREAD_INTRINSICS
    assert set(GLOBAL_IDS) <= set(THREAD_INTRINSICS)
    assert EXACT_MATH | TRANSCENDENTAL == set(MATH) and not EXACT_MATH & TRANSCENDENTAL
    assert MATH["sqrt"] == (1, True) and MATH["min"] == (2, False)
    assert is_intrinsic("sin") and is_intrinsic("grid_dim_x") and not is_intrinsic("erf")


# ----------------------------------------------------------------------------- IR-15, 16


def test_ir15_fold_visits_every_node_once() -> None:
    k = saxpy()
    count = fold(lambda n, _node: n + 1, 0, k.body)
    # Let, Intrinsic, If, Binary<, Ref i, Ref n, Store, Ref i, Binary+, Binary*, Ref a,
    # Read x, Ref i, Read y, Ref i
    assert count == 15
    start: list[str] = []
    kinds = fold(lambda acc, node: [*acc, type(node).__name__], start, k.body)
    assert kinds[:3] == ["Let", "Intrinsic", "If"]
    assert sum(1 for e in iter_exprs(k.body) if isinstance(e, Ref)) == 6
    assert [type(x).__name__ for x in children(k.body)] == ["Intrinsic", "If"]


def test_ir15_map_rebuilds_only_what_changed() -> None:
    k = saxpy()
    same = map_node(k, expr=lambda e: None)
    assert same is k
    assert isinstance(k.body, Let) and isinstance(k.body.body, If)

    def double_consts(e: Expr) -> Expr | None:
        if isinstance(e, Const) and e.type is I32:
            return Const(e.value * 2, I32)  # type: ignore[operator]
        return None

    body: Stmt = For(var("j", I32), c(1), c(5), Barrier())
    mapped = map_node(body, expr=double_consts)
    assert isinstance(mapped, For) and (mapped.start, mapped.stop) == (c(2), c(10))
    assert mapped.body is body.body  # type: ignore[union-attr]
    barrier_free = map_node(body, stmt=lambda s: Empty() if isinstance(s, Barrier) else None)
    assert isinstance(barrier_free, For) and barrier_free.body == Empty()


def test_ir16_rename_prefix_shift_and_mapping() -> None:
    k = saxpy()
    x = k.param("x")
    z = var("z", array(F32))
    r = rename(k, RenameCtx("p_", 1000, {x.id: z}))
    names = {p.name: p.id for p in r.params}
    assert "z" in names and names["z"] == z.id
    assert names["p_y"] == k.param("y").id + 1000
    assert r.body != k.body and canonical_ids(rename(k, RenameCtx("", 5))) == canonical_ids(k)
    assert max_var_id(r) == max(max_var_id(k) + 1000, z.id)
    assert max_var_id(Barrier()) == 0


def test_ir16_substitute_and_free_vars() -> None:
    t, u = var("t", I32), var("u", I32)
    out = var("out", array(I32))
    s = Let(u, Binary(BinaryOp.ADD, Ref(t), c(1)), Store(out, (Ref(u),), Ref(t)))
    assert free_vars(s) == {t, out}
    s2 = substitute(s, {t: c(7)})
    assert free_vars(s2) == {out}
    assert s2 == Let(u, Binary(BinaryOp.ADD, c(7), c(1)), Store(out, (Ref(u),), c(7)))
    assert substitute(s, {}) is s


def test_ir16_canonical_ids_order_of_first_appearance() -> None:
    a, b_ = var("a", I32), var("b", I32)
    e = Binary(BinaryOp.ADD, Ref(b_), Ref(a))
    ce = canonical_ids(e, start=1)
    assert isinstance(ce, Binary) and isinstance(ce.lhs, Ref) and isinstance(ce.rhs, Ref)
    assert (ce.lhs.var.id, ce.rhs.var.id) == (1, 2)
    assert (ce.lhs.var.name, ce.rhs.var.name) == ("b", "a")


def test_ir31_float_literals_compare_by_sign_of_zero_and_nan_bits() -> None:
    from sarek_py.ir.nodes import Const
    from sarek_py.ir.types import Scalar

    f64 = Scalar.F64
    assert Const(0.0, f64) != Const(-0.0, f64)
    assert Const(float("nan"), f64) == Const(float("nan"), f64)
    assert hash(Const(float("nan"), f64)) == hash(Const(float("nan"), f64))
    assert Const(1.5, f64) == Const(1.5, f64) and Const(1, f64) == Const(1.0, f64)
    assert Const(1.5, f64) != Const(1.5, Scalar.F32)
    assert len({Const(0.0, f64), Const(-0.0, f64), Const(0.0, f64)}) == 2
