"""The interface every runtime implements: allocate, copy in, launch, sync, read back
(specs/launch.md, LCH-8 … LCH-14).

A backend owns device memory (:class:`DeviceBuffer`) and runs kernels on it. Launches do not
wait; :meth:`Backend.sync` does. :meth:`Backend.run_kernel` is the whole round trip with the
interpreter's signature: the numpy arrays passed are copied in, the kernel runs, and the
arrays the kernel may store are copied back into them (updated in place).

Write-discard: an array named in ``overwritten`` is not copied in (the kernel assigns every
element before reading any) unless another array argument overlaps it; its device buffer
is filled with a poison byte instead, so a kernel that wrongly reads it shows garbage.
Every copy is counted in :class:`TransferStats`, so the saving is observable.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Collection, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Union

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.bool_bytes import bool_args_fault
from sarek_py.ir.diagnostics import LaunchError as LaunchError
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.dynamic_shared import dynamic_extent
from sarek_py.ir.effects import kernel_may_stop, kernel_writes
from sarek_py.ir.launch_axes import check_launch_axes
from sarek_py.ir.nodes import Kernel, Var
from sarek_py.ir.requires_check import check_requires
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.runtime.cache import kernel_facts
from sarek_py.runtime.prepared import PreparedLaunch

if TYPE_CHECKING:
    from sarek_py.runtime.limits import DeviceLimits
    from sarek_py.runtime.shape import LaunchShape

#: the byte a discarded (not copied-in) or scratch buffer is filled with
POISON_BYTE = 0xA5

HostValue = Union[NDArray[Any], int, float, bool, np.generic, "DeviceArrayBase"]  # noqa: UP007



@attrs.define
class TransferStats:
    """What a backend has moved: bytes copied in and out, bytes *not* copied in thanks to
    write-discard, bytes set to zero on the device instead of copied in (LCH-19), device
    bytes allocated, launches made; and what it has prepared (LCH-17): kernel sources
    emitted and programs built (loaded) for launches. ``bytes_mapped`` counts the bytes of
    numpy arrays a launch used in place, in memory the device shares with the host: no
    copy in or out (LCH-67). ``launches_proved`` counts the launches that ran the unchecked
    build because they were proved in bounds (CG-72)."""

    bytes_in: int = 0
    bytes_out: int = 0
    bytes_discarded: int = 0
    bytes_zeroed: int = 0
    bytes_allocated: int = 0
    launches: int = 0
    emits: int = 0
    builds: int = 0
    bytes_mapped: int = 0
    launches_proved: int = 0

    def reset(self) -> None:
        self.bytes_in = self.bytes_out = self.bytes_discarded = self.bytes_zeroed = 0
        self.bytes_mapped = self.launches_proved = 0
        self.bytes_allocated = self.launches = self.emits = self.builds = 0


@attrs.define(eq=False)
class DeviceBuffer:
    """A buffer of device memory holding an array of ``shape`` and ``dtype``."""

    handle: Any
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


class DeviceArrayBase(abc.ABC):
    """What a launch needs of a device array (LCH-60 …): the backend object it belongs to,
    its buffer, the identity of its memory (LCH-64) and the foreign object whose memory it
    uses in place, if any (LCH-70). The user's class is
    :class:`sarek_py.runtime.arrays.DeviceArray`, which implements this one."""

    __slots__ = ()

    @property
    @abc.abstractmethod
    def runtime(self) -> Backend: ...

    @property
    @abc.abstractmethod
    def buffer(self) -> DeviceBuffer: ...

    @property
    @abc.abstractmethod
    def owner(self) -> Any:
        """The foreign object whose memory this is (kept alive), or ``None``."""

    @property
    def backend(self) -> str:
        """The name of the backend (``interp``, ``opencl``, ``cuda``, ``c``)."""
        return self.runtime.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.buffer.dtype

    @property
    def ndim(self) -> int:
        return len(self.buffer.shape)

    @property
    def buffer_id(self) -> Hashable:
        """The identity of the memory: two device arrays with the same ``buffer_id`` are
        the same buffer (one may be a foreign array's memory used in place, LCH-64)."""
        return (self.runtime.name, id(self.runtime), self.runtime.buffer_id(self.buffer.handle))


@attrs.frozen(eq=False)
class RunResult:
    """What :meth:`Backend.run_kernel` returns: the stop code each launched thread reached
    (0: did not stop), and the arrays read back from scratch buffers."""

    stop_codes: NDArray[np.int32]
    read_back: Mapping[str, NDArray[Any]] = attrs.field(factory=dict)


def can_stop(kernel: Kernel) -> bool:
    """Whether the kernel (or a helper it has) may run a ``stop`` (the effect summary,
    EFF-3)."""
    return kernel_may_stop(kernel)


def written_arrays(kernel: Kernel) -> frozenset[str]:
    """The array parameters the kernel may store into: stored directly, or passed to a
    helper that stores into one of its own array parameters (EFF-3)."""
    return kernel_writes(kernel)


def check_args(kernel: Kernel, args: Mapping[str, Any]) -> dict[str, HostValue]:
    """The arguments by parameter name, checked against the parameters' types: arrays of
    the element dtype and rank, scalars converted to the parameter's numpy type."""
    out: dict[str, HostValue] = {}
    for p in kernel.params:
        if p.name not in args:
            raise LaunchError(f"kernel {kernel.name}: no argument for parameter {p.name}")
        v = args[p.name]
        if isinstance(p.type, ArrayType):
            want = p.type.elem.dtype
            if not isinstance(v, np.ndarray | DeviceArrayBase):
                raise LaunchError(f"kernel {kernel.name}: argument {p.name} must be a numpy "
                                  f"array or a device array of {want}, not "
                                  f"{type(v).__name__}")
            if v.dtype != want or v.ndim != p.type.rank:
                raise LaunchError(
                    f"kernel {kernel.name}: argument {p.name} must be a {p.type.rank}-d array "
                    f"of {want}, not a {v.ndim}-d array of {v.dtype}")
            for d, (n, c) in enumerate(zip(v.shape, p.type.shape, strict=True)):
                if c is not None and n != c:
                    raise LaunchError(f"kernel {kernel.name}: argument {p.name} has extent {n} "
                                      f"in dimension {d}, the parameter says {c}")
                if n > 2**31 - 1:
                    raise LaunchError(f"kernel {kernel.name}: argument {p.name} has extent {n} "
                                      f"in dimension {d}, more than an i32 length can hold")
            out[p.name] = v
        else:
            if isinstance(v, np.ndarray | DeviceArrayBase):
                raise LaunchError(f"kernel {kernel.name}: argument {p.name} must be a scalar")
            out[p.name] = scalar_value(p.scalar, v, f"kernel {kernel.name}: argument {p.name}")
    extra = set(args) - {p.name for p in kernel.params}
    if extra:
        raise LaunchError(f"kernel {kernel.name} has no parameter {sorted(extra)[0]}")
    return out


_INT_RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}


def scalar_value(t: Scalar, v: Any, what: str) -> np.generic:
    """``v`` as a numpy scalar of type ``t``, refusing values the type cannot hold."""
    if t.is_int:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise LaunchError(f"{what} must be an integer ({t}), not {v!r}")
        lo, hi = _INT_RANGE[t]
        if not lo <= int(v) <= hi:
            raise LaunchError(f"{what}: {v} does not fit {t}")
        return t.dtype.type(int(v))
    if t.is_float:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            raise LaunchError(f"{what} must be a number ({t}), not {v!r}")
        return t.dtype.type(v)
    if t is Scalar.BOOL:
        if not isinstance(v, (bool, np.bool_)):
            raise LaunchError(f"{what} must be a bool, not {v!r}")
        return np.bool_(v)
    raise LaunchError(f"{what}: a parameter of type {t} cannot be passed")


def _same_view(a: NDArray[Any], b: NDArray[Any]) -> bool:
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)


@attrs.frozen(eq=False)
class Pending:
    """A launch started by :meth:`Backend.start` and not finished yet."""

    kernel: Kernel
    threads: int
    dev_args: Mapping[str, DeviceBuffer | np.generic]
    hosts: tuple[tuple[NDArray[Any], DeviceBuffer], ...]
    written: frozenset[str]
    status: DeviceBuffer | None
    read_back: Mapping[str, int]
    shape: LaunchShape | None = None
    shared: int | None = None
    #: numpy arrays used in place (LCH-67) and their buffers: made visible to the host
    #: again at :meth:`Backend.finish`, never copied
    mapped: tuple[tuple[NDArray[Any], DeviceBuffer], ...] = ()


class Backend(abc.ABC):
    """A place to run kernels. Subclasses implement the primitives; the round trip
    (:meth:`run_kernel`) is shared, so every backend copies, discards and counts alike."""

    name: str = "?"
    #: whether a kernel with a barrier needs a whole number of blocks (real devices do)
    whole_blocks_for_barriers = True
    #: whether a host program's arrays may be their own device buffers from launch to
    #: launch (OFF-16): device memory is host memory and a launch has finished when it
    #: returns; the residency then asks :meth:`use_host` for each array
    host_arrays_in_place = False
    #: whether a host program's loops of one dimension run faster as rows kernels (OFF-17,
    #: TIL-15) than as flat launches: the backend that runs the program offloads them so
    rows_1d = False

    def __init__(self) -> None:
        self.stats = TransferStats()
        #: fill discarded and scratch buffers with POISON_BYTE (tests rely on it)
        self.poison = True
        #: bounds-check every device access (CG-22); False is the benchmarks' opt-out
        self.checked = True
        #: run the unchecked build of a launch proved in bounds (CG-72); False keeps the
        #: checked build for every launch (tests and benchmarks compare the two)
        self.prove_launches = True

    def device_limits(self) -> DeviceLimits | None:
        """The device's launch limits (LCH-21); ``None`` where the backend knows none."""
        return None

    def check_limits(self, kernel: Kernel, threads: Any, block: Any,
                     shared: int | None = None) -> tuple[int, int]:
        """``(threads, block)`` checked against every launch's and the device's limits
        before anything is allocated or launched (LCH-21); ``shared`` is the dynamic
        shared extent in elements, counted with the static shared arrays (LCH-52)."""
        from sarek_py.runtime.limits import check_limits

        return check_limits(kernel, threads, block, self.device_limits(), shared)

    # ---------------------------------------------------------------- primitives

    @abc.abstractmethod
    def _alloc(self, nbytes: int) -> Any: ...

    @abc.abstractmethod
    def _write(self, handle: Any, host: NDArray[Any]) -> None: ...

    @abc.abstractmethod
    def _read(self, handle: Any, host: NDArray[Any]) -> None:
        """Copy the leading ``host.nbytes`` bytes of the buffer into contiguous ``host``."""

    @abc.abstractmethod
    def _fill(self, handle: Any, nbytes: int, byte: int) -> None: ...

    @abc.abstractmethod
    def _launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                threads: int, block: int, status: DeviceBuffer | None,
                check_races: bool, shape: LaunchShape | None = None,
                shared: int | None = None) -> None:
        """Start the threads; ``shape`` is the grid and block of a launch given in
        several dimensions (LCH-27), ``None`` for ``threads`` in blocks of ``block``;
        ``shared`` the extent in elements of the kernel's dynamic shared array (LCH-50)."""

    def launch_checked(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                       threads: int, block: int, shape: LaunchShape | None = None,
                       shared: int | None = None) -> bool:
        """Whether this launch runs the kernel's checked build (CG-22, CG-72): checks are on
        and the launch is not proved in bounds from its own arguments and shape (CG-70).
        A backend's ``_launch`` asks this for its build; a proved launch is counted in
        ``stats.launches_proved`` and needs no fault buffer."""
        if not self.checked:
            return False
        if not self.prove_launches:
            return True
        from sarek_py.runtime.launch_proof import proved_in_bounds

        if proved_in_bounds(kernel, args, threads, block, shape, shared):
            self.stats.launches_proved += 1
            return False
        return True

    def launch_shape(self, kernel: Kernel, threads: int, block: int, grid: Any,
                     block_shape: Any, shared: int | None = None
                     ) -> tuple[int, int, LaunchShape | None]:
        """``(threads, block size, shape)`` checked against every launch's and the
        device's limits (LCH-21, LCH-27, LCH-52) and against the axes the kernel reads
        (LCH-26); the shape is ``None`` for a launch given by ``threads`` and ``block``
        alone."""
        if grid is None and block_shape is None:
            threads, block = self.check_limits(kernel, threads, block, shared)  # LCH-21
            check_launch_axes(kernel, None, (block,), threads)  # LCH-26
            return threads, block, None
        from sarek_py.runtime.shape import launch_shape

        threads = self.check_limits(kernel, threads, 1, shared)[0]
        shape = launch_shape(kernel, threads, block, grid, block_shape, self.device_limits())
        threads, block = self.check_limits(kernel, threads, shape.block_size, shared)
        check_launch_axes(kernel, shape.grid, shape.block)  # LCH-26
        return threads, block, shape

    @abc.abstractmethod
    def sync(self) -> None:
        """Wait until every launch made so far has finished."""

    # ------------------------------------------------- device arrays, zero copy

    def buffer_id(self, handle: Any) -> Hashable:
        """The identity of the memory of a buffer handle: equal for two handles of the
        same memory (LCH-64). By object here; backends whose handles are wrappers say
        better."""
        return id(handle)

    def host_zeros(self, shape: tuple[int, ...], dtype: Any) -> NDArray[Any]:
        """A new host array of zeros for a host program's ``allocate`` (HP-13): plain
        ``np.zeros`` here; a backend whose kernels use host arrays in place maps large
        ones on huge pages (NAT-78)."""
        return np.zeros(shape, dtype)

    def use_host(self, host: NDArray[Any]) -> Any:
        """A buffer handle that uses the numpy array ``host``'s memory in place for a
        launch, or ``None`` when it must be copied (LCH-67): the device shares memory with
        the host, and ``host`` is contiguous, writable and aligned as the device needs.
        None here: a backend that can overrides it."""
        return None

    def release_host(self, handle: Any, host: NDArray[Any], written: bool) -> None:
        """After the launch: make what the kernel wrote into ``host``'s memory, used in
        place through ``handle`` (:meth:`use_host`), visible to the host. Nothing here:
        no backend lends a host array unless it overrides both."""
        return None

    def export_array(self, array: DeviceArrayBase, name: str) -> Any:
        """The interop attribute ``name`` of a device array of this backend (``cl_array``,
        ``__cuda_array_interface__``, ``__dlpack__``, ``__dlpack_device__``, LCH-71,
        LCH-74); an ``AttributeError`` saying so where this backend has none."""
        raise AttributeError(f"a device array of the {self.name} backend has no {name}")

    def shares_arrays(self, other: Backend) -> bool:
        """Whether a device array of the backend object ``other`` (not this one) is one
        of this backend's too (NAT-43: ``c`` and the default that picks ``c``). No here."""
        return False

    def acquire(self, array: DeviceArrayBase) -> None:
        """Before a launch reads ``array``: wait for work on it that this backend's own
        queue does not order (a foreign array's queue, LCH-70). Nothing here."""
        return None

    def _device_arg(self, kernel: Kernel, name: str, v: DeviceArrayBase,
                    seen: dict[Hashable, DeviceArrayBase]) -> DeviceBuffer:
        """The buffer of the device array ``v`` passed for ``name``: on this backend
        (LCH-63), the same buffer twice bound once, a partial overlap refused (LCH-64)."""
        if v.runtime is not self and not self.shares_arrays(v.runtime):
            other = (f"the {v.backend} backend" if v.backend != self.name
                     else f"another {v.backend} backend object")
            raise LaunchError(
                f"kernel {kernel.name}: argument {name} is a device array of {other}, but "
                f"this launch runs on the {self.name} backend: copy it with "
                f"sarek_py.to_device({name}.get(), backend={self.name!r}) (LCH-63)")
        key = v.buffer_id
        prior = seen.get(key)
        if prior is not None:
            if prior.shape != v.shape or prior.dtype != v.dtype:
                raise LaunchError(f"kernel {kernel.name}: array argument {name} overlaps "
                                  "another argument without being the same array (LCH-64)")
            return prior.buffer
        seen[key] = v
        self.acquire(v)
        return v.buffer

    # ------------------------------------------------------------------- interface

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype[Any] | type) -> DeviceBuffer:
        dt = np.dtype(dtype)
        arr = DeviceBuffer(None, tuple(int(n) for n in shape), dt)
        try:
            arr.handle = self._alloc(arr.nbytes)
        except LaunchError:
            raise
        except Exception as exc:  # the device's own words, in one sentence (LCH-60)
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LaunchError(f"cannot allocate {arr.nbytes} bytes ({dt}{list(arr.shape)}) on "
                              f"the {self.name} backend: {why}") from None
        self.stats.bytes_allocated += arr.nbytes
        return arr

    def copy_in(self, dev: DeviceBuffer, host: NDArray[Any]) -> None:
        """Copy the host array into the device buffer (same shape and dtype)."""
        if host.shape != dev.shape or host.dtype != dev.dtype:
            raise LaunchError(f"copy of a {host.dtype}{list(host.shape)} array into a "
                              f"{dev.dtype}{list(dev.shape)} buffer")
        if host.nbytes:
            self._write(dev.handle, self._staged(host, lambda: np.ascontiguousarray(host)))
        self.stats.bytes_in += host.nbytes

    def _staged(self, host: NDArray[Any], make: Callable[[], NDArray[Any]]
                ) -> NDArray[Any]:
        """``make()``, the contiguous copy of a strided ``host`` array a transfer goes
        through; one sentence where memory cannot hold it (NAT-77)."""
        try:
            return make()
        except MemoryError as exc:
            raise LaunchError(f"cannot copy a {host.dtype}{list(host.shape)} array "
                              f"({host.nbytes} bytes) through host memory for the "
                              f"{self.name} backend: {exc}") from None

    def copy_out(self, dev: DeviceBuffer, host: NDArray[Any], count: int | None = None) -> None:
        """Copy the buffer into ``host`` (its leading ``count`` elements when given)."""
        n = dev.size if count is None else count
        if host.dtype != dev.dtype or host.size != n or n > dev.size:
            raise LaunchError(f"read back of {n} elements of a {dev.dtype} buffer of "
                              f"{dev.size} into a {host.dtype} array of {host.size}")
        if n:
            if host.flags.c_contiguous:
                self._read(dev.handle, host)
            else:
                tmp = self._staged(host, lambda: np.empty(host.shape, host.dtype))
                self._read(dev.handle, tmp)
                host[...] = tmp
        self.stats.bytes_out += n * host.dtype.itemsize

    def fill(self, dev: DeviceBuffer, byte: int) -> None:
        if dev.nbytes:
            self._fill(dev.handle, dev.nbytes, byte)

    def launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
               threads: int, block: int = 256, status: DeviceBuffer | None = None, *,
               check_races: bool = True, grid: Any = None, block_shape: Any = None,
               shared: Any = None) -> None:
        """Start ``threads`` threads in blocks of ``block`` (a count below one runs none);
        returns without waiting. ``status`` is the stop-status buffer (one int32 per thread)
        of a kernel that can stop. ``grid``/``block_shape`` (1 to 3 extents each) give a
        launch of several dimensions (LCH-27); ``block_shape`` then replaces ``block``.
        ``shared`` is the extent in *elements* of the kernel's dynamic shared array
        (``shared s : T[]``): required for such a kernel, refused for others (LCH-50)."""
        checked = self.launch_checks(kernel, args, threads, block, grid, block_shape, shared)
        if checked is None:
            return
        threads, block, shape, shared = checked
        self.stats.launches += 1
        self._launch(kernel, args, threads, block, status, check_races, shape, shared)

    def launch_checks(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                      threads: int, block: int, grid: Any, block_shape: Any, shared: Any
                      ) -> tuple[int, int, LaunchShape | None, int | None] | None:
        """Every check :meth:`launch` makes before it runs anything (LCH-50, LCH-21,
        LCH-26, LEG-14, LCH-25, LCH-6): the launch's ``(threads, block, shape, shared)``,
        or ``None`` when it runs no thread. :meth:`prepare_launch` makes the same ones."""
        shared = dynamic_extent(kernel, shared)  # LCH-50
        threads, block, shape = self.launch_shape(kernel, threads, block, grid, block_shape,
                                                  shared)
        shaped = None if shape is None else (shape.grid, shape.block)
        check_requires(kernel, args, threads, block, shaped)  # fused kernels (LEG-14)
        if threads < 1:
            return None
        if (self.whole_blocks_for_barriers and threads % block
                and kernel_facts(kernel).has_barrier):
            raise LaunchError(
                f"kernel {kernel.name} has a barrier: its {threads} threads must fill whole "
                f"blocks of {block} on the {self.name} backend (LCH-6)")
        return threads, block, shape, shared

    def prepare_launch(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                       threads: int, block: int = 256, *, check_races: bool = True,
                       grid: Any = None, block_shape: Any = None, shared: Any = None
                       ) -> PreparedLaunch | None:
        """The launch :meth:`launch` would make, checked as it checks it, ready to run
        again and again (NAT-60): ``None`` when it runs no thread. The result holds while
        the values its checks read hold (:class:`~sarek_py.runtime.prepared.
        PreparedLaunch`)."""
        checked = self.launch_checks(kernel, args, threads, block, grid, block_shape, shared)
        if checked is None:
            return None
        threads, block, shape, shared = checked
        return self._prepare(kernel, args, threads, block, shape, shared, check_races)

    def _prepare(self, kernel: Kernel, args: Mapping[str, DeviceBuffer | np.generic],
                 threads: int, block: int, shape: LaunchShape | None, shared: int | None,
                 check_races: bool) -> PreparedLaunch:
        """A checked launch, ready to run (each run through :meth:`_launch`); a backend
        with a faster call overrides it (the c backend's prebuilt C arguments)."""
        return PreparedLaunch(self, kernel, args, threads, block, shape, shared, check_races)

    def run_kernel(
        self,
        kernel: Kernel,
        args: Mapping[str, Any],
        threads: int,
        block: int = 256,
        *,
        check_races: bool = True,
        overwritten: Collection[str] = (),
        scratch: Mapping[str, int] | None = None,
        read_back: Mapping[str, int] | None = None,
        grid: Any = None,
        block_shape: Any = None,
        shared: Any = None,
    ) -> RunResult:
        """Run ``kernel`` once, with the interpreter's semantics: arrays are copied in, the
        arrays the kernel may store are copied back into the caller's arrays (start, sync,
        finish). The keywords are those of :meth:`start`."""
        try:
            pending = self.start(kernel, args, threads, block, check_races=check_races,
                                 overwritten=overwritten, scratch=scratch,
                                 read_back=read_back, grid=grid, block_shape=block_shape,
                                 shared=shared)
            self.sync()
        except SarekError as err:  # a fused kernel's error in the user's names (FE-90)
            if kernel.requires is not None:
                from sarek_py.runtime.fused_errors import in_user_terms
                in_user_terms(err, (kernel,), args)
            raise
        return self.finish(pending)

    def start(
        self,
        kernel: Kernel,
        args: Mapping[str, Any],
        threads: int,
        block: int = 256,
        *,
        check_races: bool = True,
        overwritten: Collection[str] = (),
        scratch: Mapping[str, int] | None = None,
        read_back: Mapping[str, int] | None = None,
        grid: Any = None,
        block_shape: Any = None,
        shared: Any = None,
    ) -> Pending:
        """Copy in and launch, without waiting; :meth:`finish` after a :meth:`sync`.

        ``overwritten`` names arrays the kernel assigns whole before reading (write-discard,
        LCH-10); ``scratch`` maps a rank-1 array parameter to the number of elements of a
        device-only buffer passed for it (LCH-11) — no host array is given for it — and
        ``read_back`` to the number of leading elements to copy back (at most the size).
        ``grid``/``block_shape`` give a launch of several dimensions (LCH-27); ``shared``
        the extent in elements of the kernel's dynamic shared array (LCH-50).
        """
        extent = dynamic_extent(kernel, shared)  # LCH-50, before anything is allocated
        threads, block, shape = self.launch_shape(kernel, threads, block, grid, block_shape,
                                                  extent)
        shaped = None if shape is None else (shape.grid, shape.block)
        scratch = dict(scratch or {})
        read_back = dict(read_back or {})
        for name in read_back:
            if name not in scratch:
                raise LaunchError(f"read_back names {name}, which is not a scratch buffer")
        host_args = dict(args)
        for name, size in scratch.items():
            p = _param(kernel, name)
            if not isinstance(p.type, ArrayType) or p.type.rank != 1:
                raise LaunchError(f"scratch buffer {name} must be a rank-1 array parameter")
            if name in host_args:
                raise LaunchError(f"scratch buffer {name} is device-only: pass no host array")
            if size < 0 or read_back.get(name, 0) > size or read_back.get(name, 0) < 0:
                raise LaunchError(f"scratch buffer {name}: read_back {read_back.get(name)} "
                                  f"must lie in 0..{size}")
            host_args[name] = np.empty(size, p.type.elem.dtype)  # placeholder for the check
        checked = check_args(kernel, host_args)
        bad_bool = bool_args_fault(kernel, checked, (overwritten, scratch))
        if bad_bool is not None:  # NAT-70: read alike on every backend, or refused
            raise LaunchError(bad_bool)
        check_requires(kernel, checked, threads, block, shaped)  # before copies (LEG-14)
        for name in overwritten:
            p = _param(kernel, name)
            if not isinstance(p.type, ArrayType):
                raise LaunchError(f"overwritten names {name}, which is not an array")
        facts = kernel_facts(kernel)
        written = facts.written
        dev_args: dict[str, DeviceBuffer | np.generic] = {}
        hosts: list[tuple[NDArray[Any], DeviceBuffer]] = []
        mapped: list[tuple[NDArray[Any], DeviceBuffer]] = []
        devices: dict[Hashable, DeviceArrayBase] = {}
        arrays = {n: v for n, v in checked.items() if isinstance(v, np.ndarray)
                  and n not in scratch}
        for name, v in checked.items():
            if isinstance(v, DeviceArrayBase):  # its buffer, no copy (LCH-62)
                dev_args[name] = self._device_arg(kernel, name, v, devices)
                continue
            if not isinstance(v, np.ndarray):
                assert isinstance(v, np.generic)
                dev_args[name] = v
                continue
            if name in scratch:
                dev = self.allocate(v.shape, v.dtype)
                if self.poison:
                    self.fill(dev, POISON_BYTE)
                dev_args[name] = dev
                continue
            shared = next((d for h, d in hosts + mapped if _same_view(h, v)), None)
            if shared is not None:  # the same array passed twice: one buffer, as on the host
                dev_args[name] = shared
                continue
            others = [o for n, o in arrays.items() if n != name and not _same_view(o, v)]
            if any(np.shares_memory(v, o) for o in others):
                raise LaunchError(f"kernel {kernel.name}: array argument {name} overlaps "
                                  "another argument without being the same array")
            in_place = self.use_host(v)
            if in_place is not None:  # the host's memory itself (LCH-67)
                dev = DeviceBuffer(in_place, v.shape, v.dtype)
                self.stats.bytes_mapped += v.nbytes
                dev_args[name] = dev
                mapped.append((v, dev))
                continue
            dev = self.allocate(v.shape, v.dtype)
            aliased = any(_same_view(o, v) for n, o in arrays.items() if n != name)
            if name in overwritten and not aliased:
                self.stats.bytes_discarded += v.nbytes
                if self.poison:
                    self.fill(dev, POISON_BYTE)
            else:
                self.copy_in(dev, v)
            dev_args[name] = dev
            hosts.append((v, dev))
        status = None
        if facts.can_stop and threads > 0:
            status = self.allocate((threads,), np.int32)
            self.copy_in(status, np.zeros(threads, np.int32))
        self.launch(kernel, dev_args, threads, block, status, check_races=check_races,
                    grid=None if shape is None else shape.grid,
                    block_shape=None if shape is None else shape.block, shared=extent)
        return Pending(kernel, threads, dev_args, tuple(hosts), written, status, read_back,
                       shape, extent, tuple(mapped))

    def finish(self, pending: Pending) -> RunResult:
        """After a :meth:`sync`: copy the arrays the kernel may have stored back into the
        host arrays, the status buffer into the stop codes, and the scratch read-backs
        into new arrays."""
        for host, dev in pending.hosts:
            names = [n for n, d in pending.dev_args.items() if d is dev]
            if any(n in pending.written for n in names):
                self.copy_out(dev, host)
        for host, dev in pending.mapped:
            names = [n for n, d in pending.dev_args.items() if d is dev]
            self.release_host(dev.handle, host, any(n in pending.written for n in names))
        codes = np.zeros(max(pending.threads, 0), np.int32)
        if pending.status is not None:
            self.copy_out(pending.status, codes)
        backs: dict[str, NDArray[Any]] = {}
        for name, count in pending.read_back.items():
            buf = pending.dev_args[name]
            assert isinstance(buf, DeviceBuffer)
            out = np.empty(count, buf.dtype)
            self.copy_out(buf, out, count)
            backs[name] = out
        return RunResult(codes, backs)


def _param(kernel: Kernel, name: str) -> Var:
    try:
        return kernel.param(name)
    except KeyError:
        raise LaunchError(f"kernel {kernel.name} has no parameter {name}") from None
