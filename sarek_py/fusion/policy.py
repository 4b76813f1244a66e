"""The contraction policy of epilogue fusion (specs/fusion-legality.md, LEG-9).

The fused kernel computes the same operations in the same order as P then C, but the
device compiler now sees P's last multiply next to C's first add: a compiler allowed to
contract ``a*b+c`` into one fused multiply-add could round differently. Fusion is
therefore on by default only for targets whose contraction is off: the interpreter
(numpy, one rounding per operation), OpenCL with ``#pragma OPENCL FP_CONTRACT OFF`` and
CUDA with ``--fmad=false``, which is how sarek_py builds them. A target configured with
contraction on refuses fusion unless the user forces it.
"""

from __future__ import annotations

import attrs

from sarek_py.fusion.refusal import FusionRefused

#: how each backend is built by sarek_py: contraction off everywhere
KNOWN_TARGETS = {"interp": False, "opencl": False, "cuda": False,
                 "c": False}  # cc -ffp-contract=off (NAT-13)


@attrs.frozen
class Target:
    """A backend, whether its compiler may contract floating-point operations, and (when
    known) the bytes of shared memory a block of its device has (LEG-34)."""

    name: str
    contraction: bool = False
    shared_bytes: int | None = None


def target(name: str, contraction: bool | None = None,
           shared_bytes: int | None = None) -> Target:
    """The target ``name`` as sarek_py builds it, or with ``contraction`` as configured;
    ``shared_bytes``: the device's shared memory per block, when known.

    An unknown target is assumed to contract (LEG-9: refuse when unsure).
    """
    if contraction is None:
        contraction = KNOWN_TARGETS.get(name, True)
    return Target(name, contraction, shared_bytes)


def contraction_refusal(t: Target, *, force: bool = False) -> FusionRefused | None:
    """The refusal for a target that contracts (``None`` when fusion is allowed)."""
    if t.contraction and not force:
        return FusionRefused(
            "LEG-9",
            f"target {t.name} contracts floating-point operations: the fused kernel could "
            "round differently (turn contraction off with contraction=False, or force the "
            "fusion with force=True)",
            options={"contraction=False": ("contraction", "off"),
                     "force=True": ("force", "")})
    return None


def check_contraction(t: Target, *, force: bool = False) -> None:
    """Raise the refusal of :func:`contraction_refusal`, if any."""
    r = contraction_refusal(t, force=force)
    if r is not None:
        raise r
