"""What the loop-fusion analysis proved about a pair of parallel loops (specs/loop-fusion.md,
LF-9, LF-13, LF-14): the record :func:`~sarek_py.fusion.loops.fusion.analyse_pair` makes and
the rewrite (:mod:`~sarek_py.fusion.loops.fused_loop`, :mod:`~sarek_py.fusion.loops.pingpong`,
:mod:`~sarek_py.fusion.loops.rewrite`) builds the fused program from.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from sarek_py.fusion.loops.cost import CostDecision
from sarek_py.fusion.loops.intermediate import Intermediate
from sarek_py.fusion.loops.split import Split
from sarek_py.ir.host.program import HFor, ParFor
from sarek_py.ir.nodes import Binary, BinaryOp, Expr, Stmt, Var


@attrs.frozen
class Plan:
    """What :func:`~sarek_py.fusion.loops.fusion.analyse_pair` proved: how to build the
    fused loop."""

    producer: ParFor
    consumer: ParFor
    intermediates: tuple[Intermediate, ...]
    renamed: tuple[Var, ...]
    consumer_body: Stmt
    chain: tuple[HFor, ...]
    check: Expr | None
    cost: CostDecision
    #: intermediates the consumer may read outside the producer's domain: each read is
    #: ``in_domain(s) ? <producer's expression> : x[s]`` (LF-50)
    edges: frozenset[Var] = frozenset()
    #: the consumer's iterations whose reads of ``edges`` all lie in the domain (LF-52):
    #: the fused body is ``if interior then <plain> else <with selects>``
    interior: Expr | None = None
    #: the interior as a box: the fused loop is the interior nest and the boundary strips
    #: (LF-85); ``None``: the split is the test ``interior`` inside the loop
    split: Split | None = None
    #: why the interior is not a box (LF-88), when there is an interior test
    no_split: str = ""
    #: the original loops the fused loop replaces, in program order, when the plan is a
    #: whole chain of three or more (LF-70); empty for a pair
    stages: tuple[ParFor, ...] = ()

    @property
    def loops(self) -> tuple[ParFor, ...]:
        """The original loops the fused loop replaces (LF-15, LF-70)."""
        return self.stages or (self.producer, self.consumer)


def conj_all(es: Sequence[Expr]) -> Expr:
    """``es[0] && es[1] && …`` (``es`` is not empty)."""
    out = es[0]
    for e in es[1:]:
        out = Binary(BinaryOp.AND, out, e)
    return out


__all__ = ["Intermediate", "Plan", "conj_all"]
