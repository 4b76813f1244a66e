"""The roofline cost model and the sweep's stable measurement (specs/loop-fusion.md,
LF-75..LF-80): the roofline's arithmetic on made-up rows (checked by hand), the `branch`
kind, the roofline fit on synthetic times, the sweep's measurement on a scripted clock and
its tallies. No timing here: the benchmarks measure, these tests check their arithmetic.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark
from rule_citations import assert_rules_cited
from test_cost_model import PAIR  # the same pair as the linear model's tests

from sarek_py.fusion.loops import cost_table
from sarek_py.fusion.loops.cost_counts import KINDS, count
from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.fusion.loops.predict import compute_ns, fused_counts, memory_ns, ns
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program

ROOT = Path(__file__).resolve().parent.parent


def _bench(name: str) -> ModuleType:
    return load_benchmark(name, "roofline")


def loops(p: Program) -> list[ParFor]:
    return [s for s in iter_host(p.body) if isinstance(s, ParFor)]


def body_counts(body: str) -> Any:
    text = ("program c\n  var n : i32 = 10;\n  var x : f64[0:] allocatable;\n"
            "  var y : f64[0:] allocatable;\nbegin\n  allocate x[0:n]; allocate y[0:n];\n"
            f"  parallel for (i = 1 to n - 1) do {body} done\nend\n")
    return count(loops(parse_program(text))[0].body)




def row(**kw: float) -> dict[str, float]:
    return dict.fromkeys((*KINDS, "launch"), 0.0) | kw


def report(text: str, **kw: Any) -> PairReport:
    _, reps = fuse_program(parse_program(text, "p.sk"), FusionOptions(**kw))
    return reps[-1]


# ------------------------------------------------------------------------- LF-75


def test_lf75_a_point_costs_the_larger_side() -> None:
    """LF-75: one point costs max(memory, compute): bytes at ns per byte against every
    other kind; a byte cost of 0 is the linear model, only a byte cost is bandwidth."""
    c = body_counts("y[i] <- x[i] * 2.0 + x[i - 1]")   # 16 bytes, 2 loads, 2 f64 ops
    slow_memory = row(byte=1.0, point=1.0, load=1.0, f64_op=1.0)
    assert (memory_ns(c, slow_memory), compute_ns(c, slow_memory)) == (16.0, 5.0)
    assert ns(c, slow_memory) == 16.0                  # memory-bound: compute hidden
    slow_compute = row(byte=0.1, point=1.0, load=1.0, f64_op=4.0)
    assert math.isclose(ns(c, slow_compute), 11.0)     # compute-bound: 1 + 2 + 8
    linear = row(point=1.0, load=1.0, f64_op=1.0)
    assert ns(c, linear) == 5.0 == sum(linear[k] * c[k] for k in KINDS)
    assert ns(c, row(byte=0.5)) == 8.0


def test_lf75_memory_bound_pair_fuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-75: a pair whose loops are memory-bound fuses when the fused loop's recompute
    stays under its memory time: producer max(16, 1 + 2) = 16, consumer max(16, 3 + 2) = 16,
    fused max(16, 3 loads + 8 ops) = 16 per point."""
    monkeypatch.setitem(cost_table.TABLE, "hand", row(byte=1.0, load=1.0, f64_op=1.0))
    r = report(PAIR, backend="hand")
    assert r.fused, str(r)
    p = r.plan.cost.prediction if r.plan is not None else None
    assert p is not None and p.points == 998
    assert math.isclose(p.fused_ns, 16.0) and math.isclose(p.unfused_ns, 16 * 1000 / 998 + 16)
    assert "predicted on hand: fused 15.97 µs against 31.97 µs unfused" in str(r)


def test_lf75_predicted_slower_fusion_is_refused_naming_the_prediction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-75, LF-65: with f64 operations at 4 ns the fused loop is compute-bound
    (3 loads + 8 ops * 4 = 35 ns a point against 16 + 16 unfused, memory-bound): refused,
    the note naming the prediction. The linear model (LF-62 before LF-75) would have fused
    it: 998 * 51 < 1000 * 25 + 998 * 27."""
    monkeypatch.setitem(cost_table.TABLE, "hand", row(byte=1.0, load=1.0, f64_op=4.0))
    r = report(PAIR, backend="hand")
    assert r.refusal is not None and r.refusal.rule == "LF-13", str(r)
    assert r.refusal.reason == (
        "fusion does not pay: predicted on hand: fused 34.93 µs against 31.97 µs unfused per "
        "iteration of 998 points (1.09x; 1 launch against 2); --fusion-threshold OPS decides "
        "by operations per byte instead")
    linear = row(byte=1.0, load=1.0, f64_op=4.0)
    forced = report(PAIR, backend="hand", threshold=1e9)
    assert forced.plan is not None
    lin = {k: sum(linear[x] * c[x] for x in KINDS) for k, c in
           (("p", count(forced.plan.producer.body)), ("c", count(forced.plan.consumer.body)),
            ("f", fused_counts(forced.plan, {})))}
    assert 998 * lin["f"] < 1000 * lin["p"] + 998 * lin["c"]   # the linear sum: fused
    # and the user's threshold still overrides the prediction (LF-63)
    assert report(PAIR, backend="hand", threshold=64.0).fused


def test_lf75_opt_notes_name_the_roofline_prediction(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """LF-75, LF-67: `opt --notes --backend opencl` on a made-up opencl row: the pair the
    roofline predicts slower is left as written, its note naming the prediction; on a row
    whose fused loop hides its recompute under memory it fuses, its note the prediction."""
    from sarek_py.cli.main import main

    src = tmp_path / "pair.sk"
    src.write_text(PAIR)
    monkeypatch.setitem(cost_table.TABLE, "opencl", row(byte=1.0, load=1.0, f64_op=4.0))
    assert main(["opt", str(src), "--notes", "--backend", "opencl"]) == 0
    out, err = capsys.readouterr()
    assert "not fused: [LF-13] fusion does not pay: predicted on opencl: fused 34.93 µs " \
        "against 31.97 µs unfused per iteration of 998 points (1.09x" in err, err
    assert out.count("parallel for") == 2
    monkeypatch.setitem(cost_table.TABLE, "opencl", row(byte=1.0, load=1.0, f64_op=1.0))
    assert main(["opt", str(src), "--notes", "--backend", "opencl"]) == 0
    out, err = capsys.readouterr()
    assert "predicted on opencl: fused 15.97 µs against 31.97 µs unfused" in err, err
    assert "g[i] <- u[i - 1] * 2.0 + 1.0 + (u[i] * 2.0 + 1.0)" in out, out   # recomputed


# ------------------------------------------------------------------------- LF-76


def test_lf76_an_if_statement_is_a_branch_a_conditional_a_select() -> None:
    """LF-76: an if statement's test counts a branch; a conditional expression a select."""
    c = body_counts("if i > 2 then y[i] <- x[i] else y[i] <- 0.0")
    assert (c["branch"], c["select"]) == (1, 0)
    c = body_counts("y[i] <- i > 2 ? x[i] : 0.0")
    assert (c["branch"], c["select"]) == (0, 1)
    c = body_counts("if i > 2 then (if i < 8 then y[i] <- x[i] > 0.0 ? x[i] : 0.0)")
    assert (c["branch"], c["select"]) == (2, 1)


def test_lf76_the_interior_test_of_a_split_loop_is_a_branch() -> None:
    """LF-76 with LF-52: the fused loop split into an interior is priced on its interior
    branch plus the interior test, a branch."""
    text = """
program b
  var n : i32 = 100;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable;
begin
  allocate u[0:n]; allocate f[0:n];
  for t = 1 to 3 do
    parallel for (i = 1 to n - 2) do if i != 0 then f[i] <- 0.5 * (u[i - 1] + u[i + 1]) done;
    parallel for (i = 1 to n - 2) do u[i] <- 0.25 * (f[i - 1] + f[i] + f[i + 1]) done
  done
end
"""
    r = report(text, threshold=1e9)
    assert r.plan is not None and r.plan.interior is not None, str(r)
    c = fused_counts(r.plan, {})
    assert c["branch"] >= 1
    base = row(point=1.0)
    assert ns(c, base | {"branch": 100.0}) - ns(c, base) >= 100.0


def test_lf76_checked_in_rows_have_a_branch_column() -> None:
    """LF-76, LF-60: every checked-in row prices the branch kind."""
    for name, r in cost_table.TABLE.items():
        assert "branch" in r and r["branch"] >= 0, name


# ------------------------------------------------------------------------- LF-77


def _calibration_counts(cal: ModuleType) -> np.ndarray:
    return np.array([[count(cal.loop_of(cal.program(body, 64, 1)).body)[k] for k in KINDS]
                     for body in cal.LOOPS.values()])


def test_lf77_fit_recovers_a_roofline() -> None:
    """LF-77: on times made by a known roofline over the calibration's own loops, the fit
    finds the ns per byte (within the grid's step) and fits every loop within 5 %."""
    pytest.importorskip("scipy")
    cal = _bench("calibrate")
    a = _calibration_counts(cal)
    true = np.array([{"point": 0.4, "byte": 0.06, "load": 0.25, "f32_op": 0.01,
                      "f64_op": 0.015, "f32_div": 0.03, "f64_div": 0.1, "f32_transc": 1.6,
                      "f64_transc": 8.0, "int_op": 0.015, "int_div": 0.19, "select": 0.0,
                      "branch": 1.5, "shift": 0.0}[k] for k in KINDS])
    j = KINDS.index("byte")
    comp = [k for k in range(len(KINDS)) if k != j]
    b = np.maximum(a[:, j] * true[j], a[:, comp] @ true[comp])
    assert (a[:, j] * true[j] > a[:, comp] @ true[comp]).any()   # some loops memory-bound
    coef, fitted = cal.fit_roofline(a, b)
    assert abs(coef[j] / true[j] - 1) < 0.12, coef[j]
    assert np.all(np.abs(fitted / b - 1) < 0.05), (fitted, b)
    assert np.all(coef >= 0)
    assert cal.misfits(list(cal.LOOPS), b, fitted) == []


def test_lf77_fit_of_a_linear_machine_and_the_misfits() -> None:
    """LF-77: times with no memory side are fitted (the grid holds 0 ns per byte); a loop
    measured at zero or missed by more than half is a misfit (--write refuses)."""
    pytest.importorskip("scipy")
    cal = _bench("calibrate")
    a = _calibration_counts(cal)
    true = np.array([0.0 if k == "byte" else 0.1 + 0.05 * n for n, k in enumerate(KINDS)])
    b = a @ true
    _, fitted = cal.fit_roofline(a, b)
    assert np.all(np.abs(fitted / b - 1) < 0.05)
    zero = np.zeros(len(a))                  # a machine that measured nothing: no crash
    coef, fitted = cal.fit_roofline(a, zero)
    assert not coef.any() and cal.misfits(list(cal.LOOPS), zero, fitted) == list(cal.LOOPS)
    names = ["a", "b", "c", "d"]
    assert cal.misfits(names, np.array([1.0, 0.0, 1.0, 1.0]),
                       np.array([1.4, 0.1, 0.45, 1.6])) == ["b", "c", "d"]


# ------------------------------------------------------------------------- LF-78


class _Result:
    def array(self, name: str) -> np.ndarray:
        return np.zeros(2)


def test_lf78_measure_interleaves_and_takes_the_best_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-78: the four programs run interleaved, the order reversed every other round; a
    step is (best T2 - best T1) / (T2 - T1); the noise is the median T2 run's excess over the
    best, per step, relative to the step."""
    sweep = _bench("cost_sweep")
    # seconds each run takes, per program, round by round (after the first, building run)
    times = {(False, 1): [1.0, 1.2, 1.0, 1.1, 1.3], (False, 9): [1.8, 2.0, 1.9, 1.8, 2.6],
             (True, 1): [0.5, 0.6, 0.5, 0.5, 0.7], (True, 9): [0.9, 0.9, 1.1, 0.9, 0.9]}
    clock = [0.0]
    order: list[tuple[bool, int]] = []
    first: set[tuple[bool, int]] = set()
    progs = {key: SimpleNamespace(key=key) for key in times}

    def fake_run(prog: Any, **_: Any) -> _Result:
        if prog.key not in first:            # the building run is not timed
            first.add(prog.key)
            return _Result()
        order.append(prog.key)
        clock[0] += times[prog.key][sum(k == prog.key for k in order) - 1]
        return _Result()

    monkeypatch.setattr(sweep, "run_program", fake_run)
    monkeypatch.setattr(sweep, "CLOCK", [lambda: clock[0]])
    m = sweep.measure(progs, None, 1, 9, 5)
    keys = list(times)
    assert order == [*keys, *keys[::-1], *keys, *keys[::-1], *keys]
    assert math.isclose(m.unfused, (1.8 - 1.0) / 8) and math.isclose(m.fused, (0.9 - 0.5) / 8)
    assert math.isclose(m.noise_unfused, ((1.9 - 1.8) / 8) / m.unfused)
    assert math.isclose(m.noise_fused, 0.0, abs_tol=1e-9) and m.same
    assert math.isclose(m.ratio, 0.5) and not m.within_noise


def test_lf78_within_the_noise() -> None:
    """LF-78: two steps within both variants' noise together, or within 2 %, are not told
    apart."""
    sweep = _bench("cost_sweep")
    assert sweep.Measure(1.0, 1.015, 0.0, 0.0, True).within_noise       # the 2 % floor
    assert not sweep.Measure(1.0, 0.9, 0.03, 0.03, True).within_noise
    assert sweep.Measure(1.0, 0.9, 0.06, 0.05, True).within_noise
    assert not sweep.Measure(-1.0, 0.9, 0.0, 0.0, True).valid


# ------------------------------------------------------------------------- LF-79


def test_lf79_ties_are_not_counted_as_agreement() -> None:
    """LF-79: strict agreement counts only the model's decision against the measured faster
    variant; a disagreement within the noise is counted apart, never as agreement; a
    second measurement's flips are counted."""
    sweep = _bench("cost_sweep")
    t = sweep.Tally()
    clear_faster = sweep.Measure(1.0, 0.5, 0.01, 0.01, True)
    tie_slower = sweep.Measure(1.0, 1.01, 0.01, 0.01, True)
    clear_slower = sweep.Measure(1.0, 1.5, 0.01, 0.01, True)
    assert t.add(clear_faster, True, clear_faster) == "agrees"
    assert t.add(tie_slower, True, clear_faster) == "DISAGREES (within the noise)"
    assert t.add(clear_slower, True, clear_slower) == "DISAGREES"
    assert t.add(clear_slower, False, None) == "agrees"
    assert (t.total, t.agree, t.within, t.disagree_within) == (4, 2, 1, 1)
    assert (t.again, t.self_agree, t.self_disagree_within) == (3, 2, 1)
    lines = t.summary(True)
    assert "agreement: 2/4 = 50 % strict; 2 disagreements, 1 of them within the measured " \
        "noise; 1 pairs within the noise in all; outside it 2/3" in lines[1]
    assert lines[2].startswith("self-agreement: the two measurements agree on the faster "
                               "variant in 2/3 = 67 % of pairs (0 flips outside the noise)")


# ------------------------------------------------------------------------- LF-80


def test_lf80_recompute_spans_1_to_300_and_the_domain_is_sized() -> None:
    """LF-80: the recompute per point is log-uniform over 1..300 (most pairs far from any
    boundary); the domain is sized for the step time, capped at the calibration's 2^19
    points (the arrays in the last-level cache, as they were calibrated)."""
    sweep = _bench("cost_sweep")
    rng = random.Random(5)
    ops = [sweep.make_case(rng).ops for _ in range(400)]
    assert min(ops) >= 1 and max(ops) <= 302 and min(ops) <= 2 and max(ops) >= 250
    assert 0.25 < sum(o < 10 for o in ops) / len(ops) < 0.55
    assert sum(o >= 100 for o in ops) / len(ops) > 0.08
    assert sweep.domain_size(1.0, 1, 10.0) == 1 << 19          # capped: the calibration's
    assert sweep.domain_size(100.0, 1, 10.0) == 100_000
    assert sweep.domain_size(100.0, 2, 10.0) == 316
    assert sweep.domain_size(1.0, 2, 10.0) == 724              # 724^2 <= 2^19
    assert sweep.domain_size(1e6, 2, 10.0) == 48


def test_lf75_lf80_every_rule_is_cited() -> None:
    """Every rule LF-75..LF-80 that specs/loop-fusion.md defines is cited by a test of
    this file (LF-81..LF-84: tests/test_cost_agreement.py)."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 75, 80)
