"""The canonical thread-element form of a kernel (specs/epilogue-fusion.md, EF-20..EF-22).

CUDA programmers name the element a thread owns as ``blockIdx.x * blockDim.x +
threadIdx.x``, in either order, with or without ``(long)`` casts, often through copies
(``int tx = threadIdx.x;``). :func:`canonical_thread_index` rewrites every such spelling
to the one intrinsic that means it, ``global_idx_x`` (``y``, ``z`` alike), so that every
analysis reads one form:

- an immutable ``let`` bound to a thread intrinsic (or a widening cast of one) is
  replaced by the intrinsic at each use (EF-20);
- ``block_idx_a * block_dim_a + thread_idx_a``, its operands in any order and each
  possibly widened to ``i64``, becomes ``global_idx_a`` (``i64(global_idx_a)`` when the
  sum is an ``i64``) (EF-20);
- the ``let`` that binds the thread's element first is moved to the head of the kernel
  through the ``let`` chain before it, split as ``let g = global_idx_a in let i = i64(g)``
  when the element is widened, so that ``let i = <global id> in body`` is the kernel's
  head (EF-21).

The rewrite is exact on every launch the runtimes accept: a launch numbers at most
2^31 - 1 threads (``runtime/limits.py``), so ``block_idx_a * block_dim_a`` and the sum are
at most the thread's global index and no ``i32`` operation wraps; the backends compute
``global_idx_a`` as that same sum (EF-22). Nothing that depends on a launch (a constant
block size written as a literal, one-block launches) is rewritten here.
"""

from __future__ import annotations

import attrs

from sarek_py.ir.intrinsics import AXES
from sarek_py.ir.memo import LruCache
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    Intrinsic,
    Kernel,
    Let,
    Ref,
    Stmt,
    Var,
    fresh_id,
    reserve_ids,
)
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import (
    free_vars,
    fresh_name,
    iter_nodes,
    map_node,
    max_var_id,
    substitute,
    var_names,
)

_INT = (Scalar.I32, Scalar.I64)
#: the intrinsics a global index is made of (a ``let`` of one is inlined, EF-20)
_PARTS = ("thread_idx", "block_idx", "block_dim", "grid_dim")


def _strip(e: Expr) -> Expr:
    """``e`` without casts to an integer type of an ``i32`` value (exact widenings)."""
    while isinstance(e, Cast) and e.to in _INT and scalar_type_of(e.arg) is Scalar.I32:
        e = e.arg
    return e


def _axis(e: Expr, kind: str) -> str | None:
    """The axis of ``e`` when it is (a widening of) the intrinsic ``{kind}_{axis}``."""
    e = _strip(e)
    if isinstance(e, Intrinsic) and not e.args:
        for a in AXES:
            if e.name == f"{kind}_{a}":
                return a
    return None


def _block_offset(e: Expr, block: int | None) -> str | None:
    """The axis of ``block_idx_a * block_dim_a`` (either order, each possibly widened),
    or of ``block_idx_x * B`` when the launch's block is the literal ``B`` (EF-23)."""
    e = _strip(e)
    if not (isinstance(e, Binary) and e.op is BinaryOp.MUL):
        return None
    for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        a = _axis(x, "block_idx")
        if a is None:
            continue
        if _axis(y, "block_dim") == a:
            return a
        lit = _strip(y)
        if (a == "x" and block is not None and isinstance(lit, Const)
                and lit.type in _INT and lit.value == block):
            return a
    return None


def global_axis(e: Expr, block: int | None = None) -> str | None:
    """The axis ``a`` when ``e`` is ``block_idx_a * block_dim_a + thread_idx_a`` in any
    spelling (EF-20) — with ``block``, the block size of a 1-D launch, also
    ``block_idx_x * block + thread_idx_x`` (EF-23) — else ``None``."""
    if not (isinstance(e, Binary) and e.op is BinaryOp.ADD):
        return None
    for x, y in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
        a = _axis(x, "thread_idx")
        if a is not None and _block_offset(y, block) == a:
            return a
    return None


def _global(axis: str, t: Scalar, like: Expr) -> Expr:
    g = Intrinsic(f"global_idx_{axis}", loc=like.loc)
    return g if t is Scalar.I32 else Cast(t, g, loc=like.loc)


def _is_thread_value(e: Expr) -> bool:
    e = _strip(e)
    return isinstance(e, Intrinsic) and not e.args and any(
        e.name == f"{kind}_{a}" for kind in _PARTS for a in AXES)


def _inline_intrinsic_lets(body: Stmt) -> Stmt:
    def stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Let) and not s.var.mutable and _is_thread_value(s.value):
            out: Stmt = substitute(s.body, {s.var: s.value})
            return out
        return None

    out: Stmt = map_node(body, stmt=stmt)
    return out


def _rewrite_sums(body: Stmt, block: int | None) -> Stmt:
    def expr(e: Expr) -> Expr | None:
        a = global_axis(e, block)
        if a is None:
            return None
        t = scalar_type_of(e)
        return _global(a, t, e) if t in _INT else None

    out: Stmt = map_node(body, expr=expr)
    return out


def _element(e: Expr) -> Intrinsic | None:
    """The global-index intrinsic ``e`` is, possibly widened."""
    s = _strip(e)
    if isinstance(s, Intrinsic) and not s.args and (
            s.name == "global_thread_id" or s.name.startswith("global_idx_")):
        return s
    return None


def _hoist_element(body: Stmt, kernel: Kernel) -> Stmt:
    """Move the first ``let`` of the chain at the head bound to the thread's element to
    the head (EF-21); split a widened one."""
    chain: list[Let] = []
    s = body
    while isinstance(s, Let):
        if _element(s.value) is not None:
            break
        chain.append(s)
        s = s.body
    if not isinstance(s, Let):
        return body
    g = _element(s.value)
    assert g is not None
    if s.var.mutable or (not chain and s.value is g):
        return body
    if any(v in free_vars(s.value) for v in (c.var for c in chain)):  # pragma: no cover
        return body  # an intrinsic has no free variable; kept for safety
    inner: Stmt = s.body
    for c in reversed(chain):
        inner = attrs.evolve(c, body=inner)
    if s.value is g:
        return attrs.evolve(s, body=inner)
    reserve_ids(max_var_id(kernel))
    gv = Var(fresh_name(f"{s.var.name}_g", var_names(kernel)), fresh_id(), Scalar.I32)
    return Let(gv, g, attrs.evolve(s, value=_rewiden(s.value, Ref(gv, loc=g.loc)),
                                   body=inner), loc=s.loc)


def _rewiden(e: Expr, inner: Expr) -> Expr:
    if isinstance(e, Cast):
        return attrs.evolve(e, arg=_rewiden(e.arg, inner))
    return inner


def _read_as(body: Stmt, name: str, as_name: str) -> Stmt:
    """``body`` with the intrinsic ``name`` read as ``as_name``: on a launch of one block
    ``thread_idx_x`` is ``global_idx_x`` (EF-23), on one of one dimension ``global_idx_x``
    is ``global_thread_id`` (EF-22)."""
    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Intrinsic) and e.name == name and not e.args:
            return Intrinsic(as_name, loc=e.loc)
        return None

    out: Stmt = map_node(body, expr=expr)
    return out


def _name_element(body: Stmt, kernel: Kernel) -> Stmt:
    """A kernel that uses one global-index intrinsic but binds it to no ``let`` at its
    head gets ``let i = <it> in`` there, every use of the intrinsic being ``i`` (EF-21)."""
    s = body
    heads: list[Expr] = []
    while isinstance(s, Let):
        if _element(s.value) is not None:
            return body
        heads.append(s.value)
        s = s.body
    used = {n.name for n in iter_nodes(body) if isinstance(n, Intrinsic) and not n.args
            and (n.name == "global_thread_id" or n.name.startswith("global_idx_"))}
    if any(isinstance(n, Intrinsic) and n.name in used for h in heads for n in iter_nodes(h)):
        return body  # ``let i = global_thread_id + 1``: the user's own name is not the element
    if len(used) != 1:
        return body
    (name,) = used
    reserve_ids(max_var_id(kernel))
    iv = Var(fresh_name("i", var_names(kernel)), fresh_id(), Scalar.I32)

    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Intrinsic) and e.name == name and not e.args:
            return Ref(iv, loc=e.loc)
        return None

    inner: Stmt = map_node(body, expr=expr)
    return Let(iv, Intrinsic(name, loc=kernel.loc), inner, loc=kernel.loc)


@attrs.frozen
class LaunchFacts:
    """What a launch says of the thread intrinsics: ``block``, the block size of a launch
    of one dimension (``None``: unknown or n-D); ``one_block``: the launch is one block;
    ``one_dim``: the launch has one dimension."""

    block: int | None = None
    one_block: bool = False
    one_dim: bool = False


NO_FACTS = LaunchFacts()


def _canonical(kernel: Kernel, facts: LaunchFacts) -> Kernel:
    body = _rewrite_sums(_inline_intrinsic_lets(kernel.body), facts.block)
    if facts.one_block:
        body = _read_as(body, "thread_idx_x", "global_idx_x")
    body = _hoist_element(body, kernel)
    body = _name_element(body, kernel)
    if facts.one_dim:
        body = _read_as(body, "global_idx_x", "global_thread_id")
    if body is kernel.body:
        return kernel
    out: Kernel = attrs.evolve(kernel, body=body)
    return out


_CACHE: LruCache[tuple[int, LaunchFacts], tuple[Kernel, Kernel]] = LruCache(512)


def _cached(kernel: Kernel, facts: LaunchFacts) -> Kernel:
    key = (id(kernel), facts)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    out = _canonical(kernel, facts)
    _CACHE.put(key, (kernel, out))
    return out


def canonical_thread_index(kernel: Kernel) -> Kernel:
    """``kernel`` in the canonical thread-element form (the same object when it already
    is); the result computes the same values on every launch (EF-22)."""
    return _cached(kernel, NO_FACTS)


def on_launch(kernel: Kernel, threads: object, block: object) -> Kernel:
    """``kernel`` as it runs on a launch of one dimension by ``threads`` threads in blocks
    of ``block`` (each a number, or anything else when not known): the canonical form,
    ``block_idx_x * B + thread_idx_x`` when the block is the literal ``B`` and
    ``thread_idx_x`` on a launch of one block read as the global index (EF-23), and that
    index read as ``global_thread_id`` (EF-22). The result equals ``kernel`` on this
    launch only: the analyses read it, a fused kernel is not built from it."""
    b = block if isinstance(block, int) and not isinstance(block, bool) else None
    t = threads if isinstance(threads, int) and not isinstance(threads, bool) else None
    return _cached(kernel, LaunchFacts(b, b is not None and t is not None and t <= b, True))


def launch_facts_used(kernel: Kernel, threads: object, block: object) -> tuple[bool, bool]:
    """Whether reading ``kernel`` on this launch (:func:`on_launch`) used the launch's
    block size as a literal (``block_idx_x * 256 + thread_idx_x``), and whether it used
    the launch being one block (``thread_idx_x`` as the element): a fused kernel built on
    that reading holds for launches with these facts only (EF-23)."""
    b = block if isinstance(block, int) and not isinstance(block, bool) else None
    t = threads if isinstance(threads, int) and not isinstance(threads, bool) else None
    base = _inline_intrinsic_lets(kernel.body)
    plain = _rewrite_sums(base, None)
    lit = _rewrite_sums(base, b) if b is not None else plain
    one = b is not None and t is not None and t <= b and any(
        isinstance(n, Intrinsic) and n.name == "thread_idx_x" for n in iter_nodes(lit))
    return lit != plain, one
