"""Loops that provably never end, found by the interpreter (INT-29, specs/interpreter.md).

A ``while`` loop whose condition reads only values its body cannot change -- variables the
body never assigns, thread intrinsics, constants, array extents; no array element, no call
-- and whose body has no way out (no ``break`` of this loop, no ``return``, no ``stop``, no
call, which could stop the thread) runs again every lane that finished one iteration: it
never ends. The interpreter says so after that first iteration, in the user's names,
instead of spending INT-22's whole budget (minutes, at tens of microseconds a step).
"""

from __future__ import annotations

from sarek_py.ir.diagnostics import SarekWarning
from sarek_py.ir.jumps import own_jumps
from sarek_py.ir.nodes import (
    Assign,
    Atomic,
    Break,
    Call,
    Expr,
    Kernel,
    Read,
    Return,
    Stmt,
    Stop,
    Var,
    While,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.visit import free_vars, iter_nodes


def _escapes(body: Stmt) -> bool:
    """Whether ``body`` may leave its loop (a ``break`` of it, IR-32's :func:`own_jumps`)
    or the thread (a ``return``, a ``stop``, or a call)."""
    return (any(isinstance(j, Break) for j in own_jumps(body))
            or any(isinstance(n, (Return, Stop, Call)) for n in iter_nodes(body)))


def never_ends(loop: While) -> str | None:
    """Why ``loop`` never ends once a lane has run one iteration of it and comes back to its
    condition, or ``None`` when that cannot be shown this way."""
    if any(isinstance(n, (Read, Call, Atomic)) for n in iter_nodes(loop.cond)):
        return None  # memory, or a helper: another thread or the body may change it
    if _escapes(loop.body):
        return None
    assigned = {n.var for n in iter_nodes(loop.body) if isinstance(n, Assign)}
    return unchanged_condition(loop.cond, assigned, "INT-29", "break, return, stop or call")


def unchanged_condition(cond: Expr, assigned: set[Var], rule: str, exits: str) -> str | None:
    """The message of ``rule`` for a loop whose body has none of ``exits`` and assigns
    ``assigned``, when none of them is read by ``cond``; ``None`` when one is."""
    reads = free_vars(cond)
    if reads & assigned:
        return None
    names = sorted({v.name for v in reads})
    what = (f"reads only {', '.join(names)}, which its body never assigns" if names
            else "is a constant")
    return (f"this while loop never ends ({rule}): its condition '{print_expr(cond)}' "
            f"{what}, and the body has no {exits}")


def endless_loops(kernel: Kernel, backend: str) -> list[SarekWarning]:
    """A located warning for each ``while`` loop of ``kernel`` (its helpers included) that
    never ends once a thread enters it: a device backend cannot stop such a launch, so
    ``sarek-py run --backend`` names the loop before launching (INT-29)."""
    out: list[SarekWarning] = []
    for owner, body in [(f"kernel {kernel.name}", kernel.body),
                        *((f"helper {h.name}", h.body) for h in kernel.helpers)]:
        for n in iter_nodes(body):
            if isinstance(n, While) and (why := never_ends(n)) is not None:
                why = why.replace("never ends", "never ends once a thread enters it", 1)
                out.append(SarekWarning(
                    f"{owner}: {why}; on {backend} such a launch cannot be stopped from "
                    f"the host (--backend interp stops it)", n.loc))
    return out
