"""Offload: each parallel loop becomes a kernel and a launch, with syncs where the host
next needs what a kernel wrote (specs/offload.md, OFF-1..OFF-9).

:func:`offload` rewrites a :class:`~sarek_py.ir.host.program.Program`:

* every ``parallel for`` becomes a :class:`~sarek_py.ir.host.launch.Launch` of a kernel with
  one thread per iteration (OFF-1), the thread count an ``i64`` product of the extents; a
  nest of two or more dimensions is launched in rows where that pads little, its flat
  kernel otherwise, the host choosing at each execution (OFF-11);
* an array that each iteration assigns at its own element before anything else names it,
  over loops that cover exactly its bounds, is ``overwritten`` (write-discard) under the
  host condition that says so (OFF-4, seed 001);
* a ``stop`` in the loop becomes the launch's stop status and its host replay (OFF-5);
* private arrays stay in thread memory when they fit the stack budget, else get slices of
  a per-thread global workspace sized on the host (OFF-6);
* :func:`place_syncs` puts a ``sync`` before the first host statement that names an array a
  pending launch writes, before leaving the program, and right after a launch that can
  stop -- not after every launch (OFF-7).

A loop the offload cannot lower is an :class:`OffloadError` that names the construct
(OFF-8). Device residency (copies only where the host needs data, OFF-3) is the host
interpreter's job when it runs an offloaded program on a device backend
(:func:`sarek_py.host.interp.run_program` with ``device=``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from sarek_py.analysis.effects import (
    helper_effects,
    kernel_effects,
    launch_host_reads,
    may_alias,
    may_share,
    stmt_effects,
)
from sarek_py.host.parfor import parfor_kernel
from sarek_py.host.tiling import (
    TILE,
    Loop,
    Nest,
    TilingRefused,
    product,
    row_grid_expr,
    row_nest,
    rows_bounds_too_near_expr,
    rows_pad_too_much_expr,
    tile_nest,
)
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch, ScratchBuffer, Sync, shape_counts
from sarek_py.ir.host.program import (
    Attr,
    Block,
    Break,
    Continue,
    Decl,
    HFor,
    HIf,
    HostError,
    HostStmt,
    HReturn,
    HStop,
    HWhile,
    ParFor,
    Procedure,
    Program,
    block,
    expr_vars,
)
from sarek_py.ir.intrinsics import THREAD_INTRINSICS
from sarek_py.ir.jumps import jump_word, own_jumps
from sarek_py.ir.nodes import (
    Barrier,
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Var,
    iter_stmts,
    var,
)
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.ir.visit import fresh_name, iter_exprs, map_node, var_names
from sarek_py.runtime.base import can_stop, written_arrays

#: bytes of private arrays per thread kept in thread memory (OFF-6)
STACK_BUDGET = 1024

#: how the threads of a launched nest number its iterations (OFF-10, OFF-11)
Numbering = Literal["rows", "tiles", "flat"]
NUMBERINGS: tuple[Numbering, ...] = ("rows", "tiles", "flat")


class OffloadError(SarekError):
    """A parallel loop the offload cannot lower (OFF-8)."""


def _i64(e: Expr) -> Expr:
    return e if isinstance(e, Const) and e.type is Scalar.I64 else Cast(Scalar.I64, e)


def _extent64(start: Expr, stop: Expr) -> Expr:
    """``stop - start + 1`` in ``i64``: exact for any ``i32`` bounds (in ``i32`` an empty
    range such as ``INT_MAX .. INT_MIN`` would wrap to a positive extent)."""
    return Binary(BinaryOp.ADD, Binary(BinaryOp.SUB, _i64(stop), _i64(start)),
                  Const(1, Scalar.I64))


def _extent(start: Expr, stop: Expr) -> Expr:
    return Binary(BinaryOp.ADD, Binary(BinaryOp.SUB, stop, start), Const(1, Scalar.I32))


def _extents(loop: ParFor) -> list[Expr]:
    """Each index's number of iterations, an ``i64``, zero when empty."""
    return [Intrinsic("max", (_extent64(ix.start, ix.stop), Const(0, Scalar.I64)))
            for ix in loop.indices]


def thread_count(loop: ParFor) -> Expr:
    """OFF-1: the number of iterations, an ``i64``; zero when a dimension is empty."""
    return product(_extents(loop))


def _check_lowerable(loop: ParFor) -> None:
    """OFF-8: what a kernel cannot do."""
    for s in iter_stmts(loop.body):
        if isinstance(s, Barrier):
            raise OffloadError("a parallel loop cannot hold a barrier", s.loc or loop.loc)
        if isinstance(s, Return):
            raise OffloadError("a parallel loop cannot return", s.loc or loop.loc)
    jump = next(own_jumps(loop.body), None)
    if jump is not None:  # HP-19: only inside a loop of the body
        raise OffloadError(f"a parallel loop cannot {jump_word(jump)} itself",
                           jump.loc or loop.loc)
    for e in iter_exprs(loop.body):
        if isinstance(e, Intrinsic) and e.name in THREAD_INTRINSICS:
            raise OffloadError(f"a parallel loop cannot use thread intrinsic '{e.name}'",
                               e.loc or loop.loc)


def overwritten_arrays(loop: ParFor) -> list[tuple[Var, Expr]]:
    """OFF-4 (seed 001): arrays ``a`` assigned ``a[i, j, …] <- v`` (subscripts the loop
    indices, in order, ``v`` not naming ``a``) by the first statement of every iteration,
    with the host condition that the loops run over exactly the bounds of ``a``."""
    own = tuple(Ref(v) for v in loop.vars)
    out: list[tuple[Var, Expr]] = []
    named: set[Var] = set()
    body = loop.body
    stmts: Sequence[Stmt] = body.stmts if isinstance(body, Seq) else (body,)
    for s in stmts:
        if not (isinstance(s, Store) and tuple(s.index) == own):
            break
        a = s.array
        value_names = {e.array for e in iter_exprs(s.value) if isinstance(e, (Read, Length))}
        if a in named or a in value_names or not isinstance(a.type, ArrayType):
            named |= value_names | {a}
            continue
        named |= value_names | {a}
        tests: list[Expr] = []
        for d, ix in enumerate(loop.indices):
            lo = a.type.lower[d]
            tests.append(Binary(BinaryOp.EQ, ix.start, Const(lo, Scalar.I32)))
            upper = Binary(BinaryOp.SUB, Binary(BinaryOp.ADD, Const(lo, Scalar.I32),
                                                Length(a, d)), Const(1, Scalar.I32))
            tests.append(Binary(BinaryOp.EQ, ix.stop, upper))
        cond = tests[0]
        for t in tests[1:]:
            cond = Binary(BinaryOp.AND, cond, t)
        out.append((a, cond))
    return out


def _workspaces(kernel: Kernel, budget: int) -> tuple[Kernel, list[tuple[Var, int]]]:
    """OFF-6: private arrays over ``budget`` bytes become slices of a global workspace
    parameter, indexed by ``thread * size + element``."""
    moved: list[tuple[Var, int]] = []
    keep: list[Var] = []
    for v in kernel.locals:
        t = v.type
        if isinstance(t, ArrayType) and t.space is MemSpace.LOCAL and \
                t.size * t.elem.dtype.itemsize > budget:
            moved.append((v, t.size))
        else:
            keep.append(v)
    if not moved:
        return kernel, []
    tid = _thread_var(kernel)
    params: dict[Var, Var] = {v: var(f"{v.name}_ws", ArrayType(v.scalar, MemSpace.GLOBAL))
                              for v, _ in moved}
    sizes = dict(moved)

    def flat(v: Var, idx: tuple[Expr, ...]) -> tuple[Expr]:
        t = v.type
        assert isinstance(t, ArrayType)
        acc: Expr = Binary(BinaryOp.MUL, _i64(Ref(tid)), Const(sizes[v], Scalar.I64))
        stride = 1
        for d in reversed(range(t.rank)):
            off = Binary(BinaryOp.SUB, idx[d], Const(t.lower[d], Scalar.I32))
            term: Expr = _i64(off)
            if stride != 1:
                term = Binary(BinaryOp.MUL, term, Const(stride, Scalar.I64))
            acc = Binary(BinaryOp.ADD, acc, term)
            n = t.shape[d]
            assert n is not None
            stride *= n
        return (Cast(Scalar.I32, acc),)

    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Read) and e.array in params:
            return Read(params[e.array], flat(e.array, e.index), loc=e.loc)
        return None

    def stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.array in params:
            return Store(params[s.array], flat(s.array, s.index), s.value, loc=s.loc)
        return None

    body = map_node(kernel.body, expr=expr, stmt=stmt)
    out = attrs.evolve(kernel, params=(*kernel.params, *params.values()),
                       locals=tuple(keep), body=body)
    return out, moved


def _thread_var(kernel: Kernel) -> Var:
    s = kernel.body
    assert isinstance(s, Let) and isinstance(s.value, Intrinsic)
    return s.var


def _nest(s: ParFor, flat_kernel: Kernel, host: tuple[Var, ...], name: str) -> Nest:
    """The nest of parallel loop ``s`` over the parameters of its flat kernel, its bounds
    as new ``lo_k``/``hi_k`` parameters named apart from the host's (OFF-2) and from the
    body's names (for the tiled and rows kernels, OFF-10, OFF-11)."""
    params = flat_kernel.params[:len(host)]
    pmap = dict(zip(host, params, strict=True))
    body = map_node(s.body, var=lambda v: pmap.get(v, v))
    taken = ({p.name for p in params} | {ix.var.name for ix in s.indices}
             | {v.name for v in flat_kernel.locals} | var_names(body))
    rank = len(s.indices)
    los = [var(fresh_name(f"lo_{k}", taken), Scalar.I32) for k in range(rank)]
    his = [var(fresh_name(f"hi_{k}", taken), Scalar.I32) for k in range(rank)]
    loops = tuple(Loop(ix.var, Ref(lo), Ref(hi))
                  for ix, lo, hi in zip(s.indices, los, his, strict=True))
    return Nest(name, (*params, *los, *his), loops, body, flat_kernel.locals)


@attrs.define
class _Offloader:
    program: Program
    block_size: int
    budget: int
    numbering: Numbering = "rows"
    #: rows kernels for loops of one dimension too (OFF-17, TIL-15)
    rows_1d: bool = False
    decls: list[Decl] = attrs.field(factory=list)
    kernels: list[Kernel] = attrs.field(factory=list)
    taken: set[str] = attrs.field(factory=set)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def loop(self, s: ParFor) -> HostStmt:
        _check_lowerable(s)
        try:
            kernel, host = parfor_kernel(s, self.program.helpers,
                                         self.fresh(f"{self.program.name}_loop"))
        except HostError as exc:
            raise OffloadError(exc.message, exc.loc) from None
        kernel, moved = _workspaces(kernel, self.budget)
        if self.numbering == "tiles" and not moved and not can_stop(kernel):
            tiled = self.tiled(s, kernel, host)
            if tiled is not None:
                return tiled
        count = thread_count(s)
        args: list[Expr] = [Ref(v) for v in host]
        args += [ix.start for ix in s.indices]
        args += [_extent(ix.start, ix.stop) for ix in s.indices]
        scratch: list[ScratchBuffer] = []
        base = len(args)
        for k, (_, size) in enumerate(moved):
            ws = kernel.params[base + k]
            scratch.append(ScratchBuffer(base + k, Binary(BinaryOp.MUL, count,
                                                          Const(size, Scalar.I64))))
            holder = var(self.fresh(ws.name), ws.type, mutable=True)
            self.decls.append(Decl(holder, frozenset({Attr.ALLOCATABLE})))
            args.append(Ref(holder))
        status = None
        replay: tuple[Stop, ...] = ()
        if can_stop(kernel):
            status = var(self.fresh(f"{kernel.name}_status"), ArrayType(Scalar.I32),
                         mutable=True)
            self.decls.append(Decl(status, frozenset({Attr.ALLOCATABLE})))
            # the codes of its own stops and of those of the helpers it calls (EFF-3)
            codes = sorted(kernel_effects(s.body, helper_effects(kernel.helpers)).stop_codes)
            replay = tuple(Stop(c) for c in codes)
        written = written_arrays(kernel)
        over = [(a, c) for a, c in overwritten_arrays(s) if a.name in written]
        self.kernels.append(kernel)
        flat = Launch(kernel, count, Const(self.block_size, Scalar.I32), tuple(args),
                      scratch=tuple(scratch), stop_status=status, stop_replay=replay,
                      overwritten=tuple(a for a, _ in over),
                      overwritten_if=tuple(c for _, c in over), loc=s.loc)
        if self.numbering == "rows" and not moved and status is None:
            return self.rows(s, kernel, host, flat)
        return flat

    def rows(self, s: ParFor, flat_kernel: Kernel, host: tuple[Var, ...],
             flat: Launch) -> HostStmt:
        """OFF-11: a nest of two or more dimensions without a reduction, launched in rows
        of ``block`` iterations of its contiguous dimension (TIL-10) when whole rows pad
        the nest by at most ``MAX_ROW_PADDING``, by ``flat`` otherwise: the host tests it
        at each execution (TIL-11); with ``rows_1d``, a loop of one dimension too (OFF-17,
        TIL-15). Any other loop: ``flat`` itself."""
        if len(s.indices) < 2 and not self.rows_1d:
            return flat
        nest = _nest(s, flat_kernel, host, self.fresh(f"{flat_kernel.name}_rows"))
        try:
            rk = row_nest(nest, one_dim=self.rows_1d)
        except TilingRefused:
            return flat
        kernel = attrs.evolve(rk.kernel, helpers=flat_kernel.helpers, loc=s.loc)
        extents = _extents(s)
        too_much = rows_pad_too_much_expr(rk, extents, self.block_size)
        # bounds so near the ends of i32 that the body's offsets of a loop variable could
        # wrap: the rows kernel would do nothing, so the flat kernel runs (TIL-13)
        near = rows_bounds_too_near_expr(rk, [ix.start for ix in s.indices],
                                         [ix.stop for ix in s.indices])
        if near is not None:
            too_much = Binary(BinaryOp.OR, too_much, near)
        args: list[Expr] = [Ref(v) for v in host]
        args += [ix.start for ix in s.indices] + [ix.stop for ix in s.indices]
        self.kernels.append(kernel)
        # a grid of blocks per row x the next extent (x the others'): TIL-14
        grid = row_grid_expr(rk, extents, self.block_size)
        block = Const(self.block_size, Scalar.I32)
        threads, _ = shape_counts(grid, (block,))
        launch = Launch(kernel, threads, block, tuple(args), overwritten=flat.overwritten,
                        overwritten_if=flat.overwritten_if, grid=grid, block_shape=(block,),
                        loc=s.loc)
        return HIf(too_much, flat, launch, loc=s.loc)

    def tiled(self, s: ParFor, flat_kernel: Kernel, host: tuple[Var, ...]) -> Launch | None:
        """OFF-10: a nest of two or more dimensions without a reduction, launched in tiles
        of 32 × (block / 32) iterations or flat, as the host decides at the launch
        (:mod:`sarek_py.host.tiling`); ``None`` when it cannot be tiled."""
        rank = len(s.indices)
        rows = self.block_size // TILE
        if rank < 2 or self.block_size % TILE or rows < 1:
            return None
        nest = _nest(s, flat_kernel, host, flat_kernel.name)
        try:
            tk = tile_nest(nest)
        except TilingRefused:
            return None
        kernel = attrs.evolve(tk.kernel, helpers=flat_kernel.helpers, loc=s.loc)
        exts = _extents(s)
        total: Expr = exts[0]
        padded: Expr | None = None
        for d, e in enumerate(exts):
            if d > 0:
                total = Binary(BinaryOp.MUL, total, e)
            step = TILE if d == tk.contiguous else rows if d == tk.next else 1
            pe: Expr = e if step == 1 else Binary(BinaryOp.MUL, Binary(
                BinaryOp.DIV, Binary(BinaryOp.ADD, e, Const(step - 1, Scalar.I64)),
                Const(step, Scalar.I64)), Const(step, Scalar.I64))
            padded = pe if padded is None else Binary(BinaryOp.MUL, padded, pe)
        assert padded is not None
        # flat when nothing runs or whole tiles pad the nest by more than a quarter (TIL-5)
        flat = Binary(BinaryOp.OR, Binary(BinaryOp.EQ, total, Const(0, Scalar.I64)),
                      Binary(BinaryOp.GT, Binary(BinaryOp.MUL, Binary(BinaryOp.SUB, padded, total),
                                                 Const(4, Scalar.I64)), total))
        args: list[Expr] = [Ref(v) for v in host]
        args += [ix.start for ix in s.indices] + [ix.stop for ix in s.indices] + [flat]
        written = written_arrays(kernel)
        over = [(a, c) for a, c in overwritten_arrays(s) if a.name in written]
        self.kernels.append(kernel)
        return Launch(kernel, Cond(flat, total, padded), Const(self.block_size, Scalar.I32),
                      tuple(args), overwritten=tuple(a for a, _ in over),
                      overwritten_if=tuple(c for _, c in over), loc=s.loc)

    def stmt(self, s: HostStmt) -> HostStmt:
        match s:
            case ParFor():
                return self.loop(s)
            case Block(stmts=ss):
                return Block(tuple(self.stmt(x) for x in ss), loc=s.loc)
            case HIf(then=t, else_=e):
                return attrs.evolve(s, then=self.stmt(t),
                                    else_=None if e is None else self.stmt(e))
            case HFor(body=b) | HWhile(body=b):
                return attrs.evolve(s, body=self.stmt(b))
        return s


def offload(program: Program, *, block_size: int = 256, stack_budget: int = STACK_BUDGET,
            numbering: Numbering = "rows", rows_1d: bool = False) -> Program:
    """Every parallel loop of ``program`` (body and procedures) as a launch, with syncs
    placed by :func:`place_syncs` (OFF-1..OFF-8). ``numbering`` says how the threads of a
    nest of two or more dimensions number its iterations: ``"rows"`` (the default, OFF-11:
    a block runs along the contiguous dimension), ``"tiles"`` (OFF-10: 32 × block/32
    tiles), each falling back to flat where it pads too much, or ``"flat"``; with
    ``rows_1d`` and ``"rows"``, a loop of one dimension is launched in rows too (OFF-17:
    what a backend whose ``rows_1d`` says so runs faster, :func:`run_program_on`)."""
    if numbering not in NUMBERINGS:
        raise ValueError(f"unknown numbering {numbering!r} (numberings: "
                         f"{', '.join(NUMBERINGS)})")
    off = _Offloader(program, block_size, stack_budget, numbering, rows_1d)
    off.taken |= {d.var.name for d in program.decls}
    off.taken |= {k.name for k in program.kernels} | {h.name for h in program.helpers}
    body = place_syncs(off.stmt(program.body), program, final=True)
    procs = tuple(attrs.evolve(p, body=place_syncs(off.stmt(p.body), program, final=True,
                                                   procedure=p))
                  for p in program.procedures)
    return attrs.evolve(program, body=body, procedures=procs,
                        decls=(*program.decls, *off.decls),
                        kernels=(*program.kernels, *off.kernels))


# ------------------------------------------------------------------------ sync placement


def _names(s: HostStmt, program: Program) -> frozenset[Var]:
    """The variables a simple host statement may read or write: for a call, what its
    procedure's summary names through the arguments and outside (EFF-8), the same set the
    device residency brings back before the statement (OFF-12)."""
    return stmt_effects(s, program).names


@attrs.define
class _Syncs:
    program: Program
    #: in a procedure's body, its array dummies and the program's arrays (EFF-11)
    shared: frozenset[Var] = frozenset()
    #: variables that may change through another name (EFF-10)
    aliased: frozenset[Var] = frozenset()
    #: per enclosing sequential loop, innermost last: what is pending at its ``break``s
    #: and at its ``continue``s (HP-41), and whether a ``continue`` must sync first
    jumps: list[_Jumps] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.aliased = may_alias(self.program)

    def touches(self, names: frozenset[Var], pending: frozenset[Var]) -> bool:
        """Whether ``names`` may name an array a pending launch writes: the same variable,
        two variables either of which may change through another name (EFF-10), or, in a
        procedure, two of its array dummies and the program's arrays (EFF-11)."""
        return bool(names & pending or (names & self.aliased and pending & self.aliased)
                    or (names & self.shared and pending & self.shared))

    def loop_body(self, body: HostStmt, pending: frozenset[Var]
                  ) -> tuple[list[HostStmt], frozenset[Var], frozenset[Var]]:
        return _loop_body(self, body, pending)

    def while_loop(self, s: HWhile, cond: Expr, pending: frozenset[Var]
                   ) -> tuple[list[HostStmt], frozenset[Var]]:
        return _while_loop(self, s, cond, pending)

    def seq(self, stmts: Sequence[HostStmt], pending: frozenset[Var]
            ) -> tuple[list[HostStmt], frozenset[Var]]:
        out: list[HostStmt] = []
        for s in stmts:
            new, pending = self.one(s, pending)
            out.extend(new)
        return out, pending

    def one(self, s: HostStmt, pending: frozenset[Var]) -> tuple[list[HostStmt], frozenset[Var]]:
        sync: list[HostStmt] = []
        match s:
            case Launch():
                # its bounds and scalar arguments are read on the host when it starts
                if self.touches(launch_host_reads(s), pending):
                    sync, pending = [Sync()], frozenset()
                # the arrays bound to parameters it writes, and its stop status (EFF-6)
                pending = pending | stmt_effects(s, self.program).writes
                if s.stop_status is not None:
                    return [*sync, s, Sync()], frozenset()
                return [*sync, s], pending
            case Sync():
                return [s], frozenset()
            case Block(stmts=ss):
                body, pending = self.seq(ss, pending)
                return [Block(tuple(body), loc=s.loc)], pending
            case HIf(cond=c, then=t, else_=e):
                if self.touches(expr_vars(c), pending):
                    sync, pending = [Sync()], frozenset()
                t2, pt = self.one(t, pending)
                e2, pe = self.one(e, pending) if e is not None else ([], pending)
                new = attrs.evolve(s, then=block(*t2),
                                   else_=None if e is None else block(*e2))
                return [*sync, new], pt | pe
            case HFor():
                if self.touches(expr_vars(s.start, s.stop, s.step), pending):
                    sync, pending = [Sync()], frozenset()
                body, entry, brk = self.loop_body(s.body, pending)
                return [*sync, attrs.evolve(s, body=block(*body))], entry | brk
            case HWhile(cond=c):
                return self.while_loop(s, c, pending)
            case Break():
                if self.jumps:
                    self.jumps[-1].breaks |= pending
                return [s], pending
            case Continue():
                if self.jumps and self.jumps[-1].sync_continue and pending:
                    return [Sync(), s], frozenset()
                if self.jumps:
                    self.jumps[-1].continues |= pending
                return [s], pending
            case HReturn() | HStop():
                lead: list[HostStmt] = [Sync()] if pending else []
                return [*lead, s], frozenset()
        names = _names(s, self.program)
        if self.touches(names, pending):
            return [Sync(), s], frozenset()
        return [s], pending


@attrs.define
class _Jumps:
    breaks: frozenset[Var] = frozenset()
    continues: frozenset[Var] = frozenset()
    sync_continue: bool = False


def _loop_body(syncs: _Syncs, body: HostStmt, pending: frozenset[Var]
               ) -> tuple[list[HostStmt], frozenset[Var], frozenset[Var]]:
    """OFF-7 around a sequential loop, by a fixpoint: the body placed for what may be
    pending at the start of any iteration (before the loop, at the end of the body, at a
    ``continue``); gives the body, that set, and what may be pending at a ``break``."""
    entry = pending
    while True:
        syncs.jumps.append(_Jumps())
        body_stmts, out = syncs.one(body, entry)
        jumps = syncs.jumps.pop()
        head = out | jumps.continues
        if head <= entry:
            return body_stmts, entry, jumps.breaks
        entry = entry | head


def _while_loop(syncs: _Syncs, s: HWhile, cond: Expr, pending: frozenset[Var]
                ) -> tuple[list[HostStmt], frozenset[Var]]:
    """OFF-7 for ``while`` (HP-41): its condition is read on the host before every test;
    when it may read an array a pending launch writes, a ``sync`` goes before the loop,
    at the end of the body and before each ``continue`` of the loop, so that nothing is
    pending at a test."""
    body, entry, brk = _loop_body(syncs, s.body, pending)
    if not syncs.touches(expr_vars(cond), entry):
        return [attrs.evolve(s, body=block(*body))], entry | brk
    lead: list[HostStmt] = [Sync()] if pending else []
    syncs.jumps.append(_Jumps(sync_continue=True))
    body, out = syncs.one(s.body, frozenset())
    jumps = syncs.jumps.pop()
    tail: list[HostStmt] = [Sync()] if out else []
    return [*lead, attrs.evolve(s, body=block(*body, *tail))], jumps.breaks


def place_syncs(s: HostStmt, program: Program, final: bool = False,
                procedure: Procedure | None = None) -> HostStmt:
    """OFF-7, OFF-12: a ``sync`` before the first host statement that may name an array a
    pending launch writes (a call: through its procedure's effect summary, EFF-8; a
    variable that may change through another name when a pending one may too; in
    ``procedure``'s body, an array dummy or program array when a pending one is one, EFF-11),
    before a launch whose host expressions read such an array, around loops by a fixpoint,
    right after a launch that can stop, and at the end when ``final``."""
    body, pending = _Syncs(program, may_share(program, procedure)).one(s, frozenset())
    if final and pending:
        body.append(Sync())
    return block(*body)


__all__ = ["STACK_BUDGET", "OffloadError", "offload", "overwritten_arrays", "place_syncs",
           "thread_count"]
