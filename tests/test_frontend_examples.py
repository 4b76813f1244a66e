"""The examples in both forms, and ``sarek-py`` on Python files (FE-18, FE-19)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.frontend.pyfile import kernels_of, load_python_module
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_module
from sarek_py.ir.types import ArrayType, Scalar
from sarek_py.ir.visit import canonical_ids

EXAMPLES = Path(__file__).parent.parent / "examples"
# host programs (`program … begin … end`, launch/host IR) are outside the front end
SK = sorted(p for p in EXAMPLES.glob("*.sk")
            if not re.search(r"^program\b", p.read_text(), re.M))
N, H, W = 512, 16, 32


def twin(sk: Path) -> Path:
    return EXAMPLES / "python" / f"{sk.stem}.py"


def test_fe19_every_example_has_a_python_twin() -> None:
    assert len(SK) >= 5
    for sk in SK:
        assert twin(sk).is_file(), f"missing {twin(sk)}"


@pytest.mark.parametrize("sk", SK, ids=[p.stem for p in SK])
def test_fe19_same_ir_up_to_ids(sk: Path) -> None:
    want = parse_module(sk.read_text(), str(sk))
    got = load_python_module(twin(sk))
    assert [k.name for k in got.kernels] == [k.name for k in want.kernels]
    for a, b in zip(got.kernels, want.kernels, strict=True):
        assert canonical_ids(a) == canonical_ids(b)
    assert print_module(got) == print_module(want)


def arguments(k: Kernel, rng: np.random.Generator) -> dict[str, Any]:
    """Inputs for the examples' parameters: arrays of N elements (H x W for rank 2)."""
    args: dict[str, Any] = {}
    for p in k.params:
        if isinstance(p.type, ArrayType):
            shape = (N,) if p.type.rank == 1 else (H, W)
            args[p.name] = rng.standard_normal(shape).astype(p.type.elem.dtype)
        elif p.type is Scalar.I32:
            args[p.name] = {"n": N - 5, "h": H, "w": W}.get(p.name, 3)
        else:
            args[p.name] = p.type.dtype.type(0.375)
    return args


@pytest.mark.parametrize("sk", SK, ids=[p.stem for p in SK])
def test_fe19_same_outputs(sk: Path) -> None:
    want = parse_module(sk.read_text(), str(sk))
    for kf in kernels_of(twin(sk)):
        ref = want.kernel(kf.name)
        args = arguments(ref, np.random.default_rng(7))
        expected = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in args.items()}
        run_kernel(ref, expected, threads=N, block=256)
        kf[N, 256](*args.values(), backend="interp")
        for name, v in args.items():
            if isinstance(v, np.ndarray):
                assert np.array_equal(v, expected[name]), (kf.name, name)
        changed = [n for n, v in args.items() if isinstance(v, np.ndarray)
                   and not np.array_equal(v, arguments(ref, np.random.default_rng(7))[n])]
        assert changed, f"{kf.name} wrote nothing: the comparison would be vacuous"


def test_fe18_cli_prints_and_checks_a_python_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = twin(EXAMPLES / "helper.sk")
    assert main(["print", str(path)]) == 0
    out = capsys.readouterr().out
    want = print_module(parse_module((EXAMPLES / "helper.sk").read_text()))
    assert out.rstrip("\n") == want.rstrip("\n")
    assert main(["check", str(path)]) == 0
    assert "1 kernel(s): blend; 2 helper(s)" in capsys.readouterr().out


def test_fe18_cli_reports_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from sarek_py.frontend import Vec, f32, kernel\n\n\n@kernel\n"
                   "def k(x: Vec[f32]):\n    x[0] = [1.0][0]\n")
    done = subprocess.run([sys.executable, "-m", "sarek_py.cli", "print", str(bad)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith(f"{bad}:6:12: error: list is not supported in kernels")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name,args", [
    ("saxpy", ["--kernel", "saxpy", "--threads", "1024", "--size", "n=1000"]),
    ("stencil2d", ["--kernel", "stencil5", "--threads", "512", "--size", "h=16",
                   "--size", "w=32", "--size", "src=16x32", "--size", "dst=16x32"]),
])
def test_fe18_cli_run_gives_the_same_digests(name: str, args: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    outs = []
    for path in (EXAMPLES / f"{name}.sk", EXAMPLES / "python" / f"{name}.py"):
        assert main(["run", str(path), *args, "--seed", "3", "--backend", "interp"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "sha256=" in outs[0]


def test_fe18_only_kernels_defined_in_the_file_are_printed(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(f"import sys\nsys.path.insert(0, {str(EXAMPLES / 'python')!r})\n"
                    "from saxpy import saxpy  # imported, not defined here\n"
                    "from sarek_py.frontend import Vec, i32, kernel\n\n\n"
                    "@kernel\ndef mine(x: Vec[i32]):\n    x[0] = 1\n")
    assert [k.name for k in kernels_of(user)] == ["mine"]
