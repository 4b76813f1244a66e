"""Intermediates dead after the chain: no last-iteration branch (specs/loop-fusion.md,
LF-110..LF-113).

LF-15 runs the original loops in the last iteration of the chain so that the intermediate
arrays hold the producer's values after it: a program's arrays are its results (HP-13).
An intermediate the program deallocates after the chain, before anything reads it, has no
values anyone can see: :func:`last_iteration_needed` proves that, and the rewrite then
runs the fused loop in every iteration (LF-110), with the ping-pong's copy back after the
chain (LF-111).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sarek_py.analysis.effects import may_alias, may_share, stmt_effects
from sarek_py.fusion.loops.fused_loop import fused_loops
from sarek_py.fusion.loops.plan import Plan
from sarek_py.ir.host.program import (
    Block,
    Deallocate,
    HFor,
    HIf,
    HostStmt,
    HWhile,
    Procedure,
    Program,
    host_children,
)
from sarek_py.ir.nodes import Var


def _line(s: HostStmt) -> str:
    loc = getattr(s, "loc", None)
    return f"line {loc.line}" if loc is not None else "a statement"


def _parents(root: HostStmt) -> dict[int, HostStmt]:
    out: dict[int, HostStmt] = {}
    stack = [root]
    while stack:
        s = stack.pop()
        for c in host_children(s):
            out[id(c)] = s
            stack.append(c)
    return out


def _scope(program: Program, loop: HFor
           ) -> tuple[dict[int, HostStmt], Procedure | None] | None:
    """The parents of the statements of the body (the program's or a procedure's)
    holding ``loop``, and its procedure."""
    for body, proc in ((program.body, None),
                       *((p.body, p) for p in program.procedures)):
        parents = _parents(body)
        if loop is body or id(loop) in parents:
            return parents, proc
    return None


def _after(parents: dict[int, HostStmt], s: HostStmt) -> Iterator[HostStmt | str]:
    """The statements that run after ``s`` in its enclosing blocks, out through blocks and
    ``if`` branches; then why the walk ends: a string (an enclosing loop runs its body
    again, or the scope ends)."""
    while True:
        parent = parents.get(id(s))
        if parent is None:
            yield "end"
            return
        if isinstance(parent, Block):
            k = next(i for i, x in enumerate(parent.stmts) if x is s)
            yield from parent.stmts[k + 1:]
        elif isinstance(parent, (HFor, HWhile)):
            yield f"loop at {_line(parent)}"
            return
        elif not isinstance(parent, HIf):  # pragma: no cover - bodies are blocks or ifs
            yield "end"
            return
        s = parent


def intermediates(program: Program, plan: Plan) -> tuple[Var, ...]:
    """Every array the original loops write that the fused form does not (the
    intermediates of every step of a chain, LF-70), by name."""
    fused = stmt_effects(Block(fused_loops(plan, {})), program).writes
    original = stmt_effects(Block(plan.loops), program).writes
    return tuple(sorted(original - fused, key=lambda v: v.name))


def last_iteration_needed(program: Program, plan: Plan, arrays: Sequence[Var]
                          ) -> str | None:
    """Why the fused program needs LF-15's last-iteration branch for ``plan``, whose
    intermediates are ``arrays`` (:func:`intermediates`), or ``None`` when every one is
    dead after the chain (LF-110)."""
    if not arrays:
        return None
    outer = plan.chain[-1]
    found = _scope(program, outer)
    if found is None:  # pragma: no cover - the chain is in the program
        return "the chain's loop is not in the program"
    parents, proc = found
    aliased = (may_alias(program) | may_share(program, proc)) & set(arrays)
    if aliased:
        a = sorted(v.name for v in aliased)[0]
        return f"'{a}' may be read through another name (a pointer or another dummy)"
    live = set(arrays)
    for s in _after(parents, outer):
        if isinstance(s, str):
            a = sorted(v.name for v in live)[0]
            if s == "end":
                where = "the procedure" if proc is not None else "the program"
                return f"'{a}' is not deallocated before {where} ends (its arrays are results)"
            return f"'{a}' is not deallocated before the {s} runs its body again"
        if isinstance(s, Deallocate) and s.array in live:
            live.discard(s.array)
            if not live:
                return None
            continue
        e = stmt_effects(s, program)
        touched = (e.names | e.reallocates) & live
        if touched:
            a = sorted(v.name for v in touched)[0]
            return f"'{a}' is used at {_line(s)} before it is deallocated"
        if e.may_stop:
            return f"the program may stop at {_line(s)} before the deallocation"
        if e.leaves:
            return f"{_line(s)} may leave before the deallocation ({sorted(e.leaves)[0]})"
    return "unreachable"  # pragma: no cover - the walk ends with a string


def dead_note(plan: Plan, arrays: Sequence[Var], why: str | None) -> str:
    """LF-112: what the note says about the last iteration of a fused pair whose
    intermediates are ``arrays``."""
    names = ", ".join(v.name for v in arrays)
    if not names:
        return ""
    if why is None:
        return (f"; no last-iteration branch: {names} deallocated after the chain, the "
                "fused loop runs in every iteration (LF-110)")
    outer = plan.chain[-1]
    return (f"; the last iteration runs the original loops so that {names} hold their "
            f"values (LF-15): {why}; deallocating them after the loop at {_line(outer)} "
            "drops that branch (LF-110)")


def chains_of(plans: Sequence[Plan]) -> dict[int, Plan]:
    """Each plan by the identity of every original loop it replaces."""
    return {id(loop): p for p in plans for loop in p.loops}


__all__ = ["chains_of", "dead_note", "intermediates", "last_iteration_needed"]
