"""Front-end kernels wherever IR kernels are expected (issue: ``sarek_py.fuse`` of either).

``as_ir`` accepts an IR :class:`~sarek_py.ir.nodes.Kernel` or a ``@kernel`` function and
gives the IR; :func:`fuse` is :func:`sarek_py.fusion.epilogue.fuse_kernels.fuse` on either (FE-14).
"""

from __future__ import annotations

from collections.abc import Mapping

from sarek_py.frontend.kernel import KernelFunction
from sarek_py.ir.nodes import Kernel


def as_ir(k: Kernel | KernelFunction) -> Kernel:
    """The IR kernel of ``k`` (itself when it is already one)."""
    return k.ir if isinstance(k, KernelFunction) else k


def fuse(producer: Kernel | KernelFunction, consumer: Kernel | KernelFunction, *,
         shared: Mapping[str, str], p_array: str | None = None,
         name: str | None = None, threads: tuple[int | str, int | str] | None = None
         ) -> Kernel:
    """Epilogue fusion of two kernels, each an IR kernel or a ``@kernel`` function.

    The result carries its launch conditions (specs/fusion-legality.md LEG-13 … LEG-16),
    checked by every launch; ``threads=(tp, tc)`` proves them at once for those counts."""
    from sarek_py.fusion.epilogue.fuse_kernels import fuse as fuse_ir

    return fuse_ir(as_ir(producer), as_ir(consumer), shared=shared, p_array=p_array,
                   name=name, threads=threads)
