"""Refusals name the real cause, in the user's names and flags, at a place (issue 11).

Rules: EF-16 (specs/epilogue-fusion.md), LEG-17 (specs/fusion-legality.md), LF-19
(specs/loop-fusion.md). For every rule id that can refuse (EF-*, LEG-*, LF-*, PP-*, INL-*,
OFF-*) at least one case asserts the cause words, the user's names, and a location where
the cause has one. The first part holds the cases reported in issue 11 (each failed
before its fix); the second, a table per family of rules.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.frontend import Vec, f32, global_thread_id, i32, kernel, pipeline
from sarek_py.fusion.epilogue.consumer import consumer_shape
from sarek_py.fusion.epilogue.fuse_kernels import fuse
from sarek_py.fusion.epilogue.legality import check_launches
from sarek_py.fusion.epilogue.sequence import Decision, fuse_launches
from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.fusion.loops.inline import inline_module
from sarek_py.fusion.refusal import FusionRefused
from sarek_py.host.offload import OffloadError, offload
from sarek_py.ir.host.launch import KernelLaunch
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.typecheck import check_kernel

# ----------------------------------------------------------------------------- helpers

KERNELS = """
kernel scale(x : f32[], tmp : f32[], a : f32, n : i32) =
  let i = global_thread_id in
  if i < n then
    tmp[i] <- a * x[i]

kernel relu(tmp : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    let v = tmp[i] in
    y[i] <- v > 0.0f ? v : 0.0f

kernel addk(y : f32[], z : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    z[i] <- y[i] + z[i + 1]

kernel rev(y : f32[], w : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    w[i] <- y[n - 1 - i]
"""


def kernels(src: str, file: str = "t.sk") -> dict[str, Kernel]:
    return {k.name: k for k in parse_module(src, file).kernels}


def says(r: FusionRefused | Decision | None, rule: str, *words: str, loc: bool = True,
         absent: tuple[str, ...] = ()) -> None:
    """``r`` refuses with ``rule``, its message holds ``words`` (the cause and the user's
    names) and none of ``absent``, and it has a location when ``loc``."""
    assert r is not None
    text = r.reason or ""
    assert r.rule == rule, f"[{r.rule}] {text}"
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"
    for w in absent:
        assert w not in text, f"{w!r} in {text!r}"
    if loc:
        assert r.loc is not None and r.loc.line >= 1, f"no location: {text!r}"


def refusal_of(p: Kernel, c: Kernel, **kw: object) -> FusionRefused:
    with pytest.raises(FusionRefused) as exc:
        fuse(p, c, **kw)  # type: ignore[arg-type]
    return exc.value


def pair_decision(launches: list[KernelLaunch]) -> Decision:
    _, report = fuse_launches(launches)
    refused = [d for d in report if not d.fused]
    assert refused, [str(d) for d in report]
    return refused[0]


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def explain(tmp_path: Path, capsys: pytest.CaptureFixture[str], sk: str,
            launches: str) -> str:
    (tmp_path / "k.sk").write_text(sk)
    (tmp_path / "k.launches").write_text(launches)
    code, out, err = run_cli(["explain", str(tmp_path / "k.sk")], capsys)
    assert code == 0, err
    return out


SYMBOLIC = """host x : f32[], tmp : f32[], y : f32[], n : i32
launch scale(x, tmp, 2.0f, n) threads n block 256
launch relu(tmp, y, n) threads n block 256
"""


def producer_variant(body: str) -> str:
    """The scale/relu pair with scale's body replaced."""
    return f"""
kernel scale(x : f32[], tmp : f32[], a : f32, n : i32) =
  let i = global_thread_id in
{body}

kernel relu(tmp : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    y[i] <- tmp[i]
"""


X = np.ones(1024, np.float32)

# ------------------------------------------------------- the cases reported in issue 11


@pytest.mark.parametrize("body, rule, words", [
    # a data-dependent test: LEG-4 (data decides which elements are stored), not "affine"
    ("  if x[i] > 0.0f then tmp[i] <- a * x[i]", "LEG-4",
     ("`x[i] > 0.0f`", "reads array x", "depends on the data")),
    # a store in a loop: LEG-5
    ("  for k = 0 to 1 do tmp[2 * i + k] <- a * x[i] done", "LEG-5",
     ("store of tmp", "loop over k")),
    # more than 64 alternatives: LEG-2, saying so
    ("  if " + " && ".join(f"(i < {j} || n < {j})" for j in range(1, 8))
     + " then tmp[i] <- a * x[i]", "LEG-2", ("more than 64 alternatives",)),
    # an index that is not affine: LEG-2, naming the product
    ("  if i < n then tmp[i * i] <- a * x[i]", "LEG-2",
     ("`i * i`", "multiplies two values that vary")),
])
def test_leg2_symbolic_refusals_name_the_cause(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, rule: str,
        words: tuple[str, ...]) -> None:
    """LEG-17, LEG-12: on the symbolic path the refusal names why the stores have no
    exact guard (it said "a store index … is not affine" for all of these)."""
    out = explain(tmp_path, capsys, producer_variant(body), SYMBOLIC)
    line = out.splitlines()[0]
    assert line.startswith(f"scale -> relu: not fused: [{rule}] scale: "), line
    for w in words:
        assert w in line, line
    assert "(at " in line and "k.sk:4:" in line, line  # the place of the cause
    assert "not affine in the thread id and the host symbols" not in line


def test_leg2_numeric_refusals_name_the_cause() -> None:
    """LEG-17: the numeric path too (data-dependent index, test, overflow)."""
    k = kernels(producer_variant("  if i < n then tmp[idx(x, i)] <- a * x[i]").replace(
        "kernel scale", "pure fun idx(v : f32[], j : i32) : i32 = return i32(v[j])\n"
        "kernel scale", 1))
    y = np.zeros(8, np.float32)
    t = np.zeros(8, np.float32)
    d = pair_decision([KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0, "n": 8}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})])
    says(d, "LEG-2", "`idx(x, i)`", "calls idx")
    k = kernels(producer_variant("  if x[i] > 0.0f then tmp[i] <- a * x[i]"))
    d = pair_decision([KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0, "n": 8}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})])
    says(d, "LEG-4", "`x[i] > 0.0f`", "reads array x", "elements of tmp")
    k = kernels(producer_variant("  if i + 2147483647 >= 2147483647 then tmp[i] <- a * x[i]"))
    d = pair_decision([KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0, "n": 8}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})])
    says(d, "LEG-6", "`i + 2147483647`", "may overflow i32")


def test_leg7_names_the_producers_parameter() -> None:
    """LEG-17, LEG-7: the user's ``y`` is bound to ``x``: the message says it is the
    buffer scale reads as ``x`` (it said scale reads ``y``, a parameter scale lacks)."""
    k = kernels(KERNELS)
    t = np.zeros(1024, np.float32)
    x = np.ones(1024, np.float32)
    d = pair_decision([KernelLaunch(k["scale"], 1024, 256, {"x": x, "tmp": t, "a": 2.0, "n": 1024}),
                       KernelLaunch(k["relu"], 1024, 256, {"tmp": t, "y": x, "n": 1024})])
    says(d, "LEG-7", "relu writes y", "the buffer producer scale reads as x")


def test_leg8_in_place_producer_is_not_reads_nothing() -> None:
    """LEG-17, LEG-8: ``scale(x, x)`` then ``relu(x, x)``: relu reads what scale writes
    (``tmp``, bound to ``x``); the cause is that relu writes what scale reads (LEG-7),
    not "relu reads nothing scale writes"."""
    k = kernels(KERNELS)
    x = np.ones(1024, np.float32)
    d = pair_decision([KernelLaunch(k["scale"], 1024, 256, {"x": x, "tmp": x, "a": 2.0, "n": 1024}),
                       KernelLaunch(k["relu"], 1024, 256, {"tmp": x, "y": x, "n": 1024})])
    says(d, "LEG-7", "relu writes y", "scale reads as x", absent=("reads nothing",))


def test_leg8_reads_nothing_names_both_sides() -> None:
    k = kernels(KERNELS)
    t, y, z = (np.zeros(1024, np.float32) for _ in range(3))
    d = pair_decision([KernelLaunch(k["scale"], 1024, 256, {"x": X, "tmp": t, "a": 2.0, "n": 4}),
                       KernelLaunch(k["relu"], 1024, 256, {"tmp": y, "y": z, "n": 4})])
    says(d, "LEG-8", "relu reads no buffer that scale writes", "scale writes tmp",
         "relu reads tmp")


def test_leg3_consumer_launched_over_more_elements() -> None:
    """LEG-17, LEG-3: scale stores 1000 elements, relu acts on all 1024 of its threads
    (its guard is i < 1024; with i < 1000 the pair fuses, LEG-18:
    tests/test_rounded_up_launches.py); the message said "the 1024 elements that the
    consumer reads"."""
    k = kernels(KERNELS)
    t, y = np.zeros(1024, np.float32), np.zeros(1024, np.float32)
    d = pair_decision([KernelLaunch(k["scale"], 1024, 256, {"x": X, "tmp": t, "a": 2.0, "n": 1000}),
                       KernelLaunch(k["relu"], 1024, 256, {"tmp": t, "y": y, "n": 1024})])
    says(d, "LEG-3", "stores 1000 of the 1024 elements", "relu's 1024 threads are launched",
         "elements 1000..1023 are not stored", absent=("that the consumer reads",))
    assert d.loc is not None and d.loc.line == 5  # scale's store of tmp


def test_ef3_let_copy_of_the_index_is_the_index() -> None:
    """EF-3: ``let t = i in y[t]`` writes at the index (it was refused "away from
    index"); chains of copies and widening casts too; a copy rebound elsewhere is not."""
    src = KERNELS + """
kernel relu2(tmp : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    let t = i in
    let u = t in
    let w = i64(u) in
    let v = tmp[u] in
    y[w] <- v > 0.0f ? v : 0.0f

kernel bad(tmp : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    let t = i in
    y[t] <- tmp[t];
    let t = i + 1 in
    y[t] <- 0.0f
"""
    k = kernels(src)
    c = consumer_shape(k["relu2"])
    assert c.written == ("y",) and "tmp" in c.reads_at_index
    with pytest.raises(FusionRefused) as exc:
        consumer_shape(k["bad"])
    says(exc.value, "EF-3", "writes y away from its index i", "y[t]")


def test_ef3_let_copy_fusion_is_exact() -> None:
    """EF-12 for let copies of the index: fused == unfused, bit for bit, on the
    interpreter, over several thread counts and a guard that is not the launch size."""
    src = KERNELS + """
kernel relu2(tmp : f32[], y : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then
    let t = i in
    let v = tmp[t] in
    let w = i64(t) in
    y[w] <- v > 0.0f ? v * tmp[t] : 0.0f
"""
    k = kernels(src)
    rng = np.random.default_rng(11)
    for size, n in [(1, 1), (7, 5), (64, 64), (100, 37)]:
        x = rng.standard_normal(size).astype(np.float32)
        tmp_a, y_a = np.zeros(size, np.float32), np.full(size, 9.0, np.float32)
        tmp_b, y_b = tmp_a.copy(), y_a.copy()
        launches = [KernelLaunch(k["scale"], size, 4, {"x": x, "tmp": tmp_a, "a": -1.5, "n": n}),
                    KernelLaunch(k["relu2"], n, 4, {"tmp": tmp_a, "y": y_a, "n": n})]
        for lc in launches:
            run_kernel(lc.kernel, dict(lc.by_name), lc.threads, lc.block)  # type: ignore[arg-type]
        fused, report = fuse_launches(
            [KernelLaunch(k["scale"], size, 4, {"x": x, "tmp": tmp_b, "a": -1.5, "n": n}),
             KernelLaunch(k["relu2"], n, 4, {"tmp": tmp_b, "y": y_b, "n": n})])
        assert [d.fused for d in report] == [True], [str(d) for d in report]
        (f,) = fused
        check_kernel(f.kernel)
        run_kernel(f.kernel, dict(f.by_name), f.threads, f.block)  # type: ignore[arg-type]
        assert tmp_a.tobytes() == tmp_b.tobytes() and y_a.tobytes() == y_b.tobytes()


def test_ef7_cli_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """EF-16, EF-7/EF-6: the CLI says ``--array``/``--shared`` where the API says
    ``p_array=``/``shared=``."""
    f = tmp_path / "amb.sk"
    f.write_text("""
kernel two(x : f32[], u : f32[], v : f32[]) =
  let i = global_thread_id in
  u[i] <- x[i];
  v[i] <- x[i]

kernel add(u : f32[], v : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- u[i] + v[i]
""")
    code, _, err = run_cli(["fuse", str(f), "--producer", "two", "--consumer", "add"], capsys)
    assert code == 1 and "[EF-7]" in err and "--array NAME" in err and "p_array" not in err
    assert f"{f}:7:1:" in err
    code, _, err = run_cli(["fuse", str(f), "--producer", "two", "--consumer", "add",
                            "--array", "w"], capsys)
    assert code == 1 and "--array w: producer two has no parameter w" in err
    code, _, err = run_cli(["fuse", str(f), "--producer", "two", "--consumer", "add",
                            "--shared", "y=q"], capsys)
    assert code == 1 and "--shared y=q: producer two has no parameter q" in err
    code, _, err = run_cli(["fuse", str(f), "--producer", "two", "--consumer", "add",
                            "--shared", "y=x"], capsys)
    assert code == 1 and "two writes u, v; add reads u, v; shared: y=x" in err
    # the API keeps its own spelling
    k = kernels(f.read_text())
    r = refusal_of(k["two"], k["add"], shared={"u": "u", "v": "v"})
    says(r, "EF-7", "u, v", "p_array=NAME")


def test_leg10_chain_messages_use_the_users_names() -> None:
    """LEG-17, LEG-10: after a chain, refusals named ``p_x``, ``c_y`` (the fused
    kernel's names); they name the user's ``x``, ``y``."""
    k = kernels(KERNELS)
    x, t, y = X, np.zeros(1024, np.float32), np.zeros(1024, np.float32)
    head = [KernelLaunch(k["scale"], 1024, 256, {"x": x, "tmp": t, "a": 2.0, "n": 1024}),
            KernelLaunch(k["relu"], 1024, 256, {"tmp": t, "y": y, "n": 1024})]
    d = pair_decision(head + [KernelLaunch(k["relu"], 1024, 256, {"tmp": y, "y": x, "n": 1024})])
    assert d.producer == "scale_relu"
    says(d, "LEG-7", "writes y", "reads as x", absent=("p_x", "p_tmp", "c_y"))
    d = pair_decision(head + [KernelLaunch(k["rev"], 1024, 256,
                                           {"y": y, "w": np.zeros(1024, np.float32), "n": 1024})])
    says(d, "LEG-7", "y[n - 1 - i]", absent=("c_y", "p_"))


def test_lf_notes_say_the_location_once_and_name_the_guard(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """LF-19: a note printed ``f:7:14: not fused: f:6:3: fusion refused: …`` and called
    an overflow guard a "run-time bounds check"."""
    f = tmp_path / "p.sk"
    f.write_text(PROGRAM.format(body="""
    parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done;
    parallel for (i = 0 to n) do g[i] <- f[i] done;
    parallel for (i = 0 to n) do f[i] <- u[i] done;
    parallel for (i = 0 to n) do if f[i] > 0.0 then stop 1 done"""))
    code, _, err = run_cli(["opt", str(f), "--notes"], capsys)
    assert code == 0
    notes = [ln for ln in err.splitlines() if ln.startswith("note: ")]
    assert notes and all(ln.count(f"{f}:") <= 2 for ln in notes), notes
    assert all("fusion refused:" not in ln for ln in notes), notes
    assert any(f"{f}:11:14: not fused: [LF-10] loop 't' may be left early" in ln
               and f"(at {f}:10:3)" in ln for ln in notes), notes
    f.write_text(PROGRAM.format(body="""
    parallel for (i = 0 to n * 4) do f[i] <- u[i] done;
    parallel for (i = 0 to n) do g[i] <- f[i * 4] done"""))
    code, _, err = run_cli(["opt", str(f), "--notes"], capsys)
    assert code == 0
    assert "overflow guard: runs fused only while n lies within ±2^28" in err, err
    assert "bounds check" not in err, err
    f.write_text(PROGRAM.format(body="""
    parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done;
    parallel for (i = 0 to n) do g[i] <- f[i + 1] done"""))
    code, _, err = run_cli(["opt", str(f), "--notes"], capsys)
    assert "run-time bounds check: runs fused only when the bounds of f lie" in err, err


@kernel
def fe_scale(x: Vec[f32], t: Vec[f32], a: f32, n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        t[i] = a * x[i]


@kernel
def fe_relu(t: Vec[f32], out: Vec[f32], n: i32):  # type: ignore[no-untyped-def]
    i = global_thread_id()
    if i < n:
        out[i] = max(t[i], 0.0)


def test_pipeline_report_names_the_real_cause() -> None:
    """LEG-17 through the front end: ``fe_scale(x, x)`` then ``fe_relu(x, x)`` in a
    pipeline said "fe_relu reads nothing fe_scale writes"; the report names the cause,
    the user's parameters, and the line in this file."""
    x = np.ones(64, np.float32)
    with pipeline(backend="interp") as p:
        fe_scale[64, 32](x, x, 2.0, 64)
        fe_relu[64, 32](x, x, 64)
    (d,) = p.decisions
    says(d, "LEG-7", "fe_relu writes out", "the buffer producer fe_scale reads as x",
         absent=("reads nothing",))
    assert d.loc is not None and d.loc.file.endswith("test_refusal_messages.py")
    assert "(at " in p.report()


# ------------------------------------------------------------------------- EF-* table

EF_SRC = KERNELS + """
kernel noshape(tmp : f32[], y : f32[]) =
  y[0] <- tmp[0]

kernel mutidx(tmp : f32[], y : f32[]) =
  let mut i = global_thread_id in
  y[i] <- tmp[i]

kernel bar(tmp : f32[], y : f32[]) =
  let i = global_thread_id in
  (barrier; y[i] <- tmp[i])

kernel blk(tmp : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- tmp[i] + f32(block_idx_x)

kernel stops(tmp : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- tmp[i];
  stop 3

kernel away(tmp : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i + 1] <- tmp[i]

kernel selfread(tmp : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- tmp[i] + y[i + 1]

kernel itmp(tmp : i32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- f32(tmp[i])

kernel two(x : f32[], u : f32[], v : f32[]) =
  let i = global_thread_id in
  u[i] <- x[i];
  v[i] <- x[i]

kernel add(u : f32[], v : f32[], y : f32[]) =
  let i = global_thread_id in
  y[i] <- u[i] + v[i]

fun put(w : f32[], k : i32, val : f32) : unit = w[k] <- val

kernel viahelper(x : f32[], tmp : f32[]) =
  let i = global_thread_id in
  let _ = put(tmp, i, x[i]) in ()
"""


@pytest.mark.parametrize("p, c, kw, rule, words", [
    ("scale", "noshape", {}, "EF-1", ("noshape", "let i = global_thread_id")),
    ("scale", "mutidx", {}, "EF-1", ("mutidx", "index i is mutable")),
    ("scale", "bar", {}, "EF-2", ("bar", "barrier")),
    ("scale", "blk", {}, "EF-2", ("blk", "block_idx_x")),
    ("scale", "stops", {}, "EF-2", ("stops", "a stop")),
    ("scale", "away", {}, "EF-3", ("writes y away from its index i", "y[i + 1]")),
    ("scale", "selfread", {}, "EF-4", ("writes y and reads it away from its index i",
                                       "y[i + 1]")),
    ("scale", "relu", {"shared": {"q": "tmp"}}, "EF-6", ("relu has no parameter q",)),
    ("scale", "relu", {"shared": {"tmp": "w"}}, "EF-6", ("scale has no parameter w",)),
    ("scale", "itmp", {"shared": {"tmp": "tmp"}}, "EF-6", ("tmp : i32[]", "tmp : f32[]",
                                                          "different types")),
    ("two", "add", {"shared": {"u": "u", "v": "v"}}, "EF-7", ("two writes u, v",
                                                               "p_array=NAME")),
    ("two", "add", {"shared": {"u": "u", "v": "v"}, "p_array": "w"}, "EF-7",
     ("p_array='w'", "two has no parameter w")),
    ("scale", "relu", {"shared": {"tmp": "tmp"}, "p_array": "a"}, "EF-7",
     ("the intermediate a : f32", "rank-1")),
    ("scale", "relu", {"shared": {"y": "x"}}, "EF-7",
     ("relu reads no array that producer scale writes", "scale writes tmp",
      "relu reads tmp", "shared: y=x")),
    ("viahelper", "relu", {"shared": {"tmp": "tmp"}}, "EF-8",
     ("viahelper passes tmp to a function that writes it",)),
    ("two", "add", {"shared": {"u": "u", "v": "v"}, "p_array": "u"}, "EF-9",
     ("add reads v", "two writes")),
])
def test_ef_rules_name_the_cause(p: str, c: str, kw: dict[str, object], rule: str,
                                 words: tuple[str, ...]) -> None:
    """EF-16 for EF-1..EF-9: rule, cause words, the user's names and a location."""
    k = kernels(EF_SRC)
    kw = {"shared": {"tmp": "tmp"}, **kw}
    says(refusal_of(k[p], k[c], **kw), rule, *words)


def test_ef11_helper_definitions_differ() -> None:
    a = parse_module("pure fun f(v : f32) : f32 = return v\n" + KERNELS.replace(
        "tmp[i] <- a * x[i]", "tmp[i] <- f(a * x[i])"), "a.sk")
    b = parse_module("pure fun f(v : f32) : f32 = return v + 1.0f\n" + KERNELS.replace(
        "y[i] <- v > 0.0f ? v : 0.0f", "y[i] <- f(v)"), "b.sk")
    r = refusal_of(a.kernel("scale"), b.kernel("relu"), shared={"tmp": "tmp"})
    says(r, "EF-11", "helper function f", "scale", "relu")


# ------------------------------------------------------------------------ LEG-* table


def test_leg1_binding_refusals() -> None:
    k = kernels(KERNELS)
    t = np.zeros(8, np.float32)
    p = KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0, "n": 8})
    with pytest.raises(FusionRefused) as exc:
        check_launches(p, KernelLaunch(k["relu"], 8, 8, {"tmp": t, "n": 8}))
    says(exc.value, "LEG-1", "relu binds nothing to y", loc=False)
    with pytest.raises(FusionRefused) as exc:
        check_launches(p, KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": 1.0, "n": 8}))
    says(exc.value, "LEG-1", "relu binds a scalar to the array y", loc=False)


def test_leg5_numeric_loop_and_stop() -> None:
    t, y = np.zeros(8, np.float32), np.zeros(8, np.float32)
    # (a body that does not read k is LEG-23's: tests/test_grid_stride.py)
    k = kernels(producer_variant("  for k = 0 to n do if k == n then tmp[i] <- a * x[i] done"))
    d = pair_decision([KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0,
                                                       "n": 2000}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})])
    says(d, "LEG-5", "loop over k", "2001 iterations", "more than 1024")
    k = kernels(producer_variant("  tmp[i] <- a * x[i]; stop 2"))
    d = pair_decision([KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0, "n": 8}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})])
    says(d, "LEG-5", "may stop")


def test_leg9_contraction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k = kernels(KERNELS)
    t, y = np.zeros(8, np.float32), np.zeros(8, np.float32)
    from sarek_py.fusion.policy import target

    _, report = fuse_launches(
        [KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": t, "a": 2.0, "n": 8}),
         KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})],
        target=target("cuda", True))
    says(report[0], "LEG-9", "target cuda contracts", "contraction=False", "force=True",
         loc=False)
    (tmp_path / "k.sk").write_text(KERNELS)
    (tmp_path / "k.launches").write_text(SYMBOLIC)
    code, out, _ = run_cli(["explain", str(tmp_path / "k.sk"), "--target", "cuda",
                            "--contraction", "on"], capsys)
    assert code == 0
    assert "with --contraction off, or force the fusion with --force)" in out, out
    assert "=True" not in out and "=False" not in out


def test_leg12_symbolic_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # relu's guard is i < m: it acts on [0, m), scale stores [0, n) (with relu's guard
    # i < n the pair fuses for any m, LEG-18: tests/test_rounded_up_launches.py)
    out = explain(tmp_path, capsys, KERNELS, SYMBOLIC.replace(
        "launch relu(tmp, y, n) threads n", "launch relu(tmp, y, m) threads m").replace(
        "n : i32", "n : i32, m : i32"))
    line = out.splitlines()[0]
    assert "[LEG-12] scale: for symbolic counts" in line and "of tmp" in line, line
    assert "the consumer's thread count m" in line and "(at " in line, line


# ------------------------------------------------------------------------- LF-* table

PROGRAM = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
fun impure(a : f64) : f64 = return a + 1.0
program t
  var n : i32 = 8; var nt : i32 = 2; var s : f64; var k : i32;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable; var g : f64[0:] allocatable;
  var w : f64[0:] allocatable target;
begin
  allocate u[0:n + 1]; allocate f[0:n + 1]; allocate g[0:n + 1]; allocate w[0:n + 1];
  for t = 1 to nt do{body}
  done
end
"""
P = "\n    parallel for (i = 0 to n) do f[i] <- avg(u[i], u[i + 1]) done;"
C = "\n    parallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] done"


def lf_refusal(body: str, **kw: object) -> PairReport:
    prog: Program = parse_program(PROGRAM.format(body=body), "p.sk")
    _, reports = fuse_program(prog, FusionOptions(**kw))  # type: ignore[arg-type]
    bad = [r for r in reports if r.refusal is not None]
    assert bad, [str(r) for r in reports]
    return bad[0]


@pytest.mark.parametrize("body, rule, words", [
    (P + "\n    parallel for (i = 1 to n) do g[i] <- u[i] done", "LF-1",
     ("reads no array the producer assigns",)),
    ("\n    parallel for (i = 0 to n) do f[i + 1] <- u[i] done;" + C, "LF-2",
     ("assigns 'f' at another element",)),
    ("\n    parallel for (i = 0 to n) do (f[i] <- u[i]; w[i] <- f[i]) done;" + C, "LF-3",
     ("reads its own array 'f'",)),
    ("\n    parallel for (i = 0 to n) do w[i] <- u[i] done;"
     "\n    parallel for (i = 1 to n) do g[i] <- w[i] done", "LF-4", ("'w'", "target")),
    ("\n    parallel for (i = 0 to n) do f[i] <- impure(u[i]) done;" + C, "LF-5",
     ("'impure'",)),
    (P + "\n    parallel for (i = 1 to n) do g[i] <- f[(i * i) % n] done", "LF-6",
     ("a read of 'f'", "`i * i`", "multiplies")),
    ("\n    parallel for (i = 0 to n) do if i % 2 == 0 then f[i] <- u[i] done;" + C, "LF-7",
     ("`i % 2 == 0`", "remainder")),
    ("\n    parallel for (i = 0 to n) do if u[i] > 0.0 then f[i] <- u[i] done;" + C, "LF-7",
     ("`u[i] > 0.0`", "reads array u")),
    (P + "\n    parallel for (i = 1 to n) do u[i] <- f[i] + u[i - 1] done", "LF-9",
     ("'u'",)),
    (P + C + ";\n    if t == 2 then break", "LF-10", ("loop 't' may be left early", "break")),
    (P + C + ";\n    n := n", "LF-11", ("loop 't' assigns 'n'",)),
    (P + C + ";\n    s := f[1]", "LF-12", ("uses intermediate 'f'",)),
])
def test_lf_rules_name_the_cause(body: str, rule: str, words: tuple[str, ...]) -> None:
    """LF-19 for LF-1..LF-12: the cause, the user's names, the location once."""
    r = lf_refusal(body)
    says(r.refusal, rule, *words)
    text = str(r)
    assert text.count("p.sk:") <= 2 and "fusion refused" not in text, text


def test_lf8_and_lf13() -> None:
    # a domain that is not one conjunction gives no LF-8 check: the reads keep the stored
    # elements outside it (LF-50), and the note says so (LF-53)
    body = "\n    parallel for (i = 0 to n) do if i != 1 && i != 2 then f[i] <- u[i] done;" + C
    _, [rep] = fuse_program(parse_program(PROGRAM.format(body=body), "p.sk"))
    assert rep.fused and "reads f as stored outside the producer's domain (LF-50)" \
        in str(rep), str(rep)
    r = lf_refusal(P + C, threshold=0.01)
    says(r.refusal, "LF-13", "fusion does not pay", "threshold 0.01")


def test_lf17_in_procedure() -> None:
    text = PROGRAM.replace("begin\n", """
  proc pr(a : f64[0:] inout, b : f64[0:] inout)
  =
    for t = 1 to 2 do
      parallel for (i = 0 to 3) do a[i] <- 1.0 done;
      parallel for (i = 0 to 3) do b[i] <- a[i] done
    done
  end
begin
""", 1).format(body=P + C)
    prog = parse_program(text, "p.sk")
    _, reports = fuse_program(prog)
    r = next(x for x in reports if x.refusal is not None and x.refusal.rule == "LF-17")
    says(r.refusal, "LF-17", "procedure 'pr'", "'a'", "'b'")


# --------------------------------------------------------------- PP-*, INL-*, OFF-*


def test_pp_swap_refusal_is_reported() -> None:
    """PP-2/PP-3: a swap refused is said in the notes (it was dropped silently)."""
    from sarek_py.cli.opt import run_passes

    prog = parse_program(PROGRAM.format(body=(
        "\n    parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done;"
        "\n    parallel for (i = 1 to n) do u[i] <- u[i] - (f[i] - f[i - 1]) done;"
        "\n    s := u[1]")), "p.sk")
    res = run_passes(prog, ["fuse", "swap"], frozenset({"fuse", "swap"}), 64.0, "rows")
    notes = "\n".join(res.notes)
    assert "[PP-2]" in notes and "'u'" in notes and "loop 't'" in notes, notes


def test_pp3_swap_refusal_is_reported() -> None:
    from sarek_py.cli.opt import run_passes

    prog = parse_program(PROGRAM.format(body=(
        "\n    parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done;"
        "\n    parallel for (i = 1 to n - t) do u[i] <- u[i] - (f[i] - f[i - 1]) done")),
        "p.sk")
    res = run_passes(prog, ["fuse", "swap"], frozenset({"fuse", "swap"}), 64.0, "rows")
    (note,) = res.notes
    assert note.startswith("p.sk:11:14: fused") and "not swapped: [PP-3] the consumer's " \
        "bounds read 't', a loop variable of the chain" in note, note


def test_inl5_note() -> None:
    m = parse_module("""
pure fun first(x : f32) : f32 =
  for j = 0 to 3 do
    if x > f32(j) then return f32(j)
  done;
  return x
kernel k(a : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- first(a[i])
""", "k.sk")
    notes: list[str] = []
    inline_module(m, notes)
    assert notes == ["kernel k: k.sk:9:27: call of 'first' not inlined [INL-5]: a return "
                     "that does not end the helper's body"]


def test_inl_notes_name_the_helper_cause_and_place() -> None:
    m = parse_module("""
fun impure(v : f32) : f32 = return v + 1.0f
pure fun f(v : f32) : f32 = return v * 2.0f
kernel k(a : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then (
    out[i] <- impure(a[i]);
    if i > 2 || f(a[i]) > 0.0f then out[i] <- 1.0f
  )
""", "k.sk")
    notes: list[str] = []
    inline_module(m, notes)
    text = "\n".join(notes)
    assert "k.sk:7:" in text and "'impure'" in text and "[INL-6]" in text and "not pure" in text
    assert "k.sk:8:" in text and "'f'" in text and "[INL-7]" in text and "||" in text


def test_off8_names_the_construct_and_place() -> None:
    prog = parse_program(PROGRAM.format(body="\n    parallel for (i = 1 to n) do barrier done"),
                         "p.sk")
    with pytest.raises(OffloadError) as exc:
        offload(prog)
    assert "barrier" in exc.value.message and exc.value.loc is not None
    assert exc.value.loc.line == 11


# ------------------------------------------- EF-3 let copies: a generator, differential

COPY_VALUES = ["i", "{c}", "i64({c})", "{c} + 0", "{c} + 1", "{c} - 1 + 1", "i32(i64({c}))"]


def _copy_case(rng: np.random.Generator) -> tuple[str, bool]:
    """A consumer binding a chain of lets from the index, storing and reading at random
    ones; whether every access is at a copy of the index (EF-3: then it must fuse)."""
    names = ["i"]
    is_copy = {"i": True}
    lines = []
    for k in range(int(rng.integers(1, 4))):
        c = str(rng.choice(names))
        tmpl = str(rng.choice(COPY_VALUES))
        v = f"t{k}"
        lines.append(f"let {v} = {tmpl.format(c=c)} in")
        # only these templates are copies that the analysis must see as the index
        is_copy[v] = tmpl == "i" or (is_copy[c] and tmpl in ("{c}", "i64({c})"))
        names.append(v)
    w, r = str(rng.choice(names)), str(rng.choice(names))
    guard = "if i < 20 then " if rng.integers(0, 2) else ""
    body = " ".join(lines) + f" {guard}z[{w}] <- y[{r}] * 2.0f"
    return body, is_copy[w] and is_copy[r]


def _run_copy_case(body: str) -> bool:
    """Fuse producer/consumer; when fused, check bitwise equality with the unfused run."""
    src = ("kernel p(x : f32[], y : f32[], n : i32) =\n"
           "  let i = global_thread_id in if i < n then y[i] <- x[i] + 1.0f\n"
           "kernel c(y : f32[], z : f32[]) =\n"
           f"  let i = global_thread_id in {body}\n")
    k = kernels(src, "copy.sk")
    check_kernel(k["c"])
    n = 24
    rng = np.random.default_rng(len(body))
    x = rng.standard_normal(n + 2).astype(np.float32)
    bufs_a = {"y": np.zeros(n + 2, np.float32), "z": np.full(n + 2, 7.0, np.float32)}
    bufs_b = {key: v.copy() for key, v in bufs_a.items()}
    pa = KernelLaunch(k["p"], n, 8, {"x": x, "y": bufs_a["y"], "n": n})
    ca = KernelLaunch(k["c"], n - 2, 8, {"y": bufs_a["y"], "z": bufs_a["z"]})
    fused, report = fuse_launches(
        [KernelLaunch(k["p"], n, 8, {"x": x, "y": bufs_b["y"], "n": n}),
         KernelLaunch(k["c"], n - 2, 8, {"y": bufs_b["y"], "z": bufs_b["z"]})])
    if not report[0].fused:
        return False
    for lc in (pa, ca):
        run_kernel(lc.kernel, dict(lc.by_name), lc.threads, lc.block)  # type: ignore[arg-type]
    (f,) = fused
    run_kernel(f.kernel, dict(f.by_name), f.threads, f.block)  # type: ignore[arg-type]
    for key in bufs_a:
        assert bufs_a[key].tobytes() == bufs_b[key].tobytes(), (body, key)
    return True


@pytest.mark.parametrize("count", [
    pytest.param(150, id="quick"),
    pytest.param(3000, id="fuzz", marks=[pytest.mark.slow, pytest.mark.skipif(
        not __import__("os").environ.get("SAREK_FUZZ"), reason="SAREK_FUZZ=1 (make fuzz)")]),
])
def test_ef3_let_copies_generated(count: int) -> None:
    """EF-3/EF-12: generated chains of lets from the index; a consumer accessing only
    copies of the index fuses and is bitwise equal; any other access (``i - 1 + 1`` is
    not recognised: sound, not complete) is refused (EF-3, or LEG-7 for a read of the
    intermediate away from the index)."""
    rng = np.random.default_rng(2011)
    fused = 0
    for _ in range(count):
        body, copies_only = _copy_case(rng)
        got = _run_copy_case(body)
        assert got == copies_only, body  # fused exactly when every access is at a copy
        fused += got
    assert fused > 0


def test_leg8_in_place_producer_fuses_exactly() -> None:
    """LEG-8 (derived pairing prefers the parameter P writes): ``scale(x, x)`` then
    ``relu(x, y)`` was refused as "relu reads nothing scale writes"; relu reads the
    ``tmp`` scale writes, so it fuses, bitwise equal to the two launches."""
    k = kernels(KERNELS)
    for n in (1, 7, 64, 100):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        xa, ya = x.copy(), np.zeros(n, np.float32)
        xb, yb = x.copy(), ya.copy()

        def launches(xs: np.ndarray, ys: np.ndarray, n: int = n) -> list[KernelLaunch]:
            return [KernelLaunch(k["scale"], n, 8, {"x": xs, "tmp": xs, "a": -2.0, "n": n}),
                    KernelLaunch(k["relu"], n, 8, {"tmp": xs, "y": ys, "n": n})]

        for lc in launches(xa, ya):
            run_kernel(lc.kernel, dict(lc.by_name), lc.threads, lc.block)  # type: ignore[arg-type]
        new, report = fuse_launches(launches(xb, yb))
        assert [d.fused for d in report] == [True], [str(d) for d in report]
        for lc in new:
            run_kernel(lc.kernel, dict(lc.by_name), lc.threads, lc.block)  # type: ignore[arg-type]
        assert xa.tobytes() == xb.tobytes() and ya.tobytes() == yb.tobytes()


def test_leg7_buffer_written_twice_and_partial_views() -> None:
    """LEG-7: the intermediate's buffer written through two parameters, and two bound
    views that overlap, name the parameters and have a place."""
    k = kernels(KERNELS + """
kernel dup(x : f32[], tmp : f32[]) =
  let i = global_thread_id in
  (tmp[i] <- 1.0f; x[i] <- 2.0f)
""")
    t, y = np.zeros(8, np.float32), np.zeros(8, np.float32)
    d = pair_decision([KernelLaunch(k["dup"], 8, 8, {"x": t, "tmp": t}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": t, "y": y, "n": 8})])
    says(d, "LEG-7", "dup writes the buffer of the intermediate x also through tmp")
    big = np.zeros(16, np.float32)
    d = pair_decision([KernelLaunch(k["scale"], 8, 8, {"x": X[:8], "tmp": big[:8], "a": 2.0,
                                                       "n": 8}),
                       KernelLaunch(k["relu"], 8, 8, {"tmp": big[:8], "y": big[4:12], "n": 8})])
    says(d, "LEG-7", "overlap")


# ------------------------------------------- a generator of producers: causes, places

GEN_INDEX = ["i", "2 * i", "i * i", "K[i]", "i / 2", "i % 4", "i + 2147483600", "n - 1 - i",
             "j", "t", "i32(i64(i) * 4294967296L + i64(i))"]
GEN_GUARD = ["", "if i < n then ", "if x[i] > 0.5f then ", "if i % 2 == 0 then ",
             "if i + 2147483647 >= 2147483647 then ", "if j < n then ",
             "if " + " && ".join(f"(i < {j} || n < {j})" for j in range(1, 8)) + " then "]
GEN_WRAP = ["{s}", "for k = 0 to 1 do {s} done", "({s}; if i == 3 then return)",
            "(if K[i] > 0 then return; {s})"]


def _gen_case(rng: np.random.Generator) -> str:
    index, guard = str(rng.choice(GEN_INDEX)), str(rng.choice(GEN_GUARD))
    store = str(rng.choice(GEN_WRAP)).format(s=f"{guard}y[{index}] <- x[i]")
    return ("kernel p(x : f32[], y : f32[], K : i32[], n : i32) =\n"
            f"  let i = global_thread_id in let mut j = i in let t = i in {store}\n"
            "kernel c(y : f32[], z : f32[]) = let i = global_thread_id in\n"
            "  z[i] <- z[i] + y[i]\n")


@pytest.mark.parametrize("count", [
    pytest.param(120, id="quick"),
    pytest.param(2000, id="fuzz", marks=[pytest.mark.slow, pytest.mark.skipif(
        not __import__("os").environ.get("SAREK_FUZZ"), reason="SAREK_FUZZ=1 (make fuzz)")]),
])
def test_leg17_generated_producers_refuse_with_a_cause(count: int) -> None:
    """LEG-17: generated producers (indices, tests and control flow of every kind the
    analysis refuses) on the numeric and the symbolic path: every refusal names a rule of
    its cause with a location and a specific cause (never the old generic "not affine in
    the thread id and the host symbols"); every fusion is bitwise equal (the harness of
    tests/test_fusion_adversarial.py)."""
    from test_fusion_adversarial import N, outcome

    from sarek_py.fusion.epilogue.sequence import fuse_pair
    from sarek_py.ir.nodes import Ref, var
    from sarek_py.ir.types import Scalar

    rng = np.random.default_rng(17)
    sym = Ref(var("n", Scalar.I32, mutable=True))
    seen: set[str] = set()
    for _ in range(count):
        text = _gen_case(rng)
        m = parse_module(text, "gen.sk")
        for tp in (N, sym):
            pa = {"x": "X", "y": "Y", "K": "K", "n": N if isinstance(tp, int) else sym}
            pl = KernelLaunch(m.kernel("p"), tp, 4, pa)
            cl = KernelLaunch(m.kernel("c"), tp, 8, {"y": "Y", "z": "Z"})
            try:
                fuse_pair(pl, cl)
            except FusionRefused as r:
                seen.add(r.rule)
                assert r.rule in ("LEG-2", "LEG-3", "LEG-4", "LEG-5", "LEG-6", "LEG-12"), r
                assert r.loc is not None and r.loc.file == "gen.sk", (text, str(r))
                assert "and the host symbols" not in r.reason, (text, r.reason)
                continue
            if isinstance(tp, int):
                assert outcome(text, N, N, p_args={"K": "K"}) is None, text
    assert {"LEG-2", "LEG-4", "LEG-5", "LEG-6"} <= seen, seen


def test_ef3_copy_rebound_by_a_loop_is_not_a_copy() -> None:
    """EF-3, adversarial: a variable bound by ``let t = i`` and also used as a ``for``
    variable (IR built by hand, same variable) is not a copy of the index."""
    import attrs

    from sarek_py.ir.nodes import Const, For, Let, Ref, Seq, Store
    from sarek_py.ir.types import Scalar

    k = kernels(KERNELS)["relu"]
    body = k.body
    assert isinstance(body, Let)
    i = body.var
    y = k.param("y")
    t = attrs.evolve(i, name="t", id=i.id + 1000)
    inner = Seq((Store(y, (Ref(t),), Const(1.0, Scalar.F32)),
                 For(t, Const(0, Scalar.I32), Const(3, Scalar.I32),
                     Store(y, (Ref(t),), Const(2.0, Scalar.F32)))))
    bad = attrs.evolve(k, body=attrs.evolve(body, body=Let(t, Ref(i), inner)))
    with pytest.raises(FusionRefused) as exc:
        consumer_shape(bad)
    says(exc.value, "EF-3", "writes y away from its index i", "y[t]", loc=False)


@pytest.mark.parametrize("expr, kind, words", [
    ("x[K[i]]", "data", ("`K[i]` reads array K",)),
    ("x[i * n]", "form", ("`i * n` multiplies two values that vary",)),
    ("x[(i + 1) / 3]", "form", ("`(i + 1) / 3` divides",)),
    ("x[i % 4]", "form", ("`i % 4` takes the remainder",)),
    ("x[i << n]", "form", ("`i << n` shifts by an amount",)),
    ("x[j]", "mutable", ("j is a mutable variable",)),
    ("x[i32(f)]", "form", ("`i32(f)` converts a f32 value",)),
    ("x[n > 2 ? i : 0]", "form", ("is a conditional expression",)),
    ("x[i & 3]", "form", ("operator &",)),
    ("y[0] > 0.0f", "data", ("`y[0]` reads array y",)),
    ("f > 0.0f", "float", ("`f > 0.0f` compares floating-point values",)),
    ("K[i] > 0 && i < n", "data", ("`K[i]` reads array K",)),
    (" && ".join(f"(i < {j} || n < {j})" for j in range(1, 8)), "alternatives",
     ("more than 64 alternatives",)),
])
def test_leg17_affine_cause(expr: str, kind: str, words: tuple[str, ...]) -> None:
    """LEG-17: :func:`affine_cause` names the smallest unknown part and its kind."""
    from sarek_py.analysis.affine.forms import AffineCtx
    from sarek_py.analysis.affine.reasons import affine_cause
    from sarek_py.ir.nodes import If, Let, Store

    stmt = (f"if {expr} then y[i] <- 1.0f" if not expr.startswith("x[")
            else f"y[{expr[2:-1]}] <- 1.0f")
    k = kernels("kernel k(y : f32[], K : i32[], n : i32, f : f32) =\n"
                f"  let i = global_thread_id in let mut j = i in {stmt}\n", "c.sk")["k"]
    s = k.body
    while isinstance(s, Let):
        s = s.body
    e = s.cond if isinstance(s, If) else s.index[0] if isinstance(s, Store) else None
    assert e is not None
    c = affine_cause(e, AffineCtx())
    assert c.kind == kind, c
    for w in words:
        assert w in c.text, c.text
    assert c.loc is not None and c.loc.file == "c.sk"


def test_inl1_inl4_name_the_cause_and_place() -> None:
    """INL-1: a call asked for that is not in the statement says so, at the call; INL-4: an
    array dummy with a constant extent the actual is not known to have (IR other passes
    build; the checker asks equal types) names the dummy, the extent and the dimension."""
    import attrs

    from sarek_py.fusion.loops.inline import inline_call
    from sarek_py.ir.nodes import Call
    from sarek_py.ir.visit import iter_nodes

    m = parse_module("""
pure fun first(x : f32[]) : f32 = return x[0]
kernel k(a : f32[], out : f32[], n : i32) =
  let i = global_thread_id in
  if i < n then out[i] <- first(a)
""", "k.sk")
    k, h = m.kernels[0], m.helpers[0]
    call = next(x for x in iter_nodes(k.body) if isinstance(x, Call))
    _, r1 = inline_call(k.body, attrs.evolve(call), m.helpers)  # an equal call, not that one
    assert r1 is not None and r1.rule == "INL-1" and "not in the statement" in r1.message
    assert str(r1).startswith("k.sk:5:27: call of 'first' not inlined [INL-1]")
    x = h.params[0]
    x4 = attrs.evolve(x, type=attrs.evolve(x.type, shape=(4,)))
    h4 = attrs.evolve(h, params=(x4,))  # variables are equal by id: the body's x is x4
    _, r4 = inline_call(k.body, call, [h4])
    assert r4 is not None and r4.rule == "INL-4", r4
    assert "dummy 'x' has extent 4 in dimension 0" in r4.message and r4.loc == call.loc
