"""A launch checked once and run many times (specs/native.md, NAT-60, NAT-61).

:meth:`Backend.prepare_launch <sarek_py.runtime.base.Backend.prepare_launch>` makes every
check :meth:`Backend.launch <sarek_py.runtime.base.Backend.launch>` makes (limits, launch
axes, dynamic shared extent, a fused kernel's and a rows kernel's conditions, whole blocks
for barriers) and returns a :class:`PreparedLaunch`. Its :meth:`~PreparedLaunch.run`
starts the launch as ``launch`` would, without checking again, so it is the caller's
promise that nothing those checks read has changed; :meth:`~PreparedLaunch.holds` checks
what the prepared launch can see itself:

* the checks read the thread count, block, grid, dynamic shared extent, the integer and
  ``bool`` scalar arguments and the array arguments' buffers (their shapes): the caller
  keys the prepared launch on those values (a host program's launch site does,
  :mod:`sarek_py.host.launch_site`), and :meth:`~PreparedLaunch.holds` compares each
  buffer (the same object, memory, shape and type) and the backend's ``checked`` and
  ``prove_launches`` flags;
* the float scalar arguments are read by no check of a kernel without fusion conditions
  (``Kernel.requires``; a rows kernel's ``range`` conditions read integers only, LCH-25):
  they are :attr:`~PreparedLaunch.volatile`, given anew to each run. A kernel with
  fusion conditions has none: its checker may read any argument, so a caller that would
  change one prepares again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import ArrayType

if TYPE_CHECKING:
    from sarek_py.runtime.shape import LaunchShape


class DeviceBuffer(Protocol):
    """What a prepared launch asks of a device buffer (``runtime.base.DeviceBuffer``,
    which imports this module)."""

    handle: Any
    shape: tuple[int, ...]
    dtype: np.dtype[Any]


class Backend(Protocol):
    """What a prepared launch asks of its backend (``runtime.base.Backend``)."""

    stats: Any

    @property
    def checked(self) -> bool: ...

    @property
    def prove_launches(self) -> bool: ...

    def _launch(self, kernel: Kernel, args: Mapping[str, Any], threads: int, block: int,
                status: Any, check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None: ...


def _volatile_params(kernel: Kernel) -> tuple[str, ...]:
    if kernel.requires is not None:
        return ()
    return tuple(p.name for p in kernel.params
                 if not isinstance(p.type, ArrayType) and p.scalar.is_float)


#: each kernel's volatile parameters, found once per kernel object (the IR is immutable),
#: not once per prepared launch (a host program prepares its launches at every run)
_VOLATILE: IdentityCache[Kernel, tuple[str, ...]] = IdentityCache(_volatile_params, 4096)


def volatile_params(kernel: Kernel) -> tuple[str, ...]:
    """The scalar parameters no launch check reads, in parameter order: the float ones
    of a kernel without fusion conditions (NAT-60), none otherwise."""
    return _VOLATILE.get(kernel)


class PreparedLaunch:
    """One checked launch of ``kernel`` (NAT-60): run it with the values of its
    :attr:`volatile` parameters and a stop-status buffer. This one runs through the
    backend's ``_launch``; the c backend's prebuilds its C arguments
    (:mod:`sarek_py.runtime.native_launch`)."""

    def __init__(self, backend: Backend, kernel: Kernel,
                 args: Mapping[str, DeviceBuffer | np.generic], threads: int, block: int,
                 shape: LaunchShape | None, shared: int | None, check_races: bool) -> None:
        self.backend = backend
        self.kernel = kernel
        self.args = dict(args)
        self.threads, self.block, self.shape, self.shared = threads, block, shape, shared
        self.check_races = check_races
        #: the scalar parameters each run gives again (NAT-60)
        self.volatile = volatile_params(kernel)
        #: the array arguments as prepared: parameter, buffer, its memory, shape, dtype
        self.buffers = tuple((p.name, b, getattr(b, "handle", None), getattr(b, "shape", None),
                              getattr(b, "dtype", None))
                             for p in kernel.params if isinstance(p.type, ArrayType)
                             for b in (args.get(p.name),))
        self.flags = (backend.checked, backend.prove_launches)

    def holds(self, buffers: Sequence[DeviceBuffer]) -> bool:
        """Whether this launch may run with the array arguments ``buffers`` (in parameter
        order) without being checked again (NAT-61): each is the buffer it was prepared
        with, with the same memory, shape and type, and the backend's bounds-check flags
        are unchanged. The caller answers for the scalars it keys it on."""
        if (self.backend.checked, self.backend.prove_launches) != self.flags:
            return False
        if len(buffers) != len(self.buffers):
            return False
        for b, (_name, buf, handle, shape, dtype) in zip(buffers, self.buffers, strict=True):
            if b is not buf or b.handle is not handle:
                return False
            # the same objects compare equal: numpy's dtype comparison costs ~0.25 us
            b_shape, b_dtype = b.shape, b.dtype
            if (b_shape is not shape and b_shape != shape) or \
                    (b_dtype is not dtype and b_dtype != dtype):
                return False
        return True

    def run(self, values: Sequence[Any], status: DeviceBuffer | None) -> None:
        """Start the launch (counted in ``stats.launches`` as :meth:`Backend.launch`
        counts it) with ``values`` for the :attr:`volatile` parameters, in order, and the
        stop-status buffer ``status``."""
        if len(values) != len(self.volatile):
            raise LaunchError(f"kernel {self.kernel.name}: a prepared launch takes "
                              f"{len(self.volatile)} values ({', '.join(self.volatile)}), "
                              f"not {len(values)}")
        args = dict(self.args)
        for name, v in zip(self.volatile, values, strict=True):
            args[name] = v
        self.backend.stats.launches += 1
        self.backend._launch(self.kernel, args, self.threads, self.block, status,
                             self.check_races, self.shape, self.shared)


__all__ = ["PreparedLaunch", "volatile_params"]
