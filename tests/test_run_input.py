"""``sarek-py run PROGRAM --input FILE`` (docs/cli.md CLI-30; specs/host-program.md HP-45):
the values ``read`` takes, and located errors for a missing file, too few values and a
value of the wrong type."""

from __future__ import annotations

from pathlib import Path

import pytest

from sarek_py.cli.main import main
from sarek_py.host.input_values import parse_input_text
from sarek_py.host.interp import run_program
from sarek_py.ir.host.program import HostError
from sarek_py.ir.host.text import parse_program

PROGRAM = """program rd
  var n : i32;
  var x : f64;
  var s : f32;
  var ok : bool;
  var k : i64;
  var a : f64[0:] allocatable;
begin
  read n, x;
  read s, ok, k;
  allocate a[n];
  parallel for (i = 0 to n - 1) do a[i] <- x * f64(i) done;
  print n, x, a[n - 1]
end
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], values: str | None,
         *extra: str) -> tuple[int, str, str]:
    prog = tmp_path / "rd.sk"
    prog.write_text(PROGRAM)
    argv = ["run", str(prog), *extra]
    if values is not None:
        (tmp_path / "in.txt").write_text(values)
        argv += ["--input", str(tmp_path / "in.txt")]
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err.replace(f"{tmp_path}/", "")


def test_cli30_values_feed_read_in_order(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-30, HP-45: whitespace-separated values over several lines, each converted to
    its variable's type (i32, f64, f32, bool, i64); extra values are not read."""
    code, out, err = _run(tmp_path, capsys, "4\t2.5\n\n  0.1  true\n-9000000000 77\n")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "4 2.5 7.5"
    assert "n = 4" in lines and "x = 2.5" in lines and "ok = True" in lines
    assert "k = -9000000000" in lines
    assert "s = 0.1" in lines  # np.float32(0.1) as the digest writes a scalar


def test_cli30_compare_gives_each_run_the_same_values(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-30: ``--compare`` runs the program twice on the same values (a fresh reading
    each), bitwise equal on OpenCL."""
    try:
        from sarek_py.runtime import get_backend
        get_backend("opencl")
    except Exception as exc:  # pragma: no cover - no OpenCL here
        pytest.skip(f"no OpenCL: {exc}")
    code, out, err = _run(tmp_path, capsys, "5 1.25 2.0 false 3", "--compare", "opencl")
    assert code == 0, out + err
    assert "a: identical (40 bytes)" in out


@pytest.mark.parametrize("values, says", [
    ("4", "rd.sk:9:3: error: read past the end of the input, for 'x' (in.txt holds 1 value)"),
    ("4 2.5 1.0 true", "rd.sk:10:3: error: read past the end of the input, for 'k' "
                       "(in.txt holds 4 values)"),
    ("", "read past the end of the input, for 'n' (in.txt holds 0 values)"),
    ("4 abc", "rd.sk:9:3: error: read of 'x': 'abc' (in.txt:1:3) is not a value of type f64"),
    ("4.0 1", "read of 'n': '4.0' (in.txt:1:1) is not a value of type i32"),
    ("3000000000 1", "read of 'n': 3000000000 (in.txt:1:1) does not fit in i32"),
    ("4 1\n1e39 true 1", "read of 's': 1e39 (in.txt:2:1) overflows f32"),
    ("4 1 1 yes 1", "read of 'ok': 'yes' (in.txt:1:7) is not a value of type bool"),
    ("4 1 1 true 0x10", "read of 'k': '0x10' (in.txt:1:12) is not a value of type i64"),
])
def test_cli30_bad_input_is_one_located_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              values: str, says: str) -> None:
    """CLI-30, HP-45: too few values and a value of the wrong type are errors located at
    the ``read``, naming the variable and the value's place (exit 1, no traceback)."""
    code, out, err = _run(tmp_path, capsys, values)
    assert code == 1
    assert says in err, err
    assert "Traceback" not in err


def test_cli30_missing_file_and_kernel_run(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-30: a missing input file is an error naming it (exit 1); a directory cannot be
    read (exit 1); ``--input`` with a kernel run is a usage error (exit 2)."""
    prog = tmp_path / "rd.sk"
    prog.write_text(PROGRAM)
    assert main(["run", str(prog), "--input", str(tmp_path / "nope.txt")]) == 1
    err = capsys.readouterr().err
    assert f"error: --input {tmp_path / 'nope.txt'}: no such file" in err
    assert main(["run", str(prog), "--input", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"error: --input {tmp_path}: cannot read it" in err
    k = tmp_path / "k.sk"
    k.write_text("kernel k(a : f32[], n : i32) = a[0] <- 1.0f\n")
    assert main(["run", str(k), "--kernel", "k", "--threads", "1", "--input",
                 str(prog)]) == 2
    assert "--input feeds the 'read' statements of a host program" in \
        capsys.readouterr().err


def test_hp45_api_values_keep_their_place() -> None:
    """HP-45: the API form (``inputs=`` of ``run_program``) takes parsed input values as
    well as Python values."""
    p = parse_program(PROGRAM)
    r = run_program(p, inputs=parse_input_text("3 0.5 2 false 1", "v.txt"))
    assert r.array("a").tolist() == [0.0, 0.5, 1.0]
    r = run_program(p, inputs=[3, 0.5, 2.0, False, 1])
    assert r.array("a").tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(HostError, match=r"'x' \(v.txt:1:3\)"):
        run_program(p, inputs=parse_input_text("3 x", "v.txt"))


def test_hp45_read_of_an_array_is_a_located_check_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """HP-45, HP-9 (regression: ``error: preset of 'a' has rank 0, not 1``, no location):
    ``read`` takes scalars; reading into an array is refused by the checker at the
    ``read``."""
    prog = tmp_path / "ra.sk"
    prog.write_text("program p\n  var a : f64[0:3];\nbegin\n  read a\nend\n")
    (tmp_path / "in.txt").write_text("1 2 3")
    assert main(["run", str(prog), "--input", str(tmp_path / "in.txt")]) == 1
    err = capsys.readouterr().err
    assert f"{prog}:4:3: error: read takes scalar variables; 'a' is an array" in err, err
    assert main(["check", str(prog)]) == 1
