"""Nests of two or more dimensions priced on their own kinds (specs/loop-fusion.md,
LF-114..LF-121; issue 15): the row's ``nd.`` kinds, their calibration on 2-D nests (on a
scripted machine: no timing here) and the recorded sweep re-predicted."""

from __future__ import annotations

import gc
import json
import math
import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from benchmark_module import load_benchmark
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops import cost_table
from sarek_py.fusion.loops.cost import TIE, CostDecision, Prediction
from sarek_py.fusion.loops.cost_counts import KINDS, count
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.fusion.loops.predict import ND, loop_ns, ns, row_for
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent


def _bench(name: str) -> ModuleType:
    return load_benchmark(name, "rank")


def loops(p: Program) -> list[ParFor]:
    return [s for s in iter_host(p.body) if isinstance(s, ParFor)]


PLAIN = dict.fromkeys(KINDS, 0.0) | {"point": 1.0, "load": 1.0, "f64_op": 1.0,
                                     "launch": 0.0}
NEST = dict.fromkeys(KINDS, 0.0) | {"point": 0.25, "load": 0.125, "f64_op": 2.0}
ROW = PLAIN | {f"{ND}{k}": v for k, v in NEST.items()}

PAIR = {1: """program p
  var n : i32 = 64;
  var A : f64[0:] allocatable;
  var B : f64[0:] allocatable;
  var C : f64[0:] allocatable;
begin
  allocate A[0:n - 1]; allocate B[0:n - 1]; allocate C[0:n - 1];
  for t = 1 to 3 do
    parallel for (i = 1 to n - 2) do B[i] <- A[i - 1] * 0.5 + A[i + 1] * 0.25 done;
    parallel for (i = 2 to n - 3) do C[i] <- B[i - 1] + B[i + 1] done
  done
end
""", 2: """program p
  var n : i32 = 64;
  var A : f64[0:, 0:] allocatable;
  var B : f64[0:, 0:] allocatable;
  var C : f64[0:, 0:] allocatable;
begin
  allocate A[0:n - 1, 0:n - 1]; allocate B[0:n - 1, 0:n - 1]; allocate C[0:n - 1, 0:n - 1];
  for t = 1 to 3 do
    parallel for (i = 1 to n - 2, j = 0 to n - 1) do B[i, j] <- A[i - 1, j] * 0.5 + A[i + 1, j] * 0.25 done;
    parallel for (i = 2 to n - 3, j = 0 to n - 1) do C[i, j] <- B[i - 1, j] + B[i + 1, j] done
  done
end
"""}


def _prediction(dims: int, monkeypatch: pytest.MonkeyPatch, row: dict[str, float]) -> object:
    monkeypatch.setitem(cost_table.TABLE, "hand", row)
    rep = fuse_program(parse_program(PAIR[dims], "p.sk"),
                       FusionOptions(threshold=1e300, backend="hand"))[1][-1]
    assert rep.fused and rep.plan is not None and rep.plan.cost.prediction is not None
    return rep.plan.cost.prediction


# ------------------------------------------------------------------------- LF-114


def test_lf114_row_for_picks_the_nd_kinds_for_nests_only() -> None:
    """LF-114: a nest of two or more dimensions reads the ``nd.`` kinds, a 1-D loop the
    plain ones; a row without ``nd.`` kinds is the same row for every rank."""
    assert row_for(ROW, 1) is ROW
    assert row_for(ROW, 2) == NEST and row_for(ROW, 3) == NEST
    assert row_for(PLAIN, 2) is PLAIN


@pytest.mark.parametrize("dims", [1, 2])
def test_lf114_each_loop_of_a_pair_is_priced_on_its_ranks_kinds(
        dims: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-114: the producer, the consumer and the fused loop of a 2-D pair are priced on
    the ``nd.`` kinds (by hand: 2-D producer 0.25 + 2 x 0.125 + 3 x 2 = 6.5 ns a point),
    those of a 1-D pair on the plain kinds (producer 1 + 2 + 3 = 6 ns); the prediction of
    the 1-D pair does not move when the ``nd.`` kinds change, the 2-D pair's does."""
    pred = _prediction(dims, monkeypatch, dict(ROW))
    prog = parse_program(PAIR[dims], "p.sk")
    prod, cons = loops(prog)
    kinds = NEST if dims == 2 else PLAIN
    producer = ns(count(prod.body), kinds)
    assert producer == (6.5 if dims == 2 else 6.0)
    assert loop_ns(prod, count(prod.body), ROW) == producer
    share = (62 if dims == 1 else 62 * 64) / (60 if dims == 1 else 60 * 64)
    expected = producer * share + ns(count(cons.body), kinds)
    assert math.isclose(pred.unfused_ns, expected, rel_tol=1e-12)  # type: ignore[attr-defined]
    other = _prediction(dims, monkeypatch, ROW | {f"{ND}f64_op": 9.0})
    moved = other.unfused_ns != pred.unfused_ns  # type: ignore[attr-defined]
    assert moved == (dims == 2)
    assert (other.fused_ns != pred.fused_ns) == (dims == 2)  # type: ignore[attr-defined]


def test_lf114_a_row_without_nd_kinds_prices_a_nest_on_its_plain_kinds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-114: without ``nd.`` kinds the 2-D pair is priced on the plain kinds, as a row
    written before LF-114 (or by hand) always was."""
    pred = _prediction(2, monkeypatch, dict(PLAIN))
    prod, cons = loops(parse_program(PAIR[2], "p.sk"))
    expected = ns(count(prod.body), PLAIN) * 62 / 60 + ns(count(cons.body), PLAIN)
    assert math.isclose(pred.unfused_ns, expected, rel_tol=1e-12)  # type: ignore[attr-defined]


def test_lf114_checked_in_rows_hold_every_nd_kind_or_none() -> None:
    """LF-114, LF-115: a checked-in row has all of LF-61's kinds with the ``nd.`` prefix
    (written by the calibration) or none, each finite and non-negative."""
    for name, r in cost_table.TABLE.items():
        nd = {k for k in r if k.startswith(ND)}
        assert nd in (set(), {f"{ND}{k}" for k in KINDS}), name
        assert all(math.isfinite(v) and v >= 0 for v in r.values()), name


# ------------------------------------------------------------------------- LF-115


def test_lf115_body_nd_moves_the_loop_along_the_contiguous_dimension() -> None:
    """LF-115: ``i`` becomes ``j`` and every subscript gains the row ``i``; each converted
    micro loop counts what its 1-D loop counts, plus a ``shift`` per distinct load at an
    offset in ``j`` (the stencil's eight)."""
    cal = _bench("calibrate")
    assert cal.body_nd("y[i] <- x[i + 1] * f64(i % 7)") == "y[i, j] <- x[i, j + 1] * f64(j % 7)"
    assert cal.body_nd("if i > 7 then y[i] <- x[i]") == "if j > 7 then y[i, j] <- x[i, j]"
    for name, body in cal.LOOPS.items():
        one = count(cal.loop_of(cal.program(body, 64, 1)).body).as_dict()
        two = count(cal.loop_of(cal.program_nd(cal.body_nd(body), 64, 1)).body).as_dict()
        shifts = two.pop("shift")
        one.pop("shift")
        assert two == one, name
        assert shifts == (8 if name == "stencil loads" else 0), name


#: the 1-D kinds of the scripted machine of the calibration's tests (LF-115, LF-119)
MACHINE = dict.fromkeys(KINDS, 0.0) | {
    "point": 0.5, "load": 0.4, "f64_op": 0.03, "f32_op": 0.02, "f64_div": 0.3,
    "f32_div": 0.1, "f64_transc": 8.0, "f32_transc": 2.0, "int_op": 0.02,
    "int_div": 0.3, "branch": 1.0}


def _scripted(cal: ModuleType, plain: dict[str, float], nest: dict[str, float],
              launch: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """``step_ns`` replaced by a machine whose loops cost exactly the roofline of ``plain``
    (1-D) and ``nest`` (2-D programs) per point, plus ``launch`` per step."""
    def step_ns(body: str, sizes: tuple[int, ...], backend: object, t1: int, t2: int,
                repeat: int, make: object = None) -> list[float]:
        make = make or cal.program
        lp = cal.loop_of(make(body, 64, 1))  # type: ignore[operator]
        kinds = nest if len(lp.indices) == 2 else plain
        per = ns(count(lp.body), kinds)
        out = []
        for n in sizes:
            pts = (math.isqrt(n) - 8) ** 2 if len(lp.indices) == 2 else n - 8
            out.append(launch + per * max(pts, 0))
        return out
    monkeypatch.setattr(cal, "step_ns", step_ns)


def test_lf115_the_calibration_fits_the_nests_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-115: on a scripted machine whose nests cost a third of its 1-D loops' point and
    load, the calibration's ``nd.`` kinds price every 2-D nest within 2 % of its scripted
    time and the plain kinds every 1-D loop, and the row is written (no misfit); with the
    nests' kinds equal to the loops', the ``nd.`` kinds price the nests as the plain ones."""
    pytest.importorskip("scipy")  # the fit's (benchmarks/calibrate.py)
    cal = _bench("calibrate")
    plain = dict(MACHINE)
    nest = plain | {"point": 0.15, "load": 0.12, "shift": 0.05}
    _scripted(cal, plain, nest, 20000.0, monkeypatch)
    row, _, good = cal.calibrate("interp", 1 << 16, 1, 8)
    assert good
    for body in cal.LOOPS.values():
        one = count(cal.loop_of(cal.program(body, 64, 1)).body)
        two = count(cal.loop_of(cal.program_nd(cal.body_nd(body), 64, 1)).body)
        assert math.isclose(ns(one, row_for(row, 1)), ns(one, plain), rel_tol=0.02), body
        assert math.isclose(ns(two, row_for(row, 2)), ns(two, nest), rel_tol=0.02), body
    assert row["launch"] == pytest.approx(20000.0, rel=1e-6)
    assert set(row) == {*KINDS, "launch", *(f"{ND}{k}" for k in KINDS)}


def test_lf115_a_misfit_nest_refuses_the_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-115: a nest measured at zero makes the row noisy (``--write`` refuses it), as a
    1-D loop does (LF-77)."""
    pytest.importorskip("scipy")  # the fit's (benchmarks/calibrate.py)
    cal = _bench("calibrate")
    plain = dict(MACHINE)
    _scripted(cal, plain, plain, 0.0, monkeypatch)
    inner = cal.step_ns

    def zero_copy(body: str, *a: object, **k: object) -> list[float]:
        out: list[float] = inner(body, *a, **k)
        return [0.0 for _ in out] if body == "y[i, j] <- x[i, j]" else out
    monkeypatch.setattr(cal, "step_ns", zero_copy)
    _, lines, good = cal.calibrate("interp", 1 << 16, 1, 8)
    assert not good
    assert any("noisy" in ln and "2-D copy f64" in ln for ln in lines)


def test_lf115_render_writes_the_nd_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """LF-115: ``--write`` stores the ``nd.`` kinds in the row and the table reads back."""
    cal = _bench("calibrate")
    target = tmp_path / "cost_table.py"
    target.write_text(Path(cost_table.__file__).read_text())
    monkeypatch.setattr(cal, "TABLE_FILE", target)
    monkeypatch.setattr(cal, "TABLE", {"other": dict(PLAIN)})
    monkeypatch.setattr(cal, "SOURCES", {"other": "by hand"})
    cal.write_table("mine", dict(ROW), "a test")
    ns_: dict[str, object] = {}
    exec(compile(target.read_text(), str(target), "exec"), ns_)  # noqa: S102
    assert ns_["TABLE"] == {"other": PLAIN, "mine": ROW}


# ------------------------------------------------------------------------- LF-116


def test_lf116_a_recorded_sweep_is_predicted_again(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
    """LF-116: the recorded pairs are priced again on the recorded row, or on the
    checked-in one; the agreement counts the new decisions against the first
    measurement and against every measurement."""
    sweep = _bench("cost_sweep")
    rep = _bench("cost_repredict")
    rng = random.Random(5)
    pairs = []
    for k in range(4):
        case = sweep.make_case(rng)
        text = case.text(64 if case.dims == 1 else 16, 1)
        ratio, fuses = rep.predicted(text, "opencl")
        # measured: the first agrees with the model on pairs 0 and 1, the second never
        agree = k < 2
        faster = fuses == agree
        first = {"unfused": 1.0, "fused": 0.5 if faster else 2.0}
        second = {"unfused": 1.0, "fused": 2.0 if fuses else 0.5}
        pairs.append({"k": k, "case": case.describe(), "text": text, "predicted": ratio,
                      "fuses": fuses, "measured": [first, second]})
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({"backend": "opencl", "row": cost_table.TABLE["opencl"],
                                "pairs": pairs}))
    import sys
    argv = sys.argv
    try:
        sys.argv = ["cost_repredict.py", str(path)]
        assert rep.main() == 0
    finally:
        sys.argv = argv
    out = capsys.readouterr().out
    assert "4 pairs; strict agreement with the first measurement 2 recorded, 2 now; " \
           "with every measurement 0" in out
    assert out.count("MISS") == 2


def test_lf116_the_sweep_records_what_it_measured() -> None:
    """LF-116: ``--json`` is an option of the sweep, and the record holds the program, the
    prediction and the measurements (the names the re-prediction reads)."""
    src = (ROOT / "benchmarks" / "cost_sweep.py").read_text()
    for key in ('"--json"', '"text"', '"predicted"', '"fuses"', '"measured"', '"row"'):
        assert key in src, key
    rep = (ROOT / "benchmarks" / "cost_repredict.py").read_text()
    for key in ('["text"]', '["fuses"]', '["measured"]', '["row"]', '["backend"]'):
        assert key in rep, key


# ------------------------------------------------------------------------- LF-117


def test_lf117_a_fast_pair_is_timed_over_a_longer_run() -> None:
    """LF-117: the steps timed are ``--steps`` or as many as the predicted unfused steps
    take ``--run-ms``, at most 4096."""
    sweep = _bench("cost_sweep")
    assert sweep.timed_steps(10e6, 16, 100.0) == 16        # 10 ms a step: 16 suffice
    assert sweep.timed_steps(0.25e6, 16, 100.0) == 400     # 0.25 ms: 400 steps
    assert sweep.timed_steps(0.3e6, 16, 100.0) == 334      # rounded up
    assert sweep.timed_steps(1.0, 16, 100.0) == 4096       # capped
    assert sweep.timed_steps(0.0, 16, 100.0) == 16


# ------------------------------------------------------------------------- LF-118


def test_lf118_the_calibration_times_a_fast_loop_longer() -> None:
    """LF-118: T2 grows so that the timed steps take ``run_ms``, never fewer than asked,
    at most 64 times as many, four times when the first run saw no time."""
    cal = _bench("calibrate")
    assert cal.longer_steps(2, 26, 0.5, 100.0) == 26          # 500 ms: enough
    assert cal.longer_steps(2, 26, 0.010, 100.0) == 2 + 240   # 10 ms: ten times
    assert cal.longer_steps(2, 26, 0.0101, 100.0) == 2 + 238  # rounded up
    assert cal.longer_steps(2, 26, 1e-6, 100.0) == 2 + 64 * 24
    assert cal.longer_steps(2, 26, 0.0, 100.0) == 2 + 4 * 24


def test_lf118_step_ns_runs_the_longer_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-118: ``step_ns`` builds and times the programs of the longer run when the first
    run was short, and returns per-step times (here of the reference interpreter standing
    for a device, on a scripted clock where a step costs 1 ms)."""
    cal = _bench("calibrate")
    built: list[int] = []
    real_program = cal.program

    def program(body: str, n: int, steps: int) -> Program:
        built.append(steps)
        return real_program(body, n, steps)

    clock = [0.0]
    runs: list[int] = []

    def run(q: Program, **kw: object) -> None:
        steps = next(int(d.init.value) for d in q.decls  # type: ignore[union-attr]
                     if d.var.name == "steps")
        runs.append(steps)
        clock[0] += 1e-3 * steps

    monkeypatch.setattr(cal, "run_program", run)
    monkeypatch.setattr(cal, "CLOCK", [lambda: clock[0]])
    monkeypatch.setattr(cal, "RUN_MS", [100.0])
    got = cal.step_ns("y[i] <- x[i]", (64, 16), get_backend("interp"), 2, 10, 2, program)
    assert 100 + 2 in built            # 8 steps took 8 ms: 100 steps timed
    assert got == [pytest.approx(1e6), pytest.approx(1e6)]


def test_lf119_the_launch_is_the_median_of_three(monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-119: the calibration measures the launch three times -- before the 1-D loops,
    after them and after the nests -- and keeps the median: one disturbed measurement
    (here the second, 3.5 times the others) does not set the row's launch; the three are
    printed."""
    pytest.importorskip("scipy")  # the fit's (benchmarks/calibrate.py)
    cal = _bench("calibrate")
    plain = dict(MACHINE)
    _scripted(cal, plain, plain, 0.0, monkeypatch)
    order: list[str] = []
    inner = cal.step_ns

    def step_ns(body: str, sizes: tuple[int, ...], *a: object, **k: object) -> list[float]:
        if sizes == (cal.LAUNCH_LOOP[1],):
            order.append("launch")
            return [(20000.0, 70000.0, 21000.0)[order.count("launch") - 1]]
        order.append("2-D" if "," in body else "1-D")
        out: list[float] = inner(body, sizes, *a, **k)
        return out
    monkeypatch.setattr(cal, "step_ns", step_ns)
    row, lines, good = cal.calibrate("interp", 1 << 16, 1, 8)
    assert good
    assert row["launch"] == 21000.0
    assert any("20.0, 70.0, 21.0" in ln and "LF-119" in ln for ln in lines)
    # spread over the run: first, after the last 1-D loop, last
    at = [i for i, w in enumerate(order) if w == "launch"]
    assert at[0] == 0 and at[2] == len(order) - 1
    assert order[at[1] - 1] == "1-D" and "2-D" in order[at[1]:]
    assert order.count("1-D") == len(cal.LOOPS)


def test_lf120_a_measurement_runs_ten_rounds_with_the_collector_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-120: each of the four programs of a pair runs once per round, ten rounds by
    default, each run with Python's garbage collector off (and on again after it, also
    when the run raises); the sweep's ``--help`` gives the default."""
    sweep = _bench("cost_sweep")
    seen: list[tuple[object, bool]] = []

    def run(prog: object, device: object, check_races: bool) -> object:
        seen.append((prog, gc.isenabled()))

        class Result:
            def array(self, name: str) -> np.ndarray:
                return np.zeros(1)
        return Result()
    monkeypatch.setattr(sweep, "run_program", run)
    progs = {(f, t): object() for f in (False, True) for t in (2, 18)}
    assert gc.isenabled()
    sweep.measure(progs, None, 2, 18, 10)
    timed = seen[4:]                      # after the four untimed first runs
    assert len(timed) == 40 and all(not on for _, on in timed)
    assert all(sum(p is q for q, _ in timed) == 10 for p in progs.values())
    assert gc.isenabled()

    def boom(prog: object, device: object, check_races: bool) -> object:
        raise RuntimeError("run failed")
    monkeypatch.setattr(sweep, "run_program", boom)
    with pytest.raises(RuntimeError):
        sweep.timed_run(object(), None)
    assert gc.isenabled()
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cost_sweep.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "default 10, LF-120" in " ".join(out.split())


def test_lf121_a_predicted_gain_under_two_percent_is_a_tie() -> None:
    """LF-121: fused predicted faster by more than 2 % fuses; by 2 % or less it is a tie,
    refused with the tie said; slower is refused without it."""
    def pred(fused_ns: float) -> Prediction:
        return Prediction("hand", fused_ns, 100.0, 1, 2, 0.0)
    assert TIE == 0.02
    for fused_ns, faster, tie in ((97.9, True, False), (98.0, False, True),
                                  (99.5, False, True), (100.0, False, False),
                                  (101.0, False, False)):
        p = pred(fused_ns)
        assert (p.faster, p.tie) == (faster, tie), fused_ns
        d = CostDecision(1, 1, 64.0, prediction=p, threshold_given=False)
        assert d.pays == faster
        said = "a gain under 2% is a tie, the loops kept as written" in d.refusal()
        assert said == tie, fused_ns


@pytest.mark.parametrize("target, fused", [(0.99, False), (0.97, True)])
def test_lf121_a_tie_is_refused_in_the_notes(target: float, fused: bool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """LF-121 through ``fuse_program``: a hand row whose launch puts the pair at 0.99 of
    its unfused time refuses it as a tie; at 0.97 it fuses."""
    row = dict(ROW)
    p0 = _prediction(1, monkeypatch, row)
    assert isinstance(p0, Prediction) and p0.points is not None
    f, u, n = p0.fused_ns, p0.unfused_ns, p0.points
    lf, lu = p0.fused_launches, p0.unfused_launches
    row["launch"] = n * (target * u - f) / (lf - target * lu)
    assert row["launch"] > 0
    monkeypatch.setitem(cost_table.TABLE, "hand", row)
    rep = fuse_program(parse_program(PAIR[1], "p.sk"), FusionOptions(backend="hand"))[1][-1]
    assert rep.fused == fused
    if not fused:
        assert rep.refusal is not None and "0.99x" in rep.refusal.reason
        assert "is a tie, the loops kept as written" in rep.refusal.reason


def test_rules_cited() -> None:
    """Every rule of LF-114..LF-121 is cited by a test here."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 114, 121)

