"""``break``/``continue`` on the devices: the emitted C computes the interpreter's bytes
on OpenCL (PoCL here) for generated kernels with jumps in every position (CG-15, CG-29),
compiles with ``nvcc --fmad=false -ptx`` (CG-13), runs clean under
``oclgrind --data-races``; and epilogue fusion around loops with jumps: accepted where the
jumps do not touch the producer's stores (bitwise equal to the unfused pair on the
interpreter and OpenCL), refused with EF-19 where they do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from break_continue_gen import TRACE, case

from sarek_py.codegen import emit_cuda
from sarek_py.codegen.nvcc import compile_ptx, find_nvcc
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Break, Continue, Kernel, iter_stmts
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_kernel, check_module
from sarek_py.runtime import Backend, get_backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
ROOT = Path(__file__).resolve().parent.parent


def opencl() -> Backend:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(f"no OpenCL here: {exc.message}")


def gen_kernel(seed: int) -> Kernel:
    c = case(seed)
    m = parse_module(c.sk, f"gen{seed}.sk")
    check_module(m)
    return m.kernels[0]


def gen_args(n: int) -> dict[str, Any]:
    return {"out": np.zeros(n, np.int32), "trace": np.zeros(n * TRACE, np.int32), "n": n}


def compare_generated(be: Backend, seeds: range) -> int:
    """Run each generated kernel on the interpreter and on ``be``; bitwise equal."""
    jumps = 0
    for seed in seeds:
        k = gen_kernel(seed)
        ref, dev = gen_args(37), gen_args(37)
        get_backend("interp").run_kernel(k, ref, 48, 16)
        be.run_kernel(k, dev, 48, 16)
        for name in ("out", "trace"):
            assert ref[name].tobytes() == dev[name].tobytes(), (seed, name, case(seed).sk)
        jumps += sum(isinstance(s, (Break, Continue)) for s in iter_stmts(k.body))
    return jumps


# ------------------------------------------------------------------------ CG-15, CG-29


@pytest.mark.opencl
def test_cg29_generated_kernels_bitwise_equal_on_opencl() -> None:
    be = opencl()
    assert compare_generated(be, range(30)) >= 30


@pytest.mark.slow
@pytest.mark.opencl
def test_cg29_generated_kernels_bitwise_equal_on_opencl_fuzz() -> None:
    """``make fuzz`` size (SAREK_FUZZ=1): 400 kernels."""
    be = opencl()
    count = 400 if FUZZ else 60
    assert compare_generated(be, range(1000, 1000 + count)) >= count


@pytest.mark.opencl
def test_cg29_continue_at_the_type_maximum_on_opencl() -> None:
    """Regression (CG-29): a ``continue`` in a ``for`` ending at 2^31 - 1 skipped the
    loop's own end test and stepped past the last value."""
    be = opencl()
    m = parse_module("""kernel k(a : i32[], n : i32) =
      let i = global_thread_id in
      for t = 2147483644 to 2147483647 do
        if t % 2 == i % 2 then continue;
        a[i] <- a[i] + 1
      done""", "t.sk")
    k = m.kernels[0]
    ref = {"a": np.zeros(8, np.int32), "n": 8}
    dev = {"a": np.zeros(8, np.int32), "n": 8}
    run_kernel(k, ref, 8, 8)
    be.run_kernel(k, dev, 8, 8)
    assert ref["a"].tolist() == [2] * 8
    assert dev["a"].tobytes() == ref["a"].tobytes()


NVCC = find_nvcc()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
def test_cg13_cg29_generated_kernels_compile_to_ptx() -> None:
    """Generated kernels, the barrier kernel and the fused pair (f32: no contraction)."""
    fused, _ = fuse_launches(pair("prod"))
    kernels = [gen_kernel(seed) for seed in range(6)]
    kernels += [BARRIERS.kernels[0], ODD.kernel("odd"), fused[0].kernel]
    for k in kernels:
        ptx = compile_ptx(emit_cuda(k))
        assert ".entry" in ptx and "fma.rn" not in ptx


_OCLGRIND = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from break_continue_gen import TRACE, case
    from sarek_py.ir.parser import parse_module
    from sarek_py.runtime import get_backend
    import test_break_continue_device as D
    be = get_backend("opencl")
    for seed in range(int(sys.argv[2]), int(sys.argv[3])):
        k = parse_module(case(seed).sk, "gen.sk").kernels[0]
        n = 37
        args = {"out": np.zeros(n, np.int32), "trace": np.zeros(n * TRACE, np.int32), "n": n}
        be.run_kernel(k, args, 48, 16, check_races=False)
    # the fused pair (EF-19) and the barrier kernel (INT-25)
    new, _ = D.fuse_launches(D.pair("prod"))
    D.run_all(new, D.buffers(), be)
    a = np.zeros(16, np.int32)
    be.run_kernel(D.BARRIERS.kernels[0], {"a": a, "n": 16}, 16, 8, check_races=False)
    if len(sys.argv) > 4:  # the positive control: threads store one element in a loop
        racy = parse_module('''kernel r(a : i32[], n : i32) =
          let i = global_thread_id in
          for t = 0 to 3 do
            if t == i % 4 then continue;
            a[0] <- t + i
          done''', "racy.sk").kernels[0]
        be.run_kernel(racy, {"a": np.zeros(4, np.int32), "n": 4}, 64, 16, check_races=False)
    print("done")
""")


@pytest.mark.opencl
@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="oclgrind is not installed")
def test_cg29_oclgrind_data_races_clean(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(_OCLGRIND)

    def go(*extra: str) -> str:
        res = subprocess.run(["oclgrind", "--data-races", sys.executable, str(script),
                              str(ROOT / "tests"), "0", "4", *extra], capture_output=True,
                             text=True, timeout=300, check=False, cwd=ROOT)
        out = res.stdout + res.stderr
        assert res.returncode == 0 and "done" in out, out
        return out

    out = go()
    assert "race" not in out.lower() and "invalid" not in out.lower(), out
    assert "data race" in go("racy").lower()  # the check can fail


BARRIERS = parse_module("""kernel k(a : i32[], n : i32)
  shared s : i32[8] =
  let i = global_thread_id in
  let l = thread_idx_x in
  (for t = 0 to 5 do
    if t == 1 then continue;
    if t == 4 then break;
    s[l] <- t * 100 + i;
    barrier;
    a[i] <- a[i] + s[(l + 1) % 8];
    barrier
  done;
  for t = 0 to 7 do
    if t == l then break;
    a[i] <- a[i] + 1
  done;
  barrier;
  s[l] <- a[i];
  barrier;
  a[i] <- a[i] * 2 + s[7 - l])""", "barriers.sk")


@pytest.mark.opencl
def test_int25_cg29_barriers_around_uniform_jumps_bitwise_on_opencl() -> None:
    """Jumps taken by whole blocks around barriers, shared memory read across threads
    after a loop that threads left at different times (INT-16, INT-25)."""
    be = opencl()
    k = BARRIERS.kernels[0]
    check_kernel(k)
    ref = {"a": np.zeros(16, np.int32), "n": 16}
    dev = {"a": np.zeros(16, np.int32), "n": 16}
    run_kernel(k, ref, 16, 8)
    be.run_kernel(k, dev, 16, 8)
    assert ref["a"].tobytes() == dev["a"].tobytes()
    assert len(set(ref["a"].tolist())) > 8


# ------------------------------------------------------------------------------- EF-19


PAIR = """
kernel prod(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  let mut acc = 0.0f in
  (for k = 0 to 7 do
    if f32(k) > x[i] * 4.0f then break;
    if k % 2 == 1 then continue;
    acc := acc + x[i]
  done;
  if i < n then y[i] <- acc)

kernel prod_break_store(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    for k = 0 to 3 do
      y[i] <- x[i] + f32(k);
      if x[i] > 0.0f then break
    done

kernel prod_continue_store(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    for k = 0 to 3 do
      if k == 2 then continue;
      y[i] <- x[i] + f32(k)
    done

kernel prod_return_in_loop(x : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  (for k = 0 to 3 do
    while true do break done;
    if x[i] > 1.0f then return
  done;
  if i < n then y[i] <- x[i])

kernel cons(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let mut s = 0.0f in
    let mut k = 0 in
    (while k < 6 do
      k := k + 1;
      if s > 3.0f then break;
      if k == 2 then continue;
      s := s + y[i]
    done;
    for j = 0 to 4 do
      if j == 1 then continue;
      if f32(j) > s then break;
      s := s * 0.5f + y[i]
    done;
    z[i] <- s))
"""

N = 50


def pair(producer: str) -> list[KernelLaunch]:
    m = parse_module(PAIR, "pair.sk")
    return [KernelLaunch(m.kernel(producer), N + 6, 16, {"x": "X", "y": "Y", "n": N}),
            KernelLaunch(m.kernel("cons"), N, 16, {"y": "Y", "z": "Z", "n": N})]


def buffers() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(N + 6) * 2).astype(np.float32)
    return {"X": x, "Y": np.full(N + 6, np.nan, np.float32),
            "Z": np.full(N + 6, np.nan, np.float32)}


def run_all(launches: list[KernelLaunch], bufs: dict[str, np.ndarray],
            be: Backend | None) -> dict[str, np.ndarray]:
    out = {k: v.copy() for k, v in bufs.items()}
    for lc in launches:
        args: dict[str, Any] = {}
        for p in lc.kernel.params:
            v = lc.by_name[p.name]
            args[p.name] = out[v] if isinstance(v, str) else v
        if be is None:
            run_kernel(lc.kernel, args, int(lc.threads), int(lc.block))
        else:
            be.run_kernel(lc.kernel, args, int(lc.threads), int(lc.block))
    return out


def test_ef19_jumps_away_from_the_stores_fuse_bitwise_on_the_interpreter() -> None:
    launches = pair("prod")
    new, report = fuse_launches(launches)
    (d,) = report
    assert d.fused, str(d)
    check_kernel(new[0].kernel)
    fused_jumps = [s for s in iter_stmts(new[0].kernel.body) if isinstance(s, (Break, Continue))]
    assert len(fused_jumps) == 6  # the producer's two and the consumer's four
    a, b = run_all(launches, buffers(), None), run_all(new, buffers(), None)
    for name in ("Y", "Z"):
        assert a[name].tobytes() == b[name].tobytes(), name
    assert np.isfinite(b["Z"][:N]).all()


@pytest.mark.opencl
def test_ef19_fused_pair_bitwise_on_opencl() -> None:
    be = opencl()
    launches = pair("prod")
    new, _ = fuse_launches(launches)
    ref = run_all(launches, buffers(), None)
    for got in (run_all(launches, buffers(), be), run_all(new, buffers(), be)):
        for name in ("Y", "Z"):
            assert ref[name].tobytes() == got[name].tobytes(), name


@pytest.mark.parametrize("producer, word, what", [
    ("prod_break_store", "break", "which stores y"),
    ("prod_continue_store", "continue", "which stores y"),
])
def test_ef19_jump_in_a_storing_loop_is_refused(producer: str, word: str, what: str) -> None:
    new, report = fuse_launches(pair(producer))
    (d,) = report
    assert not d.fused and d.rule == "EF-19", str(d)
    assert f"the loop over k, {what}, has a {word}" in (d.reason or "")
    assert f"[EF-19] {producer}:" in str(d) and "pair.sk:" in str(d)
    assert len(new) == 2


def test_ef19_jump_in_a_loop_that_may_return_is_refused() -> None:
    _, report = fuse_launches(pair("prod_return_in_loop"))
    (d,) = report
    assert not d.fused and d.rule == "EF-19" and "which may return" in (d.reason or "")


# --------------------------------------------------------------- loop fusion (LF-2)


LOOPS = """program lf
  var n : i32 = 64;
  var x : f32[1:64];
  var t : f32[1:] allocatable;
  var z : f32[1:64];
  var step : i32;
begin
  allocate t[1:n];
  parallel for (i = 1 to n) do
    x[i] <- f32(i % 7) - 3.0f
  done;
  for step = 1 to 3 do
    parallel for (i = 1 to n) do
      PRODUCER
    done;
    parallel for (i = 1 to n) do
      let mut s = 0.0f in
      (for k = 0 to 5 do
        if f32(k) > t[i] then break;
        if k % 2 == 0 then continue;
        s := s + t[i] * 0.5f
      done;
      z[i] <- s + z[i])
    done
  done
end
"""

PLAIN = "t[i] <- x[i] * 2.0f"
LOOPING = """let mut v = x[i] in
      (for k = 0 to 3 do
        if v > 4.0f then break;
        v := v * 2.0f
      done;
      t[i] <- v)"""


def test_lf2_consumer_loop_with_jumps_fuses_bitwise_on_interp_and_opencl() -> None:
    from sarek_py.fusion.loops.fusion import fuse_program
    from sarek_py.host.backend import run_program_on
    from sarek_py.host.check import check_program
    from sarek_py.host.interp import run_program
    from sarek_py.ir.host.text import parse_program

    p = parse_program(LOOPS.replace("PRODUCER", PLAIN), "lf.sk")
    check_program(p)
    fused, reports = fuse_program(p)
    assert fused is not p and any(r.fused for r in reports), [str(r) for r in reports]
    check_program(fused)
    want = run_program(p).array("z")
    assert np.isfinite(want).all() and (want != 0).any()
    assert run_program(fused).array("z").tobytes() == want.tobytes()
    try:
        get_backend("opencl")
    except BackendUnavailable:
        return
    for prog in (p, fused):
        res, _ = run_program_on(prog, "opencl")
        assert res.array("z").tobytes() == want.tobytes()


def test_lf2_producer_with_an_inner_loop_and_break_is_refused() -> None:
    from sarek_py.fusion.loops.fusion import fuse_program
    from sarek_py.host.check import check_program
    from sarek_py.ir.host.text import parse_program

    p = parse_program(LOOPS.replace("PRODUCER", LOOPING), "lf.sk")
    check_program(p)
    fused, reports = fuse_program(p)
    assert fused is p and reports and not any(r.fused for r in reports)
    text = " ".join(str(r) for r in reports)
    assert "[LF-2]" in text, text


# ------------------------------------------------------- odd places, both backends


ODD = parse_module('''fun h(x : i32) : i32 =
  let mut s = 0 in
  (pragma "unroll 2" for t = 0 to 9 do
    if t == x then break;
    if t % 3 == 0 then continue;
    s := s + t
  done;
  return s)

kernel odd(a : i32[], n : i32) =
  let i = global_thread_id in
  (pragma "unroll" for r = 2147483645 to 2147483647 do
    if r % 2 == i % 2 then continue;
    a[i] <- a[i] + h(i)
  done;
  while true do
    (if a[i] > 40 then (break; a[i] <- 0));
    a[i] <- a[i] * 2 + 1;
    continue;
    a[i] <- 12345
  done)''', "odd.sk")


def _odd_reference(i: int) -> int:
    def h(x: int) -> int:
        s = 0
        for t in range(10):
            if t == x:
                break
            if t % 3 == 0:
                continue
            s += t
        return s

    v = 0
    for r in range(2147483645, 2147483648):
        if r % 2 == i % 2:
            continue
        v += h(i)
    while True:
        if v > 40:
            break
        v = v * 2 + 1
    return v


@pytest.mark.opencl
def test_cg29_jumps_in_pragma_loops_helpers_and_dead_code_on_both_backends() -> None:
    """A helper's loop (its own C function), pragma'd loops (CG-20) one of them ending
    at the type maximum, an endless ``while`` left by ``break``, dead code after jumps."""
    check_module(ODD)
    k = ODD.kernel("odd")
    want = [_odd_reference(i) for i in range(16)]
    for name in ("interp", "opencl"):
        if name == "opencl":
            opencl()
        a = np.zeros(16, np.int32)
        get_backend(name).run_kernel(k, {"a": a, "n": 16}, 16, 8)
        assert a.tolist() == want, name
