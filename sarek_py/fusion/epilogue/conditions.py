"""The launch conditions of fused kernels: made by the fusion, checked at every launch
(specs/fusion-legality.md LEG-13 … LEG-16).

:func:`check_launch` is the checker :func:`sarek_py.ir.requires.check_requires` calls
from every launch path (the interpreter's ``run_kernel``, ``Backend.launch``): for each
fusion step of the kernel it re-proves, with the launch's own numbers, that the
producer's part stores every element of the consumer's domain exactly once (the seed's
``Index_slice`` on the producer recovered from the fused kernel), that the declared
thread counts are met, and that the array arguments are bound to the buffers the fusion
was proved for (groups in ``same`` one buffer each, every other pair disjoint).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from sarek_py.fusion.epilogue.accesses import accesses_stmt
from sarek_py.fusion.epilogue.buffers import is_array, overlap, overlaps_itself, same_buffer
from sarek_py.fusion.epilogue.legality import Acting, index_slice
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.host.launch import UNBOUND, Launch, LaunchArg
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Empty,
    If,
    Kernel,
    Let,
    Ref,
    Stmt,
    Store,
    Var,
    iter_stmts,
)
from sarek_py.ir.requires import Count, FusionRequires, FusionStep, ThreadStep
from sarek_py.ir.requires_check import register_checker
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import map_node, max_var_id


def producer_part(kernel: Kernel, step: FusionStep) -> Kernel:
    """``kernel`` without the consumer bodies that ``step`` inserted: the step's producer
    (renamed), with every parameter of ``kernel`` kept (LEG-14).

    An inserted body is ``if ep_t < ep_tc then (let c_i = ep_t in …)`` right after a
    store of the intermediate (EF-8). In the fused kernel P's names carry ``p_`` and C's
    ``c_`` (EF-5), so only the fusion's own variables are named exactly ``ep_t`` and
    ``ep_tc`` (``p_ep_t``, ``p_ep_tc`` for the step inside, and so on). A body that is not
    stripped (a hand-written ``requires`` clause) stays in the producer's part, whose
    stores are then all counted: the proof can only fail more often, never pass wrongly.

    A ``dead`` step's intermediate is no longer a parameter (its stores were dropped,
    specs/epilogue-fusion.md EF-33): the part gets it back as a ghost array parameter,
    stored at ``ep_t`` where each inserted body was, which is where each dropped store
    was (``let ep_t = e in let ep_v = v in if ep_t < ep_tc …``): the stores the proof
    counts are the dropped ones."""
    prefix = step.own_prefix()
    tmp = None if prefix is None else prefix + "ep_t"
    ghost = _ghost(kernel, step)

    def bound_is_count(e: object) -> bool:
        if isinstance(e, Cast):
            e = e.arg
        return isinstance(e, Ref) and e.var.name == step.count

    def strip(s: Stmt) -> Stmt | None:
        if (isinstance(s, If) and s.else_ is None and isinstance(s.then, Let)
                and isinstance(s.cond, Binary) and s.cond.op is BinaryOp.LT
                and isinstance(s.cond.lhs, Ref) and s.cond.lhs.var.name == tmp
                and bound_is_count(s.cond.rhs)):
            if ghost is None:
                return Empty()
            return Store(ghost, (s.cond.lhs,), Const(0, Scalar.I32))
        return None

    body = map_node(kernel.body, stmt=strip)
    params = kernel.params if ghost is None else (*kernel.params, ghost)
    out: Kernel = Kernel(step.producer, params, kernel.locals, body, kernel.helpers)
    return out


def _ghost(kernel: Kernel, step: FusionStep) -> Var | None:
    """The ghost array standing for a ``dead`` step's dropped intermediate (EF-33)."""
    if not step.dead:
        return None
    return Var(step.array, max_var_id(kernel) + 1, ArrayType(Scalar.I32))


def _inserted(kernel: Kernel, step: FusionStep) -> tuple[Var, Stmt] | None:
    """The consumer body ``step`` inserted in ``kernel`` (``if ep_t < ep_tc then (let
    c_i = ep_t in body)``, EF-8) with its index ``c_i``, when every insertion is the same;
    ``None`` otherwise (then every element of ``[0, ep_tc)`` must be stored: LEG-18)."""
    prefix = step.own_prefix()
    if prefix is None:
        return None
    tmp = prefix + "ep_t"
    found: list[tuple[Var, Stmt]] = []
    for n in iter_stmts(kernel.body):
        if (isinstance(n, If) and n.else_ is None and isinstance(n.then, Let)
                and isinstance(n.cond, Binary) and n.cond.op is BinaryOp.LT
                and isinstance(n.cond.lhs, Ref) and n.cond.lhs.var.name == tmp):
            rhs = n.cond.rhs.arg if isinstance(n.cond.rhs, Cast) else n.cond.rhs
            if isinstance(rhs, Ref) and rhs.var.name == step.count:
                found.append((n.then.var, n.then.body))
    if not found or any(f != found[0] for f in found[1:]):
        return None
    return found[0]


# ------------------------------------------------------------------------------ buffers


def _check_buffers(kernel: Kernel, req: FusionRequires, args: Mapping[str, Any]) -> None:
    arrays = [(p.name, args.get(p.name)) for p in kernel.params if p.is_array]
    first = req.steps[0]
    why = f"the fusion of {first.producer} and {first.consumer} was proved for that"
    written = _WRITTEN.get(kernel)
    for na, a in arrays:
        itself = overlaps_itself(a) if na in written else None
        if itself is not None:
            raise FusionRefused(
                "LEG-15", f"launch of {kernel.name}: {na}, which it writes, must be bound to "
                f"a buffer of distinct elements, but {itself}: {why}")
    for n, (na, a) in enumerate(arrays):
        for nb, b in arrays[n + 1:]:
            if not (is_array(a) and is_array(b)):
                continue
            if nb in req.group_of(na):
                if not same_buffer(a, b):
                    raise FusionRefused(
                        "LEG-15", f"launch of {kernel.name}: {na} and {nb} must be bound to "
                        f"one buffer (the same memory, shape, strides and dtype): {why}")
            elif overlap(a, b):
                raise FusionRefused(
                    "LEG-15", f"launch of {kernel.name}: {na} and {nb} must be bound to "
                    f"buffers that do not overlap: {why}")


# ------------------------------------------------------------------------ thread counts


def _count_value(c: Count, args: Mapping[str, Any]) -> int | None:
    if isinstance(c, int):
        return c
    v = args.get(c)
    return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else None


def _placeholder(v: Any) -> Any:
    """What the analysis needs of an array argument: its shape (a device buffer becomes a
    zero-stride numpy array of its shape, which costs no memory)."""
    if isinstance(v, np.ndarray) or not is_array(v):
        return v
    shape = tuple(int(n) for n in v.shape)
    return np.lib.stride_tricks.as_strided(np.zeros(1, v.dtype), shape, (0,) * len(shape))


def _bound(kernel: Kernel, args: Mapping[str, Any]) -> tuple[LaunchArg, ...]:
    """The arguments of a launch of ``kernel`` as the launch record takes them (by
    position, device buffers as :func:`_placeholder` arrays)."""
    return tuple(_placeholder(args[p.name]) if p.name in args else UNBOUND
                 for p in kernel.params)


#: launches already checked, by kernel identity and the launch's numbers
_PROVED: dict[Hashable, tuple[Kernel, FusionRefused | None]] = {}


def _step_key(kernel: Kernel, step: FusionStep, args: Mapping[str, Any], threads: int,
              block: int, values: Hashable = None) -> Hashable:
    """What a step's proof for this launch depends on; ``values``: :func:`_arg_values`
    of ``args``, when the caller made them already (once for all the steps)."""
    return (id(kernel), step, _arg_values(kernel, args) if values is None else values,
            threads, block)


def _arg_values(kernel: Kernel, args: Mapping[str, Any]) -> Hashable:
    """The arguments as a step's proof reads them: array shapes, scalar values."""
    vals: list[Hashable] = []
    for p in kernel.params:
        v = args.get(p.name)
        if isinstance(v, np.ndarray):  # the common kinds first: a launch makes this key
            vals.append(("a", v.shape))
        elif isinstance(v, np.generic) and not is_array(v):
            vals.append(("s", type(v).__name__, v.item()))
        elif v is not None and is_array(v):
            vals.append(("a", tuple(int(n) for n in v.shape)))
        elif isinstance(v, (bool, int, float, np.generic)):
            vals.append(("s", type(v).__name__, v.item() if isinstance(v, np.generic) else v))
        else:
            vals.append(("?", id(v)))
    return tuple(vals)


def _check_step(kernel: Kernel, part: Kernel, step: FusionStep, args: Mapping[str, Any],
                threads: int, block: int, body: tuple[Var, Stmt] | None = None,
                values: Hashable = None) -> None:
    tc = _count_value(step.count, args)
    if tc is None:
        raise FusionRefused("LEG-14", f"launch of {kernel.name}: no integer argument for "
                            f"{step.count}, the thread count of {step.consumer}")
    if not 0 <= tc <= 2**31 - 1:  # C's launch would be refused (LEG-19)
        raise FusionRefused("LEG-14", f"launch of {kernel.name}: {step.count} = {tc} is not "
                            f"a thread count of {step.consumer} (0 .. 2147483647)")
    if step.threads is not None:
        tp_want, tc_want = (_count_value(c, args) for c in step.threads)
        if tp_want != threads or tc_want != tc:
            raise FusionRefused(
                "LEG-14", f"launch of {kernel.name}: the fusion of {step.producer} and "
                f"{step.consumer} was proved for {step.producer} on {step.threads[0]} "
                f"threads and {step.consumer} on {step.threads[1]} threads ({step.count}); "
                f"this launch has {threads} threads and {step.count} = {tc}")
    key = _step_key(kernel, step, args, threads, block, values)
    hit = _PROVED.get(key)
    if hit is not None and hit[0] is kernel:
        res = hit[1]
    else:
        try:
            launch = Launch(part, threads, block, _bound(kernel, args))
            acting = None if body is None else Acting(body[0], body[1], launch)
            index_slice(launch, step.array, tc, acting=acting)
            res = None
        except FusionRefused as r:
            res = FusionRefused(
                "LEG-14", f"launch of {kernel.name} with {threads} threads and "
                f"{step.count} = {tc} is not the fusion of {step.producer} and "
                f"{step.consumer}: [{r.rule}] {r.reason}")
        if len(_PROVED) > 512:
            _PROVED.clear()
        _PROVED[key] = (kernel, res)
    if res is not None:
        raise res


def _validate(kernel: Kernel, req: FusionRequires) -> None:
    """The record names parameters of the kernel of the right kinds (LEG-13); the parser
    checks this for the text form, this for records built in code."""
    kinds = {p.name: "array" if p.is_array else str(p.type) for p in kernel.params}

    def need(name: object, ok: tuple[str, ...], what: str) -> None:
        if not isinstance(name, str) or kinds.get(name) not in ok:
            raise FusionRefused("LEG-13", f"kernel {kernel.name}: its launch conditions name "
                                f"{name!r}, which is not {what} of it")

    for s in req.steps:
        if isinstance(s, ThreadStep):
            continue
        if s.dead:  # its stores were dropped: not a parameter any more (EF-33)
            if s.array in kinds:
                raise FusionRefused("LEG-13", f"kernel {kernel.name}: its launch conditions "
                                    f"name {s.array!r} as a dropped intermediate, but it is "
                                    "a parameter of it")
        else:
            need(s.array, ("array",), "an array parameter")
        need(s.count, ("i32", "i64"), "an integer scalar parameter")
        for t in s.threads or ():
            if not isinstance(t, int):
                need(t, ("i32", "i64"), "an integer scalar parameter")
    for g in req.same:
        for n in g:
            need(n, ("array",), "an array parameter")


def _valid(kernel: Kernel) -> bool:
    assert kernel.requires is not None
    try:
        _validate(kernel, kernel.requires)
    except FusionRefused:
        return False
    return True


#: whether each fused kernel's record names its parameters rightly (LEG-13): the kernel
#: alone decides it, so it is decided once per kernel object
_VALID: IdentityCache[Kernel, bool] = IdentityCache(_valid)


def check_launch(kernel: Kernel, args: Mapping[str, Any], threads: int, block: int) -> None:
    """Refuse a launch of a fused kernel that does not meet its conditions (LEG-14,
    LEG-15); the checker of :func:`sarek_py.ir.requires.check_requires`."""
    req = kernel.requires
    if req is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise FusionRefused("LEG-14", f"launch of {kernel.name}: thread count {threads!r} "
                            "is not an integer")
    if not _VALID.get(kernel):  # made once per kernel object; raises why
        _validate(kernel, req)
    if req.block is not None and int(block) != req.block:  # EF-23
        raise FusionRefused(
            "LEG-14", f"launch of {kernel.name} with blocks of {block}: its consumer's "
            f"element was read for blocks of {req.block} (EF-23); launch it with that "
            "block size")
    for name in req.within:  # EF-23: the consumer's launch was one block
        tc = _count_value(name, args)
        if tc is None or req.block is None or tc > req.block:
            raise FusionRefused(
                "LEG-14", f"launch of {kernel.name} with {name} = {tc}: its consumer's "
                "element thread_idx_x was read for a launch of one block, so its thread "
                f"count must be at most the block size {req.block} (EF-23)")
    _check_buffers(kernel, req, args)
    steps = _PARTS.get(kernel)
    values = _arg_values(kernel, args) if steps else None
    for step, part, body in steps:
        _check_step(kernel, part, step, args, int(threads), int(block), body, values)


def _parts(kernel: Kernel) -> tuple[tuple[FusionStep, Kernel, tuple[Var, Stmt] | None], ...]:
    """Each epilogue step of ``kernel``'s conditions with its producer's part and the
    consumer body it inserted, outermost first: they depend on the kernel alone, so they
    are made once per kernel object (a launch of it only re-proves them, LEG-14)."""
    assert kernel.requires is not None
    out = []
    part = kernel
    for step in kernel.requires.steps:  # outermost first: strip its consumer, look inside
        if isinstance(step, ThreadStep):  # proved for every launch shape (LEG-30)
            continue
        body = _inserted(part, step)
        part = producer_part(part, step)
        out.append((step, part, body))
    return tuple(out)


_PARTS: IdentityCache[Kernel, tuple[tuple[FusionStep, Kernel, tuple[Var, Stmt] | None], ...]] \
    = IdentityCache(_parts)
#: the array parameters each fused kernel writes, once per kernel object
_WRITTEN: IdentityCache[Kernel, frozenset[str]] = IdentityCache(
    lambda k: frozenset(a.array.name for a in accesses_stmt(k.body, k.helpers) if a.write))


register_checker(check_launch)


def describe(kernel: Kernel) -> list[str]:
    """The launch conditions of a fused kernel in words, one line each (for
    ``sarek-py fuse``, which prints them as ``//`` comments above the kernel; the
    ``requires`` clause of the kernel's header is what parses back, LEG-13)."""
    req = kernel.requires
    if req is None:
        return []
    out = [f"launch conditions of {kernel.name}, checked at every launch "
           "(specs/fusion-legality.md LEG-13 .. LEG-16):"]
    for s in req.steps:
        if isinstance(s, ThreadStep):
            out.append(f"- launch it on {s.producer}'s launch shape (grid and block) and "
                       f"arguments: each thread runs {s.producer}'s body, then "
                       f"{s.consumer}'s (proved for every launch shape, LEG-30)")
            continue
        if s.threads is None:
            launch = f"on {s.producer}'s thread count"
            count = f"{s.consumer}'s thread count"
        else:
            launch = f"on {s.threads[0]} threads ({s.producer}'s)"
            count = f"{s.threads[1]} ({s.consumer}'s thread count)"
        out.append(f"- launch it {launch} and block size, with {s.producer}'s arguments and "
                   f"{s.count} = {count}; each launch proves again that {s.producer} stores "
                   f"exactly once every element of {s.array} in [0, {s.count}) on which "
                   f"{s.consumer}'s body (as inserted) reads, stores or calls (LEG-18)"
                   + (f"; {s.array}'s stores were dropped (nobody reads it, EF-33): the "
                      "proof counts them where they were" if s.dead else ""))
    if req.block is not None:
        out.append(f"- launch it in blocks of {req.block}: a consumer's element was read "
                   "for that block size (EF-23)")
    for name in req.within:
        out.append(f"- {name} at most {req.block}: that consumer's launch was one block "
                   "(EF-23)")
    arrays = [p.name for p in kernel.params if p.is_array]
    for g in req.same:
        out.append(f"- {', '.join(g)}: one buffer (same memory, shape, strides, dtype)")
    if len(arrays) > 1 and req.same:
        out.append("- any two array arguments not in one group above: buffers that do not "
                   "overlap")
    elif len(arrays) > 1:
        out.append(f"- array arguments {', '.join(arrays)}: separate buffers that do not "
                   "overlap")
    return out
