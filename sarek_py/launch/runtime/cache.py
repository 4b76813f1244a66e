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

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

import attrs

from sarek_py.ir.nodes import Barrier, Kernel
from sarek_py.ir.visit import iter_nodes

T = TypeVar("T")
K = TypeVar("K")

#: how many kernels each cache keeps
DEFAULT_LIMIT = 512


class LruCache(Generic[K, T]):
    """A dict of at most ``limit`` entries by hashable key; the least recently used goes
    first (the source-keyed caches of built programs, LCH-17). ``get`` answers ``None``
    for a key it does not hold, so a value is never ``None``."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._limit = limit
        self._entries: OrderedDict[K, T] = OrderedDict()

    def get(self, key: K) -> T | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: T) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


class IdentityCache(Generic[K, T]):
    """Values computed once per object, looked up by identity (the entry holds the object,
    so its ``id`` is not reused while the entry lives), in an :class:`LruCache`."""

    def __init__(self, make: Callable[[K], T], limit: int = DEFAULT_LIMIT) -> None:
        self._make = make
        self._entries: LruCache[int, tuple[K, T]] = LruCache(limit)
        #: lookups answered from the cache, and values computed
        self.hits = 0
        self.misses = 0

    def get(self, key_object: K) -> T:
        """The value for ``key_object``, computed at its first lookup."""
        hit = self._entries.get(id(key_object))
        if hit is not None and hit[0] is key_object:
            self.hits += 1
            return hit[1]
        value = self._make(key_object)
        self.misses += 1
        self._entries.put(id(key_object), (key_object, value))
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


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
    from sarek_py.launch.runtime.base import can_stop, written_arrays

    return KernelFacts(can_stop(kernel),
                       any(isinstance(n, Barrier) for n in iter_nodes(kernel.body)),
                       written_arrays(kernel))


_FACTS: KernelCache[KernelFacts] = KernelCache(_facts)


def kernel_facts(kernel: Kernel) -> KernelFacts:
    """The :class:`KernelFacts` of ``kernel``, computed once per kernel object."""
    return _FACTS.get(kernel)
