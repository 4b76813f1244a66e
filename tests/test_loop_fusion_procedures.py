"""Producer-consumer fusion inside procedure bodies (specs/loop-fusion.md, LF-17)."""

from __future__ import annotations

from typing import Any

import pytest

from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import BackendUnavailable
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.runtime import get_backend

HELPERS = "pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)\n"

# a smoothing step in a procedure: f and g are the procedure's own arrays, u a dummy
SMOOTH = HELPERS + """
program p
  var n : i32 = 40; var steps : i32 = 5;
  var u : f64[0:] allocatable; var w : f64[0:] allocatable;
  proc smooth(x : f64[0:] inout, m : i32 in, k : i32 in)
    var f : f64[0:] allocatable; var g : f64[0:] allocatable;
  =
    allocate f[0:m]; allocate g[0:m];
    for t = 1 to k do
      parallel for (i = 0 to m - 1) do f[i] <- avg(x[i], x[i + 1]) done;
      parallel for (i = 1 to m - 1) do g[i] <- f[i] - f[i - 1] done;
      parallel for (i = 1 to m - 1) do x[i] <- x[i] + 0.25 * g[i] done
    done;
    deallocate f; deallocate g
  end
begin
  allocate u[0:n]; allocate w[0:n];
  parallel for (i = 0 to n) do u[i] <- f64(i * i % 7) - 2.5 done;
  call smooth(u, n, steps);
  parallel for (i = 0 to n) do w[i] <- u[i] done;
  call smooth(w, n, 2)
end
"""

# the consumer writes the procedure's own allocatable h, which the producer reads: h is
# renamed (and ping-ponged with swap); the copy is declared in the procedure
RENAMED = HELPERS + """
program p
  var n : i32 = 30; var out : f64[0:] allocatable;
  proc run(o : f64[0:] inout, m : i32 in)
    var h : f64[0:] allocatable; var f : f64[0:] allocatable;
  =
    allocate h[0:m]; allocate f[0:m];
    parallel for (i = 0 to m) do h[i] <- f64(i % 5) done;
    for t = 1 to 6 do
      parallel for (i = 0 to m - 1) do f[i] <- avg(h[i], h[i + 1]) done;
      parallel for (i = 1 to m - 1) do h[i] <- h[i] + 0.5 * (f[i] - f[i - 1]) done
    done;
    parallel for (i = 0 to m) do o[i] <- h[i] done
  end
begin
  allocate out[0:n];
  call run(out, n)
end
"""


def reports(src: str, swap: bool = False) -> tuple[Program, Program, list[PairReport]]:
    prog = parse_program(src, "proc.sk")
    fused, reps = fuse_program(prog, FusionOptions(swap=swap))
    text = print_program(fused)
    assert print_program(parse_program(text)) == text
    return prog, fused, reps


def same_arrays(a: Any, b: Any, names: tuple[str, ...]) -> None:
    for name in names:
        assert a.array(name).tobytes() == b.array(name).tobytes(), name


def backends() -> list[Any]:
    out: list[Any] = [None]
    try:
        out.append(get_backend("opencl"))
    except BackendUnavailable:
        pass
    return out


def test_lf17_pairs_in_a_procedure_are_fused() -> None:
    prog, fused, reps = reports(SMOOTH)
    # (f, g) fused; g's loop cannot take x's along (LF-70, LF-73): x is a dummy (LF-9)
    assert [r.fused for r in reps] == [True, False]
    assert reps[1].refusal is not None and reps[1].refusal.rule == "LF-9"
    assert "the pair alone would fuse" in str(reps[1])
    proc = fused.procedures[0]
    # f is deallocated right after the chain: no last-iteration branch, no loop end's
    # copy in the procedure or the program (LF-110)
    assert "no last-iteration branch: f deallocated after the chain" in str(reps[0])
    assert not any(d.var.name == "t_last" for d in (*proc.decls, *fused.decls))
    assert sum(isinstance(s, ParFor) for s in iter_host(proc.body)) > \
        sum(isinstance(s, ParFor) for s in iter_host(prog.procedures[0].body))
    ref = run_program(prog)
    for be in backends():
        got = run_program(fused if be is None else offload(fused), device=be,
                          check_races=be is None)
        same_arrays(ref, got, ("u", "w"))


@pytest.mark.parametrize("swap", [False, True])
def test_lf17_renamed_local_array_in_a_procedure(swap: bool) -> None:
    prog, fused, reps = reports(RENAMED, swap)
    [rep] = reps
    assert rep.fused and rep.plan is not None
    assert [a.name for a in rep.plan.renamed] == ["h"]
    proc = fused.procedures[0]
    assert any(d.var.name == "h_copy" and d.allocatable for d in proc.decls)
    assert any(d.var.name == "swapped" for d in proc.decls) == swap
    # f is not deallocated: the last iteration runs the original loops (LF-15, LF-110),
    # and the loop end's copy is the procedure's, not the program's
    assert any(d.var.name == "t_last" for d in proc.decls)
    assert not any(d.var.name == "t_last" for d in fused.decls)
    ref = run_program(prog)
    for be in backends():
        got = run_program(fused if be is None else offload(fused), device=be,
                          check_races=be is None)
        same_arrays(ref, got, ("out",))


def test_lf17_two_dummies_one_written_are_refused() -> None:
    """smooth2(x, y): the producer reads dummy x, the consumer writes dummy y. A caller
    passing one array for both would see the fused loop read elements the consumer has
    already written, so the pair is refused (and the program still runs as written)."""
    src = HELPERS + """
program p
  var n : i32 = 20; var u : f64[0:] allocatable;
  proc smooth2(x : f64[0:] in, y : f64[0:] inout, m : i32 in)
    var f : f64[0:] allocatable;
  =
    allocate f[0:m];
    for t = 1 to 3 do
      parallel for (i = 0 to m - 1) do f[i] <- avg(x[i], x[i + 1]) done;
      parallel for (i = 1 to m - 1) do y[i] <- f[i] - f[i - 1] done
    done
  end
begin
  allocate u[0:n];
  parallel for (i = 0 to n) do u[i] <- f64(i % 3) done;
  call smooth2(u, u, n)
end
"""
    prog, fused, reps = reports(src)
    [rep] = reps
    assert not rep.fused and rep.refusal is not None and rep.refusal.rule == "LF-17"
    assert "'x'" in str(rep.refusal) and "'y'" in str(rep.refusal)
    assert fused is prog


def test_lf17_a_program_array_named_in_the_procedure_counts_too() -> None:
    src = HELPERS + """
program p
  var n : i32 = 20; var u : f64[0:] allocatable; var v : f64[0:] allocatable;
  proc step(x : f64[0:] inout, m : i32 in)
    var f : f64[0:] allocatable;
  =
    allocate f[0:m];
    for t = 1 to 3 do
      parallel for (i = 0 to m - 1) do f[i] <- avg(v[i], v[i + 1]) done;
      parallel for (i = 1 to m - 1) do x[i] <- f[i] - f[i - 1] done
    done
  end
begin
  allocate u[0:n]; allocate v[0:n];
  parallel for (i = 0 to n) do v[i] <- f64(i % 3) done;
  call step(v, n)
end
"""
    _, _, reps = reports(src)
    [rep] = reps
    assert rep.refusal is not None and rep.refusal.rule == "LF-17"


def test_lf17_a_dummy_is_not_allocatable_for_renaming() -> None:
    """LF-9 still holds in a procedure: a renamed dummy has no allocatable declaration."""
    src = HELPERS + """
program p
  var n : i32 = 20; var u : f64[0:] allocatable;
  proc step(x : f64[0:] inout, m : i32 in)
    var f : f64[0:] allocatable;
  =
    allocate f[0:m];
    for t = 1 to 3 do
      parallel for (i = 0 to m - 1) do f[i] <- avg(x[i], x[i + 1]) done;
      parallel for (i = 1 to m - 1) do x[i] <- x[i] + f[i] - f[i - 1] done
    done
  end
begin
  allocate u[0:n];
  call step(u, n)
end
"""
    _, _, reps = reports(src)
    [rep] = reps
    assert rep.refusal is not None and rep.refusal.rule == "LF-9"
