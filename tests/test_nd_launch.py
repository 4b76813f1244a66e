"""Launches of 1 to 3 dimensions (issue 13, item 1): the axis check (LCH-26) on every launch
path, and n-D launches on the runtimes (LCH-27), bitwise equal to the interpreter (INT-1)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.frontend import Vec, global_thread_id, i32
from sarek_py.frontend import kernel as fe_kernel
from sarek_py.frontend.intrinsics import thread_idx_y
from sarek_py.ir.diagnostics import LaunchError, SarekError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

KINDS = ("thread_idx", "block_idx", "block_dim", "grid_dim", "global_idx")


def kernel(src: str, name: str | None = None) -> Kernel:
    m = parse_module(src, "nd.sk")
    check_module(m)
    return m.kernel(name) if name else m.kernels[-1]


def reader(intrinsic: str) -> Kernel:
    return kernel(f"kernel k(out : i32[]) =\n  let t = global_thread_id in\n"
                  f"  out[t] <- {intrinsic}\n")


def _opencl() -> Backend:
    try:
        return get_backend("opencl")
    except SarekError:
        pytest.skip("the OpenCL backend cannot run here")


def backends() -> list[Backend]:
    out: list[Backend] = [get_backend("interp")]
    try:
        out.append(get_backend("opencl"))
    except SarekError:
        pass
    return out


# ------------------------------------------------------------------ LCH-26: the axis check


@pytest.mark.parametrize("intrinsic", [f"{k}_{a}" for k in KINDS for a in "yz"])
def test_int26_lch26_missing_axis_refused_by_interpreter(intrinsic: str) -> None:
    """LCH-26: every y/z thread intrinsic on a launch without that axis is refused by the
    interpreter, naming the intrinsic, its location and the launch's shape; nothing runs."""
    k = reader(intrinsic)
    out = np.full(8, -7, np.int32)
    with pytest.raises(LaunchError) as err:
        run_kernel(k, {"out": out}, 8, 4)
    text = str(err.value)
    assert text.startswith("nd.sk:3:13: error: [LCH-26] kernel k reads " + intrinsic), text
    assert "8 threads, block (4,)" in text and "1 dimension" in text
    assert (out == -7).all()
    if intrinsic.endswith("z"):  # a 2-D launch has no z axis either
        with pytest.raises(LaunchError, match=rf"reads {intrinsic}, but its launch has 2 "
                           r"dimensions \(grid \(2, 1\), block \(4, 1\)\)"):
            run_kernel(k, {"out": out}, 8, grid=(2, 1), block_shape=(4, 1))
        assert (out == -7).all()


@pytest.mark.parametrize("intrinsic", [f"{k}_{a}" for k in KINDS for a in "yz"])
def test_lch26_missing_axis_refused_by_every_backend(intrinsic: str) -> None:
    """LCH-26 on every Backend (run_kernel, start, launch): refused before anything is
    copied or launched."""
    k = reader(intrinsic)
    for be in backends():
        before = be.stats.launches
        out = np.full(8, -7, np.int32)
        with pytest.raises(LaunchError, match=rf"\[LCH-26\] kernel k reads {intrinsic}"):
            be.run_kernel(k, {"out": out}, 8, 4)
        with pytest.raises(LaunchError, match=r"\[LCH-26\]"):
            be.start(k, {"out": out}, 8, 4)
        dev = be.allocate((8,), np.int32)
        with pytest.raises(LaunchError, match=r"\[LCH-26\]"):
            be.launch(k, {"out": dev}, 8, 4)
        if intrinsic.endswith("z"):
            with pytest.raises(LaunchError, match=r"has 2 dimensions"):
                be.run_kernel(k, {"out": out}, 8, grid=(2, 1), block_shape=(2, 2))
        assert be.stats.launches == before and (out == -7).all()


def test_lch26_axis_given_is_accepted_and_extent_one_is_an_axis() -> None:
    """LCH-26: a launch has as many dimensions as its longer tuple, extents of 1 included:
    ``grid (8, 1)`` reads ``thread_idx_y`` = 0; ``global_thread_id`` reads on any launch."""
    for be in backends():
        out = np.full(8, -7, np.int32)
        be.run_kernel(reader("thread_idx_y"), {"out": out}, 8, grid=(2, 1), block_shape=(4,))
        assert out.tolist() == [0] * 8
        be.run_kernel(reader("grid_dim_z"), {"out": out}, 8, grid=(2, 1, 1),
                      block_shape=(4,))
        assert out.tolist() == [1] * 8
        be.run_kernel(reader("global_thread_id"), {"out": out}, 8, grid=(2, 2, 2),
                      block_shape=(1,))
        assert out.tolist() == list(range(8))


def test_lch26_helper_reading_an_axis_is_refused() -> None:
    """LCH-26: a helper's read of an axis counts as the kernel's (located in the helper)."""
    k = kernel("fun row() : i32 =\n  return block_idx_y * block_dim_y + thread_idx_y\n"
               "kernel k(out : i32[]) = out[global_thread_id] <- row()\n")
    out = np.zeros(4, np.int32)
    for be in backends():
        with pytest.raises(LaunchError, match=r"^nd.sk:2:\d+: error: \[LCH-26\] kernel k "
                           r"reads (block_idx_y|block_dim_y|thread_idx_y)"):
            be.run_kernel(k, {"out": out}, 4, 4)


def test_lch26_the_largest_axis_is_named() -> None:
    """LCH-26: a kernel reading y and z on a 1-D launch is told about z (it needs three)."""
    k = kernel("kernel k(out : i32[]) =\n  out[global_thread_id] <- thread_idx_y + "
               "global_idx_z\n")
    with pytest.raises(LaunchError, match="reads global_idx_z.*grid and block of 3 extents"):
        run_kernel(k, {"out": np.zeros(4, np.int32)}, 4, 4)


ROWS_SK = """\
kernel rows(out : i32[]) =
  let t = global_thread_id in
  out[t] <- global_idx_y

program p
var out : i32[0:] allocatable; var n : i32 = 8;
begin
allocate out[n]; launch rows(out) threads i64(n) block 4; sync
end
"""


def test_lch26_host_program_and_cli_run(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """LCH-26 through ``sarek-py run``: a kernel run alone (``--kernel``) and a host program
    launching it are refused with the located message and a caret, exit status 1."""
    src = tmp_path / "rows.sk"
    src.write_text(ROWS_SK.split("\nprogram")[0] + "\n")
    code = main(["run", str(src), "--kernel", "rows", "--threads", "8", "--size", "out=8"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    assert f"{src}:3:13: error: [LCH-26] kernel rows reads global_idx_y" in err, err
    assert "  out[t] <- global_idx_y\n            ^" in err, err


def test_lch26_host_program_launch(tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """LCH-26 on a host program's launch statement, run by ``sarek-py run`` on every
    backend: refused when the program is checked (LCH-28), before anything runs, located
    at the launch statement and naming the intrinsic's own location."""
    src = tmp_path / "rows.sk"
    src.write_text(ROWS_SK)
    for be in backends():
        code = main(["run", str(src), "--backend", be.name])
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err, err
        assert (f"{src}:8:25: error: launch of rows: [LCH-26] kernel rows reads global_idx_y "
                f"(at {src}:3:13), but this launch has 1 dimension (threads and block)") \
            in err, err
        assert "launch rows(out) threads i64(n) block 4; sync\n" + " " * 24 + "^" in err


@fe_kernel
def rowid(out: Vec[i32]) -> None:
    out[global_thread_id()] = thread_idx_y()


def test_lch26_front_end_launch() -> None:
    """LCH-26 through the Python front end: ``k[threads, block]`` is 1-D."""
    out = np.zeros(8, np.int32)
    for name in [b.name for b in backends()]:
        with pytest.raises(LaunchError, match=r"test_nd_launch.py:\d+:\d+: error: \[LCH-26\] "
                           r"kernel rowid reads thread_idx_y"):
            rowid[8, 4](out, backend=name)
        with pytest.raises(LaunchError, match=r"\[LCH-26\]"):
            rowid.launch(out, threads=8, block=4, backend=name)


# --------------------------------------------------------- LCH-27: n-D launches on devices


COORDS = kernel("""
kernel coords(out : i32[,]) =
  let t = global_thread_id in
  out[t, 0] <- thread_idx_x; out[t, 1] <- thread_idx_y; out[t, 2] <- thread_idx_z;
  out[t, 3] <- block_idx_x; out[t, 4] <- block_idx_y; out[t, 5] <- block_idx_z;
  out[t, 6] <- block_dim_x; out[t, 7] <- block_dim_y; out[t, 8] <- block_dim_z;
  out[t, 9] <- grid_dim_x; out[t, 10] <- grid_dim_y; out[t, 11] <- grid_dim_z;
  out[t, 12] <- global_idx_x; out[t, 13] <- global_idx_y; out[t, 14] <- global_idx_z
""")


SHAPES = [((3, 2, 2), (5, 1, 3)), ((1, 1, 1), (1, 1, 1)), ((2, 3, 1), (3, 3, 3)),
          ((7, 1, 2), (1, 4, 1)), ((1, 5, 1), (2, 1, 5))]


@pytest.mark.opencl
@pytest.mark.parametrize(("grid", "block"), SHAPES)
def test_lch27_opencl_nd_range_matches_interpreter(grid: tuple[int, ...],
                                                   block: tuple[int, ...]) -> None:
    """LCH-27: an ND-range launch (global = grid * block per axis, local = block) gives
    every thread intrinsic the interpreter's value (INT-1), thread by thread."""
    be = _opencl()
    n = int(np.prod(grid) * np.prod(block))
    want = np.full((n, 15), -1, np.int32)
    run_kernel(COORDS, {"out": want}, n, grid=grid, block_shape=block)
    got = np.full((n, 15), -1, np.int32)
    be.run_kernel(COORDS, {"out": got}, n, grid=grid, block_shape=block)
    assert (got == want).all()
    t = np.arange(n)
    bl, tl = t // int(np.prod(block)), t % int(np.prod(block))
    assert (want[:, 0] == tl % block[0]).all() and (want[:, 3] == bl % grid[0]).all()


@pytest.mark.opencl
def test_lch27_partial_grid_stop_codes_and_two_dims() -> None:
    """LCH-27: threads numbered past the count do not exist on the device either (a grid
    larger than the count); stop codes are by linear thread id; a 2-D shape (no z axis)."""
    be = _opencl()
    k = kernel("""
kernel k(out : i32[]) =
  let t = global_thread_id in
  out[t] <- global_idx_y * 100 + global_idx_x;
  if t == 13 then stop 5
""")
    for shape in [((2, 3), (3, 2)), ((3, 3), (2, 2))]:
        n = 35 if shape[1] == (2, 2) else 33
        res = []
        for b in (get_backend("interp"), be):
            out = np.full(40, -1, np.int32)
            r = b.run_kernel(k, {"out": out}, n, grid=shape[0], block_shape=shape[1])
            res.append((out, r.stop_codes))
        assert (res[0][0] == res[1][0]).all() and (res[0][1] == res[1][1]).all()
        assert (res[0][0][n:] == -1).all() and res[0][1].tolist().count(5) == 1


def test_lch27_shape_errors_are_launch_errors() -> None:
    """LCH-27: a grid or block shape that is not 1 to 3 positive integers, a grid too small
    for the thread count, or one of more than 2^31 - 1 threads is a LaunchError."""
    k = reader("global_thread_id")
    for be in backends():
        out = np.zeros(8, np.int32)
        for grid, block, msg in [((0, 1), (4,), "grid must be 1 to 3"),
                                 ((1, 1, 1, 1), (4,), "grid must be 1 to 3"),
                                 ((2,), (2.0,), "block shape must be"),
                                 ((True,), (4,), "grid must be"),
                                 ((1,), (4, 1), "holds 4 threads, fewer than the 8"),
                                 ((65536, 65536), (1,), "more than 2147483647")]:
            with pytest.raises(LaunchError, match=msg):
                be.run_kernel(k, {"out": out}, 8, grid=grid, block_shape=block)


def test_lch27_barrier_needs_whole_blocks_in_nd() -> None:
    """LCH-6 with LCH-27: on a device, a kernel with a barrier needs whole blocks of the
    n-D block's size; a whole n-D launch of it matches the interpreter."""
    k = kernel("""
kernel k(out : i32[])
  shared s : i32[12]
  =
  let t = global_thread_id in
  s[thread_idx_x + block_dim_x * thread_idx_y] <- t;
  barrier;
  out[t] <- s[11 - (thread_idx_x + block_dim_x * thread_idx_y)]
""")
    for be in backends():
        out = np.zeros(36, np.int32)
        be.run_kernel(k, {"out": out}, 36, grid=(3, 1), block_shape=(4, 3))
        assert out.tolist() == [12 * (t // 12) + 11 - t % 12 for t in range(36)]
        if be.whole_blocks_for_barriers:
            with pytest.raises(LaunchError, match="whole blocks of 12"):
                be.run_kernel(k, {"out": out}, 30, grid=(3, 1), block_shape=(4, 3))


def test_lch27_cuda_glue_passes_grid_and_block_dims(monkeypatch: pytest.MonkeyPatch) -> None:
    """LCH-27 on the CUDA backend (a fake driver: no GPU here): the launch gets the n-D
    grid and block dims; per-axis device limits are checked before launching."""
    from test_runtime import _FakeDriver

    from sarek_py.codegen.nvcc import find_nvcc
    from sarek_py.runtime import cuda

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed here")
    fake = _FakeDriver()
    monkeypatch.setattr(cuda, "_import_driver", lambda: fake)
    be = cuda.CudaBackend()
    out = np.zeros(2 * 3 * 4 * 5, np.int32)
    be.run_kernel(reader("global_idx_y"), {"out": out}, out.size, grid=(2, 3),
                  block_shape=(4, 5))
    (_, kw), = fake.launches
    assert kw == {"block": (4, 5, 1), "grid": (2, 3, 1)}
    # the linear-id support function went through nvcc (CG-13: no contraction)
    assert len(fake.modules) == 1 and b"fma.rn" not in fake.modules[0]
    assert b"%ctaid.y" in fake.modules[0] and b"%ntid.z" in fake.modules[0]
    with pytest.raises(LaunchError, match="block extent 65 along z exceeds the device's "
                       "limit of 64"):
        be.run_kernel(reader("global_idx_z"), {"out": out}, 65, grid=(1, 1, 1),
                      block_shape=(1, 1, 65))
    with pytest.raises(LaunchError, match="grid extent 65536 along y"):
        be.run_kernel(reader("global_idx_y"), {"out": np.zeros(65536, np.int32)}, 65536,
                      grid=(1, 65536), block_shape=(1,))


@pytest.mark.opencl
def test_lch27_one_d_launches_unchanged() -> None:
    """LCH-27 keeps 1-D launches: ``threads``/``block`` with a partial last block run the
    same threads on OpenCL as on the interpreter (the linear id is get_global_id(0))."""
    be = _opencl()
    k = reader("global_thread_id")
    for n, b in itertools.product((1, 7, 64, 100), (1, 3, 32)):
        out = np.full(128, -1, np.int32)
        be.run_kernel(k, {"out": out}, n, b)
        assert out[:n].tolist() == list(range(n)) and (out[n:] == -1).all()


@pytest.mark.opencl
def test_lch27_fault_report_names_the_linear_thread() -> None:
    """LCH-20 with LCH-27: an out-of-bounds store in an n-D launch is reported on OpenCL
    exactly as the interpreter reports it (the linear thread id of INT-1)."""
    k = kernel("kernel oob(out : i32[]) =\n  out[global_idx_y * 100 + thread_idx_x] <- 1\n")
    msgs = []
    for be in (get_backend("interp"), _opencl()):
        with pytest.raises(SarekError) as err:
            be.run_kernel(k, {"out": np.zeros(50, np.int32)}, 6, grid=(1, 2),
                          block_shape=(3,))
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]
    assert "kernel oob, thread 3: out-of-bounds store of array 'out' at index [100]" in msgs[0]


ND_OCLGRIND_SCRIPT = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from test_nd_launch import COORDS, kernel
from sarek_py.ir.interp import run_kernel
from sarek_py.runtime import get_backend

be = get_backend("opencl")
print(be.device_name, flush=True)
for grid, block in [((3, 2, 2), (5, 1, 3)), ((2, 3, 1), (3, 3))]:
    n = int(np.prod(grid) * np.prod(block))
    got = np.full((n, 15), -1, np.int32)
    want = got.copy()
    be.run_kernel(COORDS, {"out": got}, n, grid=grid, block_shape=block)
    run_kernel(COORDS, {"out": want}, n, grid=grid, block_shape=block)
    assert (got == want).all()
k = kernel('''
kernel k(out : i32[])
  shared s : i32[12]
  =
  let t = global_thread_id in
  s[thread_idx_x + block_dim_x * thread_idx_y] <- t;
  barrier;
  out[t] <- s[11 - (thread_idx_x + block_dim_x * thread_idx_y)]
''')
out = np.zeros(36, np.int32)
be.run_kernel(k, {"out": out}, 36, grid=(3, 1), block_shape=(4, 3))
assert out.tolist() == [12 * (t // 12) + 11 - t % 12 for t in range(36)]
print("ran nd", flush=True)
"""


def test_lch27_nd_ranges_clean_under_oclgrind(tmp_path: Path) -> None:
    """LCH-27 under ``oclgrind --data-races``: n-D ND-ranges (a 3-D one, a 2-D grid with a
    shared-memory barrier over a 2-D block) have no race, no invalid access, no divergent
    barrier, and equal the interpreter."""
    import re
    import shutil
    import subprocess
    import sys

    tool = shutil.which("oclgrind")
    if tool is None:
        pytest.skip("oclgrind is not installed (Debian: oclgrind)")
    script = tmp_path / "nd_oclgrind.py"
    script.write_text(ND_OCLGRIND_SCRIPT)
    here = Path(__file__).resolve().parent
    proc = subprocess.run([tool, "--data-races", sys.executable, str(script), str(here)],
                          capture_output=True, text=True, timeout=600, cwd=here.parent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Oclgrind" in proc.stdout and "ran nd" in proc.stdout, proc.stdout
    problem = re.compile(r"Invalid (read|write)|data race|divergence|FATAL", re.I)
    assert not problem.search(proc.stderr), proc.stderr[-3000:]


ROWS2 = """kernel rows(out : i32[], w : i32) =
  let t = global_thread_id in
  out[t] <- global_idx_y * w + global_idx_x
"""


def test_cli17_run_grid_and_block_shapes(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-17: ``run --grid GxG --block BxB`` launches n-D (the thread count the product,
    the arrays sized by it), equal on OpenCL (``--compare``); a 1-D run of the same kernel
    is refused by LCH-26 with the location."""
    src = tmp_path / "rows.sk"
    src.write_text(ROWS2)
    code = main(["run", str(src), "-k", "rows", "--grid", "3x2", "--block", "4x2",
                 "--size", "w=12"])
    out = capsys.readouterr().out
    assert code == 0 and "out: sha256=" in out and "[0, 1, 2, 3, ...]" in out, out
    one_d = main(["run", str(src), "-k", "rows", "--threads", "48", "--size", "w=12"])
    err = capsys.readouterr().err
    assert one_d == 1 and f"{src}:3:13: error: [LCH-26] kernel rows reads global_idx_y" in err
    if len(backends()) > 1:
        code = main(["run", str(src), "-k", "rows", "--grid", "3x2", "--block", "4x2",
                     "--size", "w=12", "--backend", "opencl", "--compare", "interp"])
        out = capsys.readouterr().out
        assert code == 0 and "out: identical (192 bytes)" in out, out
    want = np.zeros(48, np.int32)
    run_kernel(kernel(ROWS2), {"out": want, "w": np.int32(12)}, 48, grid=(3, 2),
               block_shape=(4, 2))
    assert want.tolist()[:4] == [0, 1, 2, 3] and sorted(want.tolist()) == \
        sorted(y * 12 + x for y in range(4) for x in range(12))


@pytest.mark.parametrize(("argv", "msg"), [
    (["--threads", "48", "--grid", "2"], "--threads and --grid: give one"),
    (["--grid", "2x0"], "argument --grid/-g: expected N, NxM or NxMxK"),
    (["--grid", "2x2x2x2"], "argument --grid/-g: expected N, NxM or NxMxK"),
    (["--threads", "4", "--block", "4xa"], "argument --block/-b: expected N, NxM"),
    ([], "required to run a kernel (or --grid GxG[xG], CLI-17): --threads N"),
])
def test_cli17_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            argv: list[str], msg: str) -> None:
    """CLI-17: a bad or missing launch shape is a usage error (status 2) naming it."""
    src = tmp_path / "rows.sk"
    src.write_text(ROWS2)
    code = main(["run", str(src), "-k", "rows", *argv])
    err = capsys.readouterr().err
    assert code == 2 and msg in err, err


def test_cli17_grid_is_kernel_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-17, CLI-11: ``--grid`` with a host program (no ``--kernel``) is a usage error."""
    src = tmp_path / "rows.sk"
    src.write_text(ROWS_SK.replace("threads i64(n) block 4", "grid (2, 1) block (4)"))
    code = main(["run", str(src), "--grid", "2x2"])
    err = capsys.readouterr().err
    assert code == 2 and "--grid: " in err and "holds the host program 'p'" in err, err
