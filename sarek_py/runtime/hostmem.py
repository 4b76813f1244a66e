"""Host memory for large arrays on transparent huge pages (specs/native.md NAT-78, NAT-79).

An array the ``c`` backend's kernels use in place (a host program's allocated array,
OFF-16; a device array's buffer, NAT-20) is touched first by a kernel. On 4 KiB pages its
first touch is one page fault per 4 KiB, each a trip into the kernel (and, in a virtual
machine, out of it): about 1 ms per 2 MiB measured here, as much as a whole stage of the
advection example. Mapped on 2 MiB pages, the same first touch is one fault per 2 MiB.

:func:`zeros` maps an array of at least :data:`HUGE_PAGE` bytes as an anonymous mapping
whose start is aligned to :data:`HUGE_PAGE` and advises it ``MADV_HUGEPAGE`` where the OS
has that advice (Linux with transparent huge pages in ``madvise`` or ``always`` mode); its
bytes are zero, as ``np.zeros``'s, and the mapping lives as long as the array (and its
views) does. Smaller arrays, and a machine without ``mmap.madvise``, get ``np.zeros``.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import numpy as np
from numpy.typing import DTypeLike, NDArray

#: the size of a transparent huge page on x86-64 and arm64 (with 4 KiB base pages)
HUGE_PAGE = 2 << 20


def advice() -> int | None:
    """``MADV_HUGEPAGE`` where this Python and OS offer it, else None."""
    return getattr(mmap, "MADV_HUGEPAGE", None)


def zeros(shape: tuple[int, ...], dtype: DTypeLike) -> NDArray[Any]:
    """A C-contiguous, writeable array of zeros; on huge pages from :data:`HUGE_PAGE` bytes
    where the OS offers them (NAT-78), else ``np.zeros``."""
    dt = np.dtype(dtype)
    nbytes = math.prod(shape) * dt.itemsize
    how = advice()
    if nbytes < HUGE_PAGE or how is None:
        return np.zeros(shape, dt)
    # slack for the alignment: the kernel maps a huge page only where a whole aligned
    # 2 MiB lies inside the mapping
    length = nbytes + HUGE_PAGE
    try:
        m = mmap.mmap(-1, length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):  # no address space or no anonymous maps: plain pages
        return np.zeros(shape, dt)
    raw = np.frombuffer(m, np.uint8)  # keeps ``m`` alive as its base
    start = -raw.ctypes.data % HUGE_PAGE
    try:
        m.madvise(how, 0, length)
    except OSError:  # transparent huge pages switched off: the pages stay 4 KiB
        pass
    return raw[start:start + nbytes].view(dt).reshape(shape)
