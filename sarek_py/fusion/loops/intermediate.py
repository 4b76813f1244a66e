"""An array a producer loop assigns, as the loop-fusion analysis sees it (specs/loop-fusion.md,
LF-9): the record :mod:`~sarek_py.fusion.loops.plan` and :mod:`~sarek_py.fusion.loops.split`
both read."""

from __future__ import annotations

import attrs

from sarek_py.ir.nodes import Expr, Var


@attrs.frozen
class Intermediate:
    """An array the producer assigns: its guard conditions and value (over the producer's
    indices)."""

    array: Var
    guards: tuple[Expr, ...]
    value: Expr
