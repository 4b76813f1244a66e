"""Whole chains of parallel loops and fused output on a second run (specs/loop-fusion.md,
LF-70..LF-74; specs/host-program.md, HP-50).

Hand-written chains of three and four stencils (boundary-reading consumers with the
LF-50 selects and the LF-52 split, a stage reading an earlier one, jacobi-like renaming),
each fused in one ``opt`` run and bitwise the unfused program on the interpreter and on
OpenCL; ``opt`` on its own output is a no-op with a note (LF-72); and the generator of
LF-74: chains of two to five stages in ``for`` and host ``while`` loops, every program
compared bitwise, fused and unfused, every refusal counted with its rule.
"""

from __future__ import annotations

import collections
import os
import random
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.runtime import get_backend

HEAD = """
program ch
  var n : i32 = {n};
  var nt : i32 = {nt};
  var m : i32 = 0;
  var w : i32 = 0;
  var A : f64[0:] allocatable;
  var B : f64[0:] allocatable;
  var C : f64[0:] allocatable;
  var D : f64[0:] allocatable;
  var E : f64[0:] allocatable;
begin
  allocate A[0:n - 1];
  allocate B[0:n - 1];
  allocate C[0:n - 1];
  allocate D[0:n - 1];
  allocate E[0:n - 1];
  parallel for (i = 0 to n - 1) do (
    A[i] <- (f64(i) + 2.0) / f64(n + 1);
    B[i] <- (f64(i) + 3.0) / f64(n + 2);
    C[i] <- f64(i) * 0.5 - 1.0;
    D[i] <- f64((i * 7 + 3) % 11) * 0.25;
    E[i] <- 1.0 / (f64(i) + 0.5)
  ) done;
"""
NAMES = ("A", "B", "C", "D", "E", "m", "w")

#: three stencils a → b → c; the third reads B (an earlier stage) and A as well
CHAIN3 = HEAD + """  for t = 0 to nt - 1 do
    parallel for (i = 1 to n - 2) do B[i] <- 0.33333 * (A[i - 1] + A[i] + A[i + 1]) done;
    parallel for (i = 1 to n - 2) do C[i] <- 0.25 * (B[i - 1] + B[i] + B[i + 1]) done;
    parallel for (i = 2 to n - 3) do D[i] <- 0.5 * (C[i - 1] + C[i + 1]) - A[i] done
  done
end
"""

#: four stages; the last writes A, which the first reads (renamed, LF-9, at the step that
#: fuses the first loop); the consumers read outside their producer's domain (LF-50)
CHAIN4 = HEAD + """  for t = 0 to nt - 1 do
    parallel for (i = 1 to n - 2) do B[i] <- 0.33333 * (A[i - 1] + A[i] + A[i + 1]) done;
    parallel for (i = 1 to n - 2) do C[i] <- 0.25 * (B[i - 1] + B[i] + B[i + 1]) done;
    parallel for (i = 0 to n - 1) do D[i] <- 0.5 * (C[i - 1 + 1] + C[i]) done;
    parallel for (i = 1 to n - 2) do A[i] <- 0.33333 * (D[i - 1] + D[i] + D[i + 1]) done
  done
end
"""

#: a chain inside a for inside a host while (HP-40, LF-40: the for is the chain loop)
CHAIN_IN_WHILE = HEAD + """  while w < nt do
    for t = 0 to 1 do
      parallel for (i = 1 to n - 2) do B[i] <- 0.5 * (A[i - 1] + A[i + 1]) done;
      parallel for (i = 1 to n - 2) do C[i] <- B[i - 1] - B[i + 1] done;
      parallel for (i = 1 to n - 2) do E[i] <- C[i - 1] * 0.25 + C[i + 1] done
    done;
    w := w + 1
  done
end
"""


def sized(text: str, n: int, nt: int = 2) -> str:
    return text.replace("{n}", str(n)).replace("{nt}", str(nt))


def fuse(text: str, swap: bool = False) -> tuple[Program, Program, list[PairReport]]:
    prog = parse_program(text, "chain.sk")
    out, reports = fuse_program(prog, FusionOptions(swap=swap))
    printed = print_program(out)
    assert print_program(parse_program(printed)) == printed
    return prog, out, reports


def same(ref: Any, got: Any, what: str) -> None:
    for name in NAMES:
        assert np.asarray(ref.values[name]).tobytes() == \
            np.asarray(got.values[name]).tobytes(), (what, name)


def rules(reports: list[PairReport]) -> list[str | None]:
    return [None if r.fused else (r.refusal.rule if r.refusal else "already")
            for r in reports]


@pytest.mark.parametrize("text", [CHAIN3, CHAIN4, CHAIN_IN_WHILE],
                         ids=["chain3", "chain4", "in-while"])
def test_lf70_whole_chain_fuses_in_one_run(text: str) -> None:
    """LF-70: every pair of the chain fuses in one run, into ONE parallel loop inside the
    chain loop (plus a copy loop for a renamed array), and LF-73 says so per pair; LF-85:
    the one loop is emitted as its interior nest and boundary strips when its interior is
    a box."""
    _, out, reports = fuse(sized(text, 12))
    assert rules(reports) == [None] * (len(reports)), [str(r) for r in reports]
    assert len(reports) in (2, 3)
    loops = len(reports) + 1
    assert all(r.plan is not None and len(r.chain) == loops for r in reports)
    assert all("(LF-70)" in str(r) for r in reports)
    printed = print_program(out)
    else_part = printed.split("else", 1)[1]
    whole = reports[0].plan
    assert whole is not None and len(whole.stages) == loops
    pieces = whole.split.loops if whole.split is not None else 1
    assert else_part.count("parallel for") == pieces + ("A_copy" in printed), printed


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("text", [CHAIN3, CHAIN4, CHAIN_IN_WHILE],
                         ids=["chain3", "chain4", "in-while"])
def test_lf70_lf14_chains_bitwise_on_the_interpreter(text: str, swap: bool) -> None:
    """LF-70/LF-14/LF-50/LF-52: bitwise equal at every small size (empty interiors at
    n <= 4, empty arrays at n = 0) and time-step count, with and without ping-pong."""
    for n in (0, 2, 3, 5, 9):
        for nt in (1, 3) if n == 9 else (2,):
            prog, out, _ = fuse(sized(text, n, nt), swap)
            same(run_program(prog), run_program(out, check_races=True), f"n={n} nt={nt}")


def opencl() -> Any:
    try:
        return get_backend("opencl")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("text", [CHAIN3, CHAIN4, CHAIN_IN_WHILE],
                         ids=["chain3", "chain4", "in-while"])
def test_lf70_chains_bitwise_on_opencl(text: str) -> None:
    """LF-70/LF-14 on OpenCL: the fused chain offloaded leaves the unfused bytes."""
    be = opencl()
    for n in (3, 7):
        prog, out, _ = fuse(sized(text, n, 2), swap=True)
        ref = run_program(prog)
        same(ref, run_program(offload(out), device=be), f"fused n={n}")


def test_lf71_chain_stops_at_a_step_with_a_copy_loop() -> None:
    """LF-71: when the step of the last pair renames an array (its fused loop is followed
    by a copy loop), the chain cannot extend through it: the pair before it says LF-71
    and that the pair alone would fuse (LF-73); the program stays bitwise equal."""
    text = sized(HEAD + """  for t = 0 to nt - 1 do
    parallel for (i = 1 to n - 2) do B[i] <- 0.5 * (A[i - 1] + A[i + 1]) done;
    parallel for (i = 1 to n - 2) do C[i] <- B[i - 1] + B[i + 1] - A[i] done;
    parallel for (i = 1 to n - 2) do A[i] <- 0.25 * (C[i - 1] + C[i + 1]) + A[i] done
  done
end
""", 10)
    prog, out, reports = fuse(text)
    assert rules(reports) == [None, "LF-71"], [str(r) for r in reports]
    assert "the pair alone would fuse" in str(reports[1])
    assert "renamed A" in str(reports[1])
    same(run_program(prog), run_program(out), "lf71")


def test_lf73_refused_join_names_the_pairs_own_rule() -> None:
    """LF-73: a third loop that does not read the second's output (LF-1) is refused with
    the pair's own rule, without the chain wording; the first pair still fuses."""
    text = sized(HEAD + """  for t = 0 to nt - 1 do
    parallel for (i = 1 to n - 2) do B[i] <- 0.5 * (A[i - 1] + A[i + 1]) done;
    parallel for (i = 1 to n - 2) do C[i] <- B[i - 1] + B[i + 1] done;
    parallel for (i = 1 to n - 2) do D[i] <- E[i] * 2.0 done
  done
end
""", 10)
    _, _, reports = fuse(text)
    assert rules(reports) == [None, "LF-1"]
    assert "joining" not in str(reports[1]) and "(LF-70)" not in str(reports[0])


def test_lf72_second_run_is_a_noop_with_a_note() -> None:
    """LF-72: `opt` on its own output (with and without ping-pong) leaves the program as
    it is and says, for each pair of the last-iteration branch, that it is already fused
    -- never LF-10 -- so any further run is the same."""
    for text, swap in ((CHAIN3, False), (CHAIN4, True), (CHAIN_IN_WHILE, False)):
        _, out, _ = fuse(sized(text, 12), swap)
        once = print_program(out)
        again, reports = fuse_program(parse_program(once, "once.sk"),
                                      FusionOptions(swap=swap))
        assert print_program(again) == once
        assert reports and all(r.already is not None for r in reports), \
            [str(r) for r in reports]
        assert all("already fused" in str(r) and "(LF-72)" in str(r) for r in reports)
        assert all("LF-10" not in str(r) for r in reports)


def test_lf72_polybench_second_run_is_a_noop() -> None:
    """LF-72 on PolyBench's jacobi-1d (the issue's report: the second run refused LF-10)."""
    src = (Path(__file__).resolve().parent / "corpus" / "polybench" / "jacobi-1d.sk")
    out, _ = fuse_program(parse_program(src.read_text(), "j.sk"), FusionOptions(swap=True))
    once = print_program(out)
    again, reports = fuse_program(parse_program(once, "o.sk"), FusionOptions(swap=True))
    assert print_program(again) == once
    assert [r.already is not None for r in reports] == [True]


def test_lf72_lookalike_if_is_not_called_fused() -> None:
    """LF-72 is recognised only in LF-15's shape: an `if t == k` whose else branch does not
    run a loop over the last loop's iterations is analysed as before (LF-10 refusal)."""
    text = sized(HEAD + """  for t = 0 to nt - 1 do
    if t == m then (
      parallel for (i = 1 to n - 2) do B[i] <- 0.5 * (A[i - 1] + A[i + 1]) done;
      parallel for (i = 1 to n - 2) do C[i] <- B[i - 1] + B[i + 1] done
    ) else
      parallel for (i = 0 to n - 1) do C[i] <- 0.0 done
  done
end
""", 10)
    _, _, reports = fuse(text)
    assert rules(reports) == ["LF-10"]


def test_lf73_opt_notes_for_a_chain_and_its_rerun(tmp_path: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """LF-73/LF-72 through `sarek-py opt --notes`: one note per pair, each naming the
    chain; on the output, each pair says it is already fused."""
    from sarek_py.cli.main import main

    src = tmp_path / "c.sk"
    src.write_text(sized(CHAIN4, 12))
    # the threshold decides (LF-13), not a backend's prediction (LF-60..LF-69)
    assert main(["opt", str(src), "--notes", "--fusion-threshold", "64"]) == 0
    out, err = capsys.readouterr()
    notes = [x for x in err.splitlines() if x.startswith("note:")]
    assert len(notes) == 3 and all("one loop with the chain of loops at lines" in x
                                   for x in notes), err
    again = tmp_path / "o.sk"
    again.write_text(out)
    assert main(["opt", str(again), "--notes", "--fusion-threshold", "64"]) == 0
    out2, err2 = capsys.readouterr()
    assert out2 == out
    assert err2.count("already fused") == 3 and "not fused" not in err2, err2


# ------------------------------------------------------------------- the generator (LF-74)


def _at(a: str, base: str, o: int) -> str:
    return f"{a}[{base} + {o}]" if o > 0 else (f"{a}[{base} - {-o}]" if o < 0 else
                                              f"{a}[{base}]")


def make_chain(r: random.Random) -> str:
    """LF-74/HP-50: a chain of 2..5 stencil stages X0 → X1 → … over A..E; each stage's
    bounds are an interior (0..2 from each end), sometimes under a test; its value reads
    the previous stage at offsets -2..2 (near the edges the producer does not write),
    sometimes an earlier stage, sometimes through a let; the last stage sometimes writes
    A (read by the first: renamed); the chain sits in a for, a for in a while (with a
    break sometimes), directly in a while (LF-40), with another statement beside it."""
    k = r.randint(2, 5)
    arrays = ["A", "B", "C", "D", "E"]
    lines = []
    for j in range(1, k + 1):
        src = arrays[j - 1]
        dst = arrays[j] if j < 5 else "A"
        if j == k and k >= 2 and r.random() < 0.3:
            dst = "A"
        offs = [r.choice([-2, -1, 0, 1, 2]) for _ in range(r.randint(1, 3))]
        # in the arrays' bounds (0..n-1) wherever the stage reads; producers' domains
        # differ, so consumers read elements near the edges their producer does not write
        lo = max(0, -min(offs)) + r.choice([0, 0, 1])
        hi = max(0, max(offs)) + r.choice([0, 0, 1])
        use_let = r.random() < (0.3 if j == k else 0.03)
        base = "q" if use_let else "i"
        terms = [f"{_at(src, base, o)} * {0.25 + 0.125 * t}" for t, o in enumerate(offs)]
        if j >= 2 and r.random() < 0.3:
            terms.append(_at(arrays[j - 2], base, r.choice([-min(lo, 1), 0, min(hi, 1)])))
        value = " + ".join(terms)
        if dst == "A":
            value = f"A[i] * 0.5 + ({value}) * 0.25"
        guard = r.choice(["", "", "", "if i != 3 then ", "if 2 * i >= n then ",
                          "if i <= 1 || i >= n - 2 then "])
        body = f"{guard}{dst}[i] <- {value}"
        if use_let:
            body = f"let q = i in {body}"
        lines.append(f"parallel for (i = {lo} to n - 1 - {hi}) do {body} done")
    chain = ";\n      ".join(lines)
    other = r.choice(["", ";\n      m := m + 1"])
    shape = r.choice(["for", "for", "for_in_while", "while", "while_break"])
    if shape == "for":
        loop = f"for t = 1 to nt do\n      {chain}{other}\n  done"
    elif shape == "for_in_while":
        loop = (f"while w < 2 do\n    for t = 1 to nt do\n      {chain}{other}\n    done;\n"
                "    w := w + 1\n  done")
    elif shape == "while":
        loop = f"while w < nt do\n      {chain}{other};\n    w := w + 1\n  done"
    else:
        loop = (f"while true do\n    for t = 1 to nt do\n      {chain}\n    done;\n"
                "    w := w + 1;\n    if w >= 2 then break\n  done")
    return sized(HEAD, r.randint(0, 9), r.randint(1, 3)) + f"  {loop}\nend\n"


def check_chain(seed: int, tally: collections.Counter[str],
                device: Any = None) -> None:
    """One generated program: unfused and fused (with and without ping-pong) bitwise
    equal on the interpreter (on ``device`` too when given); each pair's outcome counted
    in ``tally`` (``fused``, ``fused-chain`` or the refusal's rule)."""
    text = make_chain(random.Random(seed))
    prog = parse_program(text, f"gen{seed}.sk")
    try:
        ref = run_program(prog)
    except SarekError:
        tally["invalid"] += 1
        return
    for swap in (False, True):
        out, reports = fuse_program(prog, FusionOptions(swap=swap))
        if not swap:
            for rep in reports:
                key = ("fused-chain" if rep.chain else "fused") if rep.fused else \
                    (rep.refusal.rule if rep.refusal else "already")
                tally[key] += 1
        if out is prog:
            continue
        printed = print_program(out)
        assert print_program(parse_program(printed)) == printed
        got = run_program(parse_program(printed))
        for name in NAMES:
            assert np.asarray(ref.values[name]).tobytes() == \
                np.asarray(got.values[name]).tobytes(), (seed, swap, name, text, printed)
        again, more = fuse_program(parse_program(printed, "again.sk"),
                                   FusionOptions(swap=swap))
        assert all("LF-10" not in str(x) for x in more if x.already is not None)
        if device is not None:
            dev = run_program(offload(out), device=device)
            for name in NAMES:
                assert np.asarray(ref.values[name]).tobytes() == \
                    np.asarray(dev.values[name]).tobytes(), (seed, "opencl", name, text)


CHAIN_SEEDS = 1000 if os.environ.get("SAREK_FUZZ") else 16


def test_lf74_hp50_generated_chains_bitwise() -> None:
    """LF-74/HP-50: generated chains of 2..5 stages with boundary-reading consumers, in
    for and while loops: 0 mismatches; chains of three or more fuse in the sample; every
    refusal counted with its rule. SAREK_FUZZ=1 runs 1000 programs."""
    tally: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    for seed in range(CHAIN_SEEDS):
        check_chain(seed, tally)
    print(f"{CHAIN_SEEDS} programs in {time.perf_counter() - t0:.1f} s: {dict(tally)}")
    assert tally["fused-chain"] >= CHAIN_SEEDS // 4, tally
    assert tally["LF-40"] >= 1, tally


def test_lf74_generated_chains_on_opencl() -> None:
    """LF-74/HP-50 on OpenCL: a sample of generated programs, fused and offloaded, give
    the interpreter's unfused bytes."""
    be = opencl()
    tally: collections.Counter[str] = collections.Counter()
    for seed in range(0, 400 if os.environ.get("SAREK_FUZZ") else 12, 3):
        check_chain(seed, tally, be)
    assert tally["fused-chain"] + tally["fused"] >= 1, tally


def test_lf74_generator_covers_its_shapes() -> None:
    """LF-74: the generator writes chains of three or more, host while loops with and
    without break, boundary offsets and renamed last stages (a check on the generator)."""
    texts = [make_chain(random.Random(s)) for s in range(60)]
    assert any(t.count("parallel for") - 1 >= 4 for t in texts)
    assert any("while w < nt" in t for t in texts) and any("break" in t for t in texts)
    assert any(re.search(r"\[i - 2\]", t) for t in texts)
    assert any(re.search(r"A\[i\] <- A\[i\] \* 0\.5", t) for t in texts)


def test_hp50_host_program_generator_writes_while_loops_and_chains() -> None:
    """HP-50/LF-74: the host-program generator (tests/test_host_program_fuzz.py) writes
    host while loops (with and without break, around a for and holding a pair directly)
    and chains of three parallel loops (a check on the generator)."""
    from test_host_program_fuzz import program_text

    texts = [program_text(s) for s in range(80)]
    assert sum("while wc < 2 do" in t for t in texts) >= 3
    assert any("while true do" in t and "break" in t for t in texts)
    assert any(re.search(r"while wc < 2 do\n\s+parallel for", t) for t in texts)
    assert any(re.search(r"\] done;\n\s*parallel for \(i = 1 to n - 1\) do h\[i\] <- g\[i [+] "
                         r"-?1\]", t) for t in texts)


#: a PolyBench-style 2-D jacobi of three 5-point stages (the last renames A: LF-9, PP-4)
JACOBI2D_3 = """
program j2
  var n : i32 = {n}; var nt : i32 = {nt};
  var A : f64[0:, 0:] allocatable; var B : f64[0:, 0:] allocatable;
  var C : f64[0:, 0:] allocatable;
begin
  allocate A[0:n - 1, 0:n - 1]; allocate B[0:n - 1, 0:n - 1]; allocate C[0:n - 1, 0:n - 1];
  parallel for (i = 0 to n - 1, j = 0 to n - 1) do (
    A[i, j] <- (f64(i) * f64(j + 2) + 2.0) / f64(n); B[i, j] <- f64(i * (j + 3) + 3) / f64(n);
    C[i, j] <- 0.0
  ) done;
  for t = 1 to nt do
    parallel for (i = 1 to n - 2, j = 1 to n - 2) do
      B[i, j] <- 0.2 * (A[i, j] + A[i, j - 1] + A[i, 1 + j] + A[1 + i, j] + A[i - 1, j]) done;
    parallel for (i = 1 to n - 2, j = 1 to n - 2) do
      C[i, j] <- 0.2 * (B[i, j] + B[i, j - 1] + B[i, 1 + j] + B[1 + i, j] + B[i - 1, j]) done;
    parallel for (i = 1 to n - 2, j = 1 to n - 2) do
      A[i, j] <- 0.2 * (C[i, j] + C[i, j - 1] + C[i, 1 + j] + C[1 + i, j] + C[i - 1, j]) done
  done
end
"""

#: a step with a run-time bounds check (LF-8: f's allocation) and one without (LF-70:
#: one combined host test); HF sets f's allocation beyond or within the producer's domain
CHECKED3 = """
program c
  var n : i32 = 6; var m : i32;
  var u : f64[-2:] allocatable; var f : f64[-1:] allocatable; var g : f64[0:] allocatable;
  var h : f64[0:] allocatable;
begin
  allocate u[-2:n + 3]; allocate f[-1:n + HF]; allocate g[0:n + 3]; allocate h[0:n + 3];
  parallel for (i = -2 to n + 3) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done;
  parallel for (i = 0 to n + 3) do (g[i] <- 0.0; h[i] <- 0.0) done;
  m := length(f) - 3;
  for t = 1 to 3 do
    parallel for (i = -1 to n) do f[i] <- u[i] * 0.5 + u[i + 1] done;
    parallel for (i = 0 to m) do g[i] <- 0.25 * (f[i + 1] - f[i - 1]) done;
    parallel for (i = 1 to m - 1) do h[i] <- g[i - 1] + g[i + 1] - u[i] done
  done
end
"""

#: a chain in a procedure over its own arrays and an array dummy (LF-17)
IN_PROC = """
program pr
  var n : i32 = {n};
  var A : f64[0:] allocatable;
  proc work(x : f64[0:] inout, m : i32 in)
    var B : f64[0:] allocatable; var C : f64[0:] allocatable; var D : f64[0:] allocatable;
  =
    allocate B[0:m]; allocate C[0:m]; allocate D[0:m];
    parallel for (i = 0 to m) do (B[i] <- 0.0; C[i] <- 0.0; D[i] <- 0.0) done;
    for t = 1 to 3 do
      parallel for (i = 1 to m - 1) do B[i] <- x[i - 1] + x[i + 1] done;
      parallel for (i = 1 to m - 1) do C[i] <- B[i - 1] - B[i + 1] done;
      parallel for (i = 1 to m - 1) do D[i] <- C[i - 1] * 0.5 + C[i + 1] done
    done;
    parallel for (i = 0 to m) do x[i] <- D[i] done
  end
begin
  allocate A[0:n];
  parallel for (i = 0 to n) do A[i] <- f64(i) * 0.7 done;
  call work(A, n);
  call work(A, n)
end
"""


def _bitwise(text: str, names: tuple[str, ...], device: Any = None,
             swaps: tuple[bool, ...] = (False, True)) -> list[PairReport]:
    prog = parse_program(text, "t.sk")
    ref = run_program(prog)
    reports: list[PairReport] = []
    for swap in swaps:
        out, reports = fuse_program(prog, FusionOptions(swap=swap))
        printed = print_program(out)
        got = run_program(parse_program(printed) if device is None else offload(out),
                          device=device)
        for name in names:
            assert np.asarray(ref.values[name]).tobytes() == \
                np.asarray(got.values[name]).tobytes(), (name, swap, printed)
    return reports


def test_lf70_lf52_polybench_style_2d_chain_of_three() -> None:
    """LF-70/LF-50/LF-52: three 5-point 2-D stages fuse into one loop (recompute of
    recompute, the last renaming A), bitwise at empty and non-empty interiors."""
    for n in (1, 4):
        reports = _bitwise(JACOBI2D_3.replace("{n}", str(n)).replace("{nt}", "2"),
                           ("A", "B", "C"))
        assert rules(reports) == [None, None], [str(r) for r in reports]
        assert reports[0].plan is not None and [v.name for v in reports[0].plan.renamed] == ["A"]


def test_lf70_lf8_one_combined_host_test() -> None:
    """LF-70/LF-8/LF-15: a step fused under a run-time bounds check and one without: the
    chain runs fused only when the check passes (f allocated within the producer's
    domain, HF = 0) and runs the original loops otherwise (HF = 2): bitwise both ways."""
    for hf in (0, 2):
        reports = _bitwise(CHECKED3.replace("HF", str(hf)), ("u", "f", "g", "h", "m"))
        fused = [r for r in reports if r.fused]
        assert len(fused) == 2 and fused[0].plan is not None
        assert "run-time bounds check" in str(fused[0])


def test_lf70_lf17_chain_in_a_procedure() -> None:
    """LF-70/LF-17: a chain of three in a procedure fuses; the variables the rewrite adds
    are the procedure's; bitwise on the interpreter and OpenCL."""
    text = IN_PROC.replace("{n}", "9")
    reports = _bitwise(text, ("A",))
    assert rules(reports) == [None, None]
    out, _ = fuse_program(parse_program(text))
    assert any(d.var.name == "t_last" for d in out.procedures[0].decls)
    try:
        be = get_backend("opencl")
    except BackendUnavailable:
        return
    _bitwise(text, ("A",), be, (True,))


def test_lf70_lf52_2d_chain_on_opencl() -> None:
    """LF-70/LF-52 on OpenCL: the 2-D chain of three, fused and offloaded, bitwise."""
    _bitwise(JACOBI2D_3.replace("{n}", "5").replace("{nt}", "2"), ("A", "B", "C"), opencl(),
             (False,))


def test_lf70_lf74_every_rule_is_cited() -> None:
    """Every rule LF-70..LF-74 (specs/loop-fusion.md) and HP-50 (specs/host-program.md)
    is cited by a test of this file."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 70, 74)
    assert_rules_cited(__file__, "host-program", "HP", 50, 50)
