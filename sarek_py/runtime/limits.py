"""Launch parameters checked against the device's limits before a launch (specs/launch.md,
LCH-21).

A launch a device cannot make is refused with a :class:`LaunchError` naming the launch
parameter (thread count, block size, shared arrays) and the limit, before anything is
allocated or enqueued: drivers answer such launches with a crash (PoCL: an assertion for
too much local memory, SIGSEGV/SIGFPE for 2^32 work-items) rather than an error.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.dynamic_shared import dynamic_shared, element_bytes, shared_arrays
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import ArrayType, MemSpace

#: the most threads one launch may have: ``global_thread_id`` is an ``i32`` (the
#: interpreter's limit too, INT-1)
MAX_THREADS = 2**31 - 1


@attrs.frozen
class DeviceLimits:
    """What one device allows: threads per block, blocks per launch (``None``: no own
    limit), threads per launch in all (``None``: no own limit), shared memory per block in
    bytes; ``device`` names it in messages, ``unit`` is its word for a thread."""

    device: str
    max_block: int
    max_blocks: int | None
    max_global: int | None
    shared_bytes: int
    unit: str = "threads"
    #: the largest block and grid extent along x, y, z (``None``: none known; LCH-27)
    max_block_dims: tuple[int, int, int] | None = None
    max_grid_dims: tuple[int, int, int] | None = None
    #: the most bytes of local (per-thread) arrays a thread may hold (``None``: no own
    #: limit): on a CPU they live on a thread's stack, which a larger array overflows,
    #: killing the process (LCH-91)
    local_bytes: int | None = None


#: the local arrays' budget of a CPU thread: OpenMP's and PoCL's worker threads have
#: stacks of a few MiB, and a vectorised loop may keep a copy of a thread's locals per
#: lane (LCH-91)
CPU_LOCAL_BYTES = 1 << 20


def local_arrays(kernel: Kernel) -> list[tuple[str, int]]:
    """The kernel's local (per-thread) arrays and their sizes in bytes."""
    return [(v.name, v.type.size * element_bytes(v.type.elem)) for v in kernel.locals
            if isinstance(v.type, ArrayType) and v.type.space is MemSpace.LOCAL]


def _integer(kernel: Kernel, what: str, v: Any) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise LaunchError(f"kernel {kernel.name}: the {what} must be an integer, not {v!r}")
    return int(v)


def check_limits(kernel: Kernel, threads: Any, block: Any,
                 limits: DeviceLimits | None, shared: int | None = None) -> tuple[int, int]:
    """``(threads, block)`` as ints, after checking them (and the kernel's shared memory,
    static arrays and ``shared`` elements of its dynamic one together, LCH-52) against the
    limits every launch has and those of the device (``None``: none known)."""
    threads = _integer(kernel, "thread count", threads)
    block = _integer(kernel, "block size", block)
    name = kernel.name
    if block < 1:
        raise LaunchError(f"kernel {name}: block size {block} is below one")
    if threads > MAX_THREADS:
        raise LaunchError(f"kernel {name}: thread count {threads} is more than {MAX_THREADS} "
                          "(2^31 - 1), the most threads a launch can number "
                          "(global_thread_id is an i32)")
    if limits is None:
        return threads, block
    unit = limits.unit
    if block > limits.max_block:
        raise LaunchError(f"kernel {name}: block size {block} exceeds the device's limit of "
                          f"{limits.max_block} {unit} ({limits.device})")
    arrays = shared_arrays(kernel, shared)
    total = sum(n for _, n in arrays)
    if total > limits.shared_bytes:
        dyn = dynamic_shared(kernel)
        parts = ", ".join(f"{a}: {n} bytes" + (f" ({shared} elements given at launch)"
                                               if dyn is not None and a == dyn.name else "")
                          for a, n in arrays)
        rule = "[LCH-52] " if dyn is not None else ""
        raise LaunchError(f"{rule}kernel {name}: its shared arrays ({parts}) need {total} "
                          f"bytes, more than the {limits.shared_bytes} bytes of shared "
                          f"memory a block has ({limits.device})")
    local = local_arrays(kernel)
    need = sum(n for _, n in local)
    if limits.local_bytes is not None and need > limits.local_bytes:
        parts = ", ".join(f"{a}: {n} bytes" for a, n in local)
        raise LaunchError(f"[LCH-91] kernel {name}: its local arrays ({parts}) need "
                          f"{need} bytes a thread, more than the "
                          f"{limits.local_bytes} bytes a thread's stack holds on "
                          f"{limits.device}; use a global array (a parameter) instead")
    if threads < 1:
        return threads, block
    blocks = -(-threads // block)
    if limits.max_blocks is not None and blocks > limits.max_blocks:
        raise LaunchError(f"kernel {name}: thread count {threads} in blocks of {block} needs "
                          f"{blocks} blocks, more than the device's limit of "
                          f"{limits.max_blocks} ({limits.device})")
    if limits.max_global is not None and blocks * block > limits.max_global:
        raise LaunchError(f"kernel {name}: thread count {threads} in blocks of {block} needs "
                          f"{blocks * block} {unit}, more than the device's limit of "
                          f"{limits.max_global} ({limits.device})")
    return threads, block
