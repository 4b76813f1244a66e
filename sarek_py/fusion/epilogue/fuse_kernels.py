"""Epilogue fusion: an element-wise consumer inlined after the producer's stores.

This is Sarek's ``Fusion_epilogue`` (specs/epilogue-fusion.md, rules EF-*). A producer P
stores elements of an intermediate array I; a consumer C is element-wise
(``let i = global_thread_id in body``) and reads I only at its own index ``i``. In the
fused kernel every store ``I[e] <- v`` of P becomes::

    let ep_t = e in
    I[ep_t] <- v ;
    if ep_t < ep_tc then (let c_i = ep_t in c_body)

where ``ep_tc`` is the number of threads C was launched with. The thread that stored
``I[t]`` computes C's element ``t`` right away, reading ``I[t]`` back as C did: the same
operations, in the same order, on the same values. What makes this equal to running P
then C at the level of a launch (P stores each element of ``[0, tc)`` exactly once, the
buffers do not interfere) is checked by :mod:`sarek_py.fusion.epilogue.legality`; this module
checks what the two kernels alone decide, and rewrites.

The first half recognises the consumer (:func:`consumer_shape`); the second half is the
rewrite (:func:`fuse`). Names: P's are prefixed ``p_``, C's ``c_`` (ids shifted by
``c_shift``), the new ones ``ep_``, so no name can capture another (EF-5).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from sarek_py.fusion.atomics import refuse_atomic_kernels
from sarek_py.fusion.epilogue.accesses import accesses_stmt
from sarek_py.fusion.epilogue.consumer import Consumer, consumer_shape, window_conflict
from sarek_py.fusion.epilogue.legality import declared_counts
from sarek_py.fusion.epilogue.well_formed import well_formed
from sarek_py.fusion.refusal import FusionRefused, Incompatible
from sarek_py.fusion.shared_memory import refuse_dynamic_shared
from sarek_py.ir.deep import deep
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    For,
    HelperFunc,
    If,
    Kernel,
    Let,
    Ref,
    Stmt,
    Store,
    Var,
    reserve_ids,
    seq,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.requires import Count, FusionRequires, FusionStep
from sarek_py.ir.thread_index import canonical_thread_index
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.types import ArrayType, MemSpace, Scalar, Type
from sarek_py.ir.visit import RenameCtx, canonical_ids, map_node, max_var_id, rename

__all__ = [
    "Ids",
    "consumer_names",
    "default_p_array",
    "ep_var",
    "fuse",
    "fused_body",
    "ids",
    "insert",
    "merged_declarations",
    "producer_names",
    "shared_by_name",
]

# --------------------------------------------------------------------------------- rewrite


def ep_var(id: int, name: str, type: Type, mutable: bool = False) -> Var:
    """A variable made by the fusion: its name gets the ``ep_`` prefix (EF-5)."""
    return Var("ep_" + name, id, type, mutable)


@attrs.frozen
class Ids:
    """Ids of the fused kernel: ``c_shift`` is added to C's ids; ``tmp_id`` is ``ep_t``,
    ``tc_id`` is ``ep_tc``; ids from ``tc_id + 1`` on are free for loop variables."""

    c_shift: int
    tmp_id: int
    tc_id: int


def _min_var_id(k: Kernel) -> int:
    low: int | None = None

    def see(v: Var) -> Var:
        nonlocal low
        low = v.id if low is None else min(low, v.id)
        return v

    map_node(attrs.evolve(k, helpers=()), var=see)
    return 1 if low is None else low


def ids(producer: Kernel, consumer: Kernel) -> Ids:
    """C's ids moved just above every id of P, the new ones above those (EF-5).

    C's lowest id becomes P's largest plus one, so ids grow by C's span, not doubling
    with every fusion of a chain."""
    p_max = max_var_id(producer)
    c_low, c_high = _min_var_id(consumer), max_var_id(attrs.evolve(consumer, helpers=()))
    c_shift = p_max + 1 - c_low
    top = max(p_max, c_high + c_shift)
    return Ids(c_shift, top + 1, top + 2)


#: P's names: prefixed ``p_``, ids unchanged (the seed's ``producer_names``)
producer_names = RenameCtx(prefix="p_")


def consumer_names(
    producer: Kernel, consumer: Kernel, shared: Mapping[str, str], c_shift: int
) -> RenameCtx:
    """C's names: prefixed ``c_``, ids shifted by ``c_shift``; a shared parameter becomes
    P's (renamed) parameter (EF-5, EF-6)."""
    mapping = {consumer.param(c).id: producer_names.var(producer.param(p))
               for c, p in shared.items()}
    return RenameCtx(prefix="c_", id_shift=c_shift, mapping=mapping)


def insert(body: Stmt, array: Var, tmp_id: int, after: Callable[[Ref], Stmt]) -> Stmt:
    """Every store ``array[e] <- v`` of ``body`` becomes
    ``let ep_t = e in (array[ep_t] <- v ; after(ep_t))``, wherever it is (EF-8)."""

    def at(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.array == array:
            (e,) = s.index
            t = ep_var(tmp_id, "t", scalar_type_of(e))
            return Let(t, e, seq(Store(s.array, (Ref(t),), s.value, loc=s.loc), after(Ref(t))),
                       loc=s.loc)
        return None

    out: Stmt = map_node(body, stmt=at)
    return out


def _zero(t: Scalar) -> Const:
    return Const(False if t is Scalar.BOOL else 0.0 if t.is_float else 0, t)


def _reset_locals(consumer: Kernel, cn: RenameCtx, next_id: int) -> tuple[list[Var], Stmt]:
    """C's scalar locals as ``let mut`` binders and statements zeroing its local arrays:
    C's locals start at zero for each element it computes (EF-10)."""
    scalars: list[Var] = []
    resets: list[Stmt] = []
    for lv in consumer.locals:
        v = cn.var(lv)
        if isinstance(v.type, ArrayType):
            loops = [ep_var(next_id + d, f"z{d}", Scalar.I32) for d in range(v.type.rank)]
            shape = v.type.shape
            body: Stmt = Store(v, tuple(Ref(z) for z in loops), _zero(v.type.elem))
            for d in reversed(range(v.type.rank)):
                lo, n = v.type.lower[d], shape[d]
                assert n is not None
                body = For(loops[d], Const(lo, Scalar.I32), Const(lo + n - 1, Scalar.I32), body)
            resets.append(body)
        else:
            scalars.append(v)
    return scalars, seq(*resets)


def fused_body(
    producer: Kernel,
    p_array: str,
    c: Consumer,
    cn: RenameCtx,
    ids: Ids,
    tc: Var,
) -> Stmt:
    """P's body (renamed) with C's body inserted after every store to ``p_array``."""
    array = producer_names.var(producer.param(p_array))
    ci = cn.var(c.index)
    scalars, resets = _reset_locals(c.kernel, cn, ids.tc_id + 1)
    cbody: Stmt = seq(resets, rename(c.body, cn))
    for v in reversed(scalars):
        assert isinstance(v.type, Scalar)
        cbody = Let(v, _zero(v.type), cbody)

    def after(t: Ref) -> Stmt:
        ty = scalar_type_of(t)
        bound: Expr = Ref(tc) if ty is Scalar.I32 else Cast(ty, Ref(tc))
        value: Expr = t if ty is Scalar.I32 else Cast(Scalar.I32, t)
        return If(Binary(BinaryOp.LT, t, bound), Let(ci, value, cbody))

    return insert(rename(producer.body, producer_names), array, ids.tmp_id, after)


def _same_helper(a: HelperFunc, b: HelperFunc) -> bool:
    return bool(canonical_ids(a) == canonical_ids(b))


def merged_declarations(
    producer: Kernel, consumer: Kernel, shared: Mapping[str, str], ids: Ids
) -> tuple[tuple[Var, ...], tuple[Var, ...], tuple[HelperFunc, ...]]:
    """Parameters (P's, C's not shared, ``ep_tc``), locals (P's, C's local arrays) and
    helper functions (identical ones once) of the fused kernel (EF-10, EF-11)."""
    cn = consumer_names(producer, consumer, shared, ids.c_shift)
    params = [producer_names.var(p) for p in producer.params]
    params += [cn.var(p) for p in consumer.params if p.name not in shared]
    params.append(ep_var(ids.tc_id, "tc", Scalar.I32))
    locals_ = [producer_names.var(v) for v in producer.locals]
    locals_ += [cn.var(v) for v in consumer.locals if isinstance(v.type, ArrayType)]
    helpers = list(producer.helpers)
    for h in consumer.helpers:
        old = next((x for x in helpers if x.name == h.name), None)
        if old is None:
            helpers.append(h)
        elif not _same_helper(old, h):
            raise Incompatible(
                "EF-11", f"helper function {h.name} has different definitions in "
                f"{producer.name} and {consumer.name}", h.loc)
    names = [p.name for p in params] + [v.name for v in locals_]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise Incompatible("EF-5", f"the fused kernel would declare {dup} twice")
    return tuple(params), tuple(locals_), tuple(helpers)


def _check_shared(producer: Kernel, consumer: Kernel, shared: Mapping[str, str]) -> None:
    for cname, pname in shared.items():
        try:
            cv = consumer.param(cname)
        except KeyError:
            raise FusionRefused(
                "EF-6", f"shared={{{cname!r}: {pname!r}}}: consumer {consumer.name} has no "
                f"parameter {cname}", consumer.loc,
                options={f"shared={{{cname!r}: {pname!r}}}": ("shared", f"{cname}={pname}")}
            ) from None
        try:
            pv = producer.param(pname)
        except KeyError:
            raise FusionRefused(
                "EF-6", f"shared={{{cname!r}: {pname!r}}}: producer {producer.name} has no "
                f"parameter {pname}", producer.loc,
                options={f"shared={{{cname!r}: {pname!r}}}": ("shared", f"{cname}={pname}")}
            ) from None
        if cv.type != pv.type:
            raise Incompatible(
                "EF-6", f"shared parameters {cname} : {cv.type} of {consumer.name} and "
                f"{pname} : {pv.type} of {producer.name} have different types", consumer.loc)


def _pairs(shared: Mapping[str, str]) -> str:
    """``shared`` as ``c=p`` pairs (``none`` when empty)."""
    return ", ".join(f"{c}={p}" for c, p in shared.items()) or "none"


def _written_params(k: Kernel) -> list[Var]:
    params = {p.id for p in k.params if p.is_array}
    out: list[Var] = []
    for a in accesses_stmt(k.body, k.helpers):
        if a.write and a.array.id in params and a.array not in out:
            out.append(a.array)
    return out


def default_p_array(producer: Kernel, c: Consumer, shared: Mapping[str, str]) -> str:
    """The one array P writes that C reads through ``shared`` (EF-7)."""
    read = {a.array.name for a in c.accesses if not a.write}
    cands = [pv.name for pv in _written_params(producer)
             if any(pn == pv.name and cn_ in read for cn_, pn in shared.items())]
    if not cands:
        raise FusionRefused(
            "EF-7", f"consumer {c.kernel.name} reads no array that producer "
            f"{producer.name} writes through shared ({producer.name} writes "
            f"{', '.join(v.name for v in _written_params(producer)) or 'nothing'}; "
            f"{c.kernel.name} reads {', '.join(sorted(read)) or 'nothing'}; shared: "
            f"{_pairs(shared)})", c.kernel.loc)
    if len(cands) > 1:
        raise FusionRefused(
            "EF-7", f"the intermediate array is ambiguous: producer {producer.name} writes "
            f"{', '.join(cands)}, which consumer {c.kernel.name} reads (choose one with "
            "p_array=NAME)", c.kernel.loc, options={"p_array=NAME": ("p_array", "NAME")})
    return cands[0]


def _check_p_array(producer: Kernel, p_array: str) -> None:
    try:
        pv = producer.param(p_array)
    except KeyError:
        raise FusionRefused(
            "EF-7", f"p_array={p_array!r}: producer {producer.name} has no parameter "
            f"{p_array}", producer.loc,
            options={f"p_array={p_array!r}": ("p_array", p_array)}) from None
    t = pv.type
    if not (isinstance(t, ArrayType) and t.rank == 1 and t.lower == (0,)
            and t.space is MemSpace.GLOBAL):
        raise FusionRefused(
            "EF-7", f"the intermediate {p_array} : {t} is not a zero-based rank-1 global "
            "array", producer.loc)
    for a in accesses_stmt(producer.body, producer.helpers):
        if a.array == pv and a.write and a.index is None:
            raise FusionRefused(
                "EF-8", f"producer {producer.name} passes {p_array} to a function that "
                "writes it: its stores cannot be followed", a.loc or producer.loc)


def _check_fuse_arguments(producer: object, consumer: object, shared: object,
                          p_array: object, name: object) -> None:
    """Arguments of :func:`fuse` of the wrong kind are a ``TypeError``, a fused-kernel
    name that would not read back as ``.sk`` text a ``ValueError`` (EF-17)."""
    from sarek_py.ir.parser import name_problem

    for what, k in (("producer", producer), ("consumer", consumer)):
        if not isinstance(k, Kernel):
            hint = " (the .ir of a @kernel function)" if hasattr(k, "ir") else ""
            raise TypeError(f"fuse(): the {what} must be an IR Kernel{hint}, not "
                            f"{type(k).__name__}")
    if not isinstance(shared, Mapping) or not all(
            isinstance(c, str) and isinstance(p, str) for c, p in shared.items()):
        raise TypeError("fuse(): shared must map consumer parameter names to producer "
                        f"parameter names (a dict of str to str), not {type(shared).__name__}"
                        " (shared_by_name(producer, consumer) gives the usual mapping)")
    if p_array is not None and not isinstance(p_array, str):
        raise TypeError(f"fuse(): p_array must be a parameter name, not {type(p_array).__name__}")
    if name is not None and (why := name_problem(name)) is not None:
        raise (TypeError if not isinstance(name, str) else ValueError)(
            f"fuse(): name: {why}")


@deep
def fuse(
    producer: Kernel,
    consumer: Kernel,
    *,
    shared: Mapping[str, str],
    p_array: str | None = None,
    name: str | None = None,
    threads: tuple[Count, Count] | None = None,
) -> Kernel:
    """Inline ``consumer`` after every store of ``producer`` to ``p_array`` (EF-*).

    ``shared`` maps each consumer array parameter bound to the same buffer as a
    producer parameter (the intermediate among them) to that producer parameter.
    Parameters of the result: P's, then C's that are not shared, then ``ep_tc`` (C's
    thread count). Raises :class:`FusionRefused` (or :class:`Incompatible`) with the
    rule that refuses.

    The result carries its launch conditions (``Kernel.requires``, LEG-13): every launch
    path checks, with the launch's numbers, that P's part stores each element of
    ``[0, ep_tc)`` exactly once and that the array arguments are distinct buffers, and
    refuses it otherwise (LEG-14, LEG-15). ``threads=(tp, tc)`` gives the thread counts
    of P and C (each a number or the name of an integer scalar parameter of P): the
    exactly-once proof is then made at once, for every value of P's scalar parameters,
    and the launch must use these counts (LEG-16).
    """
    _check_fuse_arguments(producer, consumer, shared, p_array, name)
    refuse_dynamic_shared(producer, consumer)  # LEG-50
    refuse_atomic_kernels(producer, consumer)  # LEG-20
    if consumer.requires is not None:
        raise FusionRefused(
            "EF-15", f"consumer {consumer.name} is itself a fused kernel with launch "
            "conditions: fuse it as the producer of a chain instead", consumer.loc)
    for role, k in (("producer", producer), ("consumer", consumer)):
        if k.ranges:  # conditions over its scalar arguments (a rows kernel, LCH-25)
            conds = ", ".join(print_expr(c) for c in k.ranges)
            raise FusionRefused(
                "EF-18", f"{role} {k.name} requires range({conds}) of its launches (a "
                "rows kernel, TIL-13), which a fused kernel would not check: fuse the "
                "nest's flat kernel instead", k.loc)
    # both kernels read and fused in the canonical thread-element form (EF-20, EF-22)
    producer, consumer = canonical_thread_index(producer), canonical_thread_index(consumer)
    c = consumer_shape(consumer)
    well_formed(producer, "producer")
    _check_shared(producer, consumer, shared)
    if p_array is None:
        p_array = default_p_array(producer, c, shared)
    _check_p_array(producer, p_array)
    if p_array not in shared.values():
        raise FusionRefused(
            "EF-7", f"no parameter of consumer {consumer.name} is shared with the "
            f"intermediate {p_array} (shared: {_pairs(shared)}; map the consumer "
            f"parameter that reads it with shared=)", consumer.loc,
            options={"shared=)": ("shared", f"c={p_array})")})
    same = producer.requires.group_of if producer.requires is not None else _alone
    to_p = {consumer.param(cn_).id: same(pn)[0] for cn_, pn in shared.items()}
    conflict = window_conflict(
        producer, c,
        p_buffer=lambda v: ("p", same(v.name)[0]),
        c_buffer=lambda v: ("p", to_p[v.id]) if v.id in to_p else ("c", v.name),
        intermediate=("p", same(p_array)[0]), rule="EF-9")
    if conflict is not None:
        raise conflict
    also = [n for n in same(p_array) if n != p_array
            and n in {w.name for w in _written_params(producer)}]
    if also:
        raise FusionRefused("EF-9", f"producer {producer.name} writes the intermediate "
                            f"{p_array}'s buffer also through {', '.join(also)}")
    counts = None if threads is None else declared_counts(producer, p_array, threads)
    the_ids = ids(producer, consumer)
    params, locals_, helpers = merged_declarations(producer, consumer, shared, the_ids)
    cn = consumer_names(producer, consumer, shared, the_ids.c_shift)
    tc = params[-1]
    body = fused_body(producer, p_array, c, cn, the_ids, tc)
    extra = max((lv.type.rank for lv in consumer.locals if isinstance(lv.type, ArrayType)),
                default=0)
    reserve_ids(the_ids.tc_id + extra)
    fname = name or f"{producer.name}_{consumer.name}"
    return Kernel(fname, params, locals_, body, helpers,
                  requires=_requires(producer, consumer, p_array, params[-1].name, counts),
                  loc=producer.loc)


def _alone(name: str) -> tuple[str, ...]:
    return (name,)


def _requires(producer: Kernel, consumer: Kernel, p_array: str, count: str,
              counts: tuple[Count, Count] | None) -> FusionRequires:
    """The launch conditions of the fused kernel (LEG-13): this step, then the
    producer's own steps (a chain), renamed as the fused kernel names them."""
    pn = producer_names.prefix
    inner = producer.requires.renamed(pn) if producer.requires is not None else None
    th = None if counts is None else tuple(pn + t if isinstance(t, str) else t
                                           for t in counts)
    step = FusionStep(producer.name, consumer.name, pn + p_array, count,
                      th)  # type: ignore[arg-type]
    return FusionRequires((step, *(inner.steps if inner else ())),
                          inner.same if inner else (), inner.block if inner else None,
                          inner.within if inner else ())


def shared_by_name(producer: Kernel, consumer: Kernel) -> dict[str, str]:
    """The default ``shared`` of the CLI: C's array parameters named like one of P's
    array parameters (EF-6); scalars are never shared by default."""
    pnames = {p.name for p in producer.params if p.is_array}
    return {p.name: p.name for p in consumer.params if p.is_array and p.name in pnames}

