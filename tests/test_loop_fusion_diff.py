"""The differential test of loop fusion and ping-pong (LF-14, LF-8, PP-6, LF-17): every
accepted fusion leaves bitwise the same final arrays as the unfused program on the host
interpreter, also when the run-time bounds check fails, in the program body and in a
procedure's body."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.text import parse_program, print_program

EXAMPLES = 400 if os.environ.get("SAREK_FUZZ") else 8


def make(n: int, nt: int, plo: int, phi: int, guard: str, po: int, clo: int, chi: int,
         offs: list[int], hf: int, renamed: bool, stages: int, in_proc: bool = False) -> str:
    g = {"": "", "lo": "if i >= 1 then ", "hi": "if i <= n - 1 then ",
         "both": "if i >= 0 && i <= n then "}[guard]
    reads = " + ".join(f"f[i + {o}]" if o >= 0 else f"f[i - {-o}]" for o in offs)
    target = "u" if renamed else "g"
    cons = (f"let r = {reads} in {target}[i] <- u[i] * 0.75 + r * 0.125"
            if renamed else f"g[i] <- {reads} * 0.5")
    if in_proc:
        # LF-17: the same loops in a procedure over its own arrays, called twice; the
        # program's arrays receive copies of them
        return f"""
pure fun mix(a : f64, b : f64) : f64 = return a * 0.5 - b * 0.25
program d
  var n : i32 = {n}; var nt : i32 = {nt}; var m : i32;
  var u : f64[-2:] allocatable; var f : f64[-1:] allocatable; var g : f64[-2:] allocatable;
  proc work(ou : f64[-2:] inout, of : f64[-1:] inout, og : f64[-2:] inout, n : i32 in,
            nt : i32 in, m : i32 inout)
    var u : f64[-2:] allocatable; var f : f64[-1:] allocatable; var g : f64[-2:] allocatable;
  =
    allocate u[-2:n + 3]; allocate f[-1:n + {hf}]; allocate g[-2:n + 3];
    parallel for (i = -2 to n + 3) do u[i] <- ou[i] done;
    parallel for (i = -1 to n + {hf}) do f[i] <- of[i] done;
    parallel for (i = -2 to n + 3) do g[i] <- og[i] done;
    for t = 1 to nt do
      for s = 1 to {stages} do
        parallel for (i = {plo} to n + {phi}) do {g}f[i] <- mix(u[i], u[i + {po}]) done;
        parallel for (i = {clo} to n - {chi}) do {cons} done
      done;
      m := m + 1
    done;
    parallel for (i = -2 to n + 3) do ou[i] <- u[i] done;
    parallel for (i = -1 to n + {hf}) do of[i] <- f[i] done;
    parallel for (i = -2 to n + 3) do og[i] <- g[i] done
  end
begin
  allocate u[-2:n + 3]; allocate f[-1:n + {hf}]; allocate g[-2:n + 3];
  parallel for (i = -2 to n + 3) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done;
  m := 0;
  call work(u, f, g, n, nt, m);
  call work(u, f, g, n, nt, m)
end
"""
    return f"""
pure fun mix(a : f64, b : f64) : f64 = return a * 0.5 - b * 0.25
program d
  var n : i32 = {n}; var nt : i32 = {nt}; var m : i32;
  var u : f64[-2:] allocatable; var f : f64[-1:] allocatable; var g : f64[-2:] allocatable;
begin
  allocate u[-2:n + 3]; allocate f[-1:n + {hf}]; allocate g[-2:n + 3];
  parallel for (i = -2 to n + 3) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done;
  m := 0;
  for t = 1 to nt do
    for s = 1 to {stages} do
      parallel for (i = {plo} to n + {phi}) do {g}f[i] <- mix(u[i], u[i + {po}]) done;
      parallel for (i = {clo} to n - {chi}) do {cons} done
    done;
    m := m + 1
  done
end
"""


PARAMS = dict(n=st.integers(0, 7), nt=st.integers(1, 3), plo=st.sampled_from([-1, 0, 1]),
       phi=st.sampled_from([-1, 0, 1]), guard=st.sampled_from(["", "lo", "hi", "both"]),
       po=st.sampled_from([-1, 0, 1, 2]), clo=st.sampled_from([0, 1, 2]),
       chi=st.sampled_from([0, 1]),
       offs=st.lists(st.sampled_from([-1, 0, 1]), min_size=1, max_size=3),
       hf=st.sampled_from([0, 1, 2]), renamed=st.booleans(), stages=st.sampled_from([1, 2]),
       in_proc=st.booleans())


@settings(max_examples=EXAMPLES, deadline=None)
@given(**PARAMS)
def test_lf14_pp6_differential(**kw: Any) -> None:
    check(**kw)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(**PARAMS)
def test_lf14_pp6_differential_long(**kw: Any) -> None:
    check(**kw)


def check(**kw: Any) -> None:
    prog = parse_program(make(**kw))
    try:
        ref = run_program(prog)
    except SarekError:
        return  # not a valid program (a read outside an array): nothing to compare
    for swap in (False, True):
        fused, reports = fuse_program(prog, FusionOptions(swap=swap))
        if fused is prog:
            continue
        text = print_program(fused)
        assert print_program(parse_program(text)) == text
        got = run_program(fused)
        for name in ("u", "f", "g", "m"):
            a, b = ref.values[name], got.values[name]
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), (name, reports, text)


CHECKED = """
program c
  var n : i32 = 6; var m : i32;
  var u : f64[-2:] allocatable; var f : f64[-1:] allocatable; var g : f64[0:] allocatable;
begin
  allocate u[-2:n + 3]; allocate f[-1:n + HF]; allocate g[0:n + 3];
  parallel for (i = -2 to n + 3) do u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0 done;
  m := length(f) - 3;
  for t = 1 to 3 do
    parallel for (i = -1 to n) do f[i] <- u[i] * 0.5 + u[i + 1] done;
    parallel for (i = 0 to m) do u[i] <- u[i] - 0.25 * (f[i + 1] - f[i - 1]) done
  done
end
"""


def test_lf8_runtime_check_fails_and_passes_differentially() -> None:
    """LF-8: coverage depends on f's allocation. Allocated beyond the producer's bounds
    (HF = 2) the check fails and the original loops run (reading elements the producer
    never wrote); allocated within them (HF = 0) the fused loop runs. Both bitwise equal."""
    for hf in (2, 0):
        prog = parse_program(CHECKED.replace("HF", str(hf)))
        for swap in (False, True):
            fused, reports = fuse_program(prog, FusionOptions(swap=swap))
            [r] = reports
            assert r.plan is not None and r.plan.check is not None, str(r)
            ref, got = run_program(prog), run_program(fused)
            for name in ("u", "f", "g"):
                assert ref.array(name).tobytes() == got.array(name).tobytes()


def make2d(r: random.Random) -> str:
    gj = r.choice(["", "if j >= 1 then ", "if i >= 1 then ", "if i + j >= 1 then ", "if j <= m - 1 && i >= 0 then "])
    gk = r.choice(["", "if i >= 1 then "])
    oj, oi = r.choice([-1,0,1]), r.choice([-1,0,1])
    reads = []
    for _ in range(r.randint(1,3)):
        a, b = r.choice([-1,0,1]), r.choice([-1,0,1])
        arr = r.choice(["f", "h"])
        reads.append(f"{arr}[j + {a}, i + {b}]".replace("+ -1", "- 1"))
    cond = r.choice(["", "if j >= 2 then ", "if i <= n - 2 then "])
    renamed = r.random() < 0.5
    tgt = "u" if renamed else "g"
    cons = f"{cond}{tgt}[j, i] <- u[j, i] * 0.5 + ({' + '.join(reads)}) * 0.125" if renamed else f"g[j, i] <- {' + '.join(reads)}"
    if renamed and cond:
        cons = f"{tgt}[j, i] <- u[j, i] * 0.5 + ({cond.replace('if ','').replace(' then ','')} ? ({' + '.join(reads)}) : 1.0) * 0.125"
    pl = (r.choice([-1,0,1]), r.choice([-1,0,1]))
    ph = (r.choice([-1,0,1]), r.choice([-1,0,1]))
    cl = (r.choice([0,1,2]), r.choice([0,1,2]))
    ch = (r.choice([0,1]), r.choice([0,1]))
    ex = r.choice([0,1,2])
    return f"""
pure fun mix(a : f64, b : f64) : f64 = return a * 0.5 - b * 0.25
program d
  var n : i32 = {r.randint(1,6)}; var m : i32 = {r.randint(1,5)}; var nt : i32 = {r.randint(1,3)};
  var u : f64[-2:, -2:] allocatable; var f : f64[-1:, -1:] allocatable; var h : f64[-1:, -1:] allocatable; var g : f64[-2:, -2:] allocatable;
begin
  allocate u[-2:m + 3, -2:n + 3]; allocate f[-1:m + {ex}, -1:n + {ex}]; allocate h[-1:m + 1, -1:n + 1]; allocate g[-2:m + 3, -2:n + 3];
  parallel for (j = -2 to m + 3, i = -2 to n + 3) do u[j, i] <- f64((i * 7 + j * 3) % 11) * 0.5 - 1.0 done;
  for t = 1 to nt do
    for s = 1 to 2 do
      parallel for (j = {pl[0]} to m + {ph[0]}, i = {pl[1]} to n + {ph[1]}) do (
        {gj}f[j, i] <- mix(u[j + {oj}, i], u[j, i + {oi}]);
        {gk}h[j, i] <- u[j, i] * 2.0
      ) done;
      parallel for (j = {cl[0]} to m - {ch[0]}, i = {cl[1]} to n - {ch[1]}) do {cons} done
    done
  done
end
"""


def check2d(seed: int) -> int:
    """One random 2-D program (guards on one or both indices, two intermediates, reads at
    offsets, a renamed field under a test, allocation-dependent coverage): every accepted
    fusion, with and without swap, is bitwise equal. Gives the number of fusions made."""
    prog = parse_program(make2d(random.Random(seed)))
    try:
        ref = run_program(prog)
    except SarekError:
        return 0
    made = 0
    for swap in (False, True):
        fused, reports = fuse_program(prog, FusionOptions(swap=swap))
        if fused is prog:
            continue
        made += 1
        got = run_program(fused)
        for name in ("u", "f", "h", "g"):
            assert ref.array(name).tobytes() == got.array(name).tobytes(), (name, reports)
    return made


def test_lf14_pp6_differential_2d() -> None:
    """LF-7, LF-8, LF-14, PP-6 on 2-D nests (seeds chosen to include accepted fusions)."""
    assert sum(check2d(seed) for seed in (2, 6, 7)) >= 4


@pytest.mark.slow
def test_lf14_pp6_differential_2d_long() -> None:
    assert sum(check2d(seed) for seed in range(400)) > 50


BOUNDARY_GUARDS = ["", "if i >= {pl} + 1 then ", "if i != 2 then ", "if i <= 1 || i >= n - 1 then ",
                   "if 2 * i >= n then "]


def make_boundary(r: random.Random) -> str:
    """LF-50/LF-52: a producer over an interior of the arrays (its bounds and a test), a
    consumer over another range reading the intermediate at offsets -2 .. 2 (outside the
    producer's domain near its edges, or nowhere inside it), sometimes through a let (no
    interior split), sometimes renaming u, sometimes a third loop reading the consumer's
    output at offsets (a chain of three loops)."""
    pl, ph = r.choice([0, 1, 2]), r.choice([0, 1, 2])
    cl, ch = r.choice([-1, 0, 1, 2]), r.choice([-1, 0, 1, 2])
    guard = r.choice(BOUNDARY_GUARDS).format(pl=pl)
    offs = [r.choice([-2, -1, 0, 1, 2]) for _ in range(r.randint(1, 4))]

    def at(base: str, o: int) -> str:
        return f"f[{base} + {o}]" if o >= 0 else f"f[{base} - {-o}]"

    if r.random() < 0.25:
        reads = " + ".join(at("k", o) for o in offs)
        value = f"let k = i in ({reads})"
    else:
        value = "(" + " + ".join(at("i", o) for o in offs) + ")"
    renamed = r.random() < 0.5
    cons = (f"u[i] <- u[i] * 0.5 + {value} * 0.25" if renamed else f"g[i] <- {value} * 0.5")
    if value.startswith("let"):
        cons = (f"let k = i in u[i] <- u[i] * 0.5 + ({value[len('let k = i in '):]}) * 0.25"
                if renamed else f"let k = i in g[i] <- {value[len('let k = i in '):]} * 0.5")
    third = ""
    if r.random() < 0.3:
        third = ";\n      parallel for (i = 0 to n) do h[i] <- g[i - 1] + g[i + 1] done"
    return f"""
pure fun mix(a : f64, b : f64) : f64 = return a * 0.5 - b * 0.25
program d
  var n : i32 = {r.randint(0, 7)}; var nt : i32 = {r.randint(1, 3)};
  var u : f64[-4:] allocatable; var f : f64[-4:] allocatable; var g : f64[-4:] allocatable;
  var h : f64[-4:] allocatable;
begin
  allocate u[-4:n + 4]; allocate f[-4:n + 4]; allocate g[-4:n + 4]; allocate h[-4:n + 4];
  parallel for (i = -4 to n + 4) do (
    u[i] <- f64((i * 7 + 3) % 11) * 0.5 - 1.0; f[i] <- f64(i) + 100.0; g[i] <- 0.0;
    h[i] <- 0.0
  ) done;
  for t = 1 to nt do
    for s = 1 to 2 do
      parallel for (i = {pl} to n - {ph}) do {guard}f[i] <- mix(u[i - 1], u[i + 1]) done;
      parallel for (i = {cl} to n - {ch}) do {cons} done{third}
    done
  done
end
"""


def check_boundary(seed: int) -> int:
    """One random boundary-reading program: every fusion, with and without swap, bitwise
    equal to the unfused program. Gives the number of fusions with LF-50 reads."""
    prog = parse_program(make_boundary(random.Random(seed)))
    try:
        ref = run_program(prog)
    except SarekError:
        return 0
    made = 0
    for swap in (False, True):
        fused, reports = fuse_program(prog, FusionOptions(swap=swap))
        if fused is prog:
            continue
        made += sum(1 for r in reports if r.plan is not None and r.plan.edges)
        text = print_program(fused)
        assert print_program(parse_program(text)) == text
        got = run_program(fused)
        for name in ("u", "f", "g", "h"):
            assert ref.array(name).tobytes() == got.array(name).tobytes(), (seed, name, text)
    return made


BOUNDARY_SEEDS = 600 if os.environ.get("SAREK_FUZZ") else 40


def test_lf50_lf52_differential_boundary_readers() -> None:
    """LF-50/LF-52/LF-14: generated consumers reading the intermediate at i - 2 .. i + 2
    where the producer's domain is an interior (bounds and tests), 0 mismatches; most
    samples fuse with boundary reads. SAREK_FUZZ=1 runs 600 programs."""
    made = sum(check_boundary(seed) for seed in range(BOUNDARY_SEEDS))
    assert made >= BOUNDARY_SEEDS // 2, made


def test_lf50_differential_2d_now_fuses_boundary_readers() -> None:
    """LF-50 on the 2-D generator: programs whose consumer reads outside the producer's
    rows or columns (refused before LF-50) fuse and stay equal."""
    assert sum(check2d(seed) for seed in range(20 if not os.environ.get("SAREK_FUZZ")
                                               else 400)) >= 10
