"""The statement-level view of the loop passes (specs/loop-fusion.md, LF-12) over the one
effect summary (:mod:`sarek_py.analysis.effects`, specs/effects.md).

:func:`effects` says what a host statement may define and read, or that its effect is
*unknown* to the loop passes (which ends a fusion chain): any statement that may end the
program early (a ``stop`` of its own, in a parallel loop's body, in a helper or procedure
it calls, transitively), leaves the loop (``break``/``continue`` outside a loop of its
own, ``return``), does input, allocation, pointer association, a launch or a sync, or an
output whose specifiers define a variable; and a call of a procedure that is neither pure
nor self-contained without input/output.
"""

from __future__ import annotations

import attrs

from sarek_py.analysis.effects import PLAIN_SPECIFIERS, StmtEffects, proc_effects, stmt_effects
from sarek_py.ir.host.program import CallProc, HostStmt, ParFor, Procedure, Program
from sarek_py.ir.nodes import Var

__all__ = ["PLAIN_SPECIFIERS", "Effects", "effects", "is_self_contained", "unknown_effect"]


@attrs.frozen
class Effects:
    """What a statement may define and read; ``unknown`` names a construct the loop passes
    do not model (``None`` when every effect is known)."""

    defs: frozenset[Var] = frozenset()
    reads: frozenset[Var] = frozenset()
    unknown: str | None = None

    def __or__(self, other: Effects) -> Effects:
        return Effects(self.defs | other.defs, self.reads | other.reads,
                       self.unknown or other.unknown)


def is_self_contained(proc: Procedure, program: Program) -> bool:
    """HP-6 (EFF-7): the procedure names no variable but its dummies, its locals and the
    indices of its own loops, and calls only self-contained procedures."""
    return proc_effects(program, proc.name).self_contained


def unknown_effect(s: HostStmt, e: StmtEffects, program: Program,
                   in_loop: bool = False) -> str | None:
    """Why the loop passes cannot model statement ``s`` with summary ``e`` (LF-12), or
    ``None``."""
    if e.may_stop:
        if isinstance(s, CallProc):
            return f"call of procedure '{s.proc}', which may stop the program"
        if isinstance(s, ParFor):
            return "a parallel loop that may stop the program"
        return "stop"
    leaves = e.leaves - ({"break", "continue"} if in_loop else set())
    if leaves:
        return sorted(leaves)[0]
    if isinstance(s, CallProc):
        proc = program.procedure(s.proc)
        if not (proc.pure or (is_self_contained(proc, program) and not e.io)):
            return (f"call of procedure '{s.proc}' (neither pure nor self-contained without "
                    "input/output)")
    if e.constructs:
        return e.constructs[0]
    return None


def effects(s: HostStmt, program: Program, in_loop: bool = False) -> Effects:
    """The effects of ``s`` (LF-12), nested statements and calls included. ``in_loop``:
    ``s`` is in the body of a loop inside the analysed statement, whose ``break`` and
    ``continue`` stay inside it."""
    e = stmt_effects(s, program)
    return Effects(e.writes, e.reads, unknown_effect(s, e, program, in_loop))
