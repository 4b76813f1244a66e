"""Ping-pong buffers for renamed arrays (specs/ping-pong.md, PP-1..PP-6).

Without ping-pong, the consumer of a fused loop writes a copy of a renamed array, and the
copy is copied back after every fused execution. With it, the array and its copy take
turns: a host flag picks between two copies of the fused loop, one reading the array and
writing the copy, the other the reverse, and nothing is copied. The copy starts equal to
the array (a device loop copies it once, before the do loops), and the two keep agreeing
on every element the consumer does not write, because nothing else looks at the array
between fused executions and the consumer writes the same elements every time. The
original loops, run in the last iteration, first copy back what the latest execution left
in the copy, if it is there.
"""

from __future__ import annotations

from collections.abc import Mapping

from sarek_py.analysis.effects import may_alias, may_share, stmt_effects
from sarek_py.fusion.loops.fused_loop import copy_loop, fused_loops
from sarek_py.fusion.loops.plan import Plan
from sarek_py.ir.host.program import (
    Block,
    HAssign,
    HIf,
    HostStmt,
    ParFor,
    Procedure,
    Program,
    expr_vars,
    iter_host,
)
from sarek_py.ir.nodes import Const, Expr, Ref, Unary, UnaryOp, Var
from sarek_py.ir.types import Scalar


def _first(vs: set[Var] | frozenset[Var]) -> str:
    return sorted(v.name for v in vs)[0]


def _procedure_of(program: Program, plan: Plan) -> Procedure | None:
    """The procedure whose body holds the fused pair (``None``: the program body)."""
    for proc in program.procedures:
        if any(x is plan.producer for x in iter_host(proc.body)):
            return proc
    return None


def swap_refusal(program: Program, plan: Plan) -> str | None:
    """Why the renamed arrays of ``plan`` cannot ping-pong (PP-2, PP-3), or ``None``."""
    if not plan.renamed:
        return "PP-1: the fusion renames no array"
    renamed = set(plan.renamed)
    chain_vars = {loop.var for loop in plan.chain}
    outer = plan.chain[-1]
    assigned = stmt_effects(outer.body, program).writes
    shared = may_share(program, _procedure_of(program, plan))
    for loop in plan.chain:
        body = loop.body.stmts if isinstance(loop.body, Block) else (loop.body,)
        inner: tuple[HostStmt, ...] = (*plan.loops, *plan.chain)
        for s in body:
            if any(s is x for x in inner):
                continue
            e = stmt_effects(s, program)
            if e.names & renamed:
                bad = sorted(v.name for v in e.names & renamed)[0]
                return f"PP-2: another statement of loop '{loop.var.name}' uses '{bad}'"
            other = (e.names & shared) - renamed
            if other and renamed & shared:
                return (f"PP-2: another statement of loop '{loop.var.name}' uses "
                        f"'{_first(other)}', which a caller may pass as renamed "
                        f"'{_first(renamed & shared)}' (EFF-11)")
    bounds = expr_vars(*(e for ix in plan.consumer.indices for e in (ix.start, ix.stop)))
    if bounds & chain_vars:
        return (f"PP-3: the consumer's bounds read '{_first(bounds & chain_vars)}', a loop "
                "variable of the chain")
    if bounds & assigned:
        return (f"PP-3: the consumer's bounds read '{_first(bounds & assigned)}', which "
                "the loops assign")
    if bounds & shared and assigned & shared:
        return (f"PP-3: the consumer's bounds read '{_first(bounds & shared)}', and the loops "
                f"assign '{_first(assigned & shared)}', which a caller may pass as the same "
                "array (EFF-11)")
    if bounds & may_alias(program):
        return (f"PP-3: the consumer's bounds read '{_first(bounds & may_alias(program))}', "
                "which may change through another name")
    return None


def _one(loops: tuple[ParFor, ...]) -> HostStmt:
    """The loop, or the block of the interior nest and boundary strips (LF-85, LF-89)."""
    return loops[0] if len(loops) == 1 else Block(loops)


def restore(plan: Plan, copies: Mapping[Var, Var], flag: Var) -> HostStmt:
    """PP-5: ``if flag then (copy each renamed array's copy back; flag := false)``."""
    back = copy_loop(plan.consumer, [(a, copies[a]) for a in plan.renamed])
    return HIf(Ref(flag), Block((back, HAssign(flag, Const(False, Scalar.BOOL)))))


def swapped(plan: Plan, copies: Mapping[Var, Var], flag: Var, last: Expr | None,
            original: Block) -> HostStmt:
    """PP-4, PP-5: ``if last then (copy back if flag; flag := false; original) else
    (if flag then fused(copy → array) else fused(array → copy); flag := !flag)``; without
    ``last`` (no last-iteration branch and no run-time check, LF-111) the ``else`` part
    alone, the copy back coming after the chain."""
    forward = _one(fused_loops(plan, copies))
    backward = _one(fused_loops(plan, {a: a for a in plan.renamed},
                                reads_from={a: copies[a] for a in plan.renamed}))
    flip = HAssign(flag, Unary(UnaryOp.NOT, Ref(flag)))
    fused = Block((HIf(Ref(flag), backward, forward), flip))
    if last is None:
        return fused
    last_branch = Block((restore(plan, copies, flag), *original.stmts))
    return HIf(last, last_branch, fused)


__all__ = ["restore", "swap_refusal", "swapped"]
