"""Red-team cases for producer-consumer loop fusion and ping-pong (specs/loop-fusion.md
LF-*, specs/ping-pong.md PP-*).

Each case is a host program; the promise under attack: the pair is refused with a rule id,
or the fused program (with and without ping-pong) leaves bitwise the same final values as
the original on the host interpreter. Each case names the rule it exercises.
"""

from __future__ import annotations

import numpy as np
import pytest

from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.ir.host.program import Program
from sarek_py.ir.host.text import parse_program

HELPERS = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
"""
DECLS = """
  var n : i32 = 8; var nt : i32 = 3; var s : f64; var k : i32; var m : i32 = 8;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable; var g : f64[0:] allocatable;
  var w : f64[0:] allocatable target; var p : f64[0:] pointer;
"""
INIT = ("allocate u[0:n + 1]; allocate f[0:n + 1]; allocate g[0:n + 1]; allocate w[0:n + 1];"
        "parallel for (i = 0 to n + 1) do u[i] <- f64((i * 5) % 7) - 2.5 done; k := 0;"
        "parallel for (i = 0 to n + 1) do w[i] <- f64((i * 3) % 5) - 1.5 done; k := 0;"
        "parallel for (i = 0 to n + 1) do f[i] <- 0.0 / 0.0 done; k := 0;"
        "parallel for (i = 0 to n + 1) do g[i] <- 0.0 / 0.0 done; k := 0;")


def program(body: str, *, pre: str = "", decls: str = "", loop: str = "for t = 1 to nt do"
            ) -> Program:
    text = (f"{HELPERS}\nprogram t\n{DECLS}{decls}\nbegin\n{INIT}{pre}\n{loop}\n{body}\ndone"
            "\nend\n")
    return parse_program(text)


def outcome(prog: Program) -> str | None:
    """``None`` when fused (checked bitwise equal, with and without ping-pong), else the
    rule of the refusal of the first pair (a loop after a fused pair is the next pair,
    LF-73: refused here, with its own rule)."""
    ref = run_program(prog)
    rule: str | None = None
    for swap in (False, True):
        fused, reports = fuse_program(prog, FusionOptions(swap=swap))
        r, *rest = reports
        assert all(x.refusal is not None for x in rest), [str(x) for x in rest]
        if r.refusal is not None:
            assert fused is prog
            rule = r.refusal.rule
            continue
        got = run_program(fused)
        for name, va in ref.values.items():
            vb = got.values[name]
            assert np.asarray(va).tobytes() == np.asarray(vb).tobytes(), (name, swap)
        assert ref.output == got.output and ref.stop_code == got.stop_code
    return rule


PROD = "parallel for (i = 0 to n) do f[i] <- avg(u[i], u[i + 1]) done"


def test_lf14_baseline() -> None:
    """LF-14: the harness fuses the plain pair and compares."""
    assert outcome(program(PROD + "; parallel for (i = 1 to n) do "
                           "g[i] <- f[i] - f[i - 1] done")) is None


@pytest.mark.parametrize("cons,rule", [
    ("g[i] <- f[i + 1]", None),            # past the producer's end: run-time check (LF-8)
    ("if i < n then g[i] <- f[i + 1]", None),              # guarded: inside
    ("if i <= n then g[i] <- f[i + 1]", None),
    ("if i >= 2 then g[i] <- f[i - 2]", None),
    ("let j = i - 1 in g[i] <- f[j]", None),               # through a let
    ("let mut j = i in (j := j + 1; g[i] <- f[j - 1])", "LF-6"),  # through a mutable
    ("g[i] <- f[n - i]", None),
    ("if 2 * i >= n then g[i] <- f[2 * i - n]", None),
    ("if i < n then g[i] <- f[i + 1] + f[i - 1] + f[i] * f[n - i]", None),
])
def test_lf6_lf7_consumer_read_offsets(cons: str, rule: str | None) -> None:
    """LF-6/LF-7: reads of the intermediate outside the producer's bounds are refused;
    affine reads inside (also through lets) fuse and are equal."""
    assert outcome(program(PROD + f"; parallel for (i = 1 to n) do {cons} done")) == rule


@pytest.mark.parametrize("prod,rule", [
    ("if i >= 2 then f[i] <- u[i]", None),      # reads f[1] as stored (LF-50)
    ("if i >= 1 then f[i] <- u[i] else f[i] <- 1.0", "LF-2"),  # a test with an else
    ("if u[i] > 0.0 then f[i] <- u[i]", "LF-7"),             # a data-dependent test
    ("(f[i] <- u[i]; f[i] <- 2.0)", "LF-2"),                 # stored twice
    ("f[n - i] <- u[i]", "LF-2"),                            # another element
    ("let v = u[i] in f[i] <- v", "LF-2"),
])
def test_lf2_lf7_producer_shapes(prod: str, rule: str) -> None:
    """LF-2/LF-7/LF-50: producers with else, data tests, double stores, other elements."""
    assert outcome(program(f"parallel for (i = 0 to n) do {prod} done; "
                           "parallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] done")) == rule


def test_lf9_renamed_array_read_by_other_iterations() -> None:
    """LF-9: the producer reads u at i+1, the consumer overwrites u at i: u is renamed and
    the result equal (other iterations read the old u)."""
    assert outcome(program(PROD + "; parallel for (i = 1 to n) do "
                           "u[i] <- u[i] + f[i] - f[i - 1] done")) is None


def test_lf9_renamed_array_read_after_write_by_consumer() -> None:
    """LF-9: ... refused when the consumer reads u after writing it."""
    assert outcome(program(PROD + "; parallel for (i = 1 to n) do "
                           "(u[i] <- f[i]; g[i] <- u[i] + f[i - 1]) done")) == "LF-9"


def test_lf4_producer_reads_through_a_pointer_what_consumer_writes() -> None:
    """LF-3/LF-4: the producer reads w through the pointer p while the consumer writes w:
    renaming by name would miss it. A fused iteration i would read w[i + 1] after (or
    while) iteration i + 1 overwrote it."""
    body = ("parallel for (i = 0 to n) do f[i] <- p[i] + p[i + 1] done; "
            "parallel for (i = 1 to n) do w[i] <- f[i] - f[i - 1] done")
    got = outcome(program(body, pre="p => w;"))
    assert got == "LF-4"


def test_lf4_consumer_writes_through_a_pointer_what_producer_reads() -> None:
    """LF-4: the converse: the consumer writes through p, the producer reads w."""
    body = ("parallel for (i = 0 to n) do f[i] <- w[i] + w[i + 1] done; "
            "parallel for (i = 1 to n) do p[i] <- f[i] - f[i - 1] done")
    got = outcome(program(body, pre="p => w;"))
    assert got == "LF-4"


def test_lf15_last_iteration_rule() -> None:
    """LF-15: after the chain the intermediate holds the producer's values (the last
    iteration runs the original loops), also when nt changes inside the loop."""
    body = (PROD + "; parallel for (i = 1 to n) do u[i] <- u[i] + f[i] - f[i - 1] done; "
            "nt := nt - 1")
    assert outcome(program(body)) is None
    assert outcome(program(body, pre="nt := 0;")) is None
    assert outcome(program(body, pre="nt := 1;")) is None


def test_lf10_lf15_loop_variable_assigned_in_the_loop() -> None:
    """LF-10/LF-15: a chain loop whose body assigns its variable cannot rely on
    ``t == end`` to find its last iteration: here the last iteration sets t to 0 first,
    ran fused, and left f unfilled. Refused; an inner loop assigning t ends the chain
    there (the inner loop still fuses)."""
    cons = "parallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] done"
    assert outcome(program(f"if t == nt then t := 0; {PROD}; {cons}")) == "LF-10"
    assert outcome(program(f"if t == 1 then t := nt; {PROD}; {cons}")) == "LF-10"
    prog = program(f"(for e = 1 to 2 do ({PROD}; {cons}) done; if t == nt then t := 0)")
    fused, reports = fuse_program(prog)
    [r] = reports
    assert r.plan is not None and [lp.var.name for lp in r.plan.chain] == ["e"]
    assert outcome(prog) is None


def test_lf12_intermediate_read_elsewhere_in_the_loop() -> None:
    """LF-12: another statement of the chain loop reads the intermediate."""
    body = (PROD + "; parallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] done; "
            "s := s + f[3]")
    assert outcome(program(body)) == "LF-12"


@pytest.mark.parametrize("extra,rule", [
    ("s := s + u[2]", None),                  # read elsewhere: copy-back kept (PP-2)
    ("u[0] <- s", None),                      # written elsewhere
    ("parallel for (i = 0 to n) do g[i] <- u[i] done", None),
])
def test_pp2_renamed_array_used_elsewhere_in_the_loop(extra: str, rule: str | None) -> None:
    """PP-2: a renamed array read or written by another statement of the loop: ping-pong
    must not apply (the array would hold the copy's values in alternate iterations)."""
    body = (PROD + "; parallel for (i = 1 to n) do u[i] <- u[i] + f[i] - f[i - 1] done; "
            + extra)
    assert outcome(program(body)) == rule


def test_pp3_consumer_bounds_change_between_iterations() -> None:
    """PP-3: consumer bounds read a variable assigned in the loop: ping-pong would leave
    elements of the copy stale; copy-back must be kept."""
    body = ("parallel for (i = 0 to n) do f[i] <- avg(u[i], u[i + 1]) done; "
            "parallel for (i = 1 to m) do u[i] <- u[i] + f[i] - f[i - 1] done; m := m - 2")
    assert outcome(program(body)) is None


def test_lf6_consumer_stop_refused() -> None:
    """LF-6: a consumer that may stop."""
    body = PROD + "; parallel for (i = 1 to n) do (if f[i] > 100.0 then stop 3; g[i] <- f[i]) done"
    assert outcome(program(body)) == "LF-6"


RENAMING = (PROD + "; parallel for (i = 1 to n) do u[i] <- u[i] + f[i] - f[i - 1] done")


@pytest.mark.parametrize("loop,tail", [
    ("for e = 1 to 2 do (for t = 1 to nt do", "done; s := s + u[1]; u[2] <- s)"),
    ("for e = 1 to 3 do (for t = 1 to e do", "done; u[n] <- u[1] * 0.5)"),
    ("for e = 1 to 2 do (u[1] <- 0.25; for t = 1 to nt do", "done)"),
])
def test_pp4_pp5_chain_inside_a_loop_that_uses_the_array(loop: str, tail: str) -> None:
    """PP-4/PP-5: the chain's outermost loop is itself inside a loop whose other
    statements read and write the renamed array between executions of the chain (the copy
    must be made equal again before each), and whose trip count varies."""
    text = (f"{HELPERS}\nprogram t\n{DECLS}\nbegin\n{INIT}\n{loop}\n{RENAMING}\n{tail}\ndone"
            "\nend\n")
    assert outcome(parse_program(text)) is None


def test_pp6_nested_chain_with_run_time_check() -> None:
    """PP-6/LF-8: a two-loop chain, a renamed array and a consumer reading past the
    producer's bounds (run-time check); with f allocated larger, the check fails every
    time and the original loops run (restoring from the copy first when needed)."""
    cons = "parallel for (i = 1 to n) do u[i] <- u[i] + f[i + 1] - f[i - 1] done"
    for alloc in ("", "deallocate f; allocate f[0:n + 4]; k := 0;"):
        prog = program(f"for e = 1 to 2 do ({PROD}; {cons}) done", pre=alloc)
        assert outcome(prog) is None


FILLED = ("parallel for (i = 0 to n + 1) do f[i] <- 5.0 done; k := 0;"
          "parallel for (i = 0 to n + 1) do g[i] <- 0.0 done; k := 0;")


@pytest.mark.parametrize("prod_hi,cons_hi,rule", [
    ("n + 1", "n - i32(f[0])", "LF-6"),     # consumer bounds read the intermediate
    ("i32(f[1]) + n - 4", "n", "LF-3"),     # producer bounds read its own array: the
    # run-time check (LF-8) would pass on the stale f[1] = 5 while the original producer,
    # reading its fresh f[1] = 2, writes fewer elements
    ("n + 1", "n", None),
])
def test_lf3_lf6_bounds_read_the_intermediate(prod_hi: str, cons_hi: str,
                                              rule: str | None) -> None:
    """LF-3/LF-6: loop bounds that read an intermediate would see a stale value in the
    fused program (the fused loop does not fill it): the consumer accumulated over a
    different range before the fix."""
    body = (f"parallel for (i = 0 to {prod_hi}) do f[i] <- f64(i * 2) done; "
            f"parallel for (i = 1 to {cons_hi}) do g[i] <- g[i] + f[i] done")
    assert outcome(program(body, pre=FILLED)) == rule


WRAP_PRE = ("deallocate f; allocate f[0:n + 6]; deallocate u; allocate u[0:n + 7]; k := 0;"
            "parallel for (i = 0 to n + 7) do u[i] <- f64(i) done; k := 0;"
            "parallel for (i = 0 to n + 6) do f[i] <- 7.0 done; k := 0;"
            "parallel for (i = 0 to n + 1) do g[i] <- 0.0 done; k := 0;")


@pytest.mark.parametrize("prod,cons,rule", [
    # a consumer condition the exact analysis finds infeasible, true on the device for
    # i >= 1: the read f[i + 5] lies outside the producer's bounds
    ("parallel for (i = 0 to n) do f[i] <- u[i] + u[i + 1] done",
     "parallel for (i = 1 to n) do if i + 2147483647 < 0 then g[i] <- g[i] + f[i + 5] "
     "else g[i] <- g[i] + f[i] done", "LF-7"),
    # a producer test true for all i exactly, for i = 0 only on the device
    ("parallel for (i = 0 to n + 6) do if i + 2147483647 >= 2147483647 then "
     "f[i] <- u[i] done",
     "parallel for (i = 1 to n) do g[i] <- g[i] + f[i] done", "LF-7"),
    # producer bounds that wrap to a negative end: the producer writes nothing
    ("parallel for (i = 0 to n + 2147483647) do f[i] <- u[i] done",
     "parallel for (i = 1 to n) do g[i] <- g[i] + f[i] done", "LF-7"),
    # a subscript through a wrapping let
    ("parallel for (i = 0 to n) do f[i] <- u[i] done",
     "parallel for (i = 1 to n) do let j = i * 65536 * 65536 + i in "
     "g[i] <- g[i] + f[j] done", "LF-7"),
    # n + 1, i + 1 may wrap only for n near 2**31: fused under a host test (AFF-17)
    ("parallel for (i = 0 to n + 1) do f[i] <- u[i] done",
     "parallel for (i = 1 to n) do g[i] <- g[i] + f[i + 1] done", None),
])
def test_lf7_aff17_wrapping_arithmetic(prod: str, cons: str, rule: str | None) -> None:
    """LF-7/AFF-17: the affine analysis takes integers to be exact, the interpreter wraps;
    a proof relying on an expression that may wrap is refused (the first case fused and
    accumulated different values into g before the fix)."""
    assert outcome(program(f"{prod}; {cons}", pre=WRAP_PRE)) == rule


def test_aff17_wrap_risk_and_bound_check() -> None:
    """AFF-17: ``wrap_risk`` finds the subexpression that may leave its type, from what is
    known and the atoms' ranges; ``bound_check`` is the host test of the atoms' bound."""
    from sarek_py.analysis.affine.queries import AffineCtx, AffineForm, ge0
    from sarek_py.analysis.affine.wrap import WRAP_BOUND, bound_check, wrap_risk
    from sarek_py.ir.nodes import Binary, BinaryOp, Const, Ref, var
    from sarek_py.ir.printer import print_expr
    from sarek_py.ir.types import Scalar

    i, n = var("i", Scalar.I32), var("n", Scalar.I32, mutable=True)
    ctx = AffineCtx(indices=frozenset({i}), invariant=frozenset({n}))
    fi, fn = AffineForm.of_atom(Ref(i)), AffineForm.of_atom(Ref(n))
    box = [ge0(fi), ge0(fn - fi)]  # 0 <= i <= n

    def c(k: int) -> Const:
        return Const(k, Scalar.I32)

    plus1 = Binary(BinaryOp.ADD, Ref(i), c(1))
    big = Binary(BinaryOp.ADD, Ref(i), c(2147483647))
    minus1 = Binary(BinaryOp.SUB, Ref(i), c(1))
    assert wrap_risk([minus1], ctx, box) is None           # i - 1 >= -1
    assert wrap_risk([plus1], ctx, box) == plus1            # n may be 2**31 - 1
    assert wrap_risk([big], ctx, [ge0(fi), ge0(-fi + 10)]) == big
    host = lambda a: a == Ref(n)  # noqa: E731
    assert wrap_risk([plus1], ctx, box, host, WRAP_BOUND) is None
    assert wrap_risk([big], ctx, box, host, WRAP_BOUND) == big
    cmp = Binary(BinaryOp.LT, big, c(0))                    # inside a comparison too
    assert wrap_risk([cmp], ctx, [ge0(fi), ge0(-fi + 10)]) == big
    chk = bound_check([Ref(n)])
    assert chk is not None and print_expr(chk) == \
        f"i64(n) >= -{WRAP_BOUND}L && i64(n) <= {WRAP_BOUND}L"
    assert bound_check([]) is None


def test_lf7_aff17_host_test_added_only_when_needed() -> None:
    """LF-7/AFF-17: a pair whose expressions cannot wrap gets no host test; one with
    ``i + 1`` up to ``n + 1`` runs under the bound test."""
    plain = program(PROD + "; parallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] done")
    [r] = [x for x in fuse_program(plain)[1] if x.plan is not None]
    assert r.plan is not None and r.plan.check is None
    bumped = program("parallel for (i = 0 to n + 1) do f[i] <- u[i] done; "
                     "parallel for (i = 1 to n) do g[i] <- f[i + 1] done", pre=WRAP_PRE)
    [r] = [x for x in fuse_program(bumped)[1] if x.plan is not None]
    assert r.plan is not None and r.plan.check is not None
    from sarek_py.ir.printer import print_expr

    assert "268435456L" in print_expr(r.plan.check)


def test_lf14_subscript_of_another_integer_type() -> None:
    """LF-14: an i64 subscript replacing the producer's i32 index is converted (the fused
    program failed to type-check before: ``i64 * i32``)."""
    body = ("parallel for (i = 0 to n) do f[i] <- f64(i * 2) + u[i] done; "
            "parallel for (i = 1 to n - 1) do g[i] <- f[i64(i) + 1L] * f[i] done")
    assert outcome(program(body)) is None


def test_lf7_two_dimensional_neighbours() -> None:
    """LF-7/LF-14/LF-50: a 2-D producer read at diagonal neighbours fuses and is equal;
    read beyond its rows the rows outside are read as stored (still equal)."""
    decls = "var a2 : f64[0:, 0:] allocatable; var b2 : f64[0:, 0:] allocatable;"
    pre = "allocate a2[0:n + 1, 0:n + 1]; allocate b2[0:n + 1, 0:n + 1]; k := 0;"
    prod = "parallel for (j = 0 to n + 1, i = 0 to n + 1) do a2[j, i] <- u[i] * f64(j) done"
    cons = ("parallel for (j = 1 to n, i = 1 to n) do "
            "b2[j, i] <- a2[j - 1, i + 1] + a2[j + 1, i - 1] done")
    assert outcome(program(f"{prod}; {cons}", pre=pre, decls=decls)) is None
    short = prod.replace("j = 0 to n + 1", "j = 1 to n + 1")
    # row 0 is read as stored (LF-50), and the result is still equal
    assert outcome(program(f"{short}; {cons}", pre=pre, decls=decls)) is None


def test_lf7_aff17_inner_loop_in_the_consumer() -> None:
    """LF-7/AFF-17: an inner loop variable of the consumer is bounded by its loop (not a
    host value: the host test must not name it)."""
    pre = "parallel for (i = 0 to n + 1) do g[i] <- 0.0 done; k := 0;"
    body = ("parallel for (i = 0 to n) do f[i] <- u[i] * 2.0 done; "
            "parallel for (i = 1 to n - 1) do for q = 0 to 1 do g[i] <- g[i] + f[i + q] "
            "done done")
    assert outcome(program(body, pre=pre)) is None
    wrapping = body.replace("f[i + q]", "f[i + q * 65536 * 65536]")
    assert outcome(program(wrapping, pre=pre)) == "LF-7"
