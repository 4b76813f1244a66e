"""Fusion of a straight-line sequence of launches (specs/fusion-legality.md, LEG-10).

:class:`KernelLaunch` is the small launch record the fusion needs: the kernel, its thread
count and block size, and what is bound to each parameter (a buffer name or a numpy array
for an array parameter, a value for a scalar). The full launch node of the host program
(seed 001) is richer; it converts to this record.

:func:`fuse_launches` walks the launches in order and fuses every adjacent
producer/consumer pair that is legal, deriving ``shared`` and the intermediate array from
the buffers bound; a fused launch is tried again as the producer of the next launch, so
chains fuse. It returns the new launches and a report with a decision per pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeGuard

import attrs
import numpy as np

from sarek_py.fusion.epilogue.user_names import fused_names, in_user_names
from sarek_py.fusion.policy import Target, contraction_refusal
from sarek_py.fusion.refusal import FusionRefused, Options
from sarek_py.ir.deep import SHALLOW, call_deep, deep, in_deep_thread, tree_depth
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.evaluate import host_eval
from sarek_py.ir.host.launch import Launch, Sync
from sarek_py.ir.host.program import Block, HAssign, Program
from sarek_py.ir.nodes import EXPR_TYPES, Expr, Kernel, Loc, Ref
from sarek_py.ir.visit import var_names

ArgValue = str | int | float | bool | np.ndarray | np.generic | Expr
"""A launch argument: a buffer name or a numpy array (arrays), a value or a symbolic host
expression (scalars)."""


def is_symbolic(v: object) -> TypeGuard[Expr]:
    """Whether a launch value is a symbolic host expression (LEG-12)."""
    return isinstance(v, EXPR_TYPES)


def _count(v: object, what: str, low: int) -> int | Expr:
    """A launch's thread count or block size as a Python int (numpy integers included),
    or a symbolic expression (threads only); anything else is a ``TypeError``, a number
    out of ``low``..2**31-1 (block) / 2**63-1 (threads) a ``ValueError`` (LCH-23)."""
    if what == "threads" and is_symbolic(v):
        return v
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer):
        raise TypeError(f"KernelLaunch {what} must be an integer, not "
                        f"{type(v).__name__} {v!r}")
    high = 2 ** 31 - 1 if what == "block" else 2 ** 63 - 1
    if not low <= int(v) <= high:
        raise ValueError(f"KernelLaunch {what} = {int(v)} is not in {low}..{high}")
    return int(v)


def _threads(v: object) -> int | Expr:
    return _count(v, "threads", 0)


def _block(v: object) -> int:
    b = _count(v, "block", 1)
    if not isinstance(b, int):  # pragma: no cover - _count gives an int for "block"
        raise TypeError(f"KernelLaunch block must be an integer, not {b!r}")
    return b


def _frozen_args(m: Mapping[str, ArgValue]) -> Mapping[str, ArgValue]:
    return dict(m)


@attrs.frozen(eq=False)
class KernelLaunch:
    """One launch: ``threads`` threads (ids ``0 .. threads-1``) in blocks of ``block``.

    ``args`` maps every parameter name of ``kernel`` to a buffer name (``str``) or a
    numpy array for an array parameter (two numpy arrays are the same buffer only when
    they are the same memory range with the same shape, strides and dtype; any other
    overlap is partial aliasing, LEG-1, LEG-7), and to a Python or numpy scalar for a scalar
    parameter. ``threads`` and scalar arguments may also be *symbolic*: an IR expression
    over host variables whose values are not known but do not change between the
    launches looked at together (LEG-12).
    """

    kernel: Kernel
    threads: int | Expr = attrs.field(converter=_threads)
    block: int = attrs.field(default=256, converter=_block)
    args: Mapping[str, ArgValue] = attrs.field(factory=dict, converter=_frozen_args)


@attrs.frozen
class Decision:
    """What :func:`fuse_launches` did with one adjacent pair of launches."""

    producer: str
    consumer: str
    fused: bool
    rule: str | None = None
    reason: str | None = None
    kernel: str | None = None
    #: where the cause of a refusal is, when it has a place in the source
    loc: Loc | None = attrs.field(default=None, eq=False, kw_only=True)
    #: the API options the reason names (``FusionRefused.options``, EF-16)
    options: Options = attrs.field(factory=dict, eq=False, kw_only=True)

    def with_flags(self, flags: Mapping[str, str]) -> Decision:
        """The decision with the options its reason names spelled as ``flags`` (EF-16)."""
        reason = self.reason or ""
        for text, (opt, value) in self.options.items():
            if opt in flags:
                reason = reason.replace(text, f"{flags[opt]} {value}".rstrip())
        return attrs.evolve(self, reason=reason)

    def __str__(self) -> str:
        if self.fused:
            return f"{self.producer} -> {self.consumer}: fused into {self.kernel}"
        at = f" (at {self.loc})" if self.loc is not None else ""
        return f"{self.producer} -> {self.consumer}: not fused: [{self.rule}] {self.reason}{at}"


def fused_launch(p: KernelLaunch, c: KernelLaunch, fused: Kernel,
                 shared: Mapping[str, str]) -> KernelLaunch:
    """The launch of ``fused``: P's geometry, P's arguments, C's unshared ones, ``ep_tc``."""
    args: dict[str, ArgValue] = {"p_" + k: v for k, v in p.args.items()}
    args.update({"c_" + k: v for k, v in c.args.items() if k not in shared})
    args["ep_tc"] = c.threads
    return KernelLaunch(fused, p.threads, p.block, args)


@deep
def fuse_pair(p: KernelLaunch, c: KernelLaunch, name: str | None = None) -> KernelLaunch:
    """Fuse two launches, or raise :class:`FusionRefused` (LEG-1..LEG-7)."""
    from sarek_py.fusion.epilogue.fuse_kernels import fuse
    from sarek_py.fusion.epilogue.legality import check_launches

    plan = check_launches(p, c)
    k = fuse(p.kernel, c.kernel, shared=plan.shared, p_array=plan.p_array, name=name)
    out = fused_launch(p, c, k, plan.shared)
    return attrs.evolve(out, kernel=with_buffer_groups(out))


def with_buffer_groups(launch: KernelLaunch) -> Kernel:
    """The launch's fused kernel, its launch conditions saying which of its array
    parameters this launch binds to one buffer (LEG-13: the fusion was proved for
    exactly these buffers; every other pair must stay disjoint, LEG-15)."""
    from sarek_py.fusion.epilogue.legality import buffer_key

    k = launch.kernel
    assert k.requires is not None
    groups: dict[object, list[str]] = {}
    for prm in k.params:
        if prm.is_array:
            key = buffer_key(launch.args[prm.name])
            groups.setdefault(key, []).append(prm.name)
    same = tuple(tuple(g) for g in groups.values() if len(g) > 1)
    out: Kernel = attrs.evolve(k, requires=attrs.evolve(k.requires, same=same))
    return out


def fuse_launches(
    launches: Sequence[KernelLaunch],
    *,
    target: Target | None = None,
    force: bool = False,
) -> tuple[list[KernelLaunch], list[Decision]]:
    """Fuse every legal adjacent producer/consumer pair of ``launches`` (LEG-10).

    Unfused launches keep their order; a fused launch replaces its pair and is tried as
    the producer of the next launch. The report has one :class:`Decision` per pair
    looked at. With a ``target`` whose contraction is on, nothing is fused unless
    ``force`` (LEG-9).
    """
    if not in_deep_thread() and any(
            isinstance(lc, KernelLaunch) and tree_depth(lc.kernel) > SHALLOW for lc in launches):
        return call_deep(fuse_launches, launches, target=target, force=force)  # TXT-32
    out: list[KernelLaunch] = []
    report: list[Decision] = []
    if not launches:
        return out, report
    policy = contraction_refusal(target, force=force) if target is not None else None
    cur = launches[0]
    #: the user's name of each variable of ``cur``'s kernel when it is a fused one
    names: dict[str, str] = {}
    for nxt in launches[1:]:
        pn, cn = cur.kernel.name, nxt.kernel.name
        if policy is not None:
            report.append(Decision(pn, cn, False, policy.rule, policy.reason,
                                   options=policy.options))
            out.append(cur)
            cur = nxt
            names = {}
            continue
        try:
            fused = fuse_pair(cur, nxt)
        except FusionRefused as r:
            r = in_user_names(r, names, frozenset(var_names(nxt.kernel)))
            report.append(Decision(pn, cn, False, r.rule, r.reason, loc=r.loc,
                                   options=r.options))
            out.append(cur)
            cur = nxt
            names = {}
        else:
            names = fused_names(cur.kernel, nxt.kernel, names)
            cur = fused
            report.append(Decision(pn, cn, True, kernel=cur.kernel.name))
    out.append(cur)
    return out, report


@attrs.frozen
class Segment:
    """A straight-line run of launches of a host program, and why the run ended there
    (``None`` at the end of the program)."""

    launches: tuple[KernelLaunch, ...]
    break_reason: str | None = None


def program_segments(program: Program) -> list[Segment]:
    """The runs of launches of ``program``'s top-level statements that can be fused.

    Host scalars with values known from their declarations and assignments are
    evaluated, the others stay symbolic (LEG-12); a launch is a :class:`KernelLaunch`
    with array arguments named by their host variables. A ``sync`` does not end a run;
    any other host statement does (it may read or change the buffers or the scalars),
    and so does a launch whose block size is not known or that passes an array that may
    alias another (pointer, target).
    """
    env: dict[str, object] = {}
    for d in program.decls:
        if d.init is not None:
            try:
                env[d.var.name] = host_eval(d.init, env)
            except SarekError:
                pass
    stmts = program.body.stmts if isinstance(program.body, Block) else (program.body,)
    aliased = frozenset(d.var.name for d in program.decls if d.may_alias)
    return host_segments(stmts, env, aliased)


def host_segments(stmts: Sequence[object], env: dict[str, object] | None = None,
                  aliased: frozenset[str] = frozenset()) -> list[Segment]:
    """The runs of launches of a sequence of host statements (see
    :func:`program_segments`); ``env`` holds the host scalars whose values are known (it
    is updated by assignments), ``aliased`` the host arrays that may alias another. The
    launch lists of :mod:`sarek_py.ir.host.launch_text` (``launch k(args) threads e block e``,
    host variables without values) go through here with every scalar symbolic."""
    env = {} if env is None else env
    out: list[Segment] = []
    run: list[KernelLaunch] = []

    def close(reason: str | None) -> None:
        nonlocal run
        if run or reason is not None:
            out.append(Segment(tuple(run), reason))
        run = []

    for s in stmts:
        if isinstance(s, Sync):
            continue
        if isinstance(s, HAssign):
            try:
                env[s.var.name] = host_eval(s.value, env)
            except SarekError:
                env.pop(s.var.name, None)
            if run:
                close(f"host assignment to {s.var.name}")
            continue
        if not isinstance(s, Launch):
            if run:
                close(f"host statement ({type(s).__name__}) between launches")
            continue
        try:
            run.append(kernel_launch(s, env, aliased))
        except SarekError as exc:
            close(f"launch of {s.kernel.name}: {exc.message}")
    close(None)
    return [seg for seg in out if seg.launches or seg.break_reason]


def kernel_launch(s: Launch, env: Mapping[str, object],
                  aliased: frozenset[str] = frozenset()) -> KernelLaunch:
    """The :class:`KernelLaunch` of a host launch node (seed 001's ``GpuKernelLaunch``):
    array arguments named by their host variables, scalars and the thread count evaluated
    in ``env`` where known, symbolic otherwise; the block size must be known."""
    args: dict[str, ArgValue] = {}
    for prm, a in zip(s.kernel.params, s.args, strict=True):
        if prm.is_array:
            assert isinstance(a, Ref)
            if a.var.name in aliased:
                raise SarekError(f"{a.var.name} may alias another array")
            args[prm.name] = a.var.name
        else:
            args[prm.name] = _value_or_symbol(a, env)
    threads = _value_or_symbol(s.thread_count, env)
    if is_symbolic(threads):
        count: int | Expr = threads
    elif isinstance(threads, (int, np.integer)):
        count = int(threads)
    else:
        raise SarekError("the thread count is not an integer")
    return KernelLaunch(s.kernel, count, int(host_eval(s.block_size, env)), args)


def _value_or_symbol(e: Expr, env: Mapping[str, object]) -> ArgValue:
    """The value of host expression ``e`` if known, else ``e`` itself (symbolic)."""
    try:
        v = host_eval(e, env)
    except SarekError:
        return e
    return int(v) if isinstance(v, np.integer) else v
