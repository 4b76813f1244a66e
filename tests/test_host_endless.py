"""HP-56: a host ``while`` loop that provably never ends is a located error when its first
iteration ends, on every backend; every loop that may end runs as before.

Found trying to break INT-29 (session 26): examples/newton.sk with the condition
``it < 50`` and without ``it := it + 1`` hung ``sarek-py run`` (the host interpreter has no
loop budget).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sarek_py.host.check import check_program
from sarek_py.host.interp import HostError, run_program
from sarek_py.ir.host.text import parse_program

ROOT = Path(__file__).resolve().parent.parent


def _program(body: str, decls: str = "", procs: str = "") -> str:
    return (f"program p\n  var n : i32 = 4;\n  var it : i32 = 0;\n  var s : f64 = 0.0;\n"
            f"  var a : f64[0:3];\n{decls}{procs}begin\n{body}\nend\n")


def _run(text: str, inputs: tuple[object, ...] = ()) -> object:
    p = parse_program(text, "p.sk")
    check_program(p)
    return run_program(p, inputs=inputs)


ENDLESS = [
    # (body, what the message says of the condition, extra declarations, procedures)
    ("  while it < 50 do s := s + 1.0 done", "reads only it", "", ""),
    ("  while 1 > 0 do s := s + 1.0 done", "is a constant", "", ""),
    # a parallel loop writing arrays, a nested loop's break, a continue
    ("  while it < n do\n"
     "    parallel for (i = 0 to 2) do a[i] <- a[i] + 1.0 done;\n"
     "    for j = 0 to 3 do if j == 2 then break; s := s + 1.0 done;\n"
     "    if s > 3.0 then continue;\n"
     "    s := s + 2.0\n  done", "reads only it, n", "", ""),
    # a pure procedure given other variables; output of the loop's progress
    ("  while it < 50 do call bump(s); print s done", "reads only it", "",
     "  proc bump(v : f64 inout) pure =\n    v := v + 1.0\n  end\n"),
]


@pytest.mark.parametrize("body,says,decls,procs", ENDLESS)
def test_hp56_loops_that_cannot_end_are_errors(body: str, says: str, decls: str,
                                               procs: str) -> None:
    with pytest.raises(HostError, match="HP-56") as err:
        _run(_program(body, decls, procs))
    text = str(err.value)
    assert text.startswith("p.sk:"), text
    assert says in text and "this while loop never ends" in text


MAY_END = [
    # each of these ends: the loop must run as before
    ("  while it < 3 do it := it + 1 done;\n  print it", "3"),
    ("  while it < 50 do s := s + 1.0; break done;\n  print s", "1.0"),
    # a break not taken on the first iteration
    ("  while it < 50 do s := s + 1.0; if s > 2.0 then break done;\n  print s", "3.0"),
    ("  while it < 50 do s := s + 1.0; if s > 2.0 then stop 4 done", None),
    # the condition reads an array element a parallel loop changes
    ("  while a[0] < 3.0 do parallel for (i = 0 to 2) do a[i] <- a[i] + 1.0 done done;\n"
     "  print a[0]", "3.0"),
    # a read, and a call given the condition's variable
    ("  while it < 50 do read it done;\n  print it", "60"),
    ("  while it < 5 do call bump(it) done;\n  print it", "5"),
    # never entered
    ("  while n < 0 do s := 1.0 done;\n  print n", "4"),
]

PROCS = "  proc bump(v : i32 inout) pure =\n    v := v + 1\n  end\n"


@pytest.mark.parametrize("body,printed", MAY_END)
def test_hp56_loops_that_end_run_as_before(body: str, printed: str | None) -> None:
    r = _run(_program(body, procs=PROCS), inputs=(7, 60))
    out = "\n".join(str(x) for x in getattr(r, "output", []))
    if printed is not None:
        assert printed in out, out


NOT_JUDGED = [
    # a procedure that is not pure may assign anything: not judged, so not an error here
    # (the loop is left by the procedure's stop)
    ("  while it < 50 do call halt(s) done",
     "  proc halt(v : f64 inout) =\n    stop 3\n  end\n"),
]


@pytest.mark.parametrize("body,procs", NOT_JUDGED)
def test_hp56_calls_that_may_leave_are_not_judged(body: str, procs: str) -> None:
    r = _run(_program(body, procs=procs))
    assert getattr(r, "stop_code", 3) == 3


def test_hp56_cli_the_newton_example_without_its_counter(tmp_path: Path) -> None:
    """The finding: exit 1 at once, located, with a caret, no traceback."""
    text = (ROOT / "examples" / "newton.sk").read_text()
    assert "big > tol && it < 50" in text and "    it := it + 1\n" in text
    f = tmp_path / "newton.sk"
    f.write_text(text.replace("big > tol && it < 50", "it < 50")
                 .replace("    it := it + 1\n", "").replace("    big := 0.0;\n", ""))
    r = subprocess.run([sys.executable, "-m", "sarek_py.cli", "run", str(f), "--input",
                        str(ROOT / "examples" / "newton.in")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert f"{f}:27:3: error: this while loop never ends (HP-56): its condition 'it < 50' " \
           "reads only it, which its body never assigns" in r.stderr
    assert "\n  while it < 50 do\n  ^" in r.stderr
