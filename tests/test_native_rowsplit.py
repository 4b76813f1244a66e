"""A row of threads runs the kernel's leading guard only where it can fail (specs/native.md,
NAT-65 … NAT-69): the unchecked c launch computes, once per row, the range of the row's
threads that pass an affine guard and runs them in an unguarded simd loop, the others in
guarded ones; every result is the interpreter's, bitwise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from native_diff import c_backend as c_or_skip
from rule_citations import assert_rules_cited

from sarek_py.codegen import rowsplit
from sarek_py.codegen.c99 import C99
from sarek_py.codegen.cstyle import emit
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.opencl import OPENCL
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.ccompiler import FLAGS, compiler, flags
from sarek_py.runtime.native import CBackend

ROOT = Path(__file__).parent.parent
FUZZ = bool(os.environ.get("SAREK_FUZZ"))
SPLIT = "if (sarek_edge && ("


def _is_split(src: str) -> bool:
    """Whether the C tests the leading guard only where sarek_edge says (NAT-65)."""
    return SPLIT in src or "if (!sarek_edge || (" in src


def _kernel(src: str) -> Kernel:
    return parse_module(src, "rowsplit.sk").kernels[0]


def _stage() -> Kernel:
    """The fused + swap advection stage offloaded with the rows numbering (NAT-30's)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advection_diffusion import variants

    for k in variants(256)["fused+swap"].kernels:
        names = {p.name for p in k.params}
        if k.name.endswith("_rows") and {"du", "u", "u_copy"} <= names:
            return k
    raise AssertionError("no rows stage kernel in the fused + swap program")


def _unchecked() -> CBackend:
    c_or_skip()
    be = CBackend()
    be.checked = False  # the simd rows (NAT-36), where the split applies
    return be


# ------------------------------------------------------------- NAT-65: the emitted C


def test_nat65_the_advection_stage_runs_its_rows_without_the_guard() -> None:
    """NAT-65: the unchecked advection stage tests its guard only where sarek_edge is true,
    and its launch computes the row's range once and runs three simd loops: guarded before
    the range, unguarded in it, guarded after it."""
    src = emit(_stage(), C99, checked=False).source
    assert SPLIT in src
    assert "long long sarek_lo = 0, sarek_hi = sarek_nx;" in src
    assert src.count("#pragma omp simd linear(sarek_t)") == 3
    loop = src.split("for (int sarek_x = sarek_in; sarek_x < sarek_out; sarek_x++) {")[1]
    assert re.search(r"\bfalse,\s+sarek_lane\);", loop.split("sarek_t++;")[0])
    assert len(re.findall(r"\btrue,\s+sarek_lane\);", src)) == 2
    # the j tests are the same for the whole row: they send it to the guarded loops
    assert src.count(") sarek_hi = 0;") == 2


def test_nat65_only_the_c_targets_unchecked_build_is_split() -> None:
    """NAT-65: CUDA and OpenCL, and a c build that checks its accesses (threads in order,
    NAT-8), keep the one guard every thread tests."""
    k = _kernel(MID)
    for d in (CUDA, OPENCL):
        assert "sarek_edge" not in emit(k, d, checked=False).source
    checked = emit(k, C99, checked=True).source
    assert "sarek_oob" in checked and "sarek_edge" not in checked
    assert _is_split(emit(k, C99, checked=False).source)


def test_nat65_a_parameter_named_sarek_edge_is_renamed() -> None:
    """NAT-65: sarek_edge is a hidden name: a kernel parameter of that name is renamed."""
    src = emit(_kernel(re.sub(r"\blo\b", "sarek_edge", MID)), C99, checked=False).source
    assert SPLIT in src and "int sarek_edge," not in src
    assert "bool sarek_edge," in src


# ---------------------------------------------------------- NAT-66: bitwise results

MID = """kernel mid(x : f32[], y : f32[], lo : i32, hi : i32) =
  let i = global_idx_x in
  if i < lo || i > hi then
    return;
  y[i] <- x[i] * 2.0 + 1.0
"""
# the same guard with <= and >=, written the other way round
MID_LE = """kernel mid_le(x : f32[], y : f32[], lo : i32, hi : i32) =
  let i = global_idx_x in
  if lo >= i + 1 || hi <= i - 1 then
    return;
  y[i] <- x[i] * 2.0 + 1.0
"""
# a negative stride: thread x of block b stores element n - 1 - (b * bd + x)
DOWN = """kernel down(x : f32[], y : f32[], lo : i32, hi : i32, n : i32) =
  let k = i64(n) - 1L - (i64(block_idx_x) * i64(block_dim_x) + i64(thread_idx_x)) in
  if k < i64(lo) || k >= i64(hi) || k < 0L || k >= i64(n) then
    return;
  let i = i32(k) in
  y[i] <- x[i] - 3.0
"""
# a test the same for the whole row (a flag), and offsets on both sides
FLAG = """kernel flag(x : f32[], y : f32[], lo : i32, hi : i32, off : bool) =
  let i = global_idx_x in
  if off || i - 3 < lo - 3 || i - 2 > hi - 2 then
    return;
  y[i] <- x[i] + 0.5
"""
# a 2-D launch: rows of a block's threads, y the row, x along it (the rows numbering)
ROWS2D = """kernel rows2d(x : f64[], y : f64[], lo : i32, hi : i32, w : i32) =
  let c = i64(block_idx_x) * i64(block_dim_x) + i64(thread_idx_x) in
  let r = i64(block_idx_y) * i64(block_dim_y) + i64(thread_idx_y) in
  if r >= i64(hi) || c < i64(lo) || c >= i64(w) || c > i64(hi) then
    return;
  let i = i32(r * i64(w) + c) in
  y[i] <- x[i] * 0.25 - 1.0
"""
# `if C then S`: the threads inside the range run S without testing C (the flat number,
# a statement after the branch)
ENTER = """kernel enter(x : f32[], y : f32[], lo : i32, hi : i32, off : bool) =
  let i = global_thread_id in
  if i >= lo && hi > i && i - 1 < hi && !off then
    y[i] <- x[i] * 2.0;
  y[i] <- y[i] + 1.0
"""
# the flat number in a leaving guard
FLAT = """kernel flat(x : f32[], y : f32[], lo : i32, hi : i32) =
  let i = global_thread_id in
  if i < lo || i >= hi then
    return;
  y[i] <- x[i] - 0.5
"""
# a branch that stores and leaves: the threads inside its range do both untested
STORES = """kernel stores(x : f32[], y : f32[], lo : i32, hi : i32) =
  let i = global_idx_x in
  if i > hi then
    y[i] <- 1.0;
    return;
  y[i] <- x[i] + 2.0
"""
CASES = {"mid": MID, "mid_le": MID_LE, "down": DOWN, "flag": FLAG, "enter": ENTER,
         "flat": FLAT, "stores": STORES}


def _inputs(k: Kernel, n: int, lo: int, hi: int) -> dict[str, Any]:
    rng = np.random.default_rng(n + 65)
    dt = np.float64 if "f64" in str(k.params[0].type) else np.float32
    args: dict[str, Any] = {"x": rng.standard_normal(n).astype(dt),
                            "y": np.full(n, -7.0, dt), "lo": np.int32(lo), "hi": np.int32(hi)}
    names = {p.name for p in k.params}
    if "n" in names:
        args["n"] = np.int32(n)
    if "off" in names:
        args["off"] = np.bool_(lo == 5)
    return args


def _both(k: Kernel, make: Callable[[], dict[str, Any]], threads: int, block: int,
          **kw: Any) -> None:
    """The kernel's launch on the interpreter and on the unchecked c build write the same
    bytes (the output starts as a sentinel, so a thread that runs and should not shows)."""
    ref, got = make(), make()
    get_backend("interp").run_kernel(k, ref, threads, block, **kw)
    _unchecked().run_kernel(k, got, threads, block, check_races=False, **kw)
    for name, want in ref.items():  # y, and x where a kernel writes it
        if isinstance(want, np.ndarray) and want.ndim:
            assert got[name].tobytes() == want.tobytes(), (k.name, name, threads, block, kw)


BOUNDS = [(0, 10**6), (5, 22), (13, 13), (30, 7), (-5, 3), (-(2**31), 2**31 - 1),
          (2**31 - 1, -(2**31)), (6, 200)]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("threads,block", [(37, 8), (37, 1), (0, 8), (1, 1), (64, 16),
                                            (211, 64)])
def test_nat66_guards_failing_inside_a_row_are_bitwise(name: str, threads: int,
                                                       block: int) -> None:
    """NAT-66: guards that fail in the middle of a row (lower and upper bounds, both, an
    empty range, bounds past the row and the type's extremes), with <, <=, >, >=, a
    negative stride, a test the same for the whole row, the flat number, `if C then S`
    with a statement after it, a branch that stores and returns, at odd counts (partial
    blocks), one-thread rows, 0 threads, write the interpreter's bytes on the unchecked c
    build."""
    k = _kernel(CASES[name])
    assert _is_split(emit(k, C99, checked=False).source), name
    n = max(threads, 1)
    for lo, hi in BOUNDS:
        _both(k, lambda lo=lo, hi=hi: _inputs(k, n, lo, hi), threads, block)


@pytest.mark.parametrize("grid,shape", [((3, 4), (5, 2)), ((1, 7), (9, 1)), ((2, 2), (1, 3))])
def test_nat66_rows_of_two_dimensional_blocks_are_bitwise(grid: tuple[int, int],
                                                          shape: tuple[int, int]) -> None:
    """NAT-66: a 2-D launch (several rows per block, partial grids): each row's range is
    its own, and the rows past the nest's height are sent to the guarded loops whole."""
    k = _kernel(ROWS2D)
    assert _is_split(emit(k, C99, checked=False).source)
    w = grid[0] * shape[0] - 2
    hgt = grid[1] * shape[1]
    n = w * hgt
    threads = grid[0] * shape[0] * grid[1] * shape[1]
    for lo, hi in [(0, 10**6), (1, 5), (3, 2), (-4, w - 1), (2, hgt - 1)]:
        def make(lo: int = lo, hi: int = hi) -> dict[str, Any]:
            a = _inputs(k, n, lo, hi)
            a["w"] = np.int32(w)
            return a
        _both(k, make, threads, shape[0] * shape[1], grid=grid, block_shape=shape)


def test_nat66_the_advection_stage_on_c_is_the_interpreters() -> None:
    """NAT-66: the example program fused + swap at odd sizes (rows cut by the nest's bounds
    in the middle of a block) leaves u as on the unchecked c build before NAT-65: the
    split build's bytes are compared with the same program's bytes with the split off."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from advection_diffusion import variants

    from sarek_py.host.interp import run_program

    prog = variants(8)["fused+swap"]
    for nx, ny in [(13, 9), (5, 3)]:
        preset = {"nx": nx, "ny": ny, "nt": 2}
        got = run_program(prog, preset, device=_unchecked(), check_races=False)
        mp = pytest.MonkeyPatch()
        try:
            mp.setattr("sarek_py.codegen.cstyle.row_guard", lambda k: None)
            base = _unchecked()
            ref = run_program(prog, preset, device=base, check_races=False)
            assert not _is_split(base.compiled(_stage(), False).emitted.source)
        finally:
            mp.undo()
        assert got.array("u").tobytes() == ref.array("u").tobytes(), (nx, ny)


# ----------------------------------------------------------- NAT-67: what is not split

NOT_SPLIT = {
    # a branch with an else: the threads inside the range would still choose
    "else": "let i = global_idx_x in\n  if i < hi then\n    y[i] <- 3.0\n  else\n"
            "    y[i] <- 4.0;\n",
    # a test of the flat number that is not an order
    "flat_ne": "let i = global_thread_id in\n  if i != lo || i < hi then\n    return;\n",
    # a stride of 2: the passing threads are not one range of x
    "stride2": "let i = 2 * thread_idx_x in\n  if i < lo || i > hi then\n    return;\n",
    # == and && give two ranges or a hole
    "equal": "let i = global_idx_x in\n  if i == lo then\n    return;\n",
    "and": "let i = global_idx_x in\n  if i < lo && i > hi then\n    return;\n",
    "not_equal": "let i = global_idx_x in\n  if i != lo then\n    return;\n",
    "enter_or": "let i = global_idx_x in\n  if i < lo || i > hi then\n    y[i] <- 5.0;\n",
    # a mutable local, a helper: not the launch function's to evaluate
    "local": "let mut m = lo in\n  let i = global_idx_x in\n  if i < m then\n    return;\n",
    "helper": "let i = global_idx_x in\n  if i < twice(lo) then\n    return;\n",
    # i32 arithmetic on x that may wrap: the value is not the affine one
    "wraps": "let i = global_idx_x + lo in\n  if i < hi then\n    return;\n",
    # a test that reads an array (memory is not the launch function's to read)
    "reads": "let i = global_idx_x in\n  if x[0] > 0.0 || i > hi then\n    return;\n",
}


@pytest.mark.parametrize("name", sorted(NOT_SPLIT))
def test_nat67_guards_that_are_not_one_range_are_tested_by_every_thread(name: str) -> None:
    """NAT-67: a guard testing the flat number with !=, a stride other than 1, ==, !=, &&
    in a leaving guard, || in an entering one, i32 arithmetic that may wrap, an array, a mutable local, a helper,
    or an if with an else, is not split (every thread tests it, as before) and stays
    bitwise."""
    src = ("pure fun twice(v : i32) : i32 =\n  return v / 2 * 2\n\n"
           "kernel ns(x : f32[], y : f32[], lo : i32, hi : i32) =\n  "
           + NOT_SPLIT[name] + "  let j = global_idx_x in\n  y[j] <- x[j] + 2.0\n")
    k = _kernel(src)
    assert rowsplit.row_guard(k) is None
    assert "sarek_edge" not in emit(k, C99, checked=False).source
    for lo, hi in [(3, 20), (20, 3), (-(2**31), 2**31 - 1)]:
        _both(k, lambda lo=lo, hi=hi: _inputs(k, 37, lo, hi), 37, 8)


def test_nat67_a_difference_past_64_bits_is_not_split() -> None:
    """NAT-67: i64 bounds whose difference from the row's first index could leave `long
    long` are not split; at the type's extremes the launch is the interpreter's."""
    k = _kernel("kernel big(y : f32[], lo : i64, hi : i64) =\n"
                "  let i = i64(global_idx_x) in\n"
                "  if i < lo || i > hi then\n    return;\n"
                "  y[i32(i)] <- 1.0\n")
    assert rowsplit.row_guard(k) is None
    for lo, hi in [(-(2**63), 2**63 - 1), (3, 2**63 - 1), (-(2**63), 9)]:
        def make(lo: int = lo, hi: int = hi) -> dict[str, Any]:
            return {"y": np.zeros(20, np.float32), "lo": np.int64(lo), "hi": np.int64(hi)}
        _both(k, make, 20, 8)


# --------------------------------------------------------- NAT-66: generated guards

_ATOMS = ("{x} < {a}", "{x} <= {a}", "{x} > {a}", "{x} >= {a}", "{a} < {x}", "{a} >= {x}",
          "{x} + {b} < {a}", "{a} - {x} > {b}", "{z} - {x} < {b}", "{x} - {b} == {a}", "off")


def _random_kernel(rng: np.random.Generator) -> Kernel:
    """A kernel whose guard is 1 to 4 tests of x (the thread's global x as an i32, or
    widened to i64) against a parameter or a constant."""
    wide = bool(rng.integers(2))
    sfx, x = ("L", "w") if wide else ("", "i")
    lo, hi = ("i64(lo)", "i64(hi)") if wide else ("lo", "hi")
    atoms = []
    for _ in range(int(rng.integers(1, 5))):
        form = _ATOMS[int(rng.integers(len(_ATOMS)))]
        a = [lo, hi, f"{int(rng.integers(-40, 60))}{sfx}"][int(rng.integers(3))]
        atoms.append(form.format(x=x, a=a, b=f"{int(rng.integers(-9, 9))}{sfx}", z=f"0{sfx}"))
    head = ("kernel gen(x : f32[], y : f32[], lo : i32, hi : i32, off : bool) =\n"
            "  let i = global_idx_x in\n  let w = i64(i) in\n")
    if rng.random() < 0.5:  # if C then S, S; T
        return _kernel(head + f"  if {' && '.join(atoms)} then\n    y[i] <- x[i] * 3.0;\n"
                       "  x[i] <- 0.5\n")
    return _kernel(head + f"  if {' || '.join(atoms)} then\n    return;\n"
                   "  y[i] <- x[i] * 3.0\n")


def test_nat66_random_guards_are_bitwise() -> None:
    """NAT-66: generated guards (1 to 4 tests of x, i32 or i64, against a parameter or a
    constant on either side, offsets, a negated x, ==, a flag) over odd counts and block
    sizes write the interpreter's bytes on the unchecked c build, split or not (``make
    fuzz`` size: 200 kernels; 12 otherwise). Both outcomes must occur, the split in at
    least half (a generator that stops reaching it fails)."""
    rng = np.random.default_rng(66)
    split = 0
    count = 200 if FUZZ else 12
    for _ in range(count):
        k = _random_kernel(rng)
        split += rowsplit.row_guard(k) is not None
        threads, block = int(rng.integers(0, 90)), int(rng.integers(1, 33))
        for lo, hi in [(int(rng.integers(-10, 60)), int(rng.integers(-10, 90))),
                       (0, 10**6)]:
            _both(k, partial(_inputs, k, max(threads, 1), lo, hi), threads, block)
    assert count // 2 <= split < count, (split, count)


def _nd_guard_kernel(rng: np.random.Generator, axes: int) -> Kernel:
    """A kernel over an n-D launch of ``axes`` axes whose guard is 1 to 4 tests of x-based
    values (i32 or i64, offsets, negated, strided) against values fixed in a row (the other
    thread intrinsics, constants)."""
    def pick(xs: list[str]) -> str:
        return xs[int(rng.integers(len(xs)))]

    fixed = [f"{k}_{a}" for k in ("block_idx", "block_dim", "grid_dim", "thread_idx",
                                  "global_idx") for a in "xyz"[:axes]
             if f"{k}_{a}" not in ("thread_idx_x", "global_idx_x")]
    fixed += ["3", "0", "block_idx_x * block_dim_x", "block_dim_x - 2"]
    moving = ["c", "c - 2", "5 - c", "0 - c", "thread_idx_x", "global_idx_x - block_idx_x",
              "2 * c", "global_thread_id"]
    atoms = []
    for _ in range(int(rng.integers(1, 5))):
        op = pick(["<", "<=", ">", ">=", "==", "!="])
        side, other = pick(moving), pick(fixed)
        if rng.random() < 0.25:
            side = pick(fixed)  # a test the same for the whole row
        if rng.random() < 0.4:
            side, other = f"i64({side})", f"i64({other})"
        atoms.append(f"{side} {op} {other}" if rng.random() < 0.5 else f"{other} {op} {side}")
    c = pick(["thread_idx_x", "global_idx_x", "global_idx_x + 1", "thread_idx_x - 4",
              "global_thread_id"])
    head = ("kernel g(x : f32[], out : f32[], iout : i32[]) =\n"
            f"  let t = global_thread_id in\n  let c = {c} in\n")
    if rng.random() < 0.5:  # if C then S, S; T
        return _kernel(head + f"  if {' && '.join(atoms)} then\n    iout[t] <- c;\n"
                       "  out[t] <- x[(c % 23 + 23) % 23] * 1.5f\n")
    return _kernel(head + f"  if {' || '.join(atoms)} then\n    return;\n"
                   "  iout[t] <- c;\n  out[t] <- x[(c % 23 + 23) % 23] * 1.5f\n")


def test_nat66_random_nd_guards_are_bitwise() -> None:
    """NAT-66: generated guards over n-D launches (tests/test_nd_launch_diff.py's grids and
    blocks of 1 to 3 axes, odd extents, partial grids; tests of x against the other
    intrinsics and constants, i32 and i64, split or not) write the interpreter's bytes on
    the unchecked c build (``make fuzz`` size: 300 kernels; 16 otherwise); some must be
    split and some not."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_nd_launch_diff import _run, case

    rng = np.random.default_rng(6600)
    be, interp = _unchecked(), get_backend("interp")
    count = 300 if FUZZ else 16
    split = 0
    for seed in range(count):
        _, grid, block, threads, _ = case(seed)
        k = _nd_guard_kernel(rng, max(len(grid), len(block)))
        split += rowsplit.row_guard(k) is not None
        want, got = _run(interp, k, grid, block, threads), _run(be, k, grid, block, threads)
        assert not isinstance(want, str) and not isinstance(got, str), (seed, want, got)
        assert want[0].tobytes() == got[0].tobytes() and want[1].tobytes() == got[1].tobytes(), \
            (seed, grid, block, threads, str(k))
    assert 0 < split < count, (split, count)


# ------------------------------------------------------ NAT-68: the unguarded loop vectorises


def _vectorised(cc: str, opts: list[str], src: str, tmp_path: Path) -> int:
    """How many loops of ``src`` the compiler reports vectorised with ``opts``."""
    path = tmp_path / "unit.c"
    path.write_text(src)
    done = subprocess.run([cc, *opts, "-S", str(path), "-o", str(tmp_path / "u.s"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0 or "-fopt-info" in done.stderr:
        pytest.skip(f"the compiler {cc} gives no vectoriser report: {done.stderr[:200]}")
    return len(re.findall(r"unit\.c:\d+:\d+: optimized: loop vectorized", done.stderr))


@pytest.mark.skipif(not (sys.platform.startswith("linux") and os.uname().machine == "x86_64"),
                    reason="the baseline build checked here is x86-64's")
def test_nat68_the_unguarded_row_of_the_stage_vectorises_on_any_x86_64(
        tmp_path: Path) -> None:
    """NAT-68: the advection stage's unguarded loop vectorises without masked stores: built
    for any x86-64 (no -march, no clones), the split stage has a vectorised loop (before
    NAT-65 its one guarded loop had none there: baseline x86-64 cannot mask a store), and
    with the backend's own flags too."""
    try:
        cc = compiler()
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    src = emit(_stage(), C99, checked=False).source
    baseline = [f for f in FLAGS if f != "-shared"] + ["-DSAREK_NO_CLONES"]
    assert _vectorised(cc, baseline, src, tmp_path) >= 1
    assert _vectorised(cc, [f for f in flags() if f != "-shared"], src, tmp_path) >= 1


# ------------------------------------------------------------- NAT-69: measured


def test_nat69_the_measuring_script_compares_bytes_at_a_small_size() -> None:
    """NAT-69: benchmarks/native_rows.py times the stage's launch function called directly,
    with and without the split, and fails unless both write the same bytes."""
    c_or_skip()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "native_rows.py"),
                           "--sizes", "37,64", "--reps", "2", "--repeat", "1"],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("same") == 2, done.stdout


def test_nat65_every_rule_of_the_row_split_is_cited() -> None:
    """Each rule NAT-65 … NAT-69 is cited by a test of this file."""
    assert_rules_cited(__file__, "native", "NAT", 65, 69)
