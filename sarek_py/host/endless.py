"""Host ``while`` loops that provably never end (HP-56, specs/host-program.md).

The host twin of the interpreter's INT-29: a ``while`` loop of a host program whose
condition reads only scalars its body cannot change, and whose body has no way out, runs
forever once its first iteration ends. The host interpreter has no loop budget (a program
may run for hours on purpose), so without this rule such a program hangs ``sarek-py run``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import (
    Allocate,
    CallProc,
    Deallocate,
    HAssign,
    HFor,
    HReturn,
    HStop,
    HWhile,
    Input,
    Output,
    ParFor,
    PointerAssoc,
    Procedure,
)
from sarek_py.ir.interp_endless import unchanged_condition
from sarek_py.ir.nodes import (
    Assign,
    Atomic,
    Break,
    Call,
    For,
    Read,
    Ref,
    Return,
    Stop,
    Var,
    While,
)

_LOOPS = (HFor, HWhile, ParFor, For, While)


def _nodes(x: object, depth: int = 0) -> Iterator[tuple[object, int]]:
    """Every ``attrs`` node under ``x`` with its loop depth below ``x`` (0: not in a nested
    loop)."""
    stack: list[tuple[object, int]] = [(x, depth)]
    while stack:
        y, d = stack.pop()
        if isinstance(y, tuple):
            stack.extend((z, d) for z in y)
        elif attrs.has(type(y)) and not isinstance(y, Var):
            yield y, d
            inner = d + 1 if isinstance(y, _LOOPS) else d
            stack.extend((getattr(y, f.name), inner)
                         for f in attrs.fields(type(y))  # type: ignore[arg-type]
                         if f.name != "loc")


def _call_may_escape(c: CallProc, procs: Mapping[str, Procedure]) -> bool:
    """A call may stop the program, read input, or assign more than the variables it is
    given, unless it calls a pure procedure that stops nowhere and calls nothing."""
    p = procs.get(c.proc)
    if p is None or not p.pure:
        return True
    return any(isinstance(n, (HStop, Stop, CallProc, Call, Input)) for n, _ in _nodes(p.body))


def host_never_ends(loop: HWhile, procs: Mapping[str, Procedure]) -> str | None:
    """Why ``loop`` never ends once its first iteration has ended and it tests its
    condition again, or ``None`` when that cannot be shown this way."""
    if any(isinstance(n, (Read, Call, Atomic)) for n, _ in _nodes(loop.cond)):
        return None
    assigned: set[Var] = set()
    for n, depth in _nodes(loop.body):
        match n:
            case HReturn() | HStop() | Return() | Stop() | Call() | Launch():
                return None  # a way out (a launched kernel may stop the program)
            case Output(specifiers=specs):  # iostat=, iomsg=, id= define a variable
                assigned |= {v.var for k, v in specs if k not in ("unit", "fmt")
                             and isinstance(v, Ref)}
            case Break() if depth == 0:
                return None
            case Allocate() | Deallocate() | PointerAssoc():
                return None  # an extent the condition may read changes
            case CallProc():
                if _call_may_escape(n, procs):
                    return None
                assigned |= {a.var for a in n.args if isinstance(a, Ref)}
            case HAssign(var=v) | Assign(var=v):  # (a parallel loop assigning a host
                # scalar is refused by the checker: its Assigns are of its own locals)
                assigned.add(v)
            case Input(vars=vs):
                assigned |= set(vs)
    return unchanged_condition(loop.cond, assigned, "HP-56", "break, return or stop")
