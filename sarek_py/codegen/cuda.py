"""The CUDA C dialect table (specs/codegen.md, CG-1, CG-2)."""

from __future__ import annotations

from sarek_py.codegen.dialect import Dialect, math_names, thread_table
from sarek_py.ir.types import Scalar

_math = math_names("f")
_math[("abs", Scalar.I32)] = "abs"
_math[("abs", Scalar.I64)] = "llabs"

#: the linear thread id of INT-1 (block after block, x fastest) for launches of 1 to 3
#: dimensions (LCH-27), in 64-bit arithmetic
_FLAT_FN = (
    "__device__ __forceinline__ long long sarek_flat_id() {",
    "  return ((long long)blockIdx.x + (long long)gridDim.x * ((long long)blockIdx.y",
    "      + (long long)gridDim.y * blockIdx.z)) * (long long)(blockDim.x * blockDim.y"
    " * blockDim.z)",
    "      + (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));",
    "}",
)
_FLAT = "sarek_flat_id()"

CUDA = Dialect(
    title="CUDA C",
    name="cuda",
    prelude=(),
    f64_prelude=(),
    kernel_qualifier='extern "C" __global__ void',
    helper_qualifier="__device__",
    global_pointer="",
    shared_qualifier="__shared__",
    shared_pointer="",
    dynamic_shared_decl=("extern __shared__ __align__(16) unsigned char {raw}[];",
                         "{elem}* {name} = ({elem}*){raw};"),
    local_pointer="",
    barrier="__syncthreads();",
    types={Scalar.I32: "int", Scalar.I64: "long long", Scalar.F32: "float",
           Scalar.F64: "double", Scalar.BOOL: "bool", Scalar.UNIT: "void"},
    unsigned={Scalar.I32: "unsigned int", Scalar.I64: "unsigned long long"},
    unsigned_suffix={Scalar.I32: "u", Scalar.I64: "ULL"},
    storage_bool="unsigned char",
    i64_suffix="LL",
    flat_id=_FLAT,
    thread={**thread_table("(int)threadIdx.{a}", "(int)blockIdx.{a}", "(int)blockDim.{a}",
                           "(int)gridDim.{a}",
                           "(int)(blockIdx.{a} * blockDim.{a} + threadIdx.{a})"),
            "global_thread_id": f"(int){_FLAT}"},
    math=_math,
    math_wrap={},
    f32_bits="__int_as_float({hex})",
    f64_bits="__longlong_as_double((long long){hex}ULL)",
    pragmas={"unroll": "#pragma unroll", "nounroll": "#pragma unroll 1"},
    atomic_cas="atomicCAS({ptr}, {old}, {new})",
    atomic_read="*(volatile int*){ptr}",
    support=_FLAT_FN,
    reinterpret={Scalar.F32: ("__float_as_int", "__int_as_float"),
                 Scalar.F64: ("__double_as_longlong", "__longlong_as_double")},
)
