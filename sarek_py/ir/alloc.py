"""Allocation sizes checked against the memory there is (specs/interpreter.md INT-23).

An array extent, a thread count or a ``--size`` can ask for more memory than the machine
has: numpy then either raises ``MemoryError`` late or, worse, the allocation succeeds
lazily and the operating system kills the process when the pages are touched. Every
allocation the interpreter, the host-program interpreter and the CLI's random inputs make
whose size comes from the user goes through :func:`check_bytes` first, which refuses
anything above half of the memory available now with a :class:`AllocationError` that
names what asked for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.nodes import Loc

#: the share of the available memory one allocation may take
FRACTION = 0.5
#: what one interpreter lane costs, roughly: the lane vectors of the live values of a
#: thread (ids, masks, temporaries), 8 bytes each
LANE_BYTES = 64

_GIB = 1 << 30


class AllocationError(SarekError):
    """A size that the memory of this machine cannot hold."""


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_bytes() -> int:
    """The memory available now: ``MemAvailable`` of /proc/meminfo, lowered to what the
    cgroup (container) limit leaves; physical pages as a fallback."""
    avail: int | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        avail = None
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            avail = 16 * _GIB
    limit = _read_int("/sys/fs/cgroup/memory.max")
    used = _read_int("/sys/fs/cgroup/memory.current")
    if limit is not None and used is not None:
        avail = min(avail, max(limit - used, 0))
    return avail


def gib(n: int) -> str:
    """``n`` bytes in GiB, for messages."""
    return f"{n / _GIB:.3g} GiB" if n >= _GIB // 100 else f"{n} bytes"


def check_bytes(nbytes: int, what: str, loc: Loc | None = None) -> None:
    """Refuse (``AllocationError``) an allocation of ``nbytes`` for ``what`` (e.g.
    ``"array 'x' (2147483648 f32 elements)"``) larger than :data:`FRACTION` of
    :func:`available_bytes`."""
    if nbytes <= 1 << 26:  # 64 MiB: never worth a look at /proc
        return
    avail = available_bytes()
    if nbytes > FRACTION * avail:
        raise AllocationError(f"{what} needs {gib(nbytes)} of memory, more than half of the "
                              f"{gib(avail)} available: use smaller sizes", loc)
