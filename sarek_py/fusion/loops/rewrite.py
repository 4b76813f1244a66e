"""Building the fused program (specs/loop-fusion.md, LF-9, LF-14, LF-15; PP-4, PP-5).

:func:`fused_loop` makes the loop over the consumer's iterations in which each read of an
intermediate array is the producer's expression; :func:`copy_loop` and
:func:`whole_copy_loop` copy arrays on the device; :class:`ProgramBuilder` rewrites the
program around the plans :func:`~sarek_py.fusion.loops.fusion.analyse_pair` proved: the
copies of the chain loops' ends, the allocation of the renamed arrays' copies, and the
choice between the original loops (last iteration, failed bounds check) and the fused
one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from sarek_py.fusion.loops.fusion import FusionOptions, Plan, conj_all
from sarek_py.ir.host.program import (
    Allocate,
    Attr,
    Block,
    Bound,
    Deallocate,
    Decl,
    HAssign,
    HFor,
    HIf,
    HostStmt,
    LoopIndex,
    ParFor,
    Program,
    block,
    iter_host,
)
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    Length,
    Read,
    Ref,
    Seq,
    Stmt,
    Store,
    Unary,
    UnaryOp,
    Var,
    var,
)
from sarek_py.ir.typeof import type_of
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import map_node, substitute, var_names

# ---------------------------------------------------------------------- construction


def fused_loop(plan: Plan, copies: Mapping[Var, Var], reads_from: Mapping[Var, Var]
               | None = None) -> ParFor:
    """LF-14: the consumer's loop with each intermediate read replaced by the producer's
    expression at its subscripts; stores to a renamed array go to its copy (``copies``),
    reads of it come from ``reads_from`` (the array itself by default)."""
    by_array = {i.array: i for i in plan.intermediates}
    pvars = plan.producer.vars
    src = dict(reads_from or {})

    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Read) and e.array in by_array:
            it = by_array[e.array]
            # a subscript of another integer type than the producer's index is converted:
            # the read was in bounds, so its value fits the index's type (LF-14)
            subs = [x if type_of(x) == v.type else Cast(v.scalar, x)
                    for v, x in zip(pvars, e.index, strict=True)]
            value = substitute(it.value, dict(zip(pvars, subs, strict=True)))
            return _retarget_reads(value, src)
        if isinstance(e, Read) and e.array in src:
            return Read(src[e.array], e.index, loc=e.loc)
        return None

    def stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.array in copies:
            return Store(copies[s.array], s.index, s.value, loc=s.loc)
        return None

    body = map_node(plan.consumer_body, expr=expr, stmt=stmt)
    return ParFor(plan.consumer.indices, body, plan.consumer.locals, loc=plan.consumer.loc)


def _retarget_reads(e: Expr, src: Mapping[Var, Var]) -> Expr:
    if not src:
        return e

    def ex(x: Expr) -> Expr | None:
        if isinstance(x, Read) and x.array in src:
            return Read(src[x.array], x.index, loc=x.loc)
        return None

    out: Expr = map_node(e, expr=ex)
    return out


def copy_loop(c: ParFor, pairs: Sequence[tuple[Var, Var]]) -> ParFor:
    """``dst[i…] <- src[i…]`` over the consumer's iterations for each ``(dst, src)``."""
    own = tuple(Ref(v) for v in c.vars)
    stmts: list[Stmt] = [Store(dst, own, Read(src, own)) for dst, src in pairs]
    body: Stmt = stmts[0] if len(stmts) == 1 else Seq(tuple(stmts))
    return ParFor(c.indices, body, loc=c.loc)


def whole_copy_loop(dst: Var, src: Var) -> ParFor:
    """``dst[…] <- src[…]`` over every element of ``src`` (same lower bounds)."""
    assert isinstance(src.type, ArrayType)
    idx = []
    body_index: list[Expr] = []
    for d, lo in enumerate(src.type.lower):
        v = var(f"k{d}_", Scalar.I32)
        stop = Binary(BinaryOp.SUB, Binary(BinaryOp.ADD, Const(lo, Scalar.I32), Length(src, d)),
                      Const(1, Scalar.I32))
        idx.append(LoopIndex(v, Const(lo, Scalar.I32), stop))
        body_index.append(Ref(v))
    return ParFor(tuple(idx), Store(dst, tuple(body_index), Read(src, tuple(body_index))))


# ------------------------------------------------------------------- program rewrite


def _fresh_name(base: str, taken: set[str]) -> str:
    name = base
    k = 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


@attrs.define
class ProgramBuilder:
    """Rewrites the program around the accepted plans (LF-14, LF-15, PP-*)."""

    program: Program
    options: FusionOptions
    plans: dict[int, list[tuple[int, Plan]]]
    decls: list[Decl] = attrs.field(factory=list)
    taken: set[str] = attrs.field(factory=set)
    last: dict[int, Var] = attrs.field(factory=dict)
    before: dict[int, list[HostStmt]] = attrs.field(factory=dict)
    after: dict[int, list[HostStmt]] = attrs.field(factory=dict)
    swaps: list[str] = attrs.field(factory=list)

    def new_var(self, base: str, t: Scalar | ArrayType, *attrs_: Attr) -> Var:
        v = var(_fresh_name(base, self.taken), t, mutable=True)
        self.decls.append(Decl(v, frozenset(attrs_)))
        return v

    def last_of(self, loop: HFor) -> Var:
        if id(loop) not in self.last:
            v = self.new_var(f"{loop.var.name}_last", Scalar.I32)
            self.last[id(loop)] = v
            self.before.setdefault(id(loop), []).append(HAssign(v, loop.stop))
        return self.last[id(loop)]

    def replacement(self, plan: Plan) -> HostStmt:
        tests = [Binary(BinaryOp.EQ, Ref(loop.var), Ref(self.last_of(loop)))
                 for loop in plan.chain]
        cond = conj_all(tests)
        if plan.check is not None:
            cond = Binary(BinaryOp.OR, cond, Unary(UnaryOp.NOT, plan.check))
        outer = plan.chain[-1]
        copies: dict[Var, Var] = {}
        for a in plan.renamed:
            assert isinstance(a.type, ArrayType)
            cp = self.new_var(f"{a.name}_copy", a.type, Attr.ALLOCATABLE)
            copies[a] = cp
            dims = tuple(Bound(None, Length(a, d)) for d in range(a.type.rank))
            self.before.setdefault(id(outer), []).append(Allocate(cp, dims))
            self.after.setdefault(id(outer), []).insert(0, Deallocate(cp))
        original = Block((plan.producer, plan.consumer))
        if plan.renamed and self.options.swap:
            from sarek_py.fusion.loops.pingpong import swap_refusal, swapped

            why = swap_refusal(self.program, plan)
            if why is None:
                flag = self.new_var("swapped", Scalar.BOOL)
                self.before.setdefault(id(outer), []).extend(
                    [*(whole_copy_loop(copies[a], a) for a in plan.renamed),
                     HAssign(flag, Const(False, Scalar.BOOL))])
                self.swaps.append("")
                return swapped(plan, copies, flag, cond, original)
            self.swaps.append(why)
        fused = fused_loop(plan, copies)
        tail: list[HostStmt] = [fused]
        if copies:
            tail.append(copy_loop(plan.consumer, [(a, copies[a]) for a in plan.renamed]))
        return HIf(cond, original, Block(tuple(tail)))

    def rebuild(self, s: HostStmt) -> HostStmt:
        match s:
            case Block(stmts=ss):
                out: list[HostStmt] = []
                at = dict(self.plans.get(id(s), []))
                k = 0
                while k < len(ss):
                    if k in at:
                        out.append(self.replacement(at[k]))
                        k += 2
                        continue
                    out.extend(self.wrapped(ss[k]))
                    k += 1
                return Block(tuple(out), loc=s.loc)
            case HIf(cond=c, then=t, else_=e):
                return HIf(c, block(*self.wrapped(t)),
                           None if e is None else block(*self.wrapped(e)), loc=s.loc)
            case HFor():
                return attrs.evolve(s, body=block(*self.wrapped(s.body)))
        return s

    def wrapped(self, s: HostStmt) -> list[HostStmt]:
        inner = self.rebuild(s)
        return [*self.before.get(id(s), []), inner, *self.after.get(id(s), [])]

    def build(self) -> Program:
        # every name of the program, loop variables and kernel names included (LF-14)
        self.taken |= var_names(self.program)
        body = self.scope(self.program.body)
        top = self.decls
        procs = []
        for p in self.program.procedures:
            self.decls = []  # what the rewrite declares goes in the procedure (LF-17)
            new_body = self.scope(p.body)
            procs.append(p if new_body is p.body and not self.decls else
                         attrs.evolve(p, body=new_body, decls=(*p.decls, *self.decls)))
        return attrs.evolve(self.program, body=body, decls=(*self.program.decls, *top),
                            procedures=tuple(procs))

    def scope(self, body: HostStmt) -> HostStmt:
        """``body`` (the program's or a procedure's) rewritten; new variables of its plans
        go in ``self.decls``, named in program order so that names are deterministic."""
        blocks = [s for s in iter_host(body) if id(s) in self.plans]
        if not blocks:
            return body
        for b in blocks:
            for _, plan in self.plans[id(b)]:
                for loop in reversed(plan.chain):
                    self.last_of(loop)
        return block(*self.wrapped(body))


