"""Whole chains of parallel loops, and fused output recognised on a second run
(specs/loop-fusion.md, LF-70..LF-74).

A chain ``l0 → l1 → … → lm`` fuses right to left: the last pair ``(l(m-1), lm)`` gives a
fused loop ``F``, then ``(l(m-2), F)`` with ``F`` as the consumer (recompute of
recompute), and so on; every step is an ordinary pair analysis
(:func:`~sarek_py.fusion.loops.fusion.analyse_pair`, passed in as ``analyse``), so every
rule and the cost model (LF-13) bound each step. :func:`fold_chain` gives the plan of the
whole chain and the plan of each step; :func:`fallback_pairs` recognises, on a second
``opt`` run, the original loops of LF-15's last-iteration branch (LF-72).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from sarek_py.fusion.loops.fused_loop import fused_loop
from sarek_py.fusion.loops.plan import Plan
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.program import Block, HFor, HIf, HostStmt, ParFor, iter_host
from sarek_py.ir.nodes import Binary, BinaryOp, Expr, Read, Ref, Store
from sarek_py.ir.printer import print_expr
from sarek_py.ir.visit import iter_nodes

#: ``analyse(producer, consumer, absorbed)``: the plan of one step, or FusionRefused;
#: ``absorbed`` are the original loops the consumer stands for (LF-70)
Analyse = Callable[[ParFor, ParFor, Sequence[ParFor]], Plan]


@attrs.frozen
class ChainStep:
    """One step of a chain: the pair ``(loops[k], loops[k + 1])`` and the plan that
    fused ``loops[k]`` with the fused loop of the rest."""

    producer: ParFor
    consumer: ParFor
    plan: Plan


def fold_chain(analyse: Analyse, loops: Sequence[ParFor]) -> tuple[Plan, list[ChainStep]]:
    """LF-70, LF-71: the plan of the whole chain ``loops`` (three or more) and of each
    step, in program order; FusionRefused when a step is refused (its own rule)."""
    assert len(loops) >= 3
    # LF-70: the fused loops stand as consumers without the LF-52 split when the last loop
    # stores an array an earlier one reads (renamed, LF-9: one store on the body's spine)
    stored = {x.array for x in iter_nodes(loops[-1].body) if isinstance(x, Store)}
    unsplit = any(isinstance(x, Read) and x.array in stored
                  for lp in loops[:-1] for x in iter_nodes(lp.body))
    cur = analyse(loops[-2], loops[-1], ())
    steps = [ChainStep(loops[-2], loops[-1], cur)]
    for k in range(len(loops) - 3, -1, -1):
        if cur.renamed:
            names = ", ".join(v.name for v in cur.renamed)
            raise FusionRefused(
                "LF-71", f"the fused loop of the loops after it writes a copy of renamed "
                f"{names}, copied back after it: a chain extends only through steps that "
                "rename no array", loops[k + 1].loc)
        consumer = fused_loop(attrs.evolve(cur, interior=None) if unsplit else cur, {})
        nxt = analyse(loops[k], consumer, tuple(loops[k + 1:]))
        steps.insert(0, ChainStep(loops[k], loops[k + 1], nxt))
        cur = attrs.evolve(nxt, chain=_shortest(cur.chain, nxt.chain),
                           check=_both(cur.check, nxt.check), stages=tuple(loops[k:]))
    # the first step's report carries what the rewrite builds: the whole chain (LF-73)
    steps[0] = ChainStep(loops[0], loops[1], cur)
    return cur, steps


def _shortest(a: tuple[HFor, ...], b: tuple[HFor, ...]) -> tuple[HFor, ...]:
    """LF-70: the enclosing loops both steps rely on (innermost first, so the shorter is
    a prefix of the longer): the original loops run in every last iteration of either."""
    return a if len(a) <= len(b) else b


def _both(a: Expr | None, b: Expr | None) -> Expr | None:
    """LF-70: one combined host test: the fused chain runs only when every step's does."""
    if a is None:
        return b
    if b is None:
        return a
    seen = {print_expr(c) for c in _conjuncts(a)}
    out = a
    for c in _conjuncts(b):
        if print_expr(c) not in seen:
            seen.add(print_expr(c))
            out = Binary(BinaryOp.AND, out, c)
    return out


def chain_text(loops: Sequence[ParFor]) -> str:
    """The loops of a chain by their places (LF-73)."""
    return " → ".join(str(lp.loc.line) if lp.loc is not None else "?" for lp in loops)


# ------------------------------------------------------------------ a second opt run


def _disjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op is BinaryOp.OR:
        return _disjuncts(e.lhs) + _disjuncts(e.rhs)
    return [e]


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op is BinaryOp.AND:
        return _conjuncts(e.lhs) + _conjuncts(e.rhs)
    return [e]


def fallback_pairs(s: HIf, ancestors: Sequence[HostStmt]
                   ) -> tuple[list[tuple[ParFor, ParFor]], ParFor] | None:
    """LF-72: when ``s`` is the last-iteration branch LF-15 writes around a fused loop --
    its test starts with ``v == w`` for enclosing loop variables ``v`` (each ``&&``-ed),
    its ``then`` branch ends with two or more parallel loops (after the ping-pong copy
    back, PP-5), and its ``else`` branch holds a parallel loop over the last of them's
    iterations, or the interior nest LF-85 split it into -- the adjacent pairs of those loops and the fused loop; else ``None``."""
    if s.else_ is None:
        return None
    loop_vars = {a.var for a in ancestors if isinstance(a, HFor)}
    last_test = _disjuncts(s.cond)[0]
    for c in _conjuncts(last_test):
        if not (isinstance(c, Binary) and c.op is BinaryOp.EQ and isinstance(c.lhs, Ref)
                and isinstance(c.rhs, Ref) and c.lhs.var in loop_vars
                and c.rhs.var not in loop_vars):
            return None
    then = s.then.stmts if isinstance(s.then, Block) else (s.then,)
    run: list[ParFor] = []
    for x in reversed(then):
        if not isinstance(x, ParFor):
            break
        run.insert(0, x)
    if len(run) < 2 or any(not isinstance(x, HIf) for x in then[:len(then) - len(run)]):
        return None
    want = [(print_expr(ix.start), print_expr(ix.stop)) for ix in run[-1].indices]
    names = [ix.var.name for ix in run[-1].indices]

    def piece(x: ParFor) -> bool:  # LF-85: the interior nest, its bounds clamped
        got = [(print_expr(ix.start), print_expr(ix.stop)) for ix in x.indices]
        return [ix.var.name for ix in x.indices] == names and got != want and all(
            g == w or g[0].startswith(("min(", "max(")) for g, w in zip(got, want,
                                                                         strict=True))

    loops = [x for x in iter_host(s.else_) if isinstance(x, ParFor)]
    fused = [x for x in loops
             if [(print_expr(ix.start), print_expr(ix.stop)) for ix in x.indices] == want]
    fused = fused or [x for x in loops if piece(x)]
    if not fused:
        return None
    return list(zip(run, run[1:], strict=False)), fused[0]


__all__ = ["ChainStep", "chain_text", "fallback_pairs", "fold_chain"]
