"""Atomics on the devices: the emitted OpenCL C computes the interpreter's bytes on PoCL
for a histogram, an integer and an exact float sum, a lock-free maximum by
compare-and-swap, every operation on every element type, and generated kernels
(tests/atomics_gen.py; INT-27, CG-30, CG-31); ``oclgrind --data-races`` finds no race in
an atomic histogram and finds the plain-store version's (CG-31, INT-28); the generated
kernels' CUDA C compiles with ``nvcc --fmad=false -ptx`` (CG-30).

Float sums are compared bitwise only for values whose partial sums are exact (small
integers in ``f32``): a float atomic add rounds after each addition in an order the
device chooses (INT-27).
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
from atomics_gen import Case, case, shared_case

from sarek_py.codegen import emit_cuda
from sarek_py.codegen.cstyle import emit_module
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.nvcc import compile_ptx, find_nvcc
from sarek_py.ir.diagnostics import BackendUnavailable, InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import Backend, get_backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
ROOT = Path(__file__).resolve().parent.parent
#: generated kernels per run: a few by default, many under SAREK_FUZZ=1 (make fuzz)
SMALL, FULL = 8, 400


def opencl() -> Backend:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(f"no OpenCL here: {exc.message}")


def kernel_of(text: str, file: str = "t.sk") -> Kernel:
    m = parse_module(text, file)
    check_module(m)
    return m.kernels[0]


def copy(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}


def both(be: Backend, k: Kernel, args: dict[str, Any], threads: int, block: int
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arrays after the interpreter's run and after ``be``'s, from the same inputs."""
    a, b = copy(args), copy(args)
    run_kernel(k, a, threads, block)
    be.run_kernel(k, b, threads, block)
    return a, b


def same_bytes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The arrays whose bytes differ."""
    return [n for n, v in a.items() if isinstance(v, np.ndarray)
            and v.tobytes() != b[n].tobytes()]


HIST = """kernel hist(data : i32[], h : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then let o = atomic_add(h[(data[i] % 16 + 16) % 16], 1) in ()
"""

SUMS = """kernel sums(x : i32[], f : f32[], d : f64[], s : i32[], fs : f32[], ds : f64[],
                 l : i64[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let a = atomic_add(s[i % 3], x[i]) in
    let b = atomic_add(fs[i % 2], f[i]) in
    let c = atomic_add(ds[0], d[i]) in
    let e = atomic_add(l[i % 2], i64(x[i]) * 4294967311L) in
    ()
  )
"""

CAS_MAX = """kernel cas_max(v : i32[], m : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let x = v[i] in
    let mut seen = atomic_add(m[0], 0) in
    let mut go = x > seen in
    while go do
      let got = atomic_cas(m[0], seen, x) in
      (if got == seen then go := false
       else (seen := got; go := x > seen))
    done
  )
"""

MINMAX = """kernel minmax(v : f32[], w : f64[], x : i32[], y : i64[], fmn : f32[], fmx : f32[],
                   dmn : f64[], dmx : f64[], imn : i32[], imx : i32[], lmn : i64[],
                   lmx : i64[], ex : f64[], exf : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    let a = atomic_min(fmn[i % 2], v[i]) in
    let b = atomic_max(fmx[i % 2], v[i]) in
    let c = atomic_min(dmn[0], w[i]) in
    let d = atomic_max(dmx[0], w[i]) in
    let e = atomic_min(imn[0], x[i]) in
    let f = atomic_max(imx[0], x[i]) in
    let g = atomic_min(lmn[0], y[i]) in
    let h = atomic_max(lmx[0], y[i]) in
    let p = atomic_exch(ex[i % 4], 1.5) in
    let q = atomic_exch(exf[i % 3], -2.0f) in
    ()
  )
"""


@pytest.mark.opencl
def test_cg31_int27_histogram_equals_interpreter() -> None:
    be = opencl()
    rng = np.random.default_rng(11)
    for n, block in ((1000, 64), (37, 16), (1, 1)):
        args = {"data": rng.integers(-10**6, 10**6, n).astype(np.int32),
                "h": np.zeros(16, np.int32), "n": n}
        a, b = both(be, kernel_of(HIST), args, n, block)
        assert not same_bytes(a, b)
        assert a["h"].tolist() == np.bincount(args["data"] % 16, minlength=16).tolist()


@pytest.mark.opencl
def test_cg31_int27_sums_integer_wrap_and_exact_float() -> None:
    """Integer sums wrap (i32 and i64) and equal bit for bit; float sums of small
    integers are exact, hence equal whatever the order."""
    be = opencl()
    rng = np.random.default_rng(12)
    n = 777
    args = {"x": rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
            "f": rng.integers(-100, 100, n).astype(np.float32),
            "d": rng.integers(-1000, 1000, n).astype(np.float64),
            "s": np.zeros(3, np.int32), "fs": np.zeros(2, np.float32),
            "ds": np.zeros(1, np.float64), "l": np.zeros(2, np.int64), "n": n}
    a, b = both(be, kernel_of(SUMS), args, n + 23, 32)
    assert not same_bytes(a, b)
    assert a["fs"].tolist() == [float(args["f"][k::2].sum()) for k in range(2)]


@pytest.mark.opencl
def test_cg31_int27_cas_lock_free_max_equals_interpreter() -> None:
    be = opencl()
    rng = np.random.default_rng(13)
    for n, block in ((500, 64), (64, 8)):
        args = {"v": rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
                "m": np.array([-2**31], np.int32), "n": n}
        a, b = both(be, kernel_of(CAS_MAX), args, n, block)
        assert not same_bytes(a, b) and a["m"][0] == args["v"].max()


@pytest.mark.opencl
def test_cg31_int27_min_max_exch_every_type_equal_interpreter() -> None:
    """Float min/max by the compare-and-swap loop (CG-30, CG-31), with NaNs and
    infinities among the values; exchange of one value per element."""
    be = opencl()
    rng = np.random.default_rng(14)
    n = 300
    v = rng.standard_normal(n).astype(np.float32) * 1e3
    v[[3, 50]] = np.nan
    v[7], v[8] = np.inf, -np.inf
    w = rng.standard_normal(n) * 1e300
    big = 2**62
    args = {"v": v, "w": w, "x": rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
            "y": rng.integers(-big, big, n, dtype=np.int64),
            "fmn": np.array([1e30, 5.0], np.float32), "fmx": np.array([-1e30, -5.0], np.float32),
            "dmn": np.array([1e308]), "dmx": np.array([-1e308]),
            "imn": np.array([2**31 - 1], np.int32), "imx": np.array([-2**31], np.int32),
            "lmn": np.array([big], np.int64), "lmx": np.array([-big], np.int64),
            "ex": np.zeros(4), "exf": np.zeros(3, np.float32), "n": n}
    a, b = both(be, kernel_of(MINMAX), args, n, 32)
    assert not same_bytes(a, b), same_bytes(a, b)
    assert a["fmn"][0] == -np.inf and a["fmx"][1] == np.inf
    assert a["ex"].tolist() == [1.5] * 4


@pytest.mark.opencl
def test_cg31_int27_shared_histograms_equal_interpreter() -> None:
    be = opencl()
    for seed in range(4 if not FUZZ else 100):
        c = shared_case(seed)
        a, b = both(be, kernel_of(c.sk, f"shist{seed}.sk"), c.args, c.threads, c.block)
        assert not same_bytes(a, b), (seed, c.sk)


def _differential(be: Backend, seeds: range) -> tuple[int, dict[str, int]]:
    mismatches = 0
    ops: dict[str, int] = {}
    for seed in seeds:
        c = case(seed)
        for arr, op in c.ops.items():
            ops[f"{arr}:{op}"] = ops.get(f"{arr}:{op}", 0) + 1
        a, b = both(be, kernel_of(c.sk, f"gen{seed}.sk"), c.args, c.threads, c.block)
        bad = same_bytes(a, b)
        if bad:
            mismatches += 1
            print(f"seed {seed}: {bad} differ\n{c.sk}")
    return mismatches, ops


@pytest.mark.opencl
def test_int27_cg31_generated_atomic_kernels_equal_on_opencl() -> None:
    be = opencl()
    bad, ops = _differential(be, range(SMALL))
    assert bad == 0
    assert len(ops) >= 5  # several operations per target are exercised


@pytest.mark.opencl
@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="the full differential run is for make fuzz (SAREK_FUZZ=1)")
def test_int27_cg31_generated_atomic_kernels_equal_on_opencl_fuzz() -> None:
    be = opencl()
    bad, ops = _differential(be, range(SMALL, SMALL + FULL))
    assert bad == 0, f"{bad} mismatches"
    every = {f"h:{op}" for op in ("add", "min", "max", "cas_max", "exch")} | {
        f"{a}:{op}" for a in "lf" for op in ("add", "min", "max")}
    assert set(ops) == every  # every operation on every target was generated


def test_int27_generated_kernels_check_and_run_on_the_interpreter() -> None:
    """Without OpenCL: each generated kernel checks and runs without a race (INT-28),
    and its plain per-thread stores are right."""
    for seed in range(SMALL):
        c: Case = case(seed)
        k = kernel_of(c.sk, f"gen{seed}.sk")
        args = copy(c.args)
        run_kernel(k, args, c.threads, c.block)
        assert (args["out"] == (c.args["a"] * np.int32(2) + np.int32(1))).all()


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_cg30_generated_kernels_compile_with_nvcc() -> None:
    seeds = range(SMALL if not FUZZ else 60)
    kernels = [kernel_of(case(s).sk, f"gen{s}.sk") for s in seeds]
    kernels += [kernel_of(t) for t in (HIST, SUMS, CAS_MAX, MINMAX)]
    ptx = compile_ptx(emit_module(kernels, CUDA, "the generated atomic kernels"))
    assert "fma.rn" not in ptx and "atom" in ptx
    assert ptx.count(".entry") == len(kernels)


_OCLGRIND = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from sarek_py.ir.parser import parse_module
    from sarek_py.runtime import get_backend
    be = get_backend("opencl")
    print(be.device_name)
    for path in sys.argv[2:]:
        k = parse_module(open(path).read(), "k.sk").kernels[0]
        n = 256
        data = (np.arange(n, dtype=np.int32) * 7) % 23
        h = np.zeros(16, np.int32)
        args = {"data": data, "h": h, "n": n}
        be.run_kernel(k, args, n, 64, check_races=False)
        print(k.name, h.tolist())
    print("done")
""")

PLAIN_HIST = """kernel phist(data : i32[], h : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then (let b = (data[i] % 16 + 16) % 16 in h[b] <- h[b] + 1)
"""

SHARED_HIST = """kernel shist(data : i32[], h : i32[], n : i32)
  shared s : i32[16] =
  let i = global_thread_id in
  let t = thread_idx_x in
  if t < 16 then s[t] <- 0;
  barrier;
  (if i < n then let o = atomic_add(s[(data[i] % 16 + 16) % 16], 1) in ());
  barrier;
  if t < 16 then let o2 = atomic_add(h[t], s[t]) in ()
"""


@pytest.mark.opencl
@pytest.mark.skipif(shutil.which("oclgrind") is None, reason="oclgrind is not installed")
def test_cg31_int28_oclgrind_atomic_histogram_is_race_free(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(_OCLGRIND)

    def go(*texts: str) -> str:
        paths = []
        for n, text in enumerate(texts):
            paths.append(tmp_path / f"k{n}.sk")
            paths[-1].write_text(text)
        res = subprocess.run(["oclgrind", "--data-races", sys.executable, str(script),
                              str(ROOT), *map(str, paths)], capture_output=True, text=True,
                             timeout=300, check=False, cwd=ROOT)
        out = res.stdout + res.stderr
        assert res.returncode == 0 and "done" in out, out
        assert "Oclgrind" in out, "the script did not run on oclgrind's device"
        return out

    want = np.bincount((np.arange(256) * 7) % 23 % 16, minlength=16).tolist()
    out = go(HIST, SHARED_HIST)
    assert "race" not in out.lower() and "invalid" not in out.lower(), out
    assert f"hist {want}" in out and f"shist {want}" in out
    assert "data race" in go(PLAIN_HIST).lower()  # the check can fail


PAST = """kernel past(h : i32[], l : i64[], f : f32[]) =
  let c = atomic_add(h[0], 1) in
  let d = atomic_add(l[0], 5000000000L) in
  let e = atomic_add(f[0], 0.5f) in
  if global_thread_id >= 3 then return;
  let g = atomic_max(h[1], global_thread_id) in ()
"""

EDGES = """kernel edges(g : f32[,], l : i64[], n : i32)
  shared s : f32[4]
  shared t : i64[2] =
  let i = global_thread_id in
  let k = thread_idx_x in
  (if k < 4 then s[k] <- 0.0f);
  (if k < 2 then t[k] <- 0L);
  barrier;
  (if i < n then (
    let a = atomic_add(g[i % 2, i % 3], f32(i % 7)) in
    let b = atomic_add(s[i % 4], 1.0f) in
    let e = atomic_max(t[i % 2], i64(i) * 3000000000L) in
    ()
  ));
  barrier;
  (if k < 4 then let d = atomic_add(g[1, 2], s[k]) in ());
  if k < 2 then let f = atomic_max(l[k], t[k]) in ()
"""


@pytest.mark.opencl
def test_cg30_cg31_threads_past_the_count_run_no_atomic() -> None:
    """A launch rounded up to whole blocks: the atomics before the kernel's own guard run
    in the launched threads only (CG-21 does not move the count test past an atomic)."""
    be = opencl()
    k = kernel_of(PAST)
    for threads, block in ((10, 8), (45, 16), (1, 64)):
        args = {"h": np.zeros(2, np.int32), "l": np.zeros(1, np.int64),
                "f": np.zeros(1, np.float32)}
        a, b = both(be, k, args, threads, block)
        assert not same_bytes(a, b), same_bytes(a, b)
        assert a["h"].tolist() == [threads, min(threads, 3) - 1]
        assert a["l"][0] == threads * 5000000000 and a["f"][0] == threads / 2


@pytest.mark.opencl
def test_cg31_shared_float_and_i64_atomics_and_a_2d_array() -> None:
    """Shared f32 and i64 atomics (the __local loop functions, 64-bit extensions) and a
    2-D global array, on whole blocks (the kernel has barriers)."""
    be = opencl()
    k = kernel_of(EDGES)
    for n, threads, block in ((10, 16, 8), (45, 48, 16)):
        args = {"g": np.zeros((2, 3), np.float32), "l": np.full(2, -1, np.int64), "n": n}
        a, b = both(be, k, args, threads, block)
        assert not same_bytes(a, b), same_bytes(a, b)
        # each thread below n counted once in s, the blocks' counts added to g[1, 2]
        assert a["g"][1, 2] == n + sum(i % 7 for i in range(n) if i % 2 == 1 and i % 3 == 2)
        assert a["l"].tolist() == [max(i for i in range(n) if i % 2 == r) * 3000000000
                                   for r in (0, 1)]


@pytest.mark.opencl
def test_cg31_atomic_out_of_bounds_is_the_interpreters_fault() -> None:
    be = opencl()
    k = kernel_of("kernel k(h : i32[]) =\n  let i = global_thread_id in\n"
                  "  let o = atomic_add(h[i + 2], 1) in ()\n")
    with pytest.raises(InterpError) as ei:
        run_kernel(k, {"h": np.zeros(4, np.int32)}, 4, 4)
    with pytest.raises(InterpError) as ed:
        be.run_kernel(k, {"h": np.zeros(4, np.int32)}, 4, 4)
    want = "out-of-bounds atomic_add of array 'h' at index [4]"
    assert want in ei.value.message and want in ed.value.message, ed.value.message


HELPER = """fun bump(a : i32[], f : f32[], i : i32) : i32 =
  let o = atomic_add(a[i % 4], 1) in
  let p = atomic_max(f[0], f32(i)) in
  return o

kernel k(h : i32[], f : f32[], out : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then (let x = bump(h, f, i) in out[i] <- i * 2)
"""


@pytest.mark.opencl
def test_cg30_cg31_atomics_in_a_helper_function() -> None:
    """An atomic in a helper (its array a global parameter; its bounds-check sites the
    caller's, CG-22) on OpenCL and through nvcc."""
    be = opencl()
    k = kernel_of(HELPER)
    args = {"h": np.zeros(4, np.int32), "f": np.full(1, -1.0, np.float32),
            "out": np.zeros(50, np.int32), "n": 50}
    a, b = both(be, k, args, 50, 16)
    assert not same_bytes(a, b) and a["h"].tolist() == [13, 13, 12, 12] and a["f"][0] == 49
    if find_nvcc() is not None:
        assert "atom" in compile_ptx(emit_cuda(k))
    bad = kernel_of(HELPER.replace("a[i % 4]", "a[i]"))
    with pytest.raises(InterpError) as ei:
        be.run_kernel(bad, copy(args), 50, 16)
    assert "out-of-bounds atomic_add of array 'h' at index [4]" in str(ei.value)


ZEROS = """kernel zeros(a : f32[], b : f32[], d : f64[], e : f64[], mn : f32[], mx : f32[],
                 dmn : f64[], dmx : f64[], g : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    mn[i] <- a[i];
    mx[i] <- a[i];
    dmn[i] <- d[i];
    dmx[i] <- d[i];
    let o = atomic_min(mn[i], b[i]) in
    let p = atomic_max(mx[i], b[i]) in
    let q = atomic_min(dmn[i], e[i]) in
    let r = atomic_max(dmx[i], e[i]) in
    let s = atomic_min(g[0], b[i]) in
    let t = atomic_max(g[1], b[i]) in
    ()
  )
"""


@pytest.mark.opencl
def test_ir33_cg31_float_min_max_order_signed_zeros_and_nans_bitwise() -> None:
    """Regression: the interpreter's fmin(0.0, -0.0) is +0.0, PoCL's is -0.0 (C leaves
    it open): atomic float min/max order -0.0 below +0.0 and let a NaN operand lose
    (IR-33), the same bits on every backend, also many threads on one element."""
    be = opencl()
    z, nz, nan = 0.0, -0.0, float("nan")
    pairs = [(z, nz), (nz, z), (nan, 1.0), (1.0, nan), (nan, nz), (nz, nz), (z, z),
             (nan, nan), (-np.inf, nz), (3.0, -2.0)]
    a = np.array([p[0] for p in pairs], np.float32)
    b = np.array([p[1] for p in pairs], np.float32)
    n = len(pairs)
    args = {"a": a, "b": b, "d": a.astype(np.float64), "e": b.astype(np.float64),
            "mn": np.zeros(n, np.float32), "mx": np.zeros(n, np.float32),
            "dmn": np.zeros(n), "dmx": np.zeros(n), "g": np.array([z, nz], np.float32), "n": n}
    x, y = both(be, kernel_of(ZEROS), args, n, 4)
    assert not same_bytes(x, y), same_bytes(x, y)
    bits = x["mn"].view(np.uint32)
    assert bits[0] == 0x80000000 and bits[1] == 0x80000000  # -0.0 is below +0.0
    assert x["mx"].view(np.uint32)[0] == 0 and x["mx"].view(np.uint32)[1] == 0
    assert x["mn"][2] == 1.0 and x["mn"][3] == 1.0  # a NaN operand loses
    assert np.isnan(x["mn"][7])
    assert x["g"].tolist() == [-2.0, 1.0]


@pytest.mark.opencl
def test_cg8_min_max_intrinsics_of_signed_zeros_bitwise() -> None:
    """CG-8, CG-40: min/max of +0.0 and -0.0 agree bitwise between the interpreter and
    OpenCL (a regression: fmin/fmax left the sign open)."""
    be = opencl()
    k = kernel_of("""kernel k(a : f32[], b : f32[], mn : f32[], mx : f32[]) =
      let i = global_thread_id in
      mn[i] <- min(a[i], b[i]);
      mx[i] <- max(a[i], b[i])""")
    args = {"a": np.array([0.0, -0.0], np.float32), "b": np.array([-0.0, 0.0], np.float32),
            "mn": np.zeros(2, np.float32), "mx": np.zeros(2, np.float32)}
    x, y = both(be, k, args, 2, 2)
    assert not same_bytes(x, y)
