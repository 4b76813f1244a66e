"""The kernel-language half of the one effect summary (specs/effects.md EFF-1..EFF-3,
EFF-9): per helper function and per kernel body, over the IR alone, so that every floor
(fusion, offload, the runtimes' launch facts, codegen) can ask it.
:mod:`sarek_py.analysis.effects` builds the host-program half on top of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.memo import IdentitiesCache
from sarek_py.ir.nodes import (
    Atomic,
    Call,
    Expr,
    HelperFunc,
    Intrinsic,
    Kernel,
    Read,
    Ref,
    Stmt,
    Stop,
    Store,
    Var,
)
from sarek_py.ir.visit import free_vars, iter_nodes

# ------------------------------------------------------------------------ helpers


@attrs.frozen
class HelperEffects:
    """EFF-1: what a helper function may do, itself or through the helpers it calls."""

    name: str
    #: positions of the array parameters it may read / write elements of
    reads: frozenset[int] = frozenset()
    writes: frozenset[int] = frozenset()
    may_stop: bool = False
    thread_intrinsic: bool = False
    #: INL-9: names nothing but its parameters (and its own lets), no thread intrinsic,
    #: calls only self-contained helpers
    self_contained: bool = True
    #: helpers called, transitively; functions called that no table defines
    calls: frozenset[str] = frozenset()
    unknown_calls: frozenset[str] = frozenset()
    #: the codes of the ``stop`` statements it may run (its own and its callees')
    stop_codes: frozenset[int] = frozenset()

    @property
    def on_cycle(self) -> bool:
        return self.name in self.calls


def _calls_in(node: Expr | Stmt) -> list[Call]:
    return [n for n in iter_nodes(node) if isinstance(n, Call)]


def _local_helper(h: HelperFunc) -> HelperEffects:
    pos = {p: k for k, p in enumerate(h.params) if p.is_array}
    reads: set[int] = set()
    writes: set[int] = set()
    stop = intr = False
    codes: set[int] = set()
    for n in iter_nodes(h.body):
        match n:
            case Read(array=a) if a in pos:
                reads.add(pos[a])
            case Store(array=a) if a in pos:
                writes.add(pos[a])
            case Atomic(array=a) if a in pos:  # EFF-12: an atomic reads and writes
                reads.add(pos[a])
                writes.add(pos[a])
            case Stop(code=code):
                stop = True
                codes.add(code)
            case Intrinsic(name=nm) if nm in THREAD_INTRINSICS:
                intr = True
            case _:
                pass
    own = not (free_vars(h.body) - set(h.params)) and not intr
    return HelperEffects(h.name, frozenset(reads), frozenset(writes), stop, intr, own,
                         stop_codes=frozenset(codes))


def _call_arrays(call: Call, positions: frozenset[int]) -> set[Var]:
    return {a.var for k, a in enumerate(call.args)
            if k in positions and isinstance(a, Ref) and a.var.is_array}


def _all_arrays(call: Call) -> set[Var]:
    return {a.var for a in call.args if isinstance(a, Ref) and a.var.is_array}


def _compute_helpers(helpers: tuple[HelperFunc, ...]) -> dict[str, HelperEffects]:
    """EFF-1, EFF-2: the local facts of each helper, joined along the calls until nothing
    changes (a least fixpoint for the may-facts, a greatest one for self-containedness)."""
    table = {h.name: h for h in helpers}
    state = {name: _local_helper(h) for name, h in table.items()}
    calls = {name: _calls_in(h.body) for name, h in table.items()}
    changed = True
    while changed:
        changed = False
        for name, h in table.items():
            cur = state[name]
            pos = {p: k for k, p in enumerate(h.params) if p.is_array}
            reads, writes = set(cur.reads), set(cur.writes)
            stop, intr, sc = cur.may_stop, cur.thread_intrinsic, cur.self_contained
            called, unknown = set(cur.calls), set(cur.unknown_calls)
            codes = set(cur.stop_codes)
            for c in calls[name]:
                g = state.get(c.func)
                if g is None:
                    unknown.add(c.func)
                    stop = intr = True
                    sc = False
                    mine = {pos[v] for v in _all_arrays(c) if v in pos}
                    reads |= mine
                    writes |= mine
                    continue
                called |= {c.func} | g.calls
                unknown |= g.unknown_calls
                codes |= g.stop_codes
                stop |= g.may_stop
                intr |= g.thread_intrinsic
                sc = sc and g.self_contained
                reads |= {pos[v] for v in _call_arrays(c, g.reads) if v in pos}
                writes |= {pos[v] for v in _call_arrays(c, g.writes) if v in pos}
            new = HelperEffects(name, frozenset(reads), frozenset(writes), stop, intr, sc,
                                frozenset(called), frozenset(unknown), frozenset(codes))
            if new != cur:
                state[name] = new
                changed = True
    return state


_HELPERS: IdentitiesCache[dict[str, HelperEffects]] = IdentitiesCache(256)


def helper_effects(helpers: Iterable[HelperFunc]) -> Mapping[str, HelperEffects]:
    """EFF-1: the summary of every helper of a table (the first definition of a name
    wins), cached for the same helper objects (EFF-9)."""
    seen: dict[str, HelperFunc] = {}
    for h in helpers:
        seen.setdefault(h.name, h)
    key = tuple(seen.values())
    hit = _HELPERS.get(key)
    if hit is not None:
        return hit
    out = _compute_helpers(key)
    _HELPERS.put(key, out)
    return out


@attrs.frozen
class KernelEffects:
    """EFF-3: what a kernel-language body may do: the arrays it reads and writes (directly,
    or through the helpers it passes them to), whether it may ``stop`` and why."""

    reads: frozenset[Var] = frozenset()
    writes: frozenset[Var] = frozenset()
    #: ``"stop"`` for a ``stop`` of its own, else the helpers through which it may stop
    stops: tuple[str, ...] = ()
    thread_intrinsic: bool = False
    calls: frozenset[str] = frozenset()
    unknown_calls: frozenset[str] = frozenset()
    #: the codes of the ``stop`` statements it may run (a call of an unknown function may
    #: stop with any code: see ``unknown_calls``)
    stop_codes: frozenset[int] = frozenset()

    @property
    def may_stop(self) -> bool:
        return bool(self.stops)


def kernel_effects(node: Expr | Stmt, helpers: Mapping[str, HelperEffects]
                   ) -> KernelEffects:
    """EFF-3: the effects of a kernel-language body over the summaries ``helpers``; a call
    of a function the table lacks may read and write every array it is passed and stop."""
    reads: set[Var] = set()
    writes: set[Var] = set()
    stops: list[str] = []
    intr = False
    calls: set[str] = set()
    unknown: set[str] = set()
    codes: set[int] = set()
    for n in iter_nodes(node):
        match n:
            case Read(array=a):
                reads.add(a)
            case Store(array=a):
                writes.add(a)
            case Atomic(array=a):  # EFF-12: an atomic reads and writes its array
                reads.add(a)
                writes.add(a)
            case Stop(code=code):
                codes.add(code)
                if "stop" not in stops:
                    stops.insert(0, "stop")
            case Intrinsic(name=nm) if nm in THREAD_INTRINSICS:
                intr = True
            case Call(func=f):
                g = helpers.get(f)
                if g is None:
                    unknown.add(f)
                    reads |= _all_arrays(n)
                    writes |= _all_arrays(n)
                    intr = True
                    if f not in stops:
                        stops.append(f)
                    continue
                calls |= {f} | g.calls
                unknown |= g.unknown_calls
                codes |= g.stop_codes
                reads |= _call_arrays(n, g.reads)
                writes |= _call_arrays(n, g.writes)
                intr |= g.thread_intrinsic
                if g.may_stop and f not in stops:
                    stops.append(f)
            case _:
                pass
    return KernelEffects(frozenset(reads), frozenset(writes), tuple(stops), intr,
                         frozenset(calls), frozenset(unknown), frozenset(codes))


def kernel_may_stop(kernel: Kernel) -> bool:
    """EFF-3: whether the kernel's body, or any helper of its table (called or not: the
    emitted source defines each one, CG-20), may run a ``stop``."""
    table = helper_effects(kernel.helpers)
    return (kernel_effects(kernel.body, table).may_stop
            or any(h.may_stop for h in table.values()))


def kernel_writes(kernel: Kernel) -> frozenset[str]:
    """EFF-3: the array parameters the kernel may store into, directly or through the
    helpers it passes them to."""
    written = kernel_effects(kernel.body, helper_effects(kernel.helpers)).writes
    return frozenset(p.name for p in kernel.params if p in written)


__all__ = ["HelperEffects", "KernelEffects", "helper_effects", "kernel_effects",
           "kernel_may_stop", "kernel_writes"]
