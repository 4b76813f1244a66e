"""The emitted C computes the interpreter's bytes (specs/codegen.md, CG-15, CG-16).

Every test kernel (tests/test_codegen_cases.sk) and every example kernel runs on the
interpreter and on OpenCL (PoCL here) from the same random inputs; the arrays must be
bitwise equal, the stop codes equal; transcendental intrinsics within 4 ULP.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.cli import main as cli
from sarek_py.cli.inputs import make_inputs
from sarek_py.ir.diagnostics import BackendUnavailable, ParseError
from sarek_py.ir.nodes import Kernel, Module
from sarek_py.ir.parser import parse_file
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import Backend, get_backend

ROOT = Path(__file__).parent.parent
CASES = Path(__file__).with_name("test_codegen_cases.sk")

#: how to run each kernel: threads, block, --size values (as the CLI takes them)
RUNS: dict[str, tuple[int, int, dict[str, tuple[int, ...]]]] = {
    # test kernels
    "saxpy": (1000, 64, {"n": (1000,)}),
    "int_ops": (1000, 64, {"n": (1000,), "out": (1000, 7)}),
    "float_ops": (1000, 64, {"n": (1000,), "o32": (2000,), "o64": (2000,)}),
    "exact_math": (1000, 64, {"n": (1000,), "o32": (1000, 6), "o64": (1000, 4),
                              "ok": (1000, 4)}),
    "transcendental": (1000, 64, {"n": (1000,), "o32": (1000, 7), "o64": (1000, 7)}),
    "grid2d": (128, 64, {"a": (100, 6), "b": (100, 6), "sums": (100,)}),
    "block_sum": (1024, 64, {"n": (1000,), "out": (16,)}),
    "helpers": (1000, 64, {"n": (1000,)}),
    "stopper": (1000, 64, {"n": (1000,)}),
    "wide": (1000, 64, {"n": (1000,)}),
    "unrolled": (500, 64, {"n": (500,)}),
    "wrapping": (1000, 64, {"n": (1000,), "out": (1000, 8), "wo": (1000, 7)}),
    "loop_ends": (1, 1, {"lim": (1,), "out": (7,), "last": (5,)}),
    # examples (examples/*.sk)
    "blend": (1000, 128, {"n": (1000,)}),
    "scale": (1000, 128, {"n": (1000,)}),
    "relu": (1000, 128, {"n": (1000,)}),
    "stencil5": (600, 128, {"h": (20,), "w": (30,), "src": (20, 30), "dst": (20, 30)}),
}
EXAMPLE_BLOCK_SUM = (1024, 256, {"n": (1000,), "out": (4,)})


def opencl_or_skip() -> Backend:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(f"no OpenCL here: {exc.message}")


def case_kernels() -> list[Kernel]:
    m = parse_file(CASES)
    check_module(m)
    return list(m.kernels)


def example_modules() -> list[tuple[Path, Module]]:
    """The example files that are kernel modules (files holding a host ``program`` are
    read by the loop-level tools, not here)."""
    out = []
    for path in sorted(ROOT.glob("examples/*.sk")):
        try:
            m = parse_file(path)
        except ParseError:
            if "\nprogram " in "\n" + path.read_text():
                continue
            raise
        check_module(m)
        out.append((path, m))
    return out


def example_kernels() -> list[tuple[str, Kernel]]:
    return [(path.name, k) for path, m in example_modules() for k in m.kernels]


def run_config(k: Kernel, example: bool = False) -> tuple[int, int, dict[str, tuple[int, ...]]]:
    if example and k.name == "block_sum":
        return EXAMPLE_BLOCK_SUM
    if k.name not in RUNS:
        pytest.fail(f"no run configuration for kernel {k.name}: add one to RUNS in "
                    "tests/test_codegen_exact.py")
    return RUNS[k.name]


def run_both(k: Kernel, be: Backend, seed: int = 1, example: bool = False) -> tuple[
        dict[str, Any], dict[str, Any], Any, Any]:
    threads, block, sizes = run_config(k, example)
    inputs = make_inputs(k, sizes, threads, seed)
    ref, dev = copy.deepcopy(inputs), copy.deepcopy(inputs)
    r_ref = get_backend("interp").run_kernel(k, ref, threads, block)
    r_dev = be.run_kernel(k, dev, threads, block)
    return ref, dev, r_ref, r_dev


def assert_bitwise(k: Kernel, ref: dict[str, Any], dev: dict[str, Any]) -> None:
    for p in k.params:
        if p.is_array:
            a, b = ref[p.name], dev[p.name]
            assert a.tobytes() == b.tobytes(), (
                f"{k.name}: {p.name} differs at {np.flatnonzero(a.ravel() != b.ravel())[:5]}")


EXACT = [k for k in case_kernels() if k.name != "transcendental"]


@pytest.mark.parametrize("k", EXACT, ids=lambda k: k.name)
def test_cg15_test_kernels_bitwise_equal(k: Kernel) -> None:
    be = opencl_or_skip()
    ref, dev, r_ref, r_dev = run_both(k, be)
    assert_bitwise(k, ref, dev)
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes)


def test_cg15_stop_codes_are_compared() -> None:
    """The stopper kernel does stop some threads with both codes (the check has teeth)."""
    be = opencl_or_skip()
    k = next(k for k in EXACT if k.name == "stopper")
    _, _, r_ref, r_dev = run_both(k, be)
    assert set(np.unique(r_dev.stop_codes)) == {0, 3, 7}
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes)


EXAMPLES = example_kernels()


@pytest.mark.skipif(not EXAMPLES, reason="examples/*.sk are not written yet")
@pytest.mark.parametrize("item", EXAMPLES, ids=lambda it: f"{it[0]}:{it[1].name}")
def test_cg15_examples_bitwise_equal(item: tuple[str, Kernel]) -> None:
    be = opencl_or_skip()
    _, k = item
    ref, dev, r_ref, r_dev = run_both(k, be, example=True)
    assert_bitwise(k, ref, dev)
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes)


def ulp_distance(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Units in the last place between two float arrays of one dtype (finite values)."""
    ints = np.int32 if a.dtype == np.float32 else np.int64

    def ordered(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        bits = x.view(ints).astype(object)
        sign_bit = 1 << (8 * x.dtype.itemsize - 1)
        return np.where(bits < 0, -(bits + sign_bit), bits)

    return np.abs(ordered(a) - ordered(b)).astype(np.float64)


TRANSCENDENTAL_ULP = 4


def test_cg15_ulp_distance_measures() -> None:
    one = np.array([1.0], np.float32)
    nxt = np.nextafter(one, np.float32(2))
    assert ulp_distance(one, nxt)[0] == 1
    z = np.array([0.0], np.float32)
    assert ulp_distance(np.array([-0.0], np.float32), z)[0] == 0
    tiny = np.array([np.float32(1e-45)], np.float32)
    assert ulp_distance(-tiny, tiny)[0] == 2


@pytest.mark.parametrize("seed", [1, 2])
def test_cg15_transcendentals_within_ulp_bound(seed: int) -> None:
    be = opencl_or_skip()
    k = next(k for k in case_kernels() if k.name == "transcendental")
    ref, dev, _, _ = run_both(k, be, seed)
    for name in ("o32", "o64"):
        a, b = ref[name], dev[name]
        assert np.isfinite(a).all() and np.isfinite(b).all()
        d = ulp_distance(a, b)
        assert d.max() <= TRANSCENDENTAL_ULP, (name, d.max(axis=0))
    # the outputs are not all bitwise equal: the bound is what is guaranteed, not equality
    # (informative; PoCL's libm differs from numpy's on some arguments)


# ----------------------------------------------------------------------------- CG-16


def test_cg16_emit_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["emit", str(CASES), "--target", "cuda", "--kernel", "saxpy"]) == 0
    out = capsys.readouterr().out
    assert 'extern "C" __global__ void saxpy(' in out and "__kernel" not in out
    assert cli.main(["emit", str(CASES), "-t", "opencl"]) == 0
    out = capsys.readouterr().out
    assert out.count("__kernel void") == len(case_kernels())
    assert cli.main(["emit", str(CASES), "--target", "vulkan"]) == 2
    assert cli.main(["emit", str(CASES), "--target", "cuda", "--kernel", "nope"]) == 1
    assert "no kernel 'nope'" in capsys.readouterr().err


def test_cg16_run_compare_identical(capsys: pytest.CaptureFixture[str]) -> None:
    opencl_or_skip()
    rc = cli.main(["run", str(CASES), "-k", "int_ops", "-n", "1000", "-b", "64", "--size",
                   "n=1000", "--size", "out=1000x7", "--backend", "opencl", "--compare",
                   "interp"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "compare opencl with interp:" in out
    assert out.count("identical") == 4


def test_cg16_run_compare_reports_differences(capsys: pytest.CaptureFixture[str]) -> None:
    opencl_or_skip()
    rc = cli.main(["run", str(CASES), "-k", "transcendental", "-n", "1000", "-b", "64",
                   "--size", "n=1000", "--size", "o32=1000x7", "--size", "o64=1000x7",
                   "--backend", "opencl", "--compare", "interp"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "o32: DIFFERENT" in out and "x: identical" in out


def test_cg16_compare_with_unavailable_backend(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        get_backend("cuda")
        pytest.skip("a CUDA GPU is present here")
    except BackendUnavailable:
        pass
    rc = cli.main(["run", str(CASES), "-k", "saxpy", "-n", "10", "--size", "n=10",
                   "--backend", "interp", "--compare", "cuda"])
    err = capsys.readouterr().err
    assert rc == 1 and "cuda backend cannot run" in err and "Traceback" not in err


def _emit_file(path: Path, target: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["emit", str(path), "--target", target]) == 0
    return capsys.readouterr().out


SHARED_HELPER = """
pure fun twice(v : f32) : f32 = return v * 2.0f

kernel k1(x : f32[], n : i32) =
  let i = global_thread_id in if i < n then x[i] <- twice(x[i])

kernel k2(x : f32[], n : i32) =
  let i = global_thread_id in if i < n then x[i] <- twice(x[i]) + 1.0f
"""


def test_cg16_whole_file_is_one_translation_unit(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "two.sk"
    path.write_text(SHARED_HELPER)
    cl = _emit_file(path, "opencl", capsys)
    assert cl.count("float twice(float v)") == 1
    assert cl.count("#pragma OPENCL FP_CONTRACT OFF") == 1
    be = opencl_or_skip()
    prg = be.program(cl)  # builds: one translation unit, no redefinition
    assert {k.function_name for k in prg.all_kernels()} == {"k1", "k2"}


@pytest.mark.skipif(not EXAMPLES, reason="examples/*.sk are not written yet")
def test_cg16_emitted_example_files_compile_with_nvcc(capsys: pytest.CaptureFixture[str]) -> None:
    from sarek_py.codegen.nvcc import compile_ptx, find_nvcc

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed here")
    for path, m in example_modules():
        ptx = compile_ptx(_emit_file(path, "cuda", capsys))
        for k in m.kernels:
            assert f".entry {k.name}(" in ptx
        assert "fma.rn" not in ptx


# ------------------------------------------------------------------- CG-18, CG-19, CG-20

I32_ENDS = [2**31 - 1, -(2**31), 2**31 - 2, -(2**31) + 1, -1, 0, 1, 65599, -65599, 46341,
            2**30, -(2**30), 12345678]
I64_ENDS = [2**63 - 1, -(2**63), 2**63 - 2, -(2**63) + 1, -1, 0, 1, 2**32, -(2**32),
            3037000500, 2**62, -(2**62), 123456789012]


def test_cg18_overflowing_arithmetic_bitwise_equal() -> None:
    """i32/i64 + - * <<, unary - and abs at and around the ends of the types: OpenCL writes
    the interpreter's wrapped bytes; `a + 1 > a` is false at INT_MAX and `abs(a) >= 0` at
    INT_MIN on both."""
    be = opencl_or_skip()
    k = next(k for k in EXACT if k.name == "wrapping")
    pairs = [(a, b) for a in range(len(I32_ENDS)) for b in range(len(I32_ENDS))]
    n = len(pairs)
    args: dict[str, Any] = {
        "x": np.array([I32_ENDS[a] for a, _ in pairs], np.int32),
        "y": np.array([I32_ENDS[b] for _, b in pairs], np.int32),
        "c": np.array([I64_ENDS[a] for a, _ in pairs], np.int64),
        "d": np.array([I64_ENDS[b] for _, b in pairs], np.int64),
        "out": np.zeros((n, 8), np.int32), "wo": np.zeros((n, 7), np.int64),
        "n": np.int32(n)}
    ref, dev = copy.deepcopy(args), copy.deepcopy(args)
    get_backend("interp").run_kernel(k, ref, n, 64)
    be.run_kernel(k, dev, n, 64)
    assert_bitwise(k, ref, dev)
    # the check has teeth: the interpreter wrapped (INT_MAX + 1 is INT_MIN, so the test
    # `a + 1 > a` fails there; doubling INT_MIN gives 0)
    first = I32_ENDS.index(2**31 - 1) * len(I32_ENDS) + I32_ENDS.index(1)
    assert ref["out"][first, 0] == -(2**31)
    # a + 1 > a and a * 2 / 2 == a fail, a - 1 < a and abs(a) >= 0 hold
    assert ref["out"][first, 5] == 12
    assert ref["wo"][first, 0] == -(2**63)
    assert ref["wo"][first, 5] == 12
    # abs of the most negative value is itself (INT-10): abs(a) >= 0 fails there
    least = I32_ENDS.index(-(2**31)) * len(I32_ENDS)
    assert ref["out"][least, 7] == -(2**31) and ref["out"][least, 5] & 8 == 0
    assert ref["wo"][least, 6] == -(2**63) and ref["wo"][least, 5] & 8 == 0

def test_cg19_loops_at_the_ends_of_the_type_on_opencl() -> None:
    """Loops up to INT_MAX / down to INT_MIN (i32 and i64, a pragma loop with a bound read
    from memory, a helper loop left by return): three or four iterations each, as the
    interpreter runs them, and no runaway loop (it would stop with code 9)."""
    be = opencl_or_skip()
    k = next(k for k in EXACT if k.name == "loop_ends")
    args: dict[str, Any] = {
        "hi": np.int32(2**31 - 1), "lo": np.int32(-(2**31)),
        "hi64": np.int64(2**63 - 1), "lo64": np.int64(-(2**63)),
        "lim": np.array([2**31 - 1], np.int32), "out": np.zeros(7, np.int32),
        "last": np.zeros(5, np.int64)}
    ref, dev = copy.deepcopy(args), copy.deepcopy(args)
    r_ref = get_backend("interp").run_kernel(k, ref, 1, 1)
    r_dev = be.run_kernel(k, dev, 1, 1)
    assert ref["out"].tolist() == [3, 3, 3, 3, 4, 0, 4]
    assert ref["last"].tolist() == [2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**31 - 1]
    assert not r_ref.stop_codes.any()
    assert_bitwise(k, ref, dev)
    assert np.array_equal(r_ref.stop_codes, r_dev.stop_codes)


def test_cg18_double_negation_is_not_a_decrement() -> None:
    """CG-18: ``-(-a)`` in wrapping arithmetic is written ``sarek_neg_i32(sarek_neg_i32(a))``
    (CG-25), never ``--`` (C's decrement, which does not compile on a cast); found by
    ``make fuzz``. Bitwise the
    interpreter's, INT_MIN included."""
    from sarek_py.codegen import emit_opencl
    from sarek_py.ir.nodes import Const, Kernel, Ref, Store, Unary, UnaryOp, var
    from sarek_py.ir.types import Scalar, array

    a = var("a", Scalar.I32)
    out = var("out", array(Scalar.I32, 1))
    k = Kernel("k", (a, out), (), Store(out, (Const(0, Scalar.I32),), Unary(
        UnaryOp.NEG, Unary(UnaryOp.NEG, Unary(UnaryOp.NEG, Ref(a))))))
    text = emit_opencl(k)
    assert "--" not in text.split("generated by sarek_py", 1)[1].replace("// ", "")
    be = opencl_or_skip()
    for v in (5, -7, -(2**31), 2**31 - 1):
        ref = {"a": np.int32(v), "out": np.zeros(1, np.int32)}
        dev = {"a": np.int32(v), "out": np.zeros(1, np.int32)}
        get_backend("interp").run_kernel(k, ref, 1, 1)
        be.run_kernel(k, dev, 1, 1)
        assert ref["out"].tobytes() == dev["out"].tobytes(), v


@pytest.mark.parametrize("down", [False, True])
def test_cg12_loop_bounds_that_are_conditionals_are_parenthesised(down: bool) -> None:
    """CG-12, CG-19: a bound that is a conditional (or a comparison) stands beside
    ``<=``/``>=``/``==`` in the C loop and is parenthesised: ``i <= (c ? 0 : 3)``, not
    ``i <= c ? 0 : 3`` (which compares first and ran the body of an empty loop); found by
    ``make fuzz``. The stop code and the count of iterations are the interpreter's."""
    from sarek_py.codegen import emit_opencl
    from sarek_py.ir.nodes import (
        Assign,
        Binary,
        BinaryOp,
        Cond,
        Const,
        For,
        Kernel,
        Ref,
        Store,
        seq,
        var,
    )
    from sarek_py.ir.types import Scalar, array

    t = Scalar.I32
    flag = var("flag", Scalar.BOOL)
    out = var("out", array(t, 1))
    n = var("n", t, mutable=True)
    i = var("i", t)
    # for i = 4 to (flag ? 0 : 6), or for i = (flag ? 0 : 6) downto 4: empty when flag
    bound = Cond(Ref(flag), Const(0, t), Const(6, t))
    start, stop = (bound, Const(4, t)) if down else (Const(4, t), bound)
    body = For(i, start, stop, Assign(n, Binary(BinaryOp.ADD, Ref(n), Const(1, t))), down)
    k = Kernel("k", (flag, out), (n,), seq(body, Store(out, (Const(0, t),), Ref(n))))
    assert "? 0 : 6)" in emit_opencl(k)
    be = opencl_or_skip()
    for f in (True, False):
        ref = {"flag": f, "out": np.zeros(1, np.int32)}
        dev = {"flag": f, "out": np.zeros(1, np.int32)}
        get_backend("interp").run_kernel(k, ref, 1, 1)
        be.run_kernel(k, dev, 1, 1)
        assert ref["out"].tolist() == dev["out"].tolist() == [0 if f else 3], (f, down)
