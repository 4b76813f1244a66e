"""A rows kernel launched by hand, with bounds its guard does not admit (specs/tiling.md
TIL-13, specs/launch.md LCH-25, specs/text-format.md TXT-35).

TIL-13 tightens the rows kernel's guard by the offsets its body applies to each loop
variable, so that ``i - 1`` and ``i + 2`` are plain C: an iteration whose variable lies
within the offset of an end of ``i32`` does not run in the rows kernel. The host (OFF-11)
launches the flat kernel for such bounds; these tests launch the rows kernel *directly*
— the runtime's and the interpreter's ``run_kernel``, a printed program edited to launch
it alone (printed and parsed back), ``sarek-py run`` — and require the nest's results
(the interpreter's bytes for the unoptimised program) or a refusal naming the rule, the
parameter and its value: never fewer iterations in silence.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tiling import backends

from sarek_py.cli.main import main
from sarek_py.host.interp import run_program
from sarek_py.host.offload import offload
from sarek_py.ir.diagnostics import SarekError
from sarek_py.ir.host.launch import Launch
from sarek_py.ir.host.program import Program, iter_host
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.interp import run_kernel
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel
from sarek_py.ir.sexp import from_sexp, to_sexp

MIN, MAX = -(2**31), 2**31 - 1

#: ``i - 1`` and ``i + 2``: the rows kernel runs ``i`` in [MIN + 1, MAX - 2] only
SOURCE = """
program p
  var lo : i32 = 0; var hi : i32 = 31;
  var w : i32[2, 32];
begin
  parallel for (j = 0 to 1, i = lo to hi) do w[j, i - lo] <- (i + 2) - (i - 1) * 3 + j done
end
"""

#: (lo, hi): at the top of i32, at the bottom, and well inside (the rows kernel admits it)
ENDS = [(MAX - 31, MAX), (MIN, MIN + 31)]
INSIDE = (MAX - 33, MAX - 2)


def reference(lo: int, hi: int) -> bytes:
    """The unoptimised program's ``w`` on the interpreter."""
    return run_program(parse_program(SOURCE), {"lo": lo, "hi": hi}).array("w").tobytes()


def offloaded() -> Program:
    return offload(parse_program(SOURCE), block_size=32)


def rows_kernel() -> Kernel:
    q = offloaded()
    return next(s.kernel for s in iter_host(q.body)
                if isinstance(s, Launch) and s.kernel.name.endswith("_rows"))


def rows_args(lo: int, hi: int) -> dict[str, Any]:
    return {"w": np.zeros((2, 32), np.int32), "lo": lo, "lo_0": 0, "lo_1": lo, "hi_0": 1,
            "hi_1": hi}


#: the rows kernel's grid for w (2 x 32) in blocks of 32: one block per row (TIL-14)
GRID: dict[str, Any] = {"grid": (1, 2), "block_shape": (32,)}


def exact_or_refused(run: Any, lo: int, hi: int, *, param: str) -> str | None:
    """Run ``run()`` (which returns the bytes of ``w``): the reference's bytes, or a
    refusal naming LCH-25, ``param`` and its value (the message, returned)."""
    value = lo if param == "lo_1" else hi
    try:
        got = run()
    except SarekError as exc:
        msg = str(exc)
        assert "LCH-25" in msg and param in msg and str(value) in msg, msg
        return msg
    assert got == reference(lo, hi), "the rows kernel skipped iterations in silence"
    return None


def which(lo: int) -> str:
    return "lo_1" if lo == MIN else "hi_1"


# ------------------------------------------------------------------ direct kernel launches


@pytest.mark.parametrize(("lo", "hi"), ENDS)
def test_lch25_rows_kernel_at_the_i32_ends_direct_launch_every_backend(lo: int,
                                                                       hi: int) -> None:
    """TIL-13, LCH-25: ``Backend.run_kernel`` (interp, opencl) and the interpreter's
    ``run_kernel`` of the rows kernel with bounds at an end of i32: the nest's bytes or
    a refusal naming the rule, the parameter and its value; nothing runs when refused."""
    rk = rows_kernel()
    for be in backends():
        args = rows_args(lo, hi)

        def go(be: Any = be, args: dict[str, Any] = args) -> bytes:
            be.run_kernel(rk, args, 64, 32, **GRID)
            return bytes(args["w"].tobytes())

        if exact_or_refused(go, lo, hi, param=which(lo)) is not None:
            assert not args["w"].any(), be.name  # refused before anything ran
    args = rows_args(lo, hi)

    def interp() -> bytes:
        run_kernel(rk, args, 64, 32, **GRID)
        return bytes(args["w"].tobytes())

    exact_or_refused(interp, lo, hi, param=which(lo))


@pytest.mark.parametrize(("lo", "hi"), ENDS)
def test_lch25_rows_kernel_printed_parsed_and_sexp_keeps_its_condition(lo: int,
                                                                       hi: int) -> None:
    """TXT-35: the rows kernel's text (printed, parsed back) and its S-expression dump
    (read back) launch exactly as it does: refused at the ends of i32."""
    rk = rows_kernel()
    text = print_kernel(rk)
    back = parse_module(text).kernels[-1]
    assert print_kernel(back) == text
    dumped = from_sexp(to_sexp(rk))
    assert to_sexp(dumped) == to_sexp(rk)
    for k in (back, dumped):
        args = rows_args(lo, hi)

        def go(k: Kernel = k, args: dict[str, Any] = args) -> bytes:
            run_kernel(k, args, 64, 32, **GRID)
            return bytes(args["w"].tobytes())

        assert exact_or_refused(go, lo, hi, param=which(lo)) is not None


def test_lch25_rows_kernel_inside_its_range_runs_every_iteration() -> None:
    """LCH-25 refuses only what the guard would skip: bounds two below the top (``i + 2``
    reaches MAX exactly) run, on every backend, with the nest's bytes."""
    lo, hi = INSIDE
    rk = rows_kernel()
    for be in backends():
        args = rows_args(lo, hi)
        be.run_kernel(rk, args, 64, 32, **GRID)
        assert args["w"].tobytes() == reference(lo, hi), be.name


# -------------------------------------------------------------- a printed program, edited


def rows_only_program() -> str:
    """The offloaded program's text with its rows-or-flat ``if`` replaced by the rows
    launch alone (a user editing the printed program)."""
    lines = print_program(offloaded()).splitlines()
    begin = lines.index("begin")
    start = next(n for n, ln in enumerate(lines) if n > begin and ln.startswith("  if "))
    rows = next(n for n, ln in enumerate(lines) if ln.strip().startswith("launch p_loop_rows"))
    assert lines[rows - 1].strip() == "else"
    return "\n".join([*lines[:start], lines[rows], *lines[rows + 1:]]) + "\n"


@pytest.mark.parametrize(("lo", "hi"), ENDS)
def test_lch25_edited_program_launching_the_rows_kernel_is_refused(lo: int, hi: int) -> None:
    """LCH-25 through a host program (printed, edited, parsed back): the host
    interpreter, and every device backend, give the unoptimised program's bytes or refuse
    at the launch statement."""
    text = rows_only_program()
    q = parse_program(text, "edited.sk")
    assert print_program(parse_program(print_program(q))) == print_program(q)
    msg = exact_or_refused(lambda: run_program(q, {"lo": lo, "hi": hi}).array("w").tobytes(),
                           lo, hi, param=which(lo))
    assert msg is not None and msg.startswith("edited.sk:"), msg
    for be in backends()[1:]:
        exact_or_refused(lambda be=be: run_program(q, {"lo": lo, "hi": hi}, device=be,
                                                   check_races=False).array("w").tobytes(),
                         lo, hi, param=which(lo))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("lo", "hi"), ENDS)
def test_lch25_sarek_py_run_of_the_edited_program(tmp_path: Path, lo: int, hi: int) -> None:
    """LCH-25 through ``sarek-py run``: the edited program is refused with a located
    error naming the rule, the parameter and its value (exit status 1); the original
    program runs."""
    def preset(text: str) -> str:  # --size takes no negative value: the initial values
        out = text.replace("var lo : i32 = 0;", f"var lo : i32 = {lo};")
        return out.replace("var hi : i32 = 31;", f"var hi : i32 = {hi};")

    edited = tmp_path / "edited.sk"
    edited.write_text(preset(rows_only_program()))
    assert edited.read_text().count(f" = {lo};") == 1
    rc, _, err = cli("run", str(edited))
    assert rc == 1, err
    head = err.splitlines()[0]
    assert head.startswith(f"{edited}:") and ": error: " in head, err
    assert "LCH-25" in err and which(lo) in err and str(lo if lo == MIN else hi) in err, err
    whole = tmp_path / "whole.sk"
    whole.write_text(preset(print_program(offloaded())))
    rc, out, err = cli("run", str(whole))
    assert rc == 0, err


def test_lch25_program_check_names_a_rows_kernel_condition_in_words() -> None:
    """TXT-35: the rows kernel's header carries its condition, in the bounds' terms."""
    text = print_kernel(rows_kernel())
    assert "requires range(lo_1 >= -2147483647, hi_1 <= 2147483645)" in text, text


# ------------------------------------------------------------- the kernel-mode CLI, fusion


def test_lch25_sarek_py_run_of_the_rows_kernel_itself(tmp_path: Path) -> None:
    """LCH-25 through ``sarek-py run --kernel``: the rows kernel's text, launched with
    ``hi_1`` at the top of i32, is refused (located at the kernel, exit status 1)."""
    src = tmp_path / "rows.sk"
    src.write_text(print_kernel(rows_kernel()))
    base = ["run", str(src), "--kernel", "p_loop_rows", "--grid", "1x2", "--block", "32",
            "--size", "w=2x32", "--size", f"lo={MAX - 31}", "--size", f"lo_1={MAX - 31}",
            "--size", "lo_0=0", "--size", "hi_0=1"]
    rc, _, err = cli(*base, "--size", f"hi_1={MAX}")
    assert rc == 1 and err.startswith(f"{src}:") and "[LCH-25]" in err, err
    assert f"hi_1 = {MAX}" in err and "hi_1 <= 2147483645" in err, err
    rc, _, err = cli(*base, "--size", f"hi_1={MAX - 2}")
    assert rc == 0, err


@pytest.mark.parametrize("role", ["producer", "consumer"])
def test_ef18_a_rows_kernel_is_not_fused(role: str) -> None:
    """EF-18: epilogue fusion refuses a producer or consumer that carries conditions
    over its scalar arguments, naming the kernel and the conditions (the fused kernel
    would not check them)."""
    from sarek_py.fusion.epilogue.fuse_kernels import fuse
    from sarek_py.fusion.refusal import FusionRefused

    rk = rows_kernel()
    other = parse_module("""
kernel copy(w : i32[2, 32], v : i32[2, 32]) =
  let t = global_thread_id in
  if t < 64 then v[t / 32, t % 32] <- w[t / 32, t % 32]
""").kernels[0]
    pair = (rk, other) if role == "producer" else (other, rk)
    with pytest.raises(FusionRefused, match=rf"\[EF-18\] .*{role} p_loop_rows requires "
                       r"range\(lo_1 >= -2147483647, hi_1 <= 2147483645\)"):
        fuse(*pair, shared={"w": "w"})


# ------------------------------------------------------------------ the text form (TXT-35)

HEAD = "kernel k(a : i32[], x : f32, n : i32, m : i64, b : bool)\n  requires "
BODY = " =\n  a[0] <- 1\n"


@pytest.mark.parametrize(("clause", "culprit", "why"), [
    ("range(a[0] > 0)", "a[0]", "a Read"),
    ("range(x > 0.0f)", "x", "parameter x is f32"),
    ("range(n + 1)", "+ 1", "is a bool expression, not i32"),
    ("range(thread_idx_x > 0)", "thread_idx_x", "thread_idx_x"),
    ("range(i64(n) > m, f32(n) > x)", "f32(n)", "a conversion to f32"),
    ("range(length(a, 0) > 0)", "length", "a Length"),
])
def test_txt35_a_condition_that_is_not_one_is_a_located_error(clause: str, culprit: str,
                                                             why: str) -> None:
    """TXT-35, LCH-25: a ``range(...)`` condition that reads memory, a float, a thread
    intrinsic, or is not bool, is a located ParseError at its culprit, with a caret."""
    from sarek_py.ir.diagnostics import ParseError

    text = HEAD + clause + BODY
    with pytest.raises(ParseError) as info:
        parse_module(text, "k.sk")
    err = str(info.value)
    assert err.startswith("k.sk:2:") and why in err, err
    col = info.value.loc.col if info.value.loc is not None else 0
    assert text.splitlines()[1][col - 1:].startswith(culprit), (err, col)
    assert err.splitlines()[2].strip() == "^", err


@pytest.mark.parametrize(("clause", "why"), [
    ("same(a, a)", "same(...)"),
    ("", "'fused(producer, consumer, array, count)' or 'range(condition, …)'"),
    ("range()", "expected"),
    ("range(q > 0)", "unknown name 'q'"),
])
def test_txt35_malformed_clauses_are_located_errors(clause: str, why: str) -> None:
    """TXT-35: ``same(...)`` without a fused step, an empty ``requires``, an empty
    ``range()`` and an unknown name are located errors."""
    from sarek_py.ir.diagnostics import ParseError

    with pytest.raises(ParseError, match=None) as info:
        parse_module(HEAD + clause + BODY, "k.sk")
    assert str(info.value).startswith("k.sk:2:") and why in str(info.value), str(info.value)


def test_txt35_every_condition_form_reads_back_and_is_checked_like_the_interpreter(
) -> None:
    """TXT-35, LCH-25: conditions of every allowed form (i32 that wraps, i64, bool,
    ``?:``, min/max/abs, conversions, several ``range`` items merged, with a fused clause)
    print, parse and print identically, dump losslessly, and decide a launch as the
    interpreter computes them (a kernel that stores each condition's value)."""
    conds = ["n + 1 > n", "m * 2L >= i64(n)", "b || n == 0", "(n > 0 ? n : -n) < 100",
             "min(n, 5) == 5 && abs(n) > 2", "i32(m) != 7", "!b"]
    text = (HEAD + f"range({', '.join(conds[:3])}) range({', '.join(conds[3:])})" + BODY)
    k = parse_module(text).kernels[0]
    once = print_kernel(k)
    assert f"requires range({', '.join(conds)})" in once
    assert print_kernel(parse_module(once).kernels[0]) == once
    assert to_sexp(from_sexp(to_sexp(k))) == to_sexp(k)
    stores = "; ".join(f"a[{n}] <- {c} ? 1 : 0" for n, c in enumerate(conds))
    probe = parse_module(f"kernel probe(a : i32[], x : f32, n : i32, m : i64, b : bool) =\n"
                         f"  {stores}\n").kernels[0]
    for n, m, b in [(MAX, 3, False), (7, 2**62, True), (MIN, -1, False), (9, 3, True),
                    (0, 7, False), (-9, 5, False)]:
        out = np.zeros(len(conds), np.int32)
        run_kernel(probe, {"a": out, "x": 0.0, "n": n, "m": m, "b": b}, 1)
        args = {"a": np.zeros(1, np.int32), "x": 0.0, "n": n, "m": m, "b": b}
        try:
            run_kernel(k, args, 1)
            refused = None
        except SarekError as exc:
            refused = str(exc)
        first_false = next((c for c, v in zip(conds, out, strict=True) if not v), None)
        if first_false is None:
            assert refused is None, refused
        else:
            assert refused is not None and f"requires range({first_false})" in refused, (
                n, m, b, refused)
            assert "[LCH-25]" in refused, refused
            for name, value in (("n", str(n)), ("m", str(m)), ("b", str(b).lower())):
                if re.search(rf"\b{name}\b", first_false):  # each value it reads, named
                    assert f"{name} = {value}" in refused, (name, refused)


def test_lch25_a_dump_with_a_condition_that_is_not_one_is_refused_at_the_launch() -> None:
    """LCH-25: a kernel whose ``:ranges`` were edited in its S-expression dump to read an
    array is refused by ``check_kernel`` and, unchecked, at the launch, with the
    reason; never a traceback."""
    import attrs

    from sarek_py.ir.diagnostics import CheckError
    from sarek_py.ir.nodes import Binary, BinaryOp, Const, Read
    from sarek_py.ir.typecheck import check_kernel
    from sarek_py.ir.types import Scalar

    rk = rows_kernel()
    w = rk.params[0]
    read = Read(w, (Const(0, Scalar.I32), Const(0, Scalar.I32)))
    edited = attrs.evolve(rk, ranges=(Binary(BinaryOp.GT, read, Const(0, Scalar.I32)),))
    bad = from_sexp(to_sexp(edited))
    assert bad.ranges and isinstance(bad.ranges[0].lhs, Read)
    with pytest.raises(CheckError, match=r"range\(\.\.\.\) takes conditions"):
        check_kernel(bad)
    with pytest.raises(SarekError, match=r"\[LCH-25\] .*a Read"):
        run_kernel(bad, rows_args(0, 31), 64, 32, **GRID)


# ------------------------------------------------------------------------------ generator

FUZZ = bool(os.environ.get("SAREK_FUZZ"))
CASES = given(st.sampled_from(["top", "bottom", "inside"]), st.integers(0, 4),
              st.integers(1, 40), st.integers(-3, 3), st.integers(-3, 3), st.integers(-2, 2))


def bounds(end: str, d: int, width: int) -> tuple[int, int]:
    """``hi`` at ``MAX - d``, ``lo`` at ``MIN + d``, or both well inside i32."""
    if end == "top":
        return MAX - d - width + 1, MAX - d
    lo = MIN + d if end == "bottom" else -d
    return lo, lo + width - 1


def launches_hold(end: str, d: int, width: int, c1: int, c2: int, c3: int) -> bool:
    """One nest ``w[j, i - lo] <- (i + c1) * 3 + (i - c2 + c3) + j`` with bounds at and
    near the ends of i32: the offloaded program (the host's choice) is never refused and
    writes the interpreter's bytes; the program edited to launch the rows kernel alone
    writes them too, or is refused with LCH-25 — exactly when the bounds leave the range
    its guard admits (TIL-13). Returns whether it was refused."""
    lo, hi = bounds(end, d, width)
    src = f"""
program p
  var lo : i32 = 0; var hi : i32 = 0;
  var w : i32[2, 40];
begin
  parallel for (j = 0 to 1, i = lo to hi) do
    w[j, i - lo] <- (i + {c1}) * 3 + (i - {c2} + {c3}) + j
  done
end
"""
    p = parse_program(src)
    q = offload(p, block_size=32)
    ref = run_program(p, {"lo": lo, "hi": hi}).array("w").tobytes()
    assert run_program(q, {"lo": lo, "hi": hi}).array("w").tobytes() == ref
    lines = print_program(q).splitlines()
    begin = lines.index("begin")
    start = next(n for n, ln in enumerate(lines) if n > begin and ln.startswith("  if "))
    rows = next(n for n, ln in enumerate(lines) if ln.strip().startswith("launch p_loop_rows"))
    edited = parse_program("\n".join([*lines[:start], lines[rows], *lines[rows + 1:]]) + "\n")
    offs = [c1, -c2, c3 - c2]
    cmin, cmax = min(0, *offs), max(0, *offs)
    outside = (cmin < 0 and lo < MIN - cmin) or (cmax > 0 and hi > MAX - cmax)
    for be in [None, *backends()[1:]]:
        try:
            got = run_program(edited, {"lo": lo, "hi": hi}, device=be,
                              check_races=False).array("w").tobytes()
        except SarekError as exc:
            assert outside and "[LCH-25]" in str(exc), (lo, hi, c1, c2, c3, str(exc))
            continue
        assert not outside, (lo, hi, c1, c2, c3, "ran outside the admitted range")
        assert got == ref, (lo, hi, c1, c2, c3)
    return outside


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@CASES
def test_lch25_rows_launches_near_the_ends_generator(end: str, d: int, width: int, c1: int,
                                                    c2: int, c3: int) -> None:
    """TIL-13, LCH-25 (generator): the host's launches are never refused; a hand-made
    rows launch is exact or refused, refused exactly outside the guard's range."""
    launches_hold(end, d, width, c1, c2, c3)


@pytest.mark.slow
@settings(max_examples=400 if FUZZ else 30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@CASES
def test_lch25_rows_launches_near_the_ends_fuzz(end: str, d: int, width: int, c1: int,
                                               c2: int, c3: int) -> None:
    """TIL-13, LCH-25 at make fuzz's size (SAREK_FUZZ=1: 400 nests)."""
    launches_hold(end, d, width, c1, c2, c3)
