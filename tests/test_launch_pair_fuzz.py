"""Launch pairs bound to numpy views, fused vs unfused, bitwise (issue 11 item 9;
specs/fusion-legality.md LEG-1, LEG-7, LEG-10, LEG-14, LEG-15, specs/epilogue-fusion.md
EF-12).

Each case is a producer/consumer pair of :mod:`fusion_strategies` whose buffers are not
plain arrays: every buffer lives in a storage (a larger array, at an offset, strided,
reversed, or an ``int32`` array seen as ``float32``), and every array argument of both
launches is bound, independently, to a view of its buffer's storage — the buffer's own
view, an equal view made anew, or a prefix, suffix, strided, reversed or shifted view
that overlaps it. Consumers and producers may size their loops with ``length`` instead
of ``n``, and the consumer may read and write the ``int32`` reinterpretation of the
buffers. The launches run unfused and through :func:`fuse_launches`, from the same bytes;
every storage must end bitwise equal. A launch pair the interpreter rejects unfused
(out-of-bounds view, race) is discarded; a fused launch that fails is a mismatch.

``make test`` runs a quick sample; ``make fuzz`` (``SAREK_FUZZ=1``) runs
``FUZZ_PAIRS`` pairs on the interpreter (the slow test) and a sample on OpenCL.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import pytest
from fusion_strategies import Case, cases
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import BackendUnavailable, InterpError
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Const,
    Expr,
    If,
    Intrinsic,
    Kernel,
    Length,
    Let,
    Read,
    Ref,
    Store,
    var,
)
from sarek_py.ir.types import Scalar, array
from sarek_py.ir.visit import map_node
from sarek_py.runtime.base import LaunchError

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
#: launch pairs of the slow test under SAREK_FUZZ=1 (make fuzz)
FUZZ_PAIRS = 20_000
PAD = 3
STORAGES = ("plain", "offset", "strided", "reversed", "int32")
VIEWS = ("own", "again", "prefix", "suffix", "strided", "reversed", "shifted")
POISON = np.float32(np.nan)

Run = Callable[[Kernel, dict[str, Any], int, int], None]

#: what the runs found, over the whole session (for the reliability note)
STATS: Counter[str] = Counter()


# ------------------------------------------------------------------------------ storage


def storage(kind: str, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A storage holding ``data`` and the buffer's own view of it (``float32``)."""
    n = data.size
    if kind == "plain":
        base = data.copy()
        return base, base
    if kind == "int32":
        base = np.full(n + 2 * PAD, 0x7FC00001, np.int32)
        own = base.view(np.float32)[PAD:PAD + n]
    else:
        base = np.full(2 * n + 2 * PAD if kind == "strided" else n + 2 * PAD, POISON,
                       np.float32)
        if kind == "offset":
            own = base[PAD:PAD + n]
        elif kind == "strided":
            own = base[PAD:PAD + 2 * n:2]
        else:  # reversed
            own = base[PAD:PAD + n][::-1]
    own[...] = data
    return base, own


def view_of(base: np.ndarray, own: np.ndarray, kind: str, k: int) -> np.ndarray:
    """Another view of ``own``'s storage (``k`` >= 1: how much shorter or shifted)."""
    n = own.shape[0]
    k = max(1, min(k, n - 1)) if n > 1 else 0
    if kind == "again":  # a new object, the same memory, shape, strides and dtype
        return own.view(np.int32).view(np.float32)[:]
    if kind == "prefix":
        return own[:n - k]
    if kind == "suffix":
        return own[k:]
    if kind == "strided":
        return own[::2]
    if kind == "reversed":
        return own[::-1]
    if kind == "shifted":  # same length and strides, first element moved by one
        flat = base.view(np.float32) if base.dtype == np.int32 else base
        first = (own.__array_interface__["data"][0]
                 - flat.__array_interface__["data"][0]) // 4
        step = own.strides[0] // 4
        for d in (1, -1):
            ends = (first + d, first + d + step * (n - 1))
            if min(ends) >= 0 and max(ends) < flat.size:
                return np.lib.stride_tricks.as_strided(flat[first + d:], own.shape,
                                                       own.strides)
    return own


# --------------------------------------------------------------------------- the cases


@attrs.frozen(eq=False)
class ViewCase:
    """A launch pair whose buffers are bound to views (see the module docstring)."""

    case: Case
    launches: tuple[KernelLaunch, KernelLaunch]
    storage: dict[str, str]
    bind: dict[tuple[int, str], tuple[str, int]]
    story: str

    def materialise(self) -> tuple[list[KernelLaunch], dict[str, np.ndarray]]:
        """Fresh storages, and the launches with every buffer name bound to its view."""
        bases: dict[str, np.ndarray] = {}
        owns: dict[str, np.ndarray] = {}
        for name, data in self.case.buffers.items():
            bases[name], owns[name] = storage(self.storage[name], data)
        out: list[KernelLaunch] = []
        for n, lc in enumerate(self.launches):
            args: dict[str, Any] = {}
            for p in lc.kernel.params:
                v = lc.by_name[p.name]
                if isinstance(v, str):
                    kind, k = self.bind[(n, p.name)]
                    a = view_of(bases[v], owns[v], kind, k)
                    elem = p.type.elem.dtype if p.is_array else None  # type: ignore[union-attr]
                    if elem is not None and a.dtype != elem:
                        a = a.view(elem)
                    args[p.name] = a
                else:
                    args[p.name] = v
            out.append(KernelLaunch(lc.kernel, lc.threads, lc.block, args))
        return out, bases


def _length_guard(k: Kernel, count: str, arr: str) -> Kernel:
    """``k`` with every use of its scalar ``count`` replaced by ``length(arr)``."""
    n, a = k.param(count), k.param(arr)

    def swap(e: Expr) -> Expr | None:
        return Length(a) if isinstance(e, Ref) and e.var == n else None

    out: Kernel = attrs.evolve(k, body=map_node(k.body, expr=swap))
    return out


def _bits_consumer() -> Kernel:
    """A consumer of the intermediate's ``int32`` bits: ``out[i] <- src[i] ^ x[i] + 1``."""
    src, x, out = var("src", array(Scalar.I32)), var("x", array(Scalar.I32)), \
        var("out", array(Scalar.I32))
    a, n, i = var("a", Scalar.F32), var("n", Scalar.I32), var("i", Scalar.I32)
    val = Binary(BinaryOp.ADD, Binary(BinaryOp.BXOR, Read(src, (Ref(i),)), Read(x, (Ref(i),))),
                 Const(1, Scalar.I32))
    body = Let(i, Intrinsic("global_thread_id"),
               If(Binary(BinaryOp.LT, Ref(i), Ref(n)), Store(out, (Ref(i),), val)))
    return Kernel("cbits", (src, x, out, a, n), (), body)


@st.composite
def view_cases(draw: st.DrawFn) -> ViewCase:
    case = draw(cases())
    p, c = case.launches
    pk, ck = p.kernel, c.kernel
    tweaks: list[str] = []
    if draw(st.integers(0, 3)) == 0:
        ck = _bits_consumer()
        tweaks.append("bits-consumer")
    if draw(st.booleans()):
        ck = _length_guard(ck, "n", "out" if draw(st.integers(0, 3)) == 0 else "src")
        tweaks.append("consumer-length")
    if draw(st.integers(0, 2)) == 0:
        pk = _length_guard(pk, "n", "y")
        tweaks.append("producer-length")
    launches = (attrs.evolve(p, kernel=pk), attrs.evolve(c, kernel=ck))
    store = {name: draw(st.sampled_from(STORAGES)) for name in sorted(case.buffers)}
    plain_rate = draw(st.sampled_from([1, 2, 4]))  # how often an argument gets its own view
    bind: dict[tuple[int, str], tuple[str, int]] = {}
    for n, lc in enumerate(launches):
        for prm, v in lc.by_name.items():
            if isinstance(v, str):
                own = draw(st.integers(0, plain_rate)) != 0
                kind = "own" if own else draw(st.sampled_from(VIEWS[1:]))
                bind[(n, prm)] = (kind, draw(st.integers(1, 8)))
    story = (f"{case.story} tweaks={tweaks} storage={store} "
             f"bind={ {f'{n}.{k}': v for (n, k), v in bind.items()} }")
    return ViewCase(case, launches, store, bind, story)


# ------------------------------------------------------------------------------ checks


def interp(k: Kernel, args: dict[str, Any], threads: int, block: int) -> None:
    run_kernel(k, args, threads, block)


def run_all(launches: list[KernelLaunch], run: Run) -> None:
    for lc in launches:
        run(lc.kernel, dict(lc.by_name), int(lc.threads), lc.block)  # type: ignore[call-overload]


def check(vc: ViewCase, run: Run) -> str:
    """Run ``vc`` unfused and fused; assert equal storages; return what happened."""
    before, bases1 = vc.materialise()
    try:
        run_all(before, run)
    except (InterpError, LaunchError):
        STATS["invalid unfused"] += 1
        event("invalid unfused launch (out of bounds, race, overlap)")
        return "invalid"
    launches, bases2 = vc.materialise()
    new, report = fuse_launches(launches)
    fused = any(d.fused for d in report)
    run_all(new, run)  # a fused launch must run wherever the unfused ones did
    for name in bases1:
        assert bases1[name].tobytes() == bases2[name].tobytes(), \
            f"storage {name} differs: {vc.story}; report: {[str(d) for d in report]}"
    outcome = "fused" if fused else f"refused {report[0].rule}"
    STATS[outcome] += 1
    event(outcome)
    return outcome


# ------------------------------------------------------------------------------- tests


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(view_cases())
def test_leg1_leg7_ef12_view_pairs_sample(vc: ViewCase) -> None:
    """LEG-1, LEG-7, EF-12: fused equals unfused bitwise on every storage, with views in
    every argument position (a quick sample for make test)."""
    check(vc, interp)


@pytest.mark.slow
@settings(max_examples=FUZZ_PAIRS if FUZZ else 300, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(view_cases())
def test_leg1_leg7_ef12_view_pairs_fuzz(vc: ViewCase) -> None:
    check(vc, interp)


def _opencl() -> Run:
    from sarek_py.runtime import get_backend

    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))

    def run(k: Kernel, args: dict[str, Any], threads: int, block: int) -> None:
        be.run_kernel(k, args, threads, block)

    return run


@pytest.mark.opencl
@settings(max_examples=60 if FUZZ else 12, deadline=None, derandomize=not FUZZ,
          suppress_health_check=list(HealthCheck))
@given(view_cases())
def test_leg1_leg7_ef12_view_pairs_opencl(vc: ViewCase) -> None:
    """The same on OpenCL (PoCL here), a sample (fixed unless SAREK_FUZZ=1)."""
    check(vc, _opencl())


def test_views_cover_every_kind() -> None:
    """The view makers give what they say: sizes, overlap, one buffer or not."""
    from sarek_py.fusion.epilogue.buffers import buffer_key

    data = np.arange(8, dtype=np.float32)
    for kind in STORAGES:
        base, own = storage(kind, data)
        assert own.tolist() == data.tolist() and np.shares_memory(base, own)
        for v in VIEWS:
            w = view_of(base, own, v, 2)
            assert w.dtype == np.float32 and np.shares_memory(w, base), (kind, v)
            same = buffer_key(w) == buffer_key(own)
            # a plain storage has no room to shift into: the shifted view is its own
            assert same == (v in ("own", "again") or (kind, v) == ("plain", "shifted")), \
                (kind, v)
            if v == "shifted":
                assert w.shape == own.shape and w.strides == own.strides


# ------------------------------------------ launches of kernel-level fused kernels (LEG-14)


@attrs.frozen(eq=False)
class FusedLaunchCase:
    """A kernel-level fusion of a :class:`ViewCase`'s pair, launched with counts and a
    producer ``n`` moved away from the pair's own (``dtp``, ``dtc``, ``dn``)."""

    vc: ViewCase
    shared: dict[str, str]
    dtp: int
    dtc: int
    dn: int
    block: int
    #: bind the consumer's unshared ``out`` to a view of this producer array (LEG-15)
    alias: tuple[str, str] | None = None


@st.composite
def fused_launch_cases(draw: st.DrawFn) -> FusedLaunchCase:
    vc = draw(view_cases())
    p, c = vc.launches
    assume(c.kernel.name != "cbits")  # its int32 parameters cannot be shared with f32 ones
    shared = {ck: pk for ck, cv in c.by_name.items() if isinstance(cv, str)
              for pk, pv in p.by_name.items() if pv == cv}
    alias = None
    if "out" not in shared and draw(st.integers(0, 3)) == 0:
        alias = (draw(st.sampled_from(["x", "y", "w"])),
                 draw(st.sampled_from(["own", "again", "prefix", "reversed", "strided"])))
    return FusedLaunchCase(vc, shared, draw(st.integers(-3, 3)), draw(st.integers(-3, 3)),
                           draw(st.sampled_from([0, 0, -1, 1, 3])),
                           draw(st.sampled_from([1, 4, 32])), alias)


def check_fused_launch(fc: FusedLaunchCase, run: Run) -> str:
    """LEG-14, LEG-15: a launch of ``fuse(P, C)`` that the launch check accepts gives
    bitwise what P's launch then C's give with the same numbers and buffers."""
    from sarek_py.fusion.epilogue.fuse_kernels import fuse
    from sarek_py.fusion.refusal import FusionRefused

    p, c = fc.vc.launches
    try:
        fk = fuse(p.kernel, c.kernel, shared=fc.shared)
    except FusionRefused as r:
        STATS[f"fuse refused {r.rule}"] += 1
        event(f"fuse refused {r.rule}")
        return "fuse refused"
    tp = max(0, int(p.threads) + fc.dtp)
    tc = max(0, int(c.threads) + fc.dtc)

    def numbers(lcs: list[KernelLaunch]) -> tuple[dict[str, Any], dict[str, Any]]:
        pa = dict(lcs[0].by_name)
        pa["n"] = max(0, int(pa["n"]) + fc.dn)
        ca = {k: (pa[fc.shared[k]] if k in fc.shared else v) for k, v in lcs[1].by_name.items()}
        if fc.alias is not None:
            target = pa[fc.alias[0]]
            ca["out"] = view_of(target, target, fc.alias[1], 2)
        return pa, ca

    fused_lcs, bases2 = fc.vc.materialise()
    pa, ca = numbers(fused_lcs)
    args = {"p_" + k: v for k, v in pa.items()}
    args.update({"c_" + k: v for k, v in ca.items() if k not in fc.shared})
    args["ep_tc"] = tc
    try:
        run(fk, args, tp, fc.block)
    except FusionRefused as r:
        STATS[f"launch refused {r.rule}"] += 1
        event(f"launch refused {r.rule}")
        return "refused"
    except (InterpError, LaunchError):
        fused_error = True
    else:
        fused_error = False
    plain_lcs, bases1 = fc.vc.materialise()
    pa1, ca1 = numbers(plain_lcs)
    try:
        run(p.kernel, pa1, tp, fc.block)
        run(c.kernel, ca1, tc, 8)
    except (InterpError, LaunchError):
        STATS["invalid unfused"] += 1
        event("invalid unfused launch")
        return "invalid"
    assert not fused_error, f"the fused launch failed where P then C ran: {fc}"
    for name in bases1:
        assert bases1[name].tobytes() == bases2[name].tobytes(), \
            f"storage {name} differs (tp={tp} tc={tc}): {fc.vc.story}"
    STATS["launch accepted, exact"] += 1
    event("launch accepted, exact")
    return "exact"


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(fused_launch_cases())
def test_leg14_leg15_accepted_fused_launches_are_exact_sample(fc: FusedLaunchCase) -> None:
    """LEG-14, LEG-15: every launch of a ``fuse()`` kernel that the launch check lets
    through equals P then C, bitwise, with views and moved counts (a sample)."""
    check_fused_launch(fc, interp)


@pytest.mark.slow
@settings(max_examples=FUZZ_PAIRS // 2 if FUZZ else 200, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(fused_launch_cases())
def test_leg14_leg15_accepted_fused_launches_are_exact_fuzz(fc: FusedLaunchCase) -> None:
    check_fused_launch(fc, interp)


@pytest.mark.opencl
@settings(max_examples=40 if FUZZ else 10, deadline=None, derandomize=not FUZZ,
          suppress_health_check=list(HealthCheck))
@given(fused_launch_cases())
def test_leg14_leg15_accepted_fused_launches_are_exact_opencl(fc: FusedLaunchCase) -> None:
    """The same through ``Backend.run_kernel`` on OpenCL (PoCL here), a sample."""
    check_fused_launch(fc, _opencl())
