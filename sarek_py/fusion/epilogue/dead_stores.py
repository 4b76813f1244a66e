"""Dead stores of a fused launch's intermediates (specs/epilogue-fusion.md EF-30 .. EF-35).

The epilogue fusion (EF-8) keeps every store of the intermediate ``I`` and lets the
inserted consumer read ``I[ep_t]`` back from memory. When the caller (a pipeline, which
sees every launch) has proved that nobody else can see ``I`` — fresh memory no launch
after this one reads and nobody reads after the pipeline (specs/frontend.md FE-70 ..
FE-75) — :func:`drop_dead_stores` rewrites the fused launch so that:

1. the value stored is kept in a local, ``let ep_v = v``, and the inserted consumer's
   reads ``I[c_i]`` become ``ep_v`` (EF-31: the value it would read back, since no one
   else stores that element: LEG-3);
2. when nothing of the fused kernel reads, passes, measures or writes ``I`` any more but
   those stores (EF-32), and every element they store is inside ``I`` (EF-34), the stores
   and the parameter go: the step is marked ``dead`` (EF-33) and each launch proves it
   again on ghost stores where the dropped ones were.

Every obligation is checked on the kernel and the launch; one that does not hold keeps
the stores, with a reason in the user's names (:class:`StoreNote`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from sarek_py.analysis.value_scalars import value_only_params
from sarek_py.fusion.epilogue.accesses import accesses_stmt
from sarek_py.fusion.epilogue.conditions import producer_part
from sarek_py.fusion.epilogue.legality import Aff, GSet, _Analysis, _Unsure
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.memo import LruCache
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    If,
    Kernel,
    Length,
    Let,
    Read,
    Ref,
    Seq,
    Stmt,
    Store,
    Var,
    reserve_ids,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.requires import FusionStep, ThreadStep
from sarek_py.ir.thread_index import on_launch
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import iter_nodes, map_node, max_var_id

__all__ = ["StoreNote", "drop_dead_stores", "stored_span"]


@attrs.frozen
class StoreNote:
    """What :func:`drop_dead_stores` did with one candidate intermediate: ``array`` (the
    fused kernel's parameter), ``name`` (the user's), whether its stores were dropped,
    and why (or why not)."""

    array: str
    name: str
    dropped: bool
    reason: str
    kernel: str

    def __str__(self) -> str:
        if self.dropped:
            return f"{self.name}: stores dropped from {self.kernel} ({self.reason})"
        return f"{self.name}: stores kept in {self.kernel}: {self.reason}"


# ------------------------------------------------------------------------------ bounds


def stored_span(launch: Launch, array: str) -> tuple[int, int] | None:
    """The smallest and largest element of ``array`` that ``launch`` stores (``None``
    when it stores none), by LEG-2's analysis with the launch's numbers; raises
    :class:`FusionRefused` when the stores cannot be followed (EF-34)."""
    t, b = launch.threads, launch.block
    if not (isinstance(t, int) and isinstance(b, int)):
        raise FusionRefused("EF-34", "the launch's thread count and block size are not "
                            "numbers")
    k = on_launch(launch.kernel, t, b)
    an = _Analysis(attrs.evolve(launch, kernel=k), k.param(array), GSet.range(0, t - 1))
    named = launch.by_name
    for p in k.params:
        if not p.is_array and p.name in named:
            v = named[p.name]
            if p.type is Scalar.BOOL and isinstance(v, (bool, np.bool_)):
                an.env[p.id] = an.universe if bool(v) else GSet()
            elif isinstance(p.type, Scalar) and p.type.is_int and isinstance(
                    v, (int, np.integer)) and not isinstance(v, bool):
                an.env[p.id] = Aff(0, int(v))
    try:
        items, _ = an.walk(k.body, an.universe)
    except _Unsure as u:
        raise FusionRefused("EF-34", u.message, u.loc) from None
    # a grid-stride loop's pieces are over its elements (LEG-21's element view), the
    # others over thread ids: either way ``f`` maps each to the element stored
    ends = [f.at(x) for gs, f in items for lo, hi in gs.spans for x in (lo, hi)]
    return (min(ends), max(ends)) if ends else None


def _spans(launch: Launch, wanted: Mapping[str, int]) -> dict[str, str | None]:
    """For each intermediate of ``wanted`` (parameter -> its length in elements), why its
    stores are not all within it (``None`` when they are, EF-34): each step's stores
    are followed in its producer part, outermost step first (as LEG-14 does)."""
    out: dict[str, str | None] = {}
    part = launch.kernel
    req = part.requires
    assert req is not None
    for step in req.steps:
        if isinstance(step, ThreadStep):
            continue
        part = producer_part(part, step)
        if step.array not in wanted or step.dead:
            continue
        n = wanted[step.array]
        try:
            span = stored_span(attrs.evolve(launch, kernel=part), step.array)
        except FusionRefused as r:
            out[step.array] = f"its stores could not be followed to prove them within its " \
                              f"{n} elements (EF-34): {r.reason}"
            continue
        if span is not None and not (0 <= span[0] and span[1] < n):
            out[step.array] = (f"{step.producer} stores elements {span[0]}..{span[1]} of it, "
                               f"not all within its {n} elements: the unfused launch would "
                               "fault there (EF-34)")
        else:
            out[step.array] = None
    return out


# -------------------------------------------------------------------------- forwarding


@attrs.frozen
class _Site:
    """One inserted consumer (EF-8): ``let ep_t = e in (I[ep_t] <- v ; if ep_t < ep_tc
    then (let c_i = x in body))``."""

    let: Let
    store: Store
    guard: If


def _site(s: Stmt, array: Var, tmp: str, count: str) -> _Site | None:
    if not (isinstance(s, Let) and s.var.name == tmp and isinstance(s.body, Seq)
            and len(s.body.stmts) == 2):
        return None
    st, guard = s.body.stmts
    if not (isinstance(st, Store) and st.array == array and st.index == (Ref(s.var),)
            and isinstance(guard, If) and guard.else_ is None
            and isinstance(guard.then, Let) and isinstance(guard.cond, Binary)
            and guard.cond.op is BinaryOp.LT and guard.cond.lhs == Ref(s.var)):
        return None
    rhs = guard.cond.rhs
    rhs = rhs.arg if isinstance(rhs, Cast) else rhs
    if not (isinstance(rhs, Ref) and rhs.var.name == count):
        return None
    return _Site(s, st, guard)


def _forward(k: Kernel, array: Var, step: FusionStep, next_id: int
             ) -> tuple[Stmt, list[int], int, str | None]:
    """``k``'s body with the stored value kept in ``ep_v`` at each inserted consumer of
    ``step`` whose body does not write ``array`` (EF-31), the ids of the ``ep_v``s made,
    the next free id, and why some site was not forwarded."""
    own = step.own_prefix()  # given when FE-97 merged the count (specs/frontend.md)
    prefix = step.count[: -len("ep_tc")] if own is None else own
    tmp, made, why = prefix + "ep_t", [], None
    nid = next_id

    def at(s: Stmt) -> Stmt | None:
        nonlocal nid, why
        site = _site(s, array, tmp, step.count)
        if site is None:
            return None
        inner = site.guard.then
        assert isinstance(inner, Let)
        writes = [a for a in accesses_stmt(inner.body, k.helpers)
                  if a.array == array and a.write]
        if writes:
            why = why or (f"{step.consumer} writes it too, so the value it reads is not "
                          "only the one stored (EF-31)")
            return None
        assert isinstance(array.type, ArrayType)
        ev = Var(prefix + "ep_v", nid, array.type.elem)
        nid += 1
        made.append(ev.id)
        here = Ref(inner.var)

        def load(e: object) -> object | None:
            if isinstance(e, Read) and e.array == array and e.index == (here,):
                return Ref(ev)
            return None

        body = map_node(inner.body, expr=load)  # type: ignore[arg-type]
        guard = attrs.evolve(site.guard, then=attrs.evolve(inner, body=body))
        store = attrs.evolve(site.store, value=Ref(ev))
        return attrs.evolve(site.let, body=Let(ev, site.store.value, Seq((store, guard)),
                                               loc=site.store.loc))

    body: Stmt = map_node(k.body, stmt=at)
    return body, made, nid, why


def _drop(body: Stmt, array: Var, made: Sequence[int]) -> Stmt:
    """``body`` without the stores ``I[ep_t] <- ep_v`` that :func:`_forward` made."""
    ids = frozenset(made)

    def at(s: Stmt) -> Stmt | None:
        if (isinstance(s, Let) and s.var.id in ids and isinstance(s.body, Seq)
                and len(s.body.stmts) == 2 and isinstance(s.body.stmts[0], Store)
                and s.body.stmts[0].array == array):
            return attrs.evolve(s, body=s.body.stmts[1])
        return None

    out: Stmt = map_node(body, stmt=at)
    return out


def _still_used(k: Kernel, body: Stmt, array: Var) -> str | None:
    """Why the fused kernel still reads or uses ``array`` once the forwarded stores are
    gone (EF-32), or ``None``."""
    for a in accesses_stmt(body, k.helpers):
        if a.array != array:
            continue
        if a.index is None:
            return f"the fused kernel {k.name} passes it to a helper function (EF-32)"
        where = user_text(f"{array.name}[{', '.join(print_expr(e) for e in a.index)}]")
        if a.write:
            return (f"the fused kernel {k.name} also stores {where} besides the stores its "
                    "consumer reads right after (EF-32)")
        return (f"the fused kernel {k.name} still reads {where}, not only the consumer's "
                "element just stored (EF-32)")
    for n in iter_nodes(body):
        if isinstance(n, Length) and n.array == array:
            return f"the fused kernel {k.name} reads its length (EF-32)"
    seen = [v for n in iter_nodes(body) for v in _vars_of(n) if v == array]
    if seen:
        return f"the fused kernel {k.name} still uses it (an atomic or another access, EF-32)"
    return None


def user_text(text: str) -> str:
    """``text`` with the fusion's ``p_``/``c_`` prefixes of names taken off (EF-5): the
    names as the user wrote them in the kernels."""
    return re.sub(r"\b(?:[pc]_)+(?=\w)", "", text)


def _vars_of(n: Any) -> list[Var]:
    out: list[Var] = []
    for f in attrs.fields(type(n)):
        v = getattr(n, f.name)
        if isinstance(v, Var):
            out.append(v)
    return out


# ------------------------------------------------------------------------------ driver


#: decisions already made, by the fused kernel's identity and what the proofs read of the
#: launch: a pipeline run again gets the same rewritten kernel object (so the backends'
#: per-kernel caches and the launch-condition proofs are found again, LCH-17)
_DONE: LruCache[Hashable, tuple[Kernel, Kernel, tuple[int, ...], tuple[StoreNote, ...]]] = (
    LruCache(256))


def _value_key(v: object) -> Hashable:
    if isinstance(v, np.generic):
        return ("g", v.dtype.str, v.tobytes())
    if isinstance(v, bool | int | float | str):
        return (type(v).__name__, v)
    shape = getattr(v, "shape", None)
    if shape is not None:
        return ("array", tuple(int(n) for n in shape))
    return ("object", id(v))


def _key(launch: Launch, candidates: Mapping[str, int]) -> Hashable:
    """What the proofs read of the launch (never the user's names: an unnamed temporary
    is called anew at each run, and the rewritten kernel must be found again, FE-82);
    a scalar whose value only becomes stored values by its type (FE-93: a time loop's
    changing step finds the rewritten kernel again)."""
    free = value_only_params(launch.kernel)  # FE-93: their values decide nothing
    return (id(launch.kernel), tuple(sorted(candidates.items())), launch.thread_count,
            launch.block_size, launch.grid, launch.block_shape,
            tuple(("value only", type(a).__name__, getattr(a, "dtype", None))
                  if i in free else _value_key(a) for i, a in enumerate(launch.args)))


def _named(notes: Sequence[StoreNote], names: Mapping[str, str]) -> list[StoreNote]:
    """The notes with this run's user names of the intermediates."""
    return [attrs.evolve(n, name=names.get(n.array, n.array)) for n in notes]


def drop_dead_stores(launch: Launch, candidates: Mapping[str, int],
                     names: Mapping[str, str] | None = None
                     ) -> tuple[Launch, list[StoreNote]]:
    """Drop the stores of each intermediate of the fused ``launch`` named in
    ``candidates`` (its parameter -> the length in elements of the buffer bound to it)
    whose drop the kernel and launch prove (EF-30 .. EF-35). The caller has proved that
    nobody outside the launch can see those buffers (FE-71); ``names``: the user's name of
    each, for the notes. Returns the launch (its kernel without the dropped stores and
    parameters, its arguments without theirs) and one note per candidate."""
    names = names or {}
    key = _key(launch, candidates)
    hit = _DONE.get(key)
    if hit is not None and hit[0] is launch.kernel:
        _, k, kept, notes = hit
        if k is launch.kernel:
            return launch, _named(notes, names)
        return attrs.evolve(launch, kernel=k, args=tuple(launch.args[i] for i in kept),
                            scratch=_scratch(launch, kept)), _named(notes, names)
    out, new_notes = _drop_dead_stores(launch, candidates, names)
    kept_idx = tuple(range(len(launch.args))) if out is launch else _kept(launch, out)
    _DONE.put(key, (launch.kernel, out.kernel, kept_idx, tuple(new_notes)))
    return out, new_notes


def _kept(launch: Launch, out: Launch) -> tuple[int, ...]:
    names = {p.name for p in out.kernel.params}
    return tuple(i for i, p in enumerate(launch.kernel.params) if p.name in names)


def _scratch(launch: Launch, kept: Sequence[int]) -> tuple[Any, ...]:
    where = {i: j for j, i in enumerate(kept)}
    return tuple(attrs.evolve(sb, argument=where[sb.argument]) for sb in launch.scratch)


def _drop_dead_stores(launch: Launch, candidates: Mapping[str, int],
                      names: Mapping[str, str]) -> tuple[Launch, list[StoreNote]]:
    notes: list[StoreNote] = []
    k = launch.kernel
    req = k.requires
    if req is None:
        return launch, [StoreNote(a, names.get(a, a), False, f"{k.name} is not a fused "
                                  "kernel: the launch's stores are its result", k.name)
                        for a in candidates]
    steps = {s.array: s for s in req.steps if isinstance(s, FusionStep) and not s.dead}
    spans = _spans(launch, {a: n for a, n in candidates.items() if a in steps})
    next_id = max_var_id(k) + 1
    new_steps = list(req.steps)
    dropped: list[str] = []
    for a in candidates:
        user = names.get(a, a)

        def keep(why: str, user: str = user, a: str = a) -> None:
            notes.append(StoreNote(a, user, False, why, launch.kernel.name))

        step = steps.get(a)
        if step is None:
            if any(isinstance(s, ThreadStep) for s in req.steps):
                keep("it is not the intermediate of an epilogue fusion here; a thread-wise "
                     "fusion (LEG-30) reads it back from memory (EF-30)")
            else:
                keep("it is not the intermediate of an epilogue fusion in this kernel, so "
                     "no consumer reads it right after its store (EF-30)")
            continue
        readers = [s.consumer for s in req.steps
                   if isinstance(s, FusionStep) and s.array == a and not s.dead]
        if len(readers) > 1:
            keep(f"it is the intermediate of {len(readers)} fused steps (consumers "
                 f"{', '.join(reversed(readers))} read it); only a single consumer's read "
                 "is forwarded (EF-30)")
            continue
        if any(a in g for g in req.same):
            keep("it is bound to another parameter of the fused launch too (the same "
                 "array passed twice, EF-30)")
            continue
        if spans.get(a) is not None:
            keep(str(spans[a]))
            continue
        array = k.param(a)
        body, made, nid, why = _forward(k, array, step, next_id)
        body = _drop(body, array, made)
        used = _still_used(k, body, array)
        if used is not None or not made:
            keep(why or used or "no store of it was found to drop (EF-32)")
            continue
        next_id = nid
        idx = new_steps.index(step)
        new_steps[idx] = attrs.evolve(step, dead=True)
        k = attrs.evolve(k, body=body, params=tuple(p for p in k.params if p != array))
        dropped.append(a)
        notes.append(StoreNote(a, user, True, f"nobody reads it: the consumer "
                               f"{step.consumer} takes the value stored from a local "
                               "(EF-31..EF-33)", launch.kernel.name))
    if not dropped:
        return launch, notes
    reserve_ids(next_id)
    k = attrs.evolve(k, requires=attrs.evolve(req, steps=tuple(new_steps)))
    old = [p.name for p in launch.kernel.params]
    keep_idx = [i for i, n in enumerate(old) if n not in dropped]
    out = attrs.evolve(launch, kernel=k, args=tuple(launch.args[i] for i in keep_idx),
                       scratch=_scratch(launch, keep_idx))
    return out, notes
