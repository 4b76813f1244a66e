"""Where each corpus file comes from: (repository, path, commit) of the published original.

``tests/test_corpus.py`` checks that every ``.sk`` file's header names exactly these, so the
table in docs/corpus.md and the files cannot drift apart."""

from __future__ import annotations

#: file -> (repository, path, commit); None for the two consumers written for the corpus in
#: the idiom of the producer they follow (their headers say which)
SOURCES: dict[str, tuple[str, str, str] | None] = {
    "vectorAdd.sk": ("NVIDIA/cuda-samples", "Samples/0_Introduction/vectorAdd/vectorAdd.cu",
                     "ca37378cb454b74e3979fa7a14c110045d3c4437"),
    "biasRelu.sk": None,
    "matrixMul.sk": ("NVIDIA/cuda-samples", "Samples/0_Introduction/matrixMul/matrixMul.cu",
                     "f5cb14f3aa1aefa07059c287f0e875ada3ecde14"),
    "gelu_forward.sk": ("karpathy/llm.c", "dev/cuda/gelu_forward.cu",
                        "7300c7e8afd98513d2a2209991326192828dece8"),
    "residual_forward.sk": ("karpathy/llm.c", "dev/cuda/residual_forward.cu",
                            "c24ef4a4b47fb67e1bfddd18b9bd2c224de510ad"),
    "add_bias.sk": ("karpathy/llm.c", "dev/cuda/matmul_forward.cu",
                    "d6793645f5e7717105274ee587ebb462ff6fe194"),
    "matmul_forward.sk": ("karpathy/llm.c", "dev/cuda/matmul_forward.cu",
                          "d6793645f5e7717105274ee587ebb462ff6fe194"),
    "layernorm_forward.sk": ("karpathy/llm.c", "dev/cuda/layernorm_forward.cu",
                             "836ec640f39a9bf6148ee96fc1c5445f4abeeeb7"),
    "softmax_forward.sk": ("karpathy/llm.c", "dev/cuda/softmax_forward.cu",
                           "99fe39407629025c85ec19b1a3c8750c076a4a47"),
    "convolution2D.sk": ("cavazos-lab/PolyBench-ACC", "CUDA/2DCONV/2DConvolution.cu",
                         "96fc75d74df9f8163b755662f1a6c4a6f80dbd27"),
    "threshold2D.sk": None,
    "convolution3D.sk": ("cavazos-lab/PolyBench-ACC", "CUDA/3DCONV/3DConvolution.cu",
                         "96fc75d74df9f8163b755662f1a6c4a6f80dbd27"),
    "mm2.sk": ("cavazos-lab/PolyBench-ACC", "CUDA/2MM/2mm.cu",
               "96fc75d74df9f8163b755662f1a6c4a6f80dbd27"),
    "covariance.sk": ("cavazos-lab/PolyBench-ACC", "CUDA/COVAR/covariance.cu",
                      "96fc75d74df9f8163b755662f1a6c4a6f80dbd27"),
    "fdtd2d.sk": ("cavazos-lab/PolyBench-ACC", "CUDA/FDTD-2D/fdtd2d.cu",
                  "96fc75d74df9f8163b755662f1a6c4a6f80dbd27"),
    "jacobi2D.sk": ("cavazos-lab/PolyBench-ACC", "CUDA/JACOBI2D/jacobi2D.cu",
                    "96fc75d74df9f8163b755662f1a6c4a6f80dbd27"),
    "srad_extract.sk": ("JuliaParallel/rodinia", "cuda/srad/srad_v1/extract_kernel.cu",
                        "9419a2136901ba0d0337f01ffa27f700d5b8057b"),
    "srad.sk": ("JuliaParallel/rodinia", "cuda/srad/srad_v1/srad_kernel.cu",
                "b85d30edf5887a29c040b8d53de26542b59635dc"),
    "srad_v2.sk": ("JuliaParallel/rodinia", "cuda/srad/srad_v2/srad_kernel.cu",
                   "9419a2136901ba0d0337f01ffa27f700d5b8057b"),
    "hotspot.sk": ("JuliaParallel/rodinia", "cuda/hotspot/hotspot.cu",
                   "fb7c6d5dc258d1dfa52ae962a3ca9e3a9833aa37"),
    "sarek_fusion_chain.sk": ("mathiasbourgoin/SPOC", "sarek/tests/e2e/test_fusion_api.ml",
                              "15b51e70d911b37d23c64d9085bb91a593b3532e"),
}

#: a second original a file translates (srad.sk holds srad and srad2)
EXTRA_SOURCES: dict[str, tuple[str, str, str]] = {
    "srad.sk": ("THU-DSP-LAB/gpu-rodinia", "cuda/srad/srad_v1/srad2_kernel.cu",
                "55b0d5570c5fb6bac5c3165409175dc892d63a70"),
}
#: the kernels of a file that come from its EXTRA_SOURCES entry
EXTRA_KERNELS: dict[str, frozenset[str]] = {"srad.sk": frozenset({"srad2"})}


def short(file: str, kernel: str | None = None) -> str:
    """``repo path @commit7`` of a file's kernel, or the idiom it is written in."""
    src = EXTRA_SOURCES[file] if kernel in EXTRA_KERNELS.get(file, ()) else SOURCES[file]
    if src is None:
        return "written for the corpus (see header)"
    repo, path, commit = src
    return f"{repo} `{path}` @{commit[:7]}"


#: the constructs of published kernels that the kernel language cannot express: name ->
#: (what the original uses and what the language lacks, a probe: the construct written in
#: the kernel text as directly as it can be, which the parser must refuse --
#: tests/test_corpus.py::test_corpus_missing_constructs_are_refused)
CONSTRUCTS: dict[str, tuple[str, str]] = {
    "warp shuffle": (
        "`__shfl_down_sync` / `__shfl_sync` / `__shfl_xor_sync` (llm.c's warpReduceMax, "
        "warpReduceSum): a thread reads another lane's register; the language has no "
        "warp-level intrinsic -- threads exchange values only through shared memory and a "
        "barrier",
        "kernel k(x : f32[]) =\n  x[0] <- shfl_down_sync(x[0], 16)\n"),
    "cooperative groups": (
        "`cg::tiled_partition<32>(block)`, `cg::reduce(warp, v, op)`, "
        "`warp.meta_group_rank()`: the language has no thread-group values and no group "
        "reduction",
        "kernel k(x : f32[]) =\n  x[0] <- reduce(tiled_partition(32), x[0])\n"),
    "128-bit vectors": (
        "`x128` (16-byte vectors: `load128cs`, `store128cs`, `reinterpret_cast<x128*>` of an "
        "`extern __shared__ char` array): the language has no vector types and no "
        "reinterpreting casts",
        "kernel k(x : f32[])\n  shared params : f32x4[] =\n  x[0] <- 0.0f\n"),
}

_SOFTMAX = ("karpathy/llm.c", "dev/cuda/softmax_forward.cu",
            "99fe39407629025c85ec19b1a3c8750c076a4a47")
_LAYERNORM = ("karpathy/llm.c", "dev/cuda/layernorm_forward.cu",
              "836ec640f39a9bf6148ee96fc1c5445f4abeeeb7")

#: published kernels of the corpus's sources that are NOT translated: kernel -> (source,
#: the constructs of CONSTRUCTS it needs, where in the original). Every other kernel of
#: those files is in the corpus.
NOT_TRANSLATED: dict[str, tuple[tuple[str, str, str], tuple[str, ...], str]] = {
    "softmax_forward_kernel3": (_SOFTMAX, ("warp shuffle",),
                                "warpReduceMax/warpReduceSum, `__shfl_sync(.., maxval, 0)`"),
    "softmax_forward_kernel4": (_SOFTMAX, ("warp shuffle",),
                                "warpReduceMax/warpReduceSum before the shared-memory "
                                "reduction across warps"),
    "softmax_forward_online_kernel2": (_SOFTMAX, ("cooperative groups",),
                                       "`cg::reduce(warp, sm_partial, reduce_sum_max_op)` "
                                       "over a struct SumMax (the language has no structs "
                                       "either)"),
    "softmax_forward_kernel7": (_SOFTMAX, ("warp shuffle",),
                                "warpReduceMax/warpReduceSum (and `__ldcs`, a cache hint)"),
    "softmax_forward_online_kernel8": (_SOFTMAX, ("warp shuffle",),
                                       "`__shfl_down_sync` of maxval and sumval, "
                                       "`__shfl_sync`, `__syncwarp`"),
    "layernorm_forward_kernel3": (_LAYERNORM, ("cooperative groups",),
                                  "`cg::reduce(warp, sum, cg::plus<float>{})`, "
                                  "`warp.meta_group_rank()` (and `__stcs`/`__ldcs` hints)"),
    "layernorm_forward_kernel4": (_LAYERNORM, ("cooperative groups",),
                                  "`cg::reduce` of sum and sum2 over a warp"),
    "layernorm_forward_kernel5": (_LAYERNORM, ("cooperative groups",),
                                  "`cg::reduce` per warp, then again over the warps' "
                                  "partials read from `__shared__ float shared_sum[32]`"),
    "layernorm_forward_kernel6": (_LAYERNORM, ("128-bit vectors", "warp shuffle"),
                                  "`load128cs`/`store128cs` into `x128` tiles of a char "
                                  "dynamic shared array; `warpReduceSum`"),
}
