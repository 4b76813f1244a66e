"""Red-team of the one effect summary and the passes that use it (issue 11, items 1, 2, 6,
8; specs/effects.md EFF-*, specs/loop-fusion.md LF-9..LF-12, LF-17, LF-18,
specs/offload.md OFF-5, OFF-7, OFF-12).

Each case is a host program written as a hostile user would: procedures whose by-reference
array dummies are one array at the call, procedures naming program arrays, calls after
launches, pointers in loop bounds, ``return`` before a store, stops in helpers and
procedures, allocation, input/output with ``iostat`` in the time loop. Every case runs
unfused and after every pipeline of ``sarek-py opt`` (fuse, fuse+swap, offload,
fuse+swap+offload, offload+fuse+swap), each pass output re-parsed from its printed text, on
the host interpreter, the interpreter backend and OpenCL (where PoCL is installed); every
variable the program declares must have the same bytes, and the output and stop code must
be the same. An error at run time the unfused program does not raise is a failure too.
The harness is tests/adversarial_harness.py.
"""

from __future__ import annotations

import itertools

import pytest
from adversarial_harness import differences, fused_pairs, refusal_rules

HELPERS = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
fun put(x : f64[], k : i32, v : f64) : unit = x[k] <- v
fun get(x : f64[], k : i32) : f64 = return x[k]
fun put2(x : f64[], y : f64[], k : i32, v : f64) : unit = let _ = put(x, k, v + get(y, k)) in ()
fun hstop(a : f64, q : i32) : f64 = (if q == 2 then stop 4); return a
"""
DECLS = """
  var n : i32 = 8; var nt : i32 = 3; var s : f64; var k : i32; var j : i32;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable; var g : f64[0:] allocatable;
  var w : f64[0:] allocatable; var h : f64[0:] allocatable;
"""
INIT = ("allocate u[0:n + 1]; allocate f[0:n + 1]; allocate g[0:n + 1]; allocate w[0:n + 1];"
        "allocate h[0:n + 1];"
        "parallel for (i = 0 to n + 1) do u[i] <- f64((i * 5) % 7) - 2.5 done; k := 0;"
        "parallel for (i = 0 to n + 1) do w[i] <- f64((i * 3) % 5) - 1.5 done; s := 0.0;")
PRODUCER = "parallel for (i = 0 to n) do f[i] <- avg(u[i], u[i + 1]) done"
CONSUMER = "parallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] done"
RENAME = ("parallel for (i = 0 to n) do f[i] <- avg(u[i], u[i + 1]) done;\n"
          "parallel for (i = 1 to n) do u[i] <- f[i] - f[i - 1] done")
FLIP = "proc flip(x : f64[0:] inout, m : i32 in) = for j = 0 to m do x[j] <- 0.0 - x[j] done end"


def program(body: str, *, procs: str = "", pre: str = "", decls: str = "",
            loop: str = "for t = 1 to nt do") -> str:
    return (f"{HELPERS}\nprogram t\n{DECLS}{decls}\n{procs}\nbegin\n{INIT}{pre}\n{loop}\n"
            f"{body}\ndone\nend\n")


def same_everywhere(text: str) -> None:
    diffs = differences(text)
    assert not diffs, "\n".join(diffs)


# ------------------------------------------------- LF-17 in the chain loops of a procedure

RUN = """{helpers}
program t
{decls}
  {flip}
  proc run(a : f64[0:] inout, b : f64[0:] inout, m : i32 in)
    var c : f64[0:] allocatable; var d : f64[0:] allocatable; var e : f64[0:] allocatable;
    var r : f64;
  =
    allocate c[0:m + 1]; allocate d[0:m + 1]; allocate e[0:m + 1];
    for t = 1 to 3 do
{body}
    done;
    for q = 0 to m do b[q] <- b[q] + c[q] + d[q] + e[q] + r done
  end
begin
{init}
  {call}
end
"""


def run_program_text(body: str, call: str) -> str:
    return RUN.format(helpers=HELPERS, decls=DECLS, flip=FLIP.replace("flip", "flipx"),
                      body=body, init=INIT, call=call)


GUARD_A = ("parallel for (i = 0 to m) do c[i] <- f64(i + t); if a[i] > 0.0 then e[i] <- f64(t) "
           "done;\nparallel for (i = 1 to m) do d[i] <- c[i] - c[i - 1] done")
OTHERS_WRITING_B = {
    "parallel": "parallel for (i = 0 to m) do b[i] <- 0.0 - b[i] done",
    "store": "b[t] <- 0.0 - b[t]",
    "loop": "for q = 0 to m do b[q] <- 0.0 - b[q] done",
    "call": "call flipx(b, m)",
}


@pytest.mark.parametrize("other", sorted(OTHERS_WRITING_B))
def test_lf17_chain_writes_dummy_aliasing_producer_test(other: str) -> None:
    """Regression (LF-17, LF-11): in a procedure, the producer's test reads dummy `a`, and
    another statement of the time loop writes dummy `b`; `call run(u, u, n)` passes one
    array for both, so the test reads what the loop writes (the guarded `e` kept only the
    last iteration's stores: other bytes in u). Must be refused with LF-17."""
    text = run_program_text(f"{GUARD_A};\n{OTHERS_WRITING_B[other]}", "call run(u, u, n)")
    same_everywhere(text)
    assert refusal_rules(text)[:1] == ["LF-17"]


def test_lf17_chain_writes_program_array_aliasing_producer_test() -> None:
    """Regression (LF-17): the time loop writes program array `u` by name while the
    producer's test reads dummy `a`, to which the caller passes `u`."""
    text = run_program_text(f"{GUARD_A};\nparallel for (i = 0 to m) do u[i] <- 0.0 - u[i] done",
                            "call run(u, w, n)")
    same_everywhere(text)
    assert refusal_rules(text)[:1] == ["LF-17"]


def test_lf17_distinct_dummies_not_over_refused_in_program_body() -> None:
    """Not over-refused: the same shape in the program body (names are arrays) fuses."""
    text = program("parallel for (i = 0 to n) do f[i] <- f64(i + t); if u[i] > 0.0 then "
                   "h[i] <- f64(t) done;\nparallel for (i = 1 to n) do g[i] <- f[i] - f[i - 1] "
                   "done;\nparallel for (i = 0 to n) do w[i] <- 0.0 - w[i] done")
    same_everywhere(text)
    assert fused_pairs(text) >= 1


INTER_A = ("parallel for (i = 0 to m) do a[i] <- f64(i * t) done;\n"
           "parallel for (i = 1 to m) do d[i] <- a[i] - a[i - 1] done")
OTHERS_NAMING_B = {
    "scalar": "r := r + b[2]",
    "parallel": "parallel for (i = 0 to m) do e[i] <- e[i] + b[i] done",
    "call": "call flipx(b, m)",
    "loop": "for q = 0 to m do e[q] <- e[q] + b[q] done",
}


@pytest.mark.parametrize("other", sorted(OTHERS_NAMING_B))
@pytest.mark.parametrize("call", ["call run(u, u, n)", "global"])
def test_lf17_chain_names_dummy_aliasing_intermediate(other: str, call: str) -> None:
    """Regression (LF-17, LF-12): the intermediate is dummy `a` (or program array `f`),
    and another statement of the time loop names dummy `b`, one array with it at the call:
    the fused loop leaves the intermediate unfilled while that statement reads it (other
    bytes), or writes it under the fused loop. Must be refused with LF-17. Offloaded
    unfused, the read of `b` also lacked a sync (OFF-7: 'the host needs b')."""
    body = f"{INTER_A};\n{OTHERS_NAMING_B[other]}"
    if call == "global":
        text = run_program_text(body.replace("a[", "f["), "call run(w, f, n)")
    else:
        text = run_program_text(body, call)
    same_everywhere(text)
    assert refusal_rules(text)[:1] == ["LF-17"]


# --------------------------------------------------------------- LF-9: return before write


def test_lf9_consumer_returns_before_writing_renamed_array() -> None:
    """Regression (LF-9): the consumer's store of renamed `u` follows a kernel `return`:
    it is not on every path, and the copy-back wrote the copy's unwritten element over
    u[3]. Must be refused."""
    text = program("parallel for (i = 0 to n) do f[i] <- avg(u[i], u[i + 1]) done;\n"
                   "parallel for (i = 1 to n) do if i == 3 then return; u[i] <- f[i] - f[i - 1] "
                   "done")
    same_everywhere(text)
    assert refusal_rules(text)[:1] == ["LF-9"]


def test_lf9_consumer_return_without_renamed_array_still_fuses() -> None:
    """Not over-refused: a `return` in a consumer that writes no renamed array."""
    text = program(f"{PRODUCER};\nparallel for (i = 1 to n) do if i == 3 then return; "
                   "g[i] <- f[i] - f[i - 1] done")
    same_everywhere(text)
    assert fused_pairs(text) == 1


# -------------------------------------------------------------- OFF-7 / OFF-12 sync placement

OFF = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
program p
  var n : i32 = 6; var s : f64; var k : i32; var z : i32;
  var u : f64[1:] allocatable target; var v : f64[1:] allocatable; var q : f64[1:] pointer;
  proc two(x : f64[1:] inout, y : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do x[i] <- x[i] * 2.0 done;
    s := y[2]
  end
  proc three(x : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do x[i] <- x[i] * 2.0 done;
    s := u[2]
  end
  proc four(x : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do u[i] <- u[i] * 2.0 done;
    s := x[2]
  end
  proc five(x : f64[1:] inout, y : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do x[i] <- x[i] * 2.0 done;
    parallel for (i = 1 to i32(y[1])) do v[i] <- 3.0 done
  end
begin
  allocate u[n]; allocate v[n];
  parallel for (i = 1 to n) do u[i] <- f64(i) done;
  BODY;
  s := s + u[3] + v[2]
end
"""


@pytest.mark.parametrize("body", ["call two(u, u, n)", "call three(u, n)", "call four(u, n)",
                                  "call two(u, v, n)", "call four(v, n)"])
def test_off7_sync_in_procedure_for_dummy_aliasing_launched_array(body: str) -> None:
    """Regression (OFF-7, OFF-12): in a procedure, a launch writes dummy `x` (or program
    array `u`) and the host then reads dummy `y` (or `u`, or `x`), one array with it at
    the call: offloaded, the run failed with 'the host needs y, which a launch writes,
    before a sync waited for it'. Different arrays at the call still run."""
    same_everywhere(OFF.replace("BODY", body))


@pytest.mark.parametrize("body", [
    "parallel for (i = 1 to n) do u[i] <- 2.0 done; "
    "parallel for (i = 1 to i32(u[1])) do v[i] <- 1.0 done",
    "q => u; parallel for (i = 1 to n) do u[i] <- 2.0 done; "
    "parallel for (i = 1 to i32(q[1])) do v[i] <- 1.0 done",
    "parallel for (i = 1 to n) do u[i] <- 1.0 done; "
    "parallel for (i = i32(u[2]) to n) do v[i] <- 1.0 done",
    "call five(u, u, n)",
])
def test_off7_launch_bounds_read_pending_array(body: str) -> None:
    """Regression (OFF-7): a launch's bounds (thread count, lower bound, write-discard
    test) are evaluated on the host; when they read an element of an array a pending
    launch writes (directly, through a pointer, through a dummy that is one array with
    it), the host read the stale value: the second loop ran over other iterations (other
    bytes in v) with no error. A sync must come first."""
    same_everywhere(OFF.replace("BODY", body))


# ------------------------------------------------------- PP-2: ping-pong of a program array

SWAP_RUN = """{helpers}
program t
{decls}
  proc run(a : f64[0:] inout, b : f64[0:] inout, m : i32 in)
    var c : f64[0:] allocatable; var d : f64[0:] allocatable; var r : f64;
  =
    allocate c[0:m + 1]; allocate d[0:m + 1];
    for t = 1 to 3 do
      parallel for (i = 0 to m) do c[i] <- avg(u[i], u[i + 1]) done;
      parallel for (i = 1 to m) do u[i] <- c[i] - c[i - 1] done;
      {other}
    done;
    b[0] <- b[0] + r
  end
begin
{init}
  call run(w, u, n)
end
"""


@pytest.mark.parametrize("other", ["r := r + b[2]", "b[2] <- b[2] + 1.0",
                                   "parallel for (i = 0 to m) do d[i] <- d[i] + b[i] done"])
def test_pp2_other_statement_names_dummy_passed_as_renamed_array(other: str) -> None:
    """Regression (PP-2, EFF-11): in a procedure, the consumer writes program array `u`
    (renamed), and another statement of the time loop names dummy `b`, to which the caller
    passes `u`. Ping-pong leaves `u`'s latest values in the copy between fused runs, so
    that statement read or wrote the stale buffer (other bytes in u with fuse+swap). The
    swap must be refused (PP-2); fusion without it copies back before the statement."""
    text = SWAP_RUN.format(helpers=HELPERS, decls=DECLS, init=INIT, other=other)
    same_everywhere(text)


# ------------------------------------------------ EFF-10: a pointer associated with a dummy

ASSOC = "proc assoc2(x : f64[0:] inout) = q => x end"


@pytest.mark.parametrize("body", [
    # LF-4: the producer reads q, the consumer writes u, one array: the fused loop raced
    "parallel for (i = 0 to n) do f[i] <- avg(q[i], q[i + 1]) done;\n"
    "parallel for (i = 1 to n) do u[i] <- f[i] - f[i - 1] done",
    # OFF-7: the host reads q while a launch writing u is pending
    "parallel for (i = 0 to n) do u[i] <- u[i] + 1.0 done; s := s + q[2]",
])
def test_eff10_pointer_associated_with_dummy_aliases_the_actual(body: str) -> None:
    """Regression (EFF-10, LF-4, OFF-7): a procedure associates program pointer `q` with its
    dummy `x`, and the program passes `u`: `q` and `u` are one array, but only `q` and `x`
    were taken as aliased. Fused, the consumer's writes of `u` reached the producer's
    reads of `q` in other iterations (other bytes on OpenCL); offloaded, the read of `q`
    had no sync ('the host needs q'). The actual passed for such a dummy may change
    through another name too."""
    same_everywhere(program(body, decls="var q : f64[0:] pointer;", pre="call assoc2(u);",
                            procs=ASSOC))


def test_eff10_pointer_associated_with_dummy_through_two_calls() -> None:
    """Sibling: the association is two calls deep (`outer2(y)` passes `y` to `assoc2`)."""
    text = program("parallel for (i = 0 to n) do f[i] <- avg(q[i], q[i + 1]) done;\n"
                   "parallel for (i = 1 to n) do u[i] <- f[i] - f[i - 1] done",
                   decls="var q : f64[0:] pointer;", pre="call outer2(u);",
                   procs=f"{ASSOC}\nproc outer2(y : f64[0:] inout) = call assoc2(y) end")
    same_everywhere(text)
    assert refusal_rules(text)[:1] == ["LF-4"]


@pytest.mark.parametrize(("body", "assoc"), [
    # the intermediate f is read through q after the loops: fused, f was left unfilled
    (f"{PRODUCER};\n{CONSUMER};\ns := s + q[2]", "f"),
    # the renamed u is read through q: with ping-pong, q showed the stale buffer
    (f"{RENAME};\ns := s + q[2]", "u"),
])
def test_lf4_intermediate_or_renamed_associated_through_a_dummy(body: str,
                                                                assoc: str) -> None:
    """Regression (LF-4, EFF-10): the program associates pointer `q` with `f` (or `u`)
    only through a procedure's dummy (`call assoc2(f)`); LF-4 looked for `f` in pointer
    associations and declarations by itself and did not see it. Intermediate and renamed
    arrays must not be anything that may change through another name (the one EFF-10
    set)."""
    text = program(body, decls="var q : f64[0:] pointer;", pre=f"call assoc2({assoc});",
                   procs=ASSOC)
    same_everywhere(text)
    assert refusal_rules(text)[:1] == ["LF-4"]


def test_eff7_write_through_local_pointer_writes_the_dummy() -> None:
    """Regression (EFF-7, EFF-10): a procedure writes its dummy `x` only through its own
    pointer `lp => x`; the summary dropped the write (the pointer is a local), so a call
    `wr(u, n)` seemed to leave `u` alone. The passes held (the pointer association is a
    construct that ends a chain; the device residency checks each statement of the
    procedure), but the summary is what every pass asks."""
    from sarek_py.analysis.effects import proc_effects, stmt_effects
    from sarek_py.ir.host.program import CallProc, iter_host
    from sarek_py.ir.host.text import parse_program

    text = program("call wr(u, n)", procs="proc wr(x : f64[0:] inout, m : i32 in)\n"
                   "var lp : f64[0:] pointer; var lq : f64[0:] pointer;\n"
                   "= lp => x; lq => lp; lq[1] <- lq[1] + 5.0 end")
    p = parse_program(text)
    x = p.procedure("wr").params[0].var
    assert x in proc_effects(p, "wr").writes
    call = next(s for s in iter_host(p.body) if isinstance(s, CallProc))
    assert "u" in {v.name for v in stmt_effects(call, p).writes}
    same_everywhere(text)


SWAP_BOUND = """{helpers}
program t
{decls}
  proc dec(x : f64[0:] inout) = x[0] <- x[0] - 1.0 end
  proc run(a : f64[0:] inout, b : f64[0:] inout, m : i32 in)
    var c : f64[0:] allocatable; var d : f64[0:] allocatable;
  =
    allocate c[0:m]; allocate d[0:m + 1];
    for q = 0 to m do d[q] <- f64(q * q) done;
    for t = 1 to 3 do
      parallel for (i = 0 to m) do c[i] <- avg(d[i], d[i + 1]) done;
      parallel for (i = 1 to i32(a[0])) do d[i] <- c[i] - c[i - 1] done;
      {other}
    done;
    for q = 0 to m do b[q] <- d[q] done
  end
begin
{init}
  u[0] <- 7.0;
  {call}
end
"""


@pytest.mark.parametrize(("other", "call"), [
    ("b[0] <- b[0] - 1.0", "call run(u, u, n - 1)"),
    ("u[0] <- u[0] - 1.0", "call run(u, w, n - 1)"),
    ("call dec(b)", "call run(u, u, n - 1)"),
])
def test_pp3_consumer_bounds_read_dummy_the_loop_writes_as_another(other: str,
                                                                   call: str) -> None:
    """Regression (PP-3, EFF-11): in a procedure, the consumer's bound reads dummy `a`
    and the time loop writes dummy `b` (or program array `u`, or through a call), one
    array with `a` at the call: the consumer writes fewer elements each time, so the
    array and its copy stop agreeing, and ping-pong left d[7] at its first value (other
    bytes with fuse+swap). The swap must be refused."""
    same_everywhere(SWAP_BOUND.format(helpers=HELPERS, decls=DECLS, init=INIT, other=other,
                                      call=call))


# ------------------------------------------------------------------- the procedure grid

GRID_PROCS = """
  proc flipx(x : f64[0:] inout, m : i32 in) = for j = 0 to m do x[j] <- 0.0 - x[j] done end
  proc peek(x : f64[0:] in, y : f64 out) = y := x[2] end
"""
GRID_RUN = """{helpers}
program t
{decls}
{procs}
  proc run(a : f64[0:] inout, b : f64[0:] inout, m : i32 in)
    var c : f64[0:] allocatable; var d : f64[0:] allocatable; var e : f64[0:] allocatable;
    var r : f64;
  =
    allocate c[0:m + 1]; allocate d[0:m + 1]; allocate e[0:m + 1];
    for q = 0 to m + 1 do d[q] <- f64(q * q % 5) - 1.5 done;
    for t = 1 to 3 do
      {producer};
      {consumer}{other}
    done;
    for q = 0 to m do b[q] <- b[q] + c[q] + d[q] + e[q] + r done
  end
begin
{init}
  {call}
end
"""
#: producers: of intermediate c (reading d, reading dummy a, storing under a test of a,
#: bounded by a) or of dummy a itself
GRID_P = {
    "plain": "parallel for (i = 0 to m) do c[i] <- avg(d[i], d[i + 1]) + f64(t) done",
    "reads_a": "parallel for (i = 0 to m) do c[i] <- avg(a[i], a[i + 1]) done",
    "guard_a": "parallel for (i = 0 to m) do c[i] <- avg(d[i], d[i + 1]); if a[i] > 0.0 then "
               "e[i] <- f64(t) done",
    "bound_a": "parallel for (i = 0 to m - 2 + i32(a[0]) / 2) do c[i] <- avg(d[i], d[i + 1]) "
               "done",
    "writes_a": "parallel for (i = 0 to m) do a[i] <- f64(i * t) - 0.5 done",
}
#: consumers reading the intermediate X: writing local d (renamed when P reads d), dummy
#: b, program array u, or bounded by dummy a
GRID_C = {
    "d": "parallel for (i = 1 to m) do d[i] <- X[i] - X[i - 1] done",
    "b": "parallel for (i = 1 to m) do b[i] <- X[i] - X[i - 1] done",
    "u": "parallel for (i = 1 to m) do u[i] <- X[i] - X[i - 1] done",
    "bound_a": "parallel for (i = 1 to m - 2 + i32(a[0]) / 2) do d[i] <- X[i] - X[i - 1] done",
}
GRID_O = {
    "none": "",
    "store_b": "b[0] <- 0.0 - b[0]",
    "read_b": "r := r + b[2]",
    "call_b": "call flipx(b, m)",
    "par_u": "parallel for (i = 0 to m) do u[i] <- 0.0 - u[i] done",
    "peek_b": "call peek(b, r)",
    "par_read_b": "parallel for (i = 0 to m) do e[i] <- e[i] + b[i] done",
}
GRID_CALLS = ("call run(u, u, n - 1)", "call run(u, w, n - 1)", "call run(w, u, n - 1)")


def grid_programs() -> list[tuple[str, str]]:
    out = []
    for (pn, p), (cn, c), (on, o), call in itertools.product(
            GRID_P.items(), GRID_C.items(), GRID_O.items(), GRID_CALLS):
        if pn == "writes_a" and (cn == "b" and "run(u, u" in call
                                 or cn == "u" and "run(u," in call):
            continue  # the consumer reads a[i - 1] and writes it as b or u: a user's race
        c = c.replace("X", "a" if pn == "writes_a" else "c")
        text = GRID_RUN.format(helpers=HELPERS, decls=DECLS, procs=GRID_PROCS, producer=p,
                               consumer=c, other=f";\n      {o}" if o else "", init=INIT,
                               call=call)
        out.append((f"{pn}/{cn}/{on}/{call}", text))
    return out


def _grid(step: int, opencl: bool) -> tuple[int, int]:
    runs = fused = 0
    for name, text in grid_programs()[::step]:
        diffs = differences(text, opencl=opencl)
        assert not diffs, name + "\n" + "\n".join(diffs)
        runs += 1
        fused += fused_pairs(text) > 0
    return runs, fused


def test_lf17_pp2_pp3_off7_procedure_grid_sample() -> None:
    """LF-17, PP-2, PP-3, OFF-7 with EFF-11: producers reading, testing or bounded by a
    dummy (or writing it), consumers writing a local, a dummy or a program array, other
    statements of the time loop naming a dummy or program array (store, read, call,
    parallel loop), called with one array for both dummies or not: a sample of 10 of the
    399 programs (the 21 racy ones left out), every pipeline, host and interpreter
    backends and OpenCL (the full grid runs in make fuzz)."""
    runs, fused = _grid(40, True)
    assert runs == 10 and fused >= 2


@pytest.mark.slow
def test_lf17_pp2_pp3_off7_procedure_grid_full() -> None:
    """The full grid: 399 programs."""
    runs, _ = _grid(1, True)
    assert runs == 399


# --------------------------------------------------------- the offload sequence generator

SEQ = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
fun put(x : f64[1:], k : i32, v : f64) : unit = x[k] <- v
program p
  var n : i32 = 6; var s : f64; var z : i32;
  var u : f64[1:] allocatable target; var v : f64[1:] allocatable target;
  var q : f64[1:] pointer;
  proc two(x : f64[1:] inout, y : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do x[i] <- x[i] * 2.0 done;
    s := s + y[2]
  end
  proc five(x : f64[1:] inout, y : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do x[i] <- x[i] + 1.0 done;
    parallel for (i = 1 to i32(y[1]) % m + 1) do v[i] <- v[i] + 3.0 done
  end
  proc assoc2(x : f64[1:] inout) = q => x end
  proc peekq(m : i32 in) = s := s + q[2] + f64(m) end
  proc hput(x : f64[1:] inout, m : i32 in) =
    parallel for (i = 1 to m) do let _ = put(x, i, x[i] + 0.5) in () done
  end
begin
  allocate u[n]; allocate v[n];
  parallel for (i = 1 to n) do u[i] <- f64(i) done;
  parallel for (i = 1 to n) do v[i] <- f64(7 - i) done;
  q => u;
  BODY;
  s := s + u[3] + v[2] + q[1]
end
"""
SEQ_POOL = (
    "parallel for (i = 1 to n) do u[i] <- u[i] + f64(i) done",
    "parallel for (i = 1 to i32(q[2]) % n + 1) do v[i] <- v[i] * 0.5 done",
    "parallel for (i = 1 to n) do v[i] <- q[i] * 0.5 done",
    "parallel for (i = 1 to n) do q[i] <- q[i] + 1.0 done",
    "call two(u, u, n)", "call two(v, u, n)", "call five(v, u, n)", "call five(u, u, n)",
    "s := q[3]", "if q[1] > 2.0 then s := s + 1.0", "call assoc2(v)", "call assoc2(u)",
    "call peekq(n)", "call hput(q, n)", "for t = 1 to i32(q[1]) % 3 do s := s + 1.0 done",
    "write (unit = 6, iostat = z) q[2]",
)


def _sequences(count: int, opencl: bool) -> int:
    """Sequences of three statements: launches whose bounds or bodies read an array a
    launch writes (by name, through pointer `q`, re-associated by a call), procedures
    whose dummies are one array at the call, a procedure reading `q`, a helper writing
    through a dummy, `write` with `iostat`. Offloaded, each must run (no missing sync) and
    leave the host's bytes."""
    combos = list(itertools.product(SEQ_POOL, repeat=3))
    step = max(1, len(combos) // count)
    runs = 0
    for combo in combos[::step][:count]:
        diffs = differences(SEQ.replace("BODY", "; ".join(combo)), opencl=opencl,
                            pipelines=(("offload",),))
        assert not diffs, f"{combo}\n" + "\n".join(diffs)
        runs += 1
    return runs


def test_off7_off12_eff10_sequence_sample() -> None:
    """OFF-7, OFF-12, EFF-6, EFF-10, EFF-11: 32 of the 4096 sequences, with OpenCL (on
    the tree before the fixes, 743 of the 4096 failed on the host backends: stale launch
    bounds or 'the host needs …'; the full set runs in make fuzz)."""
    assert _sequences(32, True) == 32


@pytest.mark.slow
def test_off7_off12_eff10_sequence_full() -> None:
    assert _sequences(4096, True) == 4096


def test_eff2_recursive_procedures_through_the_passes() -> None:
    """EFF-2 through the passes: procedures `ra` and `rb` call each other (IR built
    directly; the text form refuses recursion). Called from the time loop, with a stop on
    the cycle or a program variable named on it, the summary ends, each member gets the
    cycle's effects, the pair is refused with the rule of what the cycle does, and the
    program, fused and offloaded, leaves the same bytes."""
    import attrs
    import numpy as np

    from sarek_py.analysis.effects import proc_effects
    from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
    from sarek_py.host.interp import run_program
    from sarek_py.host.offload import offload
    from sarek_py.ir.host.program import CallProc, HAssign, HIf, HStop, Program
    from sarek_py.ir.host.text import parse_program
    from sarek_py.ir.nodes import Binary, BinaryOp, Const, Ref
    from sarek_py.ir.types import Scalar
    from sarek_py.runtime.interp import InterpBackend

    procs = ("proc rb(x : f64[0:] inout, m : i32 in) = x[0] <- x[0] end\n"
             "proc ra(x : f64[0:] inout, m : i32 in) = "
             "if m > 0 then (x[m] <- x[m] + 1.0; call rb(x, m - 1)) end")
    text = program("parallel for (i = 0 to n) do f[i] <- avg(w[i], w[i + 1]); if u[i] > 0.0 "
                   f"then h[i] <- w[i] done;\n{CONSUMER};\ncall ra(u, 3)", procs=procs)
    base = parse_program(text)
    rb = base.procedure("rb")
    x, m = rb.params[0].var, rb.params[1].var
    rec = CallProc("ra", (Ref(x), Binary(BinaryOp.SUB, Ref(m), Const(1, Scalar.I32))))
    s = next(d.var for d in base.decls if d.var.name == "s")
    bodies = {"plain": (rec, "LF-11"),
              "stop": (HIf(Binary(BinaryOp.GT, Ref(m), Const(5, Scalar.I32)), HStop(3), rec),
                       "LF-10"),
              "global": (HIf(Binary(BinaryOp.GT, Ref(m), Const(0, Scalar.I32)),
                             HAssign(s, Const(1.0, Scalar.F64)), rec), "LF-12")}
    for name, (body, rule) in bodies.items():
        p: Program = attrs.evolve(base, procedures=tuple(
            attrs.evolve(q, body=body) if q.name == "rb" else q for q in base.procedures))
        ra, rb2 = proc_effects(p, "ra"), proc_effects(p, "rb")
        assert ra.calls == rb2.calls == {"ra", "rb"}, name
        assert ra.may_stop == rb2.may_stop == (name == "stop"), name
        assert ra.self_contained == (name != "global"), name
        out, reports = fuse_program(p, FusionOptions())
        assert reports[0].refusal is not None and reports[0].refusal.rule == rule, name
        ref = run_program(p)
        for got in (run_program(out), run_program(offload(p), device=InterpBackend())):
            for k, v in ref.values.items():
                assert np.asarray(v).tobytes() == np.asarray(got.values[k]).tobytes(), (name, k)
            assert ref.stop_code == got.stop_code
