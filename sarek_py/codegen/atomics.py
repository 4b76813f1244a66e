"""Atomics as CUDA C and OpenCL C (specs/codegen.md CG-30, CG-31).

Each atomic of the IR (IR-33) becomes one C expression on the element's address whose
value is the old element:

* where the target has the operation natively and it computes what the interpreter does,
  its own function: CUDA's ``atomicAdd``/``atomicMin``/``atomicMax``/``atomicExch``/
  ``atomicCAS`` on ``int`` and ``long long`` (the 64-bit add, exchange and swap through
  ``unsigned long long``, the same bits), ``atomicExch`` on ``float``, ``atomicAdd`` on
  ``double`` (sm_60 and later); OpenCL 1.2's ``atomic_add`` … ``atomic_cmpxchg`` on
  ``int`` and ``atomic_xchg`` on ``float``, ``atom_add`` … on ``long`` (extensions
  ``cl_khr_int64_base_atomics``, and ``cl_khr_int64_extended_atomics`` for min/max);
* otherwise a small function, ``sarek_atomic_min_f32_global`` …, that loops on a
  compare-and-swap of the element's bit pattern (``int``/``long`` of the same width):
  the float operations, and CUDA's ``f32`` add, since the hardware's ``atom.add.f32``
  flushes subnormal inputs and results to zero where the interpreter does not. The
  loop starts from a guessed old value of zero bits (no plain read of an element other
  threads update atomically, which would be a data race), compares bit patterns (so it
  ends on NaNs), and computes the new value with the IR's operation (one rounded
  addition; for min/max IR-33's order, -0.0 below +0.0 and a NaN operand losing, not
  C's ``fmin``, which leaves signed zeros open), so its result is the interpreter's bit
  for bit.

Each such function is emitted once per unit, before the functions that call it. The
OpenCL ones exist once per address space (``__global``, ``__local``).
"""

from __future__ import annotations

import attrs

from sarek_py.codegen.dialect import Dialect
from sarek_py.ir.nodes import AtomicOp
from sarek_py.ir.types import MemSpace, Scalar

BASE64 = "cl_khr_int64_base_atomics"
EXTENDED64 = "cl_khr_int64_extended_atomics"

_CUDA_NATIVE = {AtomicOp.ADD: "atomicAdd", AtomicOp.MIN: "atomicMin",
                AtomicOp.MAX: "atomicMax", AtomicOp.EXCH: "atomicExch",
                AtomicOp.CAS: "atomicCAS"}
_CL32 = {AtomicOp.ADD: "atomic_add", AtomicOp.MIN: "atomic_min", AtomicOp.MAX: "atomic_max",
         AtomicOp.EXCH: "atomic_xchg", AtomicOp.CAS: "atomic_cmpxchg"}
_CL64 = {AtomicOp.ADD: "atom_add", AtomicOp.MIN: "atom_min", AtomicOp.MAX: "atom_max",
         AtomicOp.EXCH: "atom_xchg", AtomicOp.CAS: "atom_cmpxchg"}

_WORD = {AtomicOp.ADD: "add", AtomicOp.MIN: "min", AtomicOp.MAX: "max",
         AtomicOp.EXCH: "exch", AtomicOp.CAS: "cas"}


@attrs.frozen
class AtomicLoop:
    """A compare-and-swap loop function: operation, float type, address space (OpenCL)."""

    op: AtomicOp
    elem: Scalar
    space: MemSpace | None  # None on CUDA (one generic pointer)

    def name(self) -> str:
        where = "" if self.space is None else f"_{self.space.value}"
        return f"sarek_atomic_{_WORD[self.op]}_{self.elem.value}{where}"


@attrs.frozen
class AtomicC:
    """The C of one atomic: the expression, the loop function it calls (if any) and the
    OpenCL extensions it needs, each with the reason."""

    text: str
    loop: AtomicLoop | None = None
    extensions: tuple[str, ...] = ()


def atomic_c(d: Dialect, op: AtomicOp, elem: Scalar, space: MemSpace, ptr: str,
             value: str, compare: str | None) -> AtomicC:
    """``op`` on the element at C pointer ``ptr`` with operands ``value`` (and
    ``compare`` for a compare-and-swap), in dialect ``d``."""
    if d.name == "cuda":
        return _cuda(op, elem, ptr, value, compare)
    return _opencl(op, elem, space, ptr, value, compare)


def _args(value: str, compare: str | None) -> str:
    return value if compare is None else f"{compare}, {value}"


def _cuda(op: AtomicOp, elem: Scalar, ptr: str, value: str, compare: str | None) -> AtomicC:
    fn = _CUDA_NATIVE[op]
    if elem is Scalar.I32:
        return AtomicC(f"{fn}({ptr}, {_args(value, compare)})")
    if elem is Scalar.I64:
        if op in (AtomicOp.MIN, AtomicOp.MAX):  # long long overloads (sm_35 and later)
            return AtomicC(f"{fn}({ptr}, {value})")
        u = "unsigned long long"
        cargs = [f"({u})({value})"] if compare is None else [f"({u})({compare})",
                                                             f"({u})({value})"]
        return AtomicC(f"(long long){fn}(({u}*){ptr}, {', '.join(cargs)})")
    if elem is Scalar.F32 and op is AtomicOp.EXCH:
        return AtomicC(f"atomicExch({ptr}, {value})")
    if elem is Scalar.F64 and op is AtomicOp.EXCH:
        u = "unsigned long long"
        return AtomicC(f"__longlong_as_double((long long)atomicExch(({u}*){ptr}, "
                       f"({u})__double_as_longlong({value})))")
    loop = AtomicLoop(op, elem, None)
    return AtomicC(f"{loop.name()}({ptr}, {_args(value, compare)})", loop)


def _opencl(op: AtomicOp, elem: Scalar, space: MemSpace, ptr: str, value: str,
            compare: str | None) -> AtomicC:
    if elem is Scalar.I32:
        return AtomicC(f"{_CL32[op]}({ptr}, {_args(value, compare)})")
    if elem is Scalar.F32 and op is AtomicOp.EXCH:
        return AtomicC(f"atomic_xchg({ptr}, {value})")
    if elem is Scalar.I64:
        ext = (BASE64, EXTENDED64) if op in (AtomicOp.MIN, AtomicOp.MAX) else (BASE64,)
        return AtomicC(f"{_CL64[op]}({ptr}, {_args(value, compare)})", None, ext)
    if elem is Scalar.F64 and op is AtomicOp.EXCH:
        return AtomicC(f"as_double(atom_xchg((volatile {_space(space)} long*){ptr}, "
                       f"as_long({value})))", None, (BASE64,))
    loop = AtomicLoop(op, elem, space)
    needs: tuple[str, ...] = (BASE64,) if elem is Scalar.F64 else ()
    return AtomicC(f"{loop.name()}({ptr}, {_args(value, compare)})", loop, needs)


def _space(space: MemSpace) -> str:
    return "__local" if space is MemSpace.SHARED else "__global"


def _new(op: AtomicOp) -> str:
    """The new element, as C, from the old one ``o`` and the operand ``v`` (IR-33: a
    float min/max takes ``v`` when strictly below/above ``o``, when ``o`` is a NaN and
    ``v`` is not, or for -0.0 below +0.0 — C's ``fmin`` leaves signed zeros open)."""
    if op is AtomicOp.ADD:
        return "o + v"
    nan = "(isnan(o) && !isnan(v))"
    if op is AtomicOp.MIN:
        return f"(v < o || {nan} || (v == o && signbit(v) && !signbit(o))) ? v : o"
    assert op is AtomicOp.MAX
    return f"(v > o || {nan} || (v == o && !signbit(v) && signbit(o))) ? v : o"


def loop_function(d: Dialect, f: AtomicLoop) -> str:
    """The C definition of compare-and-swap loop function ``f``."""
    ft = d.type_name(f.elem)
    wide = f.elem is Scalar.F64
    if d.name == "cuda":
        it = "unsigned long long" if wide else "int"
        to_bits = "(unsigned long long)__double_as_longlong" if wide else "__float_as_int"
        from_bits = "__longlong_as_double((long long)" if wide else "__int_as_float("
        ptr_decl, cas = f"{ft}* p", "atomicCAS"
        ip = f"({it}*)p"
    else:
        it = "long" if wide else "int"
        to_bits = "as_long" if wide else "as_int"
        from_bits = "as_double(" if wide else "as_float("
        sp = _space(f.space or MemSpace.GLOBAL)
        ptr_decl = f"volatile {sp} {ft}* p"
        cas = "atom_cmpxchg" if wide else "atomic_cmpxchg"
        ip = f"(volatile {sp} {it}*)p"
    qual = (d.helper_qualifier + " ") if d.helper_qualifier else ""
    if f.op is AtomicOp.CAS:
        return (f"{qual}{ft} {f.name()}({ptr_decl}, {ft} expected, {ft} v) {{\n"
                f"  return {from_bits}{cas}({ip}, {to_bits}(expected), {to_bits}(v)));\n"
                "}\n")
    lines = [f"{qual}{ft} {f.name()}({ptr_decl}, {ft} v) {{"]
    if d.name == "cuda" and f.op is AtomicOp.ADD and wide:
        # sm_60 and later add doubles natively, correctly rounded, without flushing
        lines += ["#if __CUDA_ARCH__ >= 600", "  return atomicAdd(p, v);", "#else"]
    lines += [
        f"  {it} old = 0, assumed;",
        "  do {",
        "    assumed = old;",
        f"    const {ft} o = {from_bits}assumed);",
        f"    const {ft} n = {_new(f.op)};",
        f"    old = {cas}({ip}, assumed, {to_bits}(n));",
        "  } while (old != assumed);",
        f"  return {from_bits}old);",
    ]
    if d.name == "cuda" and f.op is AtomicOp.ADD and wide:
        lines.append("#endif")
    lines.append("}")
    return "\n".join(lines) + "\n"


def atomic_prelude(d: Dialect, loops: set[AtomicLoop], extensions: set[str]) -> list[str]:
    """The extension pragmas and loop functions used, one C chunk each."""
    out: list[str] = []
    for ext in (BASE64, EXTENDED64):
        if ext in extensions:
            out.append(f"#pragma OPENCL EXTENSION {ext} : enable\n")
    if loops:
        out.append("// atomics by compare-and-swap of the bit pattern, CG-30/CG-31: the "
                   "IR's operation,\n// computed exactly as the interpreter does\n")
        key = {op: k for k, op in enumerate(AtomicOp)}
        for f in sorted(loops, key=lambda x: (x.elem.value, key[x.op],
                                              x.space.value if x.space else "")):
            out.append(loop_function(d, f))
    return out


def missing_extensions(needed: tuple[tuple[str, str], ...], available: str
                       ) -> list[tuple[str, str]]:
    """The ``(extension, why)`` pairs of ``needed`` whose extension the device's
    extension string ``available`` lacks (CG-31)."""
    have = set(available.split())
    return [(ext, why) for ext, why in needed if ext not in have]


__all__ = ["AtomicC", "AtomicLoop", "atomic_c", "atomic_prelude", "loop_function",
           "missing_extensions"]
