"""Grid-stride loops around a producer's stores (specs/fusion-legality.md LEG-21 … LEG-23,
specs/epilogue-fusion.md EF-8, EF-24, EF-19, specs/frontend.md FE-26): recognised, proved to store each
element of ``[0, n)`` exactly once (or followed iteration by iteration), fused with an
element-wise consumer, bitwise the unfused pair on the interpreter and OpenCL (PoCL), clean
under ``oclgrind --data-races``; every other loop refused naming the loop and the failed
condition."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.codegen import emit_cuda
from sarek_py.codegen.nvcc import compile_ptx, find_nvcc
from sarek_py.frontend import Vec, f32, i32, kernel
from sarek_py.frontend.intrinsics import STUBS
from sarek_py.fusion.epilogue.grid_stride import GridStride, induction
from sarek_py.fusion.epilogue.sequence import fuse_launches, program_segments
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel, While, iter_stmts
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent
global_idx_x, block_dim_x, grid_dim_x = (STUBS[n] for n in ("global_idx_x", "block_dim_x",
                                                              "grid_dim_x"))

KERNELS = """
kernel prod(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i] <- x[i] * 2.0f + 1.0f;
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_let(x : f32[], y : f32[], n : i32) =
  let stride = grid_dim_x * block_dim_x in
  let mut i = global_thread_id in
  while i < n do
    let j = i in
    (if x[j] > 0.0f then y[j] <- x[j] else y[j] <- -x[j]);
    i := stride + i
  done

kernel prod_stride(x : f32[], y : f32[], n : i32, s : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i] <- x[i] * 2.0f;
    i := i + s
  done

kernel prod_next(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i + 1] <- x[i] * 2.0f;
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_fixed(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[0] <- x[i];
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_break(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i] <- x[i];
    if x[i] > 0.0f then break;
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_twice(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i] <- x[i];
    i := i + 1;
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_nostart(x : f32[], y : f32[], n : i32)
  var i : i32 =
  (if x[0] > 0.0f then i := global_idx_x else i := 0);
  while i < n do
    y[i] <- x[i];
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_some(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  if global_idx_x < 128 then
    while i < n do
      y[i] <- x[i];
      i := i + 128
    done

kernel prod_wide(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i] <- x[i];
    i := i + 2147483000
  done

kernel prod_gidbound(x : f32[], y : f32[], n : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n + global_idx_x do
    y[i] <- x[i];
    i := i + block_dim_x * grid_dim_x
  done

kernel prod_repeat(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  for k = 0 to 1999 do
    if i < n then y[i] <- x[i] + 1.0f
  done

kernel prod_once(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  for k = 0 to 1999 do
    (if i < n then y[i] <- x[i] + 1.0f);
    return
  done

kernel cons(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- y[i] * y[i] - 0.5f
"""
M = parse_module(KERNELS, "grid_stride.sk")


def launches(prod: str, n: int, tp: int, block: int, tc: int,
             **extra: Any) -> list[Launch]:
    return [KernelLaunch(M.kernel(prod), tp, block, {"x": "X", "y": "Y", "n": n, **extra}),
            KernelLaunch(M.kernel("cons"), tc, min(block, max(tc, 1)),
                         {"y": "Y", "z": "Z", "n": n})]


def buffers(size: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {c: rng.standard_normal(size).astype(np.float32) for c in "XYZ"}


def run_all(ls: list[Launch], bufs: dict[str, np.ndarray], run: Any) -> None:
    for lc in ls:
        args = {k: bufs[v] if isinstance(v, str) else v for k, v in lc.by_name.items()}
        run(lc.kernel, args, lc.threads, lc.block)


def interp(k: Kernel, args: dict[str, Any], threads: int, block: int) -> None:
    run_kernel(k, args, threads, block)


def opencl() -> Any:
    try:
        be = get_backend("opencl")
    except (BackendUnavailable, SarekError) as exc:
        pytest.skip(f"no OpenCL: {exc}")
    return be.run_kernel


def bitwise(before: list[Launch], after: list[Launch], size: int, run: Any,
            seed: int = 0) -> None:
    a, b = buffers(size, seed), buffers(size, seed)
    run_all(before, a, run)
    run_all(after, b, run)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k


def decide(ls: list[Launch]) -> tuple[list[Launch], Any]:
    new, report = fuse_launches(ls)
    (d,) = report
    return new, d


# ------------------------------------------------------------------ recognition (LEG-21)


def loop_of(name: str) -> While:
    return next(s for s in iter_stmts(M.kernel(name).body) if isinstance(s, While))


def test_leg21_recognises_the_idiom_in_each_spelling() -> None:
    for name in ("prod", "prod_let", "prod_stride"):
        g = induction(loop_of(name))
        assert isinstance(g, GridStride), (name, g)
        assert g.var.name == "i"
    gs = induction(loop_of("prod"))
    assert isinstance(gs, GridStride)
    assert gs.name == "the while loop over i (i < n, i := i + block_dim_x * grid_dim_x)"


@pytest.mark.parametrize("name,words", [
    ("prod_break", "its body has a break"),
    ("prod_twice", "i is also assigned in its body, at `i := i + 1`"),
    ("prod_gidbound", "its bound n + global_idx_x is not the same in every iteration"),
])
def test_leg21_not_grid_stride_says_which_condition_fails(name: str, words: str) -> None:
    g = induction(loop_of(name))
    if isinstance(g, GridStride):  # the bound varies with the thread, not with the loop
        _, d = decide(launches(name, 1000, 256, 64, 1000))
        assert not d.fused and d.rule == "LEG-21" and "depends on the thread id" in d.reason
        return
    assert words in g.reason, g.reason


# ------------------------------------------------------------------- acceptance (LEG-21)


CASES = [  # n, producer threads, block, consumer threads
    (1000, 256, 64, 1000),      # several iterations per thread
    (1000, 256, 256, 1024),     # a rounded-up consumer (LEG-18)
    (1000, 2048, 256, 1000),    # more threads than elements: at most one iteration
    (1000, 1000, 8, 1000),      # as many threads as elements
    (20_000, 64, 32, 20_000),   # 313 iterations a thread: the element view, no unrolling
    (7, 96, 32, 7),
    (0, 64, 64, 0),
    (1, 32, 32, 1),
]


@pytest.mark.parametrize("prod", ["prod", "prod_let"])
@pytest.mark.parametrize("n,tp,block,tc", CASES)
def test_leg21_grid_stride_producer_fuses_bitwise_on_interp(prod: str, n: int, tp: int,
                                                             block: int, tc: int) -> None:
    """LEG-21, EF-8, EF-24, EF-12: fused (the consumer inlined after the store in the loop, at
    the loop's element) and bitwise the unfused pair; the fused launch passes its own
    launch check (LEG-14, run_kernel checks it)."""
    before = launches(prod, n, tp, block, tc)
    new, d = decide(before)
    assert d.fused, d
    bitwise(before, new, max(n, tc, 1), interp, seed=n + tp)


@pytest.mark.opencl
def test_leg21_grid_stride_producer_fuses_bitwise_on_opencl() -> None:
    run = opencl()
    for prod in ("prod", "prod_let"):
        for n, tp, block, tc in CASES[:6]:
            before = launches(prod, n, tp, block, tc)
            new, d = decide(before)
            assert d.fused, d
            bitwise(before, new, max(n, tc, 1), run, seed=n)


def test_leg21_element_view_decides_a_hundred_million_elements_without_unrolling() -> None:
    """LEG-21: 10^8 elements on 256 threads (390625 iterations each, far past
    MAX_UNROLL): the element view proves it at once; a stride of 255 is refused."""
    _, d = decide(launches("prod", 100_000_000, 256, 64, 100_000_000))
    assert d.fused, d
    _, d = decide(launches("prod_stride", 100_000_000, 256, 64, 100_000_000, s=255))
    assert not d.fused and d.rule == "LEG-21" and "more than 1024" in d.reason, d
    assert "its stride s is 255, not the launch's 256 threads" in d.reason


def test_leg21_stride_argument_equal_to_the_thread_count_fuses() -> None:
    """A stride passed as an argument is the launch's thread count: the element view."""
    before = launches("prod_stride", 5000, 512, 128, 5000, s=512)
    new, d = decide(before)
    assert d.fused, d
    bitwise(before, new, 5000, interp)


def test_leg21_loop_on_part_of_the_threads_is_followed_iteration_by_iteration() -> None:
    """Only threads below 128 reach the loop, and they step by 128: not the element view
    (not every thread reaches it), but followed iteration by iteration it is exact."""
    before = launches("prod_some", 1000, 256, 64, 1000)
    new, d = decide(before)
    assert d.fused, d
    bitwise(before, new, 1000, interp)


# --------------------------------------------------------------------- refusals (LEG-21)


def test_leg21_stride_below_the_thread_count_is_refused() -> None:
    _, d = decide(launches("prod_stride", 1000, 256, 64, 1000, s=200))
    assert not d.fused and d.rule == "LEG-3", d
    assert "stored more than once" in d.reason
    assert ("the while loop over i (i < n, i := i + s) is no grid-stride loop over all "
            "threads: its stride s is 200, not the launch's 256 threads") in d.reason


def test_leg21_stride_above_the_thread_count_is_refused_naming_the_missing() -> None:
    """250 threads in blocks of 64: block_dim_x * grid_dim_x is 256, so elements whose
    residue is 250..255 are stored by no thread."""
    _, d = decide(launches("prod", 1000, 250, 64, 1000))
    assert not d.fused and d.rule == "LEG-3", d
    assert "elements 250..255, 506..511, 762..767 are not stored" in d.reason
    assert "its stride block_dim_x * grid_dim_x is 256, not the launch's 250 threads" \
        in d.reason


def test_leg21_the_same_grid_fuses_when_its_thread_count_is_a_multiple() -> None:
    new, d = decide(launches("prod", 1000, 256, 64, 1000))
    assert d.fused


@pytest.mark.parametrize("prod,rule,words", [
    ("prod_next", "LEG-3", "is not stored"),           # y[i + 1]: element 0 missing
    ("prod_fixed", "LEG-3", "stored by"),              # y[0] by every iteration
    ("prod_break", "EF-19", "a while loop that stores y or may return has a break"),
    ("prod_twice", "LEG-5", "i is also assigned in its body"),
    ("prod_nostart", "LEG-21", "the value of i before it is not known"),
    ("prod_gidbound", "LEG-21", "its bound is not a known number at this launch"),
])
def test_leg21_illegal_loops_are_refused_naming_the_cause(prod: str, rule: str,
                                                          words: str) -> None:
    _, d = decide(launches(prod, 1000, 256, 64, 1000))
    assert not d.fused and d.rule == rule, d
    assert words in d.reason, d.reason
    assert d.loc is not None or "(at " in str(d), d


def test_leg22_the_step_that_may_wrap_is_refused_naming_it_and_the_bound() -> None:
    """LEG-22: i + 2147483000 from i up to n - 1 = 999 reaches 2147483999 > 2^31 - 1."""
    _, d = decide(launches("prod_wide", 1000, 256, 64, 1000))
    assert not d.fused and d.rule == "LEG-22", d
    assert "`i + 2147483000` may exceed 2147483647, the largest i32" in d.reason
    assert "it reaches 2147483999" in d.reason


def test_leg21_legality_still_refuses_other_while_loops() -> None:
    """LEG-5: a while loop over a data-dependent test around the store."""
    m = parse_module("""
    kernel p(x : f32[], y : f32[], n : i32) =
      let i = global_thread_id in
      let mut k = 0 in
      while x[k] > 0.0f do
        y[i] <- x[i];
        k := k + 1
      done""", "w.sk")
    # (launches of different thread counts: the epilogue fusion, not thread-wise fusion)
    ls = [KernelLaunch(m.kernel("p"), 64, 64, {"x": "X", "y": "Y", "n": 64}),
          KernelLaunch(M.kernel("cons"), 48, 16, {"y": "Y", "z": "Z", "n": 48})]
    _, d = decide(ls)
    assert not d.fused and d.rule == "LEG-5", d
    assert "not `i < n` over a mutable counter" in d.reason


# ---------------------------------------------------------------- bounded loops (LEG-23)


def test_leg23_long_loop_storing_the_same_element_each_iteration_is_refused() -> None:
    _, d = decide(launches("prod_repeat", 100, 128, 64, 100))
    assert not d.fused and d.rule == "LEG-3", d
    assert "runs 2000 times and its body, which does not depend on k, stores the same " \
        "elements of y in every iteration" in d.reason


def test_leg23_long_loop_storing_only_where_the_consumer_does_not_act_fuses() -> None:
    """LEG-23 with LEG-18: the loop stores y[i] 2000 times, but only for i >= n, where
    the guarded consumer does not act: fused, bitwise."""
    m = parse_module("""
    kernel p(x : f32[], y : f32[], n : i32) =
      let i = global_thread_id in
      y[i] <- x[i] + 2.0f;
      for k = 0 to 1999 do
        if i >= n then y[i] <- 0.0f
      done
    """ + KERNELS[KERNELS.index("kernel cons"):], "long.sk")
    ls: list[Launch] = [KernelLaunch(m.kernel("p"), 128, 64, {"x": "X", "y": "Y", "n": 100}),
                        KernelLaunch(m.kernel("cons"), 100, 50, {"y": "Y", "z": "Z", "n": 100})]
    new, d = decide(ls)
    assert d.fused, d
    bitwise(ls, new, 128, interp)
    ls2 = [ls[0], KernelLaunch(m.kernel("cons"), 120, 40, {"y": "Y", "z": "Z", "n": 101})]
    _, d = decide(ls2)
    assert not d.fused and d.rule == "LEG-3", d
    assert "the loop over k runs 2000 times" in (d.reason or ""), d.reason


def test_leg23_long_loop_left_after_its_first_iteration_fuses() -> None:
    before = launches("prod_once", 100, 128, 64, 100)
    new, d = decide(before)
    assert d.fused, d
    bitwise(before, new, 128, interp)


# -------------------------------------------------------------- launch check (LEG-14)


def test_leg14_fused_grid_stride_kernel_refuses_a_launch_with_another_grid() -> None:
    new, d = decide(launches("prod", 1000, 256, 64, 1000))
    assert d.fused
    fused = new[0]
    b = buffers(1000, 0)
    args = {k: b[v] if isinstance(v, str) else v for k, v in fused.by_name.items()}
    with pytest.raises(FusionRefused) as e:
        run_kernel(fused.kernel, args, 250, 64)  # stride 256 over 250 threads
    assert "not stored" in str(e.value)


# ------------------------------------------------------------------ corpus (LEG-21)


def corpus_pair(cons: str, n_bt: tuple[int, int, int]) -> tuple[list[Launch], int]:
    src = "".join((ROOT / "tests" / "corpus" / f).read_text()
                  for f in ("add_bias.sk", "gelu_forward.sk", "biasRelu.sk"))
    m = parse_module(src, "corpus.sk")
    bb, t, oc = n_bt
    n = bb * t * oc
    args: dict[str, Any] = ({"out": "Y", "inp": "X", "N": n} if cons == "gelu_forward_kernel1"
                            else {"C": "X", "bias": np.float32(0.25), "D": "Y",
                                  "numElements": n})
    return ([KernelLaunch(m.kernel("add_bias"), -(-n // 256) * 256, 256,
                          {"out": "X", "bias": "Z", "B": bb, "T": t, "OC": oc}),
             KernelLaunch(m.kernel(cons), -(-n // 128) * 128, 128, args)], n)


@pytest.mark.parametrize("cons", ["gelu_forward_kernel1", "biasRelu"])
@pytest.mark.parametrize("shape", [(2, 5, 20), (1, 3, 33), (4, 64, 16)])
def test_leg21_corpus_add_bias_fuses_with_its_epilogues(cons: str,
                                                         shape: tuple[int, int, int]) -> None:
    """llm.c's add_bias is a grid-stride loop (tests/corpus/add_bias.sk): with its
    original rounded-up launch it fuses with gelu_forward_kernel1 and biasRelu."""
    before, n = corpus_pair(cons, shape)
    new, d = decide(before)
    assert d.fused, d
    bitwise(before, new, max(n, 64), interp)


@pytest.mark.opencl
def test_leg21_corpus_add_bias_epilogues_bitwise_on_opencl() -> None:
    run = opencl()
    for cons in ("gelu_forward_kernel1", "biasRelu"):
        before, n = corpus_pair(cons, (4, 64, 16))
        new, d = decide(before)
        assert d.fused, d
        bitwise(before, new, max(n, 64), run)


# ----------------------------------------------------------------------- front end (FE-26)


@kernel
def fe_prod(x: Vec[f32], y: Vec[f32], n: i32):
    for i in range(global_idx_x(), n, block_dim_x() * grid_dim_x()):
        y[i] = x[i] * 3.0


@kernel
def fe_visit(x: Vec[i32], a: i32, b: i32, s: i32):
    c = 0
    for i in range(a, b, s):
        x[c] = i
        c += 1
    x[15] = c


@pytest.mark.parametrize("a,b,s", [(0, 10, 3), (1, 11, 3), (9, -1, -2), (5, 5, 2), (7, 3, -3),
                                   (0, 1, 5), (3, 0, 2), (3, 8, 1), (8, 3, -1), (0, 5, 0),
                                   (5, 0, 0), (-4, 4, 7)])
def test_fe26_range_with_a_variable_step_visits_what_python_visits(a: int, b: int,
                                                                   s: int) -> None:
    """FE-26: the step evaluated once; a zero step (Python's ValueError) runs nothing."""
    x = np.full(16, -99, np.int32)
    run_kernel(fe_visit.ir, {"x": x, "a": a, "b": b, "s": s}, threads=1, block=1)
    want = list(range(a, b, s)) if s else []
    assert x[15] == len(want) and list(x[:len(want)]) == want


def test_fe26_grid_stride_range_lowers_to_the_recognised_loop_and_fuses() -> None:
    """FE-26, LEG-21: `range(global_idx_x(), n, block_dim_x() * grid_dim_x())` is the
    while loop LEG-21 recognises (test `i_next < i_stop`), and it fuses."""
    loop = next(s for s in iter_stmts(fe_prod.ir.body) if isinstance(s, While))
    assert isinstance(induction(loop), GridStride)
    cons = M.kernel("cons")
    before: list[Launch] = [KernelLaunch(fe_prod.ir, 128, 32, {"x": "X", "y": "Y", "n": 900}),
                            KernelLaunch(cons, 900, 32, {"y": "Y", "z": "Z", "n": 900})]
    new, d = decide(before)
    assert d.fused, d
    bitwise(before, new, 900, interp)


def test_fe26_a_step_of_another_type_is_a_located_error() -> None:
    from sarek_py.frontend.source import FrontendError

    def bad(x: Vec[i32], n: i32, s: f32):  # type: ignore[no-untyped-def]
        for j in range(0, n, s):
            x[j] = 0

    with pytest.raises(FrontendError) as e:
        _ = kernel(bad).ir
    assert "the step of range must be an integer of the bounds' type i32, not f32" \
        in str(e.value)


# ------------------------------------------------------------- devices: oclgrind, nvcc


_OCLGRIND = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import test_grid_stride as G
    from sarek_py.runtime import get_backend
    be = get_backend("opencl")
    for prod, n, tp, block, tc in (("prod", 300, 64, 32, 300), ("prod_let", 100, 96, 32, 128),
                                   ("prod_some", 300, 256, 64, 300)):
        new, d = G.decide(G.launches(prod, n, tp, block, tc))
        assert d.fused, d
        G.run_all(new, G.buffers(max(n, tc), 0), lambda k, a, t, b: be.run_kernel(
            k, a, t, b, check_races=False))
    if len(sys.argv) > 2:  # the positive control: every iteration stores y[0] (refused)
        k = G.M.kernel("prod_fixed")
        G.run_all([G.KernelLaunch(k, 64, 32, {"x": "X", "y": "Y", "n": 200})],
                  G.buffers(200, 0), lambda k, a, t, b: be.run_kernel(
                      k, a, t, b, check_races=False))
    print("done")
""")


@pytest.mark.opencl
@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="oclgrind is not installed")
def test_leg21_fused_grid_stride_kernels_oclgrind_data_races_clean(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(_OCLGRIND)

    def go(*extra: str) -> str:
        res = subprocess.run(["oclgrind", "--data-races", sys.executable, str(script),
                              str(ROOT / "tests"), *extra], capture_output=True, text=True,
                             timeout=300, check=False, cwd=ROOT)
        out = res.stdout + res.stderr
        assert res.returncode == 0 and "done" in out, out
        return out

    out = go()
    assert "race" not in out.lower() and "invalid" not in out.lower(), out
    assert "data race" in go("racy").lower()  # the check can fail


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed here")
def test_leg21_fused_grid_stride_kernel_compiles_to_ptx_without_fma() -> None:
    new, d = decide(launches("prod", 1000, 256, 64, 1000))
    assert d.fused
    ptx = compile_ptx(emit_cuda(new[0].kernel))
    assert ".entry" in ptx and "fma.rn" not in ptx


# ------------------------------------------------------------- symbolic counts (LEG-21)

PROGRAM = """
kernel p(x : f32[], y : f32[], n : i32, s : i32)
  var i : i32 =
  i := global_idx_x;
  while i < n do
    y[i] <- x[i] * 2.0f + 1.0f;
    i := i + {step}
  done

kernel c(y : f32[], z : f32[], m : i32) =
  let i = global_thread_id in
  if i < m then z[i] <- y[i] * y[i] - 0.5f

program main
  var n : i32;
  var x : f32[] allocatable;
  var y : f32[] allocatable;
  var z : f32[] allocatable;
begin
  read n;
  allocate x[n + 64];
  allocate y[n + 64];
  allocate z[n + 64];
  launch p(x, y, n, {s}) threads {tp} block {b};
  launch c(y, z, {m}) threads {tc} block {b}
end
"""


def symbolic(tp: str, tc: str, b: int = 8, m: str = "n", step: str = "block_dim_x * grid_dim_x",
             s: str = "0") -> tuple[list[Launch], list[Launch], Any]:
    text = PROGRAM.format(tp=tp, tc=tc, b=b, m=m, step=step, s=s)
    (seg,) = program_segments(parse_program(text, "prog.sk"))
    launches = list(seg.launches)
    new, (d,) = fuse_launches(launches)
    return launches, new, d


def instantiated(launches: list[Launch], new: list[Launch], n: int, run: Any) -> None:
    before = [lc.known_in({"n": n}) for lc in launches]
    after = [lc.known_in({"n": n}) for lc in new]
    a = {c: np.random.default_rng(n).standard_normal(n + 64).astype(np.float32) for c in "xyz"}
    b = {c: v.copy() for c, v in a.items()}
    run_all(before, a, run)
    run_all(after, b, run)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), (n, k)


ROUNDED = "((n + 7) / 8) * 8"


@pytest.mark.parametrize("tp,tc,step,s", [
    (ROUNDED, ROUNDED, "block_dim_x * grid_dim_x", "0"),
    ("64", ROUNDED, "grid_dim_x * block_dim_x", "0"),       # fewer threads than elements
    (ROUNDED, "n", "s", ROUNDED),                             # the stride an argument
    ("n", "n", "block_dim_x * grid_dim_x", "0"),             # the bound is the count
])
def test_leg21_symbolic_grid_stride_fuses_and_is_bitwise_for_each_n(tp: str, tc: str,
                                                                    step: str, s: str) -> None:
    """LEG-21, LEG-12, LEG-22: proved for every n by the element view; the decision notes
    the step's no-wrap assumption (LEG-22), which each launch proves again (LEG-14)."""
    launches, new, d = symbolic(tp, tc, step=step, s=s)
    assert d.fused, str(d)
    assert "LEG-22" in str(d), str(d)
    for n in (1, 7, 8, 9, 100, 333):
        instantiated(launches, new, n, interp)


@pytest.mark.opencl
def test_leg21_symbolic_grid_stride_bitwise_on_opencl() -> None:
    run = opencl()
    launches, new, d = symbolic("64", ROUNDED)
    assert d.fused, str(d)
    for n in (1, 100, 333):
        instantiated(launches, new, n, run)


@pytest.mark.parametrize("tp,tc,step,s,m,words", [
    # the count is not a multiple of the block: residues past it are stored by no thread
    ("n + 3", "n", "block_dim_x * grid_dim_x", "0", "n", "only when 8 divides it"),
    # a stride argument that is not the count
    (ROUNDED, "n", "s", "n - 1", "n", "is not proved to be the launch's thread count"),
    # the consumer acts past the loop's bound
    (ROUNDED, ROUNDED, "block_dim_x * grid_dim_x", "0", "n + 1", "LEG-12"),
])
def test_leg21_symbolic_refusals_name_the_condition(tp: str, tc: str, step: str, s: str,
                                                    m: str, words: str) -> None:
    _, _, d = symbolic(tp, tc, step=step, s=s, m=m)
    assert not d.fused, str(d)
    assert words in str(d), str(d)


# ----------------------------------------------------- adversarial shapes (LEG-21, LEG-3)

ADVERSARIAL = {
    # the thread id inside the element view is not known (only the counter is)
    "gid_in_index": ("i := global_idx_x;\n  while i < n do\n    y[i + global_idx_x - "
                     "global_idx_x] <- x[i];\n    i := i + block_dim_x * grid_dim_x\n  done",
                     "LEG-2", "not known inside a grid-stride loop's body"),
    # every iteration stores the thread's own element: stored once per iteration
    "outer_let": ("let idx = global_idx_x in\n  i := idx;\n  while i < n do\n    y[idx] <- "
                  "x[i];\n    i := i + block_dim_x * grid_dim_x\n  done", "LEG-2",
                  "only the loop's counter is known"),
    "nested_for": ("for r = 0 to 1 do\n    i := global_idx_x;\n    while i < n do\n      "
                   "y[r * n + i] <- x[i] + f32(r);\n      i := i + block_dim_x * grid_dim_x\n"
                   "    done\n  done", None, ""),
    "inner_let_stride": ("i := global_idx_x;\n  while i < n do\n    let st = block_dim_x * "
                         "grid_dim_x in\n    (y[i] <- x[i];\n    i := i + st)\n  done",
                         "LEG-5", "its stride st is not the same in every iteration"),
    # a loop that assigns i between the start and the grid-stride loop
    "killed_start": ("i := global_idx_x;\n  (let mut k = 0 in while k < 1 do i := 0; k := k "
                     "+ 1 done);\n  while i < n do\n    y[i] <- x[i];\n    i := i + "
                     "block_dim_x * grid_dim_x\n  done", "LEG-21",
                     "the value of i before it is not known"),
    "plus_outside": ("i := global_idx_x;\n  while i < n do\n    y[i] <- x[i];\n    i := i + "
                     "block_dim_x * grid_dim_x\n  done;\n  y[global_idx_x] <- 1.0f", "LEG-3",
                     "stored more than once"),
    "guard_before": ("if global_idx_x >= 1000000 then return;\n  i := global_idx_x;\n  "
                     "while i < n do\n    y[i] <- x[i];\n    i := i + block_dim_x * "
                     "grid_dim_x\n  done", None, ""),
    "data_if": ("i := global_idx_x;\n  while i < n do\n    (if x[i] > 0.0f then y[i] <- x[i] "
                "else y[i] <- 0.0f - x[i]);\n    i := i + block_dim_x * grid_dim_x\n  done",
                None, ""),
    "data_if_one_sided": ("i := global_idx_x;\n  while i < n do\n    (if x[i] > 0.0f then "
                          "y[i] <- x[i]);\n    i := i + block_dim_x * grid_dim_x\n  done",
                          "LEG-4", "depends on the data"),
    "two_loops": ("i := global_idx_x;\n  while i < n do\n    y[i] <- x[i];\n    i := i + "
                  "block_dim_x * grid_dim_x\n  done;\n  i := global_idx_x;\n  while i < n do\n"
                  "    y[i] <- x[i] + 1.0f;\n    i := i + block_dim_x * grid_dim_x\n  done",
                  "LEG-3", "stored more than once"),
    "half_each": ("i := global_idx_x;\n  while i < n / 2 do\n    y[2 * i] <- x[i];\n    "
                  "y[2 * i + 1] <- x[i] + 1.0f;\n    i := i + block_dim_x * grid_dim_x\n  done",
                  None, ""),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_leg21_adversarial_loop_shapes(name: str) -> None:
    """LEG-21 with LEG-2, LEG-3, LEG-4, LEG-5: each shape decided exactly or refused
    with its real cause; the accepted ones bitwise the unfused pair."""
    body, rule, words = ADVERSARIAL[name]
    cons = KERNELS[KERNELS.index("kernel cons"):]
    m = parse_module(f"kernel p(x : f32[], y : f32[], n : i32)\n  var i : i32 =\n  {body}\n\n"
                     + cons, "adv.sk")
    tc = 2000 if name == "nested_for" else 1000
    ls: list[Launch] = [KernelLaunch(m.kernel("p"), 256, 64, {"x": "X", "y": "Y", "n": 1000}),
                        KernelLaunch(m.kernel("cons"), tc, 64, {"y": "Y", "z": "Z", "n": tc})]
    new, d = decide(ls)
    if rule is None:
        assert d.fused, d
        bitwise(ls, new, 2000, interp)
    else:
        assert not d.fused and d.rule == rule, d
        assert words in (d.reason or ""), d.reason


def test_leg21_i64_counter_fuses_bitwise() -> None:
    """A counter of type i64 (`i := i64(global_idx_x)`, `i64(n)`, an i64 stride): the
    fused kernel compares and converts ep_t in i64 (EF-8)."""
    m = parse_module("""
    kernel p(x : f32[], y : f32[], n : i32)
      var i : i64 =
      i := i64(global_idx_x);
      while i < i64(n) do
        y[i] <- x[i] * 0.5f;
        i := i + i64(block_dim_x * grid_dim_x)
      done
    """ + KERNELS[KERNELS.index("kernel cons"):], "i64.sk")
    ls: list[Launch] = [KernelLaunch(m.kernel("p"), 128, 32, {"x": "X", "y": "Y", "n": 777}),
                        KernelLaunch(m.kernel("cons"), 800, 32, {"y": "Y", "z": "Z", "n": 777})]
    new, d = decide(ls)
    assert d.fused, d
    bitwise(ls, new, 800, interp)


def test_ef19_symbolic_grid_stride_loop_with_a_break_is_refused() -> None:
    """EF-19 on the symbolic path too: a break in the storing while loop, located."""
    text = PROGRAM.format(tp=ROUNDED, tc=ROUNDED, b=8, m="n", s="0",
                          step="block_dim_x * grid_dim_x").replace(
        "    y[i] <- x[i] * 2.0f + 1.0f;\n",
        "    y[i] <- x[i] * 2.0f + 1.0f;\n    if x[i] > 0.0f then break;\n")
    (seg,) = program_segments(parse_program(text, "prog.sk"))
    _, (d,) = fuse_launches(list(seg.launches))
    assert not d.fused and d.rule == "EF-19", str(d)
    assert "a while loop that stores y has a break" in str(d)
    assert d.loc is not None and d.loc.line == 7, d.loc


def test_aff20_products_are_one_atom_up_to_order_grouping_and_literals() -> None:
    """AFF-20: `1 * a * b`, `b * a` and `a * b` are one atom; `2 * a * b` twice it;
    products in another order of three factors too; a sum is not a product."""
    from sarek_py.analysis.affine.forms import to_affine
    from sarek_py.ir.nodes import Binary, BinaryOp, Const, Ref, var
    from sarek_py.ir.types import Scalar

    a, b, c = (Ref(var(nm, Scalar.I32)) for nm in "abc")

    def mul(*xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = Binary(BinaryOp.MUL, out, x)
        return out

    one = Const(1, Scalar.I32)
    ab = to_affine(mul(a, b))
    assert ab is not None and not ab.is_constant
    for other in (mul(one, a, b), mul(b, a), mul(b, one, a), Binary(BinaryOp.MUL, a,
                                                                     mul(b, one))):
        f = to_affine(other)
        assert f is not None and (f - ab).is_constant and (f - ab).const == 0, other
    two = to_affine(mul(Const(2, Scalar.I32), a, b))
    assert two is not None and (two - ab.scale(2)).is_constant and (two - ab.scale(2)).const == 0
    abc, cab = to_affine(mul(a, b, c)), to_affine(mul(c, mul(a, b)))
    assert abc is not None and cab is not None and (abc - cab).const == 0 \
        and (abc - cab).is_constant
    apb = to_affine(mul(Binary(BinaryOp.ADD, a, one), b))
    assert apb is not None and not (apb - ab).is_constant  # (a + 1) * b is another atom


def test_aff20_leg21_corpus_bias_relu_fuses_with_symbolic_counts() -> None:
    """AFF-20, LEG-21: the corpus's matrixMul -> add_bias -> biasRelu host counts (B = 1,
    T = hA, OC = wB): add_bias's bound `1 * hA * wB` is biasRelu's `hA * wB`; fused, and
    bitwise the unfused pair for sizes instantiated."""
    src = "".join((ROOT / "tests" / "corpus" / f).read_text()
                  for f in ("add_bias.sk", "biasRelu.sk"))
    text = src + """
program main
  var hA : i32;
  var wB : i32;
  var MC : f32[] allocatable;
  var bias : f32[] allocatable;
  var MD : f32[] allocatable;
begin
  read hA;
  read wB;
  allocate MC[hA * wB + 64];
  allocate bias[wB + 64];
  allocate MD[hA * wB + 64];
  launch add_bias(MC, bias, 1, hA, wB) threads (wB * 1 * hA + 256 - 1) / 256 * 256 block 256;
  launch biasRelu(MC, 0.0f, MD, hA * wB) threads (hA * wB + 256 - 1) / 256 * 256 block 256
end
"""
    (seg,) = program_segments(parse_program(text, "mm.sk"))
    launches = list(seg.launches)
    new, (d,) = fuse_launches(launches)
    assert d.fused, str(d)
    for ha, wb in ((3, 5), (16, 48), (33, 17)):
        env = {"hA": ha, "wB": wb}
        before = [lc.known_in(env) for lc in launches]
        after = [lc.known_in(env) for lc in new]
        rng = np.random.default_rng(ha)
        bufs = {k: rng.standard_normal(ha * wb + 64).astype(np.float32)
                for k in ("MC", "bias", "MD")}
        other = {k: v.copy() for k, v in bufs.items()}
        run_all(before, bufs, interp)
        run_all(after, other, interp)
        for k in bufs:
            assert bufs[k].tobytes() == other[k].tobytes(), (ha, wb, k)


# --------------------------------------------------------- grid-stride consumers (EF-25)

GCONS = parse_module(KERNELS + """
kernel elem(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- x[i] + 1.0f

kernel gcons(y : f32[], z : f32[], n : i32)
  var j : i32 =
  let stride = block_dim_x * grid_dim_x in
  j := global_idx_x;
  while j < n do
    z[j] <- y[j] * y[j] - 0.5f;
    j := j + stride
  done

kernel gcons_let(y : f32[], z : f32[], n : i32) =
  let mut j = global_thread_id in
  while j < n do
    let v = y[j] in
    (z[j] <- v > 0.0f ? v : 0.0f;
    j := grid_dim_x * block_dim_x + j)
  done

kernel gcons_acc(y : f32[], z : f32[], n : i32)
  var j : i32
  var acc : f32 =
  j := global_idx_x;
  while j < n do
    acc := acc + y[j];
    z[j] <- acc;
    j := j + block_dim_x * grid_dim_x
  done

kernel gcons_next(y : f32[], z : f32[], n : i32)
  var j : i32 =
  j := global_idx_x;
  while j < n do
    z[j] <- y[j + 1];
    j := j + block_dim_x * grid_dim_x
  done

kernel gcons_wide(y : f32[], z : f32[], n : i32)
  var j : i32 =
  j := global_idx_x;
  while j < n do
    z[j] <- y[j];
    j := j + 2147483000
  done
""", "gcons.sk")


def gpair(prod: str, tp: int, cons: str, tc: int, block: int, n: int = 1000) -> list[Launch]:
    return [KernelLaunch(GCONS.kernel(prod), tp, 64, {"x": "X", "y": "Y", "n": n}),
            KernelLaunch(GCONS.kernel(cons), tc, block, {"y": "Y", "z": "Z", "n": n})]


@pytest.mark.parametrize("prod,tp,cons,tc,block", [
    ("prod", 256, "gcons", 128, 64),     # both grid-stride, different thread counts
    ("prod", 256, "gcons", 2048, 64),    # the consumer with more threads than elements
    ("elem", 1024, "gcons", 64, 32),     # an element-wise producer
    ("prod_let", 192, "gcons_let", 96, 32),
    ("prod", 256, "gcons", 1000, 8),     # m <= T: one iteration a thread
])
def test_ef25_grid_stride_consumer_fuses_bitwise(prod: str, tp: int, cons: str, tc: int,
                                                 block: int) -> None:
    """EF-25, LEG-21: the consumer's loop visits each element of [0, n) once; fused as
    the element-wise consumer on n threads (ep_tc = n), bitwise the unfused pair."""
    before = gpair(prod, tp, cons, tc, block)
    new, d = decide(before)
    assert d.fused, d
    assert new[0].by_name["ep_tc"] == 1000
    bitwise(before, new, 2048, interp)


@pytest.mark.opencl
def test_ef25_grid_stride_consumer_bitwise_on_opencl() -> None:
    run = opencl()
    for prod, tp, cons, tc, block in (("prod", 256, "gcons", 128, 64),
                                      ("elem", 1024, "gcons_let", 64, 32)):
        before = gpair(prod, tp, cons, tc, block)
        new, d = decide(before)
        assert d.fused, d
        bitwise(before, new, 2048, run)


@pytest.mark.parametrize("cons,tc,block,rule,words", [
    # 100 threads in blocks of 64: the stride is 128, residues 100..127 are never visited
    ("gcons", 100, 64, "EF-25", "does not visit each element of [0, 1000) exactly once: "
     "its stride stride is 128, not the launch's 100 threads"),
    ("gcons_acc", 128, 64, "EF-25", "uses acc, which keeps its value from one iteration"),
    ("gcons_next", 128, 64, "LEG-7", "y[j + 1]"),
    ("gcons_wide", 128, 64, "EF-25", "its stride 2147483000 is 2147483000"),
    # n - 1 + 128 past 2^31 - 1: the consumer's own step would wrap
    ("gcons", 128, 64, "LEG-22", "`j + stride` may exceed 2147483647"),
])
def test_ef25_grid_stride_consumer_refusals(cons: str, tc: int, block: int, rule: str,
                                            words: str) -> None:
    n = 2147483600 if rule == "LEG-22" else 1000
    _, d = decide(gpair("prod", 256, cons, tc, block, n))
    assert not d.fused and d.rule == rule, d
    assert words in (d.reason or ""), d.reason


def test_ef25_grid_stride_consumer_on_symbolic_counts_is_refused() -> None:
    text = PROGRAM.format(tp=ROUNDED, tc=ROUNDED, b=8, m="n", s="0",
                          step="block_dim_x * grid_dim_x")
    cons = GCONS.kernel("gcons")
    (seg,) = program_segments(parse_program(text, "prog.sk"))
    p, c = seg.launches
    c2 = KernelLaunch(cons, c.threads, c.block, {"y": c.by_name["y"], "z": c.by_name["z"],
                                                  "n": c.by_name["m"]})
    _, (d,) = fuse_launches([p, c2])
    assert not d.fused and d.rule == "EF-25", str(d)
    assert "thread count and block size are numbers" in (d.reason or "")
