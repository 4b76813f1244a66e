"""Reads at an offset in the last dimension: the ``shift`` kind of the cost model
(specs/loop-fusion.md, LF-95..LF-98; issue 15, H8)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops import cost_table
from sarek_py.fusion.loops.cost_counts import KINDS, Counts, count
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.fusion.loops.plan import Plan
from sarek_py.fusion.loops.predict import compute_ns, fused_counts, ns, predict
from sarek_py.ir.host.program import ParFor, iter_host
from sarek_py.ir.host.text import parse_program

ROOT = Path(__file__).resolve().parent.parent


def _calibrate() -> ModuleType:
    return load_benchmark("calibrate", "shift")


def counts_of(body: str) -> Counts:
    """The counts of ``body`` in a loop over i, j, k of 1-D x, 2-D u and v, 3-D w (f64)."""
    text = ("program c\n  var n : i32 = 10;\n  var x : f64[0:] allocatable;\n"
            "  var u : f64[0:, 0:] allocatable;\n  var v : f64[0:, 0:] allocatable;\n"
            "  var w : f64[0:, 0:, 0:] allocatable;\nbegin\n"
            "  allocate x[0:n]; allocate u[0:n, 0:n]; allocate v[0:n, 0:n];\n"
            "  allocate w[0:n, 0:n, 0:n];\n"
            f"  parallel for (i = 3 to n - 3, j = 3 to n - 3, k = 3 to n - 3) do {body} done\n"
            "end\n")
    loops = [s for s in iter_host(parse_program(text, "c.sk").body) if isinstance(s, ParFor)]
    return count(loops[0].body)


# ------------------------------------------------------------------------- LF-95


@pytest.mark.parametrize(("body", "shifts", "loads"), [
    ("v[i, j] <- u[i, j - 1] + u[i, j] + u[i, j + 1]", 2, 3),
    ("v[i, j] <- u[i, j - 2] + u[i, j + 2]", 2, 2),
    ("v[i, j] <- u[i, j - 1 - 1] + u[i, j - 1 + 1]", 1, 2),   # j - 2 and j
    ("v[i, j] <- u[i - 1, j] + u[i + 1, j]", 0, 2),           # offsets in the first dimension
    ("v[i, j] <- u[i, j]", 0, 1),
    ("x[i] <- x[i - 1] + x[i + 1]", 0, 2),                    # 1-D: no shift
    ("v[i, j] <- u[i, j - 1] + u[i, j - 1]", 1, 1),           # one element, one load, one shift
    ("v[i, j] <- u[i, 2 * j + 1]", 0, 1),                     # not an index plus a literal
    ("v[i, j] <- u[i, j * j - 1]", 0, 1),                     # not linear
    ("v[i, j] <- u[i, i + j + 1]", 0, 1),                     # two variables
    ("v[i, j] <- w[i, j, k + 1] + w[i, j + 1, k]", 1, 2),     # 3-D: the last subscript only
    ("v[i, j + 1] <- u[i, j]", 0, 1),                         # a store at an offset: none
    ("v[i, j] <- u[i, 1 + j]", 1, 1),
])
def test_lf95_shift_counts_distinct_loads_at_an_offset_in_the_last_dimension(
        body: str, shifts: int, loads: int) -> None:
    """LF-95: a shift per distinct load of a rank >= 2 array whose last subscript is one
    variable (coefficient 1) plus a nonzero literal."""
    c = counts_of(body)
    assert (c["shift"], c["load"]) == (shifts, loads), str(c)


def test_lf95_shift_is_a_compute_kind() -> None:
    """LF-95: the roofline prices a shift on its compute side."""
    c = counts_of("v[i, j] <- u[i, j - 1] + u[i, j + 1]")
    row = dict.fromkeys((*KINDS, "launch"), 0.0) | {"shift": 1.5}
    assert compute_ns(c, row) == 3.0 == ns(c, row)
    assert "shift" in KINDS


# ------------------------------------------------------------------------- LF-96


def test_lf96_fit_shift_recovers_a_known_cost_and_is_never_negative() -> None:
    """LF-96: the slope of the loops' cost above their twins' on their shift counts, not
    below 0 (a backend whose last-dimension reads cost less gets 0)."""
    cal = _calibrate()
    shifts, first = np.array([2.0, 4.0]), np.array([0.3, 0.4])
    assert cal.fit_shift(shifts, first + 0.25 * shifts, first) == pytest.approx(0.25)
    assert cal.fit_shift(shifts, first - 0.05, first) == 0.0            # c: cheaper along j
    assert cal.fit_shift(np.zeros(2), first + 1.0, first) == 0.0        # nothing to fit
    noisy = cal.fit_shift(shifts, first + 0.25 * shifts + np.array([0.02, -0.03]), first)
    assert 0.2 < noisy < 0.3


def test_lf96_the_twins_are_the_same_work_along_the_first_dimension() -> None:
    """LF-96: each 2-D calibration loop counts shifts and its twin none, every other kind
    equal (so their difference is the shifts' cost alone)."""
    cal = _calibrate()
    assert cal.LOOPS_2D
    for name, (body, twin) in cal.LOOPS_2D.items():
        a = count(cal.loop_of(cal.program_2d(body, 4096, 1)).body)
        b = count(cal.loop_of(cal.program_2d(twin, 4096, 1)).body)
        assert a["shift"] > 0 and b["shift"] == 0, name
        assert {k: v for k, v in a.as_dict().items() if k != "shift"} == \
            {k: v for k, v in b.as_dict().items() if k != "shift"}, name
    # the 1-D loops count none: LF-77's fit is unchanged
    for body in cal.LOOPS.values():
        assert count(cal.loop_of(cal.program(body, 64, 1)).body)["shift"] == 0


def _fake_step_ns(cal: ModuleType, truth: dict[str, float], zero: str | None = None) -> Any:
    """A machine whose per-point cost is ``truth`` on the counts (linear), the launch 1000
    ns, and 1-D loops; 2-D loops run ``zero`` at no cost (a busy machine's artifact)."""
    def step_ns(body: str, sizes: tuple[int, ...], backend: object, t1: int, t2: int,
                repeat: int, make: Any = None) -> list[float]:
        make = make or cal.program
        c = count(cal.loop_of(make(body, 4096, 1)).body)
        per = 0.0 if body == zero else sum(truth.get(k, 0.0) * c[k] for k in KINDS)
        out = []
        for n in sizes:
            pts = (n - 8) if make is cal.program else (int(np.sqrt(n)) - 8) ** 2
            out.append(1000.0 + per * max(pts, 0))
        return out
    return step_ns


def test_lf96_calibrate_fits_the_shift_and_refuses_a_zero_2d_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-96: ``calibrate`` puts the twins' slope in the row's ``shift``; a 2-D loop
    measured at zero is a misfit (``--write`` refuses)."""
    pytest.importorskip("scipy")
    cal = _calibrate()
    truth = {"point": 0.2, "load": 0.05, "f64_op": 0.03, "f32_op": 0.02, "f64_div": 0.2,
             "f32_div": 0.05, "f64_transc": 14.0, "f32_transc": 15.0, "int_op": 0.01,
             "int_div": 0.4, "select": 0.04, "branch": 0.7, "shift": 0.3}
    monkeypatch.setattr(cal, "get_backend", lambda name: object())
    monkeypatch.setattr(cal, "step_ns", _fake_step_ns(cal, truth))
    row, _, good = cal.calibrate("fake", 1 << 16, 1)
    assert good and row["shift"] == pytest.approx(0.3, rel=0.02)
    # (and LF-115's kinds of nests, the same machine's)
    assert set(row) == {*KINDS, "launch", *(f"nd.{k}" for k in KINDS)}
    twin = next(iter(cal.LOOPS_2D.values()))[1]
    monkeypatch.setattr(cal, "step_ns", _fake_step_ns(cal, truth, zero=twin))
    _, lines, good = cal.calibrate("fake", 1 << 16, 1)
    assert not good and any("noisy" in ln for ln in lines)


# ------------------------------------------------------------------------- LF-97


def test_lf97_a_row_without_the_kind_prices_it_zero() -> None:
    """LF-97: a row lacking ``shift`` prices as one with 0; the checked-in rows hold it."""
    c = counts_of("v[i, j] <- u[i, j - 1] + u[i, j] + u[i, j + 1]")
    row = {"point": 0.2, "load": 0.05, "f64_op": 0.03, "byte": 0.01}
    assert ns(c, row) == ns(c, row | {"shift": 0.0})
    for name, r in cost_table.TABLE.items():
        assert "shift" in r and r["shift"] >= 0, name


PAIR_1D = """
program p
  var n : i32 = 1000;
  var u : f64[0:] allocatable;
  var f : f64[0:] allocatable;
  var g : f64[0:] allocatable;
begin
  allocate u[0:n - 1]; allocate f[0:n - 1]; allocate g[0:n - 1];
  for t = 1 to 10 do
    parallel for (i = 1 to n - 2) do f[i] <- u[i - 1] * 0.5 + u[i + 1] * 2.0 done;
    parallel for (i = 2 to n - 3) do g[i] <- f[i - 1] + f[i] + f[i + 1] done
  done
end
"""


def _pair_2d(producer: str) -> str:
    return f"""
program p
  var n : i32 = 100;
  var A : f64[0:, 0:] allocatable;
  var B : f64[0:, 0:] allocatable;
  var C : f64[0:, 0:] allocatable;
begin
  allocate A[0:n - 1, 0:n - 1]; allocate B[0:n - 1, 0:n - 1]; allocate C[0:n - 1, 0:n - 1];
  for t = 1 to 10 do
    parallel for (i = 2 to n - 3, j = 2 to n - 3) do B[i, j] <- {producer} done;
    parallel for (i = 4 to n - 5, j = 4 to n - 5) do
      C[i, j] <- 0.2 * (B[i, j - 1] + B[i, j] + B[i, j + 1])
    done
  done
end
"""


THREE = "A[i, j - 1] * 0.999 + A[i, j] * 1.001 + A[i, j + 1] * 0.999"
FIVE = ("A[i, j] * 0.5 + A[i, j - 1] * 0.25 + A[i, j + 1] * 0.125 + A[i - 1, j] * 0.75 "
        "+ A[i + 1, j] * 0.875")


def _plan(text: str) -> Plan:
    _, reps = fuse_program(parse_program(text, "p.sk"), FusionOptions(threshold=1e300))
    plan = reps[-1].plan
    assert plan is not None
    return plan


def test_lf97_a_pair_without_shifts_is_priced_as_before() -> None:
    """LF-97: a 1-D pair counts no shift, so its prediction ignores the row's shift."""
    plan = _plan(PAIR_1D)
    row = dict.fromkeys((*KINDS, "launch"), 0.0) | {"point": 0.2, "load": 0.05,
                                                    "f64_op": 0.03, "launch": 1000.0}
    a = predict(plan, "x", row, {}, 0)
    b = predict(plan, "x", row | {"shift": 7.0}, {}, 0)
    assert (a.fused_ns, a.unfused_ns) == (b.fused_ns, b.unfused_ns)


# ------------------------------------------------------------------------- LF-98


@pytest.mark.parametrize(("producer", "fused", "unfused"), [(THREE, 4, 4), (FIVE, 8, 4)])
def test_lf98_fused_loop_counts_the_union_of_shifted_points(
        producer: str, fused: int, unfused: int) -> None:
    """LF-98: the fused loop reads its input at the union of the shifted points (A at
    j - 2 .. j + 2; with a five-point producer also rows i - 1 and i + 1 at j - 1, j + 1)."""
    plan = _plan(_pair_2d(producer))
    assert fused_counts(plan, {})["shift"] == fused
    assert count(plan.producer.body)["shift"] + count(plan.consumer.body)["shift"] == unfused


def test_lf98_equal_shift_counts_move_the_ratio_towards_one() -> None:
    """LF-98: where fused and unfused count the same shifts, pricing them raises both alike
    and the predicted ratio moves towards 1; where the fused loop counts more, it rises."""
    row = dict.fromkeys((*KINDS, "launch"), 0.0) | {"point": 0.15, "load": 0.05,
                                                    "f64_op": 0.03, "launch": 20000.0}
    three, five = _plan(_pair_2d(THREE)), _plan(_pair_2d(FIVE))
    r0 = predict(three, "x", row, {}, 0).ratio
    r1 = predict(three, "x", row | {"shift": 0.25}, {}, 0).ratio
    assert r0 > 1 and abs(r1 - 1) < abs(r0 - 1)
    f0 = predict(five, "x", row, {}, 0).ratio
    f1 = predict(five, "x", row | {"shift": 0.25}, {}, 0).ratio
    assert f1 > f0 > 1


def test_lf95_lf99_every_rule_is_cited() -> None:
    """Every rule LF-95..LF-99 that specs/loop-fusion.md defines is cited by a test of
    this file."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 95, 99, gaps=(99,))
