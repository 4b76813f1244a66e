"""The one effect summary on its own (specs/effects.md, EFF-1..EFF-10)."""

from __future__ import annotations

import attrs
import pytest

from sarek_py.analysis.effects import (
    ProgramEffects,
    helper_effects,
    kernel_effects,
    may_alias,
    proc_effects,
    program_effects,
    stmt_effects,
)
from sarek_py.host.offload import offload
from sarek_py.host.residency import _stmt_arrays
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import Block, CallProc, HFor, ParFor, Program, iter_host
from sarek_py.ir.host.text import parse_program
from sarek_py.ir.nodes import Call, HelperFunc, Ref, Return, Seq, Stop, Var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.types import Scalar

HELPERS = """
fun put(x : f64[], k : i32, v : f64) : unit = x[k] <- v
fun get(x : f64[], k : i32) : f64 = return x[k]
fun swap_put(v : f64, y : f64[], x : f64[]) : unit = let _ = put(x, 0, get(y, 0) + v) in ()
fun halt(a : f64) : f64 = (if a > 1.0 then stop 9); return a
fun mid(a : f64) : f64 = return halt(a) * 2.0
pure fun sq(a : f64) : f64 = return a * a
fun tid(a : f64) : f64 = return a + f64(global_thread_id)
fun via_tid(a : f64) : f64 = return tid(a)
"""


def table() -> dict[str, HelperFunc]:
    return {h.name: h for h in parse_module(HELPERS).helpers}


def test_eff1_helper_reads_writes_through_calls() -> None:
    """EFF-1: array parameters read and written by position, through the helpers called
    (the arguments mapped: swap_put passes its x to put's x and its y to get's x)."""
    s = helper_effects(table().values())
    assert (s["put"].reads, s["put"].writes) == (frozenset(), frozenset({0}))
    assert (s["get"].reads, s["get"].writes) == (frozenset({0}), frozenset())
    assert (s["swap_put"].reads, s["swap_put"].writes) == (frozenset({1}), frozenset({2}))
    assert s["swap_put"].calls == {"put", "get"}


def test_eff1_stop_intrinsic_self_contained_transitive() -> None:
    """EFF-1: may-stop (with its codes), thread intrinsics and self-containedness follow
    the calls."""
    s = helper_effects(table().values())
    assert s["halt"].may_stop and s["mid"].may_stop and not s["sq"].may_stop
    assert s["mid"].stop_codes == {9}
    assert s["tid"].thread_intrinsic and s["via_tid"].thread_intrinsic
    assert not s["tid"].self_contained and not s["via_tid"].self_contained
    assert s["mid"].self_contained and s["swap_put"].self_contained


def test_eff1_unknown_callee_is_conservative() -> None:
    """EFF-1: a call of a function no table defines may read and write every array it is
    passed, stop and use thread intrinsics; the caller is not self-contained."""
    h = parse_module("fun w(x : f64[]) : f64 = return x[0]").helpers[0]
    x = h.params[0]
    body = Return(Call("nope", (Ref(x),), Scalar.F64))
    s = helper_effects([attrs.evolve(h, body=body)])["w"]
    assert s.reads == {0} and s.writes == {0}
    assert s.may_stop and s.thread_intrinsic and not s.self_contained
    assert s.unknown_calls == {"nope"}


def test_eff2_recursion_terminates_and_joins() -> None:
    """EFF-2: helpers on a call cycle (refused by the checker, built here directly): the
    fixpoint ends, each gets the other's effects, and knows it is on a cycle."""
    t = table()
    put = t["put"]
    x, k, v = put.params
    a_body = Seq((Return(Call("b", (Ref(x), Ref(k), Ref(v)), Scalar.UNIT)),))
    b_body = Seq((Stop(5), Return(Call("a", (Ref(x), Ref(k), Ref(v)), Scalar.UNIT))))
    a = attrs.evolve(put, name="a", body=Seq((a_body, put.body)))
    b = attrs.evolve(put, name="b", body=b_body)
    s = helper_effects([a, b])
    assert s["a"].on_cycle and s["b"].on_cycle
    assert s["a"].may_stop and s["a"].stop_codes == {5}
    assert s["b"].writes == {0}  # through a


def test_eff3_kernel_effects() -> None:
    """EFF-3: a body's arrays read and written, directly or through helpers, and the
    helpers through which it may stop (its own ``stop`` first)."""
    m = parse_module(HELPERS + """
kernel k(a : f64[], b : f64[], c : f64[]) =
  let i = global_thread_id in
  let _ = swap_put(1.0, a, b) in
  c[i] <- mid(a[i])
""")
    kern = m.kernels[0]
    e = kernel_effects(kern.body, helper_effects(m.helpers))
    names = {v.name for v in e.writes}, {v.name for v in e.reads}
    assert names == ({"b", "c"}, {"a"})
    assert e.stops == ("mid",) and e.stop_codes == {9}


PROG = HELPERS + """
program p
  var n : i32 = 4; var s : f64; var k : i32; var e : i32;
  var u : f64[1:] allocatable; var v : f64[1:] allocatable; var w : f64[1:] allocatable;
  var t : f64[1:] allocatable target; var q : f64[1:] pointer;
  proc rd(x : f64[1:] inout, r : f64 out) = r := x[1] end
  proc wr(x : f64[1:] inout, m : i32 in) var j : i32; = j := m; x[j] <- 1.0 end
  proc glob(m : i32 value) = s := u[1] + f64(m) end
  proc outer(m : i32 in) = call glob(m); call wr(v, m) end
  proc stops(m : i32 in) = if m > 2 then stop 4 end
  proc calls_stops(m : i32 in) = for j = 1 to m do call stops(j) done end
  proc talk(m : i32 in) = print m end
  proc ret(m : i32 inout) = if m > 0 then return; m := m + 1 end
begin
  allocate u[n]; allocate v[n]; allocate w[n]; allocate t[n]; q => t;
  s := s + 1.0;
  u[k] <- s;
  if s > 0.0 then k := 1 else v[1] <- 2.0;
  for j = 1 to n do (if j == 2 then break; s := s + 1.0) done;
  parallel for (i = 1 to n) local tmp : f64[2] do (tmp[1] <- u[i]; v[i] <- tmp[1]) done;
  parallel for (i = 1 to n) do let _ = put(w, i, halt(u[i])) in () done;
  call rd(u, s);
  call wr(v, n);
  call outer(n);
  call calls_stops(n);
  call talk(n);
  print s; write (iostat = e) s; read k;
  deallocate w;
  stop 3
end
"""


def prog() -> Program:
    return parse_program(PROG)


def names(vs: frozenset[Var]) -> set[str]:
    return {v.name for v in vs}


def test_eff4_every_statement_kind() -> None:
    """EFF-4, EFF-5: the host statements one by one."""
    p = prog()
    assert isinstance(p.body, Block)
    st = p.body.stmts
    e = [stmt_effects(s, p) for s in st]
    assert (names(e[5].writes), names(e[5].reads)) == ({"s"}, {"s"})
    assert (names(e[6].writes), names(e[6].reads)) == ({"u"}, {"k", "s"})
    assert names(e[7].writes) == {"k", "v"} and names(e[7].reads) == {"s"}
    assert isinstance(st[8], HFor) and not e[8].leaves and names(e[8].writes) == {"j", "s"}
    assert isinstance(st[9], ParFor) and names(e[9].writes) == {"v"}  # private tmp is not
    assert names(e[10].writes) == {"w"} and e[10].may_stop and e[10].helpers == {"put", "halt"}
    assert not e[9].may_stop
    # calls (EFF-8)
    assert names(e[11].writes) == {"s"} and names(e[11].reads) == {"u"}
    assert names(e[12].writes) == {"v"} and names(e[12].reads) == {"n"}
    assert names(e[13].writes) == {"s", "v"} and names(e[13].reads) >= {"u", "n"}
    assert e[13].calls == {"outer", "glob", "wr"}
    assert e[14].may_stop and e[14].calls == {"calls_stops", "stops"}
    assert e[15].io == {"print"} and not e[15].writes
    # output, input, deallocate, stop
    assert e[16].io == {"print"} and not e[16].constructs
    assert names(e[17].writes) == {"e"} and e[17].constructs == ("write with specifier 'iostat'",)
    assert names(e[18].writes) == {"k"} and e[18].io == {"read"}
    assert e[19].constructs == ("deallocate of 'w'",)
    assert e[20].may_stop
    assert e[4].constructs == ("pointer association",)
    whole = stmt_effects(p.body, p)
    assert whole.may_stop and whole.io == {"print", "write", "read"}


def test_eff4_leaves() -> None:
    """EFF-4: break/continue leave a statement unless a loop inside it catches them; a
    return always leaves."""
    p = parse_program("""
program p var k : i32;
begin
  for j = 1 to 3 do (if j == 2 then continue; k := j) done;
  if k > 1 then break;
  if k > 2 then return
end""")
    assert isinstance(p.body, Block)
    e = [stmt_effects(s, p) for s in p.body.stmts]
    assert not e[0].leaves and e[1].leaves == {"break"} and e[2].leaves == {"return"}


def test_eff7_procedure_summaries() -> None:
    """EFF-7: dummies and outside variables, not locals nor loop indices; transitive;
    self-contained as HP-6 says; a return leaves only the procedure."""
    p = prog()
    wr = proc_effects(p, "wr")
    assert names(wr.writes) == {"x"} and names(wr.reads) == {"m"} and wr.self_contained
    glob = proc_effects(p, "glob")
    assert names(glob.outer) == {"s", "u"} and not glob.self_contained
    outer = proc_effects(p, "outer")
    assert names(outer.outer) >= {"s", "u", "v"} and not outer.self_contained
    cs = proc_effects(p, "calls_stops")
    assert cs.may_stop and cs.self_contained and "j" not in names(cs.writes)
    assert proc_effects(p, "talk").io == {"print"}
    ret = proc_effects(p, "ret")
    assert not ret.may_stop and ret.self_contained


def test_eff8_reallocates_through_calls() -> None:
    """EFF-4, EFF-8: allocate, deallocate and pointer association change an allocation;
    a call changes its actual's when the procedure changes its dummy's."""
    p = parse_program("""
program p var n : i32 = 3; var u : f64[0:] allocatable; var v : f64[0:] allocatable;
  var t : f64[0:] allocatable target; var q : f64[0:] pointer;
  proc re(x : f64[0:] inout, m : i32 in) = deallocate x; allocate x[0:m] end
  proc keep(x : f64[0:] inout) = x[0] <- 1.0 end
  proc outer(x : f64[0:] inout) = call re(x, 2) end
begin
  allocate u[0:n]; allocate v[0:n]; allocate t[0:n]; q => t;
  call outer(u); call keep(v)
end""")
    assert isinstance(p.body, Block)
    e = [stmt_effects(s, p) for s in p.body.stmts]
    assert names(e[0].reallocates) == {"u"} and names(e[3].reallocates) == {"q"}
    assert names(e[4].reallocates) == {"u"} and not e[5].reallocates
    assert names(proc_effects(p, "outer").reallocates) == {"x"}


def test_eff7_recursive_procedures_terminate() -> None:
    """EFF-2, EFF-7: procedures calling each other in a cycle (the text form refuses it;
    built here directly): the fixpoint ends with each one's effects joined."""
    p = parse_program("""
program p var s : f64;
  proc a(m : i32 in) = s := 1.0 end
  proc b(m : i32 in) = stop 2 end
begin call a(1) end""")
    pa, pb = p.procedures
    pa2 = attrs.evolve(pa, body=Block((pa.body, CallProc("b", (Ref(pa.params[0].var),)))))
    pb2 = attrs.evolve(pb, body=Block((pb.body, CallProc("a", (Ref(pb.params[0].var),)))))
    q = attrs.evolve(p, procedures=(pa2, pb2))
    for name in ("a", "b"):
        e = proc_effects(q, name)
        assert e.may_stop and names(e.writes) == {"s"} and e.calls >= {"a", "b"}


def test_eff8_call_arguments_by_intent() -> None:
    """EFF-8: in/value scalars are read, out written, inout read and written; an array is
    read or written as its dummy is."""
    p = parse_program("""
program p var a : i32; var b : i32; var c : i32; var d : i32; var x : f64[3];
  proc f(i : i32 in, v : i32 value, o : i32 out, io : i32 inout, y : f64[3] inout) =
    o := i + v + y[1]
  end
begin call f(a, b + 1, c, d, x) end""")
    e = stmt_effects(p.body, p)
    assert names(e.reads) == {"a", "b", "d", "x"} and names(e.writes) == {"c", "d"}


def test_eff9_cached_per_object() -> None:
    """EFF-9: one summary per program object and per helper table."""
    p = prog()
    assert program_effects(p) is program_effects(p)
    assert isinstance(program_effects(p), ProgramEffects)
    hs = tuple(table().values())
    assert helper_effects(hs) is helper_effects(hs)
    assert stmt_effects(p.body, p) is stmt_effects(p.body, p)


def test_eff10_may_alias() -> None:
    p = prog()
    assert names(may_alias(p)) == {"t", "q"}


@pytest.mark.parametrize("body", [
    "call glob(n)", "call outer(n)", "call wr(v, n)", "call rd(u, s)", "call talk(n)",
    "call wr(u, n); call glob(n)",
])
def test_off12_residency_and_sync_placement_agree(body: str) -> None:
    """OFF-12: what the residency brings back before a call is what sync placement looked
    at (the arrays of the one summary), before and after the offload."""
    src = PROG.replace("""  call rd(u, s);""", f"""  parallel for (i = 1 to n) do u[i] <- 2.0 done;
  {body};""")
    p = parse_program(src)
    q = offload(p)
    seen = 0
    for s in iter_host(q.body):
        if isinstance(s, CallProc):
            arrays = {v for v, _ in _stmt_arrays(s, q).arrays}
            assert arrays == {v for v in stmt_effects(s, q).names if v.is_array}
            assert arrays == {v for v in stmt_effects(s, p).names if v.is_array}
            seen += 1
    assert seen >= 1
    assert any(isinstance(s, Launch) for s in iter_host(q.body))


def test_eff6_launch_and_sync() -> None:
    """EFF-6: a launch reads its arguments and bounds, writes the arrays its kernel writes
    (through helpers too) and its stop status, and may stop as its kernel may; a sync has
    no value effect."""
    p = parse_program(HELPERS + """
program p
  var n : i32 = 4; var u : f64[1:] allocatable; var w : f64[1:] allocatable;
begin
  allocate u[n]; allocate w[n];
  parallel for (i = 1 to n) do let _ = put(w, i, halt(u[i])) in () done
end""")
    q = offload(p)
    [launch] = [s for s in iter_host(q.body) if isinstance(s, Launch)]
    e = stmt_effects(launch, q)
    assert launch.stop_status is not None
    assert names(e.writes) == {"w", launch.stop_status.name} and e.may_stop
    assert names(e.reads) >= {"u", "w", "n"} and e.constructs == ("launch",)
    assert launch.stop_replay and {s.code for s in launch.stop_replay} == {9}
    [sync] = [s for s in iter_host(q.body) if type(s).__name__ == "Sync"][:1]
    es = stmt_effects(sync, q)
    assert not es.names and not es.may_stop and es.constructs == ("sync",)


def test_eff3_whole_kernel_may_stop_and_writes() -> None:
    """EFF-3: ``kernel_may_stop`` counts a stopping helper of the kernel's table even when
    the body does not call it (the emitted source defines it, with the stop status), and
    ``kernel_writes`` the parameters stored through a helper; the runtimes' launch facts
    (``can_stop``, ``written_arrays``) are these."""
    from sarek_py.ir.effects import kernel_may_stop, kernel_writes
    from sarek_py.runtime.base import can_stop, written_arrays

    mod = parse_module(HELPERS + """
kernel via_put(y : f64[], z : f64[], n : i32) =
  let i = global_thread_id in if i < n then let _ = put(y, i, z[i]) in ()
kernel plain(y : f64[], n : i32) =
  let i = global_thread_id in if i < n then y[i] <- 1.0
""")
    k = {x.name: x for x in mod.kernels}
    assert kernel_writes(k["via_put"]) == {"y"} == written_arrays(k["via_put"])
    assert not kernel_may_stop(k["via_put"]) and not can_stop(k["via_put"])
    # a table that holds halt (stop 9), which the body never calls
    with_halt = attrs.evolve(k["plain"], helpers=(*k["plain"].helpers, table()["halt"]))
    assert kernel_may_stop(with_halt) and can_stop(with_halt)
    assert not kernel_may_stop(k["plain"])
    assert kernel_writes(k["plain"]) == {"y"} == written_arrays(with_halt)
