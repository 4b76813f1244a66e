"""The reference interpreter: the semantic oracle of every backend (specs/interpreter.md).

:func:`run_kernel` launches a kernel on numpy arrays, with C semantics and IEEE rounding
per operation, and reports every undefined behaviour it can see -- out-of-bounds accesses,
data races, divergent barriers, integer division by zero, bad shifts and casts, reads of
uninitialised shared memory -- as an :class:`~sarek_py.ir.diagnostics.InterpError` naming the
kernel, the thread and, for memory, the array and the index.

The work is vectorised over the threads (:mod:`sarek_py.ir.interp_exec`); this module
checks the arguments and the launch shape and sets up the memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.alloc import LANE_BYTES, check_bytes
from sarek_py.ir.atomics import iter_atomics
from sarek_py.ir.bool_bytes import bool_args_fault
from sarek_py.ir.deep import deep
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.dynamic_shared import dynamic_extent, is_dynamic_shared
from sarek_py.ir.interp_exec import LOOP_BUDGET, Frame, Machine
from sarek_py.ir.interp_geometry import Geometry
from sarek_py.ir.interp_memory import ArrayStore, Memory
from sarek_py.ir.interp_ops import Val
from sarek_py.ir.launch_axes import check_launch_axes
from sarek_py.ir.nodes import Call, Kernel, Ref, Stmt, Store, Var, iter_stmts
from sarek_py.ir.requires_check import check_requires
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.ir.visit import iter_exprs

ArgValue = NDArray[np.generic] | int | float | bool | np.generic

_MAX_THREADS = 2**31 - 1


@attrs.frozen(eq=False)
class InterpResult:
    """What a launch leaves besides the arrays it updated in place.

    ``stop_codes[t]`` is the code of the ``stop`` thread ``t`` reached, 0 if none (INT-13).
    When no thread stopped it is a read-only array of zeros.
    """

    stop_codes: NDArray[np.int32]

    @property
    def stopped(self) -> bool:
        """Whether some thread reached a ``stop`` with a non-zero code."""
        return bool(self.stop_codes.any())


@deep
def run_kernel(
    kernel: Kernel,
    args: Mapping[str, ArgValue],
    threads: int,
    block: int = 256,
    *,
    check_races: bool = True,
    grid: tuple[int, ...] | None = None,
    block_shape: tuple[int, ...] | None = None,
    loop_budget: int = LOOP_BUDGET,
    shared: int | None = None,
    bool_bytes: bool = True,
) -> InterpResult:
    """Run ``kernel`` with ``threads`` threads in blocks of ``block`` (INT-1).

    ``args`` maps every parameter name to a value: a numpy array of the parameter's element
    dtype and rank for an array (updated in place), a Python or numpy scalar otherwise.
    ``grid``/``block_shape`` give a launch of up to three dimensions (``x`` fastest); the
    thread ids are still linear, and threads whose id is ``threads`` or more do not exist.
    ``loop_budget`` bounds the loop iterations one launch may run, all loops together: a
    launch that needs more is stopped with an :class:`InterpError` (INT-22), so a loop
    that never ends is reported instead of hanging the caller.
    ``shared`` is the extent in elements of the kernel's dynamic shared array
    (``shared s : T[]``): required for such a kernel, refused for any other (LCH-50);
    each block gets its own, uninitialised, ``shared`` elements (INT-50).
    A bool array the kernel may read holding a byte other than 0 and 1 is refused
    (NAT-70); ``bool_bytes=False`` is the runtime's, which checked its host arrays already.
    """
    if bool_bytes:
        bad_bool = bool_args_fault(kernel, args)
        if bad_bool is not None:
            raise InterpError(bad_bool)
    if kernel.requires is not None or kernel.ranges:  # launch conditions (LEG-14, LCH-25)
        check_requires(kernel, args, threads, block,
                       (grid or (), block_shape or ()) if grid or block_shape else None)
    geo = _geometry(kernel, threads, block, grid, block_shape)
    check_launch_axes(kernel, grid, block_shape or (block,), threads)  # LCH-26
    with np.errstate(all="ignore"):
        frame, shared_stores, writebacks = _bind(kernel, args, geo,
                                                 dynamic_extent(kernel, shared))
        helper_stores = any(_stores(h.body) for h in kernel.helpers)
        memory = Memory(geo, check_races, copy_reads=helper_stores)
        machine = Machine(kernel, geo, memory, frame, shared_stores, loop_budget)
        try:
            codes = machine.run()
        finally:
            for original, work in writebacks:
                original[...] = work.reshape(original.shape)
    return InterpResult(codes)


# ---------------------------------------------------------------------------- launch shape


def _dims(what: str, kernel: Kernel, dims: tuple[int, ...]) -> tuple[int, int, int]:
    if not 1 <= len(dims) <= 3 or any(
        not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not 1 <= d <= _MAX_THREADS
        for d in dims
    ):
        raise InterpError(
            f"kernel {kernel.name}: {what} must be 1 to 3 integers in 1..{_MAX_THREADS} "
            f"(the thread intrinsics are i32), got {dims}"
        )
    full = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    return full[0], full[1], full[2]


def _geometry(
    kernel: Kernel,
    threads: int,
    block: int,
    grid: tuple[int, ...] | None,
    block_shape: tuple[int, ...] | None,
) -> Geometry:
    if isinstance(threads, bool) or not 0 <= threads <= _MAX_THREADS:
        raise InterpError(f"kernel {kernel.name}: thread count {threads} out of range")
    check_bytes(int(threads) * LANE_BYTES, f"kernel {kernel.name}: a launch of {threads} "
                "threads on the interpreter")
    bshape = _dims("the block shape", kernel, block_shape if block_shape else (block,))
    bsize = bshape[0] * bshape[1] * bshape[2]
    if grid is None:
        gshape = (max(1, math.ceil(threads / bsize)), 1, 1)
    else:
        gshape = _dims("the grid", kernel, grid)
        capacity = gshape[0] * gshape[1] * gshape[2] * bsize
        if capacity < threads:
            raise InterpError(
                f"kernel {kernel.name}: a grid of {grid} blocks of {bshape} threads holds "
                f"{capacity} threads, fewer than the {threads} launched"
            )
    return Geometry(threads, bshape, gshape)


# ---------------------------------------------------------------------------- arguments


def _bind(
    kernel: Kernel, args: Mapping[str, ArgValue], geo: Geometry, dynamic: int | None = None
) -> tuple[Frame, list[ArrayStore], list[tuple[NDArray[np.generic], NDArray[np.generic]]]]:
    """The kernel's frame: parameters checked and bound, locals zeroed, shared allocated."""
    names = [p.name for p in kernel.params]
    missing = [n for n in names if n not in args]
    extra = sorted(n for n in args if n not in names)
    if missing:
        raise InterpError(f"kernel {kernel.name}: missing argument(s): {', '.join(missing)}")
    if extra:
        raise InterpError(f"kernel {kernel.name}: unexpected argument(s): {', '.join(extra)}")
    written = _maybe_written(kernel)
    scalars: dict[Var, Val | None] = {}
    arrays: dict[Var, ArrayStore] = {}
    writebacks: list[tuple[NDArray[np.generic], NDArray[np.generic]]] = []
    for p in kernel.params:
        value = args[p.name]
        if isinstance(p.type, ArrayType):
            st, wb = _bind_array(kernel, p, p.type, value, p in written)
            arrays[p] = st
            if wb is not None:
                writebacks.append(wb)
        else:
            scalars[p] = _bind_scalar(kernel, p, p.type, value)
    shared: list[ArrayStore] = []
    for v in kernel.locals:
        t = v.type
        if isinstance(t, Scalar):
            scalars[v] = None if t is Scalar.UNIT else t.dtype.type(0)
            continue
        if is_dynamic_shared(t) and dynamic is not None:  # sized by the launch (INT-50)
            t = attrs.evolve(t, shape=(dynamic,))
        if not t.is_constant_shape:
            raise InterpError(
                f"kernel {kernel.name}: local array '{v.name}' needs constant extents"
            )
        shape = tuple(n for n in t.shape if n is not None)
        inst = geo.nblocks if t.space is MemSpace.SHARED else geo.threads
        # shared arrays also get the race checker's shadows: a writer and a reader
        # thread (int32) and an initialised flag per element
        per = t.elem.dtype.itemsize + (9 if t.space is MemSpace.SHARED else 0)
        check_bytes(inst * t.size * per,
                    f"kernel {kernel.name}: {t.space} array '{v.name}' ({inst} copies of "
                    f"{t.size} elements)", kernel.loc)
        data = np.zeros(inst * t.size, dtype=t.elem.dtype)
        space = MemSpace.SHARED if t.space is MemSpace.SHARED else MemSpace.LOCAL
        st = ArrayStore(v.name, space, t.elem, data, shape, t.lower, instances=inst)
        arrays[v] = st
        if space is MemSpace.SHARED:
            shared.append(st)
    return Frame(scalars, arrays), shared, writebacks


def _bind_array(
    kernel: Kernel, p: Var, t: ArrayType, value: ArgValue, written: bool
) -> tuple[ArrayStore, tuple[NDArray[np.generic], NDArray[np.generic]] | None]:
    where = f"kernel {kernel.name}: argument '{p.name}'"
    if not isinstance(value, np.ndarray):
        raise InterpError(f"{where} must be a numpy array of {t}, got {type(value).__name__}")
    if value.dtype != t.elem.dtype:
        raise InterpError(f"{where} must have dtype {t.elem.dtype} ({t.elem}), got {value.dtype}")
    if value.ndim != t.rank:
        raise InterpError(f"{where} must have rank {t.rank}, got {value.ndim}")
    for k, (n, m) in enumerate(zip(t.shape, value.shape, strict=True)):
        if n is not None and n != m:
            raise InterpError(f"{where}: extent {m} of dimension {k}, the type says {n}")
    if written and not value.flags.writeable:
        raise InterpError(f"{where} is stored to but the array is read-only")
    wb = None
    work = value
    if not value.flags.c_contiguous:
        work = np.ascontiguousarray(value)
        if written:
            wb = (value, work)
    st = ArrayStore(
        p.name, MemSpace.GLOBAL, t.elem, work.reshape(-1), tuple(value.shape), t.lower,
        track_reads=written,
    )
    return st, wb


def _bind_scalar(kernel: Kernel, p: Var, t: Scalar, value: ArgValue) -> Val | None:
    where = f"kernel {kernel.name}: argument '{p.name}' ({t})"
    if t is Scalar.UNIT:
        return None
    if isinstance(value, np.ndarray):
        raise InterpError(f"{where} must be a scalar, got an array")
    is_bool = isinstance(value, (bool, np.bool_))
    if t is Scalar.BOOL:
        if not is_bool:
            raise InterpError(f"{where} must be a bool, got {value!r}")
        return np.bool_(value)
    if is_bool:
        raise InterpError(f"{where} must be a number, got {value!r}")
    if t.is_int:
        if not isinstance(value, (int, np.integer)):
            raise InterpError(f"{where} must be an integer, got {value!r}")
        info = np.iinfo(str(t.dtype))
        if not info.min <= int(value) <= info.max:
            raise InterpError(f"{where}: {value} is out of range")
        iv: Val = t.dtype.type(int(value))
        return iv
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise InterpError(f"{where} must be a number, got {value!r}")
    fv: Val = t.dtype.type(value)
    return fv


def _maybe_written(kernel: Kernel) -> set[Var]:
    """Array parameters the kernel may store to: targets of stores in its body, and every
    array passed to a helper when some helper stores (their reads are race-tracked)."""
    out: set[Var] = set()
    for s in iter_stmts(kernel.body):
        if isinstance(s, Store):
            out.add(s.array)
    out.update(a.array for a in iter_atomics(kernel.body))  # an atomic stores (INT-28)
    if any(_stores(h.body) for h in kernel.helpers):
        for e in iter_exprs(kernel.body):
            if isinstance(e, Call):
                out.update(a.var for a in e.args if isinstance(a, Ref) and a.var.is_array)
    return out


def _stores(body: Stmt) -> bool:
    """Whether ``body`` stores into an array, with a store or an atomic."""
    return any(isinstance(s, Store) for s in iter_stmts(body)) or bool(iter_atomics(body))
