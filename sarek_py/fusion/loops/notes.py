"""What the host test of a fused loop checks, in words (specs/loop-fusion.md, LF-19).

A fused pair may run under a host test (the original loops run when it fails): an
*overflow guard* (LF-7 with AFF-17: host scalars and sizes within ``WRAP_BOUND``, so that
the integer expressions the coverage proof relies on cannot wrap) and a *bounds check*
(LF-8: the arrays' allocation lies inside the producer's domain). The note of a fused
pair says which of them it has and what they test, not one name for both.
"""

from __future__ import annotations

from sarek_py.analysis.affine.wrap import WRAP_BOUND
from sarek_py.ir.nodes import Binary, BinaryOp, Cast, Const, Expr, Length, Ref
from sarek_py.ir.printer import print_expr
from sarek_py.ir.visit import iter_nodes


def conjuncts(e: Expr) -> list[Expr]:
    """The operands of a chain of ``&&``."""
    if isinstance(e, Binary) and e.op is BinaryOp.AND:
        return conjuncts(e.lhs) + conjuncts(e.rhs)
    return [e]


def _guarded(e: Expr) -> Expr | None:
    """The atom of an overflow-guard test ``i64(a) >= -B`` / ``i64(a) <= B``, else None."""
    if not (isinstance(e, Binary) and e.op in (BinaryOp.GE, BinaryOp.LE)
            and isinstance(e.rhs, Const) and isinstance(e.rhs.value, int)):
        return None
    want = -WRAP_BOUND if e.op is BinaryOp.GE else WRAP_BOUND
    if e.rhs.value != want:
        return None
    return e.lhs.arg if isinstance(e.lhs, Cast) else e.lhs


def describe_check(check: Expr) -> str:
    """The host test of a fused loop in words: its overflow guard and its bounds check."""
    guarded: list[str] = []
    bounds: list[Expr] = []
    for c in conjuncts(check):
        a = _guarded(c)
        if a is not None:
            name = print_expr(a)
            if name not in guarded:
                guarded.append(name)
        else:
            bounds.append(c)
    parts: list[str] = []
    if guarded:
        parts.append(f"overflow guard: runs fused only while {', '.join(guarded)} "
                     f"{'lies' if len(guarded) == 1 else 'lie'} within ±2^{WRAP_BOUND.bit_length() - 1} "
                     "(LF-7)")
    if bounds:
        arrays = sorted({n.array.name for b in bounds for n in iter_nodes(b)
                         if isinstance(n, Length)}
                        | {n.var.name for b in bounds for n in iter_nodes(b)
                           if isinstance(n, Ref) and n.var.is_array})
        what = f" of {', '.join(arrays)}" if arrays else ""
        parts.append(f"run-time bounds check: runs fused only when the bounds{what} lie "
                     "in the producer's domain (LF-8)")
    return "; ".join(parts)
