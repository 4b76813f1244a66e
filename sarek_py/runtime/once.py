"""Work done once per key when several Python threads ask at the same time (specs/native.md,
NAT-71).

:class:`KeyedLocks` gives each key a lock of its own for as long as some thread holds or
waits for it, so threads asking for one key wait for each other while threads asking for
other keys do not. :class:`OnceKernelCache` is a per-kernel cache (LCH-17) whose value is
made by one thread: eight threads launching one new kernel emit and build it once, and the
seven others take what the first made.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sarek_py.ir.nodes import Kernel
from sarek_py.runtime.cache import DEFAULT_LIMIT, KernelCache

T = TypeVar("T")


class KeyedLocks:
    """One lock per key, made when a thread first asks for the key and dropped when the
    last thread holding or waiting for it lets go. A child forked while another thread
    held a key starts with no lock held (the holder does not exist in the child)."""

    def __init__(self) -> None:
        self._reset()
        _EVERY.add(self)

    def _reset(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, tuple[threading.Lock, list[int]]] = {}

    @contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        """Hold ``key``'s lock for the ``with`` block."""
        with self._guard:
            entry = self._locks.get(key)
            if entry is None:
                entry = self._locks[key] = (threading.Lock(), [0])
            entry[1][0] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1][0] -= 1
                if not entry[1][0]:
                    del self._locks[key]

    def __len__(self) -> int:
        """How many keys have a lock now (0 when no thread holds or waits for one)."""
        return len(self._locks)


#: every :class:`KeyedLocks`, emptied in a forked child
_EVERY: weakref.WeakSet[KeyedLocks] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for locks in list(_EVERY):
        locks._reset()


os.register_at_fork(after_in_child=_after_fork_in_child)


class OnceKernelCache(KernelCache[T]):
    """A :class:`KernelCache` whose value for a kernel is made by one thread at a time:
    a lookup that finds it takes no lock; one that does not waits for the kernel's lock and
    looks again, so the value is made once."""

    def __init__(self, make: Callable[[Kernel], T], limit: int = DEFAULT_LIMIT) -> None:
        super().__init__(make, limit)
        self.locks = KeyedLocks()

    def get(self, key_object: Kernel) -> T:
        hit = self._entries.get(id(key_object))
        if hit is not None and hit[0] is key_object:
            self.hits += 1
            return hit[1]
        with self.locks.hold(id(key_object)):
            return super().get(key_object)


__all__ = ["KeyedLocks", "OnceKernelCache"]
