"""Legality of epilogue fusion at the level of launches (specs/fusion-legality.md, LEG-*).

Two checks, the seed's ``Index_slice`` and ``Launch_window``:

* :func:`index_slice` proves that P's launch stores each element of C's domain
  ``[0, tc)`` of the intermediate exactly once. With the launch known, P's scalar
  arguments, thread count, block size and the lengths of bound numpy arrays are numbers,
  so every store index and every condition around a store that is affine in the thread
  id ``g`` is a one-variable affine form. A condition is then a finite union of integer
  intervals of ``g`` (exactly), loops with constant bounds are unrolled, and the stores
  become pieces ``{a*g + b : g in [lo, hi]}``. Exactly once holds iff the pieces,
  restricted to ``[0, tc)``, are pairwise disjoint (decided exactly with the extended
  Euclidean algorithm) and count ``tc`` elements in all. Anything outside this class is
  refused with a reason: the analysis is sound, never approximate.
  When a thread count or a scalar argument is a symbolic host expression (LEG-12), the
  proof is the affine analysis's instead (:mod:`sarek_py.analysis.affine.queries`: store sites with
  exact guards, coverage by Fourier-Motzkin).
* :func:`launch_window` checks, with the buffers bound to the parameters (aliasing
  included), that C reads nothing else P writes and writes nothing P or C reads
  elsewhere.

:func:`check_launches` runs both and derives ``shared`` and the intermediate array.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import attrs
import numpy as np

from sarek_py.analysis.affine.paths import NotExact, store_sites_why
from sarek_py.analysis.affine.queries import (
    AffineCtx,
    AffineForm,
    Constraint,
    Dnf,
    covers_exactly_once,
    ge0,
    is_uniform_atom,
    to_affine,
)
from sarek_py.analysis.affine.reasons import Cause, affine_cause, cause, quote
from sarek_py.analysis.affine.wrap import (
    Wrap,
    find_wrap,
    guarded_exprs,
    tests_and_lets,
    wrap_risk,
)
from sarek_py.fusion.epilogue.accesses import accesses_stmt, stopping_call
from sarek_py.fusion.epilogue.buffers import (
    arg_buffer,
    buffer_key,
    is_array,
    overlap,
    overlaps_itself,
)
from sarek_py.fusion.epilogue.consumer import Consumer, consumer_shape, window_conflict
from sarek_py.fusion.epilogue.domain import acting_dnf, project, spans
from sarek_py.fusion.epilogue.grid_stride import (
    ElementBody,
    GridStride,
    NotGridStride,
    assigned_vars,
    element_body,
    increment_wraps,
    induction,
    stride_is_thread_count,
    stride_problem,
)
from sarek_py.fusion.epilogue.well_formed import well_formed
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.deep import deep
from sarek_py.ir.host.launch import UNBOUND, Launch, LaunchArg, is_symbolic
from sarek_py.ir.intrinsics import GLOBAL_IDS
from sarek_py.ir.jumps import first_jump, jump_word
from sarek_py.ir.nodes import (
    Assign,
    Barrier,
    Binary,
    BinaryOp,
    Break,
    Call,
    Cast,
    Const,
    Continue,
    Empty,
    Expr,
    For,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Loc,
    Pragma,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Unary,
    UnaryOp,
    Var,
    While,
    iter_stmts,
)
from sarek_py.ir.nodes import var as fresh_var
from sarek_py.ir.printer import print_expr
from sarek_py.ir.requires import Count
from sarek_py.ir.thread_index import on_launch
from sarek_py.ir.typeof import scalar_type_of, type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes, map_node, substitute

#: the most loop iterations unrolled to follow the stores of one loop (LEG-5)
MAX_UNROLL = 1024
#: the most store pieces compared pairwise (LEG-3)
MAX_PIECES = 4096

_RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}

# --------------------------------------------------------------------- sets of thread ids


@attrs.frozen
class GSet:
    """A finite set of thread ids: sorted, disjoint, non-adjacent inclusive intervals."""

    spans: tuple[tuple[int, int], ...] = ()

    @staticmethod
    def range(lo: int, hi: int) -> GSet:
        return GSet(((lo, hi),)) if lo <= hi else GSet()

    def __and__(self, other: GSet) -> GSet:
        out: list[tuple[int, int]] = []
        for a, b in self.spans:
            for c, d in other.spans:
                lo, hi = max(a, c), min(b, d)
                if lo <= hi:
                    out.append((lo, hi))
        return _normal(out)

    def __or__(self, other: GSet) -> GSet:
        return _normal([*self.spans, *other.spans])

    def __sub__(self, other: GSet) -> GSet:
        out = list(self.spans)
        for c, d in other.spans:
            nxt: list[tuple[int, int]] = []
            for a, b in out:
                if d < a or b < c:
                    nxt.append((a, b))
                    continue
                if a < c:
                    nxt.append((a, c - 1))
                if d < b:
                    nxt.append((d + 1, b))
            out = nxt
        return _normal(out)

    def __len__(self) -> int:
        return sum(b - a + 1 for a, b in self.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)


def _normal(spans: list[tuple[int, int]]) -> GSet:
    spans = sorted(s for s in spans if s[0] <= s[1])
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return GSet(tuple(out))


# ------------------------------------------------------------------- affine forms in g


@attrs.frozen
class Aff:
    """``a*g + b`` for the thread id ``g``."""

    a: int
    b: int

    def at(self, g: int) -> int:
        return self.a * g + self.b


def _ge0(f: Aff, universe: GSet) -> GSet:
    """The thread ids of ``universe`` where ``a*g + b >= 0``."""
    if f.a == 0:
        return universe if f.b >= 0 else GSet()
    if not universe:
        return GSet()
    lo, hi = universe.spans[0][0], universe.spans[-1][1]
    if f.a > 0:
        return universe & GSet.range(-(f.b // f.a), hi)
    return universe & GSet.range(lo, f.b // (-f.a))


class _Unsure(Exception):
    """The analysis cannot decide: fusion is refused with this reason."""

    def __init__(self, rule: str, message: str, loc: Loc | None = None):
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.loc = loc


Value = Aff | GSet
"""What the analysis knows of an integer value (an affine form) or a boolean (a set)."""


@attrs.define
class _Analysis:
    """The walk of P's body that collects its stores to the intermediate."""

    launch: Launch
    array: Var
    universe: GSet
    env: dict[int, Value] = attrs.field(factory=dict)
    #: immutable ``let`` variables with their definitions (to say why a value is unknown)
    defs: dict[Var, Expr] = attrs.field(factory=dict)
    #: the location of the first store of the intermediate met (LEG-3 refusals)
    first_store: Loc | None = None
    #: the element view of a grid-stride loop (LEG-21): the universe is the loop's
    #: elements, and the thread id is not known (only the counter is)
    element: bool = False
    #: the value of each mutable counter last assigned at this level (LEG-21)
    assigned: dict[int, Aff | None] = attrs.field(factory=dict)
    #: grid-stride loops followed otherwise than by the element view, and why (LEG-3)
    notes: list[str] = attrs.field(factory=list)

    # -- expressions

    def _fits(self, e: Expr, f: Aff) -> Aff | None:
        t = type_of(e)
        if t not in _RANGE:
            return None
        if not self.universe:
            return f  # no thread evaluates it: nothing can wrap (LEG-6, LEG-17)
        lo, hi = _RANGE[t]
        ends = (f.at(self.universe.spans[0][0]), f.at(self.universe.spans[-1][1]))
        return f if lo <= min(ends) and max(ends) <= hi else None

    def aff(self, e: Expr) -> Aff | None:
        """``e`` as an affine form in ``g``, or ``None`` (LEG-2, LEG-6)."""
        r = self._aff(e)
        return None if r is None else self._fits(e, r)

    def _aff(self, e: Expr) -> Aff | None:
        match e:
            case Const(value=v, type=t) if t.is_int and isinstance(v, int):
                return Aff(0, v)
            case Ref(var=v):
                val = self.env.get(v.id)
                return val if isinstance(val, Aff) else None
            case Intrinsic(name=n, args=()):
                return self._intrinsic(n)
            case Length(array=v, dim=d):
                arr = self.launch.by_name.get(v.name)
                if is_array(arr) and d < len(arr.shape):
                    return Aff(0, int(arr.shape[d]))
                return None
            case Unary(op=UnaryOp.NEG, arg=x):
                f = self.aff(x)
                return None if f is None else Aff(-f.a, -f.b)
            case Cast(to=t, arg=x) if t.is_int and type_of(x) in _RANGE:
                return self.aff(x)
            case Binary(op=op, lhs=lhs, rhs=rhs):
                return self._binary(op, lhs, rhs)
        return None

    def _intrinsic(self, n: str) -> Aff | None:
        if n in GLOBAL_IDS:
            return None if self.element else Aff(1, 0)
        threads, block = self.launch.threads, self.launch.block
        if n == "block_dim_x" and isinstance(block, int):
            return Aff(0, block)
        if n == "grid_dim_x" and isinstance(threads, int) and isinstance(block, int):
            return Aff(0, -(-threads // block))
        return None

    def _binary(self, op: BinaryOp, lhs: Expr, rhs: Expr) -> Aff | None:
        x, y = self.aff(lhs), self.aff(rhs)
        if x is None or y is None:
            return None
        match op:
            case BinaryOp.ADD:
                return Aff(x.a + y.a, x.b + y.b)
            case BinaryOp.SUB:
                return Aff(x.a - y.a, x.b - y.b)
            case BinaryOp.MUL if x.a == 0 or y.a == 0:
                return Aff(x.a * y.b + y.a * x.b, x.b * y.b)
            case BinaryOp.SHL if y.a == 0 and 0 <= y.b < scalar_type_of(lhs).bits:
                return Aff(x.a << y.b, x.b << y.b)
            case BinaryOp.DIV if x.a == 0 and y.a == 0 and y.b != 0:
                q = abs(x.b) // abs(y.b)
                return Aff(0, q if (x.b >= 0) == (y.b > 0) else -q)
            case BinaryOp.MOD if x.a == 0 and y.a == 0 and y.b != 0:
                r = abs(x.b) % abs(y.b)
                return Aff(0, r if x.b >= 0 else -r)
        return None

    def known(self, e: Expr) -> bool:
        """Whether the integer or boolean ``e`` is known (LEG-2)."""
        if type_of(e) is Scalar.BOOL:
            return self.cond(e) is not None
        return self.aff(e) is not None

    def cause(self, e: Expr) -> Cause:
        """Why ``e`` is not known: the smallest unknown part and what it is (LEG-17)."""

        def leaf(x: Expr) -> Cause | None:
            if self.element and isinstance(x, Intrinsic) and x.name in GLOBAL_IDS:
                return Cause(x, f"{quote(x)} is the thread id, which is not known inside a "
                             "grid-stride loop's body: there only the loop's counter is "
                             "known for each element (its element view, LEG-21)", x.loc)
            if type_of(x) in _RANGE and self._aff(x) is not None:
                t = type_of(x)
                return Cause(x, f"{quote(x)} may overflow {t} for some thread in "
                             f"[0, {self.launch.threads}) (the device would wrap around)",
                             x.loc, "overflow")
            if isinstance(x, Length):
                return Cause(x, f"the length of {x.array.name} is not known (bind a numpy "
                             "array to it to make it known)", x.loc)
            if isinstance(x, Ref) and x.var in self.launch.kernel.params:
                return Cause(x, f"{x.var.name} has no integer value at this launch", x.loc)
            return None

        return cause(e, self.known, self.defs, leaf)

    def cond(self, e: Expr) -> GSet | None:
        """The thread ids of the universe where the boolean ``e`` holds, or ``None``."""
        u = self.universe
        match e:
            case Const(value=bool() as v):
                return u if v else GSet()
            case Ref(var=v):
                val = self.env.get(v.id)
                return val if isinstance(val, GSet) else None
            case Unary(op=UnaryOp.NOT, arg=x):
                s = self.cond(x)
                return None if s is None else u - s
            case Binary(op=BinaryOp.AND, lhs=lhs, rhs=rhs):
                s, t = self.cond(lhs), self.cond(rhs)
                return None if s is None or t is None else s & t
            case Binary(op=BinaryOp.OR, lhs=lhs, rhs=rhs):
                s, t = self.cond(lhs), self.cond(rhs)
                return None if s is None or t is None else s | t
            case Binary(op=op, lhs=lhs, rhs=rhs) if op.is_compare:
                fx, fy = self.aff(lhs), self.aff(rhs)
                if fx is None or fy is None:
                    return None
                return _compare(op, Aff(fx.a - fy.a, fx.b - fy.b), u)
        return None

    # -- statements

    def walk(self, s: Stmt, alive: GSet) -> tuple[list[tuple[GSet, Aff]], GSet]:
        """The stores to the intermediate of ``s`` run by the threads ``alive``, as
        (threads, index) pieces, and the threads that come out of ``s``."""
        match s:
            case Store(array=a, index=(ix,)) if a == self.array:
                if self.first_store is None:
                    self.first_store = s.loc
                f = self.aff(ix)
                if f is None:
                    why = self.cause(ix)
                    raise _Unsure("LEG-6" if why.kind == "overflow" else "LEG-2",
                                  f"the store index {quote(ix)} of {a.name} is not affine "
                                  f"in the thread id with known coefficients: {why.text}",
                                  why.loc or s.loc)
                return ([(alive, f)] if alive else []), alive
            case Let(var=v, value=e, body=b):
                val: Value | None = None
                if v.mutable:
                    self.assigned[v.id] = self.aff(e) if type_of(e) in _RANGE else None
                else:
                    self.defs[v] = e
                    val = self.cond(e) if type_of(e) is Scalar.BOOL else self.aff(e)
                if val is None:
                    self.env.pop(v.id, None)  # a binder may be reused: forget its old value
                else:
                    self.env[v.id] = val
                return self.walk(b, alive)
            case Seq(stmts=ss):
                items: list[tuple[GSet, Aff]] = []
                for x in ss:
                    got, alive = self.walk(x, alive)
                    items += got
                return items, alive
            case If(cond=c, then=t, else_=e):
                return self._killing(s, self._if(c, t, e, alive))
            case For():
                return self._killing(s, self._for(s, alive))
            case While(body=b):
                if not self._touches(b):
                    return self._killing(s, ([], alive))
                return self._killing(s, self._while(s, alive))
            case Assign(var=v, value=e):
                self.assigned[v.id] = self.aff(e) if type_of(e) in _RANGE else None
                return [], alive
            case Pragma(body=b):
                return self.walk(b, alive)
            case Return():
                return [], GSet()
            case Stop():
                raise _Unsure("LEG-5", "the producer may stop (the elements it would store "
                              "after the stop are not known)", s.loc)
            case Store() | Barrier() | Empty():
                return [], alive
            case Break() | Continue():  # refused by _for before its body is walked
                raise _Unsure("EF-19", f"a {jump_word(s)} around a store of "
                              f"{self.array.name} is not followed", s.loc)
        raise _Unsure("LEG-2", f"cannot follow {type(s).__name__}")  # pragma: no cover

    def _touches(self, s: Stmt) -> bool:
        return any(isinstance(n, (Return, Stop)) or (isinstance(n, Store) and n.array == self.array)
                   for n in iter_nodes(s))

    def _killing(self, s: Stmt, res: tuple[list[tuple[GSet, Aff]], GSet]
                 ) -> tuple[list[tuple[GSet, Aff]], GSet]:
        """``res``, forgetting the counters ``s`` may assign: after a branch or a loop
        their values are not the ones assigned at this level (LEG-21)."""
        for v in assigned_vars(s):
            self.assigned.pop(v.id, None)
        return res

    def _while(self, s: While, alive: GSet) -> tuple[list[tuple[GSet, Aff]], GSet]:
        """A ``while`` loop that stores the intermediate: a grid-stride loop (LEG-21,
        LEG-22), followed by its element view or iteration by iteration; else refused."""
        arr = self.array.name
        jump = first_jump(s.body)
        if jump is not None:
            raise _Unsure("EF-19", f"a while loop that stores {arr} or may return has a "
                          f"{jump_word(jump)}: which threads store which elements is not "
                          "followed through a break or continue", jump.loc or s.loc)
        gs = induction(s)
        if isinstance(gs, NotGridStride):
            raise _Unsure("LEG-5", f"a while loop stores {arr} or returns, and it is not a "
                          f"grid-stride loop (LEG-21): {gs.reason}", gs.loc or s.loc)
        v = gs.var.name
        start = self.assigned.get(gs.var.id)
        if start is None:
            raise _Unsure("LEG-21", f"{gs.name} stores {arr}, but the value of {v} before "
                          "it is not known (assign it the thread's global id, "
                          f"`{v} := global_idx_x`, right before the loop)", s.loc)
        n, st = self.aff(gs.bound), self.aff(gs.stride)
        for what, e, f in (("bound", gs.bound, n), ("stride", gs.stride, st)):
            if f is None or f.a != 0:
                why = (self.cause(e).text if f is None
                       else f"{quote(e)} depends on the thread id")
                raise _Unsure("LEG-21", f"{gs.name} stores {arr}, and its {what} is not a "
                              f"known number at this launch: {why}", e.loc or s.loc)
        assert n is not None and st is not None
        entering = _ge0(Aff(-start.a, n.b - 1 - start.b), alive)  # start < n
        if not entering:
            return [], alive
        if st.b <= 0:
            raise _Unsure("LEG-21", f"{gs.name} stores {arr}, and its stride "
                          f"{quote(gs.stride)} is {st.b}: the loop would not end", s.loc)
        wraps = increment_wraps(gs, n.b, st.b)
        if wraps is not None:
            raise _Unsure("LEG-22", f"{gs.name}: {wraps}", gs.stride.loc or s.loc)
        threads = len(self.universe)
        problem = stride_problem(gs, start == Aff(1, 0) and not self.element,
                                 alive == self.universe, st.b, threads)
        if problem is None:
            return self._element_view(gs, n.b), alive
        self.notes.append(f"{gs.name} is no grid-stride loop over all threads: {problem}, "
                          "LEG-21")
        # not the element view: its iterations one by one, iteration k on the threads
        # whose value start + k*stride is still below n
        low = min(start.at(g) for span in entering.spans for g in span)
        count = _ceil_div(n.b - low, st.b)
        if count > MAX_UNROLL:
            raise _Unsure("LEG-21", f"{gs.name} stores {arr}, and it is not a grid-stride "
                          f"loop over all threads ({problem}); followed iteration by "
                          f"iteration it runs up to {count} times, more than {MAX_UNROLL}",
                          s.loc)
        items: list[tuple[GSet, Aff]] = []
        for k in range(count):
            at = Aff(start.a, start.b + k * st.b)
            run = _ge0(Aff(-at.a, n.b - 1 - at.b), alive)
            if not run:
                break
            self.env[gs.var.id] = at
            got, _ = self.walk(gs.body, run)
            items += got
        self.env.pop(gs.var.id, None)
        return items, alive

    def _element_view(self, gs: GridStride, n: int) -> list[tuple[GSet, Aff]]:
        """The stores of a grid-stride loop's body run once for each ``i`` in ``[0, n)``
        (the proof in :mod:`~sarek_py.fusion.epilogue.grid_stride`), as pieces over
        ``i``: an ``n``-thread launch of the body whose thread id is ``i``, where
        nothing else that varies with the thread is known (LEG-21)."""
        sub = _Analysis(self.launch, self.array, GSet.range(0, n - 1), element=True)
        for key, val in self.env.items():
            if isinstance(val, Aff) and val.a == 0:
                sub.env[key] = val
            elif isinstance(val, GSet) and val in (self.universe, GSet()):
                sub.env[key] = sub.universe if val else GSet()
        sub.defs = dict(self.defs)
        sub.env[gs.var.id] = Aff(1, 0)
        items, _ = sub.walk(gs.body, sub.universe)
        if self.first_store is None:
            self.first_store = sub.first_store
        self.notes += sub.notes
        return items

    def _if(self, c: Expr, t: Stmt, e: Stmt | None,
            alive: GSet) -> tuple[list[tuple[GSet, Aff]], GSet]:
        s = self.cond(c)
        why: Cause | None = None
        if s is None:
            why = self.cause(c)
            if why.kind == "overflow":
                raise _Unsure("LEG-6", f"the test {quote(c)} is not known: {why.text}",
                              why.loc or c.loc)
        if s is not None:
            ti, ta = self.walk(t, alive & s)
            ei, ea = self.walk(e, alive - s) if e is not None else ([], alive - s)
            return ti + ei, ta | ea
        ti, ta = self.walk(t, alive)
        ei, ea = self.walk(e, alive) if e is not None else ([], alive)
        if _key(ti) != _key(ei) or ta != ea:
            assert why is not None
            what = "stored" if _key(ti) != _key(ei) else "stored after it (some threads return)"
            raise _Unsure(
                "LEG-4", f"the test {quote(c)} decides which elements of {self.array.name} "
                f"are {what}, and it is not known: {why.text}", why.loc or c.loc)
        return ti, ta

    def _for(self, s: For, alive: GSet) -> tuple[list[tuple[GSet, Aff]], GSet]:
        if not self._touches(s.body):
            return [], alive  # a break or continue in it only ends its own iterations
        jump = first_jump(s.body)
        if jump is not None:
            stores = any(isinstance(n, Store) and n.array == self.array
                         for n in iter_stmts(s.body))
            what = f"stores {self.array.name}" if stores else "may return"
            raise _Unsure("EF-19", f"the loop over {s.var.name}, which {what}, has a "
                          f"{jump_word(jump)}: which threads store which elements is not "
                          "followed through a break or continue", jump.loc or s.loc)
        lo, hi = self.aff(s.start), self.aff(s.stop)
        if lo is None or hi is None or lo.a != 0 or hi.a != 0:
            bad = s.start if lo is None or lo.a != 0 else s.stop
            why = (self.cause(bad).text if self.aff(bad) is None
                   else f"{quote(bad)} depends on the thread id")
            raise _Unsure("LEG-5", f"the loop over {s.var.name} around a store of "
                          f"{self.array.name} has bounds that are not known constants: "
                          f"{why}", s.loc)
        ks = range(lo.b, hi.b - 1, -1) if s.down else range(lo.b, hi.b + 1)
        if len(ks) > MAX_UNROLL and not any(isinstance(n, Ref) and n.var == s.var
                                            for n in iter_nodes(s.body)):
            return self._same_iterations(s, len(ks), alive)
        if len(ks) > MAX_UNROLL:
            raise _Unsure("LEG-5", f"the loop over {s.var.name} around a store of "
                          f"{self.array.name} has {len(ks)} iterations, more than "
                          f"{MAX_UNROLL} (the analysis follows them one by one)", s.loc)
        items: list[tuple[GSet, Aff]] = []
        for k in ks:
            self.env[s.var.id] = Aff(0, k)
            got, alive = self.walk(s.body, alive)
            items += got
        self.env.pop(s.var.id, None)
        return items, alive

    def _same_iterations(self, s: For, count: int, alive: GSet
                         ) -> tuple[list[tuple[GSet, Aff]], GSet]:
        """A loop of more than ``MAX_UNROLL`` iterations whose body does not read its
        variable (LEG-23): every iteration is the same function of the threads that
        start it — it stores the same pieces for the threads alive then and lets the
        same subset continue (what the analysis knows depends on the thread alone: a
        return under a test it does not know is refused, LEG-4), so after the second
        iteration the alive set is fixed and every later iteration stores what the
        second stores, which the first stored too. The pieces of the first two
        iterations stand for all of them: exactly-once storage (LEG-3) then refuses an
        element stored again where the consumer acts on it, and only there."""
        first, after1 = self.walk(s.body, alive)
        second, after2 = self.walk(s.body, after1)
        if second:
            self.notes.append(f"the loop over {s.var.name} runs {count} times and its body, "
                              f"which does not depend on {s.var.name}, stores the same "
                              f"elements of {self.array.name} in every iteration, LEG-23")
        return first + second, after2


def _key(items: list[tuple[GSet, Aff]]) -> list[tuple[tuple[tuple[int, int], ...], int, int]]:
    return sorted((g.spans, f.a, f.b) for g, f in items)


def _compare(op: BinaryOp, d: Aff, u: GSet) -> GSet:
    """Thread ids of ``u`` where ``d op 0``."""
    neg = Aff(-d.a, -d.b)
    match op:
        case BinaryOp.GE:
            return _ge0(d, u)
        case BinaryOp.GT:
            return _ge0(Aff(d.a, d.b - 1), u)
        case BinaryOp.LE:
            return _ge0(neg, u)
        case BinaryOp.LT:
            return _ge0(Aff(neg.a, neg.b - 1), u)
        case BinaryOp.EQ:
            return _ge0(d, u) & _ge0(neg, u)
        case _:
            return u - (_ge0(d, u) & _ge0(neg, u))


# ----------------------------------------------------------------------- exactly once


def _ext_gcd(a: int, b: int) -> tuple[int, int, int]:
    """``(d, x, y)`` with ``a*x + b*y == d == gcd(a, b) >= 0``."""
    if b == 0:
        return (abs(a), 1 if a >= 0 else -1, 0)
    d, x, y = _ext_gcd(b, a % b)
    return d, y, x - (a // b) * y


def _ceil_div(p: int, q: int) -> int:
    return -((-p) // q)


def _s_range(g0: int, step: int, lo: int, hi: int) -> tuple[int, int]:
    """The integers ``s`` with ``lo <= g0 + step*s <= hi`` (``step != 0``)."""
    if step > 0:
        return _ceil_div(lo - g0, step), (hi - g0) // step
    return _ceil_div(hi - g0, step), (lo - g0) // step


def _overlap(p: tuple[int, int, Aff], q: tuple[int, int, Aff]) -> bool:
    """Whether ``{a1*g+b1 : g in [l1,h1]}`` and ``{a2*g+b2 : g in [l2,h2]}`` meet."""
    l1, h1, f = p
    l2, h2, h = q
    a1, b1, a2, b2 = f.a, f.b, h.a, h.b
    if a1 == 0 and a2 == 0:
        return b1 == b2
    if a2 == 0:
        (l1, h1, a1, b1), (l2, h2, a2, b2) = (l2, h2, a2, b2), (l1, h1, a1, b1)
    if a1 == 0:  # the value b1 against the progression a2*g + b2
        num = b1 - b2
        return num % a2 == 0 and l2 <= num // a2 <= h2
    c = b2 - b1  # a1*g1 - a2*g2 = c
    d, x, y = _ext_gcd(a1, -a2)
    if c % d:
        return False
    g1, g2 = x * (c // d), y * (c // d)
    s1 = _s_range(g1, -a2 // d, l1, h1)
    s2 = _s_range(g2, -a1 // d, l2, h2)
    return max(s1[0], s2[0]) <= min(s1[1], s2[1])


def exactly_once(items: Sequence[tuple[GSet, Aff]], tc: int, name: str,
                 consumer: str | None = None, loc: Loc | None = None,
                 domain: GSet | None = None) -> None:
    """Raise unless the pieces store every element of ``domain`` (default ``[0, tc)``)
    exactly once (LEG-3, LEG-18).

    ``tc`` is the consumer's thread count: the fused kernel runs the consumer's body for
    an element right after the producer stores it, so each of the consumer's threads
    that acts (``domain``, a subset of ``[0, tc)``: LEG-18) needs its element stored once
    (``consumer`` names the consumer in the messages)."""
    who = f"{consumer}'s" if consumer else "the consumer's"
    dom = GSet.range(0, tc - 1) if domain is None else domain & GSet.range(0, tc - 1)
    pieces: list[tuple[int, int, Aff]] = []
    for gs, f in items:
        for dlo, dhi in dom.spans:
            inside = _ge0(Aff(f.a, f.b - dlo), gs) & _ge0(Aff(-f.a, dhi - f.b), gs)
            for lo, hi in inside.spans:
                if f.a == 0 and hi > lo:
                    raise _Unsure("LEG-3", f"element {f.b} of {name} is stored by "
                                  f"{hi - lo + 1} threads (threads {lo}..{hi})", loc)
                pieces.append((lo, hi, f))
    if len(pieces) > MAX_PIECES:
        raise _Unsure("LEG-3", f"the stores of {name} split into {len(pieces)} pieces, more "
                      f"than {MAX_PIECES} to compare", loc)
    for k, p in enumerate(pieces):
        for q in pieces[k + 1:]:
            if _overlap(p, q):
                raise _Unsure("LEG-3", f"some element of {name} in [0, {tc}) is stored "
                              "more than once (by two threads, or twice by one)", loc)
    total = sum(hi - lo + 1 for lo, hi, _ in pieces)
    if total != len(dom):
        missing = _missing(pieces, dom)
        if domain is None or dom == GSet.range(0, tc - 1):
            what = (f"the {tc} elements [0, {tc}) of {name} over which {who} {tc} threads "
                    "are launched")
        else:
            what = (f"the {len(dom)} elements of {name} that {who} body acts on "
                    f"({_show(dom)}, LEG-18; its {tc} threads are launched over [0, {tc}))")
        raise _Unsure("LEG-3", f"the producer stores {total} of {what}{missing}; fused, "
                      "the consumer's body runs only right after a store", loc)


def _show(g: GSet) -> str:
    shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in g.spans[:3])
    return shown + (", …" if len(g.spans) > 3 else "")


def _missing(pieces: Sequence[tuple[int, int, Aff]], dom: GSet) -> str:
    """`` (elements a..b, … not stored)`` when the pieces are ranges, else ``""``."""
    covered = GSet()
    for lo, hi, f in pieces:
        if abs(f.a) > 1:
            return ""
        x, y = f.at(lo), f.at(hi)
        covered = covered | GSet.range(min(x, y), max(x, y))
    gaps = (dom - covered).spans
    if not gaps:
        return ""
    shown = ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in gaps[:3])
    more = ", …" if len(gaps) > 3 else ""
    many = len(gaps) > 1 or gaps[0][0] != gaps[0][1]
    return f" (element{'s' if many else ''} {shown}{more} {'are' if many else 'is'} not stored)"


# ---------------------------------------------------------------------------- buffers


def partial_alias(launches: Sequence[Launch]) -> str | None:
    """Two arrays bound in ``launches`` that overlap without being the same buffer
    (LEG-1: the same memory, shape, strides and dtype), or one a kernel writes whose own
    elements overlap (a stride-0 or ``as_strided`` view: no buffer of distinct elements,
    LEG-1; read only, such an array is harmless: ``np.broadcast_to`` inputs fuse)."""
    arrays = [(f"{lc.kernel.name}.{k}", v) for lc in launches for k, v in lc.by_name.items()
              if is_array(v)]
    for lc in launches:
        k = lc.kernel
        for acc in accesses_stmt(k.body, k.helpers):
            v = lc.by_name.get(acc.array.name) if acc.write and acc.array in k.params else None
            itself = overlaps_itself(v)
            if itself is not None:
                return (f"{k.name}.{acc.array.name}, which {k.name} writes, is bound to an "
                        f"array that is not a buffer of distinct elements: {itself}")
    for n, (na, a) in enumerate(arrays):
        for nb, b in arrays[n + 1:]:
            if buffer_key(a) != buffer_key(b) and overlap(a, b):
                return (f"{na} and {nb} overlap without being the same buffer (one buffer "
                        "is the same memory with the same shape, strides and dtype)")
    return None


def _buffers(launch: Launch, role: str) -> dict[str, Hashable]:
    """The buffer of each array parameter of ``launch`` (:func:`arg_buffer`; ``role``:
    ``"p"`` or ``"c"``), refusing an array bound to nothing or to a scalar (LEG-1)."""
    out: dict[str, Hashable] = {}
    for i, (p, a) in enumerate(zip(launch.kernel.params, launch.args, strict=False)):
        if p.is_array:
            if a is UNBOUND:
                raise FusionRefused("LEG-1", f"launch of {launch.kernel.name} binds nothing "
                                    f"to {p.name}")
            key = arg_buffer(launch, i, role)
            if key is None:
                raise FusionRefused("LEG-1", f"launch of {launch.kernel.name} binds a "
                                    f"scalar to the array {p.name}")
            out[p.name] = key
    return out


# ------------------------------------------------------------------------------- checks


def _symbolic(producer: Launch, tc: int | Expr) -> bool:
    if is_symbolic(producer.threads) or is_symbolic(tc):
        return True
    return any(is_symbolic(producer.by_name.get(p.name))
               for p in producer.kernel.params if not p.is_array)


@attrs.frozen
class Acting:
    """The consumer's body for one element ``index`` and the launch whose arguments bind
    its scalar and array parameters: what decides which elements it acts on (LEG-18)."""

    index: Var
    body: Stmt
    launch: Launch

    @staticmethod
    def of(c: Consumer, launch: Launch) -> Acting:
        return Acting(c.index, c.body, launch)


def _scalar_binding(launch: Launch, symbolic: bool) -> dict[Var, Expr]:
    out: dict[Var, Expr] = {}
    named = launch.by_name
    for p in launch.kernel.params:
        if not p.is_array and isinstance(p.type, Scalar) and p.name in named:
            e = _as_expr(named[p.name], p.type)
            if e is not None and (symbolic or isinstance(e, Const)):
                out[p] = e
    return out


def _known_lengths(body: Stmt, launch: Launch) -> Stmt:
    """``body`` with ``length(a, d)`` of every array bound to a numpy array a constant."""
    def at(e: Expr) -> Expr | None:
        if isinstance(e, Length):
            arr = launch.by_name.get(e.array.name)
            if is_array(arr) and e.dim < len(arr.shape):
                return Const(int(arr.shape[e.dim]), Scalar.I32, loc=e.loc)
        return None
    out: Stmt = map_node(body, expr=at)
    return out


def acting_set(acting: Acting, tc: int) -> GSet:
    """The elements of ``[0, tc)`` the consumer's body may act on, with the launch's
    numbers (a superset: LEG-18)."""
    body = _known_lengths(substitute(acting.body, _scalar_binding(acting.launch, False)),
                          acting.launch)
    idx = AffineForm.of_atom(Ref(acting.index))
    if _tests_may_wrap(body, AffineCtx(), [ge0(idx), ge0(AffineForm.constant(tc - 1) - idx)]):
        return GSet.range(0, tc - 1)
    d = acting_dnf(body, AffineCtx())
    out = GSet()
    for lo, hi in spans(d, Ref(acting.index), 0, tc - 1):
        out = out | GSet.range(lo, hi)
    return out


def _tests_may_wrap(body: Stmt, ctx: AffineCtx, known: Sequence[Constraint | bool]) -> bool:
    """Whether a test or ``let`` value of the consumer's ``body`` may wrap: its acting
    condition, computed in exact integers, would then not be the device's (AFF-19)."""
    _, lets = tests_and_lets(body)
    full = attrs.evolve(ctx, defs={**ctx.defs, **lets})
    return find_wrap(guarded_exprs(body, ctx), full, known) is not None


def acting_condition(acting: Acting, symbols: frozenset[Var], ctx: AffineCtx,
                     count: AffineForm, known: Sequence[Constraint | bool] = ()
                     ) -> tuple[Ref, Dnf]:
    """A condition over a fresh element atom that every element the consumer's body acts
    on satisfies, in the host symbols (LEG-18, symbolic path); ``true`` when a test of
    the body may wrap for an index in ``[0, count)`` (with ``known``)."""
    body = substitute(acting.body, _scalar_binding(acting.launch, True))
    idx = Ref(acting.index)
    elem = Ref(fresh_var("$elem", Scalar.I64))
    fi = AffineForm.of_atom(idx)
    if _tests_may_wrap(body, ctx, [ge0(fi), ge0(count - 1 - fi), *known]):
        return elem, Dnf.true()
    d = acting_dnf(body, ctx)
    d = project(d, lambda a: a == idx or is_uniform_atom(a, symbols))
    return elem, d.substitute({idx: AffineForm.of_atom(elem)})


def index_slice(producer: Launch, p_array: str, tc: int | Expr,
                consumer: str | None = None, acting: Acting | None = None) -> str | None:
    """Prove that P's launch stores each element of ``[0, tc)`` of ``p_array`` exactly
    once (the seed's ``Index_slice``), or raise :class:`FusionRefused` (LEG-2..LEG-6,
    LEG-12 when counts or arguments are symbolic). With ``acting``, only the elements
    the consumer's body acts on must be stored exactly once (LEG-18)."""
    # read as the kernel runs on this launch (EF-20, EF-23): a fused kernel's producer
    # part keeps the user's spelling and is proved again at each launch (LEG-14)
    producer = attrs.evolve(
        producer, kernel=on_launch(producer.kernel, producer.threads, producer.block))
    k = producer.kernel
    arr = k.param(p_array)
    for a in accesses_stmt(k.body, k.helpers):
        if a.array == arr and a.write and a.index is None:
            raise FusionRefused("LEG-2", f"{k.name}: {p_array} is passed to a function that "
                                "writes it: its stores cannot be followed", _call_loc(k, arr))
    stops = stopping_call(k.body, k.helpers)
    if stops is not None:
        raise FusionRefused("LEG-5", f"{k.name}: the producer may stop (in helper function "
                            f"{stops})", _call_of(k.body, stops))
    if _symbolic(producer, tc) or (acting is not None and _symbolic(acting.launch, tc)):
        return _index_slice_symbolic(producer, arr, tc, acting)
    assert isinstance(producer.threads, int) and isinstance(tc, int)
    if tc > I32_MAX:
        raise FusionRefused("LEG-6", _EP_TC.format(k=k.name, tc=tc), k.loc)
    an = _Analysis(producer, arr, GSet.range(0, producer.threads - 1))
    named = producer.by_name
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
        dom = None if acting is None else acting_set(acting, tc)
        exactly_once(items, tc, p_array, consumer, an.first_store or k.loc, dom)
    except _Unsure as u:
        notes = "".join(f" ({note})" for note in dict.fromkeys(an.notes))
        raise FusionRefused(u.rule, f"{k.name}: {u.message}{notes if u.rule == 'LEG-3' else ''}",
                            u.loc or k.loc) from None
    return None


def _call_loc(k: Kernel, arr: Var) -> Loc | None:
    """Where ``k`` passes ``arr`` to a function."""
    for n in iter_nodes(k.body):
        if isinstance(n, Call) and any(isinstance(a, Ref) and a.var == arr for a in n.args):
            return n.loc
    return k.loc


def _call_of(body: Stmt, func: str) -> Loc | None:
    return next((n.loc for n in iter_nodes(body) if isinstance(n, Call) and n.func == func),
                None)


#: the rule of each kind of :class:`NotExact` (LEG-12 refusals name the real cause)
_NOT_EXACT_RULE = {"index": "LEG-2", "alternatives": "LEG-2", "loop": "LEG-5",
                   "leave": "LEG-5"}


def _as_expr(v: LaunchArg, t: Scalar) -> Expr | None:
    if is_symbolic(v):
        return v
    if isinstance(v, (bool, np.bool_)) and t is Scalar.BOOL:
        return Const(bool(v), t)
    if isinstance(v, (int, np.integer)) and t.is_int:
        return Const(int(v), t)
    return None


def _host_vars(e: Expr) -> frozenset[Var]:
    return frozenset(x.var for x in iter_nodes(e) if isinstance(x, Ref))


def _index_slice_symbolic(producer: Launch, arr: Var, tc: int | Expr,
                          acting: Acting | None = None) -> str | None:
    """LEG-12: counts and scalar arguments as host symbols, by the affine analysis
    (:mod:`sarek_py.analysis.affine.queries`): store sites with exact guards, then coverage of
    ``[0, tc)`` exactly once by Fourier-Motzkin."""
    k = producer.kernel
    stop = next((n for n in iter_nodes(k.body) if isinstance(n, Stop)), None)
    if stop is not None:
        raise FusionRefused("LEG-5", f"{k.name}: the producer may stop (the elements it "
                            "would store after the stop are not known)", stop.loc)
    binding: dict[Var, Expr] = {}
    named = producer.by_name
    for p in k.params:
        if not p.is_array and isinstance(p.type, Scalar) and p.name in named:
            e = _as_expr(named[p.name], p.type)
            if e is not None:
                binding[p] = e
    body = substitute(k.body, binding)
    counts = [_as_expr(producer.threads, Scalar.I32), _as_expr(tc, Scalar.I32)]
    c_binding = {} if acting is None else _scalar_binding(acting.launch, True)
    symbols = frozenset().union(*(_host_vars(e) for e in [*binding.values(), *counts,
                                                          *c_binding.values()]
                                  if e is not None))
    ctx = AffineCtx(invariant=frozenset(v for v in symbols if v.mutable))
    # a grid-stride loop: its element view, an n-thread launch of its body (LEG-21)
    body, loop_bound, loop_note = _symbolic_element_view(producer, arr, body, counts, ctx)
    sites = store_sites_why(body, arr, ctx)
    if isinstance(sites, NotExact):
        rule = _NOT_EXACT_RULE.get(sites.kind, "LEG-4" if sites.data else "LEG-2")
        raise FusionRefused(rule, f"{k.name}: {sites.reason}", sites.loc or k.loc)
    forms = [None if e is None else to_affine(e, ctx) for e in counts]
    if forms[0] is None or forms[1] is None:
        bad = counts[0] if forms[0] is None else counts[1]
        why = "" if bad is None else f": {affine_cause(bad, ctx).text}"
        raise FusionRefused("LEG-12", f"{k.name}: the thread count "
                            f"{'' if bad is None else quote(bad) + ' '}is not affine in the "
                            f"host symbols{why}", k.loc)
    # the host evaluates the counts in their own type, wrapping; the proof below takes
    # them to be exact integers: it holds for the host values where they do not wrap
    # (LEG-19), and every launch of the fused kernel proves again with its own numbers
    # (LEG-14), so a launch whose counts wrapped is proved then or refused
    no_wrap, assumed = _count_facts([e for e in (*counts, loop_bound) if e is not None], ctx)
    # the threads that run the stores: the launch's, or the elements of a grid-stride
    # loop's element view [0, n) (LEG-21)
    runs = forms[0] if loop_bound is None else to_affine(loop_bound, ctx)
    if runs is None:
        assert loop_bound is not None
        raise FusionRefused("LEG-21", f"{k.name}: the bound {quote(loop_bound)} of the "
                            f"grid-stride loop is not affine in the host symbols: "
                            f"{affine_cause(loop_bound, ctx).text}", loop_bound.loc or k.loc)
    # a launch runs on 0 .. 2^31-1 threads, ep_tc is an i32 (LEG-6, LEG-19)
    launch_facts: list[Constraint | bool] = [ge0(forms[0]), ge0(I32_MAX - forms[0]),
                                             ge0(forms[1]), ge0(I32_MAX - forms[1])]
    wraps = _may_wrap(body, arr, ctx, runs, [*no_wrap, *launch_facts])
    if wraps is not None:
        threads_text = print_expr(counts[0]) if counts[0] is not None else "?"
        raise FusionRefused("LEG-6", f"{k.name}: {wraps.text()} for some value of the host "
                            "symbols and some thread where it is evaluated, from what is "
                            "known there (the guards around it, the thread id below the "
                            f"thread count {threads_text}, both counts within i32, LEG-19); "
                            "the analysis of symbolic counts takes integers to be exact, "
                            "the device wraps", wraps.expr.loc)
    assume = Dnf.of(*no_wrap, *launch_facts)
    domain = None if acting is None else acting_condition(
        acting, symbols, ctx, forms[1], [*no_wrap, *launch_facts])
    cov = covers_exactly_once(sites, Intrinsic("global_thread_id"), runs, forms[1],
                              assume=assume, uniform_vars=symbols, domain=domain)
    if not cov:
        raise FusionRefused("LEG-12", f"{k.name}: for symbolic counts, {cov.reason} "
                            f"(of {arr.name}; count: the consumer's thread count "
                            f"{print_expr(counts[1]) if counts[1] is not None else '?'}, "
                            f"threads: the producer's "
                            f"{print_expr(counts[0]) if counts[0] is not None else '?'})"
                            + ("" if loop_bound is None else
                               f" (its stores are its grid-stride loop's, one for each "
                               f"element of [0, {print_expr(loop_bound)}), LEG-21)"),
                            sites[0].loc if sites else k.loc)
    if not assumed and loop_note is None:
        return None
    shown = list(dict.fromkeys(f"`{print_expr(e)}` within {t}" for e, t in assumed))
    if loop_note is not None:
        shown.append(loop_note)
    return ("proved for the values of the host symbols where the thread counts do not wrap: "
            + ", ".join(shown) + "; a launch where they wrap is proved again with its "
            "numbers, LEG-14, LEG-19")


def _symbolic_element_view(producer: Launch, arr: Var, body: Stmt,
                           counts: list[Expr | None], ctx: AffineCtx
                           ) -> tuple[Stmt, Expr | None, str | None]:
    """LEG-21 on the symbolic path: a producer whose stores of ``arr`` are all in one
    grid-stride loop reached by every thread, with a stride proved to be its thread
    count, stores what its element view stores — ``body`` replaced by the loop's body
    with the counter as the thread id, the producer's count by the loop's bound. The
    step's no-wrap fact (LEG-22: ``n - 1 + stride`` within the counter's type) is not
    proved from the host symbols: it is returned as what the proof assumes, and each
    launch proves it again with its numbers (LEG-14)."""
    k = producer.kernel
    for w in iter_stmts(body):
        if not isinstance(w, While):
            continue
        jump = first_jump(w.body)
        if jump is not None and any(isinstance(x, Store) and x.array == arr
                                    for x in iter_stmts(w.body)):
            raise FusionRefused("EF-19", f"{k.name}: a while loop that stores {arr.name} has "
                                f"a {jump_word(jump)}: which threads store which elements "
                                "is not followed through a break or continue",
                                jump.loc or w.loc)
    view = element_body(body, arr, ctx.invariant)
    if view is None:
        return body, None, None
    if isinstance(view, NotGridStride):
        raise FusionRefused("LEG-21", f"{k.name}: a while loop stores {arr.name}, and it is "
                            f"not a grid-stride loop over all threads: {view.reason}",
                            view.loc or k.loc)
    gs = view.loop
    # the loop as the user wrote it (before the arguments were put in), for the messages
    own = element_body(k.body, arr, ctx.invariant)
    name = own.loop.name if isinstance(own, ElementBody) else gs.name
    threads = counts[0]
    if threads is None:
        return body, None, None  # refused with the thread count (LEG-12)

    def equal(a: Expr, b: Expr) -> bool:
        fa, fb = to_affine(a, ctx), to_affine(b, ctx)
        return fa is not None and fb is not None and (fa - fb).is_constant \
            and (fa - fb).const == 0

    problem = stride_is_thread_count(view.stride, threads, producer.block, equal, gs.bound,
                                     own.stride if isinstance(own, ElementBody) else None)
    if problem is not None:
        raise FusionRefused("LEG-21", f"{k.name}: {name} stores {arr.name}, and it is "
                            f"not a grid-stride loop over all threads: {problem}",
                            gs.loop.loc or k.loc)
    t = gs.var.type
    note = (f"`{print_expr(gs.bound)} - 1 + {print_expr(gs.stride)}` within {t} (the step "
            f"of {name}, LEG-22)")
    return view.body, gs.bound, note


def _count_facts(counts: Sequence[Expr], ctx: AffineCtx
                 ) -> tuple[list[Constraint | bool], list[tuple[Expr, Scalar]]]:
    """Each affine integer subexpression of the host's thread counts within its type (the
    counts do not wrap, LEG-19), and those not proved so from their atoms' types."""
    facts: list[Constraint | bool] = []
    assumed: list[tuple[Expr, Scalar]] = []
    for e in counts:
        if isinstance(e, Const):
            continue
        for sub in iter_nodes(e):
            if not isinstance(sub, (Binary, Unary, Cast)) or type_of(sub) not in _RANGE:
                continue
            t = type_of(sub)
            assert isinstance(t, Scalar)
            f = to_affine(sub, ctx)
            if f is None:
                continue
            lo, hi = _RANGE[t]
            facts += [ge0(f - lo), ge0(hi - f)]
            if wrap_risk([sub], ctx) is not None:
                assumed.append((sub, t))
    return facts, assumed


I32_MAX = 2**31 - 1

#: the consumer's thread count is passed to the fused kernel as ``ep_tc : i32`` (EF-5);
#: a known count past i32 is refused here, a symbolic one by the launch (LEG-6, LEG-14)
_EP_TC = ("{k}: the consumer's thread count {tc} does not fit i32, the type of the fused "
          "kernel's parameter ep_tc that receives it (at most 2147483647)")


def _may_wrap(body: Stmt, arr: Var, ctx: AffineCtx, threads: AffineForm,
              facts: Sequence[Constraint | bool] = ()) -> Wrap | None:
    """An integer subexpression of a store index of ``arr``, a condition or a ``let``
    value of ``body`` that is affine but not proved to stay within its type where it is
    evaluated — under the guards around it (its path), for every thread ``0 <= g <
    threads``, with ``facts`` (counts that do not wrap and fit i32: LEG-19) and every
    other atom within its type (LEG-6 on the symbolic path, by AFF-17 and AFF-19: the
    interpreter and the devices wrap, the affine analysis does not)."""
    _, lets = tests_and_lets(body)
    full = attrs.evolve(ctx, defs={**ctx.defs, **lets})
    items = guarded_exprs(body, ctx, arr)
    known: list[Constraint | bool] = [ge0(threads - 1), *facts]
    for name in sorted(GLOBAL_IDS):
        g = AffineForm.of_atom(Intrinsic(name))
        known += [ge0(g), ge0(threads - g - 1)]
    return find_wrap(items, full, known)


def launch_window(producer: Launch, consumer: Launch, c: Consumer,
                  p_array: str) -> None:
    """With the buffers of both launches: C reads nothing else P writes, and writes
    nothing P or C reads elsewhere (the seed's ``Launch_window``, LEG-7)."""
    pb, cb = _buffers(producer, "p"), _buffers(consumer, "c")
    partial = partial_alias((producer, consumer))
    if partial is not None:
        raise FusionRefused("LEG-7", partial, consumer.kernel.loc)
    inter = pb[p_array]
    pk = producer.kernel
    others = [p for p, b in pb.items() if b == inter and p != p_array]
    if others:
        written = {a.array.name for a in accesses_stmt(pk.body, pk.helpers) if a.write}
        if any(o in written for o in others):
            raise FusionRefused("LEG-7", f"{pk.name} writes the buffer of the intermediate "
                                f"{p_array} also through {', '.join(o for o in others if o in written)}"
                                " (the same buffer bound to two parameters)", pk.loc)
    conflict = window_conflict(pk, c, lambda v: pb[v.name], lambda v: cb[v.name], inter,
                               "LEG-7")
    if conflict is not None:
        raise conflict


@attrs.frozen
class Plan:
    """What :func:`check_launches` proved: the intermediate and the shared parameters."""

    p_array: str
    shared: Mapping[str, str]
    #: what the proof assumed that each launch checks again (LEG-19), in words
    note: str | None = None


def derive_shared(producer: Launch, consumer: Launch) -> dict[str, str]:
    """Each C array parameter bound to a buffer one of P's is bound to, mapped to the
    first such P parameter that P writes, else the first such one (LEG-8): with
    ``scale(x, x)`` the consumer's parameter bound to ``x`` is the ``tmp`` P writes."""
    pb, cb = _buffers(producer, "p"), _buffers(consumer, "c")
    pk = producer.kernel
    written = {a.array.name for a in accesses_stmt(pk.body, pk.helpers) if a.write}
    out: dict[str, str] = {}
    for cname, b in cb.items():
        same = [p for p, pbuf in pb.items() if pbuf == b]
        pname = next((p for p in same if p in written), same[0] if same else None)
        if pname is not None:
            out[cname] = pname
    return out


def derive_p_array(producer: Launch, c: Consumer, shared: Mapping[str, str]) -> str:
    """The buffer P writes that C reads: it must be one (LEG-8)."""
    pk = producer.kernel
    written = {a.array.name for a in accesses_stmt(pk.body, pk.helpers) if a.write}
    read = {a.array.name for a in c.accesses if not a.write}
    cands = sorted({p for cn, p in shared.items() if cn in read and p in written})
    if not cands:
        raise FusionRefused("LEG-8", f"{c.kernel.name} reads no buffer that {pk.name} "
                            f"writes ({pk.name} writes {_names(written)}; {c.kernel.name} "
                            f"reads {_names(read)})", c.kernel.loc)
    if len(cands) > 1:
        raise FusionRefused("LEG-8", f"{c.kernel.name} reads several buffers {pk.name} "
                            f"writes: {', '.join(cands)} (epilogue fusion joins through one "
                            "intermediate)", c.kernel.loc)
    return cands[0]


def _names(names: set[str]) -> str:
    return ", ".join(sorted(names)) if names else "nothing"


@deep
def check_launches(producer: Launch, consumer: Launch, *,
                   p_array: str | None = None) -> Plan:
    """Both checks of the seed (``Index_slice``, ``Launch_window``) on two launches;
    returns the intermediate and the ``shared`` mapping to fuse with, or raises
    :class:`FusionRefused` with the rule that refuses."""
    # both read in the canonical thread-element form, on their 1-D launches (EF-20,
    # EF-22, EF-23; an n-D launch is refused before, LEG-14): the same values there
    c = consumer_shape(on_launch(consumer.kernel, consumer.threads, consumer.block))
    producer = attrs.evolve(
        producer, kernel=on_launch(producer.kernel, producer.threads, producer.block))
    well_formed(producer.kernel, "producer")  # EF-1: the analysis reads it as checked IR
    partial = partial_alias((producer, consumer))  # before pairing: LEG-1, LEG-7
    if partial is not None:
        raise FusionRefused("LEG-7", partial, consumer.kernel.loc)
    shared = derive_shared(producer, consumer)
    if p_array is None:
        p_array = derive_p_array(producer, c, shared)
    launch_window(producer, consumer, c, p_array)
    note = index_slice(producer, p_array, consumer.threads, consumer.kernel.name,
                       Acting.of(c, consumer))
    return Plan(p_array, shared, note)


def declared_counts(producer: Kernel, p_array: str,
                    threads: tuple[Count, Count]) -> tuple[Count, Count]:
    """Check ``threads=(tp, tc)`` of :func:`~sarek_py.fusion.epilogue.fuse_kernels.fuse` and prove at once that P launched on
    ``tp`` threads stores every element of ``[0, tc)`` exactly once, for every value of
    P's scalar parameters (LEG-16)."""
    if not (isinstance(threads, tuple) and len(threads) == 2):
        raise FusionRefused("LEG-16", f"threads must be a pair (tp, tc), not {threads!r}")
    ints = {p.name: p for p in producer.params
            if not p.is_array and p.type in (Scalar.I32, Scalar.I64)}
    exprs: list[Expr] = []
    for what, t in zip(("tp", "tc"), threads, strict=True):
        if isinstance(t, str) and t in ints:
            exprs.append(Ref(ints[t]))
        elif isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= 2**31 - 1:
            exprs.append(Const(t, Scalar.I32))
        else:
            raise FusionRefused(
                "LEG-16", f"threads: {what} = {t!r} is neither a thread count (0 .. 2^31-1) "
                f"nor an integer scalar parameter of {producer.name}")
    # every integer or boolean scalar parameter is a symbol; the others are not known
    args = tuple(Ref(p) if not p.is_array and isinstance(p.type, Scalar) and (
        p.type.is_int or p.type is Scalar.BOOL) else UNBOUND for p in producer.params)
    launch = Launch(producer, exprs[0] if isinstance(threads[0], str) else threads[0],
                    256, args)
    tc: int | Expr = exprs[1] if isinstance(threads[1], str) else threads[1]
    try:
        index_slice(launch, p_array, tc)
    except FusionRefused as r:
        raise FusionRefused(
            r.rule, f"with threads=({threads[0]}, {threads[1]}): {r.reason}", r.loc) from None
    return threads[0], threads[1]
