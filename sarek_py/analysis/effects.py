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

from collections.abc import Mapping

import attrs

from sarek_py.ir.effects import (
    HelperEffects,
    KernelEffects,
    helper_effects,
    kernel_effects,
)
from sarek_py.ir.host.launch import Launch, Sync
from sarek_py.ir.host.program import (
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
    HWhile,
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
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import (
    Expr,
    HelperFunc,
    Read,
    Ref,
    Var,
)
from sarek_py.ir.visit import iter_nodes

#: output specifiers that only say where and how, defining nothing (EFF-5)
PLAIN_SPECIFIERS = frozenset({"unit", "fmt"})


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
            case HWhile(cond=c, body=body):  # HP-40: its jumps are its own
                inner = self._walk(body, memo)
                inner = attrs.evolve(inner, leaves=inner.leaves - {"break", "continue"})
                return StmtEffects(reads=expr_vars(c)) | inner
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
        threads, block, args = s.host_exprs()
        reads = expr_vars(threads, block, *args, *s.overwritten_if,
                          *(x.size for x in s.scratch), *_shared_extent(s))
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


def _shared_extent(s: Launch) -> tuple[Expr, ...]:
    """The launch's dynamic shared extent as a host expression, if it has one (LCH-51)."""
    return (s.shared,) if s.shared is not None and not isinstance(s.shared, int) else ()


def launch_host_reads(s: Launch) -> frozenset[Var]:
    """EFF-6: the arrays whose elements the host reads to start launch ``s``: its thread
    count, block size, scalar arguments, write-discard tests and scratch sizes are host
    expressions (its array arguments stay on the device; ``length`` reads no element).
    Asked at every launch a host program runs: found once per launch statement."""
    return _HOST_READS.get(s)


def _launch_host_reads(s: Launch) -> frozenset[Var]:
    threads, block, args = s.host_exprs()
    exprs = [threads, block, *s.overwritten_if, *(x.size for x in s.scratch),
             *_shared_extent(s),
             *(a for a in args if not (isinstance(a, Ref) and a.var.is_array))]
    return frozenset(n.array for e in exprs for n in iter_nodes(e) if isinstance(n, Read))


_HOST_READS: IdentityCache[Launch, frozenset[Var]] = IdentityCache(_launch_host_reads)


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


_PROGRAMS: IdentityCache[Program, ProgramEffects] = IdentityCache(ProgramEffects, 64)


def program_effects(program: Program) -> ProgramEffects:
    """EFF-9: the summaries of ``program``, computed once per program object."""
    return _PROGRAMS.get(program)


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
