"""A fused kernel's run-time errors in the user's names (specs/frontend.md FE-90 … FE-92).

An out-of-bounds read in the consumer of a fused pair, a fused kernel's launch refused,
on the interpreter and on OpenCL, in a pipeline, through ``fuse_launches`` and in the
CLI: the message names the user's kernels and parameters (and, in Python, the user's
variable holding the array), never the fused kernel's ``p_``/``c_`` names.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sarek_py
from sarek_py.cli.main import main
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.fusion.epilogue.user_names import origin, user_terms
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.runtime import get_backend


@kernel
def scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def shift(t: Vec[f32], w: Vec[f32], out: Vec[f32], b: f32, n: i32):  # type: ignore[no-untyped-def]
    """Reads ``w`` one row too far: ``w[i + n]`` is out of bounds for every thread."""
    i = global_thread_id()
    if i < n:
        out[i] = t[i] + b + w[i + n]


@kernel
def relu(u: Vec[f32], y: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        y[i] = max(u[i], 0.0)


N = 8
FUSED_NAME = re.compile(r"\b(?:p|c)_[A-Za-z_]\w*|\bep_tc\b")


def backends() -> list[Any]:
    """The interpreter, OpenCL and the native C backend where they run here."""
    out: list[Any] = ["interp"]
    try:
        get_backend("opencl")
        out.append(pytest.param("opencl", marks=pytest.mark.opencl))
    except BackendUnavailable:
        pass
    try:
        get_backend("c")
        out.append("c")
    except SarekError:  # not available here (BackendUnavailable), or no such backend
        pass
    return out


def assert_user_terms(message: str) -> None:
    assert "shift's parameter w" in message, message
    assert "fused kernel scale_shift (scale -> shift)" in message, message
    assert not FUSED_NAME.search(message), message


@pytest.mark.parametrize("backend", backends())
def test_fe90_oob_in_consumer_of_fused_pair_pipeline(backend: str) -> None:
    """FE-90, FE-91: the fault of the consumer's ``w[i + n]`` in the fused kernel names
    shift's parameter w and the user's array ``weights``."""
    xs = np.ones(N, np.float32)
    tmp = np.zeros(N, np.float32)
    weights = np.zeros(N, np.float32)
    ys = np.zeros(N, np.float32)
    with pytest.raises(SarekError) as info:
        with pipeline(backend) as p:
            scale[N, N](xs, tmp, 2.0, N)
            shift[N, N](tmp, weights, ys, 1.0, N)
    assert any(d.fused for d in p.decisions), p.report()
    assert_user_terms(info.value.message)
    assert "(the array weights)" in info.value.message
    assert "index [8]" in info.value.message  # the rest of the message is kept


@pytest.mark.parametrize("backend", backends())
def test_fe90_replay_of_fused_pair_refused_in_user_names(backend: str) -> None:
    """FE-90: a replay whose array was resized in place since the run is refused by the
    backend's argument checks (FE-87) in the user's names."""
    xs = np.ones(N, np.float32)
    tmp = np.zeros(N, np.float32)
    ww = np.zeros(2 * N, np.float32)  # in bounds at the run
    ys = np.zeros(N, np.float32)
    with pipeline(backend) as p:
        scale[N, N](xs, tmp, 2.0, N)
        shift[N, N](tmp, ww, ys, 1.0, N)
    assert p.launches[0].kernel.requires is not None
    xs.resize((N, 1), refcheck=False)  # scale's x is now 2-D
    with pytest.raises(SarekError) as info:
        p.replay()
    msg = info.value.message
    assert "scale's parameter x (the array xs)" in msg, msg
    assert not FUSED_NAME.search(msg), msg


@pytest.mark.parametrize("backend", backends())
def test_fe90_fused_kernel_run_again_names_the_users_array(backend: str) -> None:
    """FE-91: the fused kernel of a pipeline run by hand on another array: the array is
    named by the caller's variable."""
    xs = np.ones(N, np.float32)
    tmp = np.zeros(N, np.float32)
    ww = np.zeros(2 * N, np.float32)
    ys = np.zeros(N, np.float32)
    with pipeline(backend) as p:
        scale[N, N](xs, tmp, 2.0, N)
        shift[N, N](tmp, ww, ys, 1.0, N)
    (lc,) = p.launches
    short = np.zeros(N, np.float32)
    args = dict(lc.by_name)
    args["c_w"] = short
    with pytest.raises(SarekError) as info:
        get_backend(backend).run_kernel(lc.kernel, args, N, N)
    assert_user_terms(info.value.message)
    assert "(the array short)" in info.value.message


@pytest.mark.parametrize("backend", backends())
def test_lch85_fe90_fuse_launches_then_backend(backend: str) -> None:
    """FE-90 through ``fuse_launches`` and a backend's ``run_kernel``."""
    xs, tmp, w8, ys = (np.zeros(N, np.float32) for _ in range(4))
    launches = [Launch(scale.ir, N, N, (xs, tmp, np.float32(2), np.int32(N))),
                Launch(shift.ir, N, N, (tmp, w8, ys, np.float32(1), np.int32(N)))]
    (fused,), decisions = sarek_py.fuse_launches(launches)
    assert decisions[0].fused
    with pytest.raises(SarekError) as info:
        get_backend(backend).run_kernel(fused.kernel, fused.by_name, N, N)
    assert_user_terms(info.value.message)
    assert "(the array w8)" in info.value.message


@pytest.mark.parametrize("backend", backends())
def test_fe90_fused_launch_refused_names_user_parameters(backend: str) -> None:
    """FE-90: a fused kernel's launch condition (LEG-15: separate buffers) refused at a
    launch names the user's parameters."""
    xs, tmp, ww, ys = (np.zeros(2 * N, np.float32) for _ in range(4))
    launches = [Launch(scale.ir, N, N, (xs, tmp, np.float32(2), np.int32(N))),
                Launch(shift.ir, N, N, (tmp, ww, ys, np.float32(1), np.int32(N)))]
    (fused,), _ = sarek_py.fuse_launches(launches)
    args = dict(fused.by_name)
    args["c_out"] = args["p_x"]  # shift's out is now scale's x: one buffer, not proved
    with pytest.raises(SarekError) as info:
        get_backend(backend).run_kernel(fused.kernel, args, N, N)
    msg = info.value.message
    assert not FUSED_NAME.search(msg), msg
    assert "shift's parameter out" in msg or "scale's parameter x" in msg, msg


def test_fe92_origin_of_a_chain() -> None:
    """FE-92: each name of a three-kernel chain's fused kernel is found in its kernel."""
    xs, t, u, ys = (np.zeros(N, np.float32) for _ in range(4))
    wide = np.zeros(2 * N, np.float32)
    with pipeline("interp") as p:
        scale[N, N](xs, t, 2.0, N)
        shift[N, N](t, wide, u, 1.0, N)
        relu[N, N](u, ys, N)
    (lc,) = p.launches
    req = lc.kernel.requires
    got = {q.name: origin(q.name, req) for q in lc.kernel.params}
    assert got["p_p_x"] == ("scale", "x")
    assert got["p_p_t"] == ("scale", "t")
    assert got["p_c_w"] == ("shift", "w")
    assert got["p_c_out"] == ("shift", "out")
    assert got["c_y"] == ("relu", "y")
    assert origin("ep_tc", req) is None and origin("p_ep_tc", req) is None
    assert got["n"] is None  # FE-97: the equal n's and thread counts are one parameter n
    msg = user_terms("kernel scale_shift_relu, thread 3: array 'p_c_w' and c_y", lc.kernel)
    assert msg == ("fused kernel scale_shift_relu (scale -> shift -> relu), thread 3: "
                   "shift's parameter w and relu's parameter y")


def test_fe92_kernels_not_fused_keep_their_names() -> None:
    """FE-92: a kernel that is not fused keeps its message, even with names like c_w."""
    @kernel
    def k(c_w: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
        i = global_thread_id()
        if i < n:
            c_w[i + n] = 1.0

    with pytest.raises(SarekError) as info:
        k.launch(np.zeros(N, np.float32), N, threads=N, block=N, backend="interp")
    assert "'c_w'" in info.value.message and "fused" not in info.value.message


FUSED_SK = """\
kernel scale(x : f32[], tmp : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then
    tmp[i] <- a * x[i]

kernel shift(tmp : f32[], w : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    y[i] <- tmp[i] + w[i + n]
"""

PROGRAM = """
program p
  var n : i32 = 8;
  var x : f32[0:] allocatable;
  var t : f32[0:] allocatable;
  var w : f32[0:] allocatable;
  var y : f32[0:] allocatable;
begin
  allocate x[n]; allocate t[n]; allocate w[n]; allocate y[n];
  launch scale_shift(x, t, 2.0f, n, w, y, n, n) threads n block 8;
  sync
end
"""


def _cli_fused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    src = tmp_path / "pair.sk"
    src.write_text(FUSED_SK)
    assert main(["fuse", str(src), "--producer", "scale", "--consumer", "shift"]) == 0
    fused = tmp_path / "fused.sk"
    fused.write_text(capsys.readouterr().out)
    return fused


def _cli_message(err: str) -> str:
    assert "Traceback" not in err
    return err.splitlines()[0]


@pytest.mark.parametrize("backend", backends())
def test_lch85_fe90_cli_run_fused_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   backend: str) -> None:
    """FE-90 in the CLI: ``sarek-py run`` of the kernel ``sarek-py fuse`` wrote."""
    fused = _cli_fused(tmp_path, capsys)
    sizes = [a for n in ("p_n", "c_n", "ep_tc", "p_x", "p_tmp", "c_w", "c_y")
             for a in ("--size", f"{n}=8")]
    code = main(["run", str(fused), "--kernel", "scale_shift", "--threads", "8",
                 "--backend", backend, *sizes])
    assert code == 1
    line = _cli_message(capsys.readouterr().err)
    assert "fused kernel scale_shift (scale -> shift)" in line, line
    assert "shift's parameter w" in line and "c_w" not in line, line


@pytest.mark.parametrize("backend", backends())
def test_lch85_fe90_cli_host_program_with_fused_kernel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    """FE-90 in the CLI: a host program launching the fused kernel."""
    fused = _cli_fused(tmp_path, capsys)
    prog = tmp_path / "prog.sk"
    prog.write_text(fused.read_text() + PROGRAM)
    code = main(["run", str(prog), "--backend", backend])
    assert code == 1
    line = _cli_message(capsys.readouterr().err)
    assert "fused kernel scale_shift (scale -> shift)" in line, line
    assert "shift's parameter w" in line and "c_w" not in line, line


def test_fe92_only_the_fused_kernels_own_names_are_rewritten() -> None:
    """A word that looks fused (``c_q``, a host variable's name) but is no variable of the
    fused kernel stays as it is."""
    xs, t, ww, ys = (np.zeros(2 * N, np.float32) for _ in range(4))
    with pipeline("interp") as p:
        scale[N, N](xs, t, 2.0, N)
        shift[N, N](t, ww, ys, 1.0, N)
    (lc,) = p.launches
    msg = user_terms("launch of scale_shift: host array c_q and c_w", lc.kernel)
    assert msg == "launch of scale_shift: host array c_q and shift's parameter w"


@pytest.mark.parametrize("backend", backends())
def test_lch85_host_run_of_a_fused_kernel(backend: str) -> None:
    """LCH-85 through ``sarek_py.host.execute`` (a host program's launches by statement):
    the fault, found at the sync, names the user's kernel and parameter."""
    from sarek_py.host.execute import execute
    from sarek_py.ir.host.launch import Sync
    from sarek_py.ir.nodes import Const, Ref
    from sarek_py.ir.types import Scalar

    xs, t, ww, ys = (np.zeros(N, np.float32) for _ in range(4))
    launches = [Launch(scale.ir, N, N, (xs, t, np.float32(2), np.int32(N))),
                Launch(shift.ir, N, N, (t, ww, ys, np.float32(1), np.int32(N)))]
    (fused,), _ = sarek_py.fuse_launches(launches)
    k = fused.kernel
    env = {q.name: v for q, v in zip(k.params, fused.args, strict=True) if q.is_array}
    args = tuple(Ref(q) if q.is_array else Const(v.item() if isinstance(v, np.generic) else v,
                                                   q.type)
                 for q, v in zip(k.params, fused.args, strict=True))
    launch = Launch(k, Const(N, Scalar.I64), Const(N, Scalar.I32), args)
    with pytest.raises(SarekError) as info:
        execute([launch, Sync()], env, get_backend(backend))
    assert_user_terms(info.value.message)
