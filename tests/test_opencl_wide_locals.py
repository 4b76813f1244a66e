"""64-bit locals in OpenCL C (specs/codegen.md CG-76): the rows kernel's index stays
``long``, integer builtins get their operands' one type, and the results are the
interpreter's."""

from __future__ import annotations

import pytest
from rule_citations import assert_rules_cited

from sarek_py.codegen import emit_opencl
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

PROGRAM = """program p
  var n : i32 = 300;
  var x : i32[0:, 0:] allocatable;
  var y : f64[0:, 0:] allocatable;
  var u : f64[0:, 0:] allocatable;
begin
  allocate x[0:n - 1, 0:n - 1]; allocate y[0:n - 1, 0:n - 1]; allocate u[0:n - 1, 0:n - 1];
  parallel for (i = 0 to n - 1, j = 0 to n - 1) do u[i, j] <- f64((i * 7 + j) % 11) done;
  parallel for (i = 1 to n - 2, j = 1 to n - 2) do (
    x[i, j] <- min(j, 5) + max(i, j + 1) * abs(j - 7) + (j % 7) / 2 - min(i - 1, 3);
    y[i, j] <- u[i, j - 1] + u[i, j] * 0.5 + u[i, j + 1] + f64(min(j * 2, 100))) done
end
"""


def test_cg76_rows_kernels_index_in_64_bits_and_cast_builtin_operands() -> None:
    """CG-76: the OpenCL rows kernel declares its loop variables ``long`` (the guard bounds
    them) and writes each integer builtin's operand holding one cast to ``int``."""
    q = offload(parse_program(PROGRAM, "w.sk"))
    rows = [k for k in q.kernels if k.name.endswith("_rows") and "x" in
            {p.name for p in k.params}]
    assert rows
    src = emit_opencl(rows[0])
    assert "long j = j_64;  // an int: the guard bounds it" in src
    assert "int j = (int)j_64" not in src
    assert "min((int)j, 5)" in src and "max((int)i, (int)(j + 1))" in src


def test_cg76_same_bytes_on_opencl() -> None:
    """CG-76: on PoCL the program's every array is the reference interpreter's."""
    try:
        be = get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    p = parse_program(PROGRAM, "w.sk")
    ref = run_program(p)
    got = run_program(offload(p), device=be, check_races=False)
    for a in "xyu":
        assert got.array(a).tobytes() == ref.array(a).tobytes(), a


def test_rules_cited() -> None:
    """CG-76 is cited by a test here."""
    assert_rules_cited(__file__, "codegen", "CG", 76, 76)
