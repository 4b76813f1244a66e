"""The native CPU backend ``c``: C + OpenMP from the one emitter, bitwise equal to the
interpreter (specs/native.md, NAT-1 … NAT-28).

Every test that runs C is skipped, with the reason, where no C compiler with OpenMP is
installed (NAT-15).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend as c_or_skip
from rule_citations import assert_rules_cited
from test_codegen_exact import (
    TRANSCENDENTAL_ULP,
    assert_bitwise,
    case_kernels,
    example_kernels,
    run_both,
    ulp_distance,
)

from sarek_py import codegen
from sarek_py.cli import main as cli
from sarek_py.codegen.c99 import C99
from sarek_py.codegen.cstyle import CodegenError
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.fusion.policy import target
from sarek_py.ir.diagnostics import BackendUnavailable, InterpError, LaunchError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.ccompiler import FLAGS, CompileCounter, cache_key, compiler, library

ROOT = Path(__file__).parent.parent


def kernels(text: str) -> dict[str, Kernel]:
    m = parse_module(text)
    check_module(m)
    return {k.name: k for k in m.kernels}


DIVIDE = """
kernel divide(x : i32[], y : i32[], o : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    o[i] <- x[i] / y[i] + x[i] % y[i] + x[i] / 4
"""

K = kernels(DIVIDE + """
kernel ids(o : i32[,], n : i32) =
  let i = global_thread_id in
  if i < n then (
    o[i, 0] <- thread_idx_x; o[i, 1] <- thread_idx_y; o[i, 2] <- thread_idx_z;
    o[i, 3] <- block_idx_x; o[i, 4] <- block_idx_y; o[i, 5] <- block_idx_z;
    o[i, 6] <- block_dim_x * 100 + block_dim_y * 10 + block_dim_z;
    o[i, 7] <- grid_dim_x * 100 + grid_dim_y * 10 + grid_dim_z;
    o[i, 8] <- global_idx_x + global_idx_y * 1000 + global_idx_z * 1000000
  )

kernel shadow(b : f32[], tx : f32[], blocks : i32, per_block : i32, id : i32) =
  let i = global_thread_id in
  if i < blocks then
    tx[i] <- b[i] + f32(per_block + id)

kernel locals(o : i64[], n : i32)
  var acc : i64
  local t : i64[4] =
  let i = global_thread_id in
  if i < n then (
    acc := acc + t[i % 4] + i64(i);
    t[i % 4] <- 7L;
    o[i] <- acc + t[0] + t[1] + t[2] + t[3]
  )

kernel flags(x : f64[], b : bool[], o : i64[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    b[i] <- x[i] > 0.0 && !b[i];
    o[i] <- i64(x[i] * 1e12) * 3L
  )

kernel fill(o : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    o[i] <- f32(i) * 0.5f

kernel reads_past(x : f32[], o : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    o[i] <- x[i + 3]

kernel stops(x : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    if x[i] % 3 == 0 then stop 4;
    x[i] <- x[i] + 1
  )

kernel strided(x : f32[], y : f32[], on : bool, n : i32) =
  let mut i = global_thread_id in
  while i < n do
    if i == 37 then return;
    if on then y[i] <- y[i] + x[i] * 2.0f;
    i := i + grid_dim_x * block_dim_x
  done

kernel rows(a : f64[,], b : f64[,]) =
  let j = block_idx_y in
  let i = block_idx_x * block_dim_x + thread_idx_x in
  if j < length(a, 0) && i < length(a, 1) then
    b[j, i] <- a[j, i] * 2.0 + b[j, i]

kernel with_barrier(x : f32[]) =
  x[global_thread_id] <- 1.0f;
  barrier

kernel with_shared(x : f32[])
  shared s : f32[64] =
  s[thread_idx_x] <- x[global_thread_id];
  x[global_thread_id] <- s[thread_idx_x]

kernel with_dynamic(x : f32[])
  shared s : f32[] =
  x[global_thread_id] <- f32(length(s))

kernel with_atomic(h : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    let a = atomic_add(h[i % 4], 1) in
    h[4] <- 0
""")


def _same(a: Any, b: Any) -> bool:
    return bool(np.asarray(a).tobytes() == np.asarray(b).tobytes())


def _both(k: Kernel, args: dict[str, Any], threads: int, block: int = 64,
          **kw: Any) -> tuple[dict[str, Any], dict[str, Any], Any, Any]:
    be = c_or_skip()
    ref, dev = copy.deepcopy(args), copy.deepcopy(args)
    r_ref = get_backend("interp").run_kernel(k, ref, threads, block, **kw)
    r_dev = be.run_kernel(k, dev, threads, block, **kw)
    return ref, dev, r_ref, r_dev


# ----------------------------------------------------------------------- the C


def test_nat1_a_dialect_of_the_one_emitter() -> None:
    """NAT-1, NAT-3: the C of saxpy is one thread's function and an exported launch
    function with an OpenMP loop over blocks; no OpenCL or CUDA word in it."""
    k = next(k for k in case_kernels() if k.name == "saxpy")
    src = codegen.emit_c(k)
    assert "static inline void saxpy_thread(" in src
    assert "\nvoid saxpy(" in src and "const int* sarek_shape)" in src
    assert "#pragma omp parallel for schedule(static)" in src
    assert "__kernel" not in src and "__global__" not in src and "get_global_id" not in src
    assert "-ffp-contract=off" in FLAGS and "-fno-fast-math" in FLAGS  # NAT-13


def test_nat1_emit_command_and_the_unit_compiles(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """NAT-1: ``sarek-py emit --target c`` prints every kernel of a file as one unit that
    the C compiler accepts with -Wall -Werror."""
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    for name in ("scale_relu.sk", "stencil2d.sk", "helper.sk"):
        assert cli.main(["emit", str(ROOT / "examples" / name), "--target", "c"]) == 0
        out = tmp_path / (name + ".c")
        out.write_text(capsys.readouterr().out)
        done = subprocess.run([cc, *FLAGS[:-1], "-Wall", "-Werror", "-Wno-unused-function",
                               "-c", str(out), "-o", str(tmp_path / "x.o")],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_nat1_every_test_kernel_compiles_without_a_warning(tmp_path: Path) -> None:
    """NAT-1: the C of every test kernel the c backend accepts compiles with -Wall -Werror
    (no implicitly declared function: an error from gcc 14 on; integer abs was one)."""
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    units = [codegen.emit_c(k) for k in case_kernels()
             if C99.refuse is not None and C99.refuse(k) is None]
    for n, unit in enumerate(units):
        src = tmp_path / f"k{n}.c"
        src.write_text(unit)
        done = subprocess.run([cc, *FLAGS[:-1], "-Wall", "-Werror", "-Wno-unused-function",
                               "-c", str(src), "-o", str(tmp_path / "k.o")],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_nat2_thread_intrinsics_in_3d_launches() -> None:
    """NAT-2, NAT-3, NAT-12: every thread intrinsic of a 3-D and a 2-D launch, and a 1-D
    launch whose count is not a multiple of the block, as the interpreter numbers them."""
    k = K["ids"]
    for grid, block in (((3, 2, 2), (4, 3, 2)), ((5, 3, 1), (8, 2, 1))):
        n = int(np.prod(grid) * np.prod(block))
        args = {"o": np.zeros((n, 9), np.int32), "n": n}
        ref, dev, _, _ = _both(k, args, n, 1, grid=grid, block_shape=block)
        assert _same(ref["o"], dev["o"])
    args = {"o": np.zeros((1000, 9), np.int32), "n": 1000}
    ref, dev, _, _ = _both(k, args, 999, 64, grid=(16, 1, 1), block_shape=(64, 1, 1))
    assert _same(ref["o"], dev["o"]) and ref["o"][998, 3] == 15


def test_nat3_parameters_named_like_the_launch_locals() -> None:
    """NAT-3: parameters named b, tx, blocks, per_block, id are not shadowed by the launch
    function's locals."""
    k = K["shadow"]
    b = np.arange(100, dtype=np.float32)
    args = {"b": b, "tx": np.zeros(100, np.float32), "blocks": 100, "per_block": 5, "id": 2}
    ref, dev, _, _ = _both(k, args, 100, 32)
    assert _same(ref["tx"], dev["tx"]) and dev["tx"][3] == 10.0


@pytest.mark.parametrize("name", ["with_barrier", "with_shared", "with_dynamic",
                                  "with_atomic"])
def test_nat4_refusals_name_the_construct(name: str) -> None:
    """NAT-4, NAT-26: the named c backend refuses, before anything is allocated, with one
    sentence naming the construct and where to run it; emit_c refuses alike."""
    be = c_or_skip()
    k = K[name]
    word = {"with_barrier": "a barrier", "with_shared": "the shared array s",
            "with_dynamic": "a dynamic shared array", "with_atomic": "an atomic"}[name]
    before = be.stats.bytes_allocated
    args: dict[str, Any] = {p.name: (np.zeros(64, p.type.elem.dtype) if p.is_array else 8)
                            for p in k.params}
    kw = {"shared": 8} if name == "with_dynamic" else {}
    with pytest.raises(LaunchError) as exc:
        be.run_kernel(k, args, 64, 64, **kw)
    msg = str(exc.value)
    assert f"kernel {name} has {word}" in msg and "run it on opencl or interp" in msg
    assert "\n" not in msg
    assert be.stats.bytes_allocated == before
    with pytest.raises(CodegenError, match=f"has {word}"):
        codegen.emit_c(k)


def test_nat5_locals_start_at_zero() -> None:
    """NAT-5: a mutable scalar and a local array start at zero in every thread."""
    args = {"o": np.zeros(300, np.int64), "n": 300}
    ref, dev, _, _ = _both(K["locals"], args, 300, 64)
    assert _same(ref["o"], dev["o"])


def test_nat8_bounds_fault_is_reported_and_unchecked_has_no_check() -> None:
    """NAT-8, NAT-21: a read past the end touches no memory and is reported at sync, as the
    interpreter words it; backend.checked = False emits no check."""
    be = c_or_skip()
    k = K["reads_past"]
    x = np.ones(100, np.float32)
    o = np.zeros(100, np.float32)
    with pytest.raises(InterpError, match=r"kernel reads_past, thread \d+: out-of-bounds read "
                                          r"of array 'x' at index \[\d+\] \(bounds 0..99\)"):
        be.run_kernel(k, {"x": x, "o": o, "n": 100}, 100, 32)
    assert (o[:97] == 1).all()
    assert "sarek_in1" in codegen.emit_c(k)
    assert "sarek_in1" not in codegen.emit_c(k, checked=False)
    be.checked = False
    try:
        o2 = np.zeros(100, np.float32)
        be.run_kernel(k, {"x": np.ones(200, np.float32), "o": o2, "n": 100}, 100, 32)
        assert (o2 == 1).all()
        assert "sarek_in1" not in be.compiled(k).emitted.source  # type: ignore[attr-defined]
    finally:
        be.checked = True


def test_nat9_nat12_case_and_example_kernels_bitwise() -> None:
    """NAT-9, NAT-12, NAT-22: every test and example kernel the c backend accepts writes
    the interpreter's bytes and stop codes (integer wrapping, division, shifts, f32/f64,
    bool, helpers, 2-D arrays, loops); the barrier kernels are refused."""
    be = c_or_skip()
    ran, refused = [], []
    items = [(k, False) for k in case_kernels() if k.name != "transcendental"]
    items += [(k, True) for _, k in example_kernels()]
    for k, example in items:
        if be.refusal(k) is not None:  # type: ignore[attr-defined]
            refused.append(k.name)
            continue
        ref, dev, r_ref, r_dev = run_both(k, be, example=example)
        assert_bitwise(k, ref, dev)
        assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes), k.name
        ran.append(k.name)
    assert {"int_ops", "wrapping", "float_ops", "stopper", "stencil5"} <= set(ran)
    assert set(refused) == {"block_sum"}


def test_nat10_division_by_zero_does_not_end_the_process() -> None:
    """NAT-10: integer / and % by 0 and MIN / -1 give 0 on c instead of the CPU's trap
    (run in a child process, so a trap could not end the test run); a divisor the ranges
    keep away from 0 is plain C."""
    c_or_skip()
    src = codegen.emit_c(K["divide"])
    assert "sarek_div_i32(" in src and "sarek_mod_i32(" in src and "/ 4" in src
    code = (
        "import numpy as np\n"
        "from sarek_py.ir.parser import parse_module\n"
        "from sarek_py.runtime import get_backend\n"
        f"m = parse_module({DIVIDE!r})\n"
        "k = next(k for k in m.kernels if k.name == 'divide')\n"
        "x = np.array([7, -2**31, 9, 5], np.int32)\n"
        "y = np.array([0, -1, 0, 2], np.int32)\n"
        "o = np.zeros(4, np.int32)\n"
        "get_backend('c').run_kernel(k, {'x': x, 'y': y, 'o': o, 'n': 4}, 4, 4)\n"
        "print(o.tolist())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, -536870912, 2, 4]"


@pytest.mark.parametrize("seed", [1, 2])
def test_nat11_transcendentals_within_the_bound(seed: int) -> None:
    """NAT-11: libm's exp/log/sin/cos/tan/tanh/pow within CG-15's 4 ULP of numpy."""
    be = c_or_skip()
    k = next(k for k in case_kernels() if k.name == "transcendental")
    ref, dev, _, _ = run_both(k, be, seed)
    for name in ("o32", "o64"):
        assert ulp_distance(ref[name], dev[name]).max() <= TRANSCENDENTAL_ULP


def test_nat12_f64_i64_bool_and_odd_sizes() -> None:
    """NAT-12: f64 in, bool read and written, i64 out; counts 1, 63, 65, 1000 with a
    block of 64, and 0 threads (nothing runs)."""
    rng = np.random.default_rng(3)
    for n in (1, 63, 65, 1000, 0):
        size = max(n, 1)
        args = {"x": rng.normal(size=size), "b": rng.random(size) < 0.5,
                "o": np.zeros(size, np.int64), "n": n}
        ref, dev, _, _ = _both(K["flags"], args, n, 64)
        assert _same(ref["b"], dev["b"]) and _same(ref["o"], dev["o"]), n


def test_nat12_write_discard_and_stops() -> None:
    """NAT-12, NAT-22: write-discard (a copied array is not copied in) and stop codes."""
    be = c_or_skip()
    be.zero_copy = False  # type: ignore[attr-defined]
    try:
        o = np.full(100, 9.0, np.float32)
        be.stats.reset()
        be.run_kernel(K["fill"], {"o": o, "n": 100}, 100, 32, overwritten=["o"])
        assert be.stats.bytes_discarded == 400 and be.stats.bytes_in == 0
        assert _same(o, np.arange(100, dtype=np.float32) * np.float32(0.5))
    finally:
        be.zero_copy = True  # type: ignore[attr-defined]
    x = np.arange(50, dtype=np.int32)
    ref, dev, r_ref, r_dev = _both(K["stops"], {"x": x, "n": 50}, 50, 16)
    assert _same(ref["x"], dev["x"])
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes)
    assert set(np.unique(r_dev.stop_codes)) == {0, 4}


# ------------------------------------------------------------------ compiling


def _child(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=ROOT, env={**os.environ, **env})


_CHILD = """
import subprocess
import numpy as np
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.ccompiler import CompileCounter
m = parse_module(open('examples/saxpy.sk').read())
be = get_backend('c')
if {forbid}:
    def refuse(*a, **k):
        raise AssertionError('the compiler was run')
    subprocess.run = refuse
    subprocess.Popen = refuse
x = np.ones(10, np.float32)
y = np.ones(10, np.float32)
be.run_kernel(m.kernels[0], dict(x=x, y=y, a=2.0, n=10), 10, 4)
print(CompileCounter.runs, y[0])
"""


def test_nat14_cached_on_disk_across_processes(tmp_path: Path) -> None:
    """NAT-14: a second process finds the library in the disk cache and runs no program;
    the C source is kept beside the library."""
    c_or_skip()
    env = {"SAREK_CACHE": str(tmp_path)}
    first = _child(_CHILD.format(forbid=False), env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["2", "3.0"]  # the OpenMP probe and saxpy
    second = _child(_CHILD.format(forbid=True), env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["0", "3.0"]
    assert len(list((tmp_path / "c").glob("*.so"))) == 2
    assert len(list((tmp_path / "c").glob("*.c"))) == 2


def test_nat15_no_compiler_is_unavailable_with_what_to_install(tmp_path: Path) -> None:
    """NAT-15, NAT-25: without a C compiler, ``c`` is unavailable with one sentence saying
    what to install, and the default choice goes on to opencl or interp."""
    code = ("from sarek_py.runtime import get_backend\n"
            "from sarek_py.ir.diagnostics import BackendUnavailable\n"
            "try:\n    get_backend('c')\n"
            "except BackendUnavailable as e:\n    print(e.message)\n"
            "print(get_backend('default').name)\n")
    done = _child(code, {"SAREK_CC": "no-such-cc", "SAREK_CACHE": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("no C compiler 'no-such-cc' was found, so the c backend cannot run: "
                        "install one (apt install gcc) or name it in $SAREK_CC.")
    assert lines[1] in ("opencl", "interp")


def test_nat16_one_kernel_compiles_in_under_a_second(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-16: one kernel (stencil5, the largest example) compiles in less than a second."""
    c_or_skip()
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    k = next(k for _, k in example_kernels() if k.name == "stencil5")
    src = codegen.emit_c(k)
    runs = CompileCounter.runs
    t0 = time.perf_counter()
    library(src)
    took = time.perf_counter() - t0
    assert CompileCounter.runs == runs + 1
    assert took < 1.0, took


def test_nat17_user_flags_are_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-17: $SAREK_CFLAGS (e.g. -march=native) names a different library."""
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    from sarek_py.runtime.ccompiler import flags

    plain = cache_key("int x;", cc, flags())
    monkeypatch.setenv("SAREK_CFLAGS", "-march=native")
    assert flags()[-1] == "-march=native"
    assert cache_key("int x;", cc, flags()) != plain


def test_nat18_compiler_errors_are_one_launch_error(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-18: C the compiler rejects is a LaunchError with its first error line."""
    c_or_skip()
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    with pytest.raises(LaunchError, match=r"refused the emitted C .*error"):
        library("int f( { return 0; }\n")


def test_nat13_fusion_is_on_for_c() -> None:
    """NAT-13: the c target does not contract, so fusion is on by default (LEG-9)."""
    assert target("c").contraction is False


# -------------------------------------------------------------- memory, launches


def test_nat20_zero_copy_and_copies_of_views() -> None:
    """NAT-20: a contiguous writable array is used in place; a strided view and a read-only
    array are copied (the view written back), with the interpreter's bytes."""
    be = c_or_skip()
    k = next(k for k in case_kernels() if k.name == "saxpy")
    x = np.arange(200, dtype=np.float32)
    y = np.ones(200, np.float32)
    be.stats.reset()
    be.run_kernel(k, {"x": x, "y": y, "a": 2.0, "n": 200}, 200, 64)
    assert be.stats.bytes_mapped == 1600 and be.stats.bytes_in == 0
    assert be.stats.bytes_out == 0 and y[5] == 11.0
    base = np.ones(400, np.float32)
    ro = np.arange(200, dtype=np.float32)
    ro.flags.writeable = False
    ref_y = base[::2].copy()
    run_kernel(k, {"x": ro, "y": ref_y, "a": np.float32(2.0), "n": np.int32(200)}, 200, 64)
    be.stats.reset()
    be.run_kernel(k, {"x": ro, "y": base[::2], "a": 2.0, "n": 200}, 200, 64)
    assert be.stats.bytes_in == 1600 and be.stats.bytes_out == 800
    assert _same(base[::2], ref_y) and (base[1::2] == 1).all()


def test_nat20_device_arrays_on_c() -> None:
    """NAT-20, NAT-28: to_device(a, backend="c") holds the array; launches use it with no
    copy; get() reads it back."""
    c_or_skip()
    import sarek_py

    k = next(k for k in case_kernels() if k.name == "saxpy")
    x = sarek_py.to_device(np.arange(100, dtype=np.float32), backend="c")
    y = sarek_py.to_device(np.ones(100, np.float32), backend="c")
    assert x.backend == "c"
    be = get_backend("c")
    be.stats.reset()
    be.run_kernel(k, {"x": x, "y": y, "a": 3.0, "n": 100}, 100, 32)
    assert be.stats.bytes_in == 0 and be.stats.bytes_out == 0
    assert y.get()[4] == 13.0


def test_nat24_large_blocks() -> None:
    """NAT-24: a block of 4096 threads (more than a GPU allows) runs."""
    args = {"o": np.zeros(5000, np.float32), "n": 5000}
    ref, dev, _, _ = _both(K["fill"], args, 5000, 4096)
    assert _same(ref["o"], dev["o"])


# ------------------------------------------------------- the name and the choice


def test_nat25_default_runs_refused_kernels_on_the_next_backend() -> None:
    """NAT-25, NAT-27: on the default backend, saxpy runs on c and the barrier kernel on
    the next backend, over the same memory (a device array of the default backend too),
    with the interpreter's bytes; the choices are recorded."""
    c_or_skip()
    import sarek_py

    be = get_backend("default")
    if be.name != "c":
        pytest.skip(f"the default backend here is {be.name}")
    ks = {k.name: k for k in case_kernels()}
    ref, dev, _, _ = run_both(ks["block_sum"], be)
    assert_bitwise(ks["block_sum"], ref, dev)
    choices = be.choices  # type: ignore[attr-defined]
    assert choices["block_sum"].split()[0] in ("opencl", "interp")
    assert "has a barrier" in choices["block_sum"]
    run_both(ks["saxpy"], be)
    assert choices["saxpy"] == "c"
    x = np.random.default_rng(0).normal(size=128).astype(np.float32)
    out = np.zeros(2, np.float32)
    d = sarek_py.to_device(x)
    o = sarek_py.to_device(np.zeros(2, np.float32))
    be.run_kernel(ks["block_sum"], {"x": d, "out": o, "n": 128}, 128, 64)
    get_backend("interp").run_kernel(ks["block_sum"], {"x": x, "out": out, "n": 128}, 128, 64)
    assert _same(o.get(), out)


def test_nat27_cli_reports_the_choice(capsys: pytest.CaptureFixture[str]) -> None:
    """NAT-27, NAT-28: run --backend default says where the kernel ran; --backend c and
    --compare c run and compare; an unknown name lists c."""
    c_or_skip()
    sk = str(ROOT / "examples" / "saxpy.sk")
    assert cli.main(["run", sk, "-k", "saxpy", "-n", "100", "--size", "n=100",
                     "--backend", "default"]) == 0
    if get_backend("default").name == "c":
        assert "backend: default ran kernel saxpy on c" in capsys.readouterr().out
    assert cli.main(["run", sk, "-k", "saxpy", "-n", "100", "--size", "n=100",
                     "--backend", "c", "--compare", "interp"]) == 0
    out = capsys.readouterr().out
    assert "x: identical" in out and "y: identical" in out
    assert cli.main(["run", sk, "-k", "saxpy", "-n", "100", "--size", "n=100",
                     "--compare", "c"]) == 0
    assert "y: identical" in capsys.readouterr().out
    with pytest.raises(LaunchError, match="choose one of cuda, c, opencl, interp"):
        get_backend("metal")


def test_nat28_host_program_on_c(capsys: pytest.CaptureFixture[str]) -> None:
    """NAT-28: a host program runs on --backend c (offloaded) with the interpreter's
    bytes."""
    c_or_skip()
    prog, data = str(ROOT / "examples" / "newton.sk"), str(ROOT / "examples" / "newton.in")
    assert cli.main(["run", prog, "--input", data, "--backend", "c", "--compare",
                     "interp"]) == 0
    out = capsys.readouterr().out
    assert "DIFFERENT" not in out and "identical" in out


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = x[i] * a


@kernel
def relu(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = max(t[i], 0.0)


def test_nat28_front_end_and_pipeline_on_c() -> None:
    """NAT-28: k[n, block](…, backend="c") and pipeline(backend="c") (fused) run on c."""
    c_or_skip()
    x = np.random.default_rng(1).normal(size=300).astype(np.float32)
    t, out = np.zeros_like(x), np.zeros_like(x)
    t2, out2 = np.zeros_like(x), np.zeros_like(x)
    scale[300, 64](x, t, 2.0, 300, backend="interp")
    relu[300, 64](t, out, 300, backend="interp")
    scale[300, 64](x, t2, 2.0, 300, backend="c")
    assert _same(t, t2)
    with pipeline(backend="c") as p:
        scale[300, 64](x, t2, 2.0, 300)
        relu[300, 64](t2, out2, 300)
    assert [lc.kernel.name for lc in p.launches] == ["scale_relu"]
    assert _same(out, out2)


def test_nat_every_rule_is_cited_here() -> None:
    """Every rule NAT-1 … NAT-49 of specs/native.md is cited by a test of this file or,
    NAT-30 … NAT-39, of tests/test_native_codegen.py or tests/test_native_simd.py, NAT-40 … NAT-49, of
    tests/test_native_redteam.py (the later ones belong to the
    adversarial tests)."""
    assert_rules_cited(__file__, "native", "NAT", 1, 29, gaps=(6, 7, 23, 29))
    assert_rules_cited(__file__, "native", "NAT", 30, 39, "test_native_codegen.py",
                       "test_native_simd.py", gaps=(34,))
    assert_rules_cited(__file__, "native", "NAT", 40, 49, "test_native_redteam.py",
                       "test_native_interrupt.py", gaps=(48, 49))


def test_nat19_idle_openmp_threads_sleep(tmp_path: Path) -> None:
    """NAT-19: the backend sets OMP_WAIT_POLICY=passive unless the user chose a policy."""
    c_or_skip()
    code = ("import os\nfrom sarek_py.runtime import get_backend\nget_backend('c')\n"
            "print(os.environ.get('OMP_WAIT_POLICY'))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, cwd=ROOT, env=env)
    assert done.stdout.strip() == "passive", done.stderr
    done = _child(code, {"OMP_WAIT_POLICY": "active"})
    assert done.stdout.strip() == "active", done.stderr


def test_nat12_aliases_views_and_grid_stride() -> None:
    """NAT-12, NAT-20: the same array passed twice, a strided view, a bool scalar, a
    return inside a grid-stride loop, a transposed 2-D view with a rows-style grid."""
    x = np.arange(500, dtype=np.float32)
    for on in (True, False):
        args = {"x": x, "y": x, "on": on, "n": 500}  # x and y: one array
        ref, dev, _, _ = _both(K["strided"], args, 128, 32)
        assert _same(ref["y"], dev["y"])
    base = np.arange(1000, dtype=np.float32)
    ref_y = base[::2].copy()
    run_kernel(K["strided"], {"x": x, "y": ref_y, "on": np.bool_(True), "n": np.int32(500)},
               100, 20)
    c_or_skip().run_kernel(K["strided"], {"x": x, "y": base[::2], "on": True, "n": 500},
                           100, 20)
    assert _same(base[::2], ref_y) and _same(base[1::2], np.arange(1, 1000, 2, dtype=np.float32))
    a = np.random.default_rng(5).normal(size=(70, 33)).T  # (33, 70), not contiguous
    args = {"a": a, "b": np.ones((33, 70))}
    ref, dev, _, _ = _both(K["rows"], args, 3 * 33 * 32, 32, grid=(3, 33),
                           block_shape=(32, 1))
    assert _same(ref["b"], dev["b"])


def test_nat8_empty_array_faults_without_touching_memory() -> None:
    """NAT-8, NAT-12: a read of a 0-element array is a fault, reported; 0 threads run
    nothing."""
    be = c_or_skip()
    o = np.zeros(4, np.float32)
    with pytest.raises(InterpError, match=r"out-of-bounds read of array 'x' at index \[3\] "
                                          r"\(bounds 0..-1\)"):
        be.run_kernel(K["reads_past"], {"x": np.zeros(0, np.float32), "o": o, "n": 1}, 1, 1)
    be.run_kernel(K["reads_past"], {"x": np.zeros(0, np.float32), "o": o, "n": 0}, 0, 1)
    assert not o.any()


def test_nat14_a_damaged_cached_library_is_compiled_again(tmp_path: Path) -> None:
    """NAT-14: a cached library that does not load (truncated) is compiled again; a cache
    directory that cannot be written is one sentence saying so."""
    c_or_skip()
    env = {"SAREK_CACHE": str(tmp_path)}
    assert _child(_CHILD.format(forbid=False), env).returncode == 0
    for so in (tmp_path / "c").glob("*.so"):
        so.write_bytes(b"not a library")
    again = _child(_CHILD.format(forbid=False), env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == ["1", "3.0"]  # saxpy compiled again; the probe is not
    blocked = tmp_path / "file"
    blocked.write_text("")
    done = _child(_CHILD.format(forbid=False), {"SAREK_CACHE": str(blocked)})
    assert "cannot write its cache directory" in done.stderr and "Traceback" in done.stderr


def test_nat1_kernels_named_like_library_functions() -> None:
    """NAT-1: kernels, helpers and parameters named like C library or OpenMP runtime
    functions (expm1f, GOMP_parallel, omp_get_thread_num, div) still compile and run."""
    ks = kernels("""
pure fun expm1f(a : f32) : f32 = return a + 1.0f

kernel GOMP_parallel(omp_get_thread_num : f32[], div : i32) =
  let i = global_thread_id in
  if i < div then
    omp_get_thread_num[i] <- expm1f(omp_get_thread_num[i])
""")
    k = ks["GOMP_parallel"]
    args = {"omp_get_thread_num": np.arange(50, dtype=np.float32), "div": 50}
    ref, dev, _, _ = _both(k, args, 50, 16)
    assert _same(ref["omp_get_thread_num"], dev["omp_get_thread_num"])


def test_nat2_a_helper_reads_thread_intrinsics() -> None:
    """NAT-2 (regression, found by the adversarial generator): a helper reading
    global_thread_id and block_idx_x gets the thread's place from its caller."""
    ks = kernels("""
fun lane() : i32 =
  return global_thread_id * 10 + block_idx_x

fun twice() : i32 =
  return lane() * 2

kernel k(out : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- twice() + lane()
""")
    args = {"out": np.zeros(50, np.int32), "n": 50}
    ref, dev, _, _ = _both(ks["k"], args, 50, 8)
    assert _same(ref["out"], dev["out"]) and dev["out"][9] == 3 * (90 + 1)


def test_nat21_faults_belong_to_the_python_thread_that_launched() -> None:
    """NAT-21 (regression, found by the adversarial tests): a launch that faults in one
    Python thread is not reported by a correct launch's sync in another."""
    import threading

    be = c_or_skip()
    k = K["reads_past"]
    good_k = K["fill"]
    wrong: list[str] = []

    def faulty() -> None:
        for _ in range(30):
            try:
                be.run_kernel(k, {"x": np.ones(4, np.float32), "o": np.zeros(4, np.float32),
                                  "n": 4}, 4, 4)
                wrong.append("no fault")
            except InterpError:
                pass

    def good() -> None:
        for _ in range(30):
            try:
                be.run_kernel(good_k, {"o": np.zeros(1 << 16, np.float32), "n": 1 << 16},
                              1 << 16, 256)
            except InterpError as exc:
                wrong.append(str(exc))

    threads = [threading.Thread(target=f) for f in (faulty, good, good)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, wrong[:2]
