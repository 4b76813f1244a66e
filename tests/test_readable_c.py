"""Readable generated C: named wrapping operations, exact bounds-check arguments, ranges of
``%`` and ``/`` by a variable, and the rows kernel's block numbers computed once and in 32
bits (specs/codegen.md CG-25 … CG-27, specs/tiling.md TIL-12)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_codegen_ranges import ENDS, OUT32, OUT64, A, X, Y, Z, int_exprs
from test_rows import nest2, program
from test_tiling import backends, nest3

from sarek_py.analysis.ranges import int_range, type_range
from sarek_py.codegen import CUDA, OPENCL, emit_cuda, emit_opencl
from sarek_py.codegen.cstyle import emit, emit_module
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.host.tiling import (
    row_blocks,
    row_count,
    row_grid,
    row_nest,
    rows_pad_too_much,
)
from sarek_py.ir.diagnostics import BackendUnavailable, InterpError
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import Program, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Cond,
    Const,
    Expr,
    If,
    Intrinsic,
    Kernel,
    Let,
    Ref,
    Return,
    Store,
    Unary,
    UnaryOp,
    iter_stmts,
    var,
)
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import Scalar, array
from sarek_py.ir.visit import iter_exprs
from sarek_py.runtime import get_backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
ROOT = Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")

STENCIL = """
kernel stencil(a : f32[], b : f32[]) =
  let i = global_thread_id in
  b[i] <- a[i - 1] + a[i + 1];
  if i >= 1 && i < length(a) - 1 then
    b[i] <- a[i - 1] + a[i + 1]

kernel inner(a : f32[], b : f32[]) =
  for k = 1 to length(a) - 2 do
    b[k] <- a[k - 1] + a[k + 1]
  done

kernel hash(a : i32[], p : i64, out : i64[]) =
  let i = global_thread_id in
  let h = a[i] * 65599 + i in
  out[i] <- i64(h) * p << 3L;
  out[i + 0] <- -p + i64(abs(h))
"""


def module_kernel(name: str) -> Kernel:
    return parse_module(STENCIL).kernel(name)


def opencl_or_skip() -> object:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def kernel_part(src: str) -> str:
    """The text of the (last) kernel's definition."""
    start = max(src.rfind("__kernel void"), src.rfind('extern "C" __global__'))
    return src[start:]


# ----------------------------------------------------------------------------- CG-25


@pytest.mark.parametrize("emitter", [emit_opencl, emit_cuda])
def test_cg25_unproved_offset_is_named_and_proved_one_is_plain(emitter: object) -> None:
    """CG-25: the user's ``i - 1`` is ``sarek_sub_i32(i, 1)`` where ``i`` may be the
    most negative int (a global thread id), and the plain ``i - 1`` under ``i >= 1``."""
    assert callable(emitter)
    for checked in (True, False):
        src = kernel_part(emitter(module_kernel("stencil"), checked=checked))
        first, second = src.split("if (i >= 1", 1)
        assert "sarek_sub_i32(i, 1)" in first and "sarek_add_i32(i, 1)" in first
        assert "_i32" not in second
        if checked:
            assert "sarek_get1(a, 4, i - 1, a_len0) + sarek_get1(a, 5, i + 1, a_len0)" in second
        else:
            assert "a[i - 1] + a[i + 1]" in second
        # no cast chain anywhere: the unsigned types live in the named functions only
        assert "unsigned" not in src and "(uint)" not in src


def test_cg25_offsets_of_a_loop_index_bounded_by_its_loop_are_plain() -> None:
    """CG-25 with CG-18: ``for k = 1 to length(a) - 2`` bounds k to 1 .. INT_MAX - 2, so
    ``k - 1`` and ``k + 1`` are the plain operators and no wrapping function is emitted."""
    for emitter in (emit_opencl, emit_cuda):
        src = emitter(module_kernel("inner"), checked=False)
        assert "a[k - 1] + a[k + 1]" in src
        assert "sarek_add" not in src and "sarek_sub" not in src


def test_cg25_each_function_once_and_only_those_used() -> None:
    """CG-25: one definition per operation and type used, before the kernel, in the
    order i32 then i64; emit_module joins two kernels' functions once each (CG-16)."""
    src = emit_opencl(module_kernel("hash"))
    for name in ("sarek_mul_i32", "sarek_add_i32", "sarek_mul_i64", "sarek_shl_i64",
                 "sarek_neg_i64", "sarek_add_i64", "sarek_abs_i32"):
        defs = [m.start() for m in re.finditer(rf"^\w[\w ]* {name}\(", src, re.M)]
        assert len(defs) == 1, name
        assert defs[0] < src.index("__kernel void")
    assert "sarek_sub_i32" not in src and "sarek_neg_i32" not in src
    assert "= sarek_add_i32(sarek_mul_i32(" in src
    assert "sarek_shl_i64(sarek_mul_i64((long)h, p), 3L)" in src
    both = emit_module([module_kernel("stencil"), module_kernel("hash")], OPENCL)
    assert both.count("int sarek_add_i32(int a, int b) {") == 1
    assert both.count("// wrapping integer arithmetic, CG-18") == 1
    cu = emit_module([module_kernel("stencil"), module_kernel("hash")], CUDA)
    assert cu.count("__device__ int sarek_sub_i32(int a, int b) {") == 1


EDGE32 = np.array([2**31 - 1, 2**31 - 2, -(2**31), -(2**31) + 1, -1, 0, 1, 65599, 46341,
                   -46341, 12345678], np.int64)


def test_cg25_named_operations_are_bitwise_the_interpreters() -> None:
    """CG-25: every named operation at and around the ends of its type gives the
    interpreter's bytes on OpenCL (i32 and i64, nested as a chain)."""
    be = opencl_or_skip()
    src = """
kernel ops(x : i32[], y : i32[], p : i64[], q : i64[], o32 : i32[,], o64 : i64[,]) =
  let i = global_thread_id in
  let a = x[i] in
  let b = y[i] in
  let c = p[i] in
  let d = q[i] in
  o32[i, 0] <- a + b;
  o32[i, 1] <- a - b - 1;
  o32[i, 2] <- a * b * 3;
  o32[i, 3] <- -a;
  o32[i, 4] <- a << (b & 31);
  o32[i, 5] <- abs(a) + -(-b);
  o64[i, 0] <- c + d;
  o64[i, 1] <- c - d * 7L;
  o64[i, 2] <- -(c * d) << (d & 63L);
  o64[i, 3] <- abs(c) - 1L
"""
    k = parse_module(src).kernel("ops")
    assert "sarek_shl_i32(a, b & 31)" in emit_opencl(k)
    rng = np.random.default_rng(25)
    x = np.concatenate([EDGE32, rng.integers(-(2**31), 2**31, 53)]).astype(np.int32)
    y = np.roll(x, 3)
    e64 = np.array([2**63 - 1, -(2**63), -(2**63) + 1, -1, 0, 1, 2**31, 2**32 + 5],
                   dtype=np.int64)
    p = np.resize(np.concatenate([e64, rng.integers(-(2**62), 2**62, 9)]), x.size)
    q = np.roll(p, 5)
    n = x.size
    outs = {}
    for b in (get_backend("interp"), be):
        o32, o64 = np.zeros((n, 6), np.int32), np.zeros((n, 4), np.int64)
        b.run_kernel(k, {"x": x, "y": y, "p": p, "q": q, "o32": o32, "o64": o64}, n, 32)
        outs[b.name] = (o32.tobytes(), o64.tobytes())
    assert outs["interp"] == outs[be.name]  # type: ignore[attr-defined]


@needs_nvcc
def test_cg25_cuda_compiles_without_fma(tmp_path: Path) -> None:
    """CG-25 with CG-13: the named functions compile with nvcc --fmad=false; the PTX of
    the stencil, hash and rows kernels has no fma.rn."""
    k2, k3 = row_nest(nest2()).kernel, row_nest(nest3()).kernel
    src = emit_module([module_kernel("stencil"), module_kernel("hash"), k2,
                       Kernel("plus_k_rows", k3.params, k3.locals, k3.body)], CUDA)
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    subprocess.run([NVCC or "nvcc", "--fmad=false", "-ptx", str(cu), "-o",
                    str(tmp_path / "k.ptx")], check=True, capture_output=True)
    assert "fma.rn" not in (tmp_path / "k.ptx").read_text()


# ----------------------------------------------------------------------------- CG-26


@pytest.mark.parametrize(("lower", "index"), [(-1, 2**31 - 1), (1, -(2**31)), (-5, 2**31 - 3)])
def test_cg26_fault_at_an_index_near_the_end_of_int_reports_the_interpreters_index(
        lower: int, index: int) -> None:
    """CG-26 (regression: failed before the fix, the device reported index -2147483649
    for 2147483647): the distance of an index from a nonzero lower bound is counted in 64
    bits in the check, so the device's fault names the interpreter's index."""
    be = opencl_or_skip()
    k = parse_module(f"kernel k(a : f32[{lower}:], n : i32) =\n  a[n] <- 1.0\n").kernel("k")
    messages = []
    for b in (get_backend("interp"), be):
        with pytest.raises(InterpError) as info:
            b.run_kernel(k, {"a": np.zeros(4, np.float32), "n": index}, 1, 1)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert f"at index [{index}]" in messages[1]


def test_cg26_check_arguments_text() -> None:
    """CG-26: unproved distance in 64 bits in the check only; the access after the check
    keeps the int offset; a proved distance stays plain."""
    k = parse_module("kernel k(a : f32[-1:], n : i32) =\n  a[n] <- 1.0;\n"
                     "  if n >= 0 && n < 100 then a[n] <- 2.0\n").kernel("k")
    cl = emit_opencl(k)
    assert "sarek_set1(a, 1, (long)n + 1, a_len0, 1.0f);" in cl
    assert "sarek_set1(a, 2, n + 1, a_len0, 2.0f);" in cl
    assert "sarek_set1(a, 1, (long long)n + 1, a_len0, 1.0f);" in emit_cuda(k)
    # a shared array's check keeps CG-22's own `if` and the int offset
    s = parse_module("kernel k(n : i32)\n  shared t : f32[8]\n  =\n  t[n - 1] <- 1.0f\n")
    sh = emit_opencl(s.kernel("k"))
    assert ("if (sarek_in1(sarek_oob, 1, sarek_sub_i32(n, 1), 8)) {\n"
            "    t[sarek_sub_i32(n, 1)] = 1.0f;") in sh
    # unchecked: no check, the plain offset (CG-24)
    plain = emit_opencl(k, checked=False)
    assert "a[n + 1] = 1.0f;" in plain and "(long)n" not in plain


# ----------------------------------------------------------------------------- CG-27


@st.composite
def div_exprs(draw: st.DrawFn) -> tuple[Scalar, Expr]:
    t = draw(st.sampled_from([Scalar.I32, Scalar.I64]))
    a = draw(int_exprs(t, 2))
    b = draw(int_exprs(t, 2))
    op = draw(st.sampled_from([BinaryOp.MOD, BinaryOp.DIV]))
    if draw(st.booleans()):
        b = Intrinsic("max", (b, Const(draw(st.sampled_from([1, 2, 3])), t)))
    return t, Binary(op, a, b)




DIVISION_CASES = given(div_exprs(), st.sampled_from(ENDS[Scalar.I32]),
                       st.sampled_from(ENDS[Scalar.I32]), st.sampled_from(ENDS[Scalar.I64]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@DIVISION_CASES
def test_cg27_ranges_of_division_by_a_variable_contain_every_value(
        te: tuple[Scalar, Expr], x: int, y: int, z: int) -> None:
    """CG-27: ``a % b`` and ``a / b`` (divisor proved >= 1) by variables, at and around the
    ends of the types: the interpreter's value lies in ``int_range``'s interval."""
    division_range_holds(te, x, y, z)


@pytest.mark.slow
@settings(max_examples=2000 if FUZZ else 200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@DIVISION_CASES
def test_cg27_ranges_of_division_by_a_variable_fuzz(
        te: tuple[Scalar, Expr], x: int, y: int, z: int) -> None:
    """CG-27 at make fuzz's size (SAREK_FUZZ=1: 2000 expressions)."""
    division_range_holds(te, x, y, z)


def division_range_holds(te: tuple[Scalar, Expr], x: int, y: int, z: int) -> None:
    t, e = te
    out = OUT32 if t is Scalar.I32 else OUT64
    k = Kernel("r", (X, Y, Z, A, OUT32, OUT64), (), Store(out, (Const(0, Scalar.I32),), e))
    bufs = {"out32": np.zeros(1, np.int32), "out64": np.zeros(1, np.int64)}
    try:
        run_kernel(k, {"x": np.int32(x), "y": np.int32(y), "z": np.int64(z),
                       "a": np.zeros(5, np.float32), **bufs}, 1, 1)
    except InterpError:
        return  # a zero divisor, INT_MIN / -1: undefined, never computed (CG-7)
    lo, hi = int_range(e, {})
    assert type_range(t)[0] <= lo <= hi <= type_range(t)[1]
    assert lo <= int(bufs[out.name][0]) <= hi, (e, lo, hi)


def test_cg27_examples() -> None:
    n = var("n", Scalar.I32)
    b = Intrinsic("block_idx_x")
    assert int_range(Binary(BinaryOp.MOD, b, Ref(n)), {}) == (0, 2**31 - 1)
    assert int_range(Binary(BinaryOp.MOD, Ref(n), Const(7, Scalar.I32)), {}) == (-6, 6)
    assert int_range(Binary(BinaryOp.MOD, Ref(n), Ref(n)), {}) == (-(2**31 - 1), 2**31 - 1)
    one = Intrinsic("max", (Ref(n), Const(1, Scalar.I32)))
    assert int_range(Binary(BinaryOp.DIV, b, one), {}) == (0, 2**31 - 1)
    assert int_range(Binary(BinaryOp.DIV, Const(100, Scalar.I32), one), {}) == (0, 100)
    # a divisor that may be negative: the whole range
    assert int_range(Binary(BinaryOp.DIV, b, Ref(n)), {}) == type_range(Scalar.I32)


# ----------------------------------------------------------------------------- TIL-12


def block_lets(k: Kernel) -> list[Let]:
    """The kernel's lets before its first ``if … then return``."""
    out = []
    for s in iter_stmts(k.body):
        if isinstance(s, If) and isinstance(s.then, Return):
            break
        if isinstance(s, Let):
            out.append(s)
    return out


@pytest.mark.parametrize("make", [nest2, nest3])
def test_til14_no_thread_divides_to_find_its_place(make: object) -> None:
    """TIL-14 (was TIL-12's 32-bit division): on its grid of two or three dimensions a
    thread of the rows kernel reads its place from block_idx_x/y/z and divides nothing
    before its guard; the kernel has no blocks-per-row parameter."""
    assert callable(make)
    k = row_nest(make()).kernel
    divs = [e for s in block_lets(k) for e in iter_exprs(s.value)
            if isinstance(e, Binary) and e.op in (BinaryOp.DIV, BinaryOp.MOD)]
    assert divs == []
    assert "rows_c" not in {p.name for p in k.params}
    axes = {e.name for s in block_lets(k) for e in iter_exprs(s.value)
            if isinstance(e, Intrinsic)}
    assert {"block_idx_x", "block_idx_y", "thread_idx_x"} <= axes
    assert ("block_idx_z" in axes) == (make is nest3)
    for src in (emit_opencl(k), emit_cuda(k)):
        head = kernel_part(src).split("return;", 1)[0]
        assert "/" not in head.replace("//", "") and "%" not in head, head


@needs_nvcc
@pytest.mark.parametrize("make", [nest2, nest3])
def test_til14_ptx_has_no_division(make: object, tmp_path: Path) -> None:
    """TIL-14 on the machine code: the PTX of the rows kernel reads %ctaid.y and divides
    nothing (before TIL-14, 32-bit div/rem by rows_c; before TIL-12, 64-bit ones)."""
    assert callable(make)
    cu = tmp_path / "r.cu"
    cu.write_text(emit_cuda(row_nest(make()).kernel, checked=False))
    subprocess.run([NVCC or "nvcc", "--fmad=false", "-ptx", str(cu), "-o",
                    str(tmp_path / "r.ptx")], check=True, capture_output=True)
    ptx = (tmp_path / "r.ptx").read_text()
    assert not re.search(r"\b(div|rem)\.[su](32|64)\b", ptx), ptx
    assert "%ctaid.y" in ptx
    assert "fma.rn" not in ptx


def test_til14_host_grid_and_flat_when_it_does_not_fit() -> None:
    """TIL-12, TIL-14, TIL-11: the grid is (ceil(n_c / block), n_next[, n_others]); a row
    of more than INT_MAX blocks, a next extent or a product of the others' over 65535
    (CUDA's y/z limit) is launched flat."""
    rk = row_nest(nest2())
    assert row_blocks(rk, (3, 300), 256) == 2 and row_blocks(rk, (3, 256), 256) == 1
    assert row_grid(rk, (3, 300), 256) == (2, 3)
    assert not rows_pad_too_much(rk, (1, 2**31 - 1), 1)
    assert rows_pad_too_much(rk, (1, 2**31), 1)
    assert not rows_pad_too_much(rk, (65535, 256), 256)
    assert rows_pad_too_much(rk, (65536, 256), 256)
    r3 = row_nest(nest3())
    assert row_grid(r3, (4, 5, 300), 256) == (2, 5, 4)
    assert not rows_pad_too_much(r3, (65535, 1, 256), 256)
    assert rows_pad_too_much(r3, (65536, 1, 256), 256)


SHAPES = [(1, 1), (3, 256), (5, 300), (70, 33), (2, 513)]


@pytest.mark.parametrize("block", [32, 64, 256])
def test_til12_rows_match_the_sequential_nest_on_every_backend(block: int) -> None:
    """TIL-12 (TIL-8): the 32-bit numbering runs every iteration once, 2-D and 3-D."""
    rk = row_nest(nest2(lower=(1, -2)))
    for shape in SHAPES:
        n, m = shape
        a = np.random.default_rng(12).standard_normal(shape).astype(np.float32)
        expect = 2 * a + np.arange(1, n + 1, dtype=np.float32)[:, None]
        for be in backends():
            b = np.full(shape, np.nan, np.float32)
            be.run_kernel(rk.kernel, {"a": a, "b": b, "n": n, "m": m},
                          row_count(rk, shape, block), block,
                          grid=row_grid(rk, shape, block), block_shape=(block,))
            assert b.tobytes() == expect.tobytes(), (be.name, shape, block)
    r3 = row_nest(nest3())
    for shape3 in [(3, 5, 7), (2, 40, 300), (4, 1, 1)]:
        a3 = np.random.default_rng(3).standard_normal(shape3)
        expect3 = a3 + np.arange(shape3[0], dtype=np.float64)[:, None, None]
        for be in backends():
            b3 = np.full(shape3, np.nan)
            p, n3, m3 = shape3
            be.run_kernel(r3.kernel, {"a": a3, "b": b3, "p": p, "n": n3, "m": m3},
                          row_count(r3, shape3, block), block,
                          grid=row_grid(r3, shape3, block), block_shape=(block,))
            assert b3.tobytes() == expect3.tobytes(), (be.name, shape3, block)


@pytest.mark.parametrize("name", ["place", "rows_c", "place_0", "a_64", "b_64", "z_b"])
def test_til12_new_names_never_capture_a_host_name(name: str) -> None:
    """TIL-12 with TIL-10's naming: a host scalar called like the rows kernel's new
    parameter or let, read in the body, keeps its value through print and parse."""
    p = parse_program(f"""
program p
  var {name} : i32 = 5;
  var w : f64[4, 300];
begin
  parallel for (a = 0 to 3, b = 0 to 299) do w[a, b] <- f64(a * 1000 + b + {name}) done
end
""")
    ref = run_program(p).array("w")
    q = offload(p)
    again = parse_program(print_program(q))
    for be in backends():
        got = run_program(again, device=be).array("w")
        assert got.tobytes() == ref.tobytes(), be.name


def test_til12_offloaded_program_is_bitwise_on_opencl() -> None:
    """TIL-12: the offloaded stencil of tests/test_rows.py, launched in rows (and flat
    when rows pad too much), writes the interpreter's bytes."""
    be = opencl_or_skip()
    loop = ("parallel for (j = 0 to m + 1, i = 0 to n + 1) do u[j, i] <- f64(j * 1000 + i) "
            "done; parallel for (j = 0 to m - 1, i = 0 to n - 1) do "
            "w[j, i] <- u[j + 1, i] - 0.5 * u[j, i + 2] + u[j + 2, i + 1] done")
    p = parse_program(program(loop))
    q = offload(p)
    for n in (1, 100, 255, 256, 257, 300, 1000):
        ref = run_program(p, {"n": n})
        got = run_program(q, {"n": n}, device=be, check_races=False)
        assert got.array("w").tobytes() == ref.array("w").tobytes(), n


def test_til12_advection_dump_reads_like_the_source() -> None:
    """CG-25, TIL-14 on the example of the issue: the rows kernels of
    examples/advection_diffusion.sk read their place from blockIdx.x and blockIdx.y."""
    prog = parse_program((ROOT / "examples" / "advection_diffusion.sk").read_text())
    q = offload(prog)
    rows = [k for k in _kernels(q) if k.name.endswith("_rows")]
    assert len(rows) == 3  # its three parallel loops
    for k in rows:
        body = kernel_part(emit(k, CUDA).source)
        assert "long long z_j = (long long)(int)blockIdx.y;" in body
        assert "(long long)(int)blockIdx.x * (long long)(int)blockDim.x" in body
        assert "unsigned" not in body and "1LL) /" not in body and "1LL) %" not in body


def _kernels(q: Program) -> list[Kernel]:
    seen: dict[str, Kernel] = {}
    for s in iter_host(q.body):
        if isinstance(s, Launch):
            seen.setdefault(s.kernel.name, s.kernel)
    return list(seen.values())


def test_cg25_unary_and_cond_shapes_still_typecheck() -> None:
    """CG-25: a named operation inside a conditional and a negated one compile on
    OpenCL (the functions return the signed type, so C's precedence is untouched)."""
    be = opencl_or_skip()
    a, out = var("a", Scalar.I32), var("out", array(Scalar.I32, 1))
    e = Cond(Binary(BinaryOp.GT, Ref(a), Const(0, Scalar.I32)),
             Unary(UnaryOp.NEG, Binary(BinaryOp.SUB, Ref(a), Const(1, Scalar.I32))),
             Binary(BinaryOp.MUL, Ref(a), Ref(a)))
    k = Kernel("k", (a, out), (), Store(out, (Const(0, Scalar.I32),), e))
    for v in (-(2**31), -1, 0, 1, 2**31 - 1, 46341):
        res = []
        for b in (get_backend("interp"), be):
            o = np.zeros(1, np.int32)
            b.run_kernel(k, {"a": v, "out": o}, 1, 1)  # type: ignore[attr-defined]
            res.append(o.tobytes())
        assert res[0] == res[1], v
    assert "sarek_mul_i32(a, a)" in emit(k, OPENCL).source


OCLGRIND = shutil.which("oclgrind")

ROWS_SCRIPT = r"""
import sys
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

be = get_backend("opencl")
print("device:", be.device_name, flush=True)
p = parse_program(open(sys.argv[1]).read())
for n in (40, 3):  # rows (40 of 64 per row: little padding), flat (3 of 32: too much)
    got = run_program(offload(p, block_size=32), {"n": n}, device=be, check_races=False)
    ref = run_program(p, {"n": n})
    assert got.array("w").tobytes() == ref.array("w").tobytes(), n
    print("ran", n, flush=True)
"""


@pytest.mark.skipif(OCLGRIND is None, reason="oclgrind is not installed (Debian: oclgrind)")
def test_til12_rows_and_named_operations_under_oclgrind(tmp_path: Path) -> None:
    """TIL-12, CG-25, CG-26 with CG-17: the offloaded stencil (rows kernels with the
    host's rows_c, named wrapping operations, 64-bit check arguments) makes no
    out-of-bounds access and no data race under ``oclgrind --data-races``."""
    loop = ("parallel for (j = 0 to m + 1, i = 0 to n + 1) do u[j, i] <- f64(j * 1000 + i) "
            "done; parallel for (j = 0 to m - 1, i = 0 to n - 1) do "
            "w[j, i] <- u[j + 1, i] - 0.5 * u[j, i + 2] + u[j + 2, i + 1] done")
    src = tmp_path / "p.sk"
    src.write_text(program(loop))
    script = tmp_path / "rows_oclgrind.py"
    script.write_text(ROWS_SCRIPT)
    assert OCLGRIND is not None
    proc = subprocess.run([OCLGRIND, "--data-races", sys.executable, str(script), str(src)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Oclgrind" in proc.stdout and "ran 40" in proc.stdout and "ran 3" in proc.stdout
    assert not re.search(r"Invalid (read|write)|data race|divergence|FATAL", proc.stderr,
                         re.I), proc.stderr[-3000:]


# ----------------------------------------------------------------------------- TIL-13


def _dump(tmp_path: Path) -> Path:
    out = tmp_path / "dump"
    proc = subprocess.run([sys.executable, "-m", "sarek_py.cli.main", "opt",
                           str(ROOT / "examples" / "advection_diffusion.sk"), "-p", "fuse",
                           "-p", "offload", "--dump-dir", str(out),
                           # the fused kernels whatever the calibrated cost table of the
                           # default backend predicts (LF-63): the pair's C is the subject
                           "--fusion-threshold", "64"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


def _kernel_text(src: str, name: str) -> str:
    start = src.index(f" {name}(\n")
    return src[start:src.index("\n}\n", start)]


def test_til13_offsets_of_an_offloaded_loop_index_are_plain(tmp_path: Path) -> None:
    """TIL-13 with CG-25, on the issue's example (`opt -p fuse -p offload`): in the rows
    kernels the user's ``u[j, i - 1]``, ``u[j, i - 1 - 1]`` and ``u[j + 2, i]`` are plain
    C (the kernel's own guard proves them in range), with no named wrapping operation;
    the flat kernel, whose bounds nothing bounds, names them (``sarek_sub_i32(i, 1)``)."""
    dump = _dump(tmp_path)
    cu = (dump / "kernels.cu").read_text()
    # the fused stage (the fluxes are deallocated: no last-iteration branch, LF-110)
    rows = _kernel_text(cu, "advection_diffusion_loop_2_rows")
    flat = _kernel_text(cu, "advection_diffusion_loop_2")
    assert "sarek_get2(u, 1, j + 1, u_len0, i - 1 + 1, u_len1)" in rows
    assert "sarek_get2(u, 5, j + 1, u_len0, i - 1 - 1 + 1, u_len1)" in rows
    assert "sarek_get2(u, 20, (long long)(j + 2) + 1, u_len0, i + 1, u_len1)" in rows
    assert "sarek_add_i32" not in rows and "sarek_sub_i32" not in rows
    assert "int i = (int)i_64;" in rows
    assert "sarek_sub_i32(i, 1)" in flat and "sarek_add_i32(j, 2)" in flat
    for k in ("advection_diffusion_loop_2_rows", "advection_diffusion_loop_3_rows"):
        head = _kernel_text(cu, k).split("return;", 1)[0].split(") {", 1)[1]
        code = [ln for ln in head.splitlines() if not ln.strip().startswith("//")]
        # no division before the guard: the place is the block's index (TIL-14)
        assert [ln.strip() for ln in code if "/" in ln or "%" in ln] == [], code
    # the host reads the condition of the proof in the printed program
    text = (dump / "02-offload.sk").read_text()
    assert "|| (ny > 2147483645 || nx > 2147483645)" in text
    assert "1 < -2147483646" not in text  # constant bounds are decided by the offload


@needs_nvcc
def test_til13_example_kernels_compile_without_fma(tmp_path: Path) -> None:
    """TIL-13 with CG-13: the dumped kernels.cu of the example compiles to PTX without
    fma.rn and without a 64-bit division."""
    dump = _dump(tmp_path)
    subprocess.run([NVCC or "nvcc", "--fmad=false", "-ptx", str(dump / "kernels.cu"), "-o",
                    str(tmp_path / "k.ptx")], check=True, capture_output=True)
    ptx = (tmp_path / "k.ptx").read_text()
    entries = {b.split("(", 1)[0].strip(): b for b in ptx.split(".entry ")[1:]}
    rows = [n for n in entries if n.endswith("_rows")]
    assert len(rows) == 3  # the initial field, the fused stage, the copy back (LF-110)
    for name, body in entries.items():
        # the first loop calls exp, whose CUDA implementation uses explicit FMAs (CG-13)
        if name not in ("advection_diffusion_loop", "advection_diffusion_loop_rows"):
            assert "fma.rn" not in body, name
    for name in rows:
        assert not re.search(r"\b(div|rem)\.[su]64\b", entries[name]), name


NEAR = """
program p
  var lo : i32 = 0; var hi : i32 = 31;
  var w : i32[2, 32];
begin
  parallel for (j = 0 to 1, i = lo to hi) do w[j, i - lo] <- i + 2 done
end
"""


@pytest.mark.parametrize(("lo", "hi", "rows"), [
    (0, 31, True),
    (2**31 - 34, 2**31 - 3, True),                   # i + 2 reaches INT_MAX: proved
    (2**31 - 33, 2**31 - 2, False),                  # i + 2 wraps: the flat kernel
    (2**31 - 32, 2**31 - 1, False),
    (-(2**31), -(2**31) + 31, True)])
def test_til13_host_launches_flat_where_an_offset_could_wrap(lo: int, hi: int,
                                                             rows: bool) -> None:
    """TIL-13: the host launches the rows kernel only when the bounds keep every offset of
    the loop variable in range, the flat kernel (which wraps, CG-25) otherwise; the
    results are the interpreter's either way, on every backend."""
    from sarek_py.host.interp import HostInterp
    from sarek_py.runtime.interp import InterpBackend

    p = parse_program(NEAR)
    q = offload(p, block_size=32)
    rk = next(k for k in _kernels(q) if k.name.endswith("_rows"))
    assert "min(i64(hi_1), 2147483645L)" in print_program(q)  # the kernel's own guard
    ref = run_program(p, {"lo": lo, "hi": hi}).array("w")
    dev = InterpBackend()
    names: list[str] = []
    real = dev.launch

    def launch(kernel: Kernel, *args: object, **kw: object) -> None:
        names.append(kernel.name)
        real(kernel, *args, **kw)  # type: ignore[arg-type]

    dev.launch = launch  # type: ignore[method-assign]
    got = HostInterp(q, device=dev).run({"lo": lo, "hi": hi}).array("w")
    assert got.tobytes() == ref.tobytes()
    assert (names == [rk.name]) == rows, names
    for be in backends()[1:]:
        out = run_program(q, {"lo": lo, "hi": hi}, device=be, check_races=False).array("w")
        assert out.tobytes() == ref.tobytes(), be.name


def test_til13_offsets_found_in_the_body() -> None:
    """TIL-13: the offsets are every step of a chain of + and - by constants from the
    loop variable, in either operand order of +; a larger one than MAX_OFFSET is not
    counted (left to the named operations)."""
    from sarek_py.analysis.ranges import MAX_OFFSET, offsets

    i, j = var("i", Scalar.I32), var("j", Scalar.I32)
    out = var("out", array(Scalar.I32, 1))

    def c(v: int) -> Const:
        return Const(v, Scalar.I32)

    def store(e: Expr) -> Store:
        return Store(out, (c(0),), e)

    sub = Binary(BinaryOp.SUB, Binary(BinaryOp.SUB, Ref(i), c(1)), c(1))
    assert offsets(store(sub), i) == (-2, 0)
    assert offsets(store(Binary(BinaryOp.ADD, c(3), Ref(i))), i) == (0, 3)
    assert offsets(store(Binary(BinaryOp.ADD, Ref(j), c(3))), i) == (0, 0)
    big = Binary(BinaryOp.ADD, Ref(i), c(MAX_OFFSET + 1))
    assert offsets(store(big), i) == (0, 0)
    assert offsets(store(Binary(BinaryOp.MUL, Ref(i), c(2))), i) == (0, 0)


def test_til13_rows_kernel_numbers_i32_loop_variables_only() -> None:
    """TIL-13: the 64-bit value of a loop variable is an i32 bound plus a coordinate
    below 2**62, exact only for i32 variables; a nest over an i64 one is refused (the
    offload launches it flat)."""
    from sarek_py.host.tiling import Loop, Nest, TilingRefused

    nest = nest2()
    k, j = var("k", Scalar.I64), nest.loops[1].var
    loops = (Loop(k, Const(0, Scalar.I64), Const(3, Scalar.I64)), nest.loops[1])
    store = Store(nest.params[1], (Cast(Scalar.I32, Ref(k)), Ref(j)), Const(0.0, Scalar.F32))
    wide = Nest("wide", nest.params, loops, store)
    with pytest.raises(TilingRefused, match=r"k is i64 \(TIL-13\)"):
        row_nest(wide)


EDGE_LOWS = [0, -5, 2**31 - 40, 2**31 - 36, 2**31 - 34, -(2**31), -(2**31) + 1,
             -(2**31) + 3]


NEAR_CASES = given(st.sampled_from(EDGE_LOWS), st.integers(33, 40), st.integers(-3, 3),
                   st.integers(-3, 3), st.integers(-2, 2))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@NEAR_CASES
def test_til13_offsets_near_the_ends_bitwise_on_every_backend(
        lo: int, width: int, c1: int, c2: int, c3: int) -> None:
    """TIL-13, CG-25 (generator): a nest whose body adds constant offsets (chains
    included) to a loop index whose bounds sit at and near the ends of i32, offloaded;
    whichever kernel the host picks, every backend writes the interpreter's bytes."""
    offsets_near_the_ends_hold(lo, width, c1, c2, c3)


@pytest.mark.slow
@settings(max_examples=300 if FUZZ else 25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@NEAR_CASES
def test_til13_offsets_near_the_ends_fuzz(lo: int, width: int, c1: int, c2: int,
                                          c3: int) -> None:
    """TIL-13 at make fuzz's size (SAREK_FUZZ=1: 300 nests)."""
    offsets_near_the_ends_hold(lo, width, c1, c2, c3)


def offsets_near_the_ends_hold(lo: int, width: int, c1: int, c2: int, c3: int) -> None:
    hi = min(lo + width - 1, 2**31 - 1)
    src = f"""
program p
  var lo : i32 = 0; var hi : i32 = 0;
  var w : i32[2, 40];
begin
  parallel for (j = 0 to 1, i = lo to hi) do
    w[j, i - lo] <- (i + {c1}) * 3 + (i - {c2} + {c3}) + j
  done
end
"""
    p = parse_program(src)
    q = offload(p, block_size=32)
    ref = run_program(p, {"lo": lo, "hi": hi}).array("w")
    for be in backends():
        got = run_program(q, {"lo": lo, "hi": hi}, device=be, check_races=False).array("w")
        assert got.tobytes() == ref.tobytes(), (be.name, lo, hi, c1, c2, c3)


def test_til13_three_dimensions_with_offsets_in_every_loop() -> None:
    """TIL-13 with TIL-12 in three dimensions: offsets of every loop variable (one a
    chain), bounds at and near the ends of i32, rows or flat as the host picks: every
    backend writes the interpreter's bytes; the rows kernel proves each offset."""
    p = parse_program("""
program p
  var lo : i32 = 0; var n : i32 = 40;
  var w : i32[3, 5, 40];
begin
  parallel for (k = 0 to 2, j = 1 to 5, i = lo to lo + n - 1) do
    w[k, j - 1, i - lo] <- (i - 1) * 7 + (j + 1 - 2) * 3 + (k - 1) + (i + 2)
  done
end
""")
    q = offload(p, block_size=32)
    rk = next(k for k in _kernels(q) if k.name.endswith("_rows"))
    body = kernel_part(emit_opencl(rk, checked=False))
    # the offsets are plain; the products may overflow (i up to INT_MAX - 2): named
    assert ("sarek_add_i32(sarek_add_i32(sarek_add_i32(sarek_mul_i32(i - 1, 7), "
            "sarek_mul_i32(j + 1 - 2, 3)), k - 1), i + 2)") in body
    for lo in (0, 2**31 - 41, 2**31 - 42, -(2**31), -(2**31) + 1):
        ref = run_program(p, {"lo": lo}).array("w")
        for be in backends():
            got = run_program(q, {"lo": lo}, device=be, check_races=False).array("w")
            assert got.tobytes() == ref.tobytes(), (lo, be.name)
