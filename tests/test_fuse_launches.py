"""Fusion of launch sequences and the differential tests of epilogue fusion
(specs/fusion-legality.md LEG-10, specs/epilogue-fusion.md EF-12)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from fusion_strategies import Case, cases, run_launches, same_bits
from hypothesis import HealthCheck, assume, given, settings

from sarek_py.codegen import emit_cuda
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_kernel

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
ROOT = Path(__file__).resolve().parent.parent

CHAIN = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i]

kernel relu(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- y[i] > 0.0f ? y[i] : 0.0f

kernel bias(z : f32[], w : f32[], b : f32) =
  let i = global_thread_id in
  w[i] <- z[i] + b

kernel shift(w : f32[], v : f32[]) =
  let i = global_thread_id in
  v[i] <- w[i + 1]
"""

Run = Callable[[Kernel, dict[str, object], int, int], None]


def interp(k: Kernel, args: dict[str, object], threads: int, block: int) -> None:
    run_kernel(k, args, threads, block)  # type: ignore[arg-type]


def chain_launches(n: int = 50) -> list[KernelLaunch]:
    m = parse_module(CHAIN, "chain.sk")
    return [
        KernelLaunch(m.kernel("scale"), n + 3, 8, {"x": "X", "y": "Y", "a": 1.5, "n": n}),
        KernelLaunch(m.kernel("relu"), n, 16, {"y": "Y", "z": "Z", "n": n}),
        KernelLaunch(m.kernel("bias"), n, 4, {"z": "Z", "w": "W", "b": -0.25}),
        KernelLaunch(m.kernel("shift"), n - 1, 4, {"w": "W", "v": "V"}),
    ]


def buffers(n: int = 50, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {k: np.full(n, np.nan, np.float32) for k in "YZWV"}
    out["X"] = rng.standard_normal(n).astype(np.float32)
    return out


def assert_same(before: list[KernelLaunch], after: list[KernelLaunch],
                bufs: dict[str, np.ndarray], run: Run, story: str = "") -> None:
    b1 = {k: v.copy() for k, v in bufs.items()}
    b2 = {k: v.copy() for k, v in bufs.items()}
    run_launches(before, b1, run)
    run_launches(after, b2, run)
    for k in b1:
        assert same_bits(b1[k], b2[k]), f"buffer {k} differs: {story}"


# ------------------------------------------------------------------------------ LEG-10


def test_leg10_chain_fuses_and_keeps_the_rest() -> None:
    launches = chain_launches()
    new, report = fuse_launches(launches)
    assert [d.fused for d in report] == [True, True, False]
    assert report[2].rule == "LEG-7" and "w" in (report[2].reason or "")
    assert len(new) == 2 and new[1] is launches[3]
    fused = new[0]
    check_kernel(fused.kernel)
    assert fused.threads == 53 and fused.block == 8
    assert fused.by_name["ep_tc"] == 50 and fused.by_name["p_ep_tc"] == 50
    assert str(report[0]) == "scale -> relu: fused into scale_relu"
    assert str(report[1]).startswith("scale_relu -> bias: fused into scale_relu_bias")
    assert_same(launches, new, buffers(), interp)


def test_leg10_refused_pair_in_the_middle() -> None:
    ls = chain_launches()
    new, report = fuse_launches([ls[3], ls[0], ls[1]])
    assert [d.fused for d in report] == [False, True]
    assert report[0].rule == "LEG-8"  # shift -> scale: scale reads nothing shift writes
    assert new[0] is ls[3] and new[1].kernel.name == "scale_relu"
    assert fuse_launches([]) == ([], [])
    single, rep = fuse_launches([ls[0]])
    assert single == [ls[0]] and rep == []


def test_leg10_report_reasons_name_the_rule() -> None:
    ls = chain_launches()
    bad = KernelLaunch(ls[1].kernel, 60, 16, {"y": "Y", "z": "Z", "n": 60})
    _, report = fuse_launches([ls[0], bad])
    d = report[0]
    assert not d.fused and d.rule == "LEG-3" and "60" in (d.reason or "")
    assert str(d).startswith("scale -> relu: not fused: [LEG-3]")


# ------------------------------------------------------------------ differential (EF-12)


def check_case(case: Case, run: Run) -> bool:
    """Fused iff built legal; if fused, bitwise the same buffers. Returns whether fused."""
    new, report = fuse_launches(list(case.launches))
    (d,) = report
    if not case.legal:
        # illegal for the epilogue fusion; one thread count and block may still fuse
        # thread-wise (LEG-30), which must then be exact
        req = new[0].kernel.requires if d.fused else None
        assert not d.fused or (req is not None and req.threadwise), \
            f"an illegal case was fused: {case.story}"
        if d.fused:
            assert_same(list(case.launches), new, dict(case.buffers), run, case.story)
            return True
        assert d.rule and d.reason, case.story
        return False
    assert d.fused, f"a legal case was refused: {case.story}: {d}"
    check_kernel(new[0].kernel)
    assert_same(list(case.launches), new, dict(case.buffers), run, case.story)
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_ef12_leg10_differential_interp(case: Case) -> None:
    """EF-12: every accepted pair gives bitwise the same buffers as P then C on the
    interpreter (NaN-poisoned outputs); every refusal has a rule and a reason."""
    check_case(case, interp)


@pytest.mark.slow
@settings(max_examples=1000 if FUZZ else 300, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cases())
def test_ef12_differential_interp_fuzz(case: Case) -> None:
    check_case(case, interp)


def _opencl() -> Run:
    from sarek_py.runtime import get_backend

    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))

    def run(k: Kernel, args: dict[str, object], threads: int, block: int) -> None:
        be.run_kernel(k, args, threads, block)  # type: ignore[arg-type]

    return run


@pytest.mark.opencl
@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(cases(flaw_rate=1000))
def test_ef12_differential_opencl(case: Case) -> None:
    """EF-12 on OpenCL (PoCL here): a fixed set of accepted pairs, so that PoCL's kernel
    cache makes later runs fast (``make fuzz`` draws new ones)."""
    assume(case.legal)
    check_case(case, _opencl())


@pytest.mark.slow
@pytest.mark.opencl
@settings(max_examples=100 if FUZZ else 30, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cases(flaw_rate=1000))
def test_ef12_differential_opencl_fuzz(case: Case) -> None:
    assume(case.legal)
    check_case(case, _opencl())


@pytest.mark.opencl
def test_ef12_chain_on_opencl() -> None:
    run = _opencl()
    launches = chain_launches(200)
    new, _ = fuse_launches(launches)
    assert_same(launches, new, buffers(200, seed=4), run)


# ------------------------------------------------------------------- device compilers

_OCLGRIND_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from sarek_py.fusion.epilogue.fuse_kernels import fuse, shared_by_name
    from sarek_py.ir.parser import parse_module
    from sarek_py.runtime import get_backend
    m = parse_module(open(sys.argv[1]).read(), sys.argv[1])
    p, c = m.kernel("scale"), m.kernel("relu")
    k = fuse(p, c, shared=shared_by_name(p, c))
    n = 100
    size = int(sys.argv[3])
    arrays = iter([np.random.default_rng(1).standard_normal(size).astype(np.float32),
                   np.full(size, np.nan, np.float32), np.full(size, np.nan, np.float32)])
    tc = int(sys.argv[2])
    args = {}
    for q in k.params:
        if q.is_array:
            args[q.name] = next(arrays)
        else:
            args[q.name] = tc if q.name == "ep_tc" else (np.float32(2) if q.name == "p_a" else n)
    get_backend("opencl").run_kernel(k, args, n, 16, check_races=False)
""")


@pytest.mark.opencl
@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="oclgrind is not installed")
def test_ef12_oclgrind_no_race_no_out_of_bounds(tmp_path: Path) -> None:
    """The fused example kernel under ``oclgrind --data-races``: no race, no out-of-bounds
    access; the same script with arrays shorter than the launch is caught."""
    sk = tmp_path / "scale_relu.sk"
    example = ROOT / "examples" / "scale_relu.sk"
    sk.write_text(example.read_text() if example.exists() else CHAIN)
    script = tmp_path / "run.py"
    script.write_text(_OCLGRIND_SCRIPT)

    def go(tc: int, size: int) -> str:
        res = subprocess.run(["oclgrind", "--data-races", sys.executable, str(script),
                              str(sk), str(tc), str(size)], capture_output=True, text=True,
                             timeout=300, check=False, cwd=ROOT)
        return res.stdout + res.stderr

    clean = go(100, 100)
    assert "Oclgrind" not in clean or ("race" not in clean.lower()
                                       and "invalid" not in clean.lower()), clean
    assert "error" not in clean.lower(), clean
    assert go(60, 100) == clean  # a consumer domain shorter than the producer's: clean too
    # positive control: arrays shorter than the launch (n = 100): caught
    broken = go(100, 90)
    assert "invalid read" in broken.lower() or "out-of-bounds" in broken.lower(), broken


NEEDS_NVCC = pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("NVCC"),
                                reason="nvcc is not installed")


@NEEDS_NVCC
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(cases(flaw_rate=1000))
def test_ef12_nvcc_generated_fused_kernels_have_no_fma(case: Case) -> None:
    """Fused kernels of generated pairs compile to PTX without ``fma.rn``."""
    from sarek_py.codegen.nvcc import compile_ptx

    new, report = fuse_launches(list(case.launches))
    assume(report[0].fused)
    ptx = compile_ptx(emit_cuda(new[0].kernel))
    assert ".entry" in ptx and "fma.rn" not in ptx


@NEEDS_NVCC
def test_ef12_nvcc_ptx_has_no_fma() -> None:
    """Every fused kernel of the chain compiles to PTX without ``fma.rn`` (contraction
    off: ``--fmad=false``)."""
    from sarek_py.codegen.nvcc import compile_ptx

    new, _ = fuse_launches(chain_launches())
    m = parse_module(CHAIN, "chain.sk")
    k = fuse(m.kernel("scale"), m.kernel("relu"), shared={"y": "y"})
    for kern in (new[0].kernel, k):
        ptx = compile_ptx(emit_cuda(kern))
        assert ".entry" in ptx and "mul.rn.f32" in ptx
        assert "fma.rn" not in ptx


# ------------------------------------------------------------------------------ LEG-12

SYMBOLIC = CHAIN + """
program main
  var n : i32;
  var m : i32;
  var x : f32[] allocatable;
  var y : f32[] allocatable;
  var z : f32[] allocatable;
  var w : f32[] allocatable;
begin
  read n, m;
  allocate x[n];
  allocate y[n];
  allocate z[n];
  allocate w[n];
  launch scale(x, y, 1.5f, n) threads i64(n) + 3L block 8;
  launch relu(y, z, n) threads n block 16;
  launch bias(z, w, 0.25f) threads n block 4;
  launch scale(w, y, 2.0f, m) threads m block 8;
  launch relu(y, z, n) threads n block 16
end
"""


def test_leg12_symbolic_counts_fuse_and_run() -> None:
    """LEG-12: with n unknown, scale[n+3] -> relu[n] -> bias[n] is proved; scale[m] ->
    relu[n] is not. The fused launches, instantiated with values of n, give bitwise the
    buffers of the unfused ones."""
    from sarek_py.fusion.epilogue.sequence import program_segments
    from sarek_py.ir.host.evaluate import host_eval
    from sarek_py.ir.host.launch import is_symbolic
    from sarek_py.ir.host.text import parse_program

    segs = program_segments(parse_program(SYMBOLIC, "sym.sk"))
    assert len(segs) == 1 and segs[0].break_reason is None
    launches = list(segs[0].launches)
    assert is_symbolic(launches[0].threads) and is_symbolic(launches[0].by_name["n"])
    new, report = fuse_launches(launches)
    assert [d.fused for d in report] == [True, True, False, False]
    assert report[3].rule == "LEG-12" and "scale" in (report[3].reason or "")
    fused = new[0]
    assert is_symbolic(fused.by_name["ep_tc"])

    def concrete(lc: KernelLaunch, n: int) -> KernelLaunch:
        env = {"n": n, "m": n}

        def val(v: object) -> object:
            return int(host_eval(v, env)) if is_symbolic(v) else v  # type: ignore[arg-type]

        return KernelLaunch(lc.kernel, val(lc.threads), lc.block,  # type: ignore[arg-type]
                            {k: val(v) for k, v in lc.by_name.items()})  # type: ignore[misc]

    for n in (1, 5, 64):
        before = [concrete(lc, n) for lc in launches[:3]]
        after = [concrete(fused, n)]
        bufs = {k: v for k, v in buffers(n + 3, seed=n).items()}
        bufs = {"x": bufs["X"], "y": bufs["Y"], "z": bufs["Z"], "w": bufs["W"]}
        assert_same(before, after, bufs, interp, f"n={n}")
        # the concrete analysis agrees with the symbolic one
        _, rep = fuse_launches(before)
        assert [d.fused for d in rep] == [True, True]


def test_leg12_symbolic_unproved_cases() -> None:
    from sarek_py.fusion.epilogue.legality import index_slice
    from sarek_py.fusion.refusal import FusionRefused
    from sarek_py.ir.nodes import Ref, var
    from sarek_py.ir.types import Scalar

    m = parse_module(CHAIN, "chain.sk")
    n = Ref(var("n", Scalar.I32, mutable=True))
    ok = KernelLaunch(m.kernel("scale"), n, 8, {"x": "X", "y": "Y", "a": 1.0, "n": n})
    index_slice(ok, "y", n)
    fewer = KernelLaunch(m.kernel("scale"), n, 8, {"x": "X", "y": "Y", "a": 1.0, "n": 5})
    with pytest.raises(FusionRefused) as ei:
        index_slice(fewer, "y", n)
    assert ei.value.rule == "LEG-12"
    shift = parse_module("""
kernel p(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in if i < n then y[i % 7] <- x[i]
""", "p.sk").kernel("p")
    with pytest.raises(FusionRefused) as ei:
        index_slice(KernelLaunch(shift, n, 8, {"x": "X", "y": "Y", "n": n}), "y", n)
    assert ei.value.rule == "LEG-2"


def test_leg12_symbolic_counts_with_strided_stores() -> None:
    """LEG-12 with AFF-14's residues: a producer storing y[2i] and y[2i + 1] (in i64) over
    n threads covers [0, 2n) exactly once for every n; y[2i] and y[2i + 2] does not. The
    proved pair, fused with symbolic counts and instantiated, gives the unfused buffers."""
    from sarek_py.fusion.epilogue.legality import index_slice
    from sarek_py.fusion.refusal import FusionRefused
    from sarek_py.ir.nodes import Binary, BinaryOp, Cast, Const, Ref, var
    from sarek_py.ir.types import Scalar

    mod = parse_module("""
kernel split(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (y[2L * i64(i)] <- x[i]; y[2L * i64(i) + 1L] <- -x[i])

kernel wraps(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (y[2 * i] <- x[i]; y[2 * i + 1] <- -x[i])

kernel gap(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (y[2L * i64(i)] <- x[i]; y[2L * i64(i) + 2L] <- -x[i])

kernel double(y : f32[], z : f32[]) =
  let i = global_thread_id in z[i] <- y[i] * 2.0f
""", "split.sk")
    n = Ref(var("n", Scalar.I32, mutable=True))
    two_n = Binary(BinaryOp.MUL, Const(2, Scalar.I64), Cast(Scalar.I64, n))
    split = KernelLaunch(mod.kernel("split"), n, 8, {"x": "X", "y": "Y", "n": n})
    index_slice(split, "y", two_n)
    gap = KernelLaunch(mod.kernel("gap"), n, 8, {"x": "X", "y": "Y", "n": n})
    with pytest.raises(FusionRefused) as ei:
        index_slice(gap, "y", two_n)
    assert ei.value.rule == "LEG-12"
    # in i32, 2 * i + 1 cannot wrap when the consumer's count 2n fits i32 (a launch fact,
    # LEG-19); with the count n nothing bounds n below 2^30: LEG-6 before any coverage
    wraps = KernelLaunch(mod.kernel("wraps"), n, 8, {"x": "X", "y": "Y", "n": n})
    index_slice(wraps, "y", two_n)
    with pytest.raises(FusionRefused) as ei:
        index_slice(wraps, "y", n)
    assert ei.value.rule == "LEG-6" and "`2 * i` may exceed 2147483647" in ei.value.reason
    consumer = KernelLaunch(mod.kernel("double"), two_n, 8, {"y": "Y", "z": "Z"})
    new, report = fuse_launches([split, consumer])
    assert [d.fused for d in report] == [True]
    from sarek_py.ir.host.evaluate import host_eval
    from sarek_py.ir.host.launch import is_symbolic

    def concrete(lc: KernelLaunch, k: int) -> KernelLaunch:
        def val(v: object) -> object:
            return int(host_eval(v, {"n": k})) if is_symbolic(v) else v  # type: ignore[arg-type]

        return KernelLaunch(lc.kernel, val(lc.threads), lc.block,  # type: ignore[arg-type]
                            {a: val(v) for a, v in lc.by_name.items()})  # type: ignore[misc]

    for k in (1, 6, 33):
        rng = np.random.default_rng(k)
        bufs = {"X": rng.standard_normal(2 * k + 2).astype(np.float32),
                "Y": np.full(2 * k + 2, np.nan, np.float32),
                "Z": np.full(2 * k + 2, np.nan, np.float32)}
        assert_same([concrete(split, k), concrete(consumer, k)], [concrete(new[0], k)],
                    bufs, interp, f"n={k}")
