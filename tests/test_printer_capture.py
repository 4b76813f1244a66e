"""Printed text means what the IR means: no binder captures another variable of its name
(TXT-31, HP-16; issue 11 item 3).

Variables are identified by id; passes may leave a ``let``, a loop index, a parallel-loop
local, a procedure dummy or a parameter named like another variable used in its scope
(``sarek-py opt`` moved a host scalar ``a`` under a kernel ``let a``). Each test builds
such an IR (parsing distinct names, then giving a binder the clashing name in memory),
prints it, reads the text back and checks that the program is the same up to names
(:func:`same_meaning`) and that it runs to the same bytes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from sarek_py.cli.opt import run_passes
from sarek_py.host.interp import run_program
from sarek_py.ir.host.program import Block, Program
from sarek_py.ir.host.text import parse_program, print_program
from sarek_py.ir.nodes import Const, HelperFunc, Kernel, Var
from sarek_py.ir.parser import parse_module
from sarek_py.ir.printer import print_kernel, print_module, print_stmt

# fields whose variables are bound there (the scopes the parsers build)
BINDERS = {("Let", "var"), ("For", "var"), ("HFor", "var"), ("LoopIndex", "var"),
           ("ParFor", "locals"), ("Param", "var"), ("Decl", "var"), ("Kernel", "params"),
           ("Kernel", "locals"), ("HelperFunc", "params")}


def alpha(x: object) -> object:
    """``x`` with variable names erased and each binding occurrence numbered afresh; a use
    is the number of the binding of its id seen last (depth first). Two programs with
    equal ``alpha`` have the same binding structure: they mean the same whatever names
    the text uses, and a captured use shows as a different number."""
    table: dict[int, int] = {}
    count = [0]

    def bind(v: Var) -> object:
        count[0] += 1
        table[v.id] = count[0]
        return ("bind", count[0], v.type, v.mutable)

    def go(y: Any, binder: bool = False) -> object:
        if isinstance(y, Var):
            if binder:
                return bind(y)
            if y.id not in table:
                return ("free", y.name, y.type)
            return ("use", table[y.id])
        if isinstance(y, tuple):
            return tuple(go(z, binder) for z in y)
        if isinstance(y, (frozenset, Const)) or not attrs.has(type(y)):
            return y
        if isinstance(y, Block) and len(y.stmts) == 1:
            return go(y.stmts[0])
        cls = type(y).__name__
        if isinstance(y, (Kernel, HelperFunc)):  # a closed item: its own scope
            saved = dict(table)
            out = (cls, *(go(getattr(y, f.name), (cls, f.name) in BINDERS)
                          for f in attrs.fields(type(y)) if f.eq))
            table.clear()
            table.update(saved)
            return out
        # the value's fields: not the location, nor a declaration's spelling (HP-44)
        fields = [f.name for f in attrs.fields(type(y)) if f.eq]
        first = [f for f in fields if (cls, f) in BINDERS]  # bound before their scope
        done = {f: go(getattr(y, f), True) for f in first}
        return (cls, *(done[f] if f in done else go(getattr(y, f)) for f in fields))

    return go(x)


def same_meaning(a: object, b: object) -> bool:
    return alpha(a) == alpha(b)


def rebind(node: Any, old: str, new: str) -> Any:
    """``node`` with every variable named ``old`` renamed ``new`` (same ids)."""
    def go(y: Any) -> Any:
        if isinstance(y, Var):
            return attrs.evolve(y, name=new) if y.name == old else y
        if isinstance(y, tuple):
            return tuple(go(z) for z in y)
        if not attrs.has(type(y)):
            return y
        return attrs.evolve(y, **{f.name: go(getattr(y, f.name)) for f in attrs.fields(type(y))
                                  if f.init and f.name != "loc"})
    return go(node)


def check_program(p: Program, arrays: tuple[str, ...], original: Program) -> str:
    """``p`` (``original`` with names changed in memory) prints as text that reads back
    to ``p`` up to names and runs as ``original`` does."""
    text = print_program(p)
    back = parse_program(text)
    assert same_meaning(p, back), text
    assert print_program(back) == text  # HP-11 still holds
    ref, got = run_program(original), run_program(back)
    for name in arrays:
        assert np.asarray(ref.values[name]).tobytes() == np.asarray(got.values[name]).tobytes()
    return text


BASE = """
program d
  var n : i32 = 5; var a : f64 = 3.0; var m : i32 = 2; var a_1 : f64 = 7.0; var s : i32;
  var g : f64[0:] allocatable; var h : f64[0:] allocatable;
  proc work(x : f64[0:] inout, q : i32 in)
    var loc : i32;
  =
    loc := q + m;
    parallel for (i = 0 to n) do x[i] <- x[i] + f64(loc) + a done
  end
begin
  allocate g[0:n]; allocate h[0:n];
  parallel for (i = 0 to n) do let b = 2.0 in g[i] <- a + b * f64(m) + a_1 done;
  parallel for (i = 0 to n) do for k = 0 to 2 do h[i] <- h[i] + f64(k * m) done done;
  parallel for (j = 0 to n) var w : f64 do (w := a; g[j] <- g[j] + w * f64(m)) done;
  for t = 1 to 2 do s := s + t * m done;
  call work(h, 4)
end
"""


@pytest.mark.parametrize(("old", "new"), [
    ("b", "a"),      # a kernel let captures a host scalar
    ("k", "m"),      # a kernel for index
    ("j", "m"),      # a parallel-loop index
    ("w", "a"),      # a parallel-loop local
    ("t", "m"),      # a sequential loop variable
    ("q", "m"),      # a procedure dummy captures the program's m used in the body
    ("loc", "a"),    # a procedure local captures the program's a
    ("b", "a_1"),    # the fresh name must avoid names in use (a_1 is declared)
])
def test_txt31_hp16_binder_does_not_capture(old: str, new: str) -> None:
    orig = parse_program(BASE)
    text = check_program(rebind(orig, old, new), ("g", "h", "s"), orig)
    fresh = set(re.findall(rf"\b{new}_\d+\b", text)) - set(re.findall(r"\w+", BASE))
    assert fresh, text  # the binder was renamed


def test_txt31_distinct_scopes_told_apart() -> None:
    """Two variables of one distinct scope with the same name (a program declaration, a
    parallel-loop local and an index, two dummies) are printed apart."""
    for old, new in (("s", "m"), ("w", "j"), ("q", "x")):
        orig = parse_program(BASE)
        check_program(rebind(orig, old, new), ("g", "h"), orig)


def test_txt31_shadowing_without_capture_prints_as_written() -> None:
    """A binder that captures nothing keeps its name (the user's text prints as is)."""
    src = BASE.replace("var loc : i32;", "var n : i32;").replace("loc := q + m", "n := q + m") \
        .replace("f64(loc)", "f64(n)").replace("to n) do x[i]", "to 3) do x[i]")
    p = parse_program(src)
    text = check_program(p, ("g", "h"), p)
    assert "n_1" not in text and "var n : i32;" in text
    assert print_program(parse_program(text)) == text


KSRC = """
pure fun h(p : f64, r : f64) : f64 = let z = r * 2.0 in return p + z
kernel k(x : f64[], y : f64[], c : f64) =
  let i = thread_idx_x in
  let v = x[i] * c in
  for e = 0 to 1 do y[i] <- h(v, f64(e)) + c done
"""


@pytest.mark.parametrize(("old", "new"), [("v", "c"), ("e", "c"), ("z", "p"), ("v", "x"),
                                          ("i", "c")])
def test_txt31_kernels_and_helpers(old: str, new: str) -> None:
    """Kernel lets and for indices named like a parameter the scope uses, a helper let
    named like the helper's parameter (kernel printer, TXT-31)."""
    m = parse_module(KSRC)
    m2 = rebind(m, old, new)
    text = print_module(m2)
    back = parse_module(text)
    assert same_meaning(m2, back), text
    k: Kernel = m2.kernels[0]
    assert same_meaning(k, parse_module(print_kernel(k)).kernels[0])


def test_txt31_print_stmt_free_variables() -> None:
    """A statement printed alone: its free variables are not captured by its binders."""
    m = parse_module(KSRC)
    body = rebind(m.kernels[0].body, "v", "c")
    text = print_stmt(body)
    assert "let c_1 = x[i] * c in" in text, text


CAPTURE_OPT = """
program d
  var n : i32 = 6; var a : f64 = 3.0; var i : i32 = 2;
  var u : f64[0:] allocatable; var f : f64[0:] allocatable; var g : f64[0:] allocatable;
begin
  allocate u[0:n + 1]; allocate f[0:n + 1]; allocate g[0:n + 1];
  parallel for (k = 0 to n + 1) do u[k] <- f64(k) * 0.5 done;
  for t = 1 to 3 do
    parallel for (k = 0 to n) do f[k] <- u[k] * a + f64(i) done;
    parallel for (i = 0 to n) do let a = 2.0 in u[i] <- f[i] + a done
  done
end
"""


def test_txt31_opt_output_reads_back_the_same() -> None:
    """The issue's case: loop fusion moves ``u[k] * a + f64(i)`` (host ``a`` and ``i``)
    under the consumer's ``let a`` and index ``i``; the printed program read back is the
    fused program (before the fix it read ``u_copy[i] <- u[i] * a + f64(i) + a``)."""
    fused = run_passes(parse_program(CAPTURE_OPT), ["fuse"], frozenset({"fuse"})).program
    text = print_program(fused)
    assert same_meaning(fused, parse_program(text)), text
    assert "u[i] * a + f64(i) + a" not in text


def test_txt31_opt_command_output_runs_the_same(tmp_path: Path) -> None:
    """``sarek-py opt`` then ``sarek-py run`` of its output: every array as the original."""
    src = tmp_path / "cap.sk"
    src.write_text(CAPTURE_OPT)
    out = subprocess.run([sys.executable, "-m", "sarek_py.cli", "opt", str(src)],
                         capture_output=True, text=True, check=True).stdout
    fused = parse_program(out)
    ref, got = run_program(parse_program(src.read_text())), run_program(fused)
    for name in ("u", "f", "g"):
        assert ref.array(name).tobytes() == got.array(name).tobytes(), (name, out)
