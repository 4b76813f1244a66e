"""The statement-effect walker of the loop passes (specs/loop-fusion.md, LF-12).

:func:`effects` classifies every host statement by its kind and says what it may define
and read, or that its effect is *unknown* (which ends a fusion chain):

* assignments and loop variables define what they name; a parallel loop defines the arrays
  its body stores;
* a call of a pure procedure, or of a self-contained one without input/output, defines each
  actual argument whose dummy is not ``in`` or ``value``; any other call is unknown;
* ``print``/``write`` whose specifiers define nothing (only ``unit``, ``fmt``) define
  nothing; ``iostat``, ``iomsg``, ``id`` or any other specifier is unknown;
* every other kind (input, allocate, deallocate, pointer association, launch, sync, stop,
  return, break, continue) is unknown.
"""

from __future__ import annotations

import attrs

from sarek_py.ir.nodes import Ref, Var
from sarek_py.launch.program import (
    Allocate,
    Block,
    Break,
    CallProc,
    Continue,
    Deallocate,
    HAssign,
    HFor,
    HIf,
    HostStmt,
    HReturn,
    HStop,
    HStore,
    Input,
    Intent,
    Output,
    ParFor,
    PointerAssoc,
    Procedure,
    Program,
    expr_vars,
    iter_host,
    kernel_stores,
    named_vars,
)

#: output specifiers that only say where and how, defining nothing
PLAIN_SPECIFIERS = frozenset({"unit", "fmt"})


@attrs.frozen
class Effects:
    """What a statement may define and read; ``unknown`` names a construct the walker does
    not model (``None`` when every effect is known)."""

    defs: frozenset[Var] = frozenset()
    reads: frozenset[Var] = frozenset()
    unknown: str | None = None

    def __or__(self, other: Effects) -> Effects:
        return Effects(self.defs | other.defs, self.reads | other.reads,
                       self.unknown or other.unknown)


def is_self_contained(proc: Procedure, program: Program,
                      _seen: set[str] | None = None) -> bool:
    """HP-6: the procedure names no variable but its dummies, its locals and the indices
    of its own loops, and calls only self-contained procedures."""
    seen = set() if _seen is None else _seen
    if proc.name in seen:
        return True
    seen.add(proc.name)
    own = {p.var for p in proc.params} | {d.var for d in proc.decls} | _all_bound(proc.body)
    for s in iter_host(proc.body):
        if not named_vars(s) <= own:
            return False
        if isinstance(s, CallProc) and not is_self_contained(
                program.procedure(s.proc), program, seen):
            return False
    return True


def _bound(s: HostStmt) -> set[Var]:
    if isinstance(s, HFor):
        return {s.var}
    if isinstance(s, ParFor):
        return set(s.vars) | set(s.locals)
    return set()


def _all_bound(s: HostStmt) -> set[Var]:
    out: set[Var] = set()
    for x in iter_host(s):
        out |= _bound(x)
    return out


def effects(s: HostStmt, program: Program, in_loop: bool = False) -> Effects:
    """The effects of ``s`` (LF-12), nested statements included. ``in_loop``: ``s`` is in
    the body of a loop inside the analysed statement, whose ``break``/``continue`` stay
    inside it."""
    match s:
        case HAssign(var=v, value=e):
            return Effects(frozenset({v}), expr_vars(e))
        case HStore(array=a, index=idx, value=e):
            return Effects(frozenset({a}), expr_vars(*idx, e))
        case Block(stmts=ss):
            out = Effects()
            for x in ss:
                out = out | effects(x, program, in_loop)
            return out
        case HIf(cond=c, then=t, else_=e):
            out = Effects(reads=expr_vars(c)) | effects(t, program, in_loop)
            return out | effects(e, program, in_loop) if e is not None else out
        case HFor(var=v, start=a, stop=b, step=st, body=body):
            return Effects(frozenset({v}), expr_vars(a, b, st)) | effects(body, program, True)
        case ParFor(body=body):
            reads = set(named_vars(s))
            return Effects(kernel_stores(body), frozenset(reads))
        case CallProc(proc=name, args=args):
            proc = program.procedure(name)
            has_io = any(isinstance(x, (Output, Input)) for x in iter_host(proc.body))
            if not (proc.pure or (is_self_contained(proc, program) and not has_io)):
                return Effects(unknown=f"call of procedure '{name}' (neither pure nor "
                               "self-contained without input/output)")
            defs = frozenset(a.var for a, p in zip(args, proc.params, strict=True)
                             if isinstance(a, Ref)
                             and p.intent not in (Intent.IN, Intent.VALUE))
            return Effects(defs, expr_vars(*args))
        case Output(specifiers=specs, items=items):
            bad = [k for k, _ in specs if k not in PLAIN_SPECIFIERS]
            if bad:
                return Effects(unknown=f"{s.kind} with specifier '{bad[0]}'")
            return Effects(reads=expr_vars(*items))
        case Input():
            return Effects(unknown="read (input)")
        case Allocate() | Deallocate():
            return Effects(unknown=f"{type(s).__name__.lower()} of '{s.array.name}'")
        case PointerAssoc():
            return Effects(unknown="pointer association")
        case Break() | Continue() if in_loop:
            return Effects()
        case Break() | Continue() | HReturn() | HStop():
            return Effects(unknown=type(s).__name__.lower().lstrip("h"))
    return Effects(unknown=type(s).__name__.lower())
