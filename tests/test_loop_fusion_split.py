"""The interior and the boundary of a fused pair as separate loops (specs/loop-fusion.md,
LF-85..LF-90): the interior nest recomputes plainly with no test, the boundary strips keep
the selects, the pieces partition the consumer's domain exactly once (checked exhaustively
on the bounds' formulas and end to end with a consumer that is not idempotent), and every
fused program is bitwise the unfused one on the interpreter, OpenCL and c: PolyBench
jacobi-1d/2d and heat-3d as published and at sizes where the interior is empty or one
point, 2-D/3-D edges, chains of three, ping-pong."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from loop_fusion_programs import JACOBI_P, NAMES, backend, fuse, program_text, same
from loop_fusion_programs import prog as shared_prog
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops import split as split_mod
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.program import HIf, LoopIndex, ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.nodes import Binary, BinaryOp, Cond, Const, Expr, If, Intrinsic, Ref, var
from sarek_py.ir.types import Scalar
from sarek_py.ir.visit import iter_nodes

HERE = Path(__file__).resolve().parent / "corpus" / "polybench"

#: g starts non-zero: a consumer that adds to it shows a point run twice or never
G0 = "f64(i % 5) - 2.0"
#: a consumer that adds to what it writes: running a point twice, or not at all, shows
ACCUM_C = "parallel for (i = 1 to n - 2) do g[i] <- g[i] + f[i - 1] * 2.0 + f[i + 1] done"


def text_of(*loops: str, n: int = 6, nt: int = 3) -> str:
    return program_text(*loops, n=n, nt=nt, g0=G0, name="s")


def prog(*loops: str, n: int = 6, nt: int = 3) -> Program:
    return shared_prog(*loops, n=n, nt=nt, g0=G0, name="s")


def fused_loops(out: Program) -> list[ParFor]:
    """The parallel loops of the fused branch (the else of LF-15's test)."""
    [h] = [s for s in iter_host(out.body) if isinstance(s, HIf) and s.else_ is not None
           and any(isinstance(x, ParFor) for x in iter_host(s.then))]
    assert h.else_ is not None
    return [x for x in iter_host(h.else_) if isinstance(x, ParFor)]


def conds(loop: ParFor) -> int:
    return sum(isinstance(x, Cond) for x in iter_nodes(loop.body))


# ------------------------------------------------------------------ the pieces (LF-85)


def test_lf85_jacobi_interior_nest_then_boundary_strips() -> None:
    """LF-85: jacobi's fused loop is three parallel loops: the interior nest with no
    select and no test, then the strip before and the strip after it with the selects;
    LF-89: the note says so."""
    out, [r] = fuse(prog(JACOBI_P, ACCUM_C))
    assert r.plan is not None and r.plan.split is not None and r.plan.split.loops == 3
    inner, before, after = fused_loops(out)
    assert conds(inner) == 0 and not any(isinstance(x, If) for x in iter_nodes(inner.body))
    assert conds(before) == 2 and conds(after) == 2
    assert print_program(out).count("parallel for (i = min(2, n - 1) to "
                                    "max(n - 3, min(1, n - 2)))") == 1
    assert "the interior fused without selects (LF-52) as a loop nest of its own, then 2 " \
        "boundary strips with the selects (LF-85)" in str(r), str(r)


@pytest.mark.parametrize("swap", [False, True])
def test_lf85_lf86_not_idempotent_consumer_every_size(swap: bool) -> None:
    """LF-86: the pieces cover the consumer's domain exactly once: a consumer that adds to
    what it writes is bitwise the unfused program at every n (n = 0..9: the interior empty
    for n <= 3, one point for n = 4), with and without ping-pong (LF-89)."""
    for n in range(10):
        for c in (ACCUM_C, ACCUM_C.replace("1 to n - 2", "-2 to n + 1")):
            p = prog(JACOBI_P, c, n=n)
            out, [r] = fuse(p, swap)
            assert r.plan is not None and r.plan.split is not None, str(r)
            same(run_program(p), run_program(out, check_races=True), NAMES, f"n={n} {c}")


def _eval(e: Expr, env: dict[str, int]) -> int:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Ref):
        return env[e.var.name]
    if isinstance(e, Binary) and e.op in (BinaryOp.ADD, BinaryOp.SUB):
        a, b = _eval(e.lhs, env), _eval(e.rhs, env)
        return a + b if e.op is BinaryOp.ADD else a - b
    assert isinstance(e, Intrinsic) and e.name in ("min", "max"), e
    xs = [_eval(x, env) for x in e.args]
    return min(xs) if e.name == "min" else max(xs)


def test_lf86_partition_formulas_exhaustive() -> None:
    """LF-86: for every consumer range [a, b] (empty ones included), producer range
    [lo, hi] and read offsets within ±2 in 1-D, the pieces' bounds as built partition
    [a, b] exactly once, and every point of the interior piece reads only inside
    [lo, hi]."""
    v = var("i", Scalar.I32)
    nv = var("n", Scalar.I32)
    n = Ref(nv)

    def at(k: int) -> Expr:  # n + k, as a program writes it
        return Binary(BinaryOp.ADD, n, Const(k, Scalar.I32)) if k else n

    checked = 0
    for offs in ((-1, 1), (0, 2), (-2,), (-1, 0, 1), (2, -2)):
        for a_k, b_k, lo_k, hi_k in itertools.product((-1, 0, 2), (-3, 0, 1), (0, 1),
                                                      (-2, 0)):
            lower = ((None, a_k), *((None, lo_k - c) for c in offs))
            upper = ((n, b_k), *((n, hi_k - c) for c in offs))
            sp = split_mod.Split((lower,), (upper,), (0,))
            consumer = ParFor((LoopIndex(v, Const(a_k, Scalar.I32), at(b_k)),),
                              parallel_body())
            loops = split_mod.pieces(consumer, sp, consumer.body, consumer.body)
            for nn in range(-1, 8):
                env = {"n": nn}
                hits: list[int] = []
                for k, loop in enumerate(loops):
                    ix = loop.indices[0]
                    pts = range(_eval(ix.start, env), _eval(ix.stop, env) + 1)
                    hits += pts
                    if k == 0:
                        assert all(lo_k <= x + c <= nn + hi_k for x in pts for c in offs)
                assert sorted(hits) == list(range(a_k, nn + b_k + 1)), (offs, nn)
                checked += 1
    assert checked > 1000


def parallel_body() -> Any:
    from sarek_py.ir.nodes import Empty

    return Empty()


# ---------------------------------------------------------- PolyBench and n-D (LF-85)


def source(name: str, **sizes: int) -> str:
    text = (HERE / f"{name}.sk").read_text()
    for v, x in sizes.items():
        text, k = re.subn(rf"var {v} : i32 = \d+;", f"var {v} : i32 = {x};", text)
        assert k == 1, v
    return text


POLY = {"jacobi-1d": 3, "jacobi-2d": 5, "heat-3d": 7}


@pytest.mark.parametrize("name", sorted(POLY))
def test_lf85_polybench_split_into_loops(name: str) -> None:
    """LF-85: PolyBench jacobi-1d, jacobi-2d and heat-3d as published: the fused loop is
    1 + 2·d loops (3, 5, 7), the interior one without a select."""
    p = parse_program(source(name), f"{name}.sk")
    out, [r] = fuse(p)
    assert r.plan is not None and r.plan.split is not None
    assert r.plan.split.loops == POLY[name], str(r)
    loops = fused_loops(out)
    assert len(loops) == POLY[name] + bool(r.plan.renamed)  # the copy back (LF-9)
    assert conds(loops[0]) == 0 and all(conds(x) > 0 for x in loops[1:POLY[name]])


@pytest.mark.parametrize("be_name", ["opencl", "c"])
@pytest.mark.parametrize("name", [
    # heat-3d's 7 pieces offloaded take 20 s a backend: `make fuzz` (its split and its
    # bytes on the interpreter stay in `make test`: test_lf85_polybench_split_into_loops)
    pytest.param(n, marks=pytest.mark.slow) if n == "heat-3d" else n for n in sorted(POLY)])
def test_lf85_polybench_bitwise_offloaded(name: str, be_name: str) -> None:
    """LF-85/LF-86 offloaded on OpenCL and c: bitwise the interpreter's unfused run, at
    n = 2 (empty interior) and 5 (swap on), and on c at the published size (swap off;
    OpenCL's is tests/test_polybench_stencils.py::test_lf14_lf50_polybench_bitwise_on_opencl;
    the interpreter's at n = 0..5 with the race check, test_lf14_lf50_…_on_the_interpreter)."""
    be = backend(be_name)
    published = (({}, False),) if be_name == "c" else ()
    for sizes, swap in (*published, ({"n": 2, "tsteps": 2}, True),
                        ({"n": 5, "tsteps": 3}, True)):
        p = parse_program(source(name, **sizes))
        out, _ = fuse(p, swap)
        same(run_program(p), run_program(offload(out), device=be), ("A", "B"),
             f"{sizes} swap={swap}")


TEMPLATE_2D = """
program e
  var n : i32 = {n}; var m : i32 = {m};
  var u : f32[0:, -1:] allocatable; var f : f32[0:, -1:] allocatable;
  var g : f32[0:, -1:] allocatable;
begin
  allocate u[0:n + 1, -1:m + 1]; allocate f[0:n + 1, -1:m + 1]; allocate g[0:n + 1, -1:m + 1];
  parallel for (i = 0 to n + 1, j = -1 to m + 1) do (
    u[i, j] <- f32((i * 13 + j * 7) % 17) * 0.125;
    f[i, j] <- f32(i - j) * 0.5;
    g[i, j] <- 1.0f
  ) done;
  for t = 1 to 2 do
    parallel for (i = 1 to n, j = 0 to m) do
      f[i, j] <- u[i, j] * 0.5f + u[i - 1, j + 1]
    done;
    parallel for (i = 1 to n + 1, j = 0 to m) do
      g[i, j] <- g[i, j] * 0.5f + f[i - 1, j] + f[i, j] + f[i, j - 1] * 3.0f
    done
  done
end
"""


def test_lf85_2d_edges_one_sided_and_wider_consumer() -> None:
    """LF-85/LF-86 in 2-D: the consumer's domain is wider than the producer's in one
    dimension and reads one side only in the other; a consumer that adds to what it
    writes is bitwise at every n, m in 0..3 (f32), the pieces 1 + 2·2."""
    for n, m in itertools.product(range(4), range(4)):
        p = parse_program(TEMPLATE_2D.format(n=n, m=m))
        out, [r] = fuse(p)
        assert r.plan is not None and r.plan.split is not None and r.plan.split.loops == 5
        same(run_program(p), run_program(out, check_races=True), ("u", "f", "g"), f"{n},{m}")


def test_lf85_2d_edges_on_opencl() -> None:
    """LF-85 in 2-D offloaded on OpenCL at a few sizes: bitwise."""
    be = backend("opencl")
    for n, m in ((0, 3), (1, 1), (4, 2)):
        p = parse_program(TEMPLATE_2D.format(n=n, m=m))
        out, _ = fuse(p)
        same(run_program(p), run_program(offload(out), device=be), ("u", "f", "g"), f"{n}")


# ------------------------------------------------------------------ chains (LF-89)

CHAIN3 = (JACOBI_P,
          "parallel for (i = 1 to n - 2) do h[i] <- f[i - 1] - f[i + 1] * 0.5 done",
          "parallel for (i = 2 to n - 3) do g[i] <- g[i] + h[i - 1] + h[i + 1] * 0.25 done")


@pytest.mark.parametrize("swap", [False, True])
def test_lf89_chain_of_three_bitwise_every_size(swap: bool) -> None:
    """LF-89: a chain of three stencils fuses into one loop (LF-70) split into its pieces
    by its last step; bitwise at every n = 0..9; a second `opt` run is a no-op (LF-72)."""
    for n in range(10):
        p = prog(*CHAIN3, n=n)
        out, reports = fuse(p, swap)
        assert all(r.fused for r in reports) and len(reports) == 2, [str(r) for r in reports]
        whole = reports[0].plan
        assert whole is not None and whole.split is not None
        same(run_program(p), run_program(out, check_races=True), NAMES, f"n={n}")
        again, second = fuse(parse_program(print_program(out)), swap)
        assert print_program(again) == print_program(out)
        assert second and all(r.already is not None for r in second), \
            [str(r) for r in second]


def test_lf89_chain_of_three_on_opencl() -> None:
    """LF-89 offloaded on OpenCL: the split chain is bitwise (n = 3, 8)."""
    be = backend("opencl")
    for n in (3, 8):
        p = prog(*CHAIN3, n=n)
        out, _ = fuse(p, True)
        same(run_program(p), run_program(offload(out), device=be), NAMES, f"n={n}")


# ------------------------------------------------------------- no box (LF-87, LF-88)


@pytest.mark.parametrize(("consumer", "why"), [
    ("parallel for (i = 1 to n - 2) do g[i] <- f[2 * i - 1] + f[i] done",
     "is not one of the consumer's indices plus a constant"),
    ("parallel for (i = 1 to n - 2) do g[i] <- f[n - 1 - i] + f[i] done",
     "is not one of the consumer's indices plus a constant"),
    ("parallel for (i = 1 to n - 2) do g[i] <- f[i - n + 3] + f[i] done",
     "is not one of the consumer's indices plus a constant"),
])
def test_lf88_no_box_keeps_the_test_and_says_why(consumer: str, why: str) -> None:
    """LF-88: a read whose subscript is not an index plus a constant has no box: the test
    stays inside the loop (LF-52), the note says why, and the program is bitwise."""
    for n in (0, 3, 7):
        p = prog("parallel for (i = 2 to n) do f[i] <- u[i] * 2.0 done", consumer, n=n)
        out, [r] = fuse(p)
        assert r.plan is not None and r.plan.interior is not None, str(r)
        assert r.plan.split is None, str(r)
        assert why in str(r) and "(LF-88)" in str(r), str(r)
        same(run_program(p), run_program(out, check_races=True), NAMES, f"n={n}")


def test_lf87_pieces_bounds_wrap_check() -> None:
    """LF-87: the pieces' bounds compute n ± small constants; with n a host scalar the pair
    runs fused only under the overflow guard (|n| <= 2^28); with literal bounds nothing is
    checked."""
    out, [r] = fuse(prog(JACOBI_P, ACCUM_C))
    assert r.plan is not None and r.plan.split is not None and r.plan.check is not None
    assert "n lies within ±2^28" in str(r), str(r)
    lit = prog("parallel for (i = 1 to 4) do f[i] <- u[i] done",
               "parallel for (i = 0 to 6) do g[i] <- f[i - 1] + f[i + 1] done")
    out, [r] = fuse(lit)
    assert r.plan is not None and r.plan.split is not None and r.plan.check is None, str(r)
    same(run_program(lit), run_program(out, check_races=True), NAMES, "literal")


def test_lf87_huge_offset_keeps_the_test() -> None:
    """LF-87: an offset beyond 2^20 gives no box (the test stays in the loop, LF-88)."""
    text = text_of("parallel for (i = 1 to n - 2) do f[i] <- u[i] done",
                   "parallel for (i = 1 to n - 2) do g[i] <- f[i - 2000000] + f[i] done",
                   n=4, nt=2)
    q = parse_program(text.replace("var f : f64[-3:]", "var f : f64[-3000000:]").replace(
        "allocate f[-3:n + 3]", "allocate f[-3000000:n + 3]"))
    out, [r] = fuse(q)
    assert r.plan is not None and r.plan.split is None, str(r)
    assert "offset beyond 2^20 (LF-88)" in str(r), str(r)
    same(run_program(q), run_program(out, check_races=True), NAMES, "huge")


# ------------------------------------------------------------ the benchmark (LF-90)


@pytest.mark.parametrize("only", [
    "jacobi-1d",  # the other two, 15 s more on OpenCL's builds, in `make fuzz`
    pytest.param("jacobi-2d", marks=pytest.mark.slow),
    pytest.param("heat-3d", marks=pytest.mark.slow)])
def test_lf90_polybench_benchmark_runs_both_forms(only: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """LF-90: `benchmarks/polybench.py --small --compare-split --only P` builds the unfused
    program, the split fused one and the fused one with the test in the loop (LF-88's
    `FusionOptions(split=False)`), runs them on OpenCL and finds every final array bitwise
    equal."""
    import importlib.util
    import sys

    backend("opencl")
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "polybench.py"
    spec = importlib.util.spec_from_file_location("polybench_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["polybench_benchmark"] = module
    spec.loader.exec_module(module)
    assert module.main(["--small", "--repeat", "1", "--backend", "opencl",
                        "--compare-split", "--only", only]) == 0
    out = capsys.readouterr().out
    assert "bitwise identical every final array" in out and out.count("test in the loop") == 1


def test_lf88_split_false_keeps_the_test_in_the_loop() -> None:
    """LF-88: `FusionOptions(split=False)` keeps LF-52's one test inside the loop, says so,
    and is bitwise."""
    p = prog(JACOBI_P, ACCUM_C)
    out, [r] = fuse_program(p, FusionOptions(split=False))
    assert r.plan is not None and r.plan.split is None and "not asked for" in str(r)
    [loop] = fused_loops(out)
    assert isinstance(loop.body, If)
    same(run_program(p), run_program(out, check_races=True), NAMES, "split=False")


def test_lf85_lf90_every_rule_is_cited() -> None:
    """Every rule LF-85..LF-90 (specs/loop-fusion.md) is cited by a test of this file."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 85, 90)


# ------------------------------------------------------------- the generator (LF-86)

SPLIT_SEEDS = 600 if __import__("os").environ.get("SAREK_FUZZ") else 30


def test_lf86_generated_boundary_readers_adding_to_what_they_write() -> None:
    """LF-85/LF-86 on the boundary-reader generator of tests/test_loop_fusion_diff.py
    (producers over interiors with and without tests, consumers over other ranges reading
    at offsets -2..2, through lets, renaming, chains of three), each consumer made to add
    to what it writes (`g[i] <- g[i] + …`: a point run twice or never shows): every
    fusion, with and without swap, bitwise the unfused program; most split fusions are
    emitted as pieces (LF-85), the guarded ones keep the test (LF-88). SAREK_FUZZ=1: 600."""
    import random

    from test_loop_fusion_diff import make_boundary

    from sarek_py.ir.diagnostics import SarekError

    split = kept = 0
    for seed in range(SPLIT_SEEDS):
        text = make_boundary(random.Random(seed)).replace("g[i] <- ", "g[i] <- g[i] + ")
        p = parse_program(text)
        try:
            ref = run_program(p)
        except SarekError:
            continue
        for swap in (False, True):
            out, reports = fuse(p, swap)
            for r in reports:
                if r.plan is not None and r.plan.interior is not None:
                    split += r.plan.split is not None
                    kept += r.plan.split is None
            same(ref, run_program(out, check_races=True), NAMES, f"seed={seed}")
    assert split >= SPLIT_SEEDS // 3 and kept >= 1, (split, kept)


@pytest.mark.parametrize("guard", ["if i >= 2 then ", "if 2 < i && i <= n - 3 then ",
                                   "if n - 2 > i then ", "if i > 0 && i < n - 1 then "])
def test_lf85_guarded_producer_bounds_of_one_index(guard: str) -> None:
    """LF-85: a store under tests that bound one index by host values (`i >= e`, `e < i`,
    `&&` of them) has a box domain: split into pieces, bitwise at every n = 0..8 with a
    consumer that adds to what it writes, swap on and off."""
    producer = f"parallel for (i = 0 to n - 1) do {guard}f[i] <- u[i] * 2.0 + u[i + 1] done"
    for n in range(9):
        p = prog(producer, ACCUM_C, n=n)
        for swap in (False, True):
            out, [r] = fuse(p, swap)
            assert r.plan is not None and r.plan.split is not None, str(r)
            same(run_program(p), run_program(out, check_races=True), NAMES, f"n={n}")


def test_lf88_bound_reading_an_array_element_gives_no_box() -> None:
    """LF-88: the pieces' bounds are evaluated before each piece; a bound that reads an
    array element gives no box (LF-7 and LF-18 refuse such pairs before this today: the
    analysis itself is checked on the loops)."""
    from sarek_py.analysis.affine.queries import AffineCtx
    from sarek_py.fusion.loops.fusion import producer_stores

    text = text_of(JACOBI_P, ACCUM_C.replace("1 to n - 2", "1 to k[0]"), n=7, nt=2)
    p = parse_program(text.replace(
        "var h : f64[-3:] allocatable;",
        "var h : f64[-3:] allocatable; var k : i32[0:] allocatable;").replace(
        "allocate h[-3:n + 3];", "allocate h[-3:n + 3]; allocate k[0:1];"))
    producer, consumer = [s for s in iter_host(p.body) if isinstance(s, ParFor)][-2:]
    inters = producer_stores(producer)
    [f] = [i.array for i in inters]
    ctx = AffineCtx(indices=frozenset(consumer.vars))
    why = split_mod.box_of(producer, consumer, inters, frozenset({f}), consumer.body, ctx)
    assert isinstance(why, str) and "`k[0]` reads an array element" in why, why


TRANSPOSED = """
program tr
  var n : i32 = {n};
  var u : f64[0:, 0:] allocatable; var f : f64[0:, 0:] allocatable;
  var g : f64[0:, 0:] allocatable;
begin
  allocate u[0:n + 1, 0:n + 1]; allocate f[0:n + 1, 0:n + 1]; allocate g[0:n + 1, 0:n + 1];
  parallel for (i = 0 to n + 1, j = 0 to n + 1) do (
    u[i, j] <- f64((i * 5 + j * 3) % 7); f[i, j] <- f64(i * 100 + j); g[i, j] <- 0.5
  ) done;
  for t = 1 to 2 do
    parallel for (i = 1 to n, j = 2 to n) do f[i, j] <- u[i, j] + u[j, i] done;
    parallel for (j = 0 to n, i = 1 to n) do
      g[i, j] <- g[i, j] + f[j, i] * 2.0 + f[i, i] - f[j + 1, i - 1]
    done
  done
end
"""


def test_lf85_transposed_and_diagonal_reads() -> None:
    """LF-85/LF-86: reads whose producer dimensions take the consumer's indices in another
    order (`f[j, i]`, `f[j + 1, i - 1]`) or one index twice (`f[i, i]`), the consumer's
    loop order not the producer's: the box bounds each consumer index by every producer
    dimension it appears in; bitwise at n = 0..5."""
    for n in range(6):
        p = parse_program(TRANSPOSED.format(n=n))
        out, [r] = fuse(p)
        assert r.plan is not None and r.plan.split is not None, str(r)
        same(run_program(p), run_program(out, check_races=True), ("u", "f", "g"), f"n={n}")


def test_lf87_constant_bound_at_the_type_limit_gives_no_box() -> None:
    """LF-87: a piece's bound one past a literal bound at the limit of the index's type
    (`2147483647 + 1`) would not fit: no box (the analysis on the loops, as no array can
    hold such an index here)."""
    from sarek_py.analysis.affine.queries import AffineCtx
    from sarek_py.fusion.loops.fusion import producer_stores

    p = prog(JACOBI_P.replace("1 to n - 2", "1 to 2147483646"),
             ACCUM_C.replace("1 to n - 2", "1 to 2147483647"))
    producer, consumer = [s for s in iter_host(p.body) if isinstance(s, ParFor)][-2:]
    inters = producer_stores(producer)
    ctx = AffineCtx(indices=frozenset(consumer.vars))
    why = split_mod.box_of(producer, consumer, inters, frozenset(i.array for i in inters),
                           consumer.body, ctx)
    assert isinstance(why, str) and "near the limit of the index's type i32" in why, why
    ok = prog(JACOBI_P, ACCUM_C)
    producer, consumer = [s for s in iter_host(ok.body) if isinstance(s, ParFor)][-2:]
    inters = producer_stores(producer)
    assert isinstance(split_mod.box_of(producer, consumer, inters,
                                       frozenset(i.array for i in inters), consumer.body,
                                       AffineCtx(indices=frozenset(consumer.vars))),
                      split_mod.Split)
