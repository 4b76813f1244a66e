"""Facts about atomics shared by every floor (specs/ir.md IR-33..IR-35).

An :class:`~sarek_py.ir.nodes.Atomic` is one indivisible read-modify-write of an element
of a global or shared array whose value is the element's old value. This module names the
operations, the element types they take, and finds the atomics of any IR tree (a kernel,
a helper, a host program) so that passes which cannot reason about them refuse by name.
"""

from __future__ import annotations

from typing import Any

import attrs

from sarek_py.ir.nodes import Atomic, AtomicOp, Kernel, Var
from sarek_py.ir.types import Scalar

#: the text form's word of each operation (``atomic_add`` …)
ATOMIC_WORDS: dict[str, AtomicOp] = {op.value: op for op in AtomicOp}

#: the element types every operation takes (IR-33): the IR has no unsigned types, so
#: CUDA's ``unsigned int`` atomics are its ``i32`` ones on the same bits
ATOMIC_TYPES: tuple[Scalar, ...] = (Scalar.I32, Scalar.I64, Scalar.F32, Scalar.F64)


def arity(op: AtomicOp) -> int:
    """The number of operands after the element: 2 for ``atomic_cas``, else 1."""
    return 2 if op is AtomicOp.CAS else 1


def iter_atomics(*nodes: object, into_kernels: bool = True) -> list[Atomic]:
    """Every atomic anywhere in ``nodes`` (IR nodes, kernels, helpers, host programs or
    any other ``attrs`` tree over them), in a depth-first order. ``into_kernels=False``
    leaves out the kernels found inside (a host program's launches name the kernel they
    run: its atomics are not the program's own)."""
    out: list[Atomic] = []
    stack: list[object] = list(reversed(nodes))
    while stack:
        y = stack.pop()
        if isinstance(y, Atomic):
            out.append(y)
        if not into_kernels and isinstance(y, Kernel):
            continue
        if isinstance(y, (tuple, list, frozenset)):
            stack.extend(reversed(list(y)))
        elif attrs.has(type(y)) and not isinstance(y, Var):
            fields: Any = attrs.fields(type(y))  # type: ignore[arg-type]
            stack.extend(reversed([getattr(y, f.name) for f in fields if f.name != "loc"]))
    return out


def first_atomic(*nodes: object, into_kernels: bool = True) -> Atomic | None:
    """The first atomic of ``nodes``, or None (``into_kernels``: see :func:`iter_atomics`)."""
    found = iter_atomics(*nodes, into_kernels=into_kernels)
    return found[0] if found else None


def atomic_text(a: Atomic) -> str:
    """How the atomic reads in the text form, ``atomic_add(hist[b], 1)``, for messages."""
    from sarek_py.ir.printer import print_expr

    return print_expr(a)


def where(a: Atomic) -> str:
    """`` at file:line:col`` of an atomic with a location, else an empty string."""
    return f" at {a.loc}" if a.loc is not None else ""


__all__ = ["ATOMIC_TYPES", "ATOMIC_WORDS", "arity", "atomic_text", "first_atomic",
           "iter_atomics", "where"]
