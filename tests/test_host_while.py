"""Host ``while`` loops (specs/host-program.md, HP-40..HP-43; specs/loop-fusion.md, LF-40).

Every program here runs on the host interpreter as written and offloaded on the OpenCL
backend (PoCL), and the two runs are compared bitwise."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest

from sarek_py.fusion.loops.fusion import fuse_program
from sarek_py.host.check import check_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import CheckError, ParseError
from sarek_py.ir.host import program as hp
from sarek_py.ir.host.launch import Sync
from sarek_py.ir.host.sexp import program_from_sexp, program_to_sexp
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.nodes import Ref
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

# Newton's iteration for sqrt on a field, run until the largest change is small, the test
# of the loop reading an array a parallel loop (a launch, offloaded) wrote.
NEWTON = """
program newton
  var n : i32 = 37;
  var x : f64[0:] allocatable;
  var y : f64[0:] allocatable;
  var d : f64[0:] allocatable;
  var it : i32 = 0;
  var big : f64 = 1.0;
begin
  allocate x[n]; allocate y[n]; allocate d[n];
  parallel for (i = 0 to n - 1) do x[i] <- f64(i) + 2.0; y[i] <- f64(i) + 2.0 done;
  while big > 1e-12 && it < 100 do
    parallel for (i = 0 to n - 1) do
      let z = 0.5 * (y[i] + x[i] / y[i]) in
      d[i] <- abs(z - y[i]);
      y[i] <- z
    done;
    big := 0.0;
    for i = 0 to n - 1 do
      if d[i] > big then big := d[i]
    done;
    it := it + 1
  done;
  print it, big
end
"""

# break / continue in a while, a while nested in a for and a for in a while, the test of
# the while reading an array element a launch writes (a[0]), and a while that never runs.
JUMPS = """
program jumps
  var n : i32 = 16;
  var a : i32[0:16];
  var b : i32[0:16];
  var k : i32 = 0;
  var s : i32 = 0;
  var t : i32 = 0;
begin
  while a[0] < 40 do
    parallel for (i = 0 to n - 1) do a[i] <- a[i] + i + 1 done;
    k := k + 1;
    if k % 3 == 0 then continue;
    parallel for (i = 0 to n - 1) do b[i] <- b[i] + a[i] done;
    if a[n - 1] > 300 then break
  done;
  for r = 1 to 3 do
    t := 0;
    while true do
      t := t + 1;
      if t > r then break;
      parallel for (i = 0 to n - 1) do b[i] <- b[i] * 2 + r done
    done;
    s := s + b[r]
  done;
  while false do stop 3 done;
  print k, s, t, a[0], b[n - 1]
end
"""


def _opencl() -> Backend:
    try:
        return get_backend("opencl")
    except Exception as exc:  # pragma: no cover - no OpenCL here
        pytest.skip(f"no OpenCL: {exc}")


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() <= b.keys()
    for name, x in a.items():
        y = b[name]
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape
            assert x.tobytes() == y.tobytes(), name
        else:
            assert type(x) is type(y) and np.asarray(x).tobytes() == np.asarray(y).tobytes(), name


def test_hp40_parse_print_round_trip_and_sexp() -> None:
    """HP-40, HP-11: a while loop prints as written and reads back; the S-expression dump
    is lossless (TXT-26)."""
    for text in (NEWTON, JUMPS):
        p = parse_program(text)
        assert any(isinstance(s, hp.HWhile) for s in hp.iter_host(p.body))
        once = print_program(p)
        assert "while big > 1e-12 && it < 100 do" in once or "while a[0] < 40 do" in once
        assert print_program(parse_program(once)) == once
        back = program_from_sexp(program_to_sexp(p))
        assert program_to_sexp(back) == program_to_sexp(p)


def test_hp40_while_was_a_parse_error_and_is_located_when_malformed() -> None:
    """HP-40: ``while`` starts a host statement; a missing ``do``/``done`` is a located
    ParseError."""
    with pytest.raises(ParseError, match="'do' after the condition of 'while'"):
        parse_program("program p var k : i32; begin while k < 3 k := k + 1 done end")
    with pytest.raises(ParseError, match="to close the 'while' at line 1"):
        parse_program("program p var k : i32; begin while k < 3 do k := k + 1 end")


def test_hp40_condition_must_be_bool() -> None:
    """HP-40, HP-9: the condition of a while is a bool (CheckError, located)."""
    p = parse_program("program p var k : i32; begin while k < 3 do k := k + 1 done end")
    w = p.body
    assert isinstance(w, hp.HWhile)
    bad = attrs.evolve(p, body=attrs.evolve(w, cond=Ref(p.var("k"))))
    with pytest.raises(CheckError, match="the condition of 'while' has type i32, not bool"):
        check_program(bad)


def test_hp40_break_continue_and_interpreter() -> None:
    """HP-40, HP-3: the condition is tested before every iteration; ``break`` leaves the
    innermost sequential loop, ``continue`` goes to the next test."""
    r = run_program(parse_program(JUMPS))
    a = np.zeros(16, np.int32)
    b = np.zeros(16, np.int32)
    k = 0
    idx = np.arange(16, dtype=np.int32)
    while a[0] < 40:
        a = a + idx + 1
        k += 1
        if k % 3 == 0:
            continue
        b = b + a
        if a[15] > 300:
            break
    s = 0
    t = 0
    for rr in range(1, 4):
        t = 0
        while True:
            t += 1
            if t > rr:
                break
            b = b * 2 + rr
        s += int(b[rr])
    assert r.output == [f"{k} {s} {t} {a[0]} {b[15]}"]
    assert r.array("a").tobytes() == a.astype(np.int32).tobytes()
    assert r.array("b").tobytes() == b.astype(np.int32).tobytes()


def test_hp40_break_outside_loop_still_refused() -> None:
    """HP-9: a ``break`` after a while (not inside it) is still outside a loop."""
    with pytest.raises(CheckError, match="'break' outside a loop"):
        check_program(parse_program(
            "program p var k : i32; begin while k < 3 do k := k + 1 done; break end"))


@pytest.mark.parametrize("text", [NEWTON, JUMPS], ids=["newton", "jumps"])
def test_hp41_offloaded_while_bitwise_on_opencl(text: str) -> None:
    """HP-41, OFF-7: offloaded, a program with while loops gives the interpreter's bytes on
    OpenCL; the launches inside the loop are synced before the host reads what they write
    (the condition included), with no missing-sync error."""
    p = parse_program(text)
    ref = run_program(p)
    off = offload(p)
    assert print_program(parse_program(print_program(off))) == print_program(off)
    got = run_program(off, device=_opencl())
    _same(ref.values, got.values)
    assert got.output == ref.output
    on_interp = run_program(off)
    _same(ref.values, on_interp.values)


def test_hp41_condition_reading_a_launch_result_is_synced_before_every_test() -> None:
    """HP-41: a while whose condition reads an array a launch in its body writes gets a
    sync at the end of the body and before each of its own ``continue``s."""
    off = offload(parse_program(JUMPS))
    w = next(s for s in hp.iter_host(off.body) if isinstance(s, hp.HWhile))
    conts = [s for s in hp.iter_host(w.body) if isinstance(s, hp.Block)
             and any(isinstance(x, hp.Continue) for x in s.stmts)]
    assert conts and all(isinstance(c.stmts[0], Sync) for c in conts)
    text = """
program p
  var a : i32[0:4];
begin
  while a[2] < 10 do
    parallel for (i = 0 to 3) do a[i] <- a[i] + i done
  done
end
"""
    prog = parse_program(text)
    off = offload(prog)
    w = next(s for s in hp.iter_host(off.body) if isinstance(s, hp.HWhile))
    assert isinstance(w.body, hp.Block) and isinstance(w.body.stmts[-1], Sync)
    _same(run_program(prog).values, run_program(off, device=_opencl()).values)


def test_hp41_sync_after_a_break_out_of_a_for() -> None:
    """HP-41, OFF-7 (regression): what a launch writes before a ``break`` is pending after
    the loop even when the body's end syncs; a host read after the loop waits for it."""
    text = """
program p
  var a : i32[0:8];
  var x : i32 = 0;
begin
  for r = 1 to 5 do
    parallel for (i = 0 to 7) do a[i] <- a[i] + r done;
    if r == 2 then break;
    x := x + a[0]
  done;
  x := x + a[7]
end
"""
    p = parse_program(text)
    ref = run_program(p)
    got = run_program(offload(p))
    _same(ref.values, got.values)
    assert int(ref.values["x"]) == 1 + 3


def test_hp41_continue_pending_reaches_the_next_iteration() -> None:
    """HP-41, OFF-7 (regression): what is pending at a ``continue`` is pending at the start
    of the next iteration: a host read there waits for it."""
    text = """
program p
  var a : i32[0:8];
  var x : i32 = 0;
begin
  for r = 1 to 4 do
    x := x + a[3];
    parallel for (i = 0 to 7) do a[i] <- a[i] + r done;
    if r % 2 == 1 then continue;
    sync
  done
end
"""
    p = parse_program(text)
    ref = run_program(p)
    got = run_program(offload(p))
    _same(ref.values, got.values)


def test_lf40_while_is_a_barrier_to_fusion_and_fusion_inside_works() -> None:
    """LF-40: a pair directly in a while's body is refused with LF-40 (its last iteration is
    unknown); the same pair in a for inside a while fuses, bitwise equal."""
    pair = """
    parallel for (i = 1 to n) do t[i] <- u[i] * 2.0 + f64(k) done;
    parallel for (i = 1 to n) do v[i] <- t[i] + v[i] done
"""
    head = """
program p
  var n : i32 = 10;
  var u : f64[1:10];
  var t : f64[1:10];
  var v : f64[1:10];
  var k : i32 = 0;
begin
  while k < 3 do
"""
    direct = head + pair + ";\n    k := k + 1\n  done\nend\n"
    _, reports = fuse_program(parse_program(direct))
    assert len(reports) == 1 and reports[0].refusal is not None
    assert reports[0].refusal.rule == "LF-40"
    assert "'while' loop" in str(reports[0].refusal)
    inside = head + "    for s = 1 to 2 do" + pair + "    done;\n    k := k + 1\n  done\nend\n"
    p = parse_program(inside)
    fused, reports = fuse_program(p)
    assert len(reports) == 1 and reports[0].plan is not None
    again = parse_program(print_program(fused))
    _same(run_program(p).values, run_program(again).values)
    _same(run_program(p).values, run_program(offload(again), device=_opencl()).values)


# ----------------------------------------------------------------- generated programs


def _gen_program(seed: int) -> str:
    """A random program of while/for loops, parallel loops, host reads and writes of the
    arrays the loops write, ``break``/``continue`` and tests reading launch results."""
    import random

    r = random.Random(seed)
    counters = iter(range(100))

    def par() -> str:
        x, y = r.sample(["a", "b", "c"], 2)
        own = r.random() < 0.5
        src = f"{x}[i]" if own else f"{y}[(i + {r.randint(0, 7)}) % 8]"
        return (f"parallel for (i = 0 to 7) do {x}[i] <- ({src} * {r.randint(1, 3)} + "
                f"{r.randint(0, 9)}) % 1000 done")

    def host() -> str:
        x = r.choice("abc")
        match r.randint(0, 2):
            case 0:
                return f"s := (s + {x}[{r.randint(0, 7)}]) % 1000"
            case 1:
                return f"{x}[{r.randint(0, 7)}] <- (s + {r.randint(0, 9)}) % 1000"
        return f"if {x}[{r.randint(0, 7)}] > {r.randint(0, 500)} then s := s + 1"

    def body(depth: int, loop: str | None) -> list[str]:
        out: list[str] = []
        for _ in range(r.randint(1, 4)):
            roll = r.random()
            if roll < 0.35:
                out.append(par())
            elif roll < 0.6:
                out.append(host())
            elif roll < 0.75 and depth < 2:
                out.append(while_loop(depth + 1))
            elif roll < 0.85 and depth < 2:
                inner = body(depth + 1, "for")
                out.append(f"for q{depth} = 1 to {r.randint(1, 3)} do " + "; ".join(inner)
                           + " done")
            elif loop is not None:
                x = r.choice("abc")
                word = r.choice(["break", "continue"])
                out.append(f"if {x}[{r.randint(0, 7)}] % {r.randint(2, 5)} == 0 then {word}")
        return out

    def while_loop(depth: int) -> str:
        k = f"k{next(counters)}"
        decls.append(f"  var {k} : i32;")
        x = r.choice("abc")
        cond = f"{k} < {r.randint(1, 6)}"
        if r.random() < 0.7:
            cond += f" && {x}[{r.randint(0, 7)}] < {r.randint(100, 900)}"
        inner = body(depth, "while")
        return f"({k} := 0; while {cond} do {k} := {k} + 1; " + "; ".join(inner) + " done)"

    decls = ["  var a : i32[0:8];", "  var b : i32[0:8];", "  var c : i32[0:8];",
             "  var s : i32;"]
    stmts = [par(), while_loop(0), host(), while_loop(0), par()]
    return "program g\n" + "\n".join(decls) + "\nbegin\n  " + ";\n  ".join(stmts) + "\nend\n"


@pytest.mark.parametrize("seed", range(40))
def test_hp41_generated_while_programs_offloaded_bitwise(seed: int) -> None:
    """HP-40, HP-41: generated programs with while loops (conditions reading what launches
    write, nested loops, break/continue) give the interpreter's bytes offloaded (the
    residency refuses any missing sync) and, for every fifth seed, on OpenCL; the printed
    program reads back to the same text."""
    text = _gen_program(seed)
    p = parse_program(text)
    assert print_program(parse_program(print_program(p))) == print_program(p)
    ref = run_program(p)
    off = offload(p)
    _same(ref.values, run_program(off).values)
    if seed % 5 == 0:
        _same(ref.values, run_program(off, device=_opencl()).values)
