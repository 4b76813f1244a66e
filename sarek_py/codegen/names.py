"""C names for IR variables: the kernel's own names, made unique and safe (CG-4).

A C function gets one :class:`Namer`. Every binding (parameter, local, ``let``, ``for``)
asks it for a name: the variable's own name when it is free and not reserved in C, CUDA
or OpenCL, else the name with a numeric suffix. Hidden arguments use the ``sarek_``
prefix, which user names never receive.
"""

from __future__ import annotations

import re

C_RESERVED = frozenset(
    """
    auto break case char const continue default do double else enum extern float for goto
    if inline int long register restrict return short signed sizeof static struct switch
    typedef union unsigned void volatile while bool true false half size_t ptrdiff_t
    uchar ushort uint ulong char2 int2 float2 float4 double2 kernel global local private
    constant __kernel __global __local __private __constant read_only write_only read_write
    image2d_t image3d_t sampler_t event_t new delete class template this operator namespace
    using virtual public protected friend typename explicit mutable asm
    threadIdx blockIdx blockDim gridDim warpSize
    get_global_id get_local_id get_group_id get_local_size get_num_groups get_global_size
    barrier mem_fence CLK_LOCAL_MEM_FENCE CLK_GLOBAL_MEM_FENCE
    sqrt sqrtf fabs fabsf abs llabs min max fmin fminf fmax fmaxf floor floorf ceil ceilf
    exp expf log logf sin sinf cos cosf tan tanf tanh tanhf pow powf
    as_float as_double INFINITY NAN main printf malloc free
    """.split()
) | frozenset(
    # OpenCL C and CUDA built-in functions a helper or kernel name would redeclare
    """
    clamp mix step smoothstep sign degrees radians cross dot distance length normalize
    fast_distance fast_length fast_normalize fract mad fma fmod hypot exp2 exp10 log2 log10
    log1p expm1 rsqrt cbrt erf erfc erfinv erfcinv lgamma tgamma ilogb logb ldexp frexp modf
    nan nextafter remainder remquo rint round trunc rootn pown powr sinh cosh asin acos atan
    atan2 asinh acosh atanh sinpi cospi tanpi asinpi acospi atanpi sincos sincospi maxmag
    minmag copysign fdim isnan isinf isfinite isnormal signbit isequal isnotequal
    isgreater isless select bitselect any all rotate popcount clz ctz upsample mul24 mad24
    abs_diff add_sat sub_sat hadd rhadd mad_hi mul_hi mad_sat shuffle shuffle2 vec_step
    prefetch wait_group_events async_work_group_copy work_group_barrier get_work_dim
    get_global_offset get_enqueued_local_size get_global_linear_id get_local_linear_id
    saturate norm rnorm norm3d norm4d rhypot rcbrt j0 j1 jn y0 y1 yn scalbn scalbln
    nearbyint lrint llrint lround llround exit assert atomicAdd atomicSub atomicExch
    atomicMin atomicMax atomicCAS atomic_add atomic_sub atomic_xchg atomic_min atomic_max
    atomic_cmpxchg atomic_inc atomic_dec mem_fence read_mem_fence write_mem_fence
    """.split()
)

#: what C11's <math.h> declares (with its f and l versions), which the C + OpenMP target
#: includes (NAT-1): a kernel, helper or variable of these names would clash with it
_C_MATH = """
    acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp
    ilogb ldexp log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf
    erfc lgamma tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod
    remainder remquo copysign nan nextafter nexttoward fdim fmax fmin fma
    """.split()
C_RESERVED = C_RESERVED | frozenset(
    n + suffix for n in _C_MATH for suffix in ("", "f", "l")) | frozenset(
    """
    fpclassify isgreaterequal islessequal islessgreater isunordered float_t double_t
    HUGE_VAL HUGE_VALF HUGE_VALL FP_NAN FP_INFINITE FP_ZERO FP_SUBNORMAL FP_NORMAL
    FP_ILOGB0 FP_ILOGBNAN MATH_ERRNO MATH_ERREXCEPT math_errhandling
    """.split())

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_reserved(name: str) -> bool:
    return (
        name in C_RESERVED
        or name.startswith("sarek_")
        or name.startswith("__")
        or "__" in name  # C reserves __ anywhere and _ with a capital (NAT-46)
        or (name[:1] == "_" and name[1:2].isupper())
        or name.startswith(("omp_", "GOMP_"))  # the OpenMP runtime's (NAT-1)
        or not _IDENT.match(name)
    )


class Namer:
    """Hands out distinct C identifiers within one C function."""

    def __init__(self, taken: frozenset[str] | set[str] = frozenset()) -> None:
        self.used: set[str] = set(taken)

    def fresh(self, base: str) -> str:
        """``base`` when it is free and safe, else ``base_2``, ``base_3`` …"""
        clean = re.sub(r"[^A-Za-z0-9_]", "_", base) or "v"
        if clean[0].isdigit():
            clean = "v" + clean
        if clean.startswith(("sarek_", "__", "omp_", "GOMP_")):  # reserved prefixes
            clean = "v" + clean.lstrip("_")
        clean = re.sub(r"__+", "_", clean)  # C reserves __ anywhere (NAT-46)
        if clean[0] == "_" and clean[1:2].isupper():  # and _ with a capital: _Bool
            clean = "v" + clean
        if clean not in self.used and not is_reserved(clean):
            self.used.add(clean)
            return clean
        # ``_`` gets ``_2`` (``__2`` would be reserved: the loop would never end)
        sep = "" if clean.endswith("_") else "_"
        n = 2
        while f"{clean}{sep}{n}" in self.used or is_reserved(f"{clean}{sep}{n}"):
            n += 1
        name = f"{clean}{sep}{n}"
        self.used.add(name)
        return name

    def hidden(self, name: str) -> str:
        """Reserve a hidden name (``sarek_`` prefix or an extent name) exactly as given."""
        if name in self.used:
            raise ValueError(f"C name {name} is taken")
        self.used.add(name)
        return name
