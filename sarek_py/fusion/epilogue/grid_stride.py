"""Grid-stride loops around a producer's stores (specs/fusion-legality.md LEG-21 … LEG-23).

The CUDA idiom ``for (int i = gid; i < n; i += blockDim.x * gridDim.x)`` is, in the IR,
a mutable counter assigned the thread's global id and a ``while`` loop::

    i := global_idx_x;
    while i < n do body; i := i + stride done

This module recognises the loop from its text alone (:func:`induction`: the test
``i < n``, the increment ``i := i + stride`` as the body's last statement, no other
assignment of ``i``, no jump or return that skips the increment, ``n`` and ``stride`` not
assigned in the body) and states the one fact the launch analysis
(:mod:`~sarek_py.fusion.epilogue.legality`) then uses, with its proof
(:func:`stride_problem`):

**Every element of [0, n) is visited by exactly one thread, exactly once**, when the
counter starts at the thread's global id ``g`` for each of the launch's ``T`` threads
``0 <= g < T`` (all of them reach the loop), ``stride = T`` and ``n - 1 + stride`` fits
the counter's type. Proof: thread ``g`` visits ``g + k*T`` for ``k = 0, 1, …`` while the
value is below ``n`` (the increment does not wrap, so the values grow by ``T >= 1`` each
iteration and the test ends the loop at the first value ``>= n``). For ``e`` in
``[0, n)`` let ``g = e mod T`` and ``k = e div T``: ``0 <= g < T`` is a launched thread
that reaches the loop, and its values before the ``k``-th are ``g + j*T <= e < n``, so
the loop reaches iteration ``k`` with ``i = e``: ``e`` is visited. If ``(g1, k1)`` and
``(g2, k2)`` both visit ``e`` then ``g1 ≡ e ≡ g2 (mod T)`` with ``0 <= g1, g2 < T``, so
``g1 = g2``, and ``k1 = (e - g1) / T = k2``: once. No value ``>= n`` runs the body. So the
loop's body runs exactly once for each ``i`` in ``[0, n)``: the stores it makes are those
of an ``n``-thread launch of the body with thread id ``i`` (the *element view*), which
the launch analysis follows as it follows any kernel — as long as nothing else in the
body depends on which thread runs it (values of the thread id other than through ``i``
are not known there).

The same fact, symbolically (:func:`element_body`: a producer whose stores are all in one
such loop is its body on ``n`` "threads"), and for a consumer launch
(:mod:`~sarek_py.fusion.epilogue.grid_stride_consumer`). A loop that is no grid-stride
loop over all threads is followed iteration by iteration by the launch analysis; the
loop visits each element of ``[0, n)`` exactly once also when ``n <= min(stride, T)``
(one iteration a thread), which the consumer's check uses.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from sarek_py.ir.intrinsics import GLOBAL_IDS, THREAD_INTRINSICS
from sarek_py.ir.jumps import jump_word, own_jumps
from sarek_py.ir.nodes import (
    Assign,
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    Intrinsic,
    Let,
    Loc,
    Ref,
    Return,
    Seq,
    Stmt,
    Stop,
    Store,
    Var,
    While,
    iter_stmts,
    seq,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes, substitute

#: the values of each integer type a counter may have
RANGE = {Scalar.I32: (-(2**31), 2**31 - 1), Scalar.I64: (-(2**63), 2**63 - 1)}


@attrs.frozen
class GridStride:
    """A loop ``while i < bound do body; i := i + stride done`` (``body`` without the
    increment)."""

    var: Var
    bound: Expr
    stride: Expr
    body: Stmt
    loop: While

    @property
    def name(self) -> str:
        """The loop as the user reads it: ``the while loop over i (i < n, i := i + s)``."""
        return (f"the while loop over {self.var.name} ({self.var.name} < "
                f"{print_expr(self.bound)}, {self.var.name} := {self.var.name} + "
                f"{print_expr(self.stride)})")


@attrs.frozen
class NotGridStride:
    """Why a ``while`` loop is not a grid-stride loop: the failed condition, located."""

    reason: str
    loc: Loc | None


def assigned_vars(s: Stmt) -> set[Var]:
    """The variables assigned anywhere in ``s``."""
    return {x.var for x in iter_stmts(s) if isinstance(x, Assign)}


def _refs(e: Expr) -> set[Var]:
    return {x.var for x in iter_nodes(e) if isinstance(x, Ref)}


def _counter_test(c: Expr) -> tuple[Var, Expr] | None:
    """``i < n`` or ``n > i`` over a mutable integer ``i``."""
    match c:
        case Binary(op=BinaryOp.LT, lhs=Ref(var=v), rhs=n) if v.mutable:
            return v, n
        case Binary(op=BinaryOp.GT, lhs=n, rhs=Ref(var=v)) if v.mutable:
            return v, n
    return None


def _increment(a: Stmt, v: Var) -> Expr | None:
    """``S`` of ``v := v + S`` or ``v := S + v``."""
    match a:
        case Assign(var=w, value=Binary(op=BinaryOp.ADD, lhs=Ref(var=x), rhs=s)) \
                if w == v and x == v:
            return s
        case Assign(var=w, value=Binary(op=BinaryOp.ADD, lhs=s, rhs=Ref(var=x))) \
                if w == v and x == v:
            return s
    return None


def induction(w: While) -> GridStride | NotGridStride:
    """Recognise ``while i < n do body; i := i + stride done`` (LEG-21), or say which
    condition fails."""
    test = _counter_test(w.cond)
    if test is None:
        return NotGridStride(f"its test {print_expr(w.cond)} is not `i < n` over a mutable "
                             "counter i", w.cond.loc or w.loc)
    v, bound = test
    if not (isinstance(v.type, Scalar) and v.type in RANGE):
        return NotGridStride(f"its counter {v.name} is a {v.type}, not an i32 or i64",
                             w.loc)
    # peel the immutable lets in front of the increment: `let col = i % n in (...; i := ...)`
    lets: list[Let] = []
    b = w.body
    while isinstance(b, Let) and not b.var.mutable:
        lets.append(b)
        b = b.body
    last = b.stmts[-1] if isinstance(b, Seq) and b.stmts else b
    stride = _increment(last, v)
    if stride is None:
        return NotGridStride(f"its last statement is not `{v.name} := {v.name} + stride` "
                             f"(the loop's step)", last.loc or w.loc)
    rest: Stmt = seq(*b.stmts[:-1]) if isinstance(b, Seq) else seq()
    for lt in reversed(lets):
        rest = attrs.evolve(lt, body=rest)
    again = next((x for x in iter_stmts(rest) if isinstance(x, Assign) and x.var == v), None)
    if again is not None:
        return NotGridStride(f"{v.name} is also assigned in its body, at "
                             f"`{v.name} := {print_expr(again.value)}` (only the step "
                             f"`{v.name} := {v.name} + stride` may change it)",
                             again.loc or w.loc)
    jump = next(own_jumps(rest), None)
    if jump is not None:
        return NotGridStride(f"its body has a {jump_word(jump)}, which skips the rest of "
                             "the iteration (the exactly-once argument follows whole "
                             "iterations)", jump.loc or w.loc)
    leave = next((x for x in iter_stmts(rest) if isinstance(x, (Return, Stop))), None)
    if leave is not None:
        what = "return" if isinstance(leave, Return) else "stop"
        return NotGridStride(f"its body has a {what}, which ends the thread's remaining "
                             "iterations", leave.loc or w.loc)
    changed = assigned_vars(rest) | {v}
    inner = {lt.var for lt in lets}
    for what, e in (("bound", bound), ("stride", stride)):
        bad = (_refs(e) & changed) | (_refs(e) & inner if what == "stride" else set())
        if bad:
            names = ", ".join(sorted(x.name for x in bad))
            return NotGridStride(f"its {what} {print_expr(e)} is not the same in every "
                                 f"iteration ({names} is assigned or bound in the loop)",
                                 e.loc or w.loc)
    return GridStride(v, bound, stride, rest, w)


def increment_wraps(g: GridStride, n: int, stride: int) -> str | None:
    """LEG-22: the last value ``i + stride`` a thread computes is below ``n + stride``
    (every value before the step is below ``n``): it must fit ``i``'s type, or the step
    wraps and the loop does not end where the argument says. The failed bound, in words,
    or ``None``."""
    t = g.var.type
    assert isinstance(t, Scalar)
    lo, hi = RANGE[t]
    top = n - 1 + stride
    if top <= hi:
        return None
    return (f"`{g.var.name} + {print_expr(g.stride)}` may exceed {hi}, the largest {t} "
            f"(it reaches {top} = {n} - 1 + {stride}, the bound {print_expr(g.bound)} "
            f"= {n} minus one plus the stride {stride}), so the step would wrap around")


def stride_problem(g: GridStride, start_is_gid: bool, all_threads: bool, stride: int,
                   threads: int) -> str | None:
    """The conditions of the element view (LEG-21) that fail, in words, or ``None`` when
    the loop visits each element of ``[0, n)`` exactly once (the module's proof)."""
    v = g.var.name
    why: list[str] = []
    if not start_is_gid:
        why.append(f"{v} does not start at the thread's global id")
    if not all_threads:
        why.append("not every launched thread reaches the loop")
    if stride != threads:
        why.append(f"its stride {print_expr(g.stride)} is {stride}, not the launch's "
                   f"{threads} threads")
    return "; ".join(why) or None


# ----------------------------------------------------------- the element view, symbolically

#: thread intrinsics that are the same for every thread of a launch
_UNIFORM_INTRINSICS = ("block_dim_", "grid_dim_")


@attrs.frozen
class ElementBody:
    """The element view of a producer whose stores of the intermediate are all in one
    grid-stride loop reached by every thread (LEG-21, symbolic path): ``body`` is the
    loop's body without the step, the counter replaced by ``global_thread_id`` (so an
    ``n``-thread launch of it stores what the loop stores), inside the uniform ``let``s
    around the loop."""

    loop: GridStride
    body: Stmt
    #: the stride with the ``let``s around the loop that name it seen through
    stride: Expr


def _thread_dependent(e: Expr, dependent: set[Var]) -> bool:
    for x in iter_nodes(e):
        if isinstance(x, Intrinsic) and not x.name.startswith(_UNIFORM_INTRINSICS):
            return True
        if isinstance(x, Ref) and x.var in dependent:
            return True
    return False


def _stores(s: Stmt, arr: Var) -> bool:
    return any(isinstance(x, Store) and x.array == arr for x in iter_stmts(s))


def _leaves(s: Stmt) -> Stmt | None:
    return next((x for x in iter_stmts(s) if isinstance(x, (Return, Stop))), None)


def element_body(body: Stmt, arr: Var, invariant: frozenset[Var] = frozenset()
                 ) -> ElementBody | NotGridStride | None:
    """The element view of ``body`` for the intermediate ``arr``: ``None`` when no
    ``while`` loop stores it (the usual analysis applies); else the view, or why there
    is none. Conditions: the loop is a grid-stride loop (:func:`induction`), reached by
    every thread (only ``let``s and sequences around it, no return or stop before it),
    its counter assigned a global thread id right before it (``i := g`` the statement
    before, or ``let mut i = g in``), every store of ``arr`` in it, and its body uses
    nothing that varies with the thread except the counter (``invariant``: mutable
    variables that are host symbols, the same for every thread)."""
    loops = [x for x in iter_stmts(body) if isinstance(x, While) and _stores(x.body, arr)]
    if not loops:
        return None
    w = loops[0]
    gs = induction(w)
    if isinstance(gs, NotGridStride):
        return gs
    outer: list[Let] = []
    start: Expr | None = None
    decided = False

    def decide(value: Expr | None) -> None:
        nonlocal start, decided
        if not decided:
            start, decided = value, True

    def path(s: Stmt) -> bool:
        """Walk down to ``w`` through lets and sequences; coming back up, the first
        assignment of the counter met is its value at the loop (the latest one)."""
        if s is w:
            return True
        match s:
            case Let(var=v, value=e, body=b):
                if not v.mutable:
                    outer.append(s)
                if path(b):
                    if v == gs.var:
                        decide(e)
                    return True
                if not v.mutable:
                    outer.pop()
                return False
            case Seq(stmts=ss):
                for n, x in enumerate(ss):
                    if path(x):
                        for prev in reversed(ss[:n]):
                            if isinstance(prev, Assign) and prev.var == gs.var:
                                decide(prev.value)
                            elif gs.var in assigned_vars(prev):
                                decide(None)
                        return True
                    if _leaves(x) is not None or _stores(x, arr):
                        return False
                return False
        return False

    if not path(body):
        return NotGridStride(f"{gs.name} stores {arr.name} but is not reached by every "
                             "thread (only lets and sequences may be around it, and no "
                             "return, stop or other store of it before it)", w.loc)
    inside = {id(y) for y in iter_stmts(w)}
    after = [x for x in iter_stmts(body) if isinstance(x, Store) and x.array == arr
             and id(x) not in inside]
    if after:
        return NotGridStride(f"{arr.name} is also stored outside {gs.name}", after[0].loc)
    dependent: set[Var] = set()
    for lt in outer:
        if _thread_dependent(lt.value, dependent):
            dependent.add(lt.var)
    if start is not None and isinstance(start, Ref) and start.var in dependent:
        start = next(lt.value for lt in outer if lt.var == start.var)
    if not (isinstance(start, Intrinsic) and start.name in GLOBAL_IDS and not start.args):
        return NotGridStride(f"{gs.var.name} is not assigned the thread's global id right "
                             f"before {gs.name}", w.loc)
    bad = next((x for x in iter_nodes(gs.body)
                if (isinstance(x, Ref) and (x.var in dependent or (
                    x.var.mutable and x.var != gs.var and x.var not in invariant
                    and x.var not in assigned_vars(gs.body))))
                or (isinstance(x, Intrinsic)
                    and not x.name.startswith(_UNIFORM_INTRINSICS)
                    and x.name in THREAD_INTRINSICS)), None)
    if bad is not None:
        assert isinstance(bad, (Ref, Intrinsic))
        what = bad.var.name if isinstance(bad, Ref) else bad.name
        return NotGridStride(f"the body of {gs.name} uses {what}, which varies with the "
                             f"thread (only the counter {gs.var.name} is known per element)",
                             bad.loc or w.loc)
    inner: Stmt = substitute(gs.body, {gs.var: Intrinsic("global_thread_id")})
    for lt in reversed(outer):
        if lt.var not in dependent:
            inner = attrs.evolve(lt, body=inner)
    stride = gs.stride
    values = {lt.var: lt.value for lt in outer}
    while isinstance(stride, Ref) and stride.var in values:
        stride = values[stride.var]
    return ElementBody(gs, inner, stride)


def stride_is_thread_count(stride: Expr, threads: Expr, block: object,
                           equal: Callable[[Expr, Expr], bool],
                           bound: Expr | None = None, spelled: Expr | None = None
                           ) -> str | None:
    """LEG-21, symbolic: ``stride`` is the launch's thread count ``threads`` for every
    value of the host symbols — the same expression (``equal``: same affine form), or
    ``block_dim_x * grid_dim_x`` (either order) with ``threads`` a multiple of the block
    size (a constant, or a product with a constant factor that the block size divides:
    ``(n + 255) / 256 * 256`` on blocks of 256), or ``block_dim_x * grid_dim_x`` with the
    loop's ``bound`` the thread count itself: that stride is at least the thread count
    (``B * ceil(T / B) >= T``), so the threads start at distinct residues, and each
    runs at most one iteration (``g < T = n <= g + stride``): each element of ``[0, n)``
    once, by thread ``g = e``. The failed condition, or ``None``."""
    if equal(stride, threads):
        return None
    shown = print_expr(stride)
    if spelled is not None and print_expr(spelled) != shown:
        shown = f"{print_expr(spelled)} (= {shown} at this launch)"
    dims = (isinstance(stride, Binary) and stride.op is BinaryOp.MUL
            and {_intrinsic_name(stride.lhs), _intrinsic_name(stride.rhs)}
            == {"block_dim_x", "grid_dim_x"})
    if not dims:
        return (f"its stride {shown} is not proved to be the launch's thread "
                f"count {print_expr(threads)} for every value of the host symbols")
    if bound is not None and equal(bound, threads):
        return None
    if not isinstance(block, int) or block <= 0:
        return (f"its stride {shown} is the thread count only when the "
                "block size divides it, and the block size is not a known number")
    if _multiple_of(threads, block):
        return None
    return (f"its stride {shown} is {block} * ceil(threads / {block}), the "
            f"thread count {print_expr(threads)} only when {block} divides it, which is not "
            "proved (write the count as a multiple of the block: `(n + B - 1) / B * B`)")


def _intrinsic_name(e: Expr) -> str | None:
    return e.name if isinstance(e, Intrinsic) and not e.args else None


def _multiple_of(e: Expr, k: int) -> bool:
    match e:
        case Const(value=int() as v):
            return v % k == 0
        case Cast(arg=a):
            return _multiple_of(a, k)
        case Binary(op=BinaryOp.MUL, lhs=a, rhs=b):
            return _multiple_of(a, k) or _multiple_of(b, k)
        case Binary(op=BinaryOp.ADD | BinaryOp.SUB, lhs=a, rhs=b):
            return _multiple_of(a, k) and _multiple_of(b, k)
    return False
