"""Arrays of the reference interpreter: addressing, bounds, gathers and scatters under a
lane mask, and the data-race and uninitialised-read detectors (specs/interpreter.md,
INT-14..INT-19).

Every array is a flat numpy buffer. A global array is the caller's buffer itself (updated
in place); a shared array holds one instance per block, a local array one per lane. An
*address* is a position in the flat buffer: a Python ``int`` when every lane uses the same
one, an ``int64`` array with a valid address in every lane (inactive lanes are sent to 0),
or -- the fast path -- the geometry's ``lane_ids`` vector itself, meaning "element ``t`` for
lane ``t``" of a zero-based one-dimensional global array.

Race detection keeps, per element, the thread that stored it (``writer``, -1 = none) and
the thread that read it (``reader``: -1 none, a thread id, or -2 for several threads);
readers are recorded only for arrays the kernel may store (:attr:`ArrayStore.track_reads`).
For shared arrays both are forgotten, block by block, at each barrier. While an array has
seen only identity accesses by every lane (no conflict is possible: each element is touched
by one thread), the trackers are not even allocated -- two flags record those accesses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sarek_py.ir.interp_atomics import apply as apply_atomic
from sarek_py.ir.interp_geometry import Geometry
from sarek_py.ir.interp_ops import LaneFault, Mask, Val, first_lane, lane_value
from sarek_py.ir.interp_scratch import scratch
from sarek_py.ir.nodes import AtomicOp
from sarek_py.ir.types import MemSpace, Scalar

Addr = int | NDArray[Any]

_NONE = -1
_MANY = -2


class ArrayStore:
    """One array of a launch: its flat buffer, extents, lower bounds and race trackers."""

    def __init__(
        self,
        name: str,
        space: MemSpace,
        elem: Scalar,
        data: NDArray[Any],
        shape: tuple[int, ...],
        lower: tuple[int, ...],
        *,
        instances: int = 1,
        track_reads: bool = True,
    ):
        self.name = name
        self.space = space
        self.elem = elem
        self.data = data
        self.shape = shape
        self.lower = lower
        self.instances = instances
        self.track_reads = track_reads
        self.size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        strides = []
        acc = 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        self.strides = tuple(reversed(strides))
        #: offsets fit i32 arithmetic (see :meth:`Memory.address`)
        self.small = data.size < 2**31 - 1 and all(
            n + abs(lo) < 2**31 - 1 for n, lo in zip(shape, lower, strict=True)
        )
        self.writer: NDArray[np.int32] | None = None
        self.reader: NDArray[np.int32] | None = None
        #: lanes that made "element t by thread t" accesses not yet in writer/reader:
        #: False for none, True for every lane, or a lane mask
        self.ident_written: NDArray[np.bool_] | bool = False
        self.ident_read: NDArray[np.bool_] | bool = False
        #: the thread that updated each element atomically (-1 none, -2 several), made at
        #: the array's first atomic (INT-28)
        self.atomic: NDArray[np.int32] | None = None
        self.init: NDArray[np.bool_] | None = (
            np.zeros(data.size, dtype=np.bool_) if space is MemSpace.SHARED else None
        )

    def describe(self) -> str:
        space = "" if self.space is MemSpace.GLOBAL else f"{self.space} "
        return f"{space}array '{self.name}'"

    def bounds(self) -> str:
        dims = zip(self.lower, self.shape, strict=True)
        return ", ".join(f"{lo}..{lo + n - 1}" for lo, n in dims)

    def element(self, addr: int) -> str:
        """The source-level index of a flat address, e.g. ``[3, 1]`` (and its block)."""
        inst, lin = divmod(addr, self.size) if self.size else (0, 0)
        idx = np.unravel_index(lin, self.shape) if self.shape else ()
        pos = zip(idx, self.lower, strict=True)
        text = "[" + ", ".join(str(int(i) + lo) for i, lo in pos) + "]"
        if self.space is MemSpace.SHARED and self.instances > 1:
            text += f" of block {inst}"
        return text


def _increasing(a: NDArray[Any]) -> bool:
    return a.size < 2 or bool(np.all(a[1:] > a[:-1]))


def _duplicate(a: NDArray[Any]) -> tuple[int, int] | None:
    """Positions ``(i, j)``, ``i < j``, of two equal entries of ``a``, or ``None``."""
    if _increasing(a):
        return None
    order = np.argsort(a, kind="stable")
    s = a[order]
    eq = s[1:] == s[:-1]
    if not eq.any():
        return None
    k = int(np.argmax(eq))
    return int(order[k]), int(order[k + 1])


class Memory:
    """Reads and stores of one launch, with bounds, race and initialisation checks."""

    def __init__(self, geo: Geometry, check_races: bool, copy_reads: bool = False):
        self.geo = geo
        self.check_races = check_races
        #: identity reads return copies, not views (when a helper call inside an
        #: expression may store to the array the view shows)
        self.copy_reads = copy_reads

    # ------------------------------------------------------------------ addressing

    def address(self, st: ArrayStore, idx: list[Val], mask: Mask, kind: str) -> Addr:
        """The flat address of ``st[idx]`` in every lane; faults on an active lane whose
        index is out of bounds (INT-15)."""
        geo = self.geo
        if (
            st.space is MemSpace.GLOBAL
            and len(idx) == 1
            and idx[0] is geo.lane_ids
            and st.lower[0] == 0
        ):
            n = st.size
            if geo.threads > n:
                lane: int | None = n
                if mask is not None:
                    tail = mask[n:]
                    lane = n + int(np.argmax(tail)) if tail.any() else None
                if lane is not None:
                    raise self._oob(st, [np.int32(lane)], lane, kind)
            return geo.lane_ids
        lin: Any = None
        anybad: Any = None
        for v, lo, ext, stride in zip(idx, st.lower, st.shape, st.strides, strict=True):
            d: Any
            if isinstance(v, np.ndarray):
                if v.dtype == np.int32 and st.small:
                    # in i32: a wrapped v - lo is still out of bounds (ext + |lo| < 2**31);
                    # as unsigned, a negative offset is huge: one comparison checks both ends
                    d = v if lo == 0 else v - np.int32(lo)
                    bad = d.view(np.uint32) >= ext
                    if stride != 1:
                        d = d * np.int32(stride)
                else:
                    d = v.astype(np.int64)
                    if lo:
                        d = d - lo
                    bad = d.view(np.uint64) >= ext
                    if stride != 1:
                        d = d * stride
                if bad.any():
                    lane = first_lane(bad, mask)
                    if lane is not None:
                        raise self._oob(st, idx, lane, kind)
                    anybad = bad if anybad is None else anybad | bad
                lin = d if lin is None else lin + d
                continue
            d = int(v) - lo
            if d < 0 or d >= ext:
                lane = first_lane(np.True_, mask)
                if lane is not None:
                    raise self._oob(st, idx, lane, kind)
                d = 0
            term = d * stride if stride != 1 else d
            lin = term if lin is None else lin + term
        if anybad is not None:
            lin = np.where(anybad, 0, lin)
        if st.instances > 1:
            base = geo.block_of_lane if st.space is MemSpace.SHARED else geo.lane_ids
            lin = base * np.int64(st.size) + lin
        if isinstance(lin, np.ndarray):
            return lin
        return int(lin)

    def _oob(self, st: ArrayStore, idx: list[Val], lane: int, kind: str) -> LaneFault:
        where = ", ".join(str(lane_value(v, lane)) for v in idx)
        return LaneFault(
            f"out-of-bounds {kind} of {st.describe()} at index [{where}] "
            f"(bounds {st.bounds()})",
            lane,
        )

    # ------------------------------------------------------------------ access

    def read(self, st: ArrayStore, addr: Addr, mask: Mask) -> Val:
        """The element at ``addr`` in every lane (garbage in inactive lanes)."""
        geo = self.geo
        val: Val
        if st.data.size == 0:
            return np.zeros(geo.threads, dtype=st.data.dtype)
        if addr is geo.lane_ids:
            n = st.size
            if geo.threads <= n:
                # a view: the evaluator copies it before binding it to a variable
                val = st.data[: geo.threads]
                if self.copy_reads:
                    val = val.copy()
            else:
                val = scratch(st.data.dtype, geo.threads)
                val[:n] = st.data
                val[n:] = 0
        elif isinstance(addr, int):
            val = st.data[addr]
        else:
            val = np.take(st.data, addr, out=scratch(st.data.dtype, addr.size), mode="clip")
        if st.init is not None:
            ok = st.init[addr]
            lane = first_lane(~ok, mask)
            if lane is not None:
                a = addr if isinstance(addr, int) else int(addr[lane])
                raise LaneFault(
                    f"read of uninitialised element {st.element(a)} of {st.describe()}", lane
                )
        if self.check_races and st.space is not MemSpace.LOCAL:
            self._note_read(st, addr, mask)
        return val

    def store(self, st: ArrayStore, addr: Addr, val: Val, mask: Mask) -> None:
        """``st[addr] <- val`` in the active lanes."""
        geo = self.geo
        if self.check_races and st.space is not MemSpace.LOCAL:
            self._note_write(st, addr, mask)
        data = st.data
        if addr is geo.lane_ids:
            n = min(geo.threads, st.size)
            v = val[:n] if isinstance(val, np.ndarray) else val
            if mask is None:
                data[:n] = v
            else:
                # a guard ``i < n`` makes a prefix mask: a plain slice copy then
                k = int(np.count_nonzero(mask[:n]))
                if mask[:k].all():
                    data[:k] = v[:k] if isinstance(v, np.ndarray) else v
                else:
                    np.copyto(data[:n], v, where=mask[:n])
        elif isinstance(addr, int):
            if isinstance(val, np.ndarray):
                last = geo.threads - 1 if mask is None else int(np.flatnonzero(mask)[-1])
                data[addr] = val[last]
            else:
                data[addr] = val
        elif mask is None:
            data[addr] = val
        else:
            data[addr[mask]] = val[mask] if isinstance(val, np.ndarray) else val
        if st.init is not None:
            if isinstance(addr, int) or mask is None:
                st.init[addr] = True
            else:
                st.init[addr[mask]] = True

    def atomic(self, st: ArrayStore, addr: Addr, op: AtomicOp, value: Val,
               compare: Val | None, mask: Mask) -> Val:
        """The atomic ``op`` on ``st[addr]`` in the active lanes, in thread order (INT-27);
        the old value of each lane (zero in inactive lanes)."""
        geo = self.geo
        out = np.zeros(geo.threads, dtype=st.data.dtype)
        lanes = geo.lane_ids if mask is None else np.flatnonzero(mask)
        if lanes.size == 0:
            return out
        if isinstance(addr, int):
            full = np.full(lanes.size, addr, dtype=np.int64)
        else:
            full = np.asarray(addr, dtype=np.int64)[lanes]
        if st.init is not None:  # an atomic reads the element first (INT-19)
            ok = st.init[full]
            if not ok.all():
                k = int(np.argmax(~ok))
                raise LaneFault(f"{op.value} of uninitialised element "
                                f"{st.element(int(full[k]))} of {st.describe()}", int(lanes[k]))
        if self.check_races and st.space is not MemSpace.LOCAL:
            self._note_atomic(st, full, lanes.astype(np.int32), op)
        v = value[lanes] if isinstance(value, np.ndarray) else value
        c = compare[lanes] if isinstance(compare, np.ndarray) else compare
        out[lanes] = apply_atomic(op, st.data, full, v, c)
        return out

    def _note_atomic(self, st: ArrayStore, a: NDArray[np.int64], t: NDArray[np.int32],
                     op: AtomicOp) -> None:
        """INT-28: an atomic races with a plain read or store of the same element by
        another thread, never with another atomic."""
        self._materialize(st)
        for tracker, what in ((st.writer, "was stored by"), (st.reader, "was read by")):
            if tracker is None:
                continue
            other = tracker[a]
            bad = (other != _NONE) & (other != t)
            if bad.any():
                k = int(np.argmax(bad))
                raise self._race(st, int(a[k]), int(t[k]), int(other[k]),
                                 f"updates it with {op.value} after it {what}")
        if st.atomic is None:
            st.atomic = np.full(st.data.size, _NONE, dtype=np.int32)
        cur = st.atomic[a]
        st.atomic[a] = np.where((cur == _NONE) | (cur == t), t, _MANY).astype(np.int32)
        dup = _duplicate(a)
        if dup is not None:
            keys = np.unique(a)
            counts = np.bincount(np.searchsorted(keys, a), minlength=keys.size)
            st.atomic[keys[counts > 1]] = _MANY

    def _atomic_conflict(self, st: ArrayStore, a: Any, t: Any, what: str) -> None:
        """INT-28: a plain access of an element another thread updated atomically."""
        if st.atomic is None:
            return
        u = st.atomic[a]
        bad = (u != _NONE) & (u != t)
        if np.any(bad):
            k = int(np.argmax(bad)) if isinstance(bad, np.ndarray) and bad.ndim else 0
            addr = self._at(a, k) if not isinstance(a, (int, np.integer)) else int(a)
            who = int(u[k]) if isinstance(u, np.ndarray) and u.ndim else int(u)
            lane = int(t[k]) if isinstance(t, np.ndarray) and t.ndim else int(t)
            raise self._race(st, addr, lane, who, f"{what} after it was updated atomically by")

    def barrier(self, blocks: NDArray[np.bool_] | None, shared: list[ArrayStore]) -> None:
        """Forget the shared accesses of the blocks that passed a barrier (INT-18)."""
        for st in shared:
            for tr in (st.writer, st.reader, st.atomic):
                if tr is None:
                    continue
                if blocks is None:
                    tr.fill(_NONE)
                else:
                    tr.reshape(st.instances, st.size)[blocks[: st.instances]] = _NONE

    # ------------------------------------------------------------------ races

    def _active(self, addr: NDArray[Any], mask: Mask) -> tuple[Any, NDArray[np.int32]]:
        """Addresses and thread ids of the active lanes (a slice for the identity)."""
        geo = self.geo
        if mask is None:
            if addr is geo.lane_ids:
                return slice(0, geo.threads), geo.lane_ids
            return addr, geo.lane_ids
        return addr[mask], geo.lane_ids[mask]

    def _race(self, st: ArrayStore, addr: int, t: int, other: int, what: str) -> LaneFault:
        who = "several other threads" if other == _MANY else f"thread {other}"
        return LaneFault(
            f"data race on {st.describe()} element {st.element(addr)}: thread {t} {what} "
            f"{who}" + (" since the last barrier" if st.space is MemSpace.SHARED else
                        " in this launch"),
            t,
        )

    @staticmethod
    def _lanes_union(old: NDArray[np.bool_] | bool, mask: Mask) -> NDArray[np.bool_] | bool:
        if old is True or mask is None:
            return True
        if old is False:
            return mask
        return old | mask

    def _materialize(self, st: ArrayStore) -> None:
        """Write the identity accesses recorded in the lane sets into dense trackers."""
        n = min(self.geo.threads, st.data.size)
        ids = self.geo.lane_ids[:n]
        for kind in ("writer", "reader"):
            lanes = st.ident_written if kind == "writer" else st.ident_read
            if lanes is False:
                continue
            tr = np.full(st.data.size, _NONE, dtype=np.int32)
            if lanes is True:
                tr[:n] = ids
            else:
                np.copyto(tr[:n], ids, where=lanes[:n])
            setattr(st, kind, tr)
        st.ident_written = st.ident_read = False

    def _note_read(self, st: ArrayStore, addr: Addr, mask: Mask) -> None:
        if st.writer is None and st.reader is None and st.atomic is None:
            if st.ident_written is False and not st.track_reads:
                return  # nothing stored yet and nobody will store: nothing to record
            if addr is self.geo.lane_ids:
                # element t by thread t: cannot conflict with other such accesses
                if st.track_reads:
                    st.ident_read = self._lanes_union(st.ident_read, mask)
                return
        self._materialize(st)
        if isinstance(addr, int):
            lanes = self.geo.lane_ids if mask is None else np.flatnonzero(mask)
            if lanes.size == 0:
                return
            self._atomic_conflict(st, np.full(lanes.size, addr), lanes, "reads it")
            if st.writer is not None:
                w = int(st.writer[addr])
                if w >= 0:
                    others = lanes[lanes != w]
                    if others.size:
                        raise self._race(st, addr, int(others[0]), w,
                                         "reads it after it was stored by")
            if st.track_reads:
                if st.reader is None:
                    st.reader = np.full(st.data.size, _NONE, dtype=np.int32)
                r = int(st.reader[addr])
                t0 = int(lanes[0])
                single = lanes.size == 1 and r in (_NONE, t0)
                st.reader[addr] = t0 if single else _MANY
            return
        a, t = self._active(addr, mask)
        self._atomic_conflict(st, a, t, "reads it")
        if st.writer is not None:
            w = st.writer[a]
            bad = (w >= 0) & (w != t)
            if bad.any():
                k = int(np.argmax(bad))
                raise self._race(st, self._at(a, k), int(t[k]), int(w[k]),
                                 "reads it after it was stored by")
        if st.track_reads:
            if st.reader is None:
                st.reader = np.full(st.data.size, _NONE, dtype=np.int32)
                st.reader[a] = t
            else:
                r = st.reader[a]
                st.reader[a] = np.where((r == _NONE) | (r == t), t, _MANY).astype(np.int32)
            if not isinstance(a, slice):
                dup = _duplicate(a)
                if dup is not None:
                    keys = np.unique(a)
                    counts = np.bincount(np.searchsorted(keys, a), minlength=keys.size)
                    st.reader[keys[counts > 1]] = _MANY

    def _note_write(self, st: ArrayStore, addr: Addr, mask: Mask) -> None:
        if (st.writer is None and st.reader is None and st.atomic is None
                and addr is self.geo.lane_ids):
            st.ident_written = self._lanes_union(st.ident_written, mask)
            return
        self._materialize(st)
        if isinstance(addr, int):
            lanes = self.geo.lane_ids if mask is None else np.flatnonzero(mask)
            if lanes.size == 0:
                return
            if lanes.size > 1:
                raise self._race(st, addr, int(lanes[1]), int(lanes[0]), "stores it as does")
            a: Any = np.array([addr])
            t = lanes.astype(np.int32)
        else:
            a, t = self._active(addr, mask)
        self._atomic_conflict(st, a, t, "stores it")
        if st.reader is not None:
            r = st.reader[a]
            bad = (r != _NONE) & (r != t)
            if bad.any():
                k = int(np.argmax(bad))
                raise self._race(st, self._at(a, k), int(t[k]), int(r[k]),
                                 "stores it after it was read by")
        if st.writer is None:
            st.writer = np.full(st.data.size, _NONE, dtype=np.int32)
        else:
            w = st.writer[a]
            bad = (w >= 0) & (w != t)
            if bad.any():
                k = int(np.argmax(bad))
                raise self._race(st, self._at(a, k), int(t[k]), int(w[k]),
                                 "stores it after it was stored by")
        if not isinstance(a, slice):
            dup = _duplicate(a)
            if dup is not None:
                i, j = dup
                raise self._race(st, int(a[i]), int(t[j]), int(t[i]), "stores it as does")
        st.writer[a] = t

    @staticmethod
    def _at(a: Any, k: int) -> int:
        return k if isinstance(a, slice) else int(a[k])
