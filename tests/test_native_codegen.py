"""The speed of the c backend's generated C: the count as the loop's bound, AVX2 clones,
vectorised unchecked units, one refusal look-up per kernel (specs/native.md, NAT-30 …
NAT-39). Structural tests and bitwise comparisons, no timings.

Every test that runs C is skipped, with the reason, where no C compiler with OpenMP is
installed (NAT-15).
"""

from __future__ import annotations

import copy
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend as c_or_skip

from sarek_py import codegen
from sarek_py.codegen.c99 import _REFUSALS, C99
from sarek_py.codegen.cstyle import emit
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import Backend, get_backend
from sarek_py.runtime.ccompiler import FLAGS, compiler
from sarek_py.runtime.native import CBackend

ROOT = Path(__file__).parent.parent
X86_LINUX = platform.machine() in ("x86_64", "AMD64") and sys.platform.startswith("linux")


def _module(name: str) -> dict[str, Kernel]:
    m = parse_module((ROOT / "examples" / name).read_text(), name)
    return {k.name: k for k in m.kernels}


def _scale_relu(n: int) -> KernelLaunch:
    m = _module("scale_relu.sk")
    a = np.float32(1.5)
    fused, _ = fuse_launches([
        KernelLaunch(m["scale"], n, 256, {"x": "X", "tmp": "T", "a": a, "n": n}),
        KernelLaunch(m["relu"], n, 256, {"tmp": "T", "y": "Y", "n": n})])
    assert len(fused) == 1
    return fused[0]


def _same(a: Any, b: Any) -> bool:
    return bool(np.asarray(a).tobytes() == np.asarray(b).tobytes())


# ---------------------------------------------------------------- NAT-31: the count


def test_nat31_the_thread_function_has_no_count_test() -> None:
    """NAT-31: the count of threads is the bound of the launch function's innermost loop,
    whose index is the thread's number as an int; the thread function does not test it
    (checked and unchecked, saxpy and the fused pair)."""
    kernels = [_module("saxpy.sk")["saxpy"], _scale_relu(1000).kernel]
    for k in kernels:
        for checked in (True, False):
            src = emit(k, C99, checked=checked).source
            thread = src[src.index("_thread(\n"):src.index("SAREK_LAUNCH\nvoid")]
            assert "sarek_threads)" not in thread and "sarek_threads ||" not in thread
            if checked:
                assert ("for (int sarek_t = sarek_first; sarek_t < sarek_first + sarek_nx;"
                        in src)
                assert "sarek_id.flat = sarek_t;" in src
            else:  # the simd row (NAT-36): sarek_t counts beside sarek_x; the count bounds
                # the last of NAT-65's three loops, the others end before it
                assert re.search(r"for \(int sarek_x = (0|sarek_out); sarek_x < sarek_nx; "
                                 r"sarek_x\+\+\)", src)
                assert "int sarek_t = sarek_first;" in src
                assert "sarek_lane.flat = sarek_t;" in src


def test_nat31_no_division_per_thread_in_an_offloaded_rows_nest() -> None:
    """NAT-31 (TIL-14): in the launch function of an offloaded 2-D nest (rows numbering)
    the block's place is decoded once per block; the innermost loop and the thread
    function have no integer division or remainder of a thread's place."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advection_diffusion import variants

    prog = variants(256)["fused+swap"]
    rows = [k for k in prog.kernels if k.name.endswith("_rows")]
    assert rows
    for k in rows:
        src = emit(k, C99, checked=False).source
        launch = src[src.index("SAREK_LAUNCH\nvoid"):]
        inner = launch[launch.index("#pragma omp simd"):]  # the row (NAT-36)
        inner = inner[:inner.index("\n        }\n")]
        assert "/" not in inner and "%" not in inner, inner
        thread = src[src.index("_thread(\n"):src.index("SAREK_LAUNCH\nvoid")]
        assert not re.search(r"sarek_id\.\w+\)?\s*[/%]|[/%]\s*\(?(\(long long\))?sarek_id",
                             thread), thread


SHAPES = """
kernel ids(o : i32[], t : i32[]) =
  let i = global_thread_id in
  o[i] <- thread_idx_x + 10 * thread_idx_y + 100 * thread_idx_z + 1000 * block_idx_x
          + 10000 * block_idx_y + 100000 * block_idx_z;
  t[i] <- i
"""


@pytest.mark.parametrize("threads,grid,block", [
    (0, (1, 1, 1), (16, 1, 1)), (1, (1, 1, 1), (16, 1, 1)), (37, (3, 1, 1), (16, 1, 1)),
    (48, (3, 1, 1), (16, 1, 1)), (29, (2, 2, 1), (4, 2, 1)), (100, (3, 1, 2), (3, 2, 3)),
    (107, (2, 2, 2), (2, 3, 5)), (29, (2, 1, 1), (3, 2, 3)),
])
def test_nat31_partial_blocks_run_exactly_the_counted_threads(
        threads: int, grid: tuple[int, ...], block: tuple[int, ...]) -> None:
    """NAT-31: 1-D to 3-D launches whose count stops inside a row of a block run exactly
    the threads below the count with the interpreter's ids (the arrays hold exactly
    ``threads`` elements: a thread past the count would fault in the checked build)."""
    be = c_or_skip()
    m = parse_module(SHAPES)
    check_module(m)
    k = m.kernels[0]
    args = {"o": np.full(threads, -7, np.int32), "t": np.full(threads, -7, np.int32)}
    ref, dev = copy.deepcopy(args), copy.deepcopy(args)
    kw: dict[str, Any] = {"block_shape": block, "grid": grid}
    get_backend("interp").run_kernel(k, ref, threads, **kw)
    be.run_kernel(k, dev, threads, **kw)
    assert _same(ref["o"], dev["o"]) and _same(ref["t"], dev["t"])
    assert list(dev["t"]) == list(range(threads))


# ------------------------------------------------------------- NAT-32: AVX2 clones


def test_nat32_the_launch_is_cloned_for_avx2_on_x86_linux() -> None:
    """NAT-32: the launch function carries SAREK_LAUNCH, target_clones on x86-64 Linux
    unless SAREK_NO_CLONES is defined."""
    src = codegen.emit_c(_module("saxpy.sk")["saxpy"])
    assert "SAREK_LAUNCH\nvoid saxpy(" in src
    assert '#define SAREK_LAUNCH __attribute__((target_clones("avx2", "default")))' in src
    assert "!defined(SAREK_NO_CLONES)" in src


def _run_fused(be: Backend, lc: KernelLaunch, x: Any) -> tuple[Any, Any]:
    n = lc.threads
    arrays = {"X": x.copy(), "T": np.zeros(n, np.float32), "Y": np.zeros(n, np.float32)}
    args = {k: (arrays[v] if isinstance(v, str) else np.asarray(v)[()])
            for k, v in lc.by_name.items()}
    be.run_kernel(lc.kernel, args, n, lc.block)
    return arrays["T"], arrays["Y"]


def _awkward_f32(n: int) -> Any:
    rng = np.random.default_rng(32)
    x = rng.standard_normal(n).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38,
                        1.17e-38, -1.17e-38], np.float32)
    x[: special.size] = special
    x[-special.size:] = special
    x[100:200] = -np.float32(np.nan)
    return x


@pytest.mark.parametrize("checked", [True, False])
def test_nat32_clones_write_the_baseline_bytes(checked: bool, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-32: the fused scale -> relu pair (conditional stores: vectorised under AVX2
    only) and saxpy, over NaNs, signed zeros, subnormals, infinities and a count that is
    not a multiple of the block, write the same bytes in the cloned build (AVX2 here where
    the CPU has it) and in the baseline build (-DSAREK_NO_CLONES), and the
    interpreter's."""
    c_or_skip()
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    monkeypatch.setenv("SAREK_NATIVE", "0")  # the clones, not NAT-38's build for this CPU
    n = 4099
    lc = _scale_relu(n)
    x = _awkward_f32(n)
    monkeypatch.delenv("SAREK_CFLAGS", raising=False)
    cloned = CBackend()
    cloned.checked = checked
    monkeypatch.setenv("SAREK_CFLAGS", "-DSAREK_NO_CLONES")
    base = CBackend()
    base.checked = checked
    monkeypatch.delenv("SAREK_CFLAGS")
    got = _run_fused(cloned, lc, x)
    want = _run_fused(base, lc, x)
    ref = _run_fused(get_backend("interp"), lc, x)
    assert all(_same(a, b) for a, b in zip(got, want, strict=True))
    assert all(_same(a, b) for a, b in zip(got, ref, strict=True))
    k = _module("saxpy.sk")["saxpy"]
    outs = []
    for be in (cloned, base, get_backend("interp")):
        y = _awkward_f32(n)[::-1].copy()
        be.run_kernel(k, {"x": x.copy(), "y": y, "a": np.float32(-0.75), "n": n - 3}, n, 64)
        outs.append(y)
    assert _same(outs[0], outs[1]) and _same(outs[0], outs[2])


# -------------------------------------------------------- NAT-33: it vectorises


def _vector_report(src: str, tmp_path: Path, *extra: str) -> tuple[str, int]:
    """The compiler's -fopt-info-vec-optimized report on ``src`` and the line of the
    launch's innermost loop."""
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    path = tmp_path / "unit.c"
    path.write_text(src)
    opts = [f for f in FLAGS if f != "-shared"]
    done = subprocess.run([cc, *opts, *extra, "-c", str(path), "-o", str(tmp_path / "u.o"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or "-fopt-info" in done.stderr:
        pytest.skip(f"the compiler {cc} gives no vectoriser report: {done.stderr[:200]}")
    # the first line of the thread function: the row loop calling it is reported at its
    # own line or, inlined into the simd row (NAT-36), at a line of the thread's body
    line = src[:src.index("_thread(")].count("\n") + 1
    return done.stderr, line


def _vectorised(report: str, line: int) -> bool:
    return any(int(m.group(1)) >= line for m in
               re.finditer(r"unit\.c:(\d+):\d+: optimized: loop vectorized", report))


def test_nat33_unchecked_saxpy_vectorises_in_the_baseline_build(tmp_path: Path) -> None:
    """NAT-33: the innermost loop of unchecked saxpy is vectorised without AVX2 (its one
    guard `i < n` splits the loop, NAT-31)."""
    src = emit(_module("saxpy.sk")["saxpy"], C99, checked=False).source
    report, line = _vector_report(src, tmp_path, "-DSAREK_NO_CLONES")
    assert _vectorised(report, line), report


@pytest.mark.skipif(not X86_LINUX, reason="NAT-32's clones are for x86-64 Linux")
def test_nat33_unchecked_fused_scale_relu_vectorises(tmp_path: Path) -> None:
    """NAT-33: the innermost loop of the unchecked fused scale -> relu pair is vectorised
    (its AVX2 clone: three guards, masked stores)."""
    src = emit(_scale_relu(1 << 22).kernel, C99, checked=False).source
    report, line = _vector_report(src, tmp_path)
    assert _vectorised(report, line), report


# ------------------------------------------------- NAT-35: host cost of a launch


def test_nat35_the_refusal_is_found_once_per_kernel() -> None:
    """NAT-35: launching one kernel object again does not look for its refusal again."""
    be = c_or_skip()
    k = _module("saxpy.sk")["saxpy"]
    args = {"x": np.ones(64, np.float32), "y": np.ones(64, np.float32),
            "a": np.float32(2), "n": 64}
    be.run_kernel(k, args, 64, 32)
    misses = _REFUSALS.misses
    for _ in range(3):
        be.run_kernel(k, args, 64, 32)
    assert _REFUSALS.misses == misses
    assert list(np.unique(args["y"])) == [9.0]  # y = 2x + y four times from 1


# ------------------------------------------- NAT-30: measured against hand-written C


def test_nat30_the_measuring_script_compares_bytes_at_a_small_size() -> None:
    """NAT-30: benchmarks/native_codegen.py runs at a small size and finds the generated
    and hand-written C of each stage writing the same bytes (exit status 0)."""
    c_or_skip()
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "native_codegen.py"), "--log2n", "12",
         "--size", "16", "--repeat", "1", "--reps", "1"],
        capture_output=True, text=True, check=False, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.endswith(("same", "DIFFERENT"))]
    assert len(rows) == 3 and all(ln.endswith("same") for ln in rows), done.stdout
