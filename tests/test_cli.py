"""The ``sarek-py`` command (docs/cli.md, CLI-1..CLI-9), run in-process with ``main``
and once as the installed console script."""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sarek_py import cli
from sarek_py.cli import COMMANDS, command, main, make_inputs
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
        "(no implicit conversion: use a cast)",
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
    16 x … x 16) and prints the same report twice."""
    from sarek_py.ir.parser import parse_module

    for k in parse_module(example.read_text(), str(example)).kernels:
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
            raise cli.UsageError("no can do")
        m = cli.load_module(args.file)
        if args.fail == "input":
            cli.find_kernel(m, "absent", args.file)
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
