"""A bound on the memory traffic of a list of launches (specs/epilogue-fusion.md EF-35).

Each launch moves at most the whole of each array it touches: ``nbytes`` once for an
array parameter its kernel reads, once more for one it writes (through helper functions
by the one effect summary). For an element-wise pair the bound is what the launches move:
``scale`` then ``relu`` unfused read ``x``, write ``t``, read ``t``, write ``y`` (16 bytes
an f32 element); fused with ``t``'s stores dropped (EF-33), read ``x``, write ``y`` (8):
0.50 of unfused. A fused kernel that keeps ``t`` and reads it back counts it both ways,
so the bound never claims more than the kernel's accesses allow.
"""

from __future__ import annotations

from collections.abc import Sequence

from sarek_py.fusion.epilogue.accesses import accesses_stmt
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Kernel

__all__ = ["traffic_bound"]


def _moves(k: Kernel) -> tuple[tuple[str, int], ...]:
    """Per array parameter of ``k``, how many times a launch may move it whole: once if
    read, once more if written (a helper's argument counts both)."""
    reads: set[str] = set()
    writes: set[str] = set()
    for a in accesses_stmt(k.body, k.helpers):
        if a.index is None:  # passed to a helper: both, to be safe
            reads.add(a.array.name)
            writes.add(a.array.name)
        (writes if a.write else reads).add(a.array.name)
    return tuple((p.name, (p.name in reads) + (p.name in writes))
                 for p in k.params if p.is_array)


#: per kernel object, its parameters' moves (a repeated pipeline asks again, FE-82)
_MOVES: IdentityCache[Kernel, tuple[tuple[str, int], ...]] = IdentityCache(_moves)


def traffic_bound(launches: Sequence[Launch]) -> int | None:
    """The bytes ``launches`` move at most (EF-35), or ``None`` when an array argument
    has no known size (a host program's array named, not bound)."""
    total = 0
    for lc in launches:
        args = lc.by_name
        for name, times in _MOVES.get(lc.kernel):
            nbytes = getattr(args.get(name), "nbytes", None)
            if not isinstance(nbytes, int):
                return None
            total += nbytes * times
    return total
