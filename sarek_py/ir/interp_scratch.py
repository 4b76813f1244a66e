"""Reusable lane-sized buffers for the reference interpreter (docs/performance.md).

A launch makes many temporary arrays of one entry per lane. Fresh memory costs a page
fault per page on first touch, which on some machines costs more than the arithmetic
itself; this pool hands out buffers again once nothing refers to them any more.

A buffer is free when the pool holds the only reference to it: :func:`sys.getrefcount`
sees the pool's list, the loop variable and its own argument and nothing else -- no
variable of the interpreter, no value being computed, no numpy view (a view holds its
base). A buffer handed out is always overwritten completely by its user.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: bytes the pool may keep between launches
MAX_BYTES = 64 << 20
#: buffers of smaller arrays are not pooled (allocation is cheap for them)
MIN_BYTES = 1 << 16

_pool: dict[tuple[np.dtype[Any], int], list[NDArray[Any]]] = {}
_held = [0]


def scratch(dtype: np.dtype[Any], n: int) -> NDArray[Any]:
    """An uninitialised array of ``n`` elements of ``dtype``, reused when possible."""
    nbytes = dtype.itemsize * n
    if nbytes < MIN_BYTES:
        return np.empty(n, dtype)
    key = (dtype, n)
    bufs = _pool.setdefault(key, [])
    for buf in bufs:
        if sys.getrefcount(buf) <= 3:  # the list, ``buf`` and the argument
            return buf
    buf = np.empty(n, dtype)
    if _held[0] + nbytes > MAX_BYTES:
        _evict(key)
    if _held[0] + nbytes <= MAX_BYTES:
        bufs.append(buf)
        _held[0] += nbytes
    return buf


def _evict(keep: tuple[np.dtype[Any], int]) -> None:
    """Forget the free buffers of other shapes (a launch of another size came)."""
    for key, bufs in _pool.items():
        if key == keep:
            continue
        for buf in list(bufs):
            if sys.getrefcount(buf) <= 3:
                bufs.remove(buf)
                _held[0] -= buf.nbytes


def clear() -> None:
    """Drop every pooled buffer (their memory goes back when no one holds them)."""
    _pool.clear()
    _held[0] = 0
