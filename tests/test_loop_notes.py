"""Notes users can act on (specs/loop-fusion.md, LF-40, LF-42; specs/host-program.md,
HP-44): what became of each renamed array, a while loop's refusal, declarations printed
as written, ``opt`` output ending with a newline."""

from __future__ import annotations

from pathlib import Path

import pytest

from sarek_py.cli.main import main
from sarek_py.ir.host.text import parse_program, parse_program_file, print_program

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((REPO / "examples").glob("*.sk"))

JACOBI = """program jacobi
  var n : i32 = 30;
  var a : f64[0:] allocatable;
  var b : f64[0:] allocatable;
  var c : f64[0:] allocatable;
begin
  allocate a[n]; allocate b[n]; allocate c[n];
  for t = 1 to 5 do
    parallel for (i = 1 to n - 2) do b[i] <- 0.5 * (a[i - 1] + a[i + 1]) done;
    parallel for (i = 1 to n - 2) do c[i] <- 0.5 * (b[i - 1] + b[i + 1]) done
  done
end
"""

RENAMED = """program p
  var n : i32 = 12;
  var u : f64[0:] allocatable;
  var f : f64[0:] allocatable;
begin
  allocate u[n + 2]; allocate f[n + 2];
  for t = 1 to 4 do
    parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done;
    parallel for (i = 1 to n) do u[i] <- u[i] - (f[i] - f[i - 1]) done
  done
end
"""


def _opt(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str],
         *extra: str) -> tuple[int, str, str]:
    f = tmp_path / "p.sk"
    f.write_text(text)
    code = main(["opt", str(f), "--notes", *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("passes, says", [
    (["-p", "fuse,swap"], "renamed u: swapped (PP-4"),
    ([], "renamed u: swapped (PP-4"),
    # copied back, the 12-point pair is a predicted tie (LF-121): the operations per
    # byte decide here (LF-63), the note's renamed arrays are what is checked
    (["-p", "fuse", "--fusion-threshold", "64"],
     "renamed u: copied back (not swapped: the swap transform was not selected)"),
    (["--gpu-loop-transforms", "fuse", "--fusion-threshold", "64"],
     "renamed u: copied back (not swapped"),
])
def test_lf42_each_renamed_array_says_whether_it_was_swapped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], passes: list[str],
        says: str) -> None:
    """LF-42: a fused pair's note says, for each renamed array, whether the swap was
    applied and, when not, why."""
    code, out, err = _opt(tmp_path, RENAMED, capsys, *passes)
    assert code == 0, err
    (note,) = [ln for ln in err.splitlines() if ln.startswith("note: ") and "fused" in ln]
    assert says in note, note
    assert out.endswith("\n") and not out.endswith("\n\n")


def test_lf42_refused_swap_says_the_rule(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """LF-42: a swap refused is said with its rule, per renamed array."""
    text = RENAMED.replace("(i = 1 to n) do u[i]", "(i = 1 to n - t) do u[i]")
    code, _, err = _opt(tmp_path, text, capsys)
    assert code == 0
    assert "renamed u: copied back, not swapped: [PP-3] the consumer's bounds read 't'" \
        in err, err


def test_lf40_while_barrier_note_through_the_cli(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """LF-40 in the notes: a pair in a while loop's body says why it is not fused."""
    text = JACOBI.replace("for t = 1 to 5 do", "while n < 0 do")
    code, _, err = _opt(tmp_path, text, capsys)
    assert code == 0
    assert "not fused: [LF-40] the loops are the body of a 'while' loop" in err, err


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_hp44_example_declarations_print_as_written(path: Path) -> None:
    """HP-44: every declaration of an example program prints as its source wrote it
    (``f64[0:, 0:]`` stays, not ``f64[, ]``); the printed text is a fixpoint (HP-11).
    Comments and line breaks are not kept by the IR, so whole-file equality is checked
    on the declarations."""
    text = path.read_text()
    if "\nprogram " not in "\n" + text:
        pytest.skip("a kernel file, no program")
    printed = print_program(parse_program_file(path))
    src = [ln.strip() for ln in text.split("begin")[0].splitlines()
           if ln.strip().startswith("var ")]
    got = [ln.strip() for ln in printed.split("begin")[0].splitlines()
           if ln.strip().startswith("var ")]
    assert got[-len(src):] == src
    assert print_program(parse_program(printed)) == printed


@pytest.mark.parametrize("decl", [
    "var a : f64[0:, 0:] allocatable;", "var a : f64[,] allocatable;",
    "var a : f32[] allocatable;", "var a : f64[0:] pointer;", "var a : f64[-1:, 1:] allocatable target;",
    "var a : i32[1:3];", "var a : i32[0:3];", "var a : i32[3];", "var a : i64[2, 3];",
])
def test_hp44_declaration_spellings_round_trip(decl: str) -> None:
    """HP-44: print(parse(x)) == x for a program of one declaration, in each spelling."""
    text = f"program p\n  {decl}\nbegin\n  ()\nend\n"
    assert print_program(parse_program(text)) == text


def test_hp44_a_pass_declaring_anew_prints_the_canonical_type(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """HP-44: the copies a pass declares print the canonical spelling (``f64[,]`` without
    the odd space), and the fused program reads back."""
    text = RENAMED.replace("f64[0:] allocatable", "f64[0:, 0:] allocatable").replace(
        "allocate u[n + 2]; allocate f[n + 2]", "allocate u[n + 2, 3]; allocate f[n + 2, 3]"
    ).replace("u[i]", "u[i, 0]").replace("u[i + 1]", "u[i + 1, 0]").replace(
        "f[i]", "f[i, 0]").replace("f[i - 1]", "f[i - 1, 0]")
    code, out, err = _opt(tmp_path, text, capsys)
    assert code == 0, err
    assert "var u : f64[0:, 0:] allocatable;" in out
    assert "[, ]" not in out
    assert print_program(parse_program(out)) == out
