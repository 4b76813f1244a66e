"""Pipeline temporaries: ``p.empty``/``p.empty_like`` (specs/frontend.md FE-70 .. FE-76).

A temporary is an array made inside ``with sarek_py.pipeline() as p:`` that lives only on
the pipeline's device: fresh memory nobody else holds. It is passed to launches like an
array. While the block records, a launch records the :class:`Temporary` itself (the
fusion sees one whole device buffer, its ``buffer_id``); when the launches run, each
temporary still bound is a :class:`~sarek_py.runtime.arrays.DeviceArray` of the
pipeline's backend, allocated then, and nothing is copied in or out.

At the pipeline's final run (the end of the ``with`` block, when every launch is known),
:func:`~sarek_py.fusion.epilogue.dead_stores.drop_dead_stores` is asked to drop the
stores of each temporary that nobody can see (FE-71): bound to one parameter of one fused
launch of that run and to no other launch of the pipeline, not kept (``p.keep(t)``), not
read by the host inside the block. A temporary whose stores were dropped is never
allocated; reading it after the pipeline is a :class:`DeadTemporaryError` saying to keep
it (FE-73). Every other case keeps the stores, and the report says why (FE-74).
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import numpy as np
from numpy.typing import NDArray

from sarek_py.fusion.epilogue.dead_stores import StoreNote, drop_dead_stores
from sarek_py.fusion.epilogue.traffic import traffic_bound
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.effects import kernel_writes
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.types import ArrayType
from sarek_py.runtime.arrays import DeviceArray, empty

if TYPE_CHECKING:
    from sarek_py.runtime.base import Backend


class TemporaryError(SarekError):
    """A pipeline temporary used in a way it cannot be (FE-70, FE-72, FE-73)."""


class DeadTemporaryError(TemporaryError):
    """A read, after its pipeline, of a temporary whose stores were dropped (FE-73)."""


class Owner(Protocol):
    """What a temporary reads of its pipeline."""

    backend: str | None

    @property
    def is_open(self) -> bool: ...

    def run(self) -> list[Any]: ...

    def _backend(self) -> Any: ...


_SERIAL = itertools.count(1)
_ASSIGNED = re.compile(
    r"(?:^\s*|\(\s*)([A-Za-z_]\w*)\s*(?::[^=]*)?:?=\s*[\w.(\s]*empty(?:_like)?\s*\(")


#: names found, by call site (code object, instruction): a pipeline in a loop makes its
#: temporaries at the same sites each time (FE-82's host cost)
_NAMES: dict[tuple[object, int], tuple[str | None, str]] = {}


def _caller_name(depth: int) -> tuple[str | None, str]:
    """The variable a ``t = p.empty…(…)`` line assigns, and ``file:line`` of the call."""
    frame = inspect.currentframe()
    for _ in range(depth + 1):
        frame = frame.f_back if frame is not None else None
    if frame is None:
        return None, "?"
    site = (frame.f_code, frame.f_lasti)
    hit = _NAMES.get(site)
    if hit is None:
        if len(_NAMES) > 4096:
            _NAMES.clear()
        hit = _NAMES[site] = _name_at(frame)
    return hit


def _name_at(frame: Any) -> tuple[str | None, str]:
    info = inspect.getframeinfo(frame, context=1)
    where = f"{info.filename.rsplit('/', 1)[-1]}:{info.lineno}"
    line = info.code_context[0] if info.code_context else ""
    pos = info.positions
    col = pos.col_offset if pos is not None and pos.lineno == info.lineno else None
    if col is not None:  # the statement of this call: ``t = …; u = p.empty(…)`` names u
        line = line[line.rfind(";", 0, col) + 1:]
    elif line.count("empty") > 1:
        return None, where  # which of the calls on the line this is is not known
    m = _ASSIGNED.search(line)
    return (m.group(1) if m else None), where


class Temporary:
    """An array of a pipeline that lives only on its device (FE-70): ``shape``,
    ``dtype``, ``size``, ``nbytes``, ``ndim``, ``backend`` like a device array; ``get()``,
    ``copy_to_host(out)`` and ``np.asarray(t)`` read it (inside the block they run the
    launches recorded so far first, FE-72; after it they refuse a dead one, FE-73)."""

    def __init__(self, table: Temporaries, shape: tuple[int, ...], dtype: np.dtype[Any],
                 name: str | None, where: str):
        self._table = table
        self.serial = next(_SERIAL)
        self._shape = shape
        self._dtype = dtype
        self.name = name or f"temporary #{self.serial}"
        self.where = where
        #: ``recorded`` (not run yet), ``live`` (allocated), ``dead`` (stores dropped)
        self.state = "recorded"
        self.array: DeviceArray | None = None
        self.dropped_from: str | None = None

    # ------------------------------------------------------------------ attributes

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._dtype

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self._dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def backend(self) -> str:
        """The name of the pipeline's backend."""
        return str(self._table.backend_object().name)

    @property
    def buffer_id(self) -> tuple[str, int]:
        """One whole buffer of its own (the fusion's buffer identity, LEG-1)."""
        return ("temporary", self.serial)

    def __repr__(self) -> str:
        return (f"Temporary({self.name}, shape={self._shape}, dtype={self._dtype}, "
                f"{self.state})")

    # ------------------------------------------------------------------ launches

    def sarek_argument(self, where: str, t: ArrayType) -> Temporary | DeviceArray:
        """What a launch binds for this temporary (called by the launch's argument check):
        the temporary itself while its pipeline records, its device array after."""
        if self._dtype != t.elem.dtype or self.ndim != t.rank:
            raise TemporaryError(
                f"{where} must be an array of dtype {t.elem.dtype} and rank {t.rank}, not "
                f"the temporary {self.name} of dtype {self._dtype} and rank {self.ndim}")
        if self._table.owner.is_open and self.state != "dead":
            self._table.recorded.add(self.serial)
            return self
        # a temporary whose stores an earlier block dropped holds nothing (red team x14)
        return self._device(f"pass it to {where}")

    def _device(self, what: str) -> DeviceArray:
        """The device array of this temporary after its pipeline ran (FE-73)."""
        if self.state == "dead":
            raise DeadTemporaryError(
                f"cannot {what}: the temporary {self.name} (made at {self.where}) was not "
                f"stored: nobody read it in its pipeline, so the fused kernel "
                f"{self.dropped_from} dropped its stores (FE-73); call p.keep({self.name}) "
                "inside the with block to read it after the pipeline")
        if self._table.owner.is_open:
            self._table.host_read(self)
        elif self.state == "recorded" and self._table.never_ran(self):
            raise TemporaryError(
                f"cannot {what}: the launches that write the temporary {self.name} (made "
                f"at {self.where}) never ran (the pipeline ended with an error)")
        return self._table.allocate(self)

    # ------------------------------------------------------------------ host reads

    def get(self) -> NDArray[Any]:
        """A new host copy of the contents (FE-72, FE-73)."""
        return self._device(f"read {self.name}").get()

    def copy_to_host(self, out: NDArray[Any]) -> NDArray[Any]:
        """Copy the contents into the numpy array ``out`` and return it."""
        return self._device(f"read {self.name}").copy_to_host(out)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> NDArray[Any]:
        if copy is False:
            raise ValueError(f"the temporary {self.name} cannot be viewed as a numpy array "
                             "without a copy: use .get()")
        out = self.get()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, index: Any) -> Any:
        raise TemporaryError(f"the temporary {self.name} is a whole device buffer and "
                             "cannot be indexed: copy it to the host with .get() first")

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d temporary")
        return self._shape[0]


def _shape(shape: Any) -> tuple[int, ...]:
    ext = tuple(shape) if isinstance(shape, tuple | list) else (shape,)
    if not ext or any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0
                      for n in ext):
        raise TemporaryError(f"p.empty: the shape must be a non-negative integer or a tuple "
                             f"of them, not {shape!r}")
    return tuple(int(n) for n in ext)


class Temporaries:
    """The temporaries of one pipeline, and what the pipeline knows of each (FE-71)."""

    def __init__(self, owner: Owner):
        self.owner = owner
        self.items: list[Temporary] = []
        self._kept: set[int] = set()
        self._host: set[int] = set()
        #: bound in a run that was not the pipeline's final one (FE-71)
        self._earlier: set[int] = set()
        self._used: set[int] = set()
        #: passed to a launch while the block recorded
        self.recorded: set[int] = set()
        #: what the final runs did with each candidate's stores (FE-74)
        self.notes: list[StoreNote] = []
        #: per run, the traffic bound of its launches unfused and as run (EF-35)
        self.traffic: list[tuple[int, int]] = []

    def backend_object(self) -> Backend:
        out: Backend = self.owner._backend()
        return out

    # ------------------------------------------------------------------ making

    def empty(self, shape: Any, dtype: Any, name: object, depth: int = 2) -> Temporary:
        if not self.owner.is_open:
            raise TemporaryError("p.empty/p.empty_like make temporaries inside the "
                                 "pipeline's with block only")
        guess, where = _caller_name(depth)
        if name is not None and not isinstance(name, str):
            raise TemporaryError(f"p.empty(name=...) takes a string, not {name!r}")
        try:
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise TemporaryError(f"p.empty: {dtype!r} is not a dtype") from exc
        if dt.hasobject or dt.fields is not None or dt.itemsize == 0:  # as sarek_py.empty
            raise TemporaryError(f"p.empty: a temporary holds plain numbers, not {dt}")
        t = Temporary(self, _shape(shape), dt, name if isinstance(name, str) else guess,
                      where)
        self.items.append(t)
        return t

    def keep(self, t: object) -> Temporary:
        if not isinstance(t, Temporary) or t._table is not self:
            raise TemporaryError(f"p.keep takes a temporary of this pipeline (made by "
                                 f"p.empty or p.empty_like), not {type(t).__name__}")
        if not self.owner.is_open:
            raise TemporaryError(f"p.keep({t.name}) must be called inside the with block, "
                                 "before the launches run")
        self._kept.add(t.serial)
        return t

    def host_read(self, t: Temporary) -> None:
        """A host read inside the block: the launches recorded so far run first (FE-72),
        and the temporary's stores are kept from then on."""
        self._host.add(t.serial)
        self.owner.run()

    def never_ran(self, t: Temporary) -> bool:
        """Whether a launch recorded ``t`` and none of its launches ran."""
        return t.serial in self.recorded and t.serial not in self._used

    def allocate(self, t: Temporary) -> DeviceArray:
        if t.array is None:
            t.array = empty(t.shape, t.dtype, self.backend_object())
        t.state = "live"
        return t.array

    # ------------------------------------------------------------------ running

    def report_lines(self) -> list[str]:
        """What happened to the temporaries' stores, in the user's names, and the memory
        traffic bound of the runs against the unfused launches (FE-74, EF-35)."""
        lines = [str(n) for n in self.notes]
        if self.traffic and self.items:  # said for pipelines with temporaries only
            unfused = sum(u for u, _ in self.traffic)
            fused = sum(f for _, f in self.traffic)
            ratio = f" ({fused / unfused:.2f} of unfused)" if unfused else ""
            lines.append(f"memory traffic bound: {fused} bytes run, {unfused} bytes for the "
                         f"launches unfused{ratio}")
        return lines

    def bind(self, recorded: Sequence[Launch], launches: Sequence[Launch], final: bool
             ) -> list[Launch]:
        """The launches to run, from the ``recorded`` ones after fusion: at the ``final``
        run, each fused launch without the stores of the temporaries nobody can see
        (FE-71); every temporary still bound replaced by its device array (allocated now,
        FE-70)."""
        if not self.items and not any(isinstance(a, Temporary)
                                      for lc in launches for a in lc.args):
            return list(launches)  # no temporary here: nothing to drop or allocate (FE-82)
        mine = {t.serial: t for t in self.items}
        where: dict[int, list[tuple[int, int]]] = {}
        for i, lc in enumerate(launches):
            for j, a in enumerate(lc.args):
                if isinstance(a, Temporary):
                    if a._table is not self:
                        raise TemporaryError(f"the temporary {a.name} belongs to another "
                                             "pipeline")
                    where.setdefault(a.serial, []).append((i, j))
        out = list(launches)
        if final:
            self._drop(out, where, mine)
        else:
            for s, sites in where.items():
                if s not in self._earlier:
                    i, j = sites[0]
                    why = ("the host read it inside the pipeline, so the launches recorded "
                           "before ran then (FE-72)" if s in self._host else
                           "it ran in a p.run() inside the with block, before every "
                           "launch of the pipeline was known (FE-71)")
                    self.notes.append(StoreNote(out[i].kernel.params[j].name, mine[s].name,
                                                False, why, out[i].kernel.name))
        for s in where:
            self._used.add(s)
            if not final:
                self._earlier.add(s)
        if self.items:  # the report says it for pipelines with temporaries only
            before, after = traffic_bound(recorded), traffic_bound(out)
            if before is not None and after is not None:
                self.traffic.append((before, after))
        return [self._substitute(lc) for lc in out]

    def _why_visible(self, t: Temporary, sites: list[tuple[int, int]]) -> str | None:
        """Why someone may see ``t`` besides the one launch that binds it (FE-71)."""
        if t.serial in self._kept:
            return f"it is kept (p.keep({t.name}))"
        if t.serial in self._host:
            return "the host read it inside the pipeline"
        if t.serial in self._earlier:
            return "an earlier run of this pipeline (p.run() or a host read) used it"
        if len({i for i, _ in sites}) > 1:
            return "another launch of the pipeline uses it too"
        if len(sites) > 1:
            return "it is passed twice to the launch (aliased)"
        return None

    def _drop(self, out: list[Launch], where: dict[int, list[tuple[int, int]]],
              mine: dict[int, Temporary]) -> None:
        """Offer each temporary nobody else can see to its fused launch (FE-71); note
        why the others keep their stores (FE-74)."""
        offers: dict[int, dict[str, int]] = {}
        names: dict[int, dict[str, str]] = {}
        for s, sites in where.items():
            if s in self._earlier:
                continue  # noted at the run that bound it first (FE-71)
            t = mine[s]
            i, j = sites[0]
            lc = out[i]
            param = lc.kernel.params[j].name
            why = self._why_visible(t, sites)
            if lc.kernel.requires is None and _written(lc, j):
                why = (f"its launch ({lc.kernel.name}) was not fused, so its stores are "
                       "that launch's result (EF-30)" + (f"; and {why}" if why else ""))
            elif lc.kernel.requires is None and why is None:
                why = (f"{lc.kernel.name} only reads it and no other launch of the "
                       "pipeline uses it: it holds no value written here")
            if why is not None:
                self.notes.append(StoreNote(param, t.name, False, why, lc.kernel.name))
                continue
            offers.setdefault(i, {})[param] = t.size
            names.setdefault(i, {})[param] = t.name
        for i, candidates in offers.items():
            lc = out[i]
            new, notes = drop_dead_stores(lc, candidates, names[i])
            self.notes.extend(notes)
            by_param = dict(zip((p.name for p in lc.kernel.params), lc.args, strict=False))
            for n in notes:
                bound = by_param.get(n.array)
                if n.dropped and isinstance(bound, Temporary):
                    bound.state = "dead"
                    bound.dropped_from = lc.kernel.name
            out[i] = new

    def _substitute(self, lc: Launch) -> Launch:
        if not any(isinstance(a, Temporary) for a in lc.args):
            return lc
        args = tuple(self.allocate(a) if isinstance(a, Temporary) else a for a in lc.args)
        out: Launch = attrs.evolve(lc, args=args)
        return out


def _written(lc: Launch, index: int) -> bool:
    """Whether ``lc``'s kernel writes its array parameter ``index``."""
    return lc.kernel.params[index].name in kernel_writes(lc.kernel)
