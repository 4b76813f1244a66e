"""Fusion of a straight-line sequence of launches (specs/fusion-legality.md, LEG-10).

The launches are the one launch record, :class:`~sarek_py.ir.host.launch.Launch`
(LCH-24), whether a pipeline recorded them, a user spelled them with
:func:`~sarek_py.ir.host.launch.KernelLaunch` or a host program holds them: array
arguments name buffers (a name, a ``Ref`` of a host array, a numpy array), counts and
scalar arguments are values or symbolic host expressions (LEG-12).
:func:`host_segments` finds the runs of launches of a host program and evaluates in them
what the host already knows (:func:`known_values`); nothing is converted.

:func:`fuse_launches` walks the launches in order and fuses every adjacent
producer/consumer pair that is legal, deriving ``shared`` and the intermediate array from
the buffers bound; a fused launch is tried again as the producer of the next launch, so
chains fuse. It returns the new launches and a report with a decision per pair.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from sarek_py.fusion.atomics import refuse_atomic_kernels
from sarek_py.fusion.epilogue.buffers import arg_buffer
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.grid_stride_consumer import element_wise_consumer
from sarek_py.fusion.epilogue.legality import check_launches
from sarek_py.fusion.epilogue.threadwise import fuse_threadwise
from sarek_py.fusion.epilogue.user_names import fused_names, in_user_names
from sarek_py.fusion.policy import Target, contraction_refusal
from sarek_py.fusion.refusal import FusionRefused, Options
from sarek_py.fusion.shared_memory import refuse_dynamic_shared
from sarek_py.ir.deep import SHALLOW, call_deep, deep, in_deep_thread, tree_depth
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.dynamic_shared import dynamic_shared, static_shared_bytes
from sarek_py.ir.host.evaluate import host_eval
from sarek_py.ir.host.launch import Launch, LaunchArg, Sync, is_symbolic
from sarek_py.ir.host.program import Block, HAssign, Program
from sarek_py.ir.launch_axes import first_axis_use
from sarek_py.ir.nodes import Const, Expr, Kernel, Length, Loc, Ref, Var
from sarek_py.ir.requires import FusionStep
from sarek_py.ir.thread_index import launch_facts_used, on_launch
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import map_node, var_names


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
    #: for a fusion, what its proof assumed that every launch checks again (LEG-19)
    note: str | None = attrs.field(default=None, eq=False, kw_only=True)

    def with_flags(self, flags: Mapping[str, str]) -> Decision:
        """The decision with the options its reason names spelled as ``flags`` (EF-16)."""
        reason = self.reason or ""
        for text, (opt, value) in self.options.items():
            if opt in flags:
                reason = reason.replace(text, f"{flags[opt]} {value}".rstrip())
        return attrs.evolve(self, reason=reason)

    def __str__(self) -> str:
        if self.fused:
            note = f" ({self.note})" if self.note else ""
            return f"{self.producer} -> {self.consumer}: fused into {self.kernel}{note}"
        at = f" (at {self.loc})" if self.loc is not None else ""
        return f"{self.producer} -> {self.consumer}: not fused: [{self.rule}] {self.reason}{at}"


def fused_launch(p: Launch, c: Launch, fused: Kernel, shared: Mapping[str, str]) -> Launch:
    """The launch of ``fused``: P's geometry, P's arguments, C's unshared ones, and C's
    thread count for ``ep_tc`` (the fused kernel's parameters in this order, EF-5); the
    scratch buffers of both launches stay scratch buffers (LCH-5: a scratch argument is
    never shared, its buffer belongs to its launch)."""
    args: dict[str, LaunchArg] = {"p_" + k: v for k, v in p.by_name.items()}
    args.update({"c_" + k: v for k, v in c.by_name.items() if k not in shared})
    args["ep_tc"] = c.threads
    index = {q.name: i for i, q in enumerate(fused.params)}
    c_names = [q.name for q in c.kernel.params]
    scratch = (*p.scratch, *(attrs.evolve(sb, argument=index["c_" + c_names[sb.argument]])
                             for sb in c.scratch if c_names[sb.argument] not in shared))
    return Launch(fused, p.threads, p.block, tuple(args[q.name] for q in fused.params),
                  scratch=scratch, loc=p.loc)


@deep
def fuse_pair(p: Launch, c: Launch, name: str | None = None) -> Launch:
    """Fuse two launches, or raise :class:`FusionRefused` (LEG-1..LEG-7)."""
    return _fuse_pair_noted(p, c, name)[0]


def _fuse_pair_noted(p: Launch, c: Launch, name: str | None = None
                     ) -> tuple[Launch, str | None]:
    """:func:`fuse_pair` and what its proof assumed that every launch checks (LEG-19)."""
    try:
        refuse_dynamic_shared(p.kernel, c.kernel)  # LEG-50, before any other analysis
    except FusionRefused as dyn:
        raise _deeper_than_dynamic_shared(p, c, name, dyn) from None
    refuse_atomic_kernels(p.kernel, c.kernel)  # LEG-20, before any other analysis
    for lc in (p, c):  # a launch that could not run is not fused either (LCH-26, LEG-32)
        _refuse_missing_axes(lc)
    p, c = by_counts(p), by_counts(c)
    if p.shaped and c.shaped:  # same shape: each thread runs P's part, then C's (LEG-30)
        return _threadwise(p, c, name), None
    try:
        return _epilogue(p, c, name)
    except FusionRefused as refused:
        # a consumer that is not element-wise (EF-1 .. EF-4) on launches of one thread
        # count and block size may still fuse thread-wise (LEG-30); the epilogue fusion's
        # refusal is the one reported
        if p.shaped or c.shaped or not same_counts(p, c) or refused.rule not in _SHAPE_RULES:
            raise
        try:
            return _threadwise(p, c, name), None
        except FusionRefused as tw:
            raise FusionRefused(refused.rule, f"{refused.reason}; nor thread-wise (LEG-30): "
                                f"{tw.reason}", refused.loc, options=refused.options) from None


def _static_shared(lc: Launch) -> Launch | None:
    """``lc`` with its kernel's dynamic shared array given the launch's extent as a
    constant one (``length(s)`` that number), or ``None`` when its extent is not a number
    here; ``lc`` itself when it has none."""
    k = lc.kernel
    dyn = dynamic_shared(k)
    if dyn is None:
        return lc
    if not isinstance(lc.shared, int) or isinstance(lc.shared, bool):
        return None
    n = lc.shared
    assert isinstance(dyn.type, ArrayType)
    fixed = Var(dyn.name, dyn.id, attrs.evolve(dyn.type, shape=(n,)), dyn.mutable)

    def expr(e: Expr) -> Expr | None:
        if isinstance(e, Length) and e.array.id == dyn.id:
            return Const(n, Scalar.I32, loc=e.loc)
        return None

    body = map_node(k.body, expr=expr, var=lambda v: fixed if v.id == dyn.id else v)
    locals_ = tuple(fixed if v == dyn else v for v in k.locals)
    return attrs.evolve(lc, kernel=attrs.evolve(k, body=body, locals=locals_), shared=None)


def _deeper_than_dynamic_shared(p: Launch, c: Launch, name: str | None,
                                dyn: FusionRefused) -> FusionRefused:
    """LEG-50 names the blanket cause; when the pair, with each dynamic shared array
    given its launch's extent as a constant one, is refused for a cause of its own (a
    consumer reading another thread's element, a barrier …), that cause is the real one
    and is reported instead: giving the array a constant extent would not make the pair
    fuse. Otherwise LEG-50 stands (and its advice holds)."""
    ps, cs = _static_shared(p), _static_shared(c)
    if ps is None or cs is None:
        return dyn
    try:
        _fuse_pair_noted(ps, cs, name)
    except FusionRefused as deeper:
        arrays = ", ".join(f"{lc.kernel.name}'s {v.name}" for lc in (p, c)
                           if (v := dynamic_shared(lc.kernel)) is not None)
        return FusionRefused(deeper.rule, f"{deeper.reason} (and the dynamic shared memory "
                             f"{arrays} would be refused too: LEG-50)", deeper.loc,
                             options=deeper.options)
    return dyn


def _refuse_shared_overflow(fused: Launch, p: Launch, c: Launch,
                            target: Target | None) -> None:
    """LEG-34: the fused kernel's shared arrays are the producer's and the consumer's
    together; when they pass the shared memory a block of the target's device has, the
    fused launch would be refused where the two launches run: the pair is not fused."""
    limit = None if target is None else target.shared_bytes
    if limit is None:
        return
    need = static_shared_bytes(fused.kernel)
    if need <= limit:
        return
    raise FusionRefused(
        "LEG-34", f"the fused kernel would need {need} bytes of shared memory per block "
        f"({p.kernel.name}: {static_shared_bytes(p.kernel)}, {c.kernel.name}: "
        f"{static_shared_bytes(c.kernel)}), more than the {limit} bytes a block has on "
        f"the {target.name if target else '?'} device", c.kernel.loc)


def _refuse_missing_axes(lc: Launch) -> None:
    """LEG-32: a kernel that reads a ``y`` (``z``) intrinsic launched with fewer
    dimensions is refused at its launch (LCH-26); it is not fused either, so the refusal
    is the launch's own, not a fused kernel's."""
    use = first_axis_use(lc.kernel)
    if use is not None and use.dims > lc.dims:
        raise FusionRefused(
            "LEG-32", f"kernel {lc.kernel.name} reads {use.name}, but its launch has "
            f"{lc.dims} dimension{'s' if lc.dims > 1 else ''}: it cannot run (LCH-26); "
            f"launch it with a grid and block of {use.dims} extents", use.loc)


#: the refusals of a consumer that is not element-wise, after which a pair of 1-D launches
#: of one thread count and block size is tried thread-wise (LEG-14, LEG-30)
_SHAPE_RULES = frozenset({"EF-1", "EF-2", "EF-3", "EF-4"})


def _threadwise(p: Launch, c: Launch, name: str | None) -> Launch:
    tw = fuse_threadwise(p, c, name)
    return attrs.evolve(tw, kernel=with_buffer_groups(tw))


def by_counts(lc: Launch) -> Launch:
    """A launch of one dimension given by a grid and block shape of numbers, as the same
    launch by thread count and block size (LCH-28): ``<<<(g,), (b,)>>>`` is ``g * b``
    threads in blocks of ``b``."""
    if not lc.shaped or lc.dims != 1:
        return lc
    g = lc.grid[0] if lc.grid else 1
    b = lc.block_shape[0] if lc.block_shape else lc.block
    if not (isinstance(g, int) and isinstance(b, int)):
        return lc
    return attrs.evolve(lc, thread_count=g * b, block_size=b, grid=(), block_shape=())


def same_counts(p: Launch, c: Launch) -> bool:
    """Whether two launches by counts have one thread count and block size (numbers, or
    host expressions written alike)."""
    return p.threads == c.threads and p.block == c.block


def _epilogue(p: Launch, c: Launch, name: str | None) -> tuple[Launch, str | None]:
    for lc, other in ((p, c), (c, p)):  # the epilogue fusion is 1-D (LEG-14, LCH-28)
        if lc.shaped:
            raise FusionRefused(
                "LEG-14", f"the launch of {lc.kernel.name} has a grid and block shape "
                f"({lc.dims} dimensions) and the launch of {other.kernel.name} has not: a "
                "launch with a shape fuses only with one of the same shape (thread-wise, "
                "LEG-30); the epilogue fusion's proofs and launch conditions cover launches "
                "by thread count and block size", lc.loc)
    c = element_wise_consumer(c)  # a grid-stride consumer as the element-wise one (EF-25)
    plan = check_launches(p, c)
    # the consumer as it runs on its launch (EF-23): its element is what the proof read;
    # its head does not reach the fused kernel, which runs its body at each stored element
    ck = on_launch(c.kernel, c.threads, c.block)
    k = fuse(p.kernel, ck, shared=plan.shared, p_array=plan.p_array, name=name)
    k = _consumer_launch_facts(k, p, c)
    out = fused_launch(p, c, k, plan.shared)
    return attrs.evolve(out, kernel=with_buffer_groups(out)), plan.note


def _consumer_launch_facts(k: Kernel, p: Launch, c: Launch) -> Kernel:
    """The fused kernel with the facts of the consumer's launch its proof read (EF-23):
    a literal block size, or one block, hold for the fused kernel's launches only when
    they have that block (``block(B)``), and one block only while the consumer's thread
    count is within it (``within(ep_tc)``); refused when the producer's launch, which the
    fused kernel keeps, has another block."""
    literal, one = launch_facts_used(c.kernel, c.threads, c.block)
    if not (literal or one):
        return k
    req = k.requires
    assert req is not None and isinstance(c.block, int)
    if p.block != c.block or (req.block is not None and req.block != c.block):
        raise FusionRefused(
            "EF-23", f"consumer {c.kernel.name}'s element is read for its launch's blocks of "
            f"{c.block} ({'a literal block size' if literal else 'one block'}), but the "
            f"fused kernel runs on {p.kernel.name}'s launch, with blocks of {p.block}",
            c.loc or c.kernel.loc)
    step = req.steps[0]
    assert isinstance(step, FusionStep)  # fuse() made it: an epilogue step
    count = step.count
    new = attrs.evolve(req, block=c.block,
                       within=(*req.within, count) if one else req.within)
    out: Kernel = attrs.evolve(k, requires=new)
    return out


def with_buffer_groups(launch: Launch) -> Kernel:
    """The launch's fused kernel, its launch conditions saying which of its array
    parameters this launch binds to one buffer (LEG-13: the fusion was proved for
    exactly these buffers; every other pair must stay disjoint, LEG-15)."""
    k = launch.kernel
    assert k.requires is not None
    groups: dict[object, list[str]] = {}
    for i, prm in enumerate(k.params):
        if prm.is_array:
            groups.setdefault(arg_buffer(launch, i, "fused"), []).append(prm.name)
    same = tuple(tuple(g) for g in groups.values() if len(g) > 1)
    out: Kernel = attrs.evolve(k, requires=attrs.evolve(k.requires, same=same))
    return out


def fuse_launches(
    launches: Sequence[Launch],
    *,
    target: Target | None = None,
    force: bool = False,
) -> tuple[list[Launch], list[Decision]]:
    """Fuse every legal adjacent producer/consumer pair of ``launches`` (LEG-10).

    Unfused launches keep their order; a fused launch replaces its pair and is tried as
    the producer of the next launch. The report has one :class:`Decision` per pair
    looked at. With a ``target`` whose contraction is on, nothing is fused unless
    ``force`` (LEG-9).
    """
    if not in_deep_thread() and any(
            isinstance(lc, Launch) and tree_depth(lc.kernel) > SHALLOW for lc in launches):
        return call_deep(fuse_launches, launches, target=target, force=force)  # TXT-32
    out: list[Launch] = []
    report: list[Decision] = []
    if not launches:
        return out, report
    # a constant expression is its value: one decision for every spelling (LCH-24)
    launches = [lc.known_in({}) for lc in launches]
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
            fused, note = _fuse_pair_noted(cur, nxt)
            _refuse_shared_overflow(fused, cur, nxt, target)  # LEG-34
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
            report.append(Decision(pn, cn, True, kernel=cur.kernel.name, note=note))
    out.append(cur)
    return out, report


@attrs.frozen
class Segment:
    """A straight-line run of launches of a host program, and why the run ended there
    (``None`` at the end of the program)."""

    launches: tuple[Launch, ...]
    break_reason: str | None = None


def program_segments(program: Program) -> list[Segment]:
    """The runs of launches of ``program``'s top-level statements that can be fused.

    Host scalars with values known from their declarations and assignments are
    evaluated, the others stay symbolic (LEG-12): each launch is the program's own
    :class:`Launch` with what is known evaluated (:func:`known_values`). A ``sync`` does not end a run;
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
    run: list[Launch] = []

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
            run.append(known_values(s, env, aliased))
        except SarekError as exc:
            where = "" if exc.message.startswith("launch of ") else f"launch of {s.kernel.name}: "
            close(where + exc.message)
    close(None)
    return [seg for seg in out if seg.launches or seg.break_reason]


def known_values(s: Launch, env: Mapping[str, object],
                 aliased: frozenset[str] = frozenset()) -> Launch:
    """Launch ``s`` of a host program with what ``env`` knows evaluated
    (:meth:`Launch.known_in`: the scalar arguments and counts whose host variables are
    all known become values, the others stay symbolic, LEG-12); an array argument becomes
    the name of its host array, the name of its buffer (as ``buffer_key`` reads a ``Ref``
    of it). The block size must be known, the thread count an integer, and no array
    argument may alias another (a ``SarekError`` says why not)."""
    for prm, a in zip(s.kernel.params, s.args, strict=True):
        if prm.is_array and isinstance(a, Ref) and a.var.name in aliased:
            raise SarekError(f"{a.var.name} may alias another array")
    out = s.known_in(env)
    if is_symbolic(out.block):
        host_eval(out.block, env)  # raises, naming the host variable without a value
    t = out.threads
    if not (is_symbolic(t) or isinstance(t, int)):
        raise SarekError("the thread count is not an integer")
    args = tuple(a.var.name if prm.is_array and isinstance(a, Ref) else a
                 for prm, a in zip(s.kernel.params, out.args, strict=True))
    return attrs.evolve(out, args=args)
