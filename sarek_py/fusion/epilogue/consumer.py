"""The element-wise consumer and the window check of epilogue fusion (specs/epilogue-fusion.md
EF-1 … EF-4, EF-9; specs/fusion-legality.md LEG-7).

:func:`consumer_shape` recognises a consumer ``let i = global_thread_id in body`` that
reads and writes its arrays at its own index; :func:`window_conflict` says, given which
buffer each array parameter names, whether the consumer reads or writes what the producer
touches elsewhere. Both decide from the two kernels alone: the kernel rewrite
(:mod:`~sarek_py.fusion.epilogue.fuse_kernels`) names buffers by ``shared``, the launch
legality (:mod:`~sarek_py.fusion.epilogue.legality`) by the launches' buffers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import attrs

from sarek_py.fusion.epilogue.accesses import (
    Access,
    accesses_stmt,
    helper_array_effects,
    index_copies,
    is_index,
)
from sarek_py.fusion.epilogue.well_formed import well_formed
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.deep import deep
from sarek_py.ir.intrinsics import GLOBAL_IDS, THREAD_INTRINSICS
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import (
    Barrier,
    Binary,
    BinaryOp,
    Call,
    Const,
    Expr,
    HelperFunc,
    Intrinsic,
    Kernel,
    Let,
    Return,
    Stmt,
    Stop,
    Var,
)
from sarek_py.ir.printer import print_expr
from sarek_py.ir.thread_index import canonical_thread_index, global_axis
from sarek_py.ir.types import ArrayType, MemSpace
from sarek_py.ir.visit import iter_nodes

# -------------------------------------------------------------------------- consumer shape


@attrs.frozen
class Consumer:
    """An element-wise consumer: ``let index = <global id> in body``.

    ``reads_at_index``: array parameters C reads only at ``index`` (or not at all);
    ``written``: array parameters C writes (always at ``index``).
    """

    kernel: Kernel
    index: Var
    body: Stmt
    reads_at_index: tuple[str, ...]
    written: tuple[str, ...]
    accesses: tuple[Access, ...] = ()
    #: immutable ``let`` copies of ``index`` (``let t = i in y[t]`` is at the index, EF-3)
    copies: frozenset[Var] = frozenset()

    def at_index(self, index: tuple[Expr, ...] | None) -> bool:
        """Whether an access at ``index`` is at C's own element (EF-3)."""
        return is_index(self.index, index, self.copies)


def _refuse_construct(body: Stmt, helpers: Sequence[HelperFunc], kname: str) -> None:
    for n in iter_nodes(body):
        match n:
            case Intrinsic(name=nm) if nm in THREAD_INTRINSICS:
                raise FusionRefused(
                    "EF-2", f"consumer {kname} uses the thread intrinsic {nm} in its body",
                    n.loc)
            case Barrier():
                raise FusionRefused("EF-2", f"consumer {kname} has a barrier", n.loc)
            case Return():
                raise FusionRefused("EF-2", f"consumer {kname} has a return", n.loc)
            case Stop():
                raise FusionRefused("EF-2", f"consumer {kname} has a stop", n.loc)
            case Call(func=f):
                eff = helper_array_effects(helpers, f)
                if eff is None or eff.thread_intrinsic or eff.stops:
                    what = "uses a thread intrinsic" if eff is None or eff.thread_intrinsic \
                        else "may stop the thread"
                    raise FusionRefused(
                        "EF-2",
                        f"consumer {kname} calls {f}, which {what}"
                        if eff is not None else f"consumer {kname} calls unknown function {f}",
                        n.loc)
            case _:
                pass


def _shape_or_refusal(kernel: Kernel) -> Consumer | FusionRefused:
    try:
        return _consumer_shape(kernel)
    except FusionRefused as r:
        return r


_SHAPES: IdentityCache[Kernel, Consumer | FusionRefused] = IdentityCache(_shape_or_refusal, 256)


@deep
def consumer_shape(kernel: Kernel) -> Consumer:
    """Recognise an element-wise consumer, or raise :class:`FusionRefused` (EF-1..EF-4).

    The answer is remembered for the same (immutable) kernel object."""
    res = _SHAPES.get(kernel)
    if isinstance(res, FusionRefused):
        raise res
    return res


def _consumer_shape(kernel: Kernel) -> Consumer:
    kernel = canonical_thread_index(kernel)  # however the element is spelled (EF-20, EF-21)
    b = kernel.body
    kname = kernel.name
    if not (isinstance(b, Let) and isinstance(b.value, Intrinsic)
            and b.value.name in GLOBAL_IDS and not b.value.args):
        hint = ""
        if isinstance(b, Let) and global_axis(b.value, _literal_block(b.value)) is not None:
            hint = (f" (its element {print_expr(b.value)} names the block size as a "
                    "number: it is the thread's element only on launches of that block, "
                    "so fuse the launches — fuse_launches, a pipeline, a host program — "
                    "not the kernels, EF-23)")
        raise FusionRefused(
            "EF-1",
            f"consumer {kname} is not of the form `let i = global_thread_id in body`{hint}",
            b.loc or kernel.loc)
    if b.var.mutable:
        raise FusionRefused("EF-1", f"consumer {kname}'s index {b.var.name} is mutable",
                            b.loc)
    i, body = b.var, b.body
    _refuse_construct(body, kernel.helpers, kname)
    for lv in kernel.locals:
        if isinstance(lv.type, ArrayType) and lv.type.space is MemSpace.SHARED:
            raise FusionRefused(
                "EF-2", f"consumer {kname} declares the shared array {lv.name}", kernel.loc)
    params = {p.id for p in kernel.params if p.is_array}
    acc = [a for a in accesses_stmt(body, kernel.helpers) if a.array.id in params]
    copies = index_copies(i, body)
    elsewhere: dict[str, Access] = {}
    written: list[str] = []
    for a in acc:
        if a.write:
            if not is_index(i, a.index, copies):
                raise FusionRefused(
                    "EF-3", f"consumer {kname} writes {a.array.name} away from its index "
                    f"{i.name}: {_where(a)}", a.loc or kernel.loc)
            if a.array.name not in written:
                written.append(a.array.name)
        elif not is_index(i, a.index, copies):
            elsewhere.setdefault(a.array.name, a)
    for w in written:
        if w in elsewhere:
            raise FusionRefused(
                "EF-4",
                f"consumer {kname} writes {w} and reads it away from its index {i.name}: "
                f"{_where(elsewhere[w])}", elsewhere[w].loc or kernel.loc)
    reads = tuple(p.name for p in kernel.params if p.is_array and p.name not in elsewhere)
    well_formed(kernel, "consumer")  # what the analysis above takes for granted (EF-1)
    return Consumer(kernel, i, body, reads, tuple(written), tuple(acc), copies)


def _literal_block(e: Expr) -> int | None:
    """The number a ``block_idx_x * B + thread_idx_x`` spelling multiplies by, if any."""
    for n in iter_nodes(e):
        if isinstance(n, Binary) and n.op is BinaryOp.MUL:
            for x in (n.lhs, n.rhs):
                if isinstance(x, Const) and isinstance(x.value, int) and x.value > 0:
                    return x.value
    return None


def _where(a: Access) -> str:
    """An access as the user wrote it: ``y[i + 1]``, or the call it is passed to."""
    if a.index is None:
        return f"{a.array.name} is passed to a function that " \
            f"{'writes' if a.write else 'reads'} it"
    return f"{a.array.name}[{', '.join(print_expr(x) for x in a.index)}]"


@deep
def consumer(kernel: Kernel) -> Consumer | FusionRefused:
    """:func:`consumer_shape` as a result: the consumer, or the refusal (not raised)."""
    try:
        return consumer_shape(kernel)
    except FusionRefused as r:
        return r


# ----------------------------------------------------------------------- launch window core


def window_conflict(
    producer: Kernel,
    c: Consumer,
    p_buffer: Callable[[Var], Hashable],
    c_buffer: Callable[[Var], Hashable],
    intermediate: Hashable,
    rule: str,
) -> FusionRefused | None:
    """The window check, given which buffer each array parameter names.

    C reads nothing P writes except the intermediate, and that only at its index; C
    writes nothing P reads, nothing P writes other than the intermediate, and nothing it
    reads itself away from its index (EF-9 with ``shared`` as the naming, LEG-7 with the
    launches' buffers). Returns the refusal, or ``None``.
    """
    p_params = {p.id for p in producer.params if p.is_array}
    p_acc = [a for a in accesses_stmt(producer.body, producer.helpers)
             if a.array.id in p_params]
    p_w = {p_buffer(a.array) for a in p_acc if a.write}
    p_r = {p_buffer(a.array) for a in p_acc if not a.write}
    c_else = {c_buffer(a.array): a.array.name for a in c.accesses
              if not a.write and not c.at_index(a.index)}
    pn, cn = producer.name, c.kernel.name

    def which(b: Hashable, nm: str, write: bool) -> str:
        """``", which producer P reads"``, naming the buffer as P does when P's name for
        it is not C's ``nm`` (the user's names, LEG-7)."""
        names = list(dict.fromkeys(a.array.name for a in p_acc
                                   if p_buffer(a.array) == b and a.write == write))
        verb = "writes" if write else "reads"
        if names == [nm] or not names:
            return f", which producer {pn} {verb}"
        return f", the buffer producer {pn} {verb} as {', '.join(names)}"

    for a in c.accesses:
        b = c_buffer(a.array)
        nm = a.array.name
        why = None
        if not a.write and b in p_w:
            if b != intermediate:
                why = (f"consumer {cn} reads {nm}{which(b, nm, True)} (only the "
                       "intermediate array may be read)")
            elif not c.at_index(a.index):
                why = (f"consumer {cn} reads the intermediate {nm} away from its index "
                       f"{c.index.name}: {_where(a)}")
        elif a.write:
            if b in p_r:
                why = f"consumer {cn} writes {nm}{which(b, nm, False)}"
            elif b in p_w and b != intermediate:
                why = f"consumer {cn} writes {nm}{which(b, nm, True)} too"
            elif b in c_else:
                other = c_else[b]
                why = (f"consumer {cn} writes {nm}, which it also reads "
                       + (f"as {other} " if other != nm else "")
                       + f"away from its index {c.index.name}")
        if why is not None:
            return FusionRefused(rule, why, a.loc or c.kernel.loc)
    return None
