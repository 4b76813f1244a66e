"""The differences between the C-family targets, as data (specs/codegen.md, CG-1).

A :class:`Dialect` holds everything that differs between CUDA C and OpenCL C: qualifiers,
thread indices, the barrier, type names, literal suffixes, math function names and
pragmas. :mod:`sarek_py.codegen.cstyle` is the one emitter; it reads only this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from sarek_py.codegen.rowsplit import RowRange
from sarek_py.ir.nodes import Kernel
from sarek_py.ir.types import Scalar


@attrs.frozen
class Dialect:
    """One C-family target.

    ``thread`` maps each thread intrinsic to a C expression of type ``int``; ``flat_id``
    is the 64-bit flat thread number (block after block). ``math`` maps
    ``(intrinsic, type)`` to a C function name; ``math_wrap`` optionally wraps the call
    (``"(int){}"`` where the target's result type differs, as OpenCL's ``abs``).
    ``unsigned`` names the unsigned type of each integer type's width: wrapping
    arithmetic is written through it (CG-18).
    """

    name: str
    title: str
    prelude: tuple[str, ...]
    f64_prelude: tuple[str, ...]
    kernel_qualifier: str
    helper_qualifier: str
    global_pointer: str  # qualifier of a global-memory pointer parameter
    shared_qualifier: str
    shared_pointer: str
    local_pointer: str
    barrier: str
    types: Mapping[Scalar, str]
    unsigned: Mapping[Scalar, str]  # the unsigned type of the same width as i32 and i64
    unsigned_suffix: Mapping[Scalar, str]  # literal suffix of that unsigned type
    storage_bool: str  # the type of bool elements in memory and of bool kernel arguments
    i64_suffix: str
    flat_id: str
    thread: Mapping[str, str]
    math: Mapping[tuple[str, Scalar], str]
    math_wrap: Mapping[tuple[str, Scalar], str]
    f32_bits: str  # a float of the given bits ("{hex}"): exact infinities and NaNs
    f64_bits: str
    pragmas: Mapping[str, str]  # first word of a pragma option -> C pragma text ("" = drop)
    #: an atomic compare-and-swap of the int at ``{ptr}`` returning the old value, and a
    #: read of it that is not a data race with that swap (CG-22)
    atomic_cas: str
    atomic_read: str
    #: C functions every unit holds after the prelude: ``sarek_flat_id()``, the linear
    #: thread id of INT-1 for launches of 1 to 3 dimensions (LCH-27)
    support: tuple[str, ...] = ()
    #: how the dynamic shared array (IR-50) reaches the kernel: True, a kernel parameter
    #: in the shared space that the launch binds to its size (OpenCL's ``__local T*``);
    #: False, CUDA's ``extern __shared__`` sized by the launch (CG-50)
    dynamic_shared_param: bool = False
    #: otherwise, the lines declaring it in the kernel (``{raw}``: the target's one
    #: launch-sized byte array, ``{elem}``: the element type, ``{name}``: the array)
    dynamic_shared_decl: tuple[str, ...] = ()
    #: per float type, the functions reading its bits as the integer of its width and
    #: back (``as_int``/``as_float``): float min/max settle equal operands with them (CG-40)
    reinterpret: Mapping[Scalar, tuple[str, str]] = attrs.field(factory=dict)
    #: a target without a thread grid (C + OpenMP, NAT-3): the kernel's body becomes the
    #: function of one thread, named with ``thread_suffix`` and taking ``thread_param``
    #: (what ``thread`` and ``flat_id`` read) last; ``driver(name, thread function,
    #: parameters, argument names, checks, row range)`` writes the exported function that
    #: runs the launch's threads; a row range (NAT-65) gives the thread function a
    #: ``bool sarek_edge`` before ``thread_param``, which the threads in it get false
    thread_param: str = ""
    thread_suffix: str = ""
    driver: Callable[[str, str, Sequence[str], Sequence[str], bool, RowRange | None],
                     str] | None = None
    #: the thread number the bounds checks record, where it is not ``flat_id`` (NAT-8)
    fault_thread: str = ""
    #: the qualifiers of a function the compiler keeps out of the hot path: where set, a
    #: bounds check records its fault in such a function (NAT-8)
    cold: str = ""
    #: integer ``/`` and ``%`` whose divisor may be 0 (or -1 with the least dividend) call
    #: ``sarek_div_i32``…, which give 0 there: a CPU traps on them (NAT-10)
    guard_division: bool = False
    #: why the target cannot run a kernel exactly (a sentence naming the construct), or
    #: None: the emitter refuses such a kernel with that sentence (NAT-4)
    refuse: Callable[[Kernel], str | None] | None = None
    #: an ``i32`` local bound once to an ``i64`` value that the ranges prove within
    #: ``i32`` is declared with the 64-bit type, holding the same value, so that a C
    #: compiler sees the accesses it indexes as consecutive (NAT-37)
    wide_exact_locals: bool = False
    #: a C expression every ``while`` loop also tests (``!sarek_cancel``): false once the
    #: launching process asks the kernel to end, on Ctrl-C (NAT-45); "" on the GPU targets
    while_guard: str = ""

    def type_name(self, t: Scalar) -> str:
        return self.types[t]


def _math_names(f32_suffix: str) -> dict[tuple[str, Scalar], str]:
    """Math function names shared by both targets, with a suffix for ``f32`` versions."""
    table: dict[tuple[str, Scalar], str] = {}
    for name in ("sqrt", "floor", "ceil", "exp", "log", "sin", "cos", "tan", "tanh", "pow"):
        table[(name, Scalar.F32)] = name + f32_suffix
        table[(name, Scalar.F64)] = name
    table[("abs", Scalar.F32)] = "fabs" + f32_suffix
    table[("abs", Scalar.F64)] = "fabs"
    table[("min", Scalar.F32)] = "fmin" + f32_suffix
    table[("min", Scalar.F64)] = "fmin"
    table[("max", Scalar.F32)] = "fmax" + f32_suffix
    table[("max", Scalar.F64)] = "fmax"
    for t in (Scalar.I32, Scalar.I64):
        table[("min", t)] = "min"
        table[("max", t)] = "max"
    return table


def thread_table(local: str, group: str, size: str, groups: str, glob: str) -> dict[str, str]:
    """The thread intrinsics as C, from the target's spelling of the five index kinds
    (each a format string taking the axis, as ``0``/``x``)."""
    table: dict[str, str] = {}
    for i, axis in enumerate(("x", "y", "z")):
        table[f"thread_idx_{axis}"] = local.format(n=i, a=axis)
        table[f"block_idx_{axis}"] = group.format(n=i, a=axis)
        table[f"block_dim_{axis}"] = size.format(n=i, a=axis)
        table[f"grid_dim_{axis}"] = groups.format(n=i, a=axis)
        table[f"global_idx_{axis}"] = glob.format(n=i, a=axis)
    table["global_thread_id"] = table["global_idx_x"]
    return table


def math_names(f32_suffix: str) -> dict[tuple[str, Scalar], str]:
    """Math function names shared by both targets (``f32`` versions take ``f32_suffix``)."""
    return _math_names(f32_suffix)
