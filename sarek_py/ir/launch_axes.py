"""The axes a kernel reads, checked against the dimensions of its launch (specs/launch.md,
LCH-26; specs/interpreter.md, INT-1).

A launch has one, two or three dimensions: as many as the longer of its grid and block
shapes (a 1-D launch, ``threads``/``block``, has one). A kernel that reads a ``y`` thread
intrinsic (``thread_idx_y``, ``block_idx_y``, ``block_dim_y``, ``grid_dim_y``,
``global_idx_y``) needs a launch of two dimensions at least, a ``z`` one three: any other
launch is refused before it runs, on every backend, with the intrinsic's location and the
launch's shape. ``global_thread_id`` (the linear thread id) is read by launches of any
dimension.
"""

from __future__ import annotations

import attrs

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Intrinsic, Kernel, Loc
from sarek_py.ir.visit import iter_exprs

_AXIS = {"y": 2, "z": 3}


@attrs.frozen
class AxisUse:
    """The first read of an intrinsic that needs ``dims`` launch dimensions."""

    name: str
    dims: int
    loc: Loc | None


def _uses(kernel: Kernel) -> AxisUse | None:
    """The read of a thread intrinsic needing the most launch dimensions (the first in
    source order among those), or ``None`` when the kernel reads only ``x`` axes."""
    best: AxisUse | None = None
    bodies = [kernel.body, *(h.body for h in kernel.helpers)]
    for body in bodies:
        for e in iter_exprs(body):
            if isinstance(e, Intrinsic) and not e.args and e.name[-2:-1] == "_" \
                    and e.name[-1] in _AXIS and e.name != "global_thread_id":
                need = _AXIS[e.name[-1]]
                if best is None or need > best.dims:
                    best = AxisUse(e.name, need, e.loc)
    return best


_USES: IdentityCache[Kernel, AxisUse | None] = IdentityCache(_uses)


def first_axis_use(kernel: Kernel) -> AxisUse | None:
    """The read of a thread intrinsic that needs the most launch dimensions (``None``
    when the kernel reads only ``x`` axes)."""
    return _USES.get(kernel)


def axes_needed(kernel: Kernel) -> int:
    """How many launch dimensions ``kernel`` needs: 1, 2 or 3 (LCH-26)."""
    use = _USES.get(kernel)
    return 1 if use is None else use.dims


def describe_shape(grid: tuple[int, ...] | None, block: tuple[int, ...],
                   threads: int | None = None) -> str:
    """A launch's shape as the user wrote it: ``grid (4, 2), block (16, 8)``; a 1-D launch
    without a grid is ``1000 threads, block (256,)``."""
    head = "" if grid is None else f"grid {tuple(grid)}, "
    if grid is None and threads is not None:
        head = f"{threads} threads, "
    return f"{head}block {tuple(block)}"


def check_launch_axes(kernel: Kernel, grid: tuple[int, ...] | None,
                      block: tuple[int, ...], threads: int | None = None) -> None:
    """Refuse (a located :class:`LaunchError`) a launch whose dimensions, the longer of
    ``grid`` and ``block``, are fewer than the axes the kernel reads (LCH-26)."""
    use = _USES.get(kernel)
    if use is None:
        return
    dims = max(len(grid or ()), len(block), 1)
    if use.dims <= dims:
        return
    axis = "y" if use.dims == 2 else "z"
    raise LaunchError(
        f"[LCH-26] kernel {kernel.name} reads {use.name}, but its launch has "
        f"{dims} dimension{'s' if dims > 1 else ''} ({describe_shape(grid, block, threads)}), no "
        f"{axis} axis: launch it with a grid and block of {use.dims} extents",
        use.loc)
