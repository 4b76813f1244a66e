"""The split priced as it runs (specs/loop-fusion.md, LF-100..LF-103; issue 15, item 3):
a pair fused as the interior nest and the boundary strips (LF-85) is priced as those
pieces -- the interior nest without the interior test, each strip at the select form, each
over its own points, a launch per piece that has points -- against the unfused pair. The
rows are made up and every figure is computed by hand (or by brute force over the
consumer's iterations): the prediction's arithmetic, not the backend's timing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops import cost_table
from sarek_py.fusion.loops.cost_counts import KINDS, count
from sarek_py.fusion.loops.fusion import FusionOptions, PairReport, fuse_program
from sarek_py.fusion.loops.plan import Plan
from sarek_py.fusion.loops.predict import declared_values, fused_counts, predict
from sarek_py.host.interp import run_program
from sarek_py.ir.host.program import HIf, ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.nodes import Store
from sarek_py.ir.visit import iter_nodes

#: jacobi's pair on f64: the consumer reads f one point either side, so its first and last
#: iterations read f where the producer does not write it (LF-50), the interior is a box
#: (LF-85): the pieces are [1, 1], [2, n - 3], [n - 2, n - 2] for n >= 5
PAIR = """
program s
  var n : i32 = {n};
  var u : f64[0:] allocatable; var f : f64[0:] allocatable; var g : f64[0:] allocatable;
begin
  {set}allocate u[0:n]; allocate f[0:n]; allocate g[0:n];
  for t = 1 to 10 do
    parallel for (i = 1 to n - 2) do {guard}f[i] <- 0.5 * (u[i - 1] + u[i + 1]) done;
    parallel for (i = {clo} to n - 2) do g[i] <- f[i - 1] + f[i + 1] done
  done
end
"""

#: jacobi-1d itself: the consumer writes u, which the producer reads (renamed, LF-9)
JACOBI = """
program s
  var n : i32 = 1000;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable;
begin
  allocate u[0:n]; allocate f[0:n];
  for t = 1 to 10 do
    parallel for (i = 1 to n - 2) do f[i] <- 0.5 * (u[i - 1] + u[i + 1]) done;
    parallel for (i = 1 to n - 2) do u[i] <- 0.5 * (f[i - 1] + f[i + 1]) done
  done
end
"""


def pair(n: int = 1000, *, clo: int = 1, guard: str = "",
         assigned: bool = False) -> str:
    """PAIR at size ``n``; ``assigned``: ``n`` set by a statement too, so its declared
    value is not known to the prediction (LF-62)."""
    return PAIR.format(n=n, clo=clo, guard=guard,
                       set="n := n; " if assigned else "")


def row(**kw: float) -> dict[str, float]:
    return dict.fromkeys((*KINDS, "launch"), 0.0) | kw


def report(text: str, **kw: Any) -> PairReport:
    _, reps = fuse_program(parse_program(text, "s.sk"), FusionOptions(**kw))
    return reps[-1]


def on_hand(table: dict[str, float], text: str, **kw: Any) -> PairReport:
    """The pair's report with ``table`` as the backend ``hand``'s row (LF-62)."""
    cost_table.TABLE["hand"] = table
    try:
        return report(text, backend="hand", **kw)
    finally:
        del cost_table.TABLE["hand"]


def planned(text: str, **kw: Any) -> tuple[Plan, dict[Any, int]]:
    """The plan of the pair, fused whatever it costs (the threshold decides, LF-63), and
    the declared values of its program (by the plan's own variables)."""
    prog = parse_program(text, "s.sk")
    _, reps = fuse_program(prog, FusionOptions(threshold=1e300, **kw))
    r = reps[-1]
    assert r.fused and r.plan is not None, str(r)
    return r.plan, declared_values(prog)


def brute(n: int, clo: int = 1) -> tuple[int, int, int]:
    """The consumer's iterations of PAIR by where their reads of f fall: (both in the
    producer's domain [1, n - 2], before the box, after it) -- counted one by one."""
    inside = before = after = 0
    for i in range(clo, n - 1):
        if 1 <= i - 1 and i + 1 <= n - 2:
            inside += 1
        elif i - 1 < 1:
            before += 1
        else:
            after += 1
    return inside, before, after


# ------------------------------------------------------------------------- LF-100


def test_lf100_the_interior_nest_runs_no_test() -> None:
    """LF-100: the interior nest of a split pair runs no interior test, so a row whose
    branch is dear does not price it: memory-bound at 1 ns a byte, the interior reads u
    and writes g (16 bytes), the strips read u, f and write g (24 bytes); fused 996 * 16 +
    2 * 24 = 15984 ns against 998 * 16 * 2 = 31936 unfused: it fuses. Priced as one loop
    with the interior test (a branch at 40 ns a point) it was 998 * 40 = 39920: refused."""
    r = on_hand(row(byte=1.0, branch=40.0), pair())
    assert r.fused and r.plan is not None and r.plan.split is not None, str(r)
    p = r.plan.cost.prediction
    assert p is not None and p.points == 998
    assert math.isclose(p.total(True), 15984.0) and math.isclose(p.total(False), 31936.0)
    assert math.isclose(p.fused_ns, 15984.0 / 998)


def test_lf100_the_strips_run_the_select_form() -> None:
    """LF-100: each strip point runs the select form: two selects (the reads of f at
    i - 1 and i + 1), both arms priced. With a select at 1000 ns and a point at 1 ns: fused
    996 * 1 + 2 * (1 + 2 * 1000) = 4998 ns against 998 * 2 = 1996 unfused: refused. Priced
    on the interior branch alone (no select) it was 998 ns: fused."""
    r = on_hand(row(point=1.0, select=1000.0), pair())
    assert r.refusal is not None and r.refusal.rule == "LF-13", str(r)
    assert r.refusal.reason.startswith(
        "fusion does not pay: predicted on hand: fused 4.998 µs against 1.996 µs unfused "
        "per iteration of 998 points (2.50x; 3 launches against 2"), r.refusal.reason


def test_lf100_the_pieces_counts_interior_plain_strips_with_selects() -> None:
    """LF-100: the pieces are the interior nest (the plain recompute: no select, no
    branch, no test operation) and two strips (the select form: the stored f read too,
    the domain test's comparisons, two selects); the producer's loop is none of them."""
    from sarek_py.fusion.loops.predict import fused_pieces

    plan, _ = planned(pair())
    pieces = fused_pieces(plan, {})
    assert len(pieces) == 3
    inner, *strips = (c for _, c in pieces)
    assert (inner["select"], inner["branch"], inner["int_op"]) == (0, 0, 0)
    assert (inner["byte"], inner["load"]) == (16, 3)          # u[i - 2], u[i], u[i + 2]
    assert fused_counts(plan, {}) == inner                     # the limit: the interior
    for c in strips:
        assert (c["select"], c["branch"], c["byte"], c["load"]) == (2, 0, 24, 5), str(c)
        assert c["int_op"] >= 4                                # 1 <= s && s <= n - 2, twice
    # the producer's loop does not run: no piece stores f
    assert not any(isinstance(x, Store) and x.array.name == "f"
                   for lp, _ in pieces for x in iter_nodes(lp.body))
    assert [lp.body for lp, _ in pieces][1] == [lp.body for lp, _ in pieces][2]


def test_lf100_renamed_arrays_copy_loop_and_ping_pong() -> None:
    """LF-100, LF-102: jacobi-1d renames u: copied back, the pieces and a copy loop (a
    load and a store, 16 bytes a point over the consumer's 998 points) run, 4 launches;
    ping-ponged (PP-4), the pieces alone, 3. Memory-bound at 1 ns a byte, no launch cost:
    the pieces read u, write u's copy (interior: 16 bytes; strips also read f: 24)."""
    r1 = row(byte=1.0)
    plan, env = planned(JACOBI)
    copied = predict(plan, "hand", r1, {}, 1, env)
    assert copied.fused_launches == 4 and copied.split == (996, 1, 1)
    assert math.isclose(copied.total(True), 996 * 16 + 2 * 24 + 998 * 16)
    plan, env = planned(JACOBI, swap=True)
    swapped = predict(plan, "hand", r1, {}, 0, env)
    assert swapped.fused_launches == 3
    assert math.isclose(swapped.total(True), 996 * 16 + 2 * 24)


# ------------------------------------------------------------------------- LF-101


@pytest.mark.parametrize("clo", [1, 2])
def test_lf101_every_piece_over_its_points_at_every_size(clo: int) -> None:
    """LF-101, LF-102: at n = 3..12 (the interior empty at n <= 4; from clo = 2 the strip
    before the box is empty) the pieces' points are those counted one iteration at a time,
    and the fused total is theirs at their own bytes (16 a point inside, 24 on a strip)
    plus 5000 ns a launch of a piece that has points."""
    r1 = row(byte=1.0, launch=5000.0)
    for n in range(3, 13):
        text = pair(n, clo=clo)
        prog = parse_program(text, "s.sk")
        _, reps = fuse_program(prog, FusionOptions(threshold=1e300))
        plan = reps[-1].plan
        inside, before, after = brute(n, clo)
        if plan is None or inside + before + after == 0:
            continue
        assert plan.split is not None, (n, str(reps[-1]))
        p = predict(plan, "hand", r1, {}, 0, declared_values(prog))
        assert p.points == inside + before + after, n
        launches = sum(1 for k in (inside, before, after) if k)
        assert math.isclose(p.total(True),
                            16 * inside + 24 * (before + after) + 5000 * launches), n
        assert p.fused_launches == launches, n
        assert p.split == (inside, before, after), n
        # the producer over its own n - 2 points (LF-62), the consumer over its
        assert math.isclose(p.total(False), 16 * (n - 2) + 16 * p.points + 2 * 5000), n


def test_lf101_the_pieces_decide_at_a_small_size() -> None:
    """LF-101: at n = 8 the strips are 2 of 6 points: memory-bound at 1 ns a byte with the
    branch at 30 ns, fused 4 * 16 + 2 * 24 = 112 against 2 * 6 * 16 = 192 unfused (the
    interior test is not run); every point at the interior branch plus its test was
    6 * 30 = 180 -- and every point at the strip's 24 bytes would be 144: the pieces are
    priced each over its own points."""
    r = on_hand(row(byte=1.0, branch=30.0), pair(8))
    p = r.plan.cost.prediction if r.plan is not None else None
    assert p is not None and r.fused, str(r)
    assert math.isclose(p.total(True), 112.0) and math.isclose(p.total(False), 192.0)
    assert p.split == (4, 1, 1)


def test_lf101_unknown_sizes_price_the_interior_nest_per_point() -> None:
    """LF-101: n assigned by a statement is not a declared value: the per-point times
    decide and the fused figure is the interior nest's (point 1 + 3 loads; no branch, no
    test) against the producer's (1 + 2 loads) and the consumer's (1 + 2)."""
    r1 = row(point=1.0, load=1.0, branch=100.0, int_op=10.0)
    text = pair(assigned=True)
    prog = parse_program(text, "s.sk")
    _, reps = fuse_program(prog, FusionOptions(threshold=1e300))
    plan = reps[-1].plan
    assert plan is not None and plan.split is not None
    p = predict(plan, "hand", r1, {}, 0, declared_values(prog))
    assert p.points is None and (p.fused_ns, p.unfused_ns) == (4.0, 6.0)
    assert p.fused_launches == 3 and p.split == ()


def test_lf101_a_piece_bound_not_known_falls_back_to_per_point() -> None:
    """LF-101: the producer stores f only where i >= m (LF-85: a bound of one index by a
    host value), m set by a statement: the loops' sizes are known but the pieces' bounds
    read m, so the per-point times decide (the interior nest's: 1 + 3 loads)."""
    text = pair(guard="if i >= m then ").replace(
        "var n : i32 = 1000;", "var n : i32 = 1000; var m : i32 = 1;").replace(
        "allocate u", "m := 1; allocate u")
    prog = parse_program(text, "s.sk")
    _, reps = fuse_program(prog, FusionOptions(threshold=1e300))
    plan = reps[-1].plan
    assert plan is not None and plan.split is not None, str(reps[-1])
    p = predict(plan, "hand", row(point=1.0, load=1.0, branch=100.0), {}, 0,
                declared_values(prog))
    assert p.points is None and p.split == ()
    assert p.fused_ns == 4.0 and p.fused_launches == 3


# ------------------------------------------------------------------------- LF-102


def test_lf102_launches_of_the_pieces_decide() -> None:
    """LF-102: the pieces are three launches: memory-bound at 1 ns a byte with 20 us a
    launch, fused 15984 + 3 * 20000 = 75984 ns against 31936 + 2 * 20000 = 71936
    unfused: refused (1.06x). Counted as one launch it was 15984 + 20000 = 35984: fused."""
    r = on_hand(row(byte=1.0, launch=20000.0), pair())
    assert r.refusal is not None and r.refusal.rule == "LF-13", str(r)
    assert "fused 75.98 µs against 71.94 µs unfused per iteration of 998 points " \
        "(1.06x; 3 launches against 2; interior 996 points, strips 1 + 1)" in r.refusal.reason


def test_lf102_empty_pieces_launch_nothing() -> None:
    """LF-102: at n = 4 the interior is empty (both reads of i = 1 and i = 2 leave [1, 2]):
    the two strips run, two launches; at n = 3 one strip (i = 1), one launch. The program
    run agrees: its fused branch's non-empty loops are those."""
    for n, split, launches in ((4, (0, 1, 1), 2), (3, (0, 1, 0), 1)):
        text = pair(n)
        prog = parse_program(text, "s.sk")
        out, reps = fuse_program(prog, FusionOptions(threshold=1e300))
        plan = reps[-1].plan
        assert plan is not None
        p = predict(plan, "hand", row(point=1.0), {}, 0, declared_values(prog))
        assert p.fused_launches == launches and p.points == sum(split), n
        assert p.split == split, n
        assert _nonempty_fused_loops(out) == launches, n
        assert run_program(out).values["g"].tobytes() == run_program(prog).values["g"].tobytes()


def _nonempty_fused_loops(out: Program) -> int:
    """The parallel loops of the fused branch (the else of LF-15's test) that have points,
    their bounds evaluated by the interpreter's own arithmetic on the declared n."""
    from sarek_py.fusion.loops.predict import points

    [h] = [s for s in iter_host(out.body) if isinstance(s, HIf) and s.else_ is not None
           and any(isinstance(x, ParFor) for x in iter_host(s.then))]
    assert h.else_ is not None
    env = declared_values(out)
    got = [points(x, env) for x in iter_host(h.else_) if isinstance(x, ParFor)]
    assert None not in got
    return sum(1 for k in got if k)


# ------------------------------------------------------------------------- LF-103


def test_lf103_opt_notes_say_the_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """LF-103, LF-67: `opt --notes` on a split pair says the pieces' total, their launches
    and their points; with the sizes unknown, the interior nest's ns per point and every
    piece's launch."""
    from sarek_py.cli.main import main

    monkeypatch.setitem(cost_table.TABLE, "opencl", row(byte=1.0, branch=40.0))
    src = tmp_path / "pair.sk"
    src.write_text(pair())
    assert main(["opt", str(src), "--notes", "--backend", "opencl"]) == 0
    _, err = capsys.readouterr()
    assert "predicted on opencl: fused 15.98 µs against 31.94 µs unfused per iteration of " \
        "998 points (0.50x; 3 launches against 2; interior 996 points, strips 1 + 1)" in err, err
    src.write_text(pair(assigned=True))
    assert main(["opt", str(src), "--notes", "--backend", "opencl"]) == 0
    _, err = capsys.readouterr()
    assert "predicted on opencl: fused 16 ns per point against 32 ns unfused (0.50x; " \
        "3 launches against 2; per point of the interior nest)" in err, err


def test_lf103_without_a_box_one_loop_priced_with_its_test() -> None:
    """LF-103: FusionOptions(split=False) keeps the test in the loop (LF-88): one loop, one
    launch, every point at the interior branch plus the test (a branch at 40 ns: 998 * 40
    = 39920 against 31936: refused), and the note names no piece."""
    r = on_hand(row(byte=1.0, branch=40.0), pair(), split=False)
    assert r.refusal is not None and r.refusal.rule == "LF-13", str(r)
    assert "fused 39.92 µs against 31.94 µs unfused per iteration of 998 points (1.25x; " \
        "1 launch against 2); --fusion-threshold" in r.refusal.reason, r.refusal.reason
    assert "interior" not in r.refusal.reason


def test_lf100_lf103_every_rule_is_cited() -> None:
    """Every rule LF-100..LF-103 that specs/loop-fusion.md defines is cited by a test of
    this file."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 100, 103)


def test_lf100_counts_of_the_unfused_side_are_the_loops() -> None:
    """LF-100: the unfused side is LF-62's: the producer's and the consumer's loops over
    their points (here equal), two launches."""
    r1 = row(point=1.0, load=1.0, launch=7.0)
    text = pair()
    prog = parse_program(text, "s.sk")
    _, reps = fuse_program(prog, FusionOptions(threshold=1e300))
    plan = reps[-1].plan
    assert plan is not None
    p = predict(plan, "hand", r1, {}, 0, declared_values(prog))
    per = (1 + count(plan.producer.body)["load"]) + (1 + count(plan.consumer.body)["load"])
    assert p.unfused_launches == 2 and math.isclose(p.total(False), 998 * per + 14)
