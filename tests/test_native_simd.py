"""The c backend's rows of threads vectorise (specs/native.md, NAT-36 … NAT-39): the
unchecked build's row loop is ``#pragma omp simd`` (sound because threads of a kernel the
backend runs see each other's writes only through races), an exact narrowing of the
offloaded index stays 64-bit, the backend builds for this CPU with the CPU in the cache key,
and the advection-diffusion stage vectorises without gathers, bitwise as before."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend as c_or_skip

from sarek_py.codegen.c99 import C99
from sarek_py.codegen.cstyle import emit
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.opencl import OPENCL
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import Backend, ccompiler, get_backend
from sarek_py.runtime.ccompiler import NATIVE, cache_key, compiler, flags
from sarek_py.runtime.native import CBackend

ROOT = Path(__file__).parent.parent
X86_LINUX = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")


def _kernel(src: str) -> Kernel:
    return parse_module(src, "simd.sk").kernels[0]


def _same(a: Any, b: Any) -> bool:
    return bool(np.asarray(a).tobytes() == np.asarray(b).tobytes())


def _stage() -> Kernel:
    """The fused + swap advection stage offloaded with the rows numbering (NAT-30's)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advection_diffusion import variants

    for k in variants(256)["fused+swap"].kernels:
        names = {p.name for p in k.params}
        if k.name.endswith("_rows") and {"du", "u", "u_copy"} <= names:
            return k
    raise AssertionError("no rows stage kernel in the fused + swap program")


# ------------------------------------------------------------ NAT-36: simd rows

SAXPY = (ROOT / "examples" / "saxpy.sk").read_text()


def test_nat36_the_unchecked_row_is_a_simd_loop_the_checked_one_is_not() -> None:
    """NAT-36: the unchecked unit's row of threads is `omp simd` with a lane of its own; the
    checked unit (faults read sarek_running, one per block) keeps its threads in order."""
    k = _kernel(SAXPY)
    fast = emit(k, C99, checked=False).source
    assert "#pragma omp simd linear(sarek_t)\n" in fast
    assert "sarek_ids sarek_lane = sarek_id;" in fast
    # the thread function's last arguments (NAT-65 adds sarek_edge before the lane)
    assert re.search(r"sarek_threads, (true, |false, )?sarek_lane\);", fast)
    slow = emit(k, C99, checked=True).source
    assert "omp simd" not in slow and "sarek_running = &sarek_id;" in slow


RACY = {
    # thread i reads the element thread i + 1 stores (write after read)
    "shift": ("kernel shift(x : f32[], n : i32) =\n  let i = global_thread_id in\n"
              "  if i + 1 < n then\n    x[i] <- x[i + 1]\n", ("x",)),
    # thread i + 1 reads what thread i stored (read after write)
    "chase": ("kernel chase(x : f32[], n : i32) =\n  let i = global_thread_id in\n"
              "  if i + 1 < n then\n    x[i + 1] <- x[i] + 1.0\n", ("x",)),
    # every thread stores element 0 (write-write)
    "same": ("kernel same(x : f32[], n : i32) =\n  let i = global_thread_id in\n"
             "  if i < n then\n    x[0] <- x[i]\n", ("x",)),
    # one array passed as two arguments: thread i reads y[i + 1] = x[i + 1], which
    # thread i + 1 stores
    "aliased": ("kernel aliased(x : f32[], y : f32[], n : i32) =\n"
                "  let i = global_thread_id in\n  if i + 1 < n then\n    x[i] <- y[i + 1]\n",
                ("x", "y")),
}


_ALIAS_GAP = (
    "the interpreter does not call two parameters bound to one array a race: its reads of "
    "y do not see the launch's stores to x, while c binds the array once, in place "
    "(NAT-20), so c differs from it on such a kernel in the checked build too, before "
    "NAT-36 (found by this test; open)")


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=_ALIAS_GAP))
    if n == "aliased" else n for n in sorted(RACY)])
def test_nat36_kernels_whose_lanes_could_disagree_are_interpreter_races(name: str) -> None:
    """NAT-36: a kernel in which one thread sees another's write (the only way `omp simd`
    could change a result, NAT-4 leaving no barrier, shared memory or atomic) is a race
    that the interpreter reports (INT-17), aliases included."""
    src, arrays = RACY[name]
    k = _kernel(src)
    x = np.arange(37, dtype=np.float32)
    args: dict[str, Any] = {a: x for a in arrays}
    args["n"] = np.int32(37)
    with pytest.raises(SarekError, match="race"):
        get_backend("interp").run_kernel(k, args, 37, 8)


IN_PLACE = {
    "bump": ("kernel bump(x : f32[], n : i32) =\n  let i = global_thread_id in\n"
             "  if i < n then\n    x[i] <- x[i] + 1.0\n", ("x",)),
    "twice": ("kernel twice(x : f64[], y : f64[], a : f64, n : i32) =\n"
              "  let i = global_thread_id in\n  if i < n then\n"
              "    y[i] <- a * x[i] + y[i]\n", ("x", "y")),
    "libm": ("kernel libm(x : f64[], y : f64[], n : i32) =\n  let i = global_thread_id in\n"
             "  if i < n then\n    y[i] <- sin(x[i]) + exp(y[i]) * sqrt(x[i])\n", ("x", "y")),
    "guarded": ("kernel guarded(x : f32[], n : i32) =\n  let i = global_thread_id in\n"
                "  if i < n then\n    if x[i] > 0.5 then\n      x[i] <- x[i] / 3.0\n"
                "    else\n      x[i] <- -x[i]\n", ("x",)),
}


def _awkward(n: int, dtype: Any) -> Any:
    rng = np.random.default_rng(36)
    x = rng.standard_normal(n).astype(dtype) * 3
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-310, 0.5], dtype)
    k = min(n, special.size)
    x[:k] = special[:k]
    return x


@pytest.mark.parametrize("n", [1, 7, 37, 1029])
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_nat36_race_free_in_place_kernels_are_bitwise(name: str, n: int,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-36: race-free kernels updating in place, one array passed as every array argument,
    a libm call and a branch per lane, at counts that leave partial rows, write the same
    bytes in the unchecked (simd) build, native and portable, as the checked portable build
    (threads in order, as before NAT-36) and, without a transcendental (CG-13), the
    interpreter."""
    src, arrays = IN_PLACE[name]
    k = _kernel(src)
    dtype = np.float64 if "f64" in src else np.float32
    c_or_skip()

    def run(be: Backend) -> Any:
        x = _awkward(n + 3, dtype)
        args: dict[str, Any] = {a: x for a in arrays}
        args["n"] = np.int32(n)
        if "a :" in src:
            args["a"] = dtype(-0.75)
        be.run_kernel(k, args, n + 3, 8)
        return x

    monkeypatch.setenv("SAREK_CACHE", str(tmp_path / "ref"))
    monkeypatch.setenv("SAREK_NATIVE", "0")
    ordered = CBackend()
    ordered.prove_launches = False  # the checked build, whatever the proof says
    ref = run(ordered)
    if name != "libm":
        assert _same(run(get_backend("interp")), ref), name
    for native in ("1", "0"):
        monkeypatch.setenv("SAREK_CACHE", str(tmp_path / native))
        monkeypatch.setenv("SAREK_NATIVE", native)
        be = CBackend()
        be.checked = False
        assert _same(run(be), ref), (name, n, native)


def test_nat36_no_vector_libm_is_called(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-36: the simd row of a kernel calling sin and exp calls the scalar libm (no
    `_ZGV…` vector variant, whose results may differ), in the backend's own build."""
    c_or_skip()
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    lib = ccompiler.library(emit(_kernel(IN_PLACE["libm"][0]), C99, checked=False).source)
    done = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"nm cannot list the library's symbols: {done.stderr[:200]}")
    assert "_ZGV" not in done.stdout
    assert re.search(r"\bU sin\b", done.stdout), done.stdout


# ----------------------------------------------------- NAT-37: exact narrowing


def test_nat37_the_offloaded_index_stays_wide_in_c_and_opencl() -> None:
    """NAT-37, CG-76: `i = (int)i_64` after the offload's guard is a `long long` in C and a
    `long` in OpenCL C (CG-76); CUDA keeps the `int` narrowing."""
    k = _stage()
    c = emit(k, C99, checked=False).source
    assert "long long i = i_64;  // an int: the guard bounds it" in c
    assert "long long j = j_64;  // an int: the guard bounds it" in c
    cl = emit(k, OPENCL, checked=False).source
    assert "long i = i_64;  // an int: the guard bounds it" in cl
    assert "long j = j_64;  // an int: the guard bounds it" in cl
    other = emit(k, CUDA, checked=False).source
    assert "int i = (int)i_64;" in other and "guard bounds it" not in other


def test_nat37_a_narrowing_that_can_wrap_stays_int() -> None:
    """NAT-37: an i64 value the ranges cannot bound within i32 is narrowed with `(int)`."""
    k = _kernel("kernel narrow(x : i32[], big : i64, n : i32) =\n"
                "  let i = global_thread_id in\n  let k = i32(big + i64(i)) in\n"
                "  if i < n then\n    x[i] <- k\n")
    src = emit(k, C99, checked=False).source
    assert re.search(r"\bint k = \(int\)", src), src
    assert "guard bounds it" not in src


@pytest.mark.parametrize("big", [0, 2**31 - 5, 2**32 + 3, -(2**31) - 2, 2**62])
def test_nat37_wrapping_narrowings_are_bitwise(big: int, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-37: i32 wrap-around of a narrowing, exact or not, is the interpreter's on c."""
    c_or_skip()
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    k = _kernel("kernel narrow(x : i32[], big : i64, n : i32) =\n"
                "  let i = global_thread_id in\n  let k = i32(big + i64(i)) in\n"
                "  if i < n then\n    x[i] <- k + 1\n")
    outs = []
    for be in (get_backend("interp"), CBackend()):
        be.checked = False
        x = np.zeros(19, np.int32)
        be.run_kernel(k, {"x": x, "big": np.int64(big), "n": np.int32(19)}, 19, 8)
        outs.append(x)
    assert _same(outs[0], outs[1])


# ------------------------------------------------------------ NAT-38: this CPU


def test_nat38_native_flags_where_the_cpu_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-38: -march=native without clones where /proc/cpuinfo names the CPU; none with
    $SAREK_NATIVE=0; a user's -march comes after and wins."""
    monkeypatch.delenv("SAREK_CFLAGS", raising=False)
    monkeypatch.delenv("SAREK_CC", raising=False)
    monkeypatch.delenv("SAREK_NATIVE", raising=False)
    want = NATIVE if ccompiler.cpu_identity() is not None else ()
    assert flags()[len(ccompiler.FLAGS):] == want
    if X86_LINUX and Path("/proc/cpuinfo").exists():
        assert want == NATIVE
    monkeypatch.setenv("SAREK_NATIVE", "0")
    assert flags() == ccompiler.FLAGS
    monkeypatch.setenv("SAREK_NATIVE", "1")
    monkeypatch.setenv("SAREK_CFLAGS", "-march=x86-64")
    assert flags()[-1] == "-march=x86-64"
    monkeypatch.setenv("SAREK_NATIVE", "no")  # no silent choice: one sentence
    with pytest.raises(BackendUnavailable, match=r"\$SAREK_NATIVE is 'no'"):
        flags()


def test_nat38_the_cache_key_names_the_cpu_of_a_native_build(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-38 (regression: a user's -march=native in $SAREK_CFLAGS named the same library
    on every CPU): with a native flag the key changes with the CPU; without, it does not."""
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    native = (*ccompiler.FLAGS, "-march=native")
    portable = ccompiler.FLAGS
    monkeypatch.setattr(ccompiler, "cpu_identity", lambda: "flags=avx2")
    a, pa = cache_key("int x;", cc, native), cache_key("int x;", cc, portable)
    monkeypatch.setattr(ccompiler, "cpu_identity", lambda: "flags=avx2 avx512f")
    b, pb = cache_key("int x;", cc, native), cache_key("int x;", cc, portable)
    assert a != b and pa == pb


def test_nat38_the_cpu_identity_reads_the_first_processor() -> None:
    """NAT-38: the identity is the first processor's vendor, model and flags."""
    ident = ccompiler.cpu_identity()
    if ident is None:
        pytest.skip("no /proc/cpuinfo on this machine (the build is portable there)")
    assert "flags=" in ident and ident.count("flags=") == 1


# ------------------------------------------- NAT-39: the advection stage vectorises


def _has_avx512() -> bool:
    ident = ccompiler.cpu_identity() or ""
    return " avx512f" in ident or "=avx512f" in ident


@pytest.mark.skipif(not X86_LINUX, reason="NAT-38's native build is for x86-64 Linux")
def test_nat39_the_advection_stage_vectorises_without_gathers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-39: the unchecked advection stage, compiled with the backend's flags, has its row
    loop vectorised and no gather or scatter (consecutive accesses, NAT-37)."""
    if not _has_avx512():
        pytest.skip("this CPU has no AVX-512: a row whose threads leave at a guard does not "
                    "vectorise under AVX2 (NAT-38)")
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    monkeypatch.delenv("SAREK_CFLAGS", raising=False)
    monkeypatch.delenv("SAREK_NATIVE", raising=False)
    src = emit(_stage(), C99, checked=False).source
    path = tmp_path / "unit.c"
    path.write_text(src)
    opts = [f for f in flags() if f != "-shared"]
    done = subprocess.run([cc, *opts, "-S", str(path), "-o", str(tmp_path / "u.s"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or "-fopt-info" in done.stderr:
        pytest.skip(f"the compiler {cc} gives no vectoriser report: {done.stderr[:200]}")
    assert re.search(r"unit\.c:\d+:\d+: optimized: loop vectorized", done.stderr), done.stderr
    asm = (tmp_path / "u.s").read_text()
    assert not re.search(r"\bv(p)?(gather|scatter)", asm)


@pytest.mark.parametrize("size", [(13, 9), (5, 17), (33, 3)])
def test_nat39_advection_fused_swap_on_c_is_the_unfused_run(
        size: tuple[int, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-39: the example program fused + swap (rows kernels, blocks of 8: partial rows and
    blocks) writes, in the unchecked (simd) build, native and portable, the bytes of the
    unfused program in the checked portable build (threads in order, as before NAT-36); the
    program calls exp, so the reference is c's own (CG-13, NAT-53)."""
    c_or_skip()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advection_diffusion import variants

    from sarek_py.host.interp import run_program

    progs = variants(8)
    preset = {"nx": size[0], "ny": size[1], "nt": 3}
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path / "ref"))
    monkeypatch.setenv("SAREK_NATIVE", "0")
    ordered = CBackend()
    ordered.prove_launches = False
    ref = run_program(progs["unfused"], preset, device=ordered, check_races=False)
    for native in ("1", "0"):
        monkeypatch.setenv("SAREK_CACHE", str(tmp_path / native))
        monkeypatch.setenv("SAREK_NATIVE", native)
        be = CBackend()
        be.checked = False
        got = run_program(progs["fused+swap"], preset, device=be, check_races=False)
        assert _same(ref.array("u"), got.array("u")), native


def test_nat39_the_scale_relu_chain_on_c_is_the_interpreters() -> None:
    """NAT-39: the fused scale -> relu chain (conditional stores in a simd row) at an odd
    count writes the interpreter's bytes, unchecked."""
    c_or_skip()
    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.ir.host.launch import KernelLaunch

    m = parse_module((ROOT / "examples" / "scale_relu.sk").read_text(), "scale_relu.sk")
    n = 1031
    fused, _ = fuse_launches([
        KernelLaunch(m.kernel("scale"), n, 64, {"x": "X", "tmp": "T", "a": np.float32(-1.5),
                                                  "n": n}),
        KernelLaunch(m.kernel("relu"), n, 64, {"tmp": "T", "y": "Y", "n": n})])
    assert len(fused) == 1
    lc = fused[0]
    outs = []
    for be in (get_backend("interp"), CBackend()):
        be.checked = False
        arrays = {"X": _awkward(n, np.float32), "T": np.zeros(n, np.float32),
                  "Y": np.full(n, 7, np.float32)}
        args = {k: (arrays[v] if isinstance(v, str) else np.asarray(v)[()])
                for k, v in lc.by_name.items()}
        be.run_kernel(lc.kernel, args, n, lc.block)
        outs.append(arrays["T"].tobytes() + arrays["Y"].tobytes())
    assert outs[0] == outs[1]
