"""Building the fused program (specs/loop-fusion.md, LF-9, LF-14, LF-15; PP-4, PP-5).

:class:`ProgramBuilder` rewrites the program around the plans
:func:`~sarek_py.fusion.loops.fusion.analyse_pair` proved: the copies of the chain loops'
ends, the allocation of the renamed arrays' copies, and the choice between the original
loops (last iteration, failed bounds check) and the fused one. The loops themselves come
from :mod:`~sarek_py.fusion.loops.fused_loop`, their ping-pong form from
:mod:`~sarek_py.fusion.loops.pingpong`.
"""

from __future__ import annotations

import attrs

from sarek_py.fusion.loops.fused_loop import copy_loop, fused_loops, whole_copy_loop
from sarek_py.fusion.loops.pingpong import restore, swap_refusal, swapped
from sarek_py.fusion.loops.plan import Plan, conj_all
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
    HWhile,
    Program,
    block,
    iter_host,
)
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Const,
    Expr,
    Length,
    Ref,
    Unary,
    UnaryOp,
    Var,
    var,
)
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import var_names

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
    #: ping-pong the renamed arrays (specs/ping-pong.md)
    swap: bool
    plans: dict[int, list[tuple[int, Plan]]]
    decls: list[Decl] = attrs.field(factory=list)
    taken: set[str] = attrs.field(factory=set)
    last: dict[int, Var] = attrs.field(factory=dict)
    before: dict[int, list[HostStmt]] = attrs.field(factory=dict)
    after: dict[int, list[HostStmt]] = attrs.field(factory=dict)
    swaps: list[str] = attrs.field(factory=list)
    #: the plans (by identity) whose intermediates are dead after the chain (LF-110)
    dead: frozenset[int] = frozenset()

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
        # LF-15's last-iteration test, none when the intermediates are dead (LF-110)
        dead = id(plan) in self.dead
        cond: Expr | None = None if dead else conj_all(
            [Binary(BinaryOp.EQ, Ref(loop.var), Ref(self.last_of(loop)))
             for loop in plan.chain])
        if plan.check is not None:
            failed = Unary(UnaryOp.NOT, plan.check)
            cond = failed if cond is None else Binary(BinaryOp.OR, cond, failed)
        outer = plan.chain[-1]
        copies: dict[Var, Var] = {}
        for a in plan.renamed:
            assert isinstance(a.type, ArrayType)
            cp = self.new_var(f"{a.name}_copy", a.type, Attr.ALLOCATABLE)
            copies[a] = cp
            dims = tuple(Bound(None, Length(a, d)) for d in range(a.type.rank))
            self.before.setdefault(id(outer), []).append(Allocate(cp, dims))
            self.after.setdefault(id(outer), []).insert(0, Deallocate(cp))
        original = Block(plan.loops)
        if plan.renamed and self.swap:
            why = swap_refusal(self.program, plan)
            if why is None:
                flag = self.new_var("swapped", Scalar.BOOL)
                self.before.setdefault(id(outer), []).extend(
                    [*(whole_copy_loop(copies[a], a) for a in plan.renamed),
                     HAssign(flag, Const(False, Scalar.BOOL))])
                self.swaps.append("")
                if dead:  # LF-111: the copy back after the chain, before the deallocation
                    self.after[id(outer)].insert(0, restore(plan, copies, flag))
                return swapped(plan, copies, flag, cond, original)
            self.swaps.append(why)
        tail: list[HostStmt] = [*fused_loops(plan, copies)]  # LF-85: the pieces
        if copies:
            tail.append(copy_loop(plan.consumer, [(a, copies[a]) for a in plan.renamed]))
        return Block(tuple(tail)) if cond is None else HIf(cond, original, Block(tuple(tail)))

    def rebuild(self, s: HostStmt) -> HostStmt:
        match s:
            case Block(stmts=ss):
                out: list[HostStmt] = []
                at = dict(self.plans.get(id(s), []))
                k = 0
                while k < len(ss):
                    if k in at:
                        out.append(self.replacement(at[k]))
                        k += len(at[k].loops)
                        continue
                    out.extend(self.wrapped(ss[k]))
                    k += 1
                return Block(tuple(out), loc=s.loc)
            case HIf(cond=c, then=t, else_=e):
                return HIf(c, block(*self.wrapped(t)),
                           None if e is None else block(*self.wrapped(e)), loc=s.loc)
            case HFor() | HWhile():
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
                if id(plan) in self.dead:
                    continue
                for loop in reversed(plan.chain):
                    self.last_of(loop)
        return block(*self.wrapped(body))


__all__ = ["ProgramBuilder"]
