"""A bool array holds the bytes 0 and 1 (specs/native.md, NAT-70).

numpy lets a program view any byte as a ``bool`` (``a.view(np.bool_)`` of ``uint8`` 2). The
backends read such a byte differently: the interpreter's numpy takes every non-zero byte
for true, while C and OpenCL compare the byte itself (``b == true`` is ``2 == 1``, false).
So a bool array argument a kernel may read is refused at launch, on every backend, when one
of its bytes is neither 0 nor 1; the sentence names the argument, the first such byte and
its index, and says how to pass the array instead. An array the launch does not read (one it
only writes, or a write-discarded one) is not looked at, so ``np.empty(n, np.bool_)`` stays
a valid output.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.effects import helper_effects, kernel_effects
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import ArrayType, Scalar


def _bool_reads(kernel: Kernel) -> frozenset[str]:
    reads = kernel_effects(kernel.body, helper_effects(kernel.helpers)).reads
    return frozenset(p.name for p in kernel.params if p in reads
                     and isinstance(p.type, ArrayType) and p.type.elem is Scalar.BOOL)


_READS: IdentityCache[Kernel, frozenset[str]] = IdentityCache(_bool_reads)


def bool_reads(kernel: Kernel) -> frozenset[str]:
    """The bool array parameters ``kernel`` (or a helper it passes them to) may read."""
    return _READS.get(kernel)


def bad_byte(a: NDArray[Any]) -> tuple[int, int] | None:
    """The flat index (C order) and value of the first byte of bool array ``a`` that is
    neither 0 nor 1, or ``None``."""
    if a.dtype != np.bool_ or not a.size:
        return None
    raw = a.view(np.uint8)
    if int(raw.max()) <= 1:  # a reduction: no temporary the size of the array
        return None
    flat = raw.reshape(-1)
    i = int(np.argmax(flat > 1))
    return i, int(flat[i])


def bool_array_fault(a: NDArray[Any], what: str) -> str | None:
    """The sentence refusing bool array ``a`` (``what`` names it), or ``None``."""
    found = bad_byte(a)
    if found is None:
        return None
    i, byte = found
    return (f"{what} is a bool array holding the byte {byte} at flat index {i}; a bool "
            f"must be 0 or 1, as the backends read other bytes differently: pass "
            f"(a.view(np.uint8) != 0) instead (NAT-70)")


def bool_args_fault(kernel: Kernel, args: Mapping[str, Any],
                    skip: tuple[Collection[str], ...] = ()) -> str | None:
    """The sentence refusing the first bool numpy array of ``args`` that ``kernel`` may
    read (and no collection of ``skip`` names: write-discarded, scratch) with a byte other
    than 0 and 1."""
    for name in bool_reads(kernel):
        v = args.get(name)
        if any(name in s for s in skip) or not isinstance(v, np.ndarray):
            continue
        why = bool_array_fault(v, f"kernel {kernel.name}: argument {name}")
        if why is not None:
            return why
    return None


__all__ = ["bad_byte", "bool_args_fault", "bool_array_fault", "bool_reads"]
