"""Random expressions written in Python and run as kernels equal their value computed
independently with numpy (float32, one rounding per operation) and C integer rules
(FE-5, FE-7, FE-8, FE-9). The slow variants run under ``make fuzz`` (``SAREK_FUZZ=1``)."""

from __future__ import annotations

import importlib.util
import itertools
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarek_py.ir.interp import run_kernel

#: examples per run: a quick sample in the default run, many under `make fuzz` (slow marker)
QUICK = 40
MANY = 2000 if os.environ.get("SAREK_FUZZ") else 300
_count = itertools.count()

# An expression is (python_source, evaluator): the evaluator computes the value from the
# environment {"a": f32, "b": f32, "i": int, "j": int} with numpy float32 / C integers.
Expr = tuple[str, Any]


def c_div(p: int, q: int) -> int:
    r = abs(p) // abs(q)
    return r if (p >= 0) == (q >= 0) else -r


def c_mod(p: int, q: int) -> int:
    return p - q * c_div(p, q)


int_leaf = st.one_of(
    st.sampled_from(["i", "j"]).map(lambda n: (n, lambda env, n=n: env[n])),
    st.integers(-9, 9).map(lambda v: (f"({v})", lambda env, v=v: v)),
)


def int_node(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    def binary(op: str, f: Any) -> st.SearchStrategy[Expr]:
        return st.tuples(children, children).map(
            lambda ab: (f"({ab[0][0]} {op} {ab[1][0]})",
                        lambda env: f(ab[0][1](env), ab[1][1](env))))

    def divide(op: str, f: Any) -> st.SearchStrategy[Expr]:
        # the divisor is made non-zero: abs(d) + 1
        return st.tuples(children, children).map(
            lambda ab: (f"({ab[0][0]} {op} (abs({ab[1][0]}) + 1))",
                        lambda env: f(ab[0][1](env), abs(ab[1][1](env)) + 1)))

    return st.one_of(
        binary("+", lambda p, q: p + q), binary("-", lambda p, q: p - q),
        binary("*", lambda p, q: p * q),
        divide("//", c_div), divide("%", c_mod),
        st.tuples(children, children).map(
            lambda ab: (f"min({ab[0][0]}, {ab[1][0]})",
                        lambda env: min(ab[0][1](env), ab[1][1](env)))),
    )


int_expr = st.recursive(int_leaf, int_node, max_leaves=6)

F = np.float32

float_leaf = st.one_of(
    st.sampled_from([("a", "a"), ("b", "b"), ("x[0]", "a")]).map(  # a is x[0]
        lambda nk: (nk[0], lambda env, k=nk[1]: env[k])),
    st.sampled_from(["0.5", "2.0", "0.1", "3", "-1.25", "1e-3"]).map(
        lambda t: (f"({t})", lambda env, t=t: F(float(t)))),
    int_expr.map(lambda e: (f"f32({e[0]})", lambda env, e=e: F(e[1](env)))),
)


def float_node(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    def binary(op: str, f: Any) -> st.SearchStrategy[Expr]:
        return st.tuples(children, children).map(
            lambda ab: (f"({ab[0][0]} {op} {ab[1][0]})",
                        lambda env: F(f(ab[0][1](env), ab[1][1](env)))))

    return st.one_of(
        binary("+", lambda p, q: F(p) + F(q)), binary("-", lambda p, q: F(p) - F(q)),
        binary("*", lambda p, q: F(p) * F(q)),
        st.tuples(children, children).map(
            lambda ab: (f"({ab[0][0]} / (abs({ab[1][0]}) + 1.0))",
                        lambda env: F(ab[0][1](env)) / (abs(F(ab[1][1](env))) + F(1.0)))),
        children.map(lambda e: (f"sqrt(abs({e[0]}))",
                                lambda env, e=e: np.sqrt(abs(F(e[1](env)))))),
        children.map(lambda e: (f"(-{e[0]})", lambda env, e=e: -F(e[1](env)))),
        st.tuples(children, children, children, children).map(
            lambda c: (f"({c[0][0]} if {c[1][0]} < {c[2][0]} else {c[3][0]})",
                       lambda env: F(c[0][1](env)) if F(c[1][1](env)) < F(c[2][1](env))
                       else F(c[3][1](env)))),
        st.tuples(children, children).map(
            lambda ab: (f"max({ab[0][0]}, {ab[1][0]})",
                        lambda env: max(F(ab[0][1](env)), F(ab[1][1](env))))),
    )


float_expr = st.recursive(float_leaf, float_node, max_leaves=8)

HEADER = ("from sarek_py.frontend import Vec, f32, i32, kernel, sqrt\n\n\n"
          "@kernel\ndef k(x: Vec[f32], y: Vec[i32], b: f32, i: i32, j: i32):\n"
          "    a = x[0]\n")


def run(tmp: Path, body: str, env: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    path = tmp / f"fuzz_{next(_count)}.py"
    path.write_text(HEADER + body)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.array([env["a"], 0.0], np.float32)
    y = np.zeros(2, np.int32)
    run_kernel(module.k.ir, {"x": x, "y": y, "b": F(env["b"]), "i": env["i"], "j": env["j"]},
               threads=1, block=1)
    return x, y


def check_float(tmp_path_factory: Any, e: Expr, a: float, b: float, i: int, j: int) -> None:
    env = {"a": F(a), "b": F(b), "i": i, "j": j}
    x, _ = run(tmp_path_factory.mktemp("f"), f"    x[1] = {e[0]}\n", env)
    want = F(e[1](env))
    assert np.array_equal(x[1:], np.array([want], np.float32), equal_nan=True), (e[0], x[1], want)


def check_int(tmp_path_factory: Any, e: Expr, i: int, j: int) -> None:
    env = {"a": F(0), "b": F(0), "i": i, "j": j}
    _, y = run(tmp_path_factory.mktemp("i"), f"    y[1] = {e[0]}\n", env)
    assert y[1] == e[1](env), e[0]


FLOATS = {"e": float_expr, "a": st.floats(-4, 4, width=32), "b": st.floats(-4, 4, width=32),
          "i": st.integers(-50, 50), "j": st.integers(-50, 50)}
INTS = {"e": int_expr, "i": st.integers(-50, 50), "j": st.integers(-50, 50)}


@settings(max_examples=QUICK, deadline=None)
@given(**FLOATS)
def test_fe7_random_float_expressions(tmp_path_factory: Any, e: Expr, a: float, b: float,
                                      i: int, j: int) -> None:
    check_float(tmp_path_factory, e, a, b, i, j)


@settings(max_examples=QUICK, deadline=None)
@given(**INTS)
def test_fe7_random_integer_expressions_follow_c(tmp_path_factory: Any, e: Expr, i: int,
                                                 j: int) -> None:
    check_int(tmp_path_factory, e, i, j)


@pytest.mark.slow
@settings(max_examples=MANY, deadline=None)
@given(**FLOATS)
def test_fe7_many_random_float_expressions(tmp_path_factory: Any, e: Expr, a: float,
                                           b: float, i: int, j: int) -> None:
    check_float(tmp_path_factory, e, a, b, i, j)


@pytest.mark.slow
@settings(max_examples=MANY, deadline=None)
@given(**INTS)
def test_fe7_many_random_integer_expressions(tmp_path_factory: Any, e: Expr, i: int,
                                             j: int) -> None:
    check_int(tmp_path_factory, e, i, j)
