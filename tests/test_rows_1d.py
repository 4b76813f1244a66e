"""Loops of one dimension as rows kernels where the backend runs them faster
(specs/tiling.md TIL-15, specs/offload.md OFF-17, specs/native.md NAT-80)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rule_citations import assert_rules_cited

from sarek_py.host.backend import run_program_on
from sarek_py.host.interp import HostInterp, HostResult, run_program
from sarek_py.host.offload import offload
from sarek_py.host.tiling import (
    Loop,
    Nest,
    TilingRefused,
    row_grid,
    row_nest,
    rows_pad_too_much,
)
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import HIf, Program, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.nodes import Binary, BinaryOp, Cast, Const, Kernel, Read, Ref, Store, var
from sarek_py.ir.typecheck import check_kernel
from sarek_py.ir.types import Scalar, array
from sarek_py.runtime import Backend, get_backend
from sarek_py.runtime.interp import InterpBackend

I32 = Scalar.I32
HERE = Path(__file__).resolve().parent


def c_backend() -> Backend:
    try:
        return get_backend("c")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def nest1(lower: int = 0) -> Nest:
    """for i = lo .. hi: b[i - lower] <- 2 a[i - lower] + i (f32, one dimension)."""
    a, b = var("a", array(Scalar.F32)), var("b", array(Scalar.F32))
    lo, hi, n = var("lo", I32), var("hi", I32), var("n", I32)
    i = var("i", I32)
    idx = Binary(BinaryOp.SUB, Ref(i), Const(lower, I32))
    body = Store(b, (idx,), Binary(BinaryOp.ADD, Binary(BinaryOp.MUL, Const(2.0, Scalar.F32),
                                                       Read(a, (idx,))),
                                   _f32(Ref(i))))
    return Nest("one", (a, b, n, lo, hi), (Loop(i, Ref(lo), Ref(hi)),), body)


def _f32(e: Any) -> Any:
    return Cast(Scalar.F32, e)


# ----------------------------------------------------------------------------- TIL-15


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000])
@pytest.mark.parametrize("block", [256, 64])
def test_til15_rows_of_one_dimension_match_the_loop(n: int, block: int) -> None:
    """TIL-15: thread t of block bx at ``lo + bx * block + t``; the padded threads of the
    last block return; every backend here gives the loop's bytes."""
    lower = -7
    rk = row_nest(nest1(lower), one_dim=True)
    check_kernel(rk.kernel)
    assert rk.contiguous == 0 and rk.next == -1 and rk.others == ()
    grid = row_grid(rk, (n,), block)
    assert grid == (-(-n // block),)
    a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    expect = 2 * a + np.arange(lower, lower + n, dtype=np.float32)
    bes: list[Backend] = [get_backend("interp")]
    for name in ("opencl", "c"):
        try:
            bes.append(get_backend(name))
        except BackendUnavailable:
            pass
    for be in bes:
        b = np.full(n, np.nan, np.float32)
        be.run_kernel(rk.kernel, {"a": a, "b": b, "n": n, "lo": lower, "hi": lower + n - 1},
                      grid[0] * block, block, grid=grid, block_shape=(block,))
        assert b.tobytes() == expect.tobytes(), (be.name, n, block)


def test_til15_without_one_dim_a_loop_of_one_dimension_is_refused() -> None:
    """TIL-15 (TIL-1 kept): without ``one_dim`` the rows kernel refuses one dimension, and
    a store that does not use the loop variable (a reduction) is refused with it too."""
    with pytest.raises(TilingRefused, match="TIL-1"):
        row_nest(nest1())
    n = nest1()
    red = Nest("red", n.params, n.loops, Store(n.params[1], (Const(0, I32),),
                                                Const(1.0, Scalar.F32)))
    with pytest.raises(TilingRefused, match="reduction"):
        row_nest(red, one_dim=True)


def test_til15_the_host_runs_flat_where_rows_pad_too_much() -> None:
    """TIL-15, TIL-11: fewer iterations than about a block pad too much (flat); a row of
    blocks does not."""
    rk = row_nest(nest1(), one_dim=True)
    assert rows_pad_too_much(rk, (100,), 256) and rows_pad_too_much(rk, (0,), 256)
    assert not rows_pad_too_much(rk, (256,), 256) and not rows_pad_too_much(rk, (1000,), 256)


@pytest.mark.parametrize("block", [256, 64])
def test_til15_a_padded_count_past_i32_runs_flat(block: int) -> None:
    """TIL-15 (TIL-11's "the grid does not fit"): a launch numbers at most 2**31 - 1
    threads (LCH-21), so a loop of 2**31 - 1 iterations, which its flat launch runs, must
    not get a rows launch of ceil(n / B) * B = 2**31 threads (refused with a LaunchError):
    the host launches it flat. The same holds of a 2-D nest whose padded rows pass 2**31 - 1."""
    rk = row_nest(nest1(), one_dim=True)
    top = 2**31 - 1
    whole = top // block * block  # the most iterations whole blocks number within i32
    assert not rows_pad_too_much(rk, (whole,), block)
    assert rows_pad_too_much(rk, (whole + 1,), block)
    assert rows_pad_too_much(rk, (top,), block)
    a2, b2 = var("a", array(Scalar.F32, 2)), var("b", array(Scalar.F32, 2))
    j, i = var("j", I32), var("i", I32)
    two = row_nest(Nest("two", (a2, b2), (Loop(j, Const(0, I32), Const(7, I32)),
                                          Loop(i, Const(0, I32), Const(9, I32))),
                        Store(b2, (Ref(j), Ref(i)), Read(a2, (Ref(j), Ref(i))))))
    # 2**13 rows of 2**18 - 1 points: 2**31 - 2**13 iterations, 2**31 padded threads
    assert rows_pad_too_much(two, (2**13, 2**18 - 1), 256)
    assert not rows_pad_too_much(two, (2**13 - 1, 2**18 - 1), 256)


def test_til15_the_host_launches_a_loop_of_i32_max_iterations_flat() -> None:
    """TIL-15, OFF-17: the host program's loop ``i = 0 to 2**31 - 2`` (2**31 - 1
    iterations) is launched flat with 2**31 - 1 threads, within every launch's limit;
    its rows launch would number 2**31 (the launch is checked and not run here)."""
    text = """program p
  var hi : i32 = 2147483646;
  var k : i32[0:] allocatable;
begin
  allocate k[0:3];
  parallel for (i = 0 to hi) do if i == hi then k[i - hi] <- 1 done
end
"""
    q = offload(parse_program(text), rows_1d=True)
    dev = InterpBackend()
    seen: list[tuple[str, int]] = []

    class Checked(Exception):
        pass

    def launch(kernel: Kernel, args: Any, threads: int, block: int = 256, *a: Any,
               **kw: Any) -> None:
        seen.append((kernel.name, int(threads)))
        dev.launch_checks(kernel, args, threads, block, kw.get("grid"),
                          kw.get("block_shape"), kw.get("shared"))  # limits: LCH-21
        raise Checked

    dev.launch = launch  # type: ignore[method-assign]
    with pytest.raises(Checked):
        HostInterp(q, device=dev).run({})
    assert seen == [("p_loop", 2**31 - 1)], seen


# ----------------------------------------------------------------------------- OFF-17


PROGRAM = """program p
  var n : i32 = 1000;
  var lo : i32 = 0;
  var x : f64[0:] allocatable;
  var y : f64[0:] allocatable;
begin
  allocate x[0:n + 1]; allocate y[0:n + 1];
  parallel for (i = 0 to n + 1) do x[i] <- f64(i % 13) * 0.5 done;
  parallel for (i = 1 to n) do y[i] <- x[i - 1] + x[i] * 2.0 + x[i + 1] done
end
"""


def launches(q: Program) -> tuple[list[HIf], list[Launch]]:
    return ([s for s in iter_host(q.body) if isinstance(s, HIf)],
            [s for s in iter_host(q.body) if isinstance(s, Launch)])


def test_off17_rows_1d_launches_one_dimension_in_rows_or_flat() -> None:
    """OFF-17: with ``rows_1d`` each 1-D loop is ``if <pad too much> then <flat> else
    <rows>``, the printed program reads back; without it (the default) one flat launch."""
    p = parse_program(PROGRAM)
    ifs, ls = launches(offload(p))
    assert not ifs and len(ls) == 2
    q = offload(p, rows_1d=True)
    text = print_program(q)
    assert print_program(parse_program(text)) == text
    ifs, ls = launches(q)
    assert len(ifs) == 2 and len(ls) == 4
    for h in ifs:
        flat, rows = h.then, h.else_
        assert isinstance(flat, Launch) and isinstance(rows, Launch)
        assert rows.kernel.name == flat.kernel.name + "_rows"
        assert rows.grid is not None and len(rows.grid) == 1


@pytest.mark.parametrize("n,rows_used", [(1000, True), (300, True), (100, False)])
def test_off17_the_host_chooses_and_both_give_the_loops_bytes(
        n: int, rows_used: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """OFF-17: the host picks the rows launch unless it pads too much; the results are
    the interpreter's bitwise either way."""
    p = parse_program(PROGRAM)
    q = offload(p, rows_1d=True)
    dev = InterpBackend()
    names: list[str] = []
    _spy(dev, names, monkeypatch)
    ref = run_program(p, {"n": n})
    got = HostInterp(q, device=dev).run({"n": n})
    for a in "xy":
        assert got.array(a).tobytes() == ref.array(a).tobytes()
    assert all(nm.endswith("_rows") == rows_used for nm in names), names


def test_off17_loops_that_stop_or_reduce_stay_flat() -> None:
    """OFF-17: a 1-D loop that may stop, or whose store does not use its variable, keeps
    its flat launch."""
    stop = PROGRAM.replace("do x[i] <- f64(i % 13) * 0.5 done",
                           "do if i == 7000 then stop 3 else x[i] <- 1.0 done")
    ifs, _ = launches(offload(parse_program(stop), rows_1d=True))
    assert len(ifs) == 1  # the second loop only
    red = PROGRAM.replace("do y[i] <- x[i - 1] + x[i] * 2.0 + x[i + 1] done",
                          "do y[0] <- 1.0 done")
    ifs, _ = launches(offload(parse_program(red), rows_1d=True))
    assert len(ifs) == 1  # the first loop only


def test_off17_run_program_on_uses_the_backends_choice(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """OFF-17: ``run_program_on`` offloads with the backend's ``rows_1d``: ``c`` says
    true (its launches are the rows kernels), OpenCL and the interpreter standing for a
    device false."""
    p = parse_program(PROGRAM)
    seen: list[bool] = []
    from sarek_py.host import offload as off_mod

    real = off_mod.offload

    def spy(program: Program, **kw: Any) -> Program:
        seen.append(bool(kw.get("rows_1d")))
        return real(program, **kw)

    monkeypatch.setattr(off_mod, "offload", spy)
    res, _ = run_program_on(p, InterpBackend())
    assert seen == [False]
    ref = run_program(p)
    assert res.array("y").tobytes() == ref.array("y").tobytes()
    assert get_backend("interp").rows_1d is False
    from sarek_py.runtime.native import CBackend
    from sarek_py.runtime.opencl import OpenCLBackend
    assert CBackend.rows_1d is True and OpenCLBackend.rows_1d is False


# ----------------------------------------------------------------------------- NAT-80


def test_nat80_c_runs_1d_loops_as_guard_free_simd_rows(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """NAT-80: on c a 1-D loop runs as its rows kernel, whose thread indexes in 64 bits
    (no wrapping ``sarek_add_i32`` on the index), and the results are the interpreter's."""
    be = c_backend()
    monkeypatch.setenv("SAREK_CACHE", str(tmp_path))
    names: list[str] = []
    _spy(be, names, monkeypatch)
    p = parse_program(PROGRAM)
    res, _ = run_program_on(p, be)
    ref = run_program(p)
    for a in "xy":
        assert res.array(a).tobytes() == ref.array(a).tobytes()
    assert names and all(nm.endswith("_rows") for nm in names), names
    sources = [f.read_text() for f in tmp_path.rglob("*.c")]
    stencil = [s for s in sources if "x[i + 1]" in s or "x[i - 1]" in s]
    assert stencil, "the stencil's C source"
    assert all("long long i = i_64;" in s for s in stencil)
    assert not any("sarek_add_i32(lo_0" in s for s in stencil)


def _random_program(rng: random.Random) -> str:
    """A host program of 1-D loops at odd sizes and bounds, offsets -2..2, f32 or f64,
    sometimes a loop over nothing or a single point."""
    elem = rng.choice(("f32", "f64"))
    n = rng.choice((0, 1, 2, 63, 255, 256, 257, 511, 1000, 4099))
    lo = rng.choice((2, 3))
    hi_off = rng.choice((0, 1, 2))
    offs = sorted(rng.sample((-2, -1, 0, 1, 2), rng.randint(1, 3)))
    terms = " + ".join(f"x[i + {d}] * {rng.choice(('0.5', '1.25', '3.0'))}" for d in offs)
    return f"""program g
  var n : i32 = {n};
  var x : {elem}[0:] allocatable;
  var y : {elem}[0:] allocatable;
begin
  allocate x[0:n + 4]; allocate y[0:n + 4];
  parallel for (i = 0 to n + 4) do (x[i] <- {elem}(i % 17) * 0.25; y[i] <- 0.0) done;
  parallel for (i = {lo} to n + 2 - {hi_off}) do y[i] <- {terms} done
end
"""


@pytest.mark.generated
def test_nat80_generated_1d_programs_bitwise_on_c() -> None:
    """NAT-80, OFF-17: generated 1-D programs (sizes around the block, empty and single
    point loops, offsets -2..2, f32 and f64) on c give the interpreter's bytes."""
    be = c_backend()
    import os
    rng = random.Random(80)
    for k in range(60 if os.environ.get("SAREK_FUZZ") else 12):
        text = _random_program(rng)
        p = parse_program(text)
        res, _ = run_program_on(p, be)
        ref = run_program(p)
        for a in "xy":
            assert res.array(a).tobytes() == ref.array(a).tobytes(), (k, text)


# ------------------------------------------------------- red team: programs a user writes

#: host programs whose 1-D loops take the rows launch at least once, each a user's shape:
#: procedures called with other bounds, loops in host for/while/if with bounds that
#: change between executions (from scalars and from array elements a launch writes),
#: helper functions, strided and reversed subscripts, in-place updates, integer and bool
#: arrays, a pointer to a target, arrays with negative lower bounds
USER_PROGRAMS = {
    "procedure": """program p
  var n : i32 = 900;
  var x : f64[0:] allocatable;
  var y : f64[0:] allocatable;
  proc smooth(a : f64[] in, b : f64[] inout, lo : i32 in, hi : i32 in) =
    parallel for (i = lo to hi) do b[i] <- (a[i - 1] + a[i] + a[i + 1]) / 3.0 done
  end
begin
  allocate x[0:n]; allocate y[0:n];
  parallel for (i = 0 to n) do x[i] <- f64(i % 7) done;
  for t = 1 to 600 step 97 do
    call smooth(x, y, t, n - t);
    call smooth(y, x, 1, t)
  done;
  call smooth(x, y, 5, 4)
end
""",
    "while_if": """program p
  var n : i32 = 2000;
  var s : i32 = 1;
  var c : i32 = 0;
  var x : i64[0:] allocatable;
begin
  allocate x[0:n];
  while s <= n do
    c := c + 1;
    if c % 3 == 0 then
      (parallel for (i = 0 to s) do x[i] <- x[i] + i64(i * c) done)
    else if c % 3 == 1 then
      (parallel for (i = n - s to n) do x[i] <- x[i] - 1L done)
    else
      (for r = 0 to 2 do parallel for (i = r to s - r) do x[i] <- x[i] * 3L done done);
    s := s * 2 + c
  done
end
""",
    "bounds_from_array": """program p
  var n : i32 = 1000;
  var m : i32[0:] allocatable;
  var x : f64[0:] allocatable;
  var y : f64[0:] allocatable;
begin
  allocate m[0:1]; allocate x[0:n]; allocate y[0:n];
  parallel for (i = 0 to 1) do m[i] <- 300 * (i + 1) + 7 done;
  parallel for (i = m[0] to m[1]) do x[i] <- f64(i) done;
  parallel for (i = 0 to 1) do m[i] <- 999 * i done;
  parallel for (i = m[0] + 1 to m[1] - 1) do y[i] <- x[i - 1] * 0.5 + x[i + 1] done
end
""",
    "helpers_strides": """pure fun sq(v : f64) : f64 = return v * v
pure fun clampi(v : i32, lo : i32, hi : i32) : i32 =
  if v < lo then return lo else if v > hi then return hi else return v
program p
  var n : i32 = 777;
  var x : f64[0:] allocatable;
  var y : f64[0:] allocatable;
  var z : f64[0:] allocatable;
begin
  allocate x[0:2 * n + 1]; allocate y[0:n]; allocate z[0:n];
  parallel for (i = 0 to 2 * n + 1) do x[i] <- f64(i) * 0.01 - 3.0 done;
  parallel for (i = 0 to n) do y[n - i] <- sq(x[2 * i]) - x[2 * i + 1] done;
  parallel for (i = 0 to n) do z[i] <- sq(y[clampi(i - 1, 0, n)]) + y[clampi(i + 1, 0, n)] done;
  parallel for (i = 0 to n) do z[i] <- z[i] * z[i] - y[n - i] done
end
""",
    "int_bool": """program p
  var n : i32 = 600;
  var b : bool[0:] allocatable;
  var c : bool[0:] allocatable;
  var k : i32[0:] allocatable;
  var u : i64[0:] allocatable;
begin
  allocate b[0:n]; allocate c[0:n]; allocate k[0:n]; allocate u[0:n];
  parallel for (i = 0 to n) do b[i] <- i % 3 == 0 done;
  parallel for (i = 0 to n) do (k[i] <- b[i] ? i * 2147483 : -i;
                                u[i] <- i64(i) * i64(i) * 99999L) done;
  parallel for (i = 1 to n - 1) do c[i] <- b[i - 1] != b[i + 1] && k[i] > 0 done;
  parallel for (i = 0 to n) do k[n - i] <- k[n - i] << (i % 31) done
end
""",
    "pointer_negative_lower": """program p
  var x : f64[-700:] allocatable target;
  var q : f64[-700:] pointer;
  var y : f64[-700:] allocatable;
begin
  allocate x[-700:700]; allocate y[-700:700];
  q => x;
  parallel for (i = -700 to 700) do q[i] <- f64(i) * 0.5 done;
  parallel for (i = -699 to 699) do y[i] <- x[-i] + q[i - 1] - x[i + 1] done;
  parallel for (i = -699 to 699) do q[i] <- y[i] * 2.0 done
end
""",
}


def _same_run(p: Program, ref: Any, got: Any, what: str) -> None:
    for d in p.decls:
        a, b = ref.values[d.var.name], got.values[d.var.name]
        if isinstance(a, np.ndarray):
            assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), (what, d.var.name)
        else:
            assert type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert (ref.output, ref.stop_code) == (got.output, got.stop_code), what


def _spy(dev: Backend, names: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = dev.launch

    def launch(kernel: Kernel, *args: Any, **kw: Any) -> Any:
        names.append(kernel.name)
        return real(kernel, *args, **kw)

    monkeypatch.setattr(dev, "launch", launch)


@pytest.mark.parametrize("name", sorted(USER_PROGRAMS))
def test_off17_user_programs_on_c_and_a_device_give_the_interpreters_bytes(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """OFF-17, NAT-80: a user's host programs (procedures, host loops and ifs whose 1-D
    loops change bounds between executions, helpers, strides, reversed subscripts,
    in-place updates, int and bool arrays, pointers) run on c and on the interpreter
    standing for a device (``offload(p, rows_1d=True)``) with every variable, the output
    and the stop code of the reference interpreter, and with rows launches among them."""
    p = parse_program(USER_PROGRAMS[name])
    ref = run_program(p)
    q = offload(p, rows_1d=True)
    dev = InterpBackend()
    names: list[str] = []
    _spy(dev, names, monkeypatch)
    _same_run(p, ref, HostInterp(q, device=dev).run({}), "interp device")
    assert any(nm.endswith("_rows") for nm in names), names
    back = parse_program(print_program(q))  # the printed program means the same
    _same_run(p, ref, HostInterp(back, device=InterpBackend()).run({}), "printed")
    be = c_backend()
    c_names: list[str] = []
    _spy(be, c_names, monkeypatch)
    res, _ = run_program_on(p, be)
    _same_run(p, ref, res, "c")
    assert any(nm.endswith("_rows") for nm in c_names), c_names


FAULTS = {
    # the last iteration reads past the end: one faulting thread, in the last block
    "read_past_end": ("""program p
  var n : i32 = 1000;
  var x : f32[0:] allocatable;
  var y : f32[0:] allocatable;
begin
  allocate x[0:n - 1]; allocate y[0:n - 1];
  parallel for (i = 0 to n - 1) do x[i] <- f32(i) done;
  parallel for (i = 0 to n - 1) do y[i] <- x[i + 1] done
end
""", "thread 999: out-of-bounds read of array 'x' at index [1000] (bounds 0..999)"),
    # a read in a helper whose `j + 3` wraps at the top of i32 (the flat launch runs)
    "read_in_helper_near_top": ("""pure fun at(a : i32[2147483047:], j : i32) : i32 = return a[j + 3]
program p
  var lo : i32 = 2147483049;
  var hi : i32 = 2147483645;
  var x : i32[2147483047:] allocatable;
  var y : i32[2147483047:] allocatable;
begin
  allocate x[2147483047:2147483647]; allocate y[2147483047:2147483647];
  parallel for (i = 2147483047 to 2147483647) do x[i] <- i % 1000 done;
  parallel for (i = lo to hi) do y[i] <- at(x, i) + x[i - 2] done
end
""", "thread 596 (in helper at): out-of-bounds read of array 'x' at index [-2147483648] "
        "(bounds 2147483047..2147483647)"),
    # the first iteration reads below the start: a 1-D loop in a procedure
    "below_start_in_procedure": ("""program p
  var x : f64[-300:] allocatable;
  proc f(a : f64[-300:] inout) =
    parallel for (i = -300 to 299) do a[i] <- f64(i) done;
    parallel for (i = -300 to 299) do a[i] <- a[i] + a[i - 1] * 0.0 done
  end
begin
  allocate x[-300:299];
  call f(x)
end
""", "thread 0: out-of-bounds read of array 'a' at index [-301] (bounds -300..299)"),
}


def _three_runs(p: Program) -> list[Callable[[], HostResult]]:
    """The reference interpreter, the interpreter standing for a device with 1-D rows
    (OFF-17), and ``c`` (NAT-80) running ``p``."""
    be = c_backend()
    q = offload(p, rows_1d=True)
    return [lambda: run_program(p),
            lambda: HostInterp(q, device=InterpBackend()).run({}),
            lambda: run_program_on(p, be)[0]]


NEAR = """program p
  var lo : i32 = LO;
  var hi : i32 = HI;
  var x : i64[BASE:] allocatable;
  var y : i64[BASE:] allocatable;
begin
  allocate x[BASE:TOP]; allocate y[BASE:TOP];
  parallel for (i = BASE to TOP) do x[i] <- i64(i) * 3L done;
  parallel for (i = lo to hi) do y[i] <- x[i - 2] + x[i + 3] done
end
"""


@pytest.mark.parametrize("lo,hi,flat", [
    (-2147483646, -2147482647, False),   # i - 2 is INT_MIN: in range, rows
    (-2147483647, -2147482647, True),    # i - 2 could wrap: flat (TIL-13)
    (2147482644, 2147483644, False),     # i + 3 is INT_MAX: rows
    (2147482645, 2147483645, True),      # i + 3 could wrap: flat
    (-1000, 1000, False),
    (-500, 2000, False),
])
def test_nat80_offsets_of_the_variable_near_the_ends_launch_flat(
        lo: int, hi: int, flat: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """NAT-80, TIL-13, TIL-15: ``x[i - 2] + x[i + 3]`` with bounds where an offset of ``i``
    could wrap runs the flat launch, elsewhere the rows launch; every variable is the
    reference interpreter's on c and on the interpreter standing for a device, or all
    three report the same located fault."""
    base, top = max(lo - 2, -2**31), min(hi + 3, 2**31 - 1)
    text = (NEAR.replace("BASE", str(base)).replace("TOP", str(top))
            .replace("LO", str(lo)).replace("HI", str(hi)))
    p = parse_program(text)
    be = c_backend()
    names: list[str] = []
    _spy(be, names, monkeypatch)
    outcomes: list[object] = []
    for run in _three_runs(p):
        try:
            outcomes.append(run())
        except SarekError as exc:  # the kernel's name is the offload's (or 'parfor')
            outcomes.append(re.sub(r"^kernel \w+, ", "", exc.message))
    if isinstance(outcomes[0], str):
        assert outcomes[1:] == [outcomes[0]] * 2
    else:
        for got in outcomes[1:]:
            assert not isinstance(got, str), got
            _same_run(p, outcomes[0], got, "near the ends")
    stencil = [nm for nm in names if nm != names[0]]
    assert stencil and all(nm.endswith("_rows") != flat for nm in stencil), names


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_nat80_a_fault_names_the_interpreters_array_index_and_place(name: str) -> None:
    """NAT-80, OFF-17: an out-of-bounds access in a 1-D loop (one faulting iteration) is,
    on c and on the interpreter standing for a device, the reference interpreter's
    located error: the same thread, array, index and bounds, at the same line and column."""
    text, words = FAULTS[name]
    p = parse_program(text)
    errors = []
    for run in _three_runs(p):
        with pytest.raises(SarekError) as info:
            run()
        errors.append(info.value)
    for e in errors:
        assert words in e.message, (name, e.message)
        assert e.loc is not None and errors[0].loc is not None
        assert (e.loc.line, e.loc.col) == (errors[0].loc.line, errors[0].loc.col), name


def test_rules_cited() -> None:
    """Every rule of TIL-15, OFF-17, NAT-80 is cited by a test here."""
    assert_rules_cited(__file__, "tiling", "TIL", 15, 15)
    assert_rules_cited(__file__, "offload", "OFF", 17, 17)
    assert_rules_cited(__file__, "native", "NAT", 80, 80)
