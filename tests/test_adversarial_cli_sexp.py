"""Red-team tests of four recent features: host programs as S-expressions (TXT-26),
``sarek-py opt/print/check/run`` on host programs (LF-16, CLI-1, CLI-2, CLI-10), loop
fusion inside procedures with offload on OpenCL (LF-17), and the rows numbering of
offloaded nests on OpenCL (OFF-11, TIL-10, TIL-11).

Tests whose docstring starts with ``FINDING`` failed when the red-team pass wrote them;
each names the rule, the minimal input and what went wrong, and each now passes with its
fix (NaN literals equal by bits, IR-31; located errors for malformed or ill-typed dumps
and for deep nesting, TXT-25; class names registered once, TXT-26; `opt` checks the
program first and reports an unwritable `--dump-dir`, LF-16; `iostat` names an integer
scalar, HP-7/HP-9; private arrays do not make a nest a reduction, TIL-1). The others
record cases that were checked and held.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from sarek_py.cli.main import main
from sarek_py.fusion.loops.fusion import FusionOptions, fuse_program
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import BackendUnavailable, ParseError, SarekError
from sarek_py.ir.host.sexp import program_from_sexp, program_to_sexp
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.runtime import get_backend

ROOT = Path(__file__).resolve().parent.parent


def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
            *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        import io

        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = main([str(a) for a in argv])
    got = capsys.readouterr()
    return code, got.out, got.err


def cli_proc(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / ".venv/bin/sarek-py"), *argv], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def assert_no_traceback(err: str) -> None:
    assert "Traceback" not in err and 'File "' not in err, err


def opencl() -> Any:
    try:
        return get_backend("opencl")
    except BackendUnavailable:
        pytest.skip("OpenCL backend unavailable")


def same_run(ref: Any, got: Any, names: tuple[str, ...]) -> None:
    for n in names:
        a, b = ref.values[n], got.values[n]
        assert (a is None) == (b is None), n
        if a is not None:
            assert ref.array(n).tobytes() == got.array(n).tobytes(), n
    assert ref.output == got.output and ref.stop_code == got.stop_code


def roundtrip(p: Any) -> None:
    text = program_to_sexp(p)
    back = program_from_sexp(text, "rt.sexp")
    assert back == p
    assert program_to_sexp(back) == text
    assert print_program(back) == print_program(p)


HELPERS = "pure fun avg(a : f64, b : f64) : f64 = return 0.5 * (a + b)\n"

# ============================================================== TXT-26: S-expressions

RICH = HELPERS + """
program q
  var n : i32 = 8; var a : f64[1:] allocatable; var b : f64[1:] allocatable;
  var c : f64[1:] allocatable; var m : f64[1:, 1:] allocatable;
  proc bump(x : f64[1:] inout, k : i32 value) = x[1] <- x[1] + f64(k); return end
begin
  allocate a[n]; allocate b[n]; allocate c[n]; allocate m[n, n];
  for t = 1 to 3 do
    parallel for (i = 1 to n) do b[i] <- avg(a[i], 1.0) + 1.0 done;
    parallel for (i = 1 to n) do a[i] <- b[i] * 2.0 done
  done;
  parallel for (i = 1 to n) local w : f64[100000] do (w[0] <- a[i]; c[i] <- w[0]) done;
  parallel for (i = 1 to n) do if a[i] > 100.0 then stop 3 else c[i] <- 1.0 done;
  parallel for (j = 1 to n, i = 1 to n) local t : f64[4] do
    (t[1] <- f64(i); m[j, i] <- t[1] + avg(f64(j), 0.5)) done;
  call bump(a, 2)
end
"""


@pytest.mark.parametrize("numbering", ["rows", "tiles", "flat"])
def test_txt26_fused_offloaded_with_scratch_stop_and_procedures_reads_back(
        numbering: str) -> None:
    """Held: a fused + ping-ponged program, offloaded with every numbering, with a
    workspace moved to a scratch buffer, a stopping loop (stop_status, stop_replay), a
    private array, a procedure with `return`, reads back equal, and prints the same."""
    p = parse_program(RICH)
    fused = fuse_program(p, FusionOptions(swap=True))[0]
    o = offload(fused, numbering=numbering)  # type: ignore[arg-type]
    text = program_to_sexp(o)
    assert "(ScratchBuffer" in text and ":stop_status (Var" in text
    roundtrip(p)
    roundtrip(fused)
    roundtrip(o)


@pytest.mark.parametrize("src", [
    r'program q var s : f64; begin print (fmt = "a\"b\\c\n\t\r\x01\xff\x7f é") s end',
    r'program q var s : f64; begin print (fmt = "\x00", unit = 6) s; write (iostat = n) s end'
    .replace("var s", "var n : i32; var s"),
    "program q var s : f64 = -0.0; var t : f32 = 0.1f; var n : i64 = 9223372036854775807L;"
    " var m : i32 = -2147483648; begin () end",
    "program q var s : f64; begin s := inf; s := -0.0; s := 5e-324; s := 1e308; s := -inf end",
    "program q var s : f32; begin s := inff; s := -0.0f; s := 1e-45f; s := 0.1f;"
    " s := 3.4028235e38f end",
    "program q var a : f64[1:] allocatable target volatile common pointer; begin () end",
])
def test_txt26_odd_strings_floats_and_attribute_sets_read_back(src: str) -> None:
    """Held: strings with quotes, backslashes, control characters, \\xff and non-ASCII in
    specifiers; -0.0, subnormals, inf, f32 values, extreme integers; all five attributes."""
    roundtrip(parse_program(src))


def test_txt26_nan_constant_reads_back_equal() -> None:
    """FINDING (TXT-26 / TXT-25): `program_from_sexp(program_to_sexp(p)) == p` fails for
    any program holding a `nan` literal. Minimal input:
    `program q var s : f64; begin s := nan end`. The dump writes `nan`, the reader makes a
    new float nan, and `Const(nan) == Const(nan)` is False for two distinct nan objects
    (the original compares equal to itself only by identity), so the read-back program is
    not equal to the original."""
    p = parse_program("program q var s : f64; begin s := nan end")
    assert p == p
    back = program_from_sexp(program_to_sexp(p))
    assert back == p


@pytest.mark.parametrize("text", [
    "",
    ")",
    '(Program :name "q" :decls [])',
    '(Program :name "q" :decls [] :body (Block :stmts []) :zzz 1)',
    '(Program :name "q" :decls [] :body (Block :stmts [:nope]))',
    '(Program :name "q" :decls [] :body (Block :stmts [])) x',
    '(Nope)',
    '(Program :name "q :decls [] :body (Block :stmts []))',
])
def test_txt26_malformed_dumps_are_located_parse_errors(text: str) -> None:
    """Held: empty, stray `)`, missing and unknown fields, unknown keyword, trailing text,
    unknown node, unterminated string: each a located ParseError."""
    with pytest.raises(ParseError) as err:
        program_from_sexp(text, "d.sexp")
    assert str(err.value).startswith("d.sexp:")


@pytest.mark.parametrize("prefixes", [
    pytest.param(75, id="quick"),
    pytest.param(150, id="fuzz", marks=pytest.mark.slow),
])
def test_txt26_truncated_dumps_are_located_parse_errors(prefixes: int) -> None:
    """Held: evenly spaced prefixes of a real dump (75; 150 in a slow run, 1,000 with
    SAREK_FUZZ=1) are each a located ParseError."""
    text = program_to_sexp(offload(parse_program(RICH)))
    if os.environ.get("SAREK_FUZZ") and prefixes > 75:
        prefixes = 1000
    step = len(text) // prefixes
    for cut in range(0, len(text) - 1, max(1, step)):
        with pytest.raises(ParseError) as err:
            program_from_sexp(text[:cut], "t.sexp")
        assert str(err.value).startswith("t.sexp:"), cut


def test_txt26_deeply_nested_dump_is_a_parse_error() -> None:
    """FINDING (TXT-26 / TXT-25: a malformed dump is a located ParseError): a dump nested
    a few thousand levels deep crashes the recursive reader. Minimal input: `"[" * 5000`
    (or `(Program :name [[[[…]]]] …)`): `RecursionError` escapes from `program_from_sexp`
    instead of a ParseError."""
    for text in ("[" * 5000, "(Program :name " + "[" * 3000 + "]" * 3000 + ")"):
        with pytest.raises(ParseError):
            program_from_sexp(text, "deep.sexp")


@pytest.mark.parametrize("ident", ['"a"', "nil", "[1]"])
def test_txt26_non_integer_var_id_is_a_parse_error(ident: str) -> None:
    """FINDING (TXT-26: a dump that is not a program is a located ParseError): a `Var`
    whose `:id` is not an integer crashes the reader. Minimal input:
    `(Program :name "q" :decls [(Decl :var (Var :name "x" :id "a" :type :i32 :mutable true))]
    :body (Block :stmts []))` raises `TypeError: '>' not supported between 'str' and 'int'`
    (the reader's `max(self.max_id, obj.id)`)."""
    text = (f'(Program :name "q" :decls [(Decl :var (Var :name "x" :id {ident} :type :i32 '
            ':mutable true))] :body (Block :stmts []))')
    with pytest.raises(ParseError):
        program_from_sexp(text, "id.sexp")


def test_txt26_infinite_var_id_does_not_break_fresh_ids() -> None:
    """FINDING (TXT-25/TXT-26: the reader reserves the ids it reads so later fresh
    variables do not collide): a dump with `:id inf` (or `:id 2.5`) is accepted and
    `reserve_ids(inf)` makes every later fresh id `inf`, so two different fresh variables
    compare equal (IR-5 equality is by id) for the rest of the process. Minimal input:
    `(Program :name "q" :decls [(Decl :var (Var :name "x" :id inf :type :i32 :mutable true))]
    :body (Block :stmts []))`. Run in a subprocess because it corrupts global state."""
    code = textwrap.dedent("""
        from sarek_py.ir.diagnostics import ParseError
        from sarek_py.ir.nodes import var
        from sarek_py.ir.types import Scalar
        from sarek_py.ir.host.sexp import program_from_sexp
        t = ('(Program :name "q" :decls [(Decl :var (Var :name "x" :id inf :type :i32 '
             ':mutable true))] :body (Block :stmts []))')
        try:
            program_from_sexp(t)
            print("accepted")
        except ParseError:
            print("refused")
        a, b = var("a", Scalar.I32), var("b", Scalar.I32)
        print("collide" if a == b else "distinct")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "distinct" in r.stdout and "refused" in r.stdout, r.stdout


@pytest.mark.parametrize("text", [
    '(Program :name "q" :decls [] :body 3)',
    '(Program :name 5 :decls [] :body (Block :stmts []))',
    '(Program :name "q" :decls [(Decl :var (Var :name "x" :id 1 :type :i32 :mutable true)'
    ' :attrs :allocatable)] :body (Block :stmts []))',
    '(Program :name "q" :decls 7 :body (Block :stmts []))',
])
def test_txt26_wrong_field_types_are_parse_errors(text: str) -> None:
    """FINDING (TXT-26: a dump that is not a program is a located ParseError): fields of
    the wrong type are accepted and give a tree that is not a program, which then crashes
    the printer or the checker. Minimal input: `(Program :name "q" :decls [] :body 3)` is
    returned as a Program whose body is the int 3 (`print_program` then raises
    `TypeError: not a host statement: 3`); `:attrs :allocatable` (a keyword, not a list)
    gives `Decl.attrs` = an Attr, so `d.allocatable` raises TypeError."""
    try:
        p = program_from_sexp(text, "ty.sexp")
    except ParseError:
        return
    pytest.fail(f"accepted as a program: {p!r}")


def test_txt26_registering_a_taken_class_name_is_an_error() -> None:
    """FINDING (TXT-26, last sentence: registering a class or an enum whose keyword another
    member already spells is an error): `register` checks enum words only; a class whose
    name is already a node keyword (`Program`, `Const` …) silently replaces the registered
    one, so later dumps read back as the wrong class. Minimal input: an attrs class named
    `Program` passed to `sarek_py.ir.sexp.register((Program,))`: no error. Run in a
    subprocess because it corrupts the global registry."""
    code = textwrap.dedent("""
        import attrs
        from sarek_py.ir.sexp import register
        import sarek_py.ir.host.sexp
        @attrs.frozen
        class Program:
            name: str
        try:
            register((Program,))
            print("accepted")
        except ValueError:
            print("refused")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "refused" in r.stdout, r.stdout


def test_txt26_registering_the_same_classes_again_is_fine() -> None:
    """Held: registering the host classes and enums a second time is not an error."""
    from sarek_py.ir.host.program import Attr, Intent
    from sarek_py.ir.host.sexp import HOST_CLASSES
    from sarek_py.ir.sexp import register

    register(HOST_CLASSES, (Attr, Intent))


# ================================================================ CLI on host programs

PAIR = ("program q var n : i32 = 4; var a : f64[1:] allocatable; "
        "var b : f64[1:] allocatable; begin allocate a[n]; allocate b[n]; "
        "for t = 1 to 3 do (parallel for (i = 1 to n) do a[i] <- f64(i + t) done; "
        "parallel for (i = 1 to n) do b[i] <- a[i] * 2.0 done) done end")


def test_cli_print_sexp_of_a_program_on_stdin_reads_back(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Held (CLI-10, TXT-26): `print - --sexp` of a program prints a dump that reads back
    to a program printing as the parsed one, and dumping to the same text."""
    code, out, err = run_cli(capsys, monkeypatch, "print", "-", "--sexp", stdin=PAIR)
    assert code == 0, err
    back = program_from_sexp(out)
    assert print_program(back) == print_program(parse_program(PAIR))
    assert program_to_sexp(back) + "\n" == out


def test_cli_doc_print_sexp_of_a_program_is_not_a_usage_error() -> None:
    """FINDING (CLI-13, this page is true; CLI-4/CLI-10/TXT-26): the `print` section of
    docs/cli.md says `--sexp` prints a kernel module's form "(not of a program: that is a
    usage error)", but CLI-10 and TXT-26 say, and the command does, print a program's
    S-expression with exit 0. The page contradicts itself and the command."""
    doc = (ROOT / "docs/cli.md").read_text()
    assert "not of a program: that is a usage error" not in doc


@pytest.mark.parametrize(("argv", "status", "msg"), [
    (["-p", "fuse,swap,offload"], 0, None),
    (["-p", "fuse,swap,offload", "--numbering", "diagonal"], 2, "--numbering"),
    (["--numbering", ""], 2, "--numbering"),
    (["--gpu-loop-transforms", ""], 2, "--gpu-loop-transforms"),
    (["-p", "inline"], 2, "unknown pass"),
    (["--fusion-threshold", "abc"], 2, "invalid float"),
    (["-p", "offload", "--numbering", "tiles", "--notes"], 0, None),
])
def test_cli_opt_program_on_stdin_options(capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                         status: int, msg: str | None) -> None:
    """Held (LF-16, CLI-1): `opt -` on a program with good and bad option values."""
    code, out, err = run_cli(capsys, monkeypatch, "opt", "-", *argv, stdin=PAIR)
    assert code == status, err
    assert_no_traceback(err)
    if msg is not None:
        assert msg in err
    else:
        assert parse_program(out) is not None


@pytest.mark.parametrize("where", ["a file", "below a file"])
def test_cli_opt_dump_dir_that_cannot_be_made_is_an_error(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, where: str) -> None:
    """FINDING (CLI-1, CLI-2: nothing a user can type makes the command print a
    traceback): `--dump-dir` naming an existing file (or a path below one) makes
    `Path.mkdir` raise FileExistsError / NotADirectoryError, which escapes `main` as a
    Python traceback. Minimal input: `touch f; sarek-py opt prog.sk -p offload --dump-dir f`
    (any host program)."""
    f = tmp_path / "afile"
    f.write_text("x")
    target = f if where == "a file" else f / "sub"
    r = cli_proc("opt", "-", "-p", "offload", "--dump-dir", str(target), stdin=PAIR)
    assert_no_traceback(r.stderr)
    assert r.returncode == 1 and "error" in r.stderr


def test_cli_opt_dump_dir_writes_passes_and_kernels(tmp_path: Path) -> None:
    """Held (LF-16): `--dump-dir` writes 01-fuse.sk, 02-offload.sk, kernels.cl/.cu."""
    r = cli_proc("opt", "-", "-p", "fuse,swap,offload", "--dump-dir", str(tmp_path / "d"),
                 stdin=PAIR)
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (tmp_path / "d").iterdir())
    assert names == ["01-fuse.sk", "02-offload.sk", "kernels.cl", "kernels.cu"]


@pytest.mark.parametrize("body", [
    "parallel for (i = 0 to 3) do a[i, i] <- 1.0 done",
    "parallel for (i = 0 to 3) do a[i] <- sqrt(1) done",
])
def test_cli_opt_offload_of_an_ill_formed_loop_is_a_located_error(body: str) -> None:
    """FINDING (CLI-1, CLI-2, HP-9): `opt -p offload` on a program never checks it, and a
    parallel loop the checker refuses crashes the offload pass with a traceback. Minimal
    inputs: `program q var a : f64[4]; begin parallel for (i = 0 to 3) do a[i, i] <- 1.0
    done end` (ValueError: zip() argument 2 is longer than argument 1) and `… a[i] <-
    sqrt(1) …` (KeyError: ('sqrt', i32)); `sarek-py check` reports both as located errors."""
    src = f"program q var a : f64[4]; begin {body} end"
    r = cli_proc("opt", "-", "-p", "offload", stdin=src)
    assert_no_traceback(r.stderr)
    assert r.returncode == 1 and r.stderr.startswith("<stdin>:1:"), r.stderr


@pytest.mark.parametrize("src", [
    "program q var n : i32; begin n := 1.5 end",
    "program q var a : f64[4]; begin parallel for (i = 0 to 3) do a[i] <- true done end",
    "program q var a : f64[4]; begin for t = 1 to 2.5 do a[0] <- 1.0 done end",
])
def test_cli_opt_of_an_ill_typed_program_is_an_error(src: str) -> None:
    """FINDING (CLI-1: a check error is exit 1): `opt` on a program that `check` refuses
    exits 0 and prints the ill-typed program (after `-p offload`, with a kernel storing a
    bool into an f64 array). Minimal input: `program q var n : i32; begin n := 1.5 end`
    with `sarek-py opt - -p offload`: exit 0; `sarek-py check -` says
    `<stdin>:1:…: error: … not i32`, exit 1."""
    assert cli_proc("check", "-", stdin=src).returncode == 1
    r = cli_proc("opt", "-", "-p", "offload", stdin=src)
    assert_no_traceback(r.stderr)
    assert r.returncode == 1, r.stdout


def test_hp9_iostat_must_name_an_integer_scalar(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """FINDING (HP-9, HP-7): `check` accepts an `iostat` specifier naming an array (or a
    float/bool scalar); `run` then replaces the array by the scalar 0. Minimal input:
    `program q var g : f32[4]; begin write (iostat = g) 1 end`: `check` ok, `run` reports
    `g: not allocated` for a fixed-size array (and a later `g[0] <- 1.0f` fails with
    "array 'g' is not allocated"). It should be a located check error (exit 1)."""
    src = "program q var g : f32[4]; begin write (iostat = g) 1 end"
    code, out, err = run_cli(capsys, monkeypatch, "check", "-", stdin=src)
    assert_no_traceback(err)
    assert code == 1 and "<stdin>:1:" in err, out


@pytest.mark.parametrize(("src", "status", "msg"), [
    ("program q var n : i32; begin read n end", 1, "read past the end"),
    ("program q var n : i32; begin n := 1 / n end", 1, "division by zero"),
    ("program q proc p() = call p() end begin () end", 1, "unknown procedure 'p'"),
    ("program q proc a() = () end proc a() = () end begin call a() end", 1, "defined twice"),
])
def test_cli_run_and_check_program_errors_are_located(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, src: str,
        status: int, msg: str) -> None:
    """Held (CLI-1, CLI-2): run-time and parse errors of programs, recursion included."""
    code, _, err = run_cli(capsys, monkeypatch, "run", "-", stdin=src)
    assert code == status and msg in err and err.startswith("<stdin>:1:"), err


def test_cli_run_program_with_parallel_stop_on_opencl_compares(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Held (CLI-11): a stopping parallel loop, `--backend opencl --compare interp`."""
    opencl()
    src = ("program q var g : f32[4]; var x : i32; begin parallel for (i = 0 to 3) do "
           "if i >= 2 then stop 3 else g[i] <- 1.0f done; x := 1 end")
    code, out, err = run_cli(capsys, monkeypatch, "run", "-", "--backend", "opencl",
                             "--compare", "interp", stdin=src)
    assert code == 0, err
    assert "stop: program stopped with code 3" in out and "g: identical (16 bytes)" in out


# ============================================ LF-17: fusion in procedures, on OpenCL


def compare_all(src: str, names: tuple[str, ...], expect_fused: bool = True) -> None:
    p = parse_program(src, "proc.sk")
    ref = run_program(p)
    fused, reps = fuse_program(p, FusionOptions(swap=True))
    assert any(r.fused for r in reps) == expect_fused, [str(r) for r in reps]
    roundtrip(fused)
    same_run(ref, run_program(fused), names)
    cl = opencl()
    for numbering in ("rows", "tiles", "flat"):
        o = offload(fused, numbering=numbering)
        same_run(ref, run_program(o, device=cl, check_races=False), names)


SHADOW = HELPERS + """
program p
  var n : i32 = 17; var u : f64[0:] allocatable; var h : f64[0:] allocatable; var t : i32;
  var f : f64[0:] allocatable; var t_last : i32 = 5; var h_copy : f64[0:] allocatable;
  var swapped : bool;
  proc run(o : f64[0:] inout, m : i32 in, k : i32 in)
    var h : f64[0:] allocatable; var f : f64[0:] allocatable; var t : i32;
  =
    allocate h[0:m]; allocate f[0:m];
    parallel for (i = 0 to m) do h[i] <- o[i] done;
    for t = 1 to k do
      parallel for (i = 0 to m - 1) do f[i] <- avg(h[i], h[i + 1]) done;
      parallel for (i = 1 to m - 1) do h[i] <- h[i] + 0.5 * (f[i] - f[i - 1]) done
    done;
    parallel for (i = 0 to m) do o[i] <- h[i] done;
    if k == 2 then (deallocate h; deallocate f; return);
    parallel for (i = 0 to m) do o[i] <- o[i] * 2.0 done;
    deallocate h; deallocate f
  end
begin
  allocate u[0:n]; allocate h[0:n]; allocate f[0:2];
  parallel for (i = 0 to n) do u[i] <- f64(i % 5) * 0.3 done;
  parallel for (i = 0 to n) do h[i] <- 1.0 done;
  for t = 1 to 4 do call run(u, n, t) done;
  call run(h, n, 3)
end
"""

TINY = HELPERS + """
program p
  var n : i32 = 1; var u : f64[0:] allocatable;
  proc run(o : f64[0:] inout, m : i32 in, k : i32 in)
    var h : f64[0:] allocatable; var f : f64[0:] allocatable;
  =
    allocate h[0:m]; allocate f[0:m];
    parallel for (i = 0 to m) do h[i] <- o[i] done;
    for t = 1 to k do
      parallel for (i = 0 to m - 1) do f[i] <- avg(h[i], h[i + 1]) done;
      parallel for (i = 1 to m - 1) do h[i] <- h[i] + 0.5 * (f[i] - f[i - 1]) done
    done;
    parallel for (i = 0 to m) do o[i] <- h[i] done
  end
begin
  allocate u[0:n];
  parallel for (i = 0 to n) do u[i] <- f64(i) + 0.1 done;
  call run(u, n, 0); call run(u, n, 1); call run(u, n, 3)
end
"""

PROGRAM_ARRAY = HELPERS + """
program p
  var n : i32 = 13; var u : f64[0:] allocatable; var g : f64[0:] allocatable;
  proc run(m : i32 in, k : i32 in)
    var h : f64[0:] allocatable;
  =
    allocate h[0:m];
    parallel for (i = 0 to m) do h[i] <- u[i] done;
    for t = 1 to k do
      parallel for (i = 0 to m - 1) do g[i] <- avg(h[i], h[i + 1]) done;
      parallel for (i = 1 to m - 1) do h[i] <- h[i] + 0.5 * (g[i] - g[i - 1]) done
    done;
    parallel for (i = 0 to m) do u[i] <- h[i] done
  end
begin
  allocate u[0:n]; allocate g[0:n];
  parallel for (i = 0 to n) do u[i] <- f64(i % 4) * 0.7 done;
  call run(n, 3); call run(n, 2)
end
"""

NOT_IN_LOOP = HELPERS + """
program p
  var n : i32 = 9; var u : f64[0:] allocatable;
  proc st(o : f64[0:] inout, m : i32 in)
    var f : f64[0:] allocatable;
  =
    allocate f[0:m];
    parallel for (i = 0 to m - 1) do f[i] <- avg(o[i], o[i + 1]) done;
    parallel for (i = 1 to m - 1) do o[i] <- f[i] - f[i - 1] done;
    deallocate f
  end
begin
  allocate u[0:n];
  parallel for (i = 0 to n) do u[i] <- f64(i) * 1.5 done;
  call st(u, n); call st(u, n)
end
"""


@pytest.mark.parametrize(("name", "src", "names", "fused"), [
    ("shadowing names, return, called from a host loop", SHADOW, ("u", "h", "f"), True),
    ("zero and one trip counts, n = 1", TINY, ("u",), True),
    ("a program array as the intermediate", PROGRAM_ARRAY, ("u", "g"), True),
    ("pair not in a sequential loop", NOT_IN_LOOP, ("u",), False),
])
def test_lf17_procedures_on_opencl_bitwise(name: str, src: str, names: tuple[str, ...],
                                           fused: bool) -> None:
    """Held (LF-17, OFF-1): fused and ping-ponged pairs in procedures (locals named like
    program variables, including `t_last`, `h_copy`, `swapped`; `return`; several calls
    from a host loop; zero-trip loops) give the bits of the original program, fused on the
    host and offloaded (rows, tiles, flat) on OpenCL; the fused program reads back from
    its S-expression."""
    compare_all(src, names, fused)


def test_lf17_recursion_is_a_located_error() -> None:
    """Held: a procedure calling itself is a located ParseError (unknown procedure)."""
    with pytest.raises(ParseError, match=r"p.sk:\d+:\d+: error: unknown procedure 'r'"):
        parse_program("program q var n : i32 = 3; proc r(m : i32 inout) = "
                      "if m > 0 then (m := m - 1; call r(m)) end begin call r(n) end", "p.sk")


# ============================================= OFF-11 / TIL-10 / TIL-11: rows on OpenCL

NEST_HELPERS = HELPERS + (
    "pure fun cl(a : f64, lo : f64, hi : f64) : f64 = return min(max(a, lo), hi)\n")


def nest(body: str, dims: str = "j = 1 to ny, i = 0 to nx", local: str = "",
         decl: str = "var m : f64[1:, 0:] allocatable;",
         alloc: str = "allocate m[1:ny, 0:nx];", vals: tuple[int, int] = (5, 300)) -> str:
    return NEST_HELPERS + f"""
program p
  var ny : i32 = {vals[0]}; var nx : i32 = {vals[1]}; var nz : i32 = 3; var s : f64 = 0.25;
  {decl}
begin
  {alloc}
  parallel for ({dims}) {local} do {body} done;
  parallel for ({dims}) {local} do {body} done
end
"""


PRIVATE = ("(t[0] <- f64(i) * s; t[3] <- f64(j); t[(i + j) % 4] <- t[0] + 1.0; "
           "m[j, i] <- cl(t[0] - t[3] + t[(i * 3) % 4] + m[j, i], -5.0, 5.0))")
GUARD = "if (i + j) % 3 != 0 then m[j, i] <- avg(f64(i), m[j, i]) * s"
THREE_D = dict(dims="k = 0 to nz, j = -1 to ny, i = 2 to nx",
               decl="var m : f64[0:, -1:, 2:] allocatable;",
               alloc="allocate m[0:nz, -1:ny, 2:nx];")


def rows_on_opencl(src: str) -> list[str]:
    p = parse_program(src)
    ref = run_program(p)
    o = offload(p)
    same_run(ref, run_program(o, device=opencl(), check_races=False), ("m",))
    return [k.name for k in o.kernels]


@pytest.mark.parametrize("vals", [(5, 300), (1, 1), (7, 255), (3, 257), (600, 2), (0, 5),
                                  (4, 0)])
def test_off11_private_array_nest_on_opencl_bitwise(vals: tuple[int, int]) -> None:
    """Held (OFF-1, OFF-11): a 2-D nest with a private `local t : f64[4]`, a helper call
    and data-dependent private indices gives the host's bits on OpenCL, for extents
    below, at, just above a block, tall-thin, and empty."""
    rows_on_opencl(nest(PRIVATE, local="local t : f64[4]", vals=vals))


@pytest.mark.parametrize(("body", "kw", "vals"), [
    (GUARD, {}, (5, 300)),
    (GUARD, {}, (9, 3)),
    ("m[k, j, i] <- avg(f64(i * 100 + j * 10 + k), m[k, j, i])", THREE_D, (4, 290)),
    ("if i > j then m[k, j, i] <- cl(f64(i - k), 0.0, 3.0) + m[k, j, i]", THREE_D, (2, 40)),
])
def test_off11_rows_with_guards_helpers_and_3d_on_opencl(body: str, kw: dict[str, str],
                                                         vals: tuple[int, int]) -> None:
    """Held (OFF-11, TIL-10, TIL-11): `if` guards with helper calls and 3-D nests with
    negative lower bounds use the rows kernel and give the host's bits on OpenCL, both
    when rows are chosen and when the padding test falls back to flat."""
    names = rows_on_opencl(nest(body, vals=vals, **kw))
    assert any(n.endswith("_rows") for n in names), names


def test_off11_nest_with_private_array_uses_rows() -> None:
    """FINDING (OFF-11: a nest of two or more dimensions without a reduction, that cannot
    stop and needs no workspace, becomes the rows/flat choice; TIL-1): a 2-D nest whose
    body stores into its own private array is silently launched flat only. Minimal input:
    `parallel for (j = 1 to ny, i = 0 to nx) local t : f64[4] do (t[0] <- f64(i);
    m[j, i] <- t[0]) done`: `tile_dims` treats the store into the per-iteration `t` (which
    does not use every loop variable) as a reduction ("nest … has a reduction") although
    no two iterations share `t`; `offload` then emits no `_rows` kernel."""
    o = offload(parse_program(nest("(t[0] <- f64(i); m[j, i] <- t[0])",
                                   local="local t : f64[4]")))
    assert any(k.name.endswith("_rows") for k in o.kernels), [k.name for k in o.kernels]


def test_cli_opt_offload_rows_on_stdin_reparses(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Held (OFF-11, CLI-10): `opt - -p offload --numbering rows|tiles|flat` of a 3-D nest
    prints a program that parses and runs to the original's bits."""
    src = nest("m[k, j, i] <- avg(f64(i * 100 + j * 10 + k), m[k, j, i])", vals=(2, 9),
               **THREE_D)
    ref = run_program(parse_program(src))
    for numbering in ("rows", "tiles", "flat"):
        _clear_sources()
        code, out, err = run_cli(capsys, monkeypatch, "opt", "-", "-p", "offload",
                                 "--numbering", numbering, stdin=src)
        assert code == 0, err
        try:
            same_run(ref, run_program(parse_program(out)), ("m",))
        except SarekError as exc:
            pytest.fail(str(exc))


def _clear_sources() -> None:
    from sarek_py.cli.loading import forget_sources

    forget_sources()
