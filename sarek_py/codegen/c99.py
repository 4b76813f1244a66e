"""The C99 + OpenMP dialect: a barrier-free kernel as a C function for the CPU
(specs/native.md, NAT-1 … NAT-12).

The one emitter (:mod:`sarek_py.codegen.cstyle`) writes the kernel's body as a
``static inline`` function of one thread, ``saxpy_thread(…, sarek_ids sarek_id)``, whose
thread intrinsics read the ``sarek_id`` structure (``thread_idx_x`` is ``sarek_id.tx``).
The dialect's ``driver`` hook then writes the exported function, named after the kernel,
that a CUDA programmer would write for the CPU: the blocks of the launch in a
``#pragma omp parallel for`` loop, a block's threads an inner loop in the interpreter's
order (x fastest), each calling the thread function, which the compiler inlines::

    SAREK_LAUNCH
    void saxpy(float* x, …, long long sarek_threads, const int* sarek_shape) {
      #pragma omp parallel for schedule(static)
      for (long long sarek_b = 0; sarek_b < sarek_blocks; sarek_b++) {
        …  // the block's place, once per block
        for (int sarek_t = sarek_first; sarek_t < sarek_first + sarek_nx; sarek_t++) {
          …; saxpy_thread(x, x_len0, …, sarek_id);
        }
      }
    }

The innermost loop runs only the threads below the launch's count, its index the thread's
number as an ``int`` (NAT-31), so a guard ``if (i < n)`` splits it and the rest
vectorises; ``SAREK_LAUNCH`` compiles the launch for AVX2 too, where conditional stores
vectorise (NAT-32). In the unchecked build the row is a ``#pragma omp simd`` loop, each
thread with its own ``sarek_ids`` (NAT-36): without barriers, shared memory or atomics a
thread sees another's writes only through a race, so the lanes need no alias checks.

What cannot run exactly this way is refused before anything is emitted
(:func:`refusal`): a barrier (the threads of a block run one after the other), shared
memory, the dynamic shared array and atomics.
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable, Sequence

from sarek_py.codegen.dialect import Dialect, math_names
from sarek_py.codegen.rowsplit import RowRange
from sarek_py.ir.dynamic_shared import dynamic_shared
from sarek_py.ir.memo import IdentityCache
from sarek_py.ir.nodes import Atomic, Barrier, Kernel
from sarek_py.ir.types import ArrayType, MemSpace, Scalar
from sarek_py.ir.visit import iter_nodes

_math = math_names("f")
# the compilers' own abs: <stdlib.h>, which declares abs, would also take names such as
# div, rand and system from the kernels
_math[("abs", Scalar.I32)] = "__builtin_abs"
_math[("abs", Scalar.I64)] = "__builtin_llabs"
for _w in ("min", "max"):
    for _t in (Scalar.I32, Scalar.I64):
        _math[(_w, _t)] = f"sarek_{_w}_{_t.value}"

#: the thread's place in the launch, filled by the driver for each thread (NAT-3)
_IDS = "sarek_id"
_THREAD = {
    **{f"thread_idx_{a}": f"{_IDS}.t{a}" for a in "xyz"},
    **{f"block_idx_{a}": f"{_IDS}.b{a}" for a in "xyz"},
    **{f"block_dim_{a}": f"{_IDS}.bd{a}" for a in "xyz"},
    **{f"grid_dim_{a}": f"{_IDS}.gd{a}" for a in "xyz"},
    # computed unsigned as CUDA's unsigned registers do: the launch keeps it below 2^31
    **{f"global_idx_{a}": f"(int)((unsigned int){_IDS}.b{a} * (unsigned int){_IDS}.bd{a}"
                          f" + (unsigned int){_IDS}.t{a})" for a in "xyz"},
    "global_thread_id": f"(int){_IDS}.flat",
}

#: the thread a bounds fault is recorded for: the bounds-check functions are called from
#: helpers too, which do not see ``sarek_id``, so the launch points a thread-local pointer
#: at the running thread's ``sarek_ids`` once per block, and a fault reads it (NAT-8)
FAULT_THREAD = "sarek_running->flat"

_SUPPORT = (
    "#include <math.h>",
    "#include <stdbool.h>",
    "",
    "// where a thread is: its index in the block, its block, the block's and the grid's",
    "// extents, and its linear number (block after block, x fastest)",
    "typedef struct {",
    "  int tx, ty, tz, bx, by, bz, bdx, bdy, bdz, gdx, gdy, gdz;",
    "  long long flat;",
    "} sarek_ids;",
    "",
    "// the launch is compiled for AVX2 and for any x86-64, and the loader runs the one",
    "// this CPU has: the same operations, no contraction; AVX2's masked stores vectorise",
    "// loops that store under a condition (NAT-32)",
    "#if defined(__x86_64__) && defined(__linux__) && !defined(SAREK_NO_CLONES) \\",
    "    && defined(__has_attribute)",
    "#if __has_attribute(target_clones)",
    "#define SAREK_LAUNCH __attribute__((target_clones(\"avx2\", \"default\")))",
    "#endif",
    "#endif",
    "#ifndef SAREK_LAUNCH",
    "#define SAREK_LAUNCH",
    "#endif",
    "",
    "// set by the launching process when the user interrupts a launch (Ctrl-C): every",
    "// while loop tests it, so a kernel that would never end does (NAT-45)",
    "volatile int sarek_cancel;",
    "",
    "// the thread running on this OpenMP thread, whose bounds fault is recorded (set by",
    "// the launch of a kernel that checks its accesses, once per block)",
    "static _Thread_local const sarek_ids* sarek_running;",
    "",
    "// the bits of a float as an integer and back (exact infinities, NaNs, zeros)",
    "static inline float sarek_f32_bits(unsigned int b) {",
    "  float f;",
    "  __builtin_memcpy(&f, &b, sizeof f);",
    "  return f;",
    "}",
    "static inline double sarek_f64_bits(unsigned long long b) {",
    "  double f;",
    "  __builtin_memcpy(&f, &b, sizeof f);",
    "  return f;",
    "}",
    "static inline int sarek_as_i32(float f) {",
    "  int b;",
    "  __builtin_memcpy(&b, &f, sizeof b);",
    "  return b;",
    "}",
    "static inline float sarek_as_f32(int b) {",
    "  return sarek_f32_bits((unsigned int)b);",
    "}",
    "static inline long long sarek_as_i64(double f) {",
    "  long long b;",
    "  __builtin_memcpy(&b, &f, sizeof b);",
    "  return b;",
    "}",
    "static inline double sarek_as_f64(long long b) {",
    "  return sarek_f64_bits((unsigned long long)b);",
    "}",
    "",
    "// integer min and max",
    "static inline int sarek_min_i32(int a, int b) { return a < b ? a : b; }",
    "static inline int sarek_max_i32(int a, int b) { return a > b ? a : b; }",
    "static inline long long sarek_min_i64(long long a, long long b) { return a < b ? a : b; }",
    "static inline long long sarek_max_i64(long long a, long long b) { return a > b ? a : b; }",
)


def driver(kname: str, thread_fn: str, params: Sequence[str], names: Sequence[str],
           checks: bool, rows: RowRange | None = None) -> str:
    """The exported C function of kernel ``kname`` (NAT-3): the launch's blocks in a
    ``#pragma omp parallel for`` loop, each block's threads in the interpreter's order,
    calling the thread function ``thread_fn`` with the kernel's arguments ``names`` and
    the thread's :c:type:`sarek_ids`; ``checks``: the kernel records bounds faults, so the
    thread number is set for them first (NAT-8); ``rows``: the range of a row's threads
    that pass the kernel's leading guard, which run without it (NAT-65)."""
    head = f"void {kname}({', '.join([*params, 'const int* sarek_shape'])})"
    if len(head) > 100:
        head = (f"void {kname}(\n" + ",\n".join("    " + p for p in
                                                   [*params, "const int* sarek_shape"]) + ")")
    head = "SAREK_LAUNCH\n" + head  # NAT-32
    # NAT-36: the unchecked build's row of threads is a simd loop, each thread with its
    # own copy of its place (sarek_lane); the checked build records faults through
    # sarek_running, which points at the block's one copy, so its threads stay in order
    simd = not checks
    ids = "sarek_lane" if simd else "sarek_id"

    def call(edge: str | None = None) -> str:
        args = [*names, *([edge] if edge else []), ids]
        text = f"{thread_fn}({', '.join(args)});"
        if len(text) > 80:  # the arguments wrapped, as a C programmer would
            wrapped = textwrap.wrap(", ".join(args) + ");", 76,
                                    break_long_words=False, break_on_hyphens=False)
            text = f"{thread_fn}(\n" + "\n".join("              " + w for w in wrapped)
        return text

    if rows is not None and not simd:
        raise ValueError("a row range needs the unchecked build's simd rows (NAT-65)")
    fault = ["    sarek_running = &sarek_id;"] if checks else []
    # every local is a hidden sarek_ name: the kernel's parameters keep their own names
    lines = [
        "// the launch: sarek_shape holds the grid's and the block's extents, x y z;",
        "// the blocks run in parallel, a block's threads one after the other, x fastest;",
        "// the threads numbered from sarek_threads on do not run",
        head + " {",
        "  const long long sarek_blocks = (long long)sarek_shape[0] * sarek_shape[1]"
        " * sarek_shape[2];",
        "  const long long sarek_per_block = (long long)sarek_shape[3] * sarek_shape[4]"
        " * sarek_shape[5];",
        "  #pragma omp parallel for schedule(static)",
        "  for (long long sarek_b = 0; sarek_b < sarek_blocks; sarek_b++) {",
        "    sarek_ids sarek_id;",
        "    sarek_id.gdx = sarek_shape[0]; sarek_id.gdy = sarek_shape[1];"
        " sarek_id.gdz = sarek_shape[2];",
        "    sarek_id.bdx = sarek_shape[3]; sarek_id.bdy = sarek_shape[4];"
        " sarek_id.bdz = sarek_shape[5];",
        "    sarek_id.bx = (int)(sarek_b % sarek_id.gdx);",
        "    sarek_id.by = (int)(sarek_b / sarek_id.gdx % sarek_id.gdy);",
        "    sarek_id.bz = (int)(sarek_b / sarek_id.gdx / sarek_id.gdy);",
        *fault,
        "    // the number of the first thread of each row of the block (x fastest)",
        "    long long sarek_row = sarek_b * sarek_per_block;",
        "    for (int sarek_tz = 0; sarek_tz < sarek_id.bdz; sarek_tz++) {",
        "      for (int sarek_ty = 0; sarek_ty < sarek_id.bdy; sarek_ty++) {",
        "        // the row's threads below the launch's count",
        "        const long long sarek_left = sarek_threads - sarek_row;",
        "        const int sarek_nx = sarek_left <= 0 ? 0",
        "            : sarek_left < sarek_id.bdx ? (int)sarek_left : sarek_id.bdx;",
        "        // below the count, so below 2^31 (LCH-21): an int, as the loop's index",
        "        const int sarek_first = sarek_nx ? (int)sarek_row : 0;",
        "        sarek_id.ty = sarek_ty; sarek_id.tz = sarek_tz;",
        *(_split_row(call, rows) if rows is not None else _simd_row(call()) if simd else [
            "        for (int sarek_t = sarek_first; sarek_t < sarek_first + sarek_nx;"
            " sarek_t++) {",
            "          sarek_id.tx = sarek_t - sarek_first;",
            "          sarek_id.flat = sarek_t;",
            f"          {call()}",
            "        }"]),
        "        sarek_row += sarek_id.bdx;",
        "      }",
        "    }",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _simd_row(call: str, first: str = "0", end: str = "sarek_nx",
              declare: bool = True) -> list[str]:
    """The row of a block's threads (those from ``first`` below ``end``) as a ``#pragma
    omp simd`` loop (NAT-36): each thread (lane) with its own ``sarek_ids``, calling the
    thread function with it."""
    start = "sarek_first" if first == "0" else f"sarek_first + {first}"
    return [
        *([
            "        // the threads of a row side by side in vector lanes: in a kernel without",
            "        // barriers, shared memory or atomics, one thread sees another's writes",
            "        // only through a race (NAT-36); sarek_x and sarek_t count together",
        ] if declare else []),
        f"        {'int ' if declare else ''}sarek_t = {start};",
        "        #pragma omp simd linear(sarek_t)",
        f"        for (int sarek_x = {first}; sarek_x < {end}; sarek_x++) {{",
        "          sarek_ids sarek_lane = sarek_id;",
        "          sarek_lane.tx = sarek_x;",
        "          sarek_lane.flat = sarek_t;",
        f"          {call}",
        "          sarek_t++;",
        "        }",
    ]


def _split_row(call: Callable[[str | None], str], rows: RowRange) -> list[str]:
    """The row of a block's threads in three ``#pragma omp simd`` loops (NAT-65): the
    threads before the range that passes the kernel's leading guard and those after it
    test the guard (``sarek_edge`` true), the threads inside it run without it. The row
    range is computed once per row, in ``long long`` (where the ranges keep it), then
    clamped to the row: ``0 <= sarek_in <= sarek_out <= sarek_nx``."""
    lines = [
        "        // the threads x of the row with sarek_in <= x < sarek_out pass the kernel's",
        "        // leading guard: they run without it, the others test it (NAT-65)",
        "        sarek_id.tx = 0;  // the bounds read the row's first thread",
        "        sarek_id.flat = sarek_first;",
        "        long long sarek_lo = 0, sarek_hi = sarek_nx;",
        *(f"        sarek_lo = sarek_max_i64(sarek_lo, {b});" for b in rows.first),
        *(f"        sarek_hi = sarek_min_i64(sarek_hi, {b});" for b in rows.end),
        *(f"        if ({w}) sarek_hi = 0;" for w in rows.whole),
        "        const int sarek_out = sarek_hi < 0 ? 0 : (int)sarek_hi;",
        "        const int sarek_in = sarek_lo > sarek_out ? sarek_out : (int)sarek_lo;",
    ]
    return [
        *lines,
        *_simd_row(call("true"), "0", "sarek_in"),
        *_simd_row(call("false"), "sarek_in", "sarek_out", declare=False),
        *_simd_row(call("true"), "sarek_out", "sarek_nx", declare=False),
    ]


def refusal(kernel: Kernel) -> str | None:
    """Why the C backend cannot run ``kernel`` exactly, in one sentence naming the
    construct (NAT-4), or ``None`` when it can; found once per kernel object (every launch
    asks it: NAT-35)."""
    with _REFUSALS_LOCK:  # launches come from several Python threads (NAT-56)
        return _REFUSALS.get(kernel)


def _refusal(kernel: Kernel) -> str | None:
    where = "run it on opencl or interp"
    for n in iter_nodes(kernel.body):
        if isinstance(n, Barrier):
            return (f"kernel {kernel.name} has a barrier, which the c backend cannot run (a "
                    f"block's threads run one after the other): {where}")
    if dynamic_shared(kernel) is not None:
        return (f"kernel {kernel.name} has a dynamic shared array, which the c backend "
                f"cannot run: {where}")
    for v in kernel.locals:
        if isinstance(v.type, ArrayType) and v.type.space is MemSpace.SHARED:
            return (f"kernel {kernel.name} has the shared array {v.name}, which the c backend "
                    f"cannot run: {where}")
    bodies = [kernel.body, *(h.body for h in kernel.helpers)]
    for body in bodies:
        for n in iter_nodes(body):
            if isinstance(n, Atomic):
                return (f"kernel {kernel.name} has an atomic ({n.op.value}), which the c "
                        f"backend does not run: {where}")
    return None


_REFUSALS: IdentityCache[Kernel, str | None] = IdentityCache(_refusal)
_REFUSALS_LOCK = threading.Lock()

C99 = Dialect(
    title="C99 with OpenMP",
    name="c",
    prelude=(),
    f64_prelude=(),
    kernel_qualifier="static inline void",
    helper_qualifier="static inline",
    global_pointer="",
    shared_qualifier="",  # refused (NAT-4)
    shared_pointer="",
    local_pointer="",
    barrier="",  # refused (NAT-4)
    types={Scalar.I32: "int", Scalar.I64: "long long", Scalar.F32: "float",
           Scalar.F64: "double", Scalar.BOOL: "bool", Scalar.UNIT: "void"},
    unsigned={Scalar.I32: "unsigned int", Scalar.I64: "unsigned long long"},
    unsigned_suffix={Scalar.I32: "u", Scalar.I64: "ULL"},
    storage_bool="unsigned char",
    i64_suffix="LL",
    flat_id=f"{_IDS}.flat",
    thread=_THREAD,
    math=_math,
    math_wrap={},
    f32_bits="sarek_f32_bits({hex}u)",
    f64_bits="sarek_f64_bits({hex}ULL)",
    pragmas={"nounroll": "#pragma GCC unroll 1"},
    atomic_cas="__sync_val_compare_and_swap({ptr}, {old}, {new})",
    atomic_read="__atomic_load_n({ptr}, __ATOMIC_RELAXED)",
    support=_SUPPORT,
    reinterpret={Scalar.F32: ("sarek_as_i32", "sarek_as_f32"),
                 Scalar.F64: ("sarek_as_i64", "sarek_as_f64")},
    thread_param=f"sarek_ids {_IDS}",
    thread_suffix="_thread",
    fault_thread=FAULT_THREAD,
    cold="static __attribute__((cold, noinline))",
    guard_division=True,
    driver=driver,
    wide_exact_locals=True,
    refuse=refusal,
    while_guard="!sarek_cancel",
)
