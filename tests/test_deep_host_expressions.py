"""Deep expressions in host programs and kernels (specs/text-format.md TXT-32;
specs/codegen.md CG-60, CG-61; specs/host-program.md HP-10): hundreds of nested
parentheses and Horner polynomials of 200 and 450 terms go through every command (check,
run, print, opt, offload, emit) with no RecursionError or traceback, and run bitwise
equal on the interpreter and OpenCL."""

from __future__ import annotations

from pathlib import Path

import pytest

from sarek_py.cli.main import main


def horner(terms: int, x: str) -> str:
    e = "1.0"
    for k in range(terms):
        e = f"({e} * {x} + {0.5 + k * 0.001})"
    return e


def parens(depth: int, x: str) -> str:
    return "(" * depth + x + ")" * depth


def program(terms: int, depth: int) -> str:
    xi = "(f64(i) * 0.125)"
    return f"""program deep
  var x : f64 = 0.25;
  var y : f64;
  var z : f64;
  var a : f64[0:8];
  var b : f64[0:8];
  proc poly(v : f64 in, r : f64 out) pure =
    r := {horner(terms, 'v')}
  end
begin
  y := {horner(terms, 'x')};
  z := {parens(depth, 'x')} + 1.0;
  parallel for (i = 0 to 7) do
    a[i] <- {horner(terms, xi)} + {parens(depth, xi)}
  done;
  parallel for (i = 0 to 7) do call poly(f64(i) * 0.25, b[i]) done;
  while z < {horner(terms, 'x')} do z := z + 1.0 done
end
"""


def kernel(terms: int, depth: int) -> str:
    xi = "(f64(i) * 0.125)"
    return (f"kernel k(a : f64[], n : i32) =\n  let i = global_thread_id in\n"
            f"  if i < n then a[i] <- {horner(terms, xi)} + {parens(depth, xi)}\n")


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "RecursionError" not in err, err
    return code, out, err


def _opencl() -> None:
    try:
        from sarek_py.runtime import get_backend
        get_backend("opencl")
    except Exception as exc:  # pragma: no cover - no OpenCL here
        pytest.skip(f"no OpenCL: {exc}")


@pytest.mark.parametrize("terms, depth", [(200, 400), pytest.param(300, 1000, marks=pytest.mark.slow)])
def test_txt32_deep_host_program_through_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], terms: int, depth: int) -> None:
    """TXT-32, HP-10, HP-11: a program with a 200- (300-) term Horner polynomial and 400
    (1000) nested parentheses in an assignment, a parallel loop, a procedure called in one
    and a while condition: check, run, print (a fixpoint), opt --notes, opt with offload
    and dumps; bitwise equal on OpenCL (CG-60: the 300-term polynomial nests deeper than
    clang's 256 brackets, a build failure and a traceback before)."""
    _opencl()
    f = tmp_path / "deep.sk"
    f.write_text(program(terms, depth))
    assert _cli(capsys, "check", str(f))[0] == 0
    code, out, _ = _cli(capsys, "run", str(f))
    assert code == 0 and "a: sha256=" in out
    code, printed, _ = _cli(capsys, "print", str(f))
    assert code == 0
    g = tmp_path / "printed.sk"
    g.write_text(printed)
    assert _cli(capsys, "print", str(g))[1] == printed
    code, opt, err = _cli(capsys, "opt", str(f), "--notes")
    assert code == 0 and opt.endswith("end\n")
    code, _, err = _cli(capsys, "opt", str(f), "-p", "fuse,offload", "--dump-dir",
                        str(tmp_path / "dumps"))
    assert code == 0, err
    assert (tmp_path / "dumps" / "kernels.cl").exists()
    code, out, err = _cli(capsys, "run", str(f), "--compare", "opencl")
    assert code == 0, out + err
    assert "a: identical (64 bytes)" in out and "b: identical (64 bytes)" in out


@pytest.mark.parametrize("terms, depth", [(200, 400), pytest.param(300, 1000, marks=pytest.mark.slow)])
def test_cg60_deep_kernel_emits_and_runs_bitwise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], terms: int, depth: int) -> None:
    """CG-60: a kernel with a deep polynomial emits for both targets with no bracket
    nesting past 96 levels of expression (its deep parts bound to ``deep_`` locals), and
    runs bitwise equal on OpenCL and the interpreter."""
    _opencl()
    f = tmp_path / "k.sk"
    f.write_text(kernel(terms, depth))
    for target in ("opencl", "cuda"):
        code, src, err = _cli(capsys, "emit", "-t", target, str(f))
        assert code == 0, err
        nest = best = 0
        for ch in src:
            nest += ch == "("
            nest -= ch == ")"
            best = max(best, nest)
        assert best < 256
        assert ("deep_" in src) == (terms > 96)
    code, out, err = _cli(capsys, "run", str(f), "-k", "k", "-n", "8", "--compare", "opencl")
    assert code == 0, out + err
    assert "a: identical" in out


def test_cg60_shallow_leaves_ordinary_kernels_alone() -> None:
    """CG-60: a kernel without a deep expression is emitted from the same object."""
    from sarek_py.codegen.shallow import shallow_kernel
    from sarek_py.ir.parser import parse_module

    k = parse_module(kernel(20, 10)).kernels[0]
    assert shallow_kernel(k) is k


def test_cg61_deep_lazy_operands_are_a_located_compiler_refusal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CG-61 (regression: a pyopencl traceback before): a chain of 300 nested ``&&`` (whose
    right operands CG-60 does not move) is refused by the OpenCL compiler; the command
    says so in one located error (exit 1), the compiler's reason without its temporary
    file."""
    _opencl()
    e = "f64(i) > 0.5"
    for k in range(300):
        e = f"f64(i) > {k}.0 && ({e})"
    f = tmp_path / "and.sk"
    f.write_text(f"program andand\n  var a : i32[0:8];\nbegin\n  parallel for (i = 0 to 7) "
                 f"do if {e} then a[i] <- 1 done\nend\n")
    code, _, err = _cli(capsys, "run", str(f), "--backend", "opencl")
    assert code == 1
    assert f"{f}:4:12: error: the OpenCL compiler refused the emitted program: bracket " \
        "nesting level exceeded maximum of 256" in err, err
    assert _cli(capsys, "run", str(f))[0] == 0  # the interpreter runs it


def test_txt32_too_deep_is_a_located_error(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """TXT-32: past the nesting bound a program is a located parse error, not a crash."""
    f = tmp_path / "deeper.sk"
    f.write_text(program(900, 10))
    code, _, err = _cli(capsys, "run", str(f))
    assert code == 1
    assert "is nested more than 1000 levels deep" in err
