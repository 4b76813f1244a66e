"""The c backend's prepared launch: the C arguments built once (specs/native.md, NAT-62).

A :class:`NativeLaunch` is what :meth:`CBackend.prepare_launch
<sarek_py.runtime.base.Backend.prepare_launch>` returns: the launch checked once
(NAT-60), its build chosen once (the unchecked one when the launch is proved in bounds,
CG-72: the proof reads the values the prepared launch holds, NAT-61), and its C arguments
converted once — buffer addresses, extents, the thread count, the integer and ``bool``
scalars, the geometry. A run converts only the :attr:`~sarek_py.runtime.prepared.
PreparedLaunch.volatile` float scalars (with the backend's own conversions, so the bits
are those of an unprepared launch), arms a fault buffer where the build checks its
accesses (CG-22, one per run as for every launch), takes the stop-status buffer's
address and calls the C function: what :meth:`CBackend._launch
<sarek_py.runtime.native.CBackend._launch>` does per launch, less the look-ups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import Scalar
from sarek_py.runtime.base import DeviceBuffer
from sarek_py.runtime.interruptible import call_interruptibly
from sarek_py.runtime.prepared import DeviceBuffer as Buffer
from sarek_py.runtime.prepared import PreparedLaunch

if TYPE_CHECKING:
    from sarek_py.runtime.shape import LaunchShape


class CBackend(Protocol):
    """What a prepared launch asks of the c backend (``runtime.native.CBackend``, which
    imports this module)."""

    stats: Any

    @property
    def checked(self) -> bool: ...

    @property
    def prove_launches(self) -> bool: ...

    @property
    def faults(self) -> Any: ...

    def _launch(self, kernel: Kernel, args: Mapping[str, Any], threads: int, block: int,
                status: Any, check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None: ...

    def launch_checked(self, kernel: Kernel, args: Mapping[str, Any], threads: int,
                       block: int, shape: LaunchShape | None = None,
                       shared: int | None = None) -> bool: ...

    def compiled(self, kernel: Kernel, checked: bool | None = None) -> Any: ...

#: a stand-in for the status buffer while the arguments are built (each run sets it)
_NO_STATUS = DeviceBuffer(np.zeros(1, np.int32), (1,), np.dtype(np.int32))


def _pointer(v: Any) -> int:
    return int(v.ctypes.data)


def launch_geometry(threads: int, block: int, shape: LaunchShape | None) -> np.ndarray[Any, Any]:
    """The launch function's ``sarek_shape``: the grid's and the block's extents, x y z
    (a flat launch of ``threads`` in blocks of ``block`` when ``shape`` is ``None``)."""
    grid3: tuple[int, ...]
    block3: tuple[int, ...]
    if shape is None:
        grid3, block3 = (-(-threads // block), 1, 1), (block, 1, 1)
    else:
        grid3, block3 = shape.padded()
    return np.array([*grid3, *block3], np.int32)


class NativeLaunch(PreparedLaunch):
    """One checked launch on ``c`` with its C arguments built (NAT-62)."""

    def __init__(self, backend: CBackend, kernel: Kernel,
                 args: Mapping[str, DeviceBuffer | np.generic], threads: int, block: int,
                 shape: LaunchShape | None, shared: int | None, check_races: bool) -> None:
        super().__init__(backend, kernel, args, threads, block, shape, shared, check_races)
        self.native = backend
        stats = backend.stats
        before = stats.launches_proved  # counted by each run, not by the preparing
        checked = backend.launch_checked(kernel, args, threads, block, shape, shared)
        #: whether the launch runs the unchecked build because it is proved in bounds
        self.proved = stats.launches_proved != before
        stats.launches_proved = before
        self.compiled = c = backend.compiled(kernel, checked)
        self.geometry = launch_geometry(threads, block, shape)
        values = c.plan.values(args, threads, _NO_STATUS, lambda d: d.handle, 0, shared)
        position = {name: j for j, name in enumerate(self.volatile)}
        cargs: list[Any] = []
        #: (position in a run's values, C argument, conversion, whether it is a C
        #: ``double``) per volatile argument
        self._volatile_at: list[tuple[int, int, Any, bool]] = []
        self._status_at: int | None = None
        self._fault_at: int | None = None
        for i, ((kind, param, _dim, _t), conv, v) in enumerate(
                zip(c.plan.slots, c.convert, values, strict=True)):
            if kind == "status":
                self._status_at = i
                cargs.append(None)
            elif kind == "fault":
                self._fault_at = i
                cargs.append(None)
            elif kind == "scalar" and param in position:
                double = kernel.param(param).scalar is Scalar.F64  # a C double
                self._volatile_at.append((position[param], i, conv, double))
                cargs.append(None)
            else:
                cargs.append(_pointer(v) if conv is None else conv(v))
        cargs.append(_pointer(self.geometry))
        self._cargs = tuple(cargs)

    def run(self, values: Sequence[Any], status: Buffer | None) -> None:
        if len(values) != len(self.volatile):
            raise LaunchError(f"kernel {self.kernel.name}: a prepared launch takes "
                              f"{len(self.volatile)} values ({', '.join(self.volatile)}), "
                              f"not {len(values)}")
        b = self.native
        c = self.compiled
        cargs = list(self._cargs)
        for j, i, conv, double in self._volatile_at:
            v = values[j]
            # an np.float64 is a Python float: ctypes passes its double as it is (its
            # bits, as the conversion would give them)
            cargs[i] = v if double and type(v) is np.float64 else conv(v)
        b.stats.launches += 1
        if self._status_at is not None:
            if status is None:
                raise LaunchError(f"kernel {self.kernel.name} can stop: it needs a status "
                                  "buffer")
            cargs[self._status_at] = _pointer(status.handle)
        if self.proved:
            b.stats.launches_proved += 1
        if self._fault_at is None:  # the unchecked build: no fault buffer
            if c.cancel is None:
                c.function(*cargs)
            else:  # a while loop may not end: Ctrl-C must reach it (NAT-45)
                call_interruptibly(lambda: c.function(*cargs), c.cancel)
            return
        faults = b.faults  # one zeroed fault buffer per run (CG-22, LCH-20)
        cargs[self._fault_at] = _pointer(faults.arm(self.kernel.name, c.emitted.abi))
        try:
            if c.cancel is None:
                c.function(*cargs)
            else:
                call_interruptibly(lambda: c.function(*cargs), c.cancel)
        except BaseException:
            faults.forget()
            raise
        faults.launched()


__all__ = ["NativeLaunch"]
