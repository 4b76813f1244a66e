"""Why a fusion did not happen: a refusal that names its rule (specs/epilogue-fusion.md).

A fusion pass either returns a kernel with the same meaning or raises one of these,
never a half-rewritten program (DESIGN.md, invariant 2).
"""

from __future__ import annotations

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Loc


class FusionRefused(SarekError):
    """A fusion that would not be exact (or cannot be proved exact).

    ``rule`` is the id of the rule that refuses (``"EF-3"``, ``"LEG-4"`` …); the message
    names the offending array or construct. ``str()`` starts with the rule id.
    """

    kind = "fusion refused"

    def __init__(self, rule: str, message: str, loc: Loc | None = None):
        super().__init__(f"[{rule}] {message}", loc)
        self.rule = rule
        self.reason = message


class Incompatible(FusionRefused):
    """Declarations of the producer and the consumer that cannot be merged (EF-11)."""
