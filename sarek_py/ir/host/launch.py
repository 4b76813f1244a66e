"""The launch node and the sync node, after seed 001's ``GpuKernelLaunch`` (specs/launch.md).

A :class:`Launch` starts ``thread_count`` threads of ``kernel`` in blocks of
``block_size`` and does not wait; a :class:`Sync` waits for every launch before it. Both
are host statements: their expressions are IR expressions over host variables, looked up
by name in the host environment (a ``dict`` of numpy arrays and scalars) by
:mod:`sarek_py.host.execute`.

Fields (LCH-1 … LCH-7):

* ``args`` — one per kernel parameter: ``Ref`` of a host array for an array parameter,
  a scalar expression of the parameter's type otherwise;
* ``thread_count`` — an ``i64`` expression (whole tiles can exceed ``i32``); below one runs
  no thread; ``block_size`` — an ``i32`` expression;
* ``scratch`` — device-only buffers: the argument at ``argument`` gets a buffer of ``size``
  elements that the host neither allocates nor copies; with ``read_back`` the host
  allocates the actual with that many elements after the launch and copies the leading
  elements in, otherwise the actual stays unallocated (``None``);
* ``stop_status``/``stop_replay`` — the host array that receives each thread's stop code,
  and the host ``stop`` statements replayed after the next sync;
* ``overwritten``/``overwritten_if`` — array arguments the kernel assigns whole before
  reading them, when the matching host condition holds: not copied in (write-discard)
  unless another argument overlaps the buffer.
"""

from __future__ import annotations

from typing import Any

import attrs

from sarek_py.ir.diagnostics import LaunchError
from sarek_py.ir.effects import kernel_may_stop as can_stop
from sarek_py.ir.nodes import Expr, Kernel, Loc, Ref, Stop, Var
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar


def _loc() -> Any:
    return attrs.field(default=None, eq=False, repr=False, kw_only=True)


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
    """Start a kernel; does not wait (the seed's ``GpuKernelLaunch``)."""

    kernel: Kernel
    thread_count: Expr
    block_size: Expr
    args: tuple[Expr, ...]
    scratch: tuple[ScratchBuffer, ...] = ()
    stop_status: Var | None = None
    stop_replay: tuple[Stop, ...] = ()
    overwritten: tuple[Var, ...] = ()
    overwritten_if: tuple[Expr, ...] = ()
    loc: Loc | None = _loc()

    def arg_name(self, index: int) -> str:
        """The host variable passed as array argument ``index``."""
        a = self.args[index]
        assert isinstance(a, Ref)
        return a.var.name


@attrs.frozen
class Sync:
    """Wait for every launch made before (the seed's ``GpuSync``); stop replays run here."""

    loc: Loc | None = _loc()


HostStmt = Launch | Sync


def check_launch(node: Launch) -> None:
    """Raise :class:`LaunchError` unless the launch is well formed (LCH-1 … LCH-7)."""
    k = node.kernel
    where = f"launch of {k.name}"

    def fail(msg: str) -> LaunchError:
        return LaunchError(f"{where}: {msg}", node.loc)

    if len(node.args) != len(k.params):
        raise fail(f"{len(node.args)} arguments for {len(k.params)} parameters")
    for p, a in zip(k.params, node.args, strict=True):
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
        bound = [(p.name, a.var.name) for p, a in zip(k.params, node.args, strict=True)
                 if isinstance(p.type, ArrayType) and isinstance(a, Ref)]
        for n, (pa, va) in enumerate(bound):
            for pb, vb in bound[n + 1:]:
                if va == vb and pb not in req.group_of(pa):
                    raise fail(f"[LEG-15] {va} is passed as both {pa} and {pb}, which the "
                               "fused kernel needs bound to buffers that do not overlap")
    if type_of(node.thread_count) not in (Scalar.I64, Scalar.I32):
        raise fail("thread_count must be an integer (i64)")
    if type_of(node.block_size) not in (Scalar.I32, Scalar.I64):
        raise fail("block_size must be an integer")
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
    array_args = {a.var for a in node.args if isinstance(a, Ref)}
    scratch_args = {node.args[s.argument] for s in node.scratch}
    for v, c in zip(node.overwritten, node.overwritten_if, strict=True):
        if v not in array_args or Ref(v) in scratch_args:
            raise fail(f"overwritten {v.name} is not an array argument of the launch")
        if type_of(c) is not Scalar.BOOL:
            raise fail(f"overwritten_if for {v.name} must be a bool")
