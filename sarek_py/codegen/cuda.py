"""The CUDA C dialect table (specs/codegen.md, CG-1, CG-2)."""

from __future__ import annotations

from sarek_py.codegen.dialect import Dialect, math_names, thread_table
from sarek_py.ir.types import Scalar

_math = math_names("f")
_math[("abs", Scalar.I32)] = "abs"
_math[("abs", Scalar.I64)] = "llabs"

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
    local_pointer="",
    barrier="__syncthreads();",
    types={Scalar.I32: "int", Scalar.I64: "long long", Scalar.F32: "float",
           Scalar.F64: "double", Scalar.BOOL: "bool", Scalar.UNIT: "void"},
    unsigned={Scalar.I32: "unsigned int", Scalar.I64: "unsigned long long"},
    unsigned_suffix={Scalar.I32: "u", Scalar.I64: "ULL"},
    storage_bool="unsigned char",
    i64_suffix="LL",
    flat_id="(long long)blockIdx.x * blockDim.x + threadIdx.x",
    thread=thread_table("(int)threadIdx.{a}", "(int)blockIdx.{a}", "(int)blockDim.{a}",
                        "(int)gridDim.{a}", "(int)(blockIdx.{a} * blockDim.{a} + threadIdx.{a})"),
    math=_math,
    math_wrap={},
    f32_bits="__int_as_float({hex})",
    f64_bits="__longlong_as_double((long long){hex}ULL)",
    pragmas={"unroll": "#pragma unroll", "nounroll": "#pragma unroll 1"},
    atomic_cas="atomicCAS({ptr}, {old}, {new})",
    atomic_read="*(volatile int*){ptr}",
)
