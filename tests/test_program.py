"""Host programs: IR, text form, interpreter (specs/host-program.md)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from sarek_py.host.interp import HostError, run_program
from sarek_py.ir.diagnostics import CheckError, ParseError, SarekError
from sarek_py.ir.host.program import Attr, Block, HFor, Intent, ParFor
from sarek_py.ir.host.text import parse_program, print_program

KERNELS = """
pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)
kernel fill(x : f64[1:], v : f64, n : i32) =
  let i = global_thread_id in
  if i < n then x[i + 1] <- v
"""


def prog(body: str, decls: str = "", procs: str = "") -> str:
    return f"{KERNELS}\nprogram t\n{decls}\n{procs}\nbegin\n{body}\nend\n"


def run(body: str, decls: str = "", procs: str = "", **kw: object):  # type: ignore[no-untyped-def]
    return run_program(parse_program(prog(body, decls, procs)), **kw)  # type: ignore[arg-type]


def test_hp1_program_parts() -> None:
    """HP-1: helpers, kernels, declarations, procedures, body."""
    p = parse_program(prog("n := 1", "var n : i32;", "proc q(a : i32 out) = a := 2 end"))
    assert [h.name for h in p.helpers] == ["avg"]
    assert [k.name for k in p.kernels] == ["fill"]
    assert p.var("n").name == "n" and p.procedure("q").params[0].intent is Intent.OUT


def test_hp1_host_refuses_helper_calls() -> None:
    with pytest.raises(CheckError, match="parallel loops"):
        run("x := avg(1.0, 2.0)", "var x : f64;")


def test_hp2_declarations_and_attributes() -> None:
    p = parse_program(prog("()", "var u : f64[1:] allocatable target volatile;"
                                 "var c : i32 common = 3; var g : f32[4];"))
    d = p.decl("u")
    assert d.allocatable and d.may_alias and Attr.VOLATILE in d.attrs
    assert p.decl("c").may_alias and not p.decl("g").may_alias
    r = run_program(p)
    assert r.values["u"] is None and int(r.values["c"]) == 3
    assert r.array("g").dtype == np.float32 and r.array("g").tolist() == [0, 0, 0, 0]


def test_hp2_runtime_extent_needs_allocatable() -> None:
    with pytest.raises(ParseError, match="allocatable or pointer"):
        parse_program(prog("()", "var u : f64[];"))


def test_hp3_loops_step_break_continue() -> None:
    r = run("for i = 1 to 10 step 3 do s := s + i done; "
            "for i = 10 to 1 step -2 do (if i == 4 then break; t := t + i) done;"
            "for i = 1 to 5 do (if i % 2 == 0 then continue; w := w + i) done",
            "var s : i32; var t : i32; var w : i32;")
    assert int(r.values["s"]) == 1 + 4 + 7 + 10
    assert int(r.values["t"]) == 10 + 8 + 6
    assert int(r.values["w"]) == 1 + 3 + 5


def test_hp3_bounds_evaluated_once_and_zero_step() -> None:
    r = run("for i = 1 to n do n := n + 1 done", "var n : i32 = 3;")
    assert int(r.values["n"]) == 6
    with pytest.raises(HostError, match="step of zero"):
        run("for i = 1 to 3 step z do () done", "var z : i32;")


def test_hp3_return_and_stop() -> None:
    r = run("x := 1; return; x := 2", "var x : i32;")
    assert int(r.values["x"]) == 1 and r.stop_code is None
    r = run("x := 1; stop 7; x := 2", "var x : i32;")
    assert int(r.values["x"]) == 1 and r.stop_code == 7


def test_hp4_parallel_nest_and_locals() -> None:
    r = run("allocate a[1:3, 1:4];"
            "parallel for (j = 1 to 3, i = 1 to 4) local w : f64[2] do "
            "(w[0] <- f64(j); w[1] <- f64(i); a[j, i] <- avg(w[0] * 10.0, w[1]) + w[0] * 0.0)"
            " done", "var a : f64[1:, 1:] allocatable;")
    a = r.array("a")
    j, i = np.meshgrid(np.arange(1, 4), np.arange(1, 5), indexing="ij")
    np.testing.assert_array_equal(a, 0.5 * (10.0 * j + i))
    p = parse_program(prog("parallel for (j = 1 to 2, i = 1 to 3) do () done"))
    assert isinstance(p.body, ParFor) and [v.name for v in p.body.vars] == ["j", "i"]


def test_hp4_empty_nest_runs_nothing() -> None:
    r = run("parallel for (i = 3 to 2) do g[0] <- 1.0f done", "var g : f32[4];")
    assert r.array("g").tolist() == [0, 0, 0, 0]


def test_hp5_allocate_bounds_and_errors() -> None:
    r = run("allocate a[0:n + 1]; allocate b[n]; x := length(a, 0) + length(b, 0)",
            "var n : i32 = 5; var a : f64[0:] allocatable; var b : f64[1:] allocatable;"
            " var x : i32;")
    assert int(r.values["x"]) == 7 + 5
    with pytest.raises(HostError, match="lower bound"):
        run("allocate a[1:3]", "var a : f64[0:] allocatable;")
    with pytest.raises(HostError, match="already allocated"):
        run("allocate a[3]; allocate a[3]", "var a : f64[0:] allocatable;")
    with pytest.raises(HostError, match="not allocated"):
        run("deallocate a", "var a : f64[0:] allocatable;")
    with pytest.raises(HostError, match="not allocated"):
        run("a[0] <- 1.0", "var a : f64[0:] allocatable;")


def test_hp5_pointer_association_aliases() -> None:
    r = run("allocate a[4]; p => a; p[2] <- 5.0; x := a[2]",
            "var a : f64[0:] allocatable target; var p : f64[0:] pointer; var x : f64;")
    assert float(r.values["x"]) == 5.0


def test_hp6_procedure_intents() -> None:
    r = run("allocate a[4]; call q(a, 2.0, k, m); call q(a, 3.0, k, m)",
            "var a : f64[0:] allocatable; var k : i32 = 10; var m : i32 = 5;",
            "proc q(x : f64[0:] inout, v : f64 in, c : i32 out, d : i32 inout) ="
            " x[1] <- x[1] + v; c := c + 1; d := d + 1; return; d := 99 end")
    assert r.array("a").tolist() == [0, 5, 0, 0]
    assert int(r.values["k"]) == 1 and int(r.values["m"]) == 7


def test_hp6_out_dummy_needs_variable() -> None:
    with pytest.raises(HostError, match="must be a variable"):
        run("call q(1)", "", "proc q(c : i32 out) = c := 1 end")


def test_hp7_output_input() -> None:
    r = run("read n, x; print n, x; write (unit = 6, iostat = e) n + 1; print",
            "var n : i32; var x : f64; var e : i32 = 5;", inputs=[4, 2.5])
    assert r.output == ["4 2.5", "5", ""] and int(r.values["e"]) == 0
    with pytest.raises(HostError, match="past the end"):
        run("read n", "var n : i32;")


def test_hp8_launch_and_sync() -> None:
    r = run("allocate a[n]; launch fill(a, 2.5, n - 1) threads 4L block 256; sync",
            "var a : f64[1:] allocatable; var n : i32 = 4;")
    assert r.array("a").tolist() == [2.5, 2.5, 2.5, 0.0]
    r = run("allocate a[n]; launch fill(a, 1.5, n) threads 4L block 256",
            "var a : f64[1:] allocatable; var n : i32 = 4;")
    assert r.array("a").tolist() == [1.5] * 4


def test_hp10_syntax_errors_are_located() -> None:
    with pytest.raises(ParseError) as err:
        parse_program(prog("call nothing()"))
    assert "unknown procedure" in str(err.value) and err.value.loc is not None
    with pytest.raises(ParseError):
        parse_program(prog("for i = 1 downto 3 do () done"))
    # host words are ordinary names elsewhere
    r = run("print := 3; read := print + 1", "var print : i32; var read : i32;")
    assert int(r.values["read"]) == 4


def test_hp11_round_trip() -> None:
    text = prog(
        "allocate u[1:n]; p => u; for t = 1 to 3 step 2 do (parallel for (i = 1 to n) "
        "do u[i] <- u[i] + 1.0 done; if t > 1 then continue else break; call q(u, t)) done;"
        " print (fmt = \"x\") u[1]; write (unit = 6) n; read n; sync; "
        "launch fill(u, 1.0, n) threads 4L block 256 overwritten u if n == 99; deallocate u; stop 2",
        "var n : i32 = 4; var u : f64[1:] allocatable target; var p : f64[1:] pointer;",
        "proc q(a : f64[1:] inout, k : i32 in) pure = a[1] <- f64(k) end")
    once = print_program(parse_program(text))
    assert print_program(parse_program(once)) == once
    p = parse_program(once)
    assert isinstance(p.body, Block) and isinstance(p.body.stmts[2], HFor)


def test_hp13_preset_values() -> None:
    p = parse_program(prog("a[0] <- a[0] + x", "var a : f64[3]; var x : f64;"))
    r = run_program(p, {"a": [1.0, 2.0, 3.0], "x": 4})
    assert r.array("a").tolist() == [5.0, 2.0, 3.0]


def test_hp14_parallel_race_is_an_error() -> None:
    with pytest.raises(SarekError, match="race|written|conflict"):
        run("parallel for (i = 0 to 3) do g[0] <- f32(i) done", "var g : f32[4];")


def test_hp14_parallel_stop() -> None:
    r = run("parallel for (i = 0 to 3) do if i >= 2 then stop 3 else g[i] <- 1.0f done;"
            " x := 1", "var g : f32[4]; var x : i32;")
    assert r.stop_code == 3 and int(r.values["x"]) == 0


def test_hp14_parallel_cannot_assign_host_scalar() -> None:
    with pytest.raises(HostError, match="reduction"):
        run("parallel for (i = 0 to 3) do s := s + 1 done", "var s : i32;")


def test_hp15_host_subscripts_checked() -> None:
    with pytest.raises(HostError, match=r"out of bounds 1:3"):
        run("allocate a[3]; a[4] <- 1.0", "var a : f64[1:] allocatable;")


@pytest.mark.parametrize(("body", "decls", "msg"), [
    ("n := 1.5", "var n : i32;", "not i32"),
    ("if n then n := 1", "var n : i32;", "not bool"),
    ("break", "", "outside a loop"),
    ("for i = 1 to x do () done", "var x : f64;", "not i32"),
    ("allocate a[2]; parallel for (i = 0 to 1) do a[i] <- n done",
     "var n : i32; var a : f64[0:] allocatable;", "element type f64"),
    ("p => a", "var a : f64[0:] allocatable target; var p : f32[0:] pointer;", "types"),
])
def test_hp9_check_program(body: str, decls: str, msg: str) -> None:
    with pytest.raises(CheckError, match=msg):
        run(body, decls)


def test_hp9_a_program_run_many_times_is_checked_once() -> None:
    """HP-9 with the check remembered per program object: the second run of the same
    program does not check it again; a program that fails the check fails every run."""
    from sarek_py.host import check as program_check

    p = parse_program("program p var n : i32 = 2; begin n := n + 1 end")
    before = program_check._CHECKED.misses
    run_program(p)
    run_program(p)
    assert program_check._CHECKED.misses == before + 1
    bad = parse_program("program q var n : i32; begin n := 1.5 end")
    for _ in range(2):
        with pytest.raises(CheckError, match="not i32"):
            run_program(bad)


# ---------------------------------------------------------------- TXT-26: S-expressions


@functools.cache
def _programs_for_sexp() -> tuple[tuple[str, object], ...]:
    """The programs of the TXT-26 cases, built once per process (they are frozen)."""
    from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
    from sarek_py.host.offload import offload
    from sarek_py.ir.host.text import parse_program_file

    src = parse_program_file("examples/advection_diffusion.sk")
    swapped = fuse_program(src, FusionOptions(swap=True))[0]
    other = parse_program("""
program q
  var n : i32 = 3; var s : f64; var a : f64[1:] allocatable target; var p : f64[1:] pointer;
  proc bump(x : f64[1:] inout, k : i32 value) = x[1] <- x[1] + f64(k) end
begin
  allocate a[n]; p => a; read s; call bump(a, 2);
  print (unit = 6) s, a[1]; write (iostat = n) s;
  for i = 1 to 3 step 2 do (if i == 3 then break; continue) done;
  deallocate a; stop 2
end
""")
    return (("example", src), ("fused+swap", swapped), ("offloaded", offload(swapped)),
            ("offloaded tiles", offload(src, numbering="tiles")), ("statements", other))


@pytest.mark.parametrize("case", range(5))
def test_txt26_programs_read_back_from_sexp(case: int) -> None:
    from sarek_py.ir.host.sexp import program_from_sexp, program_to_sexp

    name, prog = _programs_for_sexp()[case]
    text = program_to_sexp(prog)  # type: ignore[arg-type]
    back = program_from_sexp(text, f"{name}.sexp")
    assert back == prog, name
    assert program_to_sexp(back) == text
    assert print_program(back) == print_program(prog)  # type: ignore[arg-type]


def test_txt26_attributes_and_intents_are_keywords() -> None:
    from sarek_py.ir.host.sexp import program_to_sexp

    text = program_to_sexp(parse_program(
        "program q var a : f64[0:] allocatable target; "
        "proc z(x : f64[0:] inout) = x[0] <- 1.0 end begin allocate a[2] end"))
    assert ":attrs [:allocatable :target]" in text and ":intent :inout" in text


def test_txt26_a_dump_that_is_not_a_program_is_a_located_error() -> None:
    from sarek_py.ir.host.program import Attr
    from sarek_py.ir.host.sexp import program_from_sexp
    from sarek_py.ir.sexp import register
    from sarek_py.ir.types import Scalar

    with pytest.raises(ParseError, match=r"k.sexp:1:1: error: expected a \(Program"):
        program_from_sexp('(Const :value 1 :type :i32)', "k.sexp")
    with pytest.raises(ParseError, match="unknown node 'Nope'"):
        program_from_sexp("(Nope)", "k.sexp")
    import enum

    class Clash(enum.Enum):
        X = "allocatable"

    with pytest.raises(ValueError, match="taken by"):
        register(enums=(Clash,))
    from sarek_py.ir.sexp import ENUM_WORDS

    assert ENUM_WORDS["allocatable"] is Attr.ALLOCATABLE and ENUM_WORDS["i32"] is Scalar.I32
