"""Bounded memo tables (LCH-17, EFF-9): an LRU dict, and values computed once per object
or per tuple of objects, looked up by identity.

IR nodes are immutable, so what is derived from one node object (a kernel's facts, its
source, a fusion analysis, an effect summary) can be remembered for that object. The key is
the object's identity, checked with ``is``: the entry holds the object, so its ``id`` cannot
be reused by another object while the entry lives. Identity costs nothing to look up,
whereas hashing an IR tree walks all of it. Every table is bounded (least recently used
entries go first), so a process that makes objects without end (fuzzing) does not grow
without end.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K")

#: how many entries each table keeps by default
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


class IdentitiesCache(Generic[T]):
    """Values by tuple of objects, looked up by the identities of its items (a table of
    helper functions built anew for each question, EFF-9); ``get`` answers ``None`` for a
    tuple it does not hold."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._entries: LruCache[tuple[int, ...], tuple[tuple[object, ...], T]] = \
            LruCache(limit)

    def get(self, key: tuple[object, ...]) -> T | None:
        hit = self._entries.get(tuple(id(x) for x in key))
        if hit is not None and all(a is b for a, b in zip(hit[0], key, strict=True)):
            return hit[1]
        return None

    def put(self, key: tuple[object, ...], value: T) -> None:
        self._entries.put(tuple(id(x) for x in key), (key, value))


__all__ = ["DEFAULT_LIMIT", "IdentitiesCache", "IdentityCache", "LruCache"]
