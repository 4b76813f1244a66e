"""Producer-consumer fusion of adjacent parallel loops (specs/loop-fusion.md, LF-1..LF-15).

Two adjacent parallel loops, a producer assigning arrays element by element and a consumer
reading them at affine subscripts, become one loop over the consumer's iterations in which
each read of an intermediate array is the producer's expression at those subscripts.

The pass proves every rule of the seed or refuses with a :class:`FusionRefused` naming the
rule; a refused pair is left as written. The fused program is::

    last_t := <end of t>;                       // copy of each chain loop's end
    for t = … do
      …
      if (t == last_t && …) || !(<run-time bounds check>) then
        (PRODUCER; CONSUMER)                    // the last iteration: original loops
      else
        (FUSED; copy back the renamed arrays)
    done

API: :func:`analyse_pair` (one pair, in its chain of enclosing loops), :func:`fuse_program`
(every pair of a program), :class:`FusionOptions`, :class:`PairReport`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import lcm

import attrs

from sarek_py.analysis.affine import queries as affine
from sarek_py.analysis.affine.conditions import MAX_ALTERNATIVES
from sarek_py.analysis.affine.paths import accesses
from sarek_py.analysis.affine.queries import (
    AffineCtx,
    AffineForm,
    Constraint,
    Dnf,
    Mode,
    ge0,
    to_affine,
    to_dnf,
)
from sarek_py.analysis.affine.reasons import affine_cause
from sarek_py.analysis.affine.wrap import WRAP_BOUND, bound_check, tests_and_lets, wrap_risk
from sarek_py.analysis.effects import (
    HelperEffects,
    kernel_effects,
    may_alias,
    may_share,
    program_helper_effects,
    stmt_effects,
)
from sarek_py.fusion.atomics import refusal as atomic_refusal
from sarek_py.fusion.loops.boundary import describe_edges, edge_type_refusal, interior
from sarek_py.fusion.loops.chains import ChainStep, chain_text, fallback_pairs, fold_chain
from sarek_py.fusion.loops.cost import CostDecision, CostItem, decide, operations
from sarek_py.fusion.loops.dead_after import (
    chains_of,
    dead_note,
    intermediates,
    last_iteration_needed,
)
from sarek_py.fusion.loops.effects import Effects, effects, is_self_contained, unknown_effect
from sarek_py.fusion.loops.inline import inline_stmt
from sarek_py.fusion.loops.intermediate import Intermediate
from sarek_py.fusion.loops.notes import describe_check
from sarek_py.fusion.loops.pingpong import swap_refusal
from sarek_py.fusion.loops.plan import Plan, conj_all
from sarek_py.fusion.loops.predict import price
from sarek_py.fusion.loops.rewrite import ProgramBuilder
from sarek_py.fusion.loops.split import Split, bound_leaves, box_of, box_test
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.program import (
    Attr,
    Block,
    CallProc,
    Decl,
    HFor,
    HIf,
    HostStmt,
    HWhile,
    ParFor,
    Procedure,
    Program,
    expr_vars,
    host_children,
    iter_host,
)
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Call,
    Cast,
    Cond,
    Const,
    Expr,
    For,
    HelperFunc,
    If,
    Length,
    Let,
    Read,
    Ref,
    Return,
    Seq,
    Stmt,
    Store,
    Unary,
    Var,
    iter_stmts,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import free_vars, iter_exprs, iter_nodes


@attrs.frozen
class FusionOptions:
    """``threshold``: operations per byte removed (LF-13; None: the default, 64, not given
    by the user: LF-63); ``swap``: ping-pong the renamed arrays (specs/ping-pong.md);
    ``backend``: the backend whose cost table row predicts fused against unfused (LF-62;
    None: no prediction, the threshold decides); ``split``: emit a box interior as loops of
    its own (LF-85; False keeps LF-52's test inside the loop, for measuring the two)."""

    threshold: float | None = None
    swap: bool = False
    backend: str | None = None
    split: bool = True


@attrs.frozen
class PairReport:
    """The outcome for one adjacent pair: fused (with its plan) or refused."""

    producer: ParFor
    consumer: ParFor
    plan: Plan | None = None
    refusal: FusionRefused | None = None
    #: why the renamed arrays of a fused pair were not swapped (``"PP-n: …"``), when asked
    swap: str | None = None
    #: whether the swap pass was asked for (LF-42: the note says, per renamed array,
    #: swapped, or copied back and why)
    swap_asked: bool = False
    #: the loops of the whole chain a fused pair is a step of (LF-70), or, for a refused
    #: pair, of the fused chain its consumer could not join (LF-73)
    chain: tuple[ParFor, ...] = ()
    #: on a second run, the fused loop whose last-iteration branch holds the pair (LF-72)
    already: ParFor | None = None
    #: what the fused program does in the chain's last iteration, and why (LF-112)
    last: str = ""

    @property
    def fused(self) -> bool:
        return self.plan is not None

    def __str__(self) -> str:
        where = f"{self.producer.loc}: " if self.producer.loc is not None else ""
        if self.plan is not None:
            names = ", ".join(i.array.name for i in self.plan.intermediates)
            extra = "".join(f"; renamed {v.name}: {self._swap_text()}"
                            for v in self.plan.renamed)
            chk = f"; {describe_check(self.plan.check)}" if self.plan.check is not None else ""
            chk += describe_edges(self.plan)
            whole = (f"; one loop with the chain of loops at lines {chain_text(self.chain)} "
                     "(LF-70)" if self.chain else "")
            return (f"{where}fused (intermediates {names}{extra}{chk}; {self.plan.cost}"
                    f"{whole}{self.last})")
        if self.already is not None:
            at = self.already.loc.line if self.already.loc is not None else "?"
            return (f"{where}already fused: the loops are the last-iteration branch of the "
                    f"fused loop at line {at} (LF-72); nothing left to fuse")
        r = self.refusal
        if r is None:  # pragma: no cover - a report is fused or refused
            return f"{where}not fused"
        # the location once: the pair's, and the cause's when it is elsewhere (LF-19)
        at = f" (at {r.loc})" if r.loc is not None and r.loc != self.producer.loc else ""
        join = (f" (joining the consumer to the fused chain of loops at lines "
                f"{chain_text(self.chain)}, LF-73; the pair alone would fuse)"
                if self.chain else "")
        return f"{where}not fused: [{r.rule}] {r.reason}{at}{join}"

    def _swap_text(self) -> str:
        """LF-42: what became of a renamed array: ping-ponged, or copied back and why."""
        if self.swap:
            rule, _, why = self.swap.partition(": ")
            return f"copied back, not swapped: [{rule}] {why}"
        if self.swap_asked:
            return "swapped (PP-4: it and its copy alternate, no copy back per iteration)"
        return "copied back (not swapped: the swap transform was not selected)"


def _refuse(rule: str, msg: str, node: ParFor | HostStmt | None = None) -> FusionRefused:
    return FusionRefused(rule, msg, getattr(node, "loc", None))


# ------------------------------------------------------------------------ the producer


def producer_stores(p: ParFor) -> tuple[Intermediate, ...]:
    """LF-2: the producer's body is stores ``x[i, j, …] <- e`` at its own iteration, each
    array once, possibly under ``if`` tests without ``else``."""
    own = tuple(Ref(v) for v in p.vars)
    out: list[Intermediate] = []

    def walk(s: Stmt, guards: tuple[Expr, ...]) -> None:
        match s:
            case Seq(stmts=ss):
                for x in ss:
                    walk(x, guards)
            case If(cond=c, then=t, else_=None):
                walk(t, (*guards, c))
            case If():
                raise _refuse("LF-2", "the producer has an 'if' with an 'else'", p)
            case Store(array=a, index=idx, value=v):
                if tuple(idx) != own:
                    raise _refuse("LF-2", f"the producer assigns '{a.name}' at another element "
                                  "than its own iteration", p)
                if any(i.array == a for i in out):
                    raise _refuse("LF-2", f"the producer assigns '{a.name}' twice", p)
                out.append(Intermediate(a, guards, v))
            case _:
                raise _refuse("LF-2", f"the producer's body has a {type(s).__name__.lower()} "
                              "(only element-wise assignments under 'if' tests)", p)

    walk(p.body, ())
    if not out:
        raise _refuse("LF-2", "the producer assigns no array", p)
    return tuple(out)


# --------------------------------------------------------------------------- helpers


def _helpers(program: Program) -> dict[str, HelperFunc]:
    table = {h.name: h for h in program.helpers}
    for k in program.kernels:
        for h in k.helpers:
            table.setdefault(h.name, h)
    return table


def _calls(node: Expr | Stmt) -> list[Call]:
    return [e for e in iter_exprs(node) if isinstance(e, Call)]


def aliased_vars(program: Program) -> frozenset[Var]:
    """Variables that may change through another name (HP-2, LF-11): the effect summary's
    EFF-10."""
    return may_alias(program)


def _decl(ctx: _Ctx, v: Var) -> Decl | None:
    for d in ctx.decls:
        if d.var == v:
            return d
    return None


def _scalars(*nodes: Expr | Stmt) -> frozenset[Var]:
    out: set[Var] = set()
    for n in nodes:
        out |= {v for v in free_vars(n) if not v.is_array}
    return frozenset(out)


def _box(loop: ParFor, ctx: AffineCtx, exact: bool) -> Dnf | None:
    """The loop's bounds as constraints on its indices (``None`` when ``exact`` and a bound
    is not affine)."""
    acc: Dnf | None = Dnf.true()
    for ix in loop.indices:
        v = to_affine(Ref(ix.var), ctx)
        lo, hi = to_affine(ix.start, ctx), to_affine(ix.stop, ctx)
        for c in ((None if lo is None or v is None else ge0(v - lo)),
                  (None if hi is None or v is None else ge0(hi - v))):
            if c is None:
                if exact:
                    return None
                continue
            assert acc is not None
            acc = acc.and_(Dnf.of(c))
            if acc is None:
                return None
    return acc


def _form_expr(form: AffineForm) -> Expr:
    """An i64 IR expression of an integral affine form (for run-time checks)."""
    den = lcm(*(c.denominator for _, c in form.terms), form.const.denominator)
    f = form.scale(den)
    acc: Expr = Const(int(f.const), Scalar.I64)
    for atom, c in f.terms:
        term: Expr = Cast(Scalar.I64, atom)
        if c != 1:
            term = Binary(BinaryOp.MUL, Const(int(c), Scalar.I64), term)
        acc = Binary(BinaryOp.ADD, acc, term)
    return acc


# -------------------------------------------------------------------------- analysis


@attrs.frozen
class _Ctx:
    program: Program
    helpers: Mapping[str, HelperFunc]
    aliased: frozenset[Var]
    #: the declarations in scope: a procedure's own, then the program's
    decls: tuple[Decl, ...] = ()
    #: in a procedure (LF-17): its array dummies and the program's arrays, any two of
    #: which may be one array; empty in the program body
    shared: frozenset[Var] = frozenset()
    #: the procedure whose body holds the pair, if any
    procedure: Procedure | None = None

    @property
    def summaries(self) -> Mapping[str, HelperEffects]:
        """The helpers' effect summaries (specs/effects.md, EFF-1)."""
        return program_helper_effects(self.program)


def _check_producer(ctx: _Ctx, p: ParFor, c: ParFor, inter: tuple[Intermediate, ...],
                    c_stores: frozenset[Var]) -> frozenset[Var]:
    """LF-3..LF-5; gives the arrays to rename (assigned by the consumer, read by the
    producer)."""
    mine = {i.array for i in inter}
    renamed: set[Var] = set()
    for it in inter:
        used = expr_vars(it.value, *it.guards)
        if used & mine:
            bad = sorted(v.name for v in used & mine)[0]
            raise _refuse("LF-3", f"the producer reads its own array '{bad}'", p)
        if used & set(p.locals):
            raise _refuse("LF-3", "the producer reads its private variable "
                          f"'{sorted(v.name for v in used & set(p.locals))[0]}'", p)
        renamed |= used & c_stores
        for a in sorted(used & ctx.aliased, key=lambda v: v.name):
            other = sorted(b.name for b in c_stores & ctx.aliased if b != a and b.is_array)
            if a.is_array and other:
                raise _refuse("LF-4", f"the producer reads '{a.name}' and the consumer writes "
                              f"'{other[0]}': both may name the same memory (pointer or "
                              "target), which renaming by name cannot follow", p)
    for v in (*mine, *renamed):
        d = _decl(ctx, v)
        if d is not None and d.attrs & {Attr.POINTER, Attr.TARGET}:
            raise _refuse("LF-4", f"'{v.name}' is a pointer or a target", p)
        if v in ctx.aliased:  # EFF-10: associated with a pointer, itself or as an actual
            raise _refuse("LF-4", f"'{v.name}' may change through another name (it is "
                          "associated with a pointer, or passed for a dummy that is)", p)
    for it in inter:
        for call in _calls(it.value) + [x for g in it.guards for x in _calls(g)]:
            h = ctx.helpers.get(call.func)
            eff = ctx.summaries.get(call.func)
            if h is None or eff is None or not h.pure or not eff.self_contained:
                raise _refuse("LF-5", f"the producer calls '{call.func}', which is not pure "
                              "and self-contained", p)
            if eff.may_stop:
                raise _refuse("LF-5", f"the producer calls '{call.func}', which may stop the "
                              "program", p)
    return frozenset(renamed)


def _consumer_body(ctx: _Ctx, c: ParFor, mine: frozenset[Var]) -> Stmt:
    """LF-6: inline the pure helpers the consumer passes intermediates to; then every use
    of an intermediate is an element read, every other call self-contained."""

    def passes(call: Call) -> bool:
        return any(v in mine for a in call.args for v in free_vars(a))

    body, _ = inline_stmt(c.body, tuple(ctx.helpers.values()), passes)
    for call in _calls(body):
        if passes(call):
            raise _refuse("LF-6", f"the consumer passes an intermediate array to "
                          f"'{call.func}', which cannot be inlined", c)
        eff = ctx.summaries.get(call.func)
        if eff is None or not eff.self_contained:
            raise _refuse("LF-6", f"the consumer calls '{call.func}', which is not "
                          "self-contained", c)
        if eff.may_stop:
            raise _refuse("LF-6", f"the consumer calls '{call.func}', which may stop the "
                          "program (the intermediate arrays would not hold the producer's "
                          "values when the program ends)", c)
    if "stop" in kernel_effects(body, ctx.summaries).stops:
        raise _refuse("LF-6", "the consumer can stop (the intermediate arrays would not "
                      "hold the producer's values when the program ends)", c)
    for s in iter_stmts(body):
        if isinstance(s, Store) and s.array in mine:
            raise _refuse("LF-6", f"the consumer assigns intermediate '{s.array.name}'", c)
    for e in iter_exprs(body):
        if isinstance(e, Length) and e.array in mine:
            raise _refuse("LF-6", f"the consumer asks the length of '{e.array.name}'", c)
        if isinstance(e, Ref) and e.var in mine:
            raise _refuse("LF-6", f"the consumer uses '{e.var.name}' other than by element", c)
    return body


def _coverage(ctx: _Ctx, p: ParFor, c: ParFor, body: Stmt,
              inter: tuple[Intermediate, ...]
              ) -> tuple[Expr | None, frozenset[Var], Expr | None, Split | str]:
    """LF-7: every element the consumer reads is one the producer writes; gives the
    run-time bounds check when the proof needs the arrays' allocation (LF-8), and the
    intermediates read where neither proves it (LF-50: read as stored outside the
    producer's domain) with the interior test of their reads (LF-52)."""
    edges: set[Var] = set()
    seen: list[tuple[Var, tuple[AffineForm, ...], Dnf, Dnf]] = []
    scal = _scalars(body, p.body, *(e for ix in (*p.indices, *c.indices)
                                    for e in (ix.start, ix.stop)))
    inv = frozenset(v for v in scal if v not in set(p.vars) | set(c.vars))
    pctx = AffineCtx(indices=frozenset(p.vars), invariant=inv)
    cctx = AffineCtx(indices=frozenset(c.vars), invariant=inv)
    pbox = _box(p, pctx, exact=True)
    if pbox is None:
        raise _refuse("LF-7", "the producer's bounds are not affine", p)
    cbox = _box(c, cctx, exact=False)
    assert cbox is not None
    checks: list[Expr] = []
    wrap = _no_wrap(p, c, body, inter, pctx, cctx, pbox, cbox)
    if wrap is not None:
        checks.append(wrap)
    by_array = {i.array: i for i in inter}
    for acc in accesses(body, cctx):
        node = acc.node
        if not isinstance(node, Read) or node.array not in by_array:
            continue
        it = by_array[node.array]
        domain: Dnf | None = pbox
        for g in it.guards:
            gd = to_dnf(g, pctx, Mode.EXACT)
            if gd is None or domain is None:
                why = affine_cause(g, pctx).text if gd is None else \
                    f"with the others it has more than {MAX_ALTERNATIVES} alternatives"
                raise _refuse("LF-7", f"the producer's test `{print_expr(g)}` of "
                              f"'{it.array.name}' is not expressible exactly: {why}", p)
            domain = domain.and_(gd)
        if domain is None:
            raise _refuse("LF-7", "the producer's tests have more than "
                          f"{MAX_ALTERNATIVES} alternatives together", p)
        if any(f is None for f in acc.index):
            bad = next(x for x, f in zip(node.index, acc.index, strict=True) if f is None)
            raise _refuse("LF-6", f"a read of '{it.array.name}' has a subscript that is not "
                          f"affine: {affine_cause(bad, cctx).text}", c)
        subs = tuple(f for f in acc.index if f is not None)
        path = acc.path.and_(cbox) or acc.path
        pidx = [Ref(v) for v in p.vars]
        seen.append((it.array, subs, path, domain))
        if affine.reads_within(subs, path, pidx, domain):
            continue
        # coverage may still follow from the allocation of the array: the reads are in
        # its bounds (valid program), and a host test checks the bounds lie in the domain
        check = _bounds_check(it.array, p, subs, path, pidx, domain)
        if check is not None:
            checks.append(check)
            continue
        # LF-50: otherwise the read keeps the stored element outside the domain
        mistyped = edge_type_refusal(p, body, it.array)
        if mistyped is not None:
            raise _refuse("LF-51", mistyped, c)
        edges.add(it.array)
    uniq: list[Expr] = []
    for e in checks:
        if e not in uniq:
            uniq.append(e)
    inside = interior(p, inter, frozenset(edges), body, frozenset(c.locals))
    if inside is not None and not _interior_proved(inside, cctx, p, edges, seen):
        inside = None  # LF-52: no split without the proof; the selects stay everywhere
    split: Split | str = ""
    if inside is not None:
        split = _split(p, c, inter, frozenset(edges), body, cctx, seen, uniq)
    return (conj_all(uniq) if uniq else None), frozenset(edges), inside, split


def _split(p: ParFor, c: ParFor, inter: tuple[Intermediate, ...], edges: frozenset[Var],
           body: Stmt, cctx: AffineCtx,
           seen: Sequence[tuple[Var, tuple[AffineForm, ...], Dnf, Dnf]],
           checks: list[Expr]) -> Split | str:
    """LF-85..LF-87: the interior as a box of its own loops, proved by the affine analysis
    (the plain recompute is exact in the box) with the pieces' bounds proved not to wrap
    (or a host test of it added to ``checks``); else why not."""
    split = box_of(p, c, inter, edges, body, cctx)
    if isinstance(split, str):
        return split
    if not _interior_proved(box_test(c, split), cctx, p, set(edges), seen):
        return "the affine analysis does not prove every read of the box in the domain"
    leaves = bound_leaves(c, split)
    if wrap_risk(leaves, cctx) is None:
        return split

    def host(a: Expr) -> bool:
        return isinstance(a, Length) or (isinstance(a, Ref) and not a.var.is_array
                                         and a.var not in set(c.vars))

    bad = wrap_risk(leaves, cctx, (), host, WRAP_BOUND)
    if bad is not None:
        return f"the bound `{print_expr(bad)}` of a piece may wrap around"
    atoms: list[Expr] = []
    for e in leaves:
        f = to_affine(e, cctx)
        atoms += [a for a in (f.atoms if f is not None else ()) if host(a) and a not in atoms]
    check = bound_check(atoms)
    if check is not None and check not in checks:
        checks.append(check)
    return split


def _interior_proved(inside: Expr, cctx: AffineCtx, p: ParFor, edges: set[Var],
                     seen: Sequence[tuple[Var, tuple[AffineForm, ...], Dnf, Dnf]]) -> bool:
    """LF-52: the affine analysis proves that where ``inside`` holds, every read of an
    array of ``edges`` lies in the producer's domain (the plain recompute is exact)."""
    test = to_dnf(inside, cctx, Mode.EXACT)
    if test is None:
        return False
    pidx = [Ref(v) for v in p.vars]
    for array, subs, path, domain in seen:
        if array not in edges:
            continue
        where = path.and_(test)
        if where is None or not affine.reads_within(subs, where, pidx, domain):
            return False
    return True


def _bounds_check(a: Var, p: ParFor, subs: Sequence[AffineForm], path: Dnf,
                  pidx: Sequence[Expr], domain: Dnf) -> Expr | None:
    """LF-8: the host test of ``a``'s bounds that makes the reads covered, or ``None`` when
    no allocation of ``a`` does (the reads then keep the stored elements, LF-50)."""
    try:
        check, known = _runtime_check(a, p, domain)
    except FusionRefused:
        return None
    inb = _in_bounds(a, subs).and_(known)
    with_bounds = None if inb is None else path.and_(inb)
    if with_bounds is None or not affine.reads_within(subs, with_bounds, pidx, domain):
        return None
    return check


def _box_facts(box: Dnf) -> list[Constraint | bool]:
    return list(next(iter(box.alts))) if len(box.alts) == 1 else []


def _no_wrap(p: ParFor, c: ParFor, body: Stmt, inter: tuple[Intermediate, ...],
             pctx: AffineCtx, cctx: AffineCtx, pbox: Dnf, cbox: Dnf) -> Expr | None:
    """LF-7 with AFF-17: the integer expressions the coverage proof relies on (both loops'
    bounds, the producer's tests, the consumer's conditions, lets and subscripts of
    intermediates) must stay within their types, since the proof takes them to be exact.
    When that holds only for host scalars and sizes within ``WRAP_BOUND``, gives the host
    test of it (run with the bounds check of LF-8); when not even then, refuses."""
    mine = {i.array for i in inter}
    cexprs, defs = tests_and_lets(body)
    for e in iter_exprs(body):
        if isinstance(e, Read) and e.array in mine:
            cexprs.extend(e.index)
        elif isinstance(e, Cond):
            cexprs.append(e.cond)
    cdefs = attrs.evolve(cctx, defs={**cctx.defs, **defs})
    cfacts = _box_facts(cbox)
    for x in iter_stmts(body):
        if isinstance(x, For):  # an inner loop: its variable lies within its bounds
            cexprs += [x.start, x.stop]
            lo, hi = to_affine(x.start, cdefs), to_affine(x.stop, cdefs)
            if x.down:
                lo, hi = hi, lo
            xf = AffineForm.of_atom(Ref(x.var))
            cfacts += ([] if lo is None else [ge0(xf - lo)]) + ([] if hi is None else
                                                               [ge0(hi - xf)])
    bounds = [e for lp in (p, c) for ix in lp.indices for e in (ix.start, ix.stop)]
    groups: list[tuple[list[Expr], AffineCtx, list[Constraint | bool]]] = [
        (bounds, pctx, []),
        ([g for it in inter for g in it.guards], pctx, _box_facts(pbox)),
        (cexprs, cdefs, cfacts),
    ]
    # variables of the loops themselves (indices, lets, inner loop variables) are not host
    # values: only host scalars and array lengths can be bounded by a host test
    local = set(p.vars) | set(c.vars) | set(defs) | set(c.locals) | {
        x.var for x in iter_stmts(body) if isinstance(x, (Let, For))}

    def host(a: Expr) -> bool:
        return isinstance(a, Length) or (isinstance(a, Ref) and not a.var.is_array
                                         and a.var not in local)

    if all(wrap_risk(es, ctx, known) is None for es, ctx, known in groups):
        return None
    atoms: list[Expr] = []
    for es, ctx, known in groups:
        bad = wrap_risk(es, ctx, known, host, WRAP_BOUND)
        if bad is not None:
            raise _refuse("LF-7", f"'{print_expr(bad)}' may wrap around (the coverage proof "
                          "takes integers to be exact)", c)
        for e in es:
            for sub in _subexprs(e):
                f = to_affine(sub, ctx)
                for a in (f.atoms if f is not None else ()):
                    if host(a) and a not in atoms:
                        atoms.append(a)
        for k in known:
            if isinstance(k, Constraint):
                atoms += [a for a in k.form.atoms if host(a) and a not in atoms]
    return bound_check(atoms)


def _subexprs(e: Expr) -> list[Expr]:
    return [x for x in iter_nodes(e) if isinstance(x, (Binary, Unary, Cast))]


def _in_bounds(a: Var, subs: Sequence[AffineForm]) -> Dnf:
    """``lower ≤ s ≤ lower + length − 1`` in every dimension (valid programs read inside)."""
    assert isinstance(a.type, ArrayType)
    cs = []
    for d, s in enumerate(subs):
        lo = a.type.lower[d]
        ln = AffineForm.of_atom(Length(a, d))
        cs += [ge0(s - lo), ge0(ln + lo - 1 - s)]
    return Dnf.of(*cs)


def _runtime_check(a: Var, p: ParFor, domain: Dnf) -> tuple[Expr, Dnf]:
    """The host test that the bounds of ``a`` lie in the producer's domain (LF-8): each
    constraint on one index at the worst end of ``a``'s bounds in that dimension."""
    assert isinstance(a.type, ArrayType)
    if len(domain.alts) != 1:
        raise _refuse("LF-8", f"coverage of '{a.name}' depends on its allocation, and the "
                      "producer's domain is not one conjunction", p)
    idx = {Ref(v): d for d, v in enumerate(p.vars)}
    tests: list[Expr] = []
    known: list[Constraint | bool] = []
    for con in sorted(next(iter(domain.alts)), key=str):
        form = con.form
        used = [atom for atom in form.atoms if atom in idx]
        if len(used) > 1:
            raise _refuse("LF-8", f"coverage of '{a.name}' depends on its allocation through "
                          "a test on two indices", p)
        if used:
            atom = used[0]
            d = idx[atom]
            lo = a.type.lower[d]
            worst = AffineForm.constant(lo) if form.coeff(atom) > 0 else \
                AffineForm.of_atom(Length(a, d)) + (lo - 1)
            form = form.substitute({atom: worst})
        if form.is_constant:
            if form.const < 0:
                raise _refuse("LF-7", f"the consumer reads elements of '{a.name}' that the "
                              "producer does not write (the bounds check can never pass)", p)
            continue
        tests.append(Binary(BinaryOp.GE, _form_expr(form), Const(0, Scalar.I64)))
        known.append(ge0(form))
    check = conj_all(tests) if tests else Const(True, Scalar.BOOL)
    return check, Dnf.of(*known)


def _check_renamed(ctx: _Ctx, c: ParFor, body: Stmt, renamed: frozenset[Var]) -> None:
    """LF-9: the consumer writes each renamed array at its own iteration on every path,
    reads it only there and only before writing it; the array is allocatable."""
    own = tuple(Ref(v) for v in c.vars)
    for a in sorted(renamed, key=lambda v: v.name):
        d = _decl(ctx, a)
        if d is None or not d.allocatable:
            raise _refuse("LF-9", f"renamed array '{a.name}' is not allocatable", c)
        for call in _calls(body):
            if a in kernel_effects(call, ctx.summaries).writes:
                raise _refuse("LF-9", f"the consumer passes renamed array '{a.name}' to "
                              f"'{call.func}', which may write it", c)
        stores = [s for s in iter_stmts(body) if isinstance(s, Store) and s.array == a]
        if len(stores) != 1 or tuple(stores[0].index) != own:
            raise _refuse("LF-9", f"the consumer does not write '{a.name}' once at its own "
                          "iteration", c)
        before = _straight_before(body, stores[0])
        if before is None:
            raise _refuse("LF-9", f"the consumer's write of '{a.name}' is not on every path",
                          c)
        if any(isinstance(n, Return) for st in before for n in iter_nodes(st)):
            raise _refuse("LF-9", f"the consumer may return before it writes '{a.name}': the "
                          "write is not on every path", c)
        for e in iter_exprs(body):
            if isinstance(e, Read) and e.array == a and tuple(e.index) != own:
                raise _refuse("LF-9", f"the consumer reads '{a.name}' at another element "
                              "than the one it writes", c)
        after_reads = [x for st in _after(body, stores[0]) for x in iter_exprs(st)
                       if isinstance(x, Read) and x.array == a]
        if after_reads:
            raise _refuse("LF-9", f"the consumer reads '{a.name}' after writing it", c)


def _straight_before(body: Stmt, target: Store) -> list[Stmt] | None:
    """The statements before ``target`` when it lies on the straight-line spine of
    ``body`` (lets and sequences), else ``None``."""
    out: list[Stmt] = []

    def walk(s: Stmt) -> bool:
        if s is target:
            return True
        match s:
            case Let(body=b):
                out.append(Let(s.var, s.value, Seq(())))
                return walk(b)
            case Seq(stmts=ss):
                for x in ss:
                    if walk(x):
                        return True
                    out.append(x)
        return False

    return out if walk(body) else None


def _after(body: Stmt, target: Store) -> list[Stmt]:
    """Statements that run after ``target`` on the spine of ``body``."""
    out: list[Stmt] = []

    def walk(s: Stmt) -> bool:
        if s is target:
            return True
        match s:
            case Let(body=b):
                return walk(b)
            case Seq(stmts=ss):
                for k, x in enumerate(ss):
                    if walk(x):
                        out.extend(ss[k + 1:])
                        return True
        return False

    walk(body)
    return out


# ------------------------------------------------------------------------------ chain


def _leaves_early(program: Program, loop: HFor) -> str | None:
    """LF-10, EFF-4: how the body of ``loop`` may leave it or end the program before its
    last iteration (``break``/``continue`` of this loop, ``return``, or a ``stop`` anywhere:
    its own, in a parallel loop's body or a helper it calls, in a called procedure), or
    ``None``."""
    e = stmt_effects(loop.body, program)
    if e.leaves:
        return sorted(e.leaves)[0]
    if not e.may_stop:
        return None
    for x in iter_host(loop.body):
        if isinstance(x, (Block, HIf, HFor, HWhile)):
            continue
        ex = stmt_effects(x, program)
        if ex.may_stop:
            return unknown_effect(x, ex, program)
    return "stop"  # pragma: no cover - a stop is in some statement


def _others(loop: HFor, inner: Sequence[HostStmt]) -> list[HostStmt]:
    body = loop.body.stmts if isinstance(loop.body, Block) else (loop.body,)
    return [s for s in body if not any(s is x for x in inner)]


def _chain(ctx: _Ctx, ancestors: Sequence[HostStmt], p: ParFor, c: ParFor,
           inter: tuple[Intermediate, ...], renamed: frozenset[Var],
           c_writes: frozenset[Var], absorbed: Sequence[ParFor] = ()) -> tuple[HFor, ...]:
    """LF-10..LF-12, LF-18: the enclosing do loops the fusion relies on, innermost
    first. ``absorbed``: the original loops a fused consumer stands for (LF-70), not
    other statements of the innermost loop."""
    mine = {i.array for i in inter}
    ptests = expr_vars(*(e for ix in p.indices for e in (ix.start, ix.stop)),
                       *(g for i in inter for g in i.guards))
    if ptests & c_writes:
        bad = sorted(v.name for v in ptests & c_writes)[0]
        raise _refuse("LF-18", f"the producer's bounds or tests read '{bad}', which the "
                      "consumer writes: the producer would assign other elements at each "
                      "iteration, and the fused loop keeps only the last iteration's", p)
    if ptests & ctx.aliased:
        bad = sorted(v.name for v in ptests & ctx.aliased)[0]
        raise _refuse("LF-11", f"the producer's bounds or tests read '{bad}', which may "
                      "change through another name", p)
    chain: list[HFor] = []
    inner: list[HostStmt] = [p, c, *absorbed]
    k = len(ancestors) - 1
    holder: HostStmt | None = ancestors[k] if k >= 0 else None
    if isinstance(holder, Block):
        k -= 1
        holder = ancestors[k] if k >= 0 else None
    while isinstance(holder, HFor):
        loop = holder
        why = _loop_problem(ctx, loop, inner, mine, renamed, ptests)
        if why is not None:
            if not chain:
                raise why
            break
        chain.append(loop)
        inner = [loop]
        k -= 1
        holder = ancestors[k] if k >= 0 else None
        if isinstance(holder, Block):
            k -= 1
            holder = ancestors[k] if k >= 0 else None
    if not chain and isinstance(holder, HWhile):  # LF-40
        raise _refuse("LF-40", "the loops are the body of a 'while' loop, whose last "
                      "iteration is not known until its condition fails: a while loop is a "
                      "barrier to fusion (put the pair in a 'for' loop inside it)", p)
    if not chain:
        raise _refuse("LF-10", "the loops are not the body of a do loop (without one, the "
                      "intermediate arrays would be needed after the fused loop)", p)
    return tuple(chain)


def _loop_problem(ctx: _Ctx, loop: HFor, inner: Sequence[HostStmt], mine: set[Var],
                  renamed: frozenset[Var], ptests: frozenset[Var]) -> FusionRefused | None:
    if loop.step is not None and not (isinstance(loop.step, Const) and loop.step.value == 1):
        return _refuse("LF-10", f"loop '{loop.var.name}' does not have a unit step", loop)
    if any(isinstance(e, Call) for b in (loop.start, loop.stop) for e in iter_exprs(b)):
        return _refuse("LF-10", f"the bounds of loop '{loop.var.name}' call a function", loop)
    early = _leaves_early(ctx.program, loop)
    if early is not None:
        return _refuse("LF-10", f"loop '{loop.var.name}' may be left early ({early})", loop)
    eff = Effects()
    for s in _others(loop, inner):
        e = effects(s, ctx.program)
        if e.unknown is not None:
            return _refuse("LF-12", f"a statement of loop '{loop.var.name}' has an effect the "
                           f"pass does not model: {e.unknown}", s)
        for x in iter_host(s):
            if isinstance(x, CallProc):
                if not is_self_contained(ctx.program.procedure(x.proc), ctx.program):
                    return _refuse("LF-12", f"loop '{loop.var.name}' calls '{x.proc}', which "
                                   "is not self-contained", x)
        eff = eff | e
    if (eff.defs | eff.reads) & mine:
        bad = sorted(v.name for v in (eff.defs | eff.reads) & mine)[0]
        return _refuse("LF-12", f"another statement of loop '{loop.var.name}' uses "
                       f"intermediate '{bad}'", loop)
    shared = _shared_in_loop(ctx, loop, eff, mine, ptests)
    if shared is not None:
        return shared
    if loop.var in ptests:
        return _refuse("LF-11", f"the producer's bounds or tests read loop variable "
                       f"'{loop.var.name}'", loop)
    if eff.defs & ptests:
        bad = sorted(v.name for v in eff.defs & ptests)[0]
        return _refuse("LF-11", f"loop '{loop.var.name}' assigns '{bad}', which the producer's "
                       "bounds or tests read", loop)
    all_defs = effects(loop.body, ctx.program).defs
    if loop.var in all_defs or loop.var in ctx.aliased:
        return _refuse("LF-10", f"loop '{loop.var.name}' may assign its own variable: its "
                       "last iteration would not be recognised (LF-15)", loop)
    for x in iter_host(loop.body):
        if isinstance(x, HFor):
            bvars = expr_vars(x.start, x.stop, x.step)
            if loop.var in bvars or bvars & all_defs or bvars & ctx.aliased:
                return _refuse("LF-11", f"the bounds of loop '{x.var.name}' may change between "
                               f"iterations of loop '{loop.var.name}'", x)
    realloc = stmt_effects(loop.body, ctx.program).reallocates & renamed
    if realloc:
        a = sorted(realloc, key=lambda v: v.name)[0]
        where = next((x for x in iter_host(loop.body)
                      if not isinstance(x, (Block, HIf, HFor, HWhile))
                      and a in stmt_effects(x, ctx.program).reallocates), loop)
        return _refuse("LF-9", f"loop '{loop.var.name}' may change the allocation of "
                       f"renamed array '{a.name}'", where)
    return None


def _shared_in_loop(ctx: _Ctx, loop: HFor, eff: Effects, mine: set[Var],
                    ptests: frozenset[Var]) -> FusionRefused | None:
    """LF-17 over a chain loop's other statements: in a procedure, they write one array a
    caller may pass as another (EFF-11) that the producer's bounds or tests read, or name
    one that is an intermediate under another name. LF-11 and LF-12 compare names."""
    if ctx.procedure is None:
        return None
    mine_s = frozenset(mine) & ctx.shared
    pairs = [(x, y, y in mine_s) for x in eff.defs & ctx.shared
             for y in (ptests & ctx.shared) | mine_s if x != y]
    pairs += [(x, y, True) for x in eff.reads & ctx.shared for y in mine_s if x != y]
    if not pairs:
        return None
    x, y, inter = min(pairs, key=lambda t: (not t[2], t[0].name, t[1].name))
    what = f"intermediate '{y.name}'" if inter else \
        f"'{y.name}', which the producer's bounds or tests read,"
    return _refuse("LF-17", f"in procedure '{ctx.procedure.name}', another statement of loop "
                   f"'{loop.var.name}' {'writes' if x in eff.defs else 'reads'} '{x.name}' "
                   f"and the pair's {what} may be the same array (dummies or program arrays "
                   "a caller may pass as one)", loop)


# ------------------------------------------------------------------------------ cost


def _cost(ctx: _Ctx, body: Stmt, inter: tuple[Intermediate, ...],
          threshold: float | None) -> CostDecision:
    items = []
    for it in inter:
        reads = sum(1 for e in iter_exprs(body) if isinstance(e, Read) and e.array == it.array)
        if reads == 0:
            continue
        ops = operations(it.value, ctx.helpers)
        items.append(CostItem(it.array.name, ops, reads, it.array.scalar))
    return decide(items, threshold)


# --------------------------------------------------------------------------- analysis


def _scope(program: Program, procedure: Procedure | None) -> _Ctx:
    """What the analysis knows of the scope of a pair: the program body, or a procedure's
    body (LF-17)."""
    base = _Ctx(program, _helpers(program), aliased_vars(program), tuple(program.decls))
    if procedure is None:
        return base
    shared = may_share(program, procedure)
    return attrs.evolve(base, decls=(*procedure.decls, *program.decls), shared=shared,
                        procedure=procedure)


def _check_shared(ctx: _Ctx, p: ParFor, c: ParFor) -> None:
    """LF-17: in a procedure, the arrays the pair names (bodies and bounds) that a caller
    may pass as one (array dummies, the program's arrays) number at most one when the
    pair writes any of them."""
    if ctx.procedure is None:
        return
    bounds = expr_vars(*(e for loop in (p, c) for ix in loop.indices
                         for e in (ix.start, ix.stop)))
    named = {v for v in free_vars(p.body) | free_vars(c.body) | bounds
             if v.is_array} & ctx.shared
    written = (kernel_effects(p.body, ctx.summaries).writes
               | kernel_effects(c.body, ctx.summaries).writes) & named
    if len(named) >= 2 and written:
        names = sorted(v.name for v in named)
        raise _refuse("LF-17", f"in procedure '{ctx.procedure.name}', the pair writes "
                      f"'{sorted(v.name for v in written)[0]}' and names "
                      f"{', '.join(repr(n) for n in names)}, dummies or program arrays a "
                      "caller may pass as one array", p)


def analyse_pair(program: Program, ancestors: Sequence[HostStmt], p: ParFor, c: ParFor,
                 options: FusionOptions = FusionOptions(),
                 procedure: Procedure | None = None, absorbed: Sequence[ParFor] = ()) -> Plan:
    """Prove the fusion of producer ``p`` and consumer ``c`` (adjacent, in that order, in
    the block ``ancestors[-1]`` of the program body, or of ``procedure``'s body) or raise
    :class:`FusionRefused` (LF-1..LF-13, LF-17). ``c`` may be the fused loop of the rest of
    a chain, standing for the original loops ``absorbed`` (LF-70)."""
    ctx = _scope(program, procedure)
    inter = producer_stores(p)
    mine = frozenset(i.array for i in inter)
    for loop, rule, who in ((p, "LF-3", "producer"), (c, "LF-6", "consumer")):
        used = expr_vars(*(e for ix in loop.indices for e in (ix.start, ix.stop))) & mine
        if used:
            raise _refuse(rule, f"the {who}'s bounds read intermediate "
                          f"'{sorted(v.name for v in used)[0]}', which the fused loop does "
                          "not write", loop)
    _check_shared(ctx, p, c)
    c_stores = kernel_effects(c.body, ctx.summaries).writes
    renamed = _check_producer(ctx, p, c, inter, c_stores)
    body = _consumer_body(ctx, c, mine)
    if not any(isinstance(e, Read) and e.array in mine for e in iter_exprs(body)):
        raise _refuse("LF-1", "the consumer reads no array the producer assigns", c)
    if renamed:
        _check_renamed(ctx, c, body, renamed)
    chain = _chain(ctx, ancestors, p, c, inter, renamed, c_stores, absorbed)
    check, edges, inside, split = _coverage(ctx, p, c, body, inter)
    if not options.split and not isinstance(split, str):
        split = "not asked for (FusionOptions(split=False))"
    plan = Plan(p, c, inter, tuple(sorted(renamed, key=lambda v: v.name)), body, chain,
                check, _cost(ctx, body, inter, options.threshold), edges, inside,
                split=None if isinstance(split, str) else split,
                no_split=split if isinstance(split, str) else "")
    swapped = options.swap and bool(renamed) and swap_refusal(program, plan) is None
    plan = price(plan, options.backend, ctx.helpers, swapped, program)  # LF-62
    if not plan.cost.pays:
        raise _refuse("LF-13", plan.cost.refusal(), p)
    return plan


# ------------------------------------------------------------------- program rewrite


@attrs.define
class _Rewriter:
    program: Program
    options: FusionOptions
    reports: list[PairReport] = attrs.field(factory=list)
    plans: dict[int, list[tuple[int, Plan]]] = attrs.field(factory=dict)
    procedure: Procedure | None = None

    def find(self, s: HostStmt, ancestors: list[HostStmt]) -> None:
        if isinstance(s, HIf):
            done = fallback_pairs(s, ancestors)
            if done is not None:  # LF-72: a second run leaves fused output as it is
                pairs, fused = done
                self.reports += [PairReport(p, c, already=fused) for p, c in pairs]
                return
        if isinstance(s, Block):
            k = 0
            while k + 1 < len(s.stmts):
                p, c = s.stmts[k], s.stmts[k + 1]
                if isinstance(p, ParFor) and isinstance(c, ParFor):
                    try:
                        plan = self.analyse(s, ancestors, p, c, ())
                    except FusionRefused as exc:
                        self.reports.append(PairReport(p, c, refusal=exc))
                    else:
                        k = self.extend(s, ancestors, k, plan)
                        continue
                k += 1
        for ch in host_children(s):
            self.find(ch, [*ancestors, s])


    def analyse(self, s: Block, ancestors: list[HostStmt], p: ParFor, c: ParFor,
                absorbed: Sequence[ParFor]) -> Plan:
        return analyse_pair(self.program, [*ancestors, s], p, c, self.options,
                            self.procedure, absorbed)

    def extend(self, s: Block, ancestors: list[HostStmt], k: int, plan: Plan) -> int:
        """LF-70: the pair at ``k`` fused; add the following parallel loops one at a time
        while the whole chain fuses (each step an ordinary pair analysis); report each
        pair once, in program order, and give the index after the chain."""
        steps = [ChainStep(plan.producer, plan.consumer, plan)]
        joined: PairReport | None = None
        m = k + 2
        while m < len(s.stmts) and isinstance(s.stmts[m], ParFor):
            loops = [x for x in s.stmts[k:m + 1] if isinstance(x, ParFor)]
            try:
                plan, steps = fold_chain(
                    lambda p, c, a: self.analyse(s, ancestors, p, c, a), loops)
            except FusionRefused as exc:
                joined = self.refused_join(s, ancestors, loops, exc)
                break
            m += 1
        whole = plan.loops if len(plan.loops) > 2 else ()
        self.reports += [PairReport(st.producer, st.consumer, plan=st.plan, chain=whole)
                         for st in steps]
        if joined is not None:
            self.reports.append(joined)
        self.plans.setdefault(id(s), []).append((k, plan))
        return k + len(plan.loops)

    def refused_join(self, s: Block, ancestors: list[HostStmt], loops: Sequence[ParFor],
                     exc: FusionRefused) -> PairReport:
        """LF-73: the pair joining the last loop to the chain, refused: with its own
        rule when the pair alone is refused, else with the rule of the step that was."""
        p, c = loops[-2], loops[-1]
        try:
            self.analyse(s, ancestors, p, c, ())
        except FusionRefused as own:
            return PairReport(p, c, refusal=own)
        return PairReport(p, c, refusal=exc, chain=tuple(loops[:-1]))


def fuse_program(program: Program, options: FusionOptions = FusionOptions()
                 ) -> tuple[Program, list[PairReport]]:
    """Fuse every adjacent pair of parallel loops the rules allow (LF-1..LF-15), in the
    program body and in each procedure's body (LF-17); give the new program and a report
    per pair. ``options.swap`` ping-pongs renamed arrays (specs/ping-pong.md)."""
    held = atomic_refusal((program.body, program.procedures, program.helpers),
                          f"program {program.name}", into_kernels=False)
    if held is not None:  # LEG-20 (a checked program has none there: HP-20)
        raise held
    rw = _Rewriter(program, options)
    rw.find(program.body, [])
    for proc in program.procedures:
        rw.procedure = proc
        rw.find(proc.body, [])
    if not rw.plans:
        return program, rw.reports
    plans = [plan for entries in rw.plans.values() for _, plan in entries]
    arrays = {id(plan): intermediates(program, plan) for plan in plans}
    needed = {id(plan): last_iteration_needed(program, plan, arrays[id(plan)])
              for plan in plans}
    by_loop = chains_of(plans)
    reports = []
    for r in rw.reports:
        plan = by_loop.get(id(r.producer)) if r.plan is not None else None
        reports.append(r if plan is None else attrs.evolve(
            r, last=dead_note(plan, arrays[id(plan)], needed[id(plan)])))
    dead = frozenset(k for k, why in needed.items() if why is None)
    return ProgramBuilder(program, options.swap, rw.plans, dead=dead).build(), _swap_notes(
        program, options, reports)


def _swap_notes(program: Program, options: FusionOptions,
                reports: list[PairReport]) -> list[PairReport]:
    """The reports, each fused pair with renamed arrays telling why it was not swapped
    when ``options.swap`` asked for it (PP-1..PP-3: a refusal is said, LF-19)."""
    if not options.swap:
        return reports
    return [attrs.evolve(r, swap=swap_refusal(program, r.plan), swap_asked=True)
            if r.plan is not None and r.plan.renamed else r for r in reports]


__all__ = [
    "FusionOptions", "PairReport", "analyse_pair", "fuse_program", "producer_stores",
]

