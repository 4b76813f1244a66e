"""A program runs where ``--backend`` says, and two programs compare bitwise (HP-17, HP-18,
CLI-8, CLI-11, CLI-14; issue 11 item 7).

Before HP-17, ``sarek-py run PROGRAM --backend opencl`` ran the parallel loops on the
interpreter (only explicit launches reached the device), so ``--compare opencl`` compared
the interpreter with itself. These tests count the kernels the device backend launches.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.cli.loading import read_source
from sarek_py.cli.main import main
from sarek_py.host.backend import count_parfors, run_program_on
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime.interp import InterpBackend

ROOT = Path(__file__).resolve().parent.parent

# 2 loops x 3 time steps + 1 loop in a procedure called twice + 1 first loop = 9 loop runs
LOOPS = """
program p
  var n : i32 = 10; var nt : i32 = 3; var m : i32;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable;
  proc bump(x : f64[0:] inout, k : i32 in) =
    parallel for (i = 0 to k) do x[i] <- x[i] + 1.0 done
  end
begin
  allocate u[0:n]; allocate f[0:n];
  parallel for (i = 0 to n) do u[i] <- f64(i) * 0.25 done;
  for t = 1 to nt do
    parallel for (i = 0 to n) do f[i] <- u[i] * 0.5 + 1.0 done;
    parallel for (i = 1 to n - 1) do u[i] <- f[i - 1] - f[i + 1] * 0.125 done;
    m := m + 1
  done;
  call bump(u, 4);
  call bump(f, n)
end
"""
RUNS = 1 + 2 * 3 + 2


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.fixture
def loops(tmp_path: Path) -> Path:
    path = tmp_path / "loops.sk"
    path.write_text(LOOPS)
    return path


@pytest.fixture
def fake_device(monkeypatch: pytest.MonkeyPatch) -> InterpBackend:
    """A backend named ``fakedev`` (the interpreter backend standing for a device), so
    the device path runs and is counted here without a GPU."""
    import sarek_py.runtime as runtime

    dev = InterpBackend()
    dev.name = "fakedev"
    real = runtime.get_backend

    def get(name: str = "default") -> Any:
        return dev if name == "fakedev" else real(name)

    monkeypatch.setattr(runtime, "get_backend", get)
    return dev


def test_hp17_device_backend_runs_every_parallel_loop_as_a_kernel(
        loops: Path, fake_device: InterpBackend, capsys: pytest.CaptureFixture[str]) -> None:
    """HP-17, CLI-11: ``run PROGRAM --backend B`` launches one kernel on B per parallel-loop
    run (9 here), and prints its executor. Before the fix B launched nothing."""
    code, out, err = run_cli(capsys, "run", loops, "--backend", "fakedev")
    assert code == 0, err
    assert fake_device.stats.launches == RUNS
    assert "executor" not in out  # standard output holds the results only
    assert err == ("executor: fakedev: program offloaded (4 parallel loop(s) as kernels), "
                   f"{RUNS} kernel launch(es) on fakedev\n")


def test_hp17_compare_is_never_the_interpreter_with_itself(
        loops: Path, fake_device: InterpBackend, capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-11: ``--compare B`` runs the loops on B (counted), and the bytes agree."""
    code, out, err = run_cli(capsys, "run", loops, "--compare", "fakedev")
    assert code == 0, (out, err)
    assert fake_device.stats.launches == RUNS
    assert "executor: interp: parallel loops on the reference interpreter" in err
    assert "executor: fakedev: program offloaded" in err
    assert "  u: identical (88 bytes)" in out and "  f: identical (88 bytes)" in out


def test_hp17_interp_executor_and_results_match_the_device_path() -> None:
    """HP-17: the offloaded run on a backend object gives the interpreter's bytes."""
    p = parse_program(LOOPS)
    ref, ex = run_program_on(p, "interp")
    assert (ex.backend, ex.offloaded, ex.launches) == ("interp", False, 0)
    dev = InterpBackend()
    got, ex2 = run_program_on(p, dev)
    assert (ex2.offloaded, ex2.loops, ex2.launches) == (True, count_parfors(p), RUNS)
    for name in ("u", "f", "m"):
        assert np.asarray(ref.values[name]).tobytes() == np.asarray(got.values[name]).tobytes()


def test_hp17_a_loop_the_offload_cannot_lower_is_refused(tmp_path: Path,
                                                          fake_device: InterpBackend,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    """HP-17: no silent fallback to the interpreter: the loop is named, status 1."""
    from sarek_py.host import offload as off

    def refuse(p: object, **kw: object) -> object:
        raise off.OffloadError("a parallel loop cannot hold a barrier",
                               parse_program(LOOPS).loc)

    path = tmp_path / "l.sk"
    path.write_text(LOOPS)
    orig = off.offload
    try:
        off.offload = refuse  # type: ignore[assignment]
        code, out, err = run_cli(capsys, "run", path, "--backend", "fakedev")
    finally:
        off.offload = orig
    assert code == 1 and out == ""
    assert "--backend fakedev: this parallel loop cannot run on fakedev (a parallel loop " \
           "cannot hold a barrier); run the program with --backend interp" in err
    assert fake_device.stats.launches == 0


def test_hp17_unavailable_backend_is_an_error(loops: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", loops, "--backend", "nosuch")
    assert code == 1 and "unknown backend 'nosuch'" in err and "Traceback" not in err


def _opencl() -> Any:
    from sarek_py.runtime import get_backend

    try:
        return get_backend("opencl")
    except SarekError:
        pytest.skip("the OpenCL backend cannot run here")


@pytest.mark.opencl
def test_hp17_opencl_runs_the_loops_on_the_device(loops: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """HP-17 on the real OpenCL backend (PoCL here): one device launch per loop run, and
    (exact arithmetic only) every array bitwise the interpreter's."""
    dev = _opencl()
    before = dev.stats.launches
    code, out, err = run_cli(capsys, "run", loops, "--compare", "opencl")
    assert code == 0, (out, err)
    assert dev.stats.launches - before == RUNS
    assert "DIFFERENT" not in out and f"{RUNS} kernel launch(es) on opencl" in err


@pytest.mark.opencl
def test_hp17_opencl_docs_example_is_not_the_interpreter_twice(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The docs/cli.md example: its loops now run on OpenCL (7 launches); ``exp`` in its
    initial condition is within CG-15's ULP bound, not bitwise, so ``u`` differs and the
    exit status is 1 (it said ``identical`` when both runs were the interpreter)."""
    dev = _opencl()
    before = dev.stats.launches
    code, out, err = run_cli(capsys, "run", ROOT / "examples/advection_diffusion.sk",
                             "--size", "nx=8", "--size", "ny=8", "--size", "nt=1",
                             "--compare", "opencl")
    assert dev.stats.launches - before == 7, err
    assert "executor: opencl: program offloaded (3 parallel loop(s) as kernels)" in err
    assert "  ra: identical (24 bytes)" in out and code == 1


# ------------------------------------------------------------------- --against (HP-18)


def test_hp18_against_identical_and_listing_extras(loops: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """HP-18, CLI-14: the fused program of ``opt`` against the original: identical, the
    pass's own variables listed as not compared."""
    code, fused, err = run_cli(capsys, "opt", loops)
    assert code == 0, err
    other = tmp_path / "fused.sk"
    other.write_text(fused)
    code, out, err = run_cli(capsys, "run", loops, "--against", other, "--size", "n=7")
    assert code == 0, (out, err)
    assert f"compare {loops} with {other} (on interp):" in out
    assert "  u: identical (64 bytes)" in out and "  m: identical" in out
    assert "DIFFERENT" not in out


def test_hp18_against_reports_every_kind_of_difference(loops: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    """HP-18: a differing array, scalar, a missing variable, output and stop code: exit 1."""
    other = tmp_path / "other.sk"
    other.write_text(LOOPS.replace("u[i] + 1.0 done\n  end", "u[i] + 1.0 done\n  end")
                     .replace("m := m + 1", "m := m + 2")
                     .replace("x[i] <- x[i] + 1.0", "x[i] <- x[i] + 1.5")
                     .replace("var m : i32;", "var mm : i32;").replace("m := m + 2",
                                                                        "mm := mm + 2")
                     .replace("call bump(f, n)", "call bump(f, n);\n  print n;\n  stop 2"))
    code, out, err = run_cli(capsys, "run", loops, "--against", other)
    assert code == 1, err
    lines = out.splitlines()
    assert "  m: DIFFERENT: " + str(other) + " declares no 'm'" in lines
    assert any(x.startswith("  u: DIFFERENT: ") for x in lines)
    assert f"  not compared (declared by {other} only): mm" in lines
    assert "  output: DIFFERENT (0 and 1 lines)" in lines
    assert "  stop codes: DIFFERENT (None vs 2)" in lines


def test_hp18_scalar_bits_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """HP-18: scalars compare by bits: -0.0 is not 0.0."""
    a, b = tmp_path / "a.sk", tmp_path / "b.sk"
    src = "program z\n  var s : f64;\nbegin\n  s := X\nend\n"
    a.write_text(src.replace("X", "0.0"))
    b.write_text(src.replace("X", "-0.0"))
    code, out, _ = run_cli(capsys, "run", a, "--against", b)
    assert code == 1 and "  s: DIFFERENT: np.float64(0.0) vs np.float64(-0.0)" in out


def test_cli14_against_usage_errors(loops: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "run", loops, "--against", loops, "--compare", "interp")
    assert code == 2 and "--against and --compare: give one" in err
    code, _, err = run_cli(capsys, "run", ROOT / "examples/saxpy.sk", "--against", loops,
                           "--kernel", "saxpy", "--threads", "4")
    assert code == 2 and "--against compares two host programs" in err
    code, _, err = run_cli(capsys, "run", loops, "--against", ROOT / "examples/saxpy.sk")
    assert code == 2 and "holds kernels, not a host program" in err
    code, _, err = run_cli(capsys, "run", loops, "--against", ROOT / "nosuch.sk")
    assert code == 1 and "Traceback" not in err


def test_cli14_opt_output_piped_against_the_original(loops: Path) -> None:
    """CLI-14: ``sarek-py opt A | sarek-py run A --against -`` (the documented check)."""
    opt = subprocess.run([sys.executable, "-m", "sarek_py.cli", "opt", str(loops)],
                         capture_output=True, check=True)
    res = subprocess.run([sys.executable, "-m", "sarek_py.cli", "run", str(loops),
                          "--against", "-"], input=opt.stdout, capture_output=True)
    assert res.returncode == 0, res.stderr.decode()
    assert b"DIFFERENT" not in res.stdout and b"compare " in res.stdout


def test_cli14_against_from_stdin_in_process(loops: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LOOPS.encode())))
    code, out, err = run_cli(capsys, "run", loops, "--against", "-")
    assert code == 0 and "with - (on interp):" in out, err
    assert read_source("-") == LOOPS
