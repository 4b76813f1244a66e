"""Per-kernel caches of the runtimes (specs/launch.md, LCH-17).

A host loop launches the same :class:`~sarek_py.ir.nodes.Kernel` object many times. What a
backend derives from a kernel (its facts: barrier, stop, stored arrays; its emitted source
and ABI; its built program and kernel object) depends on the kernel alone, so it is
computed at the first launch and found again at the next ones.

The key is the kernel object's identity, checked with ``is``: the cache holds the kernel,
so its ``id`` cannot be reused by another object while the entry lives. Identity costs
nothing to look up, whereas hashing an IR tree walks all of it; and equality of IR trees
compares variables by id only, so two equal kernels could still name their parameters
differently (and their arguments are passed by name). Kernels that are distinct objects
but emit the same source share one built program through the source-keyed caches of the
backends. The caches are bounded (least recently used entries go first), so a process
that makes kernels without end (fuzzing) does not grow without end.
"""

from __future__ import annotations

from typing import TypeVar

import attrs

from sarek_py.ir.effects import kernel_may_stop, kernel_writes
from sarek_py.ir.memo import DEFAULT_LIMIT as DEFAULT_LIMIT
from sarek_py.ir.memo import IdentityCache as IdentityCache
from sarek_py.ir.memo import LruCache as LruCache
from sarek_py.ir.nodes import Barrier, Kernel
from sarek_py.ir.visit import iter_nodes

T = TypeVar("T")


class KernelCache(IdentityCache[Kernel, T]):
    """Values computed once per kernel object (looked up by identity)."""


@attrs.frozen
class KernelFacts:
    """What the launch path asks of a kernel: whether it (or a helper) can stop, whether its
    body holds a barrier, and the array parameters it may store into."""

    can_stop: bool
    has_barrier: bool
    written: frozenset[str]


def _facts(kernel: Kernel) -> KernelFacts:
    return KernelFacts(kernel_may_stop(kernel),
                       any(isinstance(n, Barrier) for n in iter_nodes(kernel.body)),
                       kernel_writes(kernel))


_FACTS: KernelCache[KernelFacts] = KernelCache(_facts)


def kernel_facts(kernel: Kernel) -> KernelFacts:
    """The :class:`KernelFacts` of ``kernel``, computed once per kernel object."""
    return _FACTS.get(kernel)
