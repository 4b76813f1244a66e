"""Boundary reads of a fused pair (specs/loop-fusion.md, LF-50..LF-53).

A consumer may read an intermediate at subscripts outside the producer's domain (its bounds
and the tests of the store): PolyBench's jacobi-1d reads ``B[i - 1]`` at ``i = 1`` where the
producer writes only ``B[1 .. n - 2]``. In a fused iteration the producer stores nothing, and
no other statement of the chain writes an intermediate (LF-12), so such an element holds what
the program last stored there, which is what the original consumer reads. Each read of such
an array therefore becomes ``in_domain(s) ? <producer's expression at s> : B[s]`` (LF-50),
and the consumer's body is split by one test into an interior, where every read of the
array is in the domain (plain recompute), and the boundary, which keeps the selects (LF-52).

API: :func:`in_domain`, :func:`edge_type_refusal`, :func:`interior` (the test; the affine
proof that it is an interior is `fusion._interior_proved`), :func:`describe_edges`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sarek_py.fusion.loops.intermediate import Intermediate
from sarek_py.fusion.loops.plan import Plan, conj_all
from sarek_py.ir.host.program import ParFor
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Expr,
    For,
    Let,
    Read,
    Stmt,
    Var,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.visit import free_vars, iter_exprs, iter_nodes, substitute


def in_domain(producer: ParFor, it: Intermediate, subs: Sequence[Expr]) -> Expr:
    """LF-50: ``start ≤ s ≤ stop`` in each dimension of the producer's bounds, then the
    store's tests at ``s`` (``&&`` short-circuits: the tests are evaluated only inside the
    bounds, where the producer evaluates them). ``subs`` have the indices' types (LF-51)."""
    tests: list[Expr] = []
    for ix, s in zip(producer.indices, subs, strict=True):
        tests += [Binary(BinaryOp.LE, ix.start, s), Binary(BinaryOp.LE, s, ix.stop)]
    env = dict(zip(producer.vars, subs, strict=True))
    tests += [substitute(g, env) for g in it.guards]
    return conj_all(tests)


def edge_type_refusal(producer: ParFor, body: Stmt, array: Var) -> str | None:
    """LF-51: why the reads of ``array`` in ``body`` cannot be tested against the
    producer's domain (a subscript of another integer type than the index: converting it
    could wrap into the domain), or ``None``."""
    for e in iter_exprs(body):
        if isinstance(e, Read) and e.array == array:
            for v, s in zip(producer.vars, e.index, strict=True):
                if type_of(s) != v.type:
                    return (f"a read of '{array.name}' outside the producer's domain has the "
                            f"subscript of type {type_of(s)} where the producer's index "
                            f"'{v.name}' is {v.type}: converting it could wrap into the "
                            "domain")
    return None


def interior(producer: ParFor, inters: Sequence[Intermediate], edges: frozenset[Var],
             body: Stmt, private: frozenset[Var]) -> Expr | None:
    """LF-52: the test that every read in ``body`` of an array in ``edges`` lies in the
    producer's domain, evaluated before the body; ``None`` when a subscript depends on a
    variable of the body (a ``let``, an inner loop's variable, one of ``private``) or reads
    an array: the selects are then kept on every iteration."""
    local = set(private) | {x.var for x in iter_nodes(body) if isinstance(x, (Let, For))}
    by_array = {i.array: i for i in inters}
    tests: list[Expr] = []
    for e in iter_exprs(body):
        if not (isinstance(e, Read) and e.array in edges):
            continue
        for s in e.index:
            if any(v.is_array or v in local for v in free_vars(s)):
                return None
        t = in_domain(producer, by_array[e.array], e.index)
        if t not in tests:
            tests.append(t)
    return conj_all(tests) if tests else None


def describe_edges(plan: Plan) -> str:
    """The note of a fused pair's boundary reads (LF-53), or ``""``."""
    if not plan.edges:
        return ""
    names = ", ".join(sorted(v.name for v in plan.edges))
    where = "the interior fused without selects (LF-52)" if plan.interior is not None else \
        "on every iteration (a subscript depends on the body's variables, LF-52)"
    if plan.split is not None:
        k = plan.split.loops - 1
        where += (f" as a loop nest of its own, then {k} boundary strip"
                  f"{'s' if k != 1 else ''} with the selects (LF-85)")
    elif plan.interior is not None and plan.no_split:
        where += f", tested on every iteration: {plan.no_split} (LF-88)"
    return (f"; reads {names} as stored outside the producer's domain (LF-50), "
            f"{where}")


__all__ = ["describe_edges", "edge_type_refusal", "in_domain", "interior"]
