"""A parallel loop of more iterations than a launch can number (specs/host-program.md
HP-55): a located error on the reference interpreter, as on a device."""

from __future__ import annotations

from pathlib import Path

import pytest
from rule_citations import assert_rules_cited

from sarek_py.cli.main import main
from sarek_py.host.interp import run_program
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.text import parse_program

LOOPS = {
    "1-D of 2^32": "parallel for (i = lo to hi) do if i == 0 then x[0] <- 1.0 done",
    "2-D of 2^31": "parallel for (i = 0 to 65535, j = 0 to 32767) do "
                   "if i == 0 && j == 0 then x[0] <- 1.0 done",
}


def text(loop: str) -> str:
    return f"""program p
  var lo : i32 = -2147483648;
  var hi : i32 = 2147483647;
  var x : f64[0:] allocatable;
begin
  allocate x[0:3];
  x[1] <- 2.0;
  {loop}
end
"""


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_hp55_a_loop_past_i32_threads_is_a_located_error(name: str) -> None:
    """HP-55: the reference interpreter refuses the loop at its location, naming the
    iterations and the limit; no uncaught overflow."""
    p = parse_program(text(LOOPS[name]), "big.sk")
    with pytest.raises(SarekError) as info:
        run_program(p)
    err = info.value
    n = 2**32 if "2^32" in name else 2**31
    assert f"parallel loop of {n} iterations: more than 2147483647" in err.message
    assert err.loc is not None and err.loc.line == 8


def test_hp55_a_loop_of_i32_max_iterations_is_not_refused_by_it() -> None:
    """HP-55: the limit is the launch's, 2^31 - 1: a loop of that many iterations passes
    it (and meets the interpreter's memory check instead, ALLOC: its own located error)."""
    loop = "parallel for (i = 1 to hi) do if i == 1 then stop 4 else x[0] <- 1.0 done"
    try:
        run_program(parse_program(text(loop), "edge.sk"))
    except SarekError as exc:
        assert "parallel loop of" not in exc.message, exc.message


def test_hp55_the_cli_prints_the_located_error(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """HP-55: ``sarek-py run`` prints ``file:line:col: error:`` and a caret, exit 1, no
    traceback."""
    f = tmp_path / "big.sk"
    f.write_text(text(LOOPS["1-D of 2^32"]))
    rc = main(["run", str(f)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert f"{f}:8:12: error: parallel loop of 4294967296 iterations" in err
    assert "^" in err and "Traceback" not in err


def test_rules_cited() -> None:
    """HP-55 is cited by a test here."""
    assert_rules_cited(__file__, "host-program", "HP", 55, 55)
