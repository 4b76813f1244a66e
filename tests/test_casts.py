"""Which cast to write (specs/ir.md IR-40, specs/frontend.md FE-40): kernels have no
implicit conversion, and the error names the cast that gives C's meaning, in the user's
words, located with a caret, from the text form, the CLI and the Python front end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sarek_py.ir.casts import operands_hint, value_hint
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_module
from sarek_py.ir.types import Scalar

F32, F64, I32, I64 = Scalar.F32, Scalar.F64, Scalar.I32, Scalar.I64


@pytest.mark.parametrize("lt,rt,want", [
    (F32, I32, "write f32(y) as C would convert it"),
    (I32, F32, "write f32(x) as C would convert it"),
    (I64, F64, "write f64(x) as C would convert it"),
    (I32, I64, "write i64(x) as C would convert it"),
    (F64, F32, "write f64(y) as C would convert it, or f32(x) to compute in f32"),
    (F32, F64, "write f64(x) as C would convert it, or f32(y) to compute in f32"),
    (Scalar.BOOL, I32, "use a cast"),
])
def test_ir40_operands_hint_follows_c_conversions(lt: Scalar, rt: Scalar, want: str) -> None:
    """IR-40: the operand C converts is cast to the other's type."""
    assert operands_hint("x", lt, "y", rt) == want


def test_ir40_value_hint() -> None:
    """IR-40: a value is cast to its target's type; non-numeric gets no hint."""
    assert value_hint("d", F64, F32) == ": write f32(d), the conversion C would make"
    assert value_hint("b", Scalar.BOOL, I32) == ""


@pytest.mark.parametrize("body,message", [
    ("a[i] <- a[i] * n", "operator '*' on different types f32 and i32 (no implicit "
     "conversion: write f32(n) as C would convert it)"),
    ("a[i] <- d", "store of a f64 value into 'a' of element type f32: write f32(d), the "
     "conversion C would make"),
    ("b[i] <- a[i] * b[i]", "write f64(a[i]) as C would convert it, or f32(b[i]) to "
     "compute in f32"),
    ("a[i] <- f32(i64(i) + n)", "write i64(n) as C would convert it"),
])
def test_ir40_checker_names_the_cast(body: str, message: str) -> None:
    """IR-40: the checker's error names the cast, located at the expression."""
    text = (f"kernel k(a : f32[], b : f64[], n : i32, d : f64) =\n"
            f"  let i = global_thread_id in\n  {body}\n")
    with pytest.raises(SarekError) as info:
        check_module(parse_module(text, "casts.sk"))
    assert message in str(info.value), info.value
    assert info.value.loc is not None and info.value.loc.line == 3


def _check_py(tmp_path: Path, body: str) -> str:
    f = tmp_path / "k.py"
    f.write_text("from sarek_py.frontend import kernel, Vec, f32, f64, i32, global_thread_id\n"
                 "@kernel\ndef k(a: Vec[f32], n: i32, d: f64):\n"
                 "    i = global_thread_id()\n" + f"    {body}\n")
    r = subprocess.run([sys.executable, "-m", "sarek_py.cli", "check", str(f)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


@pytest.mark.parametrize("body,message,col", [
    ("a[i] = a[i] * 2.0 + n", "operands have different types f32 and i32: kernels have no "
     "implicit conversion (cast: write f32(n) as C would convert it)", 12),
    ("a[i] = d", "cast it (f32(d))", 12),
])
def test_fe40_front_end_names_the_cast(tmp_path: Path, body: str, message: str,
                                       col: int) -> None:
    """FE-40: the Python front end names the cast with the operand as written, located
    with a caret."""
    err = _check_py(tmp_path, body)
    assert message in err, err
    assert f"k.py:5:{col}: error:" in err and err.rstrip().endswith("^"), err
