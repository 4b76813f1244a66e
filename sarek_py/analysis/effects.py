"""The one effect summary (specs/effects.md, EFF-1..EFF-11).

Every pass that asks what a piece of code may read, write, or whether it may end the
program early, asks this module: epilogue legality, inlining, loop fusion, ping-pong,
offload's sync placement and the device residency of offloaded programs.

* :class:`HelperEffects` -- per helper function (kernel language): the array parameters it
  reads and writes, whether it may ``stop``, uses a thread intrinsic, is self-contained,
  which helpers it calls; transitive through the helpers it calls, computed by a fixpoint
  (recursion-safe), cached per helper table (:func:`helper_effects`).
* :class:`KernelEffects` -- a kernel-language body (a parallel loop's iteration, a
  kernel's body) over a helper table (:func:`kernel_effects`).
* :class:`StmtEffects` -- a host statement (:meth:`ProgramEffects.stmt`), nested
  statements, parallel-loop bodies, launches and procedure calls included.
* :class:`ProcEffects` -- per host procedure, over its dummies and the variables it names
  from outside (the program's), transitive through the procedures and helpers it calls
  (a fixpoint: recursion-safe), cached per program (:func:`program_effects`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.nodes import (
    Call,
    Expr,
    HelperFunc,
    Intrinsic,
    Read,
    Ref,
    Stmt,
    Stop,
    Store,
    Var,
)
from sarek_py.ir.visit import free_vars, iter_nodes
from sarek_py.launch.launch import Launch, Sync
from sarek_py.launch.program import (
    Allocate,
    Block,
    Break,
    CallProc,
    Continue,
    Deallocate,
    HAssign,
    HFor,
    HIf,
    HostStmt,
    HReturn,
    HStop,
    HStore,
    Input,
    Intent,
    Output,
    ParFor,
    PointerAssoc,
    Procedure,
    Program,
    expr_vars,
    iter_host,
    named_vars,
)

#: output specifiers that only say where and how, defining nothing (EFF-5)
PLAIN_SPECIFIERS = frozenset({"unit", "fmt"})


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


@attrs.define
class _IdCache:
    """Values computed once per tuple of objects, looked up by their identities (each
    entry holds its objects, so their ids are not reused while it lives)."""

    limit: int = 256
    entries: dict[tuple[int, ...], tuple[tuple[object, ...], object]] = attrs.field(
        factory=dict)

    def get(self, key: tuple[object, ...]) -> object | None:
        hit = self.entries.get(tuple(id(x) for x in key))
        if hit is not None and len(hit[0]) == len(key) and all(
                a is b for a, b in zip(hit[0], key, strict=True)):
            return hit[1]
        return None

    def put(self, key: tuple[object, ...], value: object) -> None:
        if len(self.entries) >= self.limit:
            self.entries.clear()
        self.entries[tuple(id(x) for x in key)] = (key, value)


_HELPERS = _IdCache()


def helper_effects(helpers: Iterable[HelperFunc]) -> Mapping[str, HelperEffects]:
    """EFF-1: the summary of every helper of a table (the first definition of a name
    wins), cached for the same helper objects (EFF-9)."""
    seen: dict[str, HelperFunc] = {}
    for h in helpers:
        seen.setdefault(h.name, h)
    key = tuple(seen.values())
    hit = _HELPERS.get(key)
    if hit is not None:
        assert isinstance(hit, dict)
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


# ------------------------------------------------------------------ host statements


@attrs.frozen
class StmtEffects:
    """EFF-4..EFF-6: what a host statement may do, nested statements and calls included.

    ``reads``/``writes``: host variables (scalars and arrays; a store of one element writes
    the array). ``may_stop``: a ``stop`` may end the program while it runs (its own, in a
    parallel loop's body, in a helper such a body calls, in a launched kernel, in a called
    procedure). ``leaves``: ``break``/``continue`` that leave it (not caught by a loop inside
    it), ``return``. ``io``: the kinds of input/output it may do (``print``, ``write``,
    ``read``). ``constructs``: what it does besides reading and writing values
    (allocation, pointer association, launch, sync, input, an output specifier that
    defines a variable), described for messages."""

    reads: frozenset[Var] = frozenset()
    writes: frozenset[Var] = frozenset()
    may_stop: bool = False
    leaves: frozenset[str] = frozenset()
    io: frozenset[str] = frozenset()
    constructs: tuple[str, ...] = ()
    #: procedures called, transitively; helper functions called, transitively
    calls: frozenset[str] = frozenset()
    helpers: frozenset[str] = frozenset()
    #: arrays whose allocation it may change (allocate, deallocate, pointer association of
    #: a pointer; through a call, the actuals of the dummies its procedure may change)
    reallocates: frozenset[Var] = frozenset()

    @property
    def names(self) -> frozenset[Var]:
        """Every variable the statement may read or write."""
        return self.reads | self.writes

    def __or__(self, other: StmtEffects) -> StmtEffects:
        cons = self.constructs + tuple(c for c in other.constructs
                                       if c not in self.constructs)
        return StmtEffects(self.reads | other.reads, self.writes | other.writes,
                           self.may_stop or other.may_stop, self.leaves | other.leaves,
                           self.io | other.io, cons, self.calls | other.calls,
                           self.helpers | other.helpers,
                           self.reallocates | other.reallocates)


@attrs.frozen
class ProcEffects:
    """EFF-7: what a procedure may do, through the procedures and helpers it calls:
    ``reads``/``writes`` over its dummies and the variables it names from outside (its
    locals and loop indices are not effects); ``outer`` is the part of those outside."""

    name: str
    reads: frozenset[Var] = frozenset()
    writes: frozenset[Var] = frozenset()
    may_stop: bool = False
    io: frozenset[str] = frozenset()
    constructs: tuple[str, ...] = ()
    calls: frozenset[str] = frozenset()
    helpers: frozenset[str] = frozenset()
    outer: frozenset[Var] = frozenset()
    #: HP-6: names nothing but its dummies, locals and loop indices, calls only
    #: self-contained procedures
    self_contained: bool = True
    #: dummies and outside arrays whose allocation it may change
    reallocates: frozenset[Var] = frozenset()


def _bound(s: HostStmt) -> set[Var]:
    out: set[Var] = set()
    for x in iter_host(s):
        if isinstance(x, HFor):
            out.add(x.var)
        elif isinstance(x, ParFor):
            out |= set(x.vars) | set(x.locals)
    return out


def _through_pointers(e: StmtEffects, body: HostStmt) -> StmtEffects:
    """EFF-7: what ``body`` reads or writes through a pointer it associates (``p => t``)
    it reads or writes in the target too, transitively (the pointer may be a local, whose
    own effects a summary drops)."""
    targets: dict[Var, set[Var]] = {}
    for s in iter_host(body):
        if isinstance(s, PointerAssoc):
            targets.setdefault(s.pointer, set()).add(s.target)

    def close(vs: frozenset[Var]) -> frozenset[Var]:
        out, todo = set(vs), list(vs)
        while todo:
            for t in targets.get(todo.pop(), ()):
                if t not in out:
                    out.add(t)
                    todo.append(t)
        return frozenset(out)

    if not targets:
        return e
    return attrs.evolve(e, reads=close(e.reads), writes=close(e.writes))


def _program_helpers(program: Program) -> tuple[HelperFunc, ...]:
    """The program's helpers, then the helpers of its kernels (the first of a name wins)."""
    return (*program.helpers, *(h for k in program.kernels for h in k.helpers))


class ProgramEffects:
    """EFF-4..EFF-9: the summaries of one program's statements and procedures, each
    computed once (by statement identity; procedures by a fixpoint over the call graph)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.helpers = helper_effects(_program_helpers(program))
        self._procs: dict[str, ProcEffects] | None = None
        self._computing: dict[str, ProcEffects] = {}
        self._stmts: dict[int, tuple[HostStmt, StmtEffects]] = {}

    # ----------------------------------------------------------------- procedures
    def procedure(self, name: str) -> ProcEffects:
        """EFF-7: the summary of procedure ``name`` (``KeyError`` when there is none)."""
        if self._procs is None:
            self._procs = self._fixpoint()
        return self._procs[name]

    def _fixpoint(self) -> dict[str, ProcEffects]:
        procs = {p.name: p for p in self.program.procedures}
        self._computing = {n: ProcEffects(n) for n in procs}
        changed = True
        while changed:
            changed = False
            for name, proc in procs.items():
                new = self._summarise(proc)
                if new != self._computing[name]:
                    self._computing[name] = new
                    changed = True
        return dict(self._computing)

    def _summarise(self, proc: Procedure) -> ProcEffects:
        e = _through_pointers(self._walk(proc.body, {}), proc.body)
        dummies = {p.var for p in proc.params}
        local = {d.var for d in proc.decls} | _bound(proc.body)
        reads = frozenset(v for v in e.reads if v in dummies or v not in local)
        writes = frozenset(v for v in e.writes if v in dummies or v not in local)
        realloc = frozenset(v for v in e.reallocates if v in dummies or v not in local)
        outer = (reads | writes) - dummies
        called = [self._computing[c] for c in e.calls if c in self._computing]
        sc = not outer and all(c.self_contained for c in called)
        return ProcEffects(proc.name, reads, writes, e.may_stop, e.io, e.constructs,
                           e.calls, e.helpers, outer, sc, realloc)

    # ----------------------------------------------------------------- statements
    def stmt(self, s: HostStmt) -> StmtEffects:
        """EFF-4: the effects of host statement ``s`` (cached by identity)."""
        if self._procs is None:
            self._procs = self._fixpoint()
        hit = self._stmts.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        out = self._walk(s, self._stmts)
        return out

    def _walk(self, s: HostStmt, memo: dict[int, tuple[HostStmt, StmtEffects]]
              ) -> StmtEffects:
        hit = memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        out = self._one(s, memo)
        memo[id(s)] = (s, out)
        return out

    def _one(self, s: HostStmt, memo: dict[int, tuple[HostStmt, StmtEffects]]
             ) -> StmtEffects:
        match s:
            case HAssign(var=v, value=e):
                return StmtEffects(expr_vars(e), frozenset({v}))
            case HStore(array=a, index=idx, value=e):
                return StmtEffects(expr_vars(*idx, e), frozenset({a}))
            case Block(stmts=ss):
                out = StmtEffects()
                for x in ss:
                    out = out | self._walk(x, memo)
                return out
            case HIf(cond=c, then=t, else_=e):
                out = StmtEffects(reads=expr_vars(c)) | self._walk(t, memo)
                return out | self._walk(e, memo) if e is not None else out
            case HFor(var=v, start=a, stop=b, step=st, body=body):
                inner = self._walk(body, memo)
                inner = attrs.evolve(inner, leaves=inner.leaves - {"break", "continue"})
                return StmtEffects(expr_vars(a, b, st), frozenset({v})) | inner
            case Break():
                return StmtEffects(leaves=frozenset({"break"}))
            case Continue():
                return StmtEffects(leaves=frozenset({"continue"}))
            case HReturn():
                return StmtEffects(leaves=frozenset({"return"}))
            case HStop():
                return StmtEffects(may_stop=True)
            case ParFor(body=body):
                k = kernel_effects(body, self.helpers)
                own = set(s.vars) | set(s.locals)
                return StmtEffects(frozenset(named_vars(s)), k.writes - own,
                                   may_stop=k.may_stop, helpers=k.calls)
            case CallProc():
                return self._call(s)
            case Output(kind=kind, specifiers=specs, items=items):
                defined = frozenset(v.var for k, v in specs
                                    if k not in PLAIN_SPECIFIERS and isinstance(v, Ref))
                used = expr_vars(*items, *(v for k, v in specs if not isinstance(v, str)
                                           and not (k not in PLAIN_SPECIFIERS
                                                    and isinstance(v, Ref))))
                cons = tuple(f"{kind} with specifier '{k}'" for k, _ in specs
                             if k not in PLAIN_SPECIFIERS)
                return StmtEffects(used, defined, io=frozenset({kind}), constructs=cons)
            case Input(vars=vs):
                return StmtEffects(writes=frozenset(vs), io=frozenset({"read"}),
                                   constructs=("read (input)",))
            case Allocate(array=a, dims=dims):
                return StmtEffects(expr_vars(*(e for d in dims for e in (d.lower, d.upper))),
                                   frozenset({a}), constructs=(f"allocate of '{a.name}'",),
                                   reallocates=frozenset({a}))
            case Deallocate(array=a):
                return StmtEffects(writes=frozenset({a}),
                                   constructs=(f"deallocate of '{a.name}'",),
                                   reallocates=frozenset({a}))
            case PointerAssoc(pointer=p, target=t):
                return StmtEffects(frozenset({t}), frozenset({p}),
                                   constructs=("pointer association",),
                                   reallocates=frozenset({p}))
            case Launch():
                return self._launch(s)
            case Sync():
                return StmtEffects(constructs=("sync",))
        raise TypeError(f"not a host statement: {type(s).__name__}")

    def _launch(self, s: Launch) -> StmtEffects:
        """EFF-6: a launch reads what its arguments name and writes the arrays bound to
        parameters the kernel (or a helper it calls) stores into; it may stop when its
        kernel may."""
        k = kernel_effects(s.kernel.body, helper_effects(s.kernel.helpers))
        written = {p for p in k.writes}
        writes = {a.var for p, a in zip(s.kernel.params, s.args, strict=True)
                  if p in written and isinstance(a, Ref)}
        if s.stop_status is not None:
            writes.add(s.stop_status)
        reads = expr_vars(s.thread_count, s.block_size, *s.args, *s.overwritten_if,
                          *(x.size for x in s.scratch))
        return StmtEffects(reads, frozenset(writes), may_stop=k.may_stop,
                           constructs=("launch",), helpers=k.calls)

    def _call(self, s: CallProc) -> StmtEffects:
        """EFF-8: a call, its procedure's summary seen through the actual arguments."""
        proc = self.program.procedure(s.proc)
        summary = self._computing.get(s.proc) if self._procs is None else \
            self._procs.get(s.proc)
        if summary is None:
            summary = ProcEffects(s.proc)
        reads: set[Var] = set(summary.outer & summary.reads)
        writes: set[Var] = set(summary.outer & summary.writes)
        realloc: set[Var] = set(summary.outer & summary.reallocates)
        for p, a in zip(proc.params, s.args, strict=True):
            d = p.var
            if d.is_array:
                if isinstance(a, Ref):
                    if d in summary.reads:
                        reads.add(a.var)
                    if d in summary.writes:
                        writes.add(a.var)
                    if d in summary.reallocates:
                        realloc.add(a.var)
                reads |= {v for v in expr_vars(a) if not isinstance(a, Ref)}
            elif p.intent in (Intent.IN, Intent.VALUE):
                reads |= expr_vars(a)
            elif isinstance(a, Ref):
                writes.add(a.var)
                if p.intent is Intent.INOUT:
                    reads.add(a.var)
            else:
                reads |= expr_vars(a)
        return StmtEffects(frozenset(reads), frozenset(writes), summary.may_stop,
                           frozenset(), summary.io, summary.constructs,
                           summary.calls | {s.proc}, summary.helpers, frozenset(realloc))


def launch_host_reads(s: Launch) -> frozenset[Var]:
    """EFF-6: the arrays whose elements the host reads to start launch ``s``: its thread
    count, block size, scalar arguments, write-discard tests and scratch sizes are host
    expressions (its array arguments stay on the device; ``length`` reads no element)."""
    exprs = [s.thread_count, s.block_size, *s.overwritten_if, *(x.size for x in s.scratch),
             *(a for a in s.args if not (isinstance(a, Ref) and a.var.is_array))]
    return frozenset(n.array for e in exprs for n in iter_nodes(e) if isinstance(n, Read))


def may_alias(program: Program) -> frozenset[Var]:
    """EFF-10: the variables that may change through another name: declared pointer,
    target, volatile or common (in the program or a procedure), named in a pointer
    association, or an array a call passes for a dummy that is one of these (a pointer
    associated with the dummy names the actual), transitively."""
    decls = [*program.decls, *(d for p in program.procedures for d in p.decls)]
    out = {d.var for d in decls if d.may_alias}
    bodies = (program.body, *(p.body for p in program.procedures))
    calls: list[CallProc] = []
    for body in bodies:
        for s in iter_host(body):
            if isinstance(s, PointerAssoc):
                out |= {s.pointer, s.target}
            elif isinstance(s, CallProc):
                calls.append(s)
    # a dummy in the set names the caller's actual: it may change through another name
    # too (a pointer associated with the dummy keeps naming it), transitively
    changed = True
    while changed:
        changed = False
        for c in calls:
            proc = program.procedure(c.proc)
            for p, a in zip(proc.params, c.args, strict=True):
                if p.var in out and isinstance(a, Ref) and a.var.is_array \
                        and a.var not in out:
                    out.add(a.var)
                    changed = True
    return frozenset(out)


def may_share(program: Program, procedure: Procedure | None) -> frozenset[Var]:
    """EFF-11: in ``procedure``'s body, the arrays any two of which a caller may make one
    array: its array dummies (passed by reference, HP-6) and the program's arrays (which a
    caller may pass for a dummy); empty in the program body, where two array names are two
    arrays unless EFF-10 says otherwise."""
    if procedure is None:
        return frozenset()
    return frozenset({q.var for q in procedure.params if q.var.is_array}
                     | {d.var for d in program.decls if d.var.is_array})


_PROGRAMS = _IdCache(limit=64)


def program_effects(program: Program) -> ProgramEffects:
    """EFF-9: the summaries of ``program``, computed once per program object."""
    hit = _PROGRAMS.get((program,))
    if hit is not None:
        assert isinstance(hit, ProgramEffects)
        return hit
    out = ProgramEffects(program)
    _PROGRAMS.put((program,), out)
    return out


def stmt_effects(s: HostStmt, program: Program) -> StmtEffects:
    """EFF-4: the effects of host statement ``s`` of ``program``."""
    return program_effects(program).stmt(s)


def proc_effects(program: Program, name: str) -> ProcEffects:
    """EFF-7: the summary of procedure ``name`` of ``program``."""
    return program_effects(program).procedure(name)


def program_helper_effects(program: Program) -> Mapping[str, HelperEffects]:
    """EFF-1 over the program's helper table (its helpers, then its kernels')."""
    return program_effects(program).helpers


__all__ = [
    "PLAIN_SPECIFIERS", "HelperEffects", "KernelEffects", "ProcEffects", "ProgramEffects",
    "StmtEffects", "helper_effects", "kernel_effects", "launch_host_reads", "may_alias",
    "may_share", "proc_effects",
    "program_effects",
    "program_helper_effects", "stmt_effects",
]
