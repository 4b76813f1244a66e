"""Bad input, by hand: never a traceback, a hang or a dead process (issue 11, "Bad input").

One test per item of the issue's lists (tracebacks, hangs, silent accepts, artifacts); each
names the spec rule it checks. The CLI runs in-process through ``sarek_py.cli.main``: an
exception escaping ``main`` is a traceback, a wrong exit status is a silent accept.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from sarek_py.cli.main import main
from sarek_py.ir.diagnostics import SarekError

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"


def cli(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    """``sarek-py ARGV`` in-process: (status, stdout, stderr); an escaping exception fails."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    finally:
        sys.stdin = old_stdin
    assert "Traceback" not in err.getvalue()
    return rc, out.getvalue(), err.getvalue()


def located(err: str, path: Path | str, line: int | None = None) -> None:
    """``err`` starts with ``path:line:col: error:`` and shows a caret line."""
    head = err.splitlines()[0]
    prefix = f"{path}:" if line is None else f"{path}:{line}:"
    assert head.startswith(prefix) and ": error: " in head, err
    assert err.splitlines()[2].strip() == "^", err


def sub(*argv: str, timeout: float = 120) -> tuple[int, str, str]:
    """``sarek-py ARGV`` in a fresh process (not instrumented by the test run's typeguard,
    whose checks make walks of 1000-level trees take minutes): (status, stdout, stderr)."""
    exe = Path(sys.executable).with_name("sarek-py")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "sarek_py.cli"]
    r = subprocess.run(base + list(argv), capture_output=True, text=True, timeout=timeout,
                       errors="replace")
    assert r.returncode in (0, 1, 2) and "Traceback" not in r.stderr, r.stderr[-2000:]
    return r.returncode, r.stdout, r.stderr


def raises_type_error(fn: Callable[[], object], match: str) -> None:
    """``fn()`` raises a TypeError matching ``match`` — or, when the test run checks
    annotations (typeguard), the TypeCheckError that stops the call first."""
    with pytest.raises(Exception) as info:
        fn()
    if type(info.value).__name__ == "TypeCheckError":
        return
    assert isinstance(info.value, TypeError), info.value
    assert re.search(match, str(info.value)), str(info.value)


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    assert time.perf_counter() - t0 < seconds


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


STORE = "kernel k(y : {t}[]) =\n  y[0] <- {e}\n"

# ------------------------------------------------------------------------- tracebacks


@pytest.mark.parametrize("literal", ["9" * 5000, "9" * 5000 + "L", "0" * 4500 + "1",
                                     "0" * 4500 + "7L", "1." + "9" * 5000 + "f",
                                     "1." + "0" * 5000 + "1", "1e" + "9" * 5000 + "f"])
def test_txt33_literals_past_the_int_string_limit_sk(tmp_path: Path, literal: str) -> None:
    """TXT-33: a literal of thousands of digits is read (or refused, located) in bounded
    time, never a ValueError from Python's 4300-digit int-string limit."""
    t = "f32" if literal.endswith("f") else ("i64" if literal.endswith("L") else "i32")
    if literal.startswith("1.") and not literal.endswith("f"):
        t = "f64"
    f = write(tmp_path, "big.sk", STORE.format(t=t, e=literal))
    with within(5):
        rc, _, err = cli("check", str(f))
    if rc:
        located(err, f, 2)
        assert "does not fit" in err or "overflows" in err
        assert len(err.splitlines()[0]) < 400  # the literal is shortened in the message


def test_txt33_literal_past_the_limit_in_launches(tmp_path: Path) -> None:
    """TXT-33 / LCH-22: the same in a .launches file (a thread count and an argument)."""
    sk = tmp_path / "scale_relu.sk"
    shutil.copy(EX / "scale_relu.sk", sk)
    text = (EX / "scale_relu.launches").read_text()
    for bad in (text.replace("threads n", "threads " + "9" * 5000, 1),
                text.replace("2.0f", "2." + "0" * 5000 + "f", 1)):
        (tmp_path / "scale_relu.launches").write_text(bad)
        rc, out, err = cli("explain", str(sk))
        assert rc in (0, 1), err
        if rc:
            located(err, tmp_path / "scale_relu.launches", 3)


def test_fe22_literal_past_the_limit_in_py(tmp_path: Path) -> None:
    """FE-22: a .py file whose literal Python cannot convert is a located error."""
    f = write(tmp_path, "big.py", "from sarek_py.frontend import Vec, i32, kernel\n\n\n"
              "@kernel\ndef k(y: Vec[i32]):\n    y[0] = " + "9" * 5000 + "\n")
    rc, _, err = cli("check", str(f))
    assert rc == 1
    located(err, f, 6)


def test_int24_block_past_int32_in_the_interpreter() -> None:
    """INT-24: a block size past i32 (the thread intrinsics' type) is refused by the
    interpreter, not an OverflowError from numpy."""
    rc, _, err = cli("run", str(EX / "block_reduce.sk"), "-k", "block_sum", "-n", "4",
                     "--block", "3000000000")
    assert rc == 1 and "1..2147483647" in err, err
    from sarek_py.ir.interp import run_kernel
    from sarek_py.ir.parser import parse_module

    k = parse_module((EX / "saxpy.sk").read_text()).kernel("saxpy")
    args = {"x": np.zeros(4, np.float32), "y": np.zeros(4, np.float32),
            "a": np.float32(1), "n": np.int32(4)}
    with pytest.raises(SarekError, match="1..2147483647"):
        run_kernel(k, args, 4, 2 ** 32)


def _pair() -> tuple[object, object]:
    from sarek_py.ir.parser import parse_module

    m = parse_module((EX / "scale_relu.sk").read_text())
    return m.kernel("scale"), m.kernel("relu")


@pytest.mark.parametrize("bad", ["producer", "consumer", "shared_none", "shared_list",
                                 "shared_ints", "p_array"])
def test_ef17_fuse_arguments_of_the_wrong_kind(bad: str) -> None:
    """EF-17: fuse() given non-kernels, shared=None or a list: a TypeError that says what
    it wants (not an AttributeError from inside)."""
    from sarek_py.fusion.epilogue.fuse_kernels import fuse

    p, c = _pair()
    kw: dict[str, object] = {"shared": {"tmp": "tmp"}}
    args: list[object] = [p, c]
    if bad == "producer":
        args[0] = 3
    elif bad == "consumer":
        args[1] = "relu"
    elif bad == "shared_none":
        kw["shared"] = None
    elif bad == "shared_list":
        kw["shared"] = ["tmp"]
    elif bad == "shared_ints":
        kw["shared"] = {1: 2}
    else:
        kw["p_array"] = 5
    raises_type_error(lambda: fuse(*args, **kw), r"^fuse\(\): ")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["1abc", "a b", "kernel", "a;b", "", "sqrt",
                                  "global_thread_id"])
def test_ef17_fuse_name_that_does_not_parse(name: str) -> None:
    """EF-17 / TXT-34: a fused kernel's name must read back as .sk text."""
    from sarek_py.fusion.epilogue.fuse_kernels import fuse

    p, c = _pair()
    with pytest.raises(ValueError, match="name"):
        fuse(p, c, shared={"tmp": "tmp"}, name=name)  # type: ignore[arg-type]


def _source(tmp: Path, name: str, body: str) -> Path:
    return write(tmp, name, "import functools\nimport math\n\nfrom sarek_py.frontend import "
                 "Vec, f32, i32, kernel\n\n\n" + body)


def _import(path: Path) -> object:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"hand_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fe20_kernel_of_a_non_function(tmp_path: Path) -> None:
    """FE-20: kernel(3), kernel(functools.partial(f)), kernel(print) are TypeErrors that
    say what @kernel takes (a lambda is refused, located, when translated: FE-1)."""
    from sarek_py.frontend import kernel

    def f(y: object) -> None:
        pass

    for bad in (3, functools.partial(f), print):
        raises_type_error(lambda: kernel(bad), "function defined with def")  # noqa: B023


@pytest.mark.parametrize("name", ["5", "'1abc'", "'a b'", "'kernel'", "'a;b'", "''"])
def test_fe20_kernel_name_that_does_not_parse(tmp_path: Path, name: str) -> None:
    """FE-20 / TXT-34: @kernel(name=...) must be a name the text form reads back; a non-str
    is a TypeError, a bad string a located error at the function."""
    f = _source(tmp_path, "named.py", f"@kernel(name={name})\ndef k(y: Vec[f32]):\n"
                "    y[0] = 1.0\n")
    if name == "5":
        raises_type_error(lambda: _import(f), "name")
        return
    with pytest.raises(SarekError) as info:
        _import(f)
    assert info.value.loc is not None and info.value.loc.line == 7  # the decorator's line
    rc, _, err = cli("check", str(f))
    assert rc == 1 and "name=" in err


@pytest.mark.parametrize("expr", ["-math.inf", "math.inf", "float('inf')", "-float('inf')",
                                  "math.nan", "np_inf"])
def test_fe21_f32_context_with_infinity(tmp_path: Path, expr: str) -> None:
    """FE-21: an infinity or NaN from Python in an f32 context is that f32 value, not a
    ValueError from Fraction('inf')."""
    prefix = "np_inf = float('inf')\n\n\n" if expr == "np_inf" else ""
    f = _source(tmp_path, "inf.py", prefix + f"@kernel\ndef k(y: Vec[f32]):\n"
                f"    y[0] = {expr}\n")
    mod = _import(f)
    rc, out, err = cli("check", str(f))
    if "float(" in expr:  # float(x) is outside the kernel subset: a located refusal
        assert rc == 1
        located(err, f)
        return
    assert rc == 0, err
    y = np.zeros(1, np.float32)
    mod.k[1, 1](y, backend="interp")  # type: ignore[attr-defined]
    want = float(eval(expr.replace("np_inf", "math.inf")))
    assert (math.isnan(y[0]) and math.isnan(want)) or y[0] == want


@pytest.mark.parametrize("threads,block,error", [
    (np.int64(8), 256, None), (np.int32(8), np.int64(128), None),
    (8.0, 256, TypeError), (True, 256, TypeError), ("8", 256, TypeError),
    (8, 0, ValueError), (8, 2.5, TypeError), (-1, 256, ValueError),
    (8, 2 ** 31, ValueError)])
def test_lch23_fuse_launches_counts(threads: object, block: object,
                                   error: type[Exception] | None) -> None:
    """LCH-23: fuse_launches accepts numpy-integer counts and refuses floats, bools and
    out-of-range counts with a TypeError/ValueError (not an AssertionError)."""
    from sarek_py.fusion.epilogue.sequence import fuse_launches
    from sarek_py.ir.host.launch import KernelLaunch

    p, c = _pair()
    x, t, y = (np.ones(8, np.float32) for _ in range(3))

    def launches() -> list[KernelLaunch]:
        return [KernelLaunch(p, threads, block,  # type: ignore[arg-type]
                             {"x": x, "tmp": t, "a": np.float32(2), "n": np.int32(8)}),
                KernelLaunch(c, threads, block,  # type: ignore[arg-type]
                             {"tmp": t, "y": y, "n": np.int32(8)})]

    if error is not None:
        with pytest.raises(error, match="KernelLaunch"):
            launches()
        return
    _, report = fuse_launches(launches())
    assert report[0].fused


def _deep(kind: str, n: int) -> str:
    if kind == "sum":
        return STORE.format(t="f32", e=" + ".join(["y[1]"] * n))
    if kind == "neg":
        return STORE.format(t="f32", e="- " * n + "y[1]")
    if kind == "paren":
        return STORE.format(t="f32", e="(" * n + "y[1]" + ")" * n)
    if kind == "if":
        return ("kernel k(y : f32[]) =\n  let i = global_thread_id in\n"
                + "  if i < 3 then\n" * n + "  y[0] <- 1.0f\n")
    if kind == "let":
        return ("kernel k(y : f32[]) =\n"
                + "".join(f"  let a{i} = y[1] in\n" for i in range(n)) + "  y[0] <- a0\n")
    raise AssertionError(kind)


@pytest.mark.parametrize("kind,n", [("sum", 900), ("neg", 900), ("paren", 3000),
                                    ("if", 900), ("let", 900)])
def test_txt32_deep_nesting_within_the_bounds_works(tmp_path: Path, kind: str,
                                                     n: int) -> None:
    """TXT-32: thousands of nested parentheses and ~1000-level expressions, statements
    and lets parse, check, print, emit and run (no 'nested too deeply' near 65 levels)."""
    f = write(tmp_path, "deep.sk", _deep(kind, n))
    for argv in (["check"], ["print", "--sexp"], ["emit", "--target", "opencl"],
                 ["run", "-k", "k", "-n", "1", "--size", "y=2"], ["opt", "-p", "inline"]):
        with within(60):
            rc, out, err = sub(argv[0], str(f), *argv[1:])
        assert rc == 0, (argv, err[:300])


@pytest.mark.parametrize("kind,n", [("sum", 1200), ("neg", 6000), ("paren", 6000),
                                    ("if", 1200), ("let", 1200)])
def test_txt32_nesting_past_the_bounds_is_located(tmp_path: Path, kind: str, n: int) -> None:
    """TXT-32: past the bounds, a located error (file:line:col, caret) in bounded time."""
    f = write(tmp_path, "deep.sk", _deep(kind, n))
    with within(30):
        rc, _, err = sub("check", str(f))
    assert rc == 1
    located(err, f)
    assert "nested more than" in err


@pytest.mark.parametrize("kind", ["sum", "neg"])
def test_fe21_deep_python_expressions(tmp_path: Path, kind: str) -> None:
    """FE-21: 500-term flat sums and 500 nested unary minus in the front end translate,
    check, run and emit (no RecursionError); past the bound a located error."""
    expr = "+".join(["y[1]"] * 500) if kind == "sum" else "-" * 500 + "y[1]"
    f = _source(tmp_path, f"deep_{kind}.py", "@kernel\ndef k(y: Vec[f32]):\n    if "
                "global_thread_id() == 0:\n        y[0] = " + expr + "\n")
    f.write_text(f.read_text().replace("Vec, f32", "Vec, f32, global_thread_id"))
    # the library calls, in a fresh (uninstrumented) interpreter
    driver = write(tmp_path, "drive.py", f"""
import importlib.util, numpy as np
spec = importlib.util.spec_from_file_location("deep_mod", {str(f)!r})
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
y = np.ones(4, np.float32)
mod.k[4, 4](y, backend="interp")
print(float(y[0]), "__kernel" in mod.k.source("opencl"))
""")
    r = subprocess.run([sys.executable, str(driver)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [("500.0" if kind == "sum" else "1.0"), "True"]
    assert sub("check", str(f))[0] == 0
    g = _source(tmp_path, f"deeper_{kind}.py", "@kernel\ndef k(y: Vec[f32]):\n    y[0] = "
                + "+".join(["y[1]"] * 1500) + "\n")
    rc, _, err = sub("check", str(g))
    assert rc == 1 and "nested more than" in err
    located(err, g)


def test_txt32_long_operator_chain_is_refused_before_any_walk(tmp_path: Path) -> None:
    """TXT-32 (found by the mutation fuzz): a 5200-term sum of bracketed expressions is
    refused at the operator that passes the bound, before the parser types the literals
    of the whole chain (that walk is quadratic: 30 s before)."""
    term = "(0.2f * (src[y, x] + src[y - 1, x] + src[y, x - 1]))"
    f = write(tmp_path, "chain.sk", "kernel k(src : f32[,], dst : f32[,]) =\n"
              "  let y = 1 in\n  let x = 1 in\n  dst[y, x] <- " + " + ".join([term] * 5200)
              + "\n")
    with within(15):
        rc, _, err = sub("check", str(f))
    assert rc == 1 and "nested more than 1000" in err
    located(err, f, 4)


def test_txt32_deep_chain_emits_in_bounded_time(tmp_path: Path) -> None:
    """TXT-32 (found by the mutation fuzz): 900 nested unary minus in a loop-carried
    assignment emit as CUDA in seconds (the type of each level was recomputed from the
    bottom at every level: 60 s before)."""
    src = (EX / "block_reduce.sk").read_text()
    assert "stride := stride / 2" in src
    f = write(tmp_path, "br.sk", src.replace("stride := stride / 2",
                                             "stride := " + "- " * 900 + "(stride / 2)"))
    with within(20):
        rc, out, err = sub("emit", str(f), "--target", "cuda")
    assert rc == 0, err[-500:]


def test_fe22_python_warnings_do_not_come_first(tmp_path: Path) -> None:
    """FE-22 (found by the mutation fuzz): Python's compile-time SyntaxWarning ("invalid
    decimal literal") is not printed before the located error."""
    f = write(tmp_path, "w.py", "from sarek_py.frontend import Vec, f32, kernel\n\n\n"
              "@kernel\ndef k(y: Vec[f32]):\n    i = 2147483648if 1 < 2:\n")
    rc, _, err = sub("check", str(f))
    assert rc == 1
    located(err, f, 6)


def test_fe22_a_warning_in_a_kernel_that_imports_is_not_printed(tmp_path: Path) -> None:
    """FE-22 (found by `make fuzz`, 2026-12-02: a mutant of examples/stencil2d.py with
    ``y > 0and y < h - 1``): a kernel whose source only warns (Python's "invalid decimal
    literal") imports and translates; the translation's own parse of the kernel's source
    printed the warning as ``<unknown>:7: SyntaxWarning: …`` before the CLI's output."""
    f = write(tmp_path, "w.py", "from sarek_py.frontend import Vec, f32, i32, kernel\n\n\n"
              "@kernel\ndef k(y: Vec[f32], n: i32):\n    i = 0\n"
              "    if n > 0and n < 9:\n        y[i] = 1.0\n")
    rc, out, err = sub("check", str(f))
    assert rc == 0, err
    assert "Warning" not in err and "<unknown>" not in err, err


def test_fe22_non_utf8_byte_in_a_python_file(tmp_path: Path) -> None:
    """FE-22 (found by the mutation fuzz): a byte that is not UTF-8 in a comment of a .py
    file is located at the byte (it was "could not get source code", unlocated)."""
    f = tmp_path / "u.py"
    f.write_bytes(b"from sarek_py.frontend import Vec, f32, kernel\n\n\n@kernel\n"
                  b"def k(y: Vec[f32]):\n    y[0] = 1.0  # \xff\n")
    rc, _, err = cli("check", str(f))
    assert rc == 1 and "invalid UTF-8 byte 0xff" in err
    located(err, f, 6)


@pytest.mark.parametrize("extent", ["--2147483649", "-+-4", "--256", "+-+-+8"])
def test_fe21_signed_integer_literals_in_constant_positions(tmp_path: Path,
                                                            extent: str) -> None:
    """FE-21 (found by the mutation fuzz): several signs before an integer literal where a
    constant is needed (a shared extent) were a ValueError from ast.literal_eval."""
    f = _source(tmp_path, "ext.py", "from sarek_py.frontend import shared\n\n\n@kernel\n"
                f"def k(y: Vec[f32]):\n    tile = shared(f32, {extent})\n"
                "    tile[0] = 1.0\n    y[0] = tile[0]\n")
    rc, _, err = cli("check", str(f))
    value = eval(extent)
    if value > 0:
        assert rc == 0, err
    else:
        assert rc == 1
        located(err, f)


# ------------------------------------------------------------------------------ hangs


def _nearest_f32(text: str) -> float:
    """The reference: exact decimal, nearest float32 by brute comparison (slow, exact)."""
    exact = Fraction(text)
    with np.errstate(over="ignore"):
        a = np.float32(float(exact))
        cands = [a, np.nextafter(a, np.float32(np.inf)), np.nextafter(a, np.float32(-np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(c.item()) - exact),
                                     int(c.view(np.uint32)) % 2))
    return float(best.item())


@pytest.mark.parametrize("text", ["1e-9999999f", "1e9999999f", "1e-99999999999999f",
                                  "0.0000001e-9999999f", "1e-9999999", "1e9999999"])
def test_txt33_huge_exponents_round_in_bounded_time(tmp_path: Path, text: str) -> None:
    """TXT-33: f32 literals with huge exponents (suffixed, or unsuffixed in an f32
    context) round to 0 or overflow, at once (they took 8 s to forever)."""
    f = write(tmp_path, "e.sk", STORE.format(t="f32", e=text))
    with within(3):
        rc, _, err = cli("check", str(f))
    if "-" in text:
        assert rc == 0, err
    else:
        assert rc == 1 and "overflows f" in err
        located(err, f, 2)


def test_txt33_bounded_rounding_agrees_with_exact_rounding() -> None:
    """TXT-33: the bounded conversion (800 digits and a sticky digit) rounds every
    decimal as the exact one does, halfway cases and subnormals included."""
    from sarek_py.ir.lexer import f32_from_decimal

    rng = np.random.default_rng(11)
    cases = ["1.4e-45", "7.006492321624085e-46", "7.006492321624086e-46",
             "3.4028235677973366e38", "3.4028234663852886e38", "16777217", "16777219"]
    for _ in range(400):
        f = np.float32(rng.uniform(-1, 1)) * np.float32(2.0) ** int(rng.integers(-149, 127))
        f = abs(f) if f != 0 else np.float32(1)
        g = np.nextafter(f, np.float32(np.inf))
        half = (Fraction(f.item()) + Fraction(g.item())) / 2  # a halfway point, exactly
        digits = f"{half.numerator * 10 ** 900 // half.denominator}"
        cases.append(f"{digits}e-900")
        cases.append(f"{digits}1e-901")  # just above the halfway point
        cases.append(f"{int(digits) - 1}e-900")  # just below
    for text in cases:
        want = _nearest_f32(text)
        if math.isinf(want) or abs(want) > 3.4028234663852886e38:
            continue
        assert f32_from_decimal(text) == want, text


def test_cli16_endless_input_is_capped() -> None:
    """CLI-16: reading an endless input (/dev/urandom, or a pipe that never ends) stops at
    the input bound with a clear error."""
    if not Path("/dev/urandom").exists():
        pytest.skip("no /dev/urandom")
    with within(20):
        rc, _, err = cli("check", "/dev/urandom")
    assert rc == 1 and "longer than" in err


def test_cli16_huge_file_is_refused_at_once(tmp_path: Path) -> None:
    """CLI-16 (found by the mutation fuzz): a 9 MB mutant of dense tokens took 17 s to
    lex before the first error; inputs past 4 MiB are refused before lexing, and a file
    just under the bound lexes in bounded time."""
    f = tmp_path / "big.sk"
    f.write_bytes(b"kernel k(y : f32[]) = y[0] <- " + b"! " * (2 << 20) + b"1.0f\n")
    with within(5):
        rc, _, err = cli("check", str(f))
    assert rc == 1 and "longer than 4 MiB" in err
    g = tmp_path / "py.py"
    g.write_bytes(b"#" * (5 << 20))
    rc, _, err = cli("check", str(g))
    assert rc == 1 and "longer than 4 MiB" in err


def test_int23_allocations_checked_against_memory(tmp_path: Path) -> None:
    """INT-23: a declared extent of 2**31 elements (or a thread count that needs more
    memory than there is) is refused at once, naming what asked for the memory."""
    f = write(tmp_path, "big.sk", "kernel k(y : f32[2147483648]) =\n  y[0] <- 1.0f\n")
    with within(10):
        rc, _, err = cli("run", str(f), "-k", "k", "-n", "1")
    assert rc == 1 and "'y'" in err and "GiB" in err
    with within(10):
        rc, _, err = cli("run", str(EX / "saxpy.sk"), "-k", "saxpy", "-n", str(2 ** 31 - 1))
    assert rc == 1 and "memory" in err
    # found by the mutation fuzz: a shared array of 2**31 f32 (8 GiB, and as much again
    # for the race checker's shadows) ran for a minute before failing
    src = (EX / "block_reduce.sk").read_text()
    assert "shared tile : f32[256]" in src
    g = write(tmp_path, "shared.sk", src.replace("shared tile : f32[256]",
                                                 "shared tile : f32[2147483648]"))
    with within(10):
        rc, _, err = cli("run", str(g), "-k", "block_sum", "-n", "8")
    assert rc == 1 and "shared array 'tile'" in err and "GiB" in err
    from sarek_py.ir.alloc import check_bytes

    with pytest.raises(SarekError, match="needs"):
        check_bytes(1 << 50, "a test allocation")
    check_bytes(1 << 20, "a small one")


# ---------------------------------------------------------------------- silent accepts


@pytest.mark.parametrize("name", ["1abc", "a b", "kernel", "a;b", "", "sqrt"])
def test_cli15_fuse_name_that_does_not_parse(name: str) -> None:
    """CLI-15 / TXT-34: `fuse --name` must give a name the fused text reads back with."""
    rc, out, err = cli("fuse", str(EX / "scale_relu.sk"), "--producer", "scale",
                       "--consumer", "relu", "--name", name)
    assert rc == 2 and "--name" in err and out == ""


def test_cli15_explain_unknown_target() -> None:
    """CLI-15: `explain --target` names a known target, or says whether it contracts."""
    rc, _, err = cli("explain", str(EX / "scale_relu.sk"), "--target", "bogus")
    assert rc == 2 and "unknown target" in err
    rc, out, _ = cli("explain", str(EX / "scale_relu.sk"), "--target", "mygpu",
                     "--contraction", "off")
    assert rc == 0 and "fused" in out


@pytest.mark.parametrize("old,new,what", [("block 256", "block 0", "block size"),
                                          ("threads n block", "threads -1 block",
                                           "thread count")])
def test_lch22_launches_with_impossible_counts(tmp_path: Path, old: str, new: str,
                                               what: str) -> None:
    """LCH-22: a .launches file with `block 0` or `threads -1` is a located error, not a
    pair reported as fused."""
    sk = tmp_path / "scale_relu.sk"
    shutil.copy(EX / "scale_relu.sk", sk)
    (tmp_path / "scale_relu.launches").write_text(
        (EX / "scale_relu.launches").read_text().replace(old, new, 1))
    rc, out, err = cli("explain", str(sk))
    assert rc == 1 and what in err and "fused" not in out
    located(err, tmp_path / "scale_relu.launches", 3)


def test_cli15_emit_empty_kernel_name() -> None:
    """CLI-15: `emit --kernel ''` names no kernel: an error, not every kernel."""
    rc, out, err = cli("emit", str(EX / "saxpy.sk"), "--target", "cuda", "--kernel", "")
    assert rc == 1 and "no kernel ''" in err and out == ""


@pytest.mark.parametrize("option", [["--fusion-threshold", "nan"],
                                    ["--fusion-threshold", "-1"],
                                    ["--fusion-threshold", "inf"],
                                    ["-p", ""], ["-p", ","], ["--dump-dir", ""]])
def test_cli15_opt_options_that_mean_nothing(option: list[str]) -> None:
    """CLI-15: `opt --fusion-threshold nan|-1`, `-p ''`, `--dump-dir ''` are usage errors."""
    rc, out, err = cli("opt", str(EX / "advection_diffusion.sk"), *option)
    assert rc == 2 and option[0] in err and out == ""


def test_cli15_directory_named_like_a_file(tmp_path: Path) -> None:
    """CLI-15: a directory named x.py (or x.sk) is reported as a directory."""
    for name in ("x.py", "x.sk"):
        (tmp_path / name).mkdir()
        rc, _, err = cli("check", str(tmp_path / name))
        assert rc == 1 and "is a directory" in err


def test_fe22_python_syntax_error_is_located(tmp_path: Path) -> None:
    """FE-22: a Python syntax error in a .py file gives file:line:col and a caret."""
    f = write(tmp_path, "syn.py", "from sarek_py.frontend import kernel\n\n\n@kernel\n"
              "def k(x:\n    pass\n")
    rc, _, err = cli("check", str(f))
    assert rc == 1 and "syntax error" in err
    located(err, f, 5)
    g = write(tmp_path, "raises.py", "import sarek_py\n\nx = 1 / 0\n")
    rc, _, err = cli("check", str(g))
    assert rc == 1 and "ZeroDivisionError" in err
    assert err.startswith(f"{g}:3:")


# ---------------------------------------------------------------------------- artifacts


def test_lf20_dump_dir_sources_are_one_translation_unit(tmp_path: Path) -> None:
    """LF-20 / CG-16: --dump-dir's kernels.cu and kernels.cl define each helper once and
    compile as one file (nvcc --fmad=false -ptx; an OpenCL build on PoCL)."""
    out = tmp_path / "dump"
    rc, _, err = cli("opt", str(EX / "advection_diffusion.sk"), "-p", "fuse,offload",
                     "--dump-dir", str(out))
    assert rc == 0, err
    cu = (out / "kernels.cu").read_text()
    cl = (out / "kernels.cl").read_text()
    for src in (cu, cl):
        for helper in ("dif4", "adv4"):
            heads = [ln for ln in src.splitlines() if f" {helper}(" in ln
                     and not ln.startswith(" ") and ln.rstrip().endswith(("(", "{"))]
            assert len(heads) <= 1, (helper, heads)
    if shutil.which("nvcc"):
        r = subprocess.run(["nvcc", "--fmad=false", "-ptx", str(out / "kernels.cu"), "-o",
                            str(tmp_path / "k.ptx")], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
    try:
        import pyopencl as cl_mod

        ctx = cl_mod.Context(cl_mod.get_platforms()[0].get_devices()[:1])
    except Exception:  # no OpenCL here: nvcc above still checked the CUDA file
        return
    cl_mod.Program(ctx, cl).build(options=["-cl-fp32-correctly-rounded-divide-sqrt"])
