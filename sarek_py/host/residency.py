"""Device-resident arrays for host programs that launch kernels (specs/offload.md, OFF-3,
OFF-5, OFF-7).

:class:`Residency` keeps a device buffer per host array: an array goes to the device when
a launch needs it and the host changed it (unless the launch overwrites it whole), and
comes back when a host statement names it. A host access to an array that a launch writes
before a ``sync`` waited for that launch is an error: it shows a missing sync.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from sarek_py.analysis.effects import stmt_effects
from sarek_py.host.frame import Frame
from sarek_py.host.launch_site import LaunchSite
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import (
    Block,
    HFor,
    HIf,
    HostError,
    HostStmt,
    HWhile,
    Program,
    expr_vars,
)
from sarek_py.ir.memo import IdentitiesCache
from sarek_py.ir.nodes import Loc, Var
from sarek_py.runtime.base import Backend, DeviceBuffer


class StopRequest(Exception):
    """A launch stopped: the program stops with ``code`` (OFF-5)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@attrs.define(eq=False)
class _Entry:
    """A host array and its device buffer: which copy is current, and whether a launch not
    waited for yet writes the buffer."""

    host: np.ndarray[Any, Any]
    dev: DeviceBuffer
    host_valid: bool = True
    dev_valid: bool = False
    pending_write: bool = False
    #: the device buffer is the host array's own memory (OFF-16): nothing is copied
    in_place: bool = False


@attrs.define(eq=False)
class _PendingStop:
    launch: Launch
    status: DeviceBuffer
    threads: int


@attrs.frozen(eq=False)
class _StmtArrays:
    """The arrays a host statement names directly, each with whether it may write it."""

    stmt: HostStmt
    arrays: tuple[tuple[Var, bool], ...]


def _stmt_arrays(s: HostStmt, program: Program) -> _StmtArrays:
    """What :meth:`Residency.before` asks of a statement: the arrays it may read or write
    itself (a test's or a loop's bounds for ``if``, ``for`` and ``while``, whose bodies are asked
    when they run), from the one effect summary (EFF-4, EFF-8: a call names what its
    procedure's summary names through the arguments and outside, the same set sync
    placement looks at, OFF-12). Computed once per statement object."""
    writes: frozenset[Var] = frozenset()
    match s:
        case HIf(cond=c):
            names = expr_vars(c)
        case HFor(start=a, stop=b, step=st):
            names = expr_vars(a, b, st)
        case HWhile(cond=c):  # its condition, asked before each test (HP-40)
            names = expr_vars(c)
        case Block():
            names = frozenset()
        case _:
            e = stmt_effects(s, program)
            names, writes = e.names, e.writes
    return _StmtArrays(s, tuple(sorted(((v, v in writes) for v in names if v.is_array),
                                       key=lambda x: x[0].id)))


#: what each statement of a program names, across runs of the program (by identity: the
#: statement and the program are immutable)
_ARRAYS: IdentitiesCache[_StmtArrays] = IdentitiesCache(8192)


class Residency:
    """Device-resident arrays for an offloaded program (OFF-3): an array goes to the device
    when a launch needs it and the host changed it, and comes back when a host statement
    names it; a host statement that needs an array a launch writes before a sync waited for
    that launch is an error (it shows a missing sync, OFF-7)."""

    def __init__(self, backend: Backend, check_races: bool, program: Program) -> None:
        self.backend = backend
        #: the program run, whose effect summary says what each statement names
        self.program = program
        self.check_races = check_races
        self.entries: dict[int, _Entry] = {}
        self.stops: list[_PendingStop] = []
        #: per host statement (by identity): the arrays it names
        self.stmt_arrays: dict[int, _StmtArrays] = {}
        #: host arrays known to hold zeros only (allocated, not written since, no device
        #: buffer yet), by id; the array is kept so its id stays its own
        self.zeros: dict[int, np.ndarray[Any, Any]] = {}
        #: per launch statement (by identity): what it keeps between launches (OFF-13)
        self.sites: dict[int, LaunchSite] = {}
        #: whether launches use host arrays in place (OFF-16): on a backend whose device
        #: memory is host memory and whose launches finish before they return (``c``)
        self.in_place = backend.host_arrays_in_place

    def fresh_zero(self, arr: Any) -> None:
        """``arr`` was just allocated, all zeros: a launch that needs it fills its device
        buffer with zeros instead of copying it in (LCH-19)."""
        if isinstance(arr, np.ndarray) and arr.nbytes:
            self.zeros[id(arr)] = arr

    def _was_zero(self, arr: np.ndarray[Any, Any]) -> bool:
        """Whether ``arr`` still held zeros only; it is forgotten either way."""
        return self.zeros.pop(id(arr), None) is arr

    def entry(self, arr: np.ndarray[Any, Any]) -> _Entry:
        e = self.entries.get(id(arr))
        if e is None:
            handle = self.backend.use_host(arr) if self.in_place else None
            if handle is not None:  # OFF-16: the launches use the host array itself
                e = _Entry(arr, DeviceBuffer(handle, arr.shape, arr.dtype), in_place=True)
                self.backend.stats.bytes_mapped += arr.nbytes
            else:
                e = _Entry(arr, self.backend.allocate(arr.shape, arr.dtype))
            self.entries[id(arr)] = e
        return e

    def forget(self, arr: Any) -> None:
        self.entries.pop(id(arr), None)
        self.zeros.pop(id(arr), None)

    def host_needs(self, arr: Any, name: str, write: bool, loc: Loc | None) -> None:
        if not isinstance(arr, np.ndarray):
            return
        if write:
            self._was_zero(arr)
        e = self.entries.get(id(arr))
        if e is None:
            return
        if not e.host_valid:
            if e.pending_write:
                raise HostError(f"the host needs '{name}', which a launch writes, before a "
                                "sync waited for it", loc)
            if not e.in_place:
                self.backend.copy_out(e.dev, e.host)
            e.host_valid = True
        if write:
            e.dev_valid = False

    def before(self, s: HostStmt, f: Frame) -> None:
        """Bring back what a host statement may name; mark what it may write stale."""
        arrays = self.stmt_arrays.get(id(s))
        if arrays is None or arrays.stmt is not s:
            arrays = _ARRAYS.get((s, self.program))  # found in an earlier run
            if arrays is None:
                arrays = _stmt_arrays(s, self.program)
                _ARRAYS.put((s, self.program), arrays)
            self.stmt_arrays[id(s)] = arrays
        for v, write in arrays.arrays:
            try:
                arr = f.get_var(v)
            except HostError:
                continue
            self.host_needs(arr, v.name, write, s.loc)

    def names_arrays(self, s: HostStmt) -> bool:
        """Whether :meth:`before` may bring back or mark an array for ``s``: ``False`` only
        for a statement asked before that names none (what it names never changes)."""
        arrays = self.stmt_arrays.get(id(s))
        return arrays is None or arrays.stmt is not s or bool(arrays.arrays)

    def launch(self, evaluate: Callable[..., Any], s: Launch,
               f: Frame) -> None:
        """Start ``s`` (OFF-3, OFF-4): ``evaluate(expr, frame)`` gives the value of a host
        expression; arrays go to the device only when their device copy is stale and the
        launch does not overwrite them whole. What the statement keeps between its
        launches (its values and the backend's prepared launch, OFF-13 … OFF-15) is its
        :class:`~sarek_py.host.launch_site.LaunchSite`."""
        site = self.sites.get(id(s))
        if site is None or site.stmt is not s:
            site = LaunchSite(s)
            self.sites[id(s)] = site
        site.launch(self, evaluate, f)

    def was_zero(self, arr: np.ndarray[Any, Any]) -> bool:
        """Whether ``arr`` still held zeros only (LCH-19); it is forgotten either way."""
        return self._was_zero(arr)

    def add_stop(self, s: Launch, status: DeviceBuffer, threads: int) -> None:
        """A launch of a kernel that can stop: its status is read at the next sync (OFF-5)."""
        self.stops.append(_PendingStop(s, status, threads))

    def sync(self, f: Frame) -> None:
        self.backend.sync()
        for e in self.entries.values():
            e.pending_write = False
        stops, self.stops = self.stops, []
        for st in stops:
            codes = np.zeros(st.threads, np.int32)
            self.backend.copy_out(st.status, codes)
            assert st.launch.stop_status is not None
            f.set_var(st.launch.stop_status, codes)
            hit = np.flatnonzero(codes)
            if hit.size:
                code = int(codes[hit[0]])
                if not any(r.code == code for r in st.launch.stop_replay):
                    raise HostError(f"kernel {st.launch.kernel.name} stopped with code {code}, "
                                    "which no replay handles", st.launch.loc)
                raise StopRequest(code)

    def finish(self) -> None:
        """At the end of the program: wait, and bring every array back."""
        self.backend.sync()
        for e in self.entries.values():
            e.pending_write = False
            if not e.host_valid:
                if not e.in_place:
                    self.backend.copy_out(e.dev, e.host)
                e.host_valid = True
