"""``min`` and ``max`` of floats as the interpreter computes them (specs/codegen.md CG-40).

C's ``fmin``/``fmax`` leave the sign of a zero result open when the operands are ``+0.0``
and ``-0.0`` (PoCL gives ``min(0.0, -0.0) = -0.0`` and ``min(-0.0, 0.0) = 0.0``), which
breaks the bitwise promise between backends. The IR's ``min``/``max`` of floats take
``-0.0`` below ``+0.0`` and a NaN operand yields the other one (``fmin``'s rule), and the
emitter calls a small function that says so::

    float sarek_min_f32(float a, float b) {
      return a == b ? (signbit(a) ? a : b) : fminf(a, b);
    }
"""

from __future__ import annotations

from sarek_py.codegen.dialect import Dialect
from sarek_py.ir.types import Scalar

#: a float min/max the code calls: its word and its type
MinMax = tuple[str, Scalar]


def minmax_name(word: str, t: Scalar) -> str:
    """The C name of ``min``/``max`` on float type ``t``: ``sarek_min_f32``."""
    return f"sarek_{word}_{t.value}"


def minmax_prelude(d: Dialect, used: set[tuple[str, Scalar]]) -> list[str]:
    """The float min/max functions used, one C chunk each, after a comment."""
    ordered = [(w, t) for t in (Scalar.F32, Scalar.F64) for w in ("min", "max")
               if (w, t) in used]
    if not ordered:
        return []
    out = ["// float min and max, CG-40: -0.0 is below +0.0 on every backend (C's fmin "
           "and fmax\n// leave it open); a NaN operand yields the other one\n"]
    for w, t in ordered:
        ct, fn = d.types[t], d.math[(w, t)]
        if t in d.reinterpret:
            # equal operands have equal bits but for the zeros: their AND is +0.0 when
            # one is +0.0 (max), their OR -0.0 when one is -0.0 (min) — a select a
            # vectorizer keeps, where signbit's branch ran 1.4x slower on PoCL
            to_int, to_float = d.reinterpret[t]
            op = "|" if w == "min" else "&"
            pick = f"{to_float}({to_int}(a) {op} {to_int}(b))"
        else:
            pick = "(signbit(a) ? a : b)" if w == "min" else "(signbit(a) ? b : a)"
        qual = f"{d.helper_qualifier} " if d.helper_qualifier else ""
        body = f"a == b ? {pick} : {fn}(a, b)"
        if d.name == "c":
            # NAT-42: glibc's fmin/fmax give a NaN for a signalling NaN operand; with the
            # NaNs settled first, the rest is a compare (which the vectorizer keeps)
            cmp = "<" if w == "min" else ">"
            body = f"isnan(a) ? b : isnan(b) ? a : a == b ? {pick} : a {cmp} b ? a : b"
        out.append(f"{qual}{ct} {minmax_name(w, t)}({ct} a, {ct} b) {{\n"
                   f"  return {body};\n}}\n")
    return out
