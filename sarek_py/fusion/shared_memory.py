"""Fusion refuses kernels with dynamic shared memory (specs/fusion-legality.md LEG-50).

A dynamic shared array (``shared s : f32[]``, IR-50) takes its extent from each launch
(``Launch.shared``, LCH-50). A fused kernel would hold the producer's and the consumer's
locals together and need that extent from a launch that no longer exists as such: the
proofs of epilogue, thread-wise and loop fusion do not model it, so every fusion whose
producer or consumer has one is refused, naming the kernel, the array and the rule.
"""

from __future__ import annotations

from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.dynamic_shared import dynamic_shared
from sarek_py.ir.nodes import Kernel

RULE = "LEG-50"


def dynamic_shared_refusal(kernel: Kernel, role: str = "kernel") -> FusionRefused | None:
    """The LEG-50 refusal of fusing ``kernel`` (the ``role`` it plays: ``"producer"``,
    ``"consumer"``) when it declares a dynamic shared array, else None."""
    arr = dynamic_shared(kernel)
    if arr is None:
        return None
    return FusionRefused(
        RULE, f"{role} {kernel.name} declares the dynamic shared array {arr.name} "
        f"({arr.type}), sized by each launch: a fused kernel cannot carry that launch "
        f"size, so kernels with dynamic shared memory are not fused (launch them apart, "
        f"or give {arr.name} a constant extent)", kernel.loc)


def refuse_dynamic_shared(producer: Kernel, consumer: Kernel) -> None:
    """Raise the LEG-50 refusal when the producer or the consumer has a dynamic shared
    array."""
    for role, k in (("producer", producer), ("consumer", consumer)):
        r = dynamic_shared_refusal(k, role)
        if r is not None:
            raise r


__all__ = ["RULE", "dynamic_shared_refusal", "refuse_dynamic_shared"]
