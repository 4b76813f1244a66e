"""Bounds-checked device accesses (specs/codegen.md, CG-22 … CG-24).

A CPU OpenCL device (PoCL) shares the process's memory: an unguarded ``y[i]`` past the end
of ``y`` corrupts the Python heap. So by default every array access the range analysis
cannot prove in bounds goes through a small C function:

* a read ``a[i, j]`` is ``(sarek_in2(sarek_oob, SITE, i, a_len0, j, a_len1) ? a[…] : 0)``:
  nothing is read out of bounds; only where the index calls a helper that stores (so it
  must be computed once) it is ``a[sarek_at2(…)]``: the row-major offset, or element 0
  out of bounds (in the buffer: an empty array's buffer still has 8 bytes);
* a store is ``if (sarek_in2(sarek_oob, SITE, i, a_len0, j, a_len1)) { a[…] = v; }``: it
  touches no memory out of bounds (its value is computed first, as the interpreter does);
* for a global array both are written through two macros that expand to exactly that,
  ``sarek_get2(a, SITE, i, a_len0, j, a_len1)`` and ``sarek_set2(a, SITE, …, v);``
  (CG-28), so the access reads as one call;
* a ``while`` loop (without a barrier) also ends once a fault is recorded, so values read
  out of bounds cannot keep it running.

An access out of bounds records, in the hidden ``sarek_oob`` buffer of the launch, the
first fault's *site* (a number naming the array, the access kind and the source location,
:class:`AccessSite`), the thread and every index with its extent. The runtime reads the
buffer after the launch and raises the interpreter's error (kernel, thread, array, index,
bounds). Site numbers are the position in the kernel's table plus one; a helper gets the
position of its first site as a hidden ``sarek_site`` argument, so its C does not depend
on the kernel calling it (one translation unit, CG-16).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import attrs

from sarek_py.codegen.dialect import Dialect
from sarek_py.ir.nodes import Loc
from sarek_py.ir.types import MemSpace, Scalar

#: words of the fault record before the per-dimension entries: site, thread (low, high)
HEADER_WORDS = 3
#: words per dimension: index (low, high), extent
DIM_WORDS = 3

OOB = "sarek_oob"
SITE = "sarek_site"


@attrs.frozen
class AccessSite:
    """One checked access: the array's name where the access is written (a helper's own
    parameter inside a helper), ``read`` or ``store``, the array's memory space and lower
    bounds, the innermost helper holding it (``None`` in the kernel) and its location."""

    array: str
    kind: str
    space: MemSpace
    lower: tuple[int, ...]
    helper: str | None = None
    loc: Loc | None = attrs.field(default=None, eq=False)

    def describe(self) -> str:
        space = "" if self.space is MemSpace.GLOBAL else f"{self.space} "
        return f"{space}array '{self.array}'"


def fault_words(sites: tuple[AccessSite, ...]) -> int:
    """The ``int`` words of a fault buffer for these sites."""
    rank = max((len(s.lower) for s in sites), default=0)
    return HEADER_WORDS + DIM_WORDS * rank


def in_name(rank: int) -> str:
    return f"sarek_in{rank}"


def at_name(rank: int) -> str:
    return f"sarek_at{rank}"


def in_function(d: Dialect, rank: int) -> str:
    """The C of ``sarek_in<rank>``: whether every index lies in its extent; records the
    launch's first fault when not. Where the dialect has a ``cold`` qualifier (NAT-8) the
    recording is a function of its own, ``sarek_fault<rank>``, out of the hot path."""
    qual = (d.helper_qualifier + " ") if d.helper_qualifier else ""
    long_, ulong = d.type_name(Scalar.I64), d.unsigned[Scalar.I64]
    ptr = f"{d.global_pointer} int*".strip()
    dims = range(rank)
    params = ", ".join(f"{long_} i{k}, {long_} n{k}" for k in dims)
    test = " && ".join(f"({ulong})i{k} < ({ulong})n{k}" for k in dims)
    record = [
        f"  if ({d.atomic_cas.format(ptr='oob', old='0', new='site')} == 0) {{",
        f"    const {long_} t = {d.fault_thread or d.flat_id};",
        "    oob[1] = (int)t;",
        "    oob[2] = (int)(t >> 32);",
    ]
    for k in dims:
        w = HEADER_WORDS + DIM_WORDS * k
        record += [f"    oob[{w}] = (int)i{k};", f"    oob[{w + 1}] = (int)(i{k} >> 32);",
                   f"    oob[{w + 2}] = (int)n{k};"]
    record.append("  }")
    head = f"{qual}bool {in_name(rank)}({ptr} oob, int site, {params}) {{"
    if not d.cold:
        lines = [head, f"  if ({test}) return true;", *record, "  return false;", "}"]
        return "\n".join(lines) + "\n"
    names = ", ".join(f"i{k}, n{k}" for k in dims)
    lines = [d.cold, f"void sarek_fault{rank}({ptr} oob, int site, {params}) {{", *record,
             "}", "", head, f"  if (__builtin_expect({test}, 1)) return true;",
             f"  sarek_fault{rank}(oob, site, {names});", "  return false;", "}"]
    return "\n".join(lines) + "\n"


def at_function(d: Dialect, rank: int) -> str:
    """The C of ``sarek_at<rank>``: the row-major offset, or 0 out of bounds (for a read
    whose index calls a helper that stores, so it is computed once)."""
    qual = (d.helper_qualifier + " ") if d.helper_qualifier else ""
    long_ = d.type_name(Scalar.I64)
    ptr = f"{d.global_pointer} int*".strip()
    dims = range(rank)
    params = ", ".join(f"{long_} i{k}, {long_} n{k}" for k in dims)
    names = ", ".join(f"i{k}, n{k}" for k in dims)
    offset = "i0"
    for k in range(1, rank):
        offset = f"({offset}) * n{k} + i{k}" if k > 1 else f"i0 * n{k} + i{k}"
    return (f"{qual}{long_} {at_name(rank)}({ptr} oob, int site, {params}) {{\n"
            f"  return {in_name(rank)}(oob, site, {names}) ? {offset} : 0;\n}}\n")


def get_name(rank: int) -> str:
    return f"sarek_get{rank}"


def set_name(rank: int) -> str:
    return f"sarek_set{rank}"


def _global_offset(d: Dialect, rank: int) -> str:
    """The row-major offset of a global array's element from the macro's parameters, the
    first factor in 64 bits (CG-6)."""
    offset = "(i0)" if rank == 1 else f"({d.type_name(Scalar.I64)})(i0)"
    for k in range(1, rank):
        offset = f"{offset} * (n{k}) + (i{k})" if k == 1 else f"({offset}) * (n{k}) + (i{k})"
    return offset


def get_macro(d: Dialect, rank: int) -> str:
    """``sarek_get<rank>(a, site, i0, n0, …)``: a checked read of a global array, the
    element or 0 out of bounds (CG-28); exactly CG-22's conditional, written once."""
    dims = ", ".join(f"i{k}, n{k}" for k in range(rank))
    return (f"#define {get_name(rank)}(a, site, {dims}) \\\n"
            f"  ({in_name(rank)}({OOB}, site, {dims}) ? (a)[{_global_offset(d, rank)}] : 0)\n")


def set_macro(d: Dialect, rank: int) -> str:
    """``sarek_set<rank>(a, site, i0, n0, …, v);``: a checked store into a global array,
    nothing stored out of bounds (CG-28); exactly CG-22's ``if``, written once."""
    dims = ", ".join(f"i{k}, n{k}" for k in range(rank))
    return (f"#define {set_name(rank)}(a, site, {dims}, v) \\\n"
            f"  do {{ if ({in_name(rank)}({OOB}, site, {dims})) "
            f"(a)[{_global_offset(d, rank)}] = (v); }} while (0)\n")


def check_prelude(d: Dialect, in_ranks: AbstractSet[int], at_ranks: AbstractSet[int],
                  get_ranks: AbstractSet[int] = frozenset(),
                  set_ranks: AbstractSet[int] = frozenset()) -> list[str]:
    """The check functions used, one C chunk each (lowest rank first), after a comment
    saying what they do, then the read and store macros used (CG-28)."""
    if not in_ranks and not at_ranks:
        return []
    head = ("// bounds checks, CG-22: an access out of bounds stores nothing and reads nothing"
            "\n// (sarek_at: element 0); the first one of a launch records its site, thread "
            "and\n// indices in sarek_oob; sarek_get/sarek_set read/store a global array's "
            "element\n// under that check\n")
    return [head, *(in_function(d, r) for r in sorted(in_ranks | at_ranks)),
            *(at_function(d, r) for r in sorted(at_ranks)),
            *(get_macro(d, r) for r in sorted(get_ranks)),
            *(set_macro(d, r) for r in sorted(set_ranks))]
