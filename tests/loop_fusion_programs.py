"""The host program of the tests of a fused pair's boundary and of its split
(tests/test_loop_fusion_boundary.py, tests/test_loop_fusion_split.py): four f64 arrays
over -3 .. n + 3, set once, then the loops given inside a time loop; fusing it with its
printed form checked; runs compared bitwise; a backend or a skip."""

from __future__ import annotations

from typing import Any

import pytest

from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.runtime import get_backend

TEMPLATE = """
program {name}
  var n : i32 = {n}; var nt : i32 = {nt};
  var u : f64[-3:] allocatable; var f : f64[-3:] allocatable; var g : f64[-3:] allocatable;
  var h : f64[-3:] allocatable;
begin
  allocate u[-3:n + 3]; allocate f[-3:n + 3]; allocate g[-3:n + 3]; allocate h[-3:n + 3];
  parallel for (i = -3 to n + 3) do (
    u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0;
    f[i] <- f64(i) * 0.25 + 100.0;
    g[i] <- {g0};
    h[i] <- -f64(i)
  ) done;
  for t = 1 to nt do
    {loops}
  done
end
"""
#: the arrays of :data:`TEMPLATE`
NAMES = ("u", "f", "g", "h")
JACOBI_P = "parallel for (i = 1 to n - 2) do f[i] <- 0.5 * (u[i - 1] + u[i + 1]) done"


def program_text(*loops: str, n: int = 6, nt: int = 3, g0: str = "0.0",
                 name: str = "b") -> str:
    """:data:`TEMPLATE` with ``loops`` in its time loop, ``g`` set to ``g0`` first."""
    return TEMPLATE.format(name=name, n=n, nt=nt, g0=g0, loops=";\n    ".join(loops))


def prog(*loops: str, n: int = 6, nt: int = 3, g0: str = "0.0", name: str = "b") -> Program:
    return parse_program(program_text(*loops, n=n, nt=nt, g0=g0, name=name), f"{name}.sk")


def fuse(p: Program, swap: bool = False) -> tuple[Program, list[PairReport]]:
    """``p`` fused, its printed form read back to the same text."""
    out, reports = fuse_program(p, FusionOptions(swap=swap))
    text = print_program(out)
    assert print_program(parse_program(text)) == text
    return out, reports


def same(ref: Any, got: Any, names: tuple[str, ...], what: str) -> None:
    """The arrays ``names`` of two runs' results hold the same bytes."""
    for name in names:
        assert ref.array(name).tobytes() == got.array(name).tobytes(), (what, name)


def backend(name: str) -> Any:
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
