"""Rounded-up launches: a consumer guarded by ``if i < n`` on ``ceil(n / B) * B`` threads
fuses with a producer that stores ``[0, n)`` (specs/fusion-legality.md LEG-18, LEG-14,
LEG-3; specs/affine.md AFF-18), concretely and with symbolic counts, and is bitwise the
unfused pair on the interpreter and on OpenCL (PoCL). A consumer that acts on an element
the producer does not store exactly once is still refused."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from sarek_py.analysis.affine.conditions import Dnf
from sarek_py.analysis.affine.forms import AffineCtx
from sarek_py.fusion.epilogue.conditions import describe
from sarek_py.fusion.epilogue.domain import acting_dnf, project, spans
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.sequence import fuse_launches, program_segments
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.ir.diagnostics import BackendUnavailable, SarekError
from sarek_py.ir.host.launch import KernelLaunch, Launch
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel, Ref
from sarek_py.ir.parser import parse_module
from sarek_py.runtime import get_backend

FUZZ = bool(os.environ.get("SAREK_FUZZ"))

PAIR = """
kernel scale(x : f32[], y : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then y[i] <- a * x[i]

kernel relu(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then z[i] <- y[i] > 0.0f ? y[i] : 0.0f
"""
M = parse_module(PAIR, "pair.sk")

Run = Callable[[Kernel, dict[str, Any], int, int], None]


def interp(k: Kernel, args: dict[str, Any], threads: int, block: int) -> None:
    run_kernel(k, args, threads, block)


def opencl() -> Run:
    try:
        be = get_backend("opencl")
    except (BackendUnavailable, SarekError) as exc:
        pytest.skip(f"no OpenCL: {exc}")

    def run(k: Kernel, args: dict[str, Any], threads: int, block: int) -> None:
        be.run_kernel(k, args, threads, block)
    return run


def run_all(launches: list[Launch], bufs: dict[str, np.ndarray], run: Run) -> None:
    for lc in launches:
        args = {k: bufs[v] if isinstance(v, str) else v for k, v in lc.by_name.items()}
        assert isinstance(lc.threads, int) and isinstance(lc.block, int)
        run(lc.kernel, args, lc.threads, lc.block)


def storages(size: int, names: str, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {c: rng.standard_normal(size).astype(np.float32) for c in names}


def same_after(before: list[Launch], after: list[Launch], size: int, run: Run,
               seed: int = 0, names: str = "XYZ") -> None:
    a, b = storages(size, names, seed), storages(size, names, seed)
    run_all(before, a, run)
    run_all(after, b, run)
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k


def rounded(n: int, b: int) -> int:
    return -(-n // b) * b


def pair(n: int, tp: int, tc: int, block: int = 256, nc: int | None = None) -> list[Launch]:
    return [KernelLaunch(M.kernel("scale"), tp, block, {"x": "X", "y": "Y", "a": 1.5, "n": n}),
            KernelLaunch(M.kernel("relu"), tc, block,
                         {"y": "Y", "z": "Z", "n": n if nc is None else nc})]


# ------------------------------------------------------------------- concrete (LEG-18)


@pytest.mark.parametrize("n", [1000, 1, 255, 257, 513])
def test_leg18_rounded_up_launch_fuses_and_is_bitwise(n: int) -> None:
    """LEG-18: the issue's launch — 1024 threads for n = 1000, both guarded by i < n —
    fuses (it was refused: "stores 1000 of the 1024 elements"), and odd n too; the fused
    launch passes its own launch check (LEG-14) and is bitwise the unfused pair."""
    before = pair(n, rounded(n, 256), rounded(n, 256))
    new, report = fuse_launches(before)
    assert [d.fused for d in report] == [True], [str(d) for d in report]
    same_after(before, new, rounded(n, 256), interp, seed=n)


def test_leg18_rounded_up_launch_bitwise_on_opencl() -> None:
    run = opencl()
    for n, b in ((1000, 256), (37, 8), (1, 32)):
        before = pair(n, rounded(n, b), rounded(n, b), b)
        new, report = fuse_launches(before)
        assert report[0].fused, report[0]
        same_after(before, new, rounded(n, b), run, seed=n)


def test_leg18_consumer_acting_past_the_stores_is_refused() -> None:
    """LEG-18/LEG-3: the premise fails — relu's guard lets it act on 1000..1011, which
    scale (i < 1000) does not store: refused, the message counting the acting elements."""
    _, report = fuse_launches(pair(1000, 1024, 1024, nc=1012))
    (d,) = report
    assert not d.fused and d.rule == "LEG-3", d
    assert "stores 1000 of the 1012 elements" in (d.reason or ""), d.reason
    assert "elements 1000..1011 are not stored" in (d.reason or ""), d.reason
    assert "that relu's body acts on (0..1011, LEG-18" in (d.reason or ""), d.reason


@pytest.mark.parametrize("body", [
    # acts on every thread: an unguarded store before the guard
    "z[i] <- 0.0f; if i < n then z[i] <- y[i]",
    # the else branch acts
    "if i < n then z[i] <- y[i] else z[i] <- -1.0f",
    # a read outside the guard acts (it reads y, which may not be stored)
    "let v = y[i] in if i < n then z[i] <- v",
    # the guard itself reads memory: every thread acts
    "if y[i] > 0.0f && i < n then z[i] <- y[i]",
    # the guard is on a mutable variable: not known, every thread acts
    "let mut m = n in if i < m then z[i] <- y[i]",
])
def test_leg18_consumers_that_act_everywhere_are_refused(body: str) -> None:
    """LEG-18: a consumer thread acts when it reads, stores or calls; where the guard does
    not cover every action (or is not known), the elements past n must be stored: with
    scale storing [0, 1000) of 1024, refused with LEG-3."""
    c = parse_module(f"kernel c(y : f32[], z : f32[], n : i32) =\n  let i = global_thread_id "
                     f"in {body}\n", "c.sk").kernel("c")
    launches = [pair(1000, 1024, 1024)[0],
                KernelLaunch(c, 1024, 256, {"y": "Y", "z": "Z", "n": 1000})]
    _, (d,) = fuse_launches(launches)
    assert not d.fused and d.rule == "LEG-3", d


def test_leg18_guard_with_hole_and_loop_and_helper() -> None:
    """LEG-18: a consumer acting on [0, n) minus one element, one whose actions are in a
    loop under the guard, and one calling a helper under the guard all fuse with a
    producer storing exactly [0, n); bitwise equal."""
    src = PAIR + """
fun twice(v : f32) : f32 = return v + v

kernel hole(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n && i != 3 then z[i] <- y[i]

kernel loop(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (let mut s = 0.0f in for k = 0 to 3 do s := s + y[i] done; z[i] <- s)

kernel call(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if n > i then z[i] <- twice(y[i])
"""
    m = parse_module(src, "c.sk")
    for name in ("hole", "loop", "call"):
        before = [KernelLaunch(m.kernel("scale"), 64, 16, {"x": "X", "y": "Y", "a": 2.0, "n": 50}),
                  KernelLaunch(m.kernel(name), 64, 16, {"y": "Y", "z": "Z", "n": 50})]
        new, (d,) = fuse_launches(before)
        assert d.fused, (name, str(d))
        same_after(before, new, 64, interp)


# ------------------------------------------------------------- launch conditions (LEG-14)


def test_leg14_fused_kernel_checks_what_its_consumer_acts_on() -> None:
    """LEG-14 with LEG-18: the fused kernel's launch check takes the acting elements
    from the consumer body it carries, with the launch's own numbers: ep_tc = 1024 with
    c_n = 1000 runs; c_n = 1001 (relu acts on element 1000, which is not stored) and a
    negative ep_tc (no valid consumer launch) are refused before running."""
    fk = fuse(M.kernel("scale"), M.kernel("relu"), shared={"y": "y"})
    text = "\n".join(describe(fk))
    assert "on which relu's body (as inserted) reads, stores or calls (LEG-18)" in text
    a = storages(1024, "xyz", 1)
    args = {"p_x": a["x"], "p_y": a["y"], "p_a": np.float32(1.5), "p_n": 1000,
            "c_z": a["z"], "c_n": 1000, "ep_tc": 1024}
    run_kernel(fk, args, 1024, 256)
    with pytest.raises(FusionRefused, match="LEG-14") as ei:
        run_kernel(fk, {**args, "c_n": 1001}, 1024, 256)
    assert "LEG-3" in ei.value.reason and "1000 of the 1001 elements" in ei.value.reason
    with pytest.raises(FusionRefused, match="LEG-14"):
        run_kernel(fk, {**args, "ep_tc": -1}, 1024, 256)


# ------------------------------------------------------------------ symbolic (LEG-18/19)

PROGRAM = PAIR + """
program main
  var n : i32;
  var x : f32[] allocatable;
  var y : f32[] allocatable;
  var z : f32[] allocatable;
begin
  read n;
  allocate x[n];
  allocate y[n];
  allocate z[n];
  launch scale(x, y, 1.5f, n) threads {tp} block {b};
  launch relu(y, z, {nc}) threads {tc} block {b}
end
"""


def symbolic(tp: str, tc: str, b: int = 256, nc: str = "n") -> tuple[list[Launch], Any]:
    text = PROGRAM.format(tp=tp, tc=tc, b=b, nc=nc)
    (seg,) = program_segments(parse_program(text, "prog.sk"))
    launches = list(seg.launches)
    new, report = fuse_launches(launches)
    return launches, (new, report)


def test_leg18_symbolic_rounded_up_fuses_with_its_note() -> None:
    """LEG-18, LEG-19: ``threads ((n + 255) / 256) * 256`` on both sides, guards i < n:
    proved for every n where the count does not wrap, the decision saying so; the fused
    launch instantiated for odd n is bitwise the unfused pair."""
    launches, (new, report) = symbolic("((n + 255) / 256) * 256", "((n + 255) / 256) * 256")
    (d,) = report
    assert d.fused, str(d)
    assert "`n + 255` within i32" in str(d) and "LEG-14" in str(d), str(d)
    for n in (1, 255, 256, 257, 1000):
        before = [lc.known_in({"n": n}) for lc in launches]
        after = [lc.known_in({"n": n}) for lc in new]
        same_after(before, after, rounded(n, 256), interp, seed=n, names="xyz")


def test_leg18_symbolic_rounded_up_bitwise_on_opencl() -> None:
    run = opencl()
    launches, (new, report) = symbolic("((n + 7) / 8) * 8", "((n + 7) / 8) * 8", 8)
    assert report[0].fused, str(report[0])
    for n in (1, 13, 64):
        before = [lc.known_in({"n": n}) for lc in launches]
        after = [lc.known_in({"n": n}) for lc in new]
        same_after(before, after, rounded(n, 8), run, seed=n, names="xyz")


@pytest.mark.parametrize("tp, tc, nc, why", [
    # scale's count is not known to reach n: relu acts on [0, n)
    ("n - 1", "((n + 255) / 256) * 256", "n", "LEG-12"),
    # relu acts on n + 1 elements, scale stores n
    ("((n + 255) / 256) * 256", "((n + 255) / 256) * 256", "n + 1", "LEG-12"),
])
def test_leg18_symbolic_premise_failing_is_refused(tp: str, tc: str, nc: str, why: str) -> None:
    _, (_, report) = symbolic(tp, tc, nc=nc)
    (d,) = report
    assert not d.fused and d.rule == why, str(d)


# ---------------------------------------------------------------- the domain (LEG-18)


def test_leg18_acting_condition_units() -> None:
    """The acting condition is weaker than the real one: else branches, reads in lets and
    tests, loops (constraints on the loop variable dropped) are all accounted for."""
    src = """
kernel a(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then for k = 0 to 3 do if k < i then z[i] <- y[k] done

kernel b(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i >= 5 then () else z[i] <- 1.0f
"""
    m = parse_module(src, "d.sk")
    for name, want in (("a", [(0, 9)]), ("b", [(0, 4)])):
        body = m.kernel(name).body
        idx = body.var  # type: ignore[attr-defined]
        d = acting_dnf(body.body, AffineCtx())  # type: ignore[attr-defined]
        n = Ref(m.kernel(name).param("n"))
        got = spans(project(d, lambda x, idx=idx, n=n: x in (Ref(idx), n)), Ref(idx), 0, 99,
                    {n: 10})
        assert got == want, (name, got, str(d))
    assert spans(Dnf.false(), Ref(idx), 0, 9) == []


# -------------------------------------------------------------- differential generator

PRODUCERS = {
    "guard": "if i < n then y[i] <- a * x[i]",
    "ret": "if i >= n then return; y[i] <- x[i] + a",
    "all": "y[i] <- x[i] - a",
    "else": "if i < n then y[i] <- x[i] else y[i] <- a",
    "twice": "if i < n then (y[i] <- x[i]; if i == 0 then y[0] <- a)",
}
CONSUMERS = {
    "guard": "if i < n then z[i] <- y[i] * 2.0f",
    "rev": "if n > i then (let v = y[i] in z[i] <- v > 0.0f ? v : 0.0f)",
    "hole": "if i < n && i != 2 then z[i] <- y[i] + 1.0f",
    "first": "z[i] <- 0.0f; if i < n then z[i] <- y[i]",
    "else": "if i < n then z[i] <- y[i] else z[i] <- -1.0f",
    "all": "z[i] <- y[i]",
}


def stored(p: str, n: int, tp: int) -> dict[int, int]:
    """How many times the producer template stores each element (the oracle)."""
    out: dict[int, int] = {}
    for g in range(tp):
        els = {"guard": [g] if g < n else [], "ret": [g] if g < n else [], "all": [g],
               "else": [g], "twice": ([g] + ([0] if g == 0 else [])) if g < n else []}[p]
        for e in els:
            out[e] = out.get(e, 0) + 1
    return out


def acts(c: str, n: int, t: int) -> bool:
    return {"guard": t < n, "rev": t < n, "hole": t < n and t != 2, "first": True,
            "else": True, "all": True}[c]


def gen_module() -> Mapping[str, Kernel]:
    text = "".join(f"kernel p_{k}(x : f32[], y : f32[], a : f32, n : i32) =\n"
                   f"  let i = global_thread_id in {b}\n" for k, b in PRODUCERS.items())
    text += "".join(f"kernel c_{k}(y : f32[], z : f32[], n : i32) =\n"
                    f"  let i = global_thread_id in {b}\n" for k, b in CONSUMERS.items())
    m = parse_module(text, "gen.sk")
    return {k.name: k for k in m.kernels}


def gen_cases(rng: np.random.Generator, count: int) -> list[tuple[str, str, int, int, int,
                                                                 int, int]]:
    out = []
    for _ in range(count):
        b = int(rng.choice([4, 8, 16]))
        n = int(rng.integers(1, 40)) | 1 if rng.random() < 0.5 else int(rng.integers(1, 40))
        counts = [n, rounded(n, b), n + int(rng.integers(1, 5)), max(n - 1, 1)]
        tp, tc = int(rng.choice(counts)), int(rng.choice(counts))
        nc = int(rng.choice([n, n, n - 1, n + 1])) if n > 1 else n
        out.append((str(rng.choice(list(PRODUCERS))), str(rng.choice(list(CONSUMERS))),
                    n, nc, tp, tc, b))
    return out


def differential(count: int, seed: int, run: Run) -> tuple[int, int]:
    """Every generated pair fuses exactly when the oracle says each element the consumer
    acts on is stored exactly once (the concrete analysis is exact on this class), and
    every fused pair is bitwise the unfused one. Returns (fused, refused)."""
    ks = gen_module()
    fused = refused = 0
    for p, c, n, nc, tp, tc, b in gen_cases(np.random.default_rng(seed), count):
        before: list[Launch] = [
            KernelLaunch(ks[f"p_{p}"], tp, b, {"x": "X", "y": "Y", "a": 0.5, "n": n}),
            KernelLaunch(ks[f"c_{c}"], tc, b, {"y": "Y", "z": "Z", "n": nc})]
        new, (d,) = fuse_launches(before)
        st = stored(p, n, tp)
        legal = all(st.get(t, 0) == 1 for t in range(tc) if acts(c, nc, t))
        assert d.fused == legal, (p, c, n, nc, tp, tc, b, str(d))
        if d.fused:
            fused += 1
            same_after(before, new, max(tp, tc) + 4, run, seed=n)
        else:
            refused += 1
    return fused, refused


#: generated cases of the default run (``make test``); the slow tests below run these
#: seeds at the sizes the default run had before (300, 40, 120, 25) and the long runs
#: (docs/testing.md)
PAIRS, PAIRS_CL, SYMBOLIC, SYMBOLIC_CL = 150, 16, 60, 10


def test_leg18_generated_pairs_interp() -> None:
    """LEG-18 differential: generated guarded pairs with rounded-up, exact, larger and
    smaller launches, odd n and consumer guards off by one: decision = oracle, fused =
    unfused bitwise on the interpreter."""
    fused, refused = differential(PAIRS, 13, interp)
    assert fused > PAIRS // 5 and refused > PAIRS // 5, (fused, refused)


def test_leg18_generated_pairs_opencl() -> None:
    fused, _ = differential(PAIRS_CL, 14, opencl())
    assert fused > PAIRS_CL // 8


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="set SAREK_FUZZ=1 (make fuzz)")
def test_leg18_generated_pairs_fuzz() -> None:
    fused, refused = differential(300, 13, interp)
    assert fused > 60 and refused > 60, (fused, refused)
    fused, refused = differential(5000, 15, interp)
    assert fused > 1000 and refused > 1000
    fused, _ = differential(40, 14, opencl())
    assert fused > 5


def gen_program(p: str, c: str, tp: str, tc: str, nc: str, b: int) -> str:
    return (f"kernel p(x : f32[], y : f32[], a : f32, n : i32) =\n"
            f"  let i = global_thread_id in {PRODUCERS[p]}\n"
            f"kernel c(y : f32[], z : f32[], n : i32) =\n"
            f"  let i = global_thread_id in {CONSUMERS[c]}\n"
            "program main\n  var n : i32;\n  var x : f32[] allocatable;\n"
            "  var y : f32[] allocatable;\n  var z : f32[] allocatable;\nbegin\n  read n;\n"
            f"  launch p(x, y, 0.5f, n) threads {tp} block {b};\n"
            f"  launch c(y, z, {nc}) threads {tc} block {b}\nend\n")


def symbolic_differential(count: int, seed: int, run: Run) -> tuple[int, int]:
    """LEG-18/LEG-19 with symbolic counts: a pair proved for every n must be legal by the
    oracle for each n tried, and bitwise the unfused pair there. Returns (fused, refused)."""
    rng = np.random.default_rng(seed)
    fused = refused = 0
    for _ in range(count):
        b = int(rng.choice([4, 8]))
        up = f"((n + {b - 1}) / {b}) * {b}"
        tp, tc = (str(rng.choice(["n", up, "n + 3", "n - 1"])) for _ in range(2))
        nc = str(rng.choice(["n", "n", "n + 1", "n - 1"]))
        p, c = str(rng.choice(list(PRODUCERS))), str(rng.choice(list(CONSUMERS)))
        (seg,) = program_segments(parse_program(gen_program(p, c, tp, tc, nc, b), "g.sk"))
        launches = list(seg.launches)
        new, (d,) = fuse_launches(launches)
        if not d.fused:
            refused += 1
            continue
        fused += 1
        for n in (1, 2, 3, b - 1, b, b + 1, 2 * b + 1):
            before = [lc.known_in({"n": n}) for lc in launches]
            after = [lc.known_in({"n": n}) for lc in new]
            ntp, ntc = before[0].threads, before[1].threads
            nnc = before[1].by_name["n"]
            assert isinstance(ntp, int) and isinstance(ntc, int) and isinstance(nnc, int)
            st = stored(p, n, ntp)
            legal = all(st.get(t, 0) == 1 for t in range(ntc) if acts(c, nnc, t))
            assert legal, (p, c, tp, tc, nc, b, n, str(d))
            same_after(before, after, max(ntp, ntc) + 4, run, seed=n, names="xyz")
    return fused, refused


def test_leg18_generated_symbolic_pairs_interp() -> None:
    """Generated host programs (rounded-up, exact, n + 3 and n - 1 counts, guards off by
    one): every fused pair is legal and bitwise equal for n in 1 .. 2B+1."""
    fused, refused = symbolic_differential(SYMBOLIC, 21, interp)
    assert fused > SYMBOLIC // 8 and refused > SYMBOLIC // 8, (fused, refused)


def test_leg18_generated_symbolic_pairs_opencl() -> None:
    fused, _ = symbolic_differential(SYMBOLIC_CL, 22, opencl())
    assert fused > SYMBOLIC_CL // 8


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ, reason="set SAREK_FUZZ=1 (make fuzz)")
def test_leg18_generated_symbolic_pairs_fuzz() -> None:
    fused, refused = symbolic_differential(120, 21, interp)
    assert fused > 15 and refused > 15, (fused, refused)
    fused, refused = symbolic_differential(2000, 23, interp)
    assert fused > 200 and refused > 200
    fused, _ = symbolic_differential(25, 22, opencl())
    assert fused > 3


@pytest.mark.parametrize("guard", ["i + 2147483000 < n", "i64(i + 2147483000) < i64(n)"])
def test_leg18_consumer_guard_that_wraps_acts_everywhere(guard: str) -> None:
    """LEG-18 with AFF-19: exactly, ``i + 2147483000 < 10`` holds for no thread; on the
    device it wraps for i >= 648 and those threads act — on elements scale does not
    store. The acting condition is only used where the consumer's tests cannot wrap;
    otherwise every element counts: refused (concretely and at the fused launch)."""
    c = parse_module(f"kernel c(y : f32[], z : f32[], n : i32) =\n  let i = global_thread_id "
                     f"in if {guard} then z[i] <- y[i]\n", "c.sk").kernel("c")
    launches = [pair(10, 1024, 1024)[0],
                KernelLaunch(c, 1024, 256, {"y": "Y", "z": "Z", "n": 10})]
    _, (d,) = fuse_launches(launches)
    assert not d.fused and d.rule == "LEG-3", d
    fk = fuse(M.kernel("scale"), c, shared={"y": "y"})
    a = storages(1024, "xyz", 2)
    with pytest.raises(FusionRefused, match="LEG-14"):
        run_kernel(fk, {"p_x": a["x"], "p_y": a["y"], "p_a": np.float32(1.0), "p_n": 10,
                        "c_z": a["z"], "c_n": 10, "ep_tc": 1024}, 1024, 256)
    # symbolic: the same guard over a host n
    text = PROGRAM.format(tp="((n + 255) / 256) * 256", tc="((n + 255) / 256) * 256", b=256,
                          nc="n").replace("launch relu(", "launch c(") + \
        f"kernel c(y : f32[], z : f32[], n : i32) =\n  let i = global_thread_id in if " \
        f"{guard} then z[i] <- y[i]\n"
    text = text[:text.index("program")] + text[text.index("end\n") + 4:] + \
        text[text.index("program"):text.index("end\n") + 4]
    (seg,) = program_segments(parse_program(text, "w.sk"))
    _, (d,) = fuse_launches(list(seg.launches))
    assert not d.fused, str(d)


def test_leg18_rounded_up_chain_fuses_and_each_step_is_checked() -> None:
    """LEG-18 through a chain (LEG-10): scale -> relu -> bias, all on 1024 threads with
    guards i < 1000, fuse into one launch whose two steps are each checked at launch
    with the acting elements of their own consumer body; bitwise the unfused chain on
    the interpreter and OpenCL. With bias's n = 1001 the outer step is refused."""
    m = parse_module(PAIR + """
kernel bias(z : f32[], w : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then w[i] <- z[i] + 0.25f
""", "chain.sk")

    def chain(nb: int) -> list[Launch]:
        return [KernelLaunch(m.kernel("scale"), 1024, 256, {"x": "X", "y": "Y", "a": 1.5,
                                                             "n": 1000}),
                KernelLaunch(m.kernel("relu"), 1024, 256, {"y": "Y", "z": "Z", "n": 1000}),
                KernelLaunch(m.kernel("bias"), 1024, 256, {"z": "Z", "w": "W", "n": nb})]

    new, report = fuse_launches(chain(1000))
    assert [d.fused for d in report] == [True, True] and len(new) == 1
    assert new[0].kernel.requires is not None and len(new[0].kernel.requires.steps) == 2
    same_after(chain(1000), new, 1024, interp, names="XYZW")
    same_after(chain(1000), new, 1024, opencl(), names="XYZW")
    _, report = fuse_launches(chain(1001))
    assert [d.fused for d in report] == [True, False] and report[1].rule == "LEG-3"
    args = {k: (storages(1024, "XYZW", 0)[v] if isinstance(v, str) else v)
            for k, v in new[0].by_name.items()}
    with pytest.raises(FusionRefused, match="LEG-14"):
        run_kernel(new[0].kernel, {**args, "c_n": 1001}, 1024, 256)  # bias acts on 1000
    with pytest.raises(FusionRefused, match="LEG-14"):
        run_kernel(new[0].kernel, {**args, "p_c_n": 1001}, 1024, 256)  # relu acts on 1000
