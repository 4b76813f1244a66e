"""The launch record and the sync node, after seed 001's ``GpuKernelLaunch``
(specs/launch.md LCH-1, LCH-23, LCH-24).

A :class:`Launch` starts ``thread_count`` threads of ``kernel`` in blocks of
``block_size`` and does not wait; a :class:`Sync` waits for every launch before it.
:class:`Launch` is the one record of a launch (LCH-24): the host-program IR, the
launch text, ``fuse_launches``, pipelines and the Python API (:func:`KernelLaunch`) all
use it. Its counts and arguments are *symbolic* (IR expressions over host variables,
looked up by name in the host environment by :mod:`sarek_py.host.execute`) or *bound*
(values), field by field:

* ``args`` — one per kernel parameter, in the kernel's order: for an array parameter a
  ``Ref`` of a host array, a buffer name (``str``) or a numpy array; for a scalar
  parameter a scalar expression of the parameter's type or a Python/numpy value
  (:meth:`Launch.by_name` views them by parameter name). Two array arguments are
  compared by identity (the same array object), every other by value;
* ``thread_count`` — an ``i64`` expression (whole tiles can exceed ``i32``) or an
  integer in 0..2**63-1; below one runs no thread; ``block_size`` — an ``i32``
  expression or an integer in 1..2**31-1;
* ``scratch`` — device-only buffers: the argument at ``argument`` gets a buffer of ``size``
  elements that the host neither allocates nor copies; with ``read_back`` the host
  allocates the actual with that many elements after the launch and copies the leading
  elements in, otherwise the actual stays unallocated (``None``);
* ``stop_status``/``stop_replay`` — the host array that receives each thread's stop code,
  and the host ``stop`` statements replayed after the next sync;
* ``overwritten``/``overwritten_if`` — array arguments the kernel assigns whole before
  reading them, when the matching host condition holds: not copied in (write-discard)
  unless another argument overlaps the buffer;
* ``shared`` — the extent, in *elements* (not bytes), of the kernel's dynamic shared
  array (``shared s : f32[]``, IR-50): an integer in 0..2**31-1 or an integer host
  expression; ``None`` exactly for a kernel without one (LCH-50).

A statement of a host program is symbolic throughout (:func:`check_launch`, LCH-1);
:func:`KernelLaunch` is the spelling of a launch by parameter name, bound or symbolic.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable, Mapping
from typing import Any, Protocol, TypeGuard, runtime_checkable

import attrs
import numpy as np

from sarek_py.ir.diagnostics import LaunchError, SarekError
from sarek_py.ir.dynamic_shared import dynamic_shared
from sarek_py.ir.effects import kernel_may_stop as can_stop
from sarek_py.ir.host.evaluate import host_eval
from sarek_py.ir.launch_axes import first_axis_use
from sarek_py.ir.nodes import (
    EXPR_TYPES,
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    Kernel,
    Loc,
    Ref,
    Stop,
    Var,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar


class Unbound(enum.Enum):
    """The argument of a parameter that a launch does not give (:func:`KernelLaunch`
    with a partial mapping): not known to the fusion, which refuses an array bound to
    nothing (LEG-1) and knows nothing of such a scalar (LEG-2); absent from
    :meth:`Launch.by_name`."""

    UNBOUND = "unbound"

    def __repr__(self) -> str:
        return "UNBOUND"


UNBOUND = Unbound.UNBOUND

@runtime_checkable
class HeldArray(Protocol):
    """A device array bound to an array parameter (``sarek_py.DeviceArray``, specs/launch.md
    LCH-62): one whole buffer of ``shape`` and ``dtype``, its memory named by
    ``buffer_id`` (LCH-64). The IR knows it by these three attributes only."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    @property
    def buffer_id(self) -> Hashable: ...


LaunchArg = str | int | float | bool | np.ndarray | np.generic | Expr | Unbound | HeldArray
"""One argument of a launch: a host expression (``Ref`` of a host array, a scalar
expression), a buffer name, a numpy array or a device array (arrays), a Python or numpy
value (scalars), or :data:`UNBOUND`."""

#: the most threads of a launch and the largest block (LCH-22, LCH-23)
MAX_THREADS = 2 ** 63 - 1
MAX_BLOCK = 2 ** 31 - 1


def is_symbolic(v: object) -> TypeGuard[Expr]:
    """Whether a launch value is a symbolic host expression (LEG-12)."""
    return isinstance(v, EXPR_TYPES)


def _loc() -> Any:
    return attrs.field(default=None, eq=False, repr=False, kw_only=True)


def count(v: object, what: str, low: int, who: str = "Launch") -> int | Expr:
    """A thread count (``what="threads"``) or block size (``"block"``) as an ``int``
    (numpy integers included) or a host expression; a ``bool``, float or any other object
    is a ``TypeError``, a number out of ``low``..2**31-1 (block) / 2**63-1 (threads) a
    ``ValueError`` naming ``who`` (LCH-23)."""
    if type(v) is int and low <= v <= (MAX_BLOCK if what == "block" else MAX_THREADS):
        return v  # the common case, first: a launch record is made at every launch
    if is_symbolic(v):
        return v
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
        raise TypeError(f"{who} {what} must be an integer, not {type(v).__name__} {v!r}")
    high = MAX_BLOCK if what == "block" else MAX_THREADS
    if not low <= int(v) <= high:
        raise ValueError(f"{who} {what} = {int(v)} is not in {low}..{high}")
    return int(v)


def _threads(v: object) -> int | Expr:
    return count(v, "threads", 0)


def _block(v: object) -> int | Expr:
    return count(v, "block", 1)


def _extents(v: object) -> tuple[int | Expr, ...]:
    """A grid or block shape of an n-D launch (LCH-28): 1 to 3 extents, each an integer in
    1..2**31-1 or a host expression; ``()`` is a launch by thread count and block size."""
    if type(v) is tuple and not v:
        return ()
    if isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_):
        v = (v,)
    if not isinstance(v, tuple | list):
        raise TypeError(f"Launch grid and block shapes must be tuples of 1 to 3 extents, "
                        f"not {type(v).__name__} {v!r}")
    if len(v) > 3:
        raise ValueError(f"Launch grid and block shapes have 1 to 3 extents, not {len(v)}")
    return tuple(count(x, "block", 1, "Launch grid/block extent") for x in v)


def _product(extents: tuple[int | Expr, ...], t: Scalar) -> int | Expr:
    """The product of ``extents`` as an ``int``, or a host expression of type ``t``
    (``i64(e0) * i64(e1) …`` for ``i64``)."""
    if all(isinstance(e, int) for e in extents):
        n = 1
        for e in extents:
            assert isinstance(e, int)
            n *= e
        return n
    out: Expr | None = None
    for e in extents:
        x: Expr = Const(e, t) if isinstance(e, int) else e
        if not isinstance(e, int) and t is Scalar.I64 and type_of(e) is not Scalar.I64:
            x = Cast(Scalar.I64, e)
        out = x if out is None else Binary(BinaryOp.MUL, out, x)
    assert out is not None
    return out


def shape_counts(grid: tuple[int | Expr, ...], block: tuple[int | Expr, ...]
                 ) -> tuple[int | Expr, int | Expr]:
    """The thread count (``i64``) and block size (``i32``) of an n-D launch of ``grid``
    blocks of ``block`` threads: the products of the extents (LCH-28)."""
    return _product(grid + block, Scalar.I64), _product(block, Scalar.I32)


def _arg_key(v: object) -> Hashable:
    """What an argument is compared and hashed by: an array (or any unhashable object,
    a device buffer) by identity, a name, an expression or a value by type and value."""
    if isinstance(v, str | bool | int | float | np.generic | Unbound) or is_symbolic(v):
        return (type(v), v)
    return ("object", id(v))


def _args_key(args: tuple[LaunchArg, ...]) -> Hashable:
    return tuple(_arg_key(a) for a in args)


MAX_SHARED = 2 ** 31 - 1


def _shared(v: object) -> int | Expr | None:
    """The dynamic shared extent of a launch, in elements (LCH-50): ``None``, an integer in
    0..2**31-1 or a host expression; a ``bool``, float or other object is a
    ``TypeError``, a number out of range a ``ValueError``."""
    if v is None or is_symbolic(v):
        return v
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
        raise TypeError(f"Launch shared (elements of the dynamic shared array) must be an "
                        f"integer, not {type(v).__name__} {v!r}")
    if not 0 <= int(v) <= MAX_SHARED:
        raise ValueError(f"Launch shared = {int(v)} elements is not in 0..{MAX_SHARED}")
    return int(v)


def _args(v: object) -> tuple[LaunchArg, ...]:
    if isinstance(v, Mapping) or not isinstance(v, tuple | list):
        raise TypeError(f"Launch args must be a tuple with one argument per kernel parameter "
                        f"(KernelLaunch takes them by name), not {type(v).__name__}")
    return tuple(v)


@attrs.frozen
class ScratchBuffer:
    """A device-only buffer for the kernel argument at position ``argument``: ``size``
    elements of the parameter's element type; ``read_back`` leading elements copied into a
    host array allocated after the launch (the seed's ``gpu_scratch_buffer``)."""

    argument: int
    size: Expr
    read_back: Expr | None = None


@attrs.frozen
class Launch:
    """Start a kernel; does not wait (the seed's ``GpuKernelLaunch``; the one launch
    record, LCH-24)."""

    kernel: Kernel
    thread_count: int | Expr = attrs.field(converter=_threads)
    block_size: int | Expr = attrs.field(converter=_block)
    args: tuple[LaunchArg, ...] = attrs.field(converter=_args, eq=_args_key)
    scratch: tuple[ScratchBuffer, ...] = ()
    stop_status: Var | None = None
    stop_replay: tuple[Stop, ...] = ()
    overwritten: tuple[Var, ...] = ()
    overwritten_if: tuple[Expr, ...] = ()
    #: the grid (in blocks) and block (in threads) of a launch of 1 to 3 dimensions, or
    #: ``()`` for a launch by ``thread_count`` and ``block_size`` (LCH-28); the counts of
    #: an n-D launch are the products of the extents (:func:`shape_counts`)
    grid: tuple[int | Expr, ...] = attrs.field(default=(), converter=_extents)
    block_shape: tuple[int | Expr, ...] = attrs.field(default=(), converter=_extents)
    #: the extent in ELEMENTS of the kernel's dynamic shared array (``shared s : T[]``),
    #: ``None`` for a kernel without one (LCH-50)
    shared: int | Expr | None = attrs.field(default=None, converter=_shared, kw_only=True)
    loc: Loc | None = _loc()

    @property
    def shaped(self) -> bool:
        """Whether the launch is given by a grid and block shape (LCH-28)."""
        return bool(self.grid or self.block_shape)

    @property
    def dims(self) -> int:
        """The launch's dimensions: the longer of its grid and block shapes, 1 for a launch
        by thread count and block size (LCH-26)."""
        return max(len(self.grid), len(self.block_shape), 1)

    def shape(self) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
        """The grid and block shape as numbers (``None`` for a 1-D launch by counts); a
        symbolic extent is a ``LaunchError``."""
        if not self.shaped:
            return None
        ext = (*self.grid, *self.block_shape)
        if not all(isinstance(e, int) for e in ext):
            raise LaunchError(f"launch of {self.kernel.name}: its grid and block shape must "
                              "be known to run it", self.loc)
        return (tuple(e for e in self.grid if isinstance(e, int)),
                tuple(e for e in self.block_shape if isinstance(e, int)))

    @property
    def threads(self) -> int | Expr:
        """The thread count (``thread_count``)."""
        return self.thread_count

    @property
    def block(self) -> int | Expr:
        """The block size (``block_size``)."""
        return self.block_size

    @property
    def by_name(self) -> dict[str, LaunchArg]:
        """The arguments by parameter name, in the kernel's order (without the
        :data:`UNBOUND` ones)."""
        return {p.name: a for p, a in zip(self.kernel.params, self.args, strict=False)
                if a is not UNBOUND}

    def arg(self, name: str) -> LaunchArg:
        """The argument of parameter ``name`` (``KeyError`` when there is none)."""
        return self.by_name[name]

    def arg_name(self, index: int) -> str:
        """The host variable passed as array argument ``index``."""
        a = self.args[index]
        assert isinstance(a, Ref)
        return a.var.name

    def counts(self) -> tuple[int, int]:
        """The thread count and block size as numbers (a bound launch, ready to run); a
        symbolic one is a ``LaunchError``."""
        t, b = self.thread_count, self.block_size
        if not (isinstance(t, int) and isinstance(b, int)):
            raise LaunchError(f"launch of {self.kernel.name}: its thread count and block "
                              f"size must be known to run it, not {t!r}, {b!r}", self.loc)
        return t, b

    def host_exprs(self) -> tuple[Expr, Expr, tuple[Expr, ...]]:
        """The thread count, block size and arguments as host expressions: the form of a
        launch in a host program (LCH-1); a bound or missing one is a ``LaunchError``."""
        where = f"launch of {self.kernel.name}"
        named = list(zip((p.name for p in self.kernel.params), self.args, strict=False))
        for name, a in named:
            if a is UNBOUND:
                raise LaunchError(f"{where}: parameter {name} has no argument", self.loc)
        fields = [("thread count", self.thread_count), ("block size", self.block_size),
                  *((f"argument of {n}", a) for n, a in named)]
        for what, f in fields:
            if not is_symbolic(f):
                raise LaunchError(f"{where}: the {what}, {type(f).__name__} {f!r}, is a bound "
                                  "value, not a host expression", self.loc)
        t, b, *args = (f for _, f in fields)
        assert is_symbolic(t) and is_symbolic(b)
        return t, b, tuple(a for a in args if is_symbolic(a))

    def host_shape(self) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
        """The grid and block extents as host expressions (LCH-28); a bound one is a
        ``LaunchError``."""
        for e in (*self.grid, *self.block_shape):
            if not is_symbolic(e):
                raise LaunchError(f"launch of {self.kernel.name}: the grid/block extent "
                                  f"{e!r} is a bound value, not a host expression", self.loc)
        return (tuple(e for e in self.grid if is_symbolic(e)),
                tuple(e for e in self.block_shape if is_symbolic(e)))

    def known_in(self, env: Mapping[str, object]) -> Launch:
        """This launch with what ``env`` (host scalars by name) knows evaluated: the
        thread count, block size and scalar arguments whose host variables all have
        values become values (integers as ``int``), the others stay symbolic; array
        arguments are unchanged. The same record, not a conversion (LCH-24): a constant
        expression is its value, so every spelling of a launch gets one decision. A count
        that evaluates out of range is a ``LaunchError`` (LCH-23)."""
        def value(e: LaunchArg) -> LaunchArg:
            if not is_symbolic(e):
                return e
            try:
                v = host_eval(e, env)
            except SarekError:
                return e
            return int(v) if isinstance(v, np.integer) else v

        args = tuple(a if p.is_array else value(a)
                     for p, a in zip(self.kernel.params, self.args, strict=False))
        args += self.args[len(args):]
        threads, block = value(self.thread_count), value(self.block_size)
        shared = None if self.shared is None else value(self.shared)
        grid = tuple(value(e) for e in self.grid)
        bshape = tuple(value(e) for e in self.block_shape)
        if any(is_symbolic(e) for e in grid + bshape):
            # an n-D launch is known whole or not at all: its counts stay the products of
            # its extents (LCH-28)
            threads, block = self.thread_count, self.block_size
            grid, bshape = self.grid, self.block_shape
        if (threads is self.thread_count and block is self.block_size
                and shared is self.shared
                and all(a is b for a, b in zip(args, self.args, strict=True))
                and all(a is b for a, b in zip(grid + bshape,
                                               self.grid + self.block_shape, strict=True))):
            return self
        for v in grid + bshape:
            if not is_symbolic(v) and (isinstance(v, bool | np.bool_)
                                       or not isinstance(v, int)
                                       or not 1 <= v <= MAX_BLOCK):
                raise LaunchError(f"launch of {self.kernel.name}: the grid/block extent "
                                  f"{v!r} is not an integer in 1..{MAX_BLOCK}", self.loc)
        known = [v for v in grid + bshape if isinstance(v, int)]
        if (grid or bshape) and len(known) == len(grid + bshape):
            # the counts of known extents are their exact products, not the values of the
            # count expressions, which wrap in their types (LCH-28)
            threads = math.prod(known)
            block = math.prod(v for v in bshape if isinstance(v, int))
        for what, v, low, high in (("thread count", threads, 0, MAX_THREADS),
                                   ("block size", block, 1, MAX_BLOCK)):
            if is_symbolic(v):
                continue
            if isinstance(v, bool | np.bool_) or not isinstance(v, int):
                raise LaunchError(f"launch of {self.kernel.name}: the {what} {v!r} is not an "
                                  "integer", self.loc)
            if not low <= v <= high:
                raise LaunchError(f"launch of {self.kernel.name}: the {what} {v} is not in "
                                  f"{low}..{high}", self.loc)
        if shared is not None and not is_symbolic(shared) and (
                isinstance(shared, bool | np.bool_) or not isinstance(shared, int)
                or not 0 <= shared <= MAX_SHARED):
            raise LaunchError(f"launch of {self.kernel.name}: the shared extent {shared!r} "
                              f"is not an integer in 0..{MAX_SHARED} (elements)", self.loc)
        return attrs.evolve(self, thread_count=threads, block_size=block, args=args,
                            grid=grid, block_shape=bshape, shared=shared)


def KernelLaunch(kernel: object, threads: object, block: object = 256,  # noqa: N802
                 args: object = None, *, shared: object = None) -> Launch:
    """A :class:`Launch` spelled by parameter name: ``threads`` threads (ids
    ``0 .. threads-1``) in blocks of ``block``, ``args`` mapping every parameter name of
    ``kernel`` to its argument (specs/fusion-legality.md LEG-1, specs/launch.md LCH-23).
    (Parameters are typed ``object``: a wrong kind of argument is this function's own
    ``TypeError``, whatever checks types at run time.)

    An array parameter takes a buffer name (``str``), a numpy array (two numpy arrays
    are the same buffer only when they are the same memory range with the same shape,
    strides and dtype; any other overlap is partial aliasing, LEG-1, LEG-7) or a ``Ref``
    of a host array; a scalar parameter a Python or numpy scalar. ``threads`` and scalar
    arguments may also be *symbolic*: an IR expression over host variables whose values
    are not known but do not change between the launches looked at together (LEG-12).
    A parameter ``args`` does not name is :data:`UNBOUND` (LEG-1, LEG-2). Counts that
    are not integers are a ``TypeError``, counts out of range or a name that is no
    parameter a ``ValueError`` (LCH-23).

    CUDA's spelling of a launch of 1 to 3 dimensions (LCH-28): when ``threads`` or
    ``block`` is a tuple, ``threads`` is the grid (in blocks, an int is one extent) and
    ``block`` the block shape; the counts are their products.

    ``shared`` is the extent in *elements* of the kernel's dynamic shared array
    (``shared s : f32[]``, LCH-50): required for such a kernel, refused for any other."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"KernelLaunch kernel must be an IR Kernel, not {type(kernel).__name__}")
    if isinstance(threads, tuple | list) or isinstance(block, tuple | list):
        grid, bshape = _extents(threads), _extents(block)
        if not grid or not bshape:
            raise ValueError("KernelLaunch grid and block shapes have 1 to 3 extents, not 0")
        if any(is_symbolic(e) for e in bshape):
            raise TypeError("KernelLaunch block extents must be integers")
        t, b = shape_counts(grid, bshape)
        return Launch(kernel, t, b, _named_args(kernel, args), grid=grid, block_shape=bshape,
                      shared=_dynamic_extent(kernel, shared))
    t = count(threads, "threads", 0, "KernelLaunch")
    b = count(block, "block", 1, "KernelLaunch")
    if is_symbolic(b):
        raise TypeError(f"KernelLaunch block must be an integer, not {type(b).__name__} {b!r}")
    return Launch(kernel, t, b, _named_args(kernel, args),
                  shared=_dynamic_extent(kernel, shared))


def _dynamic_extent(kernel: Kernel, shared: object) -> int | Expr | None:
    """``shared`` checked against the kernel (LCH-50): ``ValueError`` when the kernel has
    a dynamic shared array and no extent is given, or an extent and no such array."""
    problem = shared_problem(kernel, shared is not None)
    if problem is not None:
        raise ValueError(f"KernelLaunch of {kernel.name}: {problem}")
    return _shared(shared)


def shared_problem(kernel: Kernel, given: bool) -> str | None:
    """Why a launch of ``kernel`` that does (``given``) or does not give a dynamic shared
    extent is wrong, or None (LCH-50)."""
    dyn = dynamic_shared(kernel)
    if dyn is not None and not given:
        return (f"[LCH-50] kernel {kernel.name} has the dynamic shared array {dyn.name} "
                f"({dyn.type}): the launch must give its extent in elements (shared=N; "
                f"'shared N' in launch text)")
    if dyn is None and given:
        return (f"[LCH-50] kernel {kernel.name} has no dynamic shared array (shared x : "
                f"T[]), so the launch cannot give a shared extent")
    return None


def _named_args(kernel: Kernel, args: object) -> tuple[LaunchArg, ...]:
    """``args`` by parameter name as the launch's tuple (:data:`UNBOUND` for the
    parameters it does not name)."""
    named = {} if args is None else args
    if not isinstance(named, Mapping):
        raise TypeError("KernelLaunch args must map parameter names to arguments, not "
                        f"{type(named).__name__}")
    params = [p.name for p in kernel.params]
    extra = [n for n in named if n not in params]
    if extra:
        raise ValueError(f"KernelLaunch of {kernel.name}: {extra[0]!r} is not a parameter of "
                         f"{kernel.name} (its parameters: {', '.join(params) or 'none'})")
    return tuple(named.get(n, UNBOUND) for n in params)


@attrs.frozen
class Sync:
    """Wait for every launch made before (the seed's ``GpuSync``); stop replays run here."""

    loc: Loc | None = _loc()


HostStmt = Launch | Sync


def _check_shape(node: Launch, fail: Any) -> None:
    """An n-D launch's grid and block are 1 to 3 ``i32`` host expressions each and its
    counts their products (LCH-28); the kernel reads no axis the launch lacks (LCH-26)."""
    if node.shaped:
        if not node.grid or not node.block_shape:
            raise fail("an n-D launch needs both a grid and a block shape")
        for e in (*node.grid, *node.block_shape):
            if not is_symbolic(e):
                raise fail(f"the grid/block extent {e!r} is a bound value, not a host "
                           "expression")
            if type_of(e) is not Scalar.I32:
                raise fail(f"a grid/block extent must be an i32, not {type_of(e)}")
        if (node.thread_count, node.block_size) != shape_counts(node.grid, node.block_shape):
            raise fail("the thread count and block size of an n-D launch must be the "
                       "products of its grid and block extents")
    use = first_axis_use(node.kernel)
    if use is not None and use.dims > node.dims:
        at = f" (at {use.loc})" if use.loc is not None else ""
        shape = "threads and block" if not node.shaped else \
            f"a grid and block of {node.dims} extent{'s' if node.dims > 1 else ''}"
        raise fail(f"[LCH-26] kernel {node.kernel.name} reads {use.name}{at}, but this "
                   f"launch has {node.dims} dimension{'s' if node.dims > 1 else ''} "
                   f"({shape}): launch it with a grid and block of {use.dims} extents")


def check_launch(node: Launch) -> None:
    """Raise :class:`LaunchError` unless the launch is well formed (LCH-1 … LCH-7)."""
    k = node.kernel
    where = f"launch of {k.name}"

    def fail(msg: str) -> LaunchError:
        return LaunchError(f"{where}: {msg}", node.loc)

    if len(node.args) != len(k.params):
        raise fail(f"{len(node.args)} arguments for {len(k.params)} parameters")
    threads, block, args = node.host_exprs()
    for p, a in zip(k.params, args, strict=True):
        if isinstance(p.type, ArrayType):
            if not (isinstance(a, Ref) and isinstance(a.var.type, ArrayType)):
                raise fail(f"array parameter {p.name} needs a host array variable")
            at = a.var.type
            if at.elem is not p.type.elem or at.rank != p.type.rank:
                raise fail(f"argument {a.var.name} ({at}) does not fit parameter {p.name} "
                           f"({p.type})")
        elif type_of(a) != p.type:
            raise fail(f"argument for {p.name} has type {type_of(a)}, not {p.type}")
    req = k.requires
    if req is not None:  # a fused kernel: one host array for two of its buffers (LEG-15)
        bound = [(p.name, a.var.name) for p, a in zip(k.params, args, strict=True)
                 if isinstance(p.type, ArrayType) and isinstance(a, Ref)]
        for n, (pa, va) in enumerate(bound):
            for pb, vb in bound[n + 1:]:
                if va == vb and pb not in req.group_of(pa):
                    raise fail(f"[LEG-15] {va} is passed as both {pa} and {pb}, which the "
                               "fused kernel needs bound to buffers that do not overlap")
    if type_of(threads) not in (Scalar.I64, Scalar.I32):
        raise fail("thread_count must be an integer (i64)")
    if type_of(block) not in (Scalar.I32, Scalar.I64):
        raise fail("block_size must be an integer")
    _check_shape(node, fail)
    problem = shared_problem(k, node.shared is not None)
    if problem is not None:
        raise fail(problem)
    if node.shared is not None:
        if not is_symbolic(node.shared):
            raise fail(f"the shared extent {node.shared!r} is a bound value, not a host "
                       "expression")
        if type_of(node.shared) not in (Scalar.I32, Scalar.I64):
            raise fail(f"the shared extent must be an integer, not {type_of(node.shared)}")
    seen: set[int] = set()
    for s in node.scratch:
        if not 0 <= s.argument < len(k.params) or s.argument in seen:
            raise fail(f"scratch argument index {s.argument} is invalid or repeated")
        seen.add(s.argument)
        p = k.params[s.argument]
        if not isinstance(p.type, ArrayType) or p.type.rank != 1:
            raise fail(f"scratch parameter {p.name} must be a rank-1 array")
        for e in (s.size, s.read_back):
            if e is not None and type_of(e) not in (Scalar.I32, Scalar.I64):
                raise fail(f"scratch sizes of {p.name} must be integers")
    if can_stop(k) != (node.stop_status is not None):
        raise fail("a kernel that can stop needs a stop_status array, and only such a kernel"
                   if can_stop(k) else "stop_status is given for a kernel that cannot stop")
    if node.stop_status is not None:
        st = node.stop_status.type
        if not (isinstance(st, ArrayType) and st.elem is Scalar.I32 and st.rank == 1):
            raise fail("stop_status must be a rank-1 i32 host array")
    if len(node.overwritten) != len(node.overwritten_if):
        raise fail("overwritten and overwritten_if must have one entry each")
    array_args = {a.var for a in args if isinstance(a, Ref)}
    scratch_args = {args[s.argument] for s in node.scratch}
    for v, c in zip(node.overwritten, node.overwritten_if, strict=True):
        if v not in array_args or Ref(v) in scratch_args:
            raise fail(f"overwritten {v.name} is not an array argument of the launch")
        if type_of(c) is not Scalar.BOOL:
            raise fail(f"overwritten_if for {v.name} must be a bool")
