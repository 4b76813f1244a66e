"""Calls of procedures in parallel loops (specs/host-program.md, HP-42, HP-43).

Each program runs on the host interpreter and offloaded on OpenCL (PoCL), compared
bitwise with the same computation written in numpy (a host ``call`` cannot pass an array
element for an ``out`` dummy, HP-6)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import ParseError
from sarek_py.ir.host.sexp import program_from_sexp, program_to_sexp
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.runtime import get_backend
from sarek_py.runtime.base import Backend

HEAD = """
program p
  var n : i32 = 23;
  var a : f64[0:23];
  var b : f64[0:23];
  var c : f64[0:23];
  var m : i32[0:23];
  proc poly(x : f64 in, y : f64 out) pure
    var acc : f64 = 1.0;
  =
    acc := acc * x + 3.0;
    acc := acc * x - 0.5;
    y := acc
  end
  proc bump(v : f64 inout, k : i32 value) =
    for j = 1 to k do v := v * 1.5 + f64(j) done
  end
  proc clampit(q : f64[0:23] inout, i : i32 in, lim : f64 in) =
    if q[i] > lim then (q[i] <- lim; return);
    q[i] <- q[i] * 2.0
  end
  proc both(x : f64 in, y : f64 out, z : f64 inout) pure =
    call poly(x, y);
    z := z + y;
    call bump(z, 2)
  end
  proc count(x : f64 in, r : i32 out)
    var t : f64;
  =
    t := x;
    r := 0;
    while t > 1.0 do
      t := t / 2.0;
      r := r + 1;
      if r > 40 then break
    done
  end
begin
  for i = 0 to n - 1 do a[i] <- f64(i) * 0.37 - 2.0; c[i] <- f64(i) done;
"""

PAR = HEAD + """
  parallel for (i = 0 to n - 1) do call poly(a[i], b[i]) done;
  parallel for (i = 0 to n - 1) do call bump(c[i], i % 4) done;
  parallel for (i = 0 to n - 1) do call clampit(c, i, 20.0) done;
  parallel for (i = 0 to n - 1) var w : f64 do
    w := c[i];
    call both(a[i], b[i], w);
    c[i] <- w
  done;
  parallel for (i = 0 to n - 1) do call count(c[i] * 100.0, m[i]) done
end
"""

def _opencl() -> Backend:
    try:
        return get_backend("opencl")
    except Exception as exc:  # pragma: no cover - no OpenCL here
        pytest.skip(f"no OpenCL: {exc}")


def _bytes(values: dict[str, Any]) -> dict[str, bytes]:
    return {k: np.asarray(v).tobytes() for k, v in values.items() if k in "abcm"}


def test_hp42_call_in_parallel_loop_parses_prints_and_round_trips() -> None:
    """HP-42, HP-11: the call reads as the procedure's body inlined in the loop; the
    printed program reads back to the same text and dumps losslessly."""
    p = parse_program(PAR)
    text = print_program(p)
    assert "let mut y = 0.0 in" in text and "call poly" not in text.split("begin")[1]
    assert print_program(parse_program(text)) == text
    assert program_to_sexp(program_from_sexp(program_to_sexp(p))) == program_to_sexp(p)


def test_hp42_interp_matches_host_calls_and_opencl_bitwise() -> None:
    """HP-42: in a parallel loop, a call gives the bytes of the same call on the host
    (copy-in/copy-out of scalar dummies, array dummies by reference, ``return``, nested
    calls, a while with break), on the interpreter and offloaded on OpenCL."""
    n = 23
    a = np.array([i * 0.37 - 2.0 for i in range(n)])
    c = np.arange(n, dtype=np.float64)
    b = (1.0 * a + 3.0) * a - 0.5
    for i in range(n):
        for j in range(1, i % 4 + 1):
            c[i] = c[i] * 1.5 + j
    c = np.where(c > 20.0, 20.0, c * 2.0)
    b = (1.0 * a + 3.0) * a - 0.5
    c = c + b
    for j in (1, 2):
        c = c * 1.5 + j
    m = np.zeros(n, np.int32)
    for i in range(n):
        t, r = c[i] * 100.0, 0
        while t > 1.0:
            t, r = t / 2.0, r + 1
            if r > 40:
                break
        m[i] = r
    ref = {"a": a.tobytes(), "b": b.tobytes(), "c": c.tobytes(), "m": m.tobytes()}
    p = parse_program(PAR)
    assert _bytes(run_program(p).values) == ref
    assert _bytes(run_program(offload(p), device=_opencl()).values) == ref


@pytest.mark.parametrize("proc, call, why", [
    ("proc pr(x : f64 in) = print x end", "call pr(a[i])",
     "procedure 'pr' does output (line 5), which an iteration of a parallel loop cannot do"),
    ("proc rd(x : f64 out) = read x end", "call rd(a[i])", "does input ('read')"),
    ("proc g(x : f64 out) = x := a[0] end", "call g(b[i])",
     "procedure 'g' names program variable 'a' (line 5): a procedure called in a parallel "
     "loop may name only its dummies and locals"),
    ("proc g(x : f64 out) = (k := 1; x := 1.0) end", "call g(b[i])",
     "names program variable 'k'"),
    ("proc s(x : f64 out) = stop 2 end", "call s(b[i])", "does a 'stop'"),
    ("proc al(x : f64 out) var t : f64[0:] allocatable; = x := 1.0 end", "call al(b[i])",
     "declares array 't'"),
    ("proc st(x : f64 out) = for j = 0 to 4 step 2 do x := 1.0 done end", "call st(b[i])",
     "has a 'for' with a step"),
    ("proc rt(x : f64 out) = for j = 0 to 4 do (x := 1.0; return) done end",
     "call rt(b[i])", "returns from inside a loop"),
    ("proc o(x : f64 out) = x := 1.0 end", "call o(a[i] + 1.0)",
     "the argument for out dummy 'x' of 'o' must be a mutable variable or an array element"),
    ("proc ar(q : f64[0:8] in) = q[0] <- 1.0 end", "call ar(a)",
     "the argument for array dummy 'q' of 'ar' must be an array of type f64[8]"),
    ("proc o(x : f64 out) = x := 1.0 end", "call o(b[i], b[i])", "'o' takes 1 arguments"),
    ("proc o(x : f64 out) = x := 1.0 end", "call nope(b[i])", "unknown procedure 'nope'"),
])
def test_hp43_refused_calls_are_located_and_say_why(proc: str, call: str, why: str) -> None:
    """HP-43: a procedure that cannot run in one iteration (host I/O, a program variable,
    a stop, an array local, a stepped for, a return in a loop) or a bad actual is refused
    with a located ParseError at the call naming why."""
    text = ("program p\n  var a : f64[0:4];\n  var b : f64[0:4];\n  var k : i32;\n"
            f"  {proc}\nbegin\n  parallel for (i = 0 to 3) do {call} done\nend\n")
    with pytest.raises(ParseError) as info:
        parse_program(text)
    msg = str(info.value)
    assert why in msg
    assert msg.startswith("<string>:7:")


def test_hp43_cli_run_refusal_is_one_located_line(tmp_path: Any, capsys: Any) -> None:
    """HP-43 through the CLI: exit 1, one located error, no traceback."""
    f = tmp_path / "bad.sk"
    f.write_text("program p\n  var a : f64[0:4];\n  proc pr(x : f64 in) = print x end\n"
                 "begin\n  parallel for (i = 0 to 3) do call pr(a[i]) done\nend\n")
    assert main(["run", str(f)]) == 1
    err = capsys.readouterr().err
    assert "bad.sk:5:32: error: cannot call 'pr' in a parallel loop" in err
    assert "Traceback" not in err


def test_hp42_a_variable_named_call_is_still_an_assignment() -> None:
    """HP-10: ``call`` is an ordinary name elsewhere; in a loop body ``call := …`` assigns."""
    p = parse_program("program p\n  var a : i32[0:4];\nbegin\n  parallel for (i = 0 to 3) "
                      "var call : i32 do call := i; a[i] <- call done\nend\n")
    assert run_program(p).array("a").tolist() == [0, 1, 2, 3]


def test_hp42_out_actual_subscripts_are_evaluated_before_the_call() -> None:
    """HP-42: an ``out`` actual ``b[w]`` names the element ``w`` designates when the call
    starts, even when the call changes ``w`` through an ``inout`` dummy."""
    p = parse_program("""program p
  var b : f64[0:8];
  var c : i32[0:8];
  proc bump(x : i32 inout, y : f64 out) pure = (x := x + 1; y := 5.0) end
begin
  parallel for (i = 0 to 3) var w : i32 do
    w := 2 * i;
    call bump(w, b[w]);
    c[i] <- w
  done
end
""")
    r = run_program(p)
    assert r.array("b").tolist() == [5.0, 0.0, 5.0, 0.0, 5.0, 0.0, 5.0, 0.0]
    assert r.array("c").tolist()[:4] == [1, 3, 5, 7]
    got = run_program(offload(p), device=_opencl())
    assert got.array("b").tobytes() == r.array("b").tobytes()
    assert got.array("c").tobytes() == r.array("c").tobytes()
