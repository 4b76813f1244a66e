"""AFF-3, AFF-6, AFF-7 as properties: conversions agree with evaluation.

Random integer expressions and conditions over loop indices ``i``, ``j`` and an invariant
``n`` are evaluated with C semantics at random points. Where ``to_affine`` gives a form, the
form has the expression's value (opaque atoms evaluated as expressions); an exact DNF has
the condition's value, a weaker one is implied by it, a stronger one implies it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping

import pytest

from sarek_py.analysis.affine.queries import AffineCtx, Dnf, Mode, to_affine, to_dnf
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Ref,
    Unary,
    UnaryOp,
    Var,
    var,
)
from sarek_py.ir.types import Scalar

I32 = Scalar.I32
VI, VJ, VN = var("i", I32), var("j", I32), var("n", I32)
CTX = AffineCtx(indices=frozenset({VI, VJ}))


class Undefined(Exception):
    pass


def ev(e: Expr, env: Mapping[Var, int]) -> int | bool:
    """C semantics on small values (no overflow happens at the sizes generated)."""
    match e:
        case Const(value=v):
            assert isinstance(v, (int, bool))
            return v
        case Ref(var=v):
            return env[v]
        case Unary(op=UnaryOp.NEG, arg=a):
            return -int(ev(a, env))
        case Unary(op=UnaryOp.NOT, arg=a):
            return not ev(a, env)
        case Cast(arg=a):
            return int(ev(a, env))
        case Cond(cond=c, if_true=t, if_false=f):
            return ev(t, env) if ev(c, env) else ev(f, env)
        case Binary(op=op, lhs=lhs, rhs=rhs):
            if op is BinaryOp.AND:
                return bool(ev(lhs, env)) and bool(ev(rhs, env))
            if op is BinaryOp.OR:
                return bool(ev(lhs, env)) or bool(ev(rhs, env))
            x, y = int(ev(lhs, env)), int(ev(rhs, env))
            match op:
                case BinaryOp.ADD:
                    return x + y
                case BinaryOp.SUB:
                    return x - y
                case BinaryOp.MUL:
                    return x * y
                case BinaryOp.DIV | BinaryOp.MOD:
                    if y == 0:
                        raise Undefined
                    q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
                    return q if op is BinaryOp.DIV else x - q * y
                case BinaryOp.SHL:
                    return x << y
                case BinaryOp.SHR:
                    return x >> y
                case BinaryOp.LT:
                    return x < y
                case BinaryOp.LE:
                    return x <= y
                case BinaryOp.GT:
                    return x > y
                case BinaryOp.GE:
                    return x >= y
                case BinaryOp.EQ:
                    return x == y
                case BinaryOp.NE:
                    return x != y
    raise AssertionError(f"cannot evaluate {e!r}")


def c(k: int) -> Expr:
    return Const(k, I32)


def gen_int(rng: random.Random, depth: int = 0) -> Expr:
    leaves = [Ref(VI), Ref(VJ), Ref(VN), c(rng.randint(-4, 4))]
    if depth >= 3 or rng.random() < 0.3:
        return rng.choice(leaves)
    kind = rng.choice(["+", "-", "*k", "*", "neg", "/", "%", "<<", "cast", "?:"])
    a = gen_int(rng, depth + 1)
    if kind == "neg":
        return Unary(UnaryOp.NEG, a)
    if kind == "*k":
        return Binary(BinaryOp.MUL, c(rng.randint(-3, 3)), a)
    if kind == "/":
        return Binary(BinaryOp.DIV, a, c(rng.choice([-2, 1, 2, 3])))
    if kind == "%":
        return Binary(BinaryOp.MOD, a, c(rng.choice([2, 3])))
    if kind == "<<":
        return Binary(BinaryOp.SHL, a, c(rng.randint(0, 3)))
    if kind == "cast":
        return Cast(I32, a)
    if kind == "?:":
        return Cond(gen_cond(rng, depth + 1), a, gen_int(rng, depth + 1))
    op = {"+": BinaryOp.ADD, "-": BinaryOp.SUB, "*": BinaryOp.MUL}[kind]
    return Binary(op, a, gen_int(rng, depth + 1))


def gen_cond(rng: random.Random, depth: int = 0) -> Expr:
    if depth >= 3 or rng.random() < 0.4:
        op = rng.choice([BinaryOp.LT, BinaryOp.LE, BinaryOp.GT, BinaryOp.GE, BinaryOp.EQ,
                         BinaryOp.NE])
        return Binary(op, gen_int(rng, depth + 1), gen_int(rng, depth + 1))
    kind = rng.choice(["&&", "||", "!", "?:", "const"])
    if kind == "!":
        return Unary(UnaryOp.NOT, gen_cond(rng, depth + 1))
    if kind == "const":
        return Const(rng.random() < 0.5, Scalar.BOOL)
    if kind == "?:":
        return Cond(gen_cond(rng, depth + 1), gen_cond(rng, depth + 1),
                    gen_cond(rng, depth + 1))
    op = BinaryOp.AND if kind == "&&" else BinaryOp.OR
    return Binary(op, gen_cond(rng, depth + 1), gen_cond(rng, depth + 1))


def dnf_value(d: Dnf, env: Mapping[Var, int]) -> bool:
    return any(all(_form_value(con.form, env) >= 0 for con in alt) for alt in d.alts)


def _form_value(form: object, env: Mapping[Var, int]) -> int:
    from sarek_py.analysis.affine.queries import AffineForm

    assert isinstance(form, AffineForm)
    vals = {a: int(ev(a, env)) for a in form.atoms}
    v = form.evaluate(vals)
    assert v.denominator == 1
    return int(v)


def points(rng: random.Random, k: int) -> list[dict[Var, int]]:
    return [{VI: rng.randint(-6, 6), VJ: rng.randint(-6, 6), VN: rng.randint(-6, 6)}
            for _ in range(k)]


FUZZ = 10 if os.environ.get("SAREK_FUZZ") else 1


def check(seed: int, count: int) -> tuple[int, int]:
    rng = random.Random(seed)
    forms = dnfs = 0
    for _ in range(count):
        e = gen_int(rng)
        f = to_affine(e, CTX)
        cond = gen_cond(rng)
        exact = to_dnf(cond, CTX, Mode.EXACT)
        weaker = to_dnf(cond, CTX, Mode.WEAKER)
        stronger = to_dnf(cond, CTX, Mode.STRONGER)
        assert weaker is not None and stronger is not None
        forms += f is not None
        dnfs += exact is not None
        for env in points(rng, 6):
            try:
                value = ev(e, env)
            except Undefined:
                value = None
            if f is not None and value is not None:
                try:
                    assert _form_value(f, env) == value, (e, f, env)
                except Undefined:
                    pass  # an opaque atom that divides by zero: no value to compare
            try:
                truth = bool(ev(cond, env))
            except Undefined:
                continue
            try:
                if exact is not None:
                    assert dnf_value(exact, env) == truth, (cond, exact, env)
                if truth:
                    assert dnf_value(weaker, env), (cond, weaker, env)
                if dnf_value(stronger, env):
                    assert truth, (cond, stronger, env)
            except Undefined:
                continue
    return forms, dnfs


def test_aff3_aff6_aff7_agree_with_evaluation() -> None:
    """AFF-3, AFF-6, AFF-7: 300 random expressions and conditions, 6 points each."""
    forms, dnfs = check(seed=3, count=300)
    assert forms > 60 and dnfs > 60  # many are expressible, so the test bites


@pytest.mark.slow
def test_aff3_aff6_aff7_fuzz() -> None:
    for seed in range(FUZZ):
        check(seed=100 + seed, count=5000)
