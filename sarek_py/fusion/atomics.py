"""Fusion refuses through atomics (specs/fusion-legality.md LEG-20).

No fusion analysis reasons about atomics yet: inlining a consumer after a producer's
stores, or merging two parallel loops, changes which updates a read can see and the order
in which the updates of one element run (a float sum is then rounded differently). Until
an analysis proves such a pair exact, a kernel or loop nest holding an atomic is refused
with the atomic named, where it is, and the rule.
"""

from __future__ import annotations

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.atomics import atomic_text, first_atomic
from sarek_py.ir.nodes import Kernel

RULE = "LEG-20"


def refusal(found: object, who: str, into_kernels: bool = True) -> FusionRefused | None:
    """The LEG-20 refusal when ``found`` (a kernel, loop nest or program) holds an atomic;
    ``who`` names it as the user knows it (``producer hist``); ``into_kernels=False``
    leaves out the kernels a host program's launches name."""
    a = first_atomic(found, into_kernels=into_kernels)
    if a is None:
        return None
    return FusionRefused(
        RULE, f"{who} updates '{a.array.name}' with {atomic_text(a)}: fusion through "
        "atomics is not proved exact (the fused code would change which updates a read "
        "sees, and the order of the updates of one element), so the kernels run unfused",
        a.loc)


def refuse_atomic_kernels(producer: Kernel, consumer: Kernel) -> None:
    """Raise the LEG-20 refusal when the producer or the consumer holds an atomic (in its
    body or in one of its helpers)."""
    for role, k in (("producer", producer), ("consumer", consumer)):
        r = refusal((k.body, k.helpers), f"{role} {k.name}")
        if r is not None:
            raise r


__all__ = ["RULE", "refusal", "refuse_atomic_kernels"]
