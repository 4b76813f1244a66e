"""The launch node and the sync node (specs/launch.md, LCH-1 … LCH-7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from sarek_py.host.execute import HostRun, ProgramStopped, execute
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.launch import Launch, ScratchBuffer, Sync, check_launch
from sarek_py.ir.nodes import Binary, BinaryOp, Cast, Const, Length, Ref, Stop, Var, var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.types import Scalar, array
from sarek_py.runtime import Backend, LaunchError, get_backend

SRC = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i]

kernel fill_then_scale(x : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (out[i] <- x[i]; out[i] <- out[i] * 2.0f)

// ws is a device-only workspace: each thread uses its own slice of one element
kernel work(ws : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < length(ws) then (
    ws[i] <- f32(i) * 2.0f;
    if i < n then out[i] <- ws[i] + f32(length(ws))
  )

kernel stopper(x : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    if x[i] < 0.0f then stop 7;
    if x[i] > 10.0f then stop 3;
    x[i] <- x[i] + 1.0f
  )
"""
M = parse_module(SRC)
check_module(M)


@pytest.fixture(params=["interp", "opencl"])
def be(request: pytest.FixtureRequest) -> Iterator[Backend]:
    try:
        b = get_backend(request.param)
    except BackendUnavailable as exc:
        pytest.skip(exc.message)
    b.stats.reset()
    # the copying path: these tests count copies and discards (zero copy, LCH-67, is
    # tests/test_zero_copy.py's)
    was = getattr(b, "zero_copy", None)
    if was is not None:
        b.zero_copy = False  # type: ignore[attr-defined]
    yield b
    if was is not None:
        b.zero_copy = was  # type: ignore[attr-defined]


def hv(name: str, t: Any) -> Var:
    """A host variable."""
    return var(name, t)


X, Y, OUT, WS, ST = (hv(n, array(Scalar.F32)) for n in ("x", "y", "out", "ws", "st"))
N = hv("n", Scalar.I32)
A = hv("a", Scalar.F32)
FLAG = hv("flag", Scalar.BOOL)
STATUS = hv("status", array(Scalar.I32))


def i64(e: Any) -> Cast:
    return Cast(Scalar.I64, e)


def c32(v: int) -> Const:
    return Const(v, Scalar.I32)


def scale_launch(**kw: Any) -> Launch:
    return Launch(M.kernel("scale"), i64(Ref(N)), c32(64), (Ref(X), Ref(Y), Ref(A), Ref(N)),
                  **kw)


# ----------------------------------------------------------------------------- LCH-1


def test_lch1_well_formed_launch_passes() -> None:
    check_launch(scale_launch())


def test_lch1_ill_formed_launches_are_refused() -> None:
    k = M.kernel("scale")
    bad: list[tuple[Launch, str]] = [
        (Launch(k, i64(Ref(N)), c32(64), (Ref(X), Ref(Y), Ref(A))), "3 arguments for 4"),
        (Launch(k, i64(Ref(N)), c32(64), (Ref(X), Ref(Y), Ref(N), Ref(N))),
         "argument for a has type i32"),
        (Launch(k, i64(Ref(N)), c32(64), (Ref(A), Ref(Y), Ref(A), Ref(N))),
         "needs a host array"),
        (Launch(k, i64(Ref(N)), c32(64), (Ref(hv("d", array(Scalar.F64))), Ref(Y), Ref(A),
                                           Ref(N))), "does not fit parameter x"),
        (Launch(k, Const(1.0, Scalar.F32), c32(64), (Ref(X), Ref(Y), Ref(A), Ref(N))),
         "thread_count must be an integer"),
        (scale_launch(scratch=(ScratchBuffer(2, c32(4)),)), "must be a rank-1 array"),
        (scale_launch(scratch=(ScratchBuffer(0, c32(4)), ScratchBuffer(0, c32(4)))),
         "repeated"),
        (scale_launch(overwritten=(Y,)), "one entry each"),
        (scale_launch(overwritten=(OUT,), overwritten_if=(Const(True, Scalar.BOOL),)),
         "not an array argument"),
        (scale_launch(overwritten=(Y,), overwritten_if=(c32(1),)), "must be a bool"),
        (scale_launch(stop_status=STATUS), "cannot stop"),
        (Launch(M.kernel("stopper"), i64(Ref(N)), c32(64), (Ref(X), Ref(N))),
         "needs a stop_status"),
    ]
    for node, msg in bad:
        with pytest.raises(LaunchError, match=msg):
            check_launch(node)


# ------------------------------------------------------------------------ LCH-2..LCH-4


def test_lch2_host_expressions_evaluated_once_at_the_launch(be: Backend) -> None:
    x = np.arange(100, dtype=np.float32)
    y = np.zeros(100, np.float32)
    env: dict[str, Any] = {"x": x, "y": y, "a": 3.0, "n": 60}
    # thread count: length(x) - 40, evaluated on the host from the host array
    count = i64(Binary(BinaryOp.SUB, Length(X), c32(40)))
    node = Launch(M.kernel("scale"), count, c32(32), (Ref(X), Ref(Y), Ref(A), Ref(N)))
    run = HostRun(be, env)
    run.launch(node)
    env["a"] = 100.0  # changed after the launch: the launch already took 3.0
    env["n"] = 1
    run.sync()
    assert (y[:60] == x[:60] * 3).all() and not y[60:].any()


def test_lch4_launch_does_not_wait_sync_does(be: Backend) -> None:
    x = np.ones(64, np.float32)
    y = np.zeros(64, np.float32)
    env: dict[str, Any] = {"x": x, "y": y, "a": 2.0, "n": 64}
    run = HostRun(be, env)
    run.launch(scale_launch())
    assert not y.any()  # nothing copied back yet
    assert len(run.pending) == 1
    run.sync(Sync())
    assert (y == 2).all() and not run.pending
    # execute syncs what is still pending at the end
    y[:] = 0
    execute([scale_launch()], env, be)
    assert (y == 2).all()


def test_lch3_thread_count_is_64_bit_and_below_one_runs_none(be: Backend) -> None:
    y = np.zeros(8, np.float32)
    env: dict[str, Any] = {"x": np.ones(8, np.float32), "y": y, "a": 1.0, "n": 8}
    execute([Launch(M.kernel("scale"), Const(-5, Scalar.I64), c32(8),
                    (Ref(X), Ref(Y), Ref(A), Ref(N))), Sync()], env, be)
    assert not y.any() and be.stats.launches == 0
    big = Launch(M.kernel("scale"), Const(2**33, Scalar.I64), c32(8),
                 (Ref(X), Ref(Y), Ref(A), Ref(N)))
    check_launch(big)  # an i64 count past 2**31 is a valid launch


# ----------------------------------------------------------------------------- LCH-5


def scratch_launch(read_back: Any) -> Launch:
    size = Binary(BinaryOp.ADD, Ref(N), c32(5))
    return Launch(M.kernel("work"), i64(size), c32(32), (Ref(WS), Ref(OUT), Ref(N)),
                  scratch=(ScratchBuffer(0, size, read_back),))


def test_lch5_scratch_buffer_is_device_only_and_read_back(be: Backend) -> None:
    out = np.zeros(20, np.float32)
    env: dict[str, Any] = {"out": out, "n": 20}
    execute([scratch_launch(c32(3)), Sync()], env, be)
    # the kernel saw a 25-element buffer (its length came as an explicit argument)
    assert (out == np.arange(20) * 2 + 25).all()
    assert isinstance(env["ws"], np.ndarray) and env["ws"].tolist() == [0.0, 2.0, 4.0]
    # no byte of the workspace was copied in; out in and out, and 3 elements read back
    assert be.stats.bytes_in == out.nbytes
    assert be.stats.bytes_out == out.nbytes + 3 * 4
    assert be.stats.bytes_allocated == out.nbytes + 25 * 4


def test_lch5_scratch_without_read_back_stays_unallocated(be: Backend) -> None:
    env: dict[str, Any] = {"out": np.zeros(4, np.float32), "n": 4}
    execute([scratch_launch(None), Sync()], env, be)
    assert env["ws"] is None
    assert be.stats.bytes_out == 16  # out only


def test_lch5_read_back_at_most_the_size(be: Backend) -> None:
    env: dict[str, Any] = {"out": np.zeros(4, np.float32), "n": 4}
    with pytest.raises(LaunchError, match="read_back"):
        execute([scratch_launch(c32(10)), Sync()], env, be)


# ----------------------------------------------------------------------------- LCH-7


def stop_launch(replay: tuple[Stop, ...]) -> Launch:
    return Launch(M.kernel("stopper"), i64(Ref(N)), c32(16), (Ref(X), Ref(N)),
                  stop_status=STATUS, stop_replay=replay)


def test_lch7_stop_status_and_replay(be: Backend) -> None:
    x = np.zeros(40, np.float32)
    x[[5, 30]] = 20.0
    x[12] = -1.0
    env: dict[str, Any] = {"x": x, "n": 40}
    with pytest.raises(ProgramStopped) as info:
        execute([stop_launch((Stop(3), Stop(7))), Sync()], env, be)
    assert info.value.code == 3 and info.value.thread == 5  # the lowest stopped thread
    assert "stop 3 (reached by thread 5 of kernel stopper)" in str(info.value)
    codes = env["status"]
    assert codes.dtype == np.int32 and codes.shape == (40,)
    assert np.flatnonzero(codes).tolist() == [5, 12, 30]
    assert codes[12] == 7 and codes[5] == 3
    # the threads that did not stop did their work
    assert x[0] == 1.0 and x[5] == 20.0


def test_lch7_no_stop_no_replay(be: Backend) -> None:
    env: dict[str, Any] = {"x": np.zeros(8, np.float32), "n": 8}
    execute([stop_launch((Stop(3),)), Sync()], env, be)
    assert not env["status"].any() and (env["x"] == 1).all()


def test_lch7_unhandled_code_is_an_error(be: Backend) -> None:
    x = np.full(8, -1.0, np.float32)
    env: dict[str, Any] = {"x": x, "n": 8}
    with pytest.raises(LaunchError, match="code 7, which no stop_replay"):
        execute([stop_launch((Stop(3),)), Sync()], env, be)


# ----------------------------------------------------------------------------- LCH-10


@pytest.mark.parametrize("flag", [True, False])
def test_lch10_overwritten_if_decides_the_discard(be: Backend, flag: bool) -> None:
    x = np.arange(64, dtype=np.float32)
    out = np.full(64, 5.0, np.float32)
    env: dict[str, Any] = {"x": x, "out": out, "n": 64, "flag": flag}
    node = Launch(M.kernel("fill_then_scale"), i64(Ref(N)), c32(64),
                  (Ref(X), Ref(OUT), Ref(N)), overwritten=(OUT,), overwritten_if=(Ref(FLAG),))
    execute([node, Sync()], env, be)
    assert (out == x * 2).all()
    assert be.stats.bytes_discarded == (out.nbytes if flag else 0)
    assert be.stats.bytes_in == x.nbytes + (0 if flag else out.nbytes)


# ---------------------------------------------------------------------------- LCH-16

HOST = """\
host x : f32[], y : f32[], a : f32, n : i32, out : f32[], ws : f32[], status : i32[], flag : bool
launch scale(x, y, a, n) threads i64(n) block 64
  overwritten y if flag && n > 3
launch work(ws, out, n) threads i64(n + 5) block 32
  scratch ws size n + 5 read_back 3
sync
launch stopper(x, n) threads i64(n) block 16
  status status replay (stop 3; stop 7)
sync
"""


def test_lch16_text_round_trip() -> None:
    from sarek_py.ir.host.launch_text import parse_host, print_host

    vs, stmts = parse_host(HOST, M)
    assert [type(s).__name__ for s in stmts] == ["Launch", "Launch", "Sync", "Launch", "Sync"]
    first = stmts[0]
    assert isinstance(first, Launch) and first.overwritten[0].name == "y"
    assert print_host(stmts, vs) == HOST
    vs2, stmts2 = parse_host(print_host(stmts), M)
    assert print_host(stmts2, vs2) == print_host(stmts)


def test_lch16_parsed_program_runs(be: Backend) -> None:
    from sarek_py.ir.host.launch_text import parse_host

    _, stmts = parse_host(HOST, M)
    x = np.arange(8, dtype=np.float32)
    env: dict[str, Any] = {"x": x, "y": np.zeros(8, np.float32), "a": 2.0, "n": 8,
                           "out": np.zeros(8, np.float32), "flag": True}
    execute(stmts, env, be)
    assert (env["y"] == np.arange(8) * 2).all()
    assert env["ws"].tolist() == [0.0, 2.0, 4.0]
    assert (env["x"] == np.arange(8) + 1).all() and not env["status"].any()


def test_lch16_errors_are_located() -> None:
    from sarek_py.ir.diagnostics import ParseError
    from sarek_py.ir.host.launch_text import parse_host

    with pytest.raises(ParseError, match="unknown kernel 'nope'") as info:
        parse_host("host x : f32[]\nlaunch nope(x) threads 1L block 1\n", M)
    assert info.value.loc is not None and info.value.loc.line == 2
    with pytest.raises(ParseError, match="unknown name 'z'"):
        parse_host("host x : f32[], n : i32\nlaunch stopper(z, n) threads 1L block 1\n", M)
    with pytest.raises(LaunchError, match="needs a stop_status"):
        parse_host("host x : f32[], n : i32\nlaunch stopper(x, n) threads 1L block 1\n", M)
    with pytest.raises(ParseError, match="expected 'launch' or 'sync'"):
        parse_host("host x : f32[]\nlaunched\n", M)
