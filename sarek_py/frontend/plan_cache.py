"""Cached pipeline plans (specs/frontend.md FE-80 … FE-84).

A pipeline run again with the same launches — the same kernel objects, counts, grid and
block shapes, dynamic shared extents, scalar values, array dtypes, shapes and strides,
and the same aliasing pattern among its arrays — on the same backend with the same
``force`` gets the same answer from
:func:`~sarek_py.fusion.epilogue.sequence.fuse_launches`: the fusion reads nothing else
of the launches (never the arrays' addresses or contents). :func:`cached_fuse` keys the
plan (the fused launches and the decisions) by exactly that, and on a hit rebinds the
fused launches to this run's arrays by position. The fused kernels are the same objects
as at the first run, so their emitted source and built programs are found again by the
backends' per-kernel caches (LCH-17), and every launch still checks the fused kernel's
conditions against its actual arguments (LEG-14, LEG-15).

The key holds no array: it holds the kernels (so their ``id`` cannot be reused while the
entry lives) and, per array argument, its dtype, shape, strides, writability and the
number of its buffer in the run (equal for two arguments that are one buffer, LEG-1),
and, per pair of buffers, whether they overlap. The cache is bounded (least recently used
plans go first).
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Hashable, Sequence
from typing import Any, cast

import attrs
import numpy as np

from sarek_py.analysis.value_scalars import value_only_params
from sarek_py.fusion.epilogue.buffers import buffer_key, overlap
from sarek_py.fusion.epilogue.merge_scalars import MergeNote, merge_launches
from sarek_py.fusion.epilogue.sequence import Decision, fuse_launches
from sarek_py.fusion.policy import Target
from sarek_py.ir.host.launch import UNBOUND, Launch
from sarek_py.ir.memo import LruCache
from sarek_py.ir.nodes import Kernel

#: how many plans are kept
PLAN_LIMIT = 128

#: where an argument of a planned launch comes from: ``(i, j)`` is argument ``j`` of the
#: ``i``-th recorded launch; ``None`` a value that the key fixes (a scalar, a count)
Slot = tuple[int, int] | None


@attrs.frozen(eq=False)
class Plan:
    """A fusion plan: the launches to run with their arrays taken out (``slots`` says
    where each comes from in a run's recorded launches), and the decisions."""

    #: the recorded kernels, in order (held, so their ids stay theirs)
    kernels: tuple[Kernel, ...]
    templates: tuple[Launch, ...]
    slots: tuple[tuple[Slot, ...], ...]
    decisions: tuple[Decision, ...]
    #: the scalar parameters made one (FE-97)
    merged: tuple[MergeNote, ...] = ()


@attrs.define
class PlanStats:
    """Plans found again (``hits``), planned and kept (``misses``), and planned but not
    kept (``uncached``: a launch argument the key cannot describe)."""

    hits: int = 0
    misses: int = 0
    uncached: int = 0


_PLANS: LruCache[Hashable, Plan] = LruCache(PLAN_LIMIT)
STATS = PlanStats()


def clear() -> None:
    """Forget every plan (and reset :data:`STATS`)."""
    _PLANS.clear()
    STATS.hits = STATS.misses = STATS.uncached = 0


def _extent(a: np.ndarray[Any, Any], start: int) -> tuple[int, int]:
    """The bytes ``[lo, hi)`` that hold ``a``'s elements (``(start, start)`` when empty)."""
    if a.size == 0:
        return start, start
    lo = hi = start
    for n, s in zip(a.shape, a.strides, strict=True):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + a.itemsize


def _may_overlap(a: Any, b: Any, ea: tuple[int, int] | None,
                 eb: tuple[int, int] | None) -> bool:
    """:func:`~sarek_py.fusion.epilogue.buffers.overlap` of two buffers, answered without
    it when their byte extents are disjoint (then it says no)."""
    if ea is not None and eb is not None and (ea[1] <= eb[0] or eb[1] <= ea[0]
                                              or ea[0] == ea[1] or eb[0] == eb[1]):
        return False
    return overlap(a, b)


def _interface_address(a: np.ndarray[Any, Any]) -> int:
    return int(a.__array_interface__["data"][0])


def _struct_address(a: np.ndarray[Any, Any]) -> int:
    """The ``data`` field of the array object itself: numpy's ``PyArrayObject`` starts
    with ``PyObject_HEAD`` and then ``char *data`` (its public C layout since numpy 1.7,
    numpy 2 included); read in a quarter of ``__array_interface__``'s time."""
    return _VOIDP(id(a) + _HEAD).value or 0


def _address_reader() -> Any:
    """:func:`_struct_address` where it reads what ``__array_interface__`` says for every
    kind of array checked here (CPython, the usual object layout), else
    :func:`_interface_address`."""
    if sys.implementation.name != "cpython":
        return _interface_address
    base = np.arange(24, dtype=np.float64)
    probes: list[np.ndarray[Any, Any]] = [
        base, base[5:], base[::-3], base.reshape(4, 6)[1:, ::2], base[:0],
        np.empty(0, np.int8), np.zeros((3, 0), np.float32), base.view(np.int32)[7:]]
    try:
        same = all(_struct_address(a) == _interface_address(a) for a in probes)
    except (ValueError, OSError):  # pragma: no cover - no such layout here
        same = False
    return _struct_address if same else _interface_address


_VOIDP = ctypes.c_void_p.from_address
_HEAD = object.__basicsize__  # sizeof(PyObject): where PyArrayObject's data field is
#: the start of a numpy array's memory (only for arrays of type ``np.ndarray`` itself)
data_address: Any = _address_reader()


def plan_key(launches: Sequence[Launch], backend: str, target: Target, force: bool,
             extra: Hashable = ()) -> Hashable | None:
    """Everything :func:`fuse_launches` may read of ``launches`` (FE-80), or ``None`` when
    an argument is of a kind the key cannot describe (then nothing is cached)."""
    parts: list[Hashable] = [backend, target.name, target.contraction, target.shared_bytes,
                             force, extra]
    buffers: dict[Hashable, int] = {}
    held: list[tuple[Any, tuple[int, int] | None]] = []
    #: the part of each array object seen in this call (the launches hold the objects,
    #: so their ids are theirs while this runs)
    seen: dict[int, Hashable] = {}
    #: the number of each value-only scalar object of this run (FE-94)
    scalars: dict[int, int] = {}
    ndarray, generic = np.ndarray, np.generic
    for lc in launches:
        parts.append((id(lc.kernel), lc.thread_count, lc.block_size, lc.grid,
                      lc.block_shape, lc.shared))
        free = value_only_params(lc.kernel)
        j = -1
        for a in lc.args:
            j += 1
            part = seen.get(id(a))
            if part is not None:
                parts.append(part)
                continue
            if isinstance(a, generic):
                if j in free:  # its type and which object it is, not its value (FE-93)
                    parts.append(("v", type(a), scalars.setdefault(id(a), len(scalars))))
                else:
                    parts.append((type(a), a.tobytes()))
                continue
            if isinstance(a, ndarray):
                start: int = (data_address(a) if type(a) is ndarray
                              else _interface_address(cast(np.ndarray[Any, Any], a)))
                shape, strides, dt = a.shape, a.strides, a.dtype
                bk: Hashable = ("array", start, shape, strides, dt)
                n = buffers.get(bk)
                if n is None:
                    n = buffers[bk] = len(held)
                    held.append((a, _extent(a, start)))
                part = ("a", n, shape, strides, dt, a.flags.writeable)
            elif isinstance(a, bool | int | float) or a is UNBOUND:
                part = (type(a), repr(a))
            elif hasattr(a, "shape") and hasattr(a, "dtype"):  # a device array
                bk = buffer_key(a)
                bk = ("object", id(a)) if bk is None else bk
                n = buffers.get(bk)
                if n is None:
                    n = buffers[bk] = len(held)
                    held.append((a, None))
                part = ("d", type(a), n, tuple(a.shape), np.dtype(a.dtype).str,
                        getattr(a, "backend", None))
            else:
                return None
            seen[id(a)] = part
            parts.append(part)
    if len(held) > 1:
        bits = 0
        bit = 1
        for i, (a, ea) in enumerate(held):
            for b, eb in held[i + 1:]:
                if _may_overlap(a, b, ea, eb):
                    bits |= bit
                bit <<= 1
        parts.append(bits)
    return tuple(parts)


def _movable(recorded: Sequence[Launch]) -> set[int]:
    """The ids of the value-only scalar arguments of ``recorded`` (FE-93): the key holds
    their types, not their values, so the plan takes them from each run like arrays."""
    return {id(a) for lc in recorded for j in value_only_params(lc.kernel)
            if j < len(lc.args) and isinstance(a := lc.args[j], np.generic)}


def _slots(recorded: Sequence[Launch], out: Launch, movable: set[int]
           ) -> tuple[Slot, ...] | None:
    """Where each array argument of ``out``, and each value-only scalar one, comes from in
    ``recorded`` (by identity); ``None`` when one comes from nowhere (then the plan is not
    kept)."""
    where: dict[int, tuple[int, int]] = {}
    for i, lc in enumerate(recorded):
        for j, a in enumerate(lc.args):
            if not isinstance(a, bool | int | float) and (
                    not isinstance(a, np.generic) or id(a) in movable):
                where.setdefault(id(a), (i, j))
    slots: list[Slot] = []
    for a in out.args:
        if (isinstance(a, np.generic) and id(a) not in movable) or a is UNBOUND or \
                isinstance(a, bool | int | float):
            slots.append(None)
            continue
        slot = where.get(id(a))
        if slot is None:
            return None
        slots.append(slot)
    return tuple(slots)


def _make_plan(recorded: Sequence[Launch], launches: Sequence[Launch],
               decisions: Sequence[Decision], merged: Sequence[MergeNote] = ()
               ) -> Plan | None:
    movable = _movable(recorded)
    slots = []
    templates = []
    for lc in launches:
        s = _slots(recorded, lc, movable)
        if s is None or lc.scratch:
            return None
        slots.append(s)
        templates.append(attrs.evolve(lc, args=tuple(
            UNBOUND if slot is not None else a for a, slot in zip(lc.args, s, strict=True))))
    # a value-only scalar the plan does not pass on as it is (a value fusion made from it)
    # would be kept from this run: such a plan is not kept (FE-93)
    passed = {id(a) for lc in launches for a in lc.args}
    if not movable <= passed:
        return None
    return Plan(tuple(lc.kernel for lc in recorded), tuple(templates), tuple(slots),
                tuple(decisions), tuple(merged))


def _rebind(plan: Plan, recorded: Sequence[Launch]) -> list[Launch]:
    """The plan's launches with this run's arrays (FE-81)."""
    out = []
    for tmpl, slots in zip(plan.templates, plan.slots, strict=True):
        args = tuple([a if s is None else recorded[s[0]].args[s[1]]
                      for a, s in zip(tmpl.args, slots, strict=True)])
        if not _DIRECT:
            out.append(attrs.evolve(tmpl, args=args))
            continue
        out.append(Launch(tmpl.kernel, tmpl.thread_count, tmpl.block_size, args,
                          tmpl.scratch, tmpl.stop_status, tmpl.stop_replay, tmpl.overwritten,
                          tmpl.overwritten_if, tmpl.grid, tmpl.block_shape,
                          shared=tmpl.shared, loc=tmpl.loc))
    return out


#: the fields :func:`_rebind` copies by name (half the time of ``attrs.evolve``); a
#: launch record with other fields is rebound by ``attrs.evolve``
_DIRECT = tuple(f.name for f in attrs.fields(Launch)) == (
    "kernel", "thread_count", "block_size", "args", "scratch", "stop_status",
    "stop_replay", "overwritten", "overwritten_if", "grid", "block_shape", "shared", "loc")


def cached_fuse(launches: Sequence[Launch], *, backend: str, target: Target,
                force: bool = False, extra: Hashable = (),
                merged: list[MergeNote] | None = None
                ) -> tuple[list[Launch], list[Decision]]:
    """:func:`fuse_launches` of ``launches`` for ``target``, the plan found again when a
    run with the same key was planned before (FE-80, FE-81); ``extra`` is whatever else
    the caller's plan depends on. With a list ``merged``, the scalar parameters of a
    fused launch bound to one value are made one (FE-97) and what was merged is appended
    to it; only scalars the key holds by value are merged, so a plan is found again only
    when the same ones are equal again (FE-98)."""
    key = plan_key(launches, backend, target, force, (extra, merged is not None))
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None and len(plan.kernels) == len(launches) and all(
                k is lc.kernel for k, lc in zip(plan.kernels, launches, strict=True)):
            STATS.hits += 1
            if merged is not None:
                merged.extend(plan.merged)
            return _rebind(plan, launches), list(plan.decisions)
    out, decisions = fuse_launches(launches, target=target, force=force)
    notes: list[MergeNote] = []
    if merged is not None:  # FE-98: never a value-only scalar (its key is its type)
        movable = _movable(launches)
        out, notes = merge_launches(out, lambda a: id(a) not in movable)
        merged.extend(notes)
    plan = None if key is None else _make_plan(launches, out, decisions, notes)
    if plan is None:
        STATS.uncached += 1
    else:
        STATS.misses += 1
        _PLANS.put(key, plan)
    return out, decisions


__all__ = ["PLAN_LIMIT", "Plan", "PlanStats", "STATS", "cached_fuse", "clear", "plan_key"]
