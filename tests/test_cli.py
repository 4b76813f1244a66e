"""The ``sarek-py`` command (docs/cli.md, CLI-1..CLI-13), run in-process with ``main``
and once as the installed console script."""

from __future__ import annotations

import argparse
import hashlib
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sarek_py.cli import compare, loading
from sarek_py.cli.inputs import make_inputs
from sarek_py.cli.main import build_parser, main
from sarek_py.cli.registry import COMMANDS, UsageError, command
from sarek_py.ir.nodes import Module
from sarek_py.ir.types import ArrayType

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.sk"))

SAXPY = """\
// y <- a*x + y
kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then
    y[i] <- a * x[i] + y[i]
"""

HELPER = """\
pure fun sq(v : f64) : f64 = return v * v

kernel norms(m : f64[,], out : f64[], rows : i32, cols : i32)
  var acc : f64
=
  let r = global_thread_id in
  if r < rows then (
    for c = 0 to cols - 1 do
      acc := acc + sq(m[r, c])
    done;
    out[r] <- sqrt(acc)
  )
"""

STOPS = """\
kernel stops(flags : i32[]) =
  let i = global_thread_id in
  if i % 3 == 0 then stop 7 else flags[i] <- i
"""

OUT_OF_BOUNDS = """\
kernel oob(x : f32[]) =
  let i = global_thread_id in
  x[i + 1] <- 0.0f
"""

ILL_TYPED = """\
kernel k(x : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    x[i] <- x[i] + n
"""

LINE = re.compile(r"^(\w+): sha256=([0-9a-f]{64}) \[(.*)\]$")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in [("saxpy", SAXPY), ("helper", HELPER), ("stops", STOPS),
                       ("oob", OUT_OF_BOUNDS), ("bad", ILL_TYPED)]:
        p = tmp_path / f"{name}.sk"
        p.write_text(text)
        out[name] = p
    return out


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    got = capsys.readouterr()
    return code, got.out, got.err


def assert_no_traceback(err: str) -> None:
    assert "Traceback" not in err and "File \"" not in err, err


# ------------------------------------------------------------------------------ CLI-1..3


def test_cli3_help_on_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "print" in out and "check" in out and "run" in out
    for name in ("print", "check", "run"):
        code, out, _ = run_cli(capsys, name, "--help")
        assert code == 0, name
        assert out.startswith(f"usage: sarek-py {name}"), out


@pytest.mark.parametrize("argv", [
    [],
    ["frobnicate"],
    ["print"],
    ["run", "{saxpy}", "--threads", "4"],
    ["run", "{saxpy}", "--kernel", "saxpy"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "0"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "many"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--block", "-1"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--size", "n"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--size", "n=x"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--size", "n=-3"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--size", "=3"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--seed", "1.5"],
    ["run", "{saxpy}", "--kernel", "saxpy", "--threads", "4", "--seed", "-1"],
    ["check", "{saxpy}", "--bogus"],
])
def test_cli1_usage_errors_exit_2(argv: list[str], files: dict[str, Path],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *(a.format(**files) for a in argv))
    assert code == 2
    assert "usage: sarek-py" in err and "error:" in err
    assert_no_traceback(err)


@pytest.mark.parametrize("size, message", [
    (["q=3"], "kernel 'saxpy' has no parameter 'q'"),
    (["n=3", "n=4"], "--size n=… given twice"),
    (["a=3"], "'a' is a f32 scalar"),
    (["x=3x4"], "'x' has 1 dimension(s), got 2 extent(s)"),
    (["n=3x4"], "'n' is a i32 scalar"),
    (["n=2147483648"], "2147483648 does not fit in i32"),
])
def test_cli1_size_that_does_not_fit_is_a_usage_error(
        size: list[str], message: str, files: dict[str, Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    argv: list[str | Path] = ["run", files["saxpy"], "--kernel", "saxpy", "--threads", "8"]
    for s in size:
        argv += ["--size", s]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    last = err.splitlines()[-1]
    assert last.startswith("sarek-py run: error: --size ") and message in last, err


def test_cli1_multidimensional_array_needs_a_size(files: dict[str, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run", files["helper"], "--kernel", "norms", "--threads", "4")
    assert code == 2 and "give its extents with --size m=NxN" in err


def test_cli1_cli2_unreadable_input_exits_1(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    cases = {
        "missing": (tmp_path / "nope.sk", f"error: cannot read '{tmp_path / 'nope.sk'}': "
                                          "no such file"),
        "directory": (tmp_path, f"error: cannot read '{tmp_path}': it is a directory"),
    }
    for what, (path, message) in cases.items():
        for sub in ("print", "check"):
            code, out, err = run_cli(capsys, sub, path)
            assert (code, out) == (1, ""), what
            assert err.strip() == message
    bad = tmp_path / "latin1.sk"
    bad.write_bytes(b"kernel k(x : f32[]) =\n  x[0] <- 1.0f // caf\xe9\n")
    code, _, err = run_cli(capsys, "check", bad)
    assert code == 1
    assert err.startswith(f"{bad}:2:22: error: invalid UTF-8 byte 0xe9"), err
    assert_no_traceback(err)


@pytest.mark.parametrize("text, where, message", [
    ("kernel k(x : f32[]) =\n  x[0] <- ", "2:", "error:"),  # truncated
    ("kernel k(x : f32[]) =\n  y[0] <- 1.0f\n", "2:3", "error:"),  # unknown name
    ("kernel k(x : f32[]) =\n  let t = 1 in t := 2\n", "2:", "immutable variable 't'"),
    ("kernel k(x : f32[], n : i32) =\n  x[n] <- n\n", "2:", "store of a i32 value"),
    ("pure fun f(a : f32[]) : f32 = (a[0] <- 1.0f; return 0.0f)\n", "1:",
     "pure helper 'f' stores into array 'a'"),
])
def test_cli2_bad_files_give_a_located_error(text: str, where: str, message: str,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "in.sk"
    p.write_text(text)
    code, out, err = run_cli(capsys, "check", p)
    assert (code, out) == (1, "")
    first = err.splitlines()[0]
    assert re.match(rf"^{re.escape(str(p))}:\d+:\d+: error: ", first), err
    assert first.startswith(f"{p}:{where}"), err
    assert message in err
    assert err.rstrip().splitlines()[-1].strip() == "^"
    assert_no_traceback(err)


def test_cli2_check_error_shows_source_line_and_caret(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "check", files["bad"])
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{files['bad']}:4:18: error: operator '+' on different types f32 and i32 "
        "(no implicit conversion: write f32(n) as C would convert it)",
        "    x[i] <- x[i] + n",
        "                 ^",
    ]


# ------------------------------------------------------------------------------ CLI-4, 5


def _print_twice(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, first, err = run_cli(capsys, "print", path)
    assert code == 0, err
    again = tmp_path / ("again_" + path.name)
    again.write_text(first)
    code, second, err = run_cli(capsys, "print", again)
    assert code == 0, err
    assert second == first
    return first


def test_cli4_print_is_canonical_and_stable(files: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    text = _print_twice(files["saxpy"], tmp_path, capsys)
    assert "// y <- a*x + y" not in text  # comments are not kept
    assert "kernel saxpy(x : f32[], y : f32[], a : f32, n : i32) =" in text
    helper = _print_twice(files["helper"], tmp_path, capsys)
    assert "pure fun sq(v : f64) : f64 =" in helper and "var acc : f64" in helper


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_cli4_cli5_examples_print_twice_equal_and_check(
        example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _print_twice(example, tmp_path, capsys)
    code, out, err = run_cli(capsys, "check", example)
    assert code == 0, err
    assert out.startswith(f"{example}: ok")


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_cli6_cli7_examples_run_deterministically(
        example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every kernel of every example runs (integer scalars 16, multi-dimensional arrays
    16 x … x 16) and prints the same report twice; an example holding a host program runs
    as a program (CLI-11): one line per declared variable, the same twice."""
    loaded = loading.load_any(str(example))
    if not isinstance(loaded, Module):
        # a program that reads has its input beside it (examples/newton.in, CLI-30)
        given = example.with_suffix(".in")
        extra = ["--input", str(given)] if given.exists() else []
        first = run_cli(capsys, "run", example, *extra)
        assert first[0] == 0 and first[2] == "", first
        # an array line, or "NAME: not allocated" for one the program deallocated
        names = [m.group(1) for x in first[1].splitlines()
                 if (m := LINE.match(x) or re.match(r"^(\w+): not allocated$", x))]
        assert names == [d.var.name for d in loaded.decls if d.var.is_array]
        assert run_cli(capsys, "run", example, *extra) == first
        return
    for k in loaded.kernels:
        argv: list[str | Path] = ["run", example, "--kernel", k.name, "--threads", "256",
                                  "--block", "64", "--seed", "4"]
        for p in k.params:
            if isinstance(p.type, ArrayType) and p.type.rank > 1:
                argv += ["--size", f"{p.name}={'x'.join(['16'] * p.type.rank)}"]
            elif not isinstance(p.type, ArrayType) and p.type.is_int:
                argv += ["--size", f"{p.name}=16"]  # sizes (n, h, w) agree with the arrays
        first = run_cli(capsys, *argv)
        assert first[0] == 0 and first[2] == "", first
        arrays = [p.name for p in k.params if p.is_array]
        assert [LINE.match(x).group(1) for x in first[1].splitlines()  # type: ignore[union-attr]
                if LINE.match(x)] == arrays
        assert run_cli(capsys, *argv) == first


def test_cli4_print_sexp(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "print", files["saxpy"], "--sexp")
    assert code == 0
    assert out.startswith("(Module") and '"saxpy"' in out and "global_thread_id" in out
    assert out.count("(") == out.count(")")


def test_cli4_print_does_not_check(files: dict[str, Path],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "print", files["bad"])
    assert code == 0 and "x[i] + n" in out


def test_cli5_check_ok(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "check", files["helper"])
    assert (code, err) == (0, "")
    assert out == f"{files['helper']}: ok (1 kernel(s): norms; 1 helper(s))\n"


def test_cli5_check_reads_stdin(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(ILL_TYPED.encode())))
    code, _, err = run_cli(capsys, "check", "-")
    assert code == 1 and err.startswith("<stdin>:4:18: error:")
    assert "    x[i] <- x[i] + n" in err


# ------------------------------------------------------------------------------ CLI-6, 7


def _run(files: dict[str, Path], capsys: pytest.CaptureFixture[str], *extra: str,
         name: str = "saxpy", kernel: str = "saxpy", threads: int = 64) -> list[str]:
    code, out, err = run_cli(capsys, "run", files[name], "--kernel", kernel, "--threads",
                             str(threads), *extra)
    assert (code, err) == (0, ""), err
    return out.splitlines()


def test_cli7_run_output_format(files: dict[str, Path],
                                capsys: pytest.CaptureFixture[str]) -> None:
    lines = _run(files, capsys, "--size", "n=50", "--seed", "3")
    assert len(lines) == 4
    assert re.match(r"^a = -?\d\.\d+(e-\d+)?$", lines[0]), lines[0]
    assert lines[1] == "n = 50"
    for line, name in zip(lines[2:], ("x", "y"), strict=True):
        m = LINE.match(line)
        assert m is not None and m.group(1) == name, line
        values = m.group(3).split(", ")
        assert len(values) == 5 and values[-1] == "..."
        bound = 1.0 if name == "x" else 2.0  # y was updated: a*x + y
        assert all(-bound <= float(v) <= bound for v in values[:4])


def test_cli6_cli7_run_matches_numpy(files: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The digest is that of y = a*x + y computed by numpy in f32 on the same inputs."""
    from sarek_py.ir.parser import parse_module

    k = parse_module(SAXPY).kernel("saxpy")
    inputs = make_inputs(k, {"n": (40,)}, 64, 11)
    x, y, a = inputs["x"], inputs["y"].copy(), inputs["a"]
    assert x.dtype == np.float32 and x.shape == (64,) and inputs["n"] == 40
    y[:40] = a * x[:40] + y[:40]
    lines = _run(files, capsys, "--size", "n=40", "--seed", "11")
    assert lines[-1].startswith(f"y: sha256={hashlib.sha256(y.tobytes()).hexdigest()} ")
    assert lines[-2].startswith(f"x: sha256={hashlib.sha256(x.tobytes()).hexdigest()} ")
    assert lines[-1].endswith(f"[{', '.join(str(v) for v in y[:4])}, ...]")


def test_cli6_run_is_deterministic_under_a_seed(files: dict[str, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    first = _run(files, capsys, "--seed", "5")
    assert _run(files, capsys, "--seed", "5") == first
    other = _run(files, capsys, "--seed", "6")
    assert other != first
    assert _run(files, capsys) == _run(files, capsys, "--seed", "0")


def test_cli6_sizes_and_defaults(files: dict[str, Path]) -> None:
    from sarek_py.ir.parser import parse_module

    k = parse_module(HELPER).kernel("norms")
    args = make_inputs(k, {"m": (3, 4), "rows": (3,)}, 10, 0)
    assert args["m"].shape == (3, 4) and args["m"].dtype == np.float64
    assert args["out"].shape == (10,)
    assert args["rows"] == 3 and 1 <= args["cols"] <= 100
    assert isinstance(args["cols"], np.int32)
    ints = make_inputs(parse_module(STOPS).kernel("stops"), {"flags": (1000,)}, 4, 2)
    assert ints["flags"].dtype == np.int32 and ints["flags"].shape == (1000,)
    assert ints["flags"].min() >= 0 and ints["flags"].max() <= 99


def test_cli6_cli7_two_dimensional_run(files: dict[str, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from sarek_py.ir.parser import parse_module

    lines = _run(files, capsys, "--size", "m=3x4", "--size", "rows=3", "--size", "cols=4",
                 "--size", "out=5", name="helper", kernel="norms", threads=8)
    assert lines[:2] == ["rows = 3", "cols = 4"]
    k = parse_module(HELPER).kernel("norms")
    args = make_inputs(k, {"m": (3, 4), "rows": (3,), "cols": (4,), "out": (5,)}, 8, 0)
    out = args["out"].copy()
    for r in range(3):
        acc = 0.0
        for c in range(4):
            acc = acc + args["m"][r, c] * args["m"][r, c]
        out[r] = np.sqrt(acc)
    assert lines[-1].startswith(f"out: sha256={hashlib.sha256(out.tobytes()).hexdigest()}")


def test_cli7_stop_codes_are_reported(files: dict[str, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    lines = _run(files, capsys, name="stops", kernel="stops", threads=10)
    assert lines[-1] == "stop: 4 of 10 threads stopped (codes 7)"
    m = LINE.match(lines[0])
    assert m is not None and m.group(1) == "flags"
    assert m.group(3).split(", ")[1:3] == ["1", "2"]


# ------------------------------------------------------------------------------ CLI-1, 8


def test_cli1_run_time_error_exits_1(files: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", files["oob"], "--kernel", "oob", "--threads", "8")
    assert code == 1 and out == ""
    assert err.startswith("error:") or re.match(r"^\S+:\d+:\d+: error:", err), err
    assert "oob" in err and "'x'" in err and "thread 7" in err  # kernel, array, thread
    assert_no_traceback(err)


def test_cli1_unknown_kernel_exits_1(files: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run", files["saxpy"], "--kernel", "nope", "--threads", "4")
    assert code == 1
    assert err.strip() == f"error: no kernel 'nope' in {files['saxpy']} (kernels: saxpy)"


def test_cli1_run_refuses_an_ill_typed_file(files: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", files["bad"], "--kernel", "k", "--threads", "4")
    assert (code, out) == (1, "")
    assert err.startswith(f"{files['bad']}:4:18: error:")


def test_cli8_unknown_backend_exits_1(files: dict[str, Path],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", files["saxpy"], "--kernel", "saxpy", "--threads",
                             "4", "--backend", "no-such-backend")
    assert (code, out) == (1, "")
    assert err.startswith("error:") and "no-such-backend" in err
    assert_no_traceback(err)


# -------------------------------------------------------------------------------- CLI-9


@pytest.fixture
def extra_command() -> Iterator[None]:
    def configure(p: argparse.ArgumentParser) -> None:
        p.add_argument("file")
        p.add_argument("--fail", choices=["usage", "input"])

    @command("kernels", "list the kernels of a file", configure)
    def _kernels(args: argparse.Namespace) -> int:
        if args.fail == "usage":
            raise UsageError("no can do")
        m = loading.load_module(args.file)
        if args.fail == "input":
            loading.find_kernel(m, "absent", args.file)
        for k in m.kernels:
            print(k.name)
        return 0

    try:
        yield
    finally:
        del COMMANDS["kernels"]


@pytest.mark.usefixtures("extra_command")
def test_cli9_a_module_can_add_a_subcommand(files: dict[str, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "kernels", files["helper"]) == (0, "norms\n", "")
    code, _, err = run_cli(capsys, "kernels", files["helper"], "--fail", "usage")
    assert code == 2 and err.splitlines()[-1] == "sarek-py kernels: error: no can do"
    code, _, err = run_cli(capsys, "kernels", files["helper"], "--fail", "input")
    assert code == 1 and "no kernel 'absent'" in err
    code, out, _ = run_cli(capsys, "kernels", "--help")
    assert code == 0 and "usage: sarek-py kernels" in out


# ------------------------------------------------------------------------- console script


def test_cli1_console_script(files: dict[str, Path]) -> None:
    script = Path(sys.executable).parent / "sarek-py"
    base = [str(script)] if script.exists() else [sys.executable, "-m", "sarek_py.cli"]
    ok = subprocess.run([*base, "check", str(files["saxpy"])], capture_output=True, text=True,
                        timeout=60)
    assert ok.returncode == 0 and ok.stdout.startswith(f"{files['saxpy']}: ok")
    bad = subprocess.run([*base, "check", str(files["bad"])], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 1 and bad.stderr.startswith(f"{files['bad']}:4:18: error:")
    assert_no_traceback(bad.stderr)
    usage = subprocess.run([*base, "run"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "usage:" in usage.stderr


# ----------------------------------------------------------------------- CLI-10, 11, 12

PROGRAM = """\
// a program with a kernel, a parallel loop, a launch, output and a stop
kernel twice(a : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then a[i] <- 2.0f * a[i]

program demo
  var n : i32 = 6;
  var s : f64 = 0.5;
  var a : f32[] allocatable;
  var b : f32[] allocatable;
begin
  allocate a[n];
  parallel for (i = 0 to n - 1) do a[i] <- f32(i) done;
  launch twice(a, n) threads n block 4;
  sync;
  print a[1], s;
  stop 3
end
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "demo.sk"
    path.write_text(PROGRAM)
    return path


def test_cli10_load_any_dispatches_on_content(program: Path, files: dict[str, Path]) -> None:
    from sarek_py.ir.host.program import Program

    loaded = loading.load_any(str(program))
    assert isinstance(loaded, Program) and loaded.name == "demo"
    assert isinstance(loading.load_any(str(files["saxpy"])), Module)
    assert isinstance(loading.load_any(str(ROOT / "examples" / "python" / "saxpy.py")), Module)
    # the kernel commands see the program's kernels
    assert [k.name for k in loading.load_checked(str(program)).kernels] == ["twice"]
    assert not loading.is_program_text("kernel k(x : f32[]) =\n  // program p\n  x[0] <- 1.0f\n")


def test_cli10_print_and_check_a_program(program: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    text = _print_twice(program, tmp_path, capsys)
    assert "program demo" in text and "kernel twice(a : f32[], n : i32) =" in text
    assert "// a program" not in text
    code, out, err = run_cli(capsys, "check", program)
    assert (code, err) == (0, "")
    assert out == (f"{program}: ok (program demo: 1 kernel(s): twice; 0 helper(s); "
                   "0 procedure(s); 1 parallel loop(s))\n")
    code, out, err = run_cli(capsys, "print", program, "--sexp")
    assert (code, err) == (0, "") and out.startswith('(Program\n  :name "demo"')
    from sarek_py.ir.host.sexp import program_from_sexp
    from sarek_py.ir.host.text import parse_program, print_program

    assert print_program(program_from_sexp(out)) == print_program(
        parse_program(Path(program).read_text(), str(program)))


def test_cli10_check_finds_errors_in_a_program(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.sk"
    bad.write_text(PROGRAM.replace("allocate a[n];", "allocate a[n];\n  n := s;"))
    code, out, err = run_cli(capsys, "check", bad)
    assert (code, out) == (1, "")
    assert err.startswith(f"{bad}:13:3: error: "), err
    assert_no_traceback(err)
    helper = tmp_path / "helper.sk"  # the program's helpers are checked too (purity)
    helper.write_text("pure fun f(a : f32[]) : f32 = (a[0] <- 1.0f; return 0.0f)\n"
                      + PROGRAM)
    code, _, err = run_cli(capsys, "check", helper)
    assert code == 1 and "pure helper 'f' stores into array 'a'" in err


def test_cli11_run_a_program(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", program)
    assert (code, err) == (0, "")
    a = np.array([0, 2, 4, 6, 8, 10], dtype=np.float32)
    assert out.splitlines() == [
        "2.0 0.5",  # the program's own output
        "n = 6",
        "s = 0.5",
        f"a: sha256={hashlib.sha256(a.tobytes()).hexdigest()} [0.0, 2.0, 4.0, 6.0, ...]",
        "b: not allocated",
        "stop: program stopped with code 3",
    ]
    code, out, _ = run_cli(capsys, "run", program, "--size", "n=3")
    assert code == 0 and "n = 3" in out
    assert f"a: sha256={hashlib.sha256(a[:3].tobytes()).hexdigest()} [0.0, 2.0, 4.0]" in out


def test_cli11_compare_a_program(program: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", program, "--compare", "interp")
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == ["compare interp with interp:", "  a: identical (24 bytes)"]


def test_cli11_run_a_kernel_of_a_program_file(program: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", program, "--kernel", "twice", "--threads", "4",
                             "--size", "n=4", "--seed", "2")
    assert (code, err) == (0, "")
    from sarek_py.ir.parser import parse_module

    k = parse_module(PROGRAM[:PROGRAM.index("program demo")]).kernel("twice")
    a = make_inputs(k, {"n": (4,)}, 4, 2)["a"] * np.float32(2)
    assert out.splitlines() == ["n = 4",
                                f"a: sha256={hashlib.sha256(a.tobytes()).hexdigest()} "
                                f"[{', '.join(str(v) for v in a)}]"]


@pytest.mark.parametrize("extra, message", [
    (["--threads", "4"], "--threads: "),
    (["--block", "4", "--seed", "1"], "--block, --seed: "),
    (["--size", "q=1"], "--size q: program 'demo' declares no variable 'q'"),
    (["--size", "s=1"], "--size s: 's' is a f64 variable"),
    (["--size", "a=4"], "--size a: 'a' is a f32[] variable"),
    (["--size", "n=2x2"], "--size n: 'n' is a i32 variable"),
    (["--size", "n=2147483648"], "--size n: 2147483648 does not fit in i32"),
    (["--size", "n=1", "--size", "n=2"], "--size n=… given twice"),
])
def test_cli11_program_usage_errors(extra: list[str], message: str, program: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", program, *extra)
    assert (code, out) == (2, "")
    last = err.splitlines()[-1]
    assert last.startswith("sarek-py run: error: ") and message in last, err


def test_cli11_kernel_module_needs_kernel_and_threads(files: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run", files["saxpy"], "--threads", "4")
    assert code == 2 and "required: --kernel K" in err.splitlines()[-1]
    code, _, err = run_cli(capsys, "run", files["saxpy"], "--kernel", "saxpy")
    assert code == 2 and err.splitlines()[-1].endswith("--threads N")


def test_cli11_compare_a_program_reports_differences(program: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-1, CLI-11: a program whose runs differ on the two backends exits 1 and says
    where (the second backend is made to flip one element)."""
    real = compare.run_program_args

    def skewed(p: object, args: argparse.Namespace, backend: str) -> object:
        result = real(p, args, "interp")  # type: ignore[arg-type]
        if backend == "other":
            result.values["a"][2] += 1
        return result

    monkeypatch.setattr(compare, "run_program_args", skewed)
    code, out, _ = run_cli(capsys, "run", program, "--backend", "interp", "--compare", "other")
    assert code == 1
    assert out.splitlines()[-1] == ("  a: DIFFERENT: 1 of 6 elements differ (first at flat "
                                    "index 2: np.float32(4.0) vs np.float32(5.0))")


def test_cli10_standard_input_holds_a_program_or_kernels(
        program: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Standard input is read once per command, whatever reads it (CLI-10)."""
    import io

    def stdin(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))

    stdin(PROGRAM)
    code, out, _ = run_cli(capsys, "check", "-")
    assert code == 0 and out.startswith("-: ok (program demo: 1 kernel(s): twice;")
    stdin(PROGRAM)
    code, out, err = run_cli(capsys, "opt", "-", "-p", "fuse", "--notes")
    assert code == 0 and "program demo" in out and "kernel twice(" in out
    stdin("program bad\nbegin\n  x := \nend\n")
    code, _, err = run_cli(capsys, "opt", "-")
    assert code == 1 and err.startswith("<stdin>:3:")
    stdin(SAXPY)
    code, out, err = run_cli(capsys, "opt", "-", "-p", "inline")
    assert (code, err) == (0, "") and "kernel saxpy(" in out


def test_cli10_emit_of_a_program_without_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    """A program whose work is in parallel loops has no kernel to emit: say how to get
    them (CLI-10)."""
    example = ROOT / "examples" / "advection_diffusion.sk"
    code, out, err = run_cli(capsys, "emit", example, "--target", "cuda")
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {example} holds a host program without kernels")
    assert "-p offload --dump-dir" in err


def test_cli12_help_of_every_file_command_names_py(capsys: pytest.CaptureFixture[str]) -> None:
    build_parser()
    for name in sorted(set(COMMANDS) - {"kernels"}):
        code, out, _ = run_cli(capsys, name, "--help")
        assert code == 0 and out.startswith(f"usage: sarek-py {name}"), name
        flat = " ".join(out.split())
        assert "FILE" in flat and ".py" in flat and ".sk" in flat, name


@pytest.mark.parametrize("argv", [
    ["print", "{py}"],
    ["check", "{py}"],
    ["run", "{py}", "--kernel", "saxpy", "--threads", "8"],
    ["emit", "{py}", "--target", "opencl"],
    ["opt", "{py}", "-p", "inline"],
])
def test_cli12_py_files_work_where_sk_files_do(argv: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The same command on examples/saxpy.sk and its Python twin prints the same, up to
    the file name."""
    sk = ROOT / "examples" / "saxpy.sk"
    py = ROOT / "examples" / "python" / "saxpy.py"
    code_py, out_py, err_py = run_cli(capsys, *(a.format(py=py) for a in argv))
    code_sk, out_sk, _ = run_cli(capsys, *(a.format(py=sk) for a in argv))
    assert (code_py, err_py) == (0, "")
    assert code_sk == 0
    assert out_py.replace(str(py), "F") == out_sk.replace(str(sk), "F")


def test_cli9_module_run_keeps_plugins() -> None:
    """``python -m sarek_py.cli`` offers every subcommand with all its options (LAY-5)."""
    got = subprocess.run([sys.executable, "-m", "sarek_py.cli", "run", "--help"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert got.returncode == 0 and "--compare" in got.stdout


# ------------------------------------------------------------------- CLI-13: docs/cli.md

DOCS = ROOT / "docs" / "cli.md"
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")


def doc_examples() -> list[tuple[int, str, int, list[str]]]:
    """The ``$ sarek-py …`` examples of docs/cli.md: (line number, command line, expected
    exit status, expected output lines) — the lines up to the next ``$`` or the end of
    the code block."""
    out: list[tuple[int, str, int, list[str]]] = []
    in_block = False
    current: tuple[int, str, int, list[str]] | None = None
    for no, line in enumerate(DOCS.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
            if current is not None:
                out.append(current)
                current = None
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            if current is not None:
                out.append(current)
            command = line[2:]
            m = _EXIT.search(command)
            code = int(m.group(1)) if m else 0
            current = (no, _EXIT.sub("", command), code, [])
        elif current is not None:
            current[3].append(line)
    return out


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    """``…`` is any text within a line; a line of only ``…`` any number of lines."""
    parts = []
    for line in expected:
        if line.strip() == "…":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.split("…")) + r"\n")
    return re.compile("".join(parts))


def _needs_opencl(command: str) -> bool:
    return re.search(r"--(backend|compare)\s+opencl", command) is not None


def _opencl_available() -> bool:
    try:
        from sarek_py.runtime import get_backend

        get_backend("opencl")
    except Exception:  # noqa: BLE001  (any reason it cannot run here)
        return False
    return True


DOC_EXAMPLES = doc_examples()


def test_cli13_docs_have_examples_of_every_subcommand() -> None:
    """CLI-13: the page shows every registered subcommand at work."""
    build_parser()
    shown = {shlex.split(cmd)[1] for _, cmd, _, _ in DOC_EXAMPLES}
    assert shown == set(COMMANDS) - {"kernels"}
    assert len(DOC_EXAMPLES) >= 20


@pytest.mark.parametrize("example", DOC_EXAMPLES, ids=[f"line{e[0]}" for e in DOC_EXAMPLES])
def test_cli13_docs_examples_are_true(example: tuple[int, str, int, list[str]],
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-13: each ``$ sarek-py …`` line of docs/cli.md, run from the repository root,
    exits with the status shown and prints the lines shown."""
    no, command, status, expected = example
    if _needs_opencl(command) and not _opencl_available():
        pytest.skip("the OpenCL backend cannot run here")
    argv = shlex.split(command)
    assert argv[0] == "sarek-py"
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(capsys, *argv[1:])
    assert code == status, f"docs/cli.md:{no}: {command}\n{err}"
    assert output_pattern(expected).fullmatch(out + err), \
        f"docs/cli.md:{no}: {command}\n--- got:\n{out}{err}--- expected:\n" + "\n".join(expected)
    assert_no_traceback(err)
