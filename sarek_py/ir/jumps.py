"""``break`` and ``continue`` (IR-32): which loop each one leaves.

A ``break``/``continue`` belongs to the innermost ``for``/``while`` around it in the same
function; the walks here stop at nested loops (whose jumps are their own) and never enter
helper bodies (a jump never crosses a call).
"""

from __future__ import annotations

from collections.abc import Iterator

from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Break,
    Continue,
    Empty,
    For,
    If,
    Let,
    Pragma,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    While,
    iter_stmts,
)

Jump = Break | Continue


def own_jumps(body: Stmt) -> Iterator[Jump]:
    """The ``break``/``continue`` statements of ``body`` that leave the loop whose body it
    is (those of nested loops excluded), in order."""
    match body:
        case Break() | Continue():
            yield body
        case Seq(stmts=ss):
            for x in ss:
                yield from own_jumps(x)
        case If(then=t, else_=e):
            yield from own_jumps(t)
            if e is not None:
                yield from own_jumps(e)
        case Let(body=b) | Pragma(body=b):
            yield from own_jumps(b)
        case For() | While():
            return
        case Assign() | Store() | Return() | Barrier() | Empty() | Stop():
            return
        case _:
            raise TypeError(f"not a statement: {body!r}")


def has_continue(body: Stmt) -> bool:
    """Whether a ``continue`` of ``body`` goes to the next step of its own loop."""
    return any(isinstance(j, Continue) for j in own_jumps(body))


def first_jump(s: Stmt) -> Jump | None:
    """The first ``break``/``continue`` anywhere in ``s`` (nested loops included)."""
    return next((x for x in iter_stmts(s) if isinstance(x, (Break, Continue))), None)


def jump_word(j: Jump) -> str:
    return "break" if isinstance(j, Break) else "continue"
