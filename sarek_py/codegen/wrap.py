"""Named wrapping integer operations (specs/codegen.md, CG-18, CG-25).

The interpreter's ``i32``/``i64`` ``+ - *``, unary ``-``, ``<<`` and ``abs`` wrap
(INT-4, INT-6, INT-10); C's signed ones are undefined on overflow. Where the range
analysis cannot prove that such an operation fits its type, the emitter calls a small C
function named after the operation and the type, computed through the unsigned type of
the same width, where C defines it to wrap::

    int sarek_sub_i32(int a, int b) {
      return (int)((unsigned int)a - (unsigned int)b);
    }

so the user's ``i - 1`` reads ``sarek_sub_i32(i, 1)``. Each function used is emitted once
per translation unit, before the functions that call it, after one comment saying what
they are. The conversion back to the signed type keeps the low bits on every target
(clang, which PoCL uses, and nvcc).
"""

from __future__ import annotations

from sarek_py.codegen.dialect import Dialect
from sarek_py.ir.nodes import BinaryOp
from sarek_py.ir.types import Scalar

#: the binary operators that wrap in the interpreter, by the word naming their function
BINARY_WORDS: dict[BinaryOp, str] = {BinaryOp.ADD: "add", BinaryOp.SUB: "sub",
                                     BinaryOp.MUL: "mul", BinaryOp.SHL: "shl",
                                     BinaryOp.DIV: "div", BinaryOp.MOD: "mod"}
#: every word, in the order the functions are emitted (``div``/``mod``: the dialects that
#: guard integer division, NAT-10)
WORDS: tuple[str, ...] = ("add", "sub", "mul", "neg", "shl", "abs", "div", "mod")

#: a wrapping operation: its word and its integer type
WrapOp = tuple[str, Scalar]


def wrap_name(word: str, t: Scalar) -> str:
    """The C name of wrapping operation ``word`` on ``t``: ``sarek_sub_i32``."""
    return f"sarek_{word}_{t.value}"


def wrap_function(d: Dialect, word: str, t: Scalar) -> str:
    """The C definition of wrapping operation ``word`` on ``t`` in dialect ``d``."""
    qual = (d.helper_qualifier + " ") if d.helper_qualifier else ""
    ct, u = d.type_name(t), d.unsigned[t]
    name = wrap_name(word, t)
    if word == "neg":
        head, body = f"{ct} x", f"({ct})-({u})x"
    elif word == "abs":
        # the most negative value is its own absolute value (INT-10)
        head = f"{ct} x"
        body = f"({ct})(x < 0 ? 0{d.unsigned_suffix[t]} - ({u})x : ({u})x)"
    elif word in ("div", "mod"):  # NAT-10: never the CPU's trap; the interpreter faults
        least = f"(-{2**63 - 1 if t is Scalar.I64 else 2**31 - 1}{suffix(d, t)} - 1{suffix(d, t)})"
        sym = "/" if word == "div" else "%"
        head = f"{ct} a, {ct} b"
        body = f"(b == 0 || (a == {least} && b == -1)) ? 0 : a {sym} b"
    elif word == "shl":  # the shift count keeps its own type (0 <= b < width, CG-7)
        head, body = f"{ct} a, {ct} b", f"({ct})(({u})a << b)"
    else:
        sym = {"add": "+", "sub": "-", "mul": "*"}[word]
        head, body = f"{ct} a, {ct} b", f"({ct})(({u})a {sym} ({u})b)"
    return f"{qual}{ct} {name}({head}) {{\n  return {body};\n}}\n"


def suffix(d: Dialect, t: Scalar) -> str:
    """The literal suffix of integer type ``t``."""
    return d.i64_suffix if t is Scalar.I64 else ""


def wrap_prelude(d: Dialect, used: set[WrapOp]) -> list[str]:
    """The wrapping functions used, one C chunk each (``i32`` first, then by operation),
    after a comment saying what they are; nothing when none is used."""
    if not used:
        return []
    head = ("// wrapping integer arithmetic, CG-18: the IR's i32/i64 + - * << and abs wrap, "
            "C's signed\n// ones must not overflow, so where that is not proved they are "
            "computed unsigned\n")
    ordered = [(w, t) for t in (Scalar.I32, Scalar.I64) for w in WORDS if (w, t) in used]
    return [head, *(wrap_function(d, w, t) for w, t in ordered)]
