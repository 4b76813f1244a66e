"""Boundary reads of fused pairs (specs/loop-fusion.md LF-50..LF-53): a consumer reading an
intermediate outside the producer's domain keeps the stored element there (the select
form), its interior is split off by one test, and every accepted fusion is bitwise the
unfused program at every size: empty interiors (n = 0 .. 3), consumers whose domain does not
meet the producer's, guards of several alternatives, ping-pong, OpenCL."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from loop_fusion_programs import JACOBI_P, NAMES, backend, fuse, prog, same

from sarek_py.fusion.loops.fusion import PairReport
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.program import HIf, ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.nodes import Cond, If
from sarek_py.ir.visit import iter_nodes

JACOBI_C = "parallel for (i = 1 to n - 2) do u[i] <- 0.25 * (f[i - 1] + f[i] + f[i + 1]) done"


def pair(p: Program, swap: bool = False) -> tuple[Program, PairReport]:
    out, [r] = fuse(p, swap)
    return out, r


def equal(a: Program, b: Program, device: Any = None) -> None:
    ra = run_program(a)
    rb = run_program(b, check_races=True) if device is None else \
        run_program(offload(b), device=device)
    same(ra, rb, NAMES, "equal")


def fused_at_every_size(producer: str, consumer: str, sizes: range = range(0, 9),
                        edges: tuple[str, ...] = ("f",)) -> int:
    """Every size: fused with the given boundary arrays, equal with and without swap.
    Gives the number of sizes whose unfused program ran (others read outside an array)."""
    ran = 0
    for n in sizes:
        p = prog(producer, consumer, n=n)
        try:
            run_program(p)
        except SarekError:
            continue
        ran += 1
        for swap in (False, True):
            out, r = pair(p, swap)
            assert r.plan is not None, str(r)
            assert tuple(sorted(v.name for v in r.plan.edges)) == edges, str(r)
            equal(p, out)
    return ran


def test_lf50_jacobi_boundary_read_as_stored() -> None:
    """LF-50: jacobi's consumer reads f[0] and f[n - 1], which the producer never writes:
    fused (the select form) and equal at every n, the interior empty for n <= 3."""
    assert fused_at_every_size(JACOBI_P, JACOBI_C) == 9


def test_lf50_jacobi_boundary_read_at_two_sizes() -> None:
    """LF-50 (under typeguard; the sweep above runs every n): jacobi fused and equal with
    an empty interior (n = 2) and a wide one (n = 7)."""
    assert fused_at_every_size(JACOBI_P, JACOBI_C, sizes=range(2, 8, 5)) == 2


def test_lf50_consumer_domain_disjoint_from_the_producer() -> None:
    """LF-50: a consumer whose whole domain reads outside the producer's reads every
    element as stored; one that overlaps it only partly mixes the two."""
    p = "parallel for (i = 3 to 4) do f[i] <- u[i] * 3.0 done"
    assert fused_at_every_size(p, "parallel for (i = -2 to 0) do g[i] <- f[i] + f[i - 1] done"
                               ) == 8  # n = 0 writes f[4] outside f: not a valid program
    assert fused_at_every_size(p, "parallel for (i = -2 to n + 3) do g[i] <- f[i] done") == 8
    # the producer's domain empty at every size: every read keeps the stored element
    assert fused_at_every_size(p.replace("3 to 4", "n + 1 to n"),
                               "parallel for (i = 0 to n) do g[i] <- f[i] done") == 9


@pytest.mark.parametrize("guard", [
    "if i >= 2 then ",                       # one alternative: no LF-8 check can pass
    "if i <= 1 || i >= n - 1 then ",         # two alternatives (LF-8 has no check)
    "if i != 2 && i != n - 2 then ",
    "if 2 * i >= n then ",
])
def test_lf50_guarded_producers(guard: str) -> None:
    """LF-50: the domain is the producer's bounds and the store's tests, evaluated exactly
    as the producer does (tests only inside the bounds)."""
    p = f"parallel for (i = 0 to n) do {guard}f[i] <- u[i] - u[i + 1] done"
    c = "parallel for (i = -1 to n + 1) do g[i] <- f[i - 1] * 2.0 + f[i + 1] done"
    assert fused_at_every_size(p, c) >= 8


def test_lf50_two_intermediates_only_one_at_the_edge() -> None:
    """LF-50: only the intermediate read outside its domain gets the select; the other is
    recomputed plainly."""
    p = ("parallel for (i = 0 to n) do (f[i] <- u[i] + 1.0; if i >= 1 then h[i] <- u[i] * 2.0)"
         " done")
    c = "parallel for (i = 1 to n) do g[i] <- f[i] + h[i - 1] done"
    assert fused_at_every_size(p, c, edges=("h",)) == 9


def test_lf50_two_dimensional_edges() -> None:
    """LF-50/LF-52 in 2-D: a guard on two indices, reads at the four neighbours."""
    text = """
program d
  var n : i32 = N; var m : i32 = M;
  var a : f64[0:, 0:] allocatable; var b : f64[0:, 0:] allocatable;
  var c : f64[0:, 0:] allocatable;
begin
  allocate a[0:m + 1, 0:n + 1]; allocate b[0:m + 1, 0:n + 1]; allocate c[0:m + 1, 0:n + 1];
  parallel for (j = 0 to m + 1, i = 0 to n + 1) do (
    a[j, i] <- f64((i * 7 + j * 3) % 11) - 5.0; b[j, i] <- f64(i - j); c[j, i] <- 0.5
  ) done;
  for t = 1 to 3 do
    parallel for (j = 1 to m, i = 1 to n) do if i + j >= 3 then b[j, i] <- a[j, i] * 0.5 done;
    parallel for (j = 1 to m, i = 1 to n) do
      a[j, i] <- b[j - 1, i] + b[j + 1, i] + b[j, i - 1] + b[j, i + 1] - a[j, i]
    done
  done
end
"""
    for n, m in ((0, 0), (1, 1), (1, 3), (2, 2), (4, 3)):
        p = parse_program(text.replace("N;", f"{n};").replace("M;", f"{m};"))
        ref = run_program(p)
        for swap in (False, True):
            out, r = pair(p, swap)
            assert r.plan is not None and r.plan.interior is not None, str(r)
            same(ref, run_program(out), ("a", "b", "c"), f"{n},{m}")


def test_lf51_subscript_of_another_type_is_refused() -> None:
    """LF-51: an i64 subscript that may leave the i32 producer's domain cannot be tested
    against it (converting it could wrap into the domain): refused, naming the read."""
    p = prog("parallel for (i = 1 to n) do f[i] <- u[i] done",
             "parallel for (i = 1 to n) do g[i] <- f[i64(i) - 1L] done")
    out, r = pair(p)
    assert r.refusal is not None and r.refusal.rule == "LF-51", str(r)
    assert "'f'" in r.refusal.reason and "i64" in r.refusal.reason and out is p


def test_lf52_interior_has_no_selects() -> None:
    """LF-52: the fused body is one test: the interior (every read in the domain) recomputes
    plainly, the rest keeps the selects; with the interior empty it still runs (above).
    LF-88: a producer whose store is under a test has no box, so the test stays in the
    loop (a box splits into loops of their own: tests/test_loop_fusion_split.py)."""
    guarded = JACOBI_P.replace("do f[i]", "do if i != 0 then f[i]")
    out, r = pair(prog(guarded, JACOBI_C))
    assert r.plan is not None and r.plan.interior is not None and r.plan.split is None
    assert "under a test" in str(r) and "(LF-88)" in str(r), str(r)
    assert fused_at_every_size(guarded, JACOBI_C) == 9
    [fused] = [s for s in iter_host(out.body) if isinstance(s, ParFor)
               and isinstance(s.body, If) and s.body.else_ is not None]
    assert isinstance(fused.body, If) and fused.body.else_ is not None
    assert not any(isinstance(x, Cond) for x in iter_nodes(fused.body.then))
    assert sum(isinstance(x, Cond) for x in iter_nodes(fused.body.else_)) == 3


def test_lf52_subscript_through_a_let_keeps_the_selects() -> None:
    """LF-52: a subscript that depends on a let of the body cannot be tested before the
    body: no split, the selects run on every iteration (still equal)."""
    c = "parallel for (i = 1 to n - 2) do let k = i - 1 in g[i] <- f[k] + f[k + 2] done"
    assert fused_at_every_size(JACOBI_P, c) == 9
    out, r = pair(prog(JACOBI_P, c))
    assert r.plan is not None and r.plan.interior is None
    assert "on every iteration" in str(r)


def test_lf8_check_still_preferred_when_it_can_pass() -> None:
    """LF-8 before LF-50: coverage that an allocation can give keeps its run-time check and
    plain reads (no select)."""
    p = prog("parallel for (i = -3 to n) do f[i] <- u[i] done",
             "parallel for (i = 1 to n) do g[i] <- f[i] + f[i + 1] done")
    out, r = pair(p)
    assert r.plan is not None and r.plan.check is not None and not r.plan.edges
    assert "bounds of f lie in the producer's domain" in str(r)
    equal(p, out)  # the check fails (f is longer): the original loops run


def test_lf53_note_names_the_boundary_arrays() -> None:
    """LF-53: the pair's note says which arrays are read as stored and whether the interior
    was split off."""
    _, r = pair(prog(JACOBI_P, JACOBI_C))
    assert "reads f as stored outside the producer's domain (LF-50), the interior fused " \
        "without selects (LF-52)" in str(r), str(r)


def test_lf15_lf50_last_iteration_and_host_if_untouched() -> None:
    """LF-15 with LF-50: the last iteration still runs the original loops (the fused branch
    is the else of the host test), so the intermediate holds the producer's values."""
    out, r = pair(prog(JACOBI_P, JACOBI_C, nt=1))
    assert r.fused and any(isinstance(s, HIf) for s in iter_host(out.body))
    equal(prog(JACOBI_P, JACOBI_C, nt=1), out)


def test_lf50_on_opencl() -> None:
    """LF-50/LF-52 offloaded on OpenCL: bitwise the unfused program (empty and non-empty
    interiors)."""
    be = backend("opencl")
    for n in (2, 7):
        p = prog(JACOBI_P, JACOBI_C, n=n)
        for swap in (False, True):
            out, _ = pair(p, swap)
            equal(p, out, device=be)
    p = prog("parallel for (i = 0 to n) do if i <= 1 || i >= n - 1 then f[i] <- u[i] done",
             "parallel for (i = -1 to n + 1) do g[i] <- f[i - 1] * 2.0 + f[i + 1] done", n=5)
    equal(p, pair(p)[0], device=be)
    assert np.isfinite(run_program(p).array("g")).all()


def test_lf52_inner_loop_subscript_and_length_bounds() -> None:
    """LF-52: a subscript through an inner loop's variable keeps the selects everywhere;
    LF-50 with bounds written through lengths (host values of the kernel), equal on the
    interpreter at every n."""
    c = ("parallel for (i = 1 to n - 2) do let mut acc = 0.0 in (for k = -1 to 1 do "
         "acc := acc + f[i + k] done; g[i] <- acc) done")
    for n in range(7):
        p = prog(JACOBI_P, c, n=n)
        out, r = pair(p)
        assert r.plan is not None and r.plan.edges and r.plan.interior is None, str(r)
        equal(p, out)
        p = prog(JACOBI_P.replace("n - 2", "length(h) - 9"),
                 JACOBI_C.replace("n - 2", "length(g) - 9"), n=n)
        out, r = pair(p)
        assert r.plan is not None and r.plan.interior is not None, str(r)
        equal(p, out)


def test_lf52_interior_needs_the_affine_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-52: the split is kept only when the affine analysis proves every read of the
    interior in the domain: an interior test one element too wide (a broken in_domain) is
    not proved, and the pair keeps the selects on every iteration (still equal)."""
    import attrs

    from sarek_py.fusion.loops import boundary
    from sarek_py.ir.nodes import Binary, BinaryOp, Const
    from sarek_py.ir.types import Scalar

    right = boundary.in_domain

    def too_wide(producer: ParFor, it: Any, subs: Any) -> Any:
        ix = tuple(attrs.evolve(x, start=Binary(BinaryOp.SUB, x.start, Const(1, Scalar.I32)))
                   for x in producer.indices)
        return right(attrs.evolve(producer, indices=ix), it, subs)

    monkeypatch.setattr(boundary, "in_domain", too_wide)
    p = prog(JACOBI_P, JACOBI_C)
    out, r = pair(p)
    assert r.plan is not None and r.plan.edges and r.plan.interior is None, str(r)
    equal(p, out)
