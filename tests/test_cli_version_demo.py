"""What a newcomer sees (issue 14): `sarek-py --version`, the top-level `--help`, and
`make demo` (examples/demo.py): docs/cli.md CLI-20 .. CLI-22."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import sarek_py
from sarek_py.cli.main import BUILTIN, PURPOSE, SUMMARY, commands, main
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo.py"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


# ---------------------------------------------------------------------------- CLI-20


def test_cli20_version_is_the_package_version() -> None:
    """CLI-20: one version, in pyproject.toml, ``sarek_py.__version__`` and the CLI."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert sarek_py.__version__ == project["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", sarek_py.__version__)


@pytest.mark.parametrize("argv", [["--version"], ["--version", "print"],
                                  ["--version", "run", "nothing.sk"]])
def test_cli20_version_prints_one_line_and_exits_0(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-20: ``sarek-py --version`` before (or without) a subcommand."""
    code, out, err = run_cli(capsys, *argv)
    assert (code, out, err) == (0, f"sarek-py {sarek_py.__version__}\n", "")


def test_cli20_version_from_the_installed_command() -> None:
    """CLI-20: the installed ``sarek-py`` script, as a user types it."""
    exe = Path(sys.executable).with_name("sarek-py")
    if not exe.exists():
        pytest.skip(f"no installed sarek-py script next to {sys.executable}")
    done = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, f"sarek-py {sarek_py.__version__}\n", "")


def test_cli20_version_after_a_subcommand_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-20/CLI-1: ``--version`` is an option of ``sarek-py``, not of a subcommand."""
    code, out, err = run_cli(capsys, "check", str(ROOT / "examples" / "saxpy.sk"), "--version")
    assert code == 2 and out == ""
    assert "unrecognized arguments: --version" in err and "Traceback" not in err


# ---------------------------------------------------------------------------- CLI-21

GOLDEN_HEAD = """\
usage: sarek-py [-h] [--version] COMMAND ...

sarek-py: proved-exact fusion of GPU kernels.
It fuses kernels (.sk text, or Python @kernel files) only where the fused kernel
is proved to give bit-for-bit the results of the kernels run one after the
other, and otherwise names the rule that refuses it and why. Kernels compile to
CUDA C and OpenCL C with contraction off, and run on CUDA, OpenCL or the
reference interpreter.
"""


def test_cli21_help_says_what_the_tool_is_for(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI-21: golden head of ``sarek-py --help``: usage, then the purpose."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = run_cli(capsys, "--help")
    assert (code, err) == (0, "")
    assert out.startswith(GOLDEN_HEAD), out
    assert PURPOSE.splitlines()[0] == "sarek-py: proved-exact fusion of GPU kernels."
    assert "--version" in out


def test_cli21_every_subcommand_on_one_line(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI-21: each built-in subcommand is one line of at most 80 columns, in CLI-9 order,
    with its summary; a registered subcommand is listed too (with its help)."""
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    listed = [m.group(1) for line in lines
              if (m := re.fullmatch(r"    (\w+) +(\S.*)", line))]
    assert listed == [c.name for c in commands()]
    for cmd in commands():
        if cmd.run in BUILTIN:
            line = next(x for x in lines if re.fullmatch(rf"    {cmd.name} +\S.*", x))
            assert line.split(None, 1)[1] == SUMMARY[cmd.name]
    assert set(SUMMARY) == {c.name for c in commands() if c.run in BUILTIN}


def test_cli21_subcommand_help_keeps_its_whole_description(
        capsys: pytest.CaptureFixture[str]) -> None:
    """CLI-21/CLI-3: ``COMMAND --help`` still shows the subcommand's full help text."""
    for cmd in commands():
        code, out, _ = run_cli(capsys, cmd.name, "--help")
        assert code == 0
        assert " ".join(cmd.help.split()) in " ".join(out.split()), cmd.name


# ---------------------------------------------------------------------------- CLI-22


def _run_demo(n: int, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAREK_DEMO_N": str(n)}
    if "--backend" in extra and extra[extra.index("--backend") + 1] == "opencl":
        try:
            get_backend("opencl")
        except BackendUnavailable as exc:
            pytest.skip(f"OpenCL cannot run here: {exc}")
    return subprocess.run([sys.executable, str(DEMO), *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("backend", ["opencl", "interp", None])
@pytest.mark.parametrize("n", [100_000, 1, 257])
def test_cli22_demo_shows_fusion_source_equality_and_speed(n: int, backend: str | None) -> None:
    """CLI-22: the demo's claims, in order, at small sizes (one element and a partial
    block included), on OpenCL, the interpreter and the default backend: the report (t's
    stores dropped), both sources, the bitwise lines (fused == unfused == numpy), the
    times."""
    done = _run_demo(n, "--repeat", "2", *(["--backend", backend] if backend else []))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and done.stderr == "", done.stderr
    out = done.stdout
    order = ["scale -> relu: fused into scale_relu", "t: stores dropped from scale_relu",
             "(0.50 of unfused)", "__kernel void scale_relu(",
             'extern "C" __global__ void scale_relu(',
             f"fused == unfused, bit for bit (y, {4 * n} bytes): yes",
             "and both == numpy's maximum(2 * x, 0): yes",
             "unfused:", "fused:", "speed-up: "]
    at = [out.find(s) for s in order]
    assert -1 not in at and at == sorted(at), (order, at, out)
    want = backend or get_backend("default").name
    assert f"{n} f32 elements, backend {want}\n" in out
    assert ("the times say nothing about fusion" in out) == (want == "interp")
    assert re.search(r"^speed-up: \d+\.\d\dx \(unfused / fused\)$", out, re.M)
    assert re.search(r"^// \.\.\. \d+ lines of helpers", out, re.M)
    assert len(out.splitlines()) < 120   # short enough to read


def test_cli22_demo_bitwise_line_can_say_no(tmp_path: Path) -> None:
    """CLI-22: the bitwise line is computed, not printed: a demo whose fused pipeline
    writes different bytes (relu replaced by a copy in the fused run) says NO and exits 1."""
    text = DEMO.read_text()
    mutant = text.replace("            relu[n, block](t, d_y2, n)",
                          "            scale[n, block](t, d_y2, 1.0, n)")
    assert mutant != text
    path = tmp_path / "demo_mutant.py"
    path.write_text(mutant)
    env = {**os.environ, "SAREK_DEMO_N": "1000"}
    done = subprocess.run([sys.executable, str(path), "--repeat", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "bit for bit (y, 4000 bytes): NO" in done.stdout


def test_cli22_make_demo_runs_the_demo() -> None:
    """CLI-22: the Makefile's ``demo`` target runs examples/demo.py (after install)."""
    make = (ROOT / "Makefile").read_text()
    target = re.search(r"^demo:.*\n((?:\t.*\n)+)", make, re.M)
    assert target is not None
    assert "examples/demo.py" in target.group(1)
    assert "make demo" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize(("extra", "env", "message"), [
    (["--n", "0"], None, "argument --n: 0 is not between 1 and 2^31 - 1"),
    (["--n", "2147483648"], None, "argument --n: 2147483648 is not between 1 and 2^31 - 1"),
    ([], "many", "argument --n: 'many' is not an integer"),
    (["--repeat", "-1"], None, "argument --repeat: -1 is not between 1 and 2^31 - 1"),
])
def test_cli22_demo_bad_sizes_are_usage_errors(extra: list[str], env: str | None,
                                               message: str) -> None:
    """CLI-22: a size or repeat count that is not a positive i32 is a usage error (status
    2, one line saying why), from the option or from ``SAREK_DEMO_N``; no traceback."""
    environ = {k: v for k, v in os.environ.items() if k != "SAREK_DEMO_N"}
    if env is not None:
        environ["SAREK_DEMO_N"] = env
    done = subprocess.run([sys.executable, str(DEMO), *extra], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == f"demo.py: error: {message}"
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("backend", "message"), [
    ("nope", "demo.py: error: unknown backend 'nope' (choose one of cuda, c, opencl, interp)"),
])
def test_cli22_demo_unknown_backend_is_one_line(backend: str, message: str) -> None:
    """CLI-22: a backend that cannot run is one line of error (status 1), no traceback."""
    done = _run_demo(10, "--backend", backend)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == message + "\n"


def test_cli22_demo_unavailable_backend_says_why() -> None:
    """CLI-22: CUDA without a GPU (PyCUDA missing here) is refused in one line."""
    try:
        get_backend("cuda")
    except BackendUnavailable as exc:
        done = _run_demo(10, "--backend", "cuda")
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == f"demo.py: {exc}\n" and "Traceback" not in done.stderr
    else:
        pytest.skip("CUDA can run here: nothing to refuse")
