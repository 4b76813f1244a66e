"""INT-29: a ``while`` loop that provably never ends is stopped after its first iteration,
in the user's names; everything else still runs (INT-22 bounds it). FE-101: such an
error in a ``.py`` kernel is shown with its line and caret.

Found by ``make fuzz`` (test_cli2_mutants_of_every_example_full): mutants of
examples/block_reduce.sk and examples/python/block_reduce.py without the line that halves
``stride`` ran past the fuzz's 60 s limit (INT-22's 2^20 steps at 60-150 us a step).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sarek_py.ir.diagnostics import InterpError
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module

ROOT = Path(__file__).resolve().parent.parent
#: INT-22's budget in these tests: an INT-29 error comes after one iteration, long before
#: (without INT-29 the tests fail on INT-22 in seconds instead of hanging)
HUGE = 20_000


def _kernel(text: str, name: str = "k"):  # type: ignore[no-untyped-def]
    m = parse_module(text, "t.sk")
    check_module(m)
    return m.kernel(name)


def _run(text: str, args: dict[str, object], threads: int = 1, block: int = 1,
         budget: int = HUGE) -> None:
    run_kernel(_kernel(text), args, threads, block, loop_budget=budget)


def _block_reduce_without_halving() -> str:
    text = (ROOT / "examples" / "block_reduce.sk").read_text()
    assert "    stride := stride / 2\n" in text
    return text.replace("    stride := stride / 2\n", "")


def test_int29_the_fuzz_finding_block_reduce_without_its_halving() -> None:
    """INT-29: the mutant of make fuzz ends at once, located at the loop, naming the
    condition and its variable (before INT-22's budget)."""
    m = parse_module(_block_reduce_without_halving(), "block_reduce.sk")
    check_module(m)
    x = np.ones(8, np.float32)
    out = np.zeros(2, np.float32)
    with pytest.raises(InterpError, match="INT-29") as err:
        run_kernel(m.kernel("block_sum"), {"x": x, "out": out, "n": 8}, 8, 4,
                   loop_budget=HUGE)
    text = str(err.value)
    assert text.startswith("block_reduce.sk:13:3: error: kernel block_sum: this while loop "
                           "never ends"), text
    assert "'stride > 0' reads only stride, which its body never assigns" in text


WHILE_ENDLESS = [
    # (kernel text, what the message says of the condition)
    ("kernel k(x : i32[]) =\n  let mut s = 1 in\n  let t = thread_idx_x in\n"
     "  while s > 0 do x[t] <- x[t] + 1 done\n",
     "reads only s"),
    # a constant condition
    ("kernel k(x : i32[]) =\n  while 1 > 0 do x[thread_idx_x] <- 1 done\n", "is a constant"),
    # divergent: lanes 0 and 1 never leave, the others never enter
    ("kernel k(x : i32[]) =\n  let t = thread_idx_x in\n"
     "  while t < 2 do x[t] <- x[t] + 1 done\n", "reads only t"),
    # a break of a nested loop does not leave this one; a continue goes back to the test
    ("kernel k(x : i32[]) =\n  let mut s = 1 in\n  while s > 0 do\n"
     "    for j = 0 to 3 do if j == 1 then break; x[thread_idx_x] <- j done;\n"
     "    if x[thread_idx_x] > 5 then continue;\n    x[thread_idx_x] <- 2\n  done\n",
     "reads only s"),
    # another variable assigned; an array's extent is not an element
    ("kernel k(x : i32[]) =\n  let mut s = 0 in\n  let mut u = 0 in\n"
     "  while s < length(x) do u := u + 1 done;\n  x[thread_idx_x] <- u\n", "reads only s, x"),
]


@pytest.mark.parametrize("text,says", WHILE_ENDLESS)
def test_int29_loops_that_cannot_end_are_stopped(text: str, says: str) -> None:
    with pytest.raises(InterpError, match="INT-29") as err:
        _run(text, {"x": np.zeros(4, np.int32)}, threads=4, block=4)
    assert says in str(err.value)
    assert str(err.value).startswith("t.sk:"), str(err.value)


WHILE_NOT_PROVABLY_ENDLESS = [
    # the condition reads memory (another lane, or the body, may change it)
    "kernel k(x : i32[]) =\n  while x[0] >= 0 do x[1] <- x[1] + 1 done\n",
    # the body assigns the condition's variable (without changing it: INT-22's job)
    "kernel k(x : i32[]) =\n  let mut s = 1 in\n  while s > 0 do s := s * 1 done;\n"
    "  x[0] <- s\n",
    # a break of this loop (never taken here), a return, a stop, a call
    "kernel k(x : i32[]) =\n  let mut s = 1 in\n"
    "  while s > 0 do if x[0] < 0 then break; x[1] <- 1 done\n",
    "kernel k(x : i32[]) =\n  let mut s = 1 in\n"
    "  while s > 0 do if x[0] < 0 then return; x[1] <- 1 done\n",
    "kernel k(x : i32[]) =\n  let mut s = 1 in\n"
    "  while s > 0 do if x[0] < 0 then stop 3; x[1] <- 1 done\n",
    "pure fun id(a : i32) : i32 = return a\n"
    "kernel k(x : i32[]) =\n  let mut s = 1 in\n"
    "  while s > 0 do x[1] <- id(1) done\n",
]


@pytest.mark.parametrize("text", WHILE_NOT_PROVABLY_ENDLESS)
def test_int29_int22_other_endless_loops_are_left_to_the_budget(text: str) -> None:
    """INT-29 claims nothing it cannot show: these never end either, but by INT-22."""
    with pytest.raises(InterpError, match="INT-22"):
        _run(text, {"x": np.zeros(4, np.int32)}, budget=500)


ENDING = [
    # never entered: the condition is false for every lane
    ("kernel k(x : i32[], n : i32) =\n  while n < 0 do x[0] <- 7 done;\n  x[1] <- 5\n",
     {"n": 3}, [0, 5, 0, 0]),
    # left by a break on the first iteration
    ("kernel k(x : i32[], n : i32) =\n  while n > 0 do x[0] <- 7; break done;\n  x[1] <- 5\n",
     {"n": 3}, [7, 5, 0, 0]),
    # left by a return: the lanes that come back are none
    ("kernel k(x : i32[], n : i32) =\n  while n > 0 do x[0] <- 7; return done\n",
     {"n": 3}, [7, 0, 0, 0]),
    # a counting loop
    ("kernel k(x : i32[], n : i32) =\n  let mut s = 0 in\n  while s < n do s := s + 1 done;\n"
     "  x[0] <- s\n", {"n": 3}, [3, 0, 0, 0]),
]


@pytest.mark.parametrize("text,scalars,want", ENDING)
def test_int29_loops_that_end_run_as_before(text: str, scalars: dict[str, int],
                                             want: list[int]) -> None:
    x = np.zeros(4, np.int32)
    _run(text, {"x": x, **scalars}, threads=1, block=1)
    assert x.tolist() == want


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sarek_py.cli", *argv], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_int29_cli2_run_answers_at_once_with_a_caret(tmp_path: Path) -> None:
    """The fuzz's command on the .sk mutant: exit 1, a located error with its caret."""
    f = tmp_path / "m_block_reduce.sk"
    f.write_text(_block_reduce_without_halving())
    r = _cli("run", str(f), "-k", "block_sum", "-n", "8", "-b", "4", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert f"{f}:13:3: error: kernel block_sum: this while loop never ends (INT-29)" in r.stderr
    assert "\n  while stride > 0 do\n  ^" in r.stderr, r.stderr


@pytest.mark.parametrize("relative", [True, False])
def test_fe101_int29_a_py_kernel_error_shows_its_line(tmp_path: Path, relative: bool) -> None:
    """FE-101: the .py mutant (examples/python/block_reduce.py without its halving) shows
    the Python line and a caret, named by a relative or an absolute path."""
    src = (ROOT / "examples" / "python" / "block_reduce.py").read_text()
    assert "        stride = stride // 2\n" in src
    f = tmp_path / "m_block_reduce.py"
    f.write_text(src.replace("        stride = stride // 2\n", ""))
    r = _cli("run", f.name if relative else str(f), "-k", "block_sum", "-n", "8", "-b", "4",
             cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "error: kernel block_sum: this while loop never ends (INT-29)" in r.stderr
    assert "\n    while stride > 0:\n    ^" in r.stderr, r.stderr


def test_fe101_a_py_out_of_bounds_shows_its_line(tmp_path: Path) -> None:
    """FE-101: any run-time error of a .py kernel, here an out-of-bounds read."""
    src = (ROOT / "examples" / "python" / "block_reduce.py").read_text()
    f = tmp_path / "oob.py"
    f.write_text(src.replace("tile[tid + stride]", "tile[tid + stride + 1000]"))
    r = _cli("run", f.name, "-k", "block_sum", "-n", "8", "-b", "4", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "out-of-bounds read of shared array 'tile'" in r.stderr
    assert "tile[tid + stride + 1000]\n" in r.stderr and r.stderr.rstrip().endswith("^")


def test_int29_device_backends_are_warned_of_each_loop() -> None:
    """INT-29: endless_loops names each such loop of a kernel and of its helpers, located,
    as a warning (a device cannot be stopped); loops that may end are not named."""
    from sarek_py.ir.interp_endless import endless_loops

    m = parse_module(
        "fun spin(a : i32) : i32 =\n"
        "  let mut r = a in\n"
        "  while a > 0 do r := r + 1 done;\n"
        "  return r\n"
        "kernel k(x : i32[], n : i32) =\n"
        "  let i = global_thread_id in\n"
        "  let mut s = 0 in\n"
        "  while s < n do s := s + 1 done;\n"
        "  while n < 0 do x[i] <- 7 done;\n"
        "  x[i] <- spin(s)\n", "t.sk")
    check_module(m)
    warnings = endless_loops(m.kernel("k"), "opencl")
    assert [(w.loc.line if w.loc else 0) for w in warnings] == [9, 3]
    text = [str(w) for w in warnings]
    assert text[0].startswith("t.sk:9:3: warning: kernel k: this while loop never ends once "
                              "a thread enters it (INT-29): its condition 'n < 0' reads only n")
    assert text[0].endswith("on opencl such a launch cannot be stopped from the host "
                            "(--backend interp stops it)")
    assert text[1].startswith("t.sk:3:3: warning: helper spin: this while loop never ends")


def test_int29_cli_run_on_a_device_warns_then_runs(tmp_path: Path) -> None:
    """INT-29: `run --backend opencl` warns with a caret and still runs a kernel whose
    endless loop is never entered; the interpreter runs it without a warning."""
    from adversarial_harness import opencl_available

    f = tmp_path / "never.sk"
    f.write_text("kernel k(x : i32[], n : i32) =\n  let i = global_thread_id in\n"
                 "  while n < 0 do x[i] <- 7 done;\n  x[i] <- x[i] + 1\n")
    argv = ("run", str(f), "-k", "k", "-n", "8", "-b", "4", "--size", "n=3", "--size", "x=8")
    r = _cli(*argv, cwd=tmp_path)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    if not opencl_available():
        pytest.skip("no OpenCL platform (pocl-opencl-icd) here")
    d = _cli(*argv, "--backend", "opencl", cwd=tmp_path)
    assert d.returncode == 0, d.stderr
    assert d.stdout == r.stdout  # the same bytes: the loop is never entered
    assert d.stderr.startswith(f"{f}:3:3: warning: kernel k: this while loop never ends once "
                               "a thread enters it (INT-29)"), d.stderr
    assert "\n  while n < 0 do x[i] <- 7 done;\n  ^" in d.stderr


def test_int29_cli_compare_warns_before_the_device_runs(tmp_path: Path) -> None:
    """INT-29: `run --backend opencl --compare interp` warns once, naming opencl."""
    from adversarial_harness import opencl_available

    if not opencl_available():
        pytest.skip("no OpenCL platform (pocl-opencl-icd) here")
    f = tmp_path / "never.sk"
    f.write_text("kernel k(x : i32[], n : i32) =\n  let i = global_thread_id in\n"
                 "  while n < 0 do x[i] <- 7 done;\n  x[i] <- x[i] + 1\n")
    d = _cli("run", str(f), "-k", "k", "-n", "8", "-b", "4", "--size", "n=3", "--size", "x=8",
             "--backend", "opencl", "--compare", "interp", cwd=tmp_path)
    assert d.returncode == 0, d.stderr
    assert "x: identical" in d.stdout
    assert d.stderr.count("warning:") == 1 and "on opencl such a launch" in d.stderr
