"""Dynamic shared memory sized at launch: ``shared s : T[]`` (IR-50..IR-52), the launch's
``shared`` extent in elements (LCH-50..LCH-52), the interpreter (INT-50), OpenCL's
``__local T*`` parameter and CUDA's ``extern __shared__`` (CG-50), the front end's
``shared(T)`` (FE-50..FE-51), and fusion's refusal (LEG-50)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.codegen import emit_cuda, emit_opencl
from sarek_py.codegen.cstyle import emit_module
from sarek_py.codegen.cuda import CUDA
from sarek_py.codegen.nvcc import compile_ptx, find_nvcc
from sarek_py.frontend import (
    Vec,
    barrier,
    block_dim_x,
    block_idx_x,
    global_thread_id,
    i32,
    kernel,
    length,
    pipeline,
    shared,
    thread_idx_x,
)
from sarek_py.frontend.kernel import LaunchArgumentError
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.fusion.shared_memory import dynamic_shared_refusal
from sarek_py.host.backend import run_program_on
from sarek_py.ir.diagnostics import (
    BackendUnavailable,
    CheckError,
    InterpError,
    LaunchError,
    ParseError,
    SarekError,
)
from sarek_py.ir.dynamic_shared import dynamic_shared
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.host.launch_text import parse_host, print_host
from sarek_py.ir.host.sexp import program_from_sexp, program_to_sexp
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel, var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.sexp import from_sexp, to_sexp
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.runtime import get_backend
from sarek_py.runtime.limits import DeviceLimits, check_limits

#: each block sums its ``length(s)`` elements of ``x`` by a tree in shared memory
CHUNK_SUM = """kernel chunk_sum(x : i32[], out : i32[], n : i32)
  shared s : i32[] =
  let t = thread_idx_x in
  let l = length(s) in
  let base = block_idx_x * l in
  let mut j = t in
  while j < l do
    s[j] <- (base + j < n ? x[base + j] : 0);
    j := j + block_dim_x
  done;
  barrier;
  let mut stride = l / 2 in
  while stride > 0 do
    let mut k = t in
    while k < stride do
      s[k] <- s[k] + s[k + stride];
      k := k + block_dim_x
    done;
    barrier;
    stride := stride / 2
  done;
  if t == 0 then out[block_idx_x] <- s[0]

kernel double(out : i32[], y : i32[]) =
  let i = global_thread_id in
  y[i] <- out[i] * 2

kernel extent(out : i32[])
  shared pad : f32[16]
  shared s : f64[] =
  out[global_thread_id] <- length(s)
"""

MOD = parse_module(CHUNK_SUM, "chunk.sk")
CHUNK = MOD.kernel("chunk_sum")
DOUBLE = MOD.kernel("double")
EXTENT = MOD.kernel("extent")


def opencl() -> Any:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def chunk_case(block: int, ext: int, n: int = 3000, seed: int = 0
               ) -> tuple[dict[str, Any], int, np.ndarray]:
    """Arguments, thread count and expected sums of ``chunk_sum`` over ``n`` elements."""
    x = np.random.default_rng(seed).integers(-1000, 1000, n).astype(np.int32)
    blocks = -(-n // ext)
    pad = np.zeros(blocks * ext, np.int64)
    pad[:n] = x
    want = pad.reshape(blocks, ext).sum(axis=1).astype(np.int32)
    return {"x": x, "out": np.zeros(blocks, np.int32), "n": n}, blocks * block, want


# ------------------------------------------------------------------------------------- IR


def test_ir50_text_and_sexp_round_trip() -> None:
    """IR-50: ``shared s : T[]`` prints and parses back, also in the s-expression form."""
    text = print_kernel(CHUNK)
    assert "  shared s : i32[] =" in text
    again = parse_module(text).kernels[0]
    assert print_kernel(again) == text
    back = from_sexp(to_sexp(CHUNK))
    assert isinstance(back, Kernel) and print_kernel(back) == text
    dyn = dynamic_shared(back)
    assert dyn is not None and dyn.type == ArrayType(Scalar.I32, MemSpace.SHARED, (0,), (None,))
    assert dynamic_shared(DOUBLE) is None
    check_kernel(again)


@pytest.mark.parametrize(("decl", "col", "message"), [
    ("local s : i32[]", 9, "local array 's' needs constant extents, has local i32[]: only a "
                           "shared array is sized at launch (shared s : i32[])"),
    ("shared s : i32[,]", 10, "only a rank-1 shared array is sized at launch"),
    ("shared s : i32[, 4]", 10, "only a rank-1 shared array is sized at launch"),
    ("shared s : i32[2:]", 10, "has shared i32[2:]: a shared array sized at launch starts at 0"),
])
def test_ir50_run_time_extent_only_for_rank1_shared_located(decl: str, col: int,
                                                           message: str) -> None:
    """IR-50: a run-time extent on a local array, a shared array of rank > 1 or one with a
    lower bound is a located error with a caret at the declared name."""
    src = f"kernel k(a : i32[])\n  {decl} =\n  a[0] <- 1\n"
    with pytest.raises(ParseError) as err:
        parse_module(src, "bad.sk")
    text = str(err.value)
    assert f"bad.sk:2:{col}: error:" in text and message in text, text
    assert "^" in text


def test_ir51_one_dynamic_shared_array_per_kernel() -> None:
    """IR-51: a second dynamic shared array is refused — located in the text, and by the
    checker for IR built by hand."""
    src = "kernel k(a : i32[])\n  shared s : i32[]\n  shared u : f32[] =\n  a[0] <- 1\n"
    with pytest.raises(ParseError, match=r"two.sk:3:3: error: shared arrays 's' and 'u' are "
                       r"both sized at launch: a kernel has at most one"):
        parse_module(src, "two.sk")
    s = var("s", ArrayType(Scalar.I32, MemSpace.SHARED, (0,), (None,)), True)
    u = var("u", ArrayType(Scalar.F32, MemSpace.SHARED, (0,), (None,)), True)
    body = DOUBLE.body  # any well-typed body
    k = Kernel("k", DOUBLE.params, (s, u), body)
    with pytest.raises(CheckError, match="shared arrays 's' and 'u' are both sized at launch"):
        check_kernel(k)
    check_kernel(Kernel("k", DOUBLE.params, (s,), body))  # one is fine
    loc = var("v", ArrayType(Scalar.I32, MemSpace.LOCAL, (0,), (None,)), True)
    with pytest.raises(CheckError, match="local array 'v' needs constant extents"):
        check_kernel(Kernel("k", DOUBLE.params, (loc,), body))


def test_ir52_length_is_the_launch_extent() -> None:
    """IR-52: ``length(s)`` is the extent the launch gives, 0 included, on the interpreter
    and OpenCL; the static shared array beside it does not change it."""
    be = opencl()
    for ext in (0, 7, 300):
        ref = {"out": np.zeros(8, np.int32)}
        dev = {"out": np.zeros(8, np.int32)}
        run_kernel(EXTENT, ref, 8, 4, shared=ext)
        be.run_kernel(EXTENT, dev, 8, 4, shared=ext)
        assert ref["out"].tolist() == [ext] * 8
        assert dev["out"].tobytes() == ref["out"].tobytes()


# ------------------------------------------------------------------------------ launches


def test_lch50_launch_record_and_kernel_launch() -> None:
    """LCH-50: ``shared`` is in elements; required for a kernel with a dynamic shared
    array, refused for one without; checked like the counts."""
    lc = KernelLaunch(CHUNK, 256, 64, {"x": "x", "out": "o", "n": 10}, shared=64)
    assert lc.shared == 64 and isinstance(lc, Launch)
    with pytest.raises(ValueError, match=r"\[LCH-50\] kernel chunk_sum has the dynamic shared "
                       r"array s \(shared i32\[\]\): the launch must give its extent"):
        KernelLaunch(CHUNK, 256, 64, {"x": "x", "out": "o", "n": 10})
    with pytest.raises(ValueError, match=r"\[LCH-50\] kernel double has no dynamic shared"):
        KernelLaunch(DOUBLE, 8, 8, {}, shared=4)
    with pytest.raises(TypeError, match="must be an integer"):
        KernelLaunch(CHUNK, 256, 64, {}, shared=2.0)
    with pytest.raises(ValueError, match="not in 0..2147483647"):
        KernelLaunch(CHUNK, 256, 64, {}, shared=-1)
    known = Launch(CHUNK, 8, 8, ("x", "o", 1), shared=3).known_in({})
    assert known.shared == 3


def test_lch50_backends_refuse_a_launch_without_the_size() -> None:
    """LCH-50 at launch, before anything runs: the interpreter and every backend refuse a
    missing size and a size for a kernel without a dynamic shared array."""
    args, threads, _ = chunk_case(32, 32, 100)
    with pytest.raises(LaunchError, match=r"chunk.sk:1:1: error: \[LCH-50\] kernel chunk_sum "
                       r"has the dynamic shared array s"):
        run_kernel(CHUNK, args, threads, 32)
    for be in (get_backend("interp"), opencl()):
        before = be.stats.launches
        with pytest.raises(LaunchError, match=r"\[LCH-50\] kernel chunk_sum has the dynamic"):
            be.run_kernel(CHUNK, args, threads, 32)
        with pytest.raises(LaunchError, match=r"\[LCH-50\] kernel double has no dynamic "):
            be.run_kernel(DOUBLE, {"out": np.zeros(4, np.int32), "y": np.zeros(4, np.int32)},
                          4, 4, shared=8)
        with pytest.raises(LaunchError, match="must be an integer in 0..2147483647"):
            be.run_kernel(CHUNK, args, threads, 32, shared=True)
        assert be.stats.launches == before


HOST = """host x : i32[], out : i32[], n : i32, b : i32, l : i32
launch chunk_sum(x, out, n) threads i64(b) * 94L block b
  shared l
sync
"""


def test_lch51_launch_text_round_trip_and_refusals() -> None:
    """LCH-51: the ``shared`` clause of the launch text (and of host programs) prints and
    parses back; a launch of such a kernel without it, a second one, or one for a kernel
    without a dynamic shared array is a located error."""
    vs, stmts = parse_host(HOST, MOD)
    assert print_host(stmts, vs) == HOST
    lc = stmts[0]
    assert isinstance(lc, Launch) and lc.shared is not None
    bad = HOST.replace("\n  shared l", "")
    with pytest.raises(LaunchError, match=r"h.launches:2:8: error: launch of chunk_sum: "
                       r"\[LCH-50\] kernel chunk_sum has the dynamic shared array s"):
        parse_host(bad, MOD, "h.launches")
    with pytest.raises(ParseError, match=r"h.launches:3:12: error: a launch gives its shared "
                       "extent once"):
        parse_host(HOST.replace("shared l", "shared l shared l"), MOD, "h.launches")
    with pytest.raises(ParseError, match=r"the shared extent -1 is not in 0..2147483647"):
        parse_host(HOST.replace("shared l", "shared -1"), MOD, "h.launches")
    other = "host o : i32[], y : i32[]\nlaunch double(o, y) threads 4L block 4\n  shared 8\n"
    with pytest.raises(LaunchError, match=r"h.launches:2:8: error: launch of double: \[LCH-50\] kernel "
                       "double has no dynamic shared array"):
        parse_host(other, MOD, "h.launches")


PROGRAM = CHUNK_SUM + """
program p
var x : i32[0:] allocatable; var out : i32[0:] allocatable; var n : i32 = 200;
var l : i32 = 128; var b : i32 = 64;
begin
allocate x[n]; allocate out[2];
for i = 0 to n - 1 do x[i] <- i % 17 - 8 done;
launch chunk_sum(x, out, n) threads i64(b) * 2L block b shared l; sync
end
"""


def test_lch51_host_program_runs_with_the_shared_clause() -> None:
    """LCH-51 in a host program, on the interpreter backend and OpenCL: the extent is a
    host expression evaluated at the launch; the program prints and dumps (TXT-26) with
    it; without the clause the program is refused at the launch statement."""
    xs = np.array([i % 17 - 8 for i in range(200)] + [0] * 56, np.int64)
    want = xs.reshape(2, 128).sum(axis=1).astype(np.int32)
    opencl()
    prog = parse_program(PROGRAM, "p.sk")
    back = program_from_sexp(program_to_sexp(prog))
    assert back == prog and print_program(back) == print_program(prog)
    assert "shared l;" in print_program(prog)
    for be in ("interp", "opencl"):
        res, _ = run_program_on(back, be)
        assert res.array("out").tolist() == want.tolist(), be
    bad = PROGRAM.replace(" shared l;", ";")
    with pytest.raises(LaunchError, match=r"p.sk:39:8: error: launch of chunk_sum: \[LCH-50\]"):
        parse_program(bad, "p.sk")


def test_lch52_static_and_dynamic_shared_bytes_against_the_device_limit() -> None:
    """LCH-52: the static shared arrays and the launch's dynamic elements count together
    against the device's shared memory; the message names each array and the bytes."""
    lim = DeviceLimits("test device", 1024, None, None, shared_bytes=1024)
    # pad: 16 f32 = 64 bytes; s: f64, 120 elements = 960 bytes: 1024 in all
    assert check_limits(EXTENT, 64, 64, lim, 120) == (64, 64)
    with pytest.raises(LaunchError, match=r"\[LCH-52\] kernel extent: its shared arrays \(pad: "
                       r"64 bytes, s: 968 bytes \(121 elements given at launch\)\) need 1032 "
                       r"bytes, more than the 1024 bytes of shared memory a block has \(test "
                       r"device\)"):
        check_limits(EXTENT, 64, 64, lim, 121)
    be = opencl()
    most = be.device_limits().shared_bytes
    args, threads, _ = chunk_case(32, 32, 100)
    with pytest.raises(LaunchError, match=r"\[LCH-52\] kernel chunk_sum: its shared arrays"):
        be.run_kernel(CHUNK, args, threads, 32, shared=most // 4 + 1)


# --------------------------------------------------------------- interpreter and OpenCL


@pytest.mark.parametrize(("block", "ext"), [(32, 32), (64, 256), (128, 64), (16, 1024),
                                             (8, 1)])
def test_int50_cg50_block_reduction_bitwise_interp_opencl(block: int, ext: int) -> None:
    """INT-50, CG-50: a tree reduction in dynamic shared memory, barriers between levels,
    integer data: exact sums on the interpreter (race-checked) and OpenCL, bitwise equal,
    for several block sizes and shared extents (larger and smaller than the block)."""
    be = opencl()
    ref, threads, want = chunk_case(block, ext, seed=block + ext)
    dev = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ref.items()}
    run_kernel(CHUNK, ref, threads, block, shared=ext)
    be.run_kernel(CHUNK, dev, threads, block, shared=ext)
    assert ref["out"].tolist() == want.tolist()
    assert dev["out"].tobytes() == ref["out"].tobytes()


def test_int50_out_of_bounds_and_uninitialised_caught() -> None:
    """INT-50: accesses past the launch's extent are out-of-bounds errors naming the
    shared array and its bounds (interpreter and OpenCL's checked accesses); each block
    starts with uninitialised storage, which the interpreter reports when read; the race
    checker follows the array between barriers."""
    be = opencl()
    racy = parse_module("""kernel k(out : i32[])
  shared s : i32[] =
  let t = thread_idx_x in
  s[t] <- t;
  barrier;
  out[global_thread_id] <- s[(t + 1) % block_dim_x]""", "oob.sk").kernels[0]
    for runner in (run_kernel, be.run_kernel):
        # threads 6 and 14 (index 6 of each block) both fault; on a device the first to
        # report wins, which its scheduling decides (a flake before: "thread 14")
        with pytest.raises(InterpError, match=r"oob.sk:4:3: error: kernel k, thread (6|14): "
                           r"out-of-bounds store of shared array 's' at index \[6\] "
                           r"\(bounds 0..5\)"):
            runner(racy, {"out": np.zeros(16, np.int32)}, 16, 8, shared=6)
    ok = {"out": np.zeros(16, np.int32)}
    run_kernel(racy, ok, 16, 8, shared=8)
    assert ok["out"].tolist() == [(t + 1) % 8 for t in range(8)] * 2
    unread = parse_module("""kernel k(out : i32[])
  shared s : i32[] =
  out[global_thread_id] <- s[thread_idx_x]""", "u.sk").kernels[0]
    with pytest.raises(InterpError, match=r"u.sk:3:28: error: kernel k, thread 0: read of "
                       r"uninitialised element \[0\] of shared array 's'"):
        run_kernel(unread, {"out": np.zeros(4, np.int32)}, 4, 4, shared=4)
    racy_store = parse_module("""kernel r(out : i32[])
  shared s : i32[] =
  s[0] <- thread_idx_x;
  out[global_thread_id] <- s[0]""", "r.sk").kernels[0]
    with pytest.raises(InterpError, match=r"r.sk:3:3: error: kernel r, thread 1: data race on "
                       r"shared array 's' element \[0\]"):
        run_kernel(racy_store, {"out": np.zeros(8, np.int32)}, 8, 8, shared=4)


def test_cg50_opencl_and_cuda_source() -> None:
    """CG-50: OpenCL takes the array as a ``__local`` parameter and its extent as an
    ``int``; CUDA declares ``extern __shared__`` bytes seen as the element type, with the
    extent a parameter; every access is bounds-checked against that extent."""
    ocl = emit_opencl(CHUNK)
    assert "__local int* s,\n    int s_len0)" in ocl
    assert "sarek_in1(sarek_oob, 2, j, s_len0)" in ocl
    cu = emit_cuda(CHUNK)
    assert "extern __shared__ __align__(16) unsigned char sarek_dynamic_shared[];" in cu
    assert "int* s = (int*)sarek_dynamic_shared;" in cu
    assert "int s_len0)" in cu


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed here")
def test_cg50_cuda_ptx_compiles_without_fma() -> None:
    """CG-50: the CUDA kernels compile to PTX with nvcc --fmad=false, alone and two
    kernels of different dynamic element types in one unit (one extern name)."""
    for k in (CHUNK, EXTENT):
        ptx = compile_ptx(emit_cuda(k))
        assert ".entry" in ptx and "fma.rn" not in ptx
    ptx = compile_ptx(emit_module([CHUNK, EXTENT], CUDA))
    assert ptx.count(".entry") == 2


# ------------------------------------------------------------------------------ front end


@kernel
def fe_chunk_sum(x: Vec[i32], out: Vec[i32], n: i32) -> None:
    s = shared(i32)
    t = thread_idx_x()
    base = block_idx_x() * length(s)
    j = t
    while j < length(s):
        s[j] = x[base + j] if base + j < n else 0
        j += block_dim_x()
    barrier()
    stride = length(s) // 2
    while stride > 0:
        k = t
        while k < stride:
            s[k] = s[k] + s[k + stride]
            k += block_dim_x()
        barrier()
        stride = stride // 2
    if t == 0:
        out[block_idx_x()] = s[0]


@kernel
def fe_lengths(out: Vec[i32]) -> None:
    s = shared(i32)
    t = thread_idx_x()
    s[t] = len(s) * 100 + s.shape[0]
    barrier()
    out[global_thread_id()] = s[(t + 1) % block_dim_x()]


@kernel
def fe_double(out: Vec[i32], y: Vec[i32]) -> None:
    i = global_thread_id()
    y[i] = out[i] * 2


def test_fe50_shared_without_extent_and_launch_configs() -> None:
    """FE-50: ``shared(T)`` declares the dynamic shared array; its size in elements is the
    third value of ``k[threads, block, n]`` or ``shared=`` of ``k.launch``; numba's
    ``k[grid, block, 0, nbytes]`` gives bytes. Same sums on the interpreter and OpenCL."""
    opencl()
    assert "shared s : i32[]" in fe_chunk_sum.text()
    ref, threads, want = chunk_case(32, 64, 1000)
    for be in ("interp", "opencl"):
        for how in range(3):
            a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ref.items()}
            if how == 0:
                fe_chunk_sum[threads, 32, 64](a["x"], a["out"], 1000, backend=be)
            elif how == 1:
                fe_chunk_sum[(threads // 32,), (32,), 0, 256](a["x"], a["out"], 1000,
                                                               backend=be)
            else:
                fe_chunk_sum.launch(a["x"], a["out"], 1000, threads=threads, block=32,
                                    shared=64, backend=be)
            assert a["out"].tolist() == want.tolist(), (be, how)
        o = np.zeros(8, np.int32)
        fe_lengths[8, 4, 4](o, backend=be)  # len(s) and s.shape[0]: the launch's extent
        assert o.tolist() == [404] * 8


def test_fe51_front_end_errors() -> None:
    """FE-51: a launch without the size, bytes that are not whole elements, a stream,
    a size for a kernel without ``shared(T)``; ``shared(T, 0)`` and two ``shared(T)`` are
    located errors."""
    x, out = np.zeros(64, np.int32), np.zeros(1, np.int32)
    with pytest.raises(LaunchArgumentError, match=r"declares the dynamic shared array 's' "
                       r"\(shared i32\[\]\): give its size at launch"):
        fe_chunk_sum[64, 64](x, out, 64)
    with pytest.raises(LaunchArgumentError, match="1023 dynamic shared bytes are not a whole "
                       "number of i32 elements of 's'"):
        fe_chunk_sum[64, 64, 0, 1023](x, out, 64)
    with pytest.raises(LaunchArgumentError, match="no streams, so stream must be 0 or None"):
        fe_chunk_sum[64, 64, 1, 256](x, out, 64)
    with pytest.raises(LaunchArgumentError, match="must be an integer in 0..2147483647"):
        fe_chunk_sum[64, 64, -4](x, out, 64)
    with pytest.raises(LaunchArgumentError, match="declares no dynamic shared array"):
        fe_double[4, 4, 8](np.zeros(4, np.int32), np.zeros(4, np.int32))

    @kernel
    def zero(a: Vec[i32]) -> None:
        s = shared(i32, 0)
        s[0] = 1
        a[0] = s[0]

    with pytest.raises(SarekError, match=r"test_dynamic_shared.py:\d+:\d+: error: the extent "
                       r"of a shared array must be a positive integer constant \(write "
                       r"shared\(type\), without an extent"):
        _ = zero.ir

    @kernel
    def two(a: Vec[i32]) -> None:
        s = shared(i32)
        u = shared(i32)
        s[0] = 1
        u[0] = 1
        a[0] = s[0] + u[0]

    with pytest.raises(SarekError, match=r"test_dynamic_shared.py:\d+:\d+: error: 's' is "
                       r"already the kernel's shared array sized at launch"):
        _ = two.ir


# --------------------------------------------------------------------------------- fusion


def test_leg50_epilogue_fusion_refuses_dynamic_shared() -> None:
    """LEG-50: ``fuse`` and ``fuse_launches`` refuse a producer or consumer with a dynamic
    shared array, naming the kernel, the array and the rule; the launches run unfused
    with their sizes, the same as run one by one."""
    assert dynamic_shared_refusal(DOUBLE) is None
    r = dynamic_shared_refusal(CHUNK, "producer")
    assert r is not None and r.rule == "LEG-50" and "dynamic shared array s" in str(r)
    with pytest.raises(FusionRefused, match=r"\[LEG-50\] producer chunk_sum declares the "
                       r"dynamic shared array s \(shared i32\[\]\), sized by each launch"):
        fuse(CHUNK, DOUBLE, shared={"out": "out"})
    with pytest.raises(FusionRefused, match=r"\[LEG-50\] consumer chunk_sum declares"):
        fuse(DOUBLE, CHUNK, shared={"x": "y"})
    args, threads, want = chunk_case(32, 32, 256)
    y = np.zeros(8, np.int32)
    lcs = [KernelLaunch(CHUNK, threads, 32, {"x": args["x"], "out": args["out"], "n": 256},
                        shared=32),
           KernelLaunch(DOUBLE, 8, 8, {"out": args["out"], "y": y})]
    new, decisions = fuse_launches(lcs)
    assert [d.fused for d in decisions] == [False]
    # the pair would be refused with s of a constant extent too (chunk_sum stores one
    # element a block): that cause is the real one, LEG-50 said beside it
    assert decisions[0].rule == "LEG-2" and "chunk_sum's s would be refused too: LEG-50" \
        in str(decisions[0])
    assert len(new) == 2 and new[0].shared == 32


PER_THREAD = parse_module("""kernel stage(x : i32[], t : i32[], n : i32)
  shared s : i32[] =
  let i = global_thread_id in
  if i < n then
    s[thread_idx_x] <- x[i] + 1;
    t[i] <- s[thread_idx_x] * 2
kernel twice(t : i32[], y : i32[], n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- t[i] * 2
""", "per_thread.sk").kernels


def test_leg50_stands_where_a_constant_extent_would_fuse() -> None:
    """LEG-50: a producer whose dynamic shared array is per-thread scratch would fuse with
    a constant extent, so the refusal is LEG-50 itself, with its advice (give s a constant
    extent)."""
    stage, twice = PER_THREAD
    x, t, y = (np.arange(64, dtype=np.int32) for _ in range(3))
    lcs = [KernelLaunch(stage, 64, 32, {"x": x, "t": t, "n": 64}, shared=32),
           KernelLaunch(twice, 64, 32, {"t": t, "y": y, "n": 64})]
    _, decisions = fuse_launches(lcs)
    assert decisions[0].rule == "LEG-50" and "constant extent" in decisions[0].reason


def test_leg50_pipeline_runs_refused_pair_unfused_bitwise() -> None:
    """LEG-50 through a pipeline: the pair is refused with the rule and the launches run
    with their dynamic sizes, bitwise equal to running them one by one (interp, OpenCL)."""
    opencl()
    ref, threads, want = chunk_case(32, 32, 256)
    for be in ("interp", "opencl"):
        out, y = np.zeros(8, np.int32), np.zeros(8, np.int32)
        with pipeline(be) as p:
            fe_chunk_sum[threads, 32, 32](ref["x"], out, 256)
            fe_double[8, 8](out, y)
        assert "LEG-50" in p.report()
        assert y.tolist() == (want * 2).tolist()
        out2, y2 = np.zeros(8, np.int32), np.zeros(8, np.int32)
        fe_chunk_sum[threads, 32, 32](ref["x"], out2, 256, backend=be)
        fe_double[8, 8](out2, y2, backend=be)
        assert y.tobytes() == y2.tobytes() and out.tobytes() == out2.tobytes()



def test_cli50_run_with_shared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-50: ``sarek-py run --shared N`` gives the dynamic shared extent (and to the
    ``--compare`` run: bytes identical on OpenCL); without it the kernel is refused with
    its location; with a host program it is a usage error."""
    opencl()
    src = tmp_path / "chunk.sk"
    src.write_text(CHUNK_SUM)
    base = ["run", str(src), "--kernel", "chunk_sum", "--threads", "128", "--block", "32",
            "--size", "x=100", "--size", "n=100", "--size", "out=4"]
    assert main([*base, "--shared", "32", "--compare", "opencl"]) == 0
    out = capsys.readouterr().out
    assert "out: identical" in out, out
    assert main(base) == 1
    err = capsys.readouterr().err
    assert f"{src}:1:1: error: [LCH-50] kernel chunk_sum has the dynamic shared array s" \
        in err and "Traceback" not in err, err
    prog = tmp_path / "p.sk"
    prog.write_text(PROGRAM)
    assert main(["run", str(prog), "--shared", "4"]) == 2
    assert "--shared" in capsys.readouterr().err


def test_cg50_lch52_cuda_glue_with_a_fake_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """CG-50 on the CUDA backend (a fake driver: no GPU here; the PTX is compiled by nvcc):
    the launch gets PyCUDA's ``shared=`` in bytes and the extent in elements as the last
    argument; LCH-52 against the device's 48 KiB, static and dynamic bytes together."""
    from test_runtime import _FakeDriver

    from sarek_py.runtime import cuda

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed here")
    fake = _FakeDriver()
    monkeypatch.setattr(cuda, "_import_driver", lambda: fake)
    be = cuda.CudaBackend()
    args, threads, _ = chunk_case(32, 64, 200)
    be.run_kernel(CHUNK, args, threads, 32, shared=64)
    (values, kw), = fake.launches
    assert kw == {"block": (32, 1, 1), "grid": (threads // 32, 1), "shared": 64 * 4}
    assert type(values[-1]).__name__ == "int32" and values[-1] == 64
    be.run_kernel(EXTENT, {"out": np.zeros(4, np.int32)}, 4, 4, shared=3)
    assert fake.launches[-1][1]["shared"] == 3 * 8
    be.run_kernel(DOUBLE, {"out": np.zeros(4, np.int32), "y": np.zeros(4, np.int32)}, 4, 4)
    assert "shared" not in fake.launches[-1][1]  # no dynamic shared array: no bytes given
    most = be.device_limits().shared_bytes
    with pytest.raises(LaunchError, match=r"\[LCH-52\] kernel extent: its shared arrays \(pad: "
                       r"64 bytes, s: \d+ bytes"):
        be.run_kernel(EXTENT, {"out": np.zeros(4, np.int32)}, 4, 4, shared=(most - 64) // 8 + 1)
    be.run_kernel(EXTENT, {"out": np.zeros(4, np.int32)}, 4, 4, shared=(most - 64) // 8)
