"""One launch statement of an offloaded host program, run again and again (specs/offload.md,
OFF-13 … OFF-15).

A host loop runs the same launch statement many times, mostly with the same thread count,
block, grid and integer arguments. A :class:`LaunchSite` keeps, per statement:

* the host expressions whose values no check needs again while their inputs are unchanged
  (OFF-13): the thread count, block size, grid, block shape, dynamic shared extent,
  write-discard conditions and integer and ``bool`` scalar arguments, evaluated once per
  key of their inputs (:func:`~sarek_py.host.expr_memo.memo_key`: the type and value of
  every integer and ``bool`` variable they read, the shape of every array whose extents
  they read). A site one of whose expressions reads an array element or a float variable
  has no key: it is evaluated and checked at every launch, as before;
* the launch the backend prepared with those values (OFF-14,
  :meth:`~sarek_py.runtime.base.Backend.prepare_launch`: every check of a launch made once),
  run again while the key is unchanged and the prepared launch holds for the array
  arguments' buffers (the same buffers, memory, shapes and types, and the backend's
  bounds-check flags, NAT-61). A new key, a reallocated or resized array, a changed flag
  prepares again, so every check runs again on the values that changed;
* the float scalar arguments, which no check reads (NAT-60), evaluated at every launch and
  given to the prepared launch (OFF-15): a float variable changing between launches (a
  Runge-Kutta stage's coefficients) costs no check and no preparing.

The device residency (which arrays are copied in, zeroed, write-discarded, brought back) is
decided at every launch from the arrays' states, as before (OFF-3, OFF-4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from sarek_py.analysis.effects import launch_host_reads
from sarek_py.host.expr_memo import Input, memo_inputs, memo_key
from sarek_py.host.frame import Frame
from sarek_py.ir.host.launch import Launch, is_symbolic
from sarek_py.ir.host.program import HostError
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Expr, Ref, Var
from sarek_py.runtime.base import Backend, DeviceBuffer, LaunchError, scalar_value
from sarek_py.runtime.cache import kernel_facts
from sarek_py.runtime.prepared import PreparedLaunch


class Residency(Protocol):
    """What a launch site asks of the device residency (``host.residency.Residency``, which
    imports this module): its backend, its entries by host array and their bookkeeping."""

    backend: Backend
    check_races: bool
    entries: dict[int, Any]

    def entry(self, arr: np.ndarray[Any, Any]) -> Any: ...

    def was_zero(self, arr: np.ndarray[Any, Any]) -> bool: ...

    def host_needs(self, arr: Any, name: str, write: bool, loc: Any) -> None: ...

    def add_stop(self, s: Launch, status: DeviceBuffer, threads: int) -> None: ...


class SiteShape:
    """What a launch statement's launches share whatever the values (found once per
    statement object, the IR being immutable): its arguments sorted by kind, the arrays
    the host reads to start it, and the inputs of its key (OFF-13)."""

    def __init__(self, s: Launch) -> None:
        k = s.kernel
        #: the arrays whose elements the host reads to start it (EFF-6)
        self.host_reads = tuple(sorted(launch_host_reads(s), key=lambda v: v.id))
        facts = kernel_facts(k)
        self.stoppable = facts.can_stop
        scratch = {x.argument for x in s.scratch}
        #: (parameter, argument variable, whether the kernel writes it) per array argument
        self.arrays: list[tuple[str, Var, bool]] = []
        #: (parameter name, type, argument) per integer or bool scalar argument
        self.keyed: list[tuple[str, Any, Expr]] = []
        #: (parameter name, type, its numpy scalar type, argument) per float scalar argument
        self.floats: list[tuple[str, Any, Any, Expr]] = []
        self.scratch: list[tuple[int, str, Any]] = []
        threads, block, args = s.host_exprs()  # a host program's launch (LCH-1)
        grid, bshape = s.host_shape()
        self.threads, self.block, self.grid, self.block_shape = threads, block, grid, bshape
        #: the dynamic shared extent (LCH-51), an expression of the host
        self.shared: Expr | None = None
        if s.shared is not None:
            assert is_symbolic(s.shared), "a host program's launch has host expressions"
            self.shared = s.shared
        for pos, (p, a) in enumerate(zip(k.params, args, strict=True)):
            if pos in scratch:
                self.scratch.append((pos, p.name, p.scalar.dtype))
            elif p.is_array:
                assert isinstance(a, Ref)
                self.arrays.append((p.name, a.var, p.name in facts.written))
            elif p.scalar.is_float:
                self.floats.append((p.name, p.scalar, p.scalar.dtype.type, a))
            else:
                self.keyed.append((p.name, p.scalar, a))
        self.float_names = tuple(f[0] for f in self.floats)
        exprs = [threads, block, *grid, *bshape, *s.overwritten_if,
                 *(x.size for x in s.scratch), *(a for _n, _t, a in self.keyed)]
        if self.shared is not None:
            exprs.append(self.shared)
        #: the key's inputs (OFF-13); None: evaluated and checked at every launch
        self.inputs: tuple[Input, ...] | None = memo_inputs(exprs)


#: what a frame's dict gives for a variable it does not hold
_MISSING = object()

_SHAPES: IdentityCache[Launch, SiteShape] = IdentityCache(SiteShape, 4096)


class LaunchSite:
    """What one launch statement keeps between its launches in one run (OFF-13 … OFF-15)."""

    def __init__(self, s: Launch) -> None:
        self.stmt = s
        self.shape = shape = _SHAPES.get(s)
        self.host_reads = shape.host_reads
        self.stoppable = shape.stoppable
        self.arrays, self.keyed, self.floats = shape.arrays, shape.keyed, shape.floats
        self.scratch, self.float_names = shape.scratch, shape.float_names
        self.inputs = shape.inputs
        self.last_key: tuple[Any, ...] | None = None
        self.values: tuple[Any, ...] = ()
        #: the backend's prepared launch for the current key (OFF-14)
        self.prepared: PreparedLaunch | None = None
        #: launches prepared, and launches run prepared without a check (for tests)
        self.prepares = 0
        self.reuses = 0

    def _evaluate(self, evaluate: Callable[..., Any], f: Frame) -> tuple[Any, ...]:
        s = self.stmt
        k = s.kernel
        e = self.shape
        threads = int(evaluate(e.threads, f))
        block = int(evaluate(e.block, f))
        grid = tuple(int(evaluate(x, f)) for x in e.grid) or None  # n-D (LCH-28)
        shared = None if e.shared is None else int(evaluate(e.shared, f))  # LCH-51
        bshape = tuple(int(evaluate(x, f)) for x in e.block_shape) or None
        conds = tuple(bool(evaluate(c, f)) for c in s.overwritten_if)
        scratch = tuple(int(evaluate(x.size, f)) for x in s.scratch)
        keyed = tuple((name, scalar_value(t, evaluate(a, f),
                                          f"launch of {k.name}: argument {name}"))
                      for name, t, a in self.keyed)
        return threads, block, grid, shared, bshape, conds, scratch, keyed

    def launch(self, res: Residency, evaluate: Callable[..., Any], f: Frame) -> None:
        """Start the statement's launch (OFF-3, OFF-4, OFF-13 … OFF-15): ``evaluate(expr,
        frame)`` gives the value of a host expression."""
        s = self.stmt
        k = s.kernel
        backend = res.backend
        for v in self.host_reads:  # its bounds and scalar arguments (EFF-6, OFF-7)
            try:
                arr = f.get_var(v)
            except HostError:
                continue
            res.host_needs(arr, v.name, False, s.loc)
        key = None if self.inputs is None else memo_key(self.inputs, f)
        if key is None or key != self.last_key:
            self.prepared = None
            self.values = self._evaluate(evaluate, f)
            self.last_key = key
        threads, block, grid, shared, bshape, conds, scratch, keyed = self.values
        discard = {id(f.get_var(v)) for v, c in zip(s.overwritten, conds, strict=True)
                   if c} if conds else ()
        touched: list[Any] = []
        buffers: list[DeviceBuffer] = []
        entries = res.entries
        own = f.own  # a frame's own variables first, as Frame.get_var looks them up
        for _name, var, written in self.arrays:
            arr = own.get(var, _MISSING)
            if arr is _MISSING:
                arr = f.get_var(var)
            if not isinstance(arr, np.ndarray):
                raise HostError(f"launch of {k.name}: array '{var.name}' is not "
                                "allocated", s.loc)
            e = entries.get(id(arr))
            if e is None:
                e = res.entry(arr)
            if not e.dev_valid:
                zero = res.was_zero(arr)
                if e.in_place:  # the device buffer is the array's memory (OFF-16)
                    pass
                elif id(arr) in discard and not e.pending_write:
                    backend.stats.bytes_discarded += arr.nbytes
                elif zero:
                    backend.fill(e.dev, 0)
                    backend.stats.bytes_zeroed += arr.nbytes
                else:
                    backend.copy_in(e.dev, np.ascontiguousarray(arr))
                e.dev_valid = True
            buffers.append(e.dev)
            if written:
                touched.append(e)
        floats: list[Any] = []
        for name, t, np_type, a in self.floats:
            if isinstance(a, Ref):
                val = own.get(a.var, _MISSING)
                if val is _MISSING:
                    val = f.get_var(a.var)
            else:
                val = evaluate(a, f)
            if type(val) is not np_type:  # the same numpy scalar passes as it is
                val = scalar_value(t, val, f"launch of {k.name}: argument {name}")
            floats.append(val)
        status = None
        if self.stoppable and threads > 0:
            status = backend.allocate((threads,), np.int32)
            backend.copy_in(status, np.zeros(threads, np.int32))
            assert s.stop_status is not None
            res.add_stop(s, status, threads)
        try:
            prepared = self.prepared
            if prepared is not None and prepared.holds(buffers):
                self.reuses += 1
                prepared.run(floats, status)
            else:
                self._start(res, key, buffers, floats, status)
        except LaunchError as err:  # a launch the backend refuses: located at the statement
            err.loc = err.loc or s.loc
            raise
        for e in touched:
            e.host_valid = False
            e.pending_write = True

    def _start(self, res: Residency, key: tuple[Any, ...] | None,
               buffers: list[DeviceBuffer], floats: list[Any],
               status: DeviceBuffer | None) -> None:
        """A launch not prepared for these values: checked in full, and prepared for the
        next ones where it can be (a key, no scratch buffer, OFF-14)."""
        k = self.stmt.kernel
        backend = res.backend
        threads, block, grid, shared, bshape, _conds, scratch, keyed = self.values
        args: dict[str, DeviceBuffer | np.generic] = dict(keyed)
        for (_pos, name, dtype), n in zip(self.scratch, scratch, strict=True):
            args[name] = backend.allocate((n,), dtype)
        for (name, _var, _w), b in zip(self.arrays, buffers, strict=True):
            args[name] = b
        for name, v in zip(self.float_names, floats, strict=True):
            args[name] = v
        if (key is None or self.scratch or "launch" in vars(backend)
                or type(backend).launch is not Backend.launch):
            # no key, scratch buffers made per launch, or a launch method replaced on the
            # backend object or its class (a recorder, a test's spy, which sees every
            # launch): OFF-14
            backend.launch(k, args, threads, block, status, check_races=res.check_races,
                           grid=grid, block_shape=bshape, shared=shared)
            return
        prepared = backend.prepare_launch(k, args, threads, block, check_races=res.check_races,
                                          grid=grid, block_shape=bshape, shared=shared)
        self.prepares += 1
        if prepared is None:  # no thread to run
            return
        if prepared.volatile == self.float_names:  # OFF-15
            self.prepared = prepared
        prepared.run([args[n] for n in prepared.volatile], status)


__all__ = ["LaunchSite"]
