"""Intermediates dead after the chain: no last-iteration branch (specs/loop-fusion.md
LF-110..LF-113)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.backend import run_program_on
from sarek_py.host.interp import HostResult
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program, print_program

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "advection_diffusion.sk"
CASES = 400 if os.environ.get("SAREK_FUZZ") else 40


def program(tail: str, *, head: str = "", wrap: str = "", decls: str = "",
            stages: int = 2, renamed: bool = True) -> str:
    """A 1-D chain (producer writes ``f``, the consumer reads it at i - 1 and i + 1 and
    updates ``u`` in place when ``renamed``, else writes ``g``), inside ``for t`` and
    ``for s``; ``tail`` runs after the outer loop; ``wrap`` (``if`` or ``while``) puts the
    loops and the tail inside such a statement."""
    cons = ("u[i] <- u[i] * 0.75 + (f[i - 1] + f[i + 1]) * 0.125" if renamed
            else "g[i] <- (f[i - 1] + f[i + 1]) * 0.5")
    loops = f"""
  for t = 1 to nt do
    for s = 1 to {stages} do
      parallel for (i = 0 to n + 1) do f[i] <- u[i] * 0.5 - u[i + 1] * 0.25 done;
      parallel for (i = 1 to n) do {cons} done
    done
  done;
  {tail}"""
    if wrap == "if":
        loops = f"if n > 0 then ({loops})"
    elif wrap == "while":
        loops = f"k := 0; while k < 2 do ({loops}; k := k + 1) done"
    return f"""
program d
  var n : i32 = 9; var nt : i32 = 3; var k : i32; var x : f64;
  var u : f64[-1:] allocatable; var f : f64[0:] allocatable; var g : f64[0:] allocatable;
  var w : f64[0:] allocatable;
  {decls}
begin
  allocate u[-1:n + 2]; allocate f[0:n + 1]; allocate g[0:n + 1]; allocate w[0:n + 1];
  parallel for (i = -1 to n + 2) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done;
  {head}
  {loops}
end
"""


def fused(src: str, swap: bool = True) -> tuple[Program, Program, str]:
    p = parse_program(src)
    q, reports = fuse_program(p, FusionOptions(swap=swap))
    assert any(r.fused for r in reports), [str(r) for r in reports]
    # the printed program is what users run: it must mean the same (HP-16)
    q = parse_program(print_program(q))
    return p, q, "\n".join(str(r) for r in reports)


def has_last(q: Program) -> bool:
    return "_last" in print_program(q)


def same(a: HostResult, b: HostResult) -> None:
    """HP-18: every variable of ``a`` equals ``b``'s of the same name, bitwise."""
    for name, v in a.values.items():
        w = b.values[name]
        if isinstance(v, np.ndarray):
            assert isinstance(w, np.ndarray), name
            assert v.shape == w.shape and v.dtype == w.dtype, name
            assert v.tobytes() == w.tobytes(), name
        else:
            assert (v is None) == (w is None), name
            if v is not None:
                assert np.asarray(v).tobytes() == np.asarray(w).tobytes(), name
    assert a.output == b.output and a.stop_code == b.stop_code


def agree(p: Program, q: Program, backend: str = "interp", **preset: int) -> None:
    a, _ = run_program_on(p, backend, preset)
    b, _ = run_program_on(q, backend, preset)
    same(a, b)


DEALLOC = "deallocate f"


# ------------------------------------------------------------------------ LF-110


@pytest.mark.parametrize("swap", [True, False])
@pytest.mark.parametrize("nt", [0, 1, 2, 3])
def test_lf110_deallocated_after_the_chain_no_last_iteration_branch(swap: bool,
                                                                    nt: int) -> None:
    """LF-110: f deallocated right after the chain: no `_last`, the same bytes."""
    p, q, note = fused(program(DEALLOC), swap=swap)
    assert not has_last(q), print_program(q)
    assert "no last-iteration branch: f deallocated after the chain" in note
    agree(p, q, nt=nt)


def test_lf110_without_a_deallocation_the_last_iteration_runs_the_original_loops() -> None:
    """LF-110, LF-112: at the program's end the intermediates are results."""
    p, q, note = fused(program("x := 1.0"))
    assert has_last(q)
    assert ("the last iteration runs the original loops so that f hold their values "
            "(LF-15): 'f' is not deallocated before the program ends") in note
    agree(p, q)


@pytest.mark.parametrize("tail, cause", [
    ("x := f[2]; deallocate f", "'f' is used at line"),
    ("w[1] <- f[3]; deallocate f", "'f' is used at line"),
    ("parallel for (i = 0 to n) do w[i] <- f[i] done; deallocate f", "'f' is used at line"),
    ("if n > 5 then stop 3; deallocate f", "the program may stop at line"),
    ("parallel for (i = 0 to n) do if i == 4 then stop 2 done; deallocate f",
     "the program may stop at line"),
    ("if n > 5 then deallocate f", "'f' is used at line"),
    ("deallocate f; allocate f[0:n + 1]", None),  # dead: the new f is another array
    ("x := 2.0; w[1] <- 1.5; deallocate f", None),
    ("deallocate g; deallocate f", None),
])
def test_lf110_the_walk_stops_at_a_use_a_stop_or_the_end(tail: str, cause: str | None
                                                        ) -> None:
    """LF-110: a statement between the chain and the deallocation that reads, writes or
    deallocates the intermediate in a branch, or may stop, keeps the branch; statements
    that do not touch it are walked past (LF-110)."""
    p, q, note = fused(program(tail))
    if cause is None:
        assert not has_last(q), note
    else:
        assert has_last(q) and cause in note, note
    for nt in (1, 2):
        for n in (9, 3):
            agree(p, q, nt=nt, n=n)


def test_lf110_out_through_an_if_branch() -> None:
    """LF-110: the walk goes out of the `if` branch holding the chain."""
    p, q, note = fused(program("x := 1.0", wrap="if") .replace(
        "  x := 1.0)\nend", "  x := 1.0); deallocate f\nend"))
    assert not has_last(q), note
    agree(p, q, nt=2)


def test_lf110_an_enclosing_loop_runs_the_chain_again() -> None:
    """LF-110: deallocated only after an enclosing ``while``: its next iteration's chain is after
    this one's; the walk ends at the loop's body end with ``f`` live."""
    src = program("x := 1.0", wrap="while").replace(
        "k := k + 1) done", "k := k + 1) done; deallocate f")
    p, q, note = fused(src)
    assert has_last(q) and "before the loop at line" in note, note
    agree(p, q, nt=2)


def test_lf110_a_pointer_may_read_it() -> None:
    """LF-110: an intermediate a pointer names is live."""
    src = program(DEALLOC, decls="var pf : f64[0:] pointer;",
                  head="pf => f;").replace("var f : f64[0:] allocatable",
                                          "var f : f64[0:] allocatable target")
    p = parse_program(src)
    q, reports = fuse_program(p, FusionOptions(swap=True))
    note = "\n".join(map(str, reports))
    if any(r.fused for r in reports):  # fused at all: then not without the branch
        assert has_last(q) and "may be read through another name" in note, note
        agree(p, q, nt=2)


def test_lf110_every_intermediate_of_a_chain_must_be_dead() -> None:
    """LF-110: a chain of three loops has two intermediates (LF-70); deallocating one keeps the
    branch and names the other."""
    src = """
program c3
  var n : i32 = 12; var nt : i32 = 3;
  var u : f64[-1:] allocatable; var a : f64[0:] allocatable; var b : f64[0:] allocatable;
  var v : f64[0:] allocatable;
begin
  allocate u[-1:n + 2]; allocate a[0:n + 1]; allocate b[0:n + 1]; allocate v[0:n + 1];
  parallel for (i = -1 to n + 2) do u[i] <- f64(i % 5) - 1.5 done;
  for t = 1 to nt do
    parallel for (i = 0 to n + 1) do a[i] <- u[i] * 0.5 + u[i + 1] done;
    parallel for (i = 0 to n + 1) do b[i] <- a[i] * 0.25 done;
    parallel for (i = 1 to n) do v[i] <- b[i - 1] - b[i + 1] done
  done;
  deallocate a{tail}
end
"""
    p, q, note = fused(src.replace("{tail}", ""))
    assert has_last(q) and "'b' is not deallocated" in note, note
    agree(p, q)
    p, q, note = fused(src.replace("{tail}", "; deallocate b"))
    assert not has_last(q) and "a, b deallocated after the chain" in note, note
    for nt in (0, 1, 3):
        agree(p, q, nt=nt)


@pytest.mark.parametrize("tail", ["deallocate f", "x := 1.0"])
def test_lf110_in_a_procedure(tail: str) -> None:
    """LF-110: a procedure's local intermediate deallocated in the procedure is dead; one left
    allocated is kept live to the procedure's end (conservative: LF-110 does not treat a
    local's end as its death)."""
    src = f"""
program pr
  var n : i32 = 10; var u : f64[-1:] allocatable;
  proc step(ou : f64[-1:] inout, n : i32 in)
    var f : f64[0:] allocatable; var u : f64[-1:] allocatable; var x : f64;
  =
    allocate f[0:n + 1]; allocate u[-1:n + 2];
    parallel for (i = -1 to n + 2) do u[i] <- ou[i] done;
    for t = 1 to 3 do
      parallel for (i = 0 to n + 1) do f[i] <- u[i] * 0.5 - u[i + 1] * 0.25 done;
      parallel for (i = 1 to n) do u[i] <- u[i] * 0.75 + (f[i - 1] + f[i + 1]) * 0.125 done
    done;
    parallel for (i = -1 to n + 2) do ou[i] <- u[i] done;
    {tail}
  end
begin
  allocate u[-1:n + 2];
  parallel for (i = -1 to n + 2) do u[i] <- f64(i % 4) * 0.5 done;
  call step(u, n);
  call step(u, n)
end
"""
    p, q, note = fused(src)
    if tail.startswith("deallocate"):
        assert not has_last(q) and "no last-iteration branch: f deallocated" in note, note
    else:
        assert has_last(q) and "'f' is not deallocated before the procedure ends" in note
    agree(p, q)
    agree(p, q, "c", n=37)


# ------------------------------------------------------------------------ LF-111


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("nt", [0, 1, 2, 5])
def test_lf111_swap_copies_back_after_the_chain(stages: int, nt: int) -> None:
    """LF-111: an odd or even number of fused executions: the copy back after the chain leaves
    the array as the original does (PP-5 after the loop)."""
    p, q, note = fused(program(DEALLOC, stages=stages), swap=True)
    text = print_program(q)
    assert "swapped (PP-4" in note and not has_last(q)
    after = text[text.rindex("swapped := !swapped"):]  # what follows the chain
    assert "if swapped then" in after and after.index("u[i] <- u_copy[i]") < after.index(
        "deallocate u_copy"), after
    agree(p, q, nt=nt)


def test_lf111_with_a_runtime_check_the_failing_branch_copies_back_first() -> None:
    """LF-111: a consumer whose reads are proved only by a run-time check (LF-8): without the
    last-iteration test the branch is `if !check`, and both sizes (check passing and
    failing) give the original's bytes."""
    src = program(DEALLOC).replace("f[i - 1] + f[i + 1]", "f[i - 1] + f[i + k]").replace(
        "begin\n", "begin\n  k := 1;\n", 1)
    p = parse_program(src)
    q, reports = fuse_program(p, FusionOptions(swap=True))
    if not any(r.fused for r in reports):
        pytest.skip("the offset read is refused here: " + "; ".join(map(str, reports)))
    assert not has_last(q)
    for k in (1, 0, 5):
        agree(p, q, k=k, nt=3)


# ------------------------------------------------------------------------ LF-112


def test_lf112_the_example_says_it_runs_the_fused_loop_in_every_stage() -> None:
    """LF-112, LF-110: the advection example's note and bytes."""
    from sarek_py.ir.host.text import parse_program_file

    p = parse_program_file(EXAMPLE)
    q, reports = fuse_program(p, FusionOptions(swap=True))
    note = "\n".join(map(str, reports))
    assert ("no last-iteration branch: fxa, fxd, fya, fyd deallocated after the chain, "
            "the fused loop runs in every iteration (LF-110)") in note
    assert not has_last(q)
    for nt in (0, 1, 2):
        agree(p, q, nx=7, ny=5, nt=nt)


def test_lf112_the_note_names_the_loop_to_deallocate_after() -> None:
    """LF-112: the note names the line of the loop after which to deallocate."""
    src = program("x := 1.0")
    line = src.splitlines().index("  for t = 1 to nt do") + 1
    _, _, note = fused(src)
    assert (f"deallocating them after the loop at line {line} drops that branch (LF-110)"
            in note), note


# ------------------------------------------------------------------------ LF-113

TAILS = [
    "deallocate f", "deallocate f; deallocate g", "x := 1.0; deallocate f",
    "x := f[1]; deallocate f", "if n > 4 then stop 7; deallocate f",
    "w[2] <- 3.0; deallocate f", "deallocate g", "x := 2.0",
    "parallel for (i = 0 to n) do w[i] <- f[i] * 2.0 done; deallocate f",
    "if n > 4 then x := 1.0 else x := 2.0; deallocate f",
]


def case(seed: int) -> tuple[str, bool]:
    r = random.Random(seed)
    tail = r.choice(TAILS)
    wrap = r.choice(["", "", "if", "while"])
    src = program(tail, wrap=wrap, stages=r.randint(1, 3), renamed=r.random() < 0.7)
    if wrap == "while":  # the next iteration's chain needs the arrays again
        again = "".join(f"; allocate {a}[0:n + 1]" for a in "fg" if f"deallocate {a}" in tail)
        src = src.replace(f"{tail}", f"{tail}{again}").replace(
            "k := k + 1) done", "k := k + 1) done" + r.choice(["", "; deallocate f"]))
    return src, r.random() < 0.5


def run_case(seed: int, backends: tuple[str, ...] = ("interp",)) -> bool:
    src, swap = case(seed)
    p = parse_program(src)
    q, reports = fuse_program(p, FusionOptions(swap=swap))
    if not any(r.fused for r in reports):
        return False
    q = parse_program(print_program(q))
    note = "\n".join(map(str, reports))
    # the branch is dropped exactly when the note says so (LF-110, LF-112)
    assert has_last(q) == ("the last iteration runs the original loops" in note), note
    assert has_last(q) != ("no last-iteration branch" in note), note
    r = random.Random(seed + 1)
    for backend in backends:
        for _ in range(2):
            agree(p, q, backend, n=r.randint(1, 12), nt=r.randint(0, 4))
    return not has_last(q)


def test_lf113_generated_programs_interp() -> None:
    """LF-113: generated programs on the interpreter."""
    dropped = sum(run_case(seed) for seed in range(CASES))
    assert dropped >= CASES // 5, dropped  # the generator reaches the new form


def test_lf113_generated_programs_c() -> None:
    """LF-113: generated programs on c."""
    from sarek_py.runtime import get_backend

    try:
        get_backend("c")
    except Exception as exc:  # pragma: no cover - no C compiler
        pytest.skip(f"no c backend: {exc}")
    for seed in range(1000, 1000 + max(CASES // 8, 4)):
        run_case(seed, ("c",))


def test_lf110_lf113_every_rule_is_cited() -> None:
    """Every rule of the range is cited by a test here."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 110, 113)


@pytest.mark.parametrize("swap", [True, False])
def test_lf110_a_second_run_leaves_the_output_as_it_is(swap: bool) -> None:
    """LF-110 with LF-72: `opt` on its own output (no last-iteration branch) fuses
    nothing more and prints the same program."""
    p, q, _ = fused(program(DEALLOC), swap=swap)
    again, reports = fuse_program(q, FusionOptions(swap=swap))
    assert not any(r.fused for r in reports), [str(r) for r in reports]
    assert print_program(again) == print_program(q)
    agree(p, again, nt=3)
