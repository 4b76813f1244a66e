"""The rows numbering of loop nests and the thread-count test in the kernel's own guard
(specs/tiling.md TIL-10, TIL-11; specs/offload.md OFF-11; specs/codegen.md CG-21)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_tiling import backends, c, nest3
from test_tiling import nest2 as tiling_nest2
from typeguard import TypeCheckError

from sarek_py.codegen import emit_cuda, emit_opencl
from sarek_py.host.interp import HostInterp, run_program
from sarek_py.host.offload import offload
from sarek_py.host.tiling import (
    Nest,
    TilingRefused,
    row_count,
    row_grid,
    row_nest,
    rows_pad_too_much,
)
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import HIf, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.nodes import (
    Binary,
    BinaryOp,
    Cast,
    Const,
    Expr,
    If,
    Intrinsic,
    Kernel,
    Let,
    Read,
    Ref,
    Return,
    Store,
    iter_stmts,
    seq,
    var,
)
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import Scalar, array
from sarek_py.runtime import get_backend
from sarek_py.runtime.interp import InterpBackend

I32, I64 = Scalar.I32, Scalar.I64


def nest2(lower: tuple[int, int] = (0, 0)) -> Nest:
    """for i = lo0 .. lo0+n-1, j = lo1 .. lo1+m-1: b[i - lo0, j - lo1] <- 2 a[...] + i
    (the nest of tests/test_tiling.py, contiguous in j)."""
    return tiling_nest2("ij", lower)[0]


# ----------------------------------------------------------------------------- TIL-10


@pytest.mark.parametrize("shape", [(3, 256), (5, 300), (4, 1), (70, 33)])
@pytest.mark.parametrize("block", [256, 64, 32])
def test_til10_rows_match_the_sequential_nest(shape: tuple[int, int], block: int) -> None:
    rk = row_nest(nest2(lower=(1, -2)))
    check_kernel(rk.kernel)
    assert rk.contiguous == 1
    n, m = shape
    a = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    expect = 2 * a + np.arange(1, n + 1, dtype=np.float32)[:, None]
    count = row_count(rk, shape, block)
    assert count == n * -(-m // block) * block
    for be in backends():
        b = np.zeros(shape, np.float32)
        be.run_kernel(rk.kernel, {"a": a, "b": b, "n": n, "m": m}, count, block,
                      grid=row_grid(rk, shape, block), block_shape=(block,))
        assert b.tobytes() == expect.tobytes(), (be.name, block)


@pytest.mark.parametrize("shape", [(3, 40, 64), (2, 5, 300)])
def test_til10_three_dimensions_match(shape: tuple[int, int, int]) -> None:
    rk = row_nest(nest3())
    assert rk.contiguous == 2
    p, n, m = shape
    a = np.random.default_rng(6).standard_normal(shape)
    expect = a + np.arange(p, dtype=np.float64)[:, None, None]
    for be in backends():
        b = np.zeros(shape)
        be.run_kernel(rk.kernel, {"a": a, "b": b, "p": p, "n": n, "m": m},
                      row_count(rk, shape, 128), 128, grid=row_grid(rk, shape, 128),
                      block_shape=(128,))
        assert b.tobytes() == expect.tobytes(), be.name


def test_til10_consecutive_threads_are_consecutive_iterations() -> None:
    """Thread t of a block sits at block-shared + t along the contiguous dimension: the
    kernel reads thread_idx_x once, added to a value that holds no thread index."""
    rk = row_nest(nest2())
    zs = [s for s in iter_stmts(rk.kernel.body) if isinstance(s, Let)
          and s.var.name == "z_j"]
    assert len(zs) == 1
    value = zs[0].value
    assert isinstance(value, Binary) and value.op is BinaryOp.ADD
    assert value.rhs == Cast(I64, Intrinsic("thread_idx_x"))
    others = [s for s in iter_stmts(rk.kernel.body) if isinstance(s, Let)
              and s.var.name in ("z_i", "place_0")]
    text = " ".join(repr(s.value) for s in others)
    assert "thread_idx" not in text and "global" not in text


def test_til10_padded_threads_return_before_the_lower_bounds() -> None:
    rk = row_nest(nest2())
    stmts = list(iter_stmts(rk.kernel.body))
    ret = next(k for k, s in enumerate(stmts) if isinstance(s, If)
               and isinstance(s.then, Return))
    loop_vars = {lp.var for lp in rk.nest.loops}
    binds = [k for k, s in enumerate(stmts) if isinstance(s, Let) and s.var in loop_vars]
    assert binds and all(ret < k for k in binds)


def test_til10_indices_near_the_top_of_i32_do_not_overflow() -> None:
    top = 2**31 - 10
    rk = row_nest(nest2(lower=(0, top)))
    for be in backends():
        a = np.random.default_rng(1).standard_normal((3, 10)).astype(np.float32)
        b = np.zeros((3, 10), np.float32)
        be.run_kernel(rk.kernel, {"a": a, "b": b, "n": 3, "m": 10},
                      row_count(rk, (3, 10), 256), 256, grid=row_grid(rk, (3, 10), 256),
                      block_shape=(256,))
        assert (b == 2 * a + np.arange(3, dtype=np.float32)[:, None]).all(), be.name


def test_til10_one_dimension_and_reductions_are_refused() -> None:
    nest = nest2()
    i = nest.loops[0].var
    with pytest.raises(TilingRefused, match="TIL-1"):
        row_nest(Nest("one", nest.params, nest.loops[:1],
                      Store(nest.params[1], (Ref(i), c(0)), Const(0.0, Scalar.F32))))
    with pytest.raises(TilingRefused, match="reduction"):
        row_nest(Nest("red", nest.params, nest.loops,
                      Store(nest.params[1], (Ref(i), c(0)), Const(1.0, Scalar.F32))))


def test_til10_counts_are_64_bit() -> None:
    rk = row_nest(nest2())
    assert row_count(rk, (70000, 70000), 256) == 70000 * 70144 > 2**32
    assert all(s.var.type is I64 for s in iter_stmts(rk.kernel.body)
               if isinstance(s, Let) and s.var.name.startswith(("z_", "n_")))
    # a place among the other dimensions is an i32 (block_idx_z): TIL-14
    assert all(s.var.type is I32 for s in iter_stmts(rk.kernel.body)
               if isinstance(s, Let) and s.var.name.startswith("place"))


# ----------------------------------------------------------------------------- TIL-11


def test_til11_rows_unless_they_pad_more_than_the_nest() -> None:
    rk = row_nest(nest2())
    assert not rks(rk, (4, 256)) and not rks(rk, (4, 512))
    assert not rks(rk, (4, 129))            # 256 threads for 129: 98 % padding
    assert rks(rk, (4, 127))                # 256 for 127: more than 100 %
    assert rks(rk, (1000, 3))               # a short contiguous dimension
    assert rks(rk, (0, 512)) and rks(rk, (4, 0))   # nothing runs


def rks(rk: object, extents: tuple[int, int]) -> bool:
    assert hasattr(rk, "kernel")
    return rows_pad_too_much(rk, extents, 256)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- OFF-11


def program(body: str) -> str:
    return f"""
program p
  var n : i32 = 300; var m : i32 = 3;
  var w : f64[0:, 0:] allocatable; var u : f64[0:, 0:] allocatable;
begin
  allocate w[0:m - 1, 0:n - 1]; allocate u[0:m + 1, 0:n + 1];
  {body}
end
"""


LOOP = ("parallel for (j = 0 to m + 1, i = 0 to n + 1) do u[j, i] <- f64(j * 1000 + i) done;"
        "parallel for (j = 0 to m - 1, i = 0 to n - 1) do "
        "w[j, i] <- u[j + 1, i] - 0.5 * u[j, i + 2] + u[j + 2, i + 1] done")


def test_off11_rows_or_flat_chosen_by_the_host() -> None:
    p = parse_program(program(LOOP))
    q = offload(p)
    text = print_program(q)
    assert print_program(parse_program(text)) == text
    choices = [s for s in iter_host(q.body) if isinstance(s, HIf)]
    assert len(choices) == 2
    for h in choices:
        flat, rows = h.then, h.else_
        assert isinstance(flat, Launch) and isinstance(rows, Launch)
        assert rows.kernel.name == flat.kernel.name + "_rows"
        assert rows.overwritten == flat.overwritten
    for n, rows_used in ((300, True), (100, False)):
        dev = InterpBackend()
        names: list[str] = []
        real = dev.launch

        def launch(kernel: Kernel, *args: Any, names: list[str] = names,
                   real: Any = real, **kw: Any) -> None:
            names.append(kernel.name)
            real(kernel, *args, **kw)

        dev.launch = launch  # type: ignore[method-assign]
        run = HostInterp(q, device=dev)
        ref = run_program(p, {"n": n})
        got = run.run({"n": n})
        assert got.array("w").tobytes() == ref.array("w").tobytes()
        assert bool(run.eval(choices[1].cond, run.globals)) == (not rows_used)
        assert names == (["p_loop_rows", "p_loop_2_rows"] if rows_used
                         else ["p_loop", "p_loop_2"])


def test_off11_on_opencl_bitwise() -> None:
    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    p = parse_program(program(LOOP))
    for n in (300, 100, 256, 257):
        ref = run_program(p, {"n": n})
        for numbering in ("rows", "flat", "tiles"):
            got = run_program(offload(p, numbering=numbering), {"n": n}, device=be,
                              check_races=False)
            assert got.array("w").tobytes() == ref.array("w").tobytes(), (n, numbering)


def test_off11_flat_numbering_keeps_one_launch_and_bad_values_are_refused() -> None:
    p = parse_program(program(LOOP))
    q = offload(p, numbering="flat")
    assert not [s for s in iter_host(q.body) if isinstance(s, HIf)]
    assert len([s for s in iter_host(q.body) if isinstance(s, Launch)]) == 2
    # (under typeguard the annotation refuses it first, naming the same values)
    with pytest.raises((ValueError, TypeCheckError), match="rows.*tiles.*flat"):
        offload(p, numbering="diagonal")  # type: ignore[arg-type]


def test_off11_loops_that_stop_stay_flat() -> None:
    p = parse_program(program(
        "parallel for (j = 0 to m - 1, i = 0 to n - 1) do "
        "if i == 7 then stop 3 else w[j, i] <- 1.0 done"))
    q = offload(p)
    assert not [s for s in iter_host(q.body) if isinstance(s, HIf)]


# ----------------------------------------------------------------------------- CG-21


def guard_lines(src: str) -> list[str]:
    return [ln.strip() for ln in src.splitlines() if "sarek_threads" in ln
            and "return" in ln]


def test_cg21_rows_kernel_tests_the_count_in_its_own_guard() -> None:
    rk = row_nest(nest2())
    for emit in (emit_opencl, emit_cuda):
        src = emit(rk.kernel)
        [line] = guard_lines(src)
        # the kernel's own test is on the iteration's 64-bit value (TIL-13)
        assert re.match(r"if \(\(.*\) >= sarek_threads \|\| \(.*j_64 > .*\)\) return;",
                        line), line
        # the one test comes after the block's coordinates, before any array access
        body = src[src.index(line):]
        # from the kernel's own definition (the bounds-check functions before it, CG-22,
        # index their record `oob[…]`)
        start = max(src.find("__kernel void"), src.find("__global__ void"))
        head = src[start:src.index(line)]
        # (global accesses read as sarek_get/sarek_set, CG-28)
        assert "(a, " not in head and "(b, " not in head and "sarek_set2(b, " in body


def kernel_with_prefix(value: Expr) -> Kernel:
    """let x = value in (if x > 5 then return; out[0] <- x)."""
    out = var("out", array(I32, 1))
    n = var("n", I32)
    x = var("x", I32)
    body = Let(x, value, seq(If(Binary(BinaryOp.GT, Ref(x), c(5)), Return()),
                             Store(out, (c(0),), Ref(x))))
    return Kernel("k", (out, n), (), body)


@pytest.mark.parametrize(("value", "merged"), [
    (Binary(BinaryOp.ADD, Cast(I32, Intrinsic("thread_idx_x")), c(1)), True),
    (Binary(BinaryOp.DIV, Ref(var("n", I32)), c(3)), True),
    (Binary(BinaryOp.DIV, c(100), Intrinsic("block_dim_x")), True),
    (Binary(BinaryOp.DIV, c(100), Intrinsic("max", (Ref(var("n", I32)), c(1)))), True),
    # a divisor that may be zero or -1, a float converted to int, a shift by a variable
    (Binary(BinaryOp.DIV, c(100), Ref(var("n", I32))), False),
    (Binary(BinaryOp.MOD, c(100), Intrinsic("max", (Ref(var("n", I32)), c(0)))), False),
    (Cast(I32, Const(3.5, Scalar.F32)), False),
    (Binary(BinaryOp.SHL, c(1), Ref(var("n", I32))), False),
    (Binary(BinaryOp.SHL, c(1), c(3)), True),
])
def test_cg21_only_safe_prefixes_run_past_the_count(value: Expr, merged: bool) -> None:
    k = kernel_with_prefix(value)
    # the Ref(var("n")) above are fresh variables: bind them to the parameter
    n = k.params[1]
    from sarek_py.ir.visit import map_node

    k = Kernel(k.name, k.params, k.locals,
               map_node(k.body, var=lambda v: n if v.name == "n" else v))
    check_kernel(k)
    [line] = guard_lines(emit_opencl(k))
    assert ("||" in line) == merged, line


def test_cg21_memory_reads_and_calls_keep_the_test_first() -> None:
    a = var("a", array(I32, 1))
    out = var("out", array(I32, 1))
    x = var("x", I32)
    body = Let(x, Read(a, (c(0),)), seq(If(Binary(BinaryOp.GT, Ref(x), c(5)), Return()),
                                        Store(out, (c(0),), Ref(x))))
    k = Kernel("k", (a, out), (), body)
    src = emit_opencl(k)
    [line] = guard_lines(src)
    assert "||" not in line
    assert src.index(line) < src.index("= sarek_get1(a, 1, ")


def test_cg21_merged_guard_gives_the_same_results() -> None:
    """Thread counts that are not whole blocks: the threads past the count run the
    prefix and leave; the stores are those of the interpreter."""
    out = var("out", array(I32, 1))
    n = var("n", I32)
    t = var("t", I32)
    body = Let(t, Cast(I32, Intrinsic("global_idx_x")),
               seq(If(Binary(BinaryOp.GE, Ref(t), Ref(n)), Return()),
                   Store(out, (Ref(t),), Binary(BinaryOp.MUL, Ref(t), c(3)))))
    k = Kernel("k", (out, n), (), body)
    assert "||" in guard_lines(emit_opencl(k))[0]
    for be in backends():
        for threads in (1, 100, 257):
            got = np.full(300, -1, np.int32)
            be.run_kernel(k, {"out": got, "n": 290}, threads, 256)
            want = np.full(300, -1, np.int32)
            want[:threads] = np.arange(threads, dtype=np.int32) * 3
            assert got.tobytes() == want.tobytes(), (be.name, threads)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cg21_rows_kernel_compiles_to_ptx_without_fma(tmp_path: Path) -> None:
    rk = row_nest(nest3())
    cu = tmp_path / "rows.cu"
    cu.write_text(emit_cuda(rk.kernel))
    subprocess.run(["nvcc", "--fmad=false", "-ptx", str(cu), "-o", str(tmp_path / "r.ptx")],
                   check=True, capture_output=True)
    assert "fma.rn" not in (tmp_path / "r.ptx").read_text()
