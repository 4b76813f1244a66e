"""Array accesses of kernel code: which array, at which index, read or written (the
seed's ``accesses_stmt``/``accesses_expr``), through helper functions by the one effect
summary (specs/effects.md EFF-1); ``is_index`` and ``index_copies`` say when an access is
at a thread's own element (specs/epilogue-fusion.md EF-3).

The lowest module of the epilogue fusion: the consumer's shape, the legality checks and
the launch conditions all read kernels through it.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from sarek_py.analysis.effects import helper_effects
from sarek_py.ir.nodes import (
    Assign,
    Call,
    Cast,
    Expr,
    For,
    HelperFunc,
    Let,
    Loc,
    Read,
    Ref,
    Stmt,
    Store,
    Var,
)
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes

# ------------------------------------------------------------------------------ accesses


@attrs.frozen
class Access:
    """One use of an array: which array, at which index (``None``: unknown, as when the
    array is passed to a helper function), read or write."""

    array: Var
    index: tuple[Expr, ...] | None
    write: bool
    #: where the access is (the read, the store or the call)
    loc: Loc | None = attrs.field(default=None, eq=False)


@attrs.frozen
class _Effects:
    """What a helper function does with its array parameters (by position)."""

    reads: frozenset[int]
    writes: frozenset[int]
    thread_intrinsic: bool
    #: the helper may ``stop`` the thread (itself or through a helper it calls)
    stops: bool = False


def helper_array_effects(
    helpers: Sequence[HelperFunc], name: str, seen: frozenset[str] = frozenset()
) -> _Effects | None:
    """The effects of helper ``name`` on its array parameters, or ``None`` when unknown
    (no such helper, or one on a call cycle): the one summary of specs/effects.md (EFF-1)."""
    eff = helper_effects(helpers).get(name)
    if eff is None or eff.on_cycle:
        return None
    return _Effects(eff.reads, eff.writes, eff.thread_intrinsic, eff.may_stop)


def stopping_call(node: Expr | Stmt, helpers: Sequence[HelperFunc]) -> str | None:
    """The name of a helper function called in ``node`` that may ``stop`` the thread
    (itself or through the helpers it calls; an unknown function may), or ``None``."""
    for n in iter_nodes(node):
        if isinstance(n, Call):
            eff = helper_array_effects(helpers, n.func)
            if eff is None or eff.stops:
                return n.func
    return None


def _call_accesses(
    call: Call, helpers: Sequence[HelperFunc], seen: frozenset[str]
) -> list[Access]:
    eff = helper_array_effects(helpers, call.func, seen)
    out: list[Access] = []
    for k, arg in enumerate(call.args):
        if isinstance(arg, Ref) and arg.var.is_array:
            if eff is None or k in eff.reads:
                out.append(Access(arg.var, None, False, call.loc))
            if eff is None or k in eff.writes:
                out.append(Access(arg.var, None, True, call.loc))
    return out


def _node_accesses(
    node: Expr | Stmt, helpers: Sequence[HelperFunc], seen: frozenset[str]
) -> list[Access]:
    out: list[Access] = []
    for n in iter_nodes(node):
        match n:
            case Read(array=a, index=ix):
                out.append(Access(a, ix, False, n.loc))
            case Store(array=a, index=ix):
                out.append(Access(a, ix, True, n.loc))
            case Call():
                out.extend(_call_accesses(n, helpers, seen))
            case _:
                pass
    return out


#: accesses already computed, by the identity of the statement and of the helpers
_MEMO: dict[tuple[int, int, frozenset[str]], tuple[Stmt, Sequence[HelperFunc], list[Access]]] = {}


def accesses_stmt(
    s: Stmt, helpers: Sequence[HelperFunc] = (), seen: frozenset[str] = frozenset()
) -> list[Access]:
    """Every array access of ``s``, in order (the seed's ``accesses_stmt``).

    An array passed to a helper function is an access at an unknown index (``None``),
    a read and/or a write as the helper's body says (both when the helper is unknown).
    ``Length`` reads no element and is not an access. Results are remembered for the
    same (immutable) statement and helpers, since the checks ask for them repeatedly.
    """
    key = (id(s), id(helpers), seen)
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is s and hit[1] is helpers:
        return list(hit[2])
    out = _node_accesses(s, helpers, seen)
    if len(_MEMO) > 512:
        _MEMO.clear()
    _MEMO[key] = (s, helpers, out)
    return list(out)


def accesses_expr(
    e: Expr, helpers: Sequence[HelperFunc] = (), seen: frozenset[str] = frozenset()
) -> list[Access]:
    """Every array access of ``e`` (the seed's ``accesses_expr``)."""
    return _node_accesses(e, helpers, seen)


def is_index(i: Var, index: tuple[Expr, ...] | None,
             copies: frozenset[Var] = frozenset()) -> bool:
    """Whether ``index`` is exactly ``[i]`` (the seed's ``is_index``), where ``i`` may also
    be one of ``copies``, immutable ``let`` copies of it (EF-3), or a widening cast of one."""
    if index is None or len(index) != 1:
        return False
    return _is_copy(index[0], i, copies)


def _is_copy(e: Expr, i: Var, copies: frozenset[Var]) -> bool:
    match e:
        case Ref(var=v):
            return v == i or v in copies
        case Cast(to=t, arg=x) if t in (Scalar.I32, Scalar.I64):
            src = scalar_type_of(x)
            return (src is Scalar.I32 or src is t) and _is_copy(x, i, copies)
    return False


def index_copies(i: Var, body: Stmt) -> frozenset[Var]:
    """The immutable ``let`` variables of ``body`` that always hold ``i``: every binding
    of each is ``i``, another such variable, or a widening cast of one (EF-3). A
    variable also bound otherwise (a ``for`` loop's, one assigned) is never a copy."""
    lets: dict[Var, list[Expr]] = {}
    other: set[Var] = set()
    for n in iter_nodes(body):
        if isinstance(n, Let):
            lets.setdefault(n.var, []).append(n.value)
        elif isinstance(n, For):
            other.add(n.var)
        elif isinstance(n, Assign):
            other.add(n.var)
    for v in other:
        lets.pop(v, None)
    # The least set closed under "every binding is i or a copy": a worklist over the
    # variables each binding copies, linear in the bindings (iterating the whole set to
    # its fixpoint was quadratic in a chain of copies, EF-3's 990-deep regression).
    waiting: dict[Var, int] = {}
    users: dict[Var, list[Var]] = {}
    for v, vals in lets.items():
        if v.mutable or v == i or not (isinstance(v.type, Scalar) and v.type.is_int):
            continue
        sources = [_copy_source(x) for x in vals]
        if any(src is None for src in sources):
            continue
        needed = {src for src in sources if src is not None and src != i}
        waiting[v] = len(needed)
        for src in needed:
            users.setdefault(src, []).append(v)
    ready = [v for v, count in waiting.items() if count == 0]
    copies: set[Var] = set()
    while ready:
        v = ready.pop()
        copies.add(v)
        for u in users.get(v, ()):
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    return frozenset(copies)


def _copy_source(e: Expr) -> Var | None:
    """The variable ``e`` copies (``_is_copy``'s form: a ``Ref``, through widening
    casts), or None when ``e`` is no copy of any variable."""
    match e:
        case Ref(var=v):
            return v
        case Cast(to=t, arg=x) if t in (Scalar.I32, Scalar.I64):
            src = scalar_type_of(x)
            return _copy_source(x) if src is Scalar.I32 or src is t else None
    return None
