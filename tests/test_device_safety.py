"""Device runs never kill the process (issue 11, "Dead process on OpenCL"): bounds-checked
accesses (specs/codegen.md, CG-22 … CG-24; specs/launch.md, LCH-20) and launch parameters
checked against the device's limits (LCH-21).

On PoCL a device run shares the Python process's memory: before these rules an unguarded
kernel corrupted the heap (SIGSEGV, SIGABRT or a deadlock, varying by run), 2^32 threads
crashed the driver (SIGSEGV/SIGFPE/SIGILL) and a 4 MiB shared array failed a PoCL
assertion (SIGABRT). So every such case runs in a *child process*: a crash is seen as a
dead child, not a dead pytest, and the test asks for a clean error exit (status 1, the
interpreter's located message, no traceback).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.codegen import CUDA, OPENCL, emit, emit_cuda, emit_opencl
from sarek_py.codegen.cstyle import emit_module
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.parser import parse_file, parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import LaunchError, get_backend
from sarek_py.runtime.limits import MAX_THREADS, DeviceLimits, check_limits

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).with_name("test_device_safety_cases.sk")
MODULE = parse_file(CASES)
check_module(MODULE)
OCLGRIND = shutil.which("oclgrind")
NVCC = shutil.which("nvcc")

_script = Path(sys.executable).parent / "sarek-py"
CLI = [str(_script)] if _script.exists() else [sys.executable, "-m", "sarek_py.cli"]


def opencl_or_skip() -> Any:
    try:
        return get_backend("opencl")
    except Exception as exc:  # BackendUnavailable
        pytest.skip(f"no OpenCL device here: {exc}")


def child(argv: list[str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a child process; a dead child (signal, abort) fails the test with
    what it printed, a hang fails it at ``timeout``."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the child hung (> {timeout} s): {argv}\n{exc.stderr!r}")
    assert proc.returncode >= 0, (
        f"the child died of signal {-proc.returncode}: {argv}\n{proc.stderr[-2000:]}")
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def child_python(code: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return child([sys.executable, "-c", textwrap.dedent(code)], timeout)


def run_cli(kernel: str, backend: str, *args: str) -> subprocess.CompletedProcess[str]:
    return child([*CLI, "run", str(CASES), "-k", kernel, "--backend", backend, *args])


# --------------------------------------------------------------- CG-22, LCH-20: the CLI

#: unguarded kernels with odd sizes: (kernel, run arguments); every one has threads that
#: go out of bounds: in a store, a read, a 2-D read with lower bounds, a shared and a
#: private array, an index read from memory, inside helpers, in a while loop's test
ODD = [
    ("saxpy", ["-n", "1000", "--size", "x=10", "--size", "y=10"]),
    ("fill", ["-n", "1000", "--size", "y=13"]),
    ("gather", ["-n", "101", "--size", "x=101", "--size", "out=101"]),
    ("scatter", ["-n", "97", "--size", "idx=97", "--size", "out=51", "--size", "n=97"]),
    ("grid", ["-n", "99", "--size", "a=3x5", "--size", "out=99"]),
    ("tile", ["-n", "256", "-b", "64", "--size", "x=256", "--size", "out=256"]),
    ("neighbour", ["-n", "77", "--size", "x=77", "--size", "out=77"]),
    ("poker", ["-n", "93", "--size", "v=93", "--size", "n=93"]),
    ("scan", ["-n", "100", "--size", "x=7", "--size", "out=100"]),
    ("private_idx", ["-n", "100", "--size", "x=100", "--size", "out=100"]),
    ("below", ["-n", "100", "--size", "x=100", "--size", "out=100"]),
    ("stopping", ["-n", "100", "--size", "x=50", "--size", "out=100"]),
    ("far", ["-n", "50", "--size", "x=50", "--size", "out=50"]),
    ("cube", ["-n", "50", "--size", "c=2x2x5", "--size", "out=50"]),
]

_OOB = re.compile(r"^(?P<loc>\S+:\d+:\d+): error: kernel (?P<k>\w+), thread (?P<t>\d+)"
                  r"(?P<helper> \(in helper \w+\))?: out-of-bounds (?P<kind>read|store) of "
                  r"(?P<what>(shared |local )?array '\w+') at index \[(?P<idx>[-\d, ]+)\] "
                  r"\(bounds (?P<bounds>[-\d., ]+)\)$")


def _parse(stderr: str) -> re.Match[str]:
    m = _OOB.match(stderr.splitlines()[0])
    assert m, stderr
    return m


def _out_of_bounds(idx: str, bounds: str) -> bool:
    for i, b in zip(idx.split(", "), bounds.split(", "), strict=True):
        lo, hi = (int(x) for x in b.split(".."))
        if not lo <= int(i) <= hi:
            return True
    return False


@pytest.mark.parametrize(("name", "args"), ODD, ids=[n for n, _ in ODD])
def test_cg22_lch20_unguarded_kernel_reports_like_the_interpreter(name: str,
                                                                  args: list[str]) -> None:
    """CG-22, LCH-20: on OpenCL the unguarded kernel ends the run with exit status 1 and the
    interpreter's message: same location, kernel, helper, access kind and array; the
    thread and index may be another faulting thread's (the device reports the first
    fault it records), so they must be out of bounds and agree with the bounds shown.
    Before CG-22 these children died (SIGSEGV/SIGABRT) or hung."""
    opencl_or_skip()
    ref = run_cli(name, "interp", *args)
    dev = run_cli(name, "opencl", *args)
    assert ref.returncode == 1 and dev.returncode == 1, (ref.stderr, dev.stderr)
    r, d = _parse(ref.stderr), _parse(dev.stderr)
    for field in ("loc", "k", "helper", "kind", "what", "bounds"):
        assert r[field] == d[field], (field, ref.stderr, dev.stderr)
    assert _out_of_bounds(d["idx"], d["bounds"]), dev.stderr
    assert dev.stderr.splitlines()[1:] == ref.stderr.splitlines()[1:]  # the line, the caret
    if name in ("saxpy", "fill", "below", "grid", "gather", "far", "cube"):
        # the index is the thread's own: it names the faulting thread (64 bits for far)
        t = int(d["t"])
        want = {"saxpy": t, "fill": t, "below": t - 1, "gather": 3 * t, "grid": t,
                "far": t * 3000000000, "cube": t}[name]
        if want is not None:
            assert int(d["idx"].split(", ")[-1]) == want, dev.stderr


def test_cg24_unchecked_is_explicit_and_refused_for_the_interpreter() -> None:
    """CG-24: `run --unchecked` runs the unchecked C: a guarded kernel prints the same
    digests as checked; the interpreter always checks, so the flag is a usage error
    there; `emit --unchecked` prints the C without checks."""
    opencl_or_skip()
    guarded = ["run", str(ROOT / "tests" / "test_codegen_cases.sk"), "-k", "saxpy", "-n",
               "1000", "--size", "n=1000", "--backend", "opencl"]
    checked = child([*CLI, *guarded])
    unchecked = child([*CLI, *guarded, "--unchecked"])
    assert checked.returncode == unchecked.returncode == 0, checked.stderr + unchecked.stderr
    assert checked.stdout == unchecked.stdout and "sha256=" in checked.stdout
    bad = run_cli("below", "interp", "-n", "10", "--unchecked")
    assert bad.returncode == 2 and "--unchecked: the interpreter always checks" in bad.stderr
    src = child([*CLI, "emit", str(CASES), "-t", "opencl", "-k", "saxpy", "--unchecked"])
    assert src.returncode == 0 and "sarek_oob" not in src.stdout
    assert "y[i] = a * x[i] + y[i];" in src.stdout


# ------------------------------------------------------------- LCH-21: launch limits


@pytest.mark.parametrize(("threads", "block", "words"), [
    (2**32, 256, "thread count 4294967296 is more than 2147483647"),
    (2**31, 256, "thread count 2147483648 is more than 2147483647"),
    (2**40 + 3, 256, "thread count 1099511627779 is more than"),
    (1000, 5000, "block size 5000 exceeds the device's limit of"),
    (1000, 2**31, "block size 2147483648 exceeds"),
])
def test_lch21_thread_counts_and_blocks_refused_in_a_child(threads: int, block: int,
                                                           words: str) -> None:
    """LCH-21: before it, 2^32 threads killed the process (SIGSEGV/SIGFPE/SIGILL on PoCL)."""
    opencl_or_skip()
    proc = child([*CLI, "run", str(CASES), "-k", "fill", "-n", str(threads), "-b",
                  str(block), "--size", "y=10", "--backend", "opencl"])
    assert proc.returncode == 1, proc.stderr
    assert words in proc.stderr and proc.stderr.startswith("error: kernel fill:")


SHARED = """
kernel big(y : f32[], n : i32)
  shared s : f32[{n}]
  =
  let t = thread_idx_x in
  s[t] <- 1.0f;
  barrier;
  let i = global_thread_id in
  if i < n then y[i] <- s[t]
"""


@pytest.mark.parametrize("elements", [1048576, 262145])
def test_lch21_shared_memory_over_the_device_limit(tmp_path: Path, elements: int) -> None:
    """LCH-21: a 4 MiB shared array (and one just past PoCL's 1 MiB) is refused, naming the
    array, its bytes and the limit; before, PoCL failed an assertion (SIGABRT)."""
    be = opencl_or_skip()
    f = tmp_path / "big.sk"
    f.write_text(SHARED.format(n=elements))
    proc = child([*CLI, "run", str(f), "-k", "big", "-n", "256", "--size", "y=256",
                  "--size", "n=256", "--backend", "opencl"])
    assert proc.returncode == 1, proc.stderr
    assert f"its shared arrays (s: {elements * 4} bytes)" in proc.stderr
    assert f"more than the {be.device_limits().shared_bytes} bytes" in proc.stderr


def test_lch21_limits_are_checked_before_anything_is_allocated() -> None:
    """LCH-21: Backend.start refuses before it allocates (a status buffer of 2^32 ints
    for a stopping kernel would be 16 GiB), and every launch path refuses alike."""
    be = opencl_or_skip()
    k = MODULE.kernel("stopping")
    before = be.stats.bytes_allocated
    args = {"x": np.zeros(4, np.float32), "out": np.zeros(4, np.float32)}
    with pytest.raises(LaunchError, match="thread count 4294967296"):
        be.run_kernel(k, args, 2**32, 256)
    assert be.stats.bytes_allocated == before
    with pytest.raises(LaunchError, match="block size 0 is below one"):
        be.launch(k, {}, 10, 0)
    with pytest.raises(LaunchError, match="thread count must be an integer, not True"):
        be.run_kernel(k, args, True, 256)
    for bad in (2.5, "7", None, np.float32(4)):  # what the annotations do not admit
        with pytest.raises(LaunchError, match="thread count must be an integer"):
            check_limits(k, bad, 256, be.device_limits())
    with pytest.raises(LaunchError, match="block size must be an integer"):
        check_limits(k, 4, 2.0, None)


def test_lch21_limits_table() -> None:
    """LCH-21 on a made-up device: blocks per launch, threads in all, block, shared."""
    k = MODULE.kernel("tile")  # 64 f32 shared: 256 bytes
    lim = DeviceLimits("test device", max_block=128, max_blocks=10, max_global=1000,
                       shared_bytes=256)
    assert check_limits(k, np.int64(640), np.int32(64), lim) == (640, 64)
    assert check_limits(k, 0, 64, lim) == (0, 64)  # runs no thread
    with pytest.raises(LaunchError, match=r"needs 11 blocks, more than the device's limit "
                                          r"of 10 \(test device\)"):
        check_limits(k, 641, 64, lim)
    with pytest.raises(LaunchError, match="needs 1024 threads, more than the device's limit "
                                          "of 1000"):
        check_limits(k, 1000, 128, attrs_evolve(lim, max_blocks=None))
    with pytest.raises(LaunchError, match="block size 129 exceeds the device's limit of 128"):
        check_limits(k, 10, 129, lim)
    with pytest.raises(LaunchError, match=r"shared arrays \(buf: 256 bytes\) need 256 bytes, "
                                          "more than the 255 bytes"):
        check_limits(k, 10, 64, attrs_evolve(lim, shared_bytes=255))
    assert MAX_THREADS == 2**31 - 1


def attrs_evolve(lim: DeviceLimits, **kw: Any) -> DeviceLimits:
    import attrs

    return attrs.evolve(lim, **kw)


# ------------------------------------------------------- LCH-20: every launch path


def test_lch20_python_api_scan_loop_ends_at_the_fault() -> None:
    """CG-22: a while loop whose test reads past the end (all zeros: it never finds its
    stop value) ends at the fault instead of spinning on element 0; run_kernel raises the
    interpreter's error class, and the caller's copied arrays are left as they were (arrays
    used in place, LCH-67, hold what was stored before the fault)."""
    opencl_or_skip()
    proc = child_python("""
        import numpy as np
        from sarek_py.ir.diagnostics import InterpError
        from sarek_py.ir.parser import parse_file
        from sarek_py.runtime import get_backend
        k = parse_file("tests/test_device_safety_cases.sk").kernel("scan")
        out = np.full(16, 5, np.int32)
        be = get_backend("opencl")
        be.zero_copy = False  # copied arrays; in place (LCH-67): tests/test_zero_copy.py
        try:
            be.run_kernel(k, {"x": np.zeros(16, np.int32), "out": out}, 16, 16)
        except InterpError as e:
            print("raised:", e.message)
        print("out untouched:", bool((out == 5).all()))
    """, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert ("raised: kernel scan, thread 0: out-of-bounds read of array 'x' at index [16] "
            "(bounds 0..15)") in proc.stdout
    assert "out untouched: True" in proc.stdout


HOST = """
program p
  var n : i32 = 37;
  var a : f32[1:] allocatable;
begin
  allocate a[1:n];
  parallel for (i = 1 to n + 3) do a[i] <- 1.0f done
end
"""


def test_lch20_offloaded_host_program_reports_at_sync() -> None:
    """LCH-20: a host program whose offloaded loop runs past its array (device-resident
    arrays, launch then sync) raises at the sync, as the interpreter reports it."""
    opencl_or_skip()
    proc = child_python(f"""
        from sarek_py.ir.diagnostics import InterpError
        from sarek_py.host.interp import run_program
        from sarek_py.host.offload import offload
        from sarek_py.ir.host.text import parse_program
        from sarek_py.runtime import get_backend
        p = parse_program({HOST!r})
        for dev in (None, get_backend("opencl")):
            try:
                run_program(offload(p) if dev else p, {{}}, device=dev)
                print("no error")
            except InterpError as e:
                print("raised:", e.message)
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("raised", "no error"))]
    assert len(lines) == 2 and all(ln.startswith("raised:") for ln in lines), proc.stdout
    assert "out-of-bounds store of array 'a' at index [38] (bounds 1..37)" in lines[0]
    assert "out-of-bounds store of array 'a' at index [" in lines[1]
    assert "(bounds 1..37)" in lines[1]


def test_lch20_frontend_kernel(tmp_path: Path) -> None:
    """LCH-20 through the Python front end (@kernel launched on opencl)."""
    opencl_or_skip()
    script = tmp_path / "frontend_oob.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from sarek_py.frontend import Vec, f32, global_thread_id, kernel
        from sarek_py.ir.diagnostics import InterpError

        @kernel
        def copy(x: Vec[f32], y: Vec[f32]):
            i = global_thread_id()
            y[i] = x[i]

        try:
            copy[1000, 128](np.ones(10, np.float32), np.zeros(10, np.float32),
                            backend="opencl")
            print("no error")
        except InterpError as e:
            print("raised:", e.message)
    """))
    proc = child([sys.executable, str(script)])
    assert proc.returncode == 0, proc.stderr
    assert ("raised: kernel copy, thread 10: out-of-bounds read of array 'x' at index [10] "
            "(bounds 0..9)") in proc.stdout or re.search(
        r"raised: kernel copy, thread (\d+): out-of-bounds read of array 'x' at index "
        r"\[\1\] \(bounds 0..9\)", proc.stdout), proc.stdout


# ------------------------------------------------------------ CG-22, CG-23: the C


SAXPY_CHECKED = """\
  const float y_value = a * sarek_get1(x, 1, i, x_len0) + sarek_get1(y, 2, i, y_len0);
  sarek_set1(y, 3, i, y_len0, y_value);
}
"""


def test_cg22_checked_text_is_readable() -> None:
    """CG-22: each access is one named check; a read out of bounds reads nothing; the value
    is computed before the store's check; the hidden sarek_oob buffer is the last
    argument; the ABI lists the sites; sarek_at is emitted only where used."""
    em = emit(MODULE.kernel("saxpy"), OPENCL)
    assert em.source.endswith(SAXPY_CHECKED), em.source
    assert "bool sarek_in1(__global int* oob, int site, long i0, long n0) {" in em.source
    assert "atomic_cmpxchg(oob, 0, site) == 0" in em.source and "sarek_at1" not in em.source
    # CG-28: the read and store of a global array are CG-22's conditional and `if`, once
    assert ("#define sarek_get1(a, site, i0, n0) \\\n"
            "  (sarek_in1(sarek_oob, site, i0, n0) ? (a)[(i0)] : 0)\n") in em.source
    assert ("#define sarek_set1(a, site, i0, n0, v) \\\n"
            "  do { if (sarek_in1(sarek_oob, site, i0, n0)) (a)[(i0)] = (v); } while (0)\n"
            ) in em.source
    assert em.abi.args[-1].kind == "fault" and em.abi.fault_words == 6
    assert [(s.array, s.kind) for s in em.abi.sites] == [
        ("x", "read"), ("y", "read"), ("y", "store")]
    cu = emit_cuda(MODULE.kernel("saxpy"))
    assert "__device__ bool sarek_in1(int* oob, int site, long long i0, long long n0)" in cu
    assert "atomicCAS(oob, 0, site) == 0" in cu


def test_cg22_helpers_take_the_buffer_and_their_first_site() -> None:
    """CG-22: a helper's sites follow its caller's position (sarek_site + k), so its C is
    the same whichever kernel calls it; the kernel's table names the caller's array."""
    em = emit(MODULE.kernel("neighbour"), OPENCL)
    assert ("float peek(__global float* v, int v_len0, int k, __global int* sarek_oob, "
            "int sarek_site) {") in em.source
    assert "sarek_get1(v, sarek_site, sarek_add_i32(k, 1), v_len0)" in em.source
    assert "peek(x, x_len0, i, sarek_oob, 1)" in em.source
    assert [(s.array, s.kind, s.helper) for s in em.abi.sites] == [
        ("x", "read", "peek"), ("out", "store", None)]


def test_cg22_index_read_from_memory_is_computed_once() -> None:
    """CG-22: a store index that reads memory is a constant, checked, then used."""
    src = emit_opencl(MODULE.kernel("scatter"))
    assert "const int out_at0 = sarek_get1(idx, 1, i, idx_len0);" in src
    assert "sarek_set1(out, 2, out_at0, out_len0, i);" in src


def test_cg22_while_loop_ends_at_a_fault_unless_it_has_a_barrier() -> None:
    src = emit_opencl(MODULE.kernel("scan"))
    assert "while (atomic_or(sarek_oob, 0) == 0 && (sarek_get1(" in src
    assert "while (*(volatile int*)sarek_oob == 0 && (" in emit_cuda(MODULE.kernel("scan"))
    block = parse_file(ROOT / "examples" / "block_reduce.sk").kernel("block_sum")
    assert "while (stride > 0) {" in emit_opencl(block)


def test_cg23_proven_accesses_are_plain() -> None:
    """CG-23: a local or shared array indexed within its constant extents (by the range
    analysis) keeps the plain access; global arrays are always checked."""
    m = parse_module("""
kernel k(out : f32[])
  local acc : f32[4]
  shared s : f32[8]
  =
  for q = 0 to 3 do acc[q] <- 1.0f done;
  s[thread_idx_x % 8] <- acc[2];
  out[0] <- acc[3] + s[7]
""")
    src = emit_opencl(m.kernel("k"))
    assert "acc[q] = 1.0f;" in src and "acc[3]" in src and "s[7]" in src
    assert "sarek_set1(out, 1, 0, out_len0, " in src
    # thread_idx_x % 8 lies in 0..7 (a remainder of a non-negative value, CG-27): plain
    assert "  s[(int)get_local_id(0) % 8] = acc[2];" in src and "sarek_in1(sarek_oob, 2" not in src


def test_cg16_cg22_whole_file_is_one_translation_unit() -> None:
    """CG-16 with CG-22: the check functions are defined once; helpers once."""
    src = emit_module(MODULE.kernels, OPENCL)
    assert src.count("bool sarek_in1(") == 1 and src.count("float peek(") == 1
    be = opencl_or_skip()
    be.program(src)  # builds


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed here")
def test_cg22_checked_cuda_compiles_without_contraction(tmp_path: Path) -> None:
    """CG-13 with CG-22: the checked CUDA C of every case compiles with `nvcc --fmad=false
    -ptx`, with no fma.rn."""
    from sarek_py.codegen.nvcc import compile_ptx

    src = emit_module(MODULE.kernels, CUDA)
    ptx = compile_ptx(src)
    assert ".entry saxpy(" in ptx and "fma.rn" not in ptx
    assert "atom.global.cas" in ptx or "atom.cas" in ptx


def test_cg22_checked_and_unchecked_give_the_same_bytes() -> None:
    """CG-22, CG-15: guarded kernels give the interpreter's bytes checked and unchecked."""
    be = opencl_or_skip()
    from sarek_py.cli.inputs import make_inputs
    from sarek_py.ir.interp import run_kernel

    codegen = parse_file(ROOT / "tests" / "test_codegen_cases.sk")
    runs = [("saxpy", 1000, {}), ("grid2d", 60, {"a": (61, 7), "b": (60, 7), "sums": (60,)}),
            ("helpers", 300, {}), ("float_ops", 500, {"o32": (1000,), "o64": (1000,)})]
    for name, n, sizes in runs:
        k = codegen.kernel(name)
        sizes = {**sizes, **({"n": (n,)} if any(p.name == "n" for p in k.params) else {})}
        base = make_inputs(k, sizes, n, 3)
        outs = []
        for checked in (None, True, False):
            args = {a: (v.copy() if isinstance(v, np.ndarray) else v) for a, v in base.items()}
            if checked is None:
                run_kernel(k, args, n, 64)
            else:
                be.checked = checked
                try:
                    be.run_kernel(k, args, n, 64)
                finally:
                    be.checked = True
            outs.append({a: v.tobytes() for a, v in args.items() if isinstance(v, np.ndarray)})
        assert outs[0] == outs[1] == outs[2], name


def test_lch20_cuda_glue_reads_the_fault_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """LCH-20 on the CUDA backend (the fake driver of test_runtime.py; no GPU here): a
    fault the device wrote is raised at sync with the interpreter's words; LCH-21 uses
    the device's attributes."""
    from test_runtime import _FakeDriver

    from sarek_py.runtime import cuda

    if NVCC is None:
        pytest.skip("nvcc is not installed here")
    fake = _FakeDriver()
    monkeypatch.setattr(cuda, "_import_driver", lambda: fake)
    be = cuda.CudaBackend()
    k = MODULE.kernel("grid")
    args = {"a": np.zeros((3, 5), np.float32), "out": np.zeros(9, np.float32)}
    be.run_kernel(k, args, 9, 4)  # the fake runs nothing: no fault recorded
    (values, _), = fake.launches
    fault = values[-1]
    assert isinstance(fault, np.ndarray) and fault.nbytes == 4 * 9

    class Faulting(list[Any]):
        """The fake device's launches; each writes a fault record, as the C would."""

        def append(self, item: Any) -> None:
            super().append(item)
            words = item[0][-1].view(np.int32)
            words[:9] = [1, 6, 0, 0, 0, 3, 6, 0, 5]  # site 1 (a read of a): a[1, 6], thread 6

    fake.launches = Faulting()
    with pytest.raises(InterpError, match=re.escape(
            "kernel grid, thread 6: out-of-bounds read of array 'a' at index [1, 6] "
            "(bounds 1..3, 0..4)")):
        be.run_kernel(k, args, 9, 4)
    with pytest.raises(LaunchError, match="block size 2048 exceeds the device's limit of 1024"):
        be.run_kernel(k, args, 9, 2048)
    big = parse_module(SHARED.format(n=20000)).kernel("big")
    with pytest.raises(LaunchError, match="more than the 49152 bytes of shared memory"):
        be.run_kernel(big, {"y": np.zeros(64, np.float32), "n": 64}, 64, 64)


# ---------------------------------------------------------------- CG-17 with CG-22


OCLGRIND_SCRIPT = r"""
import sys
from sarek_py.cli.inputs import make_inputs
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.parser import parse_file
from sarek_py.runtime import get_backend

be = get_backend("opencl")
print("device:", be.device_name, flush=True)
m = parse_file(sys.argv[1])
for name, threads, block, sizes in [
        ("saxpy", 64, 32, {"x": (10,), "y": (10,)}), ("fill", 64, 32, {"y": (13,)}),
        ("grid", 40, 8, {"a": (3, 5), "out": (40,)}), ("tile", 128, 64, {"out": (128,)}),
        ("neighbour", 30, 16, {}), ("poker", 30, 16, {"n": (30,)}),
        ("private_idx", 30, 16, {}), ("below", 30, 16, {}),
        ("scan", 30, 16, {"x": (7,)})]:  # (scatter's random indices race in bounds)
    k = m.kernel(name)
    try:
        be.run_kernel(k, make_inputs(k, sizes, threads, 1), threads, block)
        print("no fault", name, flush=True)
    except InterpError as e:
        print("fault", name, e.message, flush=True)
"""


@pytest.mark.skipif(OCLGRIND is None, reason="oclgrind is not installed (Debian: oclgrind)")
def test_cg17_cg22_checked_kernels_do_no_out_of_bounds_access(tmp_path: Path) -> None:
    """CG-17 with CG-22: under `oclgrind --data-races` the unguarded kernels, checked,
    report their faults and oclgrind sees no invalid read or write, and no race on the
    fault record (a while loop's test reads it atomically)."""
    script = tmp_path / "oob.py"
    script.write_text(OCLGRIND_SCRIPT)
    assert OCLGRIND is not None
    proc = subprocess.run([OCLGRIND, "--data-races", sys.executable, str(script), str(CASES)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Oclgrind" in proc.stdout, "the script did not run on oclgrind's device"
    faults = [ln for ln in proc.stdout.splitlines() if ln.startswith("fault ")]
    assert len(faults) == 9, proc.stdout
    assert not re.search(r"Invalid (read|write)|data race", proc.stderr), proc.stderr[-3000:]


def test_cg22_index_calling_a_storing_helper_is_computed_once() -> None:
    """CG-22: a read whose index calls a helper that stores goes through sarek_at (the
    call runs once); a pure helper's call may be repeated, so its read reads nothing out
    of bounds."""
    m = parse_module("""
fun bump(c : i32[], k : i32) : i32 =
  c[0] <- c[0] + 1;
  return k

pure fun twice(k : i32) : i32 =
  return 2 * k

kernel k(x : f32[], c : i32[], out : f32[]) =
  let i = global_thread_id in
  if i < length(out) then out[i] <- x[bump(c, i)] + x[twice(i)]
""")
    check_module(m)
    src = emit_opencl(m.kernel("k"))
    assert src.count("bump(c, c_len0, i, sarek_oob, ") == 1
    assert "x[sarek_at1(sarek_oob, 3, bump(c, c_len0, i, sarek_oob, 1), x_len0)]" in src
    assert "sarek_get1(x, 4, twice(i), x_len0)" in src
    be = opencl_or_skip()
    c = np.zeros(1, np.int32)
    with pytest.raises(InterpError, match=r"out-of-bounds read of array 'x' at index \[1\d\]"):
        be.run_kernel(m.kernel("k"), {"x": np.ones(10, np.float32), "c": c,
                                      "out": np.zeros(10, np.float32)}, 10, 16)


# ------------------------------------------------- CG-22: random kernels, differential

#: the device half of the random differential, in a child of the fuzz script's own: one
#: kernel at a time, so that a kernel the device runs for long past its fault (the
#: interpreter stops there; the device has no loop budget, CG-22) is stopped at a limit
#: and counted instead of hanging the whole run
DEVICE_WORKER = r"""
import pickle, sys
sys.path.insert(0, "tests")
from sarek_py.codegen import CodegenError
from sarek_py.ir.diagnostics import InterpError
from sarek_py.runtime import get_backend

be = get_backend("opencl")
inp, out = sys.stdin.buffer, sys.stdout.buffer
while (head := inp.read(8)):
    k, args = pickle.loads(inp.read(int.from_bytes(head, "little")))
    try:
        be.run_kernel(k, args, 1, 1, grid=(1, 1, 1), block_shape=(1, 1, 1))
        res = ("ok",)
    except CodegenError:
        res = ("codegen",)
    except InterpError as e:
        res = ("fault", e.message, e.loc)
    data = pickle.dumps(res)
    out.write(len(data).to_bytes(8, "little") + data)
    out.flush()
"""

FUZZ_SCRIPT = r"""
import copy, pickle, select, subprocess, sys
sys.path.insert(0, "tests")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import kernels
from test_codegen_fuzz import LOOP_BUDGET, inputs
from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Binary, BinaryOp, Cast
from sarek_py.ir.typeof import scalar_type_of
from sarek_py.ir.visit import iter_nodes

WORKER, LIMIT = sys.argv[2], float(sys.argv[3])
count = {"kernels": 0, "oob": 0, "same": 0, "undefined_after": 0, "long_after": 0}
UB_OPS = (BinaryOp.DIV, BinaryOp.MOD, BinaryOp.SHL, BinaryOp.SHR)


class Device:
    # the device worker (DEVICE_WORKER): started on first use and after a kill
    proc = None

    def run(self, k, args):
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, WORKER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
        data = pickle.dumps((k, args))
        self.proc.stdin.write(len(data).to_bytes(8, "little") + data)
        self.proc.stdin.flush()
        # the worker's start (OpenCL, imports) counts against the first kernel's limit
        ready, _, _ = select.select([self.proc.stdout], [], [], LIMIT)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return None
        head = self.proc.stdout.read(8)
        assert len(head) == 8, f"the device worker died: {self.proc.wait()}"
        return pickle.loads(self.proc.stdout.read(int.from_bytes(head, "little")))


device = Device()


def may_be_undefined_in_c(k):
    # an operation C leaves undefined and the interpreter reports (CG-7): integer / % by
    # zero or MIN / -1, a shift out of range, a float converted to an integer out of range
    for b in (k.body, *(h.body for h in k.helpers)):
        for n in iter_nodes(b):
            if isinstance(n, Binary) and n.op in UB_OPS and scalar_type_of(n).is_int:
                return True
            if isinstance(n, Cast) and n.to.is_int and scalar_type_of(n.arg).is_float:
                return True
    return False


@settings(max_examples=int(sys.argv[1]), deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(kernels(depth=2), st.integers(0, 2**16))
def one(k, seed):
    count["kernels"] += 1
    args = inputs(k, seed)
    try:
        # one thread on a 3-D launch: the kernels read y and z intrinsics (LCH-26)
        run_kernel(k, copy.deepcopy(args), 1, 1, loop_budget=LOOP_BUDGET, grid=(1, 1, 1),
                   block_shape=(1, 1, 1))
        return
    except InterpError as e:
        if "out-of-bounds" not in e.message:
            return
        want = (e.message, e.loc)
    count["oob"] += 1
    res = device.run(k, copy.deepcopy(args))
    if res is None:
        # still running LIMIT seconds after the launch: past its fault the device thread
        # goes on (the interpreter stopped there) through loops the interpreter never
        # reached; counted, bounded by the test
        count["long_after"] += 1
        print("LONG_AFTER", want, flush=True)
        return
    if res[0] == "codegen":
        count["oob"] -= 1
        return
    if res[0] == "fault":
        got = (res[1], res[2])
        if got == want:
            count["same"] += 1
            return
        print("MISMATCH", want, got, flush=True)
        raise AssertionError("the device reported another fault")
    if may_be_undefined_in_c(k):
        # past the fault the device keeps running, where the interpreter stopped: an
        # operation C leaves undefined there lets the compiler drop the record (the
        # CG-7 gap, specs/codegen.md CG-22)
        count["undefined_after"] += 1
        return
    print("NO ERROR", want, flush=True)
    raise AssertionError("the device ran past an out-of-bounds access")

one()
print("counts", count["kernels"], count["oob"], count["same"], count["undefined_after"],
      count["long_after"], flush=True)
if device.proc is not None:
    device.proc.stdin.close()
    device.proc.wait()
"""


#: seconds a device run of one faulting random kernel may take (the OpenCL build included)
DEVICE_LIMIT_S = 30


def test_cg22_random_kernels_fault_like_the_interpreter(tmp_path: Path) -> None:
    """CG-22, LCH-20 over the kernel generator of CG-15 (tests/strategies.py), one thread
    each: whenever the interpreter reports an out-of-bounds access, the device reports
    the same message at the same location (with one thread, the same access), except a
    kernel that also holds an operation C leaves undefined (integer / % or shift, float
    to integer), which the device may reach past the fault (the CG-7 gap, counted). In a
    child process: a device crash must show as a failure, not kill pytest.
    ``SAREK_FUZZ=1`` runs 1000 kernels instead of 60."""
    opencl_or_skip()
    n = 1000 if os.environ.get("SAREK_FUZZ") else 60
    script = tmp_path / "oob_fuzz.py"
    script.write_text(FUZZ_SCRIPT)
    worker = tmp_path / "device_worker.py"
    worker.write_text(DEVICE_WORKER)
    proc = child([sys.executable, str(script), str(n), str(worker), str(DEVICE_LIMIT_S)],
                 timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("counts")]
    kernels_run, oob, same, undefined_after, long_after = (int(x) for x in line.split()[1:])
    assert kernels_run == n and oob == same + undefined_after + long_after and same > 0, line
    # a device run cut at the limit is not compared: at most one in ten faulting kernels
    assert long_after * 10 <= oob, line


def test_lch20_launch_nodes_report_at_their_sync() -> None:
    """LCH-20 through the launch node's executor (launch/execute.py: start, sync)."""
    opencl_or_skip()
    proc = child_python("""
        import numpy as np
        from sarek_py.ir.diagnostics import InterpError
        from sarek_py.ir.nodes import Const, Ref, var
        from sarek_py.ir.parser import parse_file
        from sarek_py.ir.types import Scalar, array
        from sarek_py.host.execute import execute
        from sarek_py.ir.host.launch import Launch, Sync
        from sarek_py.runtime import get_backend
        k = parse_file("tests/test_device_safety_cases.sk").kernel("fill")
        y = var("y", array(Scalar.F32, 1))
        node = Launch(k, Const(300, Scalar.I64), Const(64, Scalar.I32), (Ref(y),))
        try:
            execute([node, Sync()], {"y": np.zeros(17, np.float32)}, get_backend("opencl"))
            print("no error")
        except InterpError as e:
            print("raised:", e.message)
    """)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"raised: kernel fill, thread (\d+): out-of-bounds store of array 'y' "
                     r"at index \[\1\] \(bounds 0..16\)", proc.stdout), proc.stdout
