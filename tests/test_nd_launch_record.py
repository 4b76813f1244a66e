"""n-D launches in the launch record, its text forms and the front end (LCH-28, TXT-37,
FE-24): grid and block shapes in ``Launch``, ``.launches`` and program text (round trip,
lossless dump), host execution on every backend, fusion refusing them (LEG-14)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.frontend import Vec, i32, kernel, pipeline
from sarek_py.frontend.intrinsics import (
    global_idx_x,
    global_idx_y,
    global_idx_z,
    global_thread_id,
)
from sarek_py.frontend.kernel import LaunchArgumentError
from sarek_py.fusion.epilogue.sequence import fuse_launches
from sarek_py.host.interp import run_program
from sarek_py.ir.diagnostics import LaunchError, ParseError, SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.host.launch_text import parse_host, print_host
from sarek_py.ir.host.sexp import program_from_sexp, program_to_sexp
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.sexp import from_sexp, to_sexp
from sarek_py.ir.typecheck import check_module
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

KERNELS = """\
kernel plane(out : i32[], w : i32) =
  let t = global_thread_id in
  out[t] <- global_idx_y * w + global_idx_x
kernel cube(out : i32[]) =
  out[global_thread_id] <- global_idx_z * 100 + global_idx_y * 10 + global_idx_x
kernel flat(out : i32[]) = out[global_thread_id] <- global_thread_id
kernel twice(a : i32[], b : i32[]) =
  let i = global_thread_id in
  b[i] <- 2 * a[i]
"""


def module():  # type: ignore[no-untyped-def]
    m = parse_module(KERNELS, "k.sk")
    check_module(m)
    return m


def backends() -> list[Backend]:
    out: list[Backend] = [get_backend("interp")]
    try:
        out.append(get_backend("opencl"))
    except SarekError:
        pass
    return out


LAUNCHES = """\
host out : i32[], n : i32, w : i32
launch plane(out, w) grid (n, 2) block (w / 2, 1 + 1)
launch cube(out) grid (3, 1, n) block (2, 2, 1)
launch flat(out) grid (3) block (4, 1, 1)
sync
launch flat(out) threads i64(n) block 4
"""


def test_lch28_txt37_launches_text_round_trip_and_counts() -> None:
    """LCH-28, TXT-37: ``grid (…) block (…)`` prints back identically; the counts are the
    products of the extents (thread count i64, block size i32); 1-D spelling unchanged."""
    m = module()
    vs, stmts = parse_host(LAUNCHES, m, "h.launches")
    assert print_host(stmts, vs) == LAUNCHES
    vs2, stmts2 = parse_host(print_host(stmts, vs), m, "again.launches")
    assert print_host(stmts2, vs2) == LAUNCHES
    plane, cube, flat1 = stmts[0], stmts[1], stmts[2]
    assert isinstance(plane, Launch) and isinstance(cube, Launch) and isinstance(flat1, Launch)
    assert plane.dims == 2 and cube.dims == 3 and flat1.dims == 3
    env = {"n": 5, "w": 6}
    known = cube.known_in(env)
    assert (known.thread_count, known.block_size) == (3 * 1 * 5 * 4, 4)
    assert known.shape() == ((3, 1, 5), (2, 2, 1))
    assert plane.known_in(env).thread_count == 5 * 2 * 3 * 2
    last = stmts[4]
    assert isinstance(last, Launch) and not last.shaped and last.dims == 1


def test_lch28_sexp_dump_is_lossless() -> None:
    """LCH-28, TXT-26: the dump of an n-D launch (and of a program holding one) reads back
    to an equal node and dumps the same again."""
    p = parse_program(PROGRAM, "p.sk")
    dump = program_to_sexp(p)
    assert program_from_sexp(dump) == p and program_to_sexp(program_from_sexp(dump)) == dump
    assert "grid" in dump and "block_shape" in dump
    _, stmts = parse_host(LAUNCHES, module(), "h.launches")
    for s in stmts:
        text = to_sexp(s)
        back = from_sexp(text)
        assert back == s and to_sexp(back) == text


PROGRAM = KERNELS + """
program p
var out : i32[0:] allocatable; var n : i32 = 4; var w : i32 = 6;
begin
allocate out[200]; launch plane(out, w) grid (n, 2) block (w / 2, 3); sync
end
"""


def test_lch28_program_text_round_trip_and_run() -> None:
    """LCH-28 in a host program: printed and read back identically, run by the host
    interpreter on the grid the text gives (interpreter semantics, INT-1)."""
    p = parse_program(PROGRAM, "p.sk")
    text = print_program(p)
    assert "launch plane(out, w) grid (n, 2) block (w / 2, 3)" in text
    assert print_program(parse_program(text, "again.sk")) == text
    r = run_program(p)
    out = r.array("out")
    want = np.zeros(200, np.int32)
    run_kernel(module().kernel("plane"), {"out": want, "w": np.int32(6)}, 72, grid=(4, 2),
               block_shape=(3, 3))
    assert (out == want).all() and out[71] != 0


def test_lch28_cli_runs_program_on_every_backend(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """LCH-28: ``sarek-py run`` of a program with an n-D launch on every backend; the
    digests agree with the interpreter's (``--compare``)."""
    src = tmp_path / "p.sk"
    src.write_text(PROGRAM)
    digests = []
    for be in backends():
        code = main(["run", str(src), "--backend", be.name])
        got = capsys.readouterr()
        assert code == 0, got.err
        digests.append(got.out)
    assert all(d == digests[0] for d in digests)


@pytest.mark.parametrize(("launch", "msg"), [
    ("launch plane(out, 3) grid (2, 0) block (4)", "the grid extent 0 is not in"),
    ("launch plane(out, 3) grid (2, 1, 1, 1) block (4)", "to close the grid's extents"),
    ("launch plane(out, 3) grid 2 block (4)", "to open the grid's extents"),
    ("launch plane(out, 3) grid (2, 2) threads 4", "expected 'block'"),
    ("launch plane(out, 3) grid (2, 2) block (2147483648)", "2147483648 does not fit in i32"),
    ("launch plane(out, 3) grid (2.0, 2) block (4)", "extent must be an i32, not f64"),
    ("launch plane(out, 3) grid (2) block (4)", r"\[LCH-26\] kernel plane reads "
     r"global_idx_y \(at k.sk:3:13\), but this launch has 1 dimension \(a grid and block "
     "of 1 extent\\)"),
    ("launch cube(out) grid (2, 2) block (4)", r"\[LCH-26\] kernel cube reads global_idx_z"),
    ("launch plane(out, 3) threads 8L block 4", r"\[LCH-26\].*\(threads and block\)"),
    ("launch plane(out, 3) block (4)", "expected 'threads' or 'grid'"),
])
def test_lch28_txt37_bad_launch_text_is_located(launch: str, msg: str) -> None:
    """LCH-28, LCH-26: a bad grid/block is a located error naming the problem."""
    with pytest.raises((ParseError, LaunchError), match=msg) as err:
        parse_host("host out : i32[]\n" + launch + "\n", module(), "x.launches")
    assert str(err.value).startswith("x.launches:2:"), str(err.value)


def test_lch28_kernel_launch_cuda_spelling() -> None:
    """LCH-28: ``KernelLaunch(k, grid, block, args)`` with a tuple is CUDA's spelling; ints
    keep the thread count / block size meaning; bad shapes are TypeError/ValueError."""
    k = module().kernel("plane")
    out = np.zeros(64, np.int32)
    lc = KernelLaunch(k, (4, 2), (3, 2), {"out": out, "w": 12})
    assert (lc.thread_count, lc.block_size, lc.shape()) == (48, 6, ((4, 2), (3, 2)))
    lc2 = KernelLaunch(k, 4, (3, 2), {"out": out, "w": 12})
    assert lc2.shape() == ((4,), (3, 2)) and lc2.dims == 2 and lc2.thread_count == 24
    assert not KernelLaunch(k, 4, 3, {"out": out}).shaped
    for grid, block, exc in [((), (4,), ValueError), ((1, 1, 1, 1), (1,), ValueError),
                             ((0,), (4,), ValueError), ((True,), (4,), TypeError),
                             ((2,), (1.5,), TypeError)]:
        with pytest.raises(exc):
            KernelLaunch(k, grid, block, {"out": out})


def test_lch28_shaped_launches_are_not_fused() -> None:
    """LEG-14 with LCH-28: a pair of an n-D launch and a launch by thread count is refused,
    naming the n-D launch; two launches of one shape fuse thread-wise (LEG-30), equal to the
    unfused pair; the same pair by thread count and block size fuses."""
    m = module()
    a, b, c = (np.arange(24, dtype=np.int32) * (k + 1) for k in range(3))
    twice = m.kernel("twice")
    mixed = [KernelLaunch(twice, (2, 3), (4,), {"a": a, "b": b}),
             KernelLaunch(twice, 24, 4, {"a": b, "b": c})]
    out, report = fuse_launches(mixed)
    assert len(out) == 2 and not report[0].fused and report[0].rule == "LEG-14"
    assert "launch of twice has a grid and block shape (2 dimensions)" in report[0].reason
    nd = [KernelLaunch(twice, (2, 3), (4,), {"a": "a", "b": "b"}),
          KernelLaunch(twice, (2, 3), (4,), {"a": "b", "b": "c"})]
    out, report = fuse_launches(nd)
    assert len(out) == 1 and report[0].fused, report[0]
    want = {"a": a.copy(), "b": b.copy(), "c": c.copy()}
    got = {"a": a.copy(), "b": b.copy(), "c": c.copy()}
    for lc, bufs in [(nd[0], want), (nd[1], want), (out[0], got)]:
        args = {k: bufs[v] if isinstance(v, str) else v for k, v in lc.by_name.items()}
        run_kernel(lc.kernel, args, 24, 4, grid=(2, 3), block_shape=(4,))
    assert all(want[k].tobytes() == got[k].tobytes() for k in want)
    flat = [KernelLaunch(twice, 24, 4, {"a": a, "b": b}),
            KernelLaunch(twice, 24, 4, {"a": b, "b": c})]
    out, report = fuse_launches(flat)
    assert len(out) == 1 and report[0].fused


@kernel
def grid3(out: Vec[i32]):
    out[global_idx_z() * 100 + global_idx_y() * 10 + global_idx_x()] = global_idx_y()


@kernel
def grid2(out: Vec[i32], w: i32):
    out[global_idx_y() * w + global_idx_x()] = global_idx_x() + 1000 * global_idx_y()


def test_fe24_front_end_grid_block_tuples_on_every_backend() -> None:
    """FE-24: ``k[grid, block](…)`` with tuples (CUDA's spelling) and
    ``k.launch(…, grid=…, block=…)`` launch n-D on every backend, equal to the
    interpreter; ints keep meaning threads and block."""
    want = np.full(400, -1, np.int32)
    run_kernel(grid3.ir, {"out": want}, 3 * 2 * 2 * 2 * 5 * 1, grid=(3, 2, 2),
               block_shape=(2, 5))
    for be in backends():
        out = np.full(400, -1, np.int32)
        grid3[(3, 2, 2), (2, 5)](out, backend=be.name)
        assert (out == want).all()
        out2 = np.full(400, -1, np.int32)
        grid3.launch(out2, grid=(3, 2, 2), block=(2, 5), backend=be.name)
        assert (out2 == want).all()
        o = np.full(35, -1, np.int32)
        grid2[7, (1, 5)](o, 7, backend=be.name)  # 7 blocks of 1 x 5
        assert o.reshape(5, 7).tolist() == [[x + 1000 * y for x in range(7)] for y in range(5)]


def test_fe24_front_end_shape_errors() -> None:
    """FE-24: a bad grid or block shape is a LaunchArgumentError naming it."""
    out = np.zeros(8, np.int32)
    for config, msg in [(((0, 1), 4), "grid must be a positive integer or a tuple"),
                        (((1, 2, 3, 4), 1), "grid must be"),
                        ((2, (2, 2.0)), "block must be"),
                        (((2, 2), (2, 2), 1), "kernel\\[grid, block\\]")]:
        with pytest.raises(LaunchArgumentError, match=msg):
            grid2[config](out, 2)
    with pytest.raises(LaunchArgumentError, match="threads= or grid=, not both"):
        grid2.launch(out, 2, threads=4, grid=(2, 2))
    with pytest.raises(LaunchArgumentError, match="give threads="):
        grid2.launch(out, 2)
    with pytest.raises(LaunchError, match=r"\[LCH-26\] kernel grid3 reads global_idx_z"):
        grid3[(2, 2), (1, 1)](out)


def test_fe24_pipeline_records_and_runs_nd_launches() -> None:
    """FE-24 in a pipeline: n-D launches are recorded with their shape and run as such
    (not fused: LEG-14)."""
    for be in backends():
        out = np.full(35, -1, np.int32)
        with pipeline(backend=be.name) as pl:
            grid2[(7, 1), (1, 5)](out, 7)
            grid2[(7, 1), (1, 5)](out, 7)
        assert out.reshape(5, 7).tolist() == [[x + 1000 * y for x in range(7)]
                                              for y in range(5)]
        assert all(lc.shape() == ((7, 1), (1, 5)) for lc in pl.launches)


def test_lch28_explain_refuses_nd_pairs(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """LEG-14 with LCH-28 through ``sarek-py explain``: an n-D launch then a launch by
    thread count in a ``.launches`` file are reported not fused, naming the n-D launch and
    its location."""
    sk = tmp_path / "k.sk"
    sk.write_text(KERNELS)
    lf = tmp_path / "k.launches"
    lf.write_text("host a : i32[], b : i32[], c : i32[], n : i32\n"
                  "launch twice(a, b) grid (n, 2) block (4)\n"
                  "launch twice(b, c) threads n * 8 block 4\n")
    code = main(["explain", str(sk), "--launches", str(lf)])
    out = capsys.readouterr().out
    assert code == 0
    assert ("twice -> twice: not fused: [LEG-14] the launch of twice has a grid and block "
            "shape (2 dimensions)") in out and f"(at {lf}:2:8)" in out, out


def test_lch28_huge_grid_in_a_program_is_located(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """LCH-27, LCH-28: a grid of more than 2^31 - 1 threads in a host program (its i64
    thread count would wrap) is refused on every backend, located at the launch."""
    src = tmp_path / "big.sk"
    src.write_text("kernel flat(out : i32[]) = out[global_thread_id] <- global_thread_id\n"
                   "program p\nvar out : i32[0:] allocatable; var n : i32 = 2147483647;\n"
                   "begin\nallocate out[4]; launch flat(out) grid (n, n, n) block (n, n, n); "
                   "sync\nend\n")
    for be in backends():
        code = main(["run", str(src), "--backend", be.name])
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err
        assert err.startswith(f"{src}:5:25: error: kernel flat: a grid of (2147483647, "
                              "2147483647, 2147483647) blocks"), err
        assert "more than 2147483647 (2^31 - 1)" in err


def test_lch28_check_launch_refuses_inconsistent_records() -> None:
    """LCH-28 in the host checker (``check_launch``, HP-9): a record built or edited by
    hand whose counts are not the extents' products, with a grid but no block shape, or
    with a non-i32 extent is refused, located at the launch."""
    import attrs

    from sarek_py.ir.host.launch import check_launch
    from sarek_py.ir.nodes import Const
    from sarek_py.ir.types import Scalar

    _, stmts = parse_host(LAUNCHES, module(), "h.launches")
    lc = stmts[0]
    assert isinstance(lc, Launch)
    check_launch(lc)
    bad = [attrs.evolve(lc, thread_count=Const(8, Scalar.I64)),
           attrs.evolve(lc, block_size=Const(4, Scalar.I32)),
           attrs.evolve(lc, block_shape=()),
           attrs.evolve(lc, grid=(Const(2, Scalar.I64), lc.grid[1]))]
    msgs = ["must be the products of its grid and block extents",
            "must be the products", "needs both a grid and a block shape",
            "extent must be an i32, not i64"]
    for b, msg in zip(bad, msgs, strict=True):
        with pytest.raises(LaunchError, match=msg) as err:
            check_launch(b)
        assert str(err.value).startswith("h.launches:2:8: error: launch of plane:")


def test_lch28_dumps_without_shape_fields_still_read() -> None:
    """LCH-28, TXT-26: a dump written before the shape fields existed (no ``:grid``,
    ``:block_shape``) reads back to the same 1-D launch."""
    p = parse_program(KERNELS + "\nprogram q\nvar out : i32[0:] allocatable; var n : i32 = 4;"
                      "\nbegin\nallocate out[n]; launch flat(out) threads i64(n) block 4; sync"
                      "\nend\n", "q.sk")
    dump = program_to_sexp(p)
    assert ":grid []" in dump and ":block_shape []" in dump
    old = "\n".join(line for line in dump.splitlines()
                    if ":grid" not in line and ":block_shape" not in line)
    assert program_from_sexp(old) == p


@pytest.mark.parametrize("n", [0, -3])
def test_lch28_extent_below_one_at_run_time_is_located(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      n: int) -> None:
    """LCH-28: a grid extent that evaluates below one when the program runs is a
    LaunchError located at the launch on every backend (CUDA: an invalid configuration),
    not an empty launch as a thread count below one is (LCH-3)."""
    src = tmp_path / "p.sk"
    src.write_text(PROGRAM.replace("var n : i32 = 4;", f"var n : i32 = {n};"))
    for be in backends():
        code = main(["run", str(src), "--backend", be.name])
        err = capsys.readouterr().err
        assert code == 1 and "Traceback" not in err, err
        assert err.startswith(f"{src}:14:27: error: kernel plane: "), err
        assert f"the grid must be 1 to 3 integers in 1..2147483647, not ({n}, 2)" in err, err


def test_lch28_known_in_refuses_bad_extents() -> None:
    """LCH-28: ``known_in`` evaluates the extents; one out of range is a LaunchError."""
    _, stmts = parse_host(LAUNCHES, module(), "h.launches")
    lc = stmts[0]
    assert isinstance(lc, Launch)
    with pytest.raises(LaunchError, match=r"grid/block extent 0 is not an integer in 1\.\."):
        lc.known_in({"n": 0, "w": 6})
    part = lc.known_in({"n": 3})  # w unknown: an n-D launch is known whole or not at all
    assert part.grid == lc.grid and part.thread_count == lc.thread_count
    whole = lc.known_in({"n": 3, "w": 6})
    assert whole.shape() == ((3, 2), (3, 2)) and whole.counts() == (36, 6)


def test_fe24_mixed_pair_in_a_pipeline_is_refused_naming_the_nd_launch() -> None:
    """FE-24, LEG-14: a 1-D producer followed by an n-D consumer in a fusing pipeline is
    refused naming the n-D launch, and both run as launched."""
    out = np.full(35, -1, np.int32)
    with pipeline(backend="interp") as pl:
        grid2[(7, 1), (1, 5)](out, 7)
        flat_k[35, 7](out)
        grid2[(7, 1), (1, 5)](out, 7)
    rules = [(d.rule, d.reason) for d in pl.decisions]
    assert all(r == "LEG-14" for r, _ in rules) and len(rules) == 2
    assert "the launch of grid2 has a grid and block shape" in rules[0][1]
    assert out.reshape(5, 7).tolist() == [[x + 1000 * y for x in range(7)] for y in range(5)]


@kernel
def flat_k(out: Vec[i32]):
    out[global_thread_id()] = global_thread_id()


def test_lch28_block_shape_past_i32_is_reported_exactly(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """LCH-28: a block shape whose product passes 2^31 - 1 is reported with its exact
    size, not the wrapped one (a red-team finding: `block (2147483647, 8)` said "the block
    size -8")."""
    sk = tmp_path / "k.sk"
    sk.write_text("kernel k(a : f32[]) = a[global_thread_id] <- 1.0f\n")
    lf = tmp_path / "k.launches"
    lf.write_text("host a : f32[]\nlaunch k(a) grid (1) block (2147483647, 8)\n"
                  "launch k(a) grid (1) block (2147483647, 8)\n")
    assert main(["explain", str(sk), "--launches", str(lf)]) == 0
    out = capsys.readouterr().out
    assert "17179869176" in out and "-8" not in out, out
