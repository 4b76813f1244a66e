"""EF-3's copies of the thread index (``fusion/epilogue/accesses.index_copies``): the
immutable integer ``let`` variables that always hold ``i``.

``index_copies`` computes the least set closed under "every binding of the variable is
``i``, a copy, or a widening cast of one" with a worklist. These tests check it against
that definition iterated to its fixpoint (the form it had before, quadratic in a chain of
copies: EF-3's 990-deep chain took most of a minute under typeguard), on generated
binding graphs with chains in any order, cycles, variables bound twice, narrowing and
widening casts, mutable, loop and assigned variables; and that the work is linear.
"""

from __future__ import annotations

import random

import pytest

from sarek_py.fusion.epilogue import accesses
from sarek_py.fusion.epilogue.accesses import _is_copy, index_copies
from sarek_py.ir.nodes import (
    Assign,
    Cast,
    Const,
    Empty,
    Expr,
    For,
    Let,
    Ref,
    Seq,
    Stmt,
    Var,
    var,
)
from sarek_py.ir.types import Scalar


def fixpoint(i: Var, body: Stmt) -> frozenset[Var]:
    """The definition, iterated from the empty set to its (least) fixpoint."""
    lets: dict[Var, list[Expr]] = {}
    other: set[Var] = set()
    stack = [body]
    while stack:
        s = stack.pop()
        if isinstance(s, Let):
            lets.setdefault(s.var, []).append(s.value)
            stack.append(s.body)
        elif isinstance(s, For):
            other.add(s.var)
            stack.append(s.body)
        elif isinstance(s, Assign):
            other.add(s.var)
        elif isinstance(s, Seq):
            stack.extend(s.stmts)
    for v in other:
        lets.pop(v, None)
    copies: frozenset[Var] = frozenset()
    while True:
        more = frozenset(v for v, vals in lets.items()
                         if not v.mutable and v != i and isinstance(v.type, Scalar)
                         and v.type.is_int and all(_is_copy(x, i, copies) for x in vals))
        if more == copies:
            return copies
        copies = more


def generated(seed: int) -> tuple[Var, Stmt]:
    """Random bindings of up to 12 variables over each other and ``i``, nested in a
    random order (the IR allows what the text's scoping would not: cycles, later names)."""
    rng = random.Random(seed)
    i = var("i", Scalar.I32)
    types = [Scalar.I32, Scalar.I64, Scalar.F32]
    vs = [var(f"t{k}", rng.choice(types), mutable=rng.random() < 0.1)
          for k in range(rng.randint(1, 12))]

    def value(t: Scalar) -> Expr:
        roll = rng.random()
        if roll < 0.15:
            return Const(1, Scalar.I32)
        src = i if roll < 0.35 else rng.choice(vs)
        e: Expr = Ref(src)
        for _ in range(rng.choice([0, 0, 1, 2])):
            e = Cast(rng.choice([Scalar.I32, Scalar.I64, Scalar.F32]), e)
        return e

    stmts: list[Stmt] = []
    for v in vs:
        for _ in range(rng.choice([1, 1, 2])):
            stmts.append(Let(v, value(v.type if isinstance(v.type, Scalar) else Scalar.I32),
                             Empty()))
    if rng.random() < 0.3:
        v = rng.choice(vs)
        stmts.append(For(v, Const(0, Scalar.I32), Const(1, Scalar.I32), Empty()))
    if rng.random() < 0.3:
        stmts.append(Assign(rng.choice(vs), Ref(i)))
    rng.shuffle(stmts)
    body: Stmt = Empty()
    for s in stmts:  # nest the lets around what follows, keep the others in sequence
        body = Let(s.var, s.value, body) if isinstance(s, Let) else Seq((s, body))
    return i, body


@pytest.mark.parametrize("chunk", range(4))
def test_ef3_index_copies_is_the_least_fixpoint(chunk: int) -> None:
    """EF-3: on 400 generated binding graphs the worklist finds exactly the variables the
    fixpoint of the definition finds (and some graphs have copies, some not)."""
    sizes = []
    for seed in range(chunk * 100, chunk * 100 + 100):
        i, body = generated(seed)
        want = fixpoint(i, body)
        assert index_copies(i, body) == want, seed
        sizes.append(len(want))
    assert max(sizes) >= 2 and min(sizes) == 0


def test_ef3_index_copies_of_a_long_chain_is_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    """EF-3: a chain of 500 copies (``let t1 = t0 in let t2 = t1 in ...``, which took
    one pass over all of them per link) is found whole, each binding looked at once."""
    i = var("i", Scalar.I32)
    vs = [var(f"t{k}", Scalar.I32) for k in range(500)]
    body: Stmt = Empty()
    for k in range(len(vs) - 1, -1, -1):
        body = Let(vs[k], Ref(vs[k - 1] if k else i), body)
    looked = 0
    real = accesses._copy_source

    def counting(e: Expr) -> Var | None:
        nonlocal looked
        looked += 1
        return real(e)

    monkeypatch.setattr(accesses, "_copy_source", counting)
    assert index_copies(i, body) == frozenset(vs)
    assert looked == len(vs)
