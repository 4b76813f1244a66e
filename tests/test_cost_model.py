"""The cost model that predicts (specs/loop-fusion.md, LF-60..LF-69): counts, the
per-backend table, the prediction's arithmetic on hand-computed pairs, the uncalibrated
backend, the user's threshold, the refusal, the notes, ``opt --backend``, the sweep's
generator. No timing here: the rows are made up, the arithmetic is checked by hand.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_module import load_benchmark

from sarek_py.cli.main import main
from sarek_py.fusion.loops import cost_table
from sarek_py.fusion.loops.cost_counts import KINDS, count
from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program

ROOT = Path(__file__).resolve().parent.parent


def _bench(name: str) -> ModuleType:
    return load_benchmark(name, "benchmark")


def loops(p: Program) -> list[ParFor]:
    return [s for s in iter_host(p.body) if isinstance(s, ParFor)]


def body_counts(body: str, decls: str = "", helpers: str = "") -> dict[str, float]:
    text = (f"{helpers}program c\n  var n : i32 = 10;\n  var x : f64[0:] allocatable;\n"
            f"  var y : f64[0:] allocatable;\n  var a : f32[0:] allocatable;\n"
            f"  var b : f32[0:] allocatable;\n{decls}begin\n"
            f"  allocate x[0:n]; allocate y[0:n]; allocate a[0:n]; allocate b[0:n];\n"
            f"  parallel for (i = 1 to n - 1) do {body} done\nend\n")
    p = parse_program(text)
    return count(loops(p)[0].body, {h.name: h for h in p.helpers}).as_dict()


PAIR = """
program p
  var n : i32 = 1000;
  var u : f64[0:] allocatable;
  var f : f64[0:] allocatable;
  var g : f64[0:] allocatable;
begin
  allocate u[0:n - 1]; allocate f[0:n - 1]; allocate g[0:n - 1];
  for t = 1 to 10 do
    parallel for (i = 0 to n - 1) do f[i] <- u[i] * 2.0 + 1.0 done;
    parallel for (i = 1 to n - 2) do g[i] <- f[i - 1] + f[i] + f[i + 1] done
  done
end
"""

#: LF-62 by hand on ROW: producer 1 point + 1 load + 2 f64 ops = 4 ns, consumer
#: 1 + 3 loads + 2 ops = 6 ns; fused 1 + 3 loads (u[i-1], u[i], u[i+1]) + 3 * 2 + 2 ops
#: = 12 ns. 1000 producer points, 998 consumer points.
ROW = dict.fromkeys(KINDS, 0.0) | {"point": 1.0, "load": 1.0, "f64_op": 1.0, "launch": 0.0}


@pytest.fixture
def row(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    r = dict(ROW)
    monkeypatch.setitem(cost_table.TABLE, "hand", r)
    return r


def report(text: str, **kw: object) -> PairReport:
    _, reps = fuse_program(parse_program(text), FusionOptions(**kw))  # type: ignore[arg-type]
    return reps[-1]


# ------------------------------------------------------------------------- LF-61


def test_lf61_counts_loads_bytes_and_ops() -> None:
    c = body_counts("y[i] <- x[i - 1] + x[i] + x[i + 1]")
    assert (c["point"], c["load"], c["f64_op"], c["byte"]) == (1, 3, 2, 16)
    assert c["int_op"] == 0          # subscripts are address arithmetic


def test_lf61_counts_by_kind() -> None:
    c = body_counts("b[i] <- sqrt(a[i]) / 3.0 + sin(a[i]) + f32(i % 7)")
    assert (c["f32_div"], c["f32_transc"], c["f32_op"], c["int_div"], c["int_op"]) == \
        (2, 1, 2, 1, 1)
    assert c["byte"] == 8 and c["load"] == 1        # a[i] twice: one load
    c = body_counts("y[i] <- i > 3 ? exp(x[i]) : -x[i]")
    assert (c["select"], c["f64_transc"], c["f64_op"], c["int_op"]) == (1, 1, 1, 1)
    c = body_counts("if i > 2 then y[i] <- x[i] / 2.0 else y[i] <- x[i] * 2.0")
    # LF-76: an if statement's test is a branch, not a select
    assert (c["branch"], c["select"], c["f64_div"], c["f64_op"], c["load"], c["byte"]) == \
        (1, 0, 1, 1, 1, 16)


def test_lf61_the_same_element_is_one_load() -> None:
    c = body_counts("y[i] <- x[i - 1 + 1] + x[i] + x[2 * i - i] + x[i + 1] + y[i]")
    assert c["load"] == 3 and c["f64_op"] == 4 and c["byte"] == 24   # x, y read; y written


def test_lf61_helpers_and_nested_loops() -> None:
    helpers = "pure fun sq(v : f64) : f64 =\n  return v * v + 1.0\n"
    c = body_counts("y[i] <- sq(x[i]) + sq(2.0)", helpers=helpers)
    assert c["f64_op"] == 5 and c["load"] == 1


def test_lf61_nested_for_counts_its_trips() -> None:
    c = body_counts("for k = 0 to 3 do y[i] <- y[i] + x[i] done")
    assert c["load"] == 8 and c["f64_op"] == 4


# ------------------------------------------------------------------------- LF-62


def test_lf62_prediction_by_hand(row: dict[str, float]) -> None:
    r = report(PAIR, backend="hand")
    assert r.refusal is not None and r.refusal.rule == "LF-13"
    # totals (declared n = 1000, never changed): 1000 * 4 + 998 * 6 against 998 * 12
    assert "fused 11.98 µs against 9.988 µs unfused per iteration of 998 points" \
        in r.refusal.reason
    forced = report(PAIR, backend="hand", threshold=1e9)
    p = forced.plan.cost.prediction if forced.plan is not None else None
    assert p is not None and p.points == 998
    assert math.isclose(p.fused_ns, 12.0) and math.isclose(p.unfused_ns, 4 * 1000 / 998 + 6)
    assert (p.fused_launches, p.unfused_launches) == (1, 2)


def test_lf62_launches_decide_with_known_points(row: dict[str, float]) -> None:
    row["launch"] = 3000.0      # one launch saved: 3000 ns > the 2 ns per point lost
    r = report(PAIR, backend="hand")
    assert r.fused, r
    p = r.plan.cost.prediction if r.plan is not None else None
    assert p is not None
    assert math.isclose(p.total(True), 3000 + 998 * 12)
    assert math.isclose(p.total(False), 6000 + 1000 * 4 + 998 * 6)


def test_lf62_unknown_points_decide_per_point(row: dict[str, float]) -> None:
    row["launch"] = 1e9
    text = PAIR.replace("for t = 1 to 10 do", "read n;\n  for t = 1 to 10 do")
    r = report(text, backend="hand")   # n is read: the per-point times decide
    assert r.refusal is not None and "ns per point" in r.refusal.reason


def test_lf62_renamed_copy_back_and_swap(row: dict[str, float]) -> None:
    text = PAIR.replace("g[i] <- f[i - 1]", "u[i] <- f[i - 1]")
    forced = report(text, backend="hand", threshold=1e9)
    assert forced.plan is not None and forced.plan.renamed
    p = forced.plan.cost.prediction
    assert p is not None and p.fused_launches == 2
    # the copy loop: a point, a load, no operation
    assert math.isclose(p.fused_ns, 12.0 + 2.0)
    swapped = report(text, backend="hand", threshold=1e9, swap=True)
    assert swapped.plan is not None and swapped.plan.cost.prediction is not None
    assert swapped.plan.cost.prediction.fused_launches == 1


def test_lf62_recompute_counts_the_producers_loads(row: dict[str, float]) -> None:
    row.update(point=0.0, f64_op=0.0)    # loads only: 3 fused against 1 + 3 unfused
    forced = report(PAIR, backend="hand", threshold=1e9)
    p = forced.plan.cost.prediction if forced.plan is not None else None
    assert p is not None and math.isclose(p.fused_ns, 3.0)
    assert math.isclose(p.unfused_ns, 1000 / 998 + 3)


# ---------------------------------------------------------------- LF-60, LF-64


def test_lf60_table_read_per_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    cheap = dict(ROW) | {"load": 0.0, "f64_op": 0.0, "point": 0.0, "byte": 1.0}
    monkeypatch.setitem(cost_table.TABLE, "slow_memory", cheap)
    monkeypatch.setitem(cost_table.TABLE, "hand", dict(ROW))
    assert report(PAIR, backend="slow_memory").fused     # 8 bytes fused against 32
    assert not report(PAIR, backend="hand").fused


def test_lf60_checked_in_table_rows_are_complete() -> None:
    assert cost_table.TABLE, "no backend calibrated"
    for name, r in cost_table.TABLE.items():
        # LF-114: the kinds of nests (``nd.``) too, or none of them
        assert set(r) - {f"nd.{k}" for k in KINDS} == {*KINDS, "launch"}, name
        assert all(math.isfinite(v) and v >= 0 for v in r.values()), name
        assert cost_table.SOURCES.get(name), f"{name}: how it was measured"


def test_lf60_write_keeps_other_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cal = _bench("calibrate")
    target = tmp_path / "cost_table.py"
    target.write_text(Path(cost_table.__file__).read_text())
    monkeypatch.setattr(cal, "TABLE_FILE", target)
    monkeypatch.setattr(cal, "TABLE", {"other": dict(ROW)})
    monkeypatch.setattr(cal, "SOURCES", {"other": "by hand"})
    cal.write_table("mine", dict(ROW) | {"load": 2.5}, "a test")
    ns: dict[str, object] = {}
    exec(compile(target.read_text(), str(target), "exec"), ns)  # noqa: S102
    assert ns["TABLE"] == {"other": ROW, "mine": dict(ROW) | {"load": 2.5}}
    assert ns["SOURCES"] == {"other": "by hand", "mine": "a test"}


def test_lf60_fit_recovers_known_costs() -> None:
    pytest.importorskip("scipy")
    import numpy as np

    cal = _bench("calibrate")
    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, size=(20, 4)).astype(float)
    x = np.array([0.5, 0.0, 2.0, 7.0])
    assert np.allclose(cal.nnls(a, a @ x), x, atol=1e-9)


def test_lf64_uncalibrated_backend_is_said() -> None:
    r = report(PAIR, backend="nowhere")
    assert r.fused
    note = str(r)
    assert "backend nowhere uncalibrated" in note and "decided by the threshold" in note
    assert "per byte, threshold 64" in note
    r = report(PAIR, backend="nowhere", threshold=0.01)
    assert r.refusal is not None and "uncalibrated" in r.refusal.reason


# ----------------------------------------------------------------- LF-63, LF-65, LF-69


def test_lf63_user_threshold_decides(row: dict[str, float]) -> None:
    r = report(PAIR, backend="hand", threshold=64.0)
    assert r.fused                             # the prediction refuses; 64 ops/byte fuses
    note = str(r)
    assert "decided by --fusion-threshold" in note and "predicted on hand" in note
    r = report(PAIR, backend="hand", threshold=0.01)
    assert r.refusal is not None and "threshold 0.01" in r.refusal.reason


def test_lf65_refusal_text(row: dict[str, float]) -> None:
    r = report(PAIR, backend="hand")
    assert r.refusal is not None and r.refusal.rule == "LF-13"
    assert r.refusal.reason.startswith("fusion does not pay: predicted on hand: fused ")
    assert "(1.20x; 1 launch against 2)" in r.refusal.reason
    assert "--fusion-threshold OPS decides by operations per byte instead" in r.refusal.reason
    assert str(r).count("p.sk") <= 1


def test_lf69_library_default_keeps_lf13() -> None:
    r = report(PAIR)
    assert r.fused and "predicted" not in str(r) and "uncalibrated" not in str(r)
    assert "(0.25 per byte, threshold 64)" in str(r)


# ---------------------------------------------------------------- LF-66, LF-67


@pytest.fixture
def pair_file(tmp_path: Path) -> str:
    path = tmp_path / "pair.sk"
    path.write_text(PAIR)
    return str(path)


def test_lf66_opt_backend_option(pair_file: str, row: dict[str, float],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["opt", pair_file, "--notes", "--backend", "hand"]) == 2   # not a runtime
    assert "unknown backend" in capsys.readouterr().err
    assert main(["opt", pair_file, "--notes", "--backend", "cuda"]) == 0   # no GPU needed
    err = capsys.readouterr().err
    assert ("predicted on cuda" in err) == ("cuda" in cost_table.TABLE)
    assert ("backend cuda uncalibrated" in err) == ("cuda" not in cost_table.TABLE)


def test_lf66_default_is_the_runtime_default(pair_file: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    from sarek_py.runtime import get_backend

    name = get_backend("default").name
    assert main(["opt", pair_file, "--notes"]) == 0
    err = capsys.readouterr().err
    assert f"predicted on {name}" in err or f"backend {name} uncalibrated" in err


def test_lf67_notes_say_the_prediction(pair_file: str, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(cost_table.TABLE, "opencl", dict(ROW))
    assert main(["opt", pair_file, "--notes", "--backend", "opencl"]) == 0
    out, err = capsys.readouterr()
    assert "not fused: [LF-13] fusion does not pay: predicted on opencl: fused 11.98 µs " \
        "against 9.988 µs unfused" in err
    assert out.count("parallel for") == 2
    assert main(["opt", pair_file, "--notes", "--backend", "opencl",
                 "--fusion-threshold", "64"]) == 0
    err = capsys.readouterr().err
    assert "fused (intermediates f" in err and "decided by --fusion-threshold; predicted " \
        "on opencl: fused 11.98 µs" in err


# ------------------------------------------------------------------------- LF-68


@pytest.mark.parametrize("seed", range(6))
def test_lf68_sweep_pairs_fuse_and_stay_bitwise(seed: int) -> None:
    """The sweep's generated pairs are fusable (forced) and the fused program gives the
    unfused bytes on the interpreter (small sizes; the timing is the benchmark's)."""
    sweep = _bench("cost_sweep")
    rng = random.Random(seed)
    for _ in range(3):
        case = sweep.make_case(rng)
        p = parse_program(case.text(12 if case.dims == 2 else 40, 2))
        q, reps = fuse_program(p, FusionOptions(threshold=1e300, backend="nowhere"))
        assert reps[-1].fused, (case.describe(), str(reps[-1]))
        a, b = run_program(p), run_program(q)
        for name in "ABC":
            assert a.array(name).tobytes() == b.array(name).tobytes(), case.describe()
