"""The OpenCL C dialect table (specs/codegen.md, CG-1, CG-3)."""

from __future__ import annotations

from sarek_py.codegen.dialect import Dialect, math_names, thread_table
from sarek_py.ir.types import Scalar

_math = math_names("")
_math[("abs", Scalar.I32)] = "abs"
_math[("abs", Scalar.I64)] = "abs"

#: the linear thread id of INT-1 (block after block, x fastest) for launches of 1 to 3
#: dimensions (LCH-27); size_t arithmetic cannot wrap for the 2^31 - 1 threads at most
_FLAT_FN = (
    "long sarek_flat_id(void) {",
    "  return (long)((get_group_id(0) + get_num_groups(0) * (get_group_id(1)"
    " + get_num_groups(1) * get_group_id(2)))",
    "      * (get_local_size(0) * get_local_size(1) * get_local_size(2))",
    "      + get_local_id(0) + get_local_size(0) * (get_local_id(1)"
    " + get_local_size(1) * get_local_id(2)));",
    "}",
)
_FLAT = "sarek_flat_id()"

OPENCL = Dialect(
    title="OpenCL C",
    name="opencl",
    prelude=("#pragma OPENCL FP_CONTRACT OFF",),
    f64_prelude=("#pragma OPENCL EXTENSION cl_khr_fp64 : enable",),
    kernel_qualifier="__kernel void",
    helper_qualifier="",
    global_pointer="__global",
    shared_qualifier="__local",
    shared_pointer="__local",
    dynamic_shared_param=True,
    # NAT-37's 64-bit locals: PoCL vectorises a rows kernel's consecutive reads through a
    # 64-bit index, not through its truncation to int under the row's guard (CG-76)
    wide_exact_locals=True,
    local_pointer="__private",
    barrier="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    types={Scalar.I32: "int", Scalar.I64: "long", Scalar.F32: "float",
           Scalar.F64: "double", Scalar.BOOL: "bool", Scalar.UNIT: "void"},
    unsigned={Scalar.I32: "uint", Scalar.I64: "ulong"},
    unsigned_suffix={Scalar.I32: "u", Scalar.I64: "UL"},
    storage_bool="uchar",
    i64_suffix="L",
    flat_id=_FLAT,
    thread={**thread_table("(int)get_local_id({n})", "(int)get_group_id({n})",
                           "(int)get_local_size({n})", "(int)get_num_groups({n})",
                           "(int)get_global_id({n})"),
            "global_thread_id": f"(int){_FLAT}"},
    math=_math,
    # OpenCL's integer abs returns an unsigned type: convert back to the IR's signed type
    math_wrap={("abs", Scalar.I32): "(int){}", ("abs", Scalar.I64): "(long){}"},
    f32_bits="as_float((uint){hex}u)",
    f64_bits="as_double((ulong){hex}UL)",
    pragmas={"unroll": "#pragma unroll", "nounroll": "#pragma nounroll"},
    atomic_cas="atomic_cmpxchg({ptr}, {old}, {new})",
    atomic_read="atomic_or({ptr}, 0)",  # OpenCL 1.2 has no atomic load
    support=_FLAT_FN,
    reinterpret={Scalar.F32: ("as_int", "as_float"), Scalar.F64: ("as_long", "as_double")},
)

#: build options: correctly rounded f32 division and sqrt (OpenCL otherwise allows 2.5 and
#: 3 ulp), no contraction and no fast-math options (CG-3)
BUILD_OPTIONS: tuple[str, ...] = ("-cl-fp32-correctly-rounded-divide-sqrt",)
