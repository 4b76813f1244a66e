"""The cost model's agreement with the sweep (specs/loop-fusion.md, LF-81..LF-83; issue
15, H6): the sweep's shorter run runs a fused step (LF-81, on the reference backend's
transfer counts), common subexpressions counted once (LF-82, on hand-checked bodies, the
fused loop of a recomputed stencil and the calibration's loops), and the sweep's figure
of how close the predicted ratios are (LF-83). No timing here.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import ModuleType

import pytest
from benchmark_module import load_benchmark
from rule_citations import assert_rules_cited

from sarek_py.fusion.loops.cost_counts import count
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.fusion.loops.predict import fused_counts
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.host.program import ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.nodes import Binary, Cast, Cond, Intrinsic, Read, Unary
from sarek_py.ir.visit import children
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent


def _bench(name: str) -> ModuleType:
    return load_benchmark(name, "agreement")


def loops(p: Program) -> list[ParFor]:
    return [s for s in iter_host(p.body) if isinstance(s, ParFor)]


def ops(body: str) -> dict[str, float]:
    text = ("program c\n  var n : i32 = 10;\n  var x : f64[0:] allocatable;\n"
            "  var y : f64[0:] allocatable;\nbegin\n  allocate x[0:n]; allocate y[0:n];\n"
            f"  parallel for (i = 1 to n - 1) do {body} done\nend\n")
    return count(loops(parse_program(text))[0].body).as_dict()


# ------------------------------------------------------------------------- LF-81


def _renamed_case(sweep: ModuleType, dims: int) -> object:
    rng = random.Random(3)
    while True:
        case = sweep.make_case(rng)
        if case.jacobi and case.dims == dims:
            return case


@pytest.mark.parametrize("dims,n", [(1, 40), (2, 12)])
def test_lf81_the_shorter_run_runs_the_fused_step_so_per_run_costs_cancel(
        dims: int, n: int) -> None:
    """LF-81: a renamed pair's fused program run for T1 = FIRST_STEPS steps and for more
    steps moves, zeroes and allocates the same bytes (its costs per run cancel in the
    difference of LF-78); only its launches grow, two per step. With T1 = 1 the fused
    loop never ran in T1 and the renamed array's copy was allocated, zeroed and copied
    only in the longer run."""
    sweep = _bench("cost_sweep")
    case = _renamed_case(sweep, dims)
    be = get_backend("interp")
    per_run = []
    launches = []
    for steps in (sweep.FIRST_STEPS, sweep.FIRST_STEPS + 3):
        prog, reps = fuse_program(parse_program(case.text(n, steps), "sweep.sk"),
                                  FusionOptions(threshold=1e300))
        assert reps[-1].fused and reps[-1].plan is not None and reps[-1].plan.renamed
        be.stats.reset()
        run_program(offload(prog), device=be, check_races=False)
        s = be.stats
        per_run.append((s.bytes_in, s.bytes_out, s.bytes_zeroed, s.bytes_allocated))
        launches.append(s.launches)
    assert per_run[0] == per_run[1], per_run
    assert per_run[0][2] > 0            # the copy is zeroed in T1's run too
    assert launches[1] - launches[0] == 2 * 3


# ------------------------------------------------------------------------- LF-82


def test_lf82_a_repeated_operation_counts_once() -> None:
    """LF-82: the same operation on the same operands in one expression counts once, reads
    compared by their linear subscripts; a transcendental too."""
    c = ops("y[i] <- x[i] * 0.5 + x[i] * 0.5 + x[i - 1 + 1] * 0.5")
    assert (c["f64_op"], c["load"]) == (3, 1)       # one product, two sums
    c = ops("y[i] <- sin(x[i] * 0.5) + sin(x[i] * 0.5)")
    assert (c["f64_op"], c["f64_transc"]) == (2, 1)
    c = ops("y[i] <- x[i] / 1.5 + x[i + 1] / 1.5 + x[i] / 1.5")
    assert (c["f64_div"], c["f64_op"]) == (2, 2)


def test_lf82_different_values_and_statements_are_not_merged() -> None:
    """LF-82: a literal's sign keeps two operations apart (IR-31: 0.0 is not -0.0),
    different operands or operators are apart, and two statements are never merged."""
    assert ops("y[i] <- x[i] * 0.0 + x[i] * -0.0")["f64_op"] >= 3
    assert ops("y[i] <- x[i] * 0.5 + x[i] + 0.5")["f64_op"] == 3
    assert ops("y[i] <- x[i] * 0.5 + x[i + 1] * 0.5")["f64_op"] == 3
    c = ops("(y[i] <- x[i] * 0.5; y[i] <- x[i] * 0.5)")
    assert (c["f64_op"], c["load"]) == (2, 1)


STENCIL = """
program p
  var n : i32 = 1000;
  var u : f64[0:] allocatable;
  var f : f64[0:] allocatable;
  var g : f64[0:] allocatable;
begin
  allocate u[0:n - 1]; allocate f[0:n - 1]; allocate g[0:n - 1];
  for t = 1 to 10 do
    parallel for (i = 0 to n - 2) do f[i] <- u[i] * 2.0 + u[i + 1] * 2.0 done;
    parallel for (i = 1 to n - 2) do g[i] <- f[i - 1] + f[i] done
  done
end
"""


def test_lf82_a_recomputed_producer_shares_its_overlapping_terms() -> None:
    """LF-82: fused, the consumer reads the producer at i - 1 and i; both multiply u[i]
    by 2.0, computed once: 3 products and 3 sums, not 4 and 3."""
    _, reps = fuse_program(parse_program(STENCIL, "p.sk"), FusionOptions(threshold=1e300))
    plan = reps[-1].plan
    assert reps[-1].fused and plan is not None
    c = fused_counts(plan, {})
    assert (c["f64_op"], c["load"]) == (6, 3)
    assert count(plan.producer.body)["f64_op"] == 3


def _tree_ops(node: object) -> int:
    """Every operator node of a loop body, merged or not, subscripts apart (address
    arithmetic, LF-61): an independent count."""
    if isinstance(node, Read):
        return 0
    own = isinstance(node, Binary | Unary | Cast | Cond | Intrinsic)
    return own + sum(_tree_ops(c) for c in children(node)  # type: ignore[arg-type]
                     if not isinstance(c, (str, int, float, bool)) and c is not None)


def test_lf82_the_calibration_loops_repeat_nothing() -> None:
    """LF-82: the calibration's loops have no common subexpression, so their counts -- and
    the rows fitted on them -- are those of LF-61 without the merging."""
    cal = _bench("calibrate")
    for name, body in cal.LOOPS.items():
        loop = cal.loop_of(cal.program(body, 64, 1))
        c = count(loop.body)
        merged_kinds = sum(v for k, v in c.as_dict().items()
                           if k not in ("point", "byte", "load", "branch"))
        assert merged_kinds == _tree_ops(loop.body), name


# ------------------------------------------------------------------------- LF-83


def test_lf83_the_geometric_mean_of_predicted_over_measured() -> None:
    """LF-83: the sweep's summary says the geometric mean of predicted / measured ratios and
    how far they lie from 1 on average (either way)."""
    sweep = _bench("cost_sweep")
    t = sweep.Tally()
    t.add(sweep.Measure(1.0, 0.5, 0.01, 0.01, True), True, None, 1.0)    # predicted 2x high
    t.add(sweep.Measure(1.0, 2.0, 0.01, 0.01, True), False, None, 1.0)   # 2x low
    t.add(sweep.Measure(1.0, 0.8, 0.01, 0.01, True), True, None, None)   # no prediction
    assert len(t.log_errors) == 2
    line = t.summary(False)[-1]
    assert line == ("predicted / measured ratio: geometric mean 1.00, off by a factor 2.00 "
                    "on average (either way)")
    assert math.isclose(math.exp(sum(map(abs, t.log_errors)) / 2), 2.0)


def test_lf81_lf83_every_rule_is_cited() -> None:
    """Every rule LF-81..LF-84 that specs/loop-fusion.md defines is cited by a test of
    this file."""
    assert_rules_cited(__file__, "loop-fusion", "LF", 81, 84, gaps=(84,))
