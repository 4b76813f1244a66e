"""Out-of-bounds faults of device launches (specs/launch.md, LCH-20; specs/codegen.md, CG-22).

A kernel emitted with bounds checks takes a small ``int`` buffer (the *fault buffer*).
Each launch gets its own, zeroed before the launch; a checked access out of bounds writes
the first fault's site, thread and indices there and touches no memory. After the device
has finished (:meth:`FaultWatch.check`, called by the backends' ``sync``) each launch's
buffer is read; the first launch with a fault raises the interpreter's error for it
(:class:`~sarek_py.ir.diagnostics.InterpError`: kernel, thread, array, index, bounds, at
the access's location).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.codegen.bounds import DIM_WORDS, HEADER_WORDS, AccessSite
from sarek_py.codegen.cstyle import KernelAbi
from sarek_py.ir.diagnostics import InterpError

#: launches between two syncs whose fault buffers are kept; past it, a launch waits for
#: the device and checks them first, so a host loop without syncs stays bounded
MAX_PENDING = 256


def _word64(lo: np.int32 | int, hi: np.int32 | int) -> int:
    return (int(hi) << 32) | (int(lo) & 0xFFFFFFFF)


def fault_error(kernel: str, sites: tuple[AccessSite, ...],
                words: NDArray[np.int32]) -> InterpError | None:
    """The error a fault record reports (``None`` when it holds none), worded as the
    interpreter words an out-of-bounds access (INT-15)."""
    site = int(words[0])
    if site == 0:
        return None
    if not 1 <= site <= len(sites):
        return InterpError(f"kernel {kernel}: the device reported an out-of-bounds access "
                           f"at site {site}, which the kernel does not have")
    s = sites[site - 1]
    thread = _word64(words[1], words[2])
    index, bounds = [], []
    for d, lo in enumerate(s.lower):
        w = HEADER_WORDS + DIM_WORDS * d
        index.append(str(_word64(words[w], words[w + 1]) + lo))
        bounds.append(f"{lo}..{lo + int(words[w + 2]) - 1}")
    who = f"kernel {kernel}, thread {thread}"
    if s.helper is not None:
        who += f" (in helper {s.helper})"
    return InterpError(f"{who}: out-of-bounds {s.kind} of {s.describe()} at index "
                       f"[{', '.join(index)}] (bounds {', '.join(bounds)})", s.loc)


@attrs.define
class _Armed:
    kernel: str
    abi: KernelAbi
    handle: Any
    host: NDArray[np.int32]
    read: bool = False


class FaultWatch:
    """The fault buffers of one backend's launches since its last sync.

    ``alloc(nbytes)``, ``zero(handle, nbytes)`` and ``read(handle, host)`` are the
    backend's primitives; ``read_async`` (optional) queues a read that completes with the
    device's work; ``wait()`` waits for the device."""

    def __init__(self, alloc: Callable[[int], Any], zero: Callable[[Any, int], None],
                 read: Callable[[Any, NDArray[Any]], None], wait: Callable[[], None],
                 read_async: Callable[[Any, NDArray[Any]], None] | None = None) -> None:
        self._alloc, self._zero, self._read = alloc, zero, read
        self._wait, self._read_async = wait, read_async
        self._pool: dict[int, list[Any]] = {}
        self._armed: list[_Armed] = []

    def arm(self, kernel: str, abi: KernelAbi) -> Any:
        """A zeroed fault buffer for one launch of a kernel with this ABI (``None`` when it
        takes none)."""
        if abi.fault_words == 0:
            return None
        if len(self._armed) >= MAX_PENDING:
            self._wait()
            self.check()
        nbytes = 4 * abi.fault_words
        free = self._pool.setdefault(abi.fault_words, [])
        handle = free.pop() if free else self._alloc(nbytes)
        self._zero(handle, nbytes)
        self._armed.append(_Armed(kernel, abi, handle, np.zeros(abi.fault_words, np.int32)))
        return handle

    def launched(self) -> None:
        """After the launch of the last armed buffer: queue its read where the device can."""
        if self._read_async is not None and self._armed and not self._armed[-1].read:
            a = self._armed[-1]
            self._read_async(a.handle, a.host)
            a.read = True

    def forget(self) -> None:
        """The last armed launch did not start: give its buffer back."""
        a = self._armed.pop()
        self._pool[a.abi.fault_words].append(a.handle)

    def check(self) -> None:
        """After the device has finished every launch: raise the first launch's fault."""
        armed, self._armed = self._armed, []
        first: InterpError | None = None
        for a in armed:
            if not a.read:
                self._read(a.handle, a.host)
            self._pool[a.abi.fault_words].append(a.handle)
            if first is None:
                first = fault_error(a.kernel, a.abi.sites, a.host)
        if first is not None:
            raise first
