"""The cost model of producer-consumer fusion (specs/loop-fusion.md, LF-13).

An element of an intermediate array is computed by every fused iteration that reads it.
The fusion is made when that extra arithmetic -- the producer's expression, with the
bodies of the helper functions it calls, times the consumer's reads beyond the first -- is
at most ``threshold`` operations (default 64, the order of a GPU's ratio of arithmetic to
memory throughput) per byte of memory traffic removed (a store and a load per element).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Binary,
    Call,
    Cast,
    Cond,
    Expr,
    HelperFunc,
    Intrinsic,
    Stmt,
    Unary,
)
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_exprs

#: operations per byte removed above which fusion does not pay (the seed's 64)
DEFAULT_THRESHOLD = 64.0


def operations(node: Expr | Stmt, helpers: Mapping[str, HelperFunc],
               _stack: tuple[str, ...] = ()) -> int:
    """Arithmetic operations in ``node``: operators, casts, conditionals, math intrinsics,
    and for each call the operations of the callee's body (LF-13)."""
    total = 0
    for e in iter_exprs(node):
        match e:
            case Binary() | Unary() | Cast() | Cond():
                total += 1
            case Intrinsic(name=n) if n not in THREAD_INTRINSICS:
                total += 1
            case Call(func=f):
                if f in helpers and f not in _stack:
                    total += operations(helpers[f].body, helpers, (*_stack, f))
    return total


@attrs.frozen
class CostItem:
    """One intermediate array: its producer expression's operations, the consumer's reads,
    its element type."""

    name: str
    ops: int
    reads: int
    elem: Scalar

    @property
    def extra_ops(self) -> int:
        return self.ops * max(self.reads - 1, 0)

    @property
    def bytes_removed(self) -> int:
        return 2 * self.elem.dtype.itemsize


@attrs.frozen
class CostDecision:
    """Whether the fusion pays: extra operations against bytes removed, per element."""

    extra_ops: int
    bytes_removed: int
    threshold: float

    @property
    def ratio(self) -> float:
        return self.extra_ops / self.bytes_removed if self.bytes_removed else float("inf")

    @property
    def pays(self) -> bool:
        return self.extra_ops <= self.threshold * self.bytes_removed

    def __str__(self) -> str:
        return (f"{self.extra_ops} extra operations for {self.bytes_removed} bytes removed "
                f"({self.ratio:.2f} per byte, threshold {self.threshold:g})")


def decide(items: Iterable[CostItem], threshold: float = DEFAULT_THRESHOLD) -> CostDecision:
    """The decision for all intermediate arrays of one fusion together (LF-13)."""
    its = list(items)
    return CostDecision(sum(i.extra_ops for i in its), sum(i.bytes_removed for i in its),
                        threshold)
